#!/usr/bin/env python3
"""How multi-node preflight scales: healthy labs of 2, 4 and 8 namespace hosts (scripts/netlab), a preflight on all
hosts at once, wall time = the slowest host's. Prints a table and the 8/2 ratio (target < 1.5).

Needs root (see docs/lab.md). Every lab is torn down, also on error or Ctrl-C."""

from __future__ import annotations

import argparse
import os
import resource

from . import labrun
from .labrun import nl

PORT = 29500


def measure(n: int, timeout: int) -> tuple[float, float, float]:
    name = labrun.lab_name("bp")
    try:
        state = nl.up(name, n, owner_pid=os.getpid())
        master = state.ip("h1")
        args = {h: ["preflight", "--nnodes", n, "--node-rank", i, "--master-addr", master, "--master-port", PORT,
                    "--timeout", timeout, "--quiet"] for i, h in enumerate(state.hosts)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs = labrun.ncclcheck(state, args, deadline=timeout * 3)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    finally:
        nl.down(name)
    bad = {h: (r.rc, r.output[-400:]) for h, r in runs.items() if r.rc != 0}
    if bad:
        raise SystemExit(f"{n} hosts: preflight failed on {bad}")
    # one report per job: node 0 writes it (the world's), the other nodes write none
    reports = [r.report for r in runs.values() if r.report]
    if not reports:
        raise SystemExit(f"{n} hosts: no report written")
    world = max(rep["duration_s"] for rep in reports)
    return max(r.elapsed for r in runs.values()), world, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="2,4,8", help="host counts (default 2,4,8)")
    ap.add_argument("--timeout", type=int, default=60, help="preflight --timeout (default 60)")
    a = ap.parse_args(argv)
    if why := nl.missing_requirements():
        raise SystemExit("needs " + ", ".join(why))
    sizes = [int(s) for s in a.sizes.split(",")]
    rows = {n: measure(n, a.timeout) for n in sizes}
    print(f"cpus: {os.cpu_count()}")
    # CPU s = user+sys of every host's processes; CPU s / cores is the wall floor on this machine (CPU-bound).
    print(f"{'hosts':>5} {'wall s (max over hosts)':>24} {'report duration_s (max)':>24} {'CPU s (all)':>12} "
          f"{'CPU s/cores':>12}")
    for n, (wall, dur, cpu) in rows.items():
        print(f"{n:>5} {wall:>24.2f} {dur:>24.2f} {cpu:>12.2f} {cpu / (os.cpu_count() or 1):>12.2f}")
    if 2 in rows and 8 in rows:
        print(f"\n8/2 wall ratio: {rows[8][0] / rows[2][0]:.2f} (target < 1.5)")
    # measure() stops the script at the first lab whose preflight failed on a host: every lab passed on every host
    print(f"labs_passed={len(rows)}/{len(sizes)}")
    return 0


if __name__ == "__main__":
    main()
