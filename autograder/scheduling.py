"""Where grading runs: how many students at a time on this machine, or on which Dask
cluster, and the settings under which the grader connects to it.

A Dask scheduler runs whatever a client that reaches it submits, as the user its workers
run as, so the grader refuses one that does not authenticate its clients
(:func:`scheduler_config`) unless told that no student code can reach it.
"""

from __future__ import annotations

import contextlib
import numbers
from pathlib import Path

__all__ = ["check_scheduler", "check_workers", "dask_settings", "scheduler_config"]


def check_workers(workers):
    """Return ``workers`` if it is an integer >= 1, else raise ValueError."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return int(workers)


def check_scheduler(scheduler):
    """Return ``scheduler`` if it is None or a non-empty address, else raise ValueError."""
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be an address such as tls://host:8786, got {scheduler!r}")
    return scheduler


def scheduler_config(scheduler, tls=None, insecure=False):
    """Dask settings under which the grader connects to ``scheduler``; raises ValueError
    before anything is graded when the connection would not be authenticated.

    A Dask scheduler runs whatever a client that reaches it submits, as the user its
    workers run as. A ``tcp://`` scheduler accepts any client, so it is refused unless
    ``insecure`` is given (a cluster that no student code can reach). A ``tls://`` one
    needs ``tls = {"ca_file": ..., "cert": ..., "key": ...}``: the certificate authority
    that signed the cluster's certificates, and this grader's certificate and key (paths;
    the scheduler must require client certificates, ``distributed.comm.tls`` on its
    side). The key file must be readable by its owner only: confined student code runs
    under a user id of its own (as root), which then cannot read it.

    Returns
    -------
    dict
        Dask configuration (``distributed.comm.*``) to set while the client connects; empty
        without a scheduler or for an accepted ``tcp://`` one.
    """
    if scheduler is None:
        if tls:
            raise ValueError("tls: credentials were given without a scheduler address")
        return {}
    if not str(scheduler).startswith("tls://"):
        if insecure:
            return {}
        raise ValueError(
            f"scheduler {scheduler!r}: a Dask scheduler reached without TLS authenticates "
            "no one, and any process that reaches its port runs code on the cluster; use a "
            "tls:// address with credentials (--tls-ca-file, --tls-cert, --tls-key), or "
            "--insecure-scheduler for a cluster that no student code can reach"
        )
    tls = dict(tls or {})
    missing = [k for k in ("ca_file", "cert", "key") if not tls.get(k)]
    if missing:
        raise ValueError(
            f"scheduler {scheduler!r}: tls needs {', '.join(missing)} "
            "(--tls-ca-file, --tls-cert, --tls-key)"
        )
    for k in ("ca_file", "cert", "key"):
        if not Path(tls[k]).is_file():
            raise ValueError(f"tls {k}: no such file: {tls[k]}")
    mode = Path(tls["key"]).stat().st_mode
    if mode & 0o077:
        raise ValueError(
            f"tls key {tls['key']} is readable by other users (mode "
            f"{mode & 0o777:o}); make it readable by its owner only "
            "(chmod 600), so that no sandboxed code can read it"
        )
    return {
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": str(Path(tls["ca_file"]).resolve()),
        "distributed.comm.tls.client.cert": str(Path(tls["cert"]).resolve()),
        "distributed.comm.tls.client.key": str(Path(tls["key"]).resolve()),
    }


def dask_settings(config):
    """A context in which Dask's configuration holds ``config`` (the dict of
    :func:`scheduler_config`; nothing is set without it)."""
    if not config:
        return contextlib.nullcontext()
    import dask

    return dask.config.set(config)
