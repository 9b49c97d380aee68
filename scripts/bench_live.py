#!/usr/bin/env python3
"""Time for `ncclcheck watch` to answer, and its bytes per rank, at many simulated responders
(the code: ncclcheck_lab/bench_live.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_live")
