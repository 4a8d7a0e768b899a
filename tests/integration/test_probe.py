"""smbtuned --probe against a real smbd: rates, cleanup, every outcome from a
real cause, client isolation, and the emulated wide-area path.

No test here checks a rate against a threshold (that is bench/probe-accuracy's
job); rates are only required to be positive, and on the emulated path to
stay under the link's physical ceiling, which proves the traffic crossed it.
"""

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from daemon_util import made_dir, record_made, records
from smbd import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netem"))
from wan import SMBD_GLOBAL, WanPath  # noqa: E402

pytestmark = pytest.mark.smbd

PREFIX = ".smbtuned-probe-"
KEYS = {"outcome", "write_mbps", "read_mbps", "write_bytes", "read_bytes", "write_s", "read_s",
        "write_startup_bytes", "write_startup_s", "read_startup_bytes", "read_startup_s",
        "write_wait_s", "read_wait_s", "write_pace_bps"}
SIZE = 8 * 1024 * 1024
USER = "daemon"  # an account every Debian system has; its password lives only in the test passdb
PASSWORD = "Probe-pw-7c1f"


def probe_conf(tmp_path, name="probe.conf", **opts):
    """A config file with a probe section; values are written as given. The
    state directory (where the probe makes its private directories) is the
    test's own."""
    opts.setdefault("size", str(SIZE))
    body = "".join(f'    {k} = "{v}"\n' for k, v in opts.items())
    p = tmp_path / name
    p.write_text("probe {\n" + body + "}\n"
                 f'tune {{\n    state_dir = "{tmp_path / "state"}"\n}}\n')
    return p


def run_probe(smbtuned, conf, url=None, credentials=None, prefix=(), env=None, timeout=120,
              json_out=True):
    cmd = [*prefix, str(smbtuned), "--probe", "-c", str(conf)]
    if url:
        cmd += ["--url", url]
    if credentials:
        cmd += ["--credentials", str(credentials)]
    if json_out:
        cmd.append("--json")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def result(r):
    lines = r.stdout.splitlines()
    assert len(lines) == 1, f"want one JSON line, got {r.stdout!r} (stderr {r.stderr!r})"
    j = json.loads(lines[0])
    assert KEYS <= set(j), j
    return j


def probe_files(d):
    return sorted(p.name for p in Path(d).iterdir() if p.name.startswith(PREFIX))


def cred_file(tmp_path, password, name="cred"):
    p = tmp_path / name
    p.write_text(f"username = {USER}\npassword = {password}\n")
    p.chmod(0o600)
    return p


def own_host():
    """The host part of our probe file names (lib/probe.c: own_host)."""
    return re.sub(r"[^A-Za-z0-9._]", "_", socket.gethostname())[:63]


