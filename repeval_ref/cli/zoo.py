"""``repeval zoo`` (also ``python -m repeval_ref.zoo``): train the zoo, evaluate it, write its
table.

Book: the Performance appendix (the zoo). ``repeval zoo ARGS`` and ``python -m
repeval_ref.zoo ARGS`` take the same arguments and run the same code; only the program
name in the usage and error lines differs. Subcommands:

* ``train [--only NAME] [--skip-eval] [--device DEV --epochs-scale K --weights-dir DIR]``:
  the only place the zoo is trained (:func:`repeval_ref.zoo.build.train_and_save`). By
  default on the CPU, with the registered recipes, into the shipped weights. A GPU run
  (``make zoo DEVICE=cuda``) names the device, multiplies every recipe's epochs by ``K``
  and writes into ``DIR`` (weights and a manifest of their own that records the device),
  so the shipped CPU weights stay the default; evaluating such a folder is left to the
  user (the manifest's accuracies are computed only for the shipped weights);
* ``evaluate --out PATH [--only NAME]``: the manifest's accuracies of the shipped
  weights, recomputed (:func:`repeval_ref.zoo.evaluate.evaluate_encoder`) and written
  as JSON at ``PATH``; the installed package, its manifest included, is left as it is;
* ``table --out PATH [--only ROW] [--merge]``: the evaluation table of the Performance
  appendix (:func:`repeval_ref.zoo.table.write_table`), written where ``--out`` says
  (``make zoo-table`` passes ``benchmarks/results/zoo_table.json``);
* ``plateau --runs DIR [--only NAME] [--time-limit SECONDS]``: the plateau zoo's long,
  resumable run: a recipe search on a validation split of the training
  images, then the training of the chosen recipe, per planned encoder
  (:func:`repeval_ref.zoo.plateau.run_plateau`); a rerun resumes, ``DIR/status.json``
  says where it stands. Exit status 1 when an encoder failed;
* ``ship --runs DIR [--only NAME] [--skip-eval]``: the finished encoders of a plateau
  run become the shipped weights, their search, curves and times go into the manifest
  (:func:`repeval_ref.zoo.ship.ship_plateau`), then their accuracies are recorded.
"""

from __future__ import annotations

import argparse
import os
import sys

from ._arguments import check_prog

PROG = "python -m repeval_ref.zoo"
DESCRIPTION = (
    "``{prog} train [--only NAME] [--skip-eval]``, ``{prog} evaluate --out PATH``, ``{prog} "
    "table``, ``{prog} plateau --runs DIR`` and ``{prog} ship --runs DIR``."
)


