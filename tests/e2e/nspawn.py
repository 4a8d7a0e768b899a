"""A booted Debian 12 container for the end-to-end tests of the service.

The rootfs is made once with debootstrap (--variant=minbase) and cached
under /var/tmp/smbtuned-e2e/rootfs-KEY, KEY being a hash of the suite, the
mirror and the package list: a change to any of them makes a new one. Each
run boots an overlay of it (the cache stays read-only, every write of the
run goes to the run's own temp dir), with `systemd-nspawn --boot
--register=no --keep-unit --private-network`: no machined and no systemd
are needed on this machine, and the container's smbd sees only its own
loopback. The container is driven with nsenter into its init's
namespaces, and stopped by the PID this module started.
"""

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What the container needs besides minbase: systemd as PID 1, Samba with
# its own units, smbclient for a connection that stays open, ss and pgrep,
# and the .deb's libraries, so apt installs it without a network.
PACKAGES = sorted(
    [
        "dbus",
        "iproute2",
        "libconfuse2",
        "libgsl27",
        "libjansson4",
        "libsmbclient",
        "libsystemd0",
        "procps",
        "samba",
        "samba-common-bin",
        "smbclient",
        "systemd",
        "systemd-sysv",
    ]
)
CACHE = os.environ.get("SMBTUNED_E2E_CACHE", "/var/tmp/smbtuned-e2e")
LEGACY = "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Unavailable(Exception):
    """This machine cannot make or boot the container (the reason)."""


def cache_key():
    text = "\n".join([SUITE, MIRROR, "minbase"] + PACKAGES)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rootfs(log):
    """The cached rootfs, made when missing. A lock keeps two runs from
    making it at once; it is made beside its final name and renamed, so a
    killed debootstrap leaves no half rootfs that looks complete."""
    for tool in ("debootstrap", "systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} is not installed (apt-get install debootstrap "
                              "systemd-container)")
    if os.geteuid() != 0:
        raise Unavailable("debootstrap and systemd-nspawn need root")
    os.makedirs(CACHE, exist_ok=True)
    final = os.path.join(CACHE, "rootfs-" + cache_key())
    with open(os.path.join(CACHE, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(final):
            return final
        part = final + ".part"
        shutil.rmtree(part, ignore_errors=True)
        with open(log, "w") as out:
            r = subprocess.run(
                ["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE,
                 part, MIRROR], stdout=out, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise Unavailable(f"debootstrap failed ({r.returncode}), see {log}")
        os.rename(part, final)
        return final


def _legacy_smb_conf(path):
    """Debian's smb.conf with the seed's legacy line in [global]."""
    with open(path) as f:
        text = f.read()
    head, sep, rest = text.partition("[global]\n")
    assert sep, f"no [global] in {path}"
    with open(path, "w") as f:
        f.write(head + sep + f"   socket options = {LEGACY}\n" + rest)


class Container:
    def __init__(self, tmp, lower):
        self.tmp = tmp
        self.root = os.path.join(tmp, "root")
        for d in ("upper", "work", "root"):
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={tmp}/upper,workdir={tmp}/work", self.root],
                       check=True)
        self.proc = None
        self.leader = None
        self.console = open(os.path.join(tmp, "console.log"), "w")

    def put(self, path, data, mode=0o644):
        """Write a file into the container's tree (before or after boot)."""
        full = os.path.join(self.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.chmod(full, mode)

    def prepare(self):
        _legacy_smb_conf(os.path.join(self.root, "etc/samba/smb.conf"))
        # A machine-id of its own, so journald keeps a persistent journal
        # in /var/log/journal/<id> and `journalctl -u` finds the entries.
        self.put("/etc/machine-id", hashlib.md5(self.tmp.encode()).hexdigest() + "\n")
        # Not part of the test and failing without a network: nmbd (no
        # broadcast interface) and the AD DC (not provisioned).
        for unit in ("nmbd.service", "samba-ad-dc.service"):
            os.symlink("/dev/null", os.path.join(self.root, "etc/systemd/system", unit))

    def boot(self, timeout=120):
        self.proc = subprocess.Popen(
            ["systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--private-network",
             "--directory", self.root, "--machine", "smbtuned-e2e"],
            stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        said = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"systemd-nspawn exited with {self.proc.returncode}: "
                                  + self.console_tail())
            self.leader = self._find_leader()
            if self.leader is not None:
                r = self.run(["systemctl", "is-system-running", "--wait"], check=False,
                             timeout=max(1, deadline - time.monotonic()))
                state = r.stdout.strip()
                if state in ("running", "degraded"):
                    return state
                # Right after its exec systemd has no bus socket yet
                # ("Failed to connect to bus"): no state, ask again.
                if state == "":
                    said = r.stderr.strip()
                    time.sleep(0.5)
                    continue
                raise Unavailable(f"the container's systemd says {state!r}: "
                                  + self.console_tail())
            time.sleep(0.5)
        raise Unavailable(f"the container did not boot in time ({said or 'no systemd yet'}): "
                          + self.console_tail())

    def console_tail(self):
        self.console.flush()
        with open(os.path.join(self.tmp, "console.log"), errors="replace") as f:
            return f.read()[-2000:]

    def _find_leader(self):
        """The container's PID 1: the child of systemd-nspawn that runs
        systemd, once it has exec'ed (before, it is nspawn's own fork)."""
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                kids = f.read().split()
        except FileNotFoundError:
            return None
        for k in kids:
            try:
                with open(f"/proc/{k}/comm") as f:
                    if f.read().strip() == "systemd":
                        return int(k)
            except FileNotFoundError:
                pass
        return None

    def nsenter(self):
        return ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "-C", "-r",
                "-w", "env", "-i", "PATH=" + PATH, "LANG=C.UTF-8", "SYSTEMD_PAGER=", "TERM=dumb"]

    def run(self, argv, check=True, timeout=120, input=None):
        r = subprocess.run(self.nsenter() + list(argv), capture_output=True, text=True,
                           timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv} exited {r.returncode}\nstdout: {r.stdout}\n"
                                 f"stderr: {r.stderr}")
        return r

    def sh(self, script, check=True, timeout=120):
        return self.run(["sh", "-c", script], check=check, timeout=timeout)

    def popen(self, argv):
        return subprocess.Popen(self.nsenter() + list(argv), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def stop(self):
        """Power the container off, then make sure: SIGKILL to the nspawn
        we started (its session) if it is not gone in time, then unmount."""
        if self.proc is not None and self.proc.poll() is None:
            if self.leader is not None:
                # SIGRTMIN+4 asks systemd for a poweroff (systemd(1)).
                try:
                    os.kill(self.leader, signal.SIGRTMIN + 4)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                # SIGKILL to a PID namespace's init kills everything in it.
                for pid in (self.leader, self.proc.pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, TypeError):
                        pass
                self.proc.wait(timeout=30)
        self.console.close()
        subprocess.run(["umount", "-l", self.root], check=False)


if __name__ == "__main__":
    # `nspawn.py rootfs LOG`: make the cached rootfs now and print its path
    # (scripts/test starts this beside the build and the unit tests, so
    # that the e2e step finds it made); exit 1 with the reason when it
    # cannot be made.
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "rootfs":
        print("usage: nspawn.py rootfs LOG", file=sys.stderr)
        sys.exit(2)
    try:
        print(rootfs(sys.argv[2]))
    except Unavailable as e:
        print(f"tests/e2e: {e}", file=sys.stderr)
        sys.exit(1)
