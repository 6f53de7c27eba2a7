"""``repeval suite``: many encoders on many tasks, one model x task table with honest error bars.

Encoders (positional, any mix):

* ``zoo:NAME`` or ``NAME``: an encoder of :mod:`repeval_ref.zoo` (its names include
  ``efficientnet_lite0``); ``zoo`` alone stands for all of them;
* a feature folder: one entry per task in a format ``repeval report`` reads, named after
  the task (``DIR/fashion/`` with ``train.npz`` and ``test.npz`` as the loop writes them,
  or ``DIR/fashion.npz``, ``.npy`` or ``.pt``); the encoder is named after the folder;
* ``--backbone torchvision:ARCH`` or ``timm:ARCH`` with ``--weights PATH`` (or
  ``--random-init``), as the loop's ``--backbone`` takes it.

Tasks: the transfer suite of :mod:`repeval_ref.datasets.transfer` (those installed here,
or ``--tasks``); with feature folders only, the tasks the first folder holds. Every
image encoder's features are extracted once and cached on disk, keyed by a fingerprint
of the weights and of the images (:func:`repeval_ref.zoo.extraction.extract`); the
evaluation of one encoder on one task is cached too, keyed by a fingerprint of its
features, of the split and of the settings, so a second run reads both back.

Protocols, each computed by the functions ``report`` and ``leaderboard`` call, with their
defaults: weighted k-NN (k = 20, tau = 0.07), the linear probe with C chosen on a
validation split of the training part, and low-shot nearest class mean (10 shots by
default, mean and std over the shared default number of draws). The split rule is the
one of every command: a task's (or a folder's) train and test parts are never re-split;
a single feature file is split once, stratified and seeded.

Statistics: a 95% Wilson interval per cell; the rank of every encoder within every task
(ties share the average rank); the mean rank over tasks with a bootstrap interval and
Kendall's tau-b between every pair of tasks' rankings with its interval (test items
resampled within each task: :func:`repeval_ref.rank_agreement.rank_bootstrap`); and,
within each task, every pair of encoders compared by the leaderboard's machinery
(paired bootstrap interval, exact McNemar p, Holm or Benjamini-Hochberg across the pairs
of that task).

Outputs (``--out``): ``suite.csv``, ``suite.md``, ``suite.json``, ``suite.html``
(self-contained: inline style, the heat map as an inline PNG; no outside request) and
``suite_heatmap.png``. All inputs are read and checked before anything is written.
"""
from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import html
import io
import json
import os
import time
from pathlib import Path

import numpy as np

from . import _render as R
from ._evaluate import (KNN_HEADLINE_KS, KNN_TAU, LOW_SHOT_DRAWS, PAIRED_BOOTSTRAP, PROBE_CS, TEST_FRACTION,
                        acc_entry, blas_threads, knn_curve_predictions, low_shot_section, probe_section)
from ._inputs import (Input, InputError, _check_classes, _short, read_input, refuse_zero_rows, split_rows,
                      split_text)
from ._progress import Progress
from .leaderboard import _is_encoder_path, check_same_images, pairwise

PROTOCOLS = ("knn", "probe", "fewshot")
#: protocols with one right/wrong answer per test image: paired tests and bootstrap intervals
PAIRED = ("knn", "probe")
#: shots of the suite's low-shot column (the issue's 10-shot)
SUITE_SHOTS = 10
#: bootstrap replicates of the mean-rank and tau intervals
RANK_BOOTSTRAP = 1000
#: version of what the result cache stores; bump when an evaluation changes
RESULT_CACHE_VERSION = 1


def protocol_title(p, s):
    if p == "knn":
        return f"weighted k-NN (k={s['k']}, tau={KNN_TAU})"
    if p == "probe":
        return "linear probe (C chosen on a split of TRAIN)"
    return f"{s['shots']}-shot nearest class mean (mean ± std over {s['draws']} draws)"


# ----------------------------------------------------------------------------- tasks


def task_source():
    """The module that lists and loads the suite's tasks (swapped in tests)."""
    from ..datasets import transfer

    return transfer


def _task_card(src, task):
    try:
        card = dict(src.task_card(task))
    except (ValueError, KeyError):
        return {"name": task}
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in card.items()}


# -------------------------------------------------------------------------- encoders


def _zoo_names():
    from .. import zoo

    return list(zoo.known_names())


def resolve_encoders(items, backbone=None, weights=None, random_init=False):
    """The encoders named on the command line: ``[{"name", "kind", "spec", "path"}, ...]``.

    ``kind`` is ``"zoo"``, ``"backbone"`` or ``"features"``.
    """
    known = _zoo_names()
    out = []
    for item in items:
        p = Path(item)
        if item == "zoo":
            out += [{"name": n, "kind": "zoo", "spec": f"zoo:{n}", "path": None} for n in known]
        elif item.startswith("zoo:") or (item in known and not p.exists()):
            name = item[len("zoo:"):] if item.startswith("zoo:") else item
            if name not in known:
                raise InputError(f"unknown zoo encoder {name!r} (from {item}); known: {', '.join(known)}")
            out.append({"name": name, "kind": "zoo", "spec": f"zoo:{name}", "path": None})
        elif p.is_dir():
            out.append({"name": p.name, "kind": "features", "spec": str(p), "path": p})
        elif p.exists():
            raise InputError(f"{p} is a file; give a feature folder (one entry per task), a zoo name "
                             "or zoo:NAME")
        else:
            raise InputError(f"not found: {p} (neither a feature folder nor a zoo encoder; zoo encoders: "
                             f"{', '.join(known)})")
    if backbone is not None:
        out.append(_backbone_entry(backbone, weights, random_init, known))
    elif weights is not None or random_init:
        raise InputError("--weights and --random-init are for a --backbone")
    if not out:
        raise InputError("no encoders given (zoo names, zoo, feature folders or --backbone)")
    names = [e["name"] for e in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"encoder {dup!r} is given twice; each encoder may appear once")
    if len(out) < 2:
        raise InputError(f"a suite needs at least 2 encoders, got 1 ({out[0]['spec']})")
    return out


