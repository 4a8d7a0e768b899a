"""The peer unreachable mid-probe (issue 9, "Faults").

The peer is a real smbd in the server namespace of a WanPath
(tests/netem); smbtuned runs in the client namespace with client trials
(the mode for a peer's share) and tunes a smb.conf of its own (apply =
none: no smbd reads it). While a probe moves data (its file is in the
share), the test takes the link down on the server's side (`ip link set
wan0 down` in the server namespace): the connection neither closes nor
moves, as when a peer drops off the network.

What is held: the probe ends at its deadline with a clear outcome, the
cycle ends with nothing hanging (every wait is bounded), the journal says
that the peer could not be reached, and smb.conf is its old bytes or a
complete candidate. The probe's file cannot be removed while the link is
down; once the link is back the next start removes it (tuner_recover),
so no file stays in the share, and no process of the run is left.

About 20-30 s per test on two cores (the probes that meet the dead link
each run to their deadline).
"""

import signal
import sys
from pathlib import Path

import pytest

from daemon_util import PROBE_FILE_GLOB, RESULT_RE, q
from faultutil import FaultEnv, check_journal, check_promises, journal_lines, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netem"))
from wan import DEV, SMBD_GLOBAL, WanPath  # noqa: E402

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

RTT_MS = 4
RATE_MBIT = 40  # an 8 MiB probe takes about 2 s each way: time to cut it
DEADLINE_S = 8
PROBE = {"size": "8M", "deadline": str(DEADLINE_S)}
# The run after the link is back only has to start (and so remove the
# file the cut probe left): one small sample, then its budget is spent.
RECOVER = {"probe": {"size": "1M", "deadline": str(DEADLINE_S)}, "tune": {"max_bytes": "1M"}}
TUNE = {"trials": q("client"), "apply": q("none"), "mode": q("tune"),
        "min_size": "64K", "max_size": "256K", "max_samples": "4"}
ONCE_TIMEOUT = 300  # a bound on the whole run, far above its deadlines

# The peer notices a dead client within seconds, as a server configured
# for it does (TCP keepalives when the connection is idle, a user timeout
# when a reply of its own is unacknowledged), and then closes the cut
# probe's file. With the defaults that takes minutes (smbd's `keepalive`
# of 300 s, TCP's retransmissions), and until then no client can delete
# the file: it is open in another session (a sharing violation).
PEER_SOCKET_OPTIONS = ("TCP_NODELAY SO_KEEPALIVE TCP_KEEPIDLE=1 TCP_KEEPINTVL=1 TCP_KEEPCNT=2 "
                       "TCP_USER_TIMEOUT=3000")

LOCAL_CONF = """\
# smb.conf of the host being tuned (a client of the peer's share)
[global]
   workgroup = PEERTEST
   socket options = TCP_NODELAY SO_RCVBUF=131072 SO_SNDBUF=131072
   pid directory = {base}/pid
   lock directory = {base}/lock
   state directory = {base}/state
   cache directory = {base}/cache
   load printers = no
"""


@pytest.fixture
def peer(smbtuned, smbd_factory, tmp_path):
    """(env, wan, local smb.conf): smbd in the server namespace, a FaultEnv
    whose runs are in the client namespace, tuning local smb.conf."""
    with WanPath(tmp_path, rtt_ms=RTT_MS, rate_mbit=RATE_MBIT) as wan:
        srv = smbd_factory(prefix_cmd=wan.prefix("server"), bind_addr=wan.server_addr,
                           extra_global=SMBD_GLOBAL, socket_options=PEER_SOCKET_OPTIONS)
        env = FaultEnv(smbtuned, srv, tmp_path, prefix=wan.prefix("client"))
        base = tmp_path / "host"
        for d in ("pid", "lock", "state", "cache"):
            (base / d).mkdir(parents=True, exist_ok=True)
        local = base / "smb.conf"
        local.write_text(LOCAL_CONF.format(base=base))
        env.write_config(probe=PROBE, tune={**TUNE, "smb_conf": q(local)})
        env.write_config(probe=RECOVER["probe"],
                         tune={**TUNE, **RECOVER["tune"], "smb_conf": q(local)},
                         path=env.tmp / "recover.conf")
        try:
            yield env, wan, local
        finally:
            env.cleanup()


def link(wan, state):
    wan.run("server", ["ip", "link", "set", DEV, state], check=True, timeout=30)


