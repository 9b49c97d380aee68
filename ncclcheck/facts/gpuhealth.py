"""A GPU's health as the driver answers it, for `health`, `preflight` and `env` (the `gpu_health` fact group).

Per GPU (index, bus id, UUID, name): VBIOS, persistence and MIG mode, ECC mode and its volatile uncorrected counts
(total, SRAM, DRAM), row remapping (Ampere and later) or retired pages (earlier GPUs), NVML's recovery action, the
clock-event reasons, utilisation, the compute processes holding memory, PCIe as NVML sees it, and the fabric state
(NVSwitch systems). Asked through NVML's bindings when importable (facts/nvml.py), else through nvidia-smi's CSV
queries; whatever a GPU does not support reads None and is listed, never guessed.

Beside them, what the PCI tree and the kernel say: the GPUs' links in sysfs with the bridge above each
(facts/links.py), the node's NVSwitches, nouveau loaded, NVLink state and the kernel log's Xid/SXid lines within a
window (facts/kernlog.py). The GPUs' cumulative error counters (PCIe replay and AER, NVLink CRC/replay/recovery) are
not here: they are read with every other counter of the node in the run's one counter window (facts/counters.py).
Nothing here writes to a device: no persistence mode set, no clocks, no reset.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Sequence
from typing import Any, Callable, Optional

from ..envnames import JOB_ID_VARS
from . import kernlog, links, pcitree
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
    g["recovery_action"] = nv_.field(nv, h, c("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"))
    g["clock_event_reasons"] = ask("clock_event_reasons", ("nvmlDeviceGetCurrentClocksEventReasons",
                                                           "nvmlDeviceGetCurrentClocksThrottleReasons"))
    util = ask("utilization", "nvmlDeviceGetUtilizationRates")
    g["utilization_gpu"] = getattr(util, "gpu", None)
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
    """nvmlDeviceGetGpuFabricInfo (Hopper and later): the fabric manager's training of this GPU into the NVSwitch
    fabric. The binding fills a struct it is handed (by reference)."""
    cls = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    if cls is None:
        ask.errors["fabric"] = "nvmlDeviceGetGpuFabricInfo: not in this nvidia-ml-py"
        return None
    info = cls()
    if ask("fabric", "nvmlDeviceGetGpuFabricInfo", ctypes.byref(info)) is None and (
            "fabric" in ask.unsupported or "fabric" in ask.errors):
        return None
    state = FABRIC_STATES.get(int(getattr(info, "state", -1)), f"unknown ({getattr(info, 'state', None)})")
    status = int(getattr(info, "status", 0))
    return {"state": state, "status": "success" if status == 0 else f"NVML error {status}"}


# ------------------------------------------------------------------------------------------------ nvidia-smi
# (key, the query names in order of preference: a newer driver's name first) for --query-gpu. A field this driver
# does not know makes nvidia-smi refuse the whole query, so it is dropped (or the older name tried) and asked again.
SMI_FIELDS = (
    ("index", ("index",)), ("bus_id", ("gpu_bus_id",)), ("uuid", ("uuid",)), ("name", ("name",)),
    ("vbios", ("vbios_version",)), ("persistence", ("persistence_mode",)),
    ("mig_current", ("mig.mode.current",)), ("mig_pending", ("mig.mode.pending",)),
    ("ecc_mode", ("ecc.mode.current",)), ("ecc_total", ("ecc.errors.uncorrected.volatile.total",)),
    ("ecc_sram", ("ecc.errors.uncorrected.volatile.sram",)), ("ecc_dram", ("ecc.errors.uncorrected.volatile.dram",)),
    ("retired_sbe", ("retired_pages.sbe",)), ("retired_dbe", ("retired_pages.dbe",)),
    ("retired_pending", ("retired_pages.pending",)),
    ("clocks", ("clocks_event_reasons.active", "clocks_throttle_reasons.active")),
    ("utilization", ("utilization.gpu",)), ("memory_used", ("memory.used",)),
    ("pcie_gen", ("pcie.link.gen.current",)), ("pcie_max_gen", ("pcie.link.gen.gpumax", "pcie.link.gen.max")),
    ("pcie_width", ("pcie.link.width.current",)), ("pcie_max_width", ("pcie.link.width.max",)),
)
_NA = ("[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "")


def _cell(v: str) -> Optional[str]:
    v = v.strip()
    return None if v.lower() in _NA else v


def _int(v: Optional[str]) -> Optional[int]:
    if v is None:
        return None
    try:
        return int(v, 0) if v.lower().startswith("0x") else int(float(v))
    except ValueError:
        return None


def _yes(v: Optional[str]) -> Optional[bool]:
    if v is None:
        return None
    return v.strip().lower() in ("enabled", "yes", "1", "true", "on")


def _smi_query(run: Runner, reasons: list) -> list:
    """--query-gpu over SMI_FIELDS, dropping (or renaming) what this driver refuses; [{key: cell}] per GPU."""
    choice = {k: 0 for k, _ in SMI_FIELDS}
    for _try in range(len(SMI_FIELDS) + 4):
        keys = [k for k, names in SMI_FIELDS if choice[k] < len(names)]
        names = [dict(SMI_FIELDS)[k][choice[k]] for k in keys]
        try:
            out = run(["nvidia-smi", f"--query-gpu={','.join(names)}", "--format=csv,noheader,nounits"],
                      SMI_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - "Field "x" is not a valid field to query."
            bad = [k for k, n in zip(keys, names) if f'"{n}"' in str(e) or f"'{n}'" in str(e)]
            if not bad:
                reasons.append(f"nvidia-smi --query-gpu: {e}")
                return []
            for k in bad:
                choice[k] += 1
            continue
        rows = []
        for line in out.splitlines()[:MAX_GPUS]:
            cells = [x for x in line.split(",")]
            if len(cells) != len(keys):
                continue
            rows.append({k: _cell(v) for k, v in zip(keys, cells)})
        dropped = [k for k in choice if choice[k] >= len(dict(SMI_FIELDS)[k])]
        if dropped:
            reasons.append(f"nvidia-smi of this driver does not know {', '.join(dropped)}")
        return rows
    reasons.append("nvidia-smi --query-gpu: gave up after dropping every unknown field")
    return []


def _smi_gpu(r: dict) -> dict:
    ecc = _yes(r.get("ecc_mode"))
    mig_cur = r.get("mig_current")
    g: dict[str, Any] = {
        "index": _int(r.get("index")), "bus_id": nv_.normal_bus_id(r.get("bus_id")), "uuid": r.get("uuid"),
        "name": r.get("name"), "vbios": r.get("vbios"), "persistence": _yes(r.get("persistence")),
        "mig": None if mig_cur is None else {"current": bool(_yes(mig_cur)),
                                             "pending": bool(_yes(r.get("mig_pending")))},
        "ecc_mode": ecc,
        "ecc_uncorrected_volatile": {"total": _int(r.get("ecc_total")), "sram": _int(r.get("ecc_sram")),
                                     "dram": _int(r.get("ecc_dram"))},
        "remapped_rows": None, "retired_pages": None, "recovery_action": None,
        "clock_event_reasons": _int(r.get("clocks")), "utilization_gpu": _int(r.get("utilization")),
        "memory_used_bytes": None if _int(r.get("memory_used")) is None else _int(r.get("memory_used")) << 20,
        "processes": None,
        "pcie_nvml": {"gen": _int(r.get("pcie_gen")), "max_gen": _int(r.get("pcie_max_gen")),
                      "width": _int(r.get("pcie_width")), "max_width": _int(r.get("pcie_max_width"))},
        "fabric": None,
        "unsupported": sorted(k for k in ("mig_current", "ecc_total", "clocks") if r.get(k) is None),
    }
    if r.get("retired_sbe") is not None or r.get("retired_dbe") is not None:
        g["retired_pages"] = {"sbe": _int(r.get("retired_sbe")), "dbe": _int(r.get("retired_dbe")),
                              "pending": _yes(r.get("retired_pending"))}
    return g


def _smi_csv(run: Runner, query: str, fields: str, reasons: list) -> Optional[list]:
    try:
        out = run(["nvidia-smi", f"--query-{query}={fields}", "--format=csv,noheader,nounits"], SMI_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        reasons.append(f"nvidia-smi --query-{query}: {e}")
        return None
    n = fields.count(",") + 1
    return [[_cell(c) for c in line.split(",")] for line in out.splitlines()[:MAX_GPUS * MAX_PROCESSES]
            if line.count(",") + 1 == n]


def _smi_fabric(run: Runner, reasons: list) -> dict:
    """`nvidia-smi -q`'s Fabric section (State, Status) and GPU Recovery Action per GPU bus id."""
    try:
        out = run(["nvidia-smi", "-q"], SMI_TIMEOUT_S * 2)
    except Exception as e:  # noqa: BLE001
        reasons.append(f"nvidia-smi -q: {e}")
        return {}
    per: dict = {}
    bus, section = None, None
    for line in out.splitlines()[:200_000]:
        s = line.strip()
        if line.startswith("GPU ") and ":" in line:
            bus = nv_.normal_bus_id(line[4:].strip())
            per[bus] = {}
            section = None
            continue
        if bus is None:
            continue
        if s == "Fabric":
            section = "fabric"
            continue
        key, sep, val = s.partition(":")
        if not sep:
            section = None if line[:8].strip() else section
            continue
        key, val = key.strip(), val.strip()
        if key == "GPU Recovery Action":
            per[bus]["recovery_text"] = val
        elif section == "fabric" and key == "State":
            per[bus]["state"] = val.lower().replace(" ", "_")
        elif section == "fabric" and key == "Status":
            per[bus]["status"] = val.lower()
    return per


