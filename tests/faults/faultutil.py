"""The checks every injected fault ends with, and helpers to inject them.

After each fault (tests/faults/test_*.py) these hold, whatever the daemon
made of it (issue 9, "Faults"):

- check_journal(text, pattern): the daemon said what happened, in a
  journal line (`<N>message` on its stderr) that matches pattern;
- check_no_probe_file(env): no probe file is left in the share;
- check_no_shadow(env): no shadow smbd of this env's daemon runs (it names
  env's unique state directory on its command line);
- check_smb_conf(conf, before): smb.conf holds its old bytes, or a complete
  candidate that Samba's testparm accepts (and reads as the line says),
  with every other line byte-identical, and no editor temp file is left;
- check_promises(env, before, text, pattern): all four; every fault test
  calls it, so that all of them hold the daemon to the same promises.

Helpers: fault_env (a fixture: FaultEnvs around fresh fixture smbds),
FaultEnv (a DaemonEnv with extra environment variables, e.g. a
PATH with a wrapper first or SMBTUNED_TESTPARM), wrapper() (a
fault-injecting script around a real tool), hold_after_write() (a
testparm wrapper that holds the daemon right after a commit's write),
shadow_pids(), wait_until()
(every wait is bounded), restart_smbd().

The checks raise AssertionError with a reason and the daemon's stderr.
"""

import contextlib
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from daemon_util import (EDITOR_TEMP_GLOB, PROBE_FILE_GLOB, WAIT_S, DaemonEnv,
                         only_socket_line_changed, proc_cmdline, procs_naming, socket_value)

# The real testparm, never a wrapper a test put first on PATH.
TESTPARM = shutil.which("testparm", path="/usr/bin:/bin:/usr/sbin:/sbin") or "testparm"
TESTPARM_TIMEOUT = 60  # seconds; testparm of a small file takes well under 1 s
HOLD_WAIT = 30  # hold_after_write holds the daemon at most this long (its testparm allows 60)

JOURNAL_RE = re.compile(r"^<([0-7])>(.*)$", re.M)
# A buffer token as the editor writes it: NAME=decimal (FACTS.md: spaces
# around '=' or a suffix make Samba use the kernel's minimum).
BUF_TOKEN_RE = re.compile(r"^SO_(RCV|SND)BUF=\d+$", re.I)


def _tail(text, n=60):
    return "\n".join((text or "").splitlines()[-n:])


# ------------------------------------------------------------------ waiting

def wait_until(pred, timeout, what, poll=0.01):
    """Poll pred() until it returns something true (returned); fails with
    `what` after timeout seconds. A bound on a wait, never a pass/fail
    timing: a healthy run is done long before it."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {what} after {timeout} s")
        time.sleep(poll)


# ------------------------------------------------------------------ journal

def journal_lines(text):
    """[(priority, message)] of the journal lines in a daemon's stderr."""
    return [(int(m.group(1)), m.group(2)) for m in JOURNAL_RE.finditer(text or "")]


def check_journal(text, pattern):
    """The last journal line of text (a daemon's stderr) that matches
    pattern (a regex searched in the message); fails when there is none."""
    rx = re.compile(pattern)
    hits = [m for _, m in journal_lines(text) if rx.search(m)]
    assert hits, f"no journal line matches {pattern!r}; stderr ends:\n{_tail(text)}"
    return hits[-1]


# ------------------------------------------------------------------ the share

def probe_files(env):
    return sorted(Path(env.srv.share_dir).rglob(PROBE_FILE_GLOB))


def check_no_probe_file(env, wait=0.0, text=""):
    """No probe file in the share (after up to `wait` seconds: a probe
    killed a moment ago may still be closing it)."""
    deadline = time.monotonic() + wait
    left = probe_files(env)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = probe_files(env)
    assert not left, f"probe file(s) left in the share: {left}\nstderr ends:\n{_tail(text)}"


# ------------------------------------------------------------------ shadow smbds

def shadow_pids(env, parent=None):
    """{pid: argv} of live smbd processes whose command line names env's
    state directory (shadow smbds of this env's daemons; the state dir is
    unique to the env). With parent: only its direct children."""
    out = {}
    for pid, argv in procs_naming([str(env.state_dir).encode()]).items():
        if not argv or os.path.basename(argv[0]) != "smbd":
            continue
        if parent is not None and _ppid(pid) != parent:
            continue
        out[pid] = argv
    return out


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def check_no_shadow(env, wait=WAIT_S, text="", run_dirs=False):
    """No shadow smbd of env runs (its children get up to `wait` seconds to
    follow their parent). With run_dirs, no shadow run directory is left
    either (a kill -9 leaves one for the next start to sweep)."""
    deadline = time.monotonic() + wait
    left = shadow_pids(env)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = shadow_pids(env)
    assert not left, "shadow smbd(s) still run:\n" + "\n".join(
        f"  {pid}: {' '.join(a)}" for pid, a in left.items()) + f"\nstderr ends:\n{_tail(text)}"
    if run_dirs:
        shadow = Path(env.state_dir) / "shadow"
        dirs = sorted(shadow.iterdir()) if shadow.exists() else []
        assert not dirs, f"shadow run dir(s) left: {dirs}\nstderr ends:\n{_tail(text)}"


