"""Faults at the moment smbtuned edits smb.conf (issue 9, "Faults").

Each test injects one fault into a real cycle (smbtuned --once against a
real smbd from the fixture) at the commit or between two live trials:

- smb.conf's directory full (a small tmpfs, filled at commit time) and
  read-only (the tmpfs remounted read-only at commit time, and before the
  take-back of a commit whose restart of smbd failed: a killed run's, at
  the start, and a cycle's own);
- smb.conf replaced by an admin (a new file renamed over it): during a
  probe, with a different socket options line (the commit must hold off
  and keep the admin's file); at the commit, between smbtuned's read and
  its write (the compare-and-set must see it); and during the write itself,
  while the new file is synced (strace slows the fsync down): the rename
  that puts it in place must not throw the admin's file away;
- the editor lock (STATE_DIR/smbconf.lock) held by the test for longer
  than the editor waits (10 s, lib/smbconf_io.c): at the commit, and
  between two live trials (the trial in smb.conf cannot be taken back
  either; the next start does it once the lock is free);
- testparm failing after the write (a fault-injecting testparm first on
  PATH: a real one cannot fail on demand);
- ENOSPC on the state directory (a tmpfs as the state directory): filled
  at commit time, when the edit must be recorded before it is written;
  filled while a live trial is in smb.conf (the trial is taken back all
  the same); full before the cycle begins.

"At commit time" is exact, not a sleep: the testparm wrapper counts its
calls that ask for `socket options` (only the editor asks for that one:
lib/smbconf_io.c checks Samba's reading before it writes and after) and
runs the test's hook script before the N-th one. The first such call of a
shadow --once is the commit's check before the write.

Every fault ends with faultutil.check_promises: a journal line that says
what happened, no probe file, no shadow smbd, smb.conf old or a complete
candidate. Mounts live under the test's own directories and are undone in
a finally. A cycle from the legacy 8192 line on shadow smbds commits
(8192 stalls on loopback, test_daemon.py), which is what reaches the
commit. 1-45 s per test on two cores, about 4 minutes for the file.
"""

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from daemon_util import EDITOR_TEMP_GLOB, LEGACY, q, records, socket_line_index, socket_value
from faultutil import (FaultEnv, check_journal, check_promises, journal_lines, wait_until,
                       wrapper)

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

SHADOW = {"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune")}
LIVE = {"trials": q("live"), "apply": q("smbcontrol"), "mode": q("tune"), "max_bytes": "160M"}
ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"
# 8192 stalls on loopback: a short deadline bounds those samples.
PROBE = {"deadline": "5"}
LOCK_WAIT_S = 10  # lib/smbconf_io.c LOCK_WAIT_S
MOUNT_TIMEOUT = 30
# test_a_failed_restart_whose_take_back_fails: the start's check of the
# commit a killed run left (smbconf_confirm's testparm) is the first
# socket-options call; the restart check and the take-back come after it,
# and the take-back writes without another.
RESTART_BACK_CALL = 1


# ------------------------------------------------------------------ helpers

@pytest.fixture
def make_env(smbtuned, smbd_factory, tmp_path):
    """make_env(socket_options, **smbd_options) -> FaultEnv around a fresh
    fixture smbd, with the fault-injecting testparm first on PATH (see
    install_testparm). Each env is cleaned up when the test ends."""
    with contextlib.ExitStack() as stack:
        def make(socket_options=LEGACY, **smbd_options):
            srv = smbd_factory(socket_options=socket_options, **smbd_options)
            env = FaultEnv(smbtuned, srv, tmp_path)
            stack.callback(env.cleanup)
            env.fault_dir = tmp_path / "fault"
            install_testparm(env.fault_dir)
            env.path_first(env.fault_dir / "bin")
            return env
        yield make


def install_testparm(d):
    """A testparm wrapper in d/bin. Its calls with `--parameter-name=socket
    options` are counted in d/count; before the N-th it runs d/hook.N if
    that exists, and it fails (exit 1, a message on stderr) when d/fail.N
    exists. Every other call, and every call without a marker, is the real
    testparm."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    wrapper(d / "bin", "testparm", f"""\
