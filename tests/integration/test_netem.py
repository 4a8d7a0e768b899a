"""The emulated wide-area path (tests/netem): it carries traffic with the
configured delay, and it leaves nothing behind, also when its owner is
interrupted or killed. Its accuracy (RTT, goodput) is measured by
bench/probe-accuracy, not asserted here."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

NETEM = Path(__file__).resolve().parents[1] / "netem"
sys.path.insert(0, str(NETEM))
import wan  # noqa: E402

PY = "/usr/bin/python3"

# measures the emulated path's delay and rate: alone (scripts/test)
pytestmark = pytest.mark.serial


@pytest.fixture(autouse=True)
def _root():
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        pytest.skip("needs root and /dev/net/tun")


def namespaces():
    return set(wan._ns_list())


def delaylines():
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"/delayline"):
                out.append(int(p))
    return out


RTT_PROBE = textwrap.dedent("""
    import socket, sys, time
    addr, port = sys.argv[1], int(sys.argv[2])
    best = None
    for _ in range(5):
        t = time.monotonic()
        socket.create_connection((addr, port), timeout=5).close()
        d = time.monotonic() - t
        best = d if best is None else min(best, d)
    print(best * 1000)
""")

LISTEN = textwrap.dedent("""
    import socket, sys
    s = socket.socket()
    s.bind((sys.argv[1], 0))
    s.listen(16)
    print(s.getsockname()[1], flush=True)
    sys.stdin.read()
""")


def test_path_carries_traffic_with_delay_and_cleans_up(tmp_path):
    before = namespaces()
    lines_before = set(delaylines())
    with wan.WanPath(tmp_path, rtt_ms=40, rate_mbit=100) as w:
        assert {w.client_ns, w.server_ns} <= namespaces()
        ours = set(delaylines()) - lines_before
        assert ours, "no delay line process while the path is up"
        # The addresses exist only inside the namespaces.
        out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        assert w.server_addr not in out and w.client_addr not in out
        srv = subprocess.Popen(w.prefix("server") + [PY, "-c", LISTEN, w.server_addr],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            port = int(srv.stdout.readline())
            r = w.run("client", [PY, "-c", RTT_PROBE, w.server_addr, str(port)], timeout=60)
            assert r.returncode == 0, r.stderr
            rtt_ms = float(r.stdout)
        finally:
            srv.kill()
            srv.wait()
        # A TCP connect takes one round trip: never less than the delay
        # (minus the sub-millisecond early-wake-up allowance of the line).
        assert rtt_ms >= 39.5
    assert namespaces() == before
    assert "forwarded" in w.stats()
    assert not ours & set(delaylines()), "the delay line outlived its path"


def owner_script(tmp_path):
    # SIGINT's default handler even where the test runs with SIGINT
    # ignored (a background job of a non-interactive shell): Python leaves
    # an inherited SIG_IGN in place, and the owner would not be interrupted.
    return textwrap.dedent(f"""
        import signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(NETEM)!r})
        import wan
        with wan.WanPath({str(tmp_path)!r}) as w:
            print(w.client_ns, w.server_ns, w.proc.pid, flush=True)
            time.sleep(120)
    """)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_owner_cleans_up(tmp_path, sig):
    p = subprocess.Popen([PY, "-c", owner_script(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        c, s, dl = p.stdout.readline().split()
        assert {c, s} <= namespaces()
        p.send_signal(sig)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not ({c, s} & namespaces())
    assert not Path(f"/proc/{dl}").exists()


def test_killed_owner_leaves_nothing_after_next_start(tmp_path):
    p = subprocess.Popen([PY, "-c", owner_script(tmp_path / "a")], stdout=subprocess.PIPE,
                         text=True)
    try:
        c, s, dl = p.stdout.readline().split()
        p.kill()  # no cleanup code runs
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # The delay line dies with its owner (PR_SET_PDEATHSIG) ...
    for _ in range(100):
        if not Path(f"/proc/{dl}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{dl}").exists()
    # ... and the next path removes the namespaces the dead owner left.
    assert {c, s} <= namespaces()
    with wan.WanPath(tmp_path / "b"):
        assert not ({c, s} & namespaces())