def dead_pid():
    """A PID that no process has right now, and none will get soon. The
    kernel hands PIDs out upwards from the last one it gave and wraps at
    pid_max: the free PID just below the last one given is the furthest
    from the next (the highest free one, taken before, came round within
    a CI run, and a process of that PID kept a dead probe's file)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    for pid in [*range(last - 1, 1, -1), *range(pid_max - 1, last, -1)]:
        if not Path(f"/proc/{pid}").exists():
            return pid
    raise RuntimeError("no free pid")


# ---- measurements ----

def test_probe_measures_both_ways_and_leaves_nothing(smbd, smbtuned, tmp_path):
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url)
    assert r.returncode == 0, r.stderr
    j = result(r)
    assert j["outcome"] == "ok"
    assert j["write_bytes"] == SIZE and j["read_bytes"] == SIZE
    assert j["write_mbps"] > 0 and j["read_mbps"] > 0
    assert j["write_s"] > 0 and j["read_s"] > 0
    # The rate is what the bytes and seconds after TCP's start-up say (MB =
    # 10^6 bytes), less the calls' waits for their last answer (a round
    # trip a call, tens of microseconds on loopback: 0.12% of a transfer on
    # a loaded CI machine; the probe would leave out up to half the time,
    # this allows 5% so that a wrong wait cannot pass for a round trip);
    # the start-up is the first call at most on loopback, and leaves at
    # least half the bytes in the rate.
    for d in ("write", "read"):
        sb, ss, ws = j[f"{d}_startup_bytes"], j[f"{d}_startup_s"], j[f"{d}_wait_s"]
        assert 0 <= sb <= SIZE / 2 and 0 <= ss < j[f"{d}_s"], j
        assert (sb == 0) == (ss == 0), j
        assert 0 <= ws <= 0.05 * (j[f"{d}_s"] - ss), j
        assert j[f"{d}_mbps"] == pytest.approx((SIZE - sb) / (j[f"{d}_s"] - ss - ws) / 1e6,
                                               rel=1e-3, abs=1e-3), j
    # Loopback has no slower hop to pace for.
    assert j["write_pace_bps"] == 0, j
    # and the probe knows it is loopback (test_client_trials_to_this_machine
    # has a name of this machine that is not, and a peer)
    assert j["loopback"] is True, j
    assert probe_files(smbd.share_dir) == []
    assert r.stderr == ""


def test_ipv6_literal_url(smbd_factory, smbtuned, tmp_path):
    # libsmbclient refuses smb://[::1]:PORT/share ("Invalid argument",
    # nothing sent); the probe must hand it a form it connects with, and
    # still show the URL as written.
    if not Path("/proc/net/if_inet6").exists():
        pytest.skip("no IPv6 on this machine")
    srv = smbd_factory(bind_addr="::1")
    sub = Path(srv.share_dir) / "sub"
    sub.mkdir()
    sub.chmod(0o777)
    r = run_probe(smbtuned, probe_conf(tmp_path), url=srv.url + "/sub")
    assert r.returncode == 0, r.stderr
    assert result(r)["outcome"] == "ok"
    assert probe_files(sub) == []
    r = run_probe(smbtuned, probe_conf(tmp_path), url=srv.url + "/none", json_out=False)
    assert r.returncode == 1
    assert f"directory {srv.url}/none: No such file" in r.stderr, r.stderr


def test_ipv4_mapped_literal_url(smbd, smbtuned, tmp_path):
    # An IPv6 url written with an IPv4 tail (::ffff:127.0.0.1 reaches the
    # fixture's smbd on 127.0.0.1): Samba reads hex groups only in the name
    # libsmbclient is given, and took the dotted one for a DNS name.
    if not Path("/proc/net/if_inet6").exists():
        pytest.skip("no IPv6 on this machine")
    url = f"smb://[::ffff:127.0.0.1]:{smbd.port}/share"
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 0, r.stderr
    assert result(r)["outcome"] == "ok"
    assert probe_files(smbd.share_dir) == []


def test_link_local_literal_without_interface_says_so(smbtuned, tmp_path):
    # The kernel refuses a connection to fe80::1 with no interface, which
    # libsmbclient reported as "connecting: Invalid argument" on every
    # probe; the url is refused as it is read, with the form that works.
    if not Path("/proc/net/if_inet6").exists():
        pytest.skip("no IPv6 on this machine")
    r = run_probe(smbtuned, probe_conf(tmp_path), url="smb://[fe80::1]:4455/share",
                  json_out=False)
    assert r.returncode == 1, r.stderr
    assert ("fe80::1 is a link-local address: name its interface too, as in "
            "smb://[fe80::1%eth0]/share") in r.stderr, r.stderr


def test_human_output(smbd, smbtuned, tmp_path):
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url, json_out=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{smbd.url}: ok\n")
    startup = (r"(; the first \d+ bytes, [\d.]+ s, are TCP's start-up, not in the rate)?"
               r"(; nor [\d.]+ s of waits for the calls' last answers)?")
    assert re.search(r"write: [\d.]+ MB/s \(8388608 bytes in [\d.]+ s" + startup + r"\)\n",
                     r.stdout), r.stdout
    assert re.search(r"read: +[\d.]+ MB/s \(8388608 bytes in [\d.]+ s" + startup + r"\)\n",
                     r.stdout), r.stdout


def test_url_and_directory_from_config(smbd, smbtuned, tmp_path):
    sub = smbd.share_dir / "bench" / "probe"
    sub.mkdir(parents=True)
    sub.chmod(0o777)
    (smbd.share_dir / "bench").chmod(0o777)
    conf = probe_conf(tmp_path, url=smbd.url + "/bench", directory="probe")
    r = run_probe(smbtuned, conf)
    assert r.returncode == 0, r.stderr
    assert result(r)["outcome"] == "ok"
    assert probe_files(sub) == []


def test_probe_file_is_patterned_and_named(smbd, smbtuned, tmp_path):
    """Catch the probe file mid-write (a deadline kills the writer): its
    name follows the documented pattern and its data is not zeros and does
    not repeat block to block."""
    conf = probe_conf(tmp_path, size="4G", deadline="1", duration="0")
    # The probe deletes its file; keep a hard link to it as soon as it
    # appears, and read the data through that.
    proc = subprocess.Popen([str(smbtuned), "--probe", "-c", str(conf), "--url", smbd.url,
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    seen = None
    try:
        deadline = time.monotonic() + 10
        while seen is None and time.monotonic() < deadline:
            for p in Path(smbd.share_dir).iterdir():
                if p.name.startswith(PREFIX):
                    keep = tmp_path / "kept"
                    try:
                        os.link(p, keep)
                        seen = (p.name, keep)
                    except OSError:
                        pass
                    break
            time.sleep(0.01)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert seen is not None, "never saw the probe file"
    name, keep = seen
    # PREFIX<host>-<pid>-<16 random hex digits>: nobody can plant it ahead.
    assert re.fullmatch(re.escape(PREFIX + own_host()) + r"-\d+-[0-9a-f]{16}", name), name
    with open(keep, "rb") as f:
        blocks = [f.read(4096) for _ in range(64)]
    blocks = [b for b in blocks if len(b) == 4096]
    assert len(blocks) >= 2
    assert all(b != bytes(4096) for b in blocks)
    assert len(set(blocks)) == len(blocks), "blocks repeat"
    assert json.loads(out)["outcome"] == "timeout"
    assert proc.returncode == 2


# ---- outcomes from real causes ----

def test_wrong_port_is_connect_refused(smbd, smbtuned, tmp_path):
    url = f"smb://127.0.0.1:{free_port()}/share"
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 1
    assert result(r)["outcome"] == "connect_refused"
    assert url in r.stderr and "connect_refused" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_man_page_names_every_json_key(smbtuned, tmp_path):
    """smbtuned(8)'s --probe --json list names every key the object has
    (recycle was missing from it)."""
    r = run_probe(smbtuned, probe_conf(tmp_path), url=f"smb://127.0.0.1:{free_port()}/share")
    man = (Path(__file__).resolve().parents[2] / "docs" / "man" / "smbtuned.8").read_text()
    start = man.index("one object with", man.index(".B \\-\\-probe"))
    listed = man[start:man.index("printed whatever the exit status", start)]
    missing = [k for k in json.loads(r.stdout)
               if not re.search(r"^\.BR? " + re.escape(k) + r"\b", listed, re.M)]
    assert missing == [], missing


def test_wrong_share_is_share_not_found(smbd, smbtuned, tmp_path):
    url = f"smb://127.0.0.1:{smbd.port}/nosuchshare"
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 1
    assert result(r)["outcome"] == "share_not_found"
    assert url in r.stderr and "nosuchshare" in r.stderr


def test_unknown_host_is_name_not_found(smbtuned, tmp_path):
    """Resolved in a namespace of our own with only /etc/hosts as a source
    (a private mount namespace bind-mounts a private nsswitch.conf), so that
    the lookup sends nothing anywhere."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    nss = tmp_path / "nsswitch.conf"
    nss.write_text("hosts: files\n")
    url = "smb://no-such-host.smbtuned.invalid/share"
    script = (f"mount --bind {nss} /etc/nsswitch.conf && exec {smbtuned} --probe "
              f"-c {probe_conf(tmp_path)} --url {url} --json")
    r = subprocess.run(["unshare", "--net", "--mount", "sh", "-c", script], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert result(r)["outcome"] == "name_not_found"
    assert url in r.stderr


def test_wrong_password_is_auth_failed_and_never_shown(smbd_factory, smbtuned, tmp_path):
    srv = smbd_factory(users={USER: PASSWORD},
                       shares={"private": {"guest ok": "no", "valid users": USER}})
    url = f"smb://127.0.0.1:{srv.port}/private"
    good = cred_file(tmp_path, PASSWORD, "good")
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url, credentials=good)
    assert r.returncode == 0, r.stderr
    assert result(r)["outcome"] == "ok"

    wrong = "Wrong-pw-0042"
    bad = cred_file(tmp_path, wrong, "bad")
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url, credentials=bad)
    assert r.returncode == 1
    assert result(r)["outcome"] == "auth_failed"
    assert url in r.stderr and USER in r.stderr
    assert wrong not in r.stderr + r.stdout
    assert PASSWORD not in r.stderr + r.stdout

    # Guest on the same share: the logon works, the share refuses it.
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 1
    assert result(r)["outcome"] == "access_denied"
    # smbd's own log does not get the password either.
    assert wrong not in srv.log_tail(10000)


