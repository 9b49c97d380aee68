"""Every GPU hardware class staged on a fake node (ncclcheck_lab/fakehw.py) and read through the real collectors:
the verdict names the GPU (index, bus id, UUID), what was read and the action; the healthy node passes each check."""

from __future__ import annotations

import pytest

from ncclcheck.checks import gpu as hw
from ncclcheck.checks import hwaction
from ncclcheck.model import Status
from ncclcheck_lab import fakehw

from .hwnode import findings, one, read, read_counters

CHECKS = (hw.check_nouveau, hw.check_readable, hw.check_xid, hw.check_memory, hw.check_pcie, hw.check_nvlink,
          hw.check_fabric, hw.check_mig, hw.check_clocks, hw.check_persistence, hw.check_processes, hw.check_vbios)


def names_gpu(result, spec, i):
    """The summary names the GPU by index and bus id, the evidence adds its UUID."""
    g = spec["gpus"][i]
    assert f"GPU {i} ({g['bus_id']}" in result.summary, result.summary
    assert any(f.get("uuid") == g["uuid"] and f.get("bus_id") == g["bus_id"] and f.get("index") == i
               for f in findings(result)), findings(result)


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_healthy_hgx_node_passes_every_gpu_check(tmp_path, monkeypatch, smi):
    spec = fakehw.node_spec()
    gh = read(tmp_path, monkeypatch, spec, smi=smi)
    for check in CHECKS:
        r = one(check, gh)
        assert r.status is Status.PASS, (check.__name__, r.summary)


# ------------------------------------------------------------------------------------------------- memory
@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
@pytest.mark.parametrize("change,what,action", [
    ({"remapped_rows": [0, 0, True, False]}, "row remap pending", hwaction.RESET_GPU),
    ({"remapped_rows": [2, 3, False, True]}, "row remapping failed", hwaction.ISOLATE),
    ({"remapped_rows": [0, 512, False, False]}, "512 rows remapped for uncorrectable errors", hwaction.ISOLATE),
    ({"ecc_volatile": {"total": 3, "sram": 1, "dram": 2}}, "3 uncorrected ECC error(s) (SRAM 1, DRAM 2)",
     hwaction.RESET_GPU),
])
def test_memory_faults_name_the_gpu_the_counter_and_the_action(tmp_path, monkeypatch, change, what, action, smi):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=3, **change)
    r = one(hw.check_memory, read(tmp_path, monkeypatch, spec, smi=smi))
    assert r.status is Status.FAIL and what in r.summary and r.summary.endswith(action), r.summary
    names_gpu(r, spec, 3)
    assert r.evidence["action"] == action
    # the finding names the source it was read from
    said = ("nvidia-smi -q: Remapped Rows", "nvidia-smi -q: ECC Errors") if smi else \
        ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetTotalEccErrors")
    assert any(w in r.summary for w in said), r.summary


def test_ecc_window_is_since_the_driver_loaded_and_511_uncorrectable_rows_are_below_dcgms_limit(tmp_path,
                                                                                                 monkeypatch):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=1, ecc_volatile={"total": 1, "sram": 0, "dram": 1},
                         remapped_rows=[0, 511, False, False])
    r = one(hw.check_memory, read(tmp_path, monkeypatch, spec))
    [f] = findings(r)
    assert f["window"] == "since the driver loaded" and f["action"] == hwaction.RESET_GPU


@pytest.mark.parametrize("rp,what,action", [
    ({"sbe": 2, "dbe": 1, "pending": True}, "page retirement pending", hwaction.RESET_GPU),
    ({"sbe": 40, "dbe": 23, "pending": False}, "63 pages retired", hwaction.ISOLATE),
])
def test_a_pre_ampere_gpu_is_judged_on_retired_pages(tmp_path, monkeypatch, rp, what, action):
    spec = fakehw.faulty(fakehw.node_spec(gpus=2, nvswitches=0), gpu=0, remapped_rows=fakehw.NS, retired_pages=rp,
                         name="Tesla V100-SXM2-32GB")
    spec["gpus"][1].update(remapped_rows=fakehw.NS, retired_pages={"sbe": 0, "dbe": 0, "pending": False})
    r = one(hw.check_memory, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.FAIL and what in r.summary and r.evidence["action"] == action
    names_gpu(r, spec, 0)
    assert "GPU 1" not in r.summary


@pytest.mark.parametrize("code,action", [(1, hwaction.RESET_GPU), (2, hwaction.REBOOT), (3, hwaction.ISOLATE)])
def test_nvmls_recovery_action_is_the_action(tmp_path, monkeypatch, code, action):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=6, recovery_action=code)
    r = one(hw.check_memory, read(tmp_path, monkeypatch, spec))
    assert r.evidence["action"] == action and "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION" in r.summary
    names_gpu(r, spec, 6)


