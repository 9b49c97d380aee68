"""How long `ncclcheck health` takes on a node with every hardware source present, against the same command on a
node with none, measured in the same run (issue 54: well inside Slurm's 60 s; target under 2 s).

The node is a fake HGX tree (ncclcheck_lab/fakehw.py): 8 GPUs and 8 InfiniBand HCAs two per PCIe switch,
NVSwitches, GPUDirect RDMA, every error counter, a kernel log, a fake pynvml and nvidia-smi answering from the node's
spec. `ncclcheck health` runs as Slurm runs it, a fresh process each time (`--dry-run --drain`), N times on the
healthy node, N times on an empty one (no GPU, no HCA: the reference: Python, the CLI and the node's other checks),
then once on a copy with one fault per hardware class staged, GPU and fabric, against the healthy node's last report
as --baseline (the IB counters' fault is a link that flapped 6 times since it). Printed with its correctness fields:

    python3 scripts/bench_health.py [--runs 5] [--gpus 8] [--nvswitches 4] [--ib-ports 8] [--keep DIR]

    health_s        the median wall time of `ncclcheck health` on the full node (its counter window included)
    reference_s     the same on the empty node; ratio = health_s / reference_s
    interval_s      the run's one counter window (every counter, GPUs' and fabric's, read twice), part of health_s
    healthy_hw=0    hardware checks (the registry's) that did not pass on the healthy node (skips included)
    faults_named=K/K  staged faults whose check failed or warned naming the device (a GPU's index and bus id, an HCA
                    port, the node) and the action
    exit=1          health's exit code on the faulty node (the node would be drained)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from . import fakehw

KEYS = ("NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT", "NCCLCHECK_FAKE_HW", "PATH",
        "PYTHONPATH")
TIMEOUT_S = 120.0


def faults(spec: dict) -> list:
    """[(check id, GPU index, action, change)]: one staged fault per GPU class, each on its own GPU (modulo their
    count)."""
    n = len(spec["gpus"])
    staged = [("gpu.memory", "reset the GPU", {"remapped_rows": [0, 0, True, False]}),
              ("gpu.xid", "reboot", None),
              ("gpu.nvlink", "reboot" if spec["nvswitches"] else "reset the GPU",
               {"nvlink": {**fakehw.gpu_spec(0, "x")["nvlink"], "down": [4]}}),
              ("gpu.pcie", "isolate the node", None),
              ("gpu.clocks", "isolate the node", {"clocks": 0x41}),
              ("gpu.fabric", "reboot", {"fabric": {"state": 1, "status": 0}}),
              ("gpu.mig", "reset the GPU", {"mig": [1, 1]}),
              ("gpu.persistence", "monitor", {"persistence": False})]
    if not spec["nvswitches"]:
        staged = [s for s in staged if s[0] != "gpu.fabric"]
    return [(cid, i % n, act, change) for i, (cid, act, change) in enumerate(staged)]


FAR_HCA = "=mlx5_0"  # NCCL_IB_HCA on the faulty node: the GPUs of the other switches get a far NIC


def fabric_faults(spec: dict) -> list:
    """[(check id, what the summary names, action, {finding key: value})]: the fabric's classes, staged once each:
    no GPUDirect RDMA, a link that flapped since the baseline, a RoCE port without its v2 GID, NCCL_IB_HCA putting
    GPU 2 (another switch's) on a far NIC. Each needs what it judges: HCAs for all, three GPUs for the last."""
    ports, gpus = spec["ib_ports"], spec["gpus"]
    out = []
    if ports and gpus:
        out.append(("gdr.support", "this node", "isolate the node", {}))
    if len(ports) >= 2:
        out.append(("ib.counters", f"{ports[1]}/1", "isolate the node", {"port": f"{ports[1]}/1"}))
    if len(ports) >= 3:
        out.append(("health.ib_ports", f"{ports[-1]}:1", "isolate the node", {"port": f"{ports[-1]}/1"}))
    if len(gpus) >= 3 and len(ports) >= 3:
        out.append(("pci.affinity", f"GPU 2 ({gpus[2]['bus_id']}", "restart the job", {"index": 2}))
    return out


def faulty_spec(spec: dict) -> tuple:
    """(the faulty node's spec, [(check id, what its summary names, action, {finding key: value})])."""
    out = json.loads(json.dumps(spec))
    plan = []
    for cid, i, act, change in faults(spec):
        g = out["gpus"][i]
        if change:
            g.update(change)
        if cid == "gpu.xid":
            out["kernel_log"].append((3600.0, fakehw.xid_line(g["bus_id"], 79, "GPU has fallen off the bus.")))
        if cid == "gpu.pcie":
            g["pcie"]["width"] = 8
        plan.append((cid, f"GPU {i} ({g['bus_id']}", act, {"index": i}))
    fabric = fabric_faults(spec)
    for cid, _named, _act, _key in fabric:
        if cid == "gdr.support":
            out.update(peermem=None, nvidia_module="proprietary")
        if cid == "ib.counters":
            out["ib_counters"][spec["ib_ports"][1]] = {"link_downed": 6}
        if cid == "health.ib_ports":
            out["ib_link_layer"][spec["ib_ports"][-1]] = "Ethernet"
    return out, plan + fabric


def empty_spec() -> dict:
    spec = fakehw.node_spec(gpus=0, nvswitches=0, ib_ports=0)
    spec["kmsg_readable"] = False
    return spec


def run_health(root: Path, spec: dict, json_out: Path, baseline: Optional[Path] = None,
               env_vars: Optional[dict] = None, with_pynvml: bool = True) -> tuple:
    """(seconds, exit code, report) of one `ncclcheck health` child on the node `spec` describes (without the fake
    binding: read through its nvidia-smi)."""
    env = fakehw.install(root, spec, with_pynvml=with_pynvml)
    # the node's GPUs are the spec's: CUDA_VISIBLE_DEVICES names the machine's (a test's CPU world sets it empty)
    child = {k: v for k, v in os.environ.items() if not k.startswith(("NCCLCHECK_", "NCCL_"))
             and k != "CUDA_VISIBLE_DEVICES"}
    child.update({k: env[k] for k in KEYS}, **(env_vars or {}))
    argv = [sys.executable, "-m", "ncclcheck", "health", "--gpus", str(len(spec["gpus"])), "--dry-run", "--drain",
            "--node", "bench", "--json", str(json_out)] + (["--baseline", str(baseline)] if baseline else [])
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=child, capture_output=True, text=True, timeout=TIMEOUT_S)
    secs = time.perf_counter() - t0
    try:
        doc = json.loads(json_out.read_text())
    except (OSError, ValueError):
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
        doc = {}
    return secs, p.returncode, doc


