"""The one reader of a clean-room child's messages (autograder/wire.py) and the codec's
strict rebuilding of values, attacked with messages an answer can write itself.

These are the reader's own tests, on bytes; the same attacks written from inside real
submissions and graded by ``autograde`` are in tests/test_autograder_protocol.py.
"""

import base64
import io
import json
import time

import numpy as np
import pytest

from autograder import codec, wire
from autograder.build import solution_source
from autograder.cleanroom import runtime_code_calls, verify_source
from autograder.exercises import EXERCISES, load


def _report():
    return {"forbidden": [], "noticed": [], "compiled": []}


def test_the_cap_is_a_small_multiple_of_the_request_and_a_few_mib_at_most():
    assert wire.reply_cap(0) == wire.REPLY_BASE_BYTES
    assert wire.reply_cap(1000) == wire.REPLY_BASE_BYTES + wire.REPLY_FACTOR * 1000
    assert wire.reply_cap(10 << 30) == wire.REPLY_MAX_BYTES <= 8 << 20
    with pytest.raises(ValueError, match="request_bytes"):
        wire.reply_cap(-1)
    with pytest.raises(wire.ProtocolError, match="more than"):
        wire.parse(b'{"a": "' + b"x" * 2000 + b'"}', max_bytes=1000)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested"),
        (b'{"a": ' * 60 + b"1" + b"}" * 60, "nested"),
        (b"[" + b"[]," * 400_000 + b"[]]", "values"),
        (b'"\\"' * 500_000, "not JSON"),  # escaped quotes: linear, not quadratic
        (b"[1, 2, 3]", "not an object"),
        (b"\xff\xfe{}", "not JSON"),
    ],
)
def test_hostile_bytes_are_refused_before_they_are_parsed(data, why):
    t0 = time.monotonic()
    with pytest.raises(wire.ProtocolError, match=why):
        wire.parse(data, max_bytes=8 << 20)
    assert time.monotonic() - t0 < 5


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"message": "index [[[[[" * 40 + '\\"]]' * 30, "v": [[1]] * 30})
    assert wire.parse(text.encode())["v"] == [[1]] * 30


def test_each_message_type_has_exactly_its_fields_and_its_number():
    ok = {"seq": 0, "ok": True, **_report()}
    assert wire.start_message(dict(ok)) == ok
    for bad in (
        {"seq": 0, "ok": True},
        {**ok, "ok": 1},
        {**ok, "extra": 1},
        {**ok, "noticed": "x"},
        {**ok, "noticed": ["x"] * 21},
        {**ok, "seq": 3},
        {"seq": 0, "error": "x", **_report()},
        {"seq": 0, "error": {"type": "E", "message": 1, "where": ""}, **_report()},
    ):
        with pytest.raises(wire.ProtocolError):
            wire.start_message(bad)
    reply = {
        "seq": 4,
        "result": {"t": "none"},
        "args": [],
        "kwargs": {},
        "warnings": [],
        "peak_bytes": None,
        **_report(),
    }
    assert wire.call_reply(dict(reply), 4)["result"] == {"t": "none"}
    with pytest.raises(wire.ProtocolError, match="numbered 4 where request 5"):
        wire.call_reply(dict(reply), 5)
    for bad in (
        {**reply, "peak_bytes": -1},
        {**reply, "peak_bytes": True},
        {**reply, "args": [1]},
        {**reply, "elapsed_s": 0.0},
        {**reply, "compiled": [{"how": "x"}]},
    ):
        with pytest.raises(wire.ProtocolError):
            wire.call_reply(bad, 4)
    with pytest.raises(wire.ProtocolError):
        wire.end_reply(reply, 4)


def test_a_bit_generator_name_is_never_looked_up(monkeypatch):
    """The attack of the issue: a subclass named ``test`` made the grader call
    ``np.random.test()`` (NumPy's test suite). The name is only a key of a fixed table."""
    called = []
    monkeypatch.setattr(np.random, "test", lambda *a, **k: called.append(a), raising=False)
    state = json.dumps(np.random.PCG64(1).state)
    for name in ("test", "default_rng", "BitGenerator", "__class__", "PCG64 "):
        with pytest.raises(codec.Malformed, match="bit generator"):
            codec.decode({"t": "gen", "bg": name, "v": state})
    assert called == []
    # a state of another generator than the one named is refused too
    with pytest.raises(codec.Malformed):
        codec.decode({"t": "gen", "bg": "MT19937", "v": state})
    back = codec.decode({"t": "gen", "bg": "PCG64", "v": state})
    assert back.random() == np.random.Generator(np.random.PCG64(1)).random()

    class test(np.random.PCG64):  # what an answer returns: the child sends the name
        pass

    sent = codec.encode(np.random.Generator(test(1)), lenient=True)
    assert sent["bg"] == "test"
    with pytest.raises(codec.Malformed, match="'test'"):
        codec.decode(sent)
    assert called == []
    with pytest.raises(codec.Unsupported):  # and the grader never sends one
        codec.encode(np.random.Generator(test(1)))


