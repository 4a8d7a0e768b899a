"""The watchdog keeps being fed while a slow helper runs (issue 10).

systemd kills a service whose WATCHDOG=1 messages stop for WatchdogSec.
sd-event sends them from the loop (sd_event_set_watchdog), so a step that
blocks the loop (a synchronous testparm, smbcontrol or shadow smbd start)
starves the watchdog. Here smbtuned runs as systemd would run it with a
watchdog: NOTIFY_SOCKET names a datagram socket this test binds,
WATCHDOG_USEC is 3 s and WATCHDOG_PID is the daemon's own pid (set in the
forked child right before execve, so the pid is known). SMBTUNED_TESTPARM
points at a wrapper that sleeps 10 s before it execs the real testparm,
far longer than the watchdog period; a second test puts an smbcontrol on
PATH whose first run sleeps as long, under live trials. From READY=1 to
the end of the first tuning cycle, no two consecutive WATCHDOG=1 messages
of the daemon may be further apart than WATCHDOG_USEC: that is the
watchdog's contract itself, not a performance threshold. The wrappers log
their runs, so that the test also shows a slow run really ended inside
the cycle.

SO_PASSCRED gives each message's sender: only the daemon may speak, its
children (jobs, shadow smbds, which announce themselves to a
NOTIFY_SOCKET they inherit) get none.
"""

import os
import re
import select
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest

from daemon_util import RESULT_RE, q

pytestmark = [pytest.mark.smbd, pytest.mark.slow, pytest.mark.serial]

WATCHDOG_USEC = 3_000_000
HELPER_SLEEP_S = 10  # the slow testparm: longer than the watchdog period
CYCLE_TIMEOUT = 150  # bound on one cycle, slow helpers included (not a pass/fail timing)
ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"


