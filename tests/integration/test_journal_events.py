"""The daemon's journal events as journald gets them (issue 11): run
smbtuned the way systemd runs a service (JOURNAL_STREAM names its stderr)
with a journald of the test's own (fake_journald.py, in a private mount
namespace), against a real smbd from the fixture, and read the native
entries back: each kind of event of a --once cycle with its MESSAGE_ID,
SMBTUNED_EVENT and fields, and --resume's. The machine's own journal is
never touched (this machine has no systemd as PID 1)."""
import json
import re
import shutil
import socket
import sys
from pathlib import Path

import pytest

from daemon_util import LEGACY, q

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def ids():
    """NAME -> MESSAGE_ID from lib/journal_ids.h."""
    text = (REPO / "lib" / "journal_ids.h").read_text()
    return dict(re.findall(r'^#define JOURNAL_ID_(\w+) "([0-9a-f]{32})"$', text, re.M))


def native(env, out, *args):
    """Run smbtuned ARGS under fake_journald: (rc, entries, stderr)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    env.prefix = ["unshare", "--mount", "--propagation", "private", sys.executable,
                  str(HERE / "fake_journald.py"), str(out)]
    rc, _, err = env.run(*args)
    if not out.exists():
        pytest.skip(f"no private mount namespace here: {err}")
    return rc, [json.loads(line) for line in out.read_text().splitlines()], err


def of(entries, message_id):
    return [e for e in entries if e.get("MESSAGE_ID") == message_id]


def test_once_cycle_events(make_env, tmp_path):
    env = make_env(LEGACY)
    env.write_config(probe={"deadline": "5"},
                     tune={"trials": q("shadow"), "apply": q("smbcontrol"), "mode": q("tune")})
    # a real client of smbd, connected through the cycle (an idle one)
    held = socket.create_connection(("127.0.0.1", env.srv.port), timeout=10)
    rc, entries, err = native(env, tmp_path / "journal.jsonl", "--once")
    assert rc == 0, err
    i = ids()
    # every line went to the journal, none to the stream (--once's
    # progress lines are no journal lines: they stay on stderr)
    assert not re.search(r"^<\d>", err, re.M), err
    assert re.search(r"^sample +1  SO_RCVBUF 8192 SO_SNDBUF 8192 +write ", err, re.M), err
    assert all(e["SYSLOG_IDENTIFIER"] == "smbtuned" for e in entries)
    conf = str(env.srv.conf)

    start = of(entries, i["START"])
    assert len(start) == 1, entries
    assert start[0]["SMBTUNED_EVENT"] == "start"
    assert start[0]["SMBTUNED_SMB_CONF"] == conf
    assert start[0]["SMBTUNED_TARGET"] == env.srv.url
    assert start[0]["MESSAGE"].startswith("smbtuned ")
    assert start[0]["PRIORITY"] == "6"

    search = of(entries, i["SEARCH_START"])
    assert len(search) == 1
    assert (search[0]["SMBTUNED_RCVBUF"], search[0]["SMBTUNED_SNDBUF"]) == ("8192", "8192")

    trials = of(entries, i["TRIAL"])
    assert trials, entries
    assert [t["SMBTUNED_SAMPLES"] for t in trials] == [str(n + 1) for n in range(len(trials))]
    for t in trials:
        assert t["SMBTUNED_EVENT"] == "trial" and t["PRIORITY"] == "6"
        assert re.fullmatch(r"\d+|auto", t["SMBTUNED_RCVBUF"]), t
        assert re.fullmatch(r"\d+|auto", t["SMBTUNED_SNDBUF"]), t
        # a trial that stalled measured 0: a rate all the same
        assert float(t["SMBTUNED_WRITE_MBPS"]) >= 0 and float(t["SMBTUNED_READ_MBPS"]) >= 0, t
        assert t["SMBTUNED_SMB_CONF"] == conf

    end = of(entries, i["SEARCH_END"])
    assert len(end) == 1 and end[0]["SMBTUNED_SAMPLES"].isdigit(), entries
    # a move precedes the end when the search moved off the line in force
    if (end[0]["SMBTUNED_RCVBUF"], end[0]["SMBTUNED_SNDBUF"]) != ("8192", "8192"):
        moves = of(entries, i["MOVE"])
        assert moves and entries.index(moves[0]) < entries.index(end[0]), entries
        assert of(entries, i["COMMIT"]), entries

    # one summary of smbd's real connections, before the search, every
    # field a number, no client address (issue 13); the one connection
    # the test holds open (see above) sends nothing: idle
    clients = of(entries, i["CLIENTS"])
    assert len(clients) == 1, entries
    c = clients[0]
    assert c["SMBTUNED_EVENT"] == "clients" and c["PRIORITY"] == "6", c
    assert entries.index(c) < entries.index(search[0]), entries
    for k in ("CLIENTS", "CLIENTS_SNDBUF_LIMITED", "CLIENTS_RCVBUF_LIMITED",
              "CLIENTS_CLIENT_WINDOW", "CLIENTS_NETWORK", "CLIENTS_IDLE", "BDP_MAX"):
        assert c["SMBTUNED_" + k].isdigit(), (k, c)
    for k in ("RTT_MEDIAN_MS", "RTT_MAX_MS"):
        assert re.fullmatch(r"\d+\.\d", c["SMBTUNED_" + k]), (k, c)
    assert c["SMBTUNED_CLIENTS"] == "1" and c["SMBTUNED_CLIENTS_IDLE"] == "1", c
    assert f":{held.getsockname()[1]}" not in json.dumps(c), c
    assert "127.0.0.1" not in json.dumps(c), c
    held.close()

    cycle = of(entries, i["CYCLE"])
    assert len(cycle) == 1 and entries[-1] is cycle[0], entries
    assert cycle[0]["SMBTUNED_RESULT"] == "done"
    assert cycle[0]["SMBTUNED_SAMPLES"] == trials[-1]["SMBTUNED_SAMPLES"]
    assert not of(entries, i["ERROR"]), entries
    # every entry with an id has its name, every id here has a name
    for e in entries:
        if "MESSAGE_ID" in e:
            assert e["SMBTUNED_EVENT"], e


def test_resume_event(make_env, tmp_path):
    env = make_env(LEGACY)
    env.write_config(tune={"mode": q("advise")})
    state = env.state_dir / "state"
    # a hold as a hand edit leaves it: an advise cycle for a state file (a
    # dry run writes none), then hold
    rc, out, err = env.run("--once")
    assert rc == 0, err
    text = state.read_text()
    assert "\nhold no\n" in text, text
    state.write_text(text.replace("\nhold no\n", "\nhold yes\n"))
    rc, entries, err = native(env, tmp_path / "journal.jsonl", "--resume")
    assert rc == 0, err
    resume = of(entries, ids()["RESUME"])
    assert len(resume) == 1, entries
    assert resume[0]["SMBTUNED_EVENT"] == "resume"
    assert resume[0]["SMBTUNED_SMB_CONF"] == str(env.srv.conf)
    assert "\nhold no\n" in state.read_text()


def test_confirmed_commit_event(make_env, tmp_path):
    """A commit a run wrote but did not finish (the state file holds it
    pending, its line is in force) is confirmed by the next start, whose
    commit event carries the fields the catalog's text names: the file and
    both sizes ("auto" for the one the line leaves out)."""
    env = make_env(LEGACY)
    env.write_config(tune={"mode": q("advise"), "apply": q("smbcontrol")})
    rc, out, err = env.run("--once")  # a state file, as a cycle leaves it
    assert rc == 0, err
    conf = env.srv.conf
    env.plant_pending_commit("TCP_NODELAY SO_RCVBUF=262144")
    rc, entries, err = native(env, tmp_path / "journal.jsonl", "--once", "--dry-run")
    assert rc == 0, err
    commit = [e for e in of(entries, ids()["COMMIT"])
              if "written by a run that did not finish" in e["MESSAGE"]]
    assert len(commit) == 1, entries
    assert commit[0]["SMBTUNED_SMB_CONF"] == str(conf)
    assert (commit[0]["SMBTUNED_RCVBUF"], commit[0]["SMBTUNED_SNDBUF"]) == ("262144", "auto")
    assert "checked and kept: smbd is told now (apply = smbcontrol)" in commit[0]["MESSAGE"]
