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

The command is cut as the others: :class:`ZooSettings` holds a subcommand and its options,
:func:`run_zoo` runs it and returns what it computed (``train``, ``plateau`` and ``ship``
write the weights, manifests and run folders of :mod:`repeval_ref.zoo`, as those
functions do), and :func:`cmd_zoo` prints the lines and writes the files of ``evaluate``
and ``table``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from ._arguments import Settings, check_prog

PROG = "python -m repeval_ref.zoo"
DESCRIPTION = (
    "``{prog} train [--only NAME] [--skip-eval]``, ``{prog} evaluate --out PATH``, ``{prog} "
    "table``, ``{prog} plateau --runs DIR`` and ``{prog} ship --runs DIR``."
)
#: the subcommands of the zoo program
COMMANDS = ("train", "evaluate", "table", "plateau", "ship")


@dataclass(frozen=True)
class ZooSettings(Settings):
    """One subcommand of the zoo program and its options (``repeval zoo SUBCOMMAND --help``).

    Attributes
    ----------
    command : str
        One of :data:`COMMANDS`.
    only : tuple of str or None
        The encoders (or, for ``table``, the rows) to work on; None: all of them.
    skip_eval : bool
        ``train``, ``ship``: leave the manifest's accuracies as they are.
    device : str
        ``train``: where to train (``cpu`` or a GPU).
    epochs_scale : int, >= 1
        ``train``: the factor of every recipe's epochs.
    weights_dir : str or None
        ``train``: the folder of the weights and manifest (None: the shipped ones). A
        device other than the CPU, or ``epochs_scale`` other than 1, needs one.
    out : str or None
        ``evaluate``, ``table``: the JSON file to write (required there).
    merge : bool
        ``table``: keep the other rows already in ``out``.
    runs : str or None
        ``plateau``, ``ship``: the run directory (required there).
    time_limit : float or None
        ``plateau``: stop after the trial or epoch that ends past this many seconds.

    Raises
    ------
    ValueError
        Naming the option whose value is refused, as the command line spells it.
    """

    command: str
    only: tuple | None = None
    skip_eval: bool = False
    device: str = "cpu"
    epochs_scale: int = 1
    weights_dir: str | None = None
    out: str | None = None
    merge: bool = False
    runs: str | None = None
    time_limit: float | None = None

    def __post_init__(self):
        if self.command not in COMMANDS:
            raise ValueError(f"command must be one of {', '.join(COMMANDS)}, got {self.command!r}")
        if self.only is not None:
            object.__setattr__(self, "only", tuple(self.only))
        scale = self.epochs_scale
        if not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
            raise ValueError(f"--epochs-scale must be an integer >= 1, got {scale!r}")
        if self.command in ("evaluate", "table") and not self.out:
            raise ValueError(f"{self.command} needs --out, the JSON file to write")
        if self.command == "evaluate" and os.path.isdir(self.out):
            raise ValueError(f"--out {self.out} is a folder; give the JSON file to write")
        if self.command in ("plateau", "ship") and not self.runs:
            raise ValueError(f"{self.command} needs --runs, the plateau run directory")
        if self.command == "train":
            from ..zoo.train import resolve_device

            try:
                device = resolve_device(self.device)
            except ValueError as exc:
                raise ValueError(f"--device: {exc}") from None
            if (device.type != "cpu" or self.epochs_scale != 1) and self.weights_dir is None:
                raise ValueError(
                    "a run on another device or with other epochs needs --weights-dir: the "
                    "shipped weights are the CPU run of the registered recipes"
                )

    @classmethod
    def from_args(cls, args):
        """The settings of a parsed command line: the options its subcommand has."""
        if not isinstance(args, argparse.Namespace):
            raise ValueError(f"args must be an argparse.Namespace, got {type(args).__name__}")
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})


