#!/usr/bin/env python3
"""What an armed rank's responder costs its training loop, idle and under a flood (ncclcheck_lab/responder_cost.py)."""

import sys

try:
    from ncclcheck_lab.responder_cost import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
