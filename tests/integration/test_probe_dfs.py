"""The probe logs on to the url's server only: DFS referrals are not followed.

libsmbclient follows an msdfs link in the probe's path and an `msdfs proxy`
share to the server they name, and logs on there with the probe's user and
password without asking the auth function again (lib/connect_guard.h). Here
server A (127.0.0.1) has both, pointing at server B (127.0.0.2), both on
port 445 (libsmbclient follows a referral to the default port), in a network
namespace of the test's own; B logs every authentication (Auth: lines at
debug level 3). The probe must fail with a message naming the referral, and
B must see no logon at all.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netem"))
import wan as wanmod  # noqa: E402

pytestmark = pytest.mark.smbd

USER = "daemon"  # an account every Debian system has; its password lives only in the test passdbs
PASSWORD = "Probe-pw-dfs-41c2"
A_ADDR, B_ADDR = "127.0.0.1", "127.0.0.2"


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30, stdin=subprocess.DEVNULL)


@pytest.fixture
def netns():
    """A namespace named like tests/netem's (a run killed before its cleanup
    is swept by the next WanPath), its loopback up with a second address."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    wanmod.remove_stale()
    ns = f"{wanmod.NS_PREFIX}-{os.getpid()}-{next(wanmod._counter)}-s"
    r = ip("netns", "add", ns, check=False)
    if r.returncode != 0:
        pytest.skip(f"cannot make a network namespace: {r.stderr.strip()}")
    try:
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "addr", "add", f"{B_ADDR}/8", "dev", "lo")
        yield ns
    finally:
        wanmod._kill_ns_procs(ns)
        wanmod._del_ns(ns)


def auth_lines(srv):
    """B's authentications and tree connects so far."""
    out = []
    for p in [srv.stdout_path, *sorted((srv.base / "log").glob("log.*"))]:
        if p.is_file():
            out += [line.strip() for line in p.read_text(errors="replace").splitlines()
                    if "Auth:" in line or "connect to service" in line]
    return out


@pytest.mark.parametrize("where", ["url", "directory", "proxy"])
def test_dfs_referral_is_not_followed(smbtuned, smbd_factory, tmp_path, netns, where):
    prefix = ["ip", "netns", "exec", netns]
    users = {USER: PASSWORD}
    b = smbd_factory(name="B", prefix_cmd=prefix, bind_addr=B_ADDR, port=445, users=users,
                     extra_args=["--debuglevel=3"])
    a = smbd_factory(name="A", prefix_cmd=prefix, bind_addr=A_ADDR, port=445, users=users,
                     shares={"dfs": {"msdfs root": "yes"},
                             "proxy": {"msdfs root": "yes",
                                       "msdfs proxy": f"\\{B_ADDR}\\share"}})
    os.symlink(f"msdfs:{B_ADDR}\\share", a.shares["dfs"] / "link")
    url, directory = {"url": (f"smb://{A_ADDR}/dfs/link", None),
                      "directory": (f"smb://{A_ADDR}/dfs", "link"),
                      "proxy": (f"smb://{A_ADDR}/proxy", None)}[where]
    cred = tmp_path / "cred"
    cred.write_text(f"username = {USER}\npassword = {PASSWORD}\n")
    cred.chmod(0o600)
    conf = tmp_path / "probe.conf"
    conf.write_text("probe {\n    size = \"65536\"\n"
                    + (f'    directory = "{directory}"\n' if directory else "")
                    + f'}}\ntune {{\n    state_dir = "{tmp_path / "state"}"\n}}\n')
    before = auth_lines(b)
    r = subprocess.run([*prefix, str(smbtuned), "--probe", "--json", "-c", str(conf),
                        "--url", url, "--credentials", str(cred)],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    seen = auth_lines(b)[len(before):]

    # Nothing reached B: no logon, no tree connect, no probe file.
    assert seen == [], f"B got a logon through the referral:\n" + "\n".join(seen)
    assert list(b.share_dir.iterdir()) == []
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["outcome"] == "error"
    assert (f"the server referred the probe to {B_ADDR} port 445 (a DFS link or an msdfs "
            f"proxy share): not followed, the probe logs on to {A_ADDR} only") in r.stderr, r.stderr

    # B logs logons (the check above means something): smbclient follows
    # the same referral and B sees it.
    r = a.smbclient("-c", "ls link\\*" if where != "proxy" else "ls",
                    share="proxy" if where == "proxy" else "dfs", user=(USER, PASSWORD))
    assert r.returncode == 0, r.stdout + r.stderr
    seen = auth_lines(b)[len(before):]
    assert any(f"[{USER}]" in line and "NT_STATUS_OK" in line for line in seen), seen


# A resolver for the test's namespace: the first A query for any name gets
# the addresses of argv[1], every later one those of argv[2] (a name whose
# addresses changed between the probe's own look-up and libsmbclient's);
# AAAA gets no answer.
MOVING_DNS = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("ready", flush=True)
addrs = sys.argv[1].split(",")
while True:
    data, peer = s.recvfrom(512)
    end = 12
    while data[end]:
        end += 1 + data[end]
    qtype = struct.unpack(">H", data[end + 1:end + 3])[0]
    answers = []
    if qtype == 1:
        answers = [b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(a)
                   for a in addrs]
        addrs = sys.argv[2].split(",")
    head = struct.pack(">HHHHHH", struct.unpack(">H", data[:2])[0], 0x8180, 1,
                       len(answers), 0, 0)
    s.sendto(head + data[12:end + 5] + b"".join(answers), peer)
"""


@pytest.mark.parametrize("first,later,server", [
    ("127.0.0.3", "127.0.0.1", A_ADDR),
    # nothing listens at the first address: a connection to the url's
    # host was tried, and failed, before the refusal
    ("127.0.0.1,127.0.0.3", "127.0.0.1,127.0.0.2", B_ADDR),
], ids=["moved", "first-address-dead"])
def test_host_found_elsewhere_is_not_called_a_referral(smbtuned, smbd_factory, tmp_path, netns,
                                                       first, later, server):
    """The probe connects only to the addresses it resolved itself; when
    libsmbclient's own look-up of the name gives another one, the error says
    so instead of blaming a DFS referral the server never sent."""
    prefix = ["ip", "netns", "exec", netns]
    a = smbd_factory(name="A", prefix_cmd=prefix, bind_addr=server)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\n")
    dns = subprocess.Popen([*prefix, "/usr/bin/python3", "-c", MOVING_DNS, first, later],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        assert dns.stdout.readline() == "ready\n"
        conf = tmp_path / "probe.conf"
        conf.write_text(f'probe {{\n    size = "65536"\n}}\n'
                        f'tune {{\n    state_dir = "{tmp_path / "state"}"\n}}\n')
        # the namespace's resolver, in a mount namespace of this run only
        r = subprocess.run([*prefix, "unshare", "-m", "sh", "-c",
                            'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"', "sh",
                            str(resolv), str(smbtuned), "--probe", "--json", "-c", str(conf),
                            "--url", f"smb://probe.example.test:{a.port}/share"],
                           capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    finally:
        dns.kill()
        dns.wait()
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["outcome"] == "error"
    assert "referred" not in r.stderr, r.stderr
    assert (f"probe.example.test is now at {server} port {a.port}, not at the address the "
            f"probe resolved a moment before") in r.stderr, r.stderr
