"""Black-box tests of the tuning daemon (smbtuned --once, the daemon loop,
-t, --resume) against a real smbd from the fixture.

What is held here is structure and safety, never which buffer size wins
(loopback cannot rank sizes of 64K and above, FACTS.md):
- a --once cycle reports one JSON object whose numbers agree with the
  value it names; what it commits is what Samba's own parser reads back;
  only the socket options line changes, its other tokens stay;
- trials on a shadow smbd never touch the production smb.conf;
- --dry-run writes nothing;
- SIGTERM/SIGINT mid-trial take a live trial back, byte for byte;
- after kill -9 mid-trial, the next start takes the trial back by
  compare-and-set, keeping an admin's edit elsewhere in the file; so it does
  after a SIGKILL at any rename of a live cycle (a step recorded, not yet
  written);
- an edit by hand of our line makes smbtuned hold off until --resume;
- SIGHUP with a bad config keeps the one in force, and so does one that
  names another state directory (that takes a restart); one that arrives
  during a cycle waits for its end;
- -t names the file and line of a problem;
- nothing outlives a run: no shadow smbd or run dir, no probe child, probe
  file or work dir, no editor temp file.

Every run gets a state directory under /tmp (a shadow smbd's socket path
must stay short, see daemon_util.py) and a small probe and lattice so that
the file runs in a few minutes on two cores.
"""

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import samba_value
from daemon_util import (LEGACY, RESULT_RE, Daemon, DaemonEnv, only_socket_line_changed, q,
                         registry_copy, socket_line_index, socket_value)

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

# On the lattice of SMALL_TUNE (64K..256K): no stalls, quick samples.
ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"
SIDE_KEYS = {"value", "rcvbuf", "sndbuf", "write_mbps", "read_mbps"}
TOP_KEYS = {"before", "after", "committed", "mode", "samples", "bytes", "seconds", "result"}


def buffers_of(value):
    """(SO_RCVBUF, SO_SNDBUF) of a value as the report gives them: an int,
    or None when the token is absent (autotuning)."""
    out = {"SO_RCVBUF": None, "SO_SNDBUF": None}
    for tok in re.split(r"[ \t,]+", value):
        name, eq, v = tok.partition("=")
        if eq and name.upper() in out:
            out[name.upper()] = int(v)
    return out["SO_RCVBUF"], out["SO_SNDBUF"]


def check_report(obj):
    """The --json object's shape, and its buffers agree with its values."""
    assert TOP_KEYS <= set(obj), f"missing keys {TOP_KEYS - set(obj)} in {obj}"
    for side in ("before", "after"):
        s = obj[side]
        assert SIDE_KEYS <= set(s), f"{side}: missing {SIDE_KEYS - set(s)} in {s}"
        assert isinstance(s["value"], str) and s["value"], s
        assert (s["rcvbuf"], s["sndbuf"]) == buffers_of(s["value"]), \
            f"{side}: buffers {s['rcvbuf']},{s['sndbuf']} do not match value {s['value']!r}"
        for k in ("write_mbps", "read_mbps"):
            assert s[k] is None or (isinstance(s[k], (int, float)) and s[k] >= 0), (side, k, s)
    assert isinstance(obj["committed"], bool)
    assert obj["mode"] in ("tune", "advise")
    assert isinstance(obj["samples"], int) and obj["samples"] >= 1, obj
    assert isinstance(obj["bytes"], int) and obj["bytes"] > 0, obj
    assert isinstance(obj["seconds"], (int, float)) and obj["seconds"] >= 0, obj
    assert isinstance(obj["result"], str) and obj["result"], obj


def resume_then_dry_run(env):
    """--resume hands control back, and a dry run works again: its report."""
    rc, out, err = env.run("--resume")
    assert rc == 0, f"{out}\n{err}"
    assert env.state().get("hold") == "no", env.state()
    rc, obj, err = env.run_json("--dry-run")
    assert rc == 0, err
    check_report(obj)
    return obj


def assert_clean(env):
    left = env.leftovers()
    assert not left, "left behind:\n" + "\n".join(left)
    assert env.srv.alive(), "the production smbd is gone\n" + env.srv.log_tail()
    r = env.srv.smbclient("-c", "ls")
    assert r.returncode == 0, f"the production smbd does not serve: {r.stdout}{r.stderr}"


# ------------------------------------------------------------------ --once

def test_once_from_legacy_line(make_env):
    """A full tune cycle on shadow smbds from the copied-from-a-guide line:
    the production smb.conf is touched once at most (the commit), only in
    its socket options line, and Samba reads back what the report says."""
    env = make_env(LEGACY)
    # 8192 stalls on loopback: a short deadline bounds those samples.
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune")})
    conf = env.srv.conf
    before = conf.read_bytes()
    prod_pid = env.srv.pid

    d = env.start("--once", "--json")
    seen_files, saw_shadow = {before}, False
    deadline = time.monotonic() + 300
    while d.alive() and time.monotonic() < deadline:
        seen_files.add(conf.read_bytes())
        shadow = env.state_dir / "shadow"
        saw_shadow |= shadow.exists() and any(p.name.startswith("shadow-")
                                              for p in shadow.iterdir())
        time.sleep(0.02)
    rc = d.wait(timeout=1)
    out, err = d.stdout, d.stderr
    after = conf.read_bytes()
    seen_files.add(after)

    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, f"--json prints one line, got {out!r}"
    obj = json.loads(lines[0])
    check_report(obj)
    assert obj["mode"] == "tune"
    assert obj["before"]["value"] == LEGACY
    assert (obj["before"]["rcvbuf"], obj["before"]["sndbuf"]) == (8192, 8192)
    assert saw_shadow, f"no shadow smbd run dir appeared during a shadow cycle\n{err}"
    # Trials ran on shadows: production saw the old bytes and the final ones only.
    assert seen_files <= {before, after}, \
        f"smb.conf took {len(seen_files)} different contents during a shadow cycle"

    assert samba_value(conf) == obj["after"]["value"]
    reason = only_socket_line_changed(before, after)
    assert reason is None, reason
    toks = obj["after"]["value"].split()
    for t in ("TCP_NODELAY", "IPTOS_LOWDELAY", "SO_KEEPALIVE"):
        assert t in toks, f"{t} dropped: {obj['after']['value']!r}"
    # Other tokens keep their order.
    others = [t for t in toks if not t.upper().startswith(("SO_RCVBUF=", "SO_SNDBUF="))]
    assert others == ["TCP_NODELAY", "IPTOS_LOWDELAY", "SO_KEEPALIVE"], others

    st = env.state()
    assert st.get("pending") == "no", st
    assert st.get("hold") == "no", st
    if obj["committed"]:
        assert after != before
        assert socket_value(after) == obj["after"]["value"]
        assert st.get("last_written") == obj["after"]["value"], st
    else:
        assert after == before, "not committed, but smb.conf changed"
        assert obj["after"]["value"] == LEGACY, obj
    assert env.srv.pid == prod_pid
    assert_clean(env)


