"""A commit that would restart smbd is not made while files are open on it.

restart_smbd = yes restarts smbd when a commit gives a buffer back to
autotuning while smbd's listener holds an explicit size: every client is
cut off then, and a file open on smbd (a user's document, a backup's
write) loses what was not written. The commit's job asks smbstatus right
before the write (daemon/owned.c, lib/smbstatus.c); with a file open it
writes nothing and the line stays. The restart itself needs systemd, which
this environment has not (tests/e2e restarts for real): without the open
file the same cycle writes the line, its restart fails, and the line goes
back, which shows the check is what stopped it before.

No rate is asserted.
"""

import os
import signal
import subprocess
import time

import pytest

from daemon_util import LEGACY, SMALL_PROBE, q, socket_value
from smbd import SMBCLIENT

pytestmark = [pytest.mark.smbd]

# between 8192 and autotuning alone: loopback's shadow trials give
# autotuning (no real connection asks for more), which needs the restart
TUNE = {"min_size": "8K", "max_size": "8K", "max_samples": "6", "restart_smbd": "yes",
        "apply": q("smbcontrol")}
OPEN_RE = ("not written: smbd would be restarted (restart_smbd = yes), which would cut off "
           "the 1 file open on it (smbstatus -L lists them); keeping " + LEGACY +
           ", and the next cycles wait until no file is open before searching again")


