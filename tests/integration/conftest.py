"""Fixtures shared by the integration tests.

smbd_factory(**options) starts a real, throwaway smbd under the test's
tmp_path (see smbd.py for the options); every smbd it started is stopped
when the test ends, pass or fail. `smbd` is one such server with defaults.
`smbtuned` is the path of the binary under test ($SMBTUNED, default
<repo>/build/daemon/smbtuned); tests that need it skip when it is missing.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from smbd import SMBD, SmbdFactory  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config):
    config.addinivalue_line("markers", "smbd: starts a real smbd (needs root and samba)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


def _require_smbd():
    if os.geteuid() != 0:
        pytest.skip("a real smbd needs root")
    if not os.access(SMBD, os.X_OK):
        pytest.skip(f"{SMBD} is not installed")
    for tool in ("smbclient", "smbcontrol"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


@pytest.fixture
def smbd_factory(tmp_path):
    _require_smbd()
    factory = SmbdFactory(tmp_path / "smbd")
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def smbd(smbd_factory):
    return smbd_factory()


@pytest.fixture(scope="session")
def smbtuned():
    path = Path(os.environ.get("SMBTUNED", REPO / "build" / "daemon" / "smbtuned"))
    if not path.is_absolute():
        path = (REPO / path).resolve()
    if not os.access(path, os.X_OK):
        pytest.skip(f"smbtuned binary not found at {path} (build it or set SMBTUNED)")
    return path
