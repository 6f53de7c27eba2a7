"""Throwaway TLS credentials for a local Dask cluster (autograder/dask_tls.py)."""

import os
import stat
import subprocess

import pytest

from autograder.dask_tls import (
    CREDENTIAL_KEYS,
    cluster_security,
    grader_tls,
    have_openssl,
    make_credentials,
)

pytestmark = pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")


def test_the_certificates_chain_to_their_authority_and_the_keys_are_private(tmp_path):
    creds = make_credentials(tmp_path / "tls", days=1)
    assert set(creds) == set(CREDENTIAL_KEYS)
    for cert in (creds["cluster_cert"], creds["cert"]):
        out = subprocess.run(
            ["openssl", "verify", "-CAfile", creds["ca_file"], cert], capture_output=True, text=True
        )
        assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out
    for key in (tmp_path / "tls").glob("*.key"):
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600, key
    assert grader_tls(creds) == {
        "ca_file": creds["ca_file"],
        "cert": creds["cert"],
        "key": creds["key"],
    }
    security = cluster_security(creds)
    assert security.require_encryption and security.tls_ca_file == creds["ca_file"]


def test_bad_arguments_are_named(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("")
    with pytest.raises(ValueError, match="folder"):
        make_credentials(a_file)
    for days in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="days"):
            make_credentials(tmp_path / "x", days=days)
    for creds in (None, {}, {"ca_file": "a"}):
        with pytest.raises(ValueError, match="creds"):
            grader_tls(creds)
        with pytest.raises(ValueError, match="creds"):
            cluster_security(creds)
