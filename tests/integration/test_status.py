"""smbtuned --status [--json] against a real smbd from the fixture: what an
admin asks first, read from the state file and smb.conf, changing nothing.

- after a --once commit: the line in force, that smbtuned wrote it and
  when, its rates and cycles, the last cycle's time and result, no next
  cycle (--once), the Samba and kernel versions of the baseline; --json is
  one object with every key, each of its type;
- after an edit by hand: "edited by hand"; after the next cycle, the hold
  and its reason; the daemon's cycle sets the next cycle's time;
- a damaged state file is reported (exit 1) and left as it is: the same
  bytes under the same name, nothing kept aside, no hold written.
"""

import fcntl
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from daemon_util import LEGACY, SMALL_PROBE, SMALL_TUNE, q, socket_line_index, socket_value
from daemon_util import conf_text as make_conf_text

pytestmark = [pytest.mark.smbd]

# Every key of --status --json (docs/man/smbtuned.8) and its types; the
# state file's keys are null when it is damaged or unreadable.
INT_OR_NULL = (int, type(None))
STR_OR_NULL = (str, type(None))
BOOL_OR_NULL = (bool, type(None))
KEYS = {
    "state_file": str, "running": BOOL_OR_NULL, "runner_pid": INT_OR_NULL, "state": str, "state_error": STR_OR_NULL, "smb_conf": str,
    "smb_conf_error": STR_OR_NULL, "socket_options": STR_OR_NULL, "file": STR_OR_NULL,
    "line": INT_OR_NULL, "written_by": str, "last_written": STR_OR_NULL,
    "written_at": INT_OR_NULL, "have_incumbent": BOOL_OR_NULL, "rcvbuf": INT_OR_NULL,
    "sndbuf": INT_OR_NULL, "write_mbps": (int, float, type(None)),
    "read_mbps": (int, float, type(None)),
    "cycles": INT_OR_NULL, "cycle_at": INT_OR_NULL, "cycle_result": STR_OR_NULL,
    "next_at": INT_OR_NULL, "hold": BOOL_OR_NULL, "hold_reason": STR_OR_NULL,
    "pending": STR_OR_NULL,
    "pending_file": STR_OR_NULL, "samba": STR_OR_NULL, "kernel": STR_OR_NULL,
    "measured_smb_conf": STR_OR_NULL, "clients": (dict, type(None)),
    # advise mode's advice (state format 10; test_daemon_advise.py)
    "advice": STR_OR_NULL, "advice_rcvbuf": INT_OR_NULL, "advice_sndbuf": INT_OR_NULL,
    "advised_from_rcvbuf": INT_OR_NULL, "advised_from_sndbuf": INT_OR_NULL,
}
# The last summary of smbd's real connections (issue 13), when there is one.
CLIENT_KEYS = {
    "at": int, "connections": int, "sndbuf_limited": int, "rcvbuf_limited": int, "smbd": int,
    "client_window": int, "network": int, "idle": int, "rtt_median_ms": (int, float),
    "rtt_max_ms": (int, float), "bdp_max": int,
}


def status_json(env):
    """--status --json: (exit, object); exactly one line, one object with
    every key of KEYS and no other, each of its type."""
    rc, out, err = env.run("--status", "--json", timeout=60)
    lines = out.splitlines()
    assert len(lines) == 1, f"--status --json: expected one line, got {out!r}\n{err}"
    obj = json.loads(lines[0])
    assert isinstance(obj, dict), lines[0]
    assert set(obj) == set(KEYS), set(obj) ^ set(KEYS)
    for k, types in KEYS.items():
        v = obj[k]
        assert isinstance(v, types), (k, v)
        # a bool is an int to Python: only the bool keys may hold one
        assert not isinstance(v, bool) or types is BOOL_OR_NULL, (k, v)
    if obj["clients"] is not None:
        assert set(obj["clients"]) == set(CLIENT_KEYS), set(obj["clients"]) ^ set(CLIENT_KEYS)
        for k, types in CLIENT_KEYS.items():
            assert isinstance(obj["clients"][k], types), (k, obj["clients"])
    return rc, obj


def status_text(env):
    """--status: (exit, {Key: value}) from its `Key : value` lines."""
    rc, out, err = env.run("--status", timeout=60)
    fields = {}
    for line in out.splitlines():
        m = re.match(r"^(\S[^:]*?)\s+: (.*)$", line)
        assert m, f"not a 'Key : value' line: {line!r}\n{out}"
        fields[m.group(1)] = m.group(2)
    return rc, fields, err


