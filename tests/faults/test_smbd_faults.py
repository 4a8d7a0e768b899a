"""The production smbd stopped, restarted and hung during a trial and during
a commit; a shadow smbd killed mid-trial.

- During a trial: a live trial's value is in smb.conf and its probe is on
  the wire (a probe file is in the share). The probe fails (stopped,
  restarted) or runs into its deadline (hung); the daemon says so, takes
  the trial back and carries on: a cycle started after the fault (smbd
  back) ends with a result line.
- During a commit: a testparm wrapper on PATH holds the daemon right after
  it wrote the winner (the state records a pending commit; testparm is
  asked to read the result back) until the test has injected the fault;
  the commit then goes on to tell smbd (smbcontrol).
- The shadow smbd (a child of the daemon whose command line names the
  env's state directory) killed while a probe runs on it.

Every wait is bounded; every fault ends with faultutil.check_promises.
A hung smbd gets SIGCONT at the end of its test, pass or fail.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess

import pytest

from daemon_util import LEGACY, RESULT_RE, q, record_made, socket_value
from faultutil import (check_journal, check_promises, fault_env, hold_after_write,  # noqa: F401
                       probe_files, restart_smbd, shadow_pids, wait_until)

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"
# Probes long enough (small requests: one round trip each) that a test
# polling for the probe file catches one on the wire.
LONG_PROBE = {"size": "64M", "request_size": "64K", "deadline": "4"}
TUNE = {"min_size": "64K", "max_size": "256K", "max_samples": "4", "apply": q("smbcontrol"),
        "interval": "1h"}
FAULT_WAIT = 120  # bound on waiting for the moment to inject (seconds)
END_WAIT = 240  # bound on a cycle's end after a fault

FAULTS = ["stop", "restart", "hang"]


@contextlib.contextmanager
def smbd_fault(srv, kind):
    """Inject kind into the production smbd on entry; a hung one gets
    SIGCONT on exit, pass or fail. Only srv's process group (a session of
    its own, smbd.py) is signalled."""
    pgid = srv.pid
    try:
        if kind == "stop":
            srv.stop()
        elif kind == "restart":
            restart_smbd(srv)
        else:
            os.killpg(pgid, signal.SIGSTOP)
        yield
    finally:
        if kind == "hang":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGCONT)


def trial_on_the_wire(env, before):
    """A live trial value in smb.conf and its probe's file in the share."""
    return env.srv.conf.read_bytes() != before and bool(probe_files(env))


CYCLE_END_RE = re.compile(RESULT_RE.pattern + r"|^<\d>probe of \S+ failed", re.M)


def next_cycle(d):
    """SIGHUP starts a cycle at once; it must end with a result line (not
    with a failure: smbd is back, or was never gone)."""
    n = len(CYCLE_END_RE.findall(d.stderr))
    r = len(RESULT_RE.findall(d.stderr))
    d.signal(signal.SIGHUP)
    d.wait_for(lambda: len(CYCLE_END_RE.findall(d.stderr)) > n, timeout=END_WAIT,
               what="the end of a cycle after the fault")
    assert len(RESULT_RE.findall(d.stderr)) > r, f"the cycle after the fault failed\n{d.stderr}"


# ------------------------------------------------------------ during a trial

# What the daemon says about the trial's probe: broken off, or (hung) at its
# deadline. Then the trial goes back.
TRIAL_LINE = {
    "stop": r"probe of \S+ failed",
    "restart": r"probe of \S+ failed",
    "hang": r"probe of \S+ failed: no answer within its deadline",
}


@pytest.mark.parametrize("kind", FAULTS)
def test_smbd_fault_during_live_trial(fault_env, faults, kind):
    env = fault_env(ON_LATTICE)
    env.write_config(probe=LONG_PROBE, tune={**TUNE, "trials": q("live")})
    conf = env.srv.conf
    before = conf.read_bytes()
    d = env.start()
    d.wait_for(lambda: trial_on_the_wire(env, before), timeout=FAULT_WAIT,
               what="a live trial's probe on the wire", poll=0.002)
    trial = socket_value(conf.read_bytes())
    with smbd_fault(env.srv, kind):
        d.wait_line(rf"^<\d>.*({TRIAL_LINE[kind]})", timeout=END_WAIT)
        # The failed cycle takes its trial back (even where smbd cannot be
        # told) right after that line, before anything else.
        d.wait_for(lambda: conf.read_bytes() == before, timeout=END_WAIT,
                   what=f"trial {trial!r} taken back")
    assert d.alive(), d.stderr
    if kind == "stop":
        restart_smbd(env.srv)
    # It carries on: a cycle after the fault ends normally.
    next_cycle(d)
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    err = d.stderr
    line, outcome = check_promises(env, before, err, TRIAL_LINE[kind])
    assert outcome == "old" or env.state().get("last_written") == socket_value(
        conf.read_bytes()), f"trial value {trial!r} stayed\n{err}"
    assert env.state().get("pending") == "no", env.state()
    faults.record(f"smbd {kind} during a live trial", f"trial taken back, {outcome}")


# ------------------------------------------------------------ during a commit

# What the daemon says after the commit: written and applied, or written
# but smbd could not be told.
COMMIT_LINE = {
    "stop": r"written, but smbd was not told",
    "restart": r"socket options: .* -> ",
    "hang": r"socket options: .* -> ",
}


