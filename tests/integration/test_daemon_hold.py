"""A running daemon holds off when an admin sets its live trial's line back
to what the trial replaced, against a real smbd from the fixture.

smbtuned(8): any change of the socket options line smbtuned did not make
is an edit by hand, and it holds off until --resume. Setting the line back
to its original while a live trial is in smb.conf was once missed: the
next trial's write was refused in silence, the cycle's take-back found the
original "already undone" and ended the record as if smbtuned had put it
back, and the next cycle ran live trials over the admin's line again. (A
start that finds the original with a trial recorded still holds nothing:
a kill -9 between smbtuned's own take-back and its state save leaves the
same; tests/faults/test_kill.py.)
"""

import fcntl
import re
import signal
import time

from daemon_util import q, socket_value
from test_daemon import ON_LATTICE, assert_clean

import pytest

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

HOLD_SAID = "an edit by hand during smbtuned's live trial of"
HOLDING = "not tuning: holding off: "


def test_live_trial_set_back_to_the_original_holds(make_env):
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("live"), "apply": q("smbcontrol"), "interval": "1h",
                           "max_bytes": "96M"})
    conf = env.srv.conf
    before = conf.read_bytes()
    d = env.start()
    d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf", poll=0.005)

    # The admin puts the original bytes back, with a plain write as an
    # editor makes (every other byte kept). Under the daemon's edit lock,
    # as `smbtuned --set-buffers` writes: only so that no write of the
    # daemon's can land between the look and the write (a lost update
    # would make the test's outcome a race, not the daemon's doing).
    with open(env.state_dir / "smbconf.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        trial = conf.read_bytes()
        assert trial != before, "the cycle ended before the admin's edit"
        conf.write_bytes(before)
    assert socket_value(trial) != socket_value(before)

    # The cycle ends on it with the hold, said with its reason, and does
    # not claim to have taken the trial back.
    d.wait_line(r"^<\d>cycle (held|failed|done) after ", timeout=240)
    err = d.stderr
    assert HOLD_SAID in err, err
    assert not re.search(r"^<\d>live trial taken back in ", err, re.M), err
    assert "hands off smb.conf until `smbtuned --resume`" in err, err
    d.wait_for(lambda: env.state().get("hold") == "yes", timeout=60, what="the hold saved")
    st = env.state()
    assert st.get("pending") == "no", st
    rc, out, _ = env.run("--status")
    assert rc == 0, out
    assert re.search(r"^Hold +: yes: .*" + re.escape(HOLD_SAID), out, re.M), out
    assert conf.read_bytes() == before, conf.read_text()

    # SIGHUP starts a cycle at once: it holds off, and no trial value
    # reaches smb.conf meanwhile.
    n = d.stderr.count(HOLDING)
    tried = len(re.findall(r"^<\d>tried ", d.stderr, re.M))
    d.signal(signal.SIGHUP)
    deadline = time.monotonic() + 60
    while d.stderr.count(HOLDING) <= n:
        assert conf.read_bytes() == before, f"a trial after the hold:\n{conf.read_text()}"
        assert time.monotonic() < deadline, f"no cycle after SIGHUP\n{d.stderr}"
        assert d.alive(), d.stderr
        time.sleep(0.005)
    assert len(re.findall(r"^<\d>tried ", d.stderr, re.M)) == tried, d.stderr
    assert conf.read_bytes() == before, conf.read_text()

    d.signal(signal.SIGTERM)
    assert d.wait(timeout=120) == 0, d.stderr
    assert conf.read_bytes() == before, conf.read_text()
    assert env.state().get("hold") == "yes", env.state()
    assert_clean(env)
