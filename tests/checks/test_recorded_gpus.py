"""What real cards answered, replayed: the one-GPU H100 and H200 VMs' NVML and sysfs answers and nvidia-smi's
(tests/data/nvml, docs/gpu-record) give no hardware finding, and both sources read the same facts. What was not
recorded is answered "not supported", so each check either passes on what was recorded or says it could not judge;
none warns or fails."""

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
    nv = json.loads((REPO / "tests/data/nvml/h200-vm-1gpu-idle.json").read_text())
    return recorded_spec(smi_record(REPO / "docs/gpu-record/2026-11-27-h200/smi.log"), nv["nvml"][0], nv["sysfs"])


def test_the_records_say_what_the_specs_replay():
    for day in ("2026-11-25-h200", "2026-11-27-h200"):
        assert smi_record(REPO / "docs/gpu-record" / day / "smi.log") == {
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
    assert results["check_pcie"].status is Status.PASS  # Gen5 x16 = its maximum, in NVML and sysfs


# What the lent cards answered to every question the checks ask (tests/data/nvml/README.md): the facts the real
# collector read there, idle and under a bf16 matmul with pinned copies, and nvidia-smi's raw answers. The H100 VM of
# 2026-11-26 and the H200 VM of 2026-11-27 (docs/gpu.md).
NVML_DIR = REPO / "tests/data/nvml"
CARDS = ("h100-vm-1gpu", "h200-vm-1gpu")
IDLE = 0x1  # nvmlClocksEventReasonGpuIdle: no slowdown


def recorded(name: str) -> dict:
    return json.loads((NVML_DIR / name).read_text())


@pytest.mark.parametrize("load", ["idle", "load"])
@pytest.mark.parametrize("card", CARDS)
def test_what_the_real_collector_read_on_a_lent_card_gives_no_finding(card, load):
    rec = recorded(f"{card}-{load}.json")
    gh = rec["ncclcheck"]["gpu_health"]
    assert gh["source"] == "nvml" and len(gh["gpus"]) == 1
    assert gh["gpus"][0]["name"] == rec["nvml"][0]["name"]
    assert rec["argv"] == (["--load", "10"] if load == "load" else [])
    results = {check.__name__: judge(check, gh, processes="leftover")[0] for check in CHECKS}
    assert {k: r.summary for k, r in results.items() if r.status in (Status.WARN, Status.FAIL)} == {}
    for passed in ("check_memory", "check_pcie", "check_clocks", "check_persistence", "check_mig", "check_vbios",
                   "check_processes", "check_xid", "check_nouveau"):
        assert results[passed].status is Status.PASS, (passed, results[passed].summary)
    assert results["check_nvlink"].status is Status.SKIP  # the VM's NVML: no NVLink
    assert results["check_fabric"].status is Status.SKIP  # no NVSwitch on its PCI bus
    g = gh["gpus"][0]
    if load == "load":  # the matmul ran (utilisation) and no clock-event reason was set
        assert g["utilization_gpu"] >= 90 and g["clock_event_reasons"] == 0
        assert [p["own"] for p in g["processes"]] == [True]  # the probe's own memory is never a leftover
    else:  # idle: no reason, or GPU idle alone, which is no slowdown
        assert g["clock_event_reasons"] in (0, IDLE) and g["processes"] == []


@pytest.mark.parametrize("card", CARDS)
def test_nvidia_smis_real_answers_read_as_nvml_did(monkeypatch, card):
    answers = recorded(f"{card}-smi.json")

    def run(argv, _t):
        key = " ".join(argv[1:])
        if key not in answers:
            raise RuntimeError(f"not recorded on the card: {key}")
        return answers[key]

    monkeypatch.setattr(gpuhealth.nv_, "import_nvml", _no_pynvml)
    smi = gpuhealth.collect(run=run, which=lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None)
    nvml = recorded(f"{card}-idle.json")["ncclcheck"]["gpu_health"]
    assert smi["source"] == "nvidia-smi"
    [s], [n] = smi["gpus"], nvml["gpus"]
    for key in ("bus_id", "uuid", "name", "vbios", "persistence", "mig", "ecc_mode", "ecc_uncorrected_volatile",
                "remapped_rows", "pcie_nvml", "processes"):
        assert s[key] == n[key], key
    assert s["clock_event_reasons"] & ~IDLE == n["clock_event_reasons"] & ~IDLE
    results = {check.__name__: judge(check, smi, processes="leftover")[0] for check in CHECKS}
    assert {k: r.summary for k, r in results.items() if r.status in (Status.WARN, Status.FAIL)} == {}


def test_the_h200s_two_sources_read_every_fact_alike(monkeypatch):
    """The H200 VM's `nvidia-smi -q`, `nvlink -s` and `nvlink -e` (recorded with every query the fallback asks) read
    into the very facts NVML gave a few seconds before: each GPU's facts but their source, and no NVLink.
    The clock-event mask may differ by the idle bit alone: NVML's probe found the GPU idle (0x1), nvidia-smi's own
    query woke it ("Idle: Not Active")."""
    answers = recorded("h200-vm-1gpu-smi.json")
    monkeypatch.setattr(gpuhealth.nv_, "import_nvml", _no_pynvml)
    smi = gpuhealth.collect(run=lambda argv, _t: answers[" ".join(argv[1:])],
                            which=lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None)
    nvml = recorded("h200-vm-1gpu-idle.json")["ncclcheck"]["gpu_health"]
    [s], [n] = smi["gpus"], nvml["gpus"]
    assert (s.pop("source"), n.pop("source")) == ("nvidia-smi", "nvml")
    assert (s.pop("clock_event_reasons"), n.pop("clock_event_reasons")) in ((0, 0), (0, IDLE), (IDLE, 0), (IDLE, IDLE))
    assert s == n
    for key in ("unreachable", "absent", "nouveau", "nvswitches"):
        assert smi[key] == nvml[key], key
    # no NVLink, each source in its own words: NVML lists the GPU with no link count, `nvlink -s` prints nothing
    assert [(g["link_count"], g["up"], g["down"]) for g in nvml["nvlink"]["gpus"]] == [(None, 0, [])]
    assert smi["nvlink"]["gpus"] == [] and "no GPU here has NVLink" in smi["nvlink"]["reason"]


@pytest.mark.parametrize("mode,status", [("leftover", Status.FAIL), ("warn", Status.WARN), ("allowed", Status.PASS)])
def test_a_process_holding_the_real_h100_is_judged_by_where_health_runs(mode, status):
    """`health --prolog` beside a torch process holding 4 GiB (started from the same shell: a sibling, not a rank)."""
    gh = recorded("h100-vm-1gpu-holder.json")
    [r] = judge(hw.check_processes, gh, processes=mode)
    assert r.status is status, r.summary
    assert "pid 474 python3" in r.summary and "4.5 GiB" in r.summary, r.summary


def h200_boot_lines() -> list:
    """The lent H200 VM's kernel log since boot (docs/gpu-record/2026-11-27-h200/kernel_log.log: `dmesg | grep -i -e
    xid -e nvrm`, read as root): the driver's load line, its FBHUB poison interrupt cleared at boot and the note that
    persistence mode is deprecated, as (seconds, text)."""
    text = (REPO / "docs/gpu-record/2026-11-27-h200/kernel_log.log").read_text()
    stamped = re.compile(r"^\[\s*(\d+\.\d+)\] (NVRM: .*)$")
    lines = [(float(m.group(1)), m.group(2).rstrip()) for m in map(stamped.match, text.splitlines()) if m]
    assert [m.split(":", 2)[1].split()[0] for _, m in lines] == [
        "loading", "gpuClearFbhubPoisonIntrForBug2924523_GA100", "Persistence"]
    return lines


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_the_h200s_boot_lines_are_no_fault(tmp_path, monkeypatch, smi):
    """None of the H200's boot lines is a fault: read through /dev/kmsg, no event, and gpu.xid passes."""
    spec = h200()
    spec["kmsg_readable"] = True
    spec["kernel_log"] = h200_boot_lines()
    gh = read(tmp_path, monkeypatch, spec, smi=smi)
    assert gh["kernel_log"]["readable"] and gh["kernel_log"]["events"] == []
    [r] = judge(hw.check_xid, gh)
    assert r.status is Status.PASS and "no Xid, SXid or NVRM fault line" in r.summary, r.summary
