"""The plain-data codec of the clean room (autograder/codec.py), both of its ends.

The grader encodes a check's arguments strictly and the child encodes what the answer
returns leniently (an opaque stand-in for anything else); the child rebuilds modules, the
grader gets their state back. The round trips through a real child are in
tests/test_autograder_cleanroom.py.
"""

import ast
import collections
from pathlib import Path

import numpy as np
import pytest

from autograder import codec
from autograder.cleanroom_child import load_codec


def test_strict_and_lenient_encodings_of_containers_and_strangers():
    Pair = collections.namedtuple("Pair", "a b")
    od = collections.OrderedDict(x=1)
    # the grader's arguments: subclasses travel as the plain container
    assert codec.encode(Pair(1, 2))["t"] == "list"
    assert codec.encode(od)["t"] == "dict"
    for bad in (np.array([object()], dtype=object), object(), len):
        with pytest.raises(codec.Unsupported):
            codec.encode(bad)
    # what the child sends back: only exact containers, anything else as a stand-in
    for odd in (Pair(1, 2), od, np.array([object()], dtype=object), object(), len):
        d = codec.encode(odd, lenient=True)
        assert d["t"] == "opaque" and d["type"] == type(odd).__name__
        back = codec.decode(d)
        assert type(back).__name__ == type(odd).__name__ and repr(back) == repr(odd)[:200]
    assert codec.encode([(1, 2.0)], lenient=True) == codec.encode([(1, 2.0)])
    assert codec.decode(codec.encode({"k": [None, True, "s", 2**70]}, lenient=True)) == {
        "k": [None, True, "s", 2**70]
    }
    with pytest.raises(ValueError, match="d must be"):
        codec.decode([1])
    with pytest.raises(ValueError, match="unknown tag"):
        codec.decode({"t": "pickle"})


def test_the_child_rebuilds_a_module_the_grader_gets_its_state():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    enc = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.BatchNorm1d(4),
        torch.nn.GELU(),
        torch.nn.Dropout(0.3),
        torch.nn.Identity(),
    )
    enc[1].running_mean.fill_(1.5)
    enc[0].weight.requires_grad_(False)
    enc.eval()
    enc[3].train()
    sent = codec.encode(enc)
    assert "spec" in sent
    rebuilt = codec.decode(sent, build_modules=True)  # in the child
    assert [type(m).__name__ for m in rebuilt] == [type(m).__name__ for m in enc]
    for (k, a), (k2, b) in zip(enc.state_dict().items(), rebuilt.state_dict().items()):
        assert k == k2 and torch.equal(a, b)
    assert [m.training for m in rebuilt.modules()] == [m.training for m in enc.modules()]
    assert [p.requires_grad for p in rebuilt.parameters()] == [
        p.requires_grad for p in enc.parameters()
    ]
    assert rebuilt[3].p == 0.3 and rebuilt[1].eps == enc[1].eps
    back = codec.encode(rebuilt, lenient=True)  # the child's reply
    assert "spec" not in back
    state = codec.decode(back)
    assert isinstance(state, codec.ModuleState)
    with pytest.raises(ValueError):
        codec.build_module({"k": "Conv1d", "a": []})


def test_the_codec_imports_neither_the_reference_nor_the_grader():
    path = Path(codec.__file__)
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import would need the autograder package"
            names.append(node.module)
    assert {n.split(".")[0] for n in names} <= {"base64", "io", "json", "sys", "numpy", "torch"}


def test_the_child_loads_the_codec_from_its_file_only():
    import sys

    mod = load_codec(codec.__file__)
    assert mod.__name__ == "cleanroom_codec" and "cleanroom_codec" not in sys.modules
    x = {"a": np.arange(3.0), "g": np.random.default_rng(1)}
    y = codec.decode(mod.encode(x, lenient=True))
    assert np.array_equal(y["a"], x["a"]) and y["g"].random() == x["g"].random()
    with pytest.raises(ValueError, match="path"):
        load_codec(str(Path(codec.__file__).with_name("no_such_codec.py")))


@pytest.mark.parametrize("lenient", [False, True])
def test_numpy_scalars_keep_their_type_and_value(lenient):
    # numpy.float64 subclasses float, and its repr is "np.float64(...)" under NumPy 2
    for x in (
        np.float64(0.1),
        np.float32(2.5),
        np.float16(-1.0),
        np.int64(-3),
        np.uint8(7),
        np.bool_(True),
        np.complex128(1 + 2j),
        np.float64("nan"),
    ):
        back = codec.decode(codec.encode(x, lenient=lenient))
        assert type(back) is type(x)
        assert np.array_equal(np.asarray(back), np.asarray(x), equal_nan=True)
    assert codec.decode(codec.encode([np.float64(0.5), 0.5]))[1].__class__ is float
