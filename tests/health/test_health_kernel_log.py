"""`ncclcheck health` on a fake 8-GPU node whose eighth GPU fell off the bus at probe (the driver's three-line record,
NVIDIA/open-gpu-kernel-modules osapi.c, in this project's own values; the shape an operator posted in
NVIDIA/NVSentinel#155): NVML sees seven GPUs, no Xid is logged, and gpu.xid still names the lost GPU by bus id with
the action, in a report the schema accepts."""

from __future__ import annotations

from ncclcheck_lab import fakehw

from .test_health_hw import gpu_checks, health, node


def test_a_gpu_lost_at_probe_is_named_by_bus_id_through_the_cli(tmp_path, validate_report):
    spec = fakehw.node_spec(gpus=7, ib_ports=0)
    lost = fakehw.node_spec()["gpus"][7]["bus_id"]
    record = "\\x0a".join([f"NVRM: The NVIDIA GPU {lost}", "NVRM: (PCI ID: 10de:2330) installed in this system has",
                           "NVRM: fallen off the bus and is not responding to commands."])
    spec["kernel_log"] = [(14.0, record), (14.1, f"nvidia: probe of {lost} failed with error -1"),
                          (14.2, "NVRM: The NVIDIA probe routine failed for 1 device(s).")]
    p, doc = health(tmp_path, node(tmp_path, spec))
    validate_report(doc)
    xid = gpu_checks(doc)["gpu.xid"]
    assert p.returncode == 1 and xid["status"] == "fail", xid["summary"]
    assert f"GPU ({lost})" in xid["summary"] and xid["summary"].endswith("reboot"), xid["summary"]
    [f] = xid["evidence"]["findings"]
    assert (f["bus_id"], f["action"]) == (lost, "reboot")
