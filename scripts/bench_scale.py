#!/usr/bin/env python3
"""Preflight at scale, simulated: N virtual nodes against one real TCPStore (the code: ncclcheck_lab/bench_scale.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_scale")
