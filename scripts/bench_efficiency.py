#!/usr/bin/env python3
"""Is the bound right: lab links shaped at known rates against the bound the report gives
(the code: ncclcheck_lab/bench_efficiency.py)."""

import sys

try:
    from ncclcheck_lab.bench_efficiency import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
