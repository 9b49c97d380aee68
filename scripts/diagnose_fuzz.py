#!/usr/bin/env python3
"""Real flight-recorder dumps mutated and diagnosed: every exception that escapes
(the code: ncclcheck_lab/diagnose_fuzz.py)."""

from _entry import run

if __name__ == "__main__":
    run("diagnose_fuzz")
