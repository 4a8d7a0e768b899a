"""When the daemon does not tune, and what it says when the ground moved:
cycles deferred while clients are busy or outside the time window (and
smb.conf untouched meanwhile), and a changed Samba version reported against
the old baseline."""

import datetime
import re
import signal
import subprocess
import threading
import time

import pytest

from daemon_util import RESULT_RE, q

ON_LATTICE = "TCP_NODELAY SO_RCVBUF=131072 SO_SNDBUF=131072"

# busy clients against busy_rate: alone (scripts/test)
pytestmark = pytest.mark.serial


def busy_clients(srv, stop, i=0, port=None):
    """Keep smbd busy the way a real client does: one long session that
    fetches a 64 MiB file (big.I.bin) over and over, until stop is set."""
    name = f"big.{i}.bin"
    with open(srv.share_dir / name, "wb") as f:
        f.write(b"\xa5" * (64 << 20))
    # Sessions of 100 gets (6.4 GiB: seconds on loopback, 65 s at 100
    # MB/s, inside smbclient's 120 s): few gaps between sessions, in
    # which a client moves nothing.
    while not stop.is_set():
        srv.smbclient("-c", "; ".join([f"get {name} /dev/null"] * 100), timeout=120, port=port)


@pytest.mark.parametrize("on", ["first", "second"])
def test_busy_clients_defer_the_cycle(make_env, on):
    """Clients on any of `smb ports` count, not only on the first."""
    env = make_env(ON_LATTICE, second_port=True)
    port = env.srv.port if on == "first" else env.srv.port2
    env.write_config(tune={"busy_rate": "1M", "interval": "1h", "mode": q("tune")})
    before = env.srv.conf.read_bytes()
    stop = threading.Event()
    # Three clients: the daemon looks for 1 s, and one client alone may
    # move nothing for that long between its sessions (a new smbclient
    # starting on a loaded machine; CI saw the cycle go ahead twice, once
    # with two clients of 40 gets a session).
    ts = [threading.Thread(target=busy_clients, args=(env.srv, stop, i, port)) for i in range(3)]
    for t in ts:
        t.start()
    try:
        time.sleep(1.0)  # traffic under way before the daemon looks
        d = env.start()
        d.wait_for(lambda: "tuning deferred" in d.stderr, timeout=60,
                   what="the busy deferral")
    finally:
        stop.set()
        for t in ts:
            t.join(timeout=120)
    line = [ln for ln in d.stderr.splitlines() if "tuning deferred" in ln][0]
    assert "clients move" in line and "more than 1.0" in line, line
    assert RESULT_RE.search(d.stderr) is None, "a cycle ran although clients were busy"
    # no probe ran in the deferred cycle: its end counts no sample, and no
    # trial or verification was told before it (the next cycle, an
    # interval later, may probe: the clients have stopped by then)
    d.wait_for(lambda: "after 0 samples: deferred" in d.stderr, timeout=30,
               what="the deferred cycle's end")
    head = d.stderr[:d.stderr.index("after 0 samples: deferred")]
    assert not re.search(r"^<\d>(tried|verified) ", head, re.M), head
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert env.srv.conf.read_bytes() == before
    assert env.leftovers() == []


