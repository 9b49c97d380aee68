#!/usr/bin/env python3
"""How often watch's transfer probe names a healthy host when transfers are CPU-bound (ncclcheck_lab/probe_noise.py)"""

from _entry import run

if __name__ == "__main__":
    run("probe_noise")
