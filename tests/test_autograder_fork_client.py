"""The fork server's replies are read as hostile (autograder/fork_client.py through
autograder/wire.py): at most a datagram's cap, bounded nesting, exactly the fields of one
schema of the reply's kind, and nothing the server sends is looked up.

A server runs in a sandbox that student code reaches (a kernel server sits beside a
student's nbgrader run), so here a peer on the other end of the socket plays that server
and sends what it likes.
"""

import json
import socket

import pytest

from autograder import wire
from autograder.fork_client import ForkServer

READY = {"ready": True, "loaded": ["numpy"], "threads": 1}


class _Gone:
    """The server's process stand-in: already ended."""

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0

    def kill(self):
        pass


@pytest.fixture
def pair():
    """``(client, peer)``: a client on one end of a socket pair, the hostile server's end."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client = ForkServer(ours, _Gone(), "a hostile server")
    yield client, theirs
    client.close()
    theirs.close()


def _send(peer, msg):
    peer.send(msg if isinstance(msg, bytes) else json.dumps(msg).encode())


@pytest.mark.parametrize(
    "kind, msg",
    [
        ("ready", READY),
        ("spawn", {"pid": 12}),
        ("spawn", {"pid": 12, "contained": False}),
        ("spawn", {"error": "no"}),
        ("status", {"code": None}),
        ("status", {"code": -9, "timed_out": True, "limit_s": 4.0}),
        ("other", {"error": "unknown op"}),
    ],
)
def test_every_reply_of_the_protocol_is_taken(kind, msg):
    assert wire.fork_reply(json.dumps(msg).encode(), kind) == msg


@pytest.mark.parametrize(
    "kind, msg",
    [
        ("ready", {**READY, "threads": "1"}),
        ("ready", {**READY, "loaded": ["x" * 201]}),
        ("ready", {**READY, "extra": 1}),
        ("spawn", {"pid": "12"}),
        ("spawn", {"pid": True}),
        ("spawn", {"pid": -1}),
        ("spawn", {"pid": 12, "contained": 1}),
        ("spawn", {"code": 0}),  # a status reply where a spawn's was due
        ("status", {"code": 1.5}),
        ("status", {"code": 0, "timed_out": False, "limit_s": "forever"}),
        ("status", {"__class__": "os.system", "code": 0}),
        ("other", {"pid": 12}),
        ("spawn", [12]),
        ("spawn", b"[" * 100 + b"]" * 100),
        ("spawn", b'{"error": "' + b"x" * (wire.FORK_REPLY_MAX_BYTES + 1) + b'"}'),
        ("spawn", b"\xff\xfe"),
    ],
)
def test_a_reply_outside_its_schema_is_refused(kind, msg):
    data = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
    with pytest.raises(wire.ProtocolError):
        wire.fork_reply(data, kind)


def test_an_unknown_kind_is_a_caller_error():
    with pytest.raises(ValueError, match="kind"):
        wire.fork_reply(b"{}", "hello")


def test_a_forged_first_message_leaves_no_server_to_fork_from(pair):
    client, peer = pair
    _send(peer, {"ready": True, "loaded": ["numpy"], "threads": 1, "run": "os.system"})
    with pytest.raises(OSError, match="broke the protocol"):
        client.ready(5.0)


def test_a_server_holding_threads_is_not_used(pair):
    client, peer = pair
    _send(peer, {**READY, "threads": 3})
    with pytest.raises(OSError, match="cannot fork"):
        client.ready(5.0)


def test_a_forged_spawn_reply_starts_nothing(pair):
    """A spawn answered by a reply of another kind, by one over the cap, or by a pid that
    is not a number gives no process: the caller then starts its child the usual way."""
    client, peer = pair
    _send(peer, READY)
    assert client.ready(5.0)
    for forged in (
        {"code": 0},
        {"pid": "1"},
        b'{"pid": 1, "x": "' + b"y" * (wire.FORK_REPLY_MAX_BYTES + 10) + b'"}',
    ):
        _send(peer, forged)
        assert client.spawn({"argv": ["x"]}, stdout=True) is None
        peer.recv(1 << 16)  # the request the client sent


def test_a_forged_status_reply_reads_as_a_process_that_is_gone(pair):
    client, peer = pair
    _send(peer, READY)
    _send(peer, {"code": "0; rm -rf /"})
    with pytest.raises(OSError, match="broke the protocol"):
        client.exit_code(12)
    peer.recv(1 << 16)
    _send(peer, {"code": None, "timed_out": False, "limit_s": None})
    assert client.exit_code(12) is None
