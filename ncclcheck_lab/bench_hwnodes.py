"""`ncclcheck health` on fake nodes built from real answers, through both GPU sources, with its correctness fields;
and how long health takes on a node whose nvidia-smi answers each call slowly (issue 62).

The nodes: every folder of tests/data/hwnodes (nvidia-smi texts, kernel logs, PCI functions and ibstat that operators
posted, each with an expert's verdict: ncclcheck_lab/hwcorpus.py) and fakehw's HGX H100 with one staged fault each
(hwcorpus.staged_nodes). Each node is read twice, through NVML (the answer set NVML gives on that node) and through
nvidia-smi (its texts), and judged as health judges a node. Then `ncclcheck health` runs as Slurm runs it, a fresh
process, on fakehw's 8-GPU node without the NVML binding and an nvidia-smi that answers each call after --smi-delay
seconds (a node without persistence mode), against the same command on a node with no GPU (the reference):

    python3 scripts/bench_hwnodes.py [--runs 3] [--smi-delay 0.3] [--gpus 8] [--only SUBSTRING] [--verbose]

    nodes=N           posted + staged nodes, each read through both sources
    faults_named=K/K  the expert's findings named: the check failed or warned, naming the GPU (bus id, else index)
                      and the action
    false_alarms=0    checks that failed or warned where the expert named nothing (a healthy node gives none)
    disagreements=0   nodes on which a check's status or action differs between NVML and nvidia-smi
    health_s          the median wall time of `ncclcheck health` on the slow-nvidia-smi node (target: 2 s)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from . import bench_health, fakehw, hwcorpus

TARGET_S = 2.0


def judge_all(only: str = "", verbose: bool = False) -> dict:
    """Every node through both sources: {"nodes", "posted", "staged", "named", "expected", "false", "disagree",
    "lines"}."""
    posted = [hwcorpus.load(p) for p in hwcorpus.nodes()]
    staged = hwcorpus.staged_nodes()
    nodes = [n for n in posted + staged if only in n["name"]]
    out = {"nodes": len(nodes), "posted": sum(1 for n in nodes if "spec" not in n),
           "staged": sum(1 for n in nodes if "spec" in n), "named": 0, "expected": 0, "false": 0, "disagree": 0,
           "lines": []}
    base = Path(tempfile.mkdtemp(prefix="bench_hwnodes."))
    try:
        for k, node in enumerate(nodes):
            verdicts = {}
            for src in ("nvml", "nvidia-smi"):
                v = verdicts[src] = hwcorpus.judge(base / f"{k}-{src}", node, src)
                sc = hwcorpus.score(node, v)
                out["named"] += sc["named"]
                out["expected"] += sc["expected"]
                out["false"] += len(sc["false_alarms"])
                for m in sc["missed"]:
                    out["lines"].append(f"MISSED {node['name']} [{src}] {m}")
                for fa in sc["false_alarms"]:
                    out["lines"].append(f"FALSE ALARM {node['name']} [{src}] {fa}")
            a, b = hwcorpus.outcome(verdicts["nvml"]), hwcorpus.outcome(verdicts["nvidia-smi"])
            diff = {cid: (a.get(cid), b.get(cid)) for cid in sorted(set(a) | set(b)) if a.get(cid) != b.get(cid)}
            if diff:
                out["disagree"] += 1
                out["lines"].append(f"DISAGREE {node['name']}: {diff}")
            if verbose:
                bad = sorted({c["id"] for c in verdicts["nvidia-smi"]["results"] if c["status"] in ("fail", "warn")})
                out["lines"].append(f"{node['name']}: {', '.join(bad) or 'healthy'}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out


def slow_smi(runs: int, delay_s: float, gpus: int) -> tuple:
    """(median seconds of health on the slow-nvidia-smi node, median of the no-GPU reference, nvidia-smi calls a
    run, exit codes)."""
    base = Path(tempfile.mkdtemp(prefix="bench_hwnodes."))
    try:
        spec = fakehw.node_spec(gpus=gpus, nvswitches=4 if gpus >= 8 else 1, ib_ports=0)
        spec["smi_delay_s"] = delay_s
        slow, ref, rcs, calls = [], [], set(), 0
        for i in range(runs):
            s, rc, doc = bench_health.run_health(base / "slow", spec, base / "slow.json", with_pynvml=False)
            slow.append(s)
            rcs.add(rc)
            # the GPUs' hardware checks (the registry's, as bench_health judges them); the node has no HCA
            bad = [cid for cid in bench_health.not_passing(doc) if cid.startswith("gpu.")]
            if bad:
                print(f"the slow node's GPU checks did not pass: {bad}", file=sys.stderr)
                rcs.add(-1)
            s, _rc, _doc = bench_health.run_health(base / "empty", bench_health.empty_spec(), base / "empty.json")
            ref.append(s)
            if i == 0:
                log = base / "slow" / "spec.json.calls"
                calls = len(log.read_text().splitlines()) if log.exists() else 0
        return statistics.median(slow), statistics.median(ref), calls, rcs
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of the slow-nvidia-smi node (the median is printed)")
    ap.add_argument("--smi-delay", type=float, default=0.3, help="seconds each nvidia-smi call takes")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--only", default="", help="only the nodes whose name holds this")
    ap.add_argument("--verbose", action="store_true", help="one line per node")
    args = ap.parse_args(argv)
    got = judge_all(args.only, args.verbose)
    for line in got["lines"]:
        print(line)
    h, r, calls, rcs = slow_smi(args.runs, args.smi_delay, args.gpus) if args.runs > 0 else (None, None, 0, set())
    timing = (f"slow nvidia-smi ({args.smi_delay:g} s a call, {args.gpus} GPUs, {calls} calls): health_s={h:.2f} "
              f"reference_s={r:.2f} target_s={TARGET_S:g}; ") if h is not None else ""
    fields = {"nodes": got["nodes"], "faults_named": f"{got['named']}/{got['expected']}",
              "false_alarms": got["false"], "disagreements": got["disagree"]}
    print(f"health on {got['nodes']} fake nodes ({got['posted']} posted, {got['staged']} staged) through NVML and "
          f"nvidia-smi each; {timing}" + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
    ok = got["named"] == got["expected"] and not got["false"] and not got["disagree"] and -1 not in rcs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
