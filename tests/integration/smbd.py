"""A real, throwaway smbd for the integration tests.

Every path smbd or its clients touch lives under one directory (the test's
tmp_path): config, pid, lock, state, cache, private, ncalrpc, log and the
shares. The machine's /etc/samba is never read, neither by smbd nor by the
smbclient/smbcontrol/testparm calls made through this module (they always
get `-s` with a private config).

Usage (through the pytest fixtures in conftest.py):

    def test_x(smbd_factory):
        srv = smbd_factory(socket_options="TCP_NODELAY SO_RCVBUF=262144")
        srv.port, srv.conf, srv.share_dir, srv.pid, srv.url
        srv.smbclient("-c", "ls")      # CompletedProcess
        srv.smbcontrol("reload-config")
        srv.log_tail()

Options are keyword-only so that new ones (users, namespaces, ...) are an
additive change: add a keyword with a default that keeps today's behaviour.
"""

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SMBD = os.environ.get("SMBD_BIN", "/usr/sbin/smbd")
SMBCLIENT = os.environ.get("SMBCLIENT_BIN", "/usr/bin/smbclient")
SMBCONTROL = os.environ.get("SMBCONTROL_BIN", "/usr/bin/smbcontrol")
SMBPASSWD = os.environ.get("SMBPASSWD_BIN", "/usr/bin/smbpasswd")

START_TIMEOUT = 30.0  # seconds until smbd must serve the share
STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL
PORT_ATTEMPTS = 5  # fresh ports tried when smbd cannot bind the one picked


class SmbdError(RuntimeError):
    """smbd did not start or did not serve its share in time."""


