"""A GPU's health as the driver answers it, for `health`, `preflight` and `env` (the `gpu_health` fact group).

Per GPU (index, bus id, UUID, name): VBIOS, persistence and MIG mode, ECC mode and its volatile uncorrected counts
(total, SRAM, DRAM), row remapping (Ampere and later) or retired pages (earlier GPUs), NVML's recovery action, the
clock-event reasons, utilisation, the compute processes holding memory, PCIe as NVML sees it, and the fabric state
(NVSwitch systems). Asked through NVML's bindings (facts/nvml.py), else read from `nvidia-smi -q` and `nvidia-smi
nvlink -s` (facts/smiq.py, facts/smilink.py) into the same facts: one reading, two sources. Whatever a GPU does not
support reads None and is listed as unsupported; a read that failed keeps its state (facts/nvml.py: requires reset,
GPU is lost, unknown error); a GPU counted without a handle (`unreachable`) and one on the PCI bus the driver does
not list (`absent`) are kept by bus id. Never guessed.

Beside them, what the PCI tree and the kernel say: the GPUs' links in sysfs with the bridge above each
(facts/links.py), the node's NVSwitches, nouveau loaded, NVLink state and the kernel log's fault lines (Xid, SXid,
the driver's NVRM lines) within a window (facts/kernlog.py). The GPUs' cumulative error counters (PCIe replay and
AER, NVLink CRC/replay/recovery) are not here: they are read with every other counter of the node in the run's one
counter window (facts/counters.py).
Nothing here writes to a device: no persistence mode set, no clocks, no reset.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from ..envnames import JOB_ID_VARS
from . import fabrichealth, imex, kernlog, links, pcitree, smi, smilink, smiread
from . import nvml as nv_
from .roots import procfs, read_bytes, read_text, sysfs
from .util import listdir, run_cmd

Runner = Callable[[Sequence[str], float], str]
SMI_TIMEOUT_S = 5.0  # one nvidia-smi query on a node of 8 GPUs answers in ~0.1-1 s (persistence off: the slow end)
MAX_GPUS = 64
MAX_PROCESSES = 32  # per GPU

# nvmlClocksEventReasons bits (nvml.h), the ones a verdict reads; the others (application clocks 0x2, sync boost
# 0x10, display clock 0x100) are settings, not faults.
GPU_IDLE, SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x1, 0x4, 0x8, 0x20, 0x40, 0x80
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
# nvmlReturn_t (nvml.h): a binding's call the driver's library lacks, and a struct version the driver does not know
FUNCTION_NOT_FOUND, VERSION_MISMATCH = 13, 25


# Where each fact is read, by source (a finding names the one its GPU was read from): (NVML, nvidia-smi)
READS = {
    "remapped_rows": ("nvmlDeviceGetRemappedRows", "nvidia-smi -q: Remapped Rows"),
    "ecc_volatile": ("nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)", "nvidia-smi -q: ECC Errors / Volatile"),
    "ecc_mode": ("nvmlDeviceGetEccMode", "nvidia-smi -q: ECC Mode"),
    "retired_pages": ("nvmlDeviceGetRetiredPages", "nvidia-smi -q: Retired Pages"),
    "retired_pages_pending": ("nvmlDeviceGetRetiredPagesPendingStatus",
                              "nvidia-smi -q: Retired Pages / Pending Page Blacklist"),
    "recovery_action": ("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", "nvidia-smi -q: GPU Recovery Action"),
    "clock_event_reasons": ("nvmlDeviceGetCurrentClocksEventReasons", "nvidia-smi -q: Clocks Event Reasons"),
    "persistence": ("nvmlDeviceGetPersistenceMode", "nvidia-smi -q: Persistence Mode"),
    "mig": ("nvmlDeviceGetMigMode", "nvidia-smi -q: MIG Mode"),
    "processes": ("nvmlDeviceGetComputeRunningProcesses", "nvidia-smi -q: Processes"),
    "fabric": ("nvmlDeviceGetGpuFabricInfo", "nvidia-smi -q: Fabric"),
    "fabric_health": ("nvmlDeviceGetGpuFabricInfoV: healthSummary / healthMask", "nvidia-smi -q: Fabric / Health"),
    "vbios": ("nvmlDeviceGetVbiosVersion", "nvidia-smi -q: VBIOS Version"),
    "pcie": ("nvmlDeviceGetCurrPcieLink*", "nvidia-smi -q: GPU Link Info"),
    "pcie_replay": ("nvmlDeviceGetPcieReplayCounter", "nvidia-smi -q: Replays Since Reset"),
    "nvlink_state": ("nvmlDeviceGetNvLinkState", "nvidia-smi nvlink -s"),
    "nvlink_errors": ("nvmlDeviceGetNvLinkErrorCounter", "nvidia-smi nvlink -e"),
    "handle": ("nvmlDeviceGetHandleByIndex", "nvidia-smi -q"),
}


def read_of(g: Optional[dict], key: str) -> str:
    """How a finding names where its fact was read: the NVML call, or nvidia-smi's query and section."""
    nvml, smi = READS[key]
    return smi if isinstance(g, dict) and g.get("source") == "nvidia-smi" else nvml


