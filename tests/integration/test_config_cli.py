"""`smbtuned -t -c FILE` refuses a broken /etc/smbtuned.conf with its file
and line (issue 9, defect 6), and never waits on a FIFO in its place.

No smbd is needed: -t stops at the config file's error before smb.conf.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import run_editor

GOOD_TAIL = 'probe {\n    url = "smb://127.0.0.1/share"\n}\n'

CASES = {
    "missing-brace": ("tune {\n    mode = advise\n" + GOOD_TAIL, 1, "'{' is not closed"),
    "open-comment": (GOOD_TAIL + "/* old\ntune {\n    mode = bogus\n}\n", 4,
                     "comment '/*' is not closed"),
    "section-twice": (GOOD_TAIL + "tune {\n}\ntune {\n}\n", 6, "given twice (first at line 4)"),
    "key-twice": ("tune {\n    mode = advise\n    mode = tune\n}\n" + GOOD_TAIL, 3,
                  "mode is given twice (first at line 2)"),
    "environment": ('probe {\n    url = "smb://${SMBTUNED_TEST_HOST}/share"\n}\n', 2,
                    "'${' is not allowed"),
}


@pytest.fixture
def smb_conf(tmp_path):
    p = tmp_path / "smb.conf"
    p.write_text("[global]\n    socket options = TCP_NODELAY\n")
    return p


def check(smbtuned, conf, smb_conf):
    # The variable is set so that the old behaviour (expansion) would yield
    # a valid URL and pass.
    env = dict(os.environ, SMBTUNED_TEST_HOST="127.0.0.1")
    return subprocess.run([str(smbtuned), "-t", "-c", str(conf), "--smb-conf", str(smb_conf)],
                          capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_config_is_refused_with_file_and_line(smbtuned, tmp_path, smb_conf, case):
    text, line, what = CASES[case]
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(text)
    r = check(smbtuned, conf, smb_conf)
    assert r.returncode != 0, f"{case}: -t accepted it: {r.stdout} {r.stderr}"
    assert f"{conf}:{line}: " in r.stderr, r.stderr
    assert what in r.stderr, r.stderr


def test_good_config_passes(smbtuned, tmp_path, smb_conf):
    """The same checks against a file without the defects: -t says yes."""
    conf = tmp_path / "smbtuned.conf"
    conf.write_text("# ok: ${NOT} /* in a comment\ntune {\n    mode = advise\n}\n" + GOOD_TAIL)
    r = check(smbtuned, conf, smb_conf)
    assert r.returncode == 0, r.stderr


def test_fifo_is_refused(smbtuned, tmp_path, smb_conf):
    conf = tmp_path / "smbtuned.conf"
    os.mkfifo(conf)
    # A hang shows up as TimeoutExpired, which fails the test.
    r = run_editor(smbtuned, "-t", "-c", conf, "--smb-conf", smb_conf, timeout=30)
    assert r.returncode != 0
    assert f"{conf} is a FIFO" in r.stderr, r.stderr


@pytest.mark.parametrize("case", ["registry", "missing"])
def test_daemon_refuses_what_check_refuses(smbtuned, tmp_path, case):
    """The unit runs no `smbtuned -t` before the daemon any more
    (RestartPreventExitStatus=78 instead): the daemon itself refuses an
    smb.conf that -t refuses, with -t's exit status, before READY=1 and
    before it makes its state directory, rather than start and fail every
    cycle."""
    if case == "registry":
        smb_conf = tmp_path / "smb.conf"
        smb_conf.write_text("[global]\n   config backend = registry\n")
        where = f"{smb_conf}:2: "
    else:
        smb_conf = tmp_path / "absent" / "smb.conf"
        where = f"{smb_conf}"
    conf = tmp_path / "smbtuned.conf"
    conf.write_text('tune {\n    mode = "advise"\n}\n')
    state = tmp_path / "state"
    args = ["-c", conf, "--smb-conf", smb_conf, "--state-dir", state]
    r = check(smbtuned, conf, smb_conf)
    assert r.returncode == 78 and where in r.stderr, (r.returncode, r.stderr)
    # A hang (the daemon started) shows up as TimeoutExpired, which fails the test.
    d = run_editor(smbtuned, *args, timeout=30)
    assert d.returncode == 78, (d.returncode, d.stderr)
    assert where in d.stderr, d.stderr
    assert not state.exists()


@pytest.mark.parametrize("args, option", [
    (["--show", "--smb-conf", "smb.conf"], "--smb-conf"),
    (["--status", "--state-dir", "state"], "--state-dir"),
    (["-t", "--mode", "bogus"], "--mode"),
    (["-t", "--trials", "bogus"], "--trials"),
    (["-t", "--url", "smb://host"], "--url"),
])
def test_bad_value_on_the_command_line_names_the_option(smbtuned, tmp_path, smb_conf, args,
                                                       option):
    """A value refused on the command line is named by the option that
    gave it, not by the config file's key (smb_conf, state_dir): the admin
    looks for it where the message says."""
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{tmp_path}/s"\n}}\n')
    r = run_editor(smbtuned, "-c", conf, *args, timeout=30)
    assert r.returncode == 78, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"smbtuned: {option}: "), r.stderr


def test_check_names_the_credentials_file_it_read(smbtuned, tmp_path, smb_conf):
    """-t checks the credentials file (owner, mode, syntax): its line of
    success names it with the other files read (smbtuned(8))."""
    creds = tmp_path / "creds"
    creds.write_text("username = u\npassword = not-shown\n")
    creds.chmod(0o600)
    if creds.stat().st_uid != 0:
        pytest.skip("the credentials file must be root's")
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'probe {{\n    credentials = "{creds}"\n}}\n')
    r = run_editor(smbtuned, "-t", "-c", conf, "--smb-conf", smb_conf,
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"configuration OK: {conf}, credentials {creds}, and {smb_conf} "
                        f"(socket options at {smb_conf}:2)\n"), r.stdout
    assert "not-shown" not in r.stdout + r.stderr


@pytest.mark.parametrize("owner, mode", [(0, 0o666), (0, 0o646), (65534, 0o644)])
def test_config_file_someone_else_may_write_is_refused(smbtuned, tmp_path, smb_conf, owner,
                                                      mode):
    """Root acts on what the config file names: the smb.conf it rewrites,
    the url it logs on to with the credentials file's password. One that
    another user owns or may write is refused (78) before anything is done
    with it, as the credentials file and the state directory are."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file away")
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{tmp_path}/s"\n}}\n')
    os.chown(conf, owner, 0)
    conf.chmod(mode)
    before = smb_conf.read_bytes()
    for args in (["-t"], ["--status"], ["--set-buffers", "1M,1M"]):
        r = run_editor(smbtuned, "-c", conf, *args, timeout=30)
        assert r.returncode == 78, (args, r.stdout, r.stderr)
        assert f"smbtuned: {conf} is owned by uid {owner}" in r.stderr, r.stderr
        assert "refused" in r.stderr, r.stderr
    assert smb_conf.read_bytes() == before
    assert not (tmp_path / "s").exists()
    # root's and writable by root alone (a group of root's too) is fine
    os.chown(conf, 0, 0)
    conf.chmod(0o664)
    assert run_editor(smbtuned, "-c", conf, "-t", timeout=30).returncode == 0