def not_passing(doc: dict) -> list:
    """The hardware checks (the registry's) that did not pass."""
    from ncclcheck.checks.registry import hardware_ids

    hw = set(hardware_ids())
    return sorted({c["id"] for c in doc.get("checks") or [] if c["id"] in hw and c["status"] != "pass"})


def named(doc: dict, plan: list) -> int:
    """Staged faults whose check failed or warned naming the device and the action (a finding with that action and
    those keys in its evidence)."""
    hit = 0
    for cid, device, act, keys in plan:
        if any(c["id"] == cid and c.get("status") in ("fail", "warn") and device in c.get("summary", "") and any(
                f.get("action") == act and all(f.get(k) == v for k, v in keys.items())
                for f in (c.get("evidence") or {}).get("findings", [])) for c in doc.get("checks") or []):
            hit += 1
    return hit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of each node (the median is printed)")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--nvswitches", type=int, default=4)
    ap.add_argument("--ib-ports", type=int, default=8)
    ap.add_argument("--keep", metavar="DIR", help="build the trees here and keep them")
    args = ap.parse_args(argv)
    base = Path(args.keep or tempfile.mkdtemp(prefix="bench_health."))
    try:
        spec = fakehw.node_spec(gpus=args.gpus, nvswitches=args.nvswitches, ib_ports=args.ib_ports)
        full, ref, doc = [], [], {}
        for _ in range(args.runs):  # interleaved, so a busy moment of the machine weighs on both alike
            s, _rc, doc = run_health(base / "full", spec, base / "full.json")
            full.append(s)
            s, _rc, _ = run_health(base / "empty", empty_spec(), base / "empty.json")
            ref.append(s)
        healthy_bad = not_passing(doc)
        bad_spec, plan = faulty_spec(spec)
        # the healthy node's last report is the faulty one's baseline: same host, same boot, counters saved earlier
        _s, rc, bad_doc = run_health(base / "faulty", bad_spec, base / "faulty.json", baseline=base / "full.json",
                                     env_vars={"NCCL_IB_HCA": FAR_HCA})
        hit = named(bad_doc, plan)
        interval = (((doc.get("nodes") or [{}])[0].get("facts") or {}).get("counters") or {}).get("interval_s")
        h, r = statistics.median(full), statistics.median(ref)
        fields = {"healthy_hw": len(healthy_bad), "faults_named": f"{hit}/{len(plan)}", "exit": rc}
        print(f"ncclcheck health on a fake node of {args.gpus} GPUs, {args.nvswitches} NVSwitches, {args.ib_ports} "
              f"IB ports; median of {args.runs}: health_s={h:.3f} reference_s={r:.3f} ratio={h / r:.2f} "
              f"interval_s={interval}; " + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
        if healthy_bad:
            print("not passing on the healthy node: " + ", ".join(healthy_bad), file=sys.stderr)
        good = not healthy_bad and hit == len(plan) and rc == 1
        return 0 if good else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
