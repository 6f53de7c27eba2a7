"""The plain-data codec between the grader and the clean room's child process.

Values travel as tagged JSON-ready dicts, never as pickles: arrays as ``.npy`` bytes
(base64, loaded with ``allow_pickle=False``), a :class:`numpy.random.Generator` as its
bit generator's state, a ``torch.Tensor`` as its array and ``requires_grad``, and a
``torch.nn.Sequential`` of standard layers (:data:`LAYERS`) as its layers' constructor
arguments and state dict.

Both ends use this module: the grader (:mod:`autograder.cleanroom_process`) encodes the
arguments strictly (:func:`encode` raises :class:`Unsupported` for what cannot travel, so
that check is left unverified) and decodes what comes back (:func:`decode`; a module comes
back as a :class:`ModuleState`, copied into the grader's module by :func:`write_back`).
The child (:mod:`autograder.cleanroom_child`) loads this file by its path, without the
``autograder`` package, rebuilds modules (``decode(d, build_modules=True)``) and sends
anything it cannot encode as an opaque stand-in (``encode(x, lenient=True)``).

This module imports only the standard library and NumPy (torch where a value is a torch
object), never ``repeval_ref`` or another part of ``autograder``: it runs in the child next
to the student's code.
"""
import base64
import io
import json
import sys

import numpy as np

__all__ = ["Unsupported", "ModuleState", "LAYERS", "encode", "decode", "is_module",
           "module_spec", "module_state", "build_module", "write_back", "to_npy", "from_npy"]


class Unsupported(TypeError):
    """An argument of a check that cannot travel as plain data (a model, a callable)."""


