"""Client trials to this machine by an address other than loopback are
loopback trials.

`trials = client` with `url = smb://fileserver/share` on fileserver itself
measures the loopback device: the kernel sends a connection to one of the
machine's own addresses over `lo`. The probe tells it from its socket's two
ends (lib/netaddr.h), and the daemon weighs such a search as it weighs
shadow trials (daemon/outcome.c: an explicit size only where real
connections ask for one), and --status calls its rates loopback's.

The test's own two network namespaces (tests/netem's WanPath, a short fast
path): smbd listens on the server namespace's 10.199.0.2, which is no
loopback address. From the server namespace that address is this machine's
own; from the client namespace it is a peer's across the link. Nothing
here touches the host's network.

No rate is asserted.
"""

import json
import re
import sys
from pathlib import Path

import pytest

from daemon_util import LEGACY, SMALL_PROBE, SMALL_TUNE, q

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netem"))
from wan import SMBD_GLOBAL, WanPath  # noqa: E402

pytestmark = [pytest.mark.smbd, pytest.mark.slow]

# A short, fast path: the peer's probe needs to cross it, not to be shaped.
RTT_MS = 1
RATE_MBIT = 1000
# daemon/tuner_search.c's notice, and the loopback rule's words in
# daemon/outcome.c (either buffer; autotuning, or an explicit size kept
# because autotuning cannot take effect)
HERE_RE = r"client trials to {url} run on this machine's loopback"
RULE_RE = re.compile(r"SO_(RCV|SND)BUF(=\d+ on loopback trials alone| autotuning: loopback "
                     r"trials cannot rank sizes)")


@pytest.fixture
def wan(tmp_path):
    with WanPath(tmp_path / "wan", rtt_ms=RTT_MS, rate_mbit=RATE_MBIT) as w:
        yield w


def probe_json(smbtuned, env, side, wan):
    """--probe --json of the fixture's url, run in namespace `side`."""
    r = wan.run(side, [str(smbtuned), "--probe", "--json", "-c", str(env.conf)],
                env=env.env(), timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_client_trials_to_this_machine_are_loopback_trials(wan, make_env, smbtuned):
    # wan first: its namespaces are set up before the smbd in them, and go after it
    env = make_env(LEGACY, prefix_cmd=wan.prefix("server"), bind_addr=wan.server_addr,
                   extra_global=SMBD_GLOBAL)
    env.prefix = list(wan.prefix("server"))
    srv = env.srv
    assert srv.url.startswith(f"smb://{wan.server_addr}:"), srv.url
    # advise mode: the rule shows in the advice's words; smb.conf stays
    env.write_config(probe={**SMALL_PROBE}, tune={**SMALL_TUNE, "trials": q("client"),
                                                  "mode": q("advise"), "apply": q("none")})
    before = srv.conf.read_bytes()

    # The probe's own word: this machine from the server namespace, a peer
    # from the client namespace, for the same url.
    j = probe_json(smbtuned, env, "server", wan)
    assert j["outcome"] == "ok" and j["loopback"] is True, j
    j = probe_json(smbtuned, env, "client", wan)
    assert j["outcome"] == "ok" and j["loopback"] is False, j

    # A cycle on this machine: its client trials are weighed as loopback
    # trials, and said to be.
    rc, obj, err = env.run_json()
    print(f"\n{err}\n{obj}")
    assert rc == 0, err
    assert re.search(HERE_RE.format(url=re.escape(srv.url)), err), err
    # From the legacy 8192 line every trial above it wins on loopback
    # (FACTS.md's cliff), so the search ends away from it: the rule then
    # says why autotuning is advised, or why an explicit size stays.
    assert obj["samples"] > 0, obj
    assert RULE_RE.search(obj["result"]), obj
    assert srv.conf.read_bytes() == before

    # --status calls the rates what they are (the state file keeps it:
    # --status resolves nothing)
    rc, out, err = env.run("--status", timeout=60)
    assert rc == 0, err
    rates = [ln for ln in out.splitlines() if ln.startswith("Rates ")]
    assert len(rates) == 1, out
    assert rates[0].endswith(f"(the probe's, to {srv.url}, on this machine's loopback: not what "
                             "a client over the network gets)"), out


def test_live_trials_to_another_machine_are_refused(wan, make_env, smbtuned):
    """Live trials write this machine's smb.conf; a probe whose connection
    leaves this machine measures another smbd, which no trial moves. From
    the client namespace the fixture's smbd is a peer's: the cycle refuses
    before writing a trial, says why, and smb.conf keeps its bytes. (The
    start only warns: it resolves no name.)"""
    env = make_env(LEGACY, prefix_cmd=wan.prefix("server"), bind_addr=wan.server_addr,
                   extra_global=SMBD_GLOBAL)
    env.prefix = list(wan.prefix("client"))
    srv = env.srv
    env.write_config(probe={**SMALL_PROBE}, tune={**SMALL_TUNE, "trials": q("live")})
    before = srv.conf.read_bytes()

    rc, obj, err = env.run_json()
    print(f"\n{err}\n{obj}")
    assert rc != 0, (obj, err)
    assert (f"live trials refused: the probe's connection to {srv.url} left this machine"
            in obj.get("error", "")), obj
    assert "live trials refused" in err, err
    # the one sample taken is the line in force; no trial was tried
    assert not re.search(r"tried SO_RCVBUF=(?!8192 )", err), err
    assert srv.conf.read_bytes() == before
