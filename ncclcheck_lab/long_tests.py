#!/usr/bin/env python3
"""The long tier of the test suite: the tests marked `long` (16- and 12-host labs, a killed node's full bound, the
whole product of launchers x faults under the guard), kept out of CI's run so that it stays near 20 minutes on 2
cores (pyproject.toml's `-m 'not long'`). They are ordinary pytest tests; this runs them and prints each one's
seconds and the total, slowest first.

    python3 scripts/long_tests.py [-k EXPR] [pytest args...]

Needs what the lab needs (root, iproute2, nftables; slurm-wlm, munge, openmpi-bin for the launchers). Exit: pytest's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMING = re.compile(r"^([0-9.]+)s (call|setup|teardown)\s+(\S+)$")


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pytest", "-m", "long", "--durations=0", "-q", "-p", "no:cacheprovider",
                        *argv], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    per: dict = {}
    for line in p.stdout.splitlines():
        m = TIMING.match(line.strip())
        if m:
            per[m.group(3)] = per.get(m.group(3), 0.0) + float(m.group(1))
    tail = [line for line in p.stdout.splitlines() if re.search(r"\b(passed|failed|error)", line)]
    for test, s in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"{s:8.1f} s  {test}")
    print(tail[-1] if tail else p.stdout[-2000:] + p.stderr[-2000:])
    print(f"long tests: {len(per)} timed, {sum(per.values()):.0f} s in tests, wall {wall:.0f} s, exit {p.returncode}")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
