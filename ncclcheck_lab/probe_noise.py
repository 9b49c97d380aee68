"""How often watch's transfer probe names a healthy host or link where every transfer is CPU-bound, not link-bound.

The probe (ncclcheck/live/straggle.probe) measures 1 MiB downloads between the hosts of a running job and names a
host whose directions are slow in most rounds and whose best round still lacks straggle.CAPACITY_FLOOR of the
others' typical rate. Here every "link" is loopback and every responder (ncclcheck_lab/livesim.py: 6 simulated
ranks, 2 per host, real responders registered in a real TCPStore) runs in this one process beside --busy processes
that spin, so what a download measures is how the CPU fell, not a link: nothing must be named. Each probe runs
against fresh responders (a responder pays each blob from its Spend: back-to-back probes would be refused).

    python3 scripts/probe_noise.py [--probes 60] [--busy 2] [--json]

One line: probes, busy, named (probes that named a host or a direction: the false alarms), the largest share of
the others' typical rate a host's (and a direction's) best round lacked among the units slow in half their rounds
or more (probe.lost), the rounds the probes took, and sim_errors (probes whose responders never registered or whose
probe measured nothing: no figure). Exits 1 when a probe named something, 3 when the simulation failed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Optional

from ncclcheck.live import pace, straggle
from ncclcheck.live.auth import Session
from ncclcheck.rendezvous.budget import FIXED

from . import livesim
from .loopstore import loopback_store
from .slowsim import Job

WORLD, PER_HOST = 6, 2
SPIN = "while True: pass"


def one_probe() -> Optional[dict]:
    """One probe of a fresh simulated job (its suspect: h3, as watch's when a rank there is late) -> its result, or
    None when the responders did not register."""
    store = loopback_store()
    port = store.port
    rs = livesim.start(livesim.laid(Job(world=WORLD, per_host=PER_HOST, step_us=40_000, steps=100_000), 40),
                       list(range(WORLD)), port)
    try:
        if not all(r.registered.wait(30) for r in rs):
            return None
        records = {r.rank: r.record() for r in rs}
        asker = pace.Caller(Session("none", None, port, FIXED), rs[0].job, rs[0].run)  # watch's asker, duck-typed
        return straggle.probe(list(range(WORLD)), {"h3"}, records, asker, FIXED)
    finally:
        for r in rs:
            r.close()
        del store


def measure(probes: int, busy: int) -> dict:
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    results: list = []
    try:
        for _ in range(probes):
            results.append(one_probe())
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    done = [r for r in results if r and r.get("said") and r.get("rounds")]
    lost = [(" -> " in u, k["best"]) for r in done for u, k in (r.get("lost") or {}).items()]
    return {"probes": probes, "busy": busy, "named": sum(1 for r in done if r["hosts"] or r["pairs"]),
            "host_best_lost_max": max((b for pair, b in lost if not pair), default=None),
            "pair_best_lost_max": max((b for pair, b in lost if pair), default=None),
            "floors": {"host": straggle.CAPACITY_FLOOR, "pair": straggle.PAIR_CAPACITY_FLOOR},
            "rounds_median": statistics.median([r["rounds"] for r in done]) if done else None,
            "sim_errors": len(results) - len(done)}


def render(res: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in res.items() if k != "floors") + \
        f" floors=host:{res['floors']['host']},pair:{res['floors']['pair']}"


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=60)
    ap.add_argument("--busy", type=int, default=2, help="spinning processes beside the simulated job")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.probes < 1 or a.busy < 0:
        print("probe_noise: --probes must be 1 or more and --busy 0 or more", file=sys.stderr)
        return 2
    res = measure(a.probes, a.busy)
    print(json.dumps(res) if a.json else render(res), flush=True)
    return 3 if res["sim_errors"] else 1 if res["named"] else 0


if __name__ == "__main__":
    sys.exit(main())