def test_an_exception_name_is_a_label_of_a_fixed_table():
    from autograder.cleanroom_calls import EXCEPTIONS, _raise_like

    assert "SystemExit" not in EXCEPTIONS and EXCEPTIONS["ValueError"] is ValueError
    with pytest.raises(ValueError, match="bad k"):
        _raise_like({"type": "ValueError", "message": "bad k", "where": ""})
    for name in ("SystemExit", "KeyboardInterrupt", "os.system", "not a name"):
        with pytest.raises(Exception) as info:
            _raise_like({"type": name, "message": "m", "where": ""})
        assert type(info.value).__module__ == "autograder.cleanroom_calls"


def test_arrays_must_carry_the_bytes_their_header_promises():
    buf = io.BytesIO()
    np.save(buf, np.zeros(4))
    raw = buf.getvalue()
    assert np.array_equal(codec.from_npy(base64.b64encode(raw).decode()), np.zeros(4))
    # a header that promises 10**12 floats, followed by 32 bytes
    header = raw.replace(b"(4,)", b"(1000000000000,)")
    for bad in (
        base64.b64encode(header).decode(),
        base64.b64encode(raw[:-8]).decode(),
        "not base64!",
        base64.b64encode(b"\x93NUMPY\x09\x00").decode(),
    ):
        with pytest.raises(codec.Malformed):
            codec.from_npy(bad)
    with pytest.raises(codec.Malformed, match="unexpected fields"):
        codec.decode({"t": "nd", "v": base64.b64encode(raw).decode(), "x": 1})
    with pytest.raises(codec.Malformed):
        codec.decode({"t": "list", "v": [{"t": "int", "v": 5}]})


def test_code_built_at_run_time_is_named_from_the_source():
    blob = "import zlib, base64\nexec(zlib.decompress(base64.b64decode(b'')))\n"
    assert runtime_code_calls(blob) == ["exec()"]
    assert runtime_code_calls("import builtins\nbuiltins.eval('1')\nimport marshal\n") == [
        "import marshal",
        "eval()",
    ]
    assert runtime_code_calls("import builtins as b\nb.exec('1')\n") == ["exec()"]
    assert runtime_code_calls("from builtins import eval as e\ne('1')\n") == ["eval()"]


def test_methods_named_like_a_builtin_are_not_code_built_at_run_time():
    honest = (
        "import re, torch\n"
        "def f(model, x):\n"
        "    model.eval()\n"
        "    pattern = re.compile('a+')\n"
        "    fast = torch.compile(model)\n"
        "    return fast(x), pattern\n"
    )
    assert runtime_code_calls(honest) == []


@pytest.mark.parametrize("name", EXERCISES)
def test_no_reference_solution_is_named_for_code_built_at_run_time(name):
    assert runtime_code_calls(solution_source(load(name))) == []


SPEC = load("rank_bound")
#: write ``payload`` into every pipe the answer holds, in the clean room only
WRITE = """
import os as _os, stat as _stat, sys as _sys
if "ipykernel" not in _sys.modules:
    for _fd in range(3, 64):
        try:
            if _stat.S_ISFIFO(_os.fstat(_fd).st_mode):
                _os.write(_fd, {payload})
        except OSError:
            pass
"""


@pytest.mark.parametrize(
    "payload, why",
    [
        (
            'b\'{"seq": 0, "ok": true, "forbidden": [], "noticed": [], "compiled": []}\\n\'',
            "protocol",
        ),
        ('b\'{"seq": 0, "error": "x", "forbidden": 1}\\n\'', "protocol"),
        ("b'[' * (1 << 20) + b'\\n'", "protocol"),
    ],
)
def test_a_message_of_the_answer_scores_the_notebook_zero(payload, why):
    source = solution_source(SPEC) + WRITE.format(payload=payload)
    verdicts = verify_source(SPEC, source, 11, {"start_s": 20.0})
    assert sum(v.points or 0 for v in verdicts) == 0
    assert all(why in v.failure and v.message.startswith("not graded") for v in verdicts)
    honest = verify_source(SPEC, solution_source(SPEC), 11, {"start_s": 20.0})
    assert sum(v.points for v in honest) == sum(v.max_points for v in honest)
    assert not any(v.failure for v in honest)


def test_the_child_keeps_within_the_bounds_the_reader_enforces():
    """The child program cannot import the grader, so it states its own bounds: they are
    the reader's, or an honest report would break the protocol."""
    from autograder import cleanroom_child as child

    assert (child.MAX_NOTICES, child.NOTICE_CHARS) == (wire.MAX_NOTICES, wire.NOTICE_CHARS)
    assert (child.MAX_COMPILED, child.COMPILED_CHARS) == (
        wire.MAX_COMPILED,
        wire.MAX_COMPILED_CHARS,
    )
    # every character escaped at its longest (a surrogate pair, twelve bytes)
    assert (
        12 * (child.COMPILED_TOTAL + child.MAX_NOTICES * child.NOTICE_CHARS * 2)
        < wire.REPLY_BASE_BYTES
    )
