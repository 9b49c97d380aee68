"""How fast diagnose reads a large NCCL_DEBUG=INFO log, and in how much memory: ncclcheck_lab/bench_logs.py.

    python3 scripts/bench_logs.py [--mib 1024] [--cpus 2] [--keep DIR]
"""

from __future__ import annotations

import sys

from ncclcheck_lab.bench_logs import main

if __name__ == "__main__":
    sys.exit(main())
