"""gpu.xid beyond the Xid table: the driver's other fault lines (a GPU fallen off the bus at probe, a failed probe or
initialisation, "reset required", "GPU lost"), Xid 45 taking its cause's action, and an NVSwitch's SXid judged by the
severity its own lines state, each read from a fake /dev/kmsg through the real reader and named by GPU (index, bus
id) or NVSwitch, with its action; a healthy boot's driver lines give no finding.

The lines are written in the drivers' formats (NVIDIA/open-gpu-kernel-modules osapi.c, osinit.c, nv.c, nvassert.c,
kernel_rc.c, kernel_gsp.c, common_nvswitch.h, error_nvswitch.c; the kernel's drivers/base/dd.c) with this project's
own values; operators' posted logs of the same shapes: NVIDIA/NVSentinel#155, leptonai/gpud#1209,
NVIDIA/gpu-operator#1146, NVIDIA/open-gpu-kernel-modules#1150, leptonai/gpud#338."""

from __future__ import annotations

import pytest

from ncclcheck.checks import gpu as hw
from ncclcheck.checks import hwaction, xid
from ncclcheck.facts import kernlog
from ncclcheck.model import Status
from ncclcheck_lab import fakehw

from .hwnode import findings, one, read


def judged(tmp_path, monkeypatch, spec, lines):
    spec["kernel_log"] = list(lines)
    return one(hw.check_xid, read(tmp_path, monkeypatch, spec))


def only(result) -> dict:
    [f] = findings(result)
    return f


def test_every_driver_line_name_has_an_action_and_every_action_a_line():
    """facts/kernlog.py matches the lines, checks/xid.py says what each calls for: the two halves name the same set."""
    assert {name for name, _, _ in kernlog.NVRM_LINES} == set(xid.NVRM)
    assert set(xid.NVRM_SAME_AS_XID) <= set(xid.NVRM)


# ------------------------------------------------------------------------------------- a GPU that failed at probe
LOST = ["NVRM: The NVIDIA GPU {bus}", "NVRM: (PCI ID: 10de:2330) installed in this system has",
        "NVRM: fallen off the bus and is not responding to commands."]


@pytest.mark.parametrize("lines,code", [
    # R515 and later, the probe finding the GPU gone (osapi.c), then the kernel's and the driver's probe lines
    ([("\\x0a".join(LOST)), "nvidia: probe of {bus} failed with error -1",
      "NVRM: The NVIDIA probe routine failed for 1 device(s)."], "fallen_off_bus_at_probe"),
    # a newer kernel's wording of the failed probe, alone
    (["nvidia {bus}: probe with driver nvidia failed with error -1"], "probe_failed"),
    # the driver's initialisation failing on every open, with the device prefix (R515 and later)
    (["NVRM: GPU {bus}: RmInitAdapter failed! (0x62:0x40:1999)",
      "NVRM: GPU {bus}: rm_init_adapter failed, device minor number 3"] * 3, "init_failed"),
])
def test_a_gpu_that_failed_at_probe_is_named_by_its_bus_id_and_rebooted(tmp_path, monkeypatch, lines, code):
    spec = fakehw.node_spec(gpus=7)
    bus = fakehw.node_spec()["gpus"][7]["bus_id"]  # the eighth GPU, absent from NVML: the driver never brought it up
    r = judged(tmp_path, monkeypatch, spec, [(20.0 + k, t.format(bus=bus)) for k, t in enumerate(lines)])
    assert r.status is Status.FAIL and r.evidence["action"] == hwaction.REBOOT, r.summary
    f = only(r)  # the failed probe and the driver's count of them are the same fault: listed under it
    assert f"GPU ({bus})" in r.summary and (f["value"]["code"], f["bus_id"]) == (code, bus)
    assert "isolate the node" in f["what"] or code == "fallen_off_bus_at_probe"


def test_an_older_drivers_lines_without_a_bus_id_name_the_node(tmp_path, monkeypatch):
    r = judged(tmp_path, monkeypatch, fakehw.node_spec(), [
        (30.0, "NVRM: RmInitAdapter failed! (0x25:0xffff:1401)"),
        (30.1, "NVRM: rm_init_adapter failed for device bearing minor number 0"),
        (31.0, "NVRM: The NVIDIA probe routine failed for 2 device(s).")])
    assert r.evidence["action"] == hwaction.REBOOT and "the node (the line names no GPU)" in r.summary
    assert any("2 GPU(s)" in f["what"] for f in findings(r)) and "isolate the node" in r.summary


