#!/usr/bin/env python3
"""Time for `ncclcheck watch` to answer, and its bytes per rank, at many simulated responders
(the code: ncclcheck_lab/bench_live.py)."""

import sys

try:
    from ncclcheck_lab.bench_live import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
