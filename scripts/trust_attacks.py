#!/usr/bin/env python3
"""The file-side and store attacks of issues 21 and 36, one line each (the code: ncclcheck_lab/trust_attacks.py)."""

from _entry import run

if __name__ == "__main__":
    run("trust_attacks")
