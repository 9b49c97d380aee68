#!/usr/bin/env python3
"""The long tier of the test suite, each test's seconds (the code: ncclcheck_lab/long_tests.py)."""

from _entry import run

if __name__ == "__main__":
    run("long_tests")
