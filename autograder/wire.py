"""The one reader of what a child process sends: bounded, schema-checked, nothing resolved.

A clean-room child (:mod:`autograder.cleanroom_child`) runs a student's answer in the
process that writes the replies, so every byte of a reply is the answer's to choose: it
may write lines of its own into the channel, of any size and shape. The grader therefore
reads each message through this module and nothing else:

* **a byte cap** per message (:func:`reply_cap`): a small multiple of the request it
  answers plus a fixed allowance for texts, never more than
  :data:`REPLY_MAX_BYTES` (``$AUTOGRADER_REPLY_MAX_BYTES``); the reader stops taking bytes
  at the cap, so a child that floods the channel costs the grader no more than that;
* **bounded nesting and item counts** (:data:`MAX_DEPTH`, :data:`MAX_ITEMS`), checked on
  the bytes before any JSON is parsed, so a message of nested brackets or of a million
  empty lists never reaches the parser;
* **a schema per message type** (:func:`start_message`, :func:`call_reply`,
  :func:`end_reply`): exactly the fields that type has, each of its type and length, and
  the sequence number of the request it answers (a second reply to one request, or a
  reply written before the request, breaks it);
* tagged values are rebuilt by :func:`autograder.codec.decode`, which checks them as
  strictly and never looks a name up (a random generator's bit generator comes from
  :data:`autograder.codec.BIT_GENERATORS`).

A message that breaks any of this raises :class:`ProtocolError`; the clean room then ends
the child and the notebook scores 0 with the reason (:mod:`autograder.cleanroom`). The
fork server's replies (:mod:`autograder.fork_client`) are read the same way, with a
schema per kind of reply (:func:`fork_reply`).

Besides the answer's own results, a reply carries the child's report: the forbidden
imports and the reaches beyond the room that its audit hook noted, the code the answer
compiled at run time, the traced memory peak of a measured call. The answer can forge
that report; the grader only ever adds what a report names to what it already holds, and
the memory a call used is also read from outside the child
(:meth:`autograder.cleanroom_process.Sandbox.peak_rss`), so a forged report can only cost
the answer points.
"""

from __future__ import annotations

import json

from .settings import reply_max_bytes

__all__ = [
    "ProtocolError",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "REPLY_BASE_BYTES",
    "REPLY_FACTOR",
    "REPLY_MAX_BYTES",
    "reply_cap",
    "parse",
    "start_message",
    "call_reply",
    "end_reply",
    "FORK_REPLY_MAX_BYTES",
    "fork_reply",
]


class ProtocolError(ValueError):
    """A child's message that the protocol does not allow (its text says why)."""


#: the largest message taken from a child (``$AUTOGRADER_REPLY_MAX_BYTES``, default 4 MiB)
REPLY_MAX_BYTES = reply_max_bytes()
#: what every message may hold besides a multiple of its request: the texts of the
#: report (notices, forbidden imports, code compiled at run time), an exception's text
REPLY_BASE_BYTES = 1 << 20
#: a reply may be this many times its request's size besides the base (the arguments
#: come back with the result; the course's largest reply is 2.5 times its request)
REPLY_FACTOR = 8
#: deepest nesting of JSON arrays and objects in one message (a list of lists of plain
#: values is four levels of tagged data)
MAX_DEPTH = 40
#: most JSON values and keys in one message
MAX_ITEMS = 100_000


def reply_cap(request_bytes, ceiling=None):
    """The most bytes taken for the reply to a request of ``request_bytes`` bytes:
    ``REPLY_BASE_BYTES + REPLY_FACTOR * request_bytes``, at most ``ceiling`` (default
    :data:`REPLY_MAX_BYTES`).

    Raises
    ------
    ValueError
        If ``request_bytes`` is not a non-negative integer or ``ceiling`` not positive.
    """
    if isinstance(request_bytes, bool) or not isinstance(request_bytes, int) or request_bytes < 0:
        raise ValueError(f"request_bytes must be a non-negative integer, got {request_bytes!r}")
    ceiling = REPLY_MAX_BYTES if ceiling is None else ceiling
    if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling <= 0:
        raise ValueError(f"ceiling must be a positive integer, got {ceiling!r}")
    return min(int(ceiling), REPLY_BASE_BYTES + REPLY_FACTOR * request_bytes)


