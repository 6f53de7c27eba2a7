"""Ship the plateau run's encoders: its weights and records become the zoo's shipped weights and
manifest.

Book: the Performance appendix (the zoo). ``python -m repeval_ref.zoo ship
--runs DIR [--only NAME]`` runs :func:`ship_plateau`, which for every named encoder of a
finished plateau run (:mod:`repeval_ref.zoo.plateau`):

1. checks that the registered configuration of the name
   (:func:`repeval_ref.zoo.train.encoder_config`) is the one the run trained, setting
   for setting, so that ``python -m repeval_ref.zoo train --only NAME`` (``make zoo``)
   retrains the very recipe whose weights ship;
2. writes its checkpoints (and the heads its objective ships) under
   ``repeval_ref/zoo/weights/NAME`` with their SHA-256 in the manifest, through the same
   :func:`repeval_ref.zoo.build.save_trained` that ``make zoo`` uses;
3. adds to the manifest entry what the run recorded: the recipe search (grid, every
   trial with its validation score, the edge rounds, the choice), the loss per epoch,
   and the times.

Times. A run's wall seconds overstate the training's cost where the run shared its machine
or was suspended. The entry keeps them
(``seconds``, ``epoch_seconds``) and adds ``estimated_seconds``: the sum of the epochs'
CPU seconds where the run recorded them (one torch thread: CPU time is the time the
training used), and for the epochs without that record, the median wall seconds of an
epoch. ``estimate`` says which.
"""

from __future__ import annotations

import os

import numpy as np

from .plateau import _read_json, read_status

__all__ = ["ship_plateau", "finished_names", "estimated_seconds"]

_SOURCE = (
    "plateau run (python -m repeval_ref.zoo plateau): recipe searched on a validation split of the "
    "training images, then trained on all of them"
)


def _required_json(path, what):
    """The JSON value at ``path``; a ``ValueError`` naming ``what`` when there is no such file."""
    if not os.path.isfile(path):
        raise ValueError(f"runs: {what} {path!r} is missing")
    return _read_json(path)


def finished_names(runs):
    """The encoders of the run directory ``runs`` whose training is finished (a ``train.json``),
    sorted."""
    runs = os.fspath(runs)
    if not os.path.isdir(runs):
        raise ValueError(f"runs: {runs!r} is not a directory")
    return sorted(
        d for d in os.listdir(runs) if os.path.isfile(os.path.join(runs, d, "train.json"))
    )


