"""Black-box tests of smbtuned's smb.conf editor (--set-buffers, --show).

The corpus lives in tests/fixtures/smbconf/<name>/ (main file smb.conf, any
included files, expect.json) and tests/fixtures/smbconf-refuse/<name>/.
expect.json names, by hand, the occurrence Samba really uses (file, first
and last physical line, value as testparm prints it) and the new value for
--set-buffers 262144,262144. Other --set-buffers variants are checked
against a small reference model written here (`accepts`), which is itself
checked against the hand-written values. Every fixture is first checked
against Samba's own parser (testparm), so the manifests cannot drift from
what Samba does.

Each rewrite is checked byte for byte: every file of the fixture other than
the target is unchanged, and in the target every line except the
occurrence (or, when there was none, except one added line) is unchanged.
"""

import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, copy_fixture, run_editor, samba_value

CORPUS = FIXTURES / "smbconf"
REFUSE = FIXTURES / "smbconf-refuse"
NAMES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
REFUSE_NAMES = sorted(p.name for p in REFUSE.iterdir() if p.is_dir())
VARIANTS = ["262144,262144", "1M,256K", "auto,auto", "auto,64K", "512K,auto"]
BUFS = ("SO_RCVBUF", "SO_SNDBUF")


def manifest(name, base=CORPUS):
    return json.loads((base / name / "expect.json").read_text())


# ---------------------------------------------------------------- the model

def size(text):
    """--set-buffers size -> bytes, or None for auto."""
    if text == "auto":
        return None
    mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1].upper(), 1)
    return int(text.rstrip("KkMm")) * mult


def tokens(value):
    """Samba's split of a socket options value: blanks, tabs or commas."""
    return [t for t in re.split(r"[ \t,]+", value) if t]


def group(toks):
    """Token list -> items: (BUFNAME, text) for a buffer option, including
    broken fragments (`SO_RCVBUF = 1`, `SO_RCVBUF= 1`, `SO_RCVBUF =1`),
    (None, text) for every other token."""
    items, i = [], 0
    while i < len(toks):
        t = toks[i]
        name = t.split("=", 1)[0].upper()
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if name in BUFS and t.upper() == name and nxt == "=" and i + 2 < len(toks):
            items.append((name, " ".join(toks[i:i + 3])))
            i += 3
        elif name in BUFS and t.upper() == name and nxt and nxt.startswith("=") and nxt != "=":
            items.append((name, t + " " + nxt))
            i += 2
        elif name in BUFS and t.endswith("=") and "=" not in t[:-1] and nxt is not None:
            items.append((name, t + " " + nxt))
            i += 2
        elif name in BUFS and "=" in t:
            items.append((name, t))
            i += 1
        else:
            items.append((None, t))
            i += 1
    return items


def is_buf(tok, name, value):
    m = re.fullmatch(r"(SO_RCVBUF|SO_SNDBUF)=(\d+)", tok, re.IGNORECASE)
    return bool(m) and m.group(1).upper() == name and int(m.group(2)) == value


def accepts(old_value, setting, new_value):
    """Whether new_value is a correct result of --set-buffers `setting` on a
    line whose value was old_value (None: there was no line). Returns None
    when correct, else a reason.

    The rules: the value is a token list; other tokens keep their text and
    order; an existing SO_RCVBUF/SO_SNDBUF is replaced in its place (with
    duplicates, one is left, at the first or the last place) or removed for
    `auto`; a missing one is added (anywhere); sizes are written NAME=VALUE
    in decimal; tokens are written separated by one blank; a created line
    starts with TCP_NODELAY; a result emptied by removing sizes is
    TCP_NODELAY, while an empty value that loses nothing stays empty (the
    admin switched TCP_NODELAY off) and gains only the sizes."""
    want = dict(zip(BUFS, (size(s) for s in setting.split(","))))
    if new_value != " ".join(tokens(new_value)):
        return f"value {new_value!r} is not its tokens joined by single blanks"
    got = tokens(new_value)
    created = old_value is None
    items = group(tokens("TCP_NODELAY" if created else old_value))
    if created and got and got[0] != "TCP_NODELAY":
        return f"a created line must start with TCP_NODELAY: {new_value!r}"
    # Remove buffer options that did not exist before (they may go anywhere).
    added = 0
    for name in BUFS:
        if want[name] is not None and not any(n == name for n, _ in items):
            hits = [i for i, t in enumerate(got) if is_buf(t, name, want[name])]
            if len(hits) != 1:
                return f"expected exactly one {name}={want[name]} in {new_value!r}"
            del got[hits[0]]
            added += 1
    # The rest: existing items with buffer options replaced in place.
    alternatives = [[]]
    for name in BUFS:
        pos = [i for i, (n, _) in enumerate(items) if n == name]
        if want[name] is None or not pos:
            continue
        alternatives = [a + [(name, keep)] for a in alternatives for keep in {pos[0], pos[-1]}]
    candidates = []
    for alt in alternatives:
        keep = dict((i, name) for name, i in alt)
        seq = []
        for i, (n, text) in enumerate(items):
            if n is None:
                seq.append(text)
            elif keep.get(i) == n:
                seq.append(f"{n}={want[n]}")
        candidates.append(seq)
    # A value emptied by removing its sizes becomes TCP_NODELAY; one that
    # was empty to begin with had none to remove and stays empty.
    removed = any(n is not None for n, _ in items)
    if removed and not added:
        candidates = [c or ["TCP_NODELAY"] for c in candidates]

    def same(a, b):
        return len(a) == len(b) and all(
            x == y or (x.upper() == y.upper() and x.split("=")[0].upper() in BUFS)
            for x, y in zip(a, b))

    if any(same(got, c) for c in candidates):
        return None
    return f"got {new_value!r}, expected one of {[' '.join(c) for c in candidates]}"


def show_buffers(value):
    """rcvbuf, sndbuf that --show reports: Samba applies tokens in order,
    so the last clean NAME=digits wins; None when absent."""
    out = {}
    for t in tokens(value):
        m = re.fullmatch(r"(SO_RCVBUF|SO_SNDBUF)=(\d+)", t, re.IGNORECASE)
        if m:
            out[m.group(1).upper()] = int(m.group(2))
    return out.get("SO_RCVBUF"), out.get("SO_SNDBUF")


# ------------------------------------------------------- byte-level checks

def lines(data):
    """Physical lines with their endings (the last may have none)."""
    return re.findall(rb"[^\n]*\n|[^\n]+$", data)


PARAM = re.compile(rb"^([ \t]*)([A-Za-z][A-Za-z \t]*?)[ \t]*=[ \t]*(.*?)[ \t]*(\r?\n)?$", re.S)
SECTION = re.compile(rb"^[ \t]*\[[ \t]*([^\]]*?)[ \t]*\]")
GLOBAL_NAMES = (b"global", b"globals")


def param_line(line):
    """(value bytes, ending) when line is a socket options line, else None."""
    m = PARAM.match(line)
    if not m or re.sub(rb"[ \t]", b"", m.group(2)).lower() != b"socketoptions":
        return None
    return m.group(3), m.group(4) or b""


def check_replaced(old, new, first, last):
    """new is old with physical lines first..last (1-based) replaced by one
    socket options line; returns its value (str)."""
    ol, nl = lines(old), lines(new)
    keep_after = len(ol) - last
    assert len(nl) == len(ol) - (last - first), (
        f"expected the {last - first + 1} line(s) of the occurrence to become one line; "
        f"old has {len(ol)} lines, new {len(nl)}")
    assert nl[:first - 1] == ol[:first - 1], "a line before the occurrence changed"
    assert nl[len(nl) - keep_after:] == ol[len(ol) - keep_after:] if keep_after else True, \
        "a line after the occurrence changed"
    line = nl[first - 1]
    parsed = param_line(line)
    assert parsed, f"rewritten line is not a `socket options = ...` line: {line!r}"
    value, ending = parsed
    old_ending = re.search(rb"(\r?\n)?$", ol[last - 1]).group(0)
    assert ending == old_ending, f"line ending {ending!r}, was {old_ending!r}"
    return value.decode()