def _shape(data):
    """``(depth, items)`` of the JSON text ``data`` (bytes): its deepest nesting and an
    upper bound on its values and keys, read from its brackets and commas outside its
    strings (a quote counts as a string's end unless an odd run of backslashes precedes
    it). One pass of array arithmetic: linear in the length, whatever the bytes."""
    import numpy as np

    opens = data.count(b"[") + data.count(b"{")
    commas = data.count(b",")
    if opens <= MAX_DEPTH and opens + commas + 1 <= MAX_ITEMS:
        return opens, opens + commas + 1
    codes = np.frombuffer(data, dtype=np.uint8)
    index = np.arange(len(codes), dtype=np.int64)
    plain = np.where(codes != ord("\\"), index, -1)
    last_plain = np.maximum.accumulate(plain)  # last non-backslash at or before i
    run = np.zeros(len(codes), dtype=np.int64)  # backslashes just before i
    run[1:] = index[:-1] - last_plain[:-1]
    quote = (codes == ord('"')) & (run % 2 == 0)
    outside = (np.cumsum(quote) % 2) == 0
    step = np.zeros(256, dtype=np.int8)
    step[ord("[")] = step[ord("{")] = 1
    step[ord("]")] = step[ord("}")] = -1
    moves = step[codes].astype(np.int64) * outside
    depth = int(np.cumsum(moves).max(initial=0))
    items = int(np.count_nonzero(outside & ((codes == ord(",")) | (moves > 0)))) + 1
    return depth, items