def probe_file_appears(env):
    return any(Path(env.srv.share_dir).glob(PROBE_FILE_GLOB))


# What a probe cut off says: the link goes down right after its file
# appears, while it asks the share for its free space (a failed sample, at
# its deadline) or once it writes (a sample of lower bounds at the
# deadline, then the next one cannot connect).
CUT_SAID = (r"^probe of \S+ failed: (no answer within its deadline of \d+ s \(the deadline "
            r"passed while asking the share for its free space\)|connecting: Connection timed "
            r"out)$")


def cut_mid_probe(env, wan, d):
    """Wait until a probe's file is in the share (a probe moves data), then
    take the link down on the server's side."""
    d.wait_for(lambda: probe_file_appears(env), timeout=120, what="a probe file in the share",
               poll=0.005)
    link(wan, "down")


def settle_after(env, wan, before, conf):
    """The link back up, one more start, which removes the file the cut
    probe left; then every promise."""
    link(wan, "up")
    rc, out, err = env.run("--once", "--dry-run", conf=env.tmp / "recover.conf",
                           timeout=ONCE_TIMEOUT)
    assert rc == 0, f"the run after the link came back failed\n{err}"
    check_promises(env, before, err, r"^byte budget of ", conf=conf)
    left = env.leftovers()
    assert not left, "left behind:\n" + "\n".join(left)


def test_link_down_mid_probe_once(peer, faults):
    env, wan, conf = peer
    before = conf.read_bytes()
    d = env.start("--once")
    cut_mid_probe(env, wan, d)
    rc = d.wait(timeout=ONCE_TIMEOUT)
    err = d.stderr
    # The cycle could not reach the peer: the journal says so, and no
    # number measured over the dead link was taken for the peer's rates.
    check_journal(err, CUT_SAID)
    # The file of the cut probe could not be removed: said, not hidden.
    check_journal(err, r"^removing a killed probe's file: the share could not be reached")
    for _, m in journal_lines(err):
        assert not m.startswith("socket options: "), \
            f"committed from samples over a dead link: {m}\n{err}"
    assert rc == 1, f"--once exit {rc}: a cycle that never reached the peer is a failure\n{err}"
    settle_after(env, wan, before, conf)
    faults.record("peer link down mid-probe (--once)", "failed at the deadline")


def test_link_down_mid_probe_daemon(peer, faults):
    """The daemon, cycles driven by SIGHUP. The link goes down mid-probe:
    the cycle ends at the probe's deadline and says why. The link comes
    back; the next cycle (SIGHUP) works and removes the cut probe's file.
    The link goes down mid-probe again and SIGTERM comes while the probe
    hangs on it: the daemon stops within a bound, leaving nothing."""
    env, wan, conf = peer
    before = conf.read_bytes()
    # One sample a cycle: the budget ends it (a verification-sized cycle).
    env.write_config(probe=PROBE, tune={**TUNE, "smb_conf": q(conf), "interval": "1h",
                                        "max_bytes": "8M"})
    d = env.start()
    cut_mid_probe(env, wan, d)
    d.wait_line(r"^<\d>probe of \S+ failed: ", timeout=ONCE_TIMEOUT)
    check_journal(d.stderr, CUT_SAID)
    assert probe_file_appears(env), "the cut probe's file is gone: was the link cut?"
    faults.record("peer link down mid-probe (daemon)", "cycle failed at the deadline")

    link(wan, "up")
    n = len(RESULT_RE.findall(d.stderr))
    d.signal(signal.SIGHUP)
    d.wait_for(lambda: len(RESULT_RE.findall(d.stderr)) > n, timeout=ONCE_TIMEOUT,
               what="a cycle after the link came back")
    wait_until(lambda: not probe_file_appears(env), 15, "the cut probe's file removed")

    d.signal(signal.SIGHUP)
    cut_mid_probe(env, wan, d)
    d.signal(signal.SIGTERM)
    # The probe child is killed at once; the clean-up after it cannot reach
    # the share either and ends at its own deadline (probe.c).
    rc = d.wait(timeout=DEADLINE_S + 30)
    assert rc == 0, f"smbtuned did not stop cleanly on SIGTERM ({rc})\n{d.stderr}"
    # The file stays while the link is down (settle_after checks it goes).
    check_journal(d.stderr, r"^removing a killed probe's file: the share could not be reached")
    settle_after(env, wan, before, conf)
    faults.record("peer link down mid-probe (daemon), SIGTERM", "stopped")
