"""Helpers for the daemon's integration tests (test_daemon.py).

A DaemonEnv holds everything one test's smbtuned runs share: the config
file, a SHORT state directory under /tmp (a shadow smbd's messaging socket
lives under STATE_DIR/shadow/shadow-PID-XXXXXX and a unix socket path has
at most 107 bytes, which pytest's tmp_path would exceed), a short TMPDIR
for the probe's private client directory, and a private HOME. It starts
smbtuned (run() to completion, or start() in the background), and finds
what a run may have left behind (leftovers()).

Only PIDs this module started are signalled by the tests; cleanup() also
stops, by PID, processes whose command line names this env's unique state
directory or config file (shadow smbds or probe children of a daemon this
env started, which a failed test may leave), so that one failing test does
not leave servers running on the machine.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

RUN_TIMEOUT = 240  # seconds a whole --once cycle may take before the test gives up
WAIT_S = 15  # bound on waiting for a process or a file to go (not a pass/fail timing)

PROBE_FILE_GLOB = ".smbtuned-probe-*"
EDITOR_TEMP_GLOB = ".smbtuned-smb.conf.*"

LEGACY = "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192"

# A small search: a short probe, a lattice of three sizes plus AUTO, few
# samples per comparison. Overridden per test where the search matters.
SMALL_PROBE = {"size": "8M", "request_size": "1M", "deadline": "10"}
SMALL_TUNE = {"min_size": "64K", "max_size": "256K", "max_samples": "6"}

# Journal lines that end a cycle (tuner.c: finish_search, step, commit).
RESULT_RE = re.compile(r"^<\d>(kept socket options|advice: socket options|socket options: "
                       r"|buffers do not limit|byte budget of|not written)", re.M)


def conf_text(probe, tune):
    """smbtuned.conf text from two dicts. Values are written as given:
    a value that needs quotes (paths, URLs, modes) carries them already,
    see q()."""
    out = ["probe {"]
    out += [f"    {k} = {v}" for k, v in probe.items()]
    out += ["}", "tune {"]
    out += [f"    {k} = {v}" for k, v in tune.items()]
    out += ["}", ""]
    return "\n".join(out)


def q(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


OWN_SHARE_PLACE = "smbtuned's own share"  # lib/probe.h PROBE_PLACE_OWN_SHARE


def made_dir(state_dir, place=None, directory=None):
    """Where the probe records the names of the files it makes
    (lib/probe_made.h): STATE_DIR/probe/made, and with a place (the URL as
    configured) its directory there, named by probe_made_key()."""
    d = Path(state_dir) / "probe" / "made"
    if place is None:
        return d
    h = 0xcbf29ce484222325
    for ch in f"{place}\n{directory or ''}".encode():
        h = ((h ^ ch) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return d / f"{h:016x}"


def record_made(state_dir, name, place, directory=None):
    """Record name as one our probes made at place, as a probe does before
    its create (the directories private, as the probe makes them)."""
    d = made_dir(state_dir, place, directory)
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    for up in (d.parent, d.parent.parent):
        os.chmod(up, 0o700)
    if not (d / "place").exists():
        (d / "place").write_text(f"{place}{' directory ' + directory if directory else ''}\n")
    (d / name).write_bytes(b"")


def records(state_dir, place=None, directory=None):
    """The names the probe's record holds (of one place, or of all)."""
    d = made_dir(state_dir, place, directory)
    if not d.exists():
        return []
    files = d.iterdir() if place is not None else d.glob("*/*")
    return sorted(p.name for p in files if p.name != "place")


def read_state(state_dir):
    """STATE_DIR/state as {key: value} (the value's raw text); {} if absent."""
    p = Path(state_dir) / "state"
    if not p.exists():
        return {}
    out = {}
    for line in p.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def proc_cmdline(pid):
    """argv of a live, non-zombie pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (OSError, IndexError):
        return None
    if state == "Z" or argv == [b""]:
        return None
    return argv


def procs_naming(needles):
    """{pid: argv} of live processes whose command line contains one of
    needles (byte strings) in one of its arguments (this process excepted)."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        argv = proc_cmdline(int(d))
        if argv and any(n in a for a in argv for n in needles):
            found[int(d)] = [a.decode(errors="replace") for a in argv]
    return found


def registry_copy(smb_conf, path):
    """A copy of smb_conf at path with `config backend = registry` as its
    4th line (one the editor refuses, at path:4); path."""
    lines = smb_conf.read_text().splitlines(keepends=True)
    assert lines[0].strip() == "[global]"
    lines.insert(3, "   config backend = registry\n")
    path.write_text("".join(lines))
    return path


def socket_line_index(lines):
    """Index of the one line of lines that sets `socket options` (the
    fixture's smb.conf has exactly one, no continuation)."""
    hits = [i for i, l in enumerate(lines)
            if re.match(rb"\s*socket\s*options\s*=", l, re.I)]
    assert len(hits) == 1, f"expected one socket options line, found {hits}"
    return hits[0]


