"""The shadow smbd (lib/trial): a private smbd per candidate `socket options`.

Driven through tests/unit/trial_driver (built next to the unit tests), which
starts a shadow from a production config made by the smbd fixture, prints
its pid, port and paths as JSON, and stops it when its stdin says "stop".

Checked here: the shadow serves the production shares on its own port and
leaves the production smbd alone; its listener carries the candidate's
buffers (and none when the candidate has no buffer tokens); stop leaves no
process and no directory; a driver killed with SIGKILL takes its shadow
along, and the sweep removes what a killed run left, killing a leftover
smbd that is still alive; the overrides win even when the production file
ends inside a share section. A shadow writes nothing in production's lock,
pid, cache and ncalrpc directories; with the own share (no url) nothing in
any of production's Samba directories, and it serves the own share to
guests.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO
from smbd import SMBCLIENT, SMBD

READY_S = 30  # seconds a shadow may take to listen
WAIT_S = 15  # bound on waiting for a process to go (not a pass/fail timing)


@pytest.fixture(scope="session")
def driver():
    """trial_driver ($TRIAL_DRIVER), by default from the build directory of
    the smbtuned under test ($SMBTUNED, default <repo>/build)."""
    smbtuned = Path(os.environ.get("SMBTUNED", REPO / "build" / "daemon" / "smbtuned"))
    if not smbtuned.is_absolute():
        smbtuned = (REPO / smbtuned).resolve()
    path = Path(os.environ.get("TRIAL_DRIVER",
                               smbtuned.parent.parent / "tests" / "unit" / "trial_driver"))
    if not path.is_absolute():
        path = (REPO / path).resolve()
    if not os.access(path, os.X_OK):
        pytest.skip(f"trial_driver not found at {path} (build it or set TRIAL_DRIVER)")
    return path


class Shadow:
    """A running `trial_driver start`: the driver process and what it printed."""

    def __init__(self, driver, prod_conf, base, value, own_share=None):
        extra = [str(own_share)] if own_share is not None else []
        self.proc = subprocess.Popen(
            [str(driver), "start", str(prod_conf), str(base), value, str(READY_S), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=WAIT_S)
            raise AssertionError(f"trial_driver start failed: {self.proc.stderr.read()}")
        info = json.loads(line)
        self.pid = info["pid"]
        self.port = info["port"]
        self.run_dir = Path(info["run_dir"])
        self.conf = Path(info["conf"])
        self.log = Path(info["log"])
        self.share = info["share"]

    def stop(self):
        """Ask the driver to stop the shadow; returns the driver's output."""
        out, err = self.proc.communicate("stop\n", timeout=60)
        assert self.proc.returncode == 0, f"stop failed: {err}"
        return out

    def kill_driver(self):
        self.proc.kill()
        self.proc.wait(timeout=WAIT_S)

    def cleanup(self):
        """For failing tests: kill the driver, then the shadow's group by
        the PID it reported, if it is still the process we started."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)
        for pid in group_members(self.pid):
            if names_conf(pid, self.conf):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def base():
    """The shadows' base directory: a private directory of this test, made
    directly under /tmp because smbd's messaging socket (RUN/lock/msg.sock/
    PID) must fit in a unix socket path, which pytest's tmp_path may not."""
    d = Path(tempfile.mkdtemp(prefix="trial-"))
    try:
        yield d / "shadow"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def shadows(driver):
    started = []

    def start(prod_conf, base, value, own_share=None):
        s = Shadow(driver, prod_conf, base, value, own_share)
        started.append(s)
        return s

    yield start
    for s in started:
        s.cleanup()


