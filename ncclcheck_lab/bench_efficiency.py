#!/usr/bin/env python3
"""Is the bound right? Lab scenarios whose links are shaped at known rates (tbf, as the lab tests shape them); for
each, `ncclcheck bench` (all_reduce) or `ncclcheck links` across the hosts, and the report's bound against the rate
that was configured: the shaper of the slowest host; for an unshaped veth, no bound (its 10 Gb/s is the kernel's
fixed figure, not a line rate: the report says the bound is unknown and why, issue 44 E).

Prints one line per scenario (measured GB/s, bound, efficiency, what the report says bounds it, right or not) and
last `scenarios=N bound_right=K`. `--save DIR` keeps each scenario's report (tests/data/bounds holds one kept this
way). Needs root (docs/lab.md); every lab is torn down, also on error or Ctrl-C. The efficiencies it prints are the
calibration of the TCP-socket row of EXPECTED_FRACTION (ncclcheck/nccl/bounds.py, docs/bounds.md).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from . import labrun
from .labrun import nl

PORT = 29500
UNITS = {"mbit": 1e6, "gbit": 1e9}


def gbps(rate: str) -> float:
    for unit, mult in UNITS.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * mult / 8 / 1e9
    raise SystemExit(f"rate {rate!r}: use mbit/gbit")


# name, command, per-host rates (None = unshaped), the bound the report must give, the node it must name
SCENARIOS = [
    ("bench 2 hosts at 1gbit", "bench", ["1gbit", "1gbit"]),
    ("bench 2 hosts at 200mbit", "bench", ["200mbit", "200mbit"]),
    ("bench 3 hosts, h3 at 200mbit", "bench", ["1gbit", "1gbit", "200mbit"]),
    ("bench 2 hosts at 500mbit", "bench", ["500mbit", "500mbit"]),
    ("bench 2 hosts unshaped veth", "bench", [None, None]),
    ("links 3 hosts, h2 at 200mbit", "links", ["1gbit", "200mbit", "1gbit"]),
    ("links 2 hosts unshaped veth", "links", [None, None]),
]


def expected(rates: list) -> tuple:
    """(bound GB/s or None, node whose link sets it or None when every node has the same, virtual). Unshaped hosts
    (veth) set no bound: a figure the kernel fixes for a virtual NIC is not a line rate."""
    shaped = [gbps(r) for r in rates if r]
    if not shaped:
        return None, None, True
    low = min(shaped)
    at = [i for i, r in enumerate(rates) if r and gbps(r) == low]
    return low, (at[0] if len(at) == 1 else None), False


def _same(got, want) -> bool:
    """A bound equal to the configured one; None (unknown) only where none was configured."""
    return got is None if want is None else got is not None and abs(got - want) < 1e-6 * want


def run(label: str, cmd: str, rates: list, size: str, iters: int, timeout: int, save: str) -> dict:
    name = labrun.lab_name("be")
    # bench: both directions shaped (a ring's bound is its slowest node either way); links: each host's egress only,
    # the limit its own tc shows (a -> b is bounded by a's egress and b's ingress: docs/bounds.md)
    sc = [["slow-link", f"h{i + 1}", r, "both" if cmd == "bench" else "egress"] for i, r in enumerate(rates) if r]
    try:
        state = nl.up(name, len(rates), sc, owner_pid=os.getpid())
        extra = ["--ops", "all_reduce", "--sizes", size, "--iters", iters, "--warmup", 1] if cmd == "bench" else \
            ["--size", size, "--iters", iters]
        args = {h: [cmd, *extra, "--nnodes", len(rates), "--node-rank", i, "--master-addr", state.ip("h1"),
                    "--master-port", PORT, "--nproc-per-node", 1, "--timeout", timeout, "--quiet"]
                for i, h in enumerate(state.hosts)}
        runs = labrun.ncclcheck(state, args, deadline=timeout * 3)
    finally:
        nl.down(name)
    rep = runs["h1"].report
    if rep is None:
        raise SystemExit(f"{label}: no report from h1 (rc {runs['h1'].rc}): {runs['h1'].output[-800:]}")
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
        slug = label.replace(" ", "_").replace(",", "")
        (Path(save) / f"{slug}.json").write_text(json.dumps(rep, indent=1) + "\n")
    want, node, virtual = expected(rates)
    if cmd == "bench":
        row = [r for r in rep["bench"] if r["op"] == "all_reduce"][-1]
        measured, bound, by, eff = row["busbw_gbps"], row.get("bound_gbps"), row.get("bound_by") or "", \
            row.get("efficiency")
        right = _same(bound, want) and (node is None or by.startswith(f"node {node} ")) and \
            (not virtual or "veth/virtual" in by)
    else:
        sec = rep["links"]
        pairs = [(a, b) for a in range(len(rates)) for b in range(len(rates)) if a != b]
        measured = min(sec["matrix_gbps"][a][b] for a, b in pairs if sec["matrix_gbps"][a][b] is not None)
        a, b = min(pairs, key=lambda p: sec["bound_gbps"][p[0]][p[1]] or float("inf"))
        bound, by = sec["bound_gbps"][a][b], sec["bound_by"][a][b] or ""
        # a wrong bound (a figure above it) has no efficiency: "-" when every direction beat its bound
        eff = min((x for a2, b2 in pairs if (x := sec["efficiency"][a2][b2]) is not None), default=None)
        # every direction's bound is its sender's egress shaper (the receivers' ingress is an unshaped veth: no
        # bound); an unshaped sender's is unknown
        pair_ok = all(_same(sec["bound_gbps"][p][q], gbps(rates[p]) if rates[p] else None) for p, q in pairs)
        right = pair_ok and (node is None or by.startswith(f"node {node} ")) and (not virtual or "veth/virtual" in by)
    return {"label": label, "measured": measured, "bound": bound, "want": want, "eff": eff, "by": by,
            "right": right}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="16M", help="all_reduce / transfer size (default 16M)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=120, help="ncclcheck --timeout (default 120)")
    ap.add_argument("--only", help="run the scenarios whose label contains this text")
    ap.add_argument("--save", metavar="DIR", help="keep each scenario's report JSON in DIR")
    a = ap.parse_args(argv)
    if why := nl.missing_requirements():
        raise SystemExit("needs " + ", ".join(why))
    chosen = [s for s in SCENARIOS if not a.only or a.only in s[0]]
    if not chosen:
        ap.error(f"no scenario's label contains {a.only!r}")
    right = 0
    print(f"{'scenario':32} {'GB/s':>8} {'bound':>8} {'want':>8} {'eff':>6}  right  bound by")
    for label, cmd, rates in chosen:
        r = run(label, cmd, rates, a.size, a.iters, a.timeout, a.save)
        right += bool(r["right"])
        eff = f"{r['eff']:.3f}" if r["eff"] is not None else ("-" if r["bound"] is None else "wrong")
        bound = f"{r['bound']:.4g}" if r["bound"] is not None else "none"
        want = f"{r['want']:.4g}" if r["want"] is not None else "none"
        ok = "yes" if r["right"] else "NO"
        print(f"{label:32} {r['measured']:8.4g} {bound:>8} {want:>8} {eff:>6}  {ok:5}  {r['by']}", flush=True)
    print(f"scenarios={len(chosen)} bound_right={right}")
    return 0 if right == len(chosen) else 1


if __name__ == "__main__":
    main()