def test_status_after_commit_hand_edit_and_hold(make_env):
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune"),
                           "interval": "1h"})
    conf = env.srv.conf

    # Before any cycle: no state file, exit 0, the line as it is.
    rc, obj = status_json(env)
    assert rc == 0 and obj["state"] == "missing", obj
    assert obj["socket_options"] == LEGACY and obj["written_by"] == "not_written", obj
    # nothing measured: no rate, not a rate of 0
    assert obj["write_mbps"] is None and obj["read_mbps"] is None, obj
    # no file is known to mean no cycle and no hold
    assert obj["cycles"] == 0 and obj["hold"] is False and obj["pending"] == "none", obj
    assert not (env.state_dir / "state").exists()

    # 1. A cycle that commits (8192 stalls on loopback: any neighbour wins).
    t0 = int(time.time())
    rc, rep, err = env.run_json()
    t1 = int(time.time()) + 1
    assert rc == 0, err
    assert rep["committed"], f"the cycle kept the stalling 8192 line: {rep}\n{err}"
    value = rep["after"]["value"]
    state_bytes = (env.state_dir / "state").read_bytes()

    rc, obj = status_json(env)
    assert rc == 0, obj
    assert obj["state"] == "ok" and obj["state_error"] is None, obj
    assert obj["socket_options"] == value == socket_value(conf.read_bytes())
    assert obj["file"] == str(conf) and obj["smb_conf"] == str(conf), obj
    lines = conf.read_bytes().splitlines(keepends=True)
    assert obj["line"] == socket_line_index(lines) + 1, obj
    assert obj["written_by"] == "smbtuned" and obj["last_written"] == value, obj
    assert t0 <= obj["written_at"] <= obj["cycle_at"] <= t1, obj
    assert obj["cycle_result"] and not obj["cycle_result"].startswith("failed"), obj
    assert obj["next_at"] is None, "--once schedules no next cycle"
    assert obj["have_incumbent"] is True and obj["cycles"] >= 1, obj
    # a direction never measured is null (see test_a_direction_never_measured_...)
    assert (obj["write_mbps"] or 0) > 0 or (obj["read_mbps"] or 0) > 0, obj
    assert obj["hold"] is False and obj["hold_reason"] is None, obj
    assert obj["pending"] == "none" and obj["pending_file"] is None, obj
    samba = subprocess.run(["smbd", "-V"], capture_output=True, text=True).stdout.split()[-1]
    assert obj["samba"] == samba, obj
    assert obj["kernel"] == os.uname().release, obj
    assert obj["measured_smb_conf"] == str(conf), obj
    # tune mode: no advice (test_daemon_advise.py has one)
    assert obj["advice"] is None and obj["advised_from_rcvbuf"] is None, obj
    # the cycle watched smbd's real connections (none but ours, if any)
    assert obj["clients"] is not None, obj
    assert t0 <= obj["clients"]["at"] <= t1, obj
    assert obj["clients"]["connections"] >= 0, obj

    rc, f, err = status_text(env)
    assert rc == 0, err
    assert f["Socket options"] == value, f
    assert f["Where"] == f"{conf}:{obj['line']}", f
    assert f["Written"].startswith("by smbtuned at "), f
    # whose rates they are: the probe's, on loopback (a loopback url: shadow
    # trials), and with client trials to its URL
    rates = r"write \d+\.\d\d MB/s, read \d+\.\d\d MB/s \(the probe's, "
    assert re.fullmatch(rates + r"on loopback to shadow smbds serving the share of " +
                        re.escape(env.srv.url) + r": not what a client over the network gets\)",
                        f["Rates"]), f
    # with client trials: the state file says whether their probe found
    # its connection on this machine (rates_loopback; these were shadow
    # trials', on loopback), and without it the rates are the url's
    conf_text = env.conf.read_text()
    env.write_config(tune={"trials": '"client"'})
    rc, fc, err = status_text(env)
    assert rc == 0, err
    assert re.fullmatch(rates + "to " + re.escape(env.srv.url) + r", on this machine's loopback: "
                        r"not what a client over the network gets\)", fc["Rates"]), fc
    assert b"\nrates_loopback yes\n" in state_bytes, state_bytes
    (env.state_dir / "state").write_bytes(state_bytes.replace(b"\nrates_loopback yes\n",
                                                              b"\nrates_loopback no\n"))
    rc, fc, err = status_text(env)
    # ... and with shadow trials configured again: rates not on loopback
    # are no shadow's (a --once with --trials live, say): not called theirs
    env.conf.write_text(conf_text)
    rc2, fs, err2 = status_text(env)
    # ... nor with the own share (no url), which the label names
    env.conf.write_text(make_conf_text({**SMALL_PROBE}, {
        "smb_conf": q(conf), "state_dir": q(env.state_dir), **SMALL_TUNE}))
    rc3, fo, err3 = status_text(env)
    env.conf.write_text(conf_text)
    (env.state_dir / "state").write_bytes(state_bytes)
    assert rc3 == 0, err3
    assert re.fullmatch(rates + r"to smbtuned's own share\)", fo["Rates"]), fo
    assert rc == 0, err
    assert re.fullmatch(rates + "to " + re.escape(env.srv.url) + r"\)", fc["Rates"]), fc
    assert rc2 == 0, err2
    assert re.fullmatch(rates + "to " + re.escape(env.srv.url) + r"\)", fs["Rates"]), fs
    assert f["Last cycle"].endswith(": " + obj["cycle_result"]), f
    assert f["Next cycle"].startswith("none scheduled"), f
    assert f["Hold"] == "no" and f["Pending"] == "none", f
    assert re.fullmatch(r".*: (no connection to smbd|\d+ connections?, held back by .* bytes)",
                        f["Real clients"]), f
    assert f["Baseline"] == f"Samba {samba}, kernel {os.uname().release}, smb.conf {conf}", f
    # --status wrote nothing
    assert (env.state_dir / "state").read_bytes() == state_bytes

    # 2. An edit by hand of our line: said at once, nothing held yet.
    i = socket_line_index(lines)
    hand_value = "TCP_NODELAY SO_RCVBUF=32768 SO_SNDBUF=32768"
    lines[i] = f"   socket options = {hand_value}\n".encode()
    conf.write_bytes(b"".join(lines))
    rc, obj = status_json(env)
    assert rc == 0 and obj["written_by"] == "edited_by_hand", obj
    assert obj["socket_options"] == hand_value and obj["last_written"] == value, obj
    assert obj["hold"] is False, obj
    rc, f, err = status_text(env)
    assert rc == 0 and f["Written"] == (f"edited by hand since smbtuned wrote '{value}'; it "
                                        "holds off at its next cycle until `smbtuned --resume`"), f

    # 3. The next cycle holds off: --status shows the hold, exit 0 still.
    rc, out, err = env.run("--once")
    assert rc == 1, f"{out}\n{err}"
    rc, obj = status_json(env)
    assert rc == 0, obj
    assert obj["hold"] is True and "edited by hand" in obj["hold_reason"], obj
    assert obj["cycle_result"].startswith("holding off: ") and "edited by hand" in \
        obj["cycle_result"], obj
    rc, f, err = status_text(env)
    assert rc == 0 and f["Hold"].startswith("yes: ") and "edited by hand" in f["Hold"], f
    # it holds off now, not "at its next cycle"
    assert f["Written"] == (f"edited by hand since smbtuned wrote '{value}'; it holds off "
                            "(see Hold) until `smbtuned --resume`"), f
    # the held cycle counts: two cycles ended, one of them a search
    assert obj["cycles"] == 2, obj

    # 4. The daemon's cycle (held again) schedules the next: interval 1h.
    held_at = obj["cycle_at"]
    assert obj["running"] is False and obj["runner_pid"] is None, obj
    d = env.start()
    d.wait_for(lambda: env.state().get("next_at", "0") != "0", timeout=60,
               what="the daemon's cycle end")
    # 5. A running daemon is named, by the kernel's record of its lock
    rc, obj = status_json(env)
    assert rc == 0 and obj["running"] is True and obj["runner_pid"] == d.proc.pid, obj
    rc, f, err = status_text(env)
    assert f["Running"] == f"yes, pid {d.proc.pid} holds {env.state_dir}/run.lock", f
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    rc, obj = status_json(env)
    assert rc == 0 and obj["cycle_at"] >= held_at, obj
    assert obj["running"] is False and obj["runner_pid"] is None, obj
    assert obj["next_at"] == obj["cycle_at"] + 3600, obj
    rc, f, err = status_text(env)
    assert f["Next cycle"].endswith("(if the daemon runs)"), f
    assert f["Running"] == f"no (no run of smbtuned holds {env.state_dir}/run.lock)", f