def _backbone_entry(spec, weights, random_init, known):
    library, _, arch = spec.partition(":")
    if library == "zoo":
        if weights is not None or random_init:
            raise InputError(f"--backbone {spec} loads the weights shipped with it; leave out --weights "
                             "and --random-init")
        if arch not in known:
            raise InputError(f"unknown zoo encoder {arch!r} (from --backbone {spec}); known: {', '.join(known)}")
        return {"name": arch, "kind": "zoo", "spec": spec, "path": None}
    if library not in ("torchvision", "timm") or not arch:
        raise InputError(f"--backbone must be torchvision:ARCH, timm:ARCH or zoo:NAME, got {spec!r}")
    if (weights is None) == (not random_init):
        raise InputError(f"--backbone {spec} needs exactly one of --weights PATH (a local state dict) and "
                         "--random-init (an untrained network, whose features mean nothing)")
    if weights is not None and not Path(weights).is_file():
        raise InputError(f"not found: {weights} (--weights)")
    return {"name": spec, "kind": "backbone", "spec": spec, "path": None,
            "weights": None if weights is None else str(weights), "random_init": bool(random_init)}


def folder_task_entries(folder):
    """``{task: path}`` of a feature folder: its sub-folders and feature files, named by stem."""
    found = {}
    for q in sorted(folder.iterdir()):
        if q.name.startswith(".") or not _is_encoder_path(q):
            continue
        task = q.name if q.is_dir() else q.stem
        if task in found:
            raise InputError(f"feature folder {folder} holds task {task!r} twice ({found[task].name} and {q.name})")
        found[task] = q
    return found


# ----------------------------------------------------------------- image features


def _sha(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


class _ChunkedImages:
    """uint8 images prepared for an encoder a chunk at a time, as a map-style dataset.

    The extraction reads the items in order, so each chunk is prepared once; the
    prepared form of a whole task (1.1 GB for 10,000 images at 96 px) is never held.
    """

    def __init__(self, images, labels, prepare, chunk=1024):
        import torch

        self.images, self.labels = images, torch.from_numpy(np.asarray(labels, dtype=np.int64))
        self.prepare, self.chunk = prepare, chunk
        self._at, self._x = None, None

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, i):
        c = i // self.chunk
        if c != self._at:
            self._x = self.prepare(self.images[c * self.chunk:(c + 1) * self.chunk])
            self._at = c
        return self._x[i - c * self.chunk], self.labels[i]


#: extraction batch by default; EfficientNet-Lite0 (96-px inputs, 96-channel maps at 48 x 48)
#: runs faster in batches whose activations stay in the CPU's caches (same numbers: the
#: network is evaluated image by image either way)
DEFAULT_BATCH = 256
EFFICIENTNET_BATCH = 32


def default_batch_size(entry):
    """The extraction batch of an encoder when ``--batch-size`` is not given."""
    return EFFICIENTNET_BATCH if entry["kind"] == "zoo" and entry["name"] == "efficientnet_lite0" else DEFAULT_BATCH


class ImageEncoder:
    """A zoo encoder or a torchvision/timm backbone, loaded once, with cached extraction.

    EfficientNet-Lite0 of the zoo runs with its BatchNorms folded into the convolutions
    (:func:`repeval_ref.zoo.efficientnet.fold_batchnorm`): the same function in fewer
    operations, equal to the unfolded network's features up to float32 rounding.
    """

    def __init__(self, entry, cache_dir, image_size, batch_size=None):
        self.entry, self.cache_dir, self.image_size = entry, cache_dir, image_size
        self.batch_size = default_batch_size(entry) if batch_size is None else batch_size
        self._model = None

    def model(self):
        if self._model is None:
            from ..backbones import BackboneUnavailable, load_backbone

            e = self.entry
            try:
                if e["kind"] == "zoo":
                    self._model = load_backbone(e["name"], library="zoo")
                    from ..zoo.efficientnet import EfficientNetLite0, fold_batchnorm

                    if isinstance(self._model, EfficientNetLite0):
                        self._model = fold_batchnorm(self._model)
                else:
                    library, _, arch = e["spec"].partition(":")
                    self._model = load_backbone(arch, e["weights"], library=library)
            except (BackboneUnavailable, FileNotFoundError, ValueError) as exc:
                raise InputError(f"encoder {e['spec']}: {_short(exc)}") from None
        return self._model

    def _prepare(self):
        """(function of uint8 images -> input tensor, text that names it in the fingerprint)."""
        e = self.entry
        if e["kind"] == "zoo":
            from ..zoo.extraction import EFFICIENTNET_SIZE, encoder_inputs

            return (lambda x: encoder_inputs(e["name"], x)), f"zoo.encoder_inputs:{e['name']}:{EFFICIENTNET_SIZE}"
        model = self.model()
        size = self.image_size
        prep = getattr(model, "prepare_inputs", None)
        if callable(prep):
            return (lambda x: prep(x, size=size)), f"prepare_inputs:{size}"
        from ..torch.data import IMAGENET_MEAN, IMAGENET_STD
        from ..zoo.efficientnet import prepare_images

        return ((lambda x: prepare_images(x, size=size, mean=IMAGENET_MEAN, std=IMAGENET_STD)),
                f"prepare_images:{size}:imagenet")

    def features(self, task, split, images, labels):
        """Features (n, d) of one split of one task, from the cache when it holds them; (array, hit)."""
        from ..torch.extract import extract_features

        prepare, how = self._prepare()
        data = _ChunkedImages(images, labels, prepare)
        fp = _sha(images.shape, images.tobytes(), np.asarray(labels, np.int64).tobytes(), how)
        e = self.entry
        if e["kind"] == "zoo":
            from ..zoo.extraction import cache_model_name

            model_name = cache_model_name(e["name"])  # the weights' SHA-256 in the name
        else:
            model_name = "backbone-" + e["spec"]
        data_name = f"suite-{task}-{split}"
        before = self._cached(model_name, data_name, fp)
        if e["kind"] == "zoo":
            from ..zoo.extraction import extract

            h = extract(self.model(), data, "cls", batch_size=self.batch_size, cache_dir=self.cache_dir,
                        model_name=model_name, data_name=data_name, data_fingerprint=fp)
        else:
            f = extract_features(self.model(), data, layers=[""], poolings=("flat",), batch_size=self.batch_size,
                                 device="cpu", autocast=False, cache_dir=self.cache_dir, model_name=model_name,
                                 data_name=data_name, data_fingerprint=fp)
            h = f.view(1, "flat")
        return np.asarray(h, dtype=np.float64).reshape(len(labels), -1), before

    def _cached(self, model_name, data_name, fp):
        if self.cache_dir is None:
            return False
        from ..torch.extract import cache_name

        meta = Path(self.cache_dir) / cache_name(model_name) / cache_name(data_name) / "meta.json"
        try:
            m = json.loads(meta.read_text())
        except (OSError, ValueError):
            return False
        return bool(m.get("complete")) and m.get("data_fingerprint") == fp


