"""smbtuned demo on a throwaway smbd.

Starts a private smbd (every file under a temporary directory, a free
loopback port) whose smb.conf carries the line old tuning guides
recommend, then runs one tuning cycle, `smbtuned --once`: candidates are
measured on shadow smbds (private copies on their own ports, so the
"production" smbd's clients never see a trial value), and the winner is
written into the socket options line and applied with smbcontrol. The
machine's /etc/samba is not touched.
"""

import argparse
import difflib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from smbd import SmbdFactory  # noqa: E402

SMBTUNED = os.environ.get("SMBTUNED", str(REPO / "build" / "daemon" / "smbtuned"))
LEGACY = "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192"


def run(*args):
    print("$ smbtuned " + " ".join(str(a) for a in args[1:]), flush=True)
    p = subprocess.run([str(a) for a in args], text=True)
    print()
    if p.returncode != 0:
        raise SystemExit(f"demo: smbtuned exited {p.returncode}")


def main():
    ap = argparse.ArgumentParser(description="smbtuned --once on a throwaway local smbd")
    # A short path: the shadow smbds' sockets live under the state
    # directory, and a socket's path is at most 107 bytes.
    ap.add_argument("--tmp", default="/tmp", metavar="DIR",
                    help="where the demo's temporary directory goes (default /tmp)")
    args = ap.parse_args()
    # A SIGTERM (or a timeout) must still stop the throwaway smbd: turn it
    # into an exception so that the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"demo: signal {signal.SIGTERM}"))
    with tempfile.TemporaryDirectory(prefix="smbtuned-demo-", dir=args.tmp) as tmp:
        tmp = Path(tmp)
        factory = SmbdFactory(tmp / "smbd")
        try:
            srv = factory(socket_options=LEGACY)
            print(f"A throwaway smbd (pid {srv.pid}) serves {srv.url}")
            print(f"its smb.conf ({srv.conf}) has the old tuning guides' line.\n")
            conf = tmp / "smbtuned.conf"
            # One 8 MiB write request a sample: on loopback 16 MiB samples
            # spread more (writes 14% against 8.5%, twice the stalls) and
            # the search took more of them (bench/README.md, the demo).
            conf.write_text(
                "probe {\n"
                f'    url = "{srv.url}"\n'
                "    size = 8M\n"
                "    deadline = 20\n"
                "}\n"
                "tune {\n"
                f'    smb_conf = "{srv.conf}"\n'
                f'    state_dir = "{tmp / "state"}"\n'
                "    max_size = 4M\n"
                "}\n")
            before = srv.conf.read_text()
            run(SMBTUNED, "-c", conf, "--show", "--smb-conf", srv.conf)
            run(SMBTUNED, "-c", conf, "--once")
            print("What changed in smb.conf:")
            sys.stdout.writelines(difflib.unified_diff(
                before.splitlines(True), srv.conf.read_text().splitlines(True),
                "smb.conf (before)", "smb.conf (after)"))
        finally:
            factory.stop_all()


if __name__ == "__main__":
    main()
