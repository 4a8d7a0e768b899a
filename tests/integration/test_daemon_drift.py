"""The daemon watches its winner and searches again when the path changes.

A network namespace of the test's own, whose loopback is shaped by a token
bucket (tc tbf, rate RATE_MBIT), holds a fixture smbd and the daemon. The
daemon tunes the probe's own client socket (trials = "client": nothing of
smbd's changes) and converges; SIGHUP then runs one cycle at a time, each a
verification sample of the winner. Once the verification has its reference
(STEADY cycles), the bucket's rate is halved: within AFTER cycles the
daemon must say the rates drifted and search again, then converge anew.

What is held: each steady cycle writes one "verified" line and leaves
smb.conf alone; a drift is reported as such ("drifted: searching again")
only after the rate changed; the new search ends in a result line; nothing
is left behind. Which size wins is not held (on a shaped loopback every
size gives the bucket's rate).
"""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from daemon_util import RESULT_RE, DaemonEnv, q

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netem"))
import wan as wanmod  # noqa: E402

pytestmark = [pytest.mark.smbd, pytest.mark.slow, pytest.mark.serial]

RATE_MBIT = 200
# search.c: alarms wait for 20 reference samples, which a converged search
# may not have supplied yet; the rest come from verification cycles.
STEADY = 30
AFTER = 10  # the "within 10 samples"
CYCLE_TIMEOUT = 120  # seconds for one cycle (a bound, not a measurement)
VERIFIED_RE = re.compile(r"^<\d>verified SO_RCVBUF \S+ SO_SNDBUF \S+: write [\d.]+ MB/s, "
                         r"read [\d.]+ MB/s", re.M)
DRIFT_RE = re.compile(r"^<\d>the rates at SO_RCVBUF \S+ SO_SNDBUF \S+ drifted: searching again$",
                      re.M)


def tbf(ns, verb, rate_mbit):
    subprocess.run(["tc", "-n", ns, "qdisc", verb, "dev", "lo", "root", "tbf", "rate",
                    f"{rate_mbit}mbit", "burst", "256kb", "latency", "100ms"],
                   check=True, capture_output=True, timeout=30)


@pytest.fixture
def shaped_ns():
    """A namespace named like tests/netem's (so a run killed before its
    cleanup is swept by the next WanPath), loopback shaped at RATE_MBIT."""
    if subprocess.run(["tc", "-V"], capture_output=True).returncode != 0:
        pytest.skip("tc (iproute2) is not installed")
    wanmod.remove_stale()
    ns = f"{wanmod.NS_PREFIX}-{os.getpid()}-{next(wanmod._counter)}-s"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=30)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True,
                       capture_output=True, timeout=30)
        tbf(ns, "add", RATE_MBIT)
        yield ns
    finally:
        wanmod._kill_ns_procs(ns)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def count(rx, text):
    return len(rx.findall(text))


def test_drift_starts_a_new_search(smbtuned, smbd_factory, tmp_path, shaped_ns):
    prefix = ["ip", "netns", "exec", shaped_ns]
    srv = smbd_factory(socket_options="TCP_NODELAY", prefix_cmd=prefix)
    env = DaemonEnv(smbtuned, srv, tmp_path, prefix=prefix)
    try:
        env.write_config(tune={"trials": q("client"), "apply": q("none"), "mode": q("tune"),
                               "interval": "1h"})
        d = env.start()
        d.wait_for(lambda: RESULT_RE.search(d.stderr), timeout=CYCLE_TIMEOUT * 3,
                   what="the first search's result")

        def cycle():
            """One SIGHUP-started cycle; True when it reported a drift."""
            nv, nd = count(VERIFIED_RE, d.stderr), count(DRIFT_RE, d.stderr)
            d.signal(signal.SIGHUP)
            d.wait_for(lambda: count(VERIFIED_RE, d.stderr) > nv or
                       count(DRIFT_RE, d.stderr) > nd, timeout=CYCLE_TIMEOUT,
                       what="a verification cycle")
            return count(DRIFT_RE, d.stderr) > nd

        def wait_result(nr):
            d.wait_for(lambda: count(RESULT_RE, d.stderr) > nr, timeout=CYCLE_TIMEOUT * 3,
                       what="the result of the new search")

        # Steady: every cycle verifies and leaves smb.conf alone. A false
        # alarm here is possible (the window test's rate) and costs a
        # search: it is allowed, but must end in a result line.
        for _ in range(STEADY):
            before, nr = srv.conf.read_bytes(), count(RESULT_RE, d.stderr)
            if cycle():
                wait_result(nr)
            else:
                assert srv.conf.read_bytes() == before, "a verification cycle changed smb.conf"
        assert count(VERIFIED_RE, d.stderr) >= STEADY // 2, d.stderr

        tbf(shaped_ns, "change", RATE_MBIT // 2)
        mark = len(d.stderr)
        nr = count(RESULT_RE, d.stderr)
        for _ in range(AFTER):
            if cycle():
                break
        else:
            raise AssertionError(f"no drift reported within {AFTER} cycles of the rate change"
                                 f"\nstderr:\n{d.stderr[mark:]}")
        wait_result(nr)  # the new search runs in the same cycle
        after = d.stderr[mark:]
        why = [ln for ln in after.splitlines() if "drift " in ln and "new search" in ln]
        assert why and "write -" in why[0] and "read -" in why[0], after

        d.signal(signal.SIGTERM)
        assert d.wait(timeout=60) == 0, d.stderr
        assert env.leftovers() == []
    finally:
        env.cleanup()
