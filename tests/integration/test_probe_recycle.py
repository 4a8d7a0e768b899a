"""The probe on a share with Samba's recycle module (`vfs objects =
recycle`, package samba-vfs-modules, which scripts/install-deps installs):
every delete there is a move into the share's repository, so that each
sample would leave its probe file behind for ever. The probe deletes the
copy where the module puts it (lib/probe_recycle.c), the clean-up of a
killed probe's file too, and smbtuned says once a run what the admin can
do about it.

Measured here with Samba 4.17: the probe's anonymous guest has an empty %U
(`.recycle/%U` is `.recycle`), a logged-on user its name; the module makes
its repository 0700, which the guest (mapped to `nobody`, whose SID is not
the owner's) may not open: the guest's copy stays unless the share sets a
wider `recycle:directory_mode`. The module must be there (no skip): a CI
run without it would pass without testing anything.
"""

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from daemon_util import q, record_made
from test_probe import PASSWORD, USER, cred_file, dead_pid, own_host, probe_conf, run_probe

pytestmark = pytest.mark.smbd

RECYCLE_SO = Path("/usr/lib/x86_64-linux-gnu/samba/vfs/recycle.so")
PREFIX = ".smbtuned-probe-"
WARN = "keeps deleted files (Samba's recycle module)"
FIX = "add 'recycle:exclude = .smbtuned-probe-*' to that share"
WRITTEN = "TCP_NODELAY SO_RCVBUF=131072 SO_SNDBUF=131072"


@pytest.fixture(autouse=True)
def recycle_module():
    # Required, not skipped: scripts/install-deps installs samba-vfs-modules.
    assert RECYCLE_SO.exists(), f"{RECYCLE_SO} missing: apt-get install samba-vfs-modules"


def recycle_share(**extra):
    params = {"vfs objects": "recycle", "recycle:repository": ".recycle/%U"}
    params.update(extra)
    return {"rec": params}


def probe_files_anywhere(d):
    """Every probe file under the share directory, the repository included."""
    return sorted(str(p.relative_to(d)) for p in Path(d).rglob(PREFIX + "*"))


def rec_url(srv):
    return srv.url.rsplit("/", 1)[0] + "/rec"


def plant_dead(env, share, tag):
    """A recorded file of a probe of ours whose process is gone, for a
    clean-up."""
    dead = share / f"{PREFIX}{own_host()}-{dead_pid()}-00000000000000{tag}"
    dead.write_bytes(b"x" * 4096)
    dead.chmod(0o666)
    record_made(env.state_dir, dead.name, rec_url(env.srv))
    return dead


def once_config(env):
    """Client trials to the recycle share, 1 MiB each way a sample, 12 MiB
    in all: several samples."""
    env.write_config(probe={"url": q(rec_url(env.srv)), "size": "1M", "request_size": "1M",
                            "duration": "0"},
                     tune={"trials": q("client"), "max_bytes": "12M"})


def test_probe_deletes_its_copy_in_the_users_repository(smbd_factory, smbtuned, tmp_path):
    srv = smbd_factory(shares=recycle_share(), users={USER: PASSWORD})
    r = run_probe(smbtuned, probe_conf(tmp_path), url=rec_url(srv),
                  credentials=cred_file(tmp_path, PASSWORD))
    assert r.returncode == 0, r.stderr
    # The module did move it there (the directory it made), and it is gone.
    assert (srv.shares["rec"] / ".recycle" / USER).is_dir()
    assert probe_files_anywhere(srv.shares["rec"]) == []
    j = json.loads(r.stdout)
    assert j["outcome"] == "ok" and j["recycle"] == "removed", j
    assert r.stderr.count(WARN) == 1, r.stderr
    assert f".recycle/{USER}/{PREFIX}" in r.stderr and "deleted it there too" in r.stderr
    assert FIX in r.stderr


def test_keeptree_copy_of_a_directory_is_deleted(smbd_factory, smbtuned, tmp_path):
    srv = smbd_factory(shares=recycle_share(**{"recycle:keeptree": "yes"}),
                       users={USER: PASSWORD})
    sub = srv.shares["rec"] / "sub"
    sub.mkdir()
    sub.chmod(0o777)
    r = run_probe(smbtuned, probe_conf(tmp_path, directory="sub"), url=rec_url(srv),
                  credentials=cred_file(tmp_path, PASSWORD))
    assert r.returncode == 0, r.stderr
    assert (srv.shares["rec"] / ".recycle" / USER / "sub").is_dir()
    assert probe_files_anywhere(srv.shares["rec"]) == []
    assert json.loads(r.stdout)["recycle"] == "removed"


def test_guest_copy_that_cannot_be_deleted_is_said(smbd_factory, smbtuned, tmp_path):
    """The guest may not open the 0700 repository the module made: the
    probe still measures, and says plainly that its file stays there."""
    srv = smbd_factory(shares=recycle_share())
    r = run_probe(smbtuned, probe_conf(tmp_path), url=rec_url(srv))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(WARN) == 1, r.stderr
    j = json.loads(r.stdout)
    assert j["outcome"] == "ok" and j["recycle"] == "left", j
    assert "could not be deleted there (Permission denied)" in r.stderr, r.stderr
    assert "every probe leaves its file there" in r.stderr and FIX in r.stderr
    # %U of the anonymous guest is empty: the repository's root.
    left = probe_files_anywhere(srv.shares["rec"])
    assert len(left) == 1 and left[0].startswith(f".recycle/{PREFIX}"), left


