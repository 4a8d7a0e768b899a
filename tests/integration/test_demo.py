"""The README's main command: scripts/demo (here scripts/demo.py, the
part after installing and building) runs smbtuned --once on a throwaway
smbd. It must finish, change the socket options line and nothing else,
and leave no smbd and no file behind. No throughput is asserted: that is
bench/'s job."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEGACY = "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192"


def alive(pid):
    """Is pid a live process (not a zombie)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_demo_tunes_the_line_and_cleans_up(smbtuned):
    # The demo's own temporary directory goes under one of ours, on a
    # short path (the shadow smbds' socket paths must fit).
    with tempfile.TemporaryDirectory(prefix="smbtuned-t-", dir="/tmp") as tmp:
        p = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "demo.py"), "--tmp", tmp],
            env={**os.environ, "SMBTUNED": str(smbtuned)},
            capture_output=True, text=True, timeout=600)
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        pid = int(re.search(r"A throwaway smbd \(pid (\d+)\)", out).group(1))
        # the diff of smb.conf: the legacy line out, one tuned line in
        diff = out.split("What changed in smb.conf:\n", 1)[1].splitlines()
        removed = [l for l in diff if l.startswith("-") and not l.startswith("---")]
        added = [l for l in diff if l.startswith("+") and not l.startswith("+++")]
        assert removed == ["-   socket options = " + LEGACY], diff
        assert len(added) == 1 and added[0].startswith("+   socket options = "), diff
        line = added[0].split("= ", 1)[1]
        # the other options kept, in their order; the 8 KiB sizes gone
        assert line.startswith("TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE"), line
        assert "=8192" not in line, line
        # what it moved, said in its last words
        assert re.search(r"^\d+ samples, [\d.]+ MB moved, \d+ s$", out, re.M), out
        assert not alive(pid), f"the demo left smbd {pid} running"
        assert list(Path(tmp).iterdir()) == [], "the demo left files behind"