def test_own_config_writable_by_own_group_is_read_when_not_root(smbtuned, smb_conf):
    """A user who runs smbtuned (--probe, --status) with a config of their
    own: with user private groups and umask 002 (Ubuntu's default) the
    file is writable by their own group, which is no one else. Refused
    before, with 'chown root:root' as the fix, which a user cannot run.
    Another group's write is still refused."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run as nobody")
    d = Path(tempfile.mkdtemp(prefix="smbtuned-own-", dir="/tmp"))  # nobody can reach it
    try:
        d.chmod(0o755)
        smb = d / "smb.conf"
        smb.write_bytes(smb_conf.read_bytes())
        conf = d / "smbtuned.conf"
        # a state directory of nobody's: the machine's own is not judged
        state = d / "state"
        state.mkdir(mode=0o700)
        os.chown(state, 65534, 65534)
        conf.write_text(f'tune {{\n    smb_conf = "{smb}"\n    state_dir = "{state}"\n}}\n')
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        for gid, rc in ((65534, 0), (1, 78)):
            os.chown(conf, 65534, gid)
            conf.chmod(0o664)
            r = subprocess.run([*nobody, str(smbtuned), "-c", str(conf), "-t"],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == rc, (gid, r.stdout, r.stderr)
        assert "must be root's or uid 65534's" in r.stderr, r.stderr
        assert "chown" not in r.stderr and f"chmod go-w {conf}" in r.stderr, r.stderr
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize("case", ["open", "under-open-parent"])
def test_check_refuses_the_state_directory_the_start_refuses(smbtuned, tmp_path, smb_conf,
                                                             case):
    """-t said OK for a state directory the daemon then refused at its
    start (exit 1 after `systemctl start`): one anybody may write, or one
    still to be made under a directory anybody may write. -t now judges it
    as the start does, and makes nothing."""
    if os.geteuid() != 0:
        pytest.skip("the state directory's owner is judged against root")
    if case == "open":
        state = tmp_path / "state"
        state.mkdir()
        state.chmod(0o777)
    else:
        # short names: state_dir has 56 bytes where shadow trials run
        parent = tmp_path / "o"
        parent.mkdir()
        parent.chmod(0o777)  # no sticky bit: anybody may swap what is in it
        state = parent / "s"
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{state}"\n}}\n')
    r = run_editor(smbtuned, "-t", "-c", conf, timeout=30)
    assert r.returncode == 78, (r.stdout, r.stderr)
    assert r.stderr.startswith("smbtuned: state directory: "), r.stderr
    assert "refused" in r.stderr, r.stderr
    assert r.stdout == ""
    assert state.exists() == (case == "open")
    # the start refuses the same directory
    r = run_editor(smbtuned, "--once", "--dry-run", "-c", conf, timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "state directory: " in r.stderr, r.stderr
    # and a private one, or one to be made in a private place, passes
    for ok in (tmp_path / "f" / "s", state):
        if ok == state:
            state.mkdir(exist_ok=True)
            state.chmod(0o700)
            if case != "open":
                parent.chmod(0o755)
        conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{ok}"\n}}\n')
        r = run_editor(smbtuned, "-t", "-c", conf, timeout=30)
        assert r.returncode == 0, (ok, r.stdout, r.stderr)
    assert not (tmp_path / "f").exists()


def test_check_refuses_a_state_dir_too_long_for_a_shadow_smbd(smbtuned, tmp_path, smb_conf):
    """A state_dir of more than 56 bytes passed -t and the start, and every
    cycle then failed at its first trial: a shadow smbd's messaging socket
    below it would not fit a Unix socket path. -t refuses it with its line
    where shadow trials run, and keeps it where they do not (a peer's
    share, client trials)."""
    state = tmp_path / ("s" * (56 - len(str(tmp_path))))  # 57 bytes; never made
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{state}"\n}}\n')
    r = run_editor(smbtuned, "-t", "-c", conf, timeout=30)
    assert r.returncode == 78, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"smbtuned: {conf}:3: tune: state_dir = {state} is 57 bytes: "
                               "shadow trials need 56 at most"), r.stderr
    assert r.stdout == ""
    assert not state.exists()
    conf.write_text(f'probe {{\n    url = "smb://peer.invalid/share"\n}}\n'
                    f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{state}"\n}}\n')
    r = run_editor(smbtuned, "-t", "-c", conf, timeout=30)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert not state.exists()


def test_check_refuses_an_smb_conf_samba_cannot_load(smbtuned, tmp_path):
    """-t read smb.conf with smbtuned's parser only and said OK for one that
    Samba's testparm cannot load (a bad boolean), where every write of the
    daemon's is then refused by testparm. It now asks testparm too, and
    names the file and testparm's reason."""
    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n   read only = maybe\n")
    state = tmp_path / "state"
    conf = tmp_path / "smbtuned.conf"
    conf.write_text("")
    r = run_editor(smbtuned, "-t", "-c", conf, "--smb-conf", smb_conf,
                   "--state-dir", state, timeout=60)
    assert r.returncode == 78, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"smbtuned: {smb_conf}: Samba's testparm cannot read"), r.stderr
    assert "Error loading services." in r.stderr, r.stderr
    assert r.stdout == ""
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n   read only = no\n")
    r = run_editor(smbtuned, "-t", "-c", conf, "--smb-conf", smb_conf,
                   "--state-dir", state, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)


