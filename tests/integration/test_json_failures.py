"""--json when things go wrong: --once and --show print exactly one JSON
object on stdout in every outcome, with the exit status they always had,
as --probe --json does (smbtuned(8), --json).

A failure object has result ("error": refused before anything was done;
for --once also "held" and "failed") and error, the message of the line on
stderr or in the journal that says why. --once's also has mode, samples,
bytes and seconds, as its report. The text output stays as it was.
"""

import json
import re
import signal

import pytest

from conftest import run_editor
from daemon_util import LEGACY, q, registry_copy, socket_line_index, socket_value
from smbd import free_port

ON_LATTICE = "TCP_NODELAY IPTOS_LOWDELAY SO_RCVBUF=131072 SO_SNDBUF=131072"
ONCE_KEYS = ["result", "error", "mode", "samples", "bytes", "seconds"]


def one_object(out, err=""):
    """stdout as exactly one line holding one JSON object."""
    lines = out.splitlines()
    assert len(lines) == 1, f"--json: expected one line on stdout, got {out!r}\n{err}"
    obj = json.loads(lines[0])
    assert isinstance(obj, dict), lines[0]
    return obj


def check_once_failure(obj, result, err):
    """--once's failure object: its keys in order, result, an error."""
    assert list(obj) == ONCE_KEYS, obj
    assert obj["result"] == result, f"{obj}\n{err}"
    assert isinstance(obj["error"], str) and obj["error"], obj
    assert obj["mode"] in ("tune", "advise", None), obj
    assert isinstance(obj["samples"], int) and obj["samples"] >= 0, obj
    assert isinstance(obj["bytes"], int) and obj["bytes"] >= 0, obj
    assert isinstance(obj["seconds"], (int, float)) and obj["seconds"] >= 0, obj


# ------------------------------------------------------------------ --show

def registry_conf(d):
    conf = d / "smb.conf"
    conf.write_text("[global]\n   config backend = registry\n   socket options = TCP_NODELAY\n")
    return conf


def missing_conf(d):
    return d / "absent" / "smb.conf"


