#!/usr/bin/python3
"""Choose the seeds of one harness: scripts/fuzz -m calls this.

usage: select.py COVERAGE MAX

COVERAGE has one line per input: its path, then the coverage edges it
reaches on its own. Every hand-* and regress-* input is kept; then,
greedily, the input that reaches the most edges not yet reached (fixture-*
inputs first, so that real files stay where they add anything), until MAX
files or nothing new. libFuzzer's own -merge=1 keeps one input per small
step of coverage (over 100 for the config parser), hence this. Prints the
chosen paths, one a line.
"""
import os
import sys


def main():
    cov_file, most = sys.argv[1], int(sys.argv[2])
    paths, cov = [], []
    with open(cov_file, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            parts = line.split()
            if parts:
                paths.append(parts[0])
                cov.append(set(parts[1:]))
    name = [os.path.basename(p) for p in paths]
    chosen = [i for i in range(len(paths)) if name[i].startswith(("hand-", "regress-"))]
    seen = set().union(*(cov[i] for i in chosen))
    rest = [i for i in range(len(paths)) if i not in chosen]
    fixtures = [i for i in rest if name[i].startswith("fixture-")]
    for left in (fixtures, [i for i in rest if i not in fixtures]):
        while len(chosen) < most and left:
            # Most new edges first; of equals the smaller file.
            best = max(left, key=lambda i: (len(cov[i] - seen), -os.path.getsize(paths[i])))
            if not cov[best] - seen:
                break
            chosen.append(best)
            seen |= cov[best]
            left.remove(best)
    for i in chosen:
        print(paths[i])


if __name__ == "__main__":
    main()
