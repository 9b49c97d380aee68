"""The one entry every script in scripts/ goes through: import its code from ncclcheck_lab and run its main, or say
in one line how to make the checkout importable (never a traceback for a checkout that is not installed)."""

from __future__ import annotations

import importlib
import sys


def run(module: str) -> None:
    """Exit with what ncclcheck_lab.<module>'s main() returns (its exit code; None is 0)."""
    try:
        main = importlib.import_module(f"ncclcheck_lab.{module}").main
    except ModuleNotFoundError as e:  # a checkout that is neither installed (pip install -e .) nor on PYTHONPATH
        if e.name not in ("ncclcheck", "ncclcheck_lab") and not (e.name or "").startswith("ncclcheck_lab."):
            raise
        print(f"{sys.argv[0]}: cannot import {e.name}: run `pip install -e .` in the checkout, or set PYTHONPATH to it",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main())
