#!/usr/bin/env python3
"""Ncclcheck bench beside nccl-tests on the same GPUs (the code: ncclcheck_lab/bench_vs_nccl_tests.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_vs_nccl_tests")