class Notifications:
    """A bound AF_UNIX datagram socket and a thread that records every
    message: (time.monotonic(), time.time(), sender pid, text)."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.msgs = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        cred = struct.calcsize("iII")
        while not self.stop:
            try:
                data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(cred))
            except socket.timeout:
                continue
            except OSError:
                return
            mono, wall = time.monotonic(), time.time()
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", payload[:cred])[0]
            with self.lock:
                self.msgs.append((mono, wall, pid, data.decode(errors="replace")))

    def of(self, pid):
        with self.lock:
            return [m for m in self.msgs if m[2] == pid]

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.sock.close()


class ForkedDaemon:
    """smbtuned started with os.fork + os.execve: the child sets
    WATCHDOG_PID to its own pid, which execve keeps."""

    def __init__(self, argv, env, logdir):
        self.err_path = Path(logdir) / "watchdog.stderr"
        out_path = Path(logdir) / "watchdog.stdout"
        err_fd = os.open(self.err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                # a session of its own, as daemon_util's Daemon does
                os.setsid()
                os.dup2(null_fd, 0)
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                os.execve(argv[0], argv, {**env, "WATCHDOG_PID": str(os.getpid())})
            finally:
                os._exit(127)
        for fd in (err_fd, out_fd, null_fd):
            os.close(fd)
        self.returncode = None

    @property
    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def alive(self):
        if self.returncode is None:
            pid, ws = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(ws)
        return self.returncode is None

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                raise AssertionError(f"smbtuned (pid {self.pid}) still running after {timeout} s"
                                     f"\nstderr:\n{self.stderr}")
            time.sleep(0.05)
        return self.returncode

    def kill(self):
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.wait(15)


def slow_helper(path, real, log, once=False):
    """A helper that sleeps first (on its first run only, with once), then
    execs the real one. It logs when each run starts and when a sleep
    ends (wall-clock seconds, comparable with time.time())."""
    assert real, f"{path.name}: the real program is not installed"
    slow = f"sleep {HELPER_SLEEP_S}; echo \"slept $(date +%s.%N)\" >> '{log}'"
    if once:
        slow = f"if mkdir '{path}.slept' 2>/dev/null; then {slow}; fi"
    path.write_text("#!/bin/sh\n"
                    f"echo \"start $(date +%s.%N)\" >> '{log}'\n"
                    f"{slow}\n"
                    f"exec '{real}' \"$@\"\n")
    path.chmod(0o755)


def longest_gap(pings, t0, t1):
    """The longest stretch of [t0, t1] without a ping. It counts from t0,
    READY=1: start-up itself is bounded by TimeoutStartSec, not by the
    watchdog."""
    marks = [t0] + [p for p in pings if t0 < p <= t1] + [t1]
    return max(b - a for a, b in zip(marks, marks[1:]))


def first_cycle(env, extra_env, until=None, end_re=RESULT_RE):
    """Run the daemon with a watchdog until its first cycle ends (end_re
    matches its stderr) and until(daemon) is true, when given (it is called
    on every look); returns its pid, its notifications, and (monotonic,
    wall) times of READY=1 and of the end."""
    # a short path: a unix socket's name has at most 107 bytes
    sockdir = Path(tempfile.mkdtemp(prefix="smbtd-notify-", dir="/tmp"))
    notes = Notifications(sockdir / "notify")
    d = None
    try:
        e = env.env()
        e.update({"NOTIFY_SOCKET": str(notes.path), "WATCHDOG_USEC": str(WATCHDOG_USEC),
                  **extra_env})
        d = ForkedDaemon(env.cmd(), e, env.logdir)
        deadline = time.monotonic() + CYCLE_TIMEOUT
        ready = end = None
        while end is None:
            assert time.monotonic() < deadline, \
                f"no end of the first cycle after {CYCLE_TIMEOUT} s\nstderr:\n{d.stderr}"
            assert d.alive(), f"smbtuned exited ({d.returncode})\nstderr:\n{d.stderr}"
            if ready is None:
                got = [m for m in notes.of(d.pid) if "READY=1" in m[3].split("\n")]
                ready = (got[0][0], got[0][1]) if got else None
            done = until is None or until(d)
            if ready is not None and end_re.search(d.stderr) and done:
                end = (time.monotonic(), time.time())
            time.sleep(0.01)
        msgs = notes.of(d.pid)
        # Its children (jobs, shadow smbds, the probe) get no NOTIFY_SOCKET:
        # only smbtuned speaks for its unit.
        others = [m for m in notes.msgs if m[2] != d.pid]
        assert not others, f"messages from children of smbtuned: {others[:3]}"
        os.kill(d.pid, signal.SIGTERM)
        assert d.wait(60) == 0, d.stderr
        return d, msgs, ready, end
    finally:
        if d is not None:
            d.kill()
        notes.close()
        shutil.rmtree(sockdir, ignore_errors=True)


def check_fed(d, msgs, ready, end, runs):
    """The slow helper ran and ended inside the cycle, and the watchdog
    never went hungry from READY=1 to the cycle's end."""
    pings = [m[0] for m in msgs if "WATCHDOG=1" in m[3].split("\n")]
    assert pings, f"no WATCHDOG=1 from smbtuned (pid {d.pid}) at all:\n{msgs}\n{d.stderr}"
    log = runs.read_text().split() if runs.exists() else []
    slept = [float(v) for k, v in zip(log[::2], log[1::2]) if k == "slept"]
    assert any(ready[1] < t < end[1] for t in slept), \
        f"no slow run of the helper ended within the cycle: {log}\n{d.stderr}"
    gap = longest_gap(pings, ready[0], end[0])
    assert gap <= WATCHDOG_USEC / 1e6, \
        f"{gap:.1f} s without WATCHDOG=1 during the cycle (WATCHDOG_USEC is " \
        f"{WATCHDOG_USEC / 1e6:.0f} s): systemd would have killed smbtuned\n" \
        f"pings after READY=1 at +s: {[round(p - ready[0], 2) for p in pings if p >= ready[0]]}" \
        f"\nstderr:\n{d.stderr}"


def test_watchdog_fed_while_testparm_is_slow(make_env, tmp_path):
    env = make_env(ON_LATTICE)
    # advise: measures and reports, never writes smb.conf, so the cycle's
    # testparm runs are the look-ups every cycle makes (smbd's ports and
    # pid directory), each 10 s long
    env.write_config(tune={"mode": q("advise"), "trials": q("shadow"), "interval": "1h"})
    wrapper, runs = tmp_path / "testparm-slow", tmp_path / "testparm-runs"
    slow_helper(wrapper, shutil.which("testparm"), runs)
    check_fed(*first_cycle(env, {"SMBTUNED_TESTPARM": str(wrapper)}), runs)


