#!/usr/bin/env python3
"""Real flight-recorder dumps mutated and diagnosed: every exception that escapes
(the code: ncclcheck_lab/diagnose_fuzz.py)."""

import sys

try:
    from ncclcheck_lab.diagnose_fuzz import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
