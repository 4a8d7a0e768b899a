"""The emulated wide-area path: two network namespaces joined by delayline.

    with WanPath(tmp_path, rtt_ms=40, rate_mbit=100) as wan:
        wan.prefix("server")  -> ["ip", "netns", "exec", <server ns>]
        wan.server_addr       -> "10.199.0.2" (exists only in the server ns)
        wan.client_addr       -> "10.199.0.1" (exists only in the client ns)
        wan.run("client", [...])  -> subprocess.run inside the client ns

smbd runs in the server namespace, the probe and smbclient in the client
namespace:

    smbd_factory(prefix_cmd=wan.prefix("server"), bind_addr=wan.server_addr,
                 extra_global=wan.SMBD_GLOBAL)

smbd finds no usable interface on a TUN device (it has no broadcast flag:
"WARNING: no network interfaces found", then "open_sockets_smbd: No sockets
available to bind to"), so SMBD_GLOBAL makes it listen on every address of
the server namespace, which only has lo and the emulated link.

The addresses exist only inside the two namespaces this creates, so nothing
sent to them can leave the machine. Each namespace also has its own `lo`.

Cleanup: stop() (the context manager's exit) ends the delay line, kills
any process still inside the two namespaces (only we put processes there)
and deletes them, also when the test failed or was interrupted (SIGINT,
SIGTERM). If this process is SIGKILLed the delay line dies with it
(PR_SET_PDEATHSIG) and the next WanPath removes the namespaces left over,
recognised by their name, which carries the dead owner's PID.

Usable as a script too (for the benchmarks and by hand):
    python3 tests/netem/wan.py --rtt-ms 40 --rate-mbit 100 -- CMD...
runs CMD with SMBT_WAN_CLIENT_NS/SERVER_NS/CLIENT_ADDR/SERVER_ADDR set, then
tears everything down.
"""

import argparse
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "delayline.c"
NS_PREFIX = "smbtw"
NS_RE = re.compile(r"^%s-(\d+)-(\d+)-[cs]$" % NS_PREFIX)
DEV = "wan0"
CLIENT_ADDR = "10.199.0.1"
SERVER_ADDR = "10.199.0.2"
MTU = 1500
# The TUN devices drop when their queue is full instead of pushing back on
# the sender: a long queue keeps drops at the emulated bottleneck only.
TXQUEUELEN = 10000
# What smbd in the server namespace needs in [global] (see above).
SMBD_GLOBAL = "   bind interfaces only = no"
_counter = itertools.count()


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30, stdin=subprocess.DEVNULL)


def build_delayline(outdir):
    """Compile delayline.c into outdir (a test's own directory)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    exe = outdir / "delayline"
    if not exe.exists() or exe.stat().st_mtime < SOURCE.stat().st_mtime:
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SOURCE)],
                       check=True, capture_output=True, text=True, timeout=120)
    return exe


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ns_list():
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def own_ns_list():
    """This process's namespaces: another test run's (in parallel on the
    same machine) come and go on their own."""
    return [ns for ns in _ns_list()
            if (m := NS_RE.match(ns)) and int(m.group(1)) == os.getpid()]


def _kill_ns_procs(ns):
    """Kill every process inside namespace ns (ours: only we start them there)."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
        pids = [p for p in pids if p != os.getpid()]
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def _del_ns(ns, wait_s=15.0):
    """Delete namespace ns, retrying while `ip netns del` fails: the
    namespace file stays busy for a moment after the processes in it were
    killed (seen in CI: both namespaces of a path left behind, deleted
    fine by the next path's remove_stale a minute later)."""
    deadline = time.monotonic() + wait_s
    while True:
        r = _ip("netns", "del", ns, check=False)
        if ns not in _ns_list():
            return
        if time.monotonic() >= deadline:
            sys.stderr.write(f"wan: cannot delete namespace {ns}: {r.stderr.strip()}\n")
            return
        _kill_ns_procs(ns)
        time.sleep(0.2)


def remove_stale():
    """Delete namespaces left by a WanPath whose process has died."""
    for ns in _ns_list():
        m = NS_RE.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _kill_ns_procs(ns)
            _del_ns(ns)


