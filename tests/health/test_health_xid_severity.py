"""`ncclcheck health` on a GB200 NVL72 compute tray (4 GB200 GPUs in the rack's NVLink fabric, no NVSwitch on its
own PCI bus) whose kernel log holds a Blackwell NVLink Xid that states its own severity, as the driver prints it
("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (...)": leptonai/gpud#1174, NVIDIA/nccl#2241),
through both GPU sources: a nonfatal one leaves a healthy tray in service, saying the line's words; a fatal one still
drains it. And the words an operator checks by hand: a GPU the driver bound and could not initialise (RmInitAdapter
failed) is said so, not "failed at probe"; Xid 43s beside a fault are still said."""

from __future__ import annotations

import pytest

from ncclcheck_lab import fakehw

from .test_health_hw import gpu_checks, health, node

SOURCES = pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
# The register words of an operator's RLW_RXPIPE line (leptonai/gpud#1174)
REGS = "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)"


def gb200_tray() -> dict:
    """A GB200 NVL72 compute tray as NVML sees it: 4 GB200 GPUs, fabric Completed / Success, 18 NVLink links each,
    the rack's NVSwitches in other trays (none on this tray's PCI bus)."""
    spec = fakehw.node_spec(gpus=4, nvswitches=0, ib_ports=0)
    for g in spec["gpus"]:
        g["name"] = "NVIDIA GB200"
    return spec


def xid145(bus: str, severity: str, link: int, unit: str = "RLW_RXPIPE") -> str:
    short = bus.rsplit(".", 1)[0]
    return f"NVRM: Xid (PCI:{short}): 145, {unit} {severity} XC0 i0 Link {link:02d} {REGS}"


def run_health(tmp_path, spec, smi, *flags):
    return health(tmp_path, node(tmp_path, spec, with_pynvml=not smi), "--gpus", str(len(spec["gpus"])), *flags)


@SOURCES
def test_a_nonfatal_nvlink_xid_leaves_a_healthy_gb200_tray_in_service(tmp_path, smi, validate_report):
    spec = gb200_tray()
    bus = spec["gpus"][2]["bus_id"]
    spec["kernel_log"] = [(5000.0, xid145(bus, "Nonfatal", 13)), (5000.5, xid145(bus, "Nonfatal", 13))]
    p, doc = run_health(tmp_path, spec, smi)
    validate_report(doc)
    xid = gpu_checks(doc)["gpu.xid"]
    assert p.returncode == 0 and xid["status"] == "pass", (p.returncode, xid["summary"])
    assert [a["action"] for a in doc["slurm"]["actions"]] == ["none"], doc["slurm"]  # not drained
    # the finding keeps the driver's words: the GPU, the severity word, the unit and the NVLink link
    assert f"GPU 2 ({bus}" in xid["summary"] and "Xid 145 x2 (RLW_RXPIPE Nonfatal, NVLink link 13)" in xid["summary"]
    [ignored] = xid["evidence"]["ignored"]
    assert ignored["action"] == "monitor" and ignored["value"]["severity"] == "Nonfatal"
    assert ignored["value"]["links"] == [13]


@SOURCES
def test_a_fatal_nvlink_xid_still_drains_the_tray(tmp_path, smi):
    spec = gb200_tray()
    bus = spec["gpus"][1]["bus_id"]
    spec["kernel_log"] = [(5000.0, xid145(bus, "Nonfatal", 13)), (5001.0, xid145(bus, "Fatal", 7, "RLW_REMAP"))]
    p, doc = run_health(tmp_path, spec, smi)
    xid = gpu_checks(doc)["gpu.xid"]
    assert p.returncode == 1 and xid["status"] == "fail", xid["summary"]
    [f] = xid["evidence"]["findings"]
    # in an NVLink fabric a GPU's link fault comes back with the node (checks/gpu.py nvlink_action)
    assert (f["bus_id"], f["action"]) == (bus, "reboot")
    assert "Fatal x1, Nonfatal x1, NVLink links 13, 7" in f["what"], f["what"]
    assert "RLW_REMAP Fatal" in f["value"]["line"]  # the line that said fatal, not the last one read
    reason = doc["slurm"]["actions"][0]["reason"]
    assert "gpu.xid" in reason and "Xid 145" in reason, reason


