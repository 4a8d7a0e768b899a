"""Advise mode keeps its advice across a restart of the daemon.

The daemon runs in advise mode against a fixture smbd (shadow trials) from
the stalling 8192 line, converges on advice it does not write, and is
stopped. Started again with the line unchanged, its next cycle verifies
the advice of before, one sample, and starts no search (before state
format 10 it searched again from scratch); --status shows the advice and
the line it was searched from. Started again after the line was changed
by hand (the advice applied), it searches from the new line, as a running
daemon does. smb.conf is never written by smbtuned.
"""

import re
import signal

import pytest

from daemon_util import LEGACY, RESULT_RE, q

pytestmark = [pytest.mark.smbd]

ADVICE_RE = re.compile(r"^<\d>advice: socket options = (.*?) \(advise mode: smb\.conf not "
                       r"changed\)", re.M)
RESTORED_RE = re.compile(r"^<\d>the advice from before the restart, SO_RCVBUF \S+ SO_SNDBUF \S+ "
                         r"\(socket options = (.*)\), searched from the line in force: "
                         r"verifying it$", re.M)
# the cycle's end: one sample, of the advice
VERIFIED_RE = re.compile(r"^<\d>cycle done after 1 samples: verified SO_RCVBUF \S+ SO_SNDBUF \S+ "
                         r"\(the advice; smb\.conf not changed\): write ", re.M)
SEARCH = "tuning cycle: searching from "
CHANGED = "the line in force changed since the advice: searching again"
# advise mode, shadow trials, one cycle at the start and then one an hour
# (SIGHUP runs one at once)
TUNE = {"mode": q("advise"), "trials": q("shadow"), "interval": "1h"}


def stop(d):
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=120) == 0, d.stderr


def cycle_at_start(env):
    """A restarted daemon whose next cycle the state file schedules an hour
    on (tuner_keep_schedule): a SIGHUP (same config) runs it now."""
    d = env.start()
    d.wait_line(r"as scheduled", timeout=60)
    d.signal(signal.SIGHUP)
    return d


def test_advise_restart_verifies_its_advice(make_env):
    env = make_env(LEGACY)
    env.write_config(tune=TUNE)
    conf_bytes = env.srv.conf.read_bytes()

    # 1. The first run searches and converges on advice (8192 stalls on
    # loopback, and autotuning cannot take effect before smbd restarts:
    # an explicit size is advised).
    d = env.start()
    d.wait_for(lambda: RESULT_RE.search(d.stderr) is not None, timeout=240,
               what="the first search's result")
    m = ADVICE_RE.search(d.stderr)
    assert m, d.stderr
    advice = m.group(1)
    d.wait_for(lambda: env.state().get("next_at", "0") != "0", timeout=60,
               what="the cycle's end in the state file")
    stop(d)
    st = env.state()
    assert st.get("advice") == advice, st
    assert st.get("converged") == "yes", st
    assert (st.get("advised_from_rcvbuf"), st.get("advised_from_sndbuf")) == ("8192", "8192"), st

    # 2. Started again, the line unchanged: it verifies the advice, and no
    # search starts.
    d = cycle_at_start(env)
    d.wait_for(lambda: VERIFIED_RE.search(d.stderr) is not None or SEARCH in d.stderr,
               timeout=120, what="a verification of the advice")
    stop(d)
    m = RESTORED_RE.search(d.stderr)
    assert m and m.group(1) == advice, d.stderr
    assert SEARCH not in d.stderr, d.stderr
    assert env.srv.conf.read_bytes() == conf_bytes
    assert env.state().get("advice") == advice

    # 3. --status shows the advice and the line it was searched from.
    rc, out, err = env.run("--status", timeout=60)
    assert rc == 0, err
    assert (f"Advice          : socket options = {advice} (SO_RCVBUF " in out and
            "; advise mode: smb.conf not changed, verified each cycle)\n" in out), out
    assert ("Advised from    : SO_RCVBUF 8192 SO_SNDBUF 8192 (the line in force when it was "
            "searched: a change of it searches again)\n") in out, out
    rc, out, err = env.run("--status", "--json", timeout=60)
    assert rc == 0, err
    assert f'"advice":"{advice}"' in out and '"advised_from_rcvbuf":8192' in out, out

    # 3b. The admin's other options changed since, not the buffers: the
    # advice is shown with the options as they are now.
    text = env.srv.conf.read_text()
    assert text.count(f"socket options = {LEGACY}") == 1, text
    env.srv.conf.write_text(text.replace(f"socket options = {LEGACY}",
                                         "socket options = " +
                                         LEGACY.replace("IPTOS_LOWDELAY ", "")))
    rc, out, err = env.run("--status", timeout=60)
    assert rc == 0, err
    assert "IPTOS_LOWDELAY" in advice, advice
    assert (f"Advice          : socket options = {advice.replace('IPTOS_LOWDELAY ', '')} "
            "(SO_RCVBUF " in out and "verified each cycle)\n" in out), out
    env.srv.conf.write_text(text)

    # 4. The advice applied by hand while the daemon was down: --status
    # says the line changed, the next start searches from the new line,
    # and the old advice is gone.
    env.srv.conf.write_text(text.replace(f"socket options = {LEGACY}",
                                         f"socket options = {advice}"))
    conf_bytes = env.srv.conf.read_bytes()
    rc, out, err = env.run("--status", timeout=60)
    assert rc == 0, err
    assert ("; advise mode: smb.conf not changed, the line in force changed since: the next "
            "cycle searches again)\n") in out, out
    d = cycle_at_start(env)
    d.wait_for(lambda: RESULT_RE.search(d.stderr) is not None, timeout=240,
               what="the new search's result")
    stop(d)
    assert CHANGED in d.stderr and SEARCH in d.stderr, d.stderr
    assert not RESTORED_RE.search(d.stderr), d.stderr
    assert env.srv.conf.read_bytes() == conf_bytes
    assert env.state().get("advice") != advice, env.state()
    assert not env.leftovers(), env.leftovers()