case "$*" in
*"--parameter-name=socket options"*)
    n=$(( $(cat {d}/count 2>/dev/null || echo 0) + 1 ))
    echo $n > {d}/count
    if [ -x {d}/hook.$n ]; then {d}/hook.$n >>{d}/hook.log 2>&1; fi
    if [ -e {d}/fail.$n ]; then
        echo "testparm: injected failure at call $n" >&2
        exit 1
    fi
    ;;
esac""")


def hook(env, n, script):
    """Run sh `script` (set -e) before the n-th socket-options testparm."""
    p = env.fault_dir / f"hook.{n}"
    p.write_text("#!/bin/sh\nset -e\n" + script + "\n")
    p.chmod(0o755)


def tp_calls(env):
    p = env.fault_dir / "count"
    return int(p.read_text()) if p.exists() else 0


def hook_ran(env, n):
    """The hook before call n ran: the fault was injected."""
    return tp_calls(env) >= n


def mount_tmpfs(path, size):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                   check=True, capture_output=True, text=True, timeout=MOUNT_TIMEOUT)


def umount(path):
    r = subprocess.run(["umount", str(path)], capture_output=True, text=True,
                       timeout=MOUNT_TIMEOUT)
    if r.returncode != 0:  # busy: detach it, so that nothing stays mounted
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True,
                       timeout=MOUNT_TIMEOUT)


@contextlib.contextmanager
def tmpfs(path, size):
    """A tmpfs of `size` mounted on path (under the test's own directories)
    for the with block; unmounted whatever happens."""
    mount_tmpfs(path, size)
    try:
        yield path
    finally:
        umount(path)


def fill(dirpath):
    """Fill the filesystem of dirpath to ENOSPC (now, from the test)."""
    subprocess.run(["sh", "-c", fill_cmd(dirpath)], check=True, timeout=60)


def fill_cmd(dirpath):
    """sh text that fills the filesystem of dirpath to ENOSPC."""
    return (f"dd if=/dev/zero of={dirpath}/filler bs=4096 2>/dev/null || true\n"
            f"dd if=/dev/zero of={dirpath}/filler2 bs=1 2>/dev/null || true")


class ConfOnTmpfs:
    """smb.conf moved into a small tmpfs under the test's directory; the
    fixture's path becomes a symlink to it (smbd reads through it, the
    editor writes through it to the target: README). Undone on exit: the
    last bytes are copied back as a regular file, the tmpfs unmounted."""

    def __init__(self, env, size="256k"):
        self.env = env
        self.link = Path(env.srv.conf)
        self.dir = env.tmp / "confdir"
        self.size = size

    def __enter__(self):
        mount_tmpfs(self.dir, self.size)
        self.real = self.dir / "smb.conf"
        shutil.copy2(self.link, self.real)
        tmp = self.link.with_name("smb.conf.link")
        tmp.symlink_to(self.real)
        os.replace(tmp, self.link)
        return self

    def __exit__(self, *exc):
        try:
            data = self.real.read_bytes()
            self.link.unlink()
            self.link.write_bytes(data)
        finally:
            umount(self.dir)
        return False


def assert_no_state_temps(env):
    """No temp file of an atomic write, no probe work directory and no
    record of a probe file left in the state directory (the record's
    directories, probe/made, stay: they are its)."""
    sd = Path(env.state_dir)
    left = (sorted(sd.glob(".smbtuned-*")) +
            sorted(p for p in sd.glob("probe/*") if p.name != "made") + records(sd))
    assert not left, f"left in the state directory: {left}"


def cycle_fails(env, before, pattern, at_call=None, conf=None, run_dirs=False):
    """A --once cycle that meets a fault: it must fail (exit 1) and keep
    every promise with smb.conf's old bytes `before` (at conf, default the
    fixture's). at_call: the hook before that testparm call must have run
    (the fault was injected). Returns (the journal line, stderr)."""
    rc, out, err = env.run("--once")
    if at_call is not None:
        assert hook_ran(env, at_call), f"the cycle never reached the fault\n{err}"
    line, outcome = check_promises(env, before, err, pattern, conf=conf, run_dirs=run_dirs)
    assert outcome == "old", f"smb.conf changed: {line}\n{err}"
    assert rc == 1, err
    return line, err


# ------------------------------------------------------------------ smb.conf's directory

def test_conf_dir_full_at_commit(make_env, faults):
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    with ConfOnTmpfs(env) as c:
        before = c.real.read_bytes()
        hook(env, 1, fill_cmd(c.dir))
        cycle_fails(env, before, r"^commit: .*No space left on device", at_call=1, conf=c.real)
        left = sorted(p.name for p in c.dir.iterdir() if not p.name.startswith("filler"))
        assert left == ["smb.conf"], f"files left beside smb.conf: {left}"
        assert env.state().get("pending") == "no", env.state()
        assert env.state().get("hold", "no") == "no", env.state()
    faults.record("smb.conf dir full at commit", "not written")


def test_conf_dir_read_only_at_commit(make_env, faults):
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    with ConfOnTmpfs(env) as c:
        before = c.real.read_bytes()
        hook(env, 1, f"mount -o remount,ro {c.dir}")
        cycle_fails(env, before, r"^commit: .*Read-only file system", at_call=1, conf=c.real)
        assert env.state().get("pending") == "no", env.state()
    faults.record("smb.conf dir read-only at commit", "not written")


def test_a_failed_restart_whose_take_back_fails(make_env, faults):
    """A commit a killed run left that needs smbd restarted (restart_smbd
    = yes, recorded so): the start confirms it, and the restart fails (no
    system bus in the test's environment; on a machine with one, the
    fixture's smbd is not smbd.service's main process), so the line must go
    back; that take-back meets smb.conf's directory read-only. The record
    must then be a trial's, not the commit's: the next start takes the
    line back and neither keeps it nor tries the restart again outside a
    cycle's checks (a record left as the commit's would be confirmed, and
    smbd restarted on an old decision). The record is demoted twice over,
    by the job before its take-back (unrestarted()) and by the parent when
    the reply comes (settle()); this test fails when both are gone, and
    one alone passes it: only a kill between the two tells them apart.
    The record says what it was (pending_unrestarted, state format 8), so
    the journal calls the later take-back an unfinished change, not a live
    trial."""
    env = make_env()
    tune = {"mode": q("advise"), "apply": q("smbcontrol"), "restart_smbd": "yes"}
    env.write_config(probe=PROBE, tune=tune)
    rc, out, err = env.run("--once")  # a state file, as a cycle leaves it
    assert rc == 0, err
    (env.fault_dir / "count").unlink(missing_ok=True)  # that cycle's calls
    with ConfOnTmpfs(env) as c:
        before = c.real.read_bytes()
        old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144", restart=True)
        hook(env, RESTART_BACK_CALL, f"mount -o remount,ro {c.dir}")
        d = env.start()
        try:
            d.wait_for(lambda: "smbd could not be restarted for the change" in d.stderr and
                       "Read-only file system" in d.stderr, timeout=60,
                       what="the failed restart and its failed take-back")
        finally:  # stopped inside the with: ConfOnTmpfs's exit rewrites the fixture's file
            d.signal(signal.SIGTERM)
            rc = d.wait(timeout=60)
        assert hook_ran(env, RESTART_BACK_CALL), f"the fault was never injected\n{d.stderr}"
        # the stop's take-back fails too (read-only): the service ends failed
        assert rc == 1, d.stderr
        assert re.search(r"^<3>stopped before a change of smbtuned's in \S+smb\.conf was "
                         r"settled: the next start takes a trial back and checks a commit$",
                         d.stderr, re.M), d.stderr
        st = env.state()
        assert (st.get("pending"), st.get("pending_commit"), st.get("pending_restart"),
                st.get("pending_unrestarted")) == ("yes", "no", "0", "yes"), st
        assert socket_value(c.real.read_bytes()) == new.split("=", 1)[1].strip()
        err = taken_back_at_the_next_start(env, c, before)
        assert "checked and kept" not in err, err
        assert "could not be restarted" not in err, err
    faults.record("smb.conf dir read-only at a failed restart's take-back", "taken back later")


def taken_back_at_the_next_start(env, c, before):
    """smb.conf's tmpfs (c) read-write again, the next start takes back
    the line of a commit whose restart failed, and says what it was: an
    unfinished change, not a live trial. Returns its journal."""
    subprocess.run(["mount", "-o", "remount,rw", str(c.dir)], check=True, timeout=MOUNT_TIMEOUT)
    d = env.start()
    try:
        d.wait_for(lambda: "taken back in" in d.stderr, timeout=60,
                   what="the next start's take-back")
    finally:  # stopped inside the with: ConfOnTmpfs's exit rewrites the fixture's file
        d.signal(signal.SIGTERM)
        rc = d.wait(timeout=60)
    assert rc == 0, d.stderr
    line, outcome = check_promises(env, before, d.stderr, r"taken back in ", conf=c.real)
    assert outcome == "old", f"the line stayed: {line}\n{d.stderr}"
    assert "unfinished change taken back in" in d.stderr, d.stderr
    assert "(its restart of smbd failed or was not made)" in d.stderr, d.stderr
    assert "live trial" not in d.stderr, d.stderr
    assert env.state().get("pending") == "no", env.state()
    return d.stderr


# A cycle's commit of autotuning: the commit's check before its write is
# the first socket-options call, its read-back after the write the second;
# the restart check and the take-back come after it.
CYCLE_RESTART_BACK_CALL = 2


def test_a_cycles_failed_restart_whose_take_back_fails(make_env, faults):
    """A cycle commits autotuning (restart_smbd = yes, a search between
    8192 and autotuning alone, the fixture's smbd listening with the legacy
    sizes), its restart of smbd fails (as above), and its take-back meets
    smb.conf's directory read-only (remounted at the commit's read-back),
    as does the cycle end's second try. The job makes the record a
    trial's, marked as the change whose restart failed; the parent reads
    the record back after each job and saves it at the cycle's end, and
    must keep that mark (it once dropped it, and the next start called the
    take-back a live trial). The next start takes the line back as an
    unfinished change."""
    env = make_env()
    tune = dict(SHADOW, restart_smbd="yes", min_size="8K", max_size="8K")
    env.write_config(probe=PROBE, tune=tune)
    with ConfOnTmpfs(env) as c:
        before = c.real.read_bytes()
        hook(env, CYCLE_RESTART_BACK_CALL, f"mount -o remount,ro {c.dir}")
        rc, out, err = env.run("--once")
        assert hook_ran(env, CYCLE_RESTART_BACK_CALL), f"the fault was never injected\n{err}"
        assert "smbd could not be restarted for the change" in err, err
        assert "Read-only file system" in err, err
        st = env.state()
        assert (st.get("pending"), st.get("pending_commit"), st.get("pending_unrestarted")) == \
            ("yes", "no", "yes"), st
        assert socket_value(c.real.read_bytes()) != socket_value(before)
        taken_back_at_the_next_start(env, c, before)
    faults.record("smb.conf dir read-only at a cycle's failed restart's take-back",
                  "taken back later")


# ------------------------------------------------------------------ an admin's new file

def admin_replace(conf, data):
    """What an editor does: write a new file, rename it over smb.conf."""
    tmp = Path(conf).with_name("smb.conf.admin-new")
    tmp.write_bytes(data)
    os.rename(tmp, conf)


def with_socket_value(data, value):
    lines = data.splitlines(keepends=True)
    lines[socket_line_index(lines)] = f"   socket options = {value}\n".encode()
    return b"".join(lines)


def test_admin_replaces_conf_mid_probe(make_env, faults):
    """The admin renames a new smb.conf with another socket options line
    over the file while a probe runs: the commit must not write over it;
    it says so and holds off until --resume."""
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    conf = env.srv.conf
    hand = "TCP_NODELAY SO_RCVBUF=32768 SO_SNDBUF=32768"
    admin = with_socket_value(conf.read_bytes(), hand) + b"# the admin's own file\n"
    d = env.start("--once")
    d.wait_samples(1)
    admin_replace(conf, admin)
    rc = d.wait()
    err = d.stderr
    line, outcome = check_promises(env, admin, err, r"edited by someone else\?")
    assert outcome == "old", f"the admin's file was changed\n{err}"
    check_promises(env, admin, err, r"hands off smb\.conf until `smbtuned --resume`")
    assert rc == 1, err
    st = env.state()
    assert st.get("hold") == "yes", st
    assert st.get("pending") == "no", st
    faults.record("admin replaced smb.conf mid-probe", "held")


def test_admin_replaces_conf_at_commit(make_env, faults):
    """The admin's rename lands between the commit's read of smb.conf and
    its write (the hook runs before the commit's first testparm, after the
    editor has read the file): the compare-and-set sees the new bytes and
    writes nothing; the admin's file stays as the admin wrote it."""
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    conf = env.srv.conf
    admin = conf.read_bytes().replace(b"workgroup = SMBTUNEDTEST\n",
                                      b"workgroup = ADMINSGROUP\n") + b"# admin\n"
    assert admin != conf.read_bytes()
    src = env.fault_dir / "admin.conf"
    src.write_bytes(admin)
    hook(env, 1, f"cp {src} {conf}.admin-new\nmv {conf}.admin-new {conf}")
    cycle_fails(env, admin, r"^commit: .*changed on disk while smbtuned was editing it",
                at_call=1)
    assert env.state().get("pending") == "no", env.state()
    faults.record("admin replaced smb.conf at commit", "not written")


