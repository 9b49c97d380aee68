#!/usr/bin/env python3
"""Every field of every example report given wrong types, loaded and rendered
(the code: ncclcheck_lab/report_fuzz.py)."""

from _entry import run

if __name__ == "__main__":
    run("report_fuzz")
