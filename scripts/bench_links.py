#!/usr/bin/env python3
"""How long `ncclcheck links` takes on N lab hosts against one pair's time x (N-1)
(the code: ncclcheck_lab/bench_links.py)."""

import sys

try:
    from ncclcheck_lab.bench_links import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