def proc_stat(pid):
    """(state, pgrp, start time) of pid from /proc/PID/stat, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text.rsplit(")", 1)[1].split()
    return f[0], int(f[2]), int(f[19])


def alive(pid):
    st = proc_stat(pid)
    return st is not None and st[0] != "Z"


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def group_members(pgid):
    """Live (non-zombie) processes in process group pgid."""
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st is not None and st[1] == pgid and st[0] != "Z":
            out.append(pid)
    return out


def names_conf(pid, conf):
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(conf).encode() in argv


def smbds_with_conf(conf):
    """Live processes whose command line names conf (the shadow's config)."""
    return [p for p in all_pids() if alive(p) and names_conf(p, conf)]


def wait_until(cond, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def smbclient(srv, port, *args):
    """smbclient against the fixture's share on another port (the shadow's)."""
    cmd = [SMBCLIENT, "-s", str(srv.client_conf), "-N", "-p", str(port), srv.unc(), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=srv.env(),
                          stdin=subprocess.DEVNULL)


def listener_skmem(port):
    """{'rb': n, 'tb': n, ...} of the socket listening on 127.0.0.1:port."""
    mem = skmem(["ss", "-ltmnH", f"sport = :{port}"])
    assert mem is not None, f"nothing listens on port {port}"
    return mem


def skmem(cmd):
    """The skmem fields of the one socket `ss ... -m` prints, or None."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30).stdout
    m = re.search(r"skmem:\(([^)]*)\)", out)
    return m and {k: int(v) for k, v in re.findall(r"([a-z]+)(\d+)", m.group(1))}


def accepted_rb(port):
    """rb of the server side of a fresh connection to the shadow's port."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        cmd = ["ss", "-tmnH", "state", "established",
               f"( sport = :{port} and dport = :{c.getsockname()[1]} )"]
        assert wait_until(lambda: skmem(cmd) is not None)
        return skmem(cmd)["rb"]


def sysctl_int(name, index=None):
    vals = Path("/proc/sys/" + name.replace(".", "/")).read_text().split()
    return int(vals[0 if index is None else index])


def global_value(conf, name):
    r = subprocess.run(["testparm", "-s", f"--parameter-name={name}", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def samba_dump(conf):
    r = subprocess.run(["testparm", "-s", str(conf)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def sections(dump):
    """testparm -s output as {section: {param: value}}."""
    out, cur = {}, None
    for line in dump.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            cur = out.setdefault(line[1:-1], {})
        elif cur is not None and "=" in line:
            k, v = line.split("=", 1)
            cur[k.strip()] = v.strip()
    return out


def render(driver, prod, run_dir, port, value):
    r = subprocess.run([str(driver), "render", str(prod), str(run_dir), str(port), value],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


# Production configs that leave the parser inside a share section, directly
# or through an include, with or without a final newline or a dangling
# continuation; each also sets the parameters the shadow must override.
PROD_GLOBAL = ("[global]\n   smb ports = 445\n   interfaces = eth0\n"
               "   socket options = TCP_NODELAY SO_RCVBUF=8192\n")
PROD_CASES = {
    "share-last": {"smb.conf": PROD_GLOBAL + "[data]\n   path = /srv/data\n"},
    "no-final-newline": {"smb.conf": PROD_GLOBAL + "[data]\n   path = /srv/data"},
    "dangling-continuation": {"smb.conf": PROD_GLOBAL + "[data]\n   path = /srv/data\n"
                              "   comment = data \\\n"},
    "include-ends-in-share": {
        "smb.conf": PROD_GLOBAL + "   include = @DIR@/shares.conf\n",
        "shares.conf": "[data]\n   path = /srv/data\n",
    },
}


@pytest.mark.parametrize("case", sorted(PROD_CASES))
def test_overrides_win_after_a_share_section(driver, tmp_path, case):
    for name, text in PROD_CASES[case].items():
        (tmp_path / name).write_text(text.replace("@DIR@", str(tmp_path)))
    run_dir = tmp_path / "run"
    for d in ("pid", "lock", "cache", "ncalrpc"):  # testparm checks they exist
        (run_dir / d).mkdir(parents=True)
    conf = tmp_path / "shadow.conf"
    value = "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=131072"
    conf.write_text(render(driver, tmp_path / "smb.conf", run_dir, 45678, value))

    assert global_value(conf, "socket options") == value
    assert global_value(conf, "smb ports") == "45678"
    assert global_value(conf, "interfaces") == "127.0.0.1"
    assert global_value(conf, "bind interfaces only") == "Yes"
    assert global_value(conf, "pid directory") == f"{run_dir}/pid"
    assert global_value(conf, "lock directory") == f"{run_dir}/lock"
    secs = sections(samba_dump(conf))
    # The production share is still there, and none of the overrides
    # landed in it (they would be ignored there).
    assert secs["data"]["path"] == "/srv/data"
    for k in secs["data"]:
        assert k not in ("socket options", "smb ports", "interfaces", "pid directory")


def test_render_refuses_what_samba_would_misread(driver, tmp_path):
    prod = tmp_path / "smb.conf"
    prod.write_text(PROD_GLOBAL)
    for args in [(prod, tmp_path / "run", 1, "TCP_NODELAY\nsmb ports = 445"),
                 (prod, tmp_path / "run", 1, "TCP_NODELAY \\"),
                 (prod, tmp_path / "r%m", 1, "TCP_NODELAY"),
                 ("smb.conf", tmp_path / "run", 1, "TCP_NODELAY")]:
        r = subprocess.run([str(driver), "render", *(str(a) for a in args)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, (args, r.stdout)
        assert r.stdout == ""


def test_shadow_serves_share_and_leaves_production_alone(smbd_factory, shadows, base, tmp_path):
    srv = smbd_factory()
    prod_pidfile = srv.base / "pid" / "smbd.pid"
    pid_before = prod_pidfile.read_text()
    sh = shadows(srv.conf, base, "TCP_NODELAY SO_RCVBUF=262144")
    assert sh.port != srv.port

    src = tmp_path / "payload"
    src.write_bytes(os.urandom(300_000))
    r = smbclient(srv, sh.port, "-c", f"put {src} through-shadow")
    assert r.returncode == 0, r.stdout + r.stderr + sh.log.read_text()
    # Same share directory as production: the file is there, and both
    # servers hand it back intact.
    assert (srv.share_dir / "through-shadow").read_bytes() == src.read_bytes()
    back = tmp_path / "back-shadow"
    r = smbclient(srv, sh.port, "-c", f"get through-shadow {back}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert back.read_bytes() == src.read_bytes()

    # Production: same process, same pid file, still serving its port.
    assert srv.alive()
    assert prod_pidfile.read_text() == pid_before
    back = tmp_path / "back-prod"
    r = srv.smbclient("-c", f"get through-shadow {back}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert back.read_bytes() == src.read_bytes()
    # The shadow keeps its state to itself: its own pid file, nothing of it
    # in production's lock directory.
    assert (sh.run_dir / "pid" / "smbd.pid").read_text().strip() == str(sh.pid)
    sh.stop()
    assert srv.alive()
    assert srv.smbclient("-c", "ls").returncode == 0


def test_listener_carries_the_candidate_buffers(smbd_factory, shadows, base, tmp_path):
    srv = smbd_factory()
    rmem_max = sysctl_int("net.core.rmem_max")
    want = 2 * min(262144, rmem_max)  # the kernel doubles what it is asked for

    sh = shadows(srv.conf, base, "TCP_NODELAY SO_RCVBUF=262144")
    assert listener_skmem(sh.port)["rb"] == want
    # A connection accepted by that listener starts with the same buffer.
    assert accepted_rb(sh.port) == want
    sh.stop()

    # No buffer tokens: the listener is untouched, so it has the kernel's
    # default (tcp_rmem[1]) that autotuning starts from, not a fixed size.
    default = sysctl_int("net.ipv4.tcp_rmem", 1)
    assert default != want, "pick another candidate size: it equals the default"
    sh = shadows(srv.conf, base, "TCP_NODELAY")
    assert listener_skmem(sh.port)["rb"] == default
    assert accepted_rb(sh.port) == default
    sh.stop()


def test_stop_leaves_no_process_and_no_directory(smbd_factory, shadows, base, tmp_path):
    srv = smbd_factory()
    sh = shadows(srv.conf, base, "TCP_NODELAY SO_SNDBUF=131072")
    # A client connected during the stop: its smbd child must go too.
    with socket.create_connection(("127.0.0.1", sh.port)):
        assert wait_until(lambda: len(group_members(sh.pid)) >= 2)
        members = group_members(sh.pid)
        assert smbds_with_conf(sh.conf)
        assert sh.stop().strip() == "stopped"
    assert not alive(sh.pid)
    assert [p for p in members if alive(p)] == []
    assert group_members(sh.pid) == []
    assert smbds_with_conf(sh.conf) == []
    assert not sh.run_dir.exists()
    assert list(base.iterdir()) == []
    assert srv.alive()


def test_killed_driver_takes_its_shadow_along(smbd_factory, shadows, driver, base, tmp_path):
    srv = smbd_factory()
    sh = shadows(srv.conf, base, "TCP_NODELAY")
    assert alive(sh.pid)
    sh.kill_driver()
    # PR_SET_PDEATHSIG: smbd gets SIGKILL with its parent; its children
    # follow their parent out.
    assert wait_until(lambda: not alive(sh.pid)), f"shadow smbd {sh.pid} outlived its driver"
    assert wait_until(lambda: smbds_with_conf(sh.conf) == [])
    # What is left is the directory; the next run's sweep removes it.
    assert sh.run_dir.exists()
    r = subprocess.run([str(driver), "sweep", str(base)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert not sh.run_dir.exists()
    assert srv.alive()


def write_owner(run_dir, owner_pid, owner_start, smbd_pid, smbd_start):
    (run_dir / "trial.pid").write_text(
        f"owner {owner_pid} {owner_start}\nsmbd {smbd_pid} {smbd_start}\n")


def test_sweep_kills_a_leftover_smbd_that_is_still_alive(smbd_factory, shadows, driver, base,
                                                        tmp_path):
    """A run killed so that its smbd survived (PDEATHSIG can be lost, e.g.
    when smbtuned dies between fork and prctl's parent check): the leftover
    is made by killing the driver and restarting smbd on the directory it
    left, recorded in trial.pid as the run's smbd."""
    srv = smbd_factory()
    sh = shadows(srv.conf, base, "TCP_NODELAY")
    owner = (sh.run_dir / "trial.pid").read_text()
    sh.kill_driver()
    assert wait_until(lambda: smbds_with_conf(sh.conf) == [])

    with open(tmp_path / "leftover.log", "wb") as log:
        left = subprocess.Popen([SMBD, "--foreground", "--no-process-group", "--debug-stdout",
                                 "-s", str(sh.conf)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_until(lambda: connects(sh.port), READY_S), (
            (tmp_path / "leftover.log").read_text())
        m = re.match(r"owner (\d+) (\d+)\n", owner)
        write_owner(sh.run_dir, m.group(1), m.group(2), left.pid, proc_stat(left.pid)[2])

        # Next to it: a directory of a live run (this process), which must
        # stay, and a dead run whose recorded smbd pid now belongs to
        # another process (a different start time), which must not be
        # killed.
        me = proc_stat(os.getpid())
        live_dir = base / f"shadow-{os.getpid()}-abcdef"
        live_dir.mkdir()
        write_owner(live_dir, os.getpid(), me[2], 0, 0)
        other = subprocess.Popen(["sleep", "300"], start_new_session=True)
        recycled = base / "shadow-999999-ghijkl"
        recycled.mkdir()
        write_owner(recycled, 999999, 1, other.pid, proc_stat(other.pid)[2] + 1)
        try:
            r = subprocess.run([str(driver), "sweep", str(base)], capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            assert left.wait(timeout=WAIT_S) is not None
            assert wait_until(lambda: group_members(left.pid) == [])
            assert smbds_with_conf(sh.conf) == []
            assert not sh.run_dir.exists()
            assert live_dir.exists()
            assert not recycled.exists()
            assert other.poll() is None, "sweep killed a process that was not its smbd"
        finally:
            other.kill()
            other.wait()
    finally:
        if left.poll() is None:
            os.killpg(left.pid, signal.SIGKILL)
            left.wait()
    assert srv.alive()


def test_sweep_leaves_alone_a_group_that_is_not_its_smbds(driver, base, tmp_path):
    """A dead run whose recorded smbd is gone, and whose pid number is now
    the number of another program's process group, one whose leader has
    exited (after a reboot, or once the number came round again): a group
    with no leader is not proof that its members are that smbd's children.
    The sweep removes the directory and kills no one."""
    base.mkdir(mode=0o700)
    # A session of its own whose leader (sh) exits and leaves sleep behind
    # in the group numbered after it: no smbd, nobody's shadow.
    sh = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE,
                          text=True, start_new_session=True)
    orphan = int(sh.stdout.readline())
    sh.wait(timeout=WAIT_S)
    try:
        assert group_members(sh.pid) == [orphan]
        stale = base / "shadow-999999-mnopqr"
        stale.mkdir()
        write_owner(stale, 999999, 1, sh.pid, 1)
        r = subprocess.run([str(driver), "sweep", str(base)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert not stale.exists()
        assert alive(orphan), "sweep killed a process group that was not its smbd's"
    finally:
        try:
            os.kill(orphan, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sweep_leaves_alone_a_live_group_that_is_not_smbds(driver, base, tmp_path):
    """A record that names a live session leader with its true start time,
    one that is not an smbd (a record smbtuned did not write, or one whose
    numbers were taken again): the sweep removes the directory and kills
    no one. Before, any such group was killed."""
    base.mkdir(mode=0o700)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        stale = base / "shadow-999999-stuvwx"
        stale.mkdir()
        write_owner(stale, 999999, 1, other.pid, proc_stat(other.pid)[2])
        r = subprocess.run([str(driver), "sweep", str(base)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert not stale.exists()
        assert other.poll() is None, "sweep killed a process group that was not an smbd's"
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("how", ["group-writable", "world-writable", "someone else's", "a link"])
def test_a_base_that_is_not_ours_alone_is_refused(smbd_factory, driver, base, tmp_path, how):
    """The shadows' base directory is reached by path, as root: one that
    another user may write in (a state_dir whose `shadow` is theirs) would
    let them swap a run directory for a link, or plant a record naming a
    process to kill. Neither a sweep nor a start uses it; nothing in it is
    removed, and the error names it. (Read and search bits for others are
    fine: they let no one put anything there.)"""
    srv = smbd_factory()
    real = base.parent / "elsewhere" if how == "a link" else base
    real.mkdir(mode=0o700)
    if how == "group-writable":
        os.chmod(real, 0o770)
    elif how == "world-writable":
        os.chmod(real, 0o757)
    elif how == "someone else's":
        os.chown(real, 65534, 65534)
    else:
        base.symlink_to(real)
    planted = real / "shadow-999999-abcdef"
    planted.mkdir()
    os.chown(planted, 0, 0)
    r = subprocess.run([str(driver), "sweep", str(base)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert str(base) in r.stderr
    assert planted.exists()
    r = subprocess.run([str(driver), "start", str(srv.conf), str(base), "TCP_NODELAY", "10"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    assert str(base) in r.stderr
    assert sorted(p.name for p in real.iterdir()) == [planted.name]


def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_sweep_of_a_missing_base_is_fine(driver, tmp_path):
    r = subprocess.run([str(driver), "sweep", str(tmp_path / "nothing")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_too_long_a_base_is_refused_with_the_reason(smbd_factory, driver, tmp_path):
    """smbd cannot bind a messaging socket path longer than a unix socket's
    and exits without saying why: the module refuses such a base first."""
    srv = smbd_factory()
    base = tmp_path / ("x" * 80)
    r = subprocess.run([str(driver), "start", str(srv.conf), str(base), "TCP_NODELAY", "10"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    assert "too long for smbd's messaging socket" in r.stderr
    assert not base.exists() or list(base.iterdir()) == []


# The fixture smbd's Samba directories (smbd.py, _dirs_block), all in the
# test's tmp: the shadow's production.
PROD_DIRS = ("pid", "lock", "state", "cache", "private", "binddns", "ncalrpc", "ntp_signd",
             "winbindd", "usershares", "log")
# What every shadow keeps to itself, with a url too (trial_render.c).
RUNTIME_DIRS = ("pid", "lock", "cache", "ncalrpc", "log")


def emptied_production(srv):
    """Stop the fixture smbd and empty its Samba directories, so that
    whatever a shadow (which includes its smb.conf) writes there shows,
    even an open of an existing tdb. Returns {name: path}."""
    srv.stop()
    dirs = {d: srv.base / d for d in PROD_DIRS}
    for p in dirs.values():
        for entry in p.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    return dirs


def written(dirs, names):
    """What the directories `names` of dirs hold, as a list of paths."""
    return [str(p) for n in names for p in sorted(dirs[n].rglob("*"))]


def own_share_dir(base):
    """STATE_DIR/share as the daemon makes it: 0700, root's."""
    d = base.parent / "share"
    d.mkdir(mode=0o700)
    return d


def guest_smbclient(srv, port, share, *args):
    """smbclient as a guest against share on port."""
    cmd = [SMBCLIENT, "-s", str(srv.client_conf), "-N", "-p", str(port),
           f"//127.0.0.1/{share}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=srv.env(),
                          stdin=subprocess.DEVNULL)


def test_own_share_writes_nothing_in_production_dirs(smbd_factory, shadows, base, tmp_path):
    srv = smbd_factory()
    dirs = emptied_production(srv)
    share = own_share_dir(base)
    sh = shadows(srv.conf, base, "TCP_NODELAY SO_RCVBUF=262144", own_share=share)

    src = tmp_path / "payload"
    src.write_bytes(os.urandom(300_000))
    back = tmp_path / "back"
    # A guest, as the probe logs on without credentials.
    r = guest_smbclient(srv, sh.port, sh.share, "-c",
                        f"put {src} probe-file; get probe-file {back}; del probe-file")
    assert r.returncode == 0, r.stdout + r.stderr + sh.log.read_text()
    assert back.read_bytes() == src.read_bytes()
    assert list(share.iterdir()) == []
    assert written(dirs, PROD_DIRS) == []
    # Logons and permissions are the shadow's own: its secrets and passdb,
    # its registry and share ACLs, in its run directory.
    assert (sh.run_dir / "private" / "secrets.tdb").exists()
    assert (sh.run_dir / "private" / "passdb.tdb").exists()
    assert (sh.run_dir / "state" / "share_info.tdb").exists()
    sh.stop()
    assert written(dirs, PROD_DIRS) == []
    assert not sh.run_dir.exists()


def test_own_share_is_for_loopback_guests(smbd_factory, shadows, base, tmp_path):
    srv = smbd_factory()
    share = own_share_dir(base)
    sh = shadows(srv.conf, base, "TCP_NODELAY", own_share=share)
    secs = sections(samba_dump(sh.conf))
    # Served as root: under a name of 64 random bits that no command line
    # shows, so a local user who finds the port cannot use it.
    assert re.fullmatch(r"smbtuned-probe-[0-9a-f]{16}", sh.share), sh.share
    for pid in group_members(sh.pid):
        assert sh.share.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    r = guest_smbclient(srv, sh.port, "smbtuned-probe", "-c", "ls")
    assert r.returncode != 0, r.stdout
    own = secs[sh.share]
    assert own["path"] == str(share)
    assert own["guest only"] == "Yes"
    assert own["hosts allow"] == "127.0.0.1"
    assert own["browseable"] == "No"
    # Production's shares are still served, as production serves them.
    assert secs["share"]["path"] == str(srv.share_dir)
    r = guest_smbclient(srv, sh.port, "share", "-c", "ls")
    assert r.returncode == 0, r.stdout + r.stderr
    # The next shadow's name is another.
    other = shadows(srv.conf, base, "TCP_NODELAY", own_share=share)
    assert other.share != sh.share
    other.stop()
    sh.stop()


# A production [global] that only a group may log on to, with dot files
# vetoed. Each of these, copied into the own share, would refuse the
# probe's guest (its files are named .smbtuned-probe-*).
HARDENED = ("valid users = @smbtuned-test-nosuchgroup\n"
            "invalid users = nobody\n"
            "veto files = /.*/\n")


def test_own_share_works_under_production_access_rules(smbd_factory, shadows, base, tmp_path):
    """The own share is reachable whatever production's [global] says of
    users and vetoed names, and production's shares on the shadow keep
    what production gives them (here: the guest refused)."""
    srv = smbd_factory()
    # The fixture itself would refuse its own readiness check: production
    # here is a copy of its config with the rules in [global].
    prod = tmp_path / "hardened.conf"
    prod.write_text(srv.conf.read_text().replace("[global]\n", "[global]\n" + HARDENED, 1))
    share = own_share_dir(base)
    sh = shadows(prod, base, "TCP_NODELAY", own_share=share)
    src = tmp_path / "payload"
    src.write_bytes(os.urandom(100_000))
    back = tmp_path / "back"
    name = ".smbtuned-probe-x"
    r = guest_smbclient(srv, sh.port, sh.share, "-c",
                        f"put {src} {name}; get {name} {back}; del {name}")
    assert r.returncode == 0, r.stdout + r.stderr + sh.log.read_text()
    assert back.read_bytes() == src.read_bytes()
    assert list(share.iterdir()) == []
    r = guest_smbclient(srv, sh.port, "share", "-c", "ls")
    assert r.returncode != 0, r.stdout
    assert "NT_STATUS_ACCESS_DENIED" in r.stdout + r.stderr, r.stdout + r.stderr
    sh.stop()


def test_shadow_keeps_its_runtime_to_itself(smbd_factory, shadows, base, tmp_path):
    """With a url (production's shares): production's pid, lock, cache and
    ncalrpc directories and its log get nothing from the shadow."""
    srv = smbd_factory()
    dirs = emptied_production(srv)
    sh = shadows(srv.conf, base, "TCP_NODELAY")
    src = tmp_path / "payload"
    src.write_bytes(os.urandom(100_000))
    r = smbclient(srv, sh.port, "-c", f"put {src} f; del f")
    assert r.returncode == 0, r.stdout + r.stderr + sh.log.read_text()
    assert (sh.run_dir / "lock" / "locking.tdb").exists()
    sh.stop()
    assert written(dirs, RUNTIME_DIRS) == []


def test_own_share_must_be_a_directory_of_ours(smbd_factory, driver, base, tmp_path):
    """It is served as root: a symlink in its place is refused, nothing
    started."""
    srv = smbd_factory()
    target = base.parent / "elsewhere"
    target.mkdir()
    link = base.parent / "share"
    link.symlink_to(target)
    r = subprocess.run([str(driver), "start", str(srv.conf), str(base), "TCP_NODELAY", "10",
                        str(link)], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    assert "is not a directory of uid" in r.stderr, r.stderr
    assert not base.exists() or list(base.iterdir()) == []