@pytest.mark.parametrize("trials", ["shadow", "live"])
def test_once_dry_run_writes_nothing(make_env, trials):
    """--dry-run (advise mode) never writes smb.conf, whatever the trials
    setting: a live trial would reach every client of the production smbd."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"mode": q("tune"), "apply": q("smbcontrol"), "trials": q(trials),
                           "max_bytes": "160M"})
    conf = env.srv.conf
    before = conf.read_bytes()
    mtime = conf.stat().st_mtime_ns

    rc, obj, err = env.run_json("--dry-run")
    assert rc == 0, err
    check_report(obj)
    assert obj["committed"] is False
    assert obj["mode"] == "advise"
    assert obj["before"]["value"] == ON_LATTICE
    assert conf.read_bytes() == before
    assert conf.stat().st_mtime_ns == mtime, \
        f"--dry-run (trials={trials}) rewrote smb.conf (same bytes in the end)\n{err}"
    st = env.state()
    assert not st.get("last_written"), f"a dry run recorded a write: {st}"
    assert st.get("hold", "no") == "no", st
    assert_clean(env)


# --------------------------------------------------------- stopping mid-trial

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_live_trial_restores(make_env, sig):
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol")})
    conf = env.srv.conf
    before = conf.read_bytes()

    d = env.start("--once")
    d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf", poll=0.005)
    assert socket_value(conf.read_bytes()) != socket_value(before)
    d.signal(sig)
    rc = d.wait(timeout=120)
    assert rc >= 0, f"smbtuned died of signal {-rc} instead of stopping\n{d.stderr}"
    assert conf.read_bytes() == before, \
        f"smb.conf not restored after {sig.name}:\n{conf.read_text()}\n{d.stderr}"
    st = env.state()
    assert st.get("pending") == "no", st
    # the cycle the signal ended is the last one --status shows
    assert st.get("cycle_result", "").startswith("stopped by a signal during: searching: "), st
    assert_clean(env)


KILL_POINTS = [("sample", 1), ("sample", 2), ("sample", 4), ("written", None)]


@pytest.mark.parametrize("point,n", KILL_POINTS,
                         ids=["after-sample-1", "after-sample-2", "after-sample-4",
                              "after-trial-write"])
def test_kill9_mid_live_trial_recovered(make_env, point, n):
    """kill -9 at a point of a live cycle; an admin edits other lines; the
    next start puts our line back (only ours) and records that."""
    env = make_env(ON_LATTICE)
    # A byte budget keeps the recovering --dry-run cycle short; it is large
    # enough that the killed run reaches its kill point.
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol"), "max_bytes": "160M"})
    conf = env.srv.conf
    before = conf.read_bytes()

    d = env.start("--once")
    if point == "sample":
        d.wait_samples(n)
    else:
        d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf",
                   poll=0.005)
    d.proc.kill()  # SIGKILL, our PID
    d.proc.wait(timeout=30)
    mid = conf.read_bytes()
    if point == "written":
        assert socket_value(mid) != socket_value(before)
        # nothing committed yet: the line in force is the trial's, and
        # --status says so rather than "not written by smbtuned"
        rc, out, err = env.run("--status", "--json")
        assert rc == 0, err
        obj = json.loads(out)
        assert (obj["written_by"], obj["pending"]) == ("pending", "trial"), obj

    # The admin: a different workgroup (a line BEFORE ours, of another
    # length: offsets move) and a comment at the end.
    assert b"workgroup = SMBTUNEDTEST\n" in mid
    assert socket_line_index(mid.splitlines()) > [
        i for i, l in enumerate(mid.splitlines()) if l.strip().startswith(b"workgroup")][0]
    edit = lambda b: (b.replace(b"workgroup = SMBTUNEDTEST\n", b"workgroup = ADMINEDITEDGROUP\n")
                      + b"# an admin was here\n")
    conf.write_bytes(edit(mid))
    expected = edit(before)

    rc, out, err = env.run("--once", "--dry-run")
    assert rc == 0, f"{out}\n{err}"
    got = conf.read_bytes()
    assert socket_value(got) == socket_value(before), f"our line not restored:\n{got.decode()}"
    assert got == expected, f"smb.conf after recovery:\n{got.decode()}\nexpected:\n" \
                            f"{expected.decode()}\n{err}"
    assert samba_value(conf) == ON_LATTICE
    st = env.state()
    # no record of a trial left (a run killed before its first trial
    # saved no state file, and the dry run saves none of its own)
    assert st.get("pending", "no") == "no", st
    if point == "written":
        assert st.get("pending") == "no", st
    assert st.get("hold", "no") == "no", f"an edit elsewhere made it hold: {st}\n{err}"
    assert_clean(env)


def test_kill9_trial_taken_back_under_an_admin_line(make_env):
    """kill -9 with a live trial in smb.conf; then an admin adds a socket
    options line of their own below ours in [global] (theirs is in force).
    The next start puts our line back to what it replaced, keeps theirs,
    in force, and holds off: our trial value must not stay in the file,
    to come back into force the day their line goes."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE_TUNE)
    conf = env.srv.conf
    before, mid = killed_in_a_live_trial(env)

    admin_value = "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144"
    admin = f"   socket options = {admin_value}\n".encode()

    def below_ours(data):
        lines = data.splitlines(keepends=True)
        i = socket_line_index(lines)
        return b"".join(lines[:i + 1] + [admin] + lines[i + 1:])

    conf.write_bytes(below_ours(mid))
    assert samba_value(conf) == admin_value

    rc, out, err = env.run("--once", "--dry-run")
    got = conf.read_bytes()
    assert got == below_ours(before), \
        f"smb.conf after the restart:\n{got.decode()}\nexpected:\n" \
        f"{below_ours(before).decode()}\n{err}"
    assert samba_value(conf) == admin_value
    assert "taken back" in err and "another socket options line is in force" in err, err
    st = env.state()
    assert st.get("pending") == "no", st
    assert st.get("hold") == "yes", f"no hold after an admin's line:\n{st}\n{err}"
    assert_clean(env)


RENAME_CALLS = "rename,renameat,renameat2"
MAX_RENAMES = 60  # a bound on the loop below, far above a small live cycle's

# Live trials, a byte budget that keeps a recovering cycle short.
LIVE_TUNE = {"trials": q("live"), "apply": q("smbcontrol"), "max_bytes": "160M"}


def killed_in_a_live_trial(env):
    """Start a --once live cycle and kill -9 it once a trial is in
    smb.conf: (smb.conf's bytes before, with the trial)."""
    conf = env.srv.conf
    before = conf.read_bytes()
    d = env.start("--once")
    d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf", poll=0.005)
    d.proc.kill()  # SIGKILL, our PID
    d.proc.wait(timeout=30)
    mid = conf.read_bytes()
    assert socket_value(mid) != socket_value(before)
    return before, mid


def test_kill9_trial_taken_back_after_smb_conf_moved(make_env, tmp_path):
    """kill -9 with a live trial in smb.conf, then the config is pointed at
    another file before the restart: the record names the file the trial
    was written in, and the trial is taken back there, not dropped."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE_TUNE)
    conf = env.srv.conf
    before, mid = killed_in_a_live_trial(env)
    other = tmp_path / "other.conf"
    other.write_bytes(mid)
    env.write_config(tune={**LIVE_TUNE, "smb_conf": q(other)})
    rc, out, err = env.run("--once", "--dry-run")
    assert conf.read_bytes() == before, f"the trial stayed in {conf}\n{err}"
    assert env.state().get("pending", "no") == "no", env.state()



def test_kill9_trial_taken_back_before_a_refused_sweep(make_env):
    """kill -9 with a live trial in smb.conf, and the shadows' base
    directory made group-writable meanwhile: the start refuses it, naming
    it, but only after the trial is taken back (the refusal waits for an
    admin; production must not)."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE_TUNE)
    conf = env.srv.conf
    before, mid = killed_in_a_live_trial(env)
    shadow = env.state_dir / "shadow"
    shadow.mkdir(mode=0o700, exist_ok=True)
    os.chmod(shadow, 0o770)
    rc, out, err = env.run(timeout=120)
    assert rc == 1, err
    assert str(shadow) in err, err
    assert conf.read_bytes() == before, f"the trial stayed in {conf}\n{err}"
    assert env.state().get("pending", "no") == "no", env.state()


