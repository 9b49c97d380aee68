#!/usr/bin/env python3
"""How long `ncclcheck links` takes on N lab hosts against one pair's time x (N-1)
(the code: ncclcheck_lab/bench_links.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_links")
