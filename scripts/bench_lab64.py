#!/usr/bin/env python3
"""Many real lab hosts, one `ncclcheck preflight` each: a healthy world and named faults
(the code: ncclcheck_lab/bench_lab64.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_lab64")