def main(argv=None, prog=PROG):
    """Run the zoo program on ``argv`` (default ``sys.argv[1:]``) and return its exit status.

    ``prog`` names the program in the usage and error lines: ``python -m repeval_ref.zoo``
    (default) or ``repeval zoo``. A bad command line exits with status 2 (argparse);
    ``plateau`` returns 1 when an encoder failed, every other run 0.
    """
    check_prog(prog)
    from ..zoo.registry import ENCODERS

    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION.format(prog=prog))
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train the zoo's encoders (deterministic, one thread)")
    tr.add_argument(
        "--only",
        action="append",
        choices=sorted(ENCODERS),
        metavar="NAME",
        help=f"train only this encoder (repeatable); one of {', '.join(sorted(ENCODERS))}",
    )
    tr.add_argument(
        "--skip-eval", action="store_true", help="do not compute the manifest's accuracies"
    )
    tr.add_argument(
        "--device",
        default="cpu",
        metavar="DEV",
        help="where to train: cpu (default, deterministic) or cuda (a GPU; needs --weights-dir)",
    )
    tr.add_argument(
        "--epochs-scale",
        type=int,
        default=1,
        metavar="K",
        help="multiply every recipe's epochs by K (default 1: the recipes as shipped)",
    )
    tr.add_argument(
        "--weights-dir",
        default=None,
        metavar="DIR",
        help=(
            "write weights and manifest into DIR instead of the shipped weights (skips the "
            "evaluation)"
        ),
    )
    ev = sub.add_parser(
        "evaluate", help="recompute the manifest's accuracies of the shipped weights into --out"
    )
    ev.add_argument(
        "--out",
        required=True,
        metavar="PATH",
        help="the JSON file to write (the installed package is never written)",
    )
    ev.add_argument("--only", action="append", choices=sorted(ENCODERS), metavar="NAME")
    tb = sub.add_parser(
        "table", help="write the evaluation table as JSON at --out and as Markdown beside it"
    )
    tb.add_argument(
        "--out",
        required=True,
        metavar="PATH",
        help=(
            "the JSON file to write, e.g. benchmarks/results/zoo_table.json (the .md goes beside "
            "it)"
        ),
    )
    tb.add_argument(
        "--only",
        action="append",
        metavar="ROW",
        help="compute only this row (repeatable): raw_pixels, a zoo encoder or efficientnet_lite0",
    )
    tb.add_argument("--merge", action="store_true", help="keep the other rows already in --out")
    _add_plateau(sub)
    sp = sub.add_parser(
        "ship", help="ship the finished encoders of a plateau run (weights and manifest)"
    )
    sp.add_argument("--runs", required=True, metavar="DIR", help="the plateau run directory")
    sp.add_argument(
        "--only",
        action="append",
        choices=sorted(ENCODERS),
        metavar="NAME",
        help="ship only this encoder (repeatable; default: every finished one)",
    )
    sp.add_argument(
        "--skip-eval", action="store_true", help="do not compute the manifest's accuracies"
    )
    args = parser.parse_args(argv)
    if args.command == "train":
        if args.epochs_scale < 1:
            parser.error(f"--epochs-scale must be an integer >= 1, got {args.epochs_scale}")
        from ..zoo.train import resolve_device

        try:
            device = resolve_device(args.device)
        except ValueError as exc:
            parser.error(f"--device: {exc}")
        if (device.type != "cpu" or args.epochs_scale != 1) and args.weights_dir is None:
            parser.error(
                "a run on another device or with other epochs needs --weights-dir: the shipped "
                "weights are the CPU run of the registered recipes"
            )
    if args.command == "evaluate" and os.path.isdir(args.out):
        parser.error(f"--out {args.out} is a folder; give the JSON file to write")
    from ..zoo.train import deterministic_torch

    deterministic_torch()  # one thread: the manifest's numbers are reproduced at one thread
    if args.command == "train":
        from ..zoo.build import train_and_save

        names = args.only or list(ENCODERS)
        where = {}
        if args.weights_dir is not None:
            where = {
                "weights_dir": args.weights_dir,
                "manifest_path": os.path.join(args.weights_dir, "manifest.json"),
            }
        for name in names:
            entry = train_and_save(name, device=device, epochs_scale=args.epochs_scale, **where)
            print(
                f"{name}: {entry['training']['seconds']} s on {entry['training']['device']}, "
                f"final loss {(entry['training']['loss_per_epoch'] or [float('nan')])[-1]}",
                flush=True,
            )
            if not args.skip_eval and args.weights_dir is None:
                from ..zoo.evaluate import record_evaluation

                print(record_evaluation(name), flush=True)
    elif args.command == "evaluate":
        _evaluate(args.out, args.only or list(ENCODERS))
    elif args.command == "plateau":
        from ..zoo.plateau import run_plateau

        status = run_plateau(args.runs, names=args.only, time_limit=args.time_limit)
        print(f"plateau run {status['state']}", flush=True)
        return 1 if status["state"] == "failed" else 0
    elif args.command == "ship":
        from ..zoo.ship import ship_plateau

        for name, entry in ship_plateau(args.runs, args.only).items():
            print(
                f"{name}: shipped {len(entry['checkpoints'])} checkpoints, trained in about "
                f"{entry['training']['estimated_seconds']:.0f} s",
                flush=True,
            )
            if not args.skip_eval:
                from ..zoo.evaluate import record_evaluation

                print(record_evaluation(name), flush=True)
    else:
        from ..zoo.table import write_table

        write_table(args.out, args.only, merge=args.merge)
    return 0


def _evaluate(out, names):
    """``evaluate``: every encoder of ``names`` evaluated, one line each, all written to ``out``.

    The file holds ``{"format": 1, "encoders": {name: evaluate_encoder(name)}}``, written
    to a temporary name beside ``out`` and renamed when every encoder is done.
    """
    import json
    from pathlib import Path

    from ..zoo.evaluate import evaluate_encoder
    from ._render import write_files

    out = Path(out)
    result = {}
    for name in names:
        result[name] = evaluate_encoder(name)
        test = result[name]["test"]
        print(
            f"{name}: 20-NN {test['knn20']:.4f}, probe {test['probe']:.4f} "
            f"(C={test['probe_C']:g}) on {test['n_test']} test images",
            flush=True,
        )
    write_files(
        out.parent,
        {out.name: json.dumps({"format": 1, "encoders": result}, indent=1, sort_keys=True) + "\n"},
    )
    print(f"wrote {out}", flush=True)


def _add_plateau(sub):
    """The ``plateau`` subcommand's arguments."""
    from ..zoo.plateau import plan_names

    pl = sub.add_parser(
        "plateau", help="search recipes and train the plateau zoo (long, resumable)"
    )
    pl.add_argument(
        "--runs",
        required=True,
        metavar="DIR",
        help="the run directory: status.json and one folder per encoder (a rerun resumes there)",
    )
    pl.add_argument(
        "--only",
        action="append",
        choices=plan_names(),
        metavar="NAME",
        help=f"only this planned encoder (repeatable); one of {', '.join(plan_names())}",
    )
    pl.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after the first search trial or epoch that ends past this many seconds",
    )


if __name__ == "__main__":
    sys.exit(main())
