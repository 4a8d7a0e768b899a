"""smbtuned --once on the emulated wide-area path (tests/netem), end to end.

The host being tuned is the CLIENT namespace of a 40 ms / 100 Mbit/s
WanPath: smbtuned runs there with trials = "client" (the mode for a peer
target) and rewrites a smb.conf of its own under the test's directory,
which starts from the legacy `SO_RCVBUF=8192 SO_SNDBUF=8192` line (no
smbd reads it: apply = "none"). The peer is a real smbd from the fixture in
the SERVER namespace with its default socket options. In client trials
every candidate goes into the probe's own client socket (writes rank the
local SO_SNDBUF, reads the local SO_RCVBUF) and the winner is written into
the local smb.conf.

What is held (the project's issue): from the legacy line, --once commits a
configuration whose write and read rates are each within 10% of the best
of a sweep measured in the same test, on the same path, with the same
probe; with the tuned side's tcp_rmem/tcp_wmem maximum lowered to 128 KiB,
the search's winner is an explicit size for both buffers, not AUTO.

These are the only rate comparisons in the integration tests, and they
are relative: the committed configuration against a sweep of the same
probe run minutes apart on a path that emulates nothing but a delay, a
rate and a queue (bench/probe-accuracy: 3-6% spread per 64 MiB transfer
on this path). No absolute MB/s figure is asserted; the link's ceiling
is checked only as a physical bound that proves the traffic crossed it.

Also held: smb.conf changes only in its socket options line, which keeps
its other tokens; Samba's parser reads back what the report says; no
probe file is left in the share, no process names our paths, and the
namespaces and the delay line are gone once the path is stopped.

Run with -s to see the numbers (sweep table, committed configuration,
samples, seconds): the README's performance section quotes them.
Measured on 2 cores: the first test about 5 minutes (--once 135-160 s,
18-25 samples; the sweep about 60 s), the second 4-6 minutes (--once 220-320 s,
37-70 samples: its walk down from 4M takes many samples to rank sizes
that differ by about 1%).
"""

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import samba_value
from daemon_util import LEGACY, conf_text, only_socket_line_changed, procs_naming, q, socket_value

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netem"))
import wan as wanmod  # noqa: E402
from wan import SMBD_GLOBAL, WanPath  # noqa: E402

pytestmark = [pytest.mark.smbd, pytest.mark.slow, pytest.mark.serial]

RTT_MS = 40
RATE_MBIT = 100
# Payload ceiling of the link in MB/s (10^6 bytes): a physical bound.
CEILING = RATE_MBIT * 1e6 / 8 / 1e6
MARGIN = 0.10  # the issue's "within 10%"
KI = 1024
# 64K .. 4M. 16K and 32K are left out: a socket moves at most twice its
# buffer per round trip (Linux doubles SO_RCVBUF/SO_SNDBUF), 0.8 and
# 1.6 MB/s here against AUTO's ~10.7, so neither can be the best, and their
# samples took 85 s of the sweep's 146.
SWEEP_SIZES = [64 * KI << i for i in range(7)]
SWEEP_SAMPLES = 2
COMMITTED_SAMPLES = 3
# The probe as the tuner runs it: 8 MiB each way; request_size keeps its
# default (8 MiB, the largest SMB2 request: bench/probe-accuracy shows
# smaller calls measure the round trip, not the buffers, on this path).
PROBE = {"size": "8M", "deadline": "30"}
ONCE_TIMEOUT = 600  # seconds; a --once cycle took 135-320 s here
PROBE_TIMEOUT = 120
PROBE_FILE_GLOB = ".smbtuned-probe-*"
CONSTRAINED = {"net.ipv4.tcp_rmem": "4096 131072 131072",
               "net.ipv4.tcp_wmem": "4096 16384 131072"}