def test_outside_the_window_defers_to_its_start(make_env):
    """A cycle outside the window is deferred, and the next try is at the
    window's start, not an interval later: 6h from 11:30 never meets
    01:00-05:00 (11:30, 17:30, 23:30, 05:30, ...)."""
    env = make_env(ON_LATTICE)
    now = datetime.datetime.now()
    # A one-hour window that opens one to two hours from now: never now.
    opens = (now + datetime.timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    start = opens.strftime("%H:%M")
    end = (opens + datetime.timedelta(hours=1)).strftime("%H:%M")
    # the default interval, which passes the window
    env.write_config(tune={"window": q(f"{start}-{end}"), "interval": "6h"})
    before = env.srv.conf.read_bytes()
    d = env.start()
    d.wait_for(lambda: "outside the time window" in d.stderr, timeout=60,
               what="the window deferral")
    assert f"{start}-{end}" in d.stderr
    d.wait_for(lambda: env.state().get("next_at", "0") != "0", timeout=60,
               what="the deferred cycle's end")
    assert RESULT_RE.search(d.stderr) is None
    # the state (what --status shows) says the window's start
    st = env.state()
    assert int(st["next_at"]) == int(opens.timestamp()), (st, opens)
    line = [ln for ln in d.stderr.splitlines() if "outside the time window" in ln][0]
    assert line.endswith(f"cycle deferred to its start at {start}"), line
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    assert env.srv.conf.read_bytes() == before
    assert env.leftovers() == []


def test_restart_keeps_the_schedule(make_env):
    """A fresh state directory starts a cycle at once; a restart (boot, a
    package upgrade, Restart=) with the next cycle due later in the state
    file waits for it instead of searching again at once."""
    env = make_env(ON_LATTICE)
    env.write_config(tune={"interval": "1h", "mode": q("advise")})
    d = env.start()
    d.wait_for(lambda: env.state().get("next_at", "0") != "0", what="the first cycle's end")
    assert re.search(r"^<\d>(tried|verified) ", d.stderr, re.M), d.stderr
    assert "as scheduled" not in d.stderr
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    st = env.state()

    d = env.start()
    d.wait_for(lambda: "as scheduled" in d.stderr, timeout=30, what="the schedule kept")
    # Nothing to wait for but silence: the next cycle is an hour away.
    time.sleep(5)
    assert not re.search(r"^<\d>(tuning cycle|tried|verified|real clients)", d.stderr, re.M), \
        d.stderr
    hhmm = datetime.datetime.fromtimestamp(int(st["next_at"])).strftime("%H:%M")
    line = [ln for ln in d.stderr.splitlines() if "as scheduled" in ln][0]
    assert f"; next cycle at {hhmm} as scheduled" in line, line
    d.signal(signal.SIGTERM)
    assert d.wait(timeout=60) == 0, d.stderr
    after = env.state()
    assert (after["next_at"], after["cycles"]) == (st["next_at"], st["cycles"]), (st, after)
    assert env.leftovers() == []


def test_samba_upgrade_is_reported_against_the_old_baseline(make_env):
    env = make_env(ON_LATTICE)
    # advise mode: a cycle that writes its state but not smb.conf (a dry
    # run writes neither)
    env.write_config(tune={"max_bytes": "48M", "mode": q("advise")})
    rc, _, err = env.run("--once")
    assert rc == 0, err
    st = env.state()
    samba = subprocess.run(["smbd", "-V"], capture_output=True, text=True).stdout.split()[-1]
    assert st["samba"] == samba, st
    # Pretend the last measurements were made on another Samba, at other rates.
    text = (env.state_dir / "state").read_text().splitlines()
    text = [("samba 4.0.0" if ln.startswith("samba ") else
             "write_mbps 100.0" if ln.startswith("write_mbps ") else
             "read_mbps 100.0" if ln.startswith("read_mbps ") else
             "have_incumbent yes" if ln.startswith("have_incumbent ") else ln)
            for ln in text]
    (env.state_dir / "state").write_text("\n".join(text) + "\n")

    rc, _, err = env.run("--once")
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if "Samba 4.0.0 -> " + samba in ln]
    assert any("searching again" in ln for ln in lines), err
    report = [ln for ln in lines if "at the same settings" in ln]
    assert report, err
    assert "write " in report[0] and "%" in report[0] and "read " in report[0], report[0]
    assert env.state()["samba"] == samba


def test_smbd_option_override_is_warned(make_env, smbd_factory, tmp_path):
    """smbd started with --option='socket options=...' ignores smb.conf's
    line: smbtuned must say so rather than tune in vain."""
    env = make_env(ON_LATTICE)
    srv = smbd_factory(socket_options=ON_LATTICE,
                       extra_args=["--option=socket options=TCP_NODELAY SO_RCVBUF=65536"])
    env.srv = srv
    env.write_config(tune={"max_bytes": "32M"})
    rc, _, err = env.run("--once", "--dry-run")
    assert rc == 0, err
    warn = [ln for ln in err.splitlines() if "--option" in ln]
    assert warn and f"pid {srv.pid}" in warn[0] and "overrides smb.conf" in warn[0], err

    # The same smbd without the option: no warning.
    env.srv = env_srv = smbd_factory(socket_options=ON_LATTICE)
    env.write_config(tune={"max_bytes": "32M"})
    rc, _, err = env.run("--once", "--dry-run")
    assert rc == 0, err
    assert "--option" not in err, err
    assert env_srv.alive()


def test_sigterm_mid_probe_leaves_no_probe_file(make_env):
    """A probe killed in the middle of its transfer leaves its file in the
    share; stopping must remove it, not leave it to the next cycle."""
    env = make_env(ON_LATTICE)
    # Large enough that a transfer is under way when the signal comes.
    env.write_config(probe={"size": "512M", "request_size": "1M", "deadline": "60"},
                     tune={"mode": q("advise")})
    d = env.start("--once")
    d.wait_samples(1)
    d.wait_for(lambda: any(env.srv.share_dir.glob(".smbtuned-probe-*")),
               what="a probe file being written", poll=0.005)
    d.signal(signal.SIGTERM)
    d.wait(timeout=120)
    assert env.leftovers() == []