@pytest.mark.parametrize("damage", ["garbage", "newer", "fifo", "link"])
def test_damaged_state_is_reported_and_left_alone(make_env, damage, tmp_path):
    env = make_env(LEGACY)
    env.write_config()
    path = env.state_dir / "state"
    # a link to a file that is none of ours: never followed, so nothing of
    # it is read or shown (a damaged line is quoted)
    target = tmp_path / "not-ours"
    target.write_bytes(b"precious\n")
    if damage == "fifo":
        os.mkfifo(path, 0o600)
    elif damage == "link":
        path.symlink_to(target)
    else:
        path.write_bytes(b"pending yes\n" if damage == "garbage" else
                         b"version 99\ncycles 1\n")
    before = path.lstat()
    data = None if damage in ("fifo", "link") else path.read_bytes()

    for args in (["--status"], ["--status", "--json"]):
        rc, out, err = env.run(*args, timeout=30)
        assert rc == 1, f"{args}: exit {rc}\n{out}\n{err}"
        assert f"smbtuned: {path}" in err, err
        assert "precious" not in out + err, out + err
        # a link is none of ours: unreadable, not damage to keep aside
        word = "unreadable" if damage == "link" else "damaged"
        if "--json" in args:
            rc, obj = status_json(env)
            assert obj["state"] == word, obj
            # what the file would say is unknown: null, not an empty state's
            # zeros (no hold, no cycle), which a script would take as facts
            for k in ("have_incumbent", "cycles", "hold", "pending", "cycle_at", "next_at"):
                assert obj[k] is None, (k, obj)
            assert obj["state_error"].startswith(str(path)), obj
            assert obj["socket_options"] == LEGACY and obj["written_by"] == "unknown", obj
        else:
            assert f"State file      : {path} ({word})" in out, out
            assert ("Damage          : " if word == "damaged" else "Error           : ") in out, out
        # the same file under the same name, nothing kept aside or written
        after = path.lstat()
        assert (after.st_ino, after.st_mtime_ns, after.st_mode) == \
            (before.st_ino, before.st_mtime_ns, before.st_mode)
        if data is not None:
            assert path.read_bytes() == data
        assert sorted(p.name for p in env.state_dir.iterdir()) == ["state"]
        assert target.read_bytes() == b"precious\n"