def test_kill9_at_each_rename_of_a_live_cycle(make_env):
    """Every state save and every smb.conf write (a trial value, the next
    one, the commit) ends in a rename, and each edit is recorded before its
    rename. The edits run in jobs, children of the daemon (lib/job.h), and
    strace counts renames per process: run n kills every process of the
    live --once run at its n-th rename, n = 1, 2, ... until a run gets
    through (a job renames three times: its record, then smb.conf's temp
    file to its name with inode numbers, then smb.conf). A job killed in its edit is settled by the daemon itself (it
    takes the recorded trial back and ends the cycle); a daemon killed is
    settled by the next start. Either way smb.conf then holds the original
    line or the committed one, never a trial value, and no temp file; and
    smbtuned never mistakes its own half-done step for an admin's edit."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol"), "max_bytes": "160M"})
    recover = env.write_config(tune={"max_bytes": "8M"}, path=env.tmp / "recover.conf")
    conf = env.srv.conf
    before = conf.read_bytes()
    changed_at_kill = 0  # kills that found a value of ours in the file
    job_kills = daemon_kills = 0
    for n in range(1, MAX_RENAMES + 1):
        conf.write_bytes(before)
        for p in env.state_dir.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        env.prefix = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={RENAME_CALLS}",
                      "-e", f"inject={RENAME_CALLS}:signal=KILL:when={n}"]
        rc, _, err = env.run("--once")
        env.prefix = []
        mid = socket_value(conf.read_bytes())
        if rc == 0:
            break
        changed_at_kill += mid != socket_value(before)
        # strace dies by the signal that killed the daemon; a job's death
        # is the daemon's failed cycle
        daemon_kills += rc == -signal.SIGKILL
        job_kills += "the editing job failed" in err

        rc2, out2, err2 = env.run("--once", "--dry-run", conf=recover)
        assert rc2 == 0, f"kill at rename {n}: recovery failed\n{out2}\n{err2}"
        after = conf.read_bytes()
        st = env.state()
        assert st.get("hold", "no") == "no", f"kill at rename {n}: holds: {st}\n{err}\n{err2}"
        # absent: killed before anything was recorded (a dry run saves
        # no state of its own)
        assert st.get("pending", "no") == "no", f"kill at rename {n}: {st}"
        got = socket_value(after)
        committed = st.get("last_written")
        assert got == socket_value(before) or got == committed, \
            f"kill at rename {n}: smb.conf holds {got!r}, neither the original nor a commit" \
            f"\n{err}\n{err2}"
        assert only_socket_line_changed(before, after) is None
        assert_clean(env)
    else:
        raise AssertionError(f"a live --once still renamed after {MAX_RENAMES} kills")
    # Run 1 kills the first trial's job at its record and the daemon at its
    # first save; run 2 the job at its write into smb.conf. Kills of later
    # jobs and at every step are the fault suite's (tests/faults) and the
    # simulation's (tests/unit/test_tuner.c).
    assert daemon_kills >= 2, f"only {daemon_kills} of {n - 1} runs killed the daemon itself"
    assert job_kills >= 2, f"only {job_kills} of {n - 1} runs killed an editing job"


def test_kill9_mid_shadow_trial_swept(make_env):
    """kill -9 while a shadow smbd serves a trial: the shadow goes with its
    owner, and the next start sweeps its run dir; production is untouched."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("shadow"), "max_bytes": "160M"})
    conf = env.srv.conf
    before = conf.read_bytes()
    shadow = env.state_dir / "shadow"

    d = env.start("--once")
    d.wait_samples(2)
    assert shadow.exists() and any(p.name.startswith("shadow-") for p in shadow.iterdir()), \
        f"no shadow run dir while sampling\n{d.stderr}"
    d.proc.kill()
    d.proc.wait(timeout=30)
    assert conf.read_bytes() == before

    rc, out, err = env.run("--once", "--dry-run")
    assert rc == 0, f"{out}\n{err}"
    assert conf.read_bytes() == before
    assert_clean(env)


# ------------------------------------------------------------ edits by hand

HAND_TUNE = {"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune")}
HAND_VALUE = "TCP_NODELAY SO_RCVBUF=32768 SO_SNDBUF=32768"


def commit_then_edit_by_hand(env):
    """A cycle that commits, then the admin's edit of our line: smb.conf's
    bytes after the edit."""
    conf = env.srv.conf
    # 1. A cycle that commits: 8192 is off the 64K..256K lattice and stalls
    # on loopback, so any neighbour beats it (which one is not checked).
    rc, obj, err = env.run_json()
    assert rc == 0, err
    assert obj["committed"], f"the first cycle kept the stalling 8192 line: {obj}\n{err}"
    written = env.state().get("last_written")
    assert written == obj["after"]["value"] == socket_value(conf.read_bytes())

    # 2. The admin sets our line to a value smbtuned did not write.
    data = conf.read_bytes()
    lines = data.splitlines(keepends=True)
    i = socket_line_index(lines)
    assert HAND_VALUE != written
    lines[i] = f"   socket options = {HAND_VALUE}\n".encode()
    hand = b"".join(lines)
    conf.write_bytes(hand)
    return hand


def test_hand_edit_holds_until_resume(make_env):
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"}, tune=HAND_TUNE)
    conf = env.srv.conf
    hand = commit_then_edit_by_hand(env)
    hand_value = HAND_VALUE

    # 3. The next cycle holds off: exit 1, nothing measured, nothing written.
    rc, out, err = env.run("--once")
    assert rc == 1, f"{out}\n{err}"
    assert "edited by hand" in err, err
    assert not re.search(r"^<\d>tried ", err, re.M), f"measured while holding off:\n{err}"
    assert conf.read_bytes() == hand
    assert env.state().get("hold") == "yes", env.state()
    # It keeps holding on later runs.
    rc, out, err = env.run("--once")
    assert rc == 1, f"{out}\n{err}"
    assert conf.read_bytes() == hand

    # 4. --resume hands control back; 5. a dry run works again and still
    # writes nothing.
    obj = resume_then_dry_run(env)
    assert obj["before"]["value"] == hand_value
    assert conf.read_bytes() == hand
    assert env.state().get("hold") == "no", env.state()
    # the rates of the line before the hold are not shown as the hand
    # value's (and the dry run saved none of its own)
    assert env.state().get("have_incumbent") == "no", env.state()
    assert float(env.state()["write_mbps"]) == float(env.state()["read_mbps"]) == 0, env.state()
    assert_clean(env)


def test_resume_right_after_a_hand_edit_takes_the_line(make_env):
    """--resume run right after an edit by hand, before a cycle held off
    for it (the hold is taken by the next cycle), hands that line to
    smbtuned as one after the hold would: the next cycle tunes from it."""
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"}, tune=HAND_TUNE)
    conf = env.srv.conf
    hand = commit_then_edit_by_hand(env)

    rc, out, err = env.run("--resume")
    assert rc == 0, f"{out}\n{err}"
    assert f"it is '{HAND_VALUE}'" in out and "had not held off for it yet" in out, out
    assert "tunes smb.conf again from its next cycle" in out, out
    assert env.state().get("last_written") in (None, ""), env.state()
    assert env.state().get("hold") == "no", env.state()
    # no hold at the next cycle: it starts from the admin's line
    rc, obj, err = env.run_json("--dry-run")
    assert rc == 0, err
    assert "edited by hand" not in err, err
    check_report(obj)
    assert obj["before"]["value"] == HAND_VALUE
    assert conf.read_bytes() == hand
    # nothing left to hand back
    rc, out, err = env.run("--resume")
    assert rc == 0 and "smbtuned was not holding off" in out, f"{out}\n{err}"
    assert_clean(env)


def opened(pid, path):
    """Whether process pid has path open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            pass
    return False


def test_resume_racing_a_take_back_takes_nothing(make_env):
    """A write of the daemon's half-way when --resume reads the line (a
    commit written, then taken back in the same job: a file opened on smbd
    before its restart) must not read as an edit by hand. --resume reads
    the line under the edit lock, which every write of the daemon's holds,
    then the state under its lock: a commit in flight shows as its record,
    pending. Here the two locks are held as such a job and its daemon
    would, the line changed and put back meanwhile: --resume reads it
    only when it is back, and takes nothing. (It once read the line at
    once, then took a line of the daemon's for the admin's.)"""
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"}, tune=HAND_TUNE)
    conf = env.srv.conf
    rc, obj, err = env.run_json()
    assert rc == 0 and obj["committed"], err
    written = env.state()["last_written"]
    ours = conf.read_bytes()
    lines = ours.splitlines(keepends=True)
    lines[socket_line_index(lines)] = f"   socket options = {HAND_VALUE}\n".encode()
    conf.write_bytes(b"".join(lines))  # the job's write, the record saved before it
    edit_lock, state_lock = env.state_dir / "smbconf.lock", env.state_dir / "state.lock"
    with open(edit_lock, "w") as el, open(state_lock, "w") as sl:
        fcntl.flock(el, fcntl.LOCK_EX)
        fcntl.flock(sl, fcntl.LOCK_EX)
        d = env.start("--resume")
        d.wait_for(lambda: opened(d.pid, edit_lock) or opened(d.pid, state_lock), timeout=30,
                   what="--resume at a lock")
        conf.write_bytes(ours)  # ... and its take-back, the record ended
    assert d.wait(timeout=30) == 0, d.stderr
    assert "smbtuned was not holding off" in d.stdout, d.stdout + d.stderr
    assert "edited by hand" not in d.stdout + d.stderr, d.stdout + d.stderr
    assert env.state().get("last_written") == written, env.state()


# ------------------------------------------------------------------ SIGHUP

BAD_CONFIGS = {
    "bad-value": ("interval", "banana"),
    "unknown-option": ("intervall", "1h"),
}


# An advising daemon whose cycles end on their byte budget, one an hour.
HUP_TUNE = {"mode": q("advise"), "interval": "1h", "max_bytes": "32M"}
REFUSED = "keeping the configuration in force"


def start_advising(make_env):
    """(env, daemon): an advising daemon (HUP_TUNE) whose first cycle,
    run at start, has ended."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=HUP_TUNE)
    d = env.start()
    d.wait_for(lambda: RESULT_RE.search(d.stderr) is not None, timeout=180,
               what="the first cycle's result line")
    return env, d