def test_systemd_credential_is_the_logon_when_none_is_named(smbd_factory, smbtuned, tmp_path):
    """LoadCredential=smbtuned-credentials:FILE: systemd puts FILE in
    $CREDENTIALS_DIRECTORY; it is used only when no file is named."""
    srv = smbd_factory(users={USER: PASSWORD},
                       shares={"private": {"guest ok": "no", "valid users": USER}})
    url = f"smb://127.0.0.1:{srv.port}/private"
    creddir = tmp_path / "creds"
    creddir.mkdir(mode=0o700)
    cred_file(creddir, PASSWORD, "smbtuned-credentials")
    env = dict(os.environ, CREDENTIALS_DIRECTORY=str(creddir))
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url, env=env)
    assert r.returncode == 0, r.stderr
    assert result(r)["outcome"] == "ok"
    # A file named on the command line wins: its wrong password is used.
    bad = cred_file(tmp_path, "Wrong-pw-0043", "bad")
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url, credentials=bad, env=env)
    assert result(r)["outcome"] == "auth_failed", r.stderr
    # The credential goes through the same checks as a named file.
    (creddir / "smbtuned-credentials").chmod(0o644)
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url, env=env)
    assert r.returncode == 1, r.stderr
    assert "smbtuned-credentials has mode 0644" in r.stderr, r.stderr