# ------------------------------------------------------------------------------- a GPU the driver has lost
def test_fallen_off_the_bus_after_xid_79_is_one_fault_not_two(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    g = spec["gpus"][5]
    short = g["bus_id"].rsplit(".", 1)[0]
    r = judged(tmp_path, monkeypatch, spec, [
        (900.0, f"NVRM: GPU at PCI:{short}: {g['uuid']}"),
        (900.0, fakehw.xid_line(g["bus_id"], 79, "GPU has fallen off the bus.")),
        (900.0, f"NVRM: GPU {g['bus_id']}: GPU has fallen off the bus."),
        (900.1, "NVRM: nvCheckOkFailedNoLog: Check failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) "
                "returned from rpcRecvPoll(pGpu, pRpc, 10) @ kernel_gsp.c:2000")])
    f = only(r)
    assert f["index"] == 5 and f["bus_id"] == g["bus_id"] and f["action"] == hwaction.REBOOT and "Xid 79" in f["what"]
    assert {i["value"]["code"] for i in r.evidence["ignored"]} == {"fallen_off_bus", "gpu_lost"}


def test_fallen_off_the_bus_without_an_xid_names_the_gpu(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    g = spec["gpus"][2]
    r = judged(tmp_path, monkeypatch, spec, [(900.0, f"NVRM: GPU {g['bus_id']}: GPU has fallen off the bus.")])
    f = only(r)
    assert (f["index"], f["bus_id"], f["action"]) == (2, g["bus_id"], hwaction.REBOOT)
    assert f"GPU 2 ({g['bus_id']}" in r.summary


@pytest.mark.parametrize("line,action", [
    ("NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned "
     "from status @ kernel_channel.c:1000", hwaction.RESET_GPU),
    ("NVRM: GPU1 nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) "
     "returned from pRmApi->Control(pRmApi, h, h2, 0x1, p, 8) @ nv_gpu_ops.c:3000", hwaction.RESET_GPU),
    ("NVRM: GPU5 nvCheckOkFailedNoLog: Check failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) "
     "returned from rpcRecvPoll(pGpu, pRpc, 10) @ kernel_gsp.c:2000", hwaction.REBOOT),
])
def test_a_status_the_driver_got_is_its_action_on_the_node(tmp_path, monkeypatch, line, action):
    r = judged(tmp_path, monkeypatch, fakehw.node_spec(), [(500.0 + k / 10, line) for k in range(40)])
    f = only(r)
    assert f["action"] == action and "x40" in f["what"] and f["device"] == "the node (the line names no GPU)"
    assert r.status is Status.FAIL


def test_gsp_rpc_errors_name_the_gpu_to_reset(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    g = spec["gpus"][7]
    short = g["bus_id"].rsplit(".", 1)[0]
    r = judged(tmp_path, monkeypatch, spec, [
        (700.0, f"NVRM: Rate limiting GSP RPC error prints for GPU at PCI:{short} (printing 1 of every 30).  The GPU "
                "likely needs to be reset.")])
    f = only(r)
    assert (f["index"], f["action"]) == (7, hwaction.RESET_GPU)


# ------------------------------------------------------------------------------------------------- Xid 45
def test_xid_45_takes_the_cause_the_driver_names_even_when_the_cause_left_the_window(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    g = spec["gpus"][1]
    short = g["bus_id"].rsplit(".", 1)[0]
    r = judged(tmp_path, monkeypatch, spec, [
        (60000.0 + k, f"NVRM: Xid (PCI:{short}): 45, pid=7001, name=python3, Ch 0000000{k} caused by previous Xid 149")
        for k in range(6)])
    f = only(r)
    # Xid 149 is an NVLink fault: the catalogue's reset of the GPU, on an NVSwitch node the node's reboot (gpu.py's
    # nvlink_action: the fabric retrains only with the node)
    assert f["index"] == 1 and xid.XID[149][0] == hwaction.RESET_GPU and f["action"] == hwaction.REBOOT
    assert "Xid 45 x6" in f["what"] and "after Xid 149" in f["what"] and f["value"]["caused_by"] == [149]


def test_xid_45_caused_by_79_is_a_reboot(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    g = spec["gpus"][6]
    short = g["bus_id"].rsplit(".", 1)[0]
    r = judged(tmp_path, monkeypatch, spec, [
        (100.0, fakehw.xid_line(g["bus_id"], 79, "GPU has fallen off the bus.")),
        (100.2, f"NVRM: Xid (PCI:{short}): 45, pid=7001, name=python3, Ch 00000002 caused by previous Xid 79")])
    assert {(f["value"]["code"], f["action"]) for f in findings(r)} == {(79, hwaction.REBOOT), (45, hwaction.REBOOT)}


def test_xid_45_from_an_older_driver_takes_its_gpus_other_xid(tmp_path, monkeypatch):
    """Older drivers name no cause: an Xid 45 on a GPU that also had Xid 48 in the window takes 48's action; an Xid
    45 on another GPU with no other Xid stays the catalogue's solo case (listed, no action)."""
    spec = fakehw.node_spec()
    a, b = spec["gpus"][0], spec["gpus"][4]
    r = judged(tmp_path, monkeypatch, spec, [
        (100.0, fakehw.xid_line(a["bus_id"], 48, "An uncorrectable double bit error (DBE) has been detected.")),
        (100.5, fakehw.xid_line(a["bus_id"], 45, "Ch 00000010")),
        (200.0, fakehw.xid_line(b["bus_id"], 45, "Ch 00000011"))])
    got = {(f["index"], f["value"]["code"]): f for f in findings(r)}
    assert got[(0, 45)]["action"] == hwaction.RESET_GPU and "after Xid 48" in got[(0, 45)]["what"]
    assert (4, 45) not in got and [(i["index"], i["value"]["code"]) for i in r.evidence["ignored"]] == [(4, 45)]


def test_a_solo_xid_45_is_listed_and_passes(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    r = judged(tmp_path, monkeypatch, spec, [(100.0, fakehw.xid_line(spec["gpus"][3]["bus_id"], 45, "Ch 00000001"))])
    assert r.status is Status.PASS and "Xid 45" in r.summary and "ignore" in r.summary


# --------------------------------------------------------------------------------------------------- SXid
def _sxid(sw: str, n: int, code: int, text: str) -> str:
    return f"nvidia-nvswitch{n}: SXid (PCI:{sw}): {code:05d}, {text}"


@pytest.mark.parametrize("head,action,what", [
    ("Fatal, Link 30 LTSSM Fault Up", hwaction.REBOOT, "fatal NVSwitch error"),
    ("Non-fatal, Link 44 egress non-posted PRIV error (First)", hwaction.MONITOR, "non-fatal NVSwitch error"),
])
def test_an_sxids_follow_on_lines_are_one_event_of_the_stated_severity(tmp_path, monkeypatch, head, action, what):
    spec = fakehw.node_spec()
    sw = spec["nvswitches"][2]
    code = 20034 if head.startswith("Fatal") else 12028
    lines = [head, "Severity 1 Engine instance 30 Sub-engine instance 00",
             "Data {0x00000000, 0x1e000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, "
             "0x00000000}"]
    r = judged(tmp_path, monkeypatch, spec, [(300.0 + k, _sxid(sw, 2, code, t)) for k in range(2) for t in lines])
    f = only(r)
    assert f["device"] == f"NVSwitch {sw}" and f["action"] == action and f"SXid {code} x2: {what}" == f["what"]
    assert "corrected" not in f["what"]


@pytest.mark.parametrize("code,text,action,words", [
    (10004, "NVSWITCH Temperature 92C | TSENSE WARN Threshold 90C", hwaction.MONITOR, "NVIDIA's SXid list: non-fatal"),
    (22003, "Minion Halt", hwaction.REBOOT, "NVIDIA's SXid list: fatal"),
    (26006, "SOE HALT data[0] = 0x1", hwaction.REBOOT, "not in NVIDIA's SXid list: taken as fatal"),
])
def test_an_sxid_whose_lines_state_no_severity_says_so(tmp_path, monkeypatch, code, text, action, words):
    spec = fakehw.node_spec()
    sw = spec["nvswitches"][0]
    r = judged(tmp_path, monkeypatch, spec, [(300.0, _sxid(sw, 0, code, text)),
                                             (300.0, _sxid(sw, 0, code, "Severity 5 Engine instance 00 Sub-engine "
                                                                        "instance 00"))])
    f = only(r)
    assert f["action"] == action and "severity not stated" in f["what"] and words in f["what"], f["what"]
    assert f["value"]["severity"] == "not stated" and "non-fatal (corrected)" not in r.summary


# ------------------------------------------------------------------------------------------- a healthy boot
def test_a_healthy_boots_driver_lines_give_no_finding(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    lines = [(3.1, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:15 UTC 2024"),
             (3.2, "nvidia-nvlink: Nvlink Core is being initialized, major device number 511")]
    for g in spec["gpus"]:
        lines += [(4.0, f"nvidia {g['bus_id']}: enabling device (0000 -> 0002)"),
                  (9.0, f"NVRM: GPU at PCI:{g['bus_id'].rsplit('.', 1)[0]}: {g['uuid']}"),
                  (9.1, f"nvidia-persistenced[2145]: device {g['bus_id']} - registered")]
    lines.append((9.5, "NVRM: Persistence mode is deprecated and will be removed in a future release. Please use "
                       "nvidia-persistenced instead."))
    r = judged(tmp_path, monkeypatch, spec, lines)
    assert r.status is Status.PASS and "no Xid, SXid or NVRM fault line" in r.summary, r.summary
