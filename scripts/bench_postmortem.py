#!/usr/bin/env python3
"""Torch's flight-recorder analyzer and `ncclcheck diagnose` on the same real failures
(the code: ncclcheck_lab/bench_postmortem.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_postmortem")