def test_libsmbclient_is_loaded_by_the_probe_child_only(smbd, smbtuned, tmp_path):
    """The daemon does not link libsmbclient (lib/smbc_api.h: it would
    keep Samba's libraries mapped for its whole life); the probe child
    loads it, and a library that lacks a call is a clear error."""
    need = subprocess.run(["readelf", "-d", str(smbtuned)], capture_output=True, text=True,
                          check=True).stdout
    assert "(NEEDED)" in need and "libsmbclient" not in need, need
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url)
    assert r.returncode == 0 and result(r)["outcome"] == "ok", r.stderr
    # A libsmbclient.so.0 without the calls, found first through
    # LD_LIBRARY_PATH (the probe child's dlopen honours it).
    fake = tmp_path / "fakelib"
    fake.mkdir()
    (fake / "empty.c").write_text("int smbtuned_test_empty;\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake / "libsmbclient.so.0"),
                    str(fake / "empty.c")], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake))
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url, env=env)
    assert r.returncode == 1, r.stderr
    assert result(r)["outcome"] == "error"
    assert "libsmbclient.so.0 has no smbc_new_context" in r.stderr, r.stderr


def test_share_and_directory_names_with_spaces_and_utf8(smbd_factory, smbtuned, tmp_path):
    """Share names such as "Public Files" or "Données" (and directories
    like them) are measured: libsmbclient takes them as written, and the
    probe's file lands in that directory and is removed."""
    srv = smbd_factory(shares={"Public Files": {}, "Données": {}})
    for name in ("Public Files", "Données"):
        d = srv.shares[name] / "un dossier é"
        d.mkdir()
        d.chmod(0o777)
        url = f"smb://127.0.0.1:{srv.port}/{name}/un dossier é"
        r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
        assert r.returncode == 0, r.stderr
        j = result(r)
        assert j["outcome"] == "ok", j
        assert j["write_mbps"] > 0 and j["read_mbps"] > 0, j
        assert probe_files(d) == []


def test_read_only_share_is_access_denied(smbd_factory, smbtuned, tmp_path):
    srv = smbd_factory(shares={"ro": {"read only": "yes"}})
    url = f"smb://127.0.0.1:{srv.port}/ro"
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 1
    assert result(r)["outcome"] == "access_denied"
    assert url in r.stderr


def test_a_file_the_clean_up_cannot_remove_is_a_warning(smbd_factory, smbtuned, tmp_path):
    """--probe measures, then its clean-up finds a killed probe's recorded
    file it may not remove (root's, in a sticky share): the outcome stands
    and the exit status is 0, and stderr says the file stays."""
    srv = smbd_factory(shares={"sticky": {}})
    share = srv.shares["sticky"]
    share.chmod(0o1777)
    url = f"smb://127.0.0.1:{srv.port}/sticky"
    dead = f"{PREFIX}{own_host()}-{dead_pid()}-00000000000000fa"
    (share / dead).write_bytes(b"x")  # root's: the guest may not remove it
    record_made(tmp_path / "state", dead, url)
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 0, r.stderr
    assert result(r)["outcome"] == "ok"
    assert re.search(r"^smbtuned: probe: warning: removing killed probes' files: the clean-up "
                     r"failed \(1 file of killed probes could not be removed", r.stderr,
                     re.M), r.stderr
    assert (share / dead).exists()