def _bool(v: Any, enabled: int = 1) -> Optional[bool]:
    return None if v is None else bool(v == enabled)


class _Asker:
    """One GPU's NVML questions: each answer or None, with what was not supported and what failed kept."""

    def __init__(self, nv: Any, h: Any) -> None:
        self.nv, self.h = nv, h
        self.unsupported: list = []
        self.errors: dict = {}

    def __call__(self, key: str, call: Any, *args: Any) -> Any:
        calls = call if isinstance(call, tuple) else (call,)
        value, why = nv_.ask_first(self.nv, calls, self.h, *args)
        if why == nv_.NOT_SUPPORTED:
            self.unsupported.append(key)
        elif why is not None:
            self.errors[key] = why
        return value


def _nvml_gpu(nv: Any, h: Any, i: int) -> dict:
    ask = _Asker(nv, h)
    c = lambda name: nv_.const(nv, name)  # noqa: E731
    info = ask("pci", "nvmlDeviceGetPciInfo")
    g: dict[str, Any] = {"index": i, "bus_id": nv_.bus_id(getattr(info, "busId", None)),
                         "uuid": nv_.text(ask("uuid", "nvmlDeviceGetUUID")),
                         "name": nv_.text(ask("name", "nvmlDeviceGetName")),
                         "vbios": nv_.text(ask("vbios", "nvmlDeviceGetVbiosVersion"), 32)}
    g["persistence"] = _bool(ask("persistence", "nvmlDeviceGetPersistenceMode"), c("NVML_FEATURE_ENABLED") or 1)
    mig = ask("mig", "nvmlDeviceGetMigMode")
    g["mig"] = {"current": bool(mig[0]), "pending": bool(mig[1])} if isinstance(mig, (list, tuple)) else None
    ecc = ask("ecc_mode", "nvmlDeviceGetEccMode")
    g["ecc_mode"] = bool(ecc[0]) if isinstance(ecc, (list, tuple)) else None
    unc, vol = c("NVML_MEMORY_ERROR_TYPE_UNCORRECTED"), c("NVML_VOLATILE_ECC")
    ecc_counts: dict[str, Any] = {"total": None, "sram": None, "dram": None}
    if unc is not None and vol is not None and g["ecc_mode"] is not False:
        ecc_counts["total"] = ask("ecc_volatile", "nvmlDeviceGetTotalEccErrors", unc, vol)
        for where, const in (("sram", "NVML_MEMORY_LOCATION_SRAM"), ("dram", "NVML_MEMORY_LOCATION_DRAM")):
            loc = c(const)
            if loc is not None:
                ecc_counts[where] = ask(f"ecc_volatile_{where}", "nvmlDeviceGetMemoryErrorCounter", unc, vol, loc)
    g["ecc_uncorrected_volatile"] = ecc_counts
    rows = ask("remapped_rows", "nvmlDeviceGetRemappedRows")
    g["remapped_rows"] = ({"correctable": int(rows[0]), "uncorrectable": int(rows[1]), "pending": bool(rows[2]),
                           "failure": bool(rows[3])} if isinstance(rows, (list, tuple)) and len(rows) >= 4 else None)
    g["retired_pages"] = None
    if g["remapped_rows"] is None:  # pre-Ampere GPUs retire pages instead of remapping rows
        sbe = ask("retired_pages", "nvmlDeviceGetRetiredPages",
                  c("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS") or 0)
        dbe = ask("retired_pages", "nvmlDeviceGetRetiredPages", c("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR")
                  or 1)
        pend = ask("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus")
        if sbe is not None or dbe is not None:
            g["retired_pages"] = {"sbe": len(sbe) if sbe is not None else None,
                                  "dbe": len(dbe) if dbe is not None else None,
                                  "pending": _bool(pend, c("NVML_FEATURE_ENABLED") or 1)}
    g["recovery_action"], why = nv_.field_read(nv, h, c("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"))
    if why in nv_.FAULT_STATES:
        ask.errors["recovery_action"] = why
    elif why is not None:  # not supported, or a driver older than the field (R550)
        ask.unsupported.append("recovery_action")
    g["clock_event_reasons"] = ask("clock_event_reasons", ("nvmlDeviceGetCurrentClocksEventReasons",
                                                           "nvmlDeviceGetCurrentClocksThrottleReasons"))
    util = ask("utilization", "nvmlDeviceGetUtilizationRates")
    g["utilization_gpu"] = getattr(util, "gpu", None)
    # nvmlMemory_v2's `used` leaves out what the driver reserves, as nvidia-smi's "FB Memory Usage / Used" does
    v2 = getattr(nv, "nvmlMemory_v2", None)
    mem = ask("memory", "nvmlDeviceGetMemoryInfo", v2) if v2 is not None else None
    if mem is None:
        ask.errors.pop("memory", None)
        mem = ask("memory", "nvmlDeviceGetMemoryInfo")
    g["memory_used_bytes"] = getattr(mem, "used", None)
    procs = ask("processes", "nvmlDeviceGetComputeRunningProcesses")
    g["processes"] = None if procs is None else [
        {"pid": int(p.pid), "used_bytes": p.usedGpuMemory if isinstance(getattr(p, "usedGpuMemory", None), int)
         else None} for p in list(procs)[:MAX_PROCESSES]]
    g["pcie_nvml"] = {"gen": ask("pcie", "nvmlDeviceGetCurrPcieLinkGeneration"),
                      "max_gen": ask("pcie", ("nvmlDeviceGetGpuMaxPcieLinkGeneration",
                                              "nvmlDeviceGetMaxPcieLinkGeneration")),
                      "width": ask("pcie", "nvmlDeviceGetCurrPcieLinkWidth"),
                      "max_width": ask("pcie", "nvmlDeviceGetMaxPcieLinkWidth")}
    g["fabric"] = _fabric(nv, h, ask)
    g["unsupported"] = sorted(set(ask.unsupported))
    if ask.errors:
        g["errors"] = ask.errors
    return g


