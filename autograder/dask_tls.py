"""Throwaway TLS credentials for a Dask cluster on one machine.

``autograde --scheduler`` refuses a scheduler that authenticates no one (``tcp://``), since
any process that reaches its port runs code as the workers' user. A ``LocalCluster`` that
grades a term on one machine (and the tests and benchmarks that start one) therefore gets
its own certificate authority, made here with the ``openssl`` command: one certificate for
the cluster's processes and one for the grader, each key readable by its owner only, so
that no confined student code (another user id) can read it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["have_openssl", "make_credentials", "cluster_security", "grader_tls"]

#: the keys of the dictionary :func:`make_credentials` returns
CREDENTIAL_KEYS = ("ca_file", "cluster_cert", "cluster_key", "cert", "key")


def have_openssl():
    """Whether the ``openssl`` command is on the ``PATH``."""
    return shutil.which("openssl") is not None


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_credentials(folder, days=2):
    """Write a certificate authority and two signed key pairs into ``folder``.

    Parameters
    ----------
    folder : str or path
        Where ``ca.pem``, ``cluster.pem``/``cluster.key`` and ``grader.pem``/``grader.key``
        are written (created if missing).
    days : int
        Validity of the certificates.

    Returns
    -------
    dict
        ``{"ca_file", "cluster_cert", "cluster_key", "cert", "key"}``: paths as strings.

    Raises
    ------
    ValueError
        If ``folder`` is an existing file or ``days`` is not a positive integer.
    RuntimeError
        If the ``openssl`` command is missing.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"folder must be a folder, got the file {folder}")
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ValueError(f"days must be a positive integer, got {days!r}")
    if not have_openssl():
        raise RuntimeError("the openssl command is needed to make TLS credentials")
    folder.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        str(days),
        "-subj",
        "/CN=autograder-local-ca",
        cwd=folder,
    )
    for who in ("cluster", "grader"):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{who}.key",
            "-out",
            f"{who}.csr",
            "-subj",
            f"/CN=autograder-local-{who}",
            cwd=folder,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{who}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{who}.pem",
            "-days",
            str(days),
            cwd=folder,
        )
    for key in folder.glob("*.key"):
        os.chmod(key, 0o600)
    return {
        "ca_file": str(folder / "ca.pem"),
        "cluster_cert": str(folder / "cluster.pem"),
        "cluster_key": str(folder / "cluster.key"),
        "cert": str(folder / "grader.pem"),
        "key": str(folder / "grader.key"),
    }


def _check_creds(creds):
    if not isinstance(creds, dict) or any(k not in creds for k in CREDENTIAL_KEYS):
        raise ValueError(
            f"creds must be the dictionary make_credentials returns (keys "
            f"{', '.join(CREDENTIAL_KEYS)}), got {creds!r}"
        )


def cluster_security(creds):
    """The ``distributed.Security`` of the cluster's scheduler and workers: TLS only, and
    every peer must show a certificate of the same authority.

    Parameters
    ----------
    creds : dict
        What :func:`make_credentials` returned.
    """
    _check_creds(creds)
    from distributed import Security

    return Security(
        tls_ca_file=creds["ca_file"],
        require_encryption=True,
        tls_scheduler_cert=creds["cluster_cert"],
        tls_scheduler_key=creds["cluster_key"],
        tls_worker_cert=creds["cluster_cert"],
        tls_worker_key=creds["cluster_key"],
        tls_client_cert=creds["cluster_cert"],
        tls_client_key=creds["cluster_key"],
    )


def grader_tls(creds):
    """What the grader passes to ``Course.autograde(tls=...)``: ``{"ca_file", "cert",
    "key"}``.

    Parameters
    ----------
    creds : dict
        What :func:`make_credentials` returned.
    """
    _check_creds(creds)
    return {"ca_file": creds["ca_file"], "cert": creds["cert"], "key": creds["key"]}
