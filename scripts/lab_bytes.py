#!/usr/bin/env python3
"""Where node 0's interface bytes go in a lab preflight, per category and node
(the code: ncclcheck_lab/lab_bytes.py)."""

from _entry import run

if __name__ == "__main__":
    run("lab_bytes")