def test_watchdog_fed_while_smbcontrol_is_slow(make_env, tmp_path):
    env = make_env(ON_LATTICE)
    # live trials applied with smbcontrol: every trial written is applied;
    # the first smbcontrol takes 10 s, the others none, to keep the cycle
    # short
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol"), "interval": "1h",
                           "max_bytes": "96M"})
    bindir = tmp_path / "bin"
    bindir.mkdir()
    runs = tmp_path / "smbcontrol-runs"
    slow_helper(bindir / "smbcontrol", shutil.which("smbcontrol"), runs, once=True)
    path = f"{bindir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    check_fed(*first_cycle(env, {"PATH": path}), runs)


# Any end of a cycle: a probe of the stopped shadow fails the cycle.
CYCLE_END_RE = re.compile(r"^<\d>cycle (done|failed) after ", re.M)


class StopOneShadow:
    """Stops (SIGSTOP) the first shadow smbd once it serves: a shadow that
    does not heed the SIGTERM of its stop, as one hung in I/O would not.
    True once that smbd has exited (the daemon killed it). Signals and the
    look go through a pidfd: the number may be someone else's once reaped."""

    def __init__(self, env):
        self.base = env.state_dir / "shadow"
        self.pid = None
        self.pidfd = None

    def serving(self, run_dir):
        """The run's smbd pid once it listens on its port, else None."""
        try:
            owner = (run_dir / "trial.pid").read_text().split()
            port = re.search(r"^\s*smb ports = (\d+)$", (run_dir / "smb.conf").read_text(),
                             re.M)
        except OSError:
            return None
        if len(owner) != 6 or owner[4] == "0" or port is None:
            return None
        try:
            socket.create_connection(("127.0.0.1", int(port.group(1))), timeout=0.2).close()
        except OSError:
            return None
        return int(owner[4])

    def __call__(self, daemon):
        if self.pid is None:
            for run_dir in sorted(self.base.glob("shadow-*")) if self.base.exists() else []:
                pid = self.serving(run_dir)
                if pid is not None:
                    self.pidfd = os.pidfd_open(pid)
                    signal.pidfd_send_signal(self.pidfd, signal.SIGSTOP)
                    self.pid = pid
                    break
            return False
        # readable once it has exited: its number may be reused after
        # the reap, the pidfd's process not
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def release(self):
        """The stopped smbd, if the test failed before the daemon ended it."""
        if self.pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self.pidfd)


def test_watchdog_fed_while_a_shadow_will_not_stop(make_env):
    """A shadow smbd that does not heed SIGTERM is stopped in steps
    (daemon/place.c): SIGKILL after TRIAL_STOP_TIMEOUT_S (10 s), and the
    loop, with its watchdog, goes on meanwhile. The watch runs from READY=1
    until that smbd is gone and the cycle has ended."""
    env = make_env(ON_LATTICE)
    # advise: measures and reports, never writes smb.conf; a short probe
    # deadline, as the probe of the stopped shadow waits for it
    env.write_config(probe={"deadline": "3", "duration": "1"},
                     tune={"mode": q("advise"), "trials": q("shadow"), "interval": "1h"})
    stopper = StopOneShadow(env)
    try:
        d, msgs, ready, end = first_cycle(env, {}, until=stopper, end_re=CYCLE_END_RE)
    finally:
        stopper.release()
    assert stopper.pid is not None, f"no shadow smbd was seen serving\n{d.stderr}"
    pings = [m[0] for m in msgs if "WATCHDOG=1" in m[3].split("\n")]
    gap = longest_gap(pings, ready[0], end[0])
    assert gap <= WATCHDOG_USEC / 1e6, \
        f"{gap:.1f} s without WATCHDOG=1 while a shadow smbd was being stopped (WATCHDOG_USEC " \
        f"is {WATCHDOG_USEC / 1e6:.0f} s)\nstderr:\n{d.stderr}"
    assert "did not stop within 10 s of SIGTERM: it was killed" in d.stderr, d.stderr
    assert env.leftovers() == []
