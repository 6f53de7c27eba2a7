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

__all__ = [
    "Unsupported",
    "Malformed",
    "ModuleState",
    "Opaque",
    "LAYERS",
    "BIT_GENERATORS",
    "encode",
    "decode",
    "is_module",
    "module_spec",
    "module_state",
    "build_module",
    "write_back",
    "to_npy",
    "from_npy",
]


class Unsupported(TypeError):
    """An argument of a check that cannot travel as plain data (a model, a callable)."""


class Malformed(ValueError):
    """Tagged data that :func:`encode` cannot have made (a wrong field, type or size)."""


#: the bit generators a ``numpy.random.Generator`` may travel with: the sent name is a key
#: of this table, never looked up anywhere else (a subclass travels as opaque)
BIT_GENERATORS = {
    cls.__name__: cls
    for cls in (
        np.random.PCG64,
        np.random.PCG64DXSM,
        np.random.MT19937,
        np.random.Philox,
        np.random.SFC64,
    )
}


def to_npy(arr):
    """``arr`` (array-like) as base64 text of its ``.npy`` bytes (C order, no pickle)."""
    buf = io.BytesIO()
    np.save(buf, np.array(arr, order="C", copy=True), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def from_npy(text):
    """Inverse of :func:`to_npy` (``allow_pickle=False``).

    The ``.npy`` header is read first: an array whose declared shape and type do not
    account for exactly the bytes that follow (a header promising more than was sent),
    or whose type holds Python objects, raises :class:`Malformed` before anything is
    allocated for it."""
    if not isinstance(text, str):
        raise ValueError(f"text must be base64 text, got {type(text).__name__}")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise Malformed(f"an array's bytes are not base64 ({exc})") from None
    fh = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(fh)
        read = {
            (1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0,
        }.get(version)
        if read is None:
            raise Malformed(f"an array of .npy version {version}")
        shape, _, dtype = read(fh)
    except (ValueError, TypeError, SyntaxError, OverflowError) as exc:
        raise Malformed(f"an array whose .npy header cannot be read ({exc})") from None
    if dtype.hasobject:
        raise Malformed("an array of Python objects")
    count = 1
    for n in shape:
        count *= int(n)
    size = len(raw) - fh.tell()
    if count * dtype.itemsize != size or count > max(1, size):
        raise Malformed(f"an array of shape {tuple(shape)} and type {dtype} sent with {size} bytes")
    fh.seek(0)
    return np.load(fh, allow_pickle=False)


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and type(x).__name__ == "Tensor"


def is_module(x):
    """True if ``x`` is a ``torch.nn.Module`` (torch is not imported for this: an object
    can only be a torch module once torch is imported)."""
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].nn.Module)


