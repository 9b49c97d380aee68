#!/usr/bin/env python3
"""Is the bound right: lab links shaped at known rates against the bound the report gives
(the code: ncclcheck_lab/bench_efficiency.py)."""

from _entry import run

if __name__ == "__main__":
    run("bench_efficiency")
