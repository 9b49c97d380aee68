#!/usr/bin/env python3
"""How fast diagnose reads NCCL INFO logs and a training job's output (beside grep): ncclcheck_lab/bench_logs.py.

    python3 scripts/bench_logs.py [--mib 1024] [--training-mib 1024] [--cpus 2] [--keep DIR]
"""

from _entry import run

if __name__ == "__main__":
    run("bench_logs")
