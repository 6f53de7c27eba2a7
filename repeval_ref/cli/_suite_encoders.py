"""Encoders of ``repeval suite`` and their caches: tasks, zoo names, backbones, feature folders.

An image encoder (a zoo encoder, or a torchvision/timm backbone) is loaded once and its
features of each task are extracted once and cached on disk, keyed by a fingerprint of
the weights and of the images (:func:`repeval_ref.zoo.extraction.extract`); a feature
folder holds one input per task in a format ``repeval report`` reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import numpy as np

from ._evaluate import blas_threads
from ._inputs import (
    KEPT_DTYPES,
    Input,
    InputError,
    _short,
    check_encoder_list,
    read_input,
    refuse_zero_rows,
)
from .leaderboard import _is_encoder_path


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


def load_feature_inputs(enc_entries, tasks, folders):
    """Each feature folder's input for each task, read and checked: ``{(encoder, task): Input}``."""
    out = {}
    for e in enc_entries:
        if e["kind"] != "features":
            continue
        have = folders[e["name"]]
        for task in tasks:
            if task not in have:
                raise InputError(
                    f"feature folder {e['path']} has no task {task!r} (expected "
                    f"{e['path'] / task}/ or {e['path'] / task}.npz)"
                )
            inp = read_input(have[task], f"encoder {e['name']}, task {task}")
            refuse_zero_rows(inp)
            out[(e["name"], task)] = inp
    return out


def choose_tasks(args, enc_entries, src, folders):
    """The tasks of a suite run: ``args.tasks`` (checked), else those installed for image
    encoders, else those of the first feature folder."""
    image = any(e["kind"] != "features" for e in enc_entries)
    if args.tasks is not None:
        tasks = args.tasks
        if image:
            avail = tuple(src.available_tasks())
            missing = [t for t in tasks if t not in avail]
            if missing:
                known = tuple(src.TRANSFER_TASKS)
                why = "unknown task" if missing[0] not in known else "task not installed here"
                raise InputError(
                    f"--tasks: {why} {missing[0]!r} (installed: {', '.join(avail) or 'none'}; "
                    f"the suite: {', '.join(known)})"
                )
        return tasks
    if image:
        tasks = tuple(src.available_tasks())
        if not tasks:
            raise InputError(
                "no task of the suite is installed here (see repeval_ref.datasets.transfer)"
            )
        return tasks
    first = next(e for e in enc_entries if e["kind"] == "features")
    tasks = tuple(folders[first["name"]])
    if not tasks:
        raise InputError(
            f"feature folder {first['path']} holds no task (a sub-folder or a feature file per "
            "task)"
        )
    return tasks


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
            name = item[len("zoo:") :] if item.startswith("zoo:") else item
            if name not in known:
                raise InputError(
                    f"unknown zoo encoder {name!r} (from {item}); known: {', '.join(known)}"
                )
            out.append({"name": name, "kind": "zoo", "spec": f"zoo:{name}", "path": None})
        elif p.is_dir():
            out.append({"name": p.name, "kind": "features", "spec": str(p), "path": p})
        elif p.exists():
            raise InputError(
                f"{p} is a file; give a feature folder (one entry per task), a zoo name or zoo:NAME"
            )
        else:
            raise InputError(
                f"not found: {p} (neither a feature folder nor a zoo encoder; zoo encoders: "
                f"{', '.join(known)})"
            )
    if backbone is not None:
        out.append(_backbone_entry(backbone, weights, random_init, known))
    elif weights is not None or random_init:
        raise InputError("--weights and --random-init are for a --backbone")
    if not out:
        raise InputError("no encoders given (zoo names, zoo, feature folders or --backbone)")
    check_encoder_list(
        out, "encoder {name!r} is given twice; each encoder may appear once", "a suite", "spec"
    )
    return out


