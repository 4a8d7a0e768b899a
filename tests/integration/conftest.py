"""Fixtures shared by the integration tests.

smbd_factory(**options) starts a real, throwaway smbd under the test's
tmp_path (see smbd.py for the options); every smbd it started is stopped
when the test ends, pass or fail. `smbd` is one such server with defaults.
`smbtuned` is the path of the binary under test ($SMBTUNED, default
<repo>/build/daemon/smbtuned); tests that need it skip when it is missing.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_util import DaemonEnv  # noqa: E402
from smbd import SMBD, SmbdFactory  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
EDITOR_TIMEOUT = 60  # seconds; the editor never needs more


def copy_fixture(src, dst):
    """Copy a corpus directory to dst (links stay links, expect.json is
    left out) and replace @DIR@ in every regular file with dst, so that
    include lines get the absolute paths Samba needs. Returns dst."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("expect.json"))
    for p in Path(dst).rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if b"@DIR@" in data:
                p.write_bytes(data.replace(b"@DIR@", str(dst).encode()))
    return Path(dst)


def run_editor(smbtuned, *args, timeout=EDITOR_TIMEOUT, prefix=()):
    """Run smbtuned with args (paths allowed); CompletedProcess, text."""
    cmd = [*prefix, str(smbtuned), *(str(a) for a in args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def samba_value(conf):
    """`socket options` as Samba's own parser sees it in conf."""
    r = subprocess.run(["testparm", "-s", "--parameter-name=socket options", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"testparm {conf} failed: {r.stderr}"
    return r.stdout.rstrip("\n")


def pytest_collection_modifyitems(config, items):
    """The tests of minutes that mostly wait (marked minutes: the 144 s of
    the open-files wait, a cycle a minute) first, the rest in their own
    order: under pytest-xdist one handed out last runs alone at the end
    while the other worker idles. Only those: all slow tests first
    (ee4b405) put the busy ones side by side and the waiting ones side by
    side, and the half took 15:53 instead of 12:19; the valgrind run (busy,
    3 minutes) keeps its place a third of the way in."""
    items.sort(key=lambda item: item.get_closest_marker("minutes") is None)


def pytest_configure(config):
    config.addinivalue_line("markers", "smbd: starts a real smbd (needs root and samba)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line("markers", "minutes: takes minutes, mostly waiting; collected first")
    # scripts/test runs the rest with pytest-xdist (-n 2) and these after,
    # one at a time: they measure rates or time (a WAN path, a watchdog,
    # busy clients) that a neighbour test's load would move.
    config.addinivalue_line("markers", "serial: run alone, never beside another test")
    # Guests (nobody) must traverse the test's directories to reach a share
    # (smbd.py opens them with o+x). Every pytest session resets
    # /tmp/pytest-of-root to 0700, so a second session started while one
    # runs locks the first one's guests out ("Permission denied" on the
    # share). A base directory of each session's own avoids that. Its name
    # is short: a tmp_path/"state" below it (pytest adds the test's name, 30
    # characters and a number) must stay within the 56 bytes smbtuned takes
    # for a state_dir where shadow trials run (52 here, 54 under xdist).
    global _own_basetemp
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = _own_basetemp = tempfile.mkdtemp(prefix="s", dir="/tmp")
    # pytest-xdist (scripts/test runs this suite with -n 2) gives each
    # worker BASE/popen-gwN, 10 bytes more than that budget has: BASE/N.
    if hasattr(config, "workerinput") and config.option.basetemp:
        base = os.path.dirname(os.path.normpath(config.option.basetemp))
        config.option.basetemp = os.path.join(base, config.workerinput["workerid"].lstrip("gw"))


_own_basetemp = None


def pytest_sessionfinish(session, exitstatus):
    # The session's own base directory goes when every test passed; after a
    # failure it stays, for the logs in it. One given with --basetemp is
    # not ours to remove.
    base = session.config.option.basetemp
    if exitstatus == 0 and base and base == _own_basetemp:
        shutil.rmtree(base, ignore_errors=True)


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


@pytest.fixture
def make_env(smbtuned, smbd_factory, tmp_path):
    """make_env(socket_options, **smbd_args) -> DaemonEnv around a fresh
    fixture smbd whose smb.conf has that socket options line (smbd_args go
    to smbd_factory)."""
    envs = []

    def make(socket_options, **smbd_args):
        srv = smbd_factory(socket_options=socket_options, **smbd_args)
        env = DaemonEnv(smbtuned, srv, tmp_path)
        envs.append(env)
        return env

    try:
        yield make
    finally:
        for env in envs:
            env.cleanup()