def check_inserted(old, new):
    """new is old plus one socket options line in the first global section
    (plus a `[global]` line at the top when there was none); returns the
    value."""
    ol, nl = lines(old), lines(new)
    headers = [i for i, l in enumerate(ol) if SECTION.match(l)]
    glob = [i for i in headers if SECTION.match(ol[i]).group(1).lower() in GLOBAL_NAMES]
    for k, line in enumerate(nl):
        parsed = param_line(line)
        if not parsed:
            continue
        rest = nl[:k] + nl[k + 1:]
        header = k > 0 and SECTION.match(nl[k - 1]) and not glob
        if header:
            assert k == 1, "a created [global] must be at the top"
            assert SECTION.match(nl[0]).group(1).lower() == b"global"
            rest = rest[1:]
        # A last line without newline may gain one when the line goes after it.
        if ol and not ol[-1].endswith(b"\n") and len(rest) == len(ol) and rest[:-1] == ol[:-1] \
                and rest[-1].rstrip(b"\r\n") == ol[-1] and k == len(nl) - 1:
            rest[-1] = ol[-1]
        if rest != ol:
            continue
        pos = k - (1 if header else 0)  # index in ol before which the line went
        if glob:
            g = glob[0]
            nxt = [h for h in headers if h > g]
            assert g < pos <= (nxt[0] if nxt else len(ol)), (
                f"added line at {pos + 1} is not in the first global section (line {g + 1})")
        else:
            assert pos <= (headers[0] if headers else len(ol)), \
                "added line is not before the first section"
        return parsed[0].decode()
    raise AssertionError("new file is not the old one plus one socket options line:\n"
                         + new.decode(errors="replace"))


def snapshot(d):
    """{relative path: (bytes, mtime_ns, is_link)} of every file under d."""
    out = {}
    for p in sorted(Path(d).rglob("*")):
        if p.is_file() or p.is_symlink():
            st = p.lstat()
            data = p.read_bytes() if p.exists() else None
            out[str(p.relative_to(d))] = (data, st.st_mtime_ns, p.is_symlink())
    return out


def assert_unchanged(before, d, what):
    after = snapshot(d)
    assert after.keys() == before.keys(), \
        f"{what}: files changed: {sorted(after.keys() ^ before.keys())}"
    for k in before:
        assert after[k][0] == before[k][0], f"{what}: {k} changed bytes"
        assert after[k] == before[k], f"{what}: {k} touched (mtime or link)"


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("name", NAMES)
def test_manifest_matches_samba(name, tmp_path):
    """The hand-written effective occurrence is what testparm sees (no
    editor needed: this keeps the corpus honest)."""
    m = manifest(name)
    d = copy_fixture(CORPUS / name, tmp_path / "c")
    eff = m["effective"]
    assert samba_value(d / "smb.conf") == (eff["value"] if eff else "TCP_NODELAY")
    if eff:
        text = lines((d / eff["file"]).read_bytes())
        assert param_line(text[eff["line"] - 1]) or text[eff["line"] - 1].rstrip().endswith(b"\\")
        assert b"socket" in text[eff["line"] - 1].lower()
    for v, expected in m["expect"].items():
        assert accepts(eff["value"] if eff else None, v, expected) is None, "model disagrees"


def test_corpus_is_large_enough():
    assert len(NAMES) + len(REFUSE_NAMES) >= 30
    debian = (CORPUS / "debian-default" / "smb.conf").read_bytes()
    if Path("/usr/share/samba/smb.conf").exists():
        assert debian == Path("/usr/share/samba/smb.conf").read_bytes()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", NAMES)
def test_set_buffers_rewrites_only_the_occurrence(smbtuned, tmp_path, name, variant):
    m = manifest(name)
    d = copy_fixture(CORPUS / name, tmp_path / "c")
    state = tmp_path / "state"
    state.mkdir()
    eff = m["effective"]
    target = d / (eff["file"] if eff else "smb.conf")
    before = snapshot(d)
    old = target.read_bytes()
    link = os.readlink(d / "smb.conf") if (d / "smb.conf").is_symlink() else None

    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--set-buffers", variant,
                   "--state-dir", state)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"

    new = target.read_bytes()
    old_value = eff["value"] if eff else None
    if new == old:
        # Nothing to change is fine only when the result is the old value.
        value = old_value if eff else "TCP_NODELAY"
        why = accepts(old_value, variant, " ".join(tokens(value)))
        assert why is None, f"file not changed: {why}"
    elif eff:
        value = check_replaced(old, new, eff["line"], eff["end_line"])
    else:
        value = check_inserted(old, new)
    if new != old:
        why = accepts(old_value, variant, value)
        assert why is None, why
    if variant in m["expect"]:
        assert value == m["expect"][variant] or accepts(old_value, variant, value) is None
    assert samba_value(d / "smb.conf") == value

    # Every other file is byte-identical; nothing else appeared in the dir.
    after = snapshot(d)
    assert after.keys() == before.keys(), sorted(after.keys() ^ before.keys())
    for k, (data, _, is_link) in before.items():
        if (d / k).resolve() != target.resolve():
            assert after[k][0] == data, f"{k} changed"
        assert after[k][2] == is_link
    if link is not None:
        assert os.readlink(d / "smb.conf") == link, "the symlink was replaced"
    # The previous bytes are backed up in the state dir.
    if new != old:
        backups = [p for p in state.rglob("*") if p.is_file() and p.read_bytes() == old]
        assert backups, f"no backup of the previous bytes in {sorted(state.rglob('*'))}"


@pytest.mark.parametrize("name", NAMES)
def test_show_json(smbtuned, tmp_path, name):
    m = manifest(name)
    d = copy_fixture(CORPUS / name, tmp_path / "c")
    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--show", "--json",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert set(got) >= {"file", "line", "value", "rcvbuf", "sndbuf"}, got
    eff = m["effective"]
    if eff is None:
        want = {"file": None, "line": None, "value": "TCP_NODELAY", "rcvbuf": None, "sndbuf": None}
        assert {k: got[k] for k in want} == want
    else:
        assert got["file"] and os.path.samefile(got["file"], d / eff["file"]), got["file"]
        assert got["line"] == eff["line"]
        # Runs of blanks inside a value are not significant to Samba.
        assert got["value"].split() == eff["value"].split(), got["value"]
        if m.get("show_buffers", True):
            assert (got["rcvbuf"], got["sndbuf"]) == show_buffers(eff["value"])
    assert_unchanged(before, d, "--show")


def test_show_text(smbtuned, tmp_path):
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--show",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192" in r.stdout
    assert "smb.conf" in r.stdout and re.search(r"\b7\b", r.stdout), r.stdout
    assert "8192" in r.stdout


@pytest.mark.parametrize("name", REFUSE_NAMES)
def test_refusals_leave_files_alone(smbtuned, tmp_path, name):
    m = manifest(name, REFUSE)["refuse"]
    d = copy_fixture(REFUSE / name, tmp_path / "c")
    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--set-buffers", "262144,262144",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 1, f"exit {r.returncode}, stderr {r.stderr!r}"
    assert_unchanged(before, d, name)
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1, f"want one line on stderr: {r.stderr!r}"
    assert m["file"] in msg, f"message does not name {m['file']}: {msg}"
    assert re.search(rf"\b{m['line']}\b", msg), f"message does not name line {m['line']}: {msg}"
    for w in m["words"]:
        assert w in msg, f"message does not say {w!r}: {msg}"


