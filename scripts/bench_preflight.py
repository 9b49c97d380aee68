#!/usr/bin/env python3
"""How multi-node preflight scales on lab worlds of 2, 4 and 8 hosts (the code: ncclcheck_lab/bench_preflight.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_preflight")
