"""``python -m repeval_ref.studies run STUDY --budget full|small --out DIR``."""

from __future__ import annotations

import argparse
import sys

from . import STUDIES
from ._runner import write_study


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m repeval_ref.studies")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one study and write its JSON record")
    run.add_argument("study", choices=STUDIES + ("all",))
    run.add_argument("--budget", choices=("full", "small"), default="full")
    run.add_argument("--out", required=True, help="directory of the JSON records")
    args = parser.parse_args(argv)
    names = STUDIES if args.study == "all" else (args.study,)
    for name in names:
        path = write_study(name, args.budget, args.out, log=print)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