def config_line(env, key):
    """The number of the line of env's config that sets key."""
    text = env.conf.read_text().splitlines()
    return [i + 1 for i, l in enumerate(text) if l.strip().startswith(f"{key} =")][0]


def hup(d, said, what):
    """SIGHUP d and wait for one more line containing said; that line."""
    n = d.stderr.count(said)
    d.signal(signal.SIGHUP)
    d.wait_for(lambda: d.stderr.count(said) > n, timeout=60, what=what)
    return [l for l in d.stderr.splitlines() if said in l][-1]


def stop_advising(env, d):
    """SIGTERM: exit 0, smb.conf untouched (advise), nothing left."""
    d.signal(signal.SIGTERM)
    rc = d.wait(timeout=120)
    assert rc == 0, d.stderr
    assert env.srv.conf.read_text().count("socket options = " + ON_LATTICE) == 1
    assert_clean(env)


@pytest.mark.parametrize("bad", sorted(BAD_CONFIGS))
def test_sighup_bad_config_keeps_old(make_env, bad):
    env, d = start_advising(make_env)

    key, value = BAD_CONFIGS[bad]
    env.write_config(tune={**HUP_TUNE, key: value})
    lineno = config_line(env, key)
    line = hup(d, REFUSED, "the refusal of the bad config")
    assert f"{env.conf}:{lineno}" in line, f"no {env.conf}:{lineno} in {line!r}"
    assert d.alive(), d.stderr

    # A good config again is taken.
    env.write_config(tune=HUP_TUNE)
    hup(d, "configuration reloaded", "the reload of the good config")
    stop_advising(env, d)


def test_sighup_unreadable_smb_conf_keeps_old(make_env, tmp_path):
    """A SIGHUP whose config names an smb.conf that -t would refuse (here
    one that is not there) is refused as -t refuses it, and the old
    configuration stays: every cycle would fail on the new one."""
    env, d = start_advising(make_env)
    missing = tmp_path / "nope" / "smb.conf"
    env.write_config(tune={**HUP_TUNE, "smb_conf": q(missing)})
    line = hup(d, REFUSED, "the refusal of an smb.conf that cannot be read")
    assert str(missing) in line, line
    assert "configuration reloaded" not in d.stderr, d.stderr
    assert d.alive(), d.stderr
    env.write_config(tune=HUP_TUNE)
    hup(d, "configuration reloaded", "the reload of the good config")
    stop_advising(env, d)


def test_sighup_new_state_dir_needs_restart(make_env, tmp_path):
    """A SIGHUP whose config names another state directory is refused, and
    the one in force stays: the run lock is held there, a pending edit was
    recovered from there, and the own share's files live there, so a new
    one takes a restart. The new directory is never made; the next cycle
    writes the state file in the old one."""
    env, d = start_advising(make_env)
    d.wait_for(lambda: int(env.state().get("cycles", "0")) >= 1, timeout=60,
               what="the first cycle's state file")
    cycles = int(env.state()["cycles"])

    new_dir = tmp_path / "new-state"
    env.write_config(tune={**HUP_TUNE, "state_dir": q(new_dir)})
    lineno = config_line(env, "state_dir")
    line = hup(d, REFUSED, "the refusal of the new state directory")
    want = (f"{env.conf}:{lineno}: tune: state_dir changed from '{env.state_dir}' to "
            f"'{new_dir}': a new state directory takes a restart")
    assert want in line, f"no {want!r} in {line!r}"
    assert "configuration reloaded" not in d.stderr, d.stderr
    assert d.alive(), d.stderr
    assert not new_dir.exists(), f"{new_dir} was made: {sorted(new_dir.rglob('*'))}"

    # The old directory is the one in force: the config that names it is
    # taken again, and the cycle it starts writes the state file there.
    env.write_config(tune=HUP_TUNE)
    hup(d, "configuration reloaded", "the reload of the config in force")
    d.wait_for(lambda: int(env.state().get("cycles", "0")) > cycles, timeout=180,
               what="the next cycle's state file in the old state directory")
    assert not new_dir.exists(), f"{new_dir} was made: {sorted(new_dir.rglob('*'))}"
    stop_advising(env, d)


def test_sighup_while_busy_is_said_once(make_env, tmp_path):
    """A SIGHUP while a commit's smbcontrol takes its time (a wrapper that
    sleeps 4 s): the reload waits for the cycle, retrying each second, and
    says so once, not at every retry."""
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune"),
                           "interval": "1h"})
    started = tmp_path / "smbcontrol-started"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "smbcontrol").write_text(f"#!/bin/sh\necho $$ > '{started}'\nsleep 4\n")
    (bindir / "smbcontrol").chmod(0o755)
    e = env.env()
    e["PATH"] = f"{bindir}:{e.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    d = Daemon(env.cmd(), e, env.logdir, "hup")
    env.daemons.append(d)
    d.wait_for(lambda: started.exists() and started.read_text().strip(), timeout=400,
               what="the commit's smbcontrol")
    d.signal(signal.SIGHUP)
    d.wait_for(lambda: "configuration reloaded" in d.stderr, timeout=60,
               what="the reload after the commit")
    assert d.stderr.count("reloading once the cycle under way ends") == 1, d.stderr
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert_clean(env)


def test_dry_run_settles_a_commit_without_a_restart(make_env):
    """--once --dry-run settles a commit a killed run left (checked, kept,
    smbd told), but never restarts smbd, though restart_smbd = yes and the
    commit leaves SO_SNDBUF to autotuning while smbd's listener holds an
    explicit one: a restart drops every client. It tried to (here it
    failed: the test's environment has no system bus)."""
    env = make_env(LEGACY)
    env.write_config(tune={"mode": q("advise"), "apply": q("smbcontrol"),
                           "restart_smbd": "yes"})
    rc, out, err = env.run("--once")  # a state file, as a cycle leaves it
    assert rc == 0, err
    old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144")
    rc, out, err = env.run("--once", "--dry-run")
    assert rc == 0, err
    assert re.search(r"^<5>.*written by a run that did not finish, checked and kept: smbd is "
                     r"told \(apply = smbcontrol\) but not restarted \(--dry-run\): autotuning "
                     r"reaches new connections once smbd restarts", err, re.M), err
    assert "restart" not in err.replace("not restarted", "").replace("smbd restarts", ""), err
    assert socket_value(env.srv.conf.read_bytes()) == new.split("=", 1)[1].strip()
    assert env.state().get("pending") == "no"
    assert_clean(env)


def late_commit(make_env, restart=None):
    """A state file with a commit a killed run left (restart_smbd = yes,
    SO_SNDBUF left to autotuning while smbd's listener holds an explicit
    size: a restart wanted, by what the listener shows; restart: the run's
    decision, recorded, as plant_pending_commit), and a time window that
    excludes now: (env, the old line, the window)."""
    env = make_env(LEGACY)
    tune = {"mode": q("advise"), "apply": q("smbcontrol"), "restart_smbd": "yes"}
    env.write_config(tune=tune)
    rc, out, err = env.run("--once")  # a state file, as a cycle leaves it
    assert rc == 0, err
    old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144", restart=restart)
    t = time.localtime()
    m = t.tm_hour * 60 + t.tm_min
    a, b = (m + 60) % 1440, (m + 120) % 1440
    window = f"{a // 60:02d}:{a % 60:02d}-{b // 60:02d}:{b % 60:02d}"
    env.write_config(tune={**tune, "window": q(window)})
    return env, old, window


