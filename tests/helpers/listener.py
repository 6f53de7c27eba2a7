"""A service listening on the machine's loopback, and whether anything reached it: what a
sandboxed answer must not be able to call (a Dask scheduler, a database)."""

import socket


def listener():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    return srv


def was_reached(srv):
    """Whether a connection is waiting (accepted and closed here)."""
    try:
        conn, _ = srv.accept()
        conn.close()
        return True
    except OSError:
        return False
