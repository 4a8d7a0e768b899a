"""One cycle runner per state directory (STATE_DIR/run.lock, lib/runlock.h).

While the daemon runs, a second runner on the same state directory (an
admin's `--once`, `--once --json`, the daemon started twice) is refused at
once: exit 1, one line naming the state directory and the daemon's pid, and
with --json one JSON object; it reads and writes nothing, so smb.conf and
the state file stay as the daemon keeps them and no hold appears. The
commands that only read or hand back control (--status, --resume) still
run beside it. Once the daemon has stopped, `--once` runs and takes the
lock over (the daemon's pid is still in the file).
"""

import json
import signal

import pytest

from daemon_util import LEGACY, q
from test_daemon import assert_clean

pytestmark = [pytest.mark.smbd, pytest.mark.slow]


def lock_pid(env):
    """The pid STATE_DIR/run.lock names, or None."""
    try:
        return int((env.state_dir / "run.lock").read_text())
    except (OSError, ValueError):
        return None


def refusal(env, pid):
    return (f"another smbtuned (pid {pid}) is tuning with state directory {env.state_dir}: "
            f"stop it first (systemctl stop smbtuned) or use another --state-dir")


def assert_refused(env, pid, *args):
    """A second runner: exit 1, the one line on stderr and, with --json, one
    object on stdout; nothing else (no cycle began)."""
    d = env.start(*args)
    rc = d.wait(timeout=30)
    out, err = d.stdout, d.stderr
    msg = refusal(env, pid)
    assert rc == 1, f"{args}: exit {rc}\nstdout: {out}\nstderr: {err}"
    assert err.splitlines() == [f"smbtuned: {msg}"], f"{args}: stderr {err!r}"
    if "--json" in args:
        lines = out.splitlines()
        assert len(lines) == 1, f"--json: expected one line on stdout, got {out!r}"
        obj = json.loads(lines[0])
        assert obj["result"] == "error", obj
        assert obj["error"] == msg, obj
        assert obj["mode"] == "tune", obj
    else:
        assert out == "", out


def test_second_runner_refused_while_the_daemon_runs(make_env):
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune"),
                           "interval": "1h", "max_bytes": "32M"})
    conf = env.srv.conf
    state = env.state_dir / "state"

    d = env.start()
    # Its start line comes after the lock is taken.
    d.wait_line(r"^<\d>smbtuned \S+: tuning, target ", timeout=60)

    # During the daemon's first cycle (it takes seconds): the race the lock
    # is for.
    assert_refused(env, d.pid, "--once")
    assert_refused(env, d.pid, "--once", "--json")
    assert_refused(env, d.pid)  # the daemon started twice

    # Between cycles (interval 1h): the daemon idles and keeps the lock. The
    # refused runs leave smb.conf and the state file exactly as they were.
    d.wait_for(lambda: env.state().get("cycle_at", "0") != "0", timeout=240,
               what="the end of the daemon's first cycle in the state file")
    conf_before, conf_mtime = conf.read_bytes(), conf.stat().st_mtime_ns
    state_before, state_mtime = state.read_bytes(), state.stat().st_mtime_ns
    assert_refused(env, d.pid, "--once")
    assert_refused(env, d.pid, "--once", "--json")
    assert conf.read_bytes() == conf_before and conf.stat().st_mtime_ns == conf_mtime, \
        "a refused runner wrote smb.conf"
    assert state.read_bytes() == state_before and state.stat().st_mtime_ns == state_mtime, \
        "a refused runner wrote the state file"
    assert env.state().get("hold") == "no", env.state()
    assert lock_pid(env) == d.pid

    # Readers and --resume do not take the lock.
    rc, out, err = env.run("--status")
    assert rc == 0, f"--status beside the daemon: {err}"
    rc, out, err = env.run("--resume")
    assert rc == 0, f"--resume beside the daemon: {err}"
    assert "not holding off" in out, out

    assert d.alive(), d.stderr
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=120) == 0, d.stderr
    assert "is tuning with state directory" not in d.stderr, d.stderr
    assert env.state().get("hold") == "no", env.state()

    # The daemon is gone, its pid still in the file: --once runs.
    assert lock_pid(env) == d.pid
    once = env.start("--once", "--json")
    rc = once.wait()
    assert rc == 0, once.stderr
    assert "another smbtuned" not in once.stderr, once.stderr
    assert lock_pid(env) == once.pid
    assert env.state().get("hold") == "no", env.state()
    assert_clean(env)