# A state file of format 1 (no version line), as the first smbtuned wrote
# it: the scalars it had, cycles last; none of the times later formats keep.
STATE_V1 = ("have_incumbent yes\nrcvbuf 65536\nsndbuf 65536\nwrite_mbps 100.5\n"
            "read_mbps 90.25\nhold no\npending no\npending_commit no\n"
            "pending_line_off 0\npending_line_len 0\ncycles 12\n")


def test_old_state_format_says_not_recorded(make_env):
    """Twelve cycles ran, but the format predates their times: that is
    said, not "none recorded" or "none ran"."""
    env = make_env(LEGACY)
    env.write_config()
    (env.state_dir / "state").write_text(STATE_V1)
    rc, f, err = status_text(env)
    assert rc == 0, err
    assert f["Cycles"] == "12", f
    for key in ("Last cycle", "Next cycle"):
        assert f[key] == "not recorded (a state file from an older smbtuned)", f
    # whether its rates were on loopback is not recorded either (format
    # 9): the trials configured are taken at their word (shadow, here)
    assert "(the probe's, on loopback to shadow smbds serving the share of " in f["Rates"], f



def test_a_direction_never_measured_is_null_not_zero(make_env):
    """The state file keeps 0 for a rate never measured (every sample of
    that direction timed out: outcome_record). --status says "not
    measured" and null for that direction alone, as smbtuned(8) has it,
    not 0.00 MB/s, which a script or an admin takes for a stalled link."""
    env = make_env(LEGACY)
    env.write_config()
    (env.state_dir / "state").write_text(STATE_V1.replace("write_mbps 100.5", "write_mbps 0"))
    rc, f, err = status_text(env)
    assert rc == 0, err
    assert f["Rates"].startswith("write not measured, read 90.25 MB/s (the probe's"), f
    rc, obj = status_json(env)
    assert rc == 0 and (obj["write_mbps"], obj["read_mbps"]) == (None, 90.25), obj

