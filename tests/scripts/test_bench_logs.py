"""scripts/bench_logs.py run small (--mib 1: two nodes' NCCL INFO logs, 16 ranks, the three planted WARNs, eight hard
links; --training-mib 1: a 16-rank training job's output failing on rank 5): its own correctness fields, on the NCCL
logs' line planted_named=3/3, root_planted=1, world=N/N, hosts=K/K, transports=N/N, links_once=8/8, exit=1, on the
training job's line failure_named=1, world=16/16, exit=1 and both speeds and their ratio printed; the script's exit 0;
never its timings (docs quote the 1 GiB figures, on a quiet machine)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO, cli_env


def _pair(v: str) -> tuple:
    a, b = v.split("/")
    return int(a), int(b)


def _fields(line: str) -> dict:
    return dict(kv.split("=", 1) for kv in line.split("; ", 1)[1].split())


def test_one_mib_of_logs_every_planted_cause_named_and_every_rank_read():
    p = subprocess.run([sys.executable, "scripts/bench_logs.py", "--mib", "1", "--training-mib", "1", "--timeout",
                        "120"], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    nccl, training = p.stdout.strip().splitlines()[-2:]
    fields = _fields(nccl)
    assert fields["planted_named"] == "3/3" and fields["root_planted"] == "1" and fields["exit"] == "1", nccl
    assert fields["links_once"] == "8/8", nccl
    for k in ("world", "hosts", "transports"):
        got, want = _pair(fields[k])
        assert got == want > 0, (k, nccl)
    fields = _fields(training)
    assert fields == {"failure_named": "1", "world": "16/16", "exit": "1"}, training
    assert re.search(r"\(\d+\.\d MiB/s\) on 2 CPUs, grep [\d,]+ MiB/s, ratio 1/\d+\.\d of grep's speed", training)
