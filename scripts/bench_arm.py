#!/usr/bin/env python3
"""What arming costs a healthy job (all_reduce timings unarmed, env-armed and armed)
(the code: ncclcheck_lab/bench_arm.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_arm")
