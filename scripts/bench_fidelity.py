#!/usr/bin/env python3
"""Ncclcheck bench's busbw against a bare torch.distributed timing loop (the code: ncclcheck_lab/bench_fidelity.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_fidelity")
