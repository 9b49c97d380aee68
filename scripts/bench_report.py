#!/usr/bin/env python3
"""The report at scale: JSON bytes per node, each renderer's size and time (the code: ncclcheck_lab/bench_report.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_report")