#: torch.nn layers that travel as plain data: name -> (constructor arguments read from a
#: layer, the layer rebuilt from them with ``torch.nn``)
LAYERS = {
    "Linear": (
        lambda m: [m.in_features, m.out_features, m.bias is not None],
        lambda nn, a: nn.Linear(a[0], a[1], bias=a[2]),
    ),
    **{
        k: (
            lambda m: [m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats],
            lambda nn, a, k=k: getattr(nn, k)(
                a[0], eps=a[1], momentum=a[2], affine=a[3], track_running_stats=a[4]
            ),
        )
        for k in ("BatchNorm1d", "BatchNorm2d")
    },
    "Dropout": (lambda m: [m.p], lambda nn, a: nn.Dropout(a[0])),
    **{
        k: (lambda m: [], lambda nn, a, k=k: getattr(nn, k)())
        for k in ("ReLU", "Tanh", "GELU", "Sigmoid", "Identity")
    },
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
    return {
        "state": {k: to_npy(v.detach().cpu().numpy()) for k, v in m.state_dict().items()},
        "train": {n: bool(mod.training) for n, mod in m.named_modules()},
        "rg": {n: bool(p.requires_grad) for n, p in params.items()},
        "grad": {
            n: (None if p.grad is None else to_npy(p.grad.detach().cpu().numpy()))
            for n, p in params.items()
        },
    }


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
        return {
            "t": type(x).__name__ if type(x) in (tuple, list) else "list",
            "v": [encode(v, lenient=lenient) for v in x],
        }
    if type(x) is dict or (not lenient and isinstance(x, dict)):
        return {
            "t": "dict",
            "v": [[encode(k, lenient=lenient), encode(v, lenient=lenient)] for k, v in x.items()],
        }
    if _is_tensor(x):
        return {"t": "torch", "v": to_npy(x.detach().cpu().numpy()), "rg": bool(x.requires_grad)}
    if is_module(x):
        if lenient:
            return {"t": "module", **module_state(x)}
        return {"t": "module", "spec": module_spec(x), **module_state(x)}
    if type(x) is np.random.Generator:
        # the child sends the name of whatever drives it; the grader accepts only the
        # names of BIT_GENERATORS, so a generator of another class ends the child there
        if not lenient and not any(type(x.bit_generator) is c for c in BIT_GENERATORS.values()):
            raise Unsupported(f"a random generator driven by {type(x.bit_generator).__name__}")
        return {
            "t": "gen",
            "bg": type(x.bit_generator).__name__,
            "v": json.dumps(x.bit_generator.state),
        }
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


class Opaque:
    """What the child could not send as plain data: a stand-in holding the text of its
    type's name and of its ``repr`` (each at most 200 characters). The stand-in's class
    is a fresh subclass carrying that name as a label; nothing is ever looked up by it."""

    def __init__(self, type_name, text):
        self.type_name, self.text = type_name, text

    def __repr__(self):
        return self.text


def _field(d, key, kind, limit=None):
    """``d[key]``, which must be an instance of ``kind`` (a class or a tuple of them; a
    bool counts only where ``bool`` is named) no longer than ``limit``; raises
    :class:`Malformed` otherwise."""
    if key not in d:
        raise Malformed(f"a {d['t']!s:.20} value without its {key!r} field")
    v = d[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise Malformed(f"the {key!r} field of a {d['t']!s:.20} value is a {type(v).__name__}")
    if limit is not None and len(v) > limit:
        raise Malformed(f"the {key!r} field of a {d['t']!s:.20} value is too long")
    return v


def _fields(d, allowed):
    extra = set(d) - set(allowed) - {"t"}
    if extra:
        raise Malformed(
            f"a {d['t']!s:.20} value with unexpected fields {sorted(map(str, extra))[:3]!r:.80}"
        )


#: the fields each tag may carry besides ``t``
_TAGS = {
    "none": (),
    "bool": ("v",),
    "int": ("v",),
    "float": ("v",),
    "str": ("v",),
    "nd": ("v",),
    "np": ("v",),
    "tuple": ("v",),
    "list": ("v",),
    "dict": ("v",),
    "torch": ("v", "rg"),
    "module": ("spec", "state", "train", "rg", "grad"),
    "gen": ("bg", "v"),
    "opaque": ("type", "repr"),
}


def _names(d, key, kind):
    """``d[key]``: a dict of text keys whose values are instances of ``kind``."""
    v = _field(d, key, dict)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k, x in v.items():
        if not isinstance(x, kinds) or (isinstance(x, bool) and bool not in kinds):
            raise Malformed(f"a module's {key!r} entry {k!r:.40} is malformed")
    return v


def _generator(d):
    """The ``numpy.random.Generator`` of a ``gen`` value: its bit generator's class is
    :data:`BIT_GENERATORS` ``[bg]`` and its state must be one of that class."""
    name = _field(d, "bg", str, 40)
    cls = BIT_GENERATORS.get(name)
    if cls is None:
        raise Malformed(
            f"a random generator driven by {name!r}, which is not one of "
            f"NumPy's bit generators {sorted(BIT_GENERATORS)}"
        )
    text = _field(d, "v", str, 1 << 16)
    try:
        state = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"a random generator's state is not JSON ({exc})") from None
    if not isinstance(state, dict) or state.get("bit_generator") != name:
        raise Malformed(f"a random generator's state is not one of a {name}")
    gen = np.random.Generator(cls())
    try:
        gen.bit_generator.state = state
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise Malformed(f"a random generator's state is refused by {name} ({exc})") from None
    return gen


def decode(d, *, build_modules=False):
    """Inverse of :func:`encode` (arrays loaded with ``allow_pickle=False``).

    Every field is checked against what :func:`encode` makes (its type, its size, no field
    besides the tag's own), and nothing named in the data is ever looked up: a random
    generator's bit generator is a key of :data:`BIT_GENERATORS`, an exception's or an
    opaque value's type name is only a label. Data that :func:`encode` cannot have made
    raises :class:`Malformed`.

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
    if not isinstance(t, str) or t not in _TAGS:
        raise Malformed(f"unknown tag {t!r:.40}")
    _fields(d, _TAGS[t])
    if t == "none":
        return None
    if t == "bool":
        return _field(d, "v", bool)
    if t == "int":
        text = _field(d, "v", str, 4300)
        try:
            return int(text)
        except ValueError:
            raise Malformed("an int that is not a number") from None
    if t == "float":
        text = _field(d, "v", str, 40)
        try:
            return float(text)
        except ValueError:
            raise Malformed("a float that is not a number") from None
    if t == "str":
        return _field(d, "v", str)
    if t == "nd":
        return from_npy(_field(d, "v", str))
    if t == "np":
        arr = from_npy(_field(d, "v", str))
        if arr.ndim:
            raise Malformed("a NumPy scalar sent as an array")
        return arr[()]
    if t in ("tuple", "list"):
        items = [decode(v, build_modules=build_modules) for v in _field(d, "v", list)]
        return tuple(items) if t == "tuple" else items
    if t == "dict":
        out = {}
        for pair in _field(d, "v", list):
            if not isinstance(pair, list) or len(pair) != 2:
                raise Malformed("a dict entry that is not a [key, value] pair")
            key = decode(pair[0], build_modules=build_modules)
            try:
                out[key] = decode(pair[1], build_modules=build_modules)
            except TypeError:
                raise Malformed(f"a dict key of type {type(key).__name__}") from None
        return out
    if t == "torch":
        import torch

        arr = from_npy(_field(d, "v", str))
        rg = _field(d, "rg", bool)
        out = torch.from_numpy(arr.copy())
        if rg and out.is_floating_point():
            out.requires_grad_(True)  # "still attached to a graph" is observable
        return out
    if t == "module":
        _names(d, "state", str)
        _names(d, "train", bool)
        _names(d, "rg", bool)
        _names(d, "grad", (str, type(None)))
        # the grader never reads "spec" back: a module returns as its state only
        return _module_from(d) if build_modules else ModuleState(d)
    if t == "gen":
        return _generator(d)
    # t == "opaque": something the child could not send, as a labelled stand-in
    name = _field(d, "type", str, 200)
    text = _field(d, "repr", str, 200)
    label = name if name.isidentifier() else "object"
    return type(label, (Opaque,), {})(name, text)


def write_back(sent, got):
    """Copy the child's post-call arguments ``got`` (decoded) into the grader's ``sent``
    ones in place (arrays, tensors, generators, modules, and those inside a list or
    dict), so that a check still sees whether the student's function changed its inputs."""
    if isinstance(got, ModuleState) and is_module(sent):
        got.apply(sent)
    elif (
        type(sent).__name__ == "Tensor"
        and type(got).__name__ == "Tensor"
        and type(sent).__module__.startswith("torch")
    ):
        if tuple(sent.shape) == tuple(got.shape) and not sent.requires_grad:
            try:
                sent.data.copy_(got.detach())
            except (TypeError, RuntimeError):
                pass
    elif isinstance(sent, np.random.Generator) and isinstance(got, np.random.Generator):
        if type(sent.bit_generator) is not type(got.bit_generator):
            raise Malformed(
                f"a {type(sent.bit_generator).__name__} generator came back "
                f"driven by {type(got.bit_generator).__name__}"
            )
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
            if k in got and isinstance(sent[k], np.ndarray):
                write_back(sent[k], got[k])