# The host's own smb.conf: a plausible file with the line copied from a
# tuning guide. Its directories point under the test's directory so that
# what smbtuned learns about "the local smbd" (its pid file) cannot come
# from the machine's.
SMB_CONF = """\
# smb.conf of the host being tuned (a client of the peer's share)
[global]
   workgroup = WANTEST
   server string = tuned over the emulated wide-area path
   socket options = {legacy}
   pid directory = {base}/pid
   lock directory = {base}/lock
   state directory = {base}/state
   cache directory = {base}/cache
   load printers = no

[local]
   path = {base}/local
   read only = yes
"""


def size_str(n):
    if n is None:
        return "AUTO"
    return f"{n // (KI * KI)}M" if n % (KI * KI) == 0 else f"{n // KI}K"


def buffer_tokens(rcvbuf, sndbuf):
    """The probe's socket_options for one configuration (None = AUTO)."""
    toks = ["TCP_NODELAY"]
    if rcvbuf is not None:
        toks.append(f"SO_RCVBUF={rcvbuf}")
    if sndbuf is not None:
        toks.append(f"SO_SNDBUF={sndbuf}")
    return " ".join(toks)


def delay_lines_of(w):
    """Live processes whose command line names one of w's namespaces (the
    delay line is started with --ns-a/--ns-b NAME)."""
    return procs_naming([w.client_ns.encode(), w.server_ns.encode()])