def test_a_fatal_nvlink_xid_off_a_fabric_resets_the_gpu(tmp_path):
    """No fabric (an NVLink bridge, no switch): the reset of that GPU retrains its links; the line's word decides
    whether it is needed at all."""
    spec = gb200_tray()
    for g in spec["gpus"]:
        g["fabric"] = fakehw.NS
    bus = spec["gpus"][0]["bus_id"]
    spec["kernel_log"] = [(5000.0, xid145(bus, "Fatal", 3))]
    _p, doc = run_health(tmp_path, spec, False)
    assert gpu_checks(doc)["gpu.xid"]["evidence"]["action"] == "reset the GPU"


@SOURCES
def test_a_gpu_that_failed_to_initialise_is_not_said_to_have_failed_at_probe(tmp_path, smi):
    """The nvidia driver bound the GPU (its probe passed), then 'RmInitAdapter failed!' (osinit.c; the form of
    NVIDIA/nvtrust#124): not listed by the driver, and named as failed initialisation."""
    spec = fakehw.node_spec(ib_ports=0)
    bad = spec["gpus"][6]
    bad.update(probe_failed=True, bound=True)
    spec["kernel_log"] = [(38.2, "NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter"),
                          (38.3, f"NVRM: GPU {bad['bus_id']}: RmInitAdapter failed! (0x22:0x3f:744)"),
                          (38.4, f"NVRM: GPU {bad['bus_id']}: rm_init_adapter failed, device minor number 6")]
    p, doc = run_health(tmp_path, spec, smi)
    checks = {c["id"]: c for c in doc["checks"]}
    assert p.returncode == 1
    count = checks["health.gpus"]
    assert f"{bad['bus_id']} (failed to initialise: RmInitAdapter failed)" in count["summary"], count["summary"]
    assert "failed at probe" not in count["summary"]
    readable = checks["gpu.readable"]
    assert "bound to nvidia" in readable["summary"] and "could not initialise it" in readable["summary"]
    assert "failed at probe" not in readable["summary"], readable["summary"]
    assert readable["evidence"]["findings"][0]["bus_id"] == bad["bus_id"]


def test_a_gpu_without_a_driver_still_failed_at_probe(tmp_path):
    spec = fakehw.node_spec(ib_ports=0)
    bad = spec["gpus"][7]
    bad["probe_failed"] = True
    spec["kernel_log"] = [(14.2, "NVRM: The NVIDIA probe routine failed for 1 device(s).")]
    _p, doc = run_health(tmp_path, spec, False)
    count = next(c for c in doc["checks"] if c["id"] == "health.gpus")
    assert f"{bad['bus_id']} (failed at probe)" in count["summary"], count["summary"]


def test_xid_43s_beside_a_fault_are_still_said(tmp_path):
    """A passthrough VM's GPU with two Xid 43 lines (NVIDIA's catalogue: ignore) beside a GPU that could not
    initialise: the fault fails the check, and the Xid 43s are in its summary, where the operator looks."""
    spec = fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0)
    ok, bad = spec["gpus"]
    bad.update(probe_failed=True, bound=True)
    spec["kernel_log"] = [(38.3, f"NVRM: GPU {bad['bus_id']}: RmInitAdapter failed! (0x22:0x3f:744)"),
                          (900.0, fakehw.xid_line(ok["bus_id"], 43, "Ch 00000008")),
                          (960.0, fakehw.xid_line(ok["bus_id"], 43, "Ch 00000010"))]
    _p, doc = run_health(tmp_path, spec, False)
    xid = gpu_checks(doc)["gpu.xid"]
    assert xid["status"] == "fail" and "RmInitAdapter failed" in xid["summary"], xid["summary"]
    assert f"GPU 0 ({ok['bus_id']}" in xid["summary"] and "Xid 43 x2" in xid["summary"], xid["summary"]
    assert "Xid 43 x2" in xid["detail"]