BAD_SETTINGS = [
    ("", "set-buffers"),
    ("262144", "262144"),          # missing comma
    ("12x,256K", "12x"),
    ("-1,256K", "-1"),
    ("0,256K", "0"),
    ("256K,0", "0"),
    ("abc,1M", "abc"),
    ("256K,256K,256K", "256K,256K,256K"),
    ("1.5M,1M", "1.5M"),
    ("256K;256K", "256K;256K"),
    ("256K,", "set-buffers"),
    (",256K", "set-buffers"),
    ("256KB,1M", "256KB"),
    ("auto,autox", "autox"),
    ("99999999999999999999,1M", "99999999999999999999"),
    ("0x100000,1M", "0x100000"),
    # a unit left out: the kernel's minimum buffer, a crawling server
    ("1,1", "SO_RCVBUF=1 is below 4096 bytes"),
    ("auto,1024", "SO_SNDBUF=1024 is below 4096 bytes"),
    ("4095,1M", "SO_RCVBUF=4095 is below 4096"),
]


@pytest.mark.parametrize("setting,word", BAD_SETTINGS)
def test_bad_set_buffers_changes_nothing(smbtuned, tmp_path, setting, word):
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--set-buffers", setting,
                   "--state-dir", tmp_path / "state")
    # a value the option cannot take: a bad command line (smbtuned(8))
    assert r.returncode == 64, f"{setting!r}: exit {r.returncode}"
    assert_unchanged(before, d, setting)
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1, f"want one line on stderr: {r.stderr!r}"
    assert word in msg or (setting and setting in msg), f"{setting!r}: message {msg!r}"


@pytest.mark.parametrize("setting", ["2G,2G", "0,1M", "1M,4294967296"])
def test_out_of_range_size_names_the_range_taken(smbtuned, tmp_path, setting):
    """Too large or zero: the message names the range --set-buffers takes,
    4096 up (below it is refused as a likely typo), not the parser's."""
    conf = tmp_path / "smb.conf"
    conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", setting,
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 64, r.stderr
    assert "out of range: expected 4096 to 2147483647 bytes" in r.stderr, r.stderr


@pytest.mark.parametrize("old,note", [("SO_RCVBUF=8192 SO_SNDBUF=8192", True),
                                      ("TCP_NODELAY SO_RCVBUF=8192", False),
                                      ("SO_KEEPALIVE SO_RCVBUF=8192", False)])
def test_sizes_alone_removed_says_what_takes_their_place(smbtuned, tmp_path, old, note):
    """A line of sizes alone, with both removed, would be empty (no option
    at all): Samba's default is written instead, and said."""
    conf = tmp_path / "smb.conf"
    conf.write_text(f"[global]\n   socket options = {old}\n")
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "auto,auto",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    said = "Samba's default, TCP_NODELAY, is written in their place" in r.stdout
    assert said == note, r.stdout
    assert samba_value(conf) == ("TCP_NODELAY" if note else old.split()[0])


@pytest.mark.parametrize("setting,want", [("auto,auto", None),
                                          ("64K,auto", "SO_RCVBUF=65536"),
                                          ("auto,64K", "SO_SNDBUF=65536")])
def test_empty_line_gains_no_tcp_nodelay(smbtuned, tmp_path, setting, want):
    """`socket options =` is an admin's choice (TCP_NODELAY off): a request
    that changes no size leaves every byte, and one that adds a size adds
    that token alone."""
    conf = tmp_path / "smb.conf"
    conf.write_text("[global]\n   socket options =\n")
    before = conf.read_bytes()
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", setting,
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert "TCP_NODELAY" not in r.stdout, r.stdout
    if want is None:
        assert conf.read_bytes() == before
        assert "(unchanged)" in r.stdout and "note:" not in r.stdout, r.stdout
    else:
        assert samba_value(conf) == want


def test_size_above_the_kernels_cap_is_said(smbtuned, tmp_path):
    """--set-buffers writes a size above net.core.rmem_max as asked, but
    the kernel caps it without a word to smbd: the command says so (as
    --show does), and says nothing of a size below the cap."""
    rmax = int(Path("/proc/sys/net/core/rmem_max").read_text())
    wmax = int(Path("/proc/sys/net/core/wmem_max").read_text())
    if rmax >= 1 << 30 or wmax < 8192:
        pytest.skip(f"rmem_max {rmax}, wmem_max {wmax}: no size above the cap to try")
    conf = tmp_path / "smb.conf"
    conf.write_text("[global]\n   socket options = TCP_NODELAY\n")
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1G,4K",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert samba_value(conf) == "TCP_NODELAY SO_RCVBUF=1073741824 SO_SNDBUF=4096"
    assert (f"note: SO_RCVBUF=1073741824 is above net.core.rmem_max = {rmax}: the kernel caps "
            f"it there and gives {2 * rmax} bytes") in r.stdout, r.stdout
    assert "SO_SNDBUF=4096 is above" not in r.stdout, r.stdout

def test_unchanged_line_is_applied_when_asked(smbtuned, tmp_path):
    """Running the same --set-buffers --apply again is how an admin retries
    an apply that failed: an unchanged line is applied too, and a failure
    says "unchanged", not "written". smbd's pid directory is the test's
    own, empty, so the signal fails (and reaches no real smbd)."""
    conf = tmp_path / "smb.conf"
    conf.write_text(f"[global]\n   pid directory = {tmp_path / 'run'}\n"
                    "   socket options = TCP_NODELAY SO_RCVBUF=1048576\n")
    before = conf.read_bytes()
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,auto",
                   "--apply", "signal", "--state-dir", tmp_path / "state")
    assert r.returncode == 1, r.stderr
    assert "(unchanged)" in r.stdout, r.stdout
    assert r.stderr.startswith("smbtuned: unchanged, but smbd was not told: "), r.stderr
    assert conf.read_bytes() == before
    # without --apply nothing is told, and nothing fails
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,auto",
                   "--state-dir", tmp_path / "state")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert conf.read_bytes() == before