# ------------------------------------------------------------------ the editor lock

class HeldLock:
    """STATE_DIR/smbconf.lock held by this process (flock, as the editor
    takes it) until release()."""

    def __init__(self, state_dir):
        self.path = Path(state_dir) / "smbconf.lock"
        self.fd = None

    def take(self, timeout=30):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)

        def got():
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False
        wait_until(got, timeout, "the editor lock")
        self.since = time.monotonic()
        return self

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def test_lock_held_at_commit(make_env, faults):
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    before = env.srv.conf.read_bytes()
    lock = HeldLock(env.state_dir).take()
    try:
        cycle_fails(env, before, r"^commit: .*smbconf\.lock is held by another smbtuned")
    finally:
        lock.release()
    assert env.state().get("pending") == "no", env.state()
    faults.record("editor lock held at commit", "not written")


def test_lock_held_between_live_trials(make_env, faults):
    """The lock is taken while a live trial is in smb.conf: the next trial
    cannot be written and the trial cannot be taken back either. The file
    holds a complete candidate and the state file records it; once the lock
    is free, the next start puts the old line back."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE)
    conf = env.srv.conf
    before = conf.read_bytes()
    lock = HeldLock(env.state_dir)
    d = env.start("--once")
    try:
        d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf",
                   poll=0.005)
        lock.take()
        rc = d.wait()
    finally:
        lock.release()
    err = d.stderr
    line, outcome = check_promises(env, before, err,
                                   r"^taking our change back failed: .*smbconf\.lock is held")
    check_promises(env, before, err, r"^live trial: .*smbconf\.lock is held")
    assert rc == 1, err
    assert env.state().get("pending") == "yes", \
        f"the trial in smb.conf is not recorded: {env.state()}\n{err}"
    assert outcome == "candidate", "no trial in smb.conf: the fault was not injected"

    rc2, out2, err2 = env.run("--once", "--dry-run")
    assert rc2 == 0, err2
    line, outcome = check_promises(env, before, err2, r"live trial taken back in ")
    assert outcome == "old", f"the trial stayed after the lock was freed\n{err2}"
    assert env.state().get("pending") == "no", env.state()
    faults.record("editor lock held between live trials", "taken back later")


# ------------------------------------------------------------------ testparm

def test_testparm_fails_after_the_write(make_env, faults):
    """Samba's parser fails on the file just written (the wrapper's second
    socket-options call: the check after the commit's write): the editor
    puts the old line back and says so."""
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    conf = env.srv.conf
    before = conf.read_bytes()
    (env.fault_dir / "fail.2").touch()
    cycle_fails(env, before, r"^commit: .*the old line is restored: "
                r".*testparm cannot read.*injected failure", at_call=2)
    assert env.state().get("pending") == "no", env.state()
    assert not env.state().get("last_written"), env.state()
    faults.record("testparm fails after the write", "restored")


# ------------------------------------------------------------------ the state directory

def test_state_dir_full_at_commit(make_env, faults):
    """The state directory (a tmpfs) fills up just before the commit: the
    edit cannot be recorded, so it is not written (a write the state file
    does not know of could not be taken back after a crash)."""
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    before = env.srv.conf.read_bytes()
    # Shadow smbds keep their run dirs in the state directory: room for them.
    with tmpfs(env.state_dir, "64m"):
        hook(env, 1, fill_cmd(env.state_dir))
        line, err = cycle_fails(env, before, r"^commit: not written: recording the change "
                                r"failed", at_call=1)
        check_journal(err, r"cannot write .*/state: No space left on device")
        assert_no_state_temps(env)
    faults.record("state dir full at commit", "not written")


def test_state_dir_full_between_live_trials(make_env, faults):
    """The state directory fills up while a live trial is in smb.conf: the
    next trial cannot be recorded, so it is not written, and the trial in
    force is taken back all the same (a backup of the trial's bytes cannot
    be written either, and is not needed: smbconf_io.c replace_file)."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE)
    conf = env.srv.conf
    before = conf.read_bytes()
    with tmpfs(env.state_dir, "16m"):
        d = env.start("--once")
        d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf",
                   poll=0.005)
        fill(env.state_dir)
        rc = d.wait()
        err = d.stderr
        # What meets the full disk first, the next trial's record or the
        # next probe's work directory (in the state directory), is not
        # the point: that it is said, and the trial taken back, is.
        check_journal(err, r"No space left on device")
        vague = [m for _, m in journal_lines(err) if m.endswith("failed")]
        assert not vague, f"journal lines that do not say why: {vague}"
        line, outcome = check_promises(env, before, err, r"^live trial taken back in ")
        assert outcome == "old", f"a live trial stayed in smb.conf\n{err}"
        assert rc == 1, err
        assert_no_state_temps(env)
    faults.record("state dir full between live trials", "taken back")


