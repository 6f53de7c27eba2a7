"""The plateau zoo's long run: a recipe search, then a training to the epoch budget, per encoder.

Book: the Performance appendix (the zoo: encoders trained to their plateau by standard
recipes). ``python -m repeval_ref.zoo plateau --runs DIR`` runs
:func:`run_plateau`, which for every encoder of :data:`PLAN`, in order:

1. searches its recipe (:func:`repeval_ref.zoo.recipes.search_recipe`): a small grid
   of at least three learning rates (times a temperature, or MAE's mask ratio), every
   setting trained briefly on the fitting part of a validation split carved out of the
   60,000 training images and scored by a linear probe on the validation rows; the
   test split is never read. The record goes to ``DIR/NAME/search.json``.
2. trains the chosen recipe on all 60,000 training images (the validation rows
   included: they served to choose the recipe, not to report a result) for the epoch
   budget of ``BUDGET.md``, one epoch per call of
   :func:`repeval_ref.zoo.train.train_encoder` with ``state_file=DIR/NAME/state.pt``;
   at the end the checkpoints go to ``DIR/NAME/weights.pt`` and the record (recipe,
   configuration, loss curve, seconds) to ``DIR/NAME/train.json``.

Every step resumes: a rerun skips a finished search or training, continues an
interrupted search after its last finished setting (``DIR/NAME/search_trials.json``)
and an interrupted training from its last finished epoch, bit-identical to an
uninterrupted run. ``DIR/status.json`` says, for a human, what is running, which epoch,
the loss curve so far and the seconds used. Nothing here is shipped: the weights of
the run directory become the zoo's shipped weights in a separate step,
:func:`repeval_ref.zoo.ship.ship_plateau` (``python -m repeval_ref.zoo ship``).
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import time
import traceback

import numpy as np

__all__ = [
    "PLAN",
    "SEARCH",
    "EDGE_STEPS",
    "edge_extension",
    "plan_names",
    "run_plateau",
    "run_encoder",
    "read_status",
]

_LRS = [3e-4, 1e-3, 3e-3]
_ALL = {"train_images": 60000}  # every planned encoder trains on all the training images


def _planned(name, base, epochs, grid, arch=None):
    """One encoder of :data:`PLAN`: ``base``'s configuration on all the training images (with
    the architecture ``arch`` when given), trained ``epochs`` epochs after a search of ``grid``."""
    overrides = {**_ALL} if arch is None else {**_ALL, "arch": arch}
    return {"name": name, "base": base, "overrides": overrides, "epochs": epochs, "grid": grid}


#: The planned encoders in the order they run: the cheapest first (``BUDGET.md``), so that
#: the first ones finish early, and the small CNN last. ``base`` is the registered
#: configuration (:data:`~repeval_ref.zoo.registry.ENCODERS`) changed by ``overrides``;
#: ``epochs`` is the budget of ``BUDGET.md``; ``grid`` the recipe search's candidates.
PLAN = (
    _planned("supervised_vit", "supervised_vit", 15, {"lr": _LRS}),
    _planned("mae_vit", "mae_vit", 70, {"lr": _LRS, "mask_ratio": [0.6, 0.75]}),
    _planned("supervised_resnet", "supervised_vit", 10, {"lr": _LRS}, arch="resnet"),
    _planned("dino_vit", "dino_vit", 30, {"lr": _LRS, "teacher_temperature": [0.04, 0.07]}),
    _planned("simclr_vit", "simclr_vit", 30, {"lr": _LRS, "temperature": [0.1, 0.5]}),
    _planned(
        "simclr_resnet", "simclr_vit", 10, {"lr": _LRS, "temperature": [0.1, 0.5]}, arch="resnet"
    ),
    _planned(
        "dino_resnet",
        "dino_vit",
        8,
        {"lr": _LRS, "teacher_temperature": [0.04, 0.07]},
        arch="resnet",
    ),
    # the small plain CNN: 3 epochs on all the images, about a minute
    _planned("supervised_cnn", "supervised_cnn", 3, {"lr": [6e-4, 2e-3, 6e-3]}),
)

#: The budget of every search trial (:func:`~repeval_ref.zoo.recipes.search_recipe`): 32
#: steps of 256 on 8,192 fitting-part images, a probe fitted on 2,000 fitting-part images
#: and scored on 2,000 of the 5,000 validation rows.
SEARCH = {
    "val_size": 5000,
    "seed": 0,
    "n_train": 8192,
    "epochs": 1,
    "n_probe": 2000,
    "n_val": 2000,
    "Cs": [0.01, 0.1, 1.0],
}


def plan_names(plan=None):
    """The names of the planned encoders, in their order."""
    return [entry["name"] for entry in (PLAN if plan is None else plan)]


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _write_json(path, value):
    """Write ``value`` as indented JSON to ``path`` atomically (a temporary file, then a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def _read_json(path):
    """The JSON value at ``path``, or None when there is no such file."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as exc:
        raise ValueError(f"runs: {path!r} is not readable JSON: {exc}") from exc


def read_status(runs):
    """The status of the run directory ``runs`` (a new, empty one when none was written)."""
    status = _read_json(os.path.join(os.fspath(runs), "status.json"))
    return status if status is not None else {"format": 1, "encoders": {}}


class _Run:
    """The run directory: the status file, the log and the deadline of this call."""

    def __init__(self, runs, time_limit, log):
        self.runs = os.fspath(runs)
        self.status = read_status(self.runs)
        self.log = log
        self.t0 = time.perf_counter()
        self.deadline = None if time_limit is None else self.t0 + time_limit
        self.units = 0  # search trials and training epochs done by this call
        self.status.update(pid=os.getpid(), started=_now(), state="running", stopped_by=None)

    def out_of_time(self):
        """Past the deadline, after at least one unit of work (so that every call makes
        progress)."""
        return self.deadline is not None and self.units > 0 and time.perf_counter() >= self.deadline

    def left(self):
        """Seconds left to this call (None without a time limit; at least a microsecond)."""
        return None if self.deadline is None else max(self.deadline - time.perf_counter(), 1e-6)

    def encoder(self, name):
        return self.status["encoders"].setdefault(name, {"phase": "pending"})

    def save(self, **fields):
        self.status.update(
            fields, updated=_now(), seconds_this_call=round(time.perf_counter() - self.t0, 1)
        )
        _write_json(os.path.join(self.runs, "status.json"), self.status)

    def say(self, line):
        if self.log is not None:
            self.log(f"[{_now()}] {line}")


#: a learning rate chosen at the top or bottom of those tried is searched again one step
#: (a factor of 3) beyond it, at most this many times: an optimum at the edge of the grid
#: says only that the best value may lie outside it
EDGE_STEPS = 2


def edge_extension(grid, chosen, tried):
    """The grid of the next search when ``chosen`` sits at an edge of the learning rates
    ``tried``: ``grid`` with ``lr`` replaced by the one value a factor of 3 beyond that
    edge; None when the choice is inside, or fewer than two rates were tried.

    Parameters
    ----------
    grid : dict
        The search's grid (setting name -> list of values).
    chosen : dict
        The chosen setting.
    tried : sequence of float
        Every learning rate searched so far.
    """
    if not isinstance(grid, dict) or not isinstance(chosen, dict):
        raise ValueError("grid and chosen must be dicts")
    rates = sorted(float(r) for r in tried)
    lr = chosen.get("lr")
    if lr is None or len(rates) < 2:
        return None
    if float(lr) >= rates[-1]:
        beyond = float(lr) * 3.0
    elif float(lr) <= rates[0]:
        beyond = float(lr) / 3.0
    else:
        return None
    # six significant digits: 3e-4 / 3 is 1e-4 in the record, not 9.999999999999999e-05
    return {**grid, "lr": [float(f"{beyond:.6g}")]}


def _merged(record, more):
    """One search record of two rounds: every trial, the first maximum over both (the
    first round wins a tie), the seconds summed, the extra grids listed."""
    best = record if record["score"] >= more["score"] else more
    return {
        **record,
        "trials": record["trials"] + more["trials"],
        "edge_grids": record.get("edge_grids", []) + [more["grid"]],
        "seconds": record["seconds"] + more["seconds"],
        "chosen": best["chosen"],
        "score": best["score"],
    }


def _phase(run, name, folder, record_file, phase):
    """``(record, None)`` when the phase's record is on disk already (the step is skipped),
    else ``(None, status)``: the encoder's status entry, marked as in ``phase``."""
    done = _read_json(os.path.join(folder, record_file))
    if done is not None:
        return done, None
    info = run.encoder(name)
    info.update(phase=phase)
    return None, info


def _search(entry, run, images, labels, search):
    """The recipe search of ``entry`` (read back when finished); None when stopped by the time
    limit.

    A record written before the edge extension existed (no ``edge_done``) is extended
    where it is read back; when that changes the choice, the training made with the old
    choice is removed so that it is trained again."""
    from .recipes import search_recipe

    name, folder = entry["name"], os.path.join(run.runs, entry["name"])
    done, info = _phase(run, name, folder, "search.json", "search")
    if done is not None and done.get("edge_done"):
        return done
    if info is None:
        info = run.encoder(name)
        info.update(phase="search")
    info.setdefault("search", {"trials_log": []})
    info["search"]["settings"] = int(np.prod([len(v) for v in entry["grid"].values()]))
    run.save(current=name)

    def trial_line(line):
        run.units += 1
        info["search"]["trials_log"].append(line)
        run.save()
        run.say(f"search {name}: {line}")

    def search_grid(grid, trials_name):
        return search_recipe(
            entry["base"],
            grid,
            images=images,
            labels=labels,
            overrides=entry["overrides"],
            log=trial_line,
            trials_file=os.path.join(folder, trials_name),
            time_limit=run.left(),
            **search,
        )

    if done is None:
        record = search_grid(entry["grid"], "search_trials.json")
        if not record["complete"]:
            return None
    else:
        record = {k: v for k, v in done.items() if k != "name"}
    first_choice = record["chosen"]
    tried = list(entry["grid"].get("lr", [])) + [
        lr for g in record.get("edge_grids", []) for lr in g.get("lr", [])
    ]
    for step in range(len(record.get("edge_grids", [])) + 1, EDGE_STEPS + 1):
        grid = edge_extension(entry["grid"], record["chosen"], tried)
        if grid is None:
            break
        more = search_grid(grid, f"search_trials_edge{step}.json")
        if not more["complete"]:
            return None
        record = _merged(record, more)
        tried += grid["lr"]
    record = {"name": name, **record, "edge_done": True}
    if done is not None and record["chosen"] != first_choice:
        for stale in ("train.json", "state.pt", "weights.pt"):
            if os.path.exists(os.path.join(folder, stale)):
                os.remove(os.path.join(folder, stale))
        info.pop("train", None)
        run.say(
            f"search {name}: the edge search moved the choice from {first_choice}; training again"
        )
    _write_json(os.path.join(folder, "search.json"), record)
    info["search"].update(chosen=record["chosen"], score=record["score"], seconds=record["seconds"])
    run.save()
    run.say(
        f"search {name}: chose {record['chosen']} (validation probe {record['score']:.4f}, "
        f"{record['seconds']:.0f} s)"
    )
    return record


def _one_epoch(entry, cfg_args, images, labels, state_file, done):
    """Train the epoch after ``done`` from the state file; the result of :func:`train_encoder`."""
    from .train import train_encoder

    return train_encoder(
        entry["base"], images, labels, state_file=state_file, stop_after=done + 1, **cfg_args
    )


def _training_args(entry, recipe):
    """The keyword arguments of :func:`train_encoder` for ``entry`` trained with the chosen
    ``recipe``."""
    overrides = {**copy.deepcopy(entry["overrides"]), **copy.deepcopy(recipe)}
    return {
        "epochs": entry["epochs"],
        "overrides": overrides,
        "n_images": overrides.get("train_images"),
    }


def _train(entry, run, images, labels, recipe):
    """Train ``entry`` with ``recipe`` to its epoch budget; its record, or None when stopped by the
    time limit."""
    name, folder = entry["name"], os.path.join(run.runs, entry["name"])
    done, info = _phase(run, name, folder, "train.json", "training")
    if done is not None:
        return done
    train = info.setdefault(
        "train",
        {"epoch": 0, "epochs": entry["epochs"], "curve": [], "seconds": 0.0, "epoch_seconds": []},
    )
    args, state_file = _training_args(entry, recipe), os.path.join(folder, "state.pt")
    run.save(current=name)
    while True:
        t, cpu = time.perf_counter(), time.process_time()
        result = _one_epoch(entry, args, images, labels, state_file, train["epoch"])
        run.units += 1
        train.update(
            epoch=result["epochs_done"], curve=result["curve"], seconds=round(result["seconds"], 1)
        )
        train["epoch_seconds"].append(round(time.perf_counter() - t, 1))
        # CPU seconds of this process: a pause (SIGSTOP) or another job's load does not count
        train.setdefault("epoch_cpu_seconds", []).append(round(time.process_time() - cpu, 1))
        run.save()
        run.say(
            f"train {name}: epoch {result['epochs_done']}/{entry['epochs']} loss "
            f"{result['curve'][-1]:.4f} ({train['epoch_seconds'][-1]:.0f} s)"
        )
        if result["complete"]:
            return _finish_training(entry, run, recipe, result, train)
        if run.out_of_time():
            return None


def _finish_training(entry, run, recipe, result, train):
    """Write the weights and the training record of a finished training; return the record.

    ``train`` is the status's training progress: its per-epoch wall and CPU seconds go
    into the record (wall seconds count the pauses of a run suspended for a while)."""
    import torch

    folder = os.path.join(run.runs, entry["name"])
    torch.save(
        {"checkpoints": result["checkpoints"], "heads": result["heads"]},
        os.path.join(folder, "weights.pt"),
    )
    record = {
        "name": entry["name"],
        "base": entry["base"],
        "recipe": recipe,
        "config": result["config"],
        "images": f"all {result['subset'].size} training images (the validation rows included: "
        "they chose the recipe, they do not report a result)",
        "n_images": int(result["subset"].size),
        "epochs": result["epochs_done"],
        "steps": result["steps"],
        "curve": result["curve"],
        "seconds": round(result["seconds"], 1),
        "epoch_seconds": train.get("epoch_seconds", []),
        "epoch_cpu_seconds": train.get("epoch_cpu_seconds", []),
        "checkpoints": [{"name": c[0], "epoch": c[1], "step": c[2]} for c in result["checkpoints"]],
        "weights": "weights.pt",
        "state_file": "state.pt",
        "device": "cpu",
        "torch_threads": 1,
        "torch": torch.__version__,
        "finished": _now(),
    }
    _write_json(os.path.join(folder, "train.json"), record)
    return record


def run_encoder(entry, run, images, labels, search):
    """Search and train one planned encoder; True when both are finished, False when time ran
    out."""
    os.makedirs(os.path.join(run.runs, entry["name"]), exist_ok=True)
    run.encoder(entry["name"]).pop("error", None)
    record = _search(entry, run, images, labels, search)
    if record is None or run.out_of_time():
        return False
    trained = _train(entry, run, images, labels, record["chosen"])
    if trained is None:
        return False
    info = run.encoder(entry["name"])
    info.update(
        phase="done",
        train={
            **info.get("train", {}),
            "epoch": trained["epochs"],
            "curve": trained["curve"],
            "seconds": trained["seconds"],
        },
    )
    run.save()
    return True


def _check_plan(plan):
    from .train import encoder_config

    if not isinstance(plan, (list, tuple)) or not plan:
        raise ValueError(f"plan must be a non-empty list of encoder entries, got {plan!r}")
    for entry in plan:
        missing = {"name", "base", "overrides", "epochs", "grid"} - set(
            entry if isinstance(entry, dict) else {}
        )
        if missing:
            raise ValueError(f"plan: every entry needs {sorted(missing)}, got {entry!r}")
        encoder_config(entry["base"], epochs=entry["epochs"], overrides=entry["overrides"])
    if len(set(plan_names(plan))) != len(plan):
        raise ValueError(f"plan has repeated names: {plan_names(plan)}")


def _check_arguments(runs, names, plan, time_limit, search):
    if not isinstance(runs, (str, os.PathLike)) or not os.fspath(runs):
        raise ValueError(f"runs must be the path of a run directory, got {runs!r}")
    unknown = sorted(set(names or ()) - set(plan_names(plan)))
    if names is not None and (isinstance(names, str) or unknown or not names):
        raise ValueError(
            f"names must be a non-empty list of planned encoders {plan_names(plan)}, got {names!r}"
        )
    if time_limit is not None and (
        isinstance(time_limit, bool)
        or not isinstance(time_limit, (int, float))
        or not time_limit > 0
    ):
        raise ValueError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
    if not isinstance(search, dict) or set(search) - set(SEARCH):
        raise ValueError(
            f"search must be a dict of search_recipe budget settings {sorted(SEARCH)}, got "
            f"{search!r}"
        )


def _training_split(images, labels):
    """Fashion-MNIST's training split, or the given images and labels (never the test split)."""
    if (images is None) != (labels is None):
        raise ValueError(
            "images and labels must be given together (or neither: the training split)"
        )
    if images is None:
        from ..datasets import fashion_mnist

        images, labels = fashion_mnist("train")
    return np.asarray(images), np.asarray(labels)


def _lock(runs):
    """An exclusive lock on the run directory, released by the kernel when this process ends."""
    import fcntl

    # the open file is the lock: it is returned, and the caller holds it until it ends
    handle = open(os.path.join(runs, ".lock"), "w")  # noqa: SIM115
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        handle.close()
        raise ValueError(f"runs: {runs!r} is in use by another plateau run") from exc
    return handle


def _print(line):
    print(line, flush=True)


def run_plateau(
    runs,
    *,
    names=None,
    plan=None,
    search=None,
    images=None,
    labels=None,
    time_limit=None,
    log=_print,
):
    """Search the recipe of every planned encoder, then train it; resumable.

    Parameters
    ----------
    runs : str or os.PathLike
        The run directory (created if needed): ``status.json`` and one folder per encoder.
    names : list of str, optional
        Only these planned encoders (default: all of ``plan``, in its order).
    plan : list of dict, optional
        The encoders (default :data:`PLAN`): ``name``, ``base`` (a registered encoder),
        ``overrides``, ``epochs``, ``grid``.
    search : dict, optional
        Changes of the trial budget :data:`SEARCH` (tests use tiny ones).
    images : numpy.ndarray of uint8, shape (n, 28, 28), optional
        Training images (default: Fashion-MNIST's 60,000 training images).
    labels : numpy.ndarray of int64, shape (n,), optional
        Their labels; given with ``images`` or not at all.
    time_limit : float, optional
        Stop at the end of the first search trial or training epoch that ends once this
        call has run ``time_limit`` seconds; a rerun resumes.
    log : callable, optional
        Called with one line per trial and per epoch (default: printed and flushed).

    Returns
    -------
    dict
        The status written to ``runs/status.json``: ``state`` (``"finished"``,
        ``"stopped"`` by the time limit, or ``"failed"`` when an encoder raised: the
        others still ran), per encoder its ``phase``, search and training progress.
    """
    plan = PLAN if plan is None else plan
    search = {} if search is None else search
    _check_arguments(runs, names, plan, time_limit, search)
    _check_plan(plan)
    images, labels = _training_split(images, labels)
    os.makedirs(os.fspath(runs), exist_ok=True)
    lock = _lock(os.fspath(runs))
    try:
        run = _Run(runs, time_limit, log)
        run.save(
            plan=plan_names(plan), search_budget={**SEARCH, **search}, n_images=int(labels.size)
        )
        return _run_all(
            [e for e in plan if names is None or e["name"] in names],
            run,
            images,
            labels,
            {**SEARCH, **search},
        )
    finally:
        lock.close()


def _run_all(entries, run, images, labels, search):
    """Run the entries in order, recording a failing encoder and going on with the next."""
    failed = []
    for entry in entries:
        try:
            finished = run_encoder(entry, run, images, labels, search)
        except Exception as exc:  # one encoder's failure must not end a run of hours
            failed.append(entry["name"])
            run.encoder(entry["name"]).update(phase="failed", error=f"{type(exc).__name__}: {exc}")
            run.save()
            run.say(f"{entry['name']} failed:\n{traceback.format_exc()}")
            continue
        if not finished:
            run.say(f"stopped by the time limit during {entry['name']}; a rerun resumes")
            run.save(state="stopped", stopped_by="time limit", current=entry["name"])
            return run.status
    run.save(state="failed" if failed else "finished", failed=failed, current=None)
    return run.status