def free_port(addr="127.0.0.1"):
    """A TCP port that was free a moment ago (bind to port 0, read it back).

    It can be taken between here and smbd's bind; start() retries with a
    new port when that happens."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _dirs_block(base):
    """The [global] lines that keep every Samba directory under base."""
    d = {
        "pid directory": base / "pid",
        "lock directory": base / "lock",
        "state directory": base / "state",
        "cache directory": base / "cache",
        "private dir": base / "private",
        "binddns dir": base / "binddns",
        "ncalrpc dir": base / "ncalrpc",
        "ntp signd socket directory": base / "ntp_signd",
        "winbindd socket directory": base / "winbindd",
        "usershare path": base / "usershares",
    }
    for p in d.values():
        p.mkdir(parents=True, exist_ok=True)
    # private dir must not be world-readable or Samba complains.
    (base / "private").chmod(0o700)
    lines = [f"   {k} = {v}" for k, v in d.items()]
    lines.append(f"   log file = {base / 'log' / 'log.%m'}")
    (base / "log").mkdir(exist_ok=True)
    return "\n".join(lines)


def client_conf(base, socket_options=None):
    """Write a private client smb.conf under base and return its path.

    The clients must not read /etc/samba/smb.conf (or the smb.conf being
    tuned: a client applies `socket options` to its own sockets). Its
    directories point under base too, so a client never touches /var."""
    base = Path(base)
    cdir = base / "client"
    cdir.mkdir(parents=True, exist_ok=True)
    for sub in ("lock", "state", "cache", "private", "pid", "ncalrpc"):
        (cdir / sub).mkdir(exist_ok=True)
    (cdir / "private").chmod(0o700)
    conf = cdir / "smb.conf"
    so = f"   socket options = {socket_options}\n" if socket_options else ""
    conf.write_text(
        "[global]\n"
        "   client min protocol = SMB2\n"
        f"   lock directory = {cdir / 'lock'}\n"
        f"   state directory = {cdir / 'state'}\n"
        f"   cache directory = {cdir / 'cache'}\n"
        f"   private dir = {cdir / 'private'}\n"
        f"   pid directory = {cdir / 'pid'}\n"
        f"   ncalrpc dir = {cdir / 'ncalrpc'}\n"
        f"   log file = {cdir / 'log.%m'}\n"
        "   load printers = no\n" + so
    )
    return conf


@dataclass
class Smbd:
    """One running smbd. Created and stopped by SmbdFactory."""

    base: Path
    conf: Path
    client_conf: Path
    share_dir: Path
    port: int
    bind_addr: str
    port2: int = None  # second_port: the second of `smb ports`
    proc: subprocess.Popen = None
    stdout_path: Path = None
    shares: dict = field(default_factory=dict)  # name -> path
    prefix_cmd: list = field(default_factory=list)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def host(self):
        return f"[{self.bind_addr}]" if ":" in self.bind_addr else self.bind_addr

    @property
    def url(self):
        return f"smb://{self.host}:{self.port}/share"

    def unc(self, share="share"):
        # smbclient takes an IPv6 literal without brackets ("//[::1]/s"
        # is NT_STATUS_NOT_FOUND); the port is its -p.
        return f"//{self.bind_addr}/{share}"

    def env(self):
        """Environment for client tools: a private HOME so that
        libsmbclient's $HOME/.smb/smb.conf lookup stays under base."""
        e = dict(os.environ)
        e["HOME"] = str(self.base / "client")
        return e

    def smbclient(self, *args, share="share", timeout=60, check=False, user=None, port=None):
        """Run smbclient against a share of this smbd (guest unless user
        ("name", "password") is given), on its first port unless port is
        given. Returns the CompletedProcess."""
        auth = ["-N"] if user is None else ["-U", f"{user[0]}%{user[1]}"]
        cmd = self.prefix_cmd + [
            SMBCLIENT, "-s", str(self.client_conf), *auth,
            "-p", str(port or self.port), self.unc(share), *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=check, env=self.env(), stdin=subprocess.DEVNULL)

    def smbcontrol(self, *args, timeout=30, check=False):
        """smbcontrol with this smbd's config, e.g. smbcontrol("reload-config")
        (destination `smbd` is added when args has one element)."""
        if len(args) == 1:
            args = ("smbd",) + tuple(args)
        cmd = self.prefix_cmd + [SMBCONTROL, "-s", str(self.conf), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=check, stdin=subprocess.DEVNULL)

    def log_tail(self, lines=40):
        """The last lines of smbd's stdout/stderr and of its log files."""
        out = []
        paths = [self.stdout_path] + sorted((self.base / "log").glob("log.*"))
        for p in paths:
            if p is None or not p.exists():
                continue
            text = p.read_text(errors="replace").splitlines()
            out.append(f"--- {p} (last {lines} lines)")
            out.extend(text[-lines:])
        return "\n".join(out)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM the PID we started, SIGKILL after STOP_TIMEOUT. Only that
        PID is signalled (its forked children exit when the parent goes,
        they watch it; any left are killed by their own PIDs below)."""
        if self.proc is None:
            return
        children = _children(self.proc.pid)
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
            except ProcessLookupError:
                pass
        # Children that smbd forked (one per connection, plus helpers) are
        # ours too; they normally exit with the parent. Wait a little, then
        # kill the ones still there, by PID.
        deadline = time.monotonic() + STOP_TIMEOUT
        for pid in children:
            while _is_smbd_child(pid, self.conf) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _is_smbd_child(pid, self.conf):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _children(pid):
    """Direct children of pid (all threads' children)."""
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids += [int(x) for x in f.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return kids


def _is_smbd_child(pid, conf):
    """pid still exists and is an smbd running with our config (guards
    against PID reuse before we send a signal)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and str(conf).encode() in argv


class SmbdFactory:
    """Starts smbds under base_dir; stop_all() stops every one it started."""

    def __init__(self, base_dir):
        self.base_dir = Path(base_dir)
        self.servers = []

    def __call__(self, *, socket_options=None, extra_global="", shares=None,
                 prefix_cmd=None, bind_addr="127.0.0.1", extra_args=None,
                 start_timeout=START_TIMEOUT, name=None, users=None, second_port=False,
                 port=None):
        """Start one smbd and wait until it serves its share.

        socket_options: value for `socket options` in [global], or None to
            leave the parameter out (Samba's default, TCP_NODELAY).
        extra_global: text appended to [global] (one parameter a line).
        shares: {name: {param: value}} extra shares; each gets a directory
            <base>/shares/<name> (mode 0777) unless it sets `path`. The
            guest-writable share "share" always exists.
        prefix_cmd: argv prefix for smbd and the client tools, e.g.
            ["ip", "netns", "exec", "ns1"].
        bind_addr: the one address smbd listens on.
        extra_args: more smbd command-line arguments.
        users: {name: password} added to this smbd's private passdb with
            smbpasswd (password on stdin, never on a command line); each
            name must be an existing Unix account (e.g. "daemon").
        second_port: `smb ports` names a second free port after the first
            (srv.port2), as `smb ports = 445 139` does.
        port: listen on this port (e.g. 445, in a namespace of the test's
            own) instead of a free one picked here; not retried elsewhere.
        """
        idx = len(self.servers)
        base = self.base_dir / (name or f"smbd{idx}")
        base.mkdir(parents=True)
        _let_guest_traverse(base)
        prefix_cmd = list(prefix_cmd or [])
        dirs = _dirs_block(base)
        cconf = client_conf(base)

        all_shares = {"share": {}}
        all_shares.update(shares or {})
        share_paths = {}
        share_text = []
        for sname, params in all_shares.items():
            params = dict(params)
            if "path" not in params:
                p = base / "shares" / sname
                p.mkdir(parents=True)
                p.chmod(0o777)  # guest maps to nobody
                params["path"] = str(p)
            share_paths[sname] = Path(params["path"])
            params.setdefault("guest ok", "yes")
            params.setdefault("read only", "no")
            share_text.append(f"[{sname}]")
            share_text += [f"   {k} = {v}" for k, v in params.items()]

        last_err = None
        fixed_port = port
        for _ in range(1 if fixed_port else PORT_ATTEMPTS):
            port = fixed_port or (free_port(bind_addr) if not prefix_cmd
                                  else free_port_in(prefix_cmd, bind_addr))
            port2 = None
            while second_port and port2 in (None, port):
                port2 = (free_port(bind_addr) if not prefix_cmd
                         else free_port_in(prefix_cmd, bind_addr))
            conf = base / "smb.conf"
            so = f"   socket options = {socket_options}\n" if socket_options is not None else ""
            conf.write_text(
                "[global]\n"
                f"   smb ports = {port}{f' {port2}' if port2 else ''}\n"
                f"   interfaces = {bind_addr}\n"
                "   bind interfaces only = yes\n"
                "   server role = standalone server\n"
                "   workgroup = SMBTUNEDTEST\n"
                "   netbios name = SMBTUNEDTEST\n"
                "   map to guest = bad user\n"
                "   guest account = nobody\n"
                "   load printers = no\n"
                "   printing = bsd\n"
                "   printcap name = /dev/null\n"
                "   disable spoolss = yes\n"
                "   disable netbios = yes\n"
                "   server min protocol = SMB2\n"
                "   passdb backend = tdbsam\n"
                "   max log size = 0\n"
                f"{dirs}\n"
                + so
                + (extra_global.rstrip("\n") + "\n" if extra_global else "")
                + "\n"
                + "\n".join(share_text)
                + "\n"
            )
            for uname, pw in (users or {}).items():
                subprocess.run([SMBPASSWD, "-c", str(conf), "-s", "-a", uname],
                               input=f"{pw}\n{pw}\n", capture_output=True, text=True,
                               check=True, timeout=60)
            srv = Smbd(base=base, conf=conf, client_conf=cconf,
                       share_dir=share_paths["share"], port=port, port2=port2,
                       bind_addr=bind_addr,
                       stdout_path=base / "smbd.stdout", shares=share_paths,
                       prefix_cmd=prefix_cmd)
            self._spawn(srv, extra_args or [])
            self.servers.append(srv)
            try:
                _wait_ready(srv, start_timeout)
                return srv
            except SmbdError as e:
                last_err = e
                bound_fail = "Address already in use" in srv.log_tail(200)
                srv.stop()
                if not bound_fail:
                    raise
                # Port taken between free_port() and smbd's bind: retry.
                (base / "smbd.stdout").rename(base / f"smbd.stdout.port{port}")
        raise last_err

    def _spawn(self, srv, extra_args):
        cmd = srv.prefix_cmd + [
            SMBD, "--foreground", "--no-process-group", "--debug-stdout",
            "--debuglevel=1", "-s", str(srv.conf), *extra_args,
        ]
        with open(srv.stdout_path, "wb") as out:
            # A session of its own: on SIGTERM smbd's parent signals its
            # whole process group (kill(0, ...)), which must not be pytest's.
            srv.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=srv.env(),
                                        start_new_session=True)

    def stop_all(self):
        errors = []
        for srv in reversed(self.servers):
            try:
                srv.stop()
            except Exception as e:  # keep stopping the others
                errors.append(e)
        if errors:
            raise errors[0]


def _let_guest_traverse(path):
    """Add search (o+x, not read) permission to path and its ancestors.

    Guests are mapped to nobody, who must reach the share directory; pytest
    makes its temporary directories 0700."""
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if not mode & 0o001:
            p.chmod((mode & 0o7777) | 0o001)


def free_port_in(prefix_cmd, addr):
    """A free port as seen inside prefix_cmd (e.g. a network namespace)."""
    code = ("import socket;s=socket.socket(socket.AF_INET6 if ':' in %r else socket.AF_INET);"
            "s.bind((%r,0));print(s.getsockname()[1])" % (addr, addr))
    out = subprocess.run(list(prefix_cmd) + ["/usr/bin/python3", "-c", code],
                         capture_output=True, text=True, check=True, timeout=30)
    return int(out.stdout.strip())


def _tcp_connects(srv):
    if srv.prefix_cmd:
        code = ("import socket,sys;socket.create_connection((%r,%d),timeout=1).close()"
                % (srv.bind_addr, srv.port))
        r = subprocess.run(srv.prefix_cmd + ["/usr/bin/python3", "-c", code],
                           capture_output=True, timeout=10)
        return r.returncode == 0
    try:
        socket.create_connection((srv.bind_addr, srv.port), timeout=1).close()
        return True
    except OSError:
        return False


def _wait_ready(srv, timeout):
    """Wait until smbd accepts TCP connections and serves `ls` on the share."""
    deadline = time.monotonic() + timeout
    last = "never got a TCP connection"
    while time.monotonic() < deadline:
        if not srv.alive():
            raise SmbdError(
                f"smbd (pid {srv.pid}, {srv.conf}) exited with status "
                f"{srv.proc.returncode} while starting\n{srv.log_tail()}")
        if _tcp_connects(srv):
            try:
                r = srv.smbclient("-c", "ls", timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                last = "smbclient ls timed out"
                continue
            if r.returncode == 0:
                return
            last = f"smbclient ls exit {r.returncode}: {(r.stdout + r.stderr).strip()[-500:]}"
        time.sleep(0.1)
    raise SmbdError(
        f"smbd (pid {srv.pid}, {srv.conf}, port {srv.port}) not ready after "
        f"{timeout:.0f}s: {last}\n{srv.log_tail()}")
