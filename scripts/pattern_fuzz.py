"""Every pattern diagnose runs on a job's text, fed long and adversarial lines: ncclcheck_lab/pattern_fuzz.py.

    python3 scripts/pattern_fuzz.py [--examples 200] [--bound 1.0] [--before]
"""

from __future__ import annotations

import sys

from ncclcheck_lab.pattern_fuzz import main

if __name__ == "__main__":
    sys.exit(main())