def _image_input(enc, task, src, store):
    """One image encoder's features of one task as an :class:`Input` (train part first)."""
    parts, ys, hits = [], [], []
    for split in ("train", "test"):
        key = (task, split)
        if key not in store:
            store[key] = src.load_task(task, split)
        images, labels = store[key]
        x, hit = enc.features(task, split, images, labels)
        parts.append(x)
        ys.append(np.asarray(labels, dtype=np.int64))
        hits.append(hit)
    e = enc.entry
    files = tuple(Path(f"{e['spec']} on {task} ({s})") for s in ("train", "test"))
    inp = Input(np.vstack(parts), np.concatenate(ys), files, (parts[0].shape[0], parts[1].shape[0]),
                ("TRAIN", "TEST"), Path(f"{e['spec']} on {task}"))
    return inp, all(hits)


# ------------------------------------------------------------------ evaluation


def _settings_key(args, protocols):
    return {"version": RESULT_CACHE_VERSION, "k": args.k, "tau": KNN_TAU, "probe_c": [float(c) for c in args.probe_c],
            "seed": args.seed, "draws": args.draws, "shots": args.shots, "protocols": list(protocols)}


def evaluate(name, inp, tr, te, classes, counts, args, protocols, progress, result_dir):
    """One encoder on one task: the chosen protocols; ``(entries, correct, from_cache)``.

    The calls are those of ``repeval leaderboard`` (:func:`._evaluate.knn_curve_predictions`,
    :func:`._evaluate.probe_section`, :func:`._evaluate.low_shot_section`) with the same
    arguments, so the same features and settings give the same numbers.
    """
    X = inp.x
    yi = np.searchsorted(classes, inp.y)
    key = None
    if result_dir is not None:
        key = _sha(X.shape, X.tobytes(), yi.tobytes(), tr.tobytes(), te.tobytes(),
                   json.dumps(_settings_key(args, protocols), sort_keys=True))
        hit = _read_result(result_dir, key, protocols)
        if hit is not None:
            return hit[0], hit[1], True
    Xtr, Xte, ytr, yte = X[tr], X[te], yi[tr], yi[te]
    entries, correct = {}, {}
    if "knn" in protocols:
        pred = knn_curve_predictions(Xtr, ytr, Xte, (args.k,), classes.size, progress, label=f"{name}: k-NN")[0]
        correct["knn"] = pred == yte
        entries["knn"] = acc_entry(correct["knn"])
    with blas_threads(args.blas_threads):
        if "probe" in protocols:
            info, acc, pred = probe_section(Xtr, ytr, Xte, yte, args.seed, args.probe_c, progress,
                                            f"the training part of {inp.path}")
            correct["probe"] = pred == yte
            entries["probe"] = {**acc, "best_C": info["best_C"],
                                "dropped_constant_features": info["dropped_constant_features"]}
        if "fewshot" in protocols:
            entries["fewshot"] = low_shot_section(Xtr, ytr, Xte, yte, counts, args.draws, args.seed,
                                                  shots_list=(args.shots,))[0]
    if key is not None:
        _write_result(result_dir, key, entries, correct)
    return entries, correct, False


def _read_result(result_dir, key, protocols):
    path = Path(result_dir) / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            entries = json.loads(str(z["entries"]))
            correct = {p: z[f"correct_{p}"].astype(bool) for p in PAIRED if p in protocols}
    except (OSError, ValueError, KeyError):
        return None
    if set(entries) != set(protocols):
        return None
    return entries, correct


def _write_result(result_dir, key, entries, correct):
    buf = io.BytesIO()
    np.savez(buf, entries=np.array(json.dumps(entries, default=_plain)),
             **{f"correct_{p}": c for p, c in correct.items()})
    try:
        R.write_files(result_dir, {f"{key}.npz": buf.getvalue()})
    except OSError:
        pass  # a cache that cannot be written only costs time


def _load_feature_inputs(enc_entries, tasks, folders):
    """Each feature folder's input for each task, read and checked: ``{(encoder, task): Input}``."""
    out = {}
    for e in enc_entries:
        if e["kind"] != "features":
            continue
        have = folders[e["name"]]
        for task in tasks:
            if task not in have:
                raise InputError(f"feature folder {e['path']} has no task {task!r} (expected {e['path'] / task}/ "
                                 f"or {e['path'] / task}.npz)")
            inp = read_input(have[task], f"encoder {e['name']}, task {task}")
            refuse_zero_rows(inp)
            out[(e["name"], task)] = inp
    return out


def _choose_tasks(args, enc_entries, src, folders):
    image = any(e["kind"] != "features" for e in enc_entries)
    if args.tasks is not None:
        tasks = args.tasks
        if image:
            avail = tuple(src.available_tasks())
            missing = [t for t in tasks if t not in avail]
            if missing:
                known = tuple(src.TRANSFER_TASKS)
                why = "unknown task" if missing[0] not in known else "task not installed here"
                raise InputError(f"--tasks: {why} {missing[0]!r} (installed: {', '.join(avail) or 'none'}; "
                                 f"the suite: {', '.join(known)})")
        return tasks
    if image:
        tasks = tuple(src.available_tasks())
        if not tasks:
            raise InputError("no task of the suite is installed here (see repeval_ref.datasets.transfer)")
        return tasks
    first = next(e for e in enc_entries if e["kind"] == "features")
    tasks = tuple(folders[first["name"]])
    if not tasks:
        raise InputError(f"feature folder {first['path']} holds no task (a sub-folder or a feature file per task)")
    return tasks


