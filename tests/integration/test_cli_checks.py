"""What smbtuned says when it refuses or holds off: the reason and the
file:line survive values of any length, and a state file that is not a
regular file is named for what it is.

A real smbd from the fixture serves the share, but nothing here measures:
every run stops before the first probe.
"""

import fcntl
import os
import re
import socket
import stat
import subprocess
import time

import pytest

from daemon_util import made_dir, q, record_made, records

pytestmark = [pytest.mark.smbd]

WRITTEN = "TCP_NODELAY SO_RCVBUF=131072 SO_SNDBUF=131072"


def state_text(last_written):
    """A state file as state_format writes it: every scalar, cycles last."""
    return ("version 1\n"
            "have_incumbent no\nrcvbuf 0\nsndbuf 0\nwrite_mbps 0.000000\n"
            "read_mbps 0.000000\n"
            f"last_written {last_written}\n"
            "hold no\npending no\npending_commit no\npending_line_off 0\n"
            "pending_line_len 0\ncycles 1\n")


@pytest.fixture
def shadow_env(make_env):
    """make_env with a config of shadow trials in tune mode."""
    def make(socket_options):
        env = make_env(socket_options)
        env.write_config(tune={"trials": q("shadow"), "mode": q("tune")})
        return env
    return make


def test_long_hand_edit_keeps_reason_and_line(shadow_env):
    # 5000 characters of valid tokens: an edit by hand of any length.
    long_value = "TCP_NODELAY" + " SO_KEEPALIVE" * 384
    assert len(long_value) > 5000
    env = shadow_env(long_value)
    (env.state_dir / "state").write_text(state_text(WRITTEN))

    rc, out, err = env.run("--once")
    assert rc == 1, f"{out}\n{err}"
    conf = re.escape(str(env.srv.conf))
    # One journal line holds the file:line, the reason and both values,
    # the value smbtuned wrote (the last thing on it) included.
    m = re.search(rf"^<\d>{conf}:(\d+): socket options edited by hand: it is "
                  rf"'{re.escape(long_value)}', not '{re.escape(WRITTEN)}' as smbtuned "
                  r"wrote it$", err, re.M)
    assert m, err[-3000:]
    reason = env.state().get("hold_reason", "")
    assert reason.startswith(f"{env.srv.conf}:{m.group(1)}: socket options edited by hand"), \
        reason[:300]
    assert env.state().get("hold") == "yes"


def test_fifo_state_file_is_named_and_held(shadow_env):
    env = shadow_env(WRITTEN)
    fifo = env.state_dir / "state"
    os.mkfifo(fifo, 0o600)

    rc, out, err = env.run("--once")
    # Held like a damaged file (exit 1, not a start-up failure), the FIFO
    # named for what it is and kept aside, never opened for writing.
    assert rc == 1, f"{out}\n{err}"
    assert f"{fifo} is a FIFO" in err, err
    assert "Invalid argument" not in err, err
    kept = sorted(env.state_dir.glob("state.damaged-*"))
    assert len(kept) == 1 and stat.S_ISFIFO(kept[0].lstat().st_mode), kept
    assert env.state().get("hold") == "yes"


# ---- exit status: usage, config and run-time errors each their own (smbtuned(8))

EXIT_FAILURE, EXIT_USAGE, EXIT_CONFIG = 1, 64, 78


@pytest.mark.parametrize("args", [["--no-such-option"], ["--once", "extra"], ["--show", "-t"],
                                  ["--status", "--resume"], ["--dry-run"], ["-c"],
                                  ["--show", "--expect", "x"], ["--json"], ["-t", "--json"]])
def test_bad_command_line_is_a_usage_error(shadow_env, args):
    env = shadow_env(WRITTEN)
    r = env.run(*args, timeout=30)
    assert r[0] == EXIT_USAGE, f"{args}: exit {r[0]}\n{r[1]}\n{r[2]}"
    assert not (env.state_dir / "state").exists()


@pytest.mark.parametrize("command", [["-t"], ["--once"], ["--status"], ["--resume"], []])
def test_bad_config_is_a_config_error(shadow_env, command):
    env = shadow_env(WRITTEN)
    env.write_config(tune={"interval": "banana"})
    lineno = [i + 1 for i, l in enumerate(env.conf.read_text().splitlines())
              if l.strip().startswith("interval =")][0]
    rc, out, err = env.run(*command, timeout=60)
    assert rc == EXIT_CONFIG, f"{command}: exit {rc}\n{out}\n{err}"
    assert f"{env.conf}:{lineno}" in err, err
    assert not (env.state_dir / "state").exists()


