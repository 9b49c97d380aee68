#!/usr/bin/env python3
"""How long `ncclcheck links` takes on N lab hosts against one pair's time x (N-1) (the circle-method promise).

    sudo python scripts/bench_links.py --hosts 8 --size 8M --iters 3 --rate 200mbit

Every host's eth0 is shaped to --rate (tbf, both directions), so a pair is limited by its own hosts' links and not
by the CPU all namespaces share: pairs in a round really can run side by side, as on a cluster. The script first
times `links` on 2 hosts (one pair, one round), then on N hosts, and prints the ratio

    wall(N) / ((N-1) x wall(2))      ~1 means the rounds ran their pairs in parallel;
                                     N/2 would mean the pairs ran one after another.

Times are the links job's own (`links.wall_s` in the report: rounds only, no world formation); the CLI's whole wall
time is printed too. Needs root, iproute2 and nftables (see docs/lab.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(lab, hosts: list[str], args: argparse.Namespace) -> tuple[float, float, dict]:
    n = len(hosts)
    cmd = {h: ["links", "--nnodes", str(n), "--node-rank", str(i), "--master-addr", lab.ip(hosts[0]),
               "--master-port", "29500", "--nproc-per-node", "1", "--timeout", str(args.timeout),
               "--size", args.size, "--iters", str(args.iters)]
           for i, h in enumerate(hosts)}
    t0 = time.monotonic()
    runs = lab.ncclcheck(cmd, deadline=args.deadline)
    wall = time.monotonic() - t0
    rep = runs[hosts[0]].report
    if not rep or not isinstance(rep.get("links"), dict):
        err = runs[hosts[0]].stderr[-2000:]
        raise SystemExit(f"links on {n} hosts wrote no links section (rc {runs[hosts[0]].rc}):\n{err}")
    return float(rep["links"]["wall_s"]), wall, rep["links"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--size", default="8M")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--rate", default="200mbit", help="tbf rate on every host ('' for unshaped)")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--deadline", type=float, default=600.0)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)

    from .netlab.harness import Lab

    n = args.hosts
    scenario = [("slow-link", f"h{i + 1}", args.rate) for i in range(n)] if args.rate else None
    lab = Lab(n, scenario)
    try:
        pair_s, pair_wall, _ = run(lab, lab.hosts[:2], args)
        all_s, all_wall, sec = run(lab, lab.hosts, args)
    finally:
        lab.down()
    rounds = len(sec.get("rounds") or [])
    expected = (n - 1) * pair_s
    serial = n * (n - 1) / 2 * pair_s
    figures = {
        "hosts": n, "size": args.size, "iters": args.iters, "rate": args.rate, "rounds": rounds,
        "pair_s": round(pair_s, 3), "links_s": round(all_s, 3), "expected_s": round(expected, 3),
        "ratio": round(all_s / expected, 3) if expected else None, "serial_estimate_s": round(serial, 3),
        "cli_wall_2_s": round(pair_wall, 2), "cli_wall_n_s": round(all_wall, 2),
        "slow_nodes": sec.get("slow_nodes"), "slow": sec.get("slow"),
    }
    print(f"links on {n} hosts ({args.size} x {args.iters}, every host at {args.rate or 'full speed'}):")
    print(f"  one pair (2 hosts, 1 round):  {pair_s:7.2f} s")
    print(f"  {n} hosts, {rounds} rounds:          {all_s:7.2f} s")
    print(f"  (n-1) x pair:                 {expected:7.2f} s  -> ratio {figures['ratio']}  (target ~1)")
    print(f"  all pairs one by one would be {serial:7.2f} s  ({n * (n - 1) // 2} pairs)")
    print(f"  CLI wall incl. world formation: 2 hosts {pair_wall:.1f} s, {n} hosts {all_wall:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