def assert_late_taken_back(d, env, old, window):
    """Stop d: the commit was taken back, saying why, and smbd was never
    restarted (no attempt: it would fail on the missing bus)."""
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert re.search(r"^<5>unfinished change taken back in .*: the socket options line holds "
                     r"what it held before: the change needs smbd restarted \(restart_smbd = "
                     r"yes\), never done outside the time window " + re.escape(window) + "$",
                     d.stderr, re.M), d.stderr
    assert "checked and kept" not in d.stderr, d.stderr
    assert "cannot reach systemd" not in d.stderr, d.stderr
    assert socket_value(env.srv.conf.read_bytes()) == old.split("=", 1)[1].strip()
    assert env.state().get("pending") == "no"


def test_a_commit_settled_outside_the_window_is_taken_back(make_env):
    """A daemon started outside its time window (a crash at the window's
    end, a start at noon) finds a commit a killed run left that needs smbd
    restarted: restart_smbd = yes, and the commit leaves SO_SNDBUF to
    autotuning while smbd's listener holds an explicit size. A restart
    moves every client off, which the window keeps to its hours, and
    without one the listener keeps the old size with no later cycle to
    restart it: the commit is taken back, saying why (a restart it tried
    would fail here: the test's environment has no system bus)."""
    env, old, window = late_commit(make_env)
    d = env.start()
    d.wait_for(lambda: "outside the time window" in d.stderr and
               "unfinished change taken back" in d.stderr, timeout=60,
               what="the take-back and the window's deferral")
    assert_late_taken_back(d, env, old, window)


def test_a_late_commit_is_taken_back_by_a_cycle_too(make_env):
    """The same commit, where the start could not settle it (the edit lock
    held by someone else for its 10 s wait): the first cycle's take-back,
    in a job, takes it back when the lock is free, and says why."""
    env, old, window = late_commit(make_env)
    with open(env.state_dir / "smbconf.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        d = env.start()
        d.wait_for(lambda: "taking our change back failed" in d.stderr, timeout=60,
                   what="the start's take-back, refused by the lock")
    d.wait_for(lambda: "unfinished change taken back" in d.stderr, timeout=60,
               what="the cycle's take-back")
    assert_late_taken_back(d, env, old, window)


def test_a_start_goes_by_the_recorded_restart(make_env):
    """The same commit outside the window, recorded by its run as needing
    no restart of smbd (state format 7): the start goes by the record, not
    by smbd's listener, which cannot tell every explicit size from
    autotuning's start (so the record, and here the listener would say
    restart): checked and kept, smbd told, never restarted. The unit tests
    show the other way: recorded as needing one, taken back."""
    env, old, window = late_commit(make_env, restart=False)
    d = env.start()
    d.wait_for(lambda: "checked and kept" in d.stderr, timeout=60, what="the commit kept")
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert re.search(r"^<5>.*: written by a run that did not finish, checked and kept: smbd is "
                     r"told now \(apply = smbcontrol\)$", d.stderr, re.M), d.stderr
    assert "unfinished change taken back" not in d.stderr, d.stderr
    assert "cannot reach systemd" not in d.stderr, d.stderr
    assert socket_value(env.srv.conf.read_bytes()) == "TCP_NODELAY SO_RCVBUF=262144"
    st = env.state()
    assert st.get("pending") == "no" and st.get("pending_restart") == "0", st


def test_set_buffers_refuses_a_live_trials_value(make_env):
    """`--set-buffers` asking for the value a running daemon's live trial
    holds in force said "(unchanged)" and wrote nothing, and the trial's
    end then put the old line back: the admin's setting was lost without a
    word. It is refused, saying why; another value is written as before
    (and the trial's end leaves it: the line is no longer the trial's)."""
    env = make_env(LEGACY)
    env.cycle_once_advised()  # a state file, as a cycle leaves it
    old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144",
                                        commit=False)
    before = env.srv.conf.read_bytes()
    rc, out, err = env.run("--set-buffers", "256K,256K")
    assert rc == 1, out + err
    assert "as a live trial of the running smbtuned" in err and "nothing written" in err, err
    assert env.srv.conf.read_bytes() == before
    # the same value in a line of the admin's below the trial's (theirs in
    # force, and it stays when the trial's goes): unchanged, truly
    conf = env.srv.conf
    conf.write_text(conf.read_text().replace(
        new + "\n", new + "\n\tsocket options=TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144\n"))
    rc, out, err = env.run("--set-buffers", "256K,256K")
    assert rc == 0 and "(unchanged)" in out, out + err
    conf.write_text(before.decode())
    rc, out, err = env.run("--set-buffers", "1M,1M")
    assert rc == 0, out + err
    assert socket_value(env.srv.conf.read_bytes()) == \
        "TCP_NODELAY SO_RCVBUF=1048576 SO_SNDBUF=1048576"
    assert_clean(env)


def test_set_buffers_over_a_live_trial_keeps_the_backup(make_env):
    """backup/ holds the file as it was before smbtuned's last write that
    replaced no trial of its own: a live trial's first write keeps the
    admin's bytes there, and the take-back, the next trial and a commit
    keep none. `--set-buffers` over a live trial once kept one, the
    trial's bytes, over the admin's: restoring "the previous file" from
    backup/ put the trial's sizes into production."""
    env = make_env(LEGACY)
    env.cycle_once_advised()  # a state file, as a cycle leaves it
    admins = env.srv.conf.read_bytes()
    env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144", commit=False)
    trials = env.srv.conf.read_bytes()
    # what the trial's own write would have kept
    backup = env.state_dir / "backup"
    (backup / "first").mkdir(parents=True, mode=0o700)
    name = os.path.realpath(env.srv.conf).lstrip("/").replace("%", "%25").replace("/", "%2F")
    (backup / name).write_bytes(admins)
    rc, out, err = env.run("--set-buffers", "1M,1M")
    assert rc == 0, out + err
    assert socket_value(env.srv.conf.read_bytes()) == \
        "TCP_NODELAY SO_RCVBUF=1048576 SO_SNDBUF=1048576"
    assert (backup / name).read_bytes() == admins, \
        "backup/ holds the trial's bytes" if (backup / name).read_bytes() == trials else "?"


def test_a_refused_start_names_the_trial_it_leaves(make_env):
    """A refused start takes nothing back, and after its exit 78 systemd
    does not try again: a live trial that a killed run left stays in
    smb.conf until a start succeeds. The refusal now says so, for a config
    file that does not load (the state directory then the one --state-dir
    names) and for an smb.conf the editor refuses; smb.conf is not
    touched."""
    env = make_env(LEGACY)
    env.cycle_once_advised()  # a state file, as a cycle leaves it
    env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144", commit=False)
    conf = env.srv.conf
    trial = conf.read_bytes()
    note = (f"smbtuned: note: {env.state_dir}/state records a live trial that a stopped run "
            f"left in {conf}: it stays in force until smbtuned starts and takes it back")
    good = env.conf.read_text()
    env.conf.write_text(good.replace('mode = "advise"', 'mode = "advice"'))
    rc, out, err = env.run("--state-dir", env.state_dir)
    assert rc == 78 and "mode (tune or advise)" in err, f"{rc}\n{out}\n{err}"
    assert note in err, err
    env.conf.write_text(good)
    conf.write_bytes(trial + b"\tinclude = relative.conf\n")
    rc, out, err = env.run()
    assert rc == 78 and "relative" in err, f"{rc}\n{out}\n{err}"
    assert note in err, err
    assert conf.read_bytes() == trial + b"\tinclude = relative.conf\n"
    # a run that holds the state directory takes its own trial back: no note
    fd = os.open(env.state_dir / "run.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rc, out, err = env.run()
    finally:
        os.close(fd)
    assert rc == 78 and "relative" in err and "note:" not in err, f"{rc}\n{out}\n{err}"
    # nothing recorded: no note
    env.conf.write_text(good.replace('mode = "advise"', 'mode = "advice"'))
    (env.state_dir / "state").unlink()
    rc, out, err = env.run("--state-dir", env.state_dir)
    assert rc == 78 and "note:" not in err, err


def test_sigterm_during_a_commit_keeps_it(make_env, tmp_path):
    """SIGTERM while the commit's job tells smbd (a smbcontrol that hangs):
    the commit is on disk, and it stays, as after a kill -9: the search had
    decided it. The daemon stops at once, nothing of the job is left
    running. The stop does not wait for the check after the write and for
    smbd: the record stays, and the next start checks the line with
    testparm, tells smbd and records the value as ours."""
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune"),
                           "interval": "1h"})
    started = tmp_path / "smbcontrol-started"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "smbcontrol").write_text(f"#!/bin/sh\necho $$ > '{started}'\nexec sleep 300\n")
    (bindir / "smbcontrol").chmod(0o755)
    conf = env.srv.conf
    before = conf.read_bytes()
    e = env.env()
    e["PATH"] = f"{bindir}:{e.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    d = Daemon(env.cmd(), e, env.logdir, "commit")
    env.daemons.append(d)
    # shadow trials tell smbd nothing: the first smbcontrol is the commit's
    d.wait_for(lambda: started.exists() and started.read_text().strip(), timeout=400,
               what="the commit's smbcontrol")
    hung = int(started.read_text())
    written = socket_value(conf.read_bytes())
    assert written != socket_value(before)
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    after = conf.read_bytes()
    assert socket_value(after) == written, f"the commit was taken back:\n{d.stderr}"
    # and the journal says so: the line changed, the next start finishes it
    assert re.search(r"^<5>.*socket options = " + re.escape(written) + r": written, "
                     r"but smbtuned stopped before it was checked and smbd was told: the next "
                     r"start checks it", d.stderr, re.M), d.stderr
    assert only_socket_line_changed(before, after) is None
    st = env.state()
    assert (st.get("pending"), st.get("pending_commit")) == ("yes", "yes"), st
    # the hung smbcontrol went with its job
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{hung}") and time.monotonic() < deadline:
        time.sleep(0.05)
    if os.path.exists(f"/proc/{hung}"):
        os.kill(hung, signal.SIGKILL)  # ours: the test's wrapper
        raise AssertionError("the commit's smbcontrol outlived smbtuned")
    # the next start (smbcontrol as installed) checks, keeps and tells it
    d = Daemon(env.cmd(), env.env(), env.logdir, "after")
    env.daemons.append(d)
    d.wait_for(lambda: "checked and kept" in d.stderr, timeout=120,
               what="the commit confirmed")
    assert re.search(r"^<5>.*socket options = " + re.escape(written) + r": written by a run "
                     r"that did not finish, checked and kept: smbd is told now "
                     r"\(apply = smbcontrol\)", d.stderr, re.M), d.stderr
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert socket_value(conf.read_bytes()) == written
    st = env.state()
    assert st.get("pending") == "no", st
    assert st.get("last_written") == written, st
    assert_clean(env)


