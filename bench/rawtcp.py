#!/usr/bin/python3
"""rawtcp: raw TCP goodput with given server socket buffers, the client at
its defaults.

    bench/rawtcp.py server [--bind ADDR] [--port N] [--rcvbuf N|auto]
                           [--sndbuf N|auto] [--idle S]
    bench/rawtcp.py client ADDR PORT put|get [--seconds 8] [--omit 3]
                                             [--bytes N]

The server sets SO_RCVBUF and SO_SNDBUF (when not "auto": autotuning) on
its LISTENING socket before listen(), as smbd does with its `socket
options` line: each accepted connection inherits them, and the window
scale offered in the SYN-ACK follows from them. It prints "listening PORT"
once it listens, then serves one connection at a time until killed or
until no client came for --idle seconds. The client sets no buffer option
(kernel autotuning, capped by its namespace's tcp_rmem / tcp_wmem, as for
smbclient).

put: client -> server; get: server -> client. The sender sends for
omit + seconds, or with --bytes exactly that many bytes (the size of an
SMB transfer it is compared with), then shuts its side down. The RECEIVER
counts: it leaves out the first --omit seconds after its first byte (slow
start, like iperf3 -O) and divides the bytes received after that by the
time from there to its last byte; a put's receiver (the server) sends its count back
to the client. The client prints one JSON line: direction, mb_s (10^6
bytes/s), bytes, seconds, counted_by. Every socket has a timeout: nothing
waits forever; an error is a message on stderr and exit status 1.
"""

import argparse
import json
import os
import socket
import sys
import time

# 1 MiB a call: Python's per-call cost stays far below 120 MB/s, and SMB's
# payloads are as large. Where the send buffer is the limit the write size
# matters: on 40 ms / 1 Gbit/s with autotuning iperf3 reached 68 MB/s with
# -l 1M (this: 68-70) and 75 with its default 128 KiB.
CHUNK = 1 << 20
TIMEOUT = 30.0  # seconds one socket call may block
HEADER = 32  # the client's request: "put|get OMIT SECONDS BYTES", blank-padded
MAX_BYTES = 1 << 40  # --bytes at most; 0: by --seconds
RESULT = 64  # a put's count from the server: "BYTES SECONDS", blank-padded


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise RuntimeError(f"connection closed after {len(buf)} of {n} bytes")
        buf += part
    return buf


def source(sock, seconds, nbytes=0):
    """Send for this many seconds, or (nbytes > 0) exactly nbytes, the same
    random 1 MiB again and again, then shut the sending side down: the
    bytes sent."""
    buf = memoryview(os.urandom(CHUNK))
    sent, end = 0, time.monotonic() + seconds
    while (sent < nbytes) if nbytes else (time.monotonic() < end):
        # blocks until some of it fits: the send buffer is the limit
        sent += sock.send(buf[:min(CHUNK, nbytes - sent)] if nbytes else buf)
    sock.shutdown(socket.SHUT_WR)
    return sent


def sink(sock, omit):
    """Receive until the sender shuts down: (bytes, seconds) after the
    first omit seconds (counted from the first byte) up to the last byte."""
    view = memoryview(bytearray(CHUNK))
    total, first, mark, last = 0, None, None, None
    while True:
        n = sock.recv_into(view)
        now = time.monotonic()
        if n == 0:
            break
        total += n
        if first is None:
            first = now
        if mark is None and now - first >= omit:
            mark = (now, total)  # bytes up to here belong to the part left out
        last = (now, total)
    if mark is None or last[0] <= mark[0]:
        raise RuntimeError(f"{total} bytes, nothing after the first {omit:g} s")
    return last[1] - mark[1], last[0] - mark[0]


def parse_request(head):
    words = head.decode("ascii", "replace").split()
    if len(words) != 4 or words[0] not in ("put", "get"):
        raise ValueError(f"bad request {head!r}")
    omit, seconds, nbytes = float(words[1]), float(words[2]), int(words[3])
    if not (0 <= omit <= 600 and 0 < seconds <= 3600 and 0 <= nbytes <= MAX_BYTES):
        raise ValueError(f"bad request {head!r}")
    return words[0], omit, seconds, nbytes


