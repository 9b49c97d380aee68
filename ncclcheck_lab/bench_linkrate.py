#!/usr/bin/env python3
"""Does `ncclcheck bench` measure the link? Two lab hosts whose eth0 is shaped with tbf (slow-link, both directions)
at a known rate; a 2-rank all_reduce across them; measured busbw against the configured rate (target ratio >= 0.9).

In a 2-rank ring all_reduce each rank sends S/2 (reduce-scatter) + S/2 (all-gather) = S bytes one way over the link,
and busbw = algbw * 2(n-1)/n = algbw = S / t, so busbw ~= the one-direction link rate: rate_bits / 8 / 1e9 GB/s.

Needs root (see docs/lab.md). Every lab is torn down, also on error or Ctrl-C. Last line: measured=K/K (every rate's
bench exited 0 on both hosts and measured a busbw above 0; it stops with an error at the first that did not)."""

from __future__ import annotations

import argparse
import os

from . import labrun
from .labrun import nl

PORT = 29500
UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def rate_bits(rate: str) -> float:
    for unit, mult in UNITS.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * mult
    raise SystemExit(f"rate {rate!r}: use kbit/mbit/gbit")


def measure(rate: str, size: str, iters: int, timeout: int) -> dict:
    name = labrun.lab_name("br")
    try:
        state = nl.up(name, 2, [["slow-link", "h1", rate, "both"], ["slow-link", "h2", rate, "both"]],
                      owner_pid=os.getpid())
        args = {h: ["bench", "--ops", "all_reduce", "--sizes", size, "--nnodes", 2, "--node-rank", i,
                    "--master-addr", state.ip("h1"), "--master-port", PORT, "--nproc-per-node", 1,
                    "--iters", iters, "--warmup", 1, "--timeout", timeout, "--quiet"]
                for i, h in enumerate(state.hosts)}
        runs = labrun.ncclcheck(state, args, deadline=timeout * 3)
    finally:
        nl.down(name)
    # one report per job: node 0 (h1) writes it, the other node writes none
    bad = {h: (r.rc, r.output[-600:]) for h, r in runs.items() if r.rc != 0 or (h == "h1" and r.report is None)}
    if bad:
        raise SystemExit(f"{rate}: bench failed on {bad}")
    rows = [r for r in runs["h1"].report["bench"] if r["op"] == "all_reduce"]
    return rows[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rates", default="200mbit,500mbit", help="tc rates (default 200mbit,500mbit)")
    ap.add_argument("--size", default="64M", help="all_reduce size (default 64M)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=120, help="bench --timeout (default 120)")
    a = ap.parse_args(argv)
    if why := nl.missing_requirements():
        raise SystemExit("needs " + ", ".join(why))
    print(f"{'rate':>9} {'link GB/s':>10} {'busbw GB/s':>11} {'algbw GB/s':>11} {'ratio':>6}")
    rates = a.rates.split(",")
    measured = 0
    for rate in rates:
        row = measure(rate, a.size, a.iters, a.timeout)
        measured += row["busbw_gbps"] > 0
        link = rate_bits(rate) / 8 / 1e9
        print(f"{rate:>9} {link:>10.4f} {row['busbw_gbps']:>11.4f} {row.get('algbw_gbps', float('nan')):>11.4f} "
              f"{row['busbw_gbps'] / link:>6.2f}", flush=True)
    print("\ntarget: ratio >= 0.9")
    # the correctness field (the ratio is a timing): every rate's bench exited 0 on both hosts with a busbw above 0
    print(f"measured={measured}/{len(rates)}")
    return 0 if measured == len(rates) else 1


if __name__ == "__main__":
    main()
