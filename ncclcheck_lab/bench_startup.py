#!/usr/bin/env python3
"""How long users wait before ncclcheck answers, measured side by side in one run against the tools they already
wait for: `ncclcheck --help` against `torchrun --help`, and a standalone `ncclcheck preflight` against
`python -m torch.utils.collect_env`. The commands are run in interleaved rounds (a busy machine slows both alike)
with the bytecode cache warm (as an installed package runs), and the ratio of medians is the figure.

Targets (issue 48; docs/contracts.md): --help < 0.05x torchrun --help, preflight < 0.15x collect_env; --help never
imports torch. The last line is the figures and the run's own correctness fields:

    help_ratio=R preflight_ratio=R help_s=S torchrun_help_s=S preflight_s=S collect_env_s=S rounds=N
    help_imports_torch=0 preflight_exit=0 failures=0

`--rounds 1` is the small-size run the test suite makes (tests/test_bench_startup.py); figures need 5 or more on a
quiet machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(log_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # warm: the .pyc cache is kept
    env.update(PYTHONPATH=REPO, NCCLCHECK_LOG_DIR=log_dir)
    return env


def _wall(argv: list, env: dict) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO, text=True)
    return time.perf_counter() - t0, p.returncode, p.stdout


def commands() -> dict:
    py = sys.executable
    torchrun = shutil.which("torchrun")
    return {
        "help": [py, "-m", "ncclcheck", "--help"],
        "torchrun_help": [torchrun, "--help"] if torchrun else [py, "-m", "torch.distributed.run", "--help"],
        "preflight": [py, "-m", "ncclcheck", "preflight", "--quiet"],
        "collect_env": [py, "-m", "torch.utils.collect_env"],
    }


def help_imports_torch(env: dict) -> bool:
    code = "import sys; from ncclcheck.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n" \
           "sys.stderr.write('TORCH=%d' % ('torch' in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO)
    return "TORCH=0" not in p.stderr


def measure(rounds: int) -> dict:
    log_dir = tempfile.mkdtemp(prefix="ncclcheck-startup-")
    env = _env(log_dir)
    cmds = commands()
    times: dict = {k: [] for k in cmds}
    failures, preflight_exit = [], 0
    try:
        for argv in cmds.values():  # warm-up: bytecode written, files in the page cache
            _wall(argv, env)
        for _ in range(rounds):
            for name, argv in cmds.items():
                s, rc, out = _wall(argv, env)
                times[name].append(s)
                if name == "preflight":
                    preflight_exit = max(preflight_exit, rc)
                if rc != 0:
                    failures.append(f"{name}: exit {rc}: {out.strip().splitlines()[-1:] or ''}")
        torch_on_help = help_imports_torch(env)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"rounds": rounds, "median": med, "help_ratio": med["help"] / med["torchrun_help"],
            "preflight_ratio": med["preflight"] / med["collect_env"], "help_imports_torch": torch_on_help,
            "preflight_exit": preflight_exit, "failures": failures}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the four commands (default 7)")
    args = ap.parse_args(argv)
    r = measure(max(1, args.rounds))
    m = r["median"]
    print(f"{'command':36} {'median s':>9}")
    for name, label in (("help", "ncclcheck --help"), ("torchrun_help", "torchrun --help"),
                        ("preflight", "ncclcheck preflight (standalone)"),
                        ("collect_env", "python -m torch.utils.collect_env")):
        print(f"{label:36} {m[name]:9.3f}")
    for f in r["failures"]:
        print(f"FAILED {f}")
    print(f"--help: {r['help_ratio']:.3f}x torchrun --help (target < 0.05x); preflight: {r['preflight_ratio']:.3f}x "
          f"collect_env (target < 0.15x)")
    print(f"help_ratio={r['help_ratio']:.3f} preflight_ratio={r['preflight_ratio']:.3f} help_s={m['help']:.3f} "
          f"torchrun_help_s={m['torchrun_help']:.3f} preflight_s={m['preflight']:.3f} "
          f"collect_env_s={m['collect_env']:.3f} rounds={r['rounds']} "
          f"help_imports_torch={int(r['help_imports_torch'])} preflight_exit={r['preflight_exit']} "
          f"failures={len(r['failures'])}")
    return 0 if not r["failures"] and not r["help_imports_torch"] else 1


if __name__ == "__main__":
    sys.exit(main())
