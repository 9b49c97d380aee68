#!/usr/bin/env python3
"""False-alarm and detection rates of `ncclcheck links` on a 4-host lab (the code: ncclcheck_lab/links_rates.py)."""

from _entry import run

if __name__ == "__main__":
    run("links_rates")
