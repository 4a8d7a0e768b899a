"""What a hostile local user or share user can make smbtuned do, and what it
must not: delete files that are not its own, leak the password, be stopped
by planted probe files, pass a timeout off as a measurement, hang on a FIFO.

Every test works under its own tmp_path; the "silent port" is a listening
socket of the test that never answers (the kernel completes the TCP
handshake from the backlog, so the probe waits in its logon).
"""

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from daemon_util import records
from test_probe import PREFIX, dead_pid, own_host

NOBODY = 65534
WORKDIR_PREFIX = "smbtuned-probe-"
PASSWORD = "S3cr3t-pw-4f9a"
USER = "daemon"


def conf(tmp_path, name="probe.conf", **opts):
    """A config with a probe section (values as given) and the test's own
    state directory."""
    opts.setdefault("size", "1M")
    opts.setdefault("request_size", "64K")
    body = "".join(f'    {k} = "{v}"\n' for k, v in opts.items())
    p = tmp_path / name
    p.write_text("probe {\n" + body + "}\n"
                 f'tune {{\n    state_dir = "{tmp_path / "state"}"\n}}\n')
    return p


def run(smbtuned, *args, env=None, timeout=60, prefix=()):
    return subprocess.run([*prefix, str(smbtuned), *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def cred_file(tmp_path, text, name="cred"):
    p = tmp_path / name
    p.write_text(text)
    p.chmod(0o600)
    return p


def refused_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"smb://127.0.0.1:{s.getsockname()[1]}/share"


@pytest.fixture
def silent_port():
    """smb://127.0.0.1:PORT/share on a socket that accepts no one and
    answers nothing."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield f"smb://127.0.0.1:{s.getsockname()[1]}/share"
    finally:
        s.close()


@pytest.fixture
def root_only():
    if os.geteuid() != 0:
        pytest.skip("needs root (chown, other users' files)")


def tree(base, name, owner=0, files=("a", "sub/b")):
    """A directory base/name holding files, everything owned by owner."""
    top = base / name
    top.mkdir(parents=True)
    for f in files:
        (top / f).parent.mkdir(parents=True, exist_ok=True)
        (top / f).write_text("x")
    for p in [top, *top.rglob("*")]:
        os.lchown(p, owner, owner)
    return top


def listing(top):
    return sorted(str(p.relative_to(top)) for p in top.rglob("*"))


# ---- 1. only what is ours is ever deleted ----

def test_planted_trees_of_another_user_are_left_alone(smbtuned, tmp_path, root_only):
    """A tree named like a dead probe's work directory, owned by nobody, in
    $TMPDIR (which the old code swept, whoever owned it) and in the work
    base: both stay, every file of them."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    base = tmp_path / "state" / "probe"
    base.mkdir(parents=True, mode=0o700)
    name = f"{WORKDIR_PREFIX}{dead_pid()}-AbC123"
    planted = [tree(tmp, name, NOBODY), tree(base, name, NOBODY)]
    before = [listing(t) for t in planted]
    env = dict(os.environ, TMPDIR=str(tmp))
    r = run(smbtuned, "--probe", "-c", conf(tmp_path), "--url", refused_url(), "--json", env=env)
    assert json.loads(r.stdout)["outcome"] == "connect_refused", r.stderr
    assert [listing(t) for t in planted] == before
    # The probe's own directory is gone; nothing else of ours is left but
    # the (empty) record of the probe files made.
    assert sorted(p.name for p in base.iterdir()) == ["made", name]
    assert records(tmp_path / "state") == []


def test_stale_tree_of_ours_goes_but_not_what_its_links_point_to(smbtuned, tmp_path, root_only):
    precious = tmp_path / "precious"
    precious.mkdir(mode=0o755)
    for i in range(5):
        (precious / f"f{i}").write_text("root's")
    base = tmp_path / "state" / "probe"
    base.mkdir(parents=True, mode=0o700)
    stale = tree(base, f"{WORKDIR_PREFIX}{dead_pid()}-XyZ789")
    (stale / "sub" / "link").symlink_to(precious)
    (stale / "filelink").symlink_to(precious / "f0")
    r = run(smbtuned, "--probe", "-c", conf(tmp_path), "--url", refused_url(), "--json")
    assert json.loads(r.stdout)["outcome"] == "connect_refused", r.stderr
    assert not stale.exists() and not stale.is_symlink()
    assert sorted(p.name for p in precious.iterdir()) == [f"f{i}" for i in range(5)]
    assert list(base.iterdir()) == [base / "made"]


def test_work_base_that_is_a_symlink_or_not_ours_is_refused(smbtuned, tmp_path, root_only):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "probe").symlink_to(elsewhere)
    r = run(smbtuned, "--probe", "-c", conf(tmp_path), "--url", refused_url(), "--json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["outcome"] == "error"
    assert f"{state / 'probe'} is a symlink" in r.stderr
    assert listing(elsewhere) == ["keep"]

    (state / "probe").unlink()
    (state / "probe").mkdir(mode=0o700)
    os.chown(state / "probe", NOBODY, NOBODY)
    r = run(smbtuned, "--probe", "-c", conf(tmp_path), "--url", refused_url(), "--json")
    assert r.returncode == 1
    assert "owned by uid 65534" in r.stderr
    assert list((state / "probe").iterdir()) == []

    # The record of the probe files made, beside the work directories,
    # is judged the same way: a link there is not followed.
    os.chown(state / "probe", 0, 0)
    (state / "probe" / "made").symlink_to(elsewhere)
    r = run(smbtuned, "--probe", "-c", conf(tmp_path), "--url", refused_url(), "--json")
    assert r.returncode == 1
    assert f"{state / 'probe' / 'made'} is a symlink" in r.stderr
    assert listing(elsewhere) == ["keep"]


# ---- 7. the password stays in the child that logs on ----

def bad_lines():
    """Malformed credentials lines that are mostly password."""
    return [f"password {PASSWORD}=", f"password {PASSWORD} = x", f"{PASSWORD}",
            f" {PASSWORD}=password", f"passw0rd = {PASSWORD}"]


@pytest.mark.parametrize("line", bad_lines())
def test_malformed_credentials_never_show_the_secret(smbtuned, tmp_path, line):
    cred = cred_file(tmp_path, f"username = {USER}\n\n{line}\n")
    os.chown(cred, 0, 0)
    for args in (["--probe", "--json"], ["-t"]):
        r = run(smbtuned, *args, "-c", conf(tmp_path), "--url", refused_url(), "--credentials",
                cred)
        # --probe's table is its own; -t: a config error (smbtuned(8))
        assert r.returncode == (1 if "--probe" in args else 78), (args, r.stdout, r.stderr)
        assert f"{cred}:3:" in r.stderr, r.stderr
        assert PASSWORD not in r.stdout + r.stderr
        assert "passw0rd" not in r.stderr


@pytest.mark.parametrize("url", [f"smb://admin:{PASSWORD}@127.0.0.1/share",
                                 f"smb://admin:{PASSWORD}/x@127.0.0.1/share",
                                 f"smb://admin:1/{PASSWORD}@127.0.0.1/share",
                                 f"admin:{PASSWORD}@127.0.0.1/share"])
def test_a_url_with_a_password_is_never_shown(smbtuned, tmp_path, url):
    """A user and password in a URL are refused without the URL being
    shown, wherever it comes from and whatever the password holds (a '/'
    in it once made the rest parse as a port or share name, quoted)."""
    with_url = conf(tmp_path, name="url.conf", url=url)
    for args in (["-t", "-c", with_url], ["--status", "-c", with_url],
                 ["--probe", "-c", conf(tmp_path), "--url", url],
                 ["--probe", "--json", "-c", conf(tmp_path), "--url", url]):
        r = run(smbtuned, *args)
        assert r.returncode != 0, (args, r.stdout, r.stderr)
        assert "credentials file" in r.stderr, (args, r.stderr)
        assert PASSWORD not in r.stdout + r.stderr, (args, r.stdout, r.stderr)


def test_fifo_as_credentials_file_is_refused_at_once(smbtuned, tmp_path):
    fifo = tmp_path / "cred"
    os.mkfifo(fifo, 0o600)
    for args in (["--probe", "--json"], ["-t"]):
        # A blocking open would wait for a writer for ever: the timeout
        # turns that into a failure.
        r = run(smbtuned, *args, "-c", conf(tmp_path), "--url", refused_url(), "--credentials",
                fifo, timeout=30)
        assert r.returncode == (1 if "--probe" in args else 78), (args, r.stderr)
        assert f"{fifo} is not a regular file" in r.stderr


def children(pid):
    out = []
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(st.parent.name))
    return out


def memory_holds(pid, secret):
    """Whether the process's readable memory holds secret (as bytes, or as
    UTF-16 the way NTLM code keeps it)."""
    needles = [secret.encode(), secret.encode("utf-16-le")]
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            parts = line.split()
            if not parts[1].startswith("r") or (len(parts) > 5 and parts[5] in
                                                 ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            if any(n in data for n in needles):
                return True
    return False


def wait_for(cond, what, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def check_only_the_child_holds_it(smbtuned, args):
    """Run smbtuned with args (its probe child gets stuck in its logon on a
    silent port), as root with gid nobody so that /proc shows who is
    dumpable; then stop it."""
    proc = subprocess.Popen(["setpriv", f"--regid={NOBODY}", "--clear-groups", str(smbtuned),
                             *(str(a) for a in args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        only_the_child_holds_it(proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def only_the_child_holds_it(proc):
    def child():
        kids = children(proc.pid)
        return kids[0] if kids else None
    kid = wait_for(child, "the probe child")
    # The child reads the file right before it logs on: the positive
    # control that the scan below can find the password at all.
    wait_for(lambda: memory_holds(kid, PASSWORD), "the password in the child's memory")
    assert not memory_holds(proc.pid, PASSWORD), "the parent holds the password"
    limits = Path(f"/proc/{kid}/limits").read_text()
    assert re.search(r"^Max core file size\s+0\s+0\s", limits, re.M), limits
    # Files of a process that is not dumpable belong to root:root; the
    # parent's belong to its gid (65534 through setpriv): the control.
    assert os.stat(f"/proc/{proc.pid}/environ").st_gid == NOBODY
    assert os.stat(f"/proc/{kid}/environ").st_gid == 0, "the probe child is dumpable"


def test_probe_parent_never_holds_the_password(smbtuned, tmp_path, silent_port, root_only):
    cred = cred_file(tmp_path, f"username = {USER}\npassword = {PASSWORD}\n")
    check_only_the_child_holds_it(smbtuned, ["--probe", "--json", "-c",
                                             conf(tmp_path, deadline="20"), "--url", silent_port,
                                             "--credentials", cred])


def test_daemon_never_holds_the_password(smbtuned, tmp_path, silent_port, root_only):
    cred = cred_file(tmp_path, f"username = {USER}\npassword = {PASSWORD}\n")
    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    check_only_the_child_holds_it(smbtuned, ["--once", "-c", conf(tmp_path, deadline="20"),
                                             "--url", silent_port, "--credentials", cred,
                                             "--smb-conf", smb_conf, "--trials", "client",
                                             "--mode", "advise", "--apply", "none"])


def opens_of(trace, path):
    """Lines of an strace -e trace=open,openat log that open path."""
    return [l for l in trace.read_text().splitlines() if f'"{path}"' in l]


def strace_daemon(smbtuned, traces, err_path, *args):
    """smbtuned with args under `strace -ff` (opens, one file per process
    in traces/t.PID), its stderr to err_path: (strace's Popen, the
    daemon's pid)."""
    with open(err_path, "w") as err:
        proc = subprocess.Popen(["strace", "-ff", "-qq", "-e", "trace=open,openat", "-o",
                                 traces / "t", str(smbtuned), *map(str, args)],
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    return proc, wait_for(lambda: (children(proc.pid) or [None])[0], "the daemon under strace")


def test_config_loads_read_the_password_only_in_a_child(smbtuned, tmp_path):
    """The check of the credentials file at each config load (start-up,
    SIGHUP, -t) parses it in a short-lived child: the daemon itself never
    opens the file, so no byte of the password is ever in its memory (a
    wipe after the parse would still leave it there for a while)."""
    cred = cred_file(tmp_path, f"username = {USER}\npassword = {PASSWORD}\n")
    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    cfg = tmp_path / "d.conf"
    cfg.write_text('probe {\n    size = "1M"\n    request_size = "64K"\n    deadline = "5"\n}\n'
                   f'tune {{\n    state_dir = "{tmp_path / "state"}"\n    interval = "1h"\n'
                   '    trials = "client"\n    mode = "advise"\n    apply = "none"\n}\n')
    traces = tmp_path / "traces"
    traces.mkdir()
    err_path = tmp_path / "stderr"
    # A refused URL: the first cycle fails at once and the daemon waits
    # for its interval, so that SIGHUP reloads right away.
    proc, daemon = strace_daemon(smbtuned, traces, err_path, "-c", cfg, "--url", refused_url(),
                                 "--credentials", cred, "--smb-conf", smb_conf)
    try:
        wait_for(lambda: "tuning" in err_path.read_text(), "the daemon's start")
        os.kill(daemon, signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in err_path.read_text(), "the reload")
        # A file gone bad: the reload's check (in its job) refuses it,
        # named with its line, and the configuration in force stays.
        cred.write_text(f"username = {USER}\n{PASSWORD}\n")
        os.kill(daemon, signal.SIGHUP)
        wait_for(lambda: "keeping the configuration in force" in err_path.read_text(),
                 "the refusal of the bad file")
    finally:
        proc_kill = children(proc.pid)
        for pid in proc_kill:
            os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=60)
    parent = traces / f"t.{daemon}"
    assert parent.exists(), sorted(traces.iterdir())
    assert not opens_of(parent, cred), opens_of(parent, cred)
    # The control: the checks did run, in children, at start and at SIGHUP.
    checkers = [t for t in traces.iterdir() if t != parent and opens_of(t, cred)]
    assert len(checkers) >= 2, (sorted(traces.iterdir()), err_path.read_text())
    refusal = [l for l in err_path.read_text().splitlines() if "keeping the configuration" in l]
    assert f"{cred}:2: expected 'key = value'" in refusal[0], refusal
    assert PASSWORD not in err_path.read_text()

    # -t: the same, and a bad file is still named with its line.
    for t in traces.iterdir():
        t.unlink()
    cred.write_text(f"username = {USER}\n{PASSWORD}\n")
    r = run("strace", "-ff", "-qq", "-e", "trace=open,openat,execve", "-o", traces / "t",
            smbtuned, "-t", "-c", cfg, "--url", refused_url(), "--credentials", cred)
    assert r.returncode == 78, r.stderr
    assert f"{cred}:2: expected 'key = value'" in r.stderr, r.stderr
    assert PASSWORD not in r.stderr
    # smbtuned's own trace is the one that execs it; its forks do not exec.
    mine = [t for t in traces.iterdir() if f'execve("{smbtuned}"' in t.read_text()]
    assert len(mine) == 1, sorted(traces.iterdir())
    assert not opens_of(mine[0], cred), opens_of(mine[0], cred)
    assert any(opens_of(t, cred) for t in traces.iterdir() if t != mine[0])


# ---- 10. a timeout is not a measurement ----

def test_timeout_on_a_silent_port_exits_nonzero_with_json(smbtuned, tmp_path, silent_port):
    r = run(smbtuned, "--probe", "--json", "-c", conf(tmp_path, deadline="2", duration="0"), "--url",
            silent_port)
    assert r.returncode == 2, r.stderr
    assert json.loads(r.stdout)["outcome"] == "timeout"
    assert "timeout" in r.stderr and silent_port in r.stderr


# ---- 8. planted probe files do not stop the probe ----

@pytest.mark.smbd
def test_planted_probe_names_do_not_stop_probing(smbd, smbtuned, tmp_path):
    """3000 names of the old form (<host>-<pid>-<counter>) for the pids the
    next probe children will get, and 3000 of the new form: every probe
    still measures."""
    host = own_host()
    last = int(Path("/proc/loadavg").read_text().split()[-1])
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    share = Path(smbd.share_dir)
    for i in range(3000):
        pid = (last + 1 + i) % pid_max
        (share / f"{PREFIX}{host}-{pid}-0").write_bytes(b"")
        (share / f"{PREFIX}{host}-{pid}-{os.urandom(8).hex()}").write_bytes(b"")
    for _ in range(3):
        r = run(smbtuned, "--probe", "--json", "-c", conf(tmp_path), "--url", smbd.url,
                timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["outcome"] == "ok"
    # None was recorded as made by a probe of ours: the clean-up removed
    # none, however much they look like dead probes' files.
    left = sum(1 for p in share.iterdir() if p.name.startswith(PREFIX))
    assert left == 6000