def run_zoo(settings: ZooSettings, log=None):
    """Run one subcommand of the zoo program; return what it computed.

    Parameters
    ----------
    settings : ZooSettings
        The subcommand and its options.
    log : callable, optional
        Receives a line as each encoder is done (default: none).

    Returns
    -------
    dict
        ``command``, and by subcommand: ``train``: ``entries`` (encoder -> its manifest
        entry) and ``evaluations`` (encoder -> the accuracies recorded in the manifest,
        empty with ``skip_eval`` or a ``weights_dir``); ``evaluate``: ``encoders``
        (encoder -> :func:`repeval_ref.zoo.evaluate.evaluate_encoder`); ``table``: ``table``
        (:func:`repeval_ref.zoo.table.write_table`, written at ``out``); ``plateau``:
        ``status`` (:func:`repeval_ref.zoo.plateau.run_plateau`); ``ship``: ``entries``
        and ``evaluations`` as for ``train``.
    """
    if not isinstance(settings, ZooSettings):
        raise ValueError(f"settings must be a ZooSettings, got {type(settings).__name__}")
    log = log if log is not None else (lambda line: None)
    from ..zoo.registry import ENCODERS
    from ..zoo.train import deterministic_torch

    deterministic_torch()  # one thread: the manifest's numbers are reproduced at one thread
    command = settings.command
    if command == "evaluate":
        from ..zoo.evaluate import evaluate_encoder

        encoders = {}
        for name in settings.only or list(ENCODERS):
            encoders[name] = evaluate_encoder(name)
            log(_evaluation_line(name, encoders[name]["test"]))
        return {"command": command, "encoders": encoders}
    if command == "table":
        from ..zoo.table import write_table

        table = write_table(settings.out, settings.only, merge=settings.merge)
        return {"command": command, "table": table}
    if command == "plateau":
        from ..zoo.plateau import run_plateau

        status = run_plateau(settings.runs, names=settings.only, time_limit=settings.time_limit)
        return {"command": command, "status": status}
    if command == "train":
        done = _trained(settings, settings.only or list(ENCODERS), log)
        evaluate = settings.weights_dir is None and not settings.skip_eval
    else:
        from ..zoo.ship import ship_plateau

        done = _logged(ship_plateau(settings.runs, settings.only).items(), _shipped_line, log)
        evaluate = not settings.skip_eval
    entries, evaluations = {}, {}
    for name, entry in done:  # each encoder's accuracies recorded as soon as it is done
        entries[name] = entry
        if evaluate:
            from ..zoo.evaluate import record_evaluation

            evaluations[name] = record_evaluation(name)
            log(str(evaluations[name]))
    return {"command": command, "entries": entries, "evaluations": evaluations}


def _trained(settings, names, log):
    """``train``: yield ``(name, manifest entry)`` as each encoder of ``names`` is saved."""
    from ..zoo.build import train_and_save
    from ..zoo.train import resolve_device

    where = {}
    if settings.weights_dir is not None:
        where = {
            "weights_dir": settings.weights_dir,
            "manifest_path": os.path.join(settings.weights_dir, "manifest.json"),
        }
    device = resolve_device(settings.device)
    trained = (
        (name, train_and_save(name, device=device, epochs_scale=settings.epochs_scale, **where))
        for name in names
    )
    return _logged(trained, _trained_line, log)


def _logged(pairs, line, log):
    """Yield the ``(name, entry)`` pairs, giving ``log`` the line ``line(name, entry)`` of each."""
    for name, entry in pairs:
        log(line(name, entry))
        yield name, entry


def _trained_line(name, entry):
    training = entry["training"]
    return (
        f"{name}: {training['seconds']} s on {training['device']}, "
        f"final loss {(training['loss_per_epoch'] or [float('nan')])[-1]}"
    )


def _shipped_line(name, entry):
    return (
        f"{name}: shipped {len(entry['checkpoints'])} checkpoints, trained in about "
        f"{entry['training']['estimated_seconds']:.0f} s"
    )


def _evaluation_line(name, test):
    return (
        f"{name}: 20-NN {test['knn20']:.4f}, probe {test['probe']:.4f} "
        f"(C={test['probe_C']:g}) on {test['n_test']} test images"
    )