def _backbone_entry(spec, weights, random_init, known):
    library, _, arch = spec.partition(":")
    if library == "zoo":
        if weights is not None or random_init:
            raise InputError(
                f"--backbone {spec} loads the weights shipped with it; leave out --weights "
                "and --random-init"
            )
        if arch not in known:
            raise InputError(
                f"unknown zoo encoder {arch!r} (from --backbone {spec}); known: {', '.join(known)}"
            )
        return {"name": arch, "kind": "zoo", "spec": spec, "path": None}
    if library not in ("torchvision", "timm") or not arch:
        raise InputError(
            f"--backbone must be torchvision:ARCH, timm:ARCH or zoo:NAME, got {spec!r}"
        )
    if (weights is None) == (not random_init):
        raise InputError(
            f"--backbone {spec} needs exactly one of --weights PATH (a local state dict) and "
            "--random-init (an untrained network, whose features mean nothing)"
        )
    if weights is not None and not Path(weights).is_file():
        raise InputError(f"not found: {weights} (--weights)")
    return {
        "name": spec,
        "kind": "backbone",
        "spec": spec,
        "path": None,
        "weights": None if weights is None else str(weights),
        "random_init": bool(random_init),
    }


def folder_task_entries(folder):
    """``{task: path}`` of a feature folder: its sub-folders and feature files, named by stem."""
    found = {}
    for q in sorted(folder.iterdir()):
        if q.name.startswith(".") or not _is_encoder_path(q):
            continue
        task = q.name if q.is_dir() else q.stem
        if task in found:
            raise InputError(
                f"feature folder {folder} holds task {task!r} twice ({found[task].name} and "
                f"{q.name})"
            )
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
            self._x = self.prepare(self.images[c * self.chunk : (c + 1) * self.chunk])
            self._at = c
        return self._x[i - c * self.chunk], self.labels[i]


#: extraction batch by default; EfficientNet-Lite0 (96-px inputs, 96-channel maps at 48 x 48)
#: runs faster in batches whose activations stay in the CPU's caches (same numbers: the
#: network is evaluated image by image either way)
DEFAULT_BATCH = 256
EFFICIENTNET_BATCH = 32


def default_batch_size(entry):
    """The extraction batch of an encoder when ``--batch-size`` is not given."""
    return (
        EFFICIENTNET_BATCH
        if entry["kind"] == "zoo" and entry["name"] == "efficientnet_lite0"
        else DEFAULT_BATCH
    )


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

            return (
                lambda x: encoder_inputs(e["name"], x)
            ), f"zoo.encoder_inputs:{e['name']}:{EFFICIENTNET_SIZE}"
        model = self.model()
        size = self.image_size
        prep = getattr(model, "prepare_inputs", None)
        if callable(prep):
            return (lambda x: prep(x, size=size)), f"prepare_inputs:{size}"
        from ..torch.data import IMAGENET_MEAN, IMAGENET_STD
        from ..zoo.efficientnet import prepare_images

        return (
            (lambda x: prepare_images(x, size=size, mean=IMAGENET_MEAN, std=IMAGENET_STD)),
            f"prepare_images:{size}:imagenet",
        )

    def features(self, task, split, images, labels):
        """Features (n, d) of one split of one task, from the cache when it holds them; (array,
        hit).

        Float32 features (the extraction's) stay float32.
        """
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

            h = extract(
                self.model(),
                data,
                "cls",
                batch_size=self.batch_size,
                cache_dir=self.cache_dir,
                model_name=model_name,
                data_name=data_name,
                data_fingerprint=fp,
            )
        else:
            f = extract_features(
                self.model(),
                data,
                layers=[""],
                poolings=("flat",),
                batch_size=self.batch_size,
                device="cpu",
                autocast=False,
                cache_dir=self.cache_dir,
                model_name=model_name,
                data_name=data_name,
                data_fingerprint=fp,
            )
            h = f.view(1, "flat")
        x = np.asarray(h).reshape(len(labels), -1)
        return (x if x.dtype in KEPT_DTYPES else x.astype(np.float64)), before

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
    inp = Input(
        np.vstack(parts),
        np.concatenate(ys),
        files,
        (parts[0].shape[0], parts[1].shape[0]),
        ("TRAIN", "TEST"),
        Path(f"{e['spec']} on {task}"),
    )
    return inp, all(hits)


def threads_limited(n):
    """A context in which BLAS, LAPACK and PyTorch's CPU kernels use at most ``n`` threads.

    The suite's k-NN products run under the same limit, unlike those of ``report`` and
    ``leaderboard``. ``None``: no limit.
    """
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


__all__ = [
    "task_source",
    "resolve_encoders",
    "folder_task_entries",
    "ImageEncoder",
    "default_batch_size",
    "threads_limited",
    "DEFAULT_BATCH",
    "EFFICIENTNET_BATCH",
]