def test_sighup_mid_live_cycle_waits_for_its_end(make_env):
    """A reload that switches live trials off arrives while a live trial is
    in smb.conf: the cycle must end on the options it began with (take its
    trial back or commit), then the new ones apply. Applied at once, the
    commit would expect the original line, find the trial, and hold off
    with the trial value left in the file."""
    env = make_env(ON_LATTICE)
    live = {"trials": q("live"), "apply": q("smbcontrol"), "interval": "1h", "max_bytes": "96M"}
    env.write_config(tune=live)
    conf = env.srv.conf
    before = conf.read_bytes()
    d = env.start()
    d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf", poll=0.005)
    env.write_config(tune={**live, "trials": q("client")})
    d.signal(signal.SIGHUP)
    d.wait_for(lambda: "configuration reloaded" in d.stderr, timeout=240,
               what="the reload after the cycle")
    err = d.stderr
    # said once, not at every retry while the cycle runs
    assert err.count("reloading once the cycle under way ends") == 1, err
    assert err.index("reloading once") < err.index("configuration reloaded"), err
    assert RESULT_RE.search(err[:err.index("configuration reloaded")]), err
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=120) == 0, d.stderr
    st = env.state()
    assert st.get("hold", "no") == "no", f"{st}\n{d.stderr}"
    assert st.get("pending") == "no", st
    got = socket_value(conf.read_bytes())
    assert got in (socket_value(before), st.get("last_written")), f"{got!r}\n{d.stderr}"
    assert_clean(env)


def test_start_removes_what_killed_writes_left(make_env):
    """A run killed between a temporary file's write and its rename (the
    state file's, a backup's) leaves it: the next start removes those of
    ours, of exactly that shape, and nothing else."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("shadow"), "mode": q("advise")})
    backup = env.state_dir / "backup"
    first = backup / "first"
    first.mkdir(parents=True, mode=0o700)
    os.chmod(backup, 0o700)
    left = [env.state_dir / ".smbtuned-state.Ab12Cd", backup / ".smbtuned-etc%2Fsmb.conf.zz99YY",
            first / ".smbtuned-etc%2Fsmb.conf.Qw12Er"]
    kept = [env.state_dir / ".smbtuned-state.Ab12C", env.state_dir / "notes",
            backup / "etc%2Fsmb.conf", first / ".smbtuned-x"]
    for p in left + kept:
        p.write_text("x")
    rc, out, err = env.run("--once")
    assert rc == 0, err
    assert [p for p in left if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


def test_start_refuses_a_read_only_line(make_env, tmp_path):
    """Under the unit's sandbox a directory outside ReadWritePaths= is
    read-only: a socket options line there (an include elsewhere) could
    not be committed, which a search would find only at its end. The start
    refuses it at once, naming the file, the directory and the fix (78);
    advise writes nothing and starts. A mount namespace of the test's own
    makes the include's directory read-only, as systemd's would."""
    env = make_env(None)
    inc_dir = tmp_path / "elsewhere"
    inc_dir.mkdir()
    inc = inc_dir / "tuning.conf"
    inc.write_text(f"socket options = {ON_LATTICE}\n")
    conf = env.srv.conf
    conf.write_text(conf.read_text().replace("[global]\n", f"[global]\n   include = {inc}\n", 1))
    ro = ('mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"')
    env.prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c", ro, str(inc_dir)]
    env.write_config(tune={"trials": q("shadow"), "mode": q("tune")})
    before = conf.read_bytes(), inc.read_bytes()
    rc, out, err = env.run(timeout=60)
    assert rc == 78, err
    assert f"{inc}: its directory {inc_dir} is read-only here" in err, err
    assert f"ReadWritePaths={inc_dir}" in err, err
    assert (conf.read_bytes(), inc.read_bytes()) == before
    # -t says the same (systemctl reload runs it in the unit's sandbox)
    rc, out, err = env.run("-t", timeout=60)
    assert rc == 78, err
    assert f"ReadWritePaths={inc_dir}" in err, err
    # advise: it starts and samples (stopped by us then)
    env.write_config(tune={"trials": q("shadow"), "mode": q("advise")})
    d = env.start()
    d.wait_samples(1)
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert "read-only here" not in d.stderr
    assert (conf.read_bytes(), inc.read_bytes()) == before


def test_a_link_to_smb_conf_is_judged_where_it_leads(make_env, tmp_path):
    """smb.conf named through a link in a read-only directory: the editor
    writes next to the file the link leads to, which is writable, so
    nothing is refused."""
    env = make_env(ON_LATTICE)
    links = tmp_path / "links"
    links.mkdir()
    (links / "smb.conf").symlink_to(env.srv.conf)
    ro = ('mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"')
    env.prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c", ro, str(links)]
    env.write_config(tune={"trials": q("shadow"), "mode": q("tune"),
                           "smb_conf": q(links / "smb.conf")})
    rc, out, err = env.run("-t", timeout=60)
    assert rc == 0, err


# ---------------------------------------------------------------------- -t

def test_debug_tells_the_programs_and_shadows(make_env):
    """-d adds what an admin debugging it wants: each program run (testparm,
    smbcontrol) with its status and time, and each shadow smbd with its
    pid, port and the line it tries; without -d none of it."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("shadow"), "mode": q("advise")})
    rc, out, err = env.run("--once", "-d")
    assert rc == 0, err
    assert re.search(r"^<7>ran testparm \.\.\. \(pid \d+\): status 0 after [\d.]+ s$", err, re.M), err
    assert re.search(r"^<7>shadow smbd \(pid \d+\) on 127\.0\.0\.1:\d+: socket options = ", err,
                     re.M), err
    rc, out, err = env.run("--once")
    assert rc == 0, err
    assert "<7>" not in err, err
    # each sample once: the journal's "tried" line, no progress line too
    assert re.search(r"^<6>tried ", err, re.M), err
    assert not re.search(r"^sample +\d", err, re.M), err


