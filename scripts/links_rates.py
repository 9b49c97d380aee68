#!/usr/bin/env python3
"""False-alarm and detection rates of `ncclcheck links` on a 4-host lab (the code: ncclcheck_lab/links_rates.py)."""

import sys

try:
    from ncclcheck_lab.links_rates import main
except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
    if e.name not in ("ncclcheck", "ncclcheck_lab"):
        raise
    print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
          file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