def test_missing_file(smbtuned, tmp_path):
    path = tmp_path / "nope" / "smb.conf"
    (tmp_path / "nope").mkdir()
    r = run_editor(smbtuned, "--smb-conf", path, "--set-buffers", "256K,256K",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 1
    assert str(path) in r.stderr, r.stderr
    # which configuration: smbtuned has one of its own
    assert "cannot read the Samba configuration (smb.conf)" in r.stderr, r.stderr
    assert list((tmp_path / "nope").iterdir()) == [], "the editor created something"


def test_directory_as_file(smbtuned, tmp_path):
    path = tmp_path / "dir.conf"
    path.mkdir()
    r = run_editor(smbtuned, "--smb-conf", path, "--set-buffers", "256K,256K",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 1
    assert str(path) in r.stderr, r.stderr
    assert list(path.iterdir()) == []



@pytest.mark.parametrize("text", [
    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n",   # /etc/hosts
    "tune {\n    smb_conf = \"/etc/samba/smb.conf\"\n}\n",       # smbtuned's own config
])
def test_file_that_is_no_smb_conf_is_left_alone(smbtuned, tmp_path, text):
    """A wrong --smb-conf (smbtuned's own config for -c, /etc/hosts) has no
    section, no socket options line and lines that are no parameter: a
    `[global]` header on top of it would pass testparm's check (Samba
    ignores lines without '=') and root would have rewritten a file that
    is no smb.conf. (A file of parameters alone is a bare smb.conf: the
    fixture lines-before-no-section.)"""
    path = tmp_path / "not-smb.conf"
    path.write_text(text)
    r = run_editor(smbtuned, "--smb-conf", path, "--set-buffers", "256K,256K",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"{path} does not look like an smb.conf" in r.stderr, r.stderr
    assert "line 1 is neither a parameter nor a comment" in r.stderr, r.stderr
    assert path.read_text() == text
    # one with a section but no [global] still gets its header
    path.write_text("[data]\n\tpath = /srv\n")
    r = run_editor(smbtuned, "--smb-conf", path, "--set-buffers", "256K,256K",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert path.read_text().startswith("[global]\n\tsocket options = "), path.read_text()


@pytest.mark.parametrize("first", ["# smb.conf", "", "; comment"])
def test_bare_smb_conf_behind_a_byte_order_mark_is_edited(smbtuned, tmp_path, first):
    """A bare smb.conf (parameters alone) whose first line is a UTF-8 byte
    order mark and a comment, or nothing: testparm loads it, so it is no
    sign of a wrong file; the edit goes on (a [global] on top)."""
    path = tmp_path / "smb.conf"
    text = "\ufeff" + first + "\nworkgroup = WG\n"
    path.write_text(text)
    r = run_editor(smbtuned, "--smb-conf", path, "--set-buffers", "256K,256K",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert path.read_text().endswith(text), path.read_text()
    assert "socket options = TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144" in path.read_text()


def _nobody_can_run(smbtuned):
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "test", "-x", str(smbtuned)], capture_output=True)
    return r.returncode == 0


def test_unreadable_file(smbtuned, tmp_path):
    """Root reads anything; drop to nobody to make a 0600 root file unreadable."""
    from smbd import _let_guest_traverse

    if os.geteuid() != 0:
        pytest.skip("needs root to switch to nobody")
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    _let_guest_traverse(d)
    d.chmod(0o777)  # only the file's own mode stands in the way
    (d / "smb.conf").chmod(0o600)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)  # nobody's own, as a state directory must be
    if not _nobody_can_run(smbtuned):
        # The checkout may sit in a directory nobody cannot traverse (a
        # 0700 mktemp, a home): run a copy from the test's own directory.
        copy = tmp_path / "bin" / "smbtuned"
        copy.parent.mkdir()
        shutil.copy2(smbtuned, copy)
        _let_guest_traverse(copy)
        smbtuned = copy
    assert _nobody_can_run(smbtuned)
    before = snapshot(d)
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        str(smbtuned), "--smb-conf", str(d / "smb.conf"),
                        "--set-buffers", "256K,256K", "--state-dir", str(state)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert str(d / "smb.conf") in r.stderr, r.stderr
    assert_unchanged(before, d, "unreadable")


def test_read_only_directory(smbtuned, tmp_path):
    """Root ignores directory modes: make the directory a read-only bind
    mount in a private mount namespace, so creating the temp file fails."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a read-only bind mount")
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    state = tmp_path / "state"
    state.mkdir()
    before = snapshot(d)
    script = ('set -e; mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"; '
              'touch "$1/.probe" 2>/dev/null && exit 99; shift; exec "$@"')
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                        str(d), str(smbtuned), "--smb-conf", str(d / "smb.conf"),
                        "--set-buffers", "256K,256K", "--state-dir", str(state)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 99 or "mount:" in r.stderr:
        pytest.skip(f"cannot make a read-only bind mount here: {r.stderr.strip()}")
    assert r.returncode == 1, r.stderr
    assert "smb.conf" in r.stderr or str(d) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert_unchanged(before, d, "read-only dir")


@pytest.mark.parametrize("how", ["world-writable", "another-owner", "backup-link",
                                 "parent-of-another-owner"])
def test_state_directory_others_could_write_is_refused(smbtuned, tmp_path, how):
    """Root writes backups into the state directory: one that someone else
    owns or may write to could hold a link to anywhere, planted where a
    backup goes. It is refused, and nothing is written, there or through
    the link; backup/ itself is never reached through a link."""
    if os.geteuid() != 0:
        pytest.skip("needs root to own the state directory as another user")
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    state, victim = tmp_path / "state", tmp_path / "victim"
    if how == "parent-of-another-owner":
        # nobody may move root's private state directory away and put
        # their own in its place
        (tmp_path / "u").mkdir(mode=0o755)
        os.chown(tmp_path / "u", 65534, 65534)
        state = tmp_path / "u" / "state"
    state.mkdir(mode=0o700)
    victim.mkdir()
    if how == "world-writable":
        state.chmod(0o777)
    elif how == "another-owner":
        os.chown(state, 65534, 65534)
    (state / "backup").symlink_to(victim)
    if how == "another-owner":
        os.lchown(state / "backup", 65534, 65534)
    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--set-buffers", "256K,256K",
                   "--state-dir", state)
    assert r.returncode == 1, r.stderr
    if how == "backup-link":
        assert f"{state}/backup is a symlink or not a directory: refused" in r.stderr, r.stderr
    elif how == "parent-of-another-owner":
        assert (f"the directory {tmp_path / 'u'} on the way to {state} is owned by uid 65534 "
                "with mode 0755: refused") in r.stderr, r.stderr
    else:
        mode = "0777" if how == "world-writable" else "0700"
        uid = 0 if how == "world-writable" else 65534
        assert f"{state} is owned by uid {uid} with mode {mode}: refused" in r.stderr, r.stderr
    assert_unchanged(before, d, how)
    assert list(victim.iterdir()) == []


def test_mode_and_owner_kept(smbtuned, tmp_path):
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    conf = d / "smb.conf"
    conf.chmod(0o640)
    os.chown(conf, 0, 65534 if os.geteuid() == 0 else os.getgid())
    st = conf.stat()
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    st2 = conf.stat()
    assert (st2.st_mode, st2.st_uid, st2.st_gid) == (st.st_mode, st.st_uid, st.st_gid)


def test_symlink_written_through(smbtuned, tmp_path):
    d = copy_fixture(CORPUS / "symlink", tmp_path / "c")
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state")
    assert r.returncode == 0, r.stderr
    assert (d / "smb.conf").is_symlink()
    assert os.readlink(d / "smb.conf") == "smb.conf.real"
    assert b"SO_RCVBUF=1048576" in (d / "smb.conf.real").read_bytes()
    assert sorted(p.name for p in d.iterdir()) == ["smb.conf", "smb.conf.real"]


def test_expect_compare_and_set(smbtuned, tmp_path):
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    conf, state = d / "smb.conf", tmp_path / "state"
    current = "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192"

    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", state, "--expect", "TCP_NODELAY SO_RCVBUF=65536")
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert_unchanged(before, d, "stale --expect")

    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", state, "--expect", current)
    assert r.returncode == 0, r.stderr
    assert samba_value(conf) == \
        "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=1048576 SO_SNDBUF=1048576"

    # The value we read before is stale now: a second writer loses.
    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "64K,64K",
                   "--state-dir", state, "--expect", current)
    assert r.returncode == 1, r.stderr
    assert_unchanged(before, d, "second writer")


def test_expect_without_line(smbtuned, tmp_path):
    """With no line the effective value is Samba's default, TCP_NODELAY."""
    d = copy_fixture(CORPUS / "comments-only", tmp_path / "c")
    conf, state = d / "smb.conf", tmp_path / "state"
    before = snapshot(d)
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", state, "--expect", "TCP_NODELAY SO_RCVBUF=8192")
    assert r.returncode == 1
    assert_unchanged(before, d, "stale --expect")
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", state, "--expect", "TCP_NODELAY")
    assert r.returncode == 0, r.stderr
    assert samba_value(conf) == "TCP_NODELAY SO_RCVBUF=1048576 SO_SNDBUF=1048576"


def test_lock_is_free_after_run(smbtuned, tmp_path):
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    state = tmp_path / "state"
    r = run_editor(smbtuned, "--smb-conf", d / "smb.conf", "--set-buffers", "1M,1M",
                   "--state-dir", state)
    assert r.returncode == 0, r.stderr
    with open(state / "smbconf.lock") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_editor_reads_the_daemons_paths_from_the_config(smbtuned, tmp_path):
    """--show and --set-buffers use the config file's smb_conf and state_dir
    (as the daemon does): the edit takes the daemon's own lock, so the two
    never interleave. The command line still wins; a bad config is 78."""
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    state = tmp_path / "state"
    conf = tmp_path / "smbtuned.conf"
    conf.write_text(f'tune {{\n  smb_conf = "{d / "smb.conf"}"\n  state_dir = "{state}"\n}}\n')
    r = run_editor(smbtuned, "-c", conf, "--show")
    assert r.returncode == 0, r.stderr
    assert f"from {d / 'smb.conf'} line" in r.stdout, r.stdout
    # the daemon's lock held: the edit waits for it, and fails after its
    # wait rather than write beside the daemon's edit
    state.mkdir(mode=0o700)
    with open(state / "smbconf.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        before = (d / "smb.conf").read_bytes()
        r = run_editor(smbtuned, "-c", conf, "--set-buffers", "1M,1M", timeout=60)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "held by another smbtuned" in r.stderr, r.stderr
        assert (d / "smb.conf").read_bytes() == before
    r = run_editor(smbtuned, "-c", conf, "--set-buffers", "1M,1M")
    assert r.returncode == 0, r.stderr
    assert "SO_RCVBUF=1048576" in samba_value(d / "smb.conf")
    assert (state / "backup").is_dir()
    # --state-dir on the command line wins over the file
    other = tmp_path / "other"
    r = run_editor(smbtuned, "-c", conf, "--state-dir", other, "--set-buffers", "auto,auto")
    assert r.returncode == 0, r.stderr
    assert (other / "backup").is_dir()
    conf.write_text("tune {\n  interval = banana\n}\n")
    for args in (["--show"], ["--set-buffers", "1M,1M"]):
        r = run_editor(smbtuned, "-c", conf, *args)
        assert r.returncode == 78, f"{args}: {r.returncode}\n{r.stderr}"
        assert f"{conf}:2" in r.stderr, r.stderr


# ------------------------------------------------------- with a real smbd

def server_rcvbuf(port, peer_port, timeout=10.0):
    """rb (SO_RCVBUF as the kernel reports it) of smbd's socket for the
    connection from peer_port, read with `ss -tmn`."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{port} )"],
                             capture_output=True, text=True, check=True).stdout
        # Each socket: a line with the addresses, then a line with skmem.
        for m in re.finditer(r"\S+:(\d+)\s+\S+:(\d+)\s*\n?\s*skmem:\(([^)]*)\)", out):
            if int(m.group(1)) == port and int(m.group(2)) == peer_port:
                return int(re.search(r"\brb(\d+)", m.group(3)).group(1))
        if time.monotonic() > deadline:
            raise AssertionError(f"no server socket for :{peer_port} in ss output:\n{out}")
        time.sleep(0.05)


def new_connection_rcvbuf(srv):
    """Open a new TCP connection to smbd and read the server side's rb.
    smbd's child sets socket options right after it forks."""
    with socket.create_connection((srv.bind_addr, srv.port), timeout=5) as s:
        peer = s.getsockname()[1]
        time.sleep(0.5)  # let the forked child apply its socket options
        return server_rcvbuf(srv.port, peer)


@pytest.mark.smbd
@pytest.mark.parametrize("method", ["smbcontrol", "signal"])
def test_apply_reaches_new_connections(smbtuned, smbd_factory, tmp_path, method):
    srv = smbd_factory()
    want = 262144
    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    expect_rb = 2 * min(want, rmem_max)
    before = new_connection_rcvbuf(srv)
    assert before < expect_rb, f"autotuned rb {before} already >= {expect_rb}: test is moot"

    r = run_editor(smbtuned, "--smb-conf", srv.conf, "--set-buffers", f"{want},{want}",
                   "--apply", method, "--state-dir", tmp_path / "state")
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}\n{srv.log_tail()}"
    assert samba_value(srv.conf) == f"TCP_NODELAY SO_RCVBUF={want} SO_SNDBUF={want}"

    ls = srv.smbclient("-c", "ls")
    assert ls.returncode == 0, ls.stdout + ls.stderr
    after = new_connection_rcvbuf(srv)
    assert after >= expect_rb, f"server rb {after} < {expect_rb} after --apply\n{srv.log_tail()}"
    assert srv.alive()


# ------------------------------- files that are not files, deep includes (issue 9)

# A hang must fail the test, not stall CI: every run here has a deadline
# far below the default (the editor answers these in milliseconds).
HANG_S = 20


def conf_with(d, text):
    d.mkdir(parents=True, exist_ok=True)
    (d / "smb.conf").write_text(text)
    return d / "smb.conf"


def refused(smbtuned, tmp_path, conf, *args):
    """Run the editor (with --set-buffers unless args say otherwise); it
    must fail with one line on stderr; returns that line."""
    args = args or ("--set-buffers", "256K,256K")
    r = run_editor(smbtuned, "--smb-conf", conf, *args, "--state-dir", tmp_path / "state",
                   timeout=HANG_S)
    assert r.returncode == 1, f"exit {r.returncode}: {r.stdout} {r.stderr}"
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1, r.stderr
    assert msg.startswith("smbtuned: "), msg
    return msg[len("smbtuned: "):]


def test_fifo_as_smb_conf(smbtuned, tmp_path):
    fifo = tmp_path / "smb.conf"
    os.mkfifo(fifo)
    for args in (("--show",), ("--show", "--json"), ("--set-buffers", "256K,256K")):
        msg = refused(smbtuned, tmp_path, fifo, *args)
        assert f"{fifo} is a FIFO" in msg, msg
    # -t reads it too
    cfg = tmp_path / "smbtuned.conf"
    cfg.write_text("")
    r = run_editor(smbtuned, "-t", "-c", cfg, "--url", "smb://127.0.0.1/x", "--smb-conf", fifo,
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 78 and f"{fifo} is a FIFO" in r.stderr, r.stderr  # EX_CONFIG


def test_fifo_as_include_at_depth_3(smbtuned, tmp_path):
    d = tmp_path / "c"
    conf = conf_with(d, f"[global]\nsocket options = TCP_NODELAY\ninclude = {d}/a.conf\n")
    (d / "a.conf").write_text(f"include = {d}/b.conf\n")
    (d / "b.conf").write_text(f"include = {d}/fifo.conf\n")
    os.mkfifo(d / "fifo.conf")
    before = snapshot(d)
    msg = refused(smbtuned, tmp_path, conf)
    assert msg.startswith(f"{d}/b.conf:1: cannot read an included file: {d}/fifo.conf is a FIFO"), \
        msg
    assert_unchanged(before, d, "FIFO include")


def test_fifo_matched_by_percent_m(smbtuned, tmp_path):
    d = tmp_path / "c"
    conf = conf_with(d, f"[global]\nsocket options = TCP_NODELAY\ninclude = {d}/smb.conf.%m\n")
    os.mkfifo(d / "smb.conf.host1")
    before = snapshot(d)
    for args in (("--show",), ("--set-buffers", "256K,256K")):
        msg = refused(smbtuned, tmp_path, conf, *args)
        assert f"{d}/smb.conf.host1 is a FIFO" in msg and f"{conf}:3:" in msg, msg
    assert_unchanged(before, d, "FIFO %m match")


def include_chain(d, depth):
    """smb.conf including inc1 ... inc<depth>, which sets socket options."""
    conf = conf_with(d, f"[global]\nworkgroup = W\ninclude = {d}/inc1.conf\n")
    for i in range(1, depth + 1):
        text = (f"include = {d}/inc{i + 1}.conf\n" if i < depth
                else "socket options = TCP_NODELAY SO_RCVBUF=65536\n")
        (d / f"inc{i}.conf").write_text(text)
    return conf


def test_include_chain_50_deep_is_edited(smbtuned, tmp_path):
    d = tmp_path / "c"
    conf = include_chain(d, 50)
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert samba_value(conf) == "TCP_NODELAY SO_RCVBUF=1048576 SO_SNDBUF=1048576"
    assert b"SO_RCVBUF=1048576" in (d / "inc50.conf").read_bytes()


def test_include_chain_101_deep_refused(smbtuned, tmp_path):
    """Samba loads 100 nested includes and no more (testparm: "Maximum
    include depth (100) exceeded!"); a chain is not a loop."""
    d = tmp_path / "c"
    conf = include_chain(d, 101)
    before = snapshot(d)
    msg = refused(smbtuned, tmp_path, conf)
    assert msg.startswith(f"{d}/inc100.conf:1: includes nested more than 100 deep"), msg
    assert "loop" not in msg, msg
    assert_unchanged(before, d, "101 deep")


def test_include_fanout_refused(smbtuned, tmp_path):
    """8 includes per file over 14 levels: 8^14 reads without a bound."""
    d = tmp_path / "c"
    conf = conf_with(d, "[global]\n" + f"include = {d}/f1.conf\n" * 8)
    for i in range(1, 15):
        (d / f"f{i}.conf").write_text(f"include = {d}/f{i + 1}.conf\n" * 8 if i < 14
                                      else "workgroup = W\n")
    before = snapshot(d)
    for args in (("--show",), ("--set-buffers", "256K,256K")):
        msg = refused(smbtuned, tmp_path, conf, *args)
        assert "more than 10000 files read through includes" in msg, msg
    assert_unchanged(before, d, "fan-out")


# ------------------------------------------------------------- long values

def test_value_of_20000_characters_is_edited(smbtuned, tmp_path):
    """testparm's answer was read into 8 KiB: a long valid value looked
    like a disagreement with Samba."""
    value = " ".join(["TCP_NODELAY"] * 1700)
    assert len(value) > 20000
    conf = conf_with(tmp_path / "c", f"[global]\n\tsocket options = {value}\n")
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,256K",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr[:300]
    assert samba_value(conf) == f"{value} SO_RCVBUF=1048576 SO_SNDBUF=262144"


def set_with_failing_testparm(smbtuned, tmp_path, conf):
    """--set-buffers 1M,1M with a testparm that fails on its second call,
    the one after the write: our line is taken back."""
    wrapper = tmp_path / "testparm"
    wrapper.write_text("#!/bin/sh\n"
                       f'n=$(cat "{tmp_path}/calls" 2>/dev/null || echo 0); n=$((n + 1))\n'
                       f'echo $n > "{tmp_path}/calls"\n'
                       'if [ $n -eq 2 ]; then echo "injected failure" >&2; exit 1; fi\n'
                       'exec testparm "$@"\n')
    wrapper.chmod(0o755)
    return set_with_testparm(smbtuned, tmp_path, conf, wrapper)


def set_with_testparm(smbtuned, tmp_path, conf, wrapper):
    """--set-buffers 1M,1M with `wrapper` as Samba's testparm."""
    return subprocess.run([str(smbtuned), "--smb-conf", str(conf), "--set-buffers", "1M,1M",
                           "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=HANG_S,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, "SMBTUNED_TESTPARM": str(wrapper)})


def test_failure_after_the_write_says_restored_first(smbtuned, tmp_path):
    """testparm fails on the file just written (a wrapper: the second
    call), with a long value in the message: what happened to smb.conf is
    said before anything that could be cut."""
    value = " ".join(["TCP_NODELAY"] * 200)
    d = tmp_path / "c"
    conf = conf_with(d, f"[global]\nsocket options = {value}\n")
    before = conf.read_bytes()
    r = set_with_failing_testparm(smbtuned, tmp_path, conf)
    assert r.returncode == 1, r.stderr
    assert (tmp_path / "calls").read_text().strip() == "2"
    assert conf.read_bytes() == before
    assert "restored" in r.stderr[:100], r.stderr
    assert "injected failure" in r.stderr, r.stderr


def test_testparm_crash_names_its_reason_not_its_trailer(smbtuned, tmp_path):
    """Samba 4.17's testparm panics after "Error loading services." (for
    `smb ports = abc`), and its last line is "Can not dump core": the
    message gives the line before the panic, and says it crashed."""
    conf = conf_with(tmp_path / "c", "[global]\nsocket options = TCP_NODELAY\n")
    before = conf.read_bytes()
    wrapper = tmp_path / "testparm"
    wrapper.write_text("#!/bin/sh\n"
                       'echo "Load smb config files from $4" >&2\n'
                       'echo "Error loading services." >&2\n'
                       'echo "talloc: access after free error - first free may be at x.c:1" >&2\n'
                       'echo "Bad talloc magic value - access after free" >&2\n'
                       'echo "===============================================================" >&2\n'
                       'echo "INTERNAL ERROR: Bad talloc magic value in pid $$ (4.17)" >&2\n'
                       'echo "PANIC (pid $$): Bad talloc magic value - access after free" >&2\n'
                       'echo "BACKTRACE: 8 stack frames:" >&2\n'
                       'echo " #0 testparm(main+0x700) [0x5640c300dfc0]" >&2\n'
                       'echo "Can not dump core: corepath not set up" >&2\n'
                       "kill -ABRT $$\n")
    wrapper.chmod(0o755)
    r = set_with_testparm(smbtuned, tmp_path, conf, wrapper)
    assert r.returncode == 1, r.stderr
    assert "(Error loading services.; then testparm crashed: PANIC (pid" in r.stderr, r.stderr
    assert "corepath" not in r.stderr, r.stderr
    assert conf.read_bytes() == before

# ---------------------------------------------------------------- metadata

@pytest.fixture
def xattr_dir(tmp_path):
    """A directory on a filesystem that keeps user xattrs and ACLs: the
    test's own when it does, else a tmpfs mounted for the test."""
    for tool in ("setfattr", "getfattr", "setfacl", "getfacl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing (Debian's attr and acl: scripts/install-deps)")
    d = tmp_path / "x"
    d.mkdir()
    probe = d / "probe"
    probe.write_text("")
    ok = subprocess.run(["setfattr", "-n", "user.probe", "-v", "1", str(probe)]).returncode == 0
    probe.unlink()
    if ok:
        yield d
        return
    if os.geteuid() != 0:
        pytest.skip("no user xattrs here, and no root to mount a tmpfs")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def xattr_dump(p):
    """Every extended attribute (user, security, trusted, the ACLs)."""
    return subprocess.run(["getfattr", "-d", "-m", "-", "-e", "hex", "--absolute-names", str(p)],
                          capture_output=True, text=True, check=True).stdout


def test_xattrs_and_acls_kept(smbtuned, tmp_path, xattr_dir):
    conf = conf_with(xattr_dir, "[global]\nsocket options = TCP_NODELAY\n")
    subprocess.run(["setfattr", "-n", "user.note", "-v", "admin's", str(conf)], check=True)
    subprocess.run(["setfacl", "-m", "u:nobody:r,g:nogroup:rw", str(conf)], check=True)
    acl = subprocess.run(["getfacl", "-c", str(conf)], capture_output=True, text=True).stdout
    dump = xattr_dump(conf)
    assert "user.note" in dump and "system.posix_acl_access" in dump, dump
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert b"SO_RCVBUF=1048576" in conf.read_bytes()
    assert xattr_dump(conf) == dump
    assert subprocess.run(["getfacl", "-c", str(conf)], capture_output=True,
                          text=True).stdout == acl


def test_xattr_copy_failure_writes_nothing(smbtuned, tmp_path, xattr_dir):
    """fsetxattr on the new file fails (strace injects EIO): smb.conf keeps
    its bytes and its attributes, and no temporary file is left."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace to inject the failure")
    conf = conf_with(xattr_dir, "[global]\nsocket options = TCP_NODELAY\n")
    subprocess.run(["setfattr", "-n", "user.note", "-v", "kept", str(conf)], check=True)
    before, dump = snapshot(xattr_dir), xattr_dump(conf)
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state", timeout=HANG_S,
                   prefix=("strace", "-o", "/dev/null", "-e", "inject=fsetxattr:error=EIO"))
    assert r.returncode == 1, r.stderr
    assert "nothing written" in r.stderr and "Input/output error" in r.stderr, r.stderr
    assert_unchanged(before, xattr_dir, "fsetxattr failed")
    assert xattr_dump(conf) == dump


def test_setuid_and_setgid_kept(smbtuned, tmp_path):
    conf = conf_with(tmp_path / "c", "[global]\nsocket options = TCP_NODELAY\n")
    if os.geteuid() == 0:
        os.chown(conf, 0, 65534)
    conf.chmod(0o6640)
    st = conf.stat()
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    st2 = conf.stat()
    assert (oct(st2.st_mode), st2.st_uid, st2.st_gid) == (oct(st.st_mode), st.st_uid, st.st_gid)


def test_hard_linked_smb_conf_refused(smbtuned, tmp_path):
    d = tmp_path / "c"
    conf = conf_with(d, "[global]\nsocket options = TCP_NODELAY\n")
    os.link(conf, d / "other-name.conf")
    before = snapshot(d)
    msg = refused(smbtuned, tmp_path, conf)
    assert msg.startswith(f"{conf} has 2 hard links"), msg
    assert "split" in msg and "nothing written" in msg, msg
    assert_unchanged(before, d, "hard link")
    assert os.path.samefile(conf, d / "other-name.conf")
    assert not (tmp_path / "state" / "backup").exists() or \
        not any((tmp_path / "state" / "backup").iterdir())


def test_backup_names_never_collide(smbtuned, tmp_path):
    """/X/a/b.conf and /X/a_b.conf once shared the backup name X_a_b.conf."""
    state = tmp_path / "state"
    one = conf_with(tmp_path / "a", "[global]\nsocket options = TCP_NODELAY SO_RCVBUF=1\n")
    one = one.rename(tmp_path / "a" / "b.conf")
    two = tmp_path / "a_b.conf"
    two.write_text("[global]\nsocket options = TCP_NODELAY SO_RCVBUF=2\n")
    old = {one: one.read_bytes(), two: two.read_bytes()}
    for conf in (one, two):
        r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                       "--state-dir", state, timeout=HANG_S)
        assert r.returncode == 0, r.stderr
    kept = {p.read_bytes() for p in (state / "backup").iterdir() if p.is_file()}
    assert old[one] in kept and old[two] in kept, sorted((state / "backup").iterdir())


# ------------------------------------------------------------ JSON, notes

def test_show_json_is_utf8_with_invalid_bytes(smbtuned, tmp_path):
    """A path and a value with bytes that are not UTF-8: the JSON must still
    decode strictly (they become U+FFFD)."""
    d = os.path.join(os.fsencode(tmp_path), b"dir-\xff\xfe")
    os.mkdir(d)
    conf = os.path.join(d, b"smb.conf")
    with open(conf, "wb") as f:
        f.write(b"[global]\nsocket options = TCP_NODELAY SO_RCVBUF=65536 \xc3(\xa0\xed\xa0\x80\n")
    r = subprocess.run([os.fsencode(smbtuned), b"--smb-conf", conf, b"--show", b"--json",
                        b"--state-dir", os.fsencode(tmp_path / "state")],
                       capture_output=True, timeout=HANG_S, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.decode("utf-8", errors="strict"), strict=True)
    assert got["file"] == os.fsdecode(conf).encode("utf-8", "surrogateescape") \
        .decode("utf-8", "replace")
    assert got["value"] == "TCP_NODELAY SO_RCVBUF=65536 \ufffd(\ufffd\ufffd\ufffd\ufffd"
    assert got["line"] == 2 and got["rcvbuf"] == 65536


def test_percent_include_is_noted(smbtuned, tmp_path):
    """A %-include whose files are harmless today is accepted, and said."""
    d = tmp_path / "c"
    conf = conf_with(d, f"[global]\nsocket options = TCP_NODELAY\n"
                        f"include = {d}/smb.conf.%m\n")
    (d / "smb.conf.host1").write_text("workgroup = W\n")
    note = (f"note: {conf}:3: include = {d}/smb.conf.%m: a file it names later could override "
            "socket options for some clients")
    r = run_editor(smbtuned, "--smb-conf", conf, "--show", "--state-dir", tmp_path / "state",
                   timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert note in r.stdout.splitlines(), r.stdout
    r = run_editor(smbtuned, "--smb-conf", conf, "--show", "--json",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["notes"] == [
        {"file": str(conf), "line": 3, "include": f"{d}/smb.conf.%m",
         "note": "a file it names later could override socket options for some clients"}]
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert note in r.stdout.splitlines(), r.stdout
    # without such an include: no note, an empty list
    conf2 = conf_with(tmp_path / "plain", "[global]\nsocket options = TCP_NODELAY\n")
    r = run_editor(smbtuned, "--smb-conf", conf2, "--show", "--json",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert json.loads(r.stdout)["notes"] == []


# ---------------------------------------------------------------- hostile paths

def test_take_back_keeps_the_original_in_the_backup(smbtuned, tmp_path):
    """A take-back (here: testparm fails after the write, so our line goes
    back) must not overwrite the backup of the admin's original bytes with
    the bytes of our own change."""
    d = tmp_path / "c"
    conf = conf_with(d, "[global]\n# the admin's\nsocket options = TCP_NODELAY\n")
    original = conf.read_bytes()
    r = set_with_failing_testparm(smbtuned, tmp_path, conf)
    assert r.returncode == 1, r.stderr
    assert "restored" in r.stderr, r.stderr
    assert conf.read_bytes() == original
    backups = [p for p in (tmp_path / "state" / "backup").rglob("*") if p.is_file()]
    # the last write's backup and the first's, both the admin's bytes
    assert [p.read_bytes() for p in backups] == [original, original], backups


def test_first_backup_keeps_the_admins_bytes(smbtuned, tmp_path):
    """Two writes: backup/ holds the bytes before the second (ours), and
    backup/first/ still the admin's, before the first."""
    state = tmp_path / "state"
    conf = conf_with(tmp_path / "c", "[global]\nsocket options = TCP_NODELAY SO_RCVBUF=8192\n")
    original = conf.read_bytes()
    for size in ("1M,1M", "2M,2M"):
        between = conf.read_bytes()
        r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", size,
                       "--state-dir", state, timeout=HANG_S)
        assert r.returncode == 0, r.stderr
    assert between != original
    last = [p for p in (state / "backup").iterdir() if p.is_file()]
    first = list((state / "backup" / "first").iterdir())
    assert [p.read_bytes() for p in last] == [between], last
    assert [p.read_bytes() for p in first] == [original], first
    assert [p.name for p in first] == [p.name for p in last]


@pytest.mark.parametrize("written", [False, True], ids=["read-only-include", "edited-include"])
def test_someone_elses_temp_name_survives(smbtuned, tmp_path, written):
    """A file of our temp shape that someone else made next to an include
    (a 1777 directory) is theirs: an edit removes none of it, whether the
    include is only read or is the file edited."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file of another uid")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    extra = shared / "extra.conf"
    extra.write_text("[global]\nsocket options = TCP_NODELAY\n" if written else
                     "[global]\nworkgroup = W\n")
    theirs = shared / ".smbtuned-extra.conf.abcdef"
    theirs.write_text("nobody's\n")
    os.chown(theirs, 65534, 65534)
    conf = conf_with(tmp_path / "c", ("[global]\n" if written else
                                      "[global]\nsocket options = TCP_NODELAY\n") +
                     f"include = {extra}\n")
    r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers", "1M,1M",
                   "--state-dir", tmp_path / "state", timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert (b"SO_RCVBUF=1048576" in extra.read_bytes()) == written
    assert theirs.read_text() == "nobody's\n"
    assert sorted(p.name for p in shared.iterdir()) == [theirs.name, "extra.conf"]


def test_include_under_proc_refused(smbtuned, tmp_path):
    """/proc and /sys hold kernel interfaces, never a configuration
    (/proc/kmsg would drain the kernel log, trace_pipe would block): an
    include there is refused by name. /proc/kmsg itself is never read here."""
    conf = conf_with(tmp_path / "c", "[global]\nsocket options = TCP_NODELAY\n"
                                     "include = /proc/self/status\n")
    before = snapshot(conf.parent)
    msg = refused(smbtuned, tmp_path, conf)
    assert "/proc/self/status" in msg and "/proc" in msg, msg
    assert_unchanged(before, conf.parent, "/proc include")


RACE_EDITS = int(os.environ.get("SMBTUNED_RACE_EDITS", "200"))

TOGGLE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b, stop = (os.fsencode(x) for x in sys.argv[1:4])
n = 0
while not os.path.exists(stop):
    libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
    n += 1
print(n)
"""


@pytest.mark.slow
def test_swapped_directory_never_redirects_a_write(smbtuned, tmp_path):
    """The race of a user (nobody) who owns a directory on an include's
    path: att/sub is swapped with a symlink to a root-only directory (vic)
    in a loop while root edits the include RACE_EDITS times. Root's file in
    vic must stay as it is and nothing of anyone may appear next to it."""
    from smbd import _let_guest_traverse

    if os.geteuid() != 0:
        pytest.skip("needs root to run the swapper as nobody")
    base = tmp_path / "race"
    base.mkdir()
    _let_guest_traverse(base)
    vic, att = base / "vic", base / "att"
    vic.mkdir(mode=0o700)
    # Not a Samba config: what the parse reads through the symlink holds no
    # line to edit, so only a redirected write could change it.
    (vic / "target").write_text("SECRET\n")
    secret = (vic / "target").read_bytes()
    att.mkdir()
    (att / "sub").mkdir()
    (att / "sub" / "target").write_text("[global]\nsocket options = SO_RCVBUF=100000\n")
    os.symlink(vic, att / "lnk")
    for p in (att, att / "sub", att / "sub" / "target"):
        os.lchown(p, 65534, 65534)
    os.lchown(att / "lnk", 65534, 65534)
    conf = conf_with(base / "c", f"[global]\nworkgroup = X\ninclude = {att}/sub/target\n")
    script = tmp_path / "toggle.py"
    script.write_text(TOGGLE)
    script.chmod(0o644)
    _let_guest_traverse(script)
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                "/usr/bin/python3", str(script), str(att / "sub"),
                                str(att / "lnk"), str(stop)],
                               stdout=subprocess.PIPE, text=True)
    try:
        results = {"written": 0, "refused": 0}
        for i in range(RACE_EDITS):
            r = run_editor(smbtuned, "--smb-conf", conf, "--set-buffers",
                           f"{100000 + 4096 * (i + 1)},auto", "--state-dir", base / "st",
                           timeout=HANG_S)
            results["written" if r.returncode == 0 else "refused"] += 1
            assert (vic / "target").read_bytes() == secret, f"edit {i}: {r.stdout}{r.stderr}"
            assert sorted(p.name for p in vic.iterdir()) == ["target"], f"edit {i}"
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=30)
    assert swapper.returncode == 0
    assert int(out) > 0, "the swapper never ran"
    assert (vic / "target").read_bytes() == secret
    assert sorted(p.name for p in vic.iterdir()) == ["target"]
    # whichever name holds the include now, no temp file of ours is left
    for d in (att / "sub", att / "lnk"):
        if d.is_dir() and not d.is_symlink():
            assert [p.name for p in d.iterdir()] == ["target"], sorted(d.iterdir())


# ------------------------------------------------------------------ no RENAME_EXCHANGE

EXCHANGE_DELAY_S = 3  # the failing exchange's delay: the admin saves within it


@pytest.mark.parametrize("how", ["in-place", "by-rename"])
def test_without_rename_exchange_an_admin_save_is_kept(smbtuned, tmp_path, how):
    """A filesystem without RENAME_EXCHANGE (OpenZFS before 2.2), as
    strace's fault injection makes it: every renameat2 fails with EINVAL
    (the one that would give our temp file its name with inode numbers, so
    that the name stays random, and the exchange), after a delay during
    which an admin saves smb.conf (appending in place, or an editor's
    rename over it). The plain rename that follows must not put our file
    over theirs: the file is checked again right before it."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    d = copy_fixture(CORPUS / "old-tuning-guide", tmp_path / "c")
    conf = d / "smb.conf"
    # Every call, not the first: the exchange is no longer the first
    # renameat2 (the temp file's second name comes before it), and
    # OpenZFS before 2.2 refuses every renameat2 flag, RENAME_NOREPLACE too.
    inject = f"inject=renameat2:error=EINVAL:delay_enter={EXCHANGE_DELAY_S * 1000000}"
    cmd = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=renameat2", "-e", inject,
           str(smbtuned), "--smb-conf", str(conf), "--set-buffers", "262144,262144",
           "--state-dir", str(tmp_path / "state")]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    try:
        # our temp file is there from its write to the exchange; the compare
        # and the backups take tens of ms, the failing renameat2 calls
        # seconds each: first its second name's (the name stays random),
        # then the exchange's, within whose delay the admin saves
        deadline = time.monotonic() + 60
        while not list(d.glob(".smbtuned-smb.conf.*")):
            assert p.poll() is None, f"the editor ended first: {p.communicate()}"
            assert time.monotonic() < deadline, "no temp file of the editor's"
            time.sleep(0.005)
        time.sleep(EXCHANGE_DELAY_S + 1)
        admin = conf.read_bytes() + b"# saved by an admin\n"
        if how == "in-place":
            with open(conf, "r+b") as f:
                f.seek(0, os.SEEK_END)
                f.write(b"# saved by an admin\n")
        else:
            tmp = d / "smb.conf.editor-save"
            tmp.write_bytes(admin)
            os.rename(tmp, conf)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert conf.read_bytes() == admin, \
        f"the admin's save was replaced:\n{conf.read_text()}\n{err}"
    assert p.returncode != 0, f"the editor said it wrote:\n{out}\n{err}"
    assert "changed on disk while smbtuned was editing it" in err, err
    assert not list(d.glob(".smbtuned-smb.conf.*")), "a temp file was left"