def test_check_good_config(make_env):
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("shadow"), "interval": "6h", "window": q("01:00-05:00"),
                           "busy_rate": "10M", "tied": "no"})
    before = env.srv.conf.read_bytes()
    rc, out, err = env.run("-t", timeout=60)
    assert rc == 0, f"{out}\n{err}"
    assert env.srv.conf.read_bytes() == before


BAD_LINES = {
    "interval": ("tune", "interval", "banana"),
    "size": ("probe", "size", "banana"),
    "trials": ("tune", "trials", q("everywhere")),
    "mode": ("tune", "mode", q("fast")),
    "max_size": ("tune", "max_size", "12Q"),
    "window": ("tune", "window", q("25:00-05:00")),
}


@pytest.mark.parametrize("bad", sorted(BAD_LINES))
def test_check_bad_config_names_line(make_env, bad):
    env = make_env(ON_LATTICE)
    section, key, value = BAD_LINES[bad]
    env.write_config(**{section: {key: value}})
    text = env.conf.read_text().splitlines()
    lineno = [i + 1 for i, l in enumerate(text) if l.strip().startswith(f"{key} =")]
    assert len(lineno) == 1
    rc, out, err = env.run("-t", timeout=60)
    assert rc == 78, f"{out}\n{err}"
    assert f"{env.conf}:{lineno[0]}" in err, err


def test_check_registry_smb_conf(make_env, tmp_path):
    env = make_env(ON_LATTICE)
    reg = registry_copy(env.srv.conf, tmp_path / "registry-smb.conf")
    env.write_config(tune={"smb_conf": q(reg)})
    rc, out, err = env.run("-t", timeout=60)
    assert rc == 78, f"{out}\n{err}"
    assert f"{reg}:4" in err, err


# ------------------------------------------------------ a damaged state file

# The state file format this smbtuned writes (lib/state.h).
STATE_VERSION = int(re.search(r"^#define STATE_VERSION (\d+)$",
                              (Path(__file__).parents[2] / "lib" / "state.h").read_text(),
                              re.M).group(1))


def legacy_state(conf, **changes):
    """A state file as smbtuned wrote it before the format had a version
    line, with keys replaced (a value) or removed (None)."""
    keys = {"have_incumbent": "no", "rcvbuf": "0", "sndbuf": "0", "write_mbps": "0.000000",
            "read_mbps": "0.000000", "hold": "no", "smb_conf": str(conf), "pending": "no",
            "pending_commit": "no", "pending_line_off": "0", "pending_line_len": "0",
            "cycles": "0"}
    keys.update(changes)
    out = ["# smbtuned state: written by smbtuned, read at start-up"]
    out += [f"{k} {v}" for k, v in keys.items() if v is not None]
    return ("\n".join(out) + "\n").encode()


def state_escape(data):
    """A string value as state_text.c's escape() writes it."""
    out = []
    for c in data:
        ch = chr(c)
        out.append({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or
                   (f"\\x{c:02x}" if c < 0x20 or c == 0x7f else ch))
    return "".join(out)


def line_of(data, start):
    """1-based number of the first line of data starting with start."""
    return [i + 1 for i, l in enumerate(data.split(b"\n")) if l.startswith(start)][0]


def damaged_states(conf):
    """{name: (bytes, line the message names, what it says)}"""
    no_original = legacy_state(conf, pending="yes", pending_file=str(conf),
                               pending_written=state_escape(conf.read_bytes()),
                               pending_line_off="9", pending_line_len="20")
    return {
        # the reproducer of the crash loop
        "pending-alone": (b"pending yes\n", 1, "the file ends without"),
        "written-without-original": (no_original, line_of(no_original, b"pending yes"),
                                     "a pending edit without pending_original"),
        "newer-version": (f"version {STATE_VERSION + 1}\n".encode() + legacy_state(conf), 1,
                          f"format version {STATE_VERSION + 1}, written by a newer smbtuned"),
        "nul-inside": (legacy_state(conf).replace(b"hold no", b"hold no\0hold yes"),
                       line_of(legacy_state(conf), b"hold no"), "a NUL byte"),
    }


DAMAGED = ["pending-alone", "written-without-original", "newer-version", "nul-inside"]


@pytest.mark.parametrize("form", DAMAGED)
def test_damaged_state_held_until_resume(make_env, form):
    """A damaged state file never crashes a start (it made Restart=on-failure
    loop): it is reported with its file and line, kept aside under a new
    name, smb.conf is not touched, and smbtuned holds off until --resume."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol"), "mode": q("tune")})
    conf = env.srv.conf
    before, mtime = conf.read_bytes(), conf.stat().st_mtime_ns
    data, line, what = damaged_states(conf)[form]
    state = env.state_dir / "state"
    state.write_bytes(data)

    rc, out, err = env.run("--once")
    assert rc == 1, f"exit {rc} (a negative one is a signal: a crash)\n{out}\n{err}"
    assert f"{state}:{line}: " in err and what in err, err
    kept = sorted(env.state_dir.glob("state.damaged-*"))
    assert len(kept) == 1, sorted(env.state_dir.iterdir())
    assert re.fullmatch(r"state\.damaged-\d{8}-\d{6}", kept[0].name), kept[0].name
    assert kept[0].read_bytes() == data, "the damaged file was changed, not kept"
    assert f"kept as {kept[0]}" in err, err
    assert conf.read_bytes() == before and conf.stat().st_mtime_ns == mtime
    st = env.state()
    assert st.get("version") == str(STATE_VERSION) and st.get("hold") == "yes", st
    assert str(kept[0]) in st.get("hold_reason", ""), st
    assert not re.search(r"^<\d>tried ", err, re.M), f"measured while holding off:\n{err}"
    assert "holding off" in err, err

    # A restart keeps holding, and keeps nothing more aside.
    rc, out, err = env.run("--once")
    assert rc == 1, f"{out}\n{err}"
    assert str(kept[0]) in err, err
    assert sorted(env.state_dir.glob("state.damaged-*")) == kept
    assert conf.read_bytes() == before

    if form != "pending-alone":
        return
    # A second damaged file does not overwrite the first copy.
    state.write_bytes(b"garbage\n")
    rc, out, err = env.run("--once")
    assert rc == 1, f"{out}\n{err}"
    assert f"{state}:1: 'garbage': expected 'key value'" in err, err
    kept2 = sorted(env.state_dir.glob("state.damaged-*"))
    assert len(kept2) == 2 and kept[0] in kept2, kept2
    assert {p.read_bytes() for p in kept2} == {data, b"garbage\n"}

    # --resume lifts the hold; a dry run then measures and writes nothing.
    resume_then_dry_run(env)
    assert conf.read_bytes() == before
    assert sorted(env.state_dir.glob("state.damaged-*")) == kept2
    assert_clean(env)


@pytest.mark.parametrize("damage", ["garbage", "directory"])
def test_resume_on_a_damaged_state_keeps_the_hold_once(make_env, damage):
    """--resume that finds the state file damaged keeps it aside and holds,
    as a start does, and does not end that hold in the same breath: the
    hold's reason asks for a look at the line first (a live trial may be
    in it). It said "tunes smb.conf again" and exit 0, the warning never
    shown. The next --resume ends the hold, saying what it was."""
    env = make_env(ON_LATTICE)
    env.write_config()
    state = env.state_dir / "state"
    if damage == "garbage":
        state.write_bytes(b"garbage\n")
    else:  # what state_load keeps aside as damage too
        state.mkdir()
    rc, out, err = env.run("--resume")
    assert rc == 1, f"{out}\n{err}"
    kept = sorted(env.state_dir.glob("state.damaged-*"))
    assert len(kept) == 1, sorted(env.state_dir.iterdir())
    assert f"the state file was damaged ({state}" in err and str(kept[0]) in err, err
    assert "smb.conf may still hold its value" in err, err
    assert "the hold stays until the next --resume" in err, err
    assert env.state().get("hold") == "yes", env.state()
    rc, out, err = env.run("--resume")
    assert rc == 0, f"{out}\n{err}"
    assert out.startswith("smbtuned held off: the state file was damaged"), out
    assert env.state().get("hold") == "no", env.state()


def test_damaged_state_daemon_holds(make_env):
    """The daemon itself stays up and holds off, cycle after cycle."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol"), "interval": "1h"})
    before = env.srv.conf.read_bytes()
    (env.state_dir / "state").write_bytes(b"pending yes\n")
    d = env.start()
    d.wait_line(r"^<\d>not tuning: holding off: the state file was damaged", timeout=60)
    assert d.alive(), d.stderr
    d.signal(signal.SIGTERM)
    d.wait()
    assert f"{env.state_dir / 'state'}:1: " in d.stderr, d.stderr
    assert env.srv.conf.read_bytes() == before
    assert_clean(env)