def cmd_zoo(settings):
    """Run :func:`run_zoo`, print a line per encoder and write the file of ``evaluate``.

    ``evaluate`` writes ``{"format": 1, "encoders": {name: evaluate_encoder(name)}}`` at
    ``out``, to a temporary name beside it renamed when every encoder is done. Returns
    the exit status: 1 when a ``plateau`` encoder failed, else 0.
    """
    from ._render import write_files

    result = run_zoo(settings, log=lambda line: print(line, flush=True))
    if settings.command == "evaluate":
        out = Path(settings.out)
        text = json.dumps({"format": 1, "encoders": result["encoders"]}, indent=1, sort_keys=True)
        write_files(out.parent, {out.name: text + "\n"})
        print(f"wrote {out}", flush=True)
    elif settings.command == "plateau":
        print(f"plateau run {result['status']['state']}", flush=True)
        return 1 if result["status"]["state"] == "failed" else 0
    return 0


def main(argv=None, prog=PROG):
    """Run the zoo program on ``argv`` (default ``sys.argv[1:]``) and return its exit status.

    ``prog`` names the program in the usage and error lines: ``python -m repeval_ref.zoo``
    (default) or ``repeval zoo``. A bad command line exits with status 2 (argparse);
    ``plateau`` returns 1 when an encoder failed, every other run 0.
    """
    check_prog(prog)
    parser = _parser(prog)
    try:
        settings = ZooSettings.from_args(parser.parse_args(argv))
    except ValueError as exc:
        parser.error(str(exc))
    return cmd_zoo(settings)


def _parser(prog):
    """The zoo program's parser, one subparser per subcommand."""
    from ..zoo.plateau import plan_names
    from ..zoo.registry import ENCODERS

    zoo = sorted(ENCODERS)
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION.format(prog=prog))
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train the zoo's encoders (deterministic, one thread)")
    _add_only(tr, zoo, f"train only this encoder (repeatable); one of {', '.join(zoo)}")
    _add_skip_eval(tr)
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
        metavar="DIR",
        help="write weights and manifest into DIR instead of the shipped weights (skips the "
        "evaluation)",
    )
    ev = sub.add_parser(
        "evaluate", help="recompute the manifest's accuracies of the shipped weights into --out"
    )
    _add_out(ev, "the JSON file to write (the installed package is never written)")
    _add_only(ev, zoo, None)
    tb = sub.add_parser(
        "table", help="write the evaluation table as JSON at --out and as Markdown beside it"
    )
    _add_out(
        tb, "the JSON file to write, e.g. benchmarks/results/zoo_table.json (the .md beside it)"
    )
    tb.add_argument(
        "--only",
        action="append",
        metavar="ROW",
        help="compute only this row (repeatable): raw_pixels, a zoo encoder or efficientnet_lite0",
    )
    tb.add_argument("--merge", action="store_true", help="keep the other rows already in --out")
    pl = sub.add_parser(
        "plateau", help="search recipes and train the plateau zoo (long, resumable)"
    )
    _add_runs(pl, "the run directory: status.json and one folder per encoder (a rerun resumes)")
    plan = plan_names()
    _add_only(pl, plan, f"only this planned encoder (repeatable); one of {', '.join(plan)}")
    pl.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="stop after the first search trial or epoch that ends past this many seconds",
    )
    sp = sub.add_parser(
        "ship", help="ship the finished encoders of a plateau run (weights and manifest)"
    )
    _add_runs(sp, "the plateau run directory")
    _add_only(sp, zoo, "ship only this encoder (repeatable; default: every finished one)")
    _add_skip_eval(sp)
    return parser


def _add_only(parser, names, help):
    """``--only NAME``, repeatable, one of ``names``."""
    parser.add_argument("--only", action="append", choices=names, metavar="NAME", help=help)


def _add_skip_eval(parser):
    parser.add_argument(
        "--skip-eval", action="store_true", help="do not compute the manifest's accuracies"
    )


def _add_out(parser, help):
    parser.add_argument("--out", required=True, metavar="PATH", help=help)


def _add_runs(parser, help):
    parser.add_argument("--runs", required=True, metavar="DIR", help=help)


if __name__ == "__main__":
    sys.exit(main())