@pytest.mark.parametrize("case", ["link-is-state-dir", "link-on-the-way"])
def test_check_refuses_a_state_directory_reached_through_a_link_to_nothing(smbtuned, tmp_path,
                                                                          smb_conf, case):
    """-t took a state_dir that is (or goes through) a symlink to nothing for
    one still to be made: stat() says it is absent. The start's mkdir meets
    the link itself (EEXIST), does not follow it, and the start then fails
    with exit 1 ('No such file or directory'). -t refuses it as the start
    does, and makes nothing where the link points."""
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    state = link if case == "link-is-state-dir" else link / "s"
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n    smb_conf = "{smb_conf}"\n    state_dir = "{state}"\n}}\n')
    r = run_editor(smbtuned, "--once", "--dry-run", "-c", conf, timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "state directory: " in r.stderr, r.stderr
    r = run_editor(smbtuned, "-t", "-c", conf, timeout=30)
    assert r.returncode == 78, (r.stdout, r.stderr)
    assert r.stderr.startswith("smbtuned: state directory: "), r.stderr
    assert str(link) in r.stderr, r.stderr
    assert r.stdout == ""
    assert not (tmp_path / "nowhere").exists()


def test_check_as_another_user_says_whom_it_judged_for(smbtuned, smb_conf):
    """-t judges the state directory for the user who runs it; root's 0700
    directory (the unit's) cannot be opened by another. The refusal says
    so, and how to check it as the daemon would."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run as nobody")
    d = Path(tempfile.mkdtemp(prefix="smbtuned-own-", dir="/tmp"))
    try:
        d.chmod(0o755)
        smb = d / "smb.conf"
        smb.write_bytes(smb_conf.read_bytes())
        smb.chmod(0o644)
        state = d / "state"
        state.mkdir(mode=0o700)
        conf = d / "smbtuned.conf"
        conf.write_text(f'tune {{\n    smb_conf = "{smb}"\n    state_dir = "{state}"\n}}\n')
        conf.chmod(0o644)
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        r = subprocess.run([*nobody, str(smbtuned), "-c", str(conf), "-t"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 78, (r.stdout, r.stderr)
        assert r.stderr.startswith(f"smbtuned: state directory: {state}"), r.stderr
        assert "run it as the daemon's user, root" in r.stderr, r.stderr
        r = subprocess.run([str(smbtuned), "-c", str(conf), "-t"], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, (r.stdout, r.stderr)
    finally:
        shutil.rmtree(d)


def open_never_answered(path):
    """A fanotify group (root only) that holds every open of path until it
    is closed, as a stalled network mount would: its fd, or None where the
    kernel or file system has no permission events."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fan_class_content, fan_cloexec, fan_mark_add, fan_open_perm = 0x4, 0x1, 0x1, 0x10000
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                   ctypes.c_char_p]
    fan = libc.fanotify_init(fan_class_content | fan_cloexec, os.O_RDONLY)
    if fan < 0:
        return None
    if libc.fanotify_mark(fan, fan_mark_add, fan_open_perm, -100, str(path).encode()) < 0:
        os.close(fan)
        return None
    return fan


