"""The daemon under valgrind for 50 cycles: no memory that grows with them.

smbtuned is meant to run for months: a few bytes lost per cycle add up.
The daemon runs under valgrind (memcheck) against a real smbd; SIGHUP
starts one cycle at a time (each reloads the configuration, then a
verification sample or a search). Trials are live, so every trial is an
edit of smb.conf, recorded in the state file and taken back. Every
SEARCH_EVERY cycles the test points the configuration at the other of two
copies of smb.conf: the measurements were made on another file, so that
cycle searches again. The long-lived paths of a reload, a verification, a
search and its edits are all repeated between the two measurements.

valgrind's gdbserver (vgdb) asks for a leak summary of the live process
after WARM cycles and again after CYCLES: lost bytes (definitely,
indirectly, possibly) must not grow between the two, and neither may the
heap still reachable beyond SLACK bytes (a cache that fills once is fine,
a list that grows per cycle is not). At the end the daemon stops on
SIGTERM, and valgrind's own exit report must show no error (a definitely
lost block counts as one).
"""

import os
import re
import shutil
import signal
import subprocess

import pytest

from daemon_util import RESULT_RE, DaemonEnv, q

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

CYCLES = 50
WARM = 10
SEARCH_EVERY = 15  # a new search at cycles 5, 20, 35
SLACK = 4096  # bytes of reachable heap allowed to appear between WARM and CYCLES
CYCLE_TIMEOUT = 300  # seconds for one cycle under valgrind (a bound, not a measurement)
LEGACY = "TCP_NODELAY SO_RCVBUF=1048576 SO_SNDBUF=1048576"

SUMMARY_RE = {k: re.compile(rf"{k}: ([\d,]+) \([+-][\d,]+\) bytes")
              for k in ("definitely lost", "indirectly lost", "possibly lost", "still reachable")}
# A cycle's last word: after its search's result, a live trial may still be
# on its way back in a job; a summary taken before this line counts that.
CYCLE_END_RE = re.compile(r"^<\d>cycle (done|failed) after ", re.M)


def leak_summary(vgdb_prefix, pid):
    """{kind: bytes} from a live process under valgrind."""
    r = subprocess.run(["vgdb", f"--vgdb-prefix={vgdb_prefix}", f"--pid={pid}", "leak_check",
                        "summary"], capture_output=True, text=True, timeout=120)
    text = r.stdout + r.stderr
    out = {}
    for k, rx in SUMMARY_RE.items():
        m = rx.search(text)
        # a kind with nothing in it is still printed, as 0; a missing line
        # means vgdb did not reach the process
        assert m, f"vgdb leak_check gave no '{k}' line:\n{text}"
        out[k] = int(m.group(1).replace(",", ""))
    return out


def test_fifty_cycles_under_valgrind(smbtuned, smbd_factory, tmp_path):
    if shutil.which("valgrind") is None or shutil.which("vgdb") is None:
        pytest.skip("valgrind is not installed")
    srv = smbd_factory(socket_options=LEGACY)
    env = DaemonEnv(smbtuned, srv, tmp_path)
    vg = tmp_path / "vg"
    vg.mkdir()
    vgdb_prefix = str(vg / "vgdb")
    # The cliff of small buffers on loopback (FACTS.md) would turn trials
    # into timeouts, and so do 4 MiB buffers in a probe child slowed down
    # by valgrind: 1 and 2 MiB keep each sample short.
    copies = [srv.conf, srv.conf.with_name("smb-copy.conf")]
    shutil.copyfile(srv.conf, copies[1])

    def configure(smb_conf):
        env.write_config(probe={"size": "2M", "request_size": "512K", "deadline": "60"},
                         tune={"smb_conf": q(smb_conf), "trials": q("live"), "apply": q("none"),
                               "interval": "1h", "min_size": "1M", "max_size": "2M",
                               "max_samples": "4"})

    configure(copies[0])
    env.prefix = ["valgrind", "--vgdb=yes", f"--vgdb-prefix={vgdb_prefix}",
                  "--leak-check=full", "--show-leak-kinds=definite", "--errors-for-leak-kinds=definite",
                  f"--log-file={vg}/valgrind.%p.log"]
    try:
        d = env.start()
        d.wait_for(lambda: RESULT_RE.search(d.stderr) and CYCLE_END_RE.search(d.stderr),
                   timeout=CYCLE_TIMEOUT * 3, what="the first search's result")
        at_warm = None
        for i in range(1, CYCLES + 1):
            if i % SEARCH_EVERY == 5:
                # the other copy gets the line in force, so that it does not
                # read as an edit by hand
                old, new = copies[(i // SEARCH_EVERY) % 2], copies[(i // SEARCH_EVERY + 1) % 2]
                shutil.copyfile(old, new)
                configure(new)
            n = len(CYCLE_END_RE.findall(d.stderr))
            d.signal(signal.SIGHUP)
            d.wait_for(lambda: len(CYCLE_END_RE.findall(d.stderr)) > n, timeout=CYCLE_TIMEOUT,
                       what=f"the end of cycle {i}")
            if i == WARM:
                at_warm = leak_summary(vgdb_prefix, d.pid)
        at_end = leak_summary(vgdb_prefix, d.pid)
        searches = len(RESULT_RE.findall(d.stderr))
        # the switches must really have led to new searches, or the test
        # would measure verification cycles only
        assert searches >= 1 + CYCLES // SEARCH_EVERY, d.stderr
        for k in ("definitely lost", "indirectly lost", "possibly lost"):
            assert at_end[k] <= at_warm[k], f"{k} grew: {at_warm} -> {at_end}"
        grown = at_end["still reachable"] - at_warm["still reachable"]
        assert grown <= SLACK, f"reachable heap grew by {grown} bytes over " \
                               f"{CYCLES - WARM} cycles: {at_warm} -> {at_end}"

        d.signal(signal.SIGTERM)
        assert d.wait(timeout=CYCLE_TIMEOUT) == 0, d.stderr
        logs = {p.name: p.read_text() for p in vg.glob("valgrind.*.log")}
        main = logs.get(f"valgrind.{d.pid}.log", "")
        # a definitely lost block counts as an error (--errors-for-leak-kinds)
        assert "ERROR SUMMARY: 0 errors" in main, main
        assert env.leftovers() == []
    finally:
        env.cleanup()