def test_memory_not_answered_by_any_gpu_is_a_skip_not_a_pass(tmp_path, monkeypatch):
    spec = fakehw.node_spec(gpus=1, nvswitches=0)
    spec["gpus"][0].update(remapped_rows=fakehw.NS, ecc_volatile=fakehw.NS, recovery_action=fakehw.NS)
    r = one(hw.check_memory, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.SKIP and "could not be read" in r.summary


# ---------------------------------------------------------------------------------------------------- Xid
def _xid_spec(*lines):
    spec = fakehw.node_spec()
    spec["kernel_log"] = list(lines)
    return spec


@pytest.mark.parametrize("code,text,action,status", [
    (79, "GPU has fallen off the bus.", hwaction.REBOOT, Status.FAIL),
    (48, "An uncorrectable double bit error", hwaction.RESET_GPU, Status.FAIL),
    (95, "Uncontained ECC error", hwaction.RESET_GPU, Status.FAIL),
    (13, "Graphics Exception", hwaction.RESTART_JOB, Status.WARN),
    (154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", hwaction.REBOOT,
     Status.FAIL),
])
def test_an_xid_maps_to_its_gpu_by_bus_id_and_to_the_catalogues_action(tmp_path, monkeypatch, code, text, action,
                                                                       status):
    spec = fakehw.node_spec()
    spec["kernel_log"] = [(5000.0, fakehw.xid_line(spec["gpus"][4]["bus_id"], code, text))]
    r = one(hw.check_xid, read(tmp_path, monkeypatch, spec))
    assert r.status is status and f"Xid {code}" in r.summary and r.evidence["action"] == action, r.summary
    names_gpu(r, spec, 4)
    assert "since boot" in r.summary and "/dev/kmsg" in r.summary


def test_an_application_xid_repeated_five_times_is_no_longer_the_applications(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    bus = spec["gpus"][2]["bus_id"]
    spec["kernel_log"] = [(100.0 + k, fakehw.xid_line(bus, 31, "MMU Fault")) for k in range(5)]
    r = one(hw.check_xid, read(tmp_path, monkeypatch, spec))
    assert r.evidence["action"] == hwaction.RESET_GPU and "x5" in r.summary


def test_xids_the_catalogue_ignores_are_listed_but_pass(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    spec["kernel_log"] = [(100.0, fakehw.xid_line(spec["gpus"][0]["bus_id"], 43, "Ch 00000010, reset channel"))]
    r = one(hw.check_xid, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.PASS and "Xid 43" in r.summary and "ignore" in r.summary


def test_a_fatal_sxid_names_the_nvswitch(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    sw = spec["nvswitches"][1]
    spec["kernel_log"] = [(100.0, f"nvidia-nvswitch1: SXid (PCI:{sw}): 24007, Fatal, Link 12 sourcetrack timeout"),
                          (101.0, f"nvidia-nvswitch1: SXid (PCI:{sw}): 12028, Non-fatal, Link 44 egress error")]
    r = one(hw.check_xid, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.FAIL and f"NVSwitch {sw}" in r.summary and r.evidence["action"] == hwaction.REBOOT
    assert "SXid 12028" in r.detail  # the non-fatal one is there too, as monitor


def test_the_xid_window_leaves_out_older_lines_and_says_which_window(tmp_path, monkeypatch):
    spec = fakehw.node_spec()  # uptime one day
    bus = spec["gpus"][0]["bus_id"]
    spec["kernel_log"] = [(1000.0, fakehw.xid_line(bus, 79)), (80000.0, fakehw.xid_line(bus, 13))]
    r = one(hw.check_xid, read(tmp_path, monkeypatch, spec, xid_window_s=2 * 3600))
    assert "Xid 79" not in r.summary and "Xid 13" in r.summary and "in the last 2 h" in r.summary


def test_a_log_that_cannot_be_read_is_never_no_xid(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    spec["kmsg_readable"] = False
    r = one(hw.check_xid, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.SKIP and "could not be read" in r.summary and "no Xid" not in r.summary


# -------------------------------------------------------------------------------------------------- NVLink
@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_down_nvlink_link_names_the_gpu_and_the_link(tmp_path, monkeypatch, smi):
    spec = fakehw.node_spec()
    spec["gpus"][5]["nvlink"]["down"] = [7, 11]
    r = one(hw.check_nvlink, read(tmp_path, monkeypatch, spec, smi=smi))
    assert r.status is Status.FAIL and "16 of 18 NVLink links up (down: 7, 11)" in r.summary
    assert r.evidence["action"] == hwaction.REBOOT  # an NVSwitch fabric retrains with the node
    assert ("nvidia-smi nvlink -s" if smi else "nvmlDeviceGetNvLinkState") in r.summary
    names_gpu(r, spec, 5)


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_down_link_between_gpus_wired_to_each_other_is_a_reset_of_the_gpu(tmp_path, monkeypatch, smi):
    """A DGX-1's V100s (a cube mesh, no NVSwitch, no fabric state): a reset of the GPU retrains its links."""
    spec = fakehw.node_spec(nvswitches=0)
    for g in spec["gpus"]:
        g.update(name="Tesla V100-SXM2-32GB", fabric=fakehw.NS, nvlink={**g["nvlink"], "count": 6})
    spec["gpus"][3]["nvlink"]["down"] = [5]
    r = one(hw.check_nvlink, read(tmp_path, monkeypatch, spec, smi=smi))
    assert r.status is Status.FAIL and "5 of 6 NVLink links up (down: 5)" in r.summary, r.summary
    assert r.evidence["action"] == hwaction.RESET_GPU
    names_gpu(r, spec, 3)


def test_an_sxm_gpu_whose_links_are_all_inactive_fails_through_nvidia_smi(tmp_path, monkeypatch):
    """nvidia-smi prints "all links are inActive" and no link line; an SXM board has 18: every one is down."""
    spec = fakehw.node_spec(gpus=2, nvswitches=0)
    text = fakehw.render_nvlink_status(spec).split("GPU 1:")[0] + (
        f"GPU 1: {spec['gpus'][1]['name']} (UUID: {spec['gpus'][1]['uuid']})\n"
        "\t NVML: Unable to retrieve NVLink information as all links are inActive\n")
    spec["smi_text"] = {"nvlink -s": text}
    r = one(hw.check_nvlink, read(tmp_path, monkeypatch, spec, smi=True))
    assert r.status is Status.FAIL and "0 of 18 NVLink links up" in r.summary, r.summary
    names_gpu(r, spec, 1)


def test_a_model_not_in_the_table_is_judged_on_nvmls_link_count(tmp_path, monkeypatch):
    spec = fakehw.node_spec(gpus=2, nvswitches=0)
    for g in spec["gpus"]:
        g["name"] = "NVIDIA RTX 6000 Ada Generation"
        g["nvlink"].update(count=4, down=[3])
    r = one(hw.check_nvlink, read(tmp_path, monkeypatch, spec))
    assert "3 of 4 NVLink links up" in r.summary and "the count NVML reports" in r.summary


def test_a_gpu_without_nvlink_is_not_judged(tmp_path, monkeypatch):
    spec = fakehw.node_spec(gpus=1, nvswitches=0)
    spec["gpus"][0]["nvlink"]["count"] = None  # NVML_ERROR_NOT_SUPPORTED, as on the recorded H100 VM
    r = one(hw.check_nvlink, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.SKIP and "no NVLink" in r.summary


@pytest.mark.parametrize("errors,what,action", [
    ({"3": {"crc_flit": [100, 20]}}, "CRC errors +20", hwaction.MONITOR),
    ({"3": {"replay": [0, 2]}}, "replay errors +2", hwaction.REBOOT),  # an NVSwitch node: the fabric's reboot
    ({"3": {"recovery": [5, 1]}}, "recovery errors +1", hwaction.REBOOT),
])
@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_nvlink_counters_are_judged_on_their_change_between_two_reads(tmp_path, monkeypatch, errors, what, action,
                                                                       smi):
    spec = fakehw.node_spec()
    spec["gpus"][2]["nvlink"]["errors"] = errors
    spec["gpus"][6]["nvlink"]["errors"] = {"0": {"crc_flit": [9999, 0]}}  # a lifetime count that does not move
    gh = read(tmp_path, monkeypatch, spec, smi=smi)
    c = read_counters(tmp_path, monkeypatch, spec, interval_s=0.5, smi=smi)  # the run's window: at least 0.5 s
    r = one(hw.check_nvlink, gh, c)
    assert what in r.summary and "on link 3" in r.summary and r.evidence["action"] == action, r.summary
    names_gpu(r, spec, 2)
    assert "GPU 6" not in r.summary and "in 0.50 s" in r.summary  # the window: the interval between the two reads


def test_nvlink_crc_at_dcgms_rate_resets_the_gpu(tmp_path, monkeypatch):
    spec = fakehw.node_spec(nvswitches=0)
    for g in spec["gpus"]:
        g["fabric"] = fakehw.NS  # GPUs wired to each other, no fabric: a reset of the GPU retrains its links
    spec["gpus"][1]["nvlink"]["errors"] = {"9": {"crc_data": [0, 80]}}
    gh = read(tmp_path, monkeypatch, spec)
    r = one(hw.check_nvlink, gh, read_counters(tmp_path, monkeypatch, spec, interval_s=0.5))  # 80 in 0.5 s: 160/s
    assert r.evidence["action"] == hwaction.RESET_GPU and "160/s" in r.summary


def test_counters_since_a_baseline_of_this_boot_are_judged_and_another_boots_are_not(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    gh = read(tmp_path, monkeypatch, spec)
    then = read_counters(tmp_path, monkeypatch, spec, interval_s=0.5)
    spec["gpus"][4]["nvlink"]["errors"] = {"2": {"recovery": [3, 0]}}  # rose since the baseline, quiet now
    now = read_counters(tmp_path, monkeypatch, spec, interval_s=0.5)
    now["last"]["at"] = then["last"]["at"] + 7200
    assert one(hw.check_nvlink, gh, now).status is Status.PASS  # the run's own window saw nothing
    r = one(hw.check_nvlink, gh, now, baseline=then, baseline_source="--baseline golden.json")
    assert "recovery errors +3" in r.summary and "since --baseline golden.json (2.0 h ago)" in r.summary
    names_gpu(r, spec, 4)
    other_boot = {**then, "boot_id": "another-boot"}
    assert one(hw.check_nvlink, gh, now, baseline=other_boot).status is Status.PASS


# ---------------------------------------------------------------------------------------------------- PCIe
def test_a_pcie_link_trained_at_x8_names_the_gpu_and_its_upstream_port(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    spec["gpus"][3]["pcie"]["width"] = 8
    r = one(hw.check_pcie, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.FAIL and "PCIe link x8 of x16" in r.summary and "behind 0000:37:01.0" in r.summary
    assert r.evidence["action"] == hwaction.ISOLATE and "current_link" in r.summary
    names_gpu(r, spec, 3)


@pytest.mark.parametrize("util,status", [(0, Status.PASS), (97, Status.FAIL)])
def test_a_lower_pcie_generation_is_a_fault_only_under_load(tmp_path, monkeypatch, util, status):
    spec = fakehw.node_spec()
    spec["gpus"][0]["pcie"]["sysfs_speed"] = "16.0 GT/s PCIe"
    spec["gpus"][0]["utilization"] = util
    r = one(hw.check_pcie, read(tmp_path, monkeypatch, spec))
    assert r.status is status, r.summary
    if status is Status.PASS:
        assert "not judged at idle" in r.summary and "16.0 GT/s of 32.0 GT/s" in r.summary
    else:
        assert "PCIe 16.0 GT/s of 32.0 GT/s under load (97% busy)" in r.summary
        names_gpu(r, spec, 0)


@pytest.mark.parametrize("aer,what,action", [([0, 0, 1], "AER fatal errors +1", hwaction.REBOOT),
                                             ([0, 2, 0], "AER non-fatal errors +2", hwaction.RESET_GPU),
                                             ([5, 0, 0], "AER correctable errors +5", hwaction.MONITOR)])
def test_aer_counters_are_judged_on_their_change(tmp_path, monkeypatch, aer, what, action):
    spec = fakehw.node_spec()
    spec["gpus"][7]["pcie"]["aer"] = [100, 7, 0]  # since boot: not judged while they do not move
    root = tmp_path / "node"

    def between():  # between the two reads the errors happen
        spec["gpus"][7]["pcie"]["aer"] = [a + b for a, b in zip([100, 7, 0], aer)]
        fakehw.write_aer(root, spec, 7)

    gh = read(tmp_path, monkeypatch, spec)
    r = one(hw.check_pcie, gh, read_counters(tmp_path, monkeypatch, spec, between=between))
    assert what in r.summary and r.evidence["action"] == action and "aer_dev_" in r.summary
    names_gpu(r, spec, 7)


def test_pcie_replays_are_counted_from_nvml(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    spec["gpus"][2]["pcie"]["replay"] = [40, 3]
    gh = read(tmp_path, monkeypatch, spec)
    r = one(hw.check_pcie, gh, read_counters(tmp_path, monkeypatch, spec))
    assert "PCIe replays +3" in r.summary and "nvmlDeviceGetPcieReplayCounter" in r.summary


# -------------------------------------------------------------------------------------------------- clocks
@pytest.mark.parametrize("mask,status,text", [
    (0x1, Status.PASS, "no slowdown"),
    (0x4, Status.PASS, "at the power cap (a note)"),
    (0x8, Status.FAIL, "hardware slowdown"),
    (0x40, Status.FAIL, "hardware thermal slowdown"),
    (0x20, Status.FAIL, "software thermal slowdown"),
    (0x80, Status.FAIL, "power brake slowdown"),
])
def test_clock_event_reasons(tmp_path, monkeypatch, mask, status, text):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=4, clocks=mask)
    r = one(hw.check_clocks, read(tmp_path, monkeypatch, spec))
    assert r.status is status and text in r.summary, r.summary
    if status is Status.FAIL:
        names_gpu(r, spec, 4)
        assert r.evidence["action"] == hwaction.ISOLATE


# ------------------------------------------------------------------------------- persistence, MIG, processes
def test_persistence_off_is_a_warning_to_monitor(tmp_path, monkeypatch):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=1, persistence=False)
    r = one(hw.check_persistence, read(tmp_path, monkeypatch, spec, smi=True))
    assert r.status is Status.WARN and r.evidence["action"] == hwaction.MONITOR
    names_gpu(r, spec, 1)


@pytest.mark.parametrize("mig,expect,status,text", [
    ([1, 1], False, Status.FAIL, "MIG on, expected off"),
    ([0, 0], True, Status.FAIL, "MIG off, expected on"),
    ([1, 1], None, Status.PASS, "MIG either"),
    ([0, 1], False, Status.FAIL, "MIG change pending"),
])
def test_mig_mode_against_what_is_expected(tmp_path, monkeypatch, mig, expect, status, text):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=2, mig=mig)
    if expect is None:
        for g in spec["gpus"]:
            g["mig"] = mig
    r = one(hw.check_mig, read(tmp_path, monkeypatch, spec), mig=expect)
    assert r.status is status and text in r.summary, r.summary


@pytest.mark.parametrize("mode,status", [("leftover", Status.FAIL), ("warn", Status.WARN), ("allowed", Status.PASS)])
def test_a_process_holding_gpu_memory(tmp_path, monkeypatch, mode, status):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=0, processes=[{"pid": 999999, "used": 30 << 30}])
    r = one(hw.check_processes, read(tmp_path, monkeypatch, spec), processes=mode)
    assert r.status is status and "pid 999999" in r.summary and "30.0 GiB" in r.summary
    if status is not Status.PASS:
        names_gpu(r, spec, 0)


def test_this_jobs_own_processes_are_not_leftovers(tmp_path, monkeypatch):
    import os

    spec = fakehw.faulty(fakehw.node_spec(), gpu=0, processes=[{"pid": os.getpid(), "used": 1 << 30}])
    monkeypatch.setattr("ncclcheck.facts.gpuhealth.procfs", lambda *p: os.path.join("/proc", *p))
    r = one(hw.check_processes, read(tmp_path, monkeypatch, spec), processes="leftover")
    assert r.status is Status.PASS


# ---------------------------------------------------------------------------------------- fabric, nouveau, VBIOS
@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
@pytest.mark.parametrize("fabric,what", [({"state": 1, "status": 0}, "Not Started"),
                                         ({"state": 3, "status": 22}, "completed with an error"),
                                         ({"state": 2, "status": 0}, "still in progress")])
def test_the_fabric_managers_state_on_an_nvswitch_node(tmp_path, monkeypatch, fabric, what, smi):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=6, fabric=fabric)
    r = one(hw.check_fabric, read(tmp_path, monkeypatch, spec, smi=smi))
    assert r.status is Status.FAIL and r.evidence["action"] == hwaction.REBOOT and what in r.summary, r.summary
    assert ("nvidia-smi -q: Fabric" if smi else "nvmlDeviceGetGpuFabricInfo") in r.summary
    names_gpu(r, spec, 6)


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_an_h100_vm_stuck_in_fabric_training_fails_though_no_nvswitch_is_visible(tmp_path, monkeypatch, smi):
    """A VM sees its GPUs' fabric state but not the switches (the host keeps them): In Progress means every CUDA
    call fails with 802 (system not ready)."""
    spec = fakehw.node_spec(nvswitches=0)
    for g in spec["gpus"]:
        g["fabric"] = {"state": 2, "status": 0}
    r = one(hw.check_fabric, read(tmp_path, monkeypatch, spec, smi=smi))
    assert r.status is Status.FAIL and "802" in r.summary and r.evidence["action"] == hwaction.REBOOT
    names_gpu(r, spec, 0)


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_pre_hopper_hgx_node_reports_no_fabric_state_and_is_not_failed(tmp_path, monkeypatch, smi):
    """An A100 HGX node: NVSwitches on the bus, NVML's fabric info NOT_SUPPORTED (nvidia-smi: State N/A), as every
    pre-Hopper board answers. Never "the fabric manager is not running"."""
    spec = fakehw.node_spec()
    for g in spec["gpus"]:
        g.update(name="NVIDIA A100-SXM4-80GB", fabric=fakehw.NS)
    r = one(hw.check_fabric, read(tmp_path, monkeypatch, spec, smi=smi))
    assert r.status is Status.SKIP and "pre-Hopper" in r.summary, r.summary


def test_nouveau_loaded_is_a_reboot(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    spec["nouveau"] = True
    r = one(hw.check_nouveau, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.FAIL and "nouveau" in r.summary and r.evidence["action"] == hwaction.REBOOT


def test_one_gpu_on_another_vbios_is_named(tmp_path, monkeypatch):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=5, vbios="96.00.74.00.0F")
    r = one(hw.check_vbios, read(tmp_path, monkeypatch, spec))
    assert r.status is Status.WARN and "VBIOS 96.00.74.00.0F, the node's other" in r.summary
    names_gpu(r, spec, 5)


def test_every_finding_word_is_from_the_vocabulary():
    with pytest.raises(ValueError):
        hwaction.Finding("GPU 0", "x", "y", "replace the board")
    assert hwaction.ACTIONS == ("monitor", "restart the job", "reset the GPU", "reboot", "isolate the node")
