"""scripts/bench_logs.py run small (--mib 1: two nodes' NCCL INFO logs, 16 ranks, the three planted WARNs, eight hard
links): its own correctness fields on its last line, planted_named=3/3, root_planted=1, world=N/N, hosts=K/K,
transports=N/N, links_once=8/8, exit=1 (diagnose named a cause), and the script's exit 0; never its timings (docs
quote the 1 GiB figure, on a quiet machine)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, cli_env


def _pair(v: str) -> tuple:
    a, b = v.split("/")
    return int(a), int(b)


def test_one_mib_of_logs_every_planted_cause_named_and_every_rank_read():
    p = subprocess.run([sys.executable, "scripts/bench_logs.py", "--mib", "1", "--timeout", "120"],
                       capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=240)
    last = p.stdout.strip().splitlines()[-1]
    fields = dict(kv.split("=", 1) for kv in last.split("; ", 1)[1].split())
    assert p.returncode == 0, p.stdout + p.stderr
    assert fields["planted_named"] == "3/3" and fields["root_planted"] == "1" and fields["exit"] == "1", last
    assert fields["links_once"] == "8/8", last
    for k in ("world", "hosts", "transports"):
        got, want = _pair(fields[k])
        assert got == want > 0, (k, last)
