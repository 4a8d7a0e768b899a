"""The picture of bench/scenarios: one panel per scenario, throughput
against buffer size (log scale), put and get of the ground truth, AUTO as a
level line (and a column on the right), the legacy 8K point, smbtuned's
trials (the probe's rates, grey) and the committed line's true put and get.

A small SVG writer of its own: no plotting package is needed to rerun the
benchmark.
"""

import math
from xml.sax.saxutils import escape

W, H = 420, 280  # one panel
ML, MR, MT, MB = 48, 16, 30, 40
COLS = 2
PUT, GET, TRIAL = "#1f77b4", "#d62728", "#999999"


def _nice(x):
    """1, 2 or 5 times a power of ten, at least x: a tick step."""
    p = 10 ** math.floor(math.log10(x)) if x > 0 else 1
    return next(m * p for m in (1, 2, 5, 10) if m * p >= x)


def _sz(n):
    return f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"


def _panel(r, lattice, ox, oy):
    out = []
    # --quick leaves out sizes that cannot be the best: no point of theirs
    gt = {k: v for k, v in r["ground_truth"].items() if "put" in v}
    sizes = lattice
    # x: index -1 is the legacy 8K, 0..n-1 the lattice, n+0.5 AUTO
    n = len(sizes)
    xmin, xmax = -1.5, n + 1
    trials = r["once"]["trials"]
    shadow = "raw_tcp" not in r  # loopback: shadow trials
    ys = [v[d] for v in gt.values() for d in ("put", "get")]
    ys += [r["legacy"]["put"], r["legacy"]["get"]]
    ys += [t[d] for t in trials for d in ("write", "read")]
    ymax = max(ys + [1e-3]) * 1.1

    def X(i):
        return ox + ML + (i - xmin) / (xmax - xmin) * (W - ML - MR)

    def Y(v):
        return oy + H - MB - v / ymax * (H - MT - MB)

    def xi(size):
        return n + 0.5 if size is None else sizes.index(size) if size in sizes else None

    out.append(f'<rect x="{ox}" y="{oy}" width="{W}" height="{H}" fill="white" '
               f'stroke="#ccc"/>')
    out.append(f'<text x="{ox + W / 2}" y="{oy + 18}" text-anchor="middle" font-size="13">'
               f'{escape(r["name"])}: {escape(r["what"])}</text>')
    # axes and ticks
    out.append(f'<line x1="{X(xmin)}" y1="{Y(0)}" x2="{X(xmax)}" y2="{Y(0)}" stroke="black"/>')
    out.append(f'<line x1="{X(xmin)}" y1="{Y(0)}" x2="{X(xmin)}" y2="{Y(ymax)}" '
               f'stroke="black"/>')
    for i, s in enumerate(sizes):
        out.append(f'<text x="{X(i)}" y="{Y(0) + 14}" text-anchor="middle" '
                   f'font-size="9">{_sz(s)}</text>')
    out.append(f'<text x="{X(-1)}" y="{Y(0) + 14}" text-anchor="middle" font-size="9">8K</text>')
    out.append(f'<text x="{X(n + 0.5)}" y="{Y(0) + 14}" text-anchor="middle" '
               f'font-size="9">AUTO</text>')
    out.append(f'<text x="{ox + W / 2}" y="{oy + H - 8}" text-anchor="middle" font-size="10">'
               'SO_RCVBUF = SO_SNDBUF (log scale); MB/s</text>')
    step = _nice(ymax / 5)
    v = 0
    while v <= ymax:
        out.append(f'<text x="{X(xmin) - 4}" y="{Y(v) + 3}" text-anchor="end" '
                   f'font-size="9">{v:g}</text>')
        v += step
    for d, color in (("put", PUT), ("get", GET)):
        pts = " ".join(f"{X(i)},{Y(gt[_sz(s)][d])}" for i, s in enumerate(sizes)
                       if _sz(s) in gt)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        a = gt["AUTO"][d]
        out.append(f'<line x1="{X(-1)}" y1="{Y(a)}" x2="{X(n + 0.5)}" y2="{Y(a)}" '
                   f'stroke="{color}" stroke-dasharray="4,3"/>')
        out.append(f'<circle cx="{X(-1)}" cy="{Y(r["legacy"][d])}" r="3" fill="{color}"/>')
    # Trials: what each probe direction ranks. Shadow trials (loopback):
    # the probe writes into the candidate smbd (its SO_RCVBUF, like a put)
    # and reads from it (SO_SNDBUF, a get). Client trials: the candidate is
    # the tuned host's own sending (SO_SNDBUF, like a get) and receiving
    # (SO_RCVBUF, a put) socket.
    for t in trials:
        for d, buf in ((("write", "rcvbuf"), ("read", "sndbuf")) if shadow
                       else (("write", "sndbuf"), ("read", "rcvbuf"))):
            i = xi(t[buf])
            if i is not None:
                out.append(f'<circle cx="{X(i)}" cy="{Y(t[d])}" r="1.8" fill="{TRIAL}"/>')
    o = r["once"]
    for d, buf, color in (("put", "rcvbuf", PUT), ("get", "sndbuf", GET)):
        i = xi(o[buf])
        if i is not None:
            y = Y(o["true"][d])
            out.append(f'<path d="M{X(i) - 5},{y} L{X(i)},{y - 6} L{X(i) + 5},{y} '
                       f'L{X(i)},{y + 6} Z" fill="{color}" stroke="black"/>')
    return out


def render(results, lattice):
    ok = [r for r in results if "error" not in r]
    rows = max(1, (len(ok) + COLS - 1) // COLS)
    width, height = W * min(COLS, max(1, len(ok))), H * rows + 48
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for k, r in enumerate(ok):
        out += _panel(r, lattice, (k % COLS) * W, (k // COLS) * H)
    notes = ["put, get: smbclient, smbd restarted per size; dashed: AUTO; at 8K: the legacy",
             "line; grey: smbtuned's trials (its probe's rates); diamonds: the committed line",
             "measured like the ground truth (put at its SO_RCVBUF, get at its SO_SNDBUF)."]
    for k, t in enumerate(notes):
        out.append(f'<text x="8" y="{H * rows + 14 + 12 * k}" font-size="10">{escape(t)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
