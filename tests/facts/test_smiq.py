"""`nvidia-smi -q` read as NVML answers (facts/smiq.py): the real card's answer read alike through both sources,
every driver branch's layout in the posted corpus, the read states, and hostile text bounded field by field."""

from __future__ import annotations

import json
import pathlib

import pytest

from ncclcheck.facts import gpu, nvml, smiq

DATA = pathlib.Path(__file__).parents[1] / "data"
SAME = ("index", "bus_id", "uuid", "name", "vbios", "persistence", "mig", "ecc_mode", "ecc_uncorrected_volatile",
        "remapped_rows", "retired_pages", "recovery_action", "clock_event_reasons", "utilization_gpu", "processes",
        "pcie_nvml", "fabric")


def corpus(name: str) -> dict:
    return smiq.parse((DATA / "hwnodes" / name / "nvidia-smi-q.txt").read_text())


@pytest.mark.parametrize("card", ["h100-vm-1gpu", "h200-vm-1gpu"])
def test_a_recorded_cards_nvidia_smi_reads_as_its_nvml_did(card):
    """The lent H100 and H200 VMs' `nvidia-smi -q` and NVML's answers of the same minute (tests/data/nvml, driver
    580). The clock-event mask may differ by the idle bit (0x1) alone: the GPU idled at NVML's read and not at
    nvidia-smi's, whose own query wakes it."""
    smi = json.loads((DATA / "nvml" / f"{card}-smi.json").read_text())
    by_nvml = json.loads((DATA / "nvml" / f"{card}-idle.json").read_text())["ncclcheck"]["gpu_health"]["gpus"][0]
    [g] = smiq.parse(smi["-q"])["gpus"]
    for k in SAME:
        want = by_nvml.get(k)
        if k == "fabric" and want == {"state": "not_supported", "status": "success"}:
            want = None  # recorded before NVML's "not supported" fabric was read as none, as nvidia-smi's N/A is
        if k == "clock_event_reasons":
            g[k], want = g[k] & ~0x1, want & ~0x1
        assert g[k] == want, (k, g[k], want)


def test_r470_volta_layout_double_bit_totals_throttle_reasons_and_retired_pages():
    g = corpus("v100-ndv2-r470-healthy")["gpus"][0]
    assert g["ecc_uncorrected_volatile"]["total"] == 0 and g["remapped_rows"] is None
    assert g["retired_pages"] == {"sbe": 0, "dbe": 0, "pending": False}
    assert g["clock_event_reasons"] is not None and g["fabric"] is None and g["recovery_action"] is None
    assert "recovery_action" not in g.get("errors", {})


def test_each_branch_of_the_corpus_reads_every_gpu_it_lists():
    for d in sorted((DATA / "hwnodes").iterdir()):
        q = d / "nvidia-smi-q.txt"
        if not q.exists():
            continue
        text = q.read_text()
        got = smiq.parse(text)
        blocks = sum(1 for line in text.splitlines() if line.startswith("GPU 0"))
        assert len(got["gpus"]) == blocks and got["driver"], d.name
        assert all(g["bus_id"] and g["name"] for g in got["gpus"] if not g.get("errors")), d.name


def test_an_err_gpu_keeps_its_read_states_and_a_gpu_without_handle_is_kept_by_bus_id():
    got = corpus("a100-p4d-r535-gpu-err")
    bad = [g for g in got["gpus"] if g.get("errors")]
    assert [g["bus_id"] for g in bad] == ["0000:90:1d.0"]
    assert set(bad[0]["errors"].values()) == {nvml.UNKNOWN_ERROR} and bad[0]["clock_event_reasons"] is None
    lost = corpus("v100-dgx1-r470-xid79-gpu-lost")["unreachable"]
    assert lost == [{"bus_id": "0000:89:00.0", "state": nvml.GPU_LOST, "index": 6}]


def test_a_value_that_is_no_number_is_that_fields_problem_alone():
    text = ("GPU 00000000:18:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n    Remapped Rows\n"
            "        Correctable Error : 0\n        Uncorrectable Error : " + "9" * 400 + "\n"
            "        Pending : No\n        Remapping Failure Occurred : No\n"
            "    Utilization\n        GPU : inf %\n    Persistence Mode : Enabled\n")
    [g] = smiq.parse(text)["gpus"]
    assert g["remapped_rows"]["uncorrectable"] is None and g["remapped_rows"]["pending"] is False
    assert g["utilization_gpu"] is None and g["persistence"] is True
    assert g["errors"]["utilization"].startswith("not a number") and "remapped_rows" in g["errors"]


def test_hostile_text_is_bounded():
    block = "GPU 00000000:{:02X}:00.0\n    Product Name : " + "x" * 100_000 + "\n"
    got = smiq.parse("".join(block.format(i % 256) for i in range(500)) + "\x1b[31m junk\n" * 1000)
    assert len(got["gpus"]) == smiq.MAX_GPUS and all(len(g["name"]) <= smiq.MAX_VALUE for g in got["gpus"])


def test_a_comma_in_a_gpu_name_or_an_odd_memory_keeps_the_row():
    out = ("0, NVIDIA H100, SXM5, 81559, GPU-a, 00000000:18:00.0\n1, NVIDIA H100, inf, GPU-b, 00000000:19:00.0\n")
    devs = gpu._smi_devices(lambda argv, t: out)
    assert [d["name"] for d in devs] == ["NVIDIA H100, SXM5", "NVIDIA H100"]
    assert devs[0]["memory_bytes"] == 81559 << 20 and devs[1]["memory_bytes"] is None
    assert devs[1]["pci_bus_id"] == "00000000:19:00.0"
