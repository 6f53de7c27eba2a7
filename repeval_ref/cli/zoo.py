"""``python -m repeval_ref.zoo train [--only NAME] [--skip-eval]`` and ``python -m repeval_ref.zoo table``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None):
    from .registry import ENCODERS

    parser = argparse.ArgumentParser(prog="python -m repeval_ref.zoo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train the zoo's encoders (deterministic, one thread)")
    tr.add_argument("--only", action="append", choices=sorted(ENCODERS), metavar="NAME",
                    help=f"train only this encoder (repeatable); one of {', '.join(sorted(ENCODERS))}")
    tr.add_argument("--skip-eval", action="store_true", help="do not compute the manifest's accuracies")
    ev = sub.add_parser("evaluate", help="(re)compute the manifest's accuracies of shipped weights")
    ev.add_argument("--only", action="append", choices=sorted(ENCODERS), metavar="NAME")
    tb = sub.add_parser("table", help="write benchmarks/results/zoo_table.json and .md")
    tb.add_argument("--out", default="benchmarks/results/zoo_table.json")
    tb.add_argument("--only", action="append", metavar="ROW",
                    help="compute only this row (repeatable): raw_pixels, a zoo encoder or efficientnet_lite0")
    tb.add_argument("--merge", action="store_true", help="keep the other rows already in --out")
    args = parser.parse_args(argv)
    from .train import deterministic_torch

    deterministic_torch()  # one thread: the manifest's numbers are reproduced at one thread
    if args.command == "train":
        from .build import train_and_save

        names = args.only or list(ENCODERS)
        for name in names:
            entry = train_and_save(name)
            print(f"{name}: {entry['training']['seconds']} s, final loss "
                  f"{(entry['training']['loss_per_epoch'] or [float('nan')])[-1]}", flush=True)
            if not args.skip_eval:
                from .evaluate import record_evaluation

                print(record_evaluation(name), flush=True)
    elif args.command == "evaluate":
        from .evaluate import record_evaluation

        for name in args.only or list(ENCODERS):
            print(record_evaluation(name), flush=True)
    else:
        from .table import write_table

        write_table(args.out, args.only, merge=args.merge)
    return 0


if __name__ == "__main__":
    sys.exit(main())
