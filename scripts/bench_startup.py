#!/usr/bin/env python3
"""How long users wait: `ncclcheck --help` and a standalone preflight (the code: ncclcheck_lab/bench_startup.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_startup")
