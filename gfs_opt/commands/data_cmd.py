"""`gfs-opt data …`: the optional traces too large or too foreign to ship, fetched and verified."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from gfs_opt.fetch import DATASETS

    p = sub.add_parser("data", help="list and download the optional traces (verified, resumable)")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    dsub.required = True

    f = dsub.add_parser(
        "fetch", help="download a dataset into a trace folder usable with --trace",
        description="Downloads each file of the dataset, verifies its pinned sha256 and writes it "
                    "atomically; an interrupted download resumes when the command is run again. "
                    "By default the folder is DATA/DATASET, DATA being the data folder "
                    "($GFS_DATA_DIR, else a per-user folder: `gfs-opt data list` shows it), where "
                    "the tests, benchmarks and the built-in name ref-toy look. "
                    + " ".join(f"{d.name}: {d.about}." for d in DATASETS.values()))
    f.add_argument("dataset", choices=list(DATASETS), metavar="DATASET",
                   help=f"one of: {', '.join(DATASETS)}")
    f.add_argument("--dest", type=Path, default=None, metavar="DIR",
                   help="folder to write (default: DATASET's folder in the data folder)")
    f.add_argument("--url", default=None,
                   help="a mirror instead of the upstream (http://, https:// or file://): each "
                        "file is read from URL/<file name> (a one-file dataset: from URL itself "
                        "unless it ends in /), and checked against its pinned sha256")
    f.add_argument("--sha256", default=None, metavar="HEX",
                   help="one-file datasets: expected sha256 of the file at --url (default: the "
                        "pinned one)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(handler=_fetch)

    ls = dsub.add_parser("list", help="every dataset: files, size, source, licence, and whether "
                                      "it is in the data folder")
    ls.set_defaults(handler=_list)


def _fetch(args: argparse.Namespace) -> int:
    from gfs_opt.fetch import fetch

    res = fetch(args.dataset, args.dest, url=args.url, sha256=args.sha256,
                progress=not args.no_progress and sys.stderr.isatty())
    for note in res.notes:
        print(note)
    for f in res.files:
        if f.already_present:
            print(f"{f.path}: already present, sha256 ok")
        else:
            resumed = f" (resumed after {f.resumed_from:,} bytes)" if f.resumed_from else ""
            print(f"wrote {f.path}: {f.downloaded:,} bytes{resumed}, sha256 ok")
    print(f"use it with: --trace {res.dest}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from gfs_opt.fetch import DATASETS, default_dest
    from gfs_opt.paths import data_dir

    print(f"data folder: {data_dir()}  ($GFS_DATA_DIR to move it)")
    for ds in DATASETS.values():
        dest = default_dest(ds.name)
        have = all((dest / f.file_name).is_file() for f in ds.files)
        print(f"\n{ds.name}  ({ds.size / 1e6:.1f} MB; {'in' if have else 'not in'} {dest})")
        print(f"  {ds.about}")
        print(f"  source:  {ds.source}")
        print(f"  licence: {ds.licence}")
        for f in ds.files:
            print(f"  {f.file_name}  {f.size:,} bytes  sha256 {f.sha256}")
    return 0