def test_pending_before_any_commit_says_so(make_env):
    """A first cycle's live trial of the run that holds the state
    directory (its run.lock, held here as a run holds it): a step in
    flight and no line of smbtuned's yet. --status says that, not
    "smbtuned last wrote '(null)'" (printf of a NULL string, which it once
    did)."""
    env = make_env(LEGACY)
    env.write_config()
    conf = env.srv.conf
    (env.state_dir / "state").write_text(STATE_V1.replace(
        "pending no\n", f"pending yes\npending_file {conf}\n"
        "pending_written [global]\\n\\tsocket options = X\\n\n"
        "pending_original [global]\\n\n"))
    fd = os.open(env.state_dir / "run.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rc, f, err = status_text(env)
        assert rc == 0, err
        assert f["Running"] == f"yes, pid {os.getpid()} holds {env.state_dir}/run.lock", f
        assert f["Written"] == ("a step in flight (see Pending); smbtuned has written no line "
                                "of its own yet"), f
        assert f["Pending"] == (f"a live trial in {conf}, a step in flight of the run that "
                                "holds the state directory: by the end of its cycle it takes "
                                "it back or commits it, and a stop takes it back"), f
        rc, obj = status_json(env)
        assert rc == 0 and obj["last_written"] is None and obj["written_by"] == "pending", obj
    finally:
        os.close(fd)


def test_a_trial_left_by_a_stopped_run(make_env):
    """A live trial that a killed run left: with no run holding the state
    directory, --status says what the next start will do with it, judged
    as the start judges it (the line against the record). Once said "a
    step in flight" whatever the line held, so an admin's edit since read
    as smbtuned's and the promised take-back never came."""
    env = make_env(LEGACY)
    env.cycle_once_advised()  # a state file, as a cycle leaves it
    old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144",
                                        commit=False)
    conf = env.srv.conf
    trial = conf.read_text()
    rc, f, err = status_text(env)
    assert rc == 0 and f["Running"].startswith("no "), f
    assert f["Pending"] == (f"a live trial in {conf}, left by a run that stopped: the next "
                            "start takes it back"), f
    # the admin's own line since: theirs stays, and smbtuned holds off
    conf.write_text(trial.replace(new, old.split("=", 1)[0] + "= SO_RCVBUF=65536"))
    rc, f, err = status_text(env)
    assert rc == 0, err
    assert f["Written"] == ("edited by hand since smbtuned wrote a live trial there (see "
                            "Pending); it holds off at its next start until `smbtuned "
                            "--resume`"), f
    assert f["Pending"] == (f"a live trial in {conf}, left by a run that stopped, and the line "
                            "was changed since: the next start leaves it as it is and holds "
                            "off"), f
    rc, obj = status_json(env)
    assert rc == 0 and obj["written_by"] == "edited_by_hand" and obj["pending"] == "trial", obj
    # the admin's own line after the trial's: theirs is in force
    conf.write_text(trial.replace(new + "\n", new + "\n\tsocket options = SO_RCVBUF=65536\n"))
    rc, f, err = status_text(env)
    assert rc == 0 and f["Written"].startswith("edited by hand since smbtuned wrote a live "), f
    assert f["Pending"] == (f"a live trial in {conf}, left by a run that stopped, and another "
                            "line is in force since: the next start takes the trial's back, "
                            "leaves the line in force as it is and holds off"), f
    # what the trial replaced, back: only the record goes
    conf.write_text(trial.replace(new, old))
    rc, f, err = status_text(env)
    assert rc == 0, err
    assert f["Pending"] == (f"a live trial in {conf}, left by a run that stopped; the line "
                            "already holds what it replaced: the next start only clears the "
                            "record"), f
    # and the start does as said: the line kept, no hold (the admin's
    # line, changed, is what test_daemon's hand-edit tests cover)
    rc, out, err = env.run("--once")
    assert socket_value(conf.read_bytes()) == socket_value(old.encode()), err
    rc, obj = status_json(env)
    assert obj["pending"] == "none" and obj["hold"] is False, obj


def test_a_left_trial_in_a_file_smb_conf_no_longer_names(make_env):
    """smb_conf pointed at another file after a killed run's live trial:
    the start looks for the trial in the file its record names, and takes
    it back there. --status judged it against the new smb_conf alone and
    called it changed by hand."""
    env = make_env(LEGACY)
    env.cycle_once_advised()
    old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144",
                                        commit=False)
    conf = env.srv.conf
    other = conf.with_name("other.conf")
    other.write_text(conf.read_text().replace(new, old.split("=", 1)[0] + "= SO_RCVBUF=65536"))
    env.write_config(tune={"mode": q("advise"), "smb_conf": q(other)})
    rc, f, err = status_text(env)
    assert rc == 0, err
    assert f["Pending"] == (f"a live trial in {conf}, left by a run that stopped: the next "
                            "start takes it back"), f
    rc, out, err = env.run("--once")
    assert socket_value(conf.read_bytes()) == socket_value(old.encode()), err


