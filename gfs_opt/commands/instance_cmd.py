"""`gfs-opt instance …`: validate instance files, summarise one, print the JSON Schema."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("instance", help="check and describe instance files (one scheduling round)")
    isub = p.add_subparsers(dest="instance_command", metavar="ACTION")
    isub.required = True

    v = isub.add_parser("validate", help="check files; one line per problem, exit 2 if any is invalid")
    v.add_argument("files", nargs="+", type=Path, metavar="FILE")
    v.set_defaults(handler=_validate)

    s = isub.add_parser("show", help="summary of one file: pools, GPUs in use, queues")
    s.add_argument("file", type=Path, metavar="FILE")
    s.set_defaults(handler=_show)

    sc = isub.add_parser("schema", help="print the JSON Schema (draft 2020-12) of the format")
    sc.set_defaults(handler=_schema)


def _validate(args: argparse.Namespace) -> int:
    from gfs_opt.instance import validate_file

    bad = 0
    for path in args.files:
        problems = validate_file(path)
        if problems:
            bad += 1
            for line in problems:
                print(f"{path}: {line}")
        else:
            print(f"{path}: ok")
    if bad and len(args.files) > 1:
        print(f"{bad} of {len(args.files)} files invalid", file=sys.stderr)
    return 2 if bad else 0


def _show(args: argparse.Namespace) -> int:
    from gfs_opt.instance import load_instance
    from gfs_opt.instance_summary import format_summary, summarise

    inst = load_instance(args.file)
    print(format_summary(summarise(inst.round), title=f"{args.file}  (time {inst.round.time:g} s)",
                         meta=inst.meta))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from gfs_opt.instance_schema import json_schema_text

    sys.stdout.write(json_schema_text())
    return 0