def test_start_whose_check_gets_no_answer_is_retried(smbtuned, tmp_path, smb_conf):
    """A start refused because a check got no answer in time (the
    credentials file on a mount that stalls at boot) exits 1, which
    systemd retries, not 78, which the unit's RestartPreventExitStatus=78
    leaves down until an admin acts: nothing is wrong with the
    configuration."""
    cred = tmp_path / "cred"
    cred.write_text("username = u\npassword = p\n")
    cred.chmod(0o600)
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'probe {{\n    url = "smb://127.0.0.1/share"\n    credentials = "{cred}"\n}}\n'
                    f'tune {{\n    mode = "advise"\n    state_dir = "{tmp_path}/s"\n}}\n')
    fan = open_never_answered(cred)
    if fan is None:
        pytest.skip("no fanotify permission events here")
    try:
        d = run_editor(smbtuned, "-c", conf, "--smb-conf", smb_conf, timeout=60)
    finally:
        os.close(fan)  # lets the held open go on
    assert d.returncode == 1, (d.returncode, d.stderr)
    assert "no answer within" in d.stderr and str(cred) in d.stderr, d.stderr
    # the same file, answered: a configuration error is still 78
    cred.chmod(0o644)
    d = run_editor(smbtuned, "-c", conf, "--smb-conf", smb_conf, timeout=60)
    assert d.returncode == 78, (d.returncode, d.stderr)


