#!/usr/bin/env python3
"""The accuracy benchmark: every scenario of the fault corpus, the verdict it must give and the one it got
(the code: ncclcheck_lab/bench_accuracy.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_accuracy")
