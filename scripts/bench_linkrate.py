#!/usr/bin/env python3
"""Does `ncclcheck bench` measure the link: two lab hosts shaped at a known rate
(the code: ncclcheck_lab/bench_linkrate.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_linkrate")
