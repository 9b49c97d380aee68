"""What real cards answered, replayed: the one-GPU H100 VM's NVML and sysfs answers (tests/data/nvml) and the H100 and
H200 VMs' nvidia-smi (docs/gpu-record) give no hardware finding. What was not recorded is answered "not supported",
so each check either passes on what was recorded or says it could not judge; none warns or fails."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from ncclcheck.checks import gpu as hw
from ncclcheck.facts import gpuhealth
from ncclcheck.model import Status
from ncclcheck_lab import fakehw

from .hwnode import _no_pynvml, judge, read
from .test_gpu_checks import CHECKS

REPO = pathlib.Path(__file__).parents[2]
# nvidia-smi's table row: "|   0  NVIDIA H200    On  |   00000000:00:06.0 Off |    0 |", then "0MiB / ..."
ROW = re.compile(r"\|\s+0\s+(NVIDIA [^|]+?)\s+(On|Off)\s+\|\s+([0-9A-F:.]+)\s+\S+\s+\|\s+(\d+|N/A)\s+\|")


def smi_record(path: pathlib.Path) -> dict:
    text = path.read_text()
    m = ROW.search(text)
    assert m, path
    used = re.search(r"\|\s+(\d+)MiB /", text)
    return {"name": m.group(1).strip(), "persistence": m.group(2) == "On", "bus": m.group(3),
            "ecc": int(m.group(4)), "memory_used_mib": int(used.group(1)), "mig": "Disabled" in text.split("MIG M.")[1],
            "processes": "No running processes found" in text}


def recorded_spec(rec: dict, nvml: dict = None, sysfs: dict = None) -> dict:
    """A one-GPU node answering what was recorded and "not supported" to everything else."""
    spec = fakehw.node_spec(gpus=1, nvswitches=0, ib_ports=0)
    spec["kmsg_readable"] = False  # the kernel log was not recorded
    bus = rec["bus"][4:].lower()
    g = spec["gpus"][0]
    for k in ("vbios", "mig", "remapped_rows", "retired_pages", "recovery_action", "clocks", "utilization",
              "processes", "fabric", "uuid"):
        g[k] = fakehw.NS
    g.update(bus_id=bus, name=rec["name"], persistence=rec["persistence"], ecc_mode=True,
             ecc_volatile={"total": rec["ecc"], "sram": fakehw.NS, "dram": fakehw.NS},
             memory_used=rec["memory_used_mib"] << 20, mig=[0, 0] if rec["mig"] else [1, 1],
             processes=[] if rec["processes"] else fakehw.NS)
    g["pcie"] = {k: fakehw.NS for k in ("gen", "max_gen", "width", "max_width", "replay")}
    g["nvlink"] = {"count": None, "errors": fakehw.NS}
    g["sysfs"] = False
    if nvml is not None:
        assert nvml["bus"].lower() == "0000" + bus and nvml["nvlink_link_count"]["ret"] == 3  # NOT_SUPPORTED
        g["pcie"].update(gen=nvml["pcie_gen"], max_gen=nvml["pcie_max_gen"], width=nvml["pcie_width"],
                         max_width=nvml["pcie_max_width"])
    if sysfs is not None:
        attrs = sysfs[bus]
        g["pcie"].update(sysfs_speed=attrs["current_link_speed"], sysfs_max_speed=attrs["max_link_speed"],
                         width=int(attrs["current_link_width"]), max_width=int(attrs["max_link_width"]), aer=[0, 0, 0])
        g["sysfs"] = True
    return spec


def h100() -> dict:
    nv = json.loads((REPO / "tests/data/nvml/h100-vm-1gpu.json").read_text())
    return recorded_spec(smi_record(REPO / "docs/gpu-record/smi.log"), nv["nvml"][0], nv["sysfs"])


def h200() -> dict:
    return recorded_spec(smi_record(REPO / "docs/gpu-record/2026-11-25-h200/smi.log"))


def test_the_records_say_what_the_specs_replay():
    assert smi_record(REPO / "docs/gpu-record/2026-11-25-h200/smi.log") == {
        "name": "NVIDIA H200", "persistence": True, "bus": "00000000:00:06.0", "ecc": 0, "memory_used_mib": 0,
        "mig": True, "processes": True}
    assert smi_record(REPO / "docs/gpu-record/smi.log")["name"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("card", [h100, h200])
@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_recorded_card_gives_no_finding(tmp_path, monkeypatch, card, smi):
    spec = card()
    gh = read(tmp_path, monkeypatch, spec, smi=smi)
    results = {check.__name__: judge(check, gh, processes="warn")[0] for check in CHECKS}
    bad = {k: r.summary for k, r in results.items() if r.status in (Status.WARN, Status.FAIL)}
    assert bad == {}
    assert results["check_memory"].status is Status.PASS  # the volatile ECC count was recorded: 0
    assert results["check_persistence"].status is Status.PASS
    assert results["check_xid"].status is Status.SKIP and "could not be read" in results["check_xid"].summary
    assert results["check_nvlink"].status is Status.SKIP
    if card is h100:
        assert results["check_pcie"].status is Status.PASS  # Gen5 x16 = its maximum, in NVML and sysfs


# What the lent H100 answered to every question the checks ask (tests/data/nvml/README.md): the facts the real
# collector read there, idle and under a bf16 matmul with pinned copies, and nvidia-smi's raw answers.
NVML_DIR = REPO / "tests/data/nvml"


def recorded(name: str) -> dict:
    return json.loads((NVML_DIR / name).read_text())


@pytest.mark.parametrize("record", ["h100-vm-1gpu-idle.json", "h100-vm-1gpu-load.json"])
def test_what_the_real_collector_read_on_the_h100_gives_no_finding(record):
    gh = recorded(record)["ncclcheck"]["gpu_health"]
    assert gh["source"] == "nvml" and len(gh["gpus"]) == 1
    results = {check.__name__: judge(check, gh, processes="leftover")[0] for check in CHECKS}
    assert {k: r.summary for k, r in results.items() if r.status in (Status.WARN, Status.FAIL)} == {}
    for passed in ("check_memory", "check_pcie", "check_clocks", "check_persistence", "check_mig", "check_vbios",
                   "check_processes", "check_xid", "check_nouveau"):
        assert results[passed].status is Status.PASS, (passed, results[passed].summary)
    assert results["check_nvlink"].status is Status.SKIP  # the VM's NVML: no NVLink
    assert results["check_fabric"].status is Status.SKIP  # no NVSwitch on its PCI bus
    if "load" in record:  # the matmul ran (utilisation) and no clock-event reason was set
        g = gh["gpus"][0]
        assert g["utilization_gpu"] >= 90 and g["clock_event_reasons"] == 0
        assert [p["own"] for p in g["processes"]] == [True]  # the probe's own memory is never a leftover


def test_nvidia_smis_real_answers_read_as_nvml_did(monkeypatch):
    answers = recorded("h100-vm-1gpu-smi.json")

    def run(argv, _t):
        key = " ".join(argv[1:])
        if key not in answers:
            raise RuntimeError(f"not recorded on the card: {key}")
        return answers[key]

    monkeypatch.setattr(gpuhealth.nv_, "import_nvml", _no_pynvml)
    smi = gpuhealth.collect(run=run, which=lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None)
    nvml = recorded("h100-vm-1gpu-idle.json")["ncclcheck"]["gpu_health"]
    assert smi["source"] == "nvidia-smi"
    [s], [n] = smi["gpus"], nvml["gpus"]
    for key in ("bus_id", "uuid", "name", "vbios", "persistence", "mig", "ecc_mode", "ecc_uncorrected_volatile",
                "remapped_rows", "clock_event_reasons", "pcie_nvml", "processes"):
        assert s[key] == n[key], key
    results = {check.__name__: judge(check, smi, processes="leftover")[0] for check in CHECKS}
    assert {k: r.summary for k, r in results.items() if r.status in (Status.WARN, Status.FAIL)} == {}


@pytest.mark.parametrize("mode,status", [("leftover", Status.FAIL), ("warn", Status.WARN), ("allowed", Status.PASS)])
def test_a_process_holding_the_real_h100_is_judged_by_where_health_runs(mode, status):
    """`health --prolog` beside a torch process holding 4 GiB (started from the same shell: a sibling, not a rank)."""
    gh = recorded("h100-vm-1gpu-holder.json")
    [r] = judge(hw.check_processes, gh, processes=mode)
    assert r.status is status, r.summary
    assert "pid 474 python3" in r.summary and "4.5 GiB" in r.summary, r.summary