def test_probe_keeps_its_own_exit_table(shadow_env):
    # --probe: 0 ok, 1 anything else (a refused config too), 2 timeout.
    env = shadow_env(WRITTEN)
    env.write_config(tune={"interval": "banana"})
    rc, out, err = env.run("--probe", "--json", timeout=60)
    assert rc == EXIT_FAILURE, f"exit {rc}\n{out}\n{err}"


def test_runtime_failure_is_not_a_config_error(shadow_env):
    # A good config, a state file whose hold makes --once fail: 1.
    env = shadow_env(WRITTEN)
    (env.state_dir / "state").write_text(state_text(WRITTEN).replace(
        "hold no\n", "hold yes\nhold_reason by the test\n"))
    rc, out, err = env.run("--once", timeout=60)
    assert rc == EXIT_FAILURE, f"exit {rc}\n{out}\n{err}"
    assert "holding off: by the test" in err, err


@pytest.mark.parametrize("host", ["refused", "unknown"])
def test_unreachable_share_claims_no_leftover_file(shadow_env, host):
    """A share out of reach (nothing listens, or no such host): the probe
    that never got to create its file leaves none to clean up, and the
    look at the start for a killed predecessor's file, which cannot reach
    the share either, is no warning. The probe's failure is the one thing
    said as an error."""
    env = shadow_env(WRITTEN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"smb://127.0.0.1:{s.getsockname()[1]}/share"
    if host == "unknown":
        url = "smb://no-such-host.invalid/share"
    env.write_config(probe={"url": q(url)}, tune={"trials": q("client")})
    rc, out, err = env.run("--once", "--dry-run", timeout=120)
    assert rc == EXIT_FAILURE, f"exit {rc}\n{out}\n{err}"
    assert re.search(r"^<3>probe of \S+ failed: ", err, re.M), err
    assert re.search(r"^<6>no look for a file a killed predecessor's probe may have left: "
                     r"the share could not be reached", err, re.M), err
    assert not re.search(r"^<[0-4]>.*probe's file", err, re.M), err


def test_dry_run_leaves_the_state_as_it_was(shadow_env):
    """--once --dry-run is a look: the daemon's state file (its schedule,
    its search, its count of cycles) is left byte for byte."""
    env = shadow_env(WRITTEN)
    # one sample, then the byte budget ends the cycle
    env.write_config(tune={"trials": q("shadow"), "mode": q("tune"), "max_bytes": "8M"})
    state = env.state_dir / "state"
    state.write_text(state_text(WRITTEN))
    before = state.read_bytes()
    rc, out, err = env.run("--once", "--dry-run", timeout=120)
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    assert re.search(r"^<\d>byte budget of ", err, re.M), err
    assert state.read_bytes() == before


def test_resume_takes_turns_with_the_daemons_saves(shadow_env):
    """--resume holds the state lock (STATE_DIR/state.lock) from its load to its save,
    so no save of the daemon's (a cycle's counters, its schedule) can come
    between them and be lost. Here the test holds the lock and saves, as a
    daemon's end of cycle does: --resume waits, then keeps that save's
    count and ends the hold."""
    env = shadow_env(WRITTEN)
    held = state_text(WRITTEN).replace("hold no\n", "hold yes\nhold_reason by hand\n")
    path = env.state_dir / "state"
    path.write_text(held)
    fd = os.open(env.state_dir / "state.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        d = env.start("--resume")
        time.sleep(1.0)
        assert d.alive(), f"--resume did not wait for the lock:\n{d.stdout}\n{d.stderr}"
        assert env.state().get("hold") == "yes"
        # the daemon's save, atomic as state_save's
        tmp = env.state_dir / "state.test-tmp"
        tmp.write_text(held.replace("cycles 1\n", "cycles 5\n"))
        os.rename(tmp, path)
    finally:
        os.close(fd)
    assert d.wait() == 0, d.stderr
    assert "tunes smb.conf again" in d.stdout, d.stdout
    st = env.state()
    assert st.get("hold") == "no", st
    assert st.get("cycles") == "5", f"--resume lost the save made while it waited: {st}"


def test_share_that_refuses_the_clean_up_is_a_warning(make_env):
    """The look at the start for a killed predecessor's file reaches the
    share but cannot remove the file it finds (a read-only share): that is
    no share out of reach, and is said as a warning, with the file left
    where it is; only a share that could not be reached is info."""
    env = make_env(WRITTEN, shares={"ro": {"read only": "yes"}})
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no probe runs under now
    name = f".smbtuned-probe-{socket.gethostname()}-{gone.pid}-00000000000000ab"
    planted = env.srv.shares["ro"] / name
    planted.write_bytes(b"x" * 4096)
    url = env.srv.url.rsplit("/", 1)[0] + "/ro"
    record_made(env.state_dir, name, url)
    env.write_config(probe={"url": q(url)}, tune={"trials": q("client")})
    rc, out, err = env.run("--once", "--dry-run", timeout=120)
    assert rc == EXIT_FAILURE, f"exit {rc}\n{out}\n{err}"
    assert re.search(r"^<4>removing a killed probe's file: the clean-up failed \(", err,
                     re.M), err
    assert not re.search(r"^<6>no look for a file", err, re.M), err
    assert planted.exists()


def test_a_file_the_clean_up_cannot_remove_is_tried_again(make_env):
    """A dead probe's file the clean-up finds but may not remove (root's,
    in a sticky share where the probe's guest writes its own files): the
    probe still measures, and the clean-up is tried again at the cycle's
    end, saying again that the file stays, rather than forgetting it; the
    stop that follows --once's end does not say it a third time."""
    env = make_env(WRITTEN, shares={"sticky": {}})
    share = env.srv.shares["sticky"]
    share.chmod(0o1777)
    gone = subprocess.Popen(["true"])
    gone.wait()
    planted = share / f".smbtuned-probe-{socket.gethostname()}-{gone.pid}-00000000000000cd"
    planted.write_bytes(b"x" * 4096)  # root's: the guest may not remove it
    url = env.srv.url.rsplit("/", 1)[0] + "/sticky"
    record_made(env.state_dir, planted.name, url)
    env.write_config(probe={"url": q(url)},
                     tune={"trials": q("client"), "max_bytes": "8M"})
    rc, out, err = env.run("--once", "--dry-run", timeout=120)
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    said = re.findall(r"^<4>removing a killed probe's file: the clean-up failed \(1 file of "
                      r"killed probes could not be removed", err, re.M)
    # at the start, then at the cycle's end; not again at the stop right
    # after it (no probe between: it would fail the same way)
    assert len(said) == 2, err
    assert planted.exists()


def test_a_share_that_refuses_a_listing_needs_none(make_env):
    """A share the probe's guest may write but not list (its directory
    0733): the measurement works, and the clean-up, which goes by its
    record of the files it made and lists nothing, removes a killed
    probe's file there without a word."""
    env = make_env(WRITTEN, shares={"blind": {}})
    share = env.srv.shares["blind"]
    share.chmod(0o733)
    gone = subprocess.Popen(["true"])
    gone.wait()
    planted = share / f".smbtuned-probe-{socket.gethostname()}-{gone.pid}-00000000000000ce"
    planted.write_bytes(b"x" * 4096)
    url = env.srv.url.rsplit("/", 1)[0] + "/blind"
    record_made(env.state_dir, planted.name, url)
    env.write_config(probe={"url": q(url)}, tune={"trials": q("client"), "max_bytes": "8M"})
    rc, out, err = env.run("--once", "--dry-run", timeout=120)
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    assert "removing a killed probe's file" not in err, err
    assert not planted.exists()
    assert env.leftovers() == []


def test_records_of_a_place_probed_no_more_are_told_and_kept(make_env):
    """A killed probe's file recorded at a place the configuration no
    longer probes (its url changed since): no clean-up of this run goes
    there, so the start says where it stays and how to remove it, once a
    run, and keeps the record; the file there is left alone."""
    env = make_env(WRITTEN, shares={"old": {}})
    gone = subprocess.Popen(["true"])
    gone.wait()
    planted = env.srv.shares["old"] / f".smbtuned-probe-{socket.gethostname()}-{gone.pid}-00000000000000cf"
    planted.write_bytes(b"x" * 4096)
    old = env.srv.url.rsplit("/", 1)[0] + "/old"
    record_made(env.state_dir, planted.name, old)
    env.write_config(tune={"trials": q("client"), "max_bytes": "8M"})
    rc, out, err = env.run("--once", "--dry-run", timeout=120)
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    told = re.findall(r"^<5>1 file of killed probes at " + re.escape(old) +
                      r", which is probed no more, stays there: remove it by hand \(the names: "
                      r"ls -A " + re.escape(str(made_dir(env.state_dir, old))) + r"\)", err, re.M)
    assert len(told) == 1, err
    assert planted.exists()
    assert records(env.state_dir, old) == [planted.name]