def _tasks_arg(text):
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct comma-separated task names, got {text!r}")
    return names


def _protocols_arg(text):
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in PROTOCOLS]
    if not names or bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct protocols from {','.join(PROTOCOLS)}, got {text!r}")
    return tuple(p for p in PROTOCOLS if p in names)


def _cache_root(args):
    if args.no_cache:
        return None
    if args.cache_dir is not None:
        return Path(args.cache_dir)
    return Path(os.environ.get("REPEVAL_CACHE") or Path.home() / ".cache" / "repeval")


def threads_limited(n):
    """A context in which BLAS, LAPACK and PyTorch's CPU kernels use at most ``n`` threads.

    On the shared 2-core machine a 2-thread PyTorch extraction spent most of its time
    waiting on its slower thread: 5,000 images through a zoo ViT took 69.8 s with two
    threads and 15.1 s with one, on the same busy machine (load average about 11). The
    k-NN's products run under the same limit here, unlike ``report`` and
    ``leaderboard``. ``None``: no limit.
    """
    import contextlib

    import torch

    if n is None:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def limited():
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            with blas_threads(n):
                yield
        finally:
            torch.set_num_threads(before)

    return limited()


def _one_task(task, args, enc_entries, feat_inputs, image_encoders, src, images, cache, names, protocols,
              progress, result_dir, per_task, correct, timing):
    """Features, evaluations and paired tests of every encoder on one task (into ``per_task``, ``correct``).

    ``timing`` accumulates the seconds of each phase: images and features, evaluations,
    paired tests.
    """
    progress.stage(f"task {task}")
    t0 = time.perf_counter()
    data = []
    for e in enc_entries:
        if e["kind"] == "features":
            data.append(feat_inputs[(e["name"], task)])
        else:
            inp, hit = _image_input(image_encoders[e["name"]], task, src, images)
            refuse_zero_rows(inp)
            data.append(inp)
            cache["features_read" if hit else "features_computed"] += 1
    images.clear()
    t1 = time.perf_counter()
    timing["images_and_features_s"] += t1 - t0
    entries = [{"name": e["name"], "path": str(e["path"] or e["spec"])} for e in enc_entries]
    check_same_images(entries, data)
    ref = data[0]
    tr, te, split = split_rows(ref, args.test_fraction, args.seed, f"the labels of {ref.files[0]}")
    y = ref.y
    unseen = np.setdiff1d(np.unique(y[te]), np.unique(y[tr]))
    if unseen.size:
        raise InputError(f"task {task}: test label {unseen[0]} never occurs in the training part ({ref.files[-1]})")
    classes, counts = _check_classes(y[tr], f"the training part of {ref.path}")
    results, task_correct = [], {p: [] for p in correct}
    for e, inp in zip(enc_entries, data):
        ent, corr, hit = evaluate(e["name"], inp, tr, te, classes, counts, args, protocols, progress, result_dir)
        cache["evaluations_read" if hit else "evaluations_computed"] += 1
        results.append({"name": e["name"], "dim": int(inp.x.shape[1]), **ent})
        for p in task_correct:
            task_correct[p].append(corr[p])
    t2 = time.perf_counter()
    timing["evaluations_s"] += t2 - t1
    pairs = {p: pairwise(names, task_correct[p], args.boot, args.seed, args.correction) for p in task_correct}
    for p in task_correct:
        correct[p][task] = np.stack(task_correct[p])
    timing["paired_tests_s"] += time.perf_counter() - t2
    card = _task_card(src, task) if task in tuple(src.TRANSFER_TASKS) else {"name": task}
    per_task[task] = {"card": card, "split": split, "n_train": int(tr.size), "n_test": int(te.size),
                      "n_classes": int(classes.size), "results": results, "pairs": pairs}


def run_suite(args, progress):
    """Everything but the files: the suite's result as one plain dict."""
    from ..multiple_testing import CORRECTIONS
    from ..rank_agreement import mean_rank, rank_bootstrap, task_ranks, tau_b_matrix

    t_start = time.perf_counter()
    enc_entries = resolve_encoders(args.encoders, args.backbone, args.weights, args.random_init)
    folders = {e["name"]: folder_task_entries(e["path"]) for e in enc_entries if e["kind"] == "features"}
    src = task_source()
    tasks = _choose_tasks(args, enc_entries, src, folders)
    protocols = args.protocols
    root = _cache_root(args)
    feat_dir = None if root is None else root / "zoo-features"
    result_dir = None if root is None else root / "suite-results"
    feat_inputs = _load_feature_inputs(enc_entries, tasks, folders)
    image_encoders = {e["name"]: ImageEncoder(e, feat_dir, args.image_size, args.batch_size)
                      for e in enc_entries if e["kind"] != "features"}
    names = [e["name"] for e in enc_entries]
    images = {}
    cache = {"features_read": 0, "features_computed": 0, "evaluations_read": 0, "evaluations_computed": 0}
    per_task, correct = {}, {p: {} for p in PAIRED if p in protocols}
    timing = {"images_and_features_s": 0.0, "evaluations_s": 0.0, "paired_tests_s": 0.0}
    with threads_limited(args.blas_threads):
        for task in tasks:
            _one_task(task, args, enc_entries, feat_inputs, image_encoders, src, images, cache, names, protocols,
                      progress, result_dir, per_task, correct, timing)
    progress.stage("ranks, mean rank and Kendall's tau (bootstrap)")
    t_rank = time.perf_counter()
    ranking = {}
    for p in protocols:
        if p in PAIRED:
            rb = rank_bootstrap([correct[p][t] for t in tasks], n_boot=args.rank_boot, seed=args.seed)
            ranking[p] = {"tasks": list(tasks), "ranks": rb["ranks"], "mean_rank": rb["mean_rank"],
                          "mean_rank_interval": rb["mean_rank_interval"], "tau": rb["tau"],
                          "tau_interval": rb["tau_interval"], "tau_defined_replicates": rb["tau_defined"],
                          "n_boot": rb["n_boot"], "interval": "bootstrap"}
        else:
            used = [t for t in tasks if all(r["fewshot"]["mean"] is not None for r in per_task[t]["results"])]
            if not used:
                ranking[p] = None
                continue
            scores = np.array([[per_task[t]["results"][i]["fewshot"]["mean"] for t in used]
                               for i in range(len(names))])
            ranking[p] = {"tasks": used, "ranks": task_ranks(scores), "mean_rank": mean_rank(scores),
                          "mean_rank_interval": None, "tau": tau_b_matrix(scores), "tau_interval": None,
                          "tau_defined_replicates": None, "n_boot": None,
                          "interval": "none: the low-shot figure is a mean over support draws, with no "
                                      "right/wrong answer per test image to resample"}
    settings = {"k": args.k, "tau": KNN_TAU, "seed": args.seed, "draws": args.draws, "shots": args.shots,
                "n_boot": args.boot, "rank_boot": args.rank_boot, "correction": args.correction,
                "correction_name": CORRECTIONS[args.correction], "alpha": args.alpha,
                "test_fraction": args.test_fraction, "probe_C_grid": [float(c) for c in args.probe_c],
                "protocols": list(protocols), "cache_dir": None if root is None else str(root)}
    return {"settings": settings, "tasks": list(tasks),
            "encoders": [{k: (str(v) if isinstance(v, Path) else v) for k, v in e.items()} for e in enc_entries],
            "per_task": per_task, "ranking": ranking, "cache": cache,
            "timing": {**{k: round(v, 2) for k, v in timing.items()},
                       "rank_bootstrap_s": round(time.perf_counter() - t_rank, 2)},
            "seconds": round(time.perf_counter() - t_start, 2)}