@contextlib.contextmanager
def tmpfs_at(mnt, size):
    """A tmpfs of `size` that anyone may write, mounted on mnt (made here,
    under the test's directory) for the block."""
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 2 MiB tmpfs under tmp_path (unmounted at the end)."""
    with tmpfs_at(tmp_path / "tmpfs", "2m") as mnt:
        yield mnt


def test_full_share_is_disk_full(full_tmpfs, smbd_factory, smbtuned, tmp_path):
    """A share that fills during the write (2 MiB, under the 20 MiB that
    Samba's stand-in sizes take: no room check): disk_full, the partial
    file deleted."""
    srv = smbd_factory(shares={"small": {"path": str(full_tmpfs)}})
    url = f"smb://127.0.0.1:{srv.port}/small"
    r = run_probe(smbtuned, probe_conf(tmp_path), url=url)
    assert r.returncode == 1
    j = result(r)
    assert j["outcome"] == "disk_full"
    assert url in r.stderr
    assert re.search(r"writing at offset \d+: No space left on device", r.stderr), r.stderr
    assert 0 < j["write_bytes"] < 2 * 1024 * 1024, j
    # The partial file was deleted: the share has room again.
    assert probe_files(full_tmpfs) == []


def leave_free(mnt, free):
    """Fill the file system at mnt until `free` bytes are left for users."""
    st = os.statvfs(mnt)
    left = st.f_bavail * st.f_frsize - free
    assert left > 0, f"{mnt} has less than {free} bytes free"
    with open(mnt / "filler", "ab") as f:
        while left > 0:
            n = min(left, 1 << 20)
            f.write(b"\0" * n)
            left -= n
    st = os.statvfs(mnt)
    assert st.f_bavail * st.f_frsize == free, (st.f_bavail * st.f_frsize, free)


def test_a_sample_leaves_the_reserve_free(tmp_path, smbd_factory, smbtuned):
    """A share with room for the probe file but not for it and the reserve
    (5% of the share) gets no sample: nothing written, the free space
    named; with room for both, a sample."""
    with tmpfs_at(tmp_path / "small", "32m") as mnt:
        srv = smbd_factory(shares={"small": {"path": str(mnt)}})
        url = f"smb://127.0.0.1:{srv.port}/small"
        conf = probe_conf(tmp_path, duration="0")  # exactly SIZE, 8 MiB
        M = 1024 * 1024
        # 9 MiB free: the file fits, but leaves 1 MiB, under 5% of 32 MiB
        leave_free(mnt, 9 * M)
        r = run_probe(smbtuned, conf, url=url)
        j = result(r)
        assert (r.returncode, j["outcome"]) == (1, "disk_full"), r.stderr
        assert j["write_bytes"] == 0, j
        assert re.search(r"not enough free space on smb://\S+/small: 9\.0 MiB free, and a "
                         r"sample, which writes 8\.0 MiB, must leave 1\.6 MiB free", r.stderr), \
            r.stderr
        assert sorted(p.name for p in mnt.iterdir()) == ["filler"]
        # 10 MiB free: 8 MiB written leave 2 MiB
        (mnt / "filler").unlink()
        leave_free(mnt, 10 * M)
        r = run_probe(smbtuned, conf, url=url)
        j = result(r)
        assert (r.returncode, j["outcome"]) == (0, "ok"), r.stderr
        assert j["write_bytes"] == SIZE, j
        assert sorted(p.name for p in mnt.iterdir()) == ["filler"]


def test_a_directory_of_the_share_is_not_asked_for_room(tmp_path, smbd_factory, smbtuned):
    """Over SMB2 libsmbclient asks about the share's root, and a directory
    in it may be another file system: a probe into one is not refused for
    the root's lack of room (a share root with too little, a big file
    system mounted at big/), and measures."""
    M = 1024 * 1024
    with tmpfs_at(tmp_path / "root", "32m") as root:
        srv = smbd_factory(shares={"root": {"path": str(root)}})
        url = f"smb://127.0.0.1:{srv.port}/root"
        leave_free(root, 9 * M)
        with tmpfs_at(root / "big", "64m"):
            r = run_probe(smbtuned, probe_conf(tmp_path, duration="0", directory="big"), url=url)
            j = result(r)
            assert (r.returncode, j["outcome"]) == (0, "ok"), r.stderr
            # the root itself is refused, as test_a_sample_leaves_the_reserve_free shows
            r = run_probe(smbtuned, probe_conf(tmp_path, duration="0"), url=url)
            assert (r.returncode, result(r)["outcome"]) == (1, "disk_full"), r.stderr


def test_short_deadline_is_timeout_with_lower_bound(smbd, smbtuned, tmp_path):
    conf = probe_conf(tmp_path, size="16G", deadline="1", duration="0")
    r = run_probe(smbtuned, conf, url=smbd.url)
    # Not 0: a script must not take lower bounds for a measurement. The
    # JSON is printed all the same.
    assert r.returncode == 2, r.stderr
    j = result(r)
    assert j["outcome"] == "timeout"
    assert "timeout" in r.stderr
    # The bytes moved before the deadline count: a positive lower bound.
    assert 0 < j["write_bytes"] < 16 * 1024 ** 3
    assert j["write_mbps"] > 0 and 0 < j["write_s"] <= 1.5
    assert j["read_bytes"] == 0
    # The killed writer's file is removed right after.
    assert probe_files(smbd.share_dir) == []


def test_leftovers_of_dead_probes_are_removed(smbd, smbtuned, tmp_path):
    """A file goes only when our probes recorded its name before they made
    it and its probe is gone: not one of exactly our shape that a share's
    user made (this host, a dead pid, a random tag), not a recorded one of
    a live probe, and not a directory that now has a recorded name. A
    recorded file whose host part is another name (the host renamed) goes:
    the record is ours. Records of files that went, or are not files,
    are forgotten."""
    host, state = own_host(), tmp_path / "state"
    made = f"{PREFIX}{host}-{dead_pid()}-0123456789abcdef"
    renamed = f"{PREFIX}oldname-{dead_pid()}-0123456789abcdee"
    planted = f"{PREFIX}{host}-{dead_pid()}-00000000000000aa"  # not recorded
    alive = f"{PREFIX}{host}-{os.getpid()}-fedcba9876543210"
    gone = f"{PREFIX}{host}-{dead_pid()}-00000000000000bb"  # recorded, no file
    a_dir = f"{PREFIX}{host}-{dead_pid()}-00000000000000dd"
    for n in (made, renamed, planted, alive):
        (smbd.share_dir / n).write_bytes(b"x")
    (smbd.share_dir / a_dir).mkdir()
    os.chmod(smbd.share_dir / a_dir, 0o777)
    for n in (made, renamed, alive, gone, a_dir):
        record_made(state, n, smbd.url)
    # made at another place (another share, or this one under another
    # URL): not this clean-up's to try, nor to forget
    elsewhere = f"{PREFIX}{host}-{dead_pid()}-00000000000000ee"
    (smbd.share_dir / elsewhere).write_bytes(b"x")
    record_made(state, elsewhere, "smb://127.0.0.1:1/other")
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url)
    assert r.returncode == 0, r.stderr
    assert probe_files(smbd.share_dir) == sorted([planted, alive, a_dir, elsewhere])
    assert records(state, smbd.url) == [alive]
    assert records(state, "smb://127.0.0.1:1/other") == [elsewhere]
    place = made_dir(state, smbd.url) / "place"
    assert place.read_text() == smbd.url + "\n"


def test_a_probe_records_its_file_until_it_is_deleted(smbd, smbtuned, tmp_path):
    """While the probe file exists its name is recorded in the state
    directory; once the probe deleted it, the record is gone."""
    state = tmp_path / "state"
    seen = []
    p = subprocess.Popen([str(smbtuned), "--probe", "-c", str(probe_conf(tmp_path, duration="2")),
                          "--url", smbd.url, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    texts = set()
    while p.poll() is None and time.monotonic() < deadline:
        files = probe_files(smbd.share_dir)
        if files:
            seen.append((files, records(state)))
            for r in made_dir(state, smbd.url).glob(PREFIX + "*"):
                try:
                    texts.add(r.read_text())
                except FileNotFoundError:
                    pass
        time.sleep(0.05)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert seen, "the probe file was never seen"
    assert all(set(f) <= set(rec) for f, rec in seen), seen
    # who made it: this boot, and the start time of the pid in its name
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert texts and all(re.fullmatch(rf"boot={boot} start=\d+\n", t) for t in texts), texts
    assert probe_files(smbd.share_dir) == [] and records(state) == []


# ---- credentials file checks ----

def test_credentials_file_must_be_private(smbd, smbtuned, tmp_path):
    cred = cred_file(tmp_path, "Secret-xyz")
    cred.chmod(0o644)
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url, credentials=cred)
    assert r.returncode == 1
    assert result(r)["outcome"] == "error"
    assert "0644" in r.stderr and "0600" in r.stderr and str(cred) in r.stderr
    assert "Secret-xyz" not in r.stderr

    cred.chmod(0o600)
    os.chown(cred, 1, 1)  # not root's
    r = run_probe(smbtuned, probe_conf(tmp_path), url=smbd.url, credentials=cred)
    assert r.returncode == 1
    assert "owned by uid 1" in r.stderr


def test_config_error_names_file_and_line(smbtuned, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("probe {\n    size = 12 parsecs\n}\n")
    r = run_probe(smbtuned, conf, url="smb://127.0.0.1/share")
    assert r.returncode == 1
    assert f"{conf}:2:" in r.stderr


def test_missing_config_only_matters_when_given(smbd, smbtuned, tmp_path):
    missing = tmp_path / "nope.conf"
    r = run_probe(smbtuned, missing, url=smbd.url)
    assert r.returncode == 1
    assert str(missing) in r.stderr


# ---- client isolation ----

def test_client_socket_ignores_callers_and_servers_smb_conf(smbd_factory, smbtuned, tmp_path):
    """The caller's ~/.smb/smb.conf, the machine's /etc/samba/smb.conf (a
    private mount namespace shows a file of ours there; the real one is not
    touched) and the server's smb.conf all ask for SO_RCVBUF=65536; the
    probe's client socket has what the probe's config asks for."""
    bad = "TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=65536"
    srv = smbd_factory(socket_options=bad)
    home = tmp_path / "home"
    (home / ".smb").mkdir(parents=True)
    (home / ".smb" / "smb.conf").write_text(f"[global]\n   socket options = {bad}\n")
    fake_etc = tmp_path / "etc-smb.conf"
    fake_etc.write_text(f"[global]\n   socket options = {bad}\n")
    want = 262144
    conf = probe_conf(tmp_path, socket_options=f"TCP_NODELAY SO_RCVBUF={want} SO_SNDBUF={want}")
    env = dict(os.environ, HOME=str(home))
    cmd = (f"mount --bind {fake_etc} /etc/samba/smb.conf && exec {smbtuned} --probe -c {conf} "
           f"--url {srv.url} --json")
    if shutil.which("unshare") is None or not Path("/etc/samba/smb.conf").exists():
        prefix, script = [], None
    else:
        prefix, script = ["unshare", "--mount", "sh", "-c"], cmd
    if script:
        r = subprocess.run(prefix + [script], capture_output=True, text=True, timeout=120,
                           env=env, stdin=subprocess.DEVNULL)
    else:
        r = run_probe(smbtuned, conf, url=srv.url, env=env)
    assert r.returncode == 0, r.stderr
    j = result(r)
    assert j["outcome"] == "ok"
    # Linux reports twice the size asked for (the kernel's bookkeeping).
    assert j["client_rcvbuf"] == 2 * want
    assert j["client_sndbuf"] == 2 * want


def test_client_socket_options_reach_the_socket(smbd, smbtuned, tmp_path):
    """The other way round: what the probe's config asks for is applied
    (so the test above would see a leak as a different number)."""
    conf = probe_conf(tmp_path, socket_options="TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=65536")
    r = run_probe(smbtuned, conf, url=smbd.url)
    assert r.returncode == 0, r.stderr
    j = result(r)
    assert j["client_rcvbuf"] == 131072 and j["client_sndbuf"] == 131072


# ---- the emulated wide-area path ----

@pytest.mark.slow
@pytest.mark.serial
def test_probe_over_emulated_wan(smbd_factory, smbtuned, tmp_path):
    rate_mbit = 100
    with WanPath(tmp_path / "wan", rtt_ms=40, rate_mbit=rate_mbit) as wan:
        srv = smbd_factory(prefix_cmd=wan.prefix("server"), bind_addr=wan.server_addr,
                           extra_global=SMBD_GLOBAL)
        try:
            r = run_probe(smbtuned, probe_conf(tmp_path), url=srv.url,
                          prefix=wan.prefix("client"))
        finally:
            srv.stop()
    assert r.returncode == 0, r.stderr
    j = result(r)
    assert j["outcome"] == "ok"
    assert j["write_mbps"] > 0 and j["read_mbps"] > 0
    # The link's ceiling: had the data gone any other way it would be
    # faster. (A physical bound, not a performance threshold.)
    ceiling = rate_mbit * 1e6 / 8 / 1e6
    assert j["write_mbps"] < ceiling and j["read_mbps"] < ceiling
    stats = wan.stats()
    fwd = [int(n) for n in re.findall(r"forwarded (\d+)", stats)]
    assert len(fwd) == 2 and min(fwd) > SIZE / 1500, stats
    assert probe_files(srv.share_dir) == []


@pytest.mark.slow
@pytest.mark.serial
def test_probe_duration_over_emulated_wan(smbd_factory, smbtuned, tmp_path):
    """With a duration, a direction on a slow path ends by the clock, short
    of its size; on a path whose start-up outlasts the size it goes on past
    the size until 50 round trips have passed; duration 0 moves exactly
    the size. The 40 ms path gives both cases."""
    M = 1024 * 1024
    with WanPath(tmp_path / "wan", rtt_ms=40, rate_mbit=100) as wan:
        srv = smbd_factory(prefix_cmd=wan.prefix("server"), bind_addr=wan.server_addr,
                           extra_global=SMBD_GLOBAL)
        try:
            runs = {}
            for name, opts in {"clock": {"size": "64M", "duration": "1"},
                               "start-up": {"size": "4M", "duration": "10"},
                               "none": {"size": "4M", "duration": "0"}}.items():
                r = run_probe(smbtuned, probe_conf(tmp_path, name=f"{name}.conf", **opts),
                              url=srv.url, prefix=wan.prefix("client"))
                assert r.returncode == 0, (name, r.stderr)
                runs[name] = result(r)
        finally:
            srv.stop()
    clock, startup, none = runs["clock"], runs["start-up"], runs["none"]
    # 64 MiB at 100 Mbit/s would take 5.6 s each way: the clock ended it.
    assert 0 < clock["write_bytes"] < 64 * M and clock["write_s"] >= 1.0, clock
    assert 0 < clock["read_bytes"] <= clock["write_bytes"], clock
    assert clock["read_s"] >= 1.0 or clock["read_bytes"] == clock["write_bytes"], clock
    # 4 MiB are gone in 0.5 s; 50 round trips are 2 s (the cap, 16 times
    # the size, would take 6 s).
    assert 4 * M < startup["write_bytes"] < 64 * M, startup
    assert startup["write_s"] >= 50 * 0.040, startup
    assert startup["read_bytes"] > 4 * M, startup
    # The rates leave out the start-up (at least 10 round trips of it) and
    # each later call's wait for its last answer: a round trip a call, so
    # at least one, and less than the time they cover.
    for j in (clock, startup):
        for d in ("write", "read"):
            assert j[f"{d}_startup_s"] >= 10 * 0.040, j
            assert 0.9 * 0.040 <= j[f"{d}_wait_s"] < j[f"{d}_s"] - j[f"{d}_startup_s"], j
            assert j[f"{d}_mbps"] == pytest.approx(
                (j[f"{d}_bytes"] - j[f"{d}_startup_bytes"])
                / (j[f"{d}_s"] - j[f"{d}_startup_s"] - j[f"{d}_wait_s"]) / 1e6, rel=1e-3), j
    # The writes' socket is paced at twice the rate of its fastest whole
    # 8 MiB request (round trip left out), so not below twice the rate the
    # writes reached, within 2%: at the link's rate the two agree only
    # within the noise of their round-trip estimates (CI once saw the cap
    # at 0.12% under twice the rate);
    # 4 MiB in all has no whole request: no cap.
    assert startup["write_pace_bps"] >= 0.98 * 2 * startup["write_mbps"] * 1e6, startup
    assert none["write_pace_bps"] == 0, none
    # No duration: the size each way, as before there was one, and the
    # whole of it in the rate.
    assert none["write_bytes"] == none["read_bytes"] == 4 * M, none
    assert none["write_startup_s"] == none["read_startup_s"] == 0, none
    assert none["write_wait_s"] == none["read_wait_s"] == 0, none
    assert probe_files(srv.share_dir) == []


def test_measurement_does_not_list_the_share(smbd_factory, smbtuned, tmp_path):
    """No connection of a probe lists the share: libsmbclient fetches a
    whole listing in one call, which anyone who can write to the share
    can make as long as they like, and its names are anybody's. The
    clean-up child after the measurement goes by the record of the files
    our probes made, and still removes a killed probe's. Told from smbd's
    own log at debug level 10: connections of --probe come one after
    another, each opens with a NEGPROT, and none sends a
    QUERY_DIRECTORY."""
    srv = smbd_factory(extra_args=["--debuglevel=10"])
    dead = f"{PREFIX}{own_host()}-{dead_pid()}-0123456789abcdef"
    (srv.share_dir / dead).write_bytes(b"x")
    record_made(tmp_path / "state", dead, srv.url)
    r = run_probe(smbtuned, probe_conf(tmp_path), url=srv.url)
    assert r.returncode == 0, r.stderr
    assert probe_files(srv.share_dir) == []
    log = srv.stdout_path.read_text(errors="replace")
    conns = log.split("opcode[SMB2_OP_NEGPROT]")[1:]
    writers = [i for i, c in enumerate(conns) if "opcode[SMB2_OP_WRITE]" in c]
    assert len(writers) == 1, (len(conns), writers)
    # The fixture's own readiness check (smbclient) may list before; the
    # probe's connections are the writer's and the clean-up's after it.
    ours = conns[writers[0]:]
    listers = [c for c in ours if "opcode[SMB2_OP_QUERY_DIRECTORY]" in c]
    assert len(ours) >= 2 and listers == [], (len(conns), writers, len(listers))