def test_state_dir_full_from_the_start(make_env, faults):
    """A full state directory before the cycle begins (shadow smbds keep
    their run directories there): the cycle fails, says why, and leaves no
    shadow smbd and no file behind."""
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    before = env.srv.conf.read_bytes()
    with tmpfs(env.state_dir, "1m"):
        fill(env.state_dir)
        cycle_fails(env, before, r"No space left on device", run_dirs=True)
        assert_no_state_temps(env)
    faults.record("state dir full from the start", "failed cleanly")


FSYNC_DELAY_US = 1500000  # strace holds every fsync this long, from the commit on
ADMIN_AFTER_S = 0.3  # after the temp file appears: its bytes written, its fsync under way


def test_admin_replaces_conf_during_the_write(make_env, faults):
    """The admin's rename lands while the editor's new file is being
    synced, after every check the editor makes before it writes: the rename
    that puts the new file in place must not throw the admin's file away.
    At the commit (the testparm hook) strace attaches to the process that
    edits (the daemon's editing job, lib/job.h: the parent of the testparm
    the hook runs in) and slows its fsyncs down, so that the admin's rename
    (the test's) falls into the editor's fsync of its temp file."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    env = make_env()
    env.write_config(probe=PROBE, tune=SHADOW)
    conf = env.srv.conf
    admin = conf.read_bytes().replace(b"workgroup = SMBTUNEDTEST\n",
                                      b"workgroup = ADMINSGROUP\n") + b"# admin\n"
    d = env.start("--once")
    # Until the editor is traced (bounded): then the commit goes on. The
    # hook's parent is the testparm wrapper, whose parent edits.
    hook(env, 1, f"""\
ed=$(awk '/^PPid/ {{print $2}}' /proc/$PPID/status)
strace -qq -o /dev/null -p $ed -e trace=fsync -e inject=fsync:delay_enter={FSYNC_DELAY_US} &
i=0
while [ $i -lt 1000 ]; do
    [ "$(awk '/^TracerPid/ {{print $2}}' /proc/$ed/status)" != 0 ] && exit 0
    sleep 0.01; i=$((i + 1))
done
exit 1""")
    d.wait_for(lambda: any(conf.parent.glob(EDITOR_TEMP_GLOB)),
               what="the editor's temp file beside smb.conf", poll=0.001)
    time.sleep(ADMIN_AFTER_S)  # not a pass/fail timing: where the fault lands
    admin_replace(conf, admin)
    rc = d.wait()
    err = d.stderr
    assert hook_ran(env, 1), f"the cycle never reached the commit\n{err}"
    line, outcome = check_promises(env, admin, err,
                                   r"^commit: .*(replaced|changed) on disk while smbtuned was "
                                   r"editing it")
    assert outcome == "old", f"the admin's file was overwritten\n{err}"
    assert rc == 1, err
    faults.record("admin replaced smb.conf during the write", "not written")