def _smi_gpus(run: Runner, nvswitch: bool, reasons: list) -> list:
    gpus = [_smi_gpu(r) for r in _smi_query(run, reasons)]
    by_bus = {g["bus_id"]: g for g in gpus if g.get("bus_id")}
    rows = _smi_csv(run, "remapped-rows", "gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,"
                    "remapped_rows.pending,remapped_rows.failure", reasons) or []
    for bus, corr, unc, pend, fail in rows:
        g = by_bus.get(nv_.normal_bus_id(bus))
        if g is not None and corr is not None:
            g["remapped_rows"] = {"correctable": _int(corr), "uncorrectable": _int(unc), "pending": _yes(pend),
                                  "failure": _yes(fail)}
    apps = _smi_csv(run, "compute-apps", "gpu_bus_id,pid,used_memory", reasons)
    if apps is not None:
        for g in gpus:
            g["processes"] = []
        for bus, pid, used in apps:
            g = by_bus.get(nv_.normal_bus_id(bus))
            if g is not None and _int(pid) is not None and len(g["processes"]) < MAX_PROCESSES:
                mib = _int(used)
                g["processes"].append({"pid": _int(pid), "used_bytes": None if mib is None else mib << 20})
    if nvswitch:
        for bus, f in _smi_fabric(run, reasons).items():
            g = by_bus.get(bus)
            if g is not None and "state" in f:
                g["fabric"] = {"state": f["state"], "status": f.get("status")}
            if g is not None and "recovery_text" in f:
                g["recovery_text"] = f["recovery_text"]
    return gpus