def _fabric(nv: Any, h: Any, ask: _Asker) -> Optional[dict]:
    """The fabric manager's training of this GPU into its NVLink fabric (Hopper and later), and from R570 the fabric's
    own health (facts/fabrichealth.py), the clique and the cluster (multi-node NVLink: GB200/GB300). Asked through
    nvmlDeviceGetGpuFabricInfoV with the newest struct the binding has (v3: health mask and summary; v2: the mask),
    each older struct where the driver answers that it does not know the version, else the legacy
    nvmlDeviceGetGpuFabricInfo (state and status only). The binding fills a struct it is handed (by reference)."""
    info, health = None, None
    for name in ("c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfo_v2_t"):
        cls = getattr(nv, name, None)
        if cls is None or getattr(nv, "nvmlDeviceGetGpuFabricInfoV", None) is None:
            continue
        got = cls()
        try:
            nv.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(got))
        except Exception as e:  # noqa: BLE001 - every NVMLError is an answer about this GPU or this driver
            if getattr(e, "value", None) in (FUNCTION_NOT_FOUND, VERSION_MISMATCH):
                continue  # a driver older than the struct (or the call): ask it the way it knows
            why = nv_.state_of_error(e) or f"{type(e).__name__}: {e}"[:160]
            if why == nv_.NOT_SUPPORTED:
                ask.unsupported.append("fabric")
            else:
                ask.errors["fabric"] = why
            return None
        info = got
        health = fabrichealth.from_nvml(getattr(got, "healthMask", None), getattr(got, "healthSummary", None))
        break
    if info is None:
        cls = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
        if cls is None:
            ask.errors["fabric"] = "nvmlDeviceGetGpuFabricInfo: not in this nvidia-ml-py"
            return None
        info = cls()
        if ask("fabric", "nvmlDeviceGetGpuFabricInfo", ctypes.byref(info)) is None and (
                "fabric" in ask.unsupported or "fabric" in ask.errors):
            return None
    state = FABRIC_STATES.get(int(getattr(info, "state", -1)), f"unknown ({getattr(info, 'state', None)})")
    if state == "not_supported":  # pre-Hopper GPUs, and a GPU outside any NVSwitch fabric: nvidia-smi prints N/A
        ask.unsupported.append("fabric")
        return None
    status = int(getattr(info, "status", 0))
    clique = getattr(info, "cliqueId", None)
    return {"state": state, "status": "success" if status == 0 else f"error: NVML error {status}",
            "clique_id": int(clique) if isinstance(clique, int) and state == "completed" else None,
            "cluster_uuid": fabrichealth.uuid_text(getattr(info, "clusterUuid", None)) if state == "completed"
            else None, "health": health}


