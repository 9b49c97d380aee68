#!/usr/bin/env python3
"""How long users wait: `ncclcheck --help` and standalone `ncclcheck preflight`, against a bare interpreter start
and `import torch` measured in the same run. Prints a table; targets from docs/contracts.md (--help < 0.3 s, no torch;
preflight < 3 s on a warm machine)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wall(argv, repeat=5):
    env = dict(os.environ, PYTHONPATH=REPO)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    py = sys.executable
    rows = [
        ("python -c pass (reference)", wall([py, "-c", "pass"])),
        ("python -c 'import torch' (reference)", wall([py, "-c", "import torch"], 3)),
        ("ncclcheck --help", wall([py, "-m", "ncclcheck", "--help"])),
        ("ncclcheck preflight (standalone)", wall([py, "-m", "ncclcheck", "preflight", "--quiet"], 3)),
    ]
    ref = rows[0][1]
    print(f"{'command':40} {'median s':>9} {'x python':>9}")
    for name, t in rows:
        print(f"{name:40} {t:9.3f} {t / ref:9.1f}")
    help_s, pre_s = rows[2][1], rows[3][1]
    print(f"\n--help: {help_s:.3f} s (target < 0.3 s); preflight: {pre_s:.2f} s (target < 3 s)")


if __name__ == "__main__":
    main()