class HeldFile:
    """A file kept open on srv's share: smbclient puts from a FIFO whose
    writer stays open until the end of the `with`."""

    def __init__(self, srv, tmp):
        self.srv, self.fifo = srv, tmp / "held.fifo"

    def __enter__(self):
        os.mkfifo(self.fifo)
        srv = self.srv
        self.proc = subprocess.Popen(
            [SMBCLIENT, "-s", str(srv.client_conf), "-N", "-p", str(srv.port), srv.unc(),
             "-c", f"put {self.fifo} held.bin"],
            env=srv.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # read-write: an open that never waits for smbclient's (one that
        # failed to connect never opens the FIFO)
        self.w = os.fdopen(os.open(self.fifo, os.O_RDWR), "wb")
        self.w.write(b"x" * 4096)
        self.w.flush()
        deadline = time.monotonic() + 30
        while "held.bin" not in self.status():
            assert time.monotonic() < deadline, "the held file never showed in smbstatus"
            time.sleep(0.2)
        return self

    def status(self):
        return subprocess.run(["smbstatus", "-s", str(self.srv.conf), "-L"],
                              capture_output=True, text=True, timeout=30).stdout

    def __exit__(self, *exc):
        self.w.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def test_no_commit_that_restarts_smbd_while_a_file_is_open(make_env, tmp_path):
    env = make_env(LEGACY)
    env.write_config(probe={**SMALL_PROBE}, tune=TUNE)
    before = env.srv.conf.read_bytes()

    with HeldFile(env.srv, tmp_path):
        rc, obj, err = env.run_json()
        print(f"\n{err}\n{obj}")
        assert rc == 0, err
        assert OPEN_RE in err, err
        assert obj["committed"] is False, obj
        assert "files open on smbd, which its restart would cut off" in obj["result"], obj
        assert env.srv.conf.read_bytes() == before
        assert env.state().get("pending") == "no"

    # the file closed: the same search writes the line and tries the
    # restart (which fails without systemd; the line goes back)
    rc, obj, err = env.run_json()
    print(f"\n{err}\n{obj}")
    assert "file open on it" not in err and "files open on it" not in err, err
    assert "smbd could not be restarted for the change" in err, err
    assert socket_value(env.srv.conf.read_bytes()) == LEGACY
    assert env.state().get("pending") == "no"


# smbstatus as smbd would answer when a file is opened in the minute
# between the commit's check before its write and its restart (testparm
# runs in between): none open at the first call, one at every later one.
# A stand-in (first on PATH), as no real client can be timed into that
# window.
FAKE_SMBSTATUS = """#!/bin/sh
n=$(cat "{count}" 2>/dev/null || echo 0)
echo $((n + 1)) > "{count}"
if [ "$n" -eq 0 ]; then echo '{{"open_files": {{}}}}'; exit 0; fi
{then}
echo '{{"open_files": {{"{share}/held.bin": {{}}}}}}'
"""
HAND = "TCP_NODELAY SO_RCVBUF=131072 SO_SNDBUF=131072"


def fake_smbstatus(env, tmp_path, then=""):
    """FAKE_SMBSTATUS first on env's PATH; then: shell run at its second
    call. The file that counts its calls."""
    bindir, count = tmp_path / "bin", tmp_path / "smbstatus-calls"
    bindir.mkdir()
    (bindir / "smbstatus").write_text(FAKE_SMBSTATUS.format(count=count, then=then,
                                                            share=env.srv.share_dir))
    (bindir / "smbstatus").chmod(0o755)
    plain = env.env
    env.env = lambda: {**plain(), "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    return count


def test_a_file_opened_after_the_write_takes_the_commit_back(make_env, tmp_path):
    """The check right before the restart finds a file the check before
    the write did not: the commit goes back at once (it once stayed for
    the cycle's end to restart or take back, and a commit kept then read
    as "nothing changed"), and the cycle ends as one refused before its
    write does."""
    env = make_env(LEGACY)
    env.write_config(probe={**SMALL_PROBE}, tune=TUNE)
    before = env.srv.conf.read_bytes()
    count = fake_smbstatus(env, tmp_path)

    rc, obj, err = env.run_json()
    print(f"\n{err}\n{obj}")
    assert rc == 0, err
    assert count.read_text().strip() == "2", "smbstatus was not asked before the write and again"
    assert ("not kept: smbd would be restarted (restart_smbd = yes), which would cut off the 1 "
            "file open on it") in err, err
    assert "taken back in" in err, err
    assert obj["committed"] is False, obj
    assert "files open on smbd, which its restart would cut off" in obj["result"], obj
    assert env.srv.conf.read_bytes() == before
    assert env.state().get("pending") == "no"
    assert "checked and kept" not in err and "written, not restarted" not in err, err


def test_a_take_back_for_open_files_that_meets_an_edit_holds(make_env, tmp_path):
    """The same, with the admin's edit of the line between the write and
    the take-back: the take-back leaves their line, smbtuned holds off,
    and the cycle says so, not that it kept the line it began with."""
    env = make_env(LEGACY)
    env.write_config(probe={**SMALL_PROBE}, tune=TUNE)
    conf = env.srv.conf
    edit = f"sed -i 's/^\\( *socket options = \\).*/\\1{HAND}/' '{conf}'"
    count = fake_smbstatus(env, tmp_path, then=edit)

    rc, obj, err = env.run_json()
    print(f"\n{err}\n{obj}")
    assert count.read_text().strip() == "2", err
    assert rc == 1, err
    assert socket_value(conf.read_bytes()) == HAND
    assert env.state().get("hold") == "yes", env.state()
    assert env.state().get("pending") == "no", env.state()
    assert f"keeping {LEGACY}" not in err, err
    assert obj["committed"] is False, obj


def test_a_killed_runs_commit_is_not_restarted_over_an_open_file(make_env, tmp_path):
    """A run killed after writing a commit that needs smbd restarted (the
    record says so): the next start would restart smbd to confirm it. With
    a file open on smbd it restarts nothing and takes the commit back (the
    listener would keep the old sizes while the line read as autotuning),
    saying why; the cycles after it search again."""
    env = make_env(LEGACY)
    tune = {"mode": q("advise"), "apply": q("smbcontrol"), "restart_smbd": "yes"}
    env.write_config(probe={**SMALL_PROBE}, tune=tune)
    rc, out, err = env.run("--once")  # a state file, as a cycle leaves it
    assert rc == 0, err
    old, new = env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144", restart=True)
    with HeldFile(env.srv, tmp_path):
        rc, out, err = env.run("--once")
        print(f"\n{err}")
    assert ("unfinished change taken back in " + str(env.srv.conf) + ": the socket options "
            "line holds what it held before: not kept: smbd would be restarted (restart_smbd = "
            "yes), which would cut off the 1 file open on it (smbstatus -L lists them)") in err, err
    assert "cannot reach systemd" not in err, err
    assert "checked and kept" not in err, err
    assert socket_value(env.srv.conf.read_bytes()) == old.split("=", 1)[1].strip()
    assert env.state().get("pending") == "no"


DEFERRED = ("tuning deferred: the last search's commit needs smbd restarted, and smbd would be "
            "restarted (restart_smbd = yes), which would cut off the 1 file open on it")
SEARCH = "tuning cycle: searching from "


@pytest.mark.slow
@pytest.mark.minutes
def test_cycles_wait_for_the_files_instead_of_searching_again(make_env, tmp_path):
    """The daemon, a cycle a minute: the first search's commit meets the
    open file. A search each cycle would come to the same refusal (a busy
    server has files open all day): the next cycle asks smbstatus and is
    deferred, no trial run; once the file is closed, the cycle after
    searches and writes (its restart then fails here: no systemd)."""
    env = make_env(LEGACY)
    env.write_config(probe={**SMALL_PROBE}, tune={**TUNE, "interval": "1m"})
    with HeldFile(env.srv, tmp_path):
        d = env.start()
        d.wait_for(lambda: DEFERRED in d.stderr, timeout=200,
                   what="the second cycle, deferred for the open file")
        assert d.stderr.count(SEARCH) == 1, d.stderr
        assert "which would cut off the 1 file open on it (smbstatus -L lists them); keeping" \
            in d.stderr, d.stderr
    d.wait_for(lambda: "no file open on smbd now: searching again" in d.stderr, timeout=200,
               what="the cycle after the file closed")
    d.wait_for(lambda: d.stderr.count(SEARCH) == 2 and
               "smbd could not be restarted for the change" in d.stderr, timeout=200,
               what="its search and commit")
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert socket_value(env.srv.conf.read_bytes()) == LEGACY
