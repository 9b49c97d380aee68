#!/usr/bin/env python3
"""The slow-job matrix: the straggler's kind and fix right per step time x compute/communication ratio x fault
(the code: ncclcheck_lab/slow_matrix.py)."""

from _entry import run

if __name__ == "__main__":
    run("slow_matrix")
