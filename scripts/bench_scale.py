#!/usr/bin/env python3
"""Preflight at scale, simulated: N virtual nodes against one real TCPStore (the code: ncclcheck_lab/bench_scale.py)."""

import sys

try:
    from ncclcheck_lab.bench_scale import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
