"""`gfs-opt data …`: download public traces too large to ship with the package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_DEST = Path("data")


def register(sub: argparse._SubParsersAction) -> None:
    from gfs_opt.fetch import DATASETS

    p = sub.add_parser("data", help="download public traces (verified, resumable)")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    dsub.required = True

    f = dsub.add_parser(
        "fetch", help="download a dataset into a trace folder usable with --trace",
        description="Downloads the file, verifies its pinned sha256 and writes it atomically; "
                    "an interrupted download resumes when the command is run again. "
                    + " ".join(f"{d.name}: {d.about}." for d in DATASETS.values()))
    f.add_argument("dataset", choices=list(DATASETS), metavar="DATASET",
                   help=f"one of: {', '.join(DATASETS)}")
    f.add_argument("--dest", type=Path, default=None, metavar="DIR",
                   help=f"folder to write (default {DEFAULT_DEST}/DATASET)")
    f.add_argument("--url", default=None, help="download from this mirror instead of upstream")
    f.add_argument("--sha256", default=None, metavar="HEX",
                   help="expected sha256 of the file at --url (default: the pinned upstream one)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(handler=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    from gfs_opt.fetch import fetch

    dest = args.dest if args.dest is not None else DEFAULT_DEST / args.dataset
    res = fetch(args.dataset, dest, url=args.url, sha256=args.sha256,
                progress=not args.no_progress and sys.stderr.isatty())
    for note in res.notes:
        print(note)
    if res.already_present:
        print(f"{res.path}: already present, sha256 ok")
    else:
        resumed = f" (resumed after {res.resumed_from:,} bytes)" if res.resumed_from else ""
        print(f"wrote {res.path}: {res.downloaded:,} bytes downloaded{resumed}, sha256 ok")
    print(f"use it with: --trace {dest}")
    return 0
