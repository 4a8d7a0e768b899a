"""smbtuned demo on a throwaway smbd.

Starts a private smbd (every file under a temporary directory, a free
loopback port) whose smb.conf carries the line old tuning guides
recommend, then lets smbtuned show it, rewrite its buffer sizes, and make
the running smbd apply the change. The machine's /etc/samba is not touched.
"""

import difflib
import os
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
    print("$ smbtuned " + " ".join(args[1:]), flush=True)
    p = subprocess.run(list(args), text=True, capture_output=True)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    print()
    if p.returncode != 0:
        raise SystemExit(f"demo: smbtuned exited {p.returncode}")


def main():
    with tempfile.TemporaryDirectory(prefix="smbtuned-demo-") as tmp:
        factory = SmbdFactory(Path(tmp) / "smbd")
        try:
            srv = factory(socket_options=LEGACY)
            print(f"A throwaway smbd (pid {srv.pid}) serves {srv.url}")
            print(f"its smb.conf ({srv.conf}) has the old tuning guides' line.\n")
            before = srv.conf.read_text()
            state = str(Path(tmp) / "state")
            conf = str(srv.conf)
            run(SMBTUNED, "--smb-conf", conf, "--show")
            run(SMBTUNED, "--smb-conf", conf, "--state-dir", state,
                "--set-buffers", "auto,auto", "--apply", "smbcontrol")
            run(SMBTUNED, "--smb-conf", conf, "--show")
            print("What changed in smb.conf:")
            sys.stdout.writelines(difflib.unified_diff(
                before.splitlines(True), srv.conf.read_text().splitlines(True),
                "smb.conf (before)", "smb.conf (after)"))
        finally:
            factory.stop_all()


if __name__ == "__main__":
    main()
