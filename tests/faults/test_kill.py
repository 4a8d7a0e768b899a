"""kill -9 of the daemon at random moments of its cycles.

Each round starts the daemon, lets it recover from the previous kill and
checks what it left (below), then starts a cycle with SIGHUP and kills it
with SIGKILL at a random moment: a fraction (from a seeded generator) of
the length of a cycle measured at the beginning, or of the start-up
itself. With live trials many kills land while a trial value is in
smb.conf; with shadow trials, while a shadow smbd serves.

To recover without a cycle of its own, each round's daemon starts with a
time window that excludes now: it recovers, reads the state, and either
keeps the state file's schedule (no edit was left pending: "as
scheduled") or starts a cycle that the window defers (a journal line
either way) and waits. That is where smb.conf is checked. Then
the config without the window is put in place and SIGHUP starts a cycle
at once (cmd_run.c: a reload kicks the tuner).

After every kill, once the next start has recovered:
- smb.conf's socket options line is the incumbent (the last value the
  daemon committed, state's last_written, or the original line before any
  commit), every other byte as in the original file;
- the state holds nothing pending and does not hold off (a kill is no edit
  by hand);
- faultutil.check_promises: a journal line, no probe file in the share, no
  shadow smbd or shadow run dir, smb.conf old or a complete candidate.

The seed is SMBTUNED_FAULT_SEED (default below); SMBTUNED_FAULT_KILLS
scales the number of kills (default: 200 in all).
"""

import fcntl
import os
import random
import re
import signal
import socket
import subprocess
import time

import pytest

from daemon_util import LEGACY, RESULT_RE, only_socket_line_changed, q, record_made, socket_value
from faultutil import (check_journal, check_promises, fault_env, hold_after_write,  # noqa: F401
                       shadow_pids, wait_until, wrapper)

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

SEED = int(os.environ.get("SMBTUNED_FAULT_SEED", "20261201"))
KILLS = int(os.environ.get("SMBTUNED_FAULT_KILLS", "200"))

ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"
PROBE_SIZES = ["1M", "2M", "4M"]
# A short search: three sizes plus AUTO, few samples, and a byte budget
# that ends a cycle that would not converge soon.
TUNE = {"min_size": "64K", "max_size": "256K", "max_samples": "4", "max_bytes": "128M",
        "apply": q("smbcontrol"), "interval": "1h"}
START_WAIT = 60  # bound on a start's recovery (seconds; a healthy one takes < 2)
CYCLE_WAIT = 240  # bound on the measured cycle
EARLY = 0.15  # share of the kills that land in the start-up (the recovery itself)
DEFERRED = "cycle deferred"
# A start waits without a cycle: the window defers it, or the start keeps
# the schedule of the state file (no edit left pending).
WAITING = r"(cycle deferred|next cycle at .* as scheduled)"


def window_excluding_now():
    """A time window that does not contain the current local minute (an
    hour from now to two hours from now)."""
    t = time.localtime()
    m = t.tm_hour * 60 + t.tm_min
    a, b = (m + 60) % 1440, (m + 120) % 1440
    return f"{a // 60:02d}:{a % 60:02d}-{b // 60:02d}:{b % 60:02d}"