@pytest.mark.parametrize("kind", FAULTS)
def test_smbd_fault_during_commit(fault_env, faults, kind):
    # From the legacy 8192 line, which stalls on loopback: any neighbour
    # beats it, so the cycle commits (test_daemon.py does the same).
    env = fault_env(LEGACY)
    env.write_config(probe={"size": "2M", "request_size": "1M", "deadline": "3"},
                     tune={**TUNE, "trials": q("shadow")})
    hold = hold_after_write(env)
    conf = env.srv.conf
    before = conf.read_bytes()
    d = env.start("--once")
    d.wait_for(lambda: (hold / "held").exists(), timeout=END_WAIT,
               what="the commit's write (testparm held)")
    written = socket_value(conf.read_bytes())
    assert written != socket_value(before), f"held, but nothing written\n{d.stderr}"
    with smbd_fault(env.srv, kind):
        (hold / "go").touch()
        rc = d.wait(timeout=END_WAIT)
    err = d.stderr
    assert rc == 0, f"--once exit {rc}\n{err}"
    line, outcome = check_promises(env, before, err, COMMIT_LINE[kind])
    check_journal(err, r"socket options: .* -> ")
    assert outcome == "candidate", f"the commit did not stay\n{err}"
    st = env.state()
    assert st.get("last_written") == socket_value(conf.read_bytes()) == written, (st, err)
    assert st.get("pending") == "no" and st.get("hold", "no") == "no", st
    if kind == "stop":
        restart_smbd(env.srv)
    # smbd (back, or never gone) runs with what was committed.
    r = env.srv.smbclient("-c", "ls")
    assert r.returncode == 0, r.stdout + r.stderr
    faults.record(f"smbd {kind} during a commit", "commit kept" +
                  (", smbd not told" if kind == "stop" else ""))


def test_live_commit_names_the_value_it_replaced(fault_env, faults):
    """The journal line of a commit after live trials names the value the
    cycle began with. With one size on the lattice the last live trial is
    the winner: the file's old value was the trial's, and the line read
    "socket options: X -> X" for a change from the 8192 line."""
    env = fault_env(LEGACY)
    env.write_config(probe={"size": "2M", "request_size": "1M", "deadline": "3"},
                     tune={**TUNE, "min_size": "256K", "max_size": "256K", "trials": q("live")})
    before = env.srv.conf.read_bytes()
    rc, _, err = env.run("--once")
    assert rc == 0, err
    line, outcome = check_promises(env, before, err, r"^socket options: .* -> ")
    new = socket_value(env.srv.conf.read_bytes())
    assert line.startswith(f"socket options: {LEGACY} -> {new} ("), line
    assert outcome == "candidate" and new != LEGACY, err


# ------------------------------------------------------------ shadow smbd

# The line names the shadow's port, not production's: the admin must not
# look for a fault in production smbd.
SHADOW_FAILED = r"^probe of smb://127\.0\.0\.1:(\d+)/\S* failed: .*\(a trial's shadow smbd\)$"


def test_shadow_smbd_killed_mid_trial(fault_env, faults):
    env = fault_env(ON_LATTICE)
    env.write_config(probe=LONG_PROBE, tune={**TUNE, "trials": q("shadow")})
    conf = env.srv.conf
    before = conf.read_bytes()
    d = env.start()

    def shadow_serving():
        pids = shadow_pids(env, parent=d.pid)
        return pids if pids and probe_files(env) else None

    pids = wait_until(shadow_serving, FAULT_WAIT, "a probe on a shadow smbd", poll=0.002)
    (pid,) = pids  # the shadow's parent smbd; its children follow it
    os.kill(pid, signal.SIGKILL)
    d.wait_line("^<\\d>" + SHADOW_FAILED[1:], timeout=END_WAIT)
    assert d.alive(), d.stderr
    next_cycle(d)
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    err = d.stderr
    line, outcome = check_promises(env, before, err, SHADOW_FAILED, run_dirs=True)
    assert int(re.match(SHADOW_FAILED, line).group(1)) != env.srv.port, line
    # Shadow trials never write smb.conf; the cycle after the fault may
    # have committed its winner.
    assert outcome == "old" or env.state().get("last_written") == socket_value(
        conf.read_bytes()), f"smb.conf holds a value nobody committed\n{err}"
    faults.record("shadow smbd killed mid-trial", f"trial failed, next cycle ran, {outcome}")


def test_predecessor_file_removed_once_smbd_is_back(fault_env, faults):
    """smbd is down when the daemon starts: the look for a killed
    predecessor's probe file cannot reach the share, which is said at info
    level (nothing is known to be there). Measurements never list the
    share, so the look is owed: once smbd is back, the first cycle whose
    probe reaches the share ends with it, and the file goes."""
    env = fault_env(ON_LATTICE)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no probe runs under now
    planted = env.srv.share_dir / f".smbtuned-probe-{socket.gethostname()}-{gone.pid}-00000000000000ef"
    planted.write_bytes(b"x" * 4096)
    record_made(env.state_dir, planted.name, env.srv.url)
    env.write_config(probe={"size": "2M", "request_size": "1M", "deadline": "5"},
                     tune={**TUNE, "trials": q("client"), "max_bytes": "8M"})
    env.srv.stop()
    d = env.start()
    d.wait_line(r"^<6>no look for a file a killed predecessor's probe may have left: ",
                timeout=FAULT_WAIT)
    d.wait_line(r"^<\d>probe of \S+ failed", timeout=END_WAIT)
    assert planted.exists()
    restart_smbd(env.srv)
    next_cycle(d)
    wait_until(lambda: not planted.exists(), 30, "the predecessor's file removed")
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    faults.record("smbd down at the start", "predecessor's probe file removed once back")
