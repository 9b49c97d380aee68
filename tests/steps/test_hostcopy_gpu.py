"""preflight --gpu's host copies and the gpu_health facts on a real NVIDIA GPU: pinned copies measured and judged
against the link's PCIe bound, and what NVML answers read without a finding on a healthy card. Skipped without CUDA
(the verdicts are tested on fakes: tests/checks/test_gpu_node_and_fleet.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with torch CUDA"),
]


def test_host_copies_are_measured_and_judged_against_the_pcie_bound():
    from ncclcheck.facts import gpuhealth
    from ncclcheck.model import Status
    from ncclcheck.steps.hostcopy import host_copy_check

    facts = {"gpu_health": gpuhealth.collect()}
    r = host_copy_check(facts, 0, lambda: torch)
    rows = r.evidence["gpus"]
    assert len(rows) == torch.cuda.device_count() and all(x["h2d_gbps"] > 1 and x["d2h_gbps"] > 1 for x in rows)
    assert r.status in (Status.PASS, Status.WARN, Status.FAIL), r.summary  # judged, not skipped, when a bound exists
    print(r.summary)


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