def test_state_not_readable_says_run_as_root(make_env):
    """An admin's --status without root: the state file's error says so."""
    env = make_env(LEGACY)
    path = env.state_dir / "state"
    path.write_text(STATE_V1)
    path.chmod(0o600)
    # Only the test's own directories are opened to nobody (the config in
    # one of them); the state file stays root's.
    for d in (env.state_dir, env.tmpdir):
        d.chmod(0o711)
    conf = env.write_config(path=env.tmpdir / "status.conf")
    conf.chmod(0o644)
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        *env.cmd("--status", conf=conf)],
                       capture_output=True, text=True, timeout=30, env=env.env())
    assert r.returncode == 1, r
    assert f"Error           : {path}: Permission denied (run it as root)" in r.stdout, r


def test_status_bad_config_is_a_config_error(make_env):
    env = make_env(LEGACY)
    env.write_config(tune={"interval": "banana"})
    rc, out, err = env.run("--status", "--json", timeout=30)
    assert rc == 78, f"exit {rc}\n{out}\n{err}"
    assert out == "" and f"{env.conf}:" in err, err


# As root in a mount namespace of its own: two tmpfs, A for the state
# directory, B for a file of run.lock's inode number that a process of
# another user flocks; run.lock names that process's pid, as it would
# after a run ended and the pid came round to someone else. Prints the
# line of --status that says whether smbtuned runs.
FOREIGN_FLOCK = r"""
set -eu
mount -t tmpfs -o mode=0755 none "$A"
mount -t tmpfs -o mode=01777 none "$B"
mkdir -m 0700 "$A/sd"
: > "$A/sd/run.lock"
chmod 0644 "$A/sd/run.lock"
ino=$(stat -c %i "$A/sd/run.lock")
i=0
while :; do
    i=$((i + 1))
    [ $i -lt 1000 ]
    : > "$B/f$i"
    [ "$(stat -c %i "$B/f$i")" != "$ino" ] || break
done
chown 65534:65534 "$B/f$i"
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import fcntl, sys, time
f = open(sys.argv[1])
fcntl.flock(f, fcntl.LOCK_EX)
time.sleep(30)' "$B/f$i" >/dev/null 2>&1 &
holder=$!
t=0
until grep -q "FLOCK .* $holder [0-9a-f]*:[0-9a-f]*:$ino " /proc/locks; do
    t=$((t + 1)); [ $t -lt 100 ]; sleep 0.1
done
echo "$holder" > "$A/sd/run.lock"
"$SMBTUNED" -c "$CONF" --status | grep '^Running' || true
kill "$holder"
wait "$holder" || true
"""


def test_a_flock_by_another_user_elsewhere_is_no_run(tmp_path, smbtuned):
    """--status reads the kernel's flocks (/proc/locks) for run.lock. On
    btrfs or overlayfs a flock's line names another device than stat()
    does, so a line of another device counts when its pid is the one
    run.lock names, but only when that process runs as run.lock's owner:
    anyone could flock a file of the same inode number on another file
    system once a stopped run's pid came round to them, and make --status
    say smbtuned runs (and call a trial it left "in flight")."""
    # (mount points another user can reach: tmp_path is root's alone)
    top = Path(tempfile.mkdtemp(prefix="smbtd-flock-", dir="/tmp"))
    top.chmod(0o755)
    a, b = top / "a", top / "b"
    a.mkdir()
    b.mkdir()
    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n\tworkgroup = W\n")
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{a}/sd"\n}}\n')
    conf.chmod(0o600)
    env = {**os.environ, "A": str(a), "B": str(b), "SMBTUNED": str(smbtuned),
           "CONF": str(conf)}
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            FOREIGN_FLOCK], env=env, capture_output=True, text=True, timeout=60)
    finally:
        # the tmpfs went with the namespace: empty directories of ours
        a.rmdir()
        b.rmdir()
        top.rmdir()
    print(r.stdout, r.stderr)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert re.match(r"^Running\s+: no ", r.stdout), r.stdout
