"""Self-test of the smbd fixture: it starts, serves its share, stops."""

import os
import subprocess

import pytest

from smbd import free_port

pytestmark = pytest.mark.smbd


def test_smbd_serves_share_and_keeps_to_tmp(smbd, tmp_path):
    assert smbd.alive()
    assert str(smbd.conf).startswith(str(tmp_path))
    assert str(smbd.share_dir).startswith(str(tmp_path))
    assert smbd.url == f"smb://127.0.0.1:{smbd.port}/share"
    src = tmp_path / "hello.txt"
    src.write_bytes(b"hello smbd\n")
    r = smbd.smbclient("-c", f"put {src} hello.txt")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (smbd.share_dir / "hello.txt").read_bytes() == b"hello smbd\n"
    # The pid file is where smbcontrol looks, under tmp_path.
    pidfile = smbd.base / "pid" / "smbd.pid"
    assert int(pidfile.read_text().split()[0]) == smbd.pid
    r = smbd.smbcontrol("ping")
    assert r.returncode == 0, r.stdout + r.stderr
    # testparm with the fixture's config sees our directories, not /var.
    r = subprocess.run(["testparm", "-s", "--parameter-name=lock directory", str(smbd.conf)],
                       capture_output=True, text=True)
    assert r.stdout.strip() == str(smbd.base / "lock")


def test_socket_options_reach_the_config(smbd_factory):
    srv = smbd_factory(socket_options="TCP_NODELAY SO_RCVBUF=131072")
    r = subprocess.run(["testparm", "-s", "--parameter-name=socket options", str(srv.conf)],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "TCP_NODELAY SO_RCVBUF=131072"


def test_two_servers_and_stop(tmp_path):
    """The factory stops every smbd it started, by PID, children included."""
    from smbd import SmbdFactory

    if os.geteuid() != 0:
        pytest.skip("a real smbd needs root")
    f = SmbdFactory(tmp_path / "f")
    try:
        a = f()
        b = f()
        assert a.port != b.port
        # Hold a connection so that a forked child exists at stop time.
        hold = subprocess.Popen(
            ["/usr/bin/smbclient", "-s", str(a.client_conf), "-N", "-p", str(a.port), a.unc()],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=a.env())
        try:
            r = a.smbclient("-c", "ls")
            assert r.returncode == 0
            pids = [a.pid, b.pid]
        finally:
            f.stop_all()
            hold.kill()
            hold.wait()
    finally:
        f.stop_all()
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), f"smbd {pid} still running"
    # No process left with our configs.
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = open(f"/proc/{p}/cmdline", "rb").read()
            except OSError:
                continue
            assert str(tmp_path).encode() not in cmd or int(p) == os.getpid(), cmd


def test_free_port_is_bindable():
    import socket
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_fixture_failure_message_names_log(smbd_factory):
    """A config smbd rejects gives an error with smbd's log tail."""
    from smbd import SmbdError
    with pytest.raises(SmbdError) as ei:
        smbd_factory(extra_global="   smb ports = 0", start_timeout=5)
    assert "smbd" in str(ei.value)
