"""The one entry every script in scripts/ goes through: import its code from ncclcheck_lab and run its main. A
checkout that is neither installed (pip install -e .) nor on PYTHONPATH is the script's own: its root (this folder's
parent) is put first on the path, so `python3 scripts/X.py` runs this checkout's code from a fresh clone; where that
does not import either, it says in one line how to make it importable (never a traceback)."""

from __future__ import annotations

import importlib
import os
import sys

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ours(e: ModuleNotFoundError) -> bool:
    return e.name in ("ncclcheck", "ncclcheck_lab") or (e.name or "").startswith(("ncclcheck.", "ncclcheck_lab."))


def run(module: str) -> None:
    """Exit with what ncclcheck_lab.<module>'s main() returns (its exit code; None is 0)."""
    try:
        main = importlib.import_module(f"ncclcheck_lab.{module}").main
    except ModuleNotFoundError as e:
        if not _ours(e):
            raise
        # its children (a lab host's command, a simulated rank's process) import it the same way
        sys.path.insert(0, CHECKOUT)
        os.environ["PYTHONPATH"] = CHECKOUT + (os.pathsep + os.environ["PYTHONPATH"]
                                               if os.environ.get("PYTHONPATH") else "")
        try:
            main = importlib.import_module(f"ncclcheck_lab.{module}").main
        except ModuleNotFoundError as e2:
            if not _ours(e2):
                raise
            print(f"{sys.argv[0]}: cannot import {e2.name}: run `pip install -e .` in the checkout, or set PYTHONPATH "
                  "to it", file=sys.stderr)
            sys.exit(2)
    sys.exit(main())
