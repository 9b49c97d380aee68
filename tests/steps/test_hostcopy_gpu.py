"""preflight --gpu's host copies and the gpu_health facts on a real NVIDIA GPU: pinned copies measured and judged
against the link's PCIe bound, and what NVML answers read without a finding on a healthy card. Skipped without CUDA
(the verdicts are tested on fakes: tests/checks/test_gpu_node_and_fleet.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with torch CUDA"),
]


# Measured in a process of its own: a CUDA context made in the test process would stay for the rest of the session,
# and every later test's preflight on this machine would see that pytest worker holding the GPU (gpu.processes).
MEASURE = """
import json, torch
from ncclcheck.facts import gpuhealth
from ncclcheck.steps.hostcopy import host_copy_check
r = host_copy_check({"gpu_health": gpuhealth.collect()}, 0, lambda: torch)
print(json.dumps({"status": r.status.value, "summary": r.summary, "rows": r.evidence["gpus"],
                  "gpus": torch.cuda.device_count()}))
"""


def test_host_copies_are_measured_and_judged_against_the_pcie_bound():
    p = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, timeout=120, cwd=REPO,
                       env=cli_env())
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    rows = got["rows"]
    assert len(rows) == got["gpus"] and all(x["h2d_gbps"] > 1 and x["d2h_gbps"] > 1 for x in rows)
    assert got["status"] in ("pass", "warn", "fail"), got["summary"]  # judged, not skipped, when a bound exists
    print(got["summary"])


def test_a_healthy_cards_nvml_answers_give_no_finding():
    from ncclcheck.checks import gpu as hw
    from ncclcheck.checks.local import LocalInput
    from ncclcheck.facts import gpuhealth
    from ncclcheck.model import Status

    gh = gpuhealth.collect()
    inp = LocalInput.of({"gpu_health": gh}, hw=hw.HwExpect(processes="allowed"))
    for check in (hw.check_memory, hw.check_pcie, hw.check_nvlink, hw.check_mig, hw.check_vbios, hw.check_fabric):
        r = check(inp)
        assert r.status is not Status.FAIL, (check.__name__, r.summary)