# ------------------------------------------- sizes as Samba and Linux see them

def kernel_cap(name):
    with open(f"/proc/sys/net/core/{name}") as f:
        return int(f.read())


def kernel_min_rcvbuf():
    """The receive buffer a request of 0 gets (2304 here)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 0)
        return s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


# socket options -> (what Samba passes: rcvbuf, sndbuf), and where the search
# starts: 1 stands for the kernel's minimum, the cap for a negative size.
START_CASES = {
    "zero-and-negative": ("TCP_NODELAY SO_RCVBUF=0 SO_SNDBUF=-1", (0, -1),
                          lambda: (1, kernel_cap("wmem_max"))),
    "past-an-int": ("TCP_NODELAY SO_RCVBUF=4294967297 SO_SNDBUF=4294967296", (1, 0),
                    lambda: (1, 1)),
    "trailing-junk": ("TCP_NODELAY SO_RCVBUF=65536abc SO_SNDBUF=-4294967297", (65536, -1),
                      lambda: (65536, kernel_cap("wmem_max"))),
}


@pytest.mark.parametrize("case", sorted(START_CASES))
def test_search_starts_where_the_kernel_is(make_env, case):
    """The tuner starts its search from what the kernel does with what
    Samba passes (it used to search from "SO_RCVBUF auto SO_SNDBUF 1" for
    SO_RCVBUF=0 SO_SNDBUF=-1): explicit 0 is no autotuning, a negative
    size is the cap, a number past an int wraps as atoi wraps it."""
    value, samba, start = START_CASES[case]
    env = make_env(value)
    env.write_config(tune={"trials": q("shadow"), "mode": q("advise")})
    before = env.srv.conf.read_bytes()
    rcv, snd = start()

    r = subprocess.run([env.smbtuned, "--smb-conf", env.srv.conf, "--show", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["rcvbuf"], got["sndbuf"]) == samba, got

    d = env.start("--once", "--dry-run")
    d.wait_line(r"^<\d>tuning cycle: searching from ", timeout=120)
    d.signal(signal.SIGTERM)
    d.wait()
    m = re.search(r"^<\d>tuning cycle: searching from SO_RCVBUF (\S+) SO_SNDBUF (\S+) ",
                  d.stderr, re.M)
    assert m, d.stderr
    assert m.groups() == (str(rcv), str(snd)), m.group(0)
    assert env.srv.conf.read_bytes() == before
    assert_clean(env)


# socket options -> what --show --json gives (the int Samba passes), and
# what the text says the kernel makes of it ("min", "cap" or a size).
SHOW_CASES = {
    "SO_RCVBUF=0": (0, "min"),
    "SO_RCVBUF=1": (1, "min"),
    "SO_RCVBUF=-1": (-1, "cap"),
    "SO_RCVBUF=4294967296": (0, "min"),
    "SO_RCVBUF=4294967297": (1, "min"),
    "SO_RCVBUF=65536abc": (65536, 131072),
    "SO_RCVBUF=262144": (262144, 524288),
    "SO_RCVBUF=2147483647": (2147483647, "cap"),
    "SO_RCVBUF=99999999999999999999": (-1, "cap"),
    "SO_RCVBUF=-9223372036854775808": (0, "min"),
    "SO_RCVBUF=64k": (64, "min"),
    "SO_RCVBUF = 65536": (1, "min"),
}


@pytest.mark.parametrize("tokens", sorted(SHOW_CASES))
def test_show_sizes_as_samba_passes_them(smbtuned, tmp_path, tokens):
    """--show --json gives the int Samba passes to setsockopt (null only when
    no token names the buffer); the text says what the kernel makes of it."""
    want, kernel = SHOW_CASES[tokens]
    conf = tmp_path / "smb.conf"
    conf.write_text(f"[global]\n   socket options = TCP_NODELAY {tokens}\n")
    show = [smbtuned, "--smb-conf", conf, "--show"]
    r = subprocess.run(show + ["--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["rcvbuf"], got["sndbuf"]) == (want, None), got

    r = subprocess.run(show, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.strip().startswith("SO_RCVBUF:")]
    assert len(line) == 1, r.stdout
    assert line[0].strip().startswith(f"SO_RCVBUF: {want} (explicit: autotuning is off"), line
    if kernel == "min":
        assert f"the kernel's minimum, {kernel_min_rcvbuf()} bytes" in line[0], line
    elif kernel == "cap":
        cap = kernel_cap("rmem_max")
        assert f"the kernel's cap, net.core.rmem_max = {cap} ({2 * cap} bytes)" in line[0], line
    else:
        assert f"the kernel gives {kernel} bytes" in line[0], line
    assert "SO_SNDBUF: auto (no explicit size: the kernel autotunes)" in r.stdout, r.stdout
    # A token that does not say what it does is named, with what Samba passes.
    clean = re.fullmatch(r"SO_RCVBUF=-?\d+", tokens) and -2**31 <= int(tokens[10:]) < 2**31
    assert ("warning:" in r.stdout) == (not clean), r.stdout
    if not clean:
        assert f"passes {want}" in r.stdout, r.stdout


LISTENER_NOTICE = ("smb.conf names no SO_SNDBUF, but smbd's listener holds an explicit one "
                   "(16384 bytes in the kernel")


@pytest.mark.parametrize("started_with,told", [("TCP_NODELAY SO_SNDBUF=8192", True),
                                               ("TCP_NODELAY", False)],
                         ids=["sndbuf-8192", "autotuning"])
def test_listener_with_sndbuf_8192_is_told_from_autotuning(make_env, started_with, told):
    """SO_SNDBUF=8192 gives smbd's listener 16384 bytes, autotuning's start
    size too: with the size taken out of smb.conf by hand and smbd not
    restarted, the file says autotuning while every new connection still
    gets 8192. A test connection to the listener tells them apart (an
    autotuned one grows at once), and the cycle says so."""
    env = make_env(started_with)
    conf = env.srv.conf
    text = conf.read_text()
    line = f"socket options = {started_with}\n"
    assert line in text, text
    conf.write_text(text.replace(line, "socket options = TCP_NODELAY\n"))
    env.write_config(tune={"trials": q("shadow"), "mode": q("advise"), "max_bytes": "64M"})
    rc, obj, err = env.run_json("--dry-run")
    assert rc == 0, err
    assert (LISTENER_NOTICE in err) == told, err
    assert_clean(env)


def test_sighup_reads_smb_conf_in_a_child(smbtuned, tmp_path):
    """A SIGHUP's check of smb.conf (what -t refuses) reads it in a job:
    an include on a hung mount would stop the loop, its watchdog pings and
    SIGTERM with it. Under strace, the daemon's own process opens smb.conf
    no more after the reload than before it (the start's check and
    settling read it there, before the loop runs)."""
    from test_security import children, opens_of, refused_url, strace_daemon, wait_for

    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    cfg = tmp_path / "d.conf"
    cfg.write_text(f'tune {{\n    state_dir = "{tmp_path / "state"}"\n    interval = "1h"\n'
                   '    trials = "client"\n    mode = "advise"\n    apply = "none"\n}\n')
    traces = tmp_path / "traces"
    traces.mkdir()
    err_path = tmp_path / "stderr"
    # A refused URL: each cycle fails at once, and SIGHUP reloads at once.
    proc, daemon = strace_daemon(smbtuned, traces, err_path, "-c", cfg, "--url", refused_url(),
                                 "--smb-conf", smb_conf)
    try:
        wait_for(lambda: "cycle failed after" in err_path.read_text(), "the first cycle's end",
                 timeout=60)
        time.sleep(1)
        parent = traces / f"t.{daemon}"
        before = len(opens_of(parent, smb_conf))
        os.kill(daemon, signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in err_path.read_text(), "the reload")
        time.sleep(2)  # the cycle the reload kicks
        after = len(opens_of(parent, smb_conf))
    finally:
        for pid in children(proc.pid):
            os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert before >= 1, (before, err_path.read_text())  # the control: the start read it here
    assert after == before, (before, after, opens_of(parent, smb_conf)[before:])