# ----------------------------------------------------------------------- rendering


def _cell(suite, p, t, i, plus="±", rank=True, spread=True):
    r = suite["per_task"][t]["results"][i][p]
    rk = suite["ranking"].get(p)
    if p == "fewshot":
        if r["mean"] is None:
            return "skipped"
        text = f"{100 * r['mean']:.2f}" + (f" {plus} {100 * r['std']:.2f}" if spread else "")
    else:
        lo, hi = r["wilson95"]
        text = f"{100 * r['accuracy']:.2f}" + (f" [{100 * lo:.2f}, {100 * hi:.2f}]" if spread else "")
    if rank and rk is not None and t in rk["tasks"]:
        text += f" ({_rank_text(rk['ranks'][i][rk['tasks'].index(t)])})"
    return text


def _rank_text(r):
    return f"{r:g}"


def _mean_rank_text(rk, i):
    if rk is None:
        return "n/a"
    text = f"{rk['mean_rank'][i]:.2f}"
    if rk["mean_rank_interval"] is not None:
        lo, hi = rk["mean_rank_interval"][i]
        text += f" [{lo:.2f}, {hi:.2f}]"
    return text


def _order(suite, p):
    rk = suite["ranking"].get(p)
    n = len(suite["encoders"])
    if rk is None:
        return list(range(n))
    return sorted(range(n), key=lambda i: (rk["mean_rank"][i], i))


def accuracy_rows(suite, p, plus="±", spread=True):
    """One row per encoder (best mean rank first): its cell on every task, then its mean rank.

    ``spread=False`` leaves the Wilson intervals and standard deviations out of the cells
    (the terminal's table; the files keep them).
    """
    rows = []
    for i in _order(suite, p):
        rows.append([suite["encoders"][i]["name"]] + [_cell(suite, p, t, i, plus, spread=spread)
                                                      for t in suite["tasks"]]
                    + [_mean_rank_text(suite["ranking"].get(p), i)])
    return rows


def accuracy_headers(suite, p):
    rk = suite["ranking"].get(p)
    what = "mean rank" if rk is None or rk["mean_rank_interval"] is None else \
        f"mean rank [95% bootstrap, {rk['n_boot']} replicates]"
    return ["encoder"] + list(suite["tasks"]) + [what]


def tau_rows(suite, p):
    rk = suite["ranking"][p]
    ts = rk["tasks"]
    rows = []
    for a, ta in enumerate(ts):
        row = [ta]
        for b in range(len(ts)):
            v = rk["tau"][a][b]
            text = "n/a" if v is None or not np.isfinite(v) else f"{v:+.2f}"
            if rk["tau_interval"] is not None and a != b:
                lo, hi = rk["tau_interval"][a][b]
                if lo is not None and np.isfinite(lo):
                    text += f" [{lo:+.2f}, {hi:+.2f}]"
            row.append(text)
        rows.append(row)
    return rows


def flips(suite, p):
    """Pairs of tasks whose rankings may disagree: tau's interval reaches 0 (or tau <= 0 without one)."""
    rk = suite["ranking"].get(p)
    if rk is None:
        return []
    ts, out = rk["tasks"], []
    for a in range(len(ts)):
        for b in range(a + 1, len(ts)):
            tau = rk["tau"][a][b]
            if rk["tau_interval"] is not None:
                lo = rk["tau_interval"][a][b][0]
                if lo is None or not np.isfinite(lo) or lo <= 0:
                    out.append((ts[a], ts[b]))
            elif tau is None or not np.isfinite(tau) or tau <= 0:
                out.append((ts[a], ts[b]))
    return out


PAIR_HEADERS = ["pair", "difference, pts [95% paired bootstrap]", "images only one gets right", "McNemar p",
                "adjusted p", "separated"]


def pair_rows(suite, p, t, alpha):
    rows = []
    for q in suite["per_task"][t]["pairs"][p]:
        lo, hi = q["bootstrap95"]
        sep = q["mcnemar_p_adjusted"] < alpha and (lo > 0 or hi < 0)
        rows.append([f"{q['b']} - {q['a']}", f"{100 * q['gain_b_minus_a']:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]",
                     str(q["discordant"]), R.fmt(q["mcnemar_p"]), R.fmt(q["mcnemar_p_adjusted"]),
                     "yes" if sep else "no"])
    return rows


