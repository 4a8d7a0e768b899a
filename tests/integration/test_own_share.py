"""No url configured: smbtuned tunes against a share of its own.

The shipped /etc/smbtuned.conf has no url; the daemon then measures
STATE_DIR/share, which only its shadow smbds serve (as [smbtuned-probe-RANDOM],
guests on 127.0.0.1), so a fresh install works on any Samba server.

Checked here: `-t` passes on the shipped conf/smbtuned.conf (its paths
pointed at the test's tmp with options); client and live trials without a
url are refused with the file and line, and `--probe` without one asks
for it; a `--once` without a url against
the fixture smbd runs its probes in the own share, commits or keeps a
value, and leaves no file in STATE_DIR/share (a killed run's probe file
there is swept at the start) and nothing running. On a cluster node
(`clustering = yes`, no ctdbd) shadow trials run, with or without a url.
"""

import json
import re
import time

import pytest

from conftest import REPO, run_editor, samba_value
from daemon_util import (PROBE_FILE_GLOB, SMALL_PROBE, SMALL_TUNE, DaemonEnv, conf_text, q,
                         OWN_SHARE_PLACE, record_made,
                         only_socket_line_changed)

SHIPPED = REPO / "conf" / "smbtuned.conf"
# On the lattice of SMALL_TUNE (64K..256K): no stalls on loopback.
ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"