def test_the_exclude_line_keeps_nothing_and_nothing_is_said(smbd_factory, smbtuned, tmp_path):
    srv = smbd_factory(shares=recycle_share(**{"recycle:exclude": ".smbtuned-probe-*"}))
    r = run_probe(smbtuned, probe_conf(tmp_path), url=rec_url(srv))
    assert r.returncode == 0, r.stderr
    assert probe_files_anywhere(srv.shares["rec"]) == []
    assert json.loads(r.stdout)["recycle"] == "none"
    assert r.stderr == ""


def test_client_trials_and_clean_up_leave_no_copy_and_warn_once(make_env):
    """A cycle of client trials (many samples) on a recycle share whose
    repository the guest may use: no probe file anywhere afterwards, a
    killed probe's file that the clean-up removed included, and the
    warning once for the run."""
    env = make_env(WRITTEN, shares=recycle_share(**{"recycle:directory_mode": "0777",
                                                    "recycle:subdir_mode": "0777"}))
    share = env.srv.shares["rec"]
    plant_dead(env, share, "ab")
    once_config(env)
    rc, out, err = env.run("--once", "--dry-run", timeout=180)
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    assert (share / ".recycle").is_dir()
    assert probe_files_anywhere(share) == [], err
    said = re.findall(r"^<4>.*" + re.escape(WARN) + r".*deleted it there too", err, re.M)
    assert len(said) == 1, err
    assert len(re.findall(r"^<6>tried SO_RCVBUF", err, re.M)) >= 3, err
    assert "removing a killed probe's file" not in err, err


def test_a_copy_that_stays_ends_the_cycle(make_env):
    """The guest's copy stays (the module's 0700 repository): the first
    sample fails with the reason and the fix, and the cycle ends there,
    rather than leave a file for every sample of a search in the share."""
    env = make_env(WRITTEN, shares=recycle_share())
    share = env.srv.shares["rec"]
    once_config(env)
    rc, out, err = env.run("--once", "--dry-run", timeout=180)
    assert rc == 1, f"exit {rc}\n{out}\n{err}"
    assert re.search(r"^<3>probe of \S+ failed: .*" + re.escape(WARN) + r".*could not be "
                     r"deleted there \(Permission denied\): every probe leaves its file there",
                     err, re.M), err
    assert FIX in err, err
    assert not re.search(r"^<6>tried SO_RCVBUF", err, re.M), err
    left = probe_files_anywhere(share)
    assert len(left) == 1 and left[0].startswith(f".recycle/{PREFIX}"), left


# a 0.1 s probe under a 0.45 s deadline: a neighbour's load could end it
@pytest.mark.serial
def test_a_sample_that_ends_near_its_deadline_still_deletes_its_copy(smbd_factory, smbtuned,
                                                                      tmp_path):
    """The daemon cuts a trial's deadline to fractions of a second: a
    sample that measured in time but ended in the deadline's last moments
    gets a grace for the look after its recycle copy (the parent waits),
    rather than leave the copy in the share without a word. Through
    tests/unit/probe_driver: a 1 MiB probe of about 0.1 s with a deadline
    of 0.45 s."""
    driver = Path(smbtuned).parent.parent / "tests" / "unit" / "probe_driver"
    assert os.access(driver, os.X_OK), f"{driver} is not built"
    srv = smbd_factory(shares=recycle_share(), users={USER: PASSWORD})
    work = tmp_path / "state"
    work.mkdir(mode=0o700)
    r = subprocess.run([str(driver), rec_url(srv), str(1 << 20), "0.45", str(work),
                        str(cred_file(tmp_path, PASSWORD))],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["outcome"] == "ok", j
    assert j["recycle"] == "removed", j
    assert probe_files_anywhere(srv.shares["rec"]) == []


def test_a_clean_up_whose_copy_stays_names_the_recycle_bin(make_env):
    """A killed probe's file that the start's clean-up removes, on a share
    whose 0700 repository the guest may not open: the warning names the
    recycle bin, the copy's place and the fix, not "File exists"."""
    env = make_env(WRITTEN, shares=recycle_share())
    share = env.srv.shares["rec"]
    dead = plant_dead(env, share, "ac")
    once_config(env)
    rc, out, err = env.run("--once", "--dry-run", timeout=180)
    assert re.search(r"^<4>removing a killed probe's file: the clean-up failed \(1 file of "
                     r"killed probes could not be removed: the copy Samba's recycle module kept "
                     r"at \.recycle/" + re.escape(dead.name) + r" stays \(Permission denied\); "
                     + re.escape("add 'recycle:exclude = .smbtuned-probe-*' to that share"),
                     err, re.M), err
    assert "File exists" not in err, err