def task_rows(suite):
    rows = []
    for t in suite["tasks"]:
        d = suite["per_task"][t]
        c = d["card"]
        size = c.get("image_size")
        rows.append([t, c.get("title", "—"), str(d["n_train"]), str(d["n_test"]), str(d["n_classes"]),
                     "—" if size is None else " x ".join(map(str, size)), c.get("shift", "—"),
                     c.get("licence", "—")])
    return rows


TASK_HEADERS = ["task", "title", "train", "test", "classes", "image size", "shift", "licence"]


def settings_text(suite):
    s = suite["settings"]
    rules = set()
    for t in suite["tasks"]:
        sp = suite["per_task"][t]["split"]
        rules.add(split_text(sp).split("(", 1)[1].rstrip(")") if sp["rule"] == "stratified" else
                  "each task's own train and test parts, never re-split")
    n_t = len(suite["tasks"])
    return (f"{len(suite['encoders'])} encoders on {n_t} task{'s' if n_t != 1 else ''}; split rule: "
            f"{'; '.join(sorted(rules))}; seed {s['seed']} (probe validation split, low-shot draws, bootstraps); "
            f"{s['shots']}-shot figures are the mean and standard deviation over {s['draws']} draws of the "
            "support set, not an interval.")


def stats_text(suite):
    s = suite["settings"]
    return (f"Each accuracy carries its 95% Wilson interval in brackets and the encoder's rank within the task "
            "in parentheses (1 is best; equal accuracies share the average rank). The mean rank's interval and "
            f"Kendall's tau-b intervals come from {s['rank_boot']} bootstrap replicates that resample the test "
            "images within each task (the same images for every encoder) and re-rank. Pairs within each task: "
            f"paired bootstrap interval ({s['n_boot']} replicates) and exact McNemar p, adjusted across the "
            f"pairs of that task by {s['correction_name']}; a pair is separated when the adjusted p is below "
            f"{s['alpha']} and the interval excludes 0.")


def render_markdown(suite):
    s = suite["settings"]
    md = ["# repeval suite", "", settings_text(suite), "", stats_text(suite), "", "## Tasks", "",
          R.md_table(task_rows(suite), TASK_HEADERS), ""]
    for p in s["protocols"]:
        title = protocol_title(p, s)
        md += [f"## {title}", "", R.md_table(accuracy_rows(suite, p), accuracy_headers(suite, p)), ""]
        rk = suite["ranking"].get(p)
        if rk is None:
            md += ["No task has this figure for every encoder; no ranking.", ""]
            continue
        if p == "fewshot":
            md += [f"Ranks and tau without intervals: {rk['interval']}.", ""]
        md += [f"### Rank agreement between tasks ({title})", "",
               "Kendall's tau-b between the two tasks' rankings of the encoders"
               + (" [95% bootstrap interval]." if rk["tau_interval"] is not None else "."), "",
               R.md_table(tau_rows(suite, p), ["task"] + rk["tasks"]), ""]
        fl = flips(suite, p)
        md += [("Task pairs whose rankings may disagree (tau's interval reaches 0): "
                + ", ".join(f"{a} / {b}" for a, b in fl) + ".") if fl else
               "Every pair of tasks ranks the encoders alike (every tau interval above 0).", ""]
    md += ["## Heat map", "", "![Accuracy of every encoder on every task, one panel per protocol]"
           "(suite_heatmap.png)", ""]
    for p in s["protocols"]:
        if p not in PAIRED:
            continue
        md += [f"## Pairs within each task: {protocol_title(p, s)}", ""]
        for t in suite["tasks"]:
            md += [f"### {t}", "", R.md_table(pair_rows(suite, p, t, s["alpha"]), PAIR_HEADERS), ""]
    return "\n".join(md) + "\n"


def render_csv(suite):
    buf = io.StringIO()
    w = csv.writer(buf)
    head = ["protocol", "encoder", "kind", "mean_rank", "mean_rank_low", "mean_rank_high"]
    for t in suite["tasks"]:
        head += [t, f"{t}_wilson_low", f"{t}_wilson_high", f"{t}_std_over_draws", f"{t}_rank"]
    head += ["seed"]
    w.writerow(head)
    s = suite["settings"]
    for p in s["protocols"]:
        rk = suite["ranking"].get(p)
        for i in _order(suite, p):
            e = suite["encoders"][i]
            row = [p, e["name"], e["kind"]]
            if rk is None:
                row += ["", "", ""]
            else:
                lo, hi = rk["mean_rank_interval"][i] if rk["mean_rank_interval"] is not None else ("", "")
                row += [rk["mean_rank"][i], lo, hi]
            for t in suite["tasks"]:
                r = suite["per_task"][t]["results"][i][p]
                rank = rk["ranks"][i][rk["tasks"].index(t)] if rk is not None and t in rk["tasks"] else ""
                if p == "fewshot":
                    row += ["" if r["mean"] is None else r["mean"], "", "",
                            "" if r["std"] is None else r["std"], rank]
                else:
                    row += [r["accuracy"], *r["wilson95"], "", rank]
            w.writerow(row + [s["seed"]])
    return buf.getvalue()