def estimated_seconds(epoch_seconds, epoch_cpu_seconds, epochs):
    """The training's time without the pauses and the other jobs of a shared machine.

    Parameters
    ----------
    epoch_seconds : list of float
        Wall seconds of each epoch the run recorded (pauses included).
    epoch_cpu_seconds : list of float
        CPU seconds of the last ``len(epoch_cpu_seconds)`` epochs (a run resumed by a newer
        driver records them only from then on); may be empty.
    epochs : int
        The epochs of the training (>= 1).

    Returns
    -------
    (float, str)
        The estimate in seconds, and how it was made: the CPU seconds summed, plus, for
        the epochs without them, the median wall seconds of an epoch each.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    wall = [float(s) for s in epoch_seconds]
    cpu = [float(s) for s in epoch_cpu_seconds]
    if len(cpu) > epochs or any(s < 0 for s in wall + cpu):
        raise ValueError(f"epoch_cpu_seconds: at most {epochs} non-negative values, got {cpu}")
    missing = epochs - len(cpu)
    if missing and not wall:
        raise ValueError("epoch_seconds: needed for the epochs without CPU seconds, got none")
    median = float(np.median(wall)) if missing else 0.0
    how = (
        f"CPU seconds of all {epochs} epochs"
        if not missing
        else (
            f"CPU seconds of {len(cpu)} epochs and the median wall epoch ({median:.1f} s) for "
            f"{missing}"
        )
        if cpu
        else f"median wall epoch ({median:.1f} s) times {epochs} epochs"
    )
    return round(sum(cpu) + missing * median, 1), how


def _epoch_times(record, status_entry):
    """The per-epoch wall and CPU seconds: the training record's, else the status file's."""
    progress = (status_entry or {}).get("train", {})
    wall = record.get("epoch_seconds") or progress.get("epoch_seconds", [])
    cpu = record.get("epoch_cpu_seconds") or progress.get("epoch_cpu_seconds", [])
    return wall, cpu


def _search_record(search):
    keep = (
        "grid",
        "overrides",
        "validation",
        "budget",
        "trials",
        "edge_grids",
        "chosen",
        "score",
        "seconds",
    )
    return {k: search[k] for k in keep if k in search}


def _config_difference(registered, trained):
    keys = sorted(set(registered) | set(trained))
    return {
        k: (registered.get(k, "<absent>"), trained.get(k, "<absent>"))
        for k in keys
        if registered.get(k, "<absent>") != trained.get(k, "<absent>")
    }


def _ship_one(name, runs, status, weights_dir, manifest_path):
    import torch

    from .build import save_trained
    from .train import encoder_config

    folder = os.path.join(runs, name)
    record = _required_json(os.path.join(folder, "train.json"), "training record")
    search = _required_json(os.path.join(folder, "search.json"), "search record")
    if record.get("name") != name:
        raise ValueError(
            f"runs: {folder}/train.json is the record of {record.get('name')!r}, not {name!r}"
        )
    difference = _config_difference(encoder_config(name), record["config"])
    if difference:
        raise ValueError(
            f"names: the registered configuration of {name!r} is not the one trained "
            f"(setting: (registered, trained)): {difference}; register the trained recipe first"
        )
    try:
        payload = torch.load(
            os.path.join(folder, record["weights"]), map_location="cpu", weights_only=True
        )
    except Exception as exc:  # missing, truncated or foreign
        raise ValueError(
            f"runs: the weights of {name!r} do not load: {type(exc).__name__}: {exc}"
        ) from exc
    checkpoints = [tuple(c) for c in payload["checkpoints"]]
    if [c[0] for c in checkpoints] != [c["name"] for c in record["checkpoints"]]:
        raise ValueError(
            f"runs: {name!r}'s weights hold other checkpoints than its training record lists"
        )
    wall, cpu = _epoch_times(record, status["encoders"].get(name))
    estimate, how = estimated_seconds(wall, cpu, record["epochs"])
    result = {
        "config": record["config"],
        "checkpoints": checkpoints,
        "heads": payload.get("heads", {}),
        "n_images": record["n_images"],
        "seconds": record["seconds"],
        "steps": record["steps"],
        "curve": record["curve"],
    }
    training = {
        "epoch_seconds": wall,
        "epoch_cpu_seconds": cpu,
        "estimated_seconds": estimate,
        "estimate": how,
        "seconds_are": (
            "wall seconds of a background run (lowest priority, shared machine, suspended while "
            "other jobs were timed): an upper bound of the training's cost"
        ),
        "threads": record.get("torch_threads", 1),
        "torch": record["torch"],
        "device": record.get("device", "cpu"),
        "date": record["finished"][:10],
    }
    extra = {"source": _SOURCE, "recipe": record["recipe"], "recipe_search": _search_record(search)}
    return save_trained(
        name,
        result,
        weights_dir=weights_dir,
        manifest_path=manifest_path,
        training=training,
        extra=extra,
    )


def ship_plateau(runs, names=None, *, weights_dir=None, manifest_path=None):
    """Make the finished encoders of a plateau run the zoo's shipped weights.

    Parameters
    ----------
    runs : str or os.PathLike
        The plateau run's directory (``benchmarks/zoo_plateau`` in the repository).
    names : list of str, optional
        The encoders to ship (default: every finished one, :func:`finished_names`).
    weights_dir : str, optional
        Where to write the weights (default: the package's ``zoo/weights``).
    manifest_path : str, optional
        The manifest to update (default: ``weights_dir/manifest.json`` when
        ``weights_dir`` is given, else the package's).

    Returns
    -------
    dict
        The manifest entries written, by name (without the evaluation, which
        :func:`repeval_ref.zoo.evaluate.record_evaluation` adds).

    Raises
    ------
    ValueError
        A missing or unreadable run directory or record; an encoder not finished in the
        run; a registered configuration that differs from the one trained (the message
        lists the settings); weights that do not load or do not match the record.
    """
    if isinstance(runs, bytes) or not isinstance(runs, (str, os.PathLike)) or not os.fspath(runs):
        raise ValueError(f"runs must be the path of a plateau run directory, got {runs!r}")
    runs = os.fspath(runs)
    finished = finished_names(runs)
    if names is None:
        names = finished
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise ValueError(f"names must be a non-empty list of encoder names, got {names!r}")
    unfinished = [n for n in names if n not in finished]
    if unfinished:
        raise ValueError(
            f"names: {unfinished} have no finished training in {runs!r}; finished: {finished}"
        )
    if weights_dir is not None and manifest_path is None:
        manifest_path = os.path.join(weights_dir, "manifest.json")
    status = read_status(runs)
    return {name: _ship_one(name, runs, status, weights_dir, manifest_path) for name in names}