class WanPath:
    """rtt_ms: round-trip delay (half each way); rate_mbit: link rate in
    each direction; queue_bytes: tail-drop queue per direction (default: one
    bandwidth-delay product); sysctls: {"client"|"server": {name: value}}
    applied inside that namespace (tcp_no_metrics_save=1 by default in both,
    so that one connection's cached ssthresh cannot steer the next one's)."""

    def __init__(self, workdir, rtt_ms=40.0, rate_mbit=100.0, queue_bytes=None, sysctls=None,
                 max_seconds=3600):
        self.workdir = Path(workdir)
        self.rtt_ms = float(rtt_ms)
        self.rate_mbit = float(rate_mbit)
        self.queue_bytes = queue_bytes
        self.max_seconds = max_seconds
        self.sysctls = {"client": {"net.ipv4.tcp_no_metrics_save": "1"},
                        "server": {"net.ipv4.tcp_no_metrics_save": "1"}}
        for side, kv in (sysctls or {}).items():
            self.sysctls[side].update(kv)
        tag = f"{NS_PREFIX}-{os.getpid()}-{next(_counter)}"
        self.ns = {"client": tag + "-c", "server": tag + "-s"}
        self.client_ns = self.ns["client"]
        self.server_ns = self.ns["server"]
        self.client_addr = CLIENT_ADDR
        self.server_addr = SERVER_ADDR
        self.proc = None
        self.created = []
        self.log_path = self.workdir / f"delayline-{tag}.log"
        self._old_sigterm = None

    def prefix(self, side):
        return ["ip", "netns", "exec", self.ns[side]]

    def run(self, side, argv, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.prefix(side) + list(argv), **kw)

    def start(self):
        remove_stale()
        exe = build_delayline(self.workdir)
        self._trap_sigterm()
        try:
            for side in ("client", "server"):
                _ip("netns", "add", self.ns[side])
                self.created.append(self.ns[side])
                _ip("-n", self.ns[side], "link", "set", "lo", "up")
                for k, v in self.sysctls[side].items():
                    self.run(side, ["sysctl", "-q", "-w", f"{k}={v}"], check=True)
            argv = [str(exe), "--ns-a", self.client_ns, "--ns-b", self.server_ns, "--dev", DEV,
                    "--delay-ms", str(self.rtt_ms / 2), "--rate-mbit", str(self.rate_mbit),
                    "--max-seconds", str(self.max_seconds)]
            if self.queue_bytes is not None:
                argv += ["--queue-bytes", str(self.queue_bytes)]
            self._log = open(self.log_path, "w")
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log,
                                         stdin=subprocess.DEVNULL, text=True)
            line = self.proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"delayline did not start: {self.log_path.read_text()}")
            for side, addr, peer in (("client", CLIENT_ADDR, SERVER_ADDR),
                                     ("server", SERVER_ADDR, CLIENT_ADDR)):
                n = self.ns[side]
                _ip("-n", n, "link", "set", DEV, "mtu", str(MTU), "txqueuelen", str(TXQUEUELEN))
                _ip("-n", n, "addr", "add", addr, "peer", peer, "dev", DEV)
                _ip("-n", n, "link", "set", DEV, "up")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.proc.stdout.close()
            self._log.close()
            self.proc = None
        for ns in self.created:
            _kill_ns_procs(ns)
            _del_ns(ns)
        self.created = []
        self._untrap_sigterm()

    def stats(self):
        """The delay line's exit statistics (after stop())."""
        return self.log_path.read_text() if self.log_path.exists() else ""

    # SIGTERM normally ends Python without running `finally` blocks; turn it
    # into KeyboardInterrupt while a path exists so that stop() still runs.
    def _trap_sigterm(self):
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._old_sigterm = signal.SIG_DFL

            def handler(signum, frame):
                raise KeyboardInterrupt("SIGTERM")
            try:
                signal.signal(signal.SIGTERM, handler)
            except ValueError:  # not the main thread
                self._old_sigterm = None

    def _untrap_sigterm(self):
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rtt-ms", type=float, default=40.0)
    ap.add_argument("--rate-mbit", type=float, default=100.0)
    ap.add_argument("--queue-bytes", type=int, default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    import tempfile
    with tempfile.TemporaryDirectory(prefix="smbt-wan-") as tmp:
        with WanPath(a.workdir or tmp, a.rtt_ms, a.rate_mbit, a.queue_bytes) as wan:
            env = dict(os.environ, SMBT_WAN_CLIENT_NS=wan.client_ns,
                       SMBT_WAN_SERVER_NS=wan.server_ns, SMBT_WAN_CLIENT_ADDR=wan.client_addr,
                       SMBT_WAN_SERVER_ADDR=wan.server_addr)
            rc = subprocess.run(cmd, env=env).returncode
        sys.stderr.write(wan.stats())
    return rc


if __name__ == "__main__":
    sys.exit(main())
