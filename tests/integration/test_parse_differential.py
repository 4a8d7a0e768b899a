"""smbtuned's reading of smb.conf against Samba's own (testparm), on random
files built from the constructs that trip parsers up.

Each case is a file assembled from random pieces (section spellings,
parameter-name spellings, comments, continuations, CRLF, blank runs); the
value `smbtuned --show --json` reports must be the one testparm reports, and
a --set-buffers must leave testparm reporting exactly the sizes asked for,
with every other line of the file unchanged. SMBTUNED_DIFF_SEED and
SMBTUNED_DIFF_CASES change the seed and the number of cases.
"""

import json
import os
import random
import subprocess

import pytest

SEED = int(os.environ.get("SMBTUNED_DIFF_SEED", "20261130"))
CASES = int(os.environ.get("SMBTUNED_DIFF_CASES", "150"))

SECTIONS = ["[global]", "[GLOBAL]", "[ Global ]", "[globals]", "[glo bal]", "[share]",
            "[homes]", "[global] trailing words", "[printers]"]
NAMES = ["socket options", "SocketOptions", "socket  options", "SOCKET OPTIONS",
         "socket_options", "\tsocket options", "   Socket Options"]
TOKENS = ["TCP_NODELAY", "SO_RCVBUF=8192", "SO_SNDBUF=65536", "IPTOS_LOWDELAY",
          "SO_KEEPALIVE", "SO_RCVBUF=131072", "TCP_KEEPIDLE=30"]
OTHER = ["workgroup = WG", "server string = %h", "foo", "log level = 1",
         "# socket options = SO_RCVBUF=1", "; socket options = SO_SNDBUF=1",
         "# a comment ending in a backslash \\", "; another one \\", "", "   ",
         "path = /srv/x"]


def value(rng):
    toks = rng.sample(TOKENS, rng.randint(1, 4))
    sep = rng.choice([" ", "  ", "\t", ", "])
    return sep.join(toks)


def param_line(rng):
    name = rng.choice(NAMES)
    eq = rng.choice(["=", " = ", "\t=\t", "= ", " ="])
    v = value(rng)
    kind = rng.random()
    if kind < 0.15:
        # continuation: the value goes on the next physical line
        toks = v.split()
        if len(toks) > 1:
            k = rng.randint(1, len(toks) - 1)
            return f"{name}{eq}{' '.join(toks[:k])} \\\n   {' '.join(toks[k:])}"
    if kind < 0.25:
        return f"{name}{eq}{v}   "
    return f"{name}{eq}{v}"


def random_conf(rng):
    lines = []
    for _ in range(rng.randint(1, 14)):
        r = rng.random()
        if r < 0.25:
            lines.append(rng.choice(SECTIONS))
        elif r < 0.6:
            lines.append(param_line(rng))
        else:
            lines.append(rng.choice(OTHER))
    eol = "\r\n" if rng.random() < 0.2 else "\n"
    text = eol.join(lines)
    if rng.random() < 0.8:
        text += eol
    return text.replace("\n", eol) if eol == "\r\n" else text


def samba_value(path):
    p = subprocess.run(["testparm", "-s", "--parameter-name=socket options", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split("\n")[0]


def norm(v):
    return " ".join(v.split())


def tokens(v):
    return v.replace(",", " ").split()


@pytest.mark.parametrize("case", range(CASES))
def test_same_reading_as_samba(case, tmp_path, smbtuned):
    rng = random.Random(SEED * 1000 + case)
    conf = tmp_path / "smb.conf"
    original = random_conf(rng).encode()
    conf.write_bytes(original)

    shown = subprocess.run([smbtuned, "--smb-conf", conf, "--show", "--json"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    ours = json.loads(shown.stdout)
    assert norm(ours["value"]) == norm(samba_value(conf)), original

    rcv = rng.choice(["auto", "65536", "1M"])
    snd = rng.choice(["auto", "16384", "256K"])
    set_ = subprocess.run([smbtuned, "--smb-conf", conf, "--state-dir", tmp_path / "state",
                           "--set-buffers", f"{rcv},{snd}"],
                          capture_output=True, text=True, timeout=60)
    if "does not look like an smb.conf" in set_.stderr:
        # The guard against a wrong --smb-conf (a [global] header is not
        # put on top of a file with no section and a line that is neither a
        # parameter nor a comment): only such a file, left as it was.
        text = original.decode()
        assert set_.returncode == 1, set_.stderr
        assert not any(ln.strip().startswith("[") for ln in text.splitlines()), original
        assert any(ln.strip() and ln.strip()[0] not in "#;" and "=" not in ln
                   for ln in text.splitlines()), original
        assert conf.read_bytes() == original
        return
    assert set_.returncode == 0, (set_.stderr, original)
    after = tokens(samba_value(conf))
    sizes = {"auto": None, "65536": "65536", "1M": "1048576", "16384": "16384",
             "256K": "262144"}
    for name, want in (("SO_RCVBUF", sizes[rcv]), ("SO_SNDBUF", sizes[snd])):
        got = [t.split("=", 1)[1] for t in after if t.upper().startswith(name + "=")]
        assert got == ([want] if want else []), (name, after, original)
    # every token that was not a buffer size is still there, in order
    before = [t for t in tokens(ours["value"])
              if not t.upper().startswith(("SO_RCVBUF", "SO_SNDBUF"))]
    kept = [t for t in after if not t.upper().startswith(("SO_RCVBUF", "SO_SNDBUF"))]
    assert kept == before or (before == [] and kept == ["TCP_NODELAY"])

    # only one line differs (or one was added); the rest is byte-identical
    old_lines = original.split(b"\n")
    new_lines = conf.read_bytes().split(b"\n")
    if ours["line"] is not None:
        i = ours["line"] - 1
        span = len(old_lines) - len(new_lines) + 1  # continuation lines joined
        assert new_lines[:i] == old_lines[:i]
        assert new_lines[i + 1:] == old_lines[i + span:]
    elif rcv == snd == "auto":
        # Samba's default already holds: nothing to write
        assert conf.read_bytes() == original
    else:
        # one line added, plus a [global] header when there was none
        assert len(new_lines) - len(old_lines) in (1, 2)
        assert [ln for ln in new_lines if ln not in old_lines][-1].strip().startswith(
            b"socket options = TCP_NODELAY")