# ------------------------------------------------------------------------------------------------ nvidia-smi
def _smi_q(run: Runner, reasons: list) -> dict:
    """`nvidia-smi -q` read into the NVML reader's facts (facts/smiq.py). nvidia-smi exits non-zero when one GPU
    cannot be read and still prints the others: what it printed is read. An answer cut at its cap is asked again
    per GPU, and a GPU no answer reached is `unread`, not absent (facts/smiread.py)."""
    return smiread.read(run, SMI_TIMEOUT_S * 2, reasons)


def _match_nvlink(got: dict, gpus: list) -> dict:
    """NVLink as `nvidia-smi nvlink -s` answered (facts/smilink.py), each GPU matched to -q's by UUID, else by index
    (nvlink -s prints no bus id)."""
    if "unavailable" in got or not got.get("gpus"):
        return got
    by_uuid = {g.get("uuid"): g for g in gpus if g.get("uuid")}
    by_index = {g.get("index"): g for g in gpus}
    out = []
    for lg in got.get("gpus") or []:
        g = by_uuid.get(lg.get("uuid")) or by_index.get(lg.get("index")) or {}
        out.append({**lg, "index": g.get("index", lg.get("index")), "bus_id": g.get("bus_id") or lg.get("bus_id"),
                    "name": lg.get("name") or g.get("name")})
    return {"gpus": out}


# ------------------------------------------------------------------------------------------------------ collect
def nouveau_loaded() -> bool:
    """The open-source nouveau driver is in the kernel (DCGM's "Denylist"): it claims GPUs the NVIDIA driver needs."""
    if os.path.isdir(sysfs("module", "nouveau")):
        return True
    mods = read_text(procfs("modules"), 1 << 20) or ""
    return any(line.split(" ", 1)[0] == "nouveau" for line in mods.splitlines())


