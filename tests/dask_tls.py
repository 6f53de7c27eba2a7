"""Throwaway TLS credentials for a Dask cluster in the tests (made with the openssl
command): a certificate authority, one certificate for the cluster's own processes and
one for the grader, each key readable by its owner only."""
import os
import shutil
import subprocess
from pathlib import Path


def have_openssl():
    return shutil.which("openssl") is not None


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_credentials(folder):
    """Write ``ca.pem`` and ``cluster`` and ``grader`` key pairs into ``folder``;
    returns ``{"ca_file", "cluster_cert", "cluster_key", "cert", "key"}`` (paths)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", "2", "-subj", "/CN=autograder-test-ca", cwd=folder)
    for who in ("cluster", "grader"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key",
                 "-out", f"{who}.csr", "-subj", f"/CN=autograder-test-{who}", cwd=folder)
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{who}.pem", "-days", "2", cwd=folder)
    for key in folder.glob("*.key"):
        os.chmod(key, 0o600)
    return {"ca_file": str(folder / "ca.pem"), "cluster_cert": str(folder / "cluster.pem"),
            "cluster_key": str(folder / "cluster.key"), "cert": str(folder / "grader.pem"),
            "key": str(folder / "grader.key")}


def cluster_security(creds):
    """The ``distributed.Security`` of the cluster's scheduler and workers: TLS only, and
    every peer must show a certificate of the same authority."""
    from distributed import Security

    return Security(tls_ca_file=creds["ca_file"], require_encryption=True,
                    tls_scheduler_cert=creds["cluster_cert"],
                    tls_scheduler_key=creds["cluster_key"],
                    tls_worker_cert=creds["cluster_cert"], tls_worker_key=creds["cluster_key"],
                    tls_client_cert=creds["cluster_cert"], tls_client_key=creds["cluster_key"])


def grader_tls(creds):
    """What the grader passes to ``Course.autograde(tls=...)``."""
    return {"ca_file": creds["ca_file"], "cert": creds["cert"], "key": creds["key"]}
