"""STATUS= follows what the daemon does, and between cycles it is silent.

systemd shows the last STATUS= in `systemctl status`. The daemon sends it
with READY=1, then each time its words change: the search's samples, the
cycle's end ("idle: next cycle at ..."). Nothing is sent while it waits for
the next cycle: a timer that said the same thing again every few seconds
would wake the loop for nothing (issue 12: no CPU time between cycles).
Here NOTIFY_SOCKET names a socket this test binds (no watchdog: with
WATCHDOG_USEC set the loop pings systemd by design).
"""

import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from daemon_util import RESULT_RE, q
from test_watchdog import ON_LATTICE, ForkedDaemon, Notifications

pytestmark = [pytest.mark.smbd]

CYCLE_TIMEOUT = 150  # a bound on the first cycle, not a measurement
QUIET_S = 12  # longer than the 5 s the old STATUS timer repeated itself at


def statuses(msgs):
    return [line[len("STATUS="):] for m in msgs for line in m[3].split("\n")
            if line.startswith("STATUS=")]


# Where the trials run, as STATUS= says it: a live trial is in production's
# smb.conf, which `systemctl status` must show (advise mode makes live
# trials what auto picks: tune here, on the test's own smb.conf).
WHERE = {"shadow": ("advise", "shadow trial "), "live": ("tune", "live trial in smb.conf: ")}


@pytest.mark.parametrize("trials", sorted(WHERE))
def test_status_follows_the_cycle_then_the_loop_sleeps(make_env, trials):
    mode, where = WHERE[trials]
    env = make_env(ON_LATTICE)
    env.write_config(tune={"mode": q(mode), "trials": q(trials), "interval": "1h",
                           "apply": q("smbcontrol")})
    sockdir = Path(tempfile.mkdtemp(prefix="smbtd-notify-", dir="/tmp"))
    notes = Notifications(sockdir / "notify")
    d = None
    try:
        d = ForkedDaemon(env.cmd(), {**env.env(), "NOTIFY_SOCKET": str(notes.path)}, env.logdir)
        deadline = time.monotonic() + CYCLE_TIMEOUT
        while not RESULT_RE.search(d.stderr):
            assert time.monotonic() < deadline, f"no end of the first cycle:\n{d.stderr}"
            assert d.alive(), f"smbtuned exited ({d.returncode})\n{d.stderr}"
            time.sleep(0.05)
        # the cycle's last words (its end, the idle line) come right after
        deadline = time.monotonic() + 30
        while not any(s.startswith("idle: next cycle at ") for s in statuses(notes.of(d.pid))):
            assert time.monotonic() < deadline, \
                f"no idle STATUS after the cycle: {statuses(notes.of(d.pid))}\n{d.stderr}"
            time.sleep(0.05)
        time.sleep(1)
        n = len(notes.of(d.pid))
        time.sleep(QUIET_S)
        quiet = notes.of(d.pid)[n:]
        said = statuses(notes.of(d.pid))
        assert quiet == [], f"messages while idle: {quiet}"
        # the first status comes in the READY=1 message itself
        ready = [m[3].split("\n") for m in notes.of(d.pid) if "READY=1" in m[3].split("\n")]
        assert ready and any(x.startswith("STATUS=") for x in ready[0]), notes.of(d.pid)[:3]
        assert said[0] == "starting", said
        assert any(re.match(r"searching: sample \d+, " + where, s) for s in said), said
        # each message says something new
        assert all(a != b for a, b in zip(said, said[1:])), said
        assert d.alive(), d.stderr
        os.kill(d.pid, signal.SIGTERM)
        assert d.wait(60) == 0, d.stderr
    finally:
        if d is not None:
            d.kill()
        notes.close()
        shutil.rmtree(sockdir, ignore_errors=True)