def _own_family() -> set:
    """This process and the siblings of its job (its launcher's other children: the other local ranks of a job
    starting with it), whose GPU memory is the job's own, not a leftover. A sibling is of this job when it carries
    the same job id (JOB_ID_VARS) or runs the same command line (the local ranks torchrun, srun and mpirun start);
    a sibling that is neither (the user's other program started from the same shell, a process a Prolog's script
    left running beside it) holds the GPU as any stranger does."""
    me, parent = os.getpid(), os.getppid()
    fam = {me}
    mine = _cmdline(me)
    ours = {k: v for k, v in os.environ.items() if k in JOB_ID_VARS and v.strip() and v != "none"}
    for pid in listdir(procfs(), 1 << 16):
        if not pid.isdigit() or int(pid) == me:
            continue
        stat = read_text(procfs(pid, "stat"), 4096) or ""
        tail = stat.rpartition(")")[2].split()
        if not (len(tail) > 1 and tail[1].isdigit() and int(tail[1]) == parent):
            continue
        if (mine and _cmdline(int(pid)) == mine) or (ours and ours.items() & _environ(int(pid)).items()):
            fam.add(int(pid))
    return fam


def _cmdline(pid: int) -> bytes:
    return (read_bytes(procfs(str(pid), "cmdline"), 1 << 16) or b"")


def _environ(pid: int) -> dict:
    """The job-id variables a process started with (another user's process reads as none)."""
    raw = read_bytes(procfs(str(pid), "environ"), 1 << 20) or b""
    pairs = (item.partition(b"=") for item in raw.split(b"\0"))
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _s, v in pairs
            if k.decode(errors="replace") in JOB_ID_VARS}


def _name_processes(gpus: list) -> None:
    family = None
    for g in gpus:
        for p in g.get("processes") or []:
            p["name"] = (read_text(procfs(str(p["pid"]), "comm"), 64) or None) if p.get("pid") else None
            if family is None:
                family = _own_family()
            p["own"] = p.get("pid") in family


def _nvml_read(nv: Any, out: dict, reasons: list) -> None:
    """Every GPU NVML counts, and the ones whose handle fails kept with their state (index; bus id where the PCI bus
    tells it), never dropped."""
    try:
        count = min(int(nv.nvmlDeviceGetCount()), MAX_GPUS)
    except Exception as e:  # noqa: BLE001
        count = 0
        reasons.append(f"nvmlDeviceGetCount: {e}")
    lgpus = []
    for i in range(count):
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
        except Exception as e:  # noqa: BLE001 - a GPU the driver lost: named, the others read
            out["unreachable"].append({"index": i, "bus_id": None,
                                       "state": nv_.state_of_error(e) or f"{type(e).__name__}: {e}"[:120]})
            continue
        out["gpus"].append(_nvml_gpu(nv, h, i))
        lgpus.append(smilink.nvlink_summary(links.nvlink_gpu(nv, h, i)))
    out["nvlink"] = {"gpus": lgpus}
    # NVML numbers GPUs in PCI bus order: a GPU without a handle sits at its index among the buses it counts
    answered = {g["bus_id"] for g in out["gpus"] if g.get("bus_id")}
    if not out["unreachable"]:
        return
    bound = pcitree.nvidia_bound_gpu_bus_ids()
    silent = [b for b in bound if b not in answered]
    for k, u in enumerate(out["unreachable"]):
        if len(bound) == count and u["index"] < len(bound) and bound[u["index"]] not in answered:
            u["bus_id"] = bound[u["index"]]
        elif len(silent) == len(out["unreachable"]):
            u["bus_id"] = silent[k]


def _absent(out: dict) -> list:
    """NVIDIA GPUs on the PCI bus that the driver answered nothing for (neither read nor counted): failed at probe (no
    driver bound), failed to initialise (the nvidia driver bound: its probe passed, then RmInitAdapter failed) or
    fell off the bus (the kernel log's lines say which: checks/gpu.py not_listed_why), or bound to another driver
    (vfio-pci: a VM's; nouveau: gpu.nouveau's). [{"bus_id", "driver"}]."""
    known = {g.get("bus_id") for g in out["gpus"]} | {u.get("bus_id") for u in out["unreachable"]} | {
        u.get("bus_id") for u in out.get("unread") or []}  # no answer reached it: unmeasured, not missing
    return [{"bus_id": b, "driver": pcitree.driver_of(b)} for b in pcitree.nvidia_gpu_bus_ids() if b not in known]