def only_socket_line_changed(before, after):
    """None when after differs from before (bytes) at most in the socket
    options line, else a reason."""
    b = before.splitlines(keepends=True)
    a = after.splitlines(keepends=True)
    if len(a) != len(b):
        return f"line count changed: {len(b)} -> {len(a)}"
    i = socket_line_index(b)
    j = socket_line_index(a)
    if i != j:
        return f"socket options line moved from {i + 1} to {j + 1}"
    for k, (x, y) in enumerate(zip(b, a)):
        if k != i and x != y:
            return f"line {k + 1} changed: {x!r} -> {y!r}"
    return None


def socket_value(data):
    """The value of the socket options line in smb.conf bytes (our reading
    of the fixture's simple file; testparm is the authority elsewhere)."""
    lines = data.splitlines()
    line = lines[socket_line_index(lines)].decode()
    return " ".join(line.split("=", 1)[1].split())


class Daemon:
    """One smbtuned started in the background; stderr/stdout go to files
    that can be read while it runs."""

    def __init__(self, cmd, env, logdir, name):
        self.err_path = Path(logdir) / f"{name}.stderr"
        self.out_path = Path(logdir) / f"{name}.stdout"
        with open(self.err_path, "wb") as err, open(self.out_path, "wb") as out:
            # A session of its own: a signal meant for pytest's group must
            # not reach it, and its own kill(0, ...) (if any) must not
            # reach pytest.
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def stderr(self):
        return self.err_path.read_text(errors="replace")

    @property
    def stdout(self):
        return self.out_path.read_text(errors="replace")

    def alive(self):
        return self.proc.poll() is None

    def wait_for(self, pred, timeout=RUN_TIMEOUT, what="condition", poll=0.01):
        """Poll pred() until true; fails the test (with stderr) when the
        daemon exits first or timeout passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            if not self.alive():
                if pred():
                    return
                raise AssertionError(f"smbtuned exited ({self.proc.returncode}) before "
                                     f"{what}\nstderr:\n{self.stderr}")
            time.sleep(poll)
        raise AssertionError(f"no {what} after {timeout} s\nstderr:\n{self.stderr}")

    def wait_line(self, regex, timeout=RUN_TIMEOUT):
        rx = re.compile(regex, re.M)
        self.wait_for(lambda: rx.search(self.stderr) is not None, timeout,
                      what=f"stderr line matching {regex!r}")

    def wait_samples(self, n, timeout=RUN_TIMEOUT):
        """Wait until n samples were told: the journal's "tried ..." lines
        (--once prints no progress lines beside them)."""
        rx = re.compile(r"^<\d>tried ", re.M)
        self.wait_for(lambda: len(rx.findall(self.stderr)) >= n, timeout,
                      what=f"{n} 'tried' lines on stderr")

    def signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout=RUN_TIMEOUT):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"smbtuned (pid {self.pid}) still running after {timeout} s"
                                 f"\nstderr:\n{self.stderr}") from None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)


class DaemonEnv:
    def __init__(self, smbtuned, srv, tmp_path, prefix=None):
        """prefix: argv that runs smbtuned elsewhere, e.g. ["ip", "netns",
        "exec", NS] (which execs it in place: the Daemon's pid stays
        smbtuned's)."""
        self.smbtuned = Path(smbtuned)
        self.srv = srv
        self.prefix = list(prefix or [])
        self.tmp = Path(tmp_path)
        self.state_dir = Path(tempfile.mkdtemp(prefix="smbtd-", dir="/tmp"))
        self.tmpdir = Path(tempfile.mkdtemp(prefix="smbtd-tmp-", dir="/tmp"))
        self.home = self.tmp / "home"
        self.home.mkdir(exist_ok=True)
        self.logdir = self.tmp / "logs"
        self.logdir.mkdir(exist_ok=True)
        self.conf = self.tmp / "smbtuned.conf"
        self.daemons = []
        self.nruns = 0

    # ---- config

    def write_config(self, probe=None, tune=None, path=None):
        """Write the config (the fixture's URL, smb.conf and our state dir,
        trials/apply as given) and return its path."""
        p = {"url": q(self.srv.url), **SMALL_PROBE, **(probe or {})}
        t = {"smb_conf": q(self.srv.conf), "state_dir": q(self.state_dir),
             **SMALL_TUNE, **(tune or {})}
        path = Path(path or self.conf)
        path.write_text(conf_text(p, t))
        return path

    # ---- running

    def env(self):
        e = dict(os.environ)
        e["HOME"] = str(self.home)
        e["TMPDIR"] = str(self.tmpdir)
        # No test may reach the machine's systemd (apply = systemd,
        # restart_smbd): a bus that is not there makes such a call fail.
        e["DBUS_SYSTEM_BUS_ADDRESS"] = f"unix:path={self.tmpdir}/no-system-bus"
        return e

    def cycle_once_advised(self):
        """A state file as a cycle leaves it: one --once cycle in advise
        mode (smb.conf untouched), the config left in advise mode."""
        self.write_config(tune={"mode": q("advise")})
        rc, out, err = self.run("--once")
        assert rc == 0, err

    def plant_pending_commit(self, value, commit=True, restart=None):
        """smb.conf's socket options line set to `value` and the state file
        saying a run wrote it as a commit and was killed before it was
        checked: what the next start confirms (commit=False: a live trial
        in force, what a running daemon's cycle takes back). restart: the
        run's decision to restart smbd for it, recorded (True, False), or
        None, as a record of smbtuned before state format 7 (the start asks
        smbd's listener). Needs a state file (a cycle run before). Returns
        (the old line, the new line)."""
        conf = self.srv.conf
        text = conf.read_text()
        old = next(line for line in text.splitlines() if "socket options" in line)
        new = old.split("=", 1)[0] + "= " + value
        conf.write_text(text.replace(old, new))
        state = self.state_dir / "state"
        st = state.read_text()
        assert "\npending no\npending_commit no\n" in st, st
        st = st.replace("\npending no\npending_commit no\n",
                        f"\npending yes\npending_commit {'yes' if commit else 'no'}\n"
                        f"pending_file {conf}\n"
                        f"pending_written {new}\npending_original {old}\n")
        st = re.sub(r"\npending_line_len \d+\n", f"\npending_line_len {len(new)}\n", st)
        if restart is not None:
            assert "\npending_restart 0\n" in st, st
            st = st.replace("\npending_restart 0\n", f"\npending_restart {2 if restart else 1}\n")
        state.write_text(st)
        return old, new

    def cmd(self, *args, conf=None):
        return [*self.prefix, str(self.smbtuned), "-c", str(conf or self.conf),
                *(str(a) for a in args)]

    def start(self, *args, conf=None):
        self.nruns += 1
        d = Daemon(self.cmd(*args, conf=conf), self.env(), self.logdir, f"run{self.nruns}")
        self.daemons.append(d)
        return d

    def run(self, *args, conf=None, timeout=RUN_TIMEOUT):
        """Run to completion: (returncode, stdout, stderr)."""
        d = self.start(*args, conf=conf)
        rc = d.wait(timeout)
        return rc, d.stdout, d.stderr

    def run_json(self, *args, conf=None):
        """--once --json run: (returncode, object, stderr). Fails the test
        unless stdout is exactly one line holding one JSON object."""
        rc, out, err = self.run("--once", "--json", *args, conf=conf)
        lines = out.splitlines()
        assert len(lines) == 1, f"--json: expected one line on stdout, got {out!r}\n{err}"
        obj = json.loads(lines[0])
        assert isinstance(obj, dict), lines[0]
        return rc, obj, err

    def state(self):
        return read_state(self.state_dir)

    # ---- what a run may leave

    def leftovers(self, wait=WAIT_S):
        """Reasons (a list, empty when clean) why the last run left
        something behind. Processes get up to `wait` seconds to go (a
        shadow smbd's children exit after their parent)."""
        needles = [str(self.state_dir).encode(), str(self.conf).encode(),
                   str(self.tmpdir).encode()]
        deadline = time.monotonic() + wait
        procs = procs_naming(needles)
        while procs and time.monotonic() < deadline:
            time.sleep(0.1)
            procs = procs_naming(needles)
        out = [f"process {pid} still runs: {' '.join(argv)}" for pid, argv in procs.items()]
        shadow = self.state_dir / "shadow"
        if shadow.exists():
            out += [f"shadow run dir left: {p}" for p in sorted(shadow.iterdir())]
        out += [f"probe file left in the share: {p}"
                for p in sorted(self.srv.share_dir.rglob(PROBE_FILE_GLOB))]
        # The probe's work dirs live in STATE_DIR/probe; $TMPDIR is checked
        # too, as nothing of ours may go there.
        out += [f"probe work dir left: {p}" for d in (self.tmpdir, self.state_dir / "probe")
                for p in sorted(d.glob("smbtuned-probe-*"))]
        out += [f"probe file still recorded: {n}" for n in records(self.state_dir)]
        out += [f"editor temp file left: {p}"
                for p in sorted(Path(self.srv.conf).parent.glob(EDITOR_TEMP_GLOB))]
        return out

    def cleanup(self):
        for d in self.daemons:
            try:
                d.kill()
            except Exception:
                pass
        # Children of our daemons (shadow smbds, probes) that a failed test
        # left: they name our unique paths. Signalled by PID.
        needles = [str(self.state_dir).encode(), str(self.conf).encode(),
                   str(self.tmpdir).encode()]
        for pid in procs_naming(needles):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.state_dir, ignore_errors=True)
        shutil.rmtree(self.tmpdir, ignore_errors=True)