def serve_one(conn):
    direction, omit, seconds, size = parse_request(recv_exact(conn, HEADER))
    if direction == "put":
        nbytes, secs = sink(conn, omit)
        what = f"received {nbytes} bytes in {secs:.2f} s after the first {omit:g} s"
    else:
        t0 = time.monotonic()
        sent = source(conn, omit + seconds, size)
        what = f"sent {sent} bytes in {time.monotonic() - t0:.2f} s"
    # Logged before the client hears the end: it may kill us right after.
    rcv = conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    snd = conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    sys.stderr.write(f"rawtcp: {direction}: {what}; then SO_RCVBUF {rcv} SO_SNDBUF {snd}\n")
    sys.stderr.flush()
    if direction == "put":
        conn.sendall(f"{nbytes} {secs:.6f}".ljust(RESULT).encode())
    else:
        while conn.recv(CHUNK):  # the client closes when it has it all
            pass


def server(a):
    family = socket.AF_INET6 if ":" in a.bind else socket.AF_INET
    lsock = socket.socket(family, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((a.bind, a.port))
    # After bind, before listen, as smbd's listener gets its socket options.
    if a.rcvbuf is not None:
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    if a.sndbuf is not None:
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, a.sndbuf)
    lsock.listen(16)
    lsock.settimeout(a.idle)
    print(f"listening {lsock.getsockname()[1]}", flush=True)
    while True:
        try:
            conn, _ = lsock.accept()
        except socket.timeout:
            sys.stderr.write(f"rawtcp: no client for {a.idle:g} s, exiting\n")
            return 0
        conn.settimeout(TIMEOUT)
        try:
            serve_one(conn)
        except (OSError, ValueError, RuntimeError) as e:  # this connection only
            sys.stderr.write(f"rawtcp: connection failed: {e}\n")
        finally:
            conn.close()


def client(a):
    req = f"{a.direction} {a.omit:g} {a.seconds:g} {a.bytes}"
    if len(req) > HEADER:  # the server reads exactly HEADER bytes
        raise ValueError(f"request {req!r} longer than {HEADER} bytes: fewer digits")
    sock = socket.create_connection((a.addr, a.port), timeout=TIMEOUT)  # no buffer options
    try:
        sock.sendall(req.ljust(HEADER).encode())
        if a.direction == "put":
            source(sock, a.omit + a.seconds, a.bytes)
            words = recv_exact(sock, RESULT).decode("ascii", "replace").split()
            if len(words) != 2:
                raise RuntimeError(f"bad result from the server: {words!r}")
            nbytes, secs = int(words[0]), float(words[1])
            counted_by = "server"
        else:
            nbytes, secs = sink(sock, a.omit)
            counted_by = "client"
    finally:
        sock.close()
    if secs <= 0:
        raise RuntimeError(f"{nbytes} bytes in {secs} s")
    print(json.dumps({"direction": a.direction, "mb_s": nbytes / secs / 1e6, "bytes": nbytes,
                      "seconds": secs, "counted_by": counted_by}))
    return 0


def buf_arg(s):
    if s == "auto":
        return None
    n = int(s)  # 0 too: the kernel's minimum, as for smbd
    if not 0 <= n <= 1 << 30:
        raise argparse.ArgumentTypeError(f"{s}: not in 0..2^30")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    s.add_argument("--rcvbuf", type=buf_arg, default=None, help="bytes, or auto (default)")
    s.add_argument("--sndbuf", type=buf_arg, default=None, help="bytes, or auto (default)")
    s.add_argument("--idle", type=float, default=300.0,
                   help="exit when no client came for this many seconds")
    c = sub.add_parser("client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("direction", choices=("put", "get"))
    c.add_argument("--seconds", type=float, default=8.0, help="measured, after --omit")
    c.add_argument("--omit", type=float, default=3.0, help="left out at the start")
    c.add_argument("--bytes", type=int, default=0,
                   help="send exactly this many bytes (0: for --omit + --seconds)")
    a = ap.parse_args()
    if a.mode == "client" and not (0 <= a.omit <= 600 and 0 < a.seconds <= 3600
                                   and 0 <= a.bytes <= MAX_BYTES):
        ap.error(f"--omit must be in 0..600, --seconds in (0, 3600], --bytes in 0..{MAX_BYTES}")
    try:
        return server(a) if a.mode == "server" else client(a)
    except (OSError, ValueError, RuntimeError) as e:
        sys.stderr.write(f"rawtcp {a.mode}: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