def collect(nvml: Any = None, run: Optional[Runner] = None, which: Optional[Callable[[str], Optional[str]]] = None,
            xid_window_s: Optional[float] = None, kmsg_path: Optional[str] = None) -> dict:
    """This node's GPU health (the `gpu_health` group). `nvml`, `run` and `which` are for tests: a fake binding,
    nvidia-smi's answers and the PATH lookup. One reading whichever source answers: NVML's bindings, else
    `nvidia-smi -q` and `nvidia-smi nvlink -s`, read into the same facts; the kernel log is read beside them."""
    run = run or (lambda argv, t: smi.run(argv, t) if argv[0] == "nvidia-smi" else run_cmd(argv, t))
    which = which or shutil.which
    reasons: list = []
    out: dict[str, Any] = {"source": None, "reason": None, "gpus": [], "unreachable": [], "unread": [], "absent": [],
                           "nouveau": nouveau_loaded(), "nvswitches": pcitree.nvswitch_bus_ids(),
                           "pcie": links.read_pcie_gpus(with_upstream=True), "nvlink": None}
    has_driver = os.path.exists(procfs("driver", "nvidia", "version"))
    if not out["pcie"] and nvml is None and not has_driver and which("nvidia-smi") is None:
        out["reason"] = "no NVIDIA GPU on the PCI bus and no NVIDIA driver"
        return out
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="ncclcheck-gpuhealth")
    try:
        # The kernel log (a journal read) and the driver's answers (nvidia-smi: 0.1-1 s a call) overlap
        klog = pool.submit(kernlog.collect, xid_window_s, run=run, which=which, kmsg_path=kmsg_path)
        nv, why = nv_.load(nvml)
        try:
            if nv is not None:
                out["source"] = "nvml"
                _nvml_read(nv, out, reasons)
            elif which("nvidia-smi") is not None:
                out["source"] = "nvidia-smi"
                reasons.append(f"NVML unusable ({why}): read through nvidia-smi")
                links_f = pool.submit(smilink.read_status, run, SMI_TIMEOUT_S)
                q = _smi_q(run, reasons)
                out["gpus"], out["unreachable"], out["unread"] = q["gpus"], q["unreachable"], q.get("unread") or []
                out["nvlink"] = _match_nvlink(links_f.result(), out["gpus"])
            else:
                reasons.append(f"no NVML ({why}) and no nvidia-smi")
                out["nvlink"] = {"unavailable": why}
        finally:
            if nv is not None:
                nv_.close(nv)
        out["kernel_log"] = klog.result()
    finally:
        pool.shutdown(wait=False)
    if out["source"] is not None:
        out["absent"] = _absent(out)
    for g in out["gpus"] + out["unreachable"] + out["unread"] + (out["nvlink"] or {}).get("gpus", []):
        g["source"] = out["source"]
    _name_processes(out["gpus"])
    if imex.domains(out["gpus"]):  # a tray of a multi-node NVLink domain: its jobs share memory across trays
        out["imex"] = imex.collect(run, which)
    if not (out["gpus"] or out["pcie"] or out["unreachable"]):
        out["reason"] = "; ".join(reasons) or "no GPU answered"
        return out
    out["reason"] = "; ".join(reasons) or None
    return out


def gpus_by_bus(gh: dict) -> dict:
    """{bus id: GPU} for the GPUs of a gpu_health group (checks match sysfs, counters and the kernel log on it)."""
    return {g["bus_id"]: g for g in (gh.get("gpus") or []) if isinstance(g, dict) and g.get("bus_id")}


__all__ = ["FABRIC_STATES", "GPU_IDLE", "HW_POWER_BRAKE", "HW_SLOWDOWN", "HW_THERMAL", "READS", "SW_POWER_CAP",
           "SW_THERMAL", "collect", "gpus_by_bus", "nouveau_loaded", "read_of"]