def parse(data, max_bytes=None):
    """The JSON object of one message ``data`` (bytes, without its newline).

    Raises
    ------
    ProtocolError
        If ``data`` is longer than ``max_bytes`` (default :data:`REPLY_MAX_BYTES`), nests
        deeper than :data:`MAX_DEPTH`, holds more than :data:`MAX_ITEMS` values, is not
        UTF-8 JSON, or is not a JSON object.
    ValueError
        If ``data`` is not bytes.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"data must be bytes, got {type(data).__name__}")
    limit = REPLY_MAX_BYTES if max_bytes is None else int(max_bytes)
    if len(data) > limit:
        raise ProtocolError(
            f"a message of {len(data)} bytes, more than the {limit} bytes this request allows"
        )
    data = bytes(data)
    depth, items = _shape(data)
    if depth > MAX_DEPTH:
        raise ProtocolError(f"a message nested {depth} levels deep (at most {MAX_DEPTH})")
    if items > MAX_ITEMS:
        raise ProtocolError(f"a message of about {items} values (at most {MAX_ITEMS})")
    try:
        msg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"a message that is not JSON ({str(exc)[:80]})") from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"a message that is a JSON {type(msg).__name__}, not an object")
    return msg


# ----------------------------------------------------------------- schemas
def _text(limit):
    def check(v):
        return isinstance(v, str) and len(v) <= limit

    check.what = f"a text of at most {limit} characters"
    return check


def _texts(most, limit):
    def check(v):
        return (
            isinstance(v, list)
            and len(v) <= most
            and all(isinstance(x, str) and len(x) <= limit for x in v)
        )

    check.what = f"a list of at most {most} texts"
    return check


def _seq(v):
    return type(v) is int and v >= 0


def _count_or_null(v):
    return v is None or (type(v) is int and v >= 0)


def _tagged(v):
    return isinstance(v, dict) and isinstance(v.get("t"), str)


def _tagged_list(v):
    return isinstance(v, list) and all(_tagged(x) for x in v)


def _tagged_names(v):
    return isinstance(v, dict) and all(isinstance(k, str) and _tagged(x) for k, x in v.items())


def _compiled(v):
    return (
        isinstance(v, list)
        and len(v) <= MAX_COMPILED
        and all(
            isinstance(x, dict)
            and set(x) == {"how", "source"}
            and isinstance(x["how"], str)
            and len(x["how"]) <= 200
            and isinstance(x["source"], str)
            and len(x["source"]) <= MAX_COMPILED_CHARS
            for x in v
        )
    )


def _error(v):
    return (
        isinstance(v, dict)
        and set(v) == {"type", "message", "where"}
        and _text(200)(v["type"])
        and _text(2000)(v["message"])
        and _text(4000)(v["where"])
    )


#: most items in each list of the child's report, and the longest text in it
MAX_NOTICES, NOTICE_CHARS = 20, 200
#: most records of code compiled at run time per message, and the longest source kept
MAX_COMPILED, MAX_COMPILED_CHARS = 20, 32 << 10

#: the report every message carries: forbidden imports, notices, code compiled at run time
_REPORT = {
    "forbidden": _texts(MAX_NOTICES, NOTICE_CHARS),
    "noticed": _texts(MAX_NOTICES, NOTICE_CHARS),
    "compiled": _compiled,
}
_START_OK = {"seq": _seq, "ok": lambda v: v is True, **_REPORT}
_FAILED = {"seq": _seq, "error": _error, **_REPORT}
_CALLED = {
    "seq": _seq,
    "result": _tagged,
    "args": _tagged_list,
    "kwargs": _tagged_names,
    "warnings": _texts(50, 2000),
    "peak_bytes": _count_or_null,
    **_REPORT,
}
_ENDED = {"seq": _seq, "end": lambda v: v is True, **_REPORT}


def _fields(msg, schemas, what):
    """``msg`` if it has exactly the fields of one of ``schemas``, each valid; raises
    :class:`ProtocolError` naming ``what`` otherwise."""
    keys = set(msg)
    for schema in schemas:
        if keys == set(schema):
            break
    else:
        shown = sorted(str(k)[:20] for k in keys)[:8]
        raise ProtocolError(f"{what} with the fields {shown}, which no message has")
    for key, check in schema.items():
        if not check(msg[key]):
            raise ProtocolError(
                f"{what} whose {key!r} is not {getattr(check, 'what', 'what the protocol allows')}"
            )
    return msg


def _conform(msg, schemas, seq, what):
    """``msg`` if it has exactly the fields of one of ``schemas``, each valid, and the
    sequence number ``seq``; raises :class:`ProtocolError` naming ``what`` otherwise."""
    _fields(msg, schemas, what)
    if msg["seq"] != seq:
        raise ProtocolError(
            f"{what} numbered {msg['seq']} where request {seq} was "
            "answered (a second reply, or one written out of turn)"
        )
    return msg


def start_message(msg):
    """The child's first message (its answer's top level ran, or raised), checked."""
    return _conform(msg, (_START_OK, _FAILED), 0, "a first message")


def call_reply(msg, seq):
    """The reply to call request ``seq`` (the result and the arguments after the call,
    or the exception), checked."""
    return _conform(msg, (_CALLED, _FAILED), seq, "a reply to a call")


def end_reply(msg, seq):
    """The reply to the closing request ``seq`` (the report as it stands), checked."""
    return _conform(msg, (_ENDED,), seq, "a closing reply")


# ----------------------------------------------------------------- the fork server's replies
#: the largest reply taken from a fork server (:mod:`autograder.fork_client`)
FORK_REPLY_MAX_BYTES = 1 << 16


def _pid(v):
    return type(v) is int and v > 0


def _code_or_null(v):
    return v is None or type(v) is int


def _flag(v):
    return type(v) is bool


def _seconds_or_null(v):
    return v is None or (type(v) in (int, float) and v >= 0)


#: the schemas of each kind of reply of a fork server (:mod:`autograder.fork_children`)
_FORK_ERROR = {"error": _text(1000)}
FORK_REPLIES = {
    "ready": ({"ready": lambda v: v is True, "loaded": _texts(64, 200), "threads": _seq},),
    "spawn": ({"pid": _pid}, {"pid": _pid, "contained": _flag}, _FORK_ERROR),
    "status": (
        {"code": _code_or_null},
        {"code": _code_or_null, "timed_out": _flag, "limit_s": _seconds_or_null},
        _FORK_ERROR,
    ),
    "other": (_FORK_ERROR,),
}


def fork_reply(data, kind):
    """A fork server's message ``data`` (one datagram, bytes) of the kind ``kind``, read
    by :func:`parse` (at most :data:`FORK_REPLY_MAX_BYTES`) and checked against the
    schemas of :data:`FORK_REPLIES`: ``"ready"`` (its first message), ``"spawn"`` (a
    process id, or an error), ``"status"`` (an exit code or null, or an error),
    ``"other"`` (the error that answers any other request).

    Raises
    ------
    ProtocolError
        If the message is not one of those of ``kind``.
    ValueError
        If ``kind`` is not one of :data:`FORK_REPLIES`.
    """
    if kind not in FORK_REPLIES:
        raise ValueError(f"kind must be one of {sorted(FORK_REPLIES)}, got {kind!r}")
    msg = parse(data, FORK_REPLY_MAX_BYTES)
    return _fields(msg, FORK_REPLIES[kind], f"a fork server's {kind} reply")
