"""Faults in the share the probe writes to (issue 9, "Faults").

- the share full: a small tmpfs mounted over the share's directory, full
  before the cycle (a probe bigger than the disk) or filled by the test
  while a live trial is in smb.conf;
- the share read-only: `read only = yes` in smbd's own config, and a
  read-only bind mount over the share's directory put in place while a
  live trial is in smb.conf.

Each ends with faultutil.check_promises: the journal names the probe's
failure, no probe file is left in the share (a failed write's file is
deleted by the probe; the check looks at the filesystem the probe wrote
to), no shadow smbd is left, smb.conf holds its old bytes (a live trial is
taken back when its probe fails). Mounts live under the test's own
directory (the share's) and are undone in a finally. About 10-25 s per
test on two cores.
"""

import contextlib
import subprocess

import pytest

from faultutil import check_promises, wait_until
from test_edit_faults import make_env  # noqa: F401  (the fixture)
from test_edit_faults import (LIVE, MOUNT_TIMEOUT, ON_LATTICE, PROBE, SHADOW, cycle_fails, fill,
                              tmpfs, umount)

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

PROBE_FAILED = r"^probe of smb://\S+ failed: "
PROBE_FULL = PROBE_FAILED + r".*(full|space)"
PROBE_RO = r"(?i)" + PROBE_FAILED + r".*(denied|refuses|read-only)"


@contextlib.contextmanager
def share_on_tmpfs(env, size):
    """The share's directory replaced (for the block) by a tmpfs that
    guests may write (smbd maps them to nobody). Each new connection's smbd
    child changes into the share's path and so lands on the tmpfs."""
    with tmpfs(env.srv.share_dir, size):
        env.srv.share_dir.chmod(0o777)
        yield env.srv.share_dir


def wait_live_trial(d, conf, before):
    d.wait_for(lambda: conf.read_bytes() != before, what="a live trial in smb.conf", poll=0.005)


def test_share_full_from_the_start(make_env, faults):
    """A share with less room than one probe: the first sample fails with
    the disk named, the cycle ends, nothing of the probe stays."""
    env = make_env(ON_LATTICE)
    env.write_config(probe={**PROBE, "size": "8M"}, tune=SHADOW)
    before = env.srv.conf.read_bytes()
    with share_on_tmpfs(env, "2m"):
        cycle_fails(env, before, PROBE_FULL)
    faults.record("share full from the start", "probe failed")


def test_share_fills_during_live_trial(make_env, faults):
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE)
    conf = env.srv.conf
    before = conf.read_bytes()
    with share_on_tmpfs(env, "48m") as share:
        d = env.start("--once")
        wait_live_trial(d, conf, before)
        fill(share)
        rc = d.wait()
        err = d.stderr
        for p in share.glob("filler*"):
            p.unlink()
        line, outcome = check_promises(env, before, err, PROBE_FULL)
        check_promises(env, before, err, r"^live trial taken back in ")
    assert outcome == "old", f"the live trial stayed in smb.conf\n{err}"
    assert rc == 1, err
    faults.record("share filled during a live trial", "taken back")


def test_share_read_only_in_smb_conf(make_env, faults):
    env = make_env(ON_LATTICE, shares={"share": {"read only": "yes"}})
    env.write_config(tune=SHADOW)
    before = env.srv.conf.read_bytes()
    cycle_fails(env, before, PROBE_RO)
    faults.record("share read only = yes", "probe failed")


def test_share_mounted_read_only_during_live_trial(make_env, faults):
    """A read-only bind mount over the share while a live trial is in
    smb.conf. The remount waits for a moment with no file open for writing
    on it (the kernel refuses one before): between two probes."""
    env = make_env(ON_LATTICE)
    env.write_config(tune=LIVE)
    conf = env.srv.conf
    before = conf.read_bytes()
    share = env.srv.share_dir
    subprocess.run(["mount", "--bind", str(share), str(share)], check=True, capture_output=True,
                   timeout=MOUNT_TIMEOUT)
    try:
        d = env.start("--once")
        wait_live_trial(d, conf, before)

        def remounted():
            r = subprocess.run(["mount", "-o", "remount,bind,ro", str(share)],
                               capture_output=True, timeout=MOUNT_TIMEOUT)
            return r.returncode == 0 or not d.alive()
        wait_until(remounted, 60, "a read-only remount of the share", poll=0.001)
        assert d.alive(), f"the cycle ended before the share became read-only\n{d.stderr}"
        rc = d.wait()
        err = d.stderr
    finally:
        umount(share)
    line, outcome = check_promises(env, before, err, PROBE_RO)
    check_promises(env, before, err, r"^live trial taken back in ")
    assert outcome == "old", f"the live trial stayed in smb.conf\n{err}"
    assert rc == 1, err
    faults.record("share remounted read-only during a live trial", "taken back")