REFUSED = {
    "registry": (registry_conf, "config backend = registry"),
    "missing": (missing_conf, "No such file or directory"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_show_json_refused(smbtuned, tmp_path, case):
    """A refused smb.conf: exit 1 and the line on stderr as before, and one
    object on stdout: result "error", error the line's message."""
    make, words = REFUSED[case]
    conf = make(tmp_path)
    show = ["--smb-conf", conf, "--show", "--state-dir", tmp_path / "state"]

    r = run_editor(smbtuned, *show, "--json")
    assert r.returncode == 1, f"exit {r.returncode}: {r.stdout} {r.stderr}"
    obj = one_object(r.stdout, r.stderr)
    assert obj == {"result": "error", "error": obj["error"]}, obj
    assert words in obj["error"] and str(conf) in obj["error"], obj
    msg = r.stderr.strip()
    assert msg == f"smbtuned: {obj['error']}", (msg, obj)

    # Without --json: the line on stderr, nothing on stdout, as before.
    r = run_editor(smbtuned, *show)
    assert r.returncode == 1 and r.stdout == "", f"exit {r.returncode}: {r.stdout!r}"
    assert r.stderr.strip() == msg


# ------------------------------------------------------------------ --once

def test_once_json_refused_config(smbtuned, tmp_path):
    """A config file refused before any cycle: exit 78 as before, and one
    object: result "error", nothing done, the mode not known."""
    conf = tmp_path / "smbtuned.conf"
    conf.write_text("tune {\n    intervall = 1h\n}\n")
    r = run_editor(smbtuned, "-c", conf, "--once", "--json")
    assert r.returncode == 78, f"exit {r.returncode}: {r.stdout} {r.stderr}"  # EX_CONFIG
    obj = one_object(r.stdout, r.stderr)
    check_once_failure(obj, "error", r.stderr)
    assert f"{conf}:2" in obj["error"] and "intervall" in obj["error"], obj
    assert (obj["mode"], obj["samples"], obj["bytes"]) == (None, 0, 0), obj
    assert r.stderr.strip() == f"smbtuned: {obj['error']}", r.stderr


@pytest.mark.smbd
@pytest.mark.slow
def test_once_json_hold(make_env):
    """After a commit, the admin edits our line: the next --once --json
    holds off (exit 1, nothing measured or written) and says so in its
    object, result "held" and the hold's reason; so does the run after it,
    which finds the hold already in the state file."""
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune")})
    conf = env.srv.conf

    # A cycle that commits: 8192 is off the 64K..256K lattice and stalls on
    # loopback, so any neighbour beats it.
    rc, obj, err = env.run_json()
    assert rc == 0, err
    assert obj["committed"], f"the first cycle kept the stalling 8192 line: {obj}\n{err}"
    written = env.state().get("last_written")
    assert written == socket_value(conf.read_bytes())

    lines = conf.read_bytes().splitlines(keepends=True)
    hand_value = "TCP_NODELAY SO_RCVBUF=32768 SO_SNDBUF=32768"
    assert hand_value != written
    lines[socket_line_index(lines)] = f"   socket options = {hand_value}\n".encode()
    hand = b"".join(lines)
    conf.write_bytes(hand)

    for run in ("takes the hold", "finds the hold"):
        rc, out, err = env.run("--once", "--json")
        assert rc == 1, f"{run}: exit {rc}\n{out}\n{err}"
        obj = one_object(out, err)
        check_once_failure(obj, "held", err)
        assert "edited by hand" in obj["error"] and hand_value in obj["error"], (run, obj)
        assert obj["mode"] == "tune" and obj["samples"] == 0 and obj["bytes"] == 0, obj
        assert not re.search(r"^<\d>tried ", err, re.M), f"{run}: measured while holding:\n{err}"
        assert conf.read_bytes() == hand
        assert env.state().get("hold") == "yes", env.state()

    # The text run of a hold prints nothing on stdout, as before.
    rc, out, err = env.run("--once")
    assert rc == 1 and out == "", f"exit {rc}: {out!r}\n{err}"


@pytest.mark.smbd
@pytest.mark.slow
def test_once_json_probe_fails(make_env):
    """A cycle that fails partway (the probe's URL names a port nothing
    listens on, client-socket trials so that the probe goes there): exit 1,
    and one object, result "failed", error the probe's failure."""
    env = make_env(ON_LATTICE)
    port = free_port()
    url = f"smb://127.0.0.1:{port}/share"
    env.write_config(probe={"url": q(url)}, tune={"trials": q("client"), "mode": q("advise")})
    before = env.srv.conf.read_bytes()

    rc, out, err = env.run("--once", "--json")
    assert rc == 1, f"exit {rc}\n{out}\n{err}"
    obj = one_object(out, err)
    check_once_failure(obj, "failed", err)
    assert obj["error"].startswith(f"probe of {url} failed: "), obj
    assert obj["mode"] == "advise", obj
    assert f"<3>{obj['error']}" in err.splitlines(), err
    assert env.srv.conf.read_bytes() == before


@pytest.mark.smbd
@pytest.mark.slow
def test_once_json_stopped(make_env):
    """SIGTERM in the middle of the cycle: exit 1, and one object, result
    "failed", saying it was stopped."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"trials": q("shadow"), "mode": q("advise")})
    d = env.start("--once", "--json")
    d.wait_line(r"^<\d>tuning cycle: searching from ", timeout=120)
    d.signal(signal.SIGTERM)
    assert d.wait() == 1, d.stderr
    obj = one_object(d.stdout, d.stderr)
    check_once_failure(obj, "failed", d.stderr)
    assert obj["error"] == "stopped by a signal before the cycle ended", obj


@pytest.mark.smbd
def test_once_json_smb_conf_refused(make_env, tmp_path):
    """smb.conf refused by the cycle's read (a registry backend; --once
    checks nothing before its cycle): exit 1, and one object, result
    "failed", error the read's reason with file and line, as the journal
    line says it: the read's own reason (owned_last_error), kept from the
    job; with it lost the object says "failed during: starting"."""
    env = make_env(ON_LATTICE)
    reg = registry_copy(env.srv.conf, tmp_path / "registry-smb.conf")
    env.write_config(tune={"smb_conf": q(reg), "mode": q("advise")})
    before = reg.read_bytes()

    rc, out, err = env.run("--once", "--json")
    assert rc == 1, f"exit {rc}\n{out}\n{err}"
    obj = one_object(out, err)
    check_once_failure(obj, "failed", err)
    assert obj["error"].startswith(f"{reg}:4: "), obj
    assert "config backend = registry" in obj["error"], obj
    assert f"<3>{obj['error']}" in err.splitlines(), err
    assert reg.read_bytes() == before
