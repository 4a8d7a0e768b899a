"""kill -9 of the editor at every system call of a rewrite, in turn.

Two sweeps, each followed after every kill by the same checks: smb.conf
holds either the old or the new bytes, the lock is free, and one more
normal run leaves the new bytes and no `.smbtuned-*` temp file.

- The editor's own system calls: a normal run is traced once (without -f)
  to list them. strace counts `when=` per process and per system call, so
  the k-th call is "the j-th call of syscall S", and
  `-e inject=S:signal=KILL:when=j` kills the editor exactly there. (An
  injection `all:when=N` only hits the first syscall to reach N calls, so
  it skips most of the run.) The helpers it runs (testparm) are not traced.
- `strace -f -e inject=all:signal=KILL:when=N` for N = 1, 2, ... until a
  run completes: this also kills the helpers the editor runs, mid-way.
"""

import fcntl
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import FIXTURES, copy_fixture, run_editor

MAX_POINTS = 600  # bound: a rewrite that needs more syscalls fails the test
SETTING = "262144,262144"
# (fixture, file that changes): a replacement, an added line, an include, a symlink.
CASES = [
    ("old-tuning-guide", "smb.conf"),
    ("comments-only", "smb.conf"),
    ("include-overrides", "tuning.conf"),
    ("symlink", "smb.conf.real"),
]
SYSCALL = re.compile(r"^(?:(\d+)\s+)?([a-z_0-9]+)\(")
MAX_N = 600  # bound of the -f sweep
# Calls whose count varies from run to run: waiting for a helper, and
# getrandom, which glibc calls for temporary names and its own state a
# number of times that once differed between two runs of the same edit.
VARYING = {"poll", "ppoll", "read", "wait4", "waitid", "clock_nanosleep", "nanosleep",
           "restart_syscall", "rt_sigreturn", "getrandom"}


def syscalls_of(trace, paths):
    """[(syscall, nth call of it in its process)] of the trace, from a few
    calls before the first one that names one of paths: the dynamic
    loader's thousand calls before it touch no file of ours."""
    seen = Counter()
    out = []
    first = None
    for line in Path(trace).read_text().splitlines():
        m = SYSCALL.match(line)
        if not m or "resumed>" in line:
            continue
        key = (m.group(1), m.group(2))
        seen[key] += 1
        out.append((m.group(2), seen[key]))
        if first is None and any(p in line for p in paths):
            first = len(out) - 1
    assert first is not None, f"the trace never names {paths}"
    return out[max(0, first - 3):]


def lock_is_free(state, wait=2.0):
    """`flock -n STATE/smbconf.lock true`, retried for up to `wait` seconds:
    a helper the editor forked just before it was killed holds the lock
    (the descriptor is close-on-exec) until it has exec'd."""
    lock = state / "smbconf.lock"
    if not lock.exists():
        return True
    deadline = time.monotonic() + wait
    with open(lock) as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)


def temp_files(*dirs):
    return sorted(str(p) for d in dirs if Path(d).exists()
                  for p in Path(d).rglob(".smbtuned-*"))


def prepare(smbtuned, tmp_path, name, changed):
    """Copy the fixture; return (dir, args, target, old bytes, new bytes)."""
    src = FIXTURES / "smbconf" / name
    d = copy_fixture(src, tmp_path / "work")
    target = d / changed
    old = target.read_bytes()
    # The new bytes, from a normal run on another copy.
    ref = copy_fixture(src, tmp_path / "ref")
    r = run_editor(smbtuned, "--smb-conf", ref / "smb.conf", "--set-buffers", SETTING,
                   "--state-dir", tmp_path / "ref-state")
    assert r.returncode == 0, r.stderr
    new = (ref / changed).read_bytes().replace(str(ref).encode(), str(d).encode())
    assert new != old
    args = ["--smb-conf", d / "smb.conf", "--set-buffers", SETTING,
            "--state-dir", tmp_path / "state"]
    return d, args, target, old, new


def killed_run(smbtuned, d, args, target, old, new, strace_opts, where):
    """Run the editor from the old bytes under strace with strace_opts, check
    what it leaves, then do one normal run and check again. Returns whether
    the run was killed."""
    state = Path(args[args.index("--state-dir") + 1])
    # Each run starts as the traced one did, from no state directory: the
    # first write also keeps backup/first/, which a later run skips.
    shutil.rmtree(state, ignore_errors=True)
    target.write_bytes(old)
    r = run_editor(smbtuned, *args, prefix=["strace", "-qq", "-o", "/dev/null", *strace_opts])
    killed = r.returncode != 0
    if killed:
        # Killed itself, or saw a helper killed and gave up.
        assert r.returncode in (-9, 137, 1), f"{where}: exit {r.returncode}: {r.stderr}"
    now = target.read_bytes()
    assert now in (old, new), f"{where}: file is neither the old nor the new bytes:\n{now!r}"
    if not killed:
        assert now == new, f"{where}: exit 0 but the old bytes"
    assert lock_is_free(state), f"{where}: lock still held"
    if (d / "smb.conf.real").exists():
        assert (d / "smb.conf").is_symlink(), f"{where}: the symlink was replaced"
    if now == old and not temp_files(d, state):
        return killed  # killed before it wrote anything: the next run is a first run

    r = run_editor(smbtuned, *args)
    assert r.returncode == 0, f"{where}, then a normal run: {r.stderr}"
    assert target.read_bytes() == new, f"{where}, then a normal run: wrong bytes"
    assert temp_files(d) == [], f"{where}, then a normal run: temp files left"
    assert lock_is_free(state), f"{where}, then a normal run: lock still held"
    return killed


def need_strace():
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")


@pytest.mark.slow
@pytest.mark.parametrize("name,changed", CASES)
def test_kill_at_every_syscall(smbtuned, tmp_path, name, changed):
    need_strace()
    d, args, target, old, new = prepare(smbtuned, tmp_path, name, changed)
    trace = tmp_path / "trace"
    target.write_bytes(old)
    r = run_editor(smbtuned, *args, prefix=["strace", "-qq", "-o", trace])
    assert r.returncode == 0, r.stderr
    points = syscalls_of(trace, [str(d), str(tmp_path / "state")])
    assert 0 < len(points) <= MAX_POINTS, f"{len(points)} syscalls: raise MAX_POINTS?"

    killed, missed = 0, []
    for sc, nth in points:
        if killed_run(smbtuned, d, args, target, old, new,
                      ["-e", f"inject={sc}:signal=KILL:when={nth}"], f"kill at {sc} #{nth}"):
            killed += 1
        else:
            missed.append(f"{sc}#{nth}")
    # Waiting for a helper (poll, read on its pipes, wait4, sleeps) takes a
    # varying number of calls; every other point must be hit.
    odd = [m for m in missed if m.split("#")[0] not in VARYING]
    assert not odd, f"kill points never reached: {odd}"
    assert killed >= 0.75 * len(points), f"only {killed} of {len(points)} points hit: {missed}"


@pytest.mark.slow
def test_kill_editor_and_helpers_at_nth_call(smbtuned, tmp_path):
    need_strace()
    d, args, target, old, new = prepare(smbtuned, tmp_path, "old-tuning-guide", "smb.conf")
    for n in range(1, MAX_N + 1):
        if not killed_run(smbtuned, d, args, target, old, new,
                          ["-f", "-e", f"inject=all:signal=KILL:when={n}"], f"-f when={n}"):
            break
    else:
        pytest.fail(f"still killed at when={MAX_N}")