def test_live_trials_with_a_far_url_are_a_warning(smbtuned, tmp_path, smb_conf):
    """Live trials write this machine's smb.conf while the probe measures
    the url's server: with a url to another host, -t says so with the line
    of trials, and still passes (a name of this machine is this smbd too);
    with a loopback url it says nothing."""
    conf = tmp_path / "smbtuned.conf"
    for url, said in (("smb://fileserver.example/data", True),
                      ("smb://127.0.0.1/data", False)):
        conf.write_text(f'probe {{\n    url = "{url}"\n}}\n'
                        f'tune {{\n    trials = "live"\n    state_dir = "{tmp_path}/s"\n}}\n')
        r = check(smbtuned, conf, smb_conf)
        assert r.returncode == 0, (r.returncode, r.stderr)
        assert (f"{conf}:5: tune: trials = live with url = {url}: live trials write this "
                f"machine's smb.conf" in r.stderr) == said, r.stderr


def test_shadow_trials_with_a_url_on_an_ad_dc_are_refused(smbtuned, tmp_path, smb_conf):
    """With a url a shadow smbd runs production's smb.conf, and smbd will
    not run an AD DC's without samba: -t refuses shadow trials with a url
    there (by trials = auto too), with the line of trials when it has one,
    and passes the own share (no url: a standalone shadow of its own),
    client trials, and shadow trials on a file server."""
    conf = tmp_path / "smbtuned.conf"
    dc = tmp_path / "dc.conf"
    dc.write_text("[global]\n    server role = active directory domain controller\n"
                  "    socket options = TCP_NODELAY\n")
    cases = [(dc, 'url = "smb://127.0.0.1/data"', 'trials = "shadow"', f"{conf}:5: tune: trials: "),
             (dc, 'url = "smb://127.0.0.1/data"', "", ""),
             (dc, "", 'trials = "shadow"', None),
             (dc, 'url = "smb://peer.example/data"', 'trials = "client"', None),
             (smb_conf, 'url = "smb://127.0.0.1/data"', 'trials = "shadow"', None)]
    for smbconf, url, trials, refused in cases:
        conf.write_text(f"probe {{\n    {url}\n}}\n"
                        f'tune {{\n    {trials}\n    state_dir = "{tmp_path}/s"\n}}\n')
        r = check(smbtuned, conf, smbconf)
        if refused is None:
            assert r.returncode == 0, (smbconf, url, trials, r.stderr)
            continue
        assert r.returncode == 78, (url, trials, r.stderr)
        assert r.stderr == (f"smbtuned: {refused}shadow trials with a url run {dc}, and this smbd "
                            f"is an AD DC's (server role = active directory domain controller), "
                            f"which smbd refuses to run without samba: measure smbtuned's own "
                            f'share (no url) or a peer\'s share (trials = "client")\n'), r.stderr


def test_deadline_short_for_the_duration_is_a_warning(smbtuned, tmp_path, smb_conf):
    """A deadline no longer than both directions of the duration is said
    with the lines of both, and -t still passes: where the size ends each
    direction first (a LAN) it is fine, and a refusal would leave a
    service that ran before an upgrade down (exit 78)."""
    conf = tmp_path / "smbtuned.conf"
    conf.write_text('probe {\n    url = "smb://127.0.0.1/share"\n    duration = 40\n}\n'
                    f'tune {{\n    mode = "advise"\n    state_dir = "{tmp_path}/s"\n}}\n')
    r = check(smbtuned, conf, smb_conf)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert (f"probe: deadline = 60 is no longer than both directions of duration = 40 at "
            f"{conf}:3") in r.stderr, r.stderr