def heatmap_png(suite):
    """One panel per protocol: accuracy (colour and number) and rank of every encoder on every task."""
    plt = R._pyplot()
    s = suite["settings"]
    ps = s["protocols"]
    names = [e["name"] for e in suite["encoders"]]
    tasks = suite["tasks"]
    w = 1.0 + 0.95 * len(tasks)
    fig, axes = plt.subplots(1, len(ps), figsize=(w * len(ps) + 1.5, 0.45 * len(names) + 2.2), squeeze=False)
    for ax, p in zip(axes[0], ps):
        order = _order(suite, p)
        acc = np.full((len(order), len(tasks)), np.nan)
        for r, i in enumerate(order):
            for c, t in enumerate(tasks):
                e = suite["per_task"][t]["results"][i][p]
                v = e["mean"] if p == "fewshot" else e["accuracy"]
                acc[r, c] = np.nan if v is None else 100 * v
        im = ax.imshow(acc, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        rk = suite["ranking"].get(p)
        for r, i in enumerate(order):
            for c, t in enumerate(tasks):
                if not np.isfinite(acc[r, c]):
                    continue
                label = f"{acc[r, c]:.1f}"
                if rk is not None and t in rk["tasks"]:
                    label += f"\n#{_rank_text(rk['ranks'][i][rk['tasks'].index(t)])}"
                ax.text(c, r, label, ha="center", va="center", fontsize=6.5,
                        color="black" if acc[r, c] > 55 else "white")
        ax.set_xticks(range(len(tasks)), tasks, rotation=40, ha="right", fontsize=7)
        ax.set_yticks(range(len(order)), [names[i] for i in order], fontsize=7)
        ax.set_title({"knn": f"k-NN (k={s['k']})", "probe": "linear probe",
                      "fewshot": f"{s['shots']}-shot NCM"}[p], fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label="accuracy, %")
    return R.figure_bytes(fig, tight=True)


HEATMAP_ALT = ("Heat map of test accuracy, one panel per protocol: rows are the encoders (ordered by mean "
               "rank), columns the tasks; each cell shows the accuracy in percent and the encoder's rank on "
               "that task. The same numbers are in the tables above.")

_STYLE = ("body{font-family:sans-serif;color:#1a1a1a;background:#fff;max-width:80em;margin:2em auto;padding:0 1em;"
          "line-height:1.45}table{border-collapse:collapse;margin:1em 0}caption{text-align:left;font-weight:bold;"
          "padding:.3em 0}td,th{border:1px solid #767676;padding:3px 7px;font-size:90%;text-align:left}"
          "thead th{background:#e8e8e8;color:#1a1a1a}tbody th{background:#f4f4f4;color:#1a1a1a;font-weight:normal}"
          ".wide{overflow-x:auto}img{max-width:100%;height:auto}")


def _html_table(rows, headers, caption, row_headers=True):
    head = "".join(f'<th scope="col">{html.escape(str(h))}</th>' for h in headers)
    body = []
    for r in rows:
        cells = [f'<th scope="row">{html.escape(str(r[0]))}</th>' if row_headers else
                 f"<td>{html.escape(str(r[0]))}</td>"]
        cells += [f"<td>{html.escape(str(c))}</td>" for c in r[1:]]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="wide"><table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def render_html(suite, heatmap):
    s = suite["settings"]
    e = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>repeval suite</title><style>{_STYLE}</style></head><body><main>",
             "<h1>repeval suite</h1>", f"<p>{e(settings_text(suite))}</p>", f"<p>{e(stats_text(suite))}</p>",
             "<h2>Tasks</h2>", _html_table(task_rows(suite), TASK_HEADERS, "The tasks of the suite")]
    for p in s["protocols"]:
        title = protocol_title(p, s)
        parts += [f"<h2>{e(title)}</h2>",
                  _html_table(accuracy_rows(suite, p), accuracy_headers(suite, p),
                              f"{title}: accuracy in % by encoder and task")]
        rk = suite["ranking"].get(p)
        if rk is None:
            parts.append("<p>No task has this figure for every encoder; no ranking.</p>")
            continue
        if p == "fewshot":
            parts.append(f"<p>Ranks and tau without intervals: {e(rk['interval'])}.</p>")
        parts.append(_html_table(tau_rows(suite, p), ["task"] + rk["tasks"],
                                 f"{title}: Kendall's tau-b between tasks' rankings"))
        fl = flips(suite, p)
        parts.append("<p>" + e(("Task pairs whose rankings may disagree (tau's interval reaches 0): "
                                + ", ".join(f"{a} / {b}" for a, b in fl) + ".") if fl else
                               "Every pair of tasks ranks the encoders alike.") + "</p>")
    data = base64.b64encode(heatmap).decode()
    parts += ["<h2>Heat map</h2>", f'<figure><img alt="{e(HEATMAP_ALT)}" src="data:image/png;base64,{data}">'
              "<figcaption>Accuracy (colour and number) and rank (#) of every encoder on every task."
              "</figcaption></figure>"]
    for p in s["protocols"]:
        if p not in PAIRED:
            continue
        title = protocol_title(p, s)
        parts.append(f"<h2>Pairs within each task: {e(title)}</h2>")
        for t in suite["tasks"]:
            parts += [f"<h3>{e(t)}</h3>", _html_table(pair_rows(suite, p, t, s["alpha"]), PAIR_HEADERS,
                                                      f"{title}, task {t}: every pair of encoders")]
    parts.append("</main></body></html>\n")
    return "".join(parts)