class Rounds:
    """The kill rounds of one env (trials mode)."""

    def __init__(self, env, trials, rng, faults):
        self.env, self.trials, self.rng, self.faults = env, trials, rng, faults
        self.conf = env.srv.conf
        self.original = self.conf.read_bytes()
        self.before = self.original  # smb.conf when the last kill came
        self.cycle_s = None
        self.startup_s = None
        self.counts = {}
        self.prev_kill = None  # what the last kill found
        self.unchecked = []  # kills since the last check: (phase, what)

    def write(self, window, size):
        tune = {**TUNE, "trials": q(self.trials)}
        if window:
            tune["window"] = q(window_excluding_now())
        self.env.write_config(probe={"size": size, "request_size": "1M", "deadline": "10"},
                              tune=tune)

    def incumbent(self):
        st = self.env.state()
        return st.get("last_written") or socket_value(self.original)

    def forget_convergence(self):
        """A search that converged would make every later cycle one
        verification sample of its winner (the state file keeps its
        reference across restarts), with no trial to kill: the rounds
        want searches, so the reference is dropped, as --resume does."""
        path = self.env.state_dir / "state"
        if path.exists():
            text = path.read_text()
            if "\nconverged yes\n" in text:
                path.write_text(text.replace("\nconverged yes\n", "\nconverged no\n"))

    def start_recovered(self, size):
        """Start a daemon that recovers and defers; check what the last
        kill left. Returns the running daemon."""
        self.forget_convergence()
        self.write(window=True, size=size)
        t0 = time.monotonic()
        d = self.env.start()
        d.wait_line(rf"^<\d>.*{WAITING}", timeout=START_WAIT)
        if self.startup_s is None:
            self.startup_s = time.monotonic() - t0
        self.check_recovered(d)
        return d

    def check_recovered(self, d):
        err = d.stderr
        env = self.env
        st = env.state()
        now = self.conf.read_bytes()
        assert st.get("hold", "no") == "no", f"a kill made it hold off: {st}\n{err}"
        assert st.get("pending", "no") == "no", f"still pending after recovery: {st}\n{err}"
        got, inc = socket_value(now), self.incumbent()
        assert got == inc, \
            f"after {self.prev_kill}: socket options {got!r}, the incumbent is {inc!r}\n{err}"
        why = only_socket_line_changed(self.original, now)
        assert why is None, f"after {self.prev_kill}: {why}"
        pattern = WAITING
        if self.prev_kill in ("live trial", "commit"):
            # what the recovery says it settled
            pattern = r"did not finish left a .* pending: settling it"
        check_promises(env, self.before, err, pattern, run_dirs=True)
        if self.prev_kill == "live trial" and socket_value(self.before) != got:
            check_journal(err, r"live trial taken back in ")
        for phase, what in self.unchecked:
            self.faults.record("kill -9", f"{self.trials} trials, {phase}, {what}: recovered")
        self.unchecked = []

    def kill(self, d, delay, phase):
        time.sleep(delay)
        d.proc.kill()  # SIGKILL, the PID we started
        d.proc.wait(timeout=30)
        # What the kill interrupted, as the next start will find it.
        st = self.env.state()
        now = self.conf.read_bytes()
        if st.get("pending") == "yes":
            what = "commit" if st.get("pending_commit") == "yes" else "live trial"
        elif socket_value(now) != self.incumbent():
            what = "unrecorded change"  # a defect: the record comes first
        elif shadow_pids(self.env) or (self.env.state_dir / "shadow").exists() and any(
                (self.env.state_dir / "shadow").iterdir()):
            what = "shadow trial"
        else:
            what = "nothing pending"
        assert what != "unrecorded change", \
            f"smb.conf holds {socket_value(now)!r} with no record in the state\n{d.stderr}"
        self.prev_kill = what
        self.unchecked.append((phase, what))
        self.before = now
        key = f"{phase}: {what}"
        self.counts[key] = self.counts.get(key, 0) + 1

    def round(self, first=False):
        size = self.rng.choice(PROBE_SIZES)
        if not first and self.rng.random() < EARLY:
            # During start-up: the recovery, the deferral.
            self.write(window=True, size=size)
            d = self.env.start()
            self.kill(d, self.rng.uniform(0, self.startup_s), "start-up")
            return
        d = self.start_recovered(size)
        self.write(window=False, size=size)
        n0 = d.stderr.count("configuration reloaded")
        t0 = time.monotonic()
        d.signal(signal.SIGHUP)
        if first:
            # One whole cycle, to learn how long one takes here.
            d.wait_for(lambda: d.stderr.count("configuration reloaded") > n0, timeout=START_WAIT,
                       what="the reload")
            d.wait_for(lambda: RESULT_RE.search(d.stderr) is not None, timeout=CYCLE_WAIT,
                       what="the first cycle's result")
            self.cycle_s = time.monotonic() - t0
            self.kill(d, 0, "cycle")
            return
        self.kill(d, self.rng.uniform(0, 1.1 * self.cycle_s), "cycle")

    def finish(self):
        """A last start recovers from the last kill; SIGTERM; nothing left."""
        d = self.start_recovered(PROBE_SIZES[0])
        d.signal(signal.SIGTERM)
        assert d.wait(timeout=60) == 0, d.stderr
        left = self.env.leftovers()
        assert not left, "left behind:\n" + "\n".join(left)
        assert self.env.srv.alive(), "the production smbd is gone"