def _nvlink_summary(g: dict) -> dict:
    """One GPU's NVLink as a verdict needs it: the link count NVML reports, which links are down, the up speed."""
    ls = g.get("links") or []
    speeds = sorted({x.get("speed_mbytes_per_s") for x in ls if x.get("up")} - {None})
    return {"index": g.get("index"), "bus_id": nv_.normal_bus_id(g.get("bus_id")), "name": g.get("name"),
            "link_count": g.get("link_count"), "up": sum(1 for x in ls if x.get("up")),
            "down": [x["link"] for x in ls if not x.get("up")], "speed_mbytes_per_s": speeds[0] if speeds else None}


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


def collect(nvml: Any = None, run: Optional[Runner] = None, which: Optional[Callable[[str], Optional[str]]] = None,
            xid_window_s: Optional[float] = None, kmsg_path: Optional[str] = None) -> dict:
    """This node's GPU health (the `gpu_health` group). `nvml`, `run` and `which` are for tests: a fake binding,
    nvidia-smi's answers and the PATH lookup."""
    run = run or (lambda argv, t: run_cmd(argv, t))
    which = which or shutil.which
    reasons: list = []
    out: dict[str, Any] = {"source": None, "reason": None, "gpus": [], "nouveau": nouveau_loaded(),
                           "nvswitches": pcitree.nvswitch_bus_ids(), "pcie": links.read_pcie_gpus(with_upstream=True),
                           "nvlink": None}
    has_driver = os.path.exists(procfs("driver", "nvidia", "version"))
    if not out["pcie"] and nvml is None and not has_driver and which("nvidia-smi") is None:
        out["reason"] = "no NVIDIA GPU on the PCI bus and no NVIDIA driver"
        return out
    out["kernel_log"] = kernlog.collect(xid_window_s, run=run, which=which, kmsg_path=kmsg_path)
    nv, why = nv_.load(nvml)
    try:
        if nv is not None:
            out["source"] = "nvml"
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
                    reasons.append(f"GPU {i}: nvmlDeviceGetHandleByIndex: {e}")
                    continue
                g = _nvml_gpu(nv, h, i)
                out["gpus"].append(g)
                lgpus.append(_nvlink_summary(links.nvlink_gpu(nv, h, i)))
            out["nvlink"] = {"gpus": lgpus}
        elif which("nvidia-smi") is not None:
            out["source"] = "nvidia-smi"
            reasons.append(f"NVML bindings unusable ({why}): nvidia-smi answered, without NVLink and NVML's counters")
            out["gpus"] = _smi_gpus(run, bool(out["nvswitches"]), reasons)
            out["nvlink"] = {"unavailable": f"NVLink is read through NVML only: {why}"}
        else:
            reasons.append(f"no NVML ({why}) and no nvidia-smi")
            out["nvlink"] = {"unavailable": why}
        _name_processes(out["gpus"])
        if not (out["gpus"] or out["pcie"]):
            out["reason"] = "; ".join(reasons) or "no GPU answered"
            return out
    finally:
        if nv is not None:
            nv_.close(nv)
    out["reason"] = "; ".join(reasons) or None
    return out


def gpus_by_bus(gh: dict) -> dict:
    """{bus id: GPU} for the GPUs of a gpu_health group (checks match sysfs, counters and the kernel log on it)."""
    return {g["bus_id"]: g for g in (gh.get("gpus") or []) if isinstance(g, dict) and g.get("bus_id")}


__all__ = ["FABRIC_STATES", "GPU_IDLE", "HW_POWER_BRAKE", "HW_SLOWDOWN",
           "HW_THERMAL", "SW_POWER_CAP", "SW_THERMAL", "collect", "gpus_by_bus", "nouveau_loaded"]
