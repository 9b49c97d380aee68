#!/usr/bin/env python3
"""False-alarm and detection rates of `ncclcheck links` on a 4-host namespace lab (issue 13's acceptance figures).

    sudo python3 scripts/links_rates.py --healthy 10 --faulty 5 --rate 200mbit

Three series on one lab of 4 hosts (unshaped veth unless --base-rate: the noisy case, where transfers vary ~2x):
- healthy: every run that names any slow node or link is a false alarm (goal 0 of --healthy);
- slow host: h2 (node 1) shaped to --rate; a hit names node 1 and nothing else (goal --faulty of --faulty);
- slow path: only h1 -> h2 (node 0 -> node 1) shaped; a hit names link 0-1 and no node (goal --faulty of --faulty).
Prints one line per run (verdict and the matrix' spread) and the totals; --json writes them too. Exits 1 on any miss.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one_run(lab, args: argparse.Namespace) -> dict:
    hosts = lab.hosts
    cmd = {h: ["links", "--nnodes", str(len(hosts)), "--node-rank", str(i), "--master-addr", lab.ip(hosts[0]),
               "--master-port", "29500", "--nproc-per-node", "1", "--timeout", str(args.timeout),
               "--size", args.size, "--iters", str(args.iters)] for i, h in enumerate(hosts)}
    t0 = time.monotonic()
    runs = lab.ncclcheck(cmd, deadline=args.deadline)
    rep = runs[hosts[0]].report
    if not rep or not isinstance(rep.get("links"), dict):
        return {"error": f"rc {runs[hosts[0]].rc}: {runs[hosts[0]].stderr[-500:]}", "wall_s": time.monotonic() - t0}
    sec = rep["links"]
    cells = [v for row in sec["matrix_gbps"] for v in row if v is not None]
    return {"slow_nodes": sec["slow_nodes"], "slow_links": [[s["a"], s["b"]] for s in sec["slow"]],
            "min_gbps": min(cells), "max_gbps": max(cells), "reference_gbps": sec.get("reference_gbps"),
            "exit_code": rep["exit_code"], "wall_s": round(time.monotonic() - t0, 1),
            "matrix_gbps": [[None if v is None else round(v, 4) for v in row] for row in sec["matrix_gbps"]]}


def series(lab, name: str, runs: int, hit, args: argparse.Namespace) -> list:
    out = []
    for i in range(runs):
        r = one_run(lab, args)
        r["hit"] = bool(hit(r)) if "error" not in r else False
        out.append(r)
        brief = {k: v for k, v in r.items() if k != "matrix_gbps" or not r["hit"]}  # the matrix when it missed
        print(f"{name:10s} run {i + 1:2d}: {'OK ' if r['hit'] else 'BAD'} {json.dumps(brief)}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--healthy", type=int, default=10)
    ap.add_argument("--faulty", type=int, default=5)
    ap.add_argument("--rate", default="200mbit", help="the slow host's / slow path's rate")
    ap.add_argument("--base-rate", default="", help="shape every host to this first ('' = unshaped, noisy)")
    ap.add_argument("--size", default="4M")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--deadline", type=float, default=240.0)
    ap.add_argument("--only", choices=["healthy", "slow_host", "slow_path"], action="append",
                    help="run only these series (repeatable; default all three)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    from .netlab.harness import Lab

    lab = Lab(4)
    results: dict = {}
    try:
        def base() -> None:
            lab.healthy()
            for h in lab.hosts if args.base_rate else []:
                lab.slow_link(h, args.base_rate)

        only = args.only or ["healthy", "slow_host", "slow_path"]
        if "healthy" in only:
            base()
            results["healthy"] = series(lab, "healthy", args.healthy,
                                        lambda r: not r["slow_nodes"] and not r["slow_links"], args)
        if "slow_host" in only:
            base()
            lab.slow_link("h2", args.rate)
            results["slow_host"] = series(lab, "slow host", args.faulty,
                                          lambda r: r["slow_nodes"] == [1] and not r["slow_links"], args)
        if "slow_path" in only:
            base()
            lab.slow_pair("h1", "h2", args.rate)
            results["slow_path"] = series(lab, "slow path", args.faulty,
                                          lambda r: not r["slow_nodes"] and r["slow_links"] == [[0, 1]], args)
    finally:
        lab.down()
    h, s, p = (results.get(k, []) for k in ("healthy", "slow_host", "slow_path"))
    if h:
        print(f"false alarms: {sum(not r['hit'] for r in h)} of {len(h)} healthy runs (goal 0)")
    if s:
        print(f"slow host named alone: {sum(r['hit'] for r in s)} of {len(s)} (goal {len(s)})")
    if p:
        print(f"slow path named as the link, no node blamed: {sum(r['hit'] for r in p)} of {len(p)} (goal {len(p)})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["hit"] for runs in results.values() for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
