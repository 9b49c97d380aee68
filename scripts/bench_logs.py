#!/usr/bin/env python3
"""How fast diagnose reads a large NCCL_DEBUG=INFO log, and in how much memory: ncclcheck_lab/bench_logs.py.

    python3 scripts/bench_logs.py [--mib 1024] [--cpus 2] [--keep DIR]
"""

from _entry import run

if __name__ == "__main__":
    run("bench_logs")
