"""What arming costs a healthy job: N small all_reduces (gloo, CPU, loopback, 2 ranks under torchrun) timed on rank 0,
unarmed, with only the flight recorder's variables set (what `recommend --postmortem --format env` arms), with
ncclcheck.arm(DIR, live=False) (the same variables plus its hooks) and with ncclcheck.arm(DIR) (that and the
responder that registers the rank for `ncclcheck watch`, arm()'s and guard(postmortem_dir=)'s default), runs
interleaved; prints the median time of each and the ratios to the unarmed median. The job is
tests/fixtures/armed_job.py's healthy case. Last line: clean_runs=N/N (every run exited 0, printed its time and left
no dump; the script stops with exit 1 at the first that did not).

    python3 scripts/bench_arm.py [--iters 2000] [--repeats 5] [--nproc 2]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(REPO, "tests", "fixtures", "armed_job.py")
MODES = ("unarmed", "env", "nolive", "armed")  # "nolive": arm(DIR, live=False); "armed": arm(DIR), live


def one(mode: str, iters: int, nproc: int, pm: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_FR", "TORCH_NCCL", "NCCL_"))}
    env.update(PYTHONPATH=REPO, OMP_NUM_THREADS="1", ITERS=str(iters),
               ARM={"armed": "1", "nolive": "nolive"}.get(mode, "0"))
    if mode == "env":
        from ncclcheck.recommend.postmortem import recommend_postmortem

        env.update({r.name: r.value for r in recommend_postmortem(pm)})
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", JOB,
            "healthy", pm]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    m = re.search(r"HEALTHY rank=0 all_reduce_s=([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"{mode}: torchrun exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    if os.listdir(pm):
        sys.exit(f"{mode}: a healthy job wrote {os.listdir(pm)}")
    return float(m.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--nproc", type=int, default=2)
    a = ap.parse_args(argv)
    times: dict = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="bench-arm-") as tmp:
        for i in range(a.repeats):
            for mode in MODES:
                pm = os.path.join(tmp, f"{mode}{i}")
                os.makedirs(pm)
                times[mode].append(one(mode, a.iters, a.nproc, pm))
    base = statistics.median(times["unarmed"])
    print(f"{a.iters} all_reduce of 1 KiB, gloo, {a.nproc} ranks, {a.repeats} runs each (median, rank 0):")
    for mode in MODES:
        med = statistics.median(times[mode])
        print(f"  {mode:8s} {med * 1e6 / a.iters:8.1f} us/op  ratio {med / base:.3f}  "
              f"(runs: {', '.join(f'{t:.3f}' for t in times[mode])} s)")
    # one() stops the script (exit 1) on a run that failed, printed no time or left a dump: every run got here clean
    print(f"clean_runs={sum(len(t) for t in times.values())}/{a.repeats * len(MODES)}")
    return 0


if __name__ == "__main__":
    main()
