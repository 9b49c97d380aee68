"""scripts/bench_hwnodes.py run small (the whole corpus of posted and staged nodes, each through NVML and
nvidia-smi; one run of health on a 2-GPU node whose nvidia-smi answers at once): its correctness fields on its last
line, every expert finding named, no false alarm, no node on which the two sources disagree, and the script's exit
0; never its timings (docs/hardware.md quotes the full-size figure)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, cli_env


def test_every_fake_node_is_judged_as_the_expert_did_through_both_sources():
    p = subprocess.run([sys.executable, "scripts/bench_hwnodes.py", "--runs", "1", "--gpus", "2", "--smi-delay", "0"],
                       capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=300)
    last = p.stdout.strip().splitlines()[-1]
    fields = dict(kv.split("=", 1) for kv in last.split("; ")[-1].split())
    named, expected = fields["faults_named"].split("/")
    assert int(fields["nodes"]) >= 40 and int(expected) >= 100, last
    assert named == expected and fields["false_alarms"] == "0" and fields["disagreements"] == "0", \
        p.stdout[-4000:] + p.stderr[-2000:]
    assert p.returncode == 0 and "health_s=" in last and "reference_s=" in last