def test_check_passes_on_the_shipped_config(smbtuned, tmp_path):
    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    assert "\n    url =" not in SHIPPED.read_text(), "the shipped file sets a url"
    r = run_editor(smbtuned, "-t", "-c", SHIPPED, "--smb-conf", smb_conf,
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == ""
    # it says what it read
    assert r.stdout == (f"configuration OK: {SHIPPED}, and {smb_conf} (socket options at "
                        f"{smb_conf}:2)\n"), r.stdout


def test_probe_without_url_says_so(smbtuned, tmp_path):
    """--probe has no shadow to measure the own share on: it asks for a url
    (one line on stderr, one JSON object with --json), it does not crash."""
    for extra in ([], ["--json"]):
        r = run_editor(smbtuned, "--probe", "-c", SHIPPED, "--state-dir", tmp_path / "state",
                       *extra)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "smbtuned: probe: no url: give --url" in r.stderr, r.stderr
        if extra:
            assert json.loads(r.stdout)["outcome"] == "error", r.stdout


@pytest.mark.parametrize("trials", ["client", "live"])
def test_no_url_refuses_client_and_live_trials(smbtuned, tmp_path, trials):
    smb_conf = tmp_path / "smb.conf"
    smb_conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(SHIPPED.read_text().replace('    # trials = "auto"',
                                                f'    trials = "{trials}"'))
    lines = conf.read_text().splitlines()
    lineno = [i + 1 for i, l in enumerate(lines) if l.strip().startswith("trials =")]
    assert len(lineno) == 1
    r = run_editor(smbtuned, "-t", "-c", conf, "--smb-conf", smb_conf,
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 78, r.stdout + r.stderr
    assert f"{conf}:{lineno[0]}: tune: trials = {trials} needs a url" in r.stderr, r.stderr
    # On the command line: the option is named instead.
    r = run_editor(smbtuned, "-t", "-c", SHIPPED, "--smb-conf", smb_conf,
                   "--state-dir", tmp_path / "state", "--trials", trials)
    assert r.returncode == 78, r.stdout + r.stderr
    assert f"--trials {trials} needs a url" in r.stderr, r.stderr
    # With a url they are fine.
    r = run_editor(smbtuned, "-t", "-c", conf, "--smb-conf", smb_conf,
                   "--state-dir", tmp_path / "state", "--url", "smb://127.0.0.1/share")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.smbd
@pytest.mark.slow
def test_once_without_url_tunes_on_the_own_share(make_env):
    env = make_env(ON_LATTICE)
    env.conf.write_text(conf_text(
        {**SMALL_PROBE},
        {"smb_conf": q(env.srv.conf), "state_dir": q(env.state_dir), **SMALL_TUNE,
         "apply": q("smbcontrol"), "mode": q("tune")}))
    conf = env.srv.conf
    before = conf.read_bytes()
    share = env.state_dir / "share"
    # What a killed predecessor's probe leaves: the start-up's sweep takes it.
    share.mkdir(mode=0o700)
    planted = share / ".smbtuned-probe-127.0.0.1-99999-0123456789abcdef"
    planted.write_bytes(b"x" * 4096)
    record_made(env.state_dir, planted.name, OWN_SHARE_PLACE)

    d = env.start("--once", "--json")
    saw_probe_file = False
    deadline = time.monotonic() + 300
    while d.alive() and time.monotonic() < deadline:
        saw_probe_file |= any(p != planted for p in share.glob(PROBE_FILE_GLOB))
        time.sleep(0.02)
    rc = d.wait(timeout=1)
    out, err = d.stdout, d.stderr
    assert rc == 0, err
    assert "its own share" in err, err
    lines = out.splitlines()
    assert len(lines) == 1, f"--json prints one line, got {out!r}"
    obj = json.loads(lines[0])
    assert obj["samples"] >= 1, obj
    assert obj["before"]["write_mbps"] and obj["before"]["read_mbps"], obj
    # The probes wrote into the own share, never into production's.
    assert saw_probe_file, f"no probe file appeared in {share}\n{err}"
    after = conf.read_bytes()
    if obj["committed"]:
        assert samba_value(conf) == obj["after"]["value"]
        reason = only_socket_line_changed(before, after)
        assert reason is None, reason
    else:
        assert after == before, "not committed, but smb.conf changed"
    # Nothing left: the own share is empty, no process, no run dir.
    assert share.is_dir()
    assert list(share.iterdir()) == []
    left = env.leftovers()
    assert not left, "left behind:\n" + "\n".join(left)
    assert env.srv.alive()


def dry_once(smbtuned, srv, tmp_path, probe, tune, *args):
    """--once --dry-run against srv's smb.conf, with these probe and tune
    settings: (the daemon, ended; smb.conf's bytes before it). Leaves
    nothing behind."""
    env = DaemonEnv(smbtuned, srv, tmp_path)
    try:
        env.conf.write_text(conf_text(
            {**SMALL_PROBE, **probe},
            {"smb_conf": q(srv.conf), "state_dir": q(env.state_dir), **SMALL_TUNE,
             "mode": q("tune"), **tune}))
        before = srv.conf.read_bytes()
        d = env.start("--once", "--dry-run", *args)
        d.wait(timeout=300)
        assert not env.leftovers()
        return d, before
    finally:
        env.cleanup()


def own_share_once(smbtuned, srv, tmp_path, extra, *args):
    """dry_once on the own share (no url), production's [global] given the
    lines `extra` first. They are added after the fixture's readiness
    check, which logs on as a guest from 127.0.0.1 too; the shadows read
    them from the file they include."""
    text = srv.conf.read_text()
    assert text.count("[global]\n") == 1
    srv.conf.write_text(text.replace("[global]\n", "[global]\n" + "".join(
        f"   {line}\n" for line in extra)))
    return dry_once(smbtuned, srv, tmp_path, {}, {}, *args)


@pytest.mark.smbd
@pytest.mark.parametrize("extra", ["server smb encrypt = required", "smb encrypt = mandatory",
                                   "server signing = mandatory"])
def test_own_share_works_where_production_requires_encryption(smbtuned, smbd_factory, tmp_path,
                                                              extra):
    """The own share's logons are guests, which can neither encrypt nor
    sign: a production smb.conf that requires either must not make every
    cycle fail (it once did, blaming guest access)."""
    srv = smbd_factory(socket_options=ON_LATTICE)
    d, before = own_share_once(smbtuned, srv, tmp_path, [extra], "--json")
    assert d.proc.returncode == 0, d.stderr
    obj = json.loads(d.stdout.splitlines()[0])
    assert obj["samples"] >= 1, obj
    assert srv.conf.read_bytes() == before


def assert_refused(d, what, conf, whose, advice):
    """The failed probe's journal line (of `what`, a regex) says the
    shadow refused 127.0.0.1, by whose hosts lists in conf, and what to
    do."""
    line = f"<3>probe of {what} failed: .*" + re.escape(
        f" (a trial's shadow smbd, which refused the connection from 127.0.0.1: the hosts "
        f"allow and hosts deny of {conf} ({whose}), which the shadows keep, refuse it; "
        f"{advice})")
    assert re.search("^" + line + "$", d.stderr, re.M), d.stderr


@pytest.mark.smbd
def test_own_share_refused_by_hosts_deny_says_why(smbtuned, smbd_factory, tmp_path):
    """A [global] that refuses 127.0.0.1 (the hardening guides' LAN in
    hosts allow, hosts deny = ALL) shuts the shadows out too, as they keep
    production's hosts lists: the probe saw only "Invalid argument". The
    shadow's log says why, and so does the journal line, with what to do;
    nothing is changed."""
    srv = smbd_factory(socket_options=ON_LATTICE)
    d, before = own_share_once(smbtuned, srv, tmp_path,
                               ["hosts allow = 192.0.2.0/24", "hosts deny = ALL"])
    assert_refused(d, re.escape("smbtuned's own share"), srv.conf, "[global]",
                   "admit 127.0.0.1 in hosts allow, or give probe { url }")
    assert srv.conf.read_bytes() == before


@pytest.mark.smbd
def test_share_refused_by_its_hosts_lists_says_why(smbtuned, smbd_factory, tmp_path):
    """With a url, shadow trials serve production's share, with its own
    hosts lists: a share that admits only a LAN refuses the probe on the
    shadow's 127.0.0.1, and the journal line names the share's lists too,
    without asking for the url already given."""
    srv = smbd_factory(socket_options=ON_LATTICE)
    locked = tmp_path / "locked"
    locked.mkdir()
    with open(srv.conf, "a") as f:
        f.write(f"[locked]\n   path = {locked}\n   guest ok = yes\n   read only = no\n"
                "   hosts allow = 192.0.2.0/24\n   hosts deny = ALL\n")
    d, before = dry_once(smbtuned, srv, tmp_path,
                         {"url": q(srv.url.rsplit("/", 1)[0] + "/locked")},
                         {"trials": q("shadow")})
    # the url of the shadow's port
    assert_refused(d, r"smb://127\.0\.0\.1:\d+/locked", srv.conf,
                   "[global], or the share's own", "admit 127.0.0.1 in the hosts allow that "
                   "refuses it")
    assert srv.conf.read_bytes() == before


@pytest.mark.smbd
@pytest.mark.parametrize("where", ["own share", "url"])
def test_shadow_trials_on_a_cluster_node(smbtuned, smbd_factory, tmp_path, where):
    """A CTDB node's smb.conf says `clustering = yes`: smbd then opens its
    locking, brlock, session and serverid databases through ctdbd, not in
    its lock directory, so a shadow that kept it would share production's
    cluster-wide lock state and messaging. The shadows are not clustered:
    here, where no ctdbd runs (its socket is named in the test's tmp, so a
    real one is never reached), a clustered shadow would not even start
    ("clustering=yes but ctdbd connect failed" in its log); the trial runs
    and measures, with the own share and with a url."""
    srv = smbd_factory(socket_options=ON_LATTICE)
    text = srv.conf.read_text()
    assert text.count("[global]\n") == 1
    # After the fixture's start: production's smbd itself is not clustered.
    srv.conf.write_text(text.replace("[global]\n", "[global]\n   clustering = yes\n"
                                     f"   ctdbd socket = {tmp_path / 'no-ctdbd.socket'}\n"))
    probe = {} if where == "own share" else {"url": q(srv.url)}
    # a trial that starts and measures is all it takes: one sample's bytes
    tune = {"max_bytes": "8M", **({} if where == "own share" else {"trials": q("shadow")})}
    d, before = dry_once(smbtuned, srv, tmp_path, probe, tune, "--json")
    assert d.proc.returncode == 0, d.stderr
    assert "ctdb" not in d.stderr, d.stderr
    obj = json.loads(d.stdout.splitlines()[0])
    assert obj["samples"] >= 1, obj
    assert obj["before"]["write_mbps"] and obj["before"]["read_mbps"], obj
    assert srv.conf.read_bytes() == before


@pytest.mark.smbd
def test_own_share_ignores_productions_dfree_command(smbtuned, smbd_factory, tmp_path):
    """The probe asks the share for its free space before it writes; the
    own share is the state directory's, so a `dfree command` of
    production's (a quota script of its shares') is not asked there. Here
    one that says 50 KiB are free of 100 MiB, which would refuse every
    sample: the own share's trials run and measure."""
    srv = smbd_factory(socket_options=ON_LATTICE)
    script = tmp_path / "dfree"
    script.write_text("#!/bin/sh\necho 102400 50\n")
    script.chmod(0o755)
    d, before = own_share_once(smbtuned, srv, tmp_path, [f"dfree command = {script}"], "--json")
    assert d.proc.returncode == 0, d.stderr
    assert "free space" not in d.stderr, d.stderr
    obj = json.loads(d.stdout.splitlines()[0])
    assert obj["samples"] >= 1, obj
    assert srv.conf.read_bytes() == before