class Host:
    """The tuned host in the client namespace of a WanPath, and the peer
    smbd in its server namespace."""

    def __init__(self, wan, srv, smbtuned, tmp_path):
        self.wan, self.srv, self.smbtuned = wan, srv, Path(smbtuned)
        self.base = Path(tmp_path) / "host"
        for d in ("pid", "lock", "state", "cache", "local", "home"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        self.smb_conf = self.base / "smb.conf"
        self.smb_conf.write_text(SMB_CONF.format(legacy=LEGACY, base=self.base))
        # Short: a unix socket path under it must fit in 107 bytes.
        self.state_dir = Path(tempfile.mkdtemp(prefix="smbtw-", dir="/tmp"))
        self.tmpdir = Path(tempfile.mkdtemp(prefix="smbtw-tmp-", dir="/tmp"))
        self.conf = self.base / "smbtuned.conf"
        self.conf.write_text(conf_text(
            {"url": q(srv.url), **PROBE},
            {"smb_conf": q(self.smb_conf), "state_dir": q(self.state_dir),
             "trials": q("client"), "apply": q("none"), "min_size": "16K", "max_size": "4M"}))
        self.nprobe = 0

    def env(self):
        # A private HOME: libsmbclient reads $HOME/.smb/smb.conf.
        return dict(os.environ, HOME=str(self.base / "home"), TMPDIR=str(self.tmpdir))

    def once(self):
        """smbtuned -c CONF --once --json in the client namespace:
        (report object, stderr, seconds)."""
        t0 = time.monotonic()
        r = self.wan.run("client", [str(self.smbtuned), "-c", str(self.conf), "--once",
                                    "--json"], timeout=ONCE_TIMEOUT, env=self.env())
        secs = time.monotonic() - t0
        assert r.returncode == 0, f"--once failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        lines = r.stdout.splitlines()
        assert len(lines) == 1, f"--json prints one line, got {r.stdout!r}\n{r.stderr}"
        return json.loads(lines[0]), r.stderr, secs

    def probe(self, socket_options):
        """One smbtuned --probe from the client namespace: (write, read) MB/s.
        A probe that hits its deadline gives lower bounds (only the
        smallest sizes do): they are kept, marked in the table."""
        self.nprobe += 1
        conf = self.base / f"probe-{self.nprobe}.conf"
        conf.write_text(conf_text({"url": q(self.srv.url), **PROBE,
                                   "socket_options": q(socket_options)},
                                  {"state_dir": q(self.state_dir)}))
        r = self.wan.run("client", [str(self.smbtuned), "--probe", "--json", "-c", str(conf)],
                         timeout=PROBE_TIMEOUT, env=self.env())
        # 2: a timeout (lower bounds), kept and marked below.
        assert r.returncode in (0, 2), f"probe ({socket_options}): {r.stdout}{r.stderr}"
        j = json.loads(r.stdout)
        assert j["outcome"] in ("ok", "timeout"), j
        # A physical bound, not a performance threshold: the bytes crossed
        # the emulated link.
        assert j["write_mbps"] < CEILING and j["read_mbps"] < CEILING, j
        return j["write_mbps"], j["read_mbps"], j["outcome"] == "timeout"

    def measure(self, rcvbuf, sndbuf, n):
        """n probes of one configuration: (mean write, mean read, samples)."""
        samples = [self.probe(buffer_tokens(rcvbuf, sndbuf)) for _ in range(n)]
        return (statistics.mean(s[0] for s in samples), statistics.mean(s[1] for s in samples),
                samples)

    def leftovers(self):
        out = [f"probe file left in the share: {p}"
               for p in sorted(self.srv.share_dir.rglob(PROBE_FILE_GLOB))]
        needles = [str(self.state_dir).encode(), str(self.conf).encode(),
                   str(self.tmpdir).encode()]
        out += [f"process {pid} still runs: {' '.join(a)}"
                for pid, a in procs_naming(needles).items()]
        out += [f"probe work dir left: {p}" for d in (self.tmpdir, self.state_dir / "probe")
                for p in sorted(d.glob("smbtuned-probe-*"))]
        return out

    def cleanup(self):
        shutil.rmtree(self.state_dir, ignore_errors=True)
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def run_on_wan(smbd_factory, smbtuned, tmp_path, body, sysctls=None):
    """Build the path and the peer, run body(host), take everything down,
    and check that nothing of the path is left. Returns body's result."""
    before = set(wanmod.own_ns_list())
    w = WanPath(tmp_path / "wan", rtt_ms=RTT_MS, rate_mbit=RATE_MBIT,
                sysctls={"client": sysctls} if sysctls else None)
    host = None
    with w:
        srv = smbd_factory(prefix_cmd=w.prefix("server"), bind_addr=w.server_addr,
                           extra_global=SMBD_GLOBAL)
        try:
            host = Host(w, srv, smbtuned, tmp_path)
            result = body(host)
            left = host.leftovers()
            assert not left, "left behind:\n" + "\n".join(left)
        finally:
            srv.stop()
            if host:
                host.cleanup()
    assert set(wanmod.own_ns_list()) == before, "a namespace of the path is left"
    assert not delay_lines_of(w), f"the delay line is left: {delay_lines_of(w)}"
    return result


def check_commit(host, before_bytes, obj):
    """What any commit must be: only our line changed, its other tokens
    kept in order, Samba reads back what the report says."""
    after_bytes = host.smb_conf.read_bytes()
    assert obj["committed"] is True, obj
    assert obj["before"]["value"] == LEGACY
    assert (obj["before"]["rcvbuf"], obj["before"]["sndbuf"]) == (8192, 8192)
    reason = only_socket_line_changed(before_bytes, after_bytes)
    assert reason is None, reason
    assert socket_value(after_bytes) == obj["after"]["value"]
    assert samba_value(host.smb_conf) == obj["after"]["value"]
    toks = obj["after"]["value"].split()
    others = [t for t in toks if not t.upper().startswith(("SO_RCVBUF=", "SO_SNDBUF="))]
    assert others == ["TCP_NODELAY", "IPTOS_LOWDELAY", "SO_KEEPALIVE"], obj["after"]["value"]


def search_lines(stderr):
    """The journal lines of the search's decisions (for the printout)."""
    return [l for l in stderr.splitlines()
            if re.search(r"converged|search finished|socket options:|stays|->", l)]


def print_once(title, obj, stderr, secs):
    a = obj["after"]
    print(f"\n== {title}")
    print(f"--once: {obj['samples']} samples, {obj['bytes'] / 1e6:.0f} MB moved, "
          f"{obj['seconds']:.1f} s in smbtuned ({secs:.1f} s wall)")
    print(f"  before  {obj['before']['value']}  (write {obj['before']['write_mbps']}, "
          f"read {obj['before']['read_mbps']} MB/s as sampled by the search)")
    print(f"  after   {a['value']}  (write {a['write_mbps']}, read {a['read_mbps']} MB/s "
          f"as sampled by the search)")
    for l in search_lines(stderr):
        print("  | " + l)


def print_row(name, w, r, samples, note=""):
    lb = "  (deadline: lower bound)" if any(s[2] for s in samples) else ""
    each = "  ".join(f"{s[0]:.2f}/{s[1]:.2f}" for s in samples)
    print(f"  {name:<10} {w:8.2f} {r:8.2f}    [{each}]{lb}{note}")


# ------------------------------------------------------------ the cases
# Module-level so that bench/tune-wan runs the same cases and prints the
# same numbers without pytest.

def sweep_case(host):
    """--once from the legacy line, then the sweep with the committed
    configuration's samples spread over it, all with the same probe.
    Prints the numbers."""
    before_bytes = host.smb_conf.read_bytes()
    obj, stderr, secs = host.once()
    check_commit(host, before_bytes, obj)
    a = obj["after"]

    # The emulated path's rate drifts over the minutes a sweep takes (one
    # run saw AUTO at 9.67 MB/s in the sweep and 7.62 a hundred seconds
    # later). The committed configuration's samples are therefore spread
    # over the sweep, before, among and after its points, so that both
    # sides of the comparison see the same path on average.
    sizes = [None] + SWEEP_SIZES
    at = {round(i * len(sizes) / (COMMITTED_SAMPLES - 1)) for i in range(COMMITTED_SAMPLES)}
    assert len(at) == COMMITTED_SAMPLES
    t0 = time.monotonic()
    sweep, csamples = {}, []
    for i in range(len(sizes) + 1):
        if i in at:
            csamples += host.measure(a["rcvbuf"], a["sndbuf"], 1)[2]
        if i < len(sizes):
            sweep[sizes[i]] = host.measure(sizes[i], sizes[i], SWEEP_SAMPLES)
    sweep_secs = time.monotonic() - t0
    cw = statistics.mean(s[0] for s in csamples)
    cr = statistics.mean(s[1] for s in csamples)

    best_w = max(v[0] for v in sweep.values())
    best_r = max(v[1] for v in sweep.values())
    arg_w = max(sweep, key=lambda k: sweep[k][0])
    arg_r = max(sweep, key=lambda k: sweep[k][1])

    print_once("40 ms / 100 Mbit/s, from the legacy line", obj, stderr, secs)
    print(f"sweep ({SWEEP_SAMPLES} samples each, mean; {sweep_secs:.0f} s), MB/s:")
    print(f"  {'both bufs':<10} {'write':>8} {'read':>8}    [write/read per sample]")
    for size, (w, r, s) in sweep.items():
        print_row(size_str(size), w, r, s)
    print(f"  best: write {best_w:.2f} ({size_str(arg_w)}), read {best_r:.2f} "
          f"({size_str(arg_r)})")
    print(f"committed SO_RCVBUF={size_str(a['rcvbuf'])} SO_SNDBUF={size_str(a['sndbuf'])} "
          f"({COMMITTED_SAMPLES} samples, mean):")
    print_row("committed", cw, cr, csamples,
              f"  = {cw / best_w:.1%} / {cr / best_r:.1%} of the best")
    return {"once": obj, "stderr": stderr, "best": (best_w, best_r), "committed": (cw, cr)}


def constrained_case(host):
    """--once with the client's tcp_rmem/tcp_wmem maximum lowered, then
    AUTO, 4M and the committed configuration. Prints the numbers."""
    for k, v in CONSTRAINED.items():
        got = host.wan.run("client", ["sysctl", "-n", k]).stdout.split()
        assert got == v.split(), f"{k} in the client namespace is {got}, not {v}"
    before_bytes = host.smb_conf.read_bytes()
    obj, stderr, secs = host.once()
    check_commit(host, before_bytes, obj)
    a = obj["after"]

    aw, ar, asamp = host.measure(None, None, SWEEP_SAMPLES)
    fw, fr, fsamp = host.measure(4 * KI * KI, 4 * KI * KI, SWEEP_SAMPLES)
    cw, cr, csamp = host.measure(a["rcvbuf"], a["sndbuf"], COMMITTED_SAMPLES)

    print_once("40 ms / 100 Mbit/s, client tcp_rmem/tcp_wmem max 131072", obj, stderr, secs)
    print(f"  {'both bufs':<10} {'write':>8} {'read':>8}    [write/read per sample]")
    print_row("AUTO", aw, ar, asamp)
    print_row("4M", fw, fr, fsamp)
    print_row("committed", cw, cr, csamp, f"  = {cw / fw:.1%} / {cr / fr:.1%} of 4M")
    return {"once": obj, "stderr": stderr, "auto": (aw, ar), "4M": (fw, fr),
            "committed": (cw, cr)}


# ------------------------------------------------------------------ tests

def test_once_commits_within_10pct_of_sweep(smbd_factory, smbtuned, tmp_path):
    """From the legacy line, the committed configuration is within 10% of
    the best of a sweep (AUTO and 64K..4M, both buffers alike), in writes
    and in reads.

    The sweep takes the MEAN of its SWEEP_SAMPLES samples per
    configuration, the committed configuration the mean of
    COMMITTED_SAMPLES: the same estimator on both sides. Taking the max
    would stack a second upward bias on top of picking the best of ten
    configurations, and measure the luckiest transfer rather than the
    configuration."""
    res = run_on_wan(smbd_factory, smbtuned, tmp_path, sweep_case)
    (best_w, best_r), (cw, cr) = res["best"], res["committed"]
    assert cw >= (1 - MARGIN) * best_w, f"committed write {cw:.2f} < 90% of best {best_w:.2f}"
    assert cr >= (1 - MARGIN) * best_r, f"committed read {cr:.2f} < 90% of best {best_r:.2f}"


def test_once_constrained_autotuning_commits_explicit(smbd_factory, smbtuned, tmp_path):
    """With the tuned host's tcp_rmem/tcp_wmem maximum at 128 KiB,
    autotuning cannot open the window the path needs (BDP 500 KB): the
    search itself must pick explicit sizes for both buffers (its end line
    says which, before any rule of the outcome's), and the committed configuration reads within 10% of a
    4M probe. A probe of AUTO shows the scenario is really constrained."""
    res = run_on_wan(smbd_factory, smbtuned, tmp_path, constrained_case, sysctls=CONSTRAINED)
    a = res["once"]["after"]
    assert a["rcvbuf"] is not None and a["sndbuf"] is not None, a
    # The search's own winner is explicit (its end line names it, before
    # the outcome's rules: the commit alone could hide a rule that
    # replaced a winning AUTO).
    won = re.findall(r"search finished after \d+ samples: (.*?), write", res["stderr"])
    assert len(won) == 1 and "auto" not in won[0], (won, res["stderr"])
    auto, four, committed = res["auto"], res["4M"], res["committed"]
    # Constrained for real: AUTO reads at most half of what 4M reads (the
    # client's SO_RCVBUF ranks reads).
    assert auto[1] <= 0.5 * four[1], f"AUTO read {auto[1]:.2f} vs 4M {four[1]:.2f}"
    assert committed[1] >= (1 - MARGIN) * four[1], \
        f"committed read {committed[1]:.2f} < 90% of 4M's {four[1]:.2f}"
