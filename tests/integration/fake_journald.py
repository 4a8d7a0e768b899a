"""fake_journald.py OUT CMD...: run CMD as a service's process would run
under systemd, with a journald of our own, and write every native entry
it sends to OUT as JSON lines (one object a datagram, NAME: value).

Needs root: in a mount namespace of its own (run it under `unshare
--mount --propagation private`), a tmpfs over /run/systemd holds the
datagram socket sd_journal_sendv() sends to (journal/socket), which hides
the machine's own journald, if any, from CMD only. JOURNAL_STREAM names
our stderr, as systemd names the stream it connects a service to, so
lib/journal.c picks native entries. Exits with CMD's exit code."""
import json
import os
import select
import socket
import subprocess
import sys

SOCK = "/run/systemd/journal/socket"


def parse(dgram):
    """The native protocol: NAME=value lines, or NAME, then a 64-bit
    little-endian length and the value, for values with a newline."""
    entry, i = {}, 0
    while i < len(dgram):
        nl = dgram.index(b"\n", i)
        line = dgram[i:nl]
        if b"=" in line:
            name, value = line.split(b"=", 1)
            i = nl + 1
        else:
            n = int.from_bytes(dgram[nl + 1:nl + 9], "little")
            name, value = line, dgram[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        entry[name.decode()] = value.decode(errors="replace")
    return entry


def main():
    out, cmd = sys.argv[1], sys.argv[2:]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run/systemd"],
                   check=True)
    os.mkdir("/run/systemd/journal")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(SOCK)
    st = os.fstat(2)
    env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    child = subprocess.Popen(cmd, env=env)
    entries = []
    # read while it runs: a full socket would make it fall back to stderr
    while True:
        done = child.poll() is not None
        while select.select([s], [], [], 0 if done else 0.1)[0]:
            entries.append(parse(s.recv(1 << 20)))
        if done:
            break
    with open(out, "w") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