# live: the kills that matter most (a trial value in smb.conf); shadow: a
# shadow smbd that loses its owner. Shadow rounds are slower (an smbd
# starts per candidate).
SHARES = {"live": 0.7, "shadow": 0.3}


@pytest.mark.parametrize("trials", sorted(SHARES))
def test_kill9_at_random_moments(fault_env, faults, trials):
    n = max(2, round(KILLS * SHARES[trials]))
    rng = random.Random(f"{SEED}-{trials}")
    env = fault_env(ON_LATTICE)
    r = Rounds(env, trials, rng, faults)
    r.round(first=True)
    for _ in range(n - 1):
        r.round()
    r.finish()
    print(f"\n{trials}: seed {SEED}, {n} kills, cycle {r.cycle_s:.1f} s, found: {r.counts}")
    if trials == "live":
        # The point of live rounds: kills with a trial value in smb.conf.
        assert r.counts.get("cycle: live trial", 0) >= 2, r.counts
    else:
        assert r.counts.get("cycle: shadow trial", 0) >= 2, r.counts


def killed_in_commit(env, faults):
    """From the legacy 8192 line (which stalls: any neighbour beats it) a
    cycle commits; a testparm wrapper holds it right after the commit's
    write, before smbd is told, where it is killed. smbcontrol runs through
    a wrapper that logs its arguments to bin/smbcontrol.log. Returns the
    Rounds, the value written, and the log's path."""
    env.write_config(probe={"size": "2M", "request_size": "1M", "deadline": "3"},
                     tune={**TUNE, "trials": q("shadow"), "max_bytes": "0"})
    hold = hold_after_write(env)
    log = env.tmp / "bin" / "smbcontrol.log"
    wrapper(env.tmp / "bin", "smbcontrol", f'echo "$*" >> {log}')
    r = Rounds(env, "shadow", random.Random(SEED), faults)  # smb.conf as it was
    d = env.start("--once")
    d.wait_for(lambda: (hold / "held").exists(), timeout=CYCLE_WAIT,
               what="the commit's write (testparm held)")
    written = socket_value(env.srv.conf.read_bytes())
    r.kill(d, 0, "commit")
    (hold / "go").touch()  # the held testparm (its daemon gone) may end
    assert r.prev_kill == "commit", (r.prev_kill, env.state(), d.stderr)
    assert written != LEGACY, d.stderr
    # the run's decision, recorded with the commit: restart_smbd = no
    assert env.state().get("pending_restart") == "1", env.state()
    # shadow trials tell smbd nothing, and the commit was killed first
    assert not log.exists(), log.read_text()
    return r, written, log


def test_kill9_during_a_commit_keeps_it(fault_env, faults):
    """The random kills above never land in a commit: on loopback a short
    search keeps the incumbent. Killed between the commit's write and
    telling smbd, the next start finds the commit recorded and on disk:
    it runs the check the write would have run (testparm reads the line
    as written), keeps it (the daemon had decided it), and tells smbd as
    configured, which the killed run never did. (Shadow trials: a live
    cycle's winner may be the trial value already in the file, and then
    the commit writes nothing.)"""
    env = fault_env(LEGACY)
    r, written, log = killed_in_commit(env, faults)
    d = r.start_recovered(PROBE_SIZES[0])
    assert env.state().get("last_written") == written == socket_value(env.srv.conf.read_bytes())
    assert re.search(r"^<5>.*socket options = " + re.escape(written) + r": written by a run "
                     r"that did not finish, checked and kept: smbd is told now "
                     r"\(apply = smbcontrol\)", d.stderr, re.M), d.stderr
    assert log.exists() and f"-s {env.srv.conf} smbd reload-config" in log.read_text(), d.stderr
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr


def test_kill9_during_a_commit_testparm_refuses(fault_env, faults):
    """As above, but after the kill Samba's testparm reads the line
    otherwise than it was written: the check the killed write never made
    fails, and the next start takes the commit back, as that write would
    have done, rather than keep a line Samba reads differently."""
    env = fault_env(LEGACY)
    r, written, log = killed_in_commit(env, faults)
    wrapper(env.tmp / "bin", "testparm", """\
case "$*" in
*"--parameter-name=socket options"*) echo "SO_RCVBUF=4096"; exit 0 ;;
esac""")
    d = r.start_recovered(PROBE_SIZES[0])
    assert socket_value(env.srv.conf.read_bytes()) == LEGACY, d.stderr
    assert not env.state().get("last_written"), env.state()
    check_journal(d.stderr, r"checking the change a run that did not finish wrote: "
                  r"the change was taken back, the old line is restored")
    check_journal(d.stderr, r"unfinished change taken back in ")
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr


def test_kill9_during_a_commit_lock_busy_at_start(fault_env, faults):
    """As above, but at the next start another editor holds the edit lock
    past its 10 s wait: the check cannot run. The commit is neither taken
    back nor kept unchecked: it stays recorded, and the first cycle,
    which settles what is pending first, checks it once the lock is free,
    keeps it and tells smbd."""
    env = fault_env(LEGACY)
    r, written, log = killed_in_commit(env, faults)
    with open(env.state_dir / "smbconf.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another editor, for now
        d = env.start()
        d.wait_for(lambda: "is not checked yet" in d.stderr, timeout=START_WAIT,
                   what="the check that found the lock busy")
        assert socket_value(env.srv.conf.read_bytes()) == written, d.stderr
        assert env.state().get("pending") == "yes", env.state()
    # the lock is free: the cycle's settling step checks it
    d.wait_for(lambda: "checked and kept" in d.stderr, timeout=START_WAIT,
               what="the commit confirmed by the cycle")
    assert re.search(r"^<5>.*socket options = " + re.escape(written) + r": written by a run "
                     r"that did not finish, checked and kept: smbd is told now", d.stderr,
                     re.M), d.stderr
    assert "taken back" not in d.stderr, d.stderr
    assert f"-s {env.srv.conf} smbd reload-config" in log.read_text(), d.stderr
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=120) == 0, d.stderr
    st = env.state()
    assert st.get("last_written") == socket_value(env.srv.conf.read_bytes()), (st, d.stderr)
    faults.record("kill -9", "shadow trials, commit, edit lock busy at the start: kept")


def test_start_removes_the_file_of_a_probe_killed_with_its_daemon(fault_env, faults):
    """A probe killed with its daemon (PDEATHSIG) is a zombie until whoever
    inherits it reaps it; an init that reaps slowly (this machine's took
    ~2 s) kept it one when the next start cleaned up, and kill(pid, 0)
    called it alive: its file stayed in the share. Here the zombie is a
    child of the test, held unreaped, and its file is planted under the
    name a probe of that pid gives its file."""
    env = fault_env(ON_LATTICE)
    zombie = subprocess.Popen(["true"])
    try:
        wait_until(lambda: proc_state(zombie.pid) == "Z", 10, "a zombie")
        name = f".smbtuned-probe-{socket.gethostname()}-{zombie.pid}-00000000000000ab"
        planted = env.srv.share_dir / name
        planted.write_bytes(b"x" * 4096)
        record_made(env.state_dir, name, env.srv.url)
        before = env.srv.conf.read_bytes()
        r = Rounds(env, "live", random.Random(SEED), faults)
        d = r.start_recovered(PROBE_SIZES[0])
        assert proc_state(zombie.pid) == "Z"
        assert not planted.exists(), f"the file of a dead (zombie) probe is left\n{d.stderr}"
        d.signal(signal.SIGTERM)
        assert d.wait(timeout=60) == 0, d.stderr
        check_promises(env, before, d.stderr, DEFERRED)
        faults.record("kill -9", "live trials, probe left a zombie: file removed")
    finally:
        zombie.wait(timeout=10)


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