# ------------------------------------------------------------------ smb.conf

def testparm_value(conf):
    """(returncode, socket options as the real testparm reads conf, stderr)."""
    r = subprocess.run([TESTPARM, "-s", "--parameter-name=socket options", str(conf)],
                       capture_output=True, text=True, timeout=TESTPARM_TIMEOUT,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout.rstrip("\n"), r.stderr


def check_smb_conf(conf, before, text=""):
    """smb.conf (path conf) holds `before` (bytes) or a complete candidate:
    only the socket options line differs, every other line byte for byte;
    its buffer tokens are NAME=decimal; testparm accepts the file and reads
    the value the line holds. No editor temp file is left beside it.
    Returns "old" or "candidate"."""
    conf = Path(conf)
    temps = sorted(conf.parent.glob(EDITOR_TEMP_GLOB))
    assert not temps, f"editor temp file(s) left: {temps}\nstderr ends:\n{_tail(text)}"
    after = conf.read_bytes()
    if after == before:
        return "old"
    why = only_socket_line_changed(before, after)
    assert why is None, f"smb.conf damaged: {why}\nstderr ends:\n{_tail(text)}"
    assert after.endswith(b"\n") == before.endswith(b"\n"), "final newline changed"
    value = socket_value(after)
    for tok in re.split(r"[ \t,]+", value):
        if tok.upper().startswith(("SO_RCVBUF", "SO_SNDBUF")):
            assert BUF_TOKEN_RE.match(tok), f"malformed buffer token {tok!r} in {value!r}"
    rc, judge, err = testparm_value(conf)
    assert rc == 0, f"testparm refuses smb.conf after the fault: {err}\n{after.decode()}"
    assert judge.split() == value.split(), \
        f"testparm reads socket options {judge!r}, the line says {value!r}"
    return "candidate"


def check_promises(env, before, text, pattern, conf=None, wait=WAIT_S, run_dirs=False):
    """Every promise after one injected fault: a journal line of text
    matching pattern (returned first), no probe file in the share, no
    shadow smbd, smb.conf old or a complete candidate. Returns (the
    journal line, "old" or "candidate")."""
    line = check_journal(text, pattern)
    check_no_shadow(env, wait=wait, text=text, run_dirs=run_dirs)
    check_no_probe_file(env, wait=wait, text=text)
    outcome = check_smb_conf(conf or env.srv.conf, before, text=text)
    return line, outcome


# ------------------------------------------------------------------ injecting

class FaultEnv(DaemonEnv):
    """A DaemonEnv whose runs get extra environment variables (extra_env),
    e.g. PATH with a wrapper directory first, or SMBTUNED_TESTPARM."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.extra_env = {}

    def env(self):
        e = super().env()
        e.update(self.extra_env)
        return e

    def path_first(self, bindir):
        """Put bindir first on the PATH of later runs."""
        self.extra_env["PATH"] = f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


@pytest.fixture
def fault_env(smbtuned, smbd_factory, tmp_path):
    """fault_env(socket_options) -> FaultEnv around a fresh fixture smbd
    whose smb.conf has that socket options line; cleaned up at the end.
    A test module imports it to use it."""
    with contextlib.ExitStack() as stack:
        def make(socket_options):
            env = FaultEnv(smbtuned, smbd_factory(socket_options=socket_options), tmp_path)
            stack.callback(env.cleanup)
            return env
        yield make


def wrapper(bindir, name, body):
    """Write an executable sh script bindir/name: `body` (sh text) runs
    first, with $REAL set to the real tool's path; it ends with `exec
    "$REAL" "$@"` unless body exits itself. Returns the script's path."""
    bindir = Path(bindir)
    bindir.mkdir(parents=True, exist_ok=True)
    real = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    assert real, f"{name} is not installed"
    p = bindir / name
    p.write_text(f'#!/bin/sh\nREAL={real}\n{body}\nexec "$REAL" "$@"\n')
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


def hold_after_write(env):
    """A testparm wrapper: the first socket-options call after the state
    file records a pending commit (the winner is written, testparm is asked
    to read it back) touches HOLD/held and waits (at most HOLD_WAIT s) for
    HOLD/go. Returns HOLD."""
    hold = env.tmp / "hold"
    hold.mkdir()
    bindir = env.tmp / "bin"
    wrapper(bindir, "testparm", f"""\
case "$*" in
*"--parameter-name=socket options"*)
    if grep -q '^pending_commit yes' {env.state_dir}/state 2>/dev/null &&
       [ ! -e {hold}/held ]; then
        : > {hold}/held
        i=0
        while [ ! -e {hold}/go ] && [ $i -lt {HOLD_WAIT * 10} ]; do
            sleep 0.1; i=$((i + 1))
        done
    fi
    ;;
esac""")
    env.path_first(bindir)
    return hold


def restart_smbd(srv, timeout=30):
    """Stop the fixture smbd srv (its PID, SIGTERM then SIGKILL) and start
    it again on the same config and port; waits until it serves."""
    from smbd import SmbdFactory, _wait_ready  # the fixture's own start-up
    srv.stop()
    SmbdFactory._spawn(None, srv, [])
    _wait_ready(srv, timeout)


def alive_not_zombie(pid):
    return proc_cmdline(pid) is not None
