#!/usr/bin/env python3
"""Every pattern diagnose runs on a job's text, fed long and adversarial lines: ncclcheck_lab/pattern_fuzz.py.

    python3 scripts/pattern_fuzz.py [--examples 200] [--bound 1.0] [--before]
"""

from _entry import run

if __name__ == "__main__":
    run("pattern_fuzz")