def to_npy(arr):
    """``arr`` (array-like) as base64 text of its ``.npy`` bytes (C order, no pickle)."""
    buf = io.BytesIO()
    np.save(buf, np.array(arr, order="C", copy=True), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def from_npy(text):
    """Inverse of :func:`to_npy` (``allow_pickle=False``)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be base64 text, got {type(text).__name__}")
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and type(x).__name__ == "Tensor"


def is_module(x):
    """True if ``x`` is a ``torch.nn.Module`` (torch is not imported for this: an object
    can only be a torch module once torch is imported)."""
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].nn.Module)


#: torch.nn layers that travel as plain data: name -> (constructor arguments read from a
#: layer, the layer rebuilt from them with ``torch.nn``)
LAYERS = {
    "Linear": (lambda m: [m.in_features, m.out_features, m.bias is not None],
               lambda nn, a: nn.Linear(a[0], a[1], bias=a[2])),
    **{k: (lambda m: [m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats],
           lambda nn, a, k=k: getattr(nn, k)(a[0], eps=a[1], momentum=a[2], affine=a[3],
                                             track_running_stats=a[4]))
       for k in ("BatchNorm1d", "BatchNorm2d")},
    "Dropout": (lambda m: [m.p], lambda nn, a: nn.Dropout(a[0])),
    **{k: (lambda m: [], lambda nn, a, k=k: getattr(nn, k)())
       for k in ("ReLU", "Tanh", "GELU", "Sigmoid", "Identity")},
}


def module_spec(m):
    """A torch module as nested plain data (``Sequential`` of the layers of
    :data:`LAYERS`); raises :class:`Unsupported` for anything else (hooks, custom
    classes, subclasses of those layers)."""
    name = type(m).__name__
    if type(m).__module__.split(".")[:3] != ["torch", "nn", "modules"]:
        raise Unsupported(f"a torch module of class {name}")
    if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks:
        raise Unsupported(f"a torch module {name} with hooks")
    if name == "Sequential":
        return {"k": name, "c": [module_spec(c) for c in m]}
    if name not in LAYERS:
        raise Unsupported(f"a torch module {name}")
    return {"k": name, "a": LAYERS[name][0](m)}


def build_module(spec):
    """The module described by :func:`module_spec`'s ``spec`` (fresh parameters)."""
    import torch.nn as nn

    if not isinstance(spec, dict) or "k" not in spec:
        raise ValueError("spec must be a dict made by module_spec")
    k, a = spec["k"], spec.get("a", [])
    if k == "Sequential":
        return nn.Sequential(*[build_module(c) for c in spec["c"]])
    if k not in LAYERS:
        raise ValueError(k)
    return LAYERS[k][1](nn, a)


def module_state(m):
    """The parts of a module's state a check can observe, as plain data: its state dict,
    every submodule's training flag, each parameter's requires_grad and gradient."""
    params = dict(m.named_parameters())
    return {"state": {k: to_npy(v.detach().cpu().numpy()) for k, v in m.state_dict().items()},
            "train": {n: bool(mod.training) for n, mod in m.named_modules()},
            "rg": {n: bool(p.requires_grad) for n, p in params.items()},
            "grad": {n: (None if p.grad is None else to_npy(p.grad.detach().cpu().numpy()))
                     for n, p in params.items()}}


class ModuleState:
    """A module's state as it came back from the child (see :func:`module_state`)."""

    def __init__(self, d):
        self.d = d

    def apply(self, m):
        """Copy this state into the grader's module ``m`` (same architecture)."""
        import torch

        state = {k: torch.from_numpy(from_npy(v).copy()) for k, v in self.d["state"].items()}
        m.load_state_dict(state)
        for name, mod in m.named_modules():
            if name in self.d["train"]:
                mod.training = bool(self.d["train"][name])
        for name, p in m.named_parameters():
            g = self.d["grad"].get(name)
            p.grad = None if g is None else torch.from_numpy(from_npy(g).copy())

    def __repr__(self):
        return "<torch module state>"


def _opaque(x):
    return {"t": "opaque", "type": type(x).__name__, "repr": repr(x)[:200]}


def encode(x, *, lenient=False):
    """``x`` as tagged JSON-ready data.

    Parameters
    ----------
    x : object
        None, bool, int, float, str, a NumPy array (not of objects) or scalar, a tuple,
        list or dict of those, a torch tensor, a ``numpy.random.Generator`` or a torch
        module (a ``Sequential`` of :data:`LAYERS`).
    lenient : bool
        False (the grader's arguments): subclasses of tuple, list and dict travel as the
        plain container, a module as its layers and state, and anything else raises
        :class:`Unsupported`. True (what the child sends back): only exact tuples, lists
        and dicts, a module as its state only, and anything else as an opaque stand-in
        with its type name and ``repr``.
    """
    if x is None:
        return {"t": "none"}
    if isinstance(x, np.generic):  # first: numpy.float64 is also a float, with another repr
        if not isinstance(x, np.object_):
            return {"t": "np", "v": to_npy(np.asarray(x))}
        if lenient:
            return _opaque(x)
        raise Unsupported("an object scalar")
    if isinstance(x, bool):
        return {"t": "bool", "v": x}
    if isinstance(x, int):
        return {"t": "int", "v": str(x)}
    if isinstance(x, float):
        return {"t": "float", "v": repr(x)}
    if isinstance(x, str):
        return {"t": "str", "v": x}
    if isinstance(x, np.ndarray):
        if x.dtype != object:
            return {"t": "nd", "v": to_npy(x)}
        if lenient:
            return _opaque(x)
        raise Unsupported("an object array")
    if type(x) in (tuple, list) or (not lenient and isinstance(x, (tuple, list))):
        return {"t": type(x).__name__ if type(x) in (tuple, list) else "list",
                "v": [encode(v, lenient=lenient) for v in x]}
    if type(x) is dict or (not lenient and isinstance(x, dict)):
        return {"t": "dict", "v": [[encode(k, lenient=lenient), encode(v, lenient=lenient)]
                                   for k, v in x.items()]}
    if _is_tensor(x):
        return {"t": "torch", "v": to_npy(x.detach().cpu().numpy()), "rg": bool(x.requires_grad)}
    if is_module(x):
        if lenient:
            return {"t": "module", **module_state(x)}
        return {"t": "module", "spec": module_spec(x), **module_state(x)}
    if type(x) is np.random.Generator:      # its state is a dict of plain numbers
        return {"t": "gen", "bg": type(x.bit_generator).__name__,
                "v": json.dumps(x.bit_generator.state)}
    if lenient:
        return _opaque(x)
    raise Unsupported(type(x).__name__)


def _module_from(d):
    """The child's module: rebuilt from ``d["spec"]``, with the grader's state, training
    flags, requires_grad and gradients."""
    import torch

    m = build_module(d["spec"])
    m.load_state_dict({k: torch.from_numpy(from_npy(v).copy()) for k, v in d["state"].items()})
    for n, sub in m.named_modules():
        sub.training = bool(d["train"].get(n, sub.training))
    for n, p in m.named_parameters():
        p.requires_grad_(bool(d["rg"].get(n, True)))
        g = d["grad"].get(n)
        p.grad = None if g is None else torch.from_numpy(from_npy(g).copy())
    return m


def decode(d, *, build_modules=False):
    """Inverse of :func:`encode` (arrays loaded with ``allow_pickle=False``).

    Parameters
    ----------
    d : dict
        Tagged data from :func:`encode`.
    build_modules : bool
        False (the grader): a module comes back as a :class:`ModuleState`. True (the
        child): the module is rebuilt from its layers and given its state.
    """
    if not isinstance(d, dict) or "t" not in d:
        raise ValueError("d must be a tagged dict made by encode")
    t = d["t"]
    if t == "none":
        return None
    if t == "bool":
        return bool(d["v"])
    if t == "int":
        return int(d["v"])
    if t == "float":
        return float(d["v"])
    if t == "str":
        return str(d["v"])
    if t == "nd":
        return from_npy(d["v"])
    if t == "np":
        return from_npy(d["v"])[()]
    if t == "tuple":
        return tuple(decode(v, build_modules=build_modules) for v in d["v"])
    if t == "list":
        return [decode(v, build_modules=build_modules) for v in d["v"]]
    if t == "dict":
        return {decode(k, build_modules=build_modules): decode(v, build_modules=build_modules)
                for k, v in d["v"]}
    if t == "torch":
        import torch

        out = torch.from_numpy(from_npy(d["v"]).copy())
        if d.get("rg") and out.is_floating_point():
            out.requires_grad_(True)   # "still attached to a graph" is observable
        return out
    if t == "module":
        return _module_from(d) if build_modules else ModuleState(d)
    if t == "gen":
        gen = np.random.Generator(getattr(np.random, d["bg"])())
        gen.bit_generator.state = json.loads(d["v"])
        return gen
    if t == "opaque":      # something the child could not send: a stand-in of that name
        return type(str(d.get("type", "object")), (), {"__repr__": lambda self: d["repr"]})()
    raise ValueError(f"unknown tag {t!r}")


def write_back(sent, got):
    """Copy the child's post-call arguments ``got`` (decoded) into the grader's ``sent``
    ones in place (arrays, tensors, generators, modules, and those inside a list or
    dict), so that a check still sees whether the student's function changed its inputs."""
    if isinstance(got, ModuleState) and is_module(sent):
        got.apply(sent)
    elif (type(sent).__name__ == "Tensor" and type(got).__name__ == "Tensor"
          and type(sent).__module__.startswith("torch")):
        if tuple(sent.shape) == tuple(got.shape) and not sent.requires_grad:
            try:
                sent.data.copy_(got.detach())
            except (TypeError, RuntimeError):
                pass
    elif isinstance(sent, np.random.Generator) and isinstance(got, np.random.Generator):
        sent.bit_generator.state = got.bit_generator.state
    elif isinstance(sent, np.ndarray) and isinstance(got, np.ndarray):
        if sent.shape == got.shape and sent.flags.writeable:
            try:
                np.copyto(sent, got, casting="unsafe")
            except (TypeError, ValueError):
                pass
    elif isinstance(sent, list) and isinstance(got, list) and len(sent) == len(got):
        for i, (s, g) in enumerate(zip(sent, got)):
            if isinstance(s, np.ndarray) or is_module(s) or type(s).__name__ == "Tensor":
                write_back(s, g)
            elif not isinstance(s, (list, dict)):
                sent[i] = g
    elif isinstance(sent, dict) and isinstance(got, dict):
        for k in sent:
            if k in got:
                if isinstance(sent[k], np.ndarray):
                    write_back(sent[k], got[k])