def _plain(obj):
    if isinstance(obj, np.ndarray):
        return _plain_tree(obj.tolist())
    if isinstance(obj, np.generic):
        return _plain_tree(obj.item())
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _plain_tree(v):
    """NumPy values and NaN made JSON-safe (NaN -> None), recursively."""
    if isinstance(v, dict):
        return {k: _plain_tree(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain_tree(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain_tree(v.tolist())
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    if isinstance(v, Path):
        return str(v)
    return v


def _print(suite, written):
    s = suite["settings"]
    print(R._wrap(settings_text(suite)))
    for p in s["protocols"]:
        print(f"\n{protocol_title(p, s).replace('±', '+-')}, % (rank):")
        print(R.table(accuracy_rows(suite, p, "+-", spread=False), accuracy_headers(suite, p)))
        fl = flips(suite, p)
        if fl:
            print(R._wrap("task pairs whose rankings may disagree: " + ", ".join(f"{a} / {b}" for a, b in fl)))
    c = suite["cache"]
    print(f"\nfeatures: {c['features_read']} read from the cache, {c['features_computed']} computed; "
          f"evaluations: {c['evaluations_read']} read from the cache, {c['evaluations_computed']} computed; "
          f"{suite['seconds']:.1f} s")
    print(R._wrap("intervals, standard deviations and every pair: suite.md and suite.html"))
    print(f"wrote {', '.join(str(w) for w in written)}")


def cmd_suite(args):
    progress = Progress(enabled=not args.quiet)
    outdir = Path(args.out)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"cannot create output directory {outdir}: a file of that name exists")
    suite = _plain_tree(run_suite(args, progress))
    progress.stage("tables, heat map and files")
    heat = heatmap_png(suite)
    files = {"suite.json": json.dumps(suite, indent=1, default=_plain), "suite.md": render_markdown(suite),
             "suite.csv": render_csv(suite), "suite.html": render_html(suite, heat), "suite_heatmap.png": heat}
    try:
        written = R.write_files(outdir, files)
    except OSError as exc:
        raise InputError(f"cannot write the suite to {outdir}: {_short(exc)}") from None
    _print(suite, written)
    return 0


def add_suite_parser(sub, files_help, positive_int, fraction, c_grid, wrap):
    from ..multiple_testing import CORRECTIONS

    sp = sub.add_parser(
        "suite", help="many encoders on the transfer suite's tasks: a model x task table",
        description=wrap("Evaluate encoders (zoo names, zoo for all of them, feature folders with one "
                         "entry per task, or --backbone) on every task of the transfer suite: weighted "
                         "k-NN, the linear probe (C chosen on a split of TRAIN) and low-shot nearest class "
                         "mean, each with the defaults of report and leaderboard. Writes a model x task "
                         "table (suite.csv, .md, .json and a self-contained .html, plus a heat map) with a "
                         "95% Wilson interval per cell, the rank per task, the mean rank with a bootstrap "
                         "interval, Kendall's tau-b between every pair of tasks with its interval, and "
                         "paired tests within each task corrected across pairs (Holm or Benjamini-"
                         "Hochberg). Features and evaluations are cached on disk by fingerprint. An all-zero "
                         "feature row is refused; a task's train and test parts are never re-split."),
        epilog=files_help, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.add_argument("encoders", metavar="ENCODER", nargs="*",
                    help="zoo:NAME or NAME (a zoo encoder), zoo (all of them), or a feature folder")
    sp.add_argument("--backbone", default=None, metavar="SPEC",
                    help="one more encoder: torchvision:ARCH or timm:ARCH (with --weights or --random-init), "
                         "or zoo:NAME")
    sp.add_argument("--weights", default=None, metavar="PATH", help="local weights file of the --backbone")
    sp.add_argument("--random-init", action="store_true",
                    help="run the --backbone untrained (its features mean nothing)")
    sp.add_argument("--image-size", type=positive_int, default=224, metavar="N",
                    help="side the task images are resized to for a torchvision/timm --backbone "
                         "(default: %(default)s; the zoo's encoders use their own input sizes)")
    sp.add_argument("--tasks", type=_tasks_arg, default=None, metavar="T1,T2,...",
                    help="tasks to run (default: every installed task of the suite, or the tasks of the "
                         "first feature folder)")
    sp.add_argument("--protocols", type=_protocols_arg, default=PROTOCOLS, metavar="P1,P2,...",
                    help="from knn,probe,fewshot (default: all three)")
    sp.add_argument("--out", default="repeval_suite", metavar="DIR",
                    help="output directory, created if needed (default: %(default)s)")
    sp.add_argument("--seed", type=int, default=0,
                    help="seed of the split of single files, the probe split, the draws and the bootstraps "
                         "(default: %(default)s)")
    sp.add_argument("--k", type=positive_int, default=KNN_HEADLINE_KS[0],
                    help="k of the weighted k-NN (default: %(default)s)")
    sp.add_argument("--shots", type=positive_int, default=SUITE_SHOTS,
                    help="labelled images per class of the low-shot protocol (default: %(default)s)")
    sp.add_argument("--draws", type=positive_int, default=LOW_SHOT_DRAWS,
                    help="low-shot support draws, >= 2 (default: %(default)s)")
    sp.add_argument("--probe-c", type=c_grid, default=PROBE_CS, metavar="C1,C2,...",
                    help="candidate C of the probe (default: 1e-4,...,100)")
    sp.add_argument("--test-fraction", type=fraction, default=TEST_FRACTION,
                    help="share held out when a feature folder gives a task as one file; task splits and "
                         "loop folders keep their own parts (default: %(default)s)")
    sp.add_argument("--correction", choices=tuple(CORRECTIONS), default="holm",
                    help="correction across the pairs of encoders within each task (default: %(default)s)")
    sp.add_argument("--alpha", type=fraction, default=0.05,
                    help="level below which an adjusted p separates two encoders (default: %(default)s)")
    sp.add_argument("--boot", type=positive_int, default=PAIRED_BOOTSTRAP,
                    help="paired bootstrap replicates per pair (default: %(default)s)")
    sp.add_argument("--rank-boot", type=positive_int, default=RANK_BOOTSTRAP,
                    help="bootstrap replicates of the mean-rank and tau intervals (default: %(default)s)")
    sp.add_argument("--cache-dir", default=None, metavar="DIR",
                    help="cache root: features in DIR/zoo-features, evaluations in DIR/suite-results "
                         "(default: $REPEVAL_CACHE, else ~/.cache/repeval)")
    sp.add_argument("--no-cache", action="store_true", help="neither read nor write any cache")
    sp.add_argument("--batch-size", type=positive_int, default=None,
                    help=f"extraction batch (default: {EFFICIENTNET_BATCH} for efficientnet_lite0, "
                         f"{DEFAULT_BATCH} for the others)")
    sp.add_argument("--blas-threads", type=positive_int, default=1, metavar="N",
                    help="threads of PyTorch's extraction and of BLAS and LAPACK in the k-NN, the probe "
                         "fits and the low-shot means; on a busy machine one thread is often faster "
                         "(default: %(default)s)")
    sp.add_argument("--quiet", action="store_true", help="no progress bars")
    sp.set_defaults(func=cmd_suite)


__all__ = ["cmd_suite", "add_suite_parser", "run_suite", "resolve_encoders", "task_source", "evaluate",
           "PROTOCOLS", "SUITE_SHOTS", "RANK_BOOTSTRAP"]
