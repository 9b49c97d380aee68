"""A GPU node's hardware on disk and behind fake drivers, for the tests and scripts/bench_health.py: every source the
hardware checks read (the GPUs' and the fabric's), healthy by default, each fault a change to one spec.

    spec = node_spec(gpus=8, nvswitches=4, ib_ports=8)       # an HGX H100 node: 8 GPUs and 8 HCAs on 4 PCIe
                                                             # switches (GPU i's nearest NIC mlx5_i), NVSwitches,
                                                             # GPUDirect RDMA, every error counter 0
    spec["gpus"][3]["remapped_rows"] = [0, 0, True, False]  # stage a fault: GPU 3 has a row remap pending
    write_tree(root, spec)                                   # <root>/sys, <root>/proc, <root>/dev/kmsg
    nv = FakeNvml(spec)                                      # pynvml's surface, answering from the spec
    smi_answer(spec, argv)                                   # nvidia-smi's answer to argv (CSV queries, -q, topo -m)
    install(root, spec)                                      # a pynvml.py and an nvidia-smi under <root>/bin that
                                                             # answer from the spec, for a `ncclcheck health` child
    env_for(root)                                            # the environment that points ncclcheck at all of it

The answers' shapes are those of the real bindings and tools (tests/data/nvml, docs/gpu-record): tuples where
pynvml returns tuples, NVMLError with its code for "not supported", `[N/A]` where nvidia-smi prints it.

The tree's pieces are written by functions of a root (pci_function, ib_hca, ib_port, ib_counters, peermem,
nvidia_module, kernel, mlx5_core_version): tests/fakesys.py's FakeSys writes its own layouts through them, so a
PCI function, an HCA or a peer-memory module has one shape in every fake tree.
"""

from __future__ import annotations

import copy
import ctypes
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, Optional

NS = "not supported"  # a spec value NVML answers with NVML_ERROR_NOT_SUPPORTED
H100_LINK_MBPS = 26562  # NVML's per-link speed on an H100 (raw MB/s; tests/data/nvml)
DRIVER = "580.159.04"


def gpu_spec(i: int, bus: str) -> dict:
    """A healthy H100 SXM5 as NVML describes it at idle (persistence on, MIG off, ECC on with no error, Gen5 x16)."""
    return {
        "index": i, "bus_id": bus, "uuid": f"GPU-{i:08x}-5c1e-4d2a-9e3f-00000000{i:04x}",
        "name": "NVIDIA H100 80GB HBM3", "vbios": "96.00.99.00.01", "persistence": True, "mig": [0, 0],
        "ecc_mode": True, "ecc_volatile": {"total": 0, "sram": 0, "dram": 0},
        "remapped_rows": [0, 0, False, False], "retired_pages": NS, "recovery_action": 0, "clocks": 0x1,
        "utilization": 0, "memory_used": 0, "processes": [],
        "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16, "replay": [0, 0],
                 "sysfs_speed": "32.0 GT/s PCIe", "sysfs_max_speed": "32.0 GT/s PCIe", "aer": [0, 0, 0]},
        "fabric": healthy_fabric(),
        "nvlink": {"count": 18, "down": [], "speed": H100_LINK_MBPS, "errors": {}},
    }


# A trained fabric's health as a healthy HGX on R580 reports it (tests/data/hwnodes/h200-hgx-r580-healthy: Summary
# Healthy, Bandwidth Full, the route and timeout flags False, Incorrect Configuration None, Partition Assigned N/A)
HEALTHY_ITEMS = {"bandwidth": "full", "route_recovery_in_progress": False, "route_unhealthy": False,
                 "access_timeout_recovery": False, "incorrect_configuration": "none", "partition_assigned": None}
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def health_mask(**items: Any) -> int:
    """NVML's healthMask for fabric health items (facts/fabrichealth.py's facts, HEALTHY_ITEMS by default)."""
    from ncclcheck.facts.fabrichealth import ITEMS

    want = {**HEALTHY_ITEMS, **items}
    mask = 0
    for key, shift, _width, values, _label in ITEMS:
        code = next((c for c, v in values.items() if v == want.get(key)), 0)
        mask |= code << shift
    return mask


def healthy_fabric(clique_id: int = 0, cluster_uuid: str = ZERO_UUID, **items: Any) -> dict:
    """A GPU trained into its fabric (state Completed, status Success), its health Healthy unless items say
    otherwise: a single HGX node is clique 0 of the all-zero cluster (h200-hgx-r580-healthy); a multi-node NVLink
    tray names its clique and cluster (b200-hgx-r580-healthy: 32766 and a cluster UUID). `summary` 1 Healthy, 2
    Unhealthy, 3 Limited Capacity (NVML_GPU_FABRIC_HEALTH_SUMMARY_*); `api` the newest struct the driver knows (3:
    nvmlDeviceGetGpuFabricInfoV with health summary, 2: with the mask only, 1: the legacy call only)."""
    summary = items.pop("summary", 1)
    api = items.pop("api", 3)
    return {"state": 3, "status": 0, "clique_id": clique_id, "cluster_uuid": cluster_uuid,
            "health_mask": health_mask(**items), "health_summary": summary, "api": api}


def node_spec(gpus: int = 8, nvswitches: int = 4, ib_ports: int = 8, hostname: str = "gpu-node-1") -> dict:
    """An HGX node: GPUs two per PCIe switch, NVSwitches, one ACTIVE 400G InfiniBand HCA port per GPU under the
    GPU's switch, GPUDirect RDMA through nvidia_peermem (the open module on a 6.8 kernel), every counter 0, a clean
    kernel log. The fabric's faults: `peermem` None (and `nvidia_module` "proprietary"), `ib_counters`
    {dev: {counter: value}} (hw_counters' names go to hw_counters), `ib_link_layer` {dev: "Ethernet"} (a RoCE port
    with only its v1 GID), `hca_fw` / `hca_board` / `ofed` another version."""
    buses = [f"0000:{0x18 + 0x20 * (i // 2) + (i % 2):02x}:00.0" for i in range(gpus)]
    return {"hostname": hostname, "gpus": [gpu_spec(i, b) for i, b in enumerate(buses)],
            "nvswitches": [f"0000:{0x05 + i:02x}:00.0" for i in range(nvswitches)],
            "ib_ports": [f"mlx5_{i}" for i in range(ib_ports)], "kernel_log": [], "uptime_s": 86400.0,
            "dmesg_restrict": 0, "kmsg_readable": True, "nouveau": False,
            "peermem": "nvidia_peermem", "nvidia_module": "open", "kernel": "6.8.0-1064-azure", "ofed": "24.10-1.1.4",
            "hca_fw": "28.39.1002", "hca_board": "MT_0000000838", "hca_type": "MT4129", "ib_counters": {},
            "ib_link_layer": {}}


# ---------------------------------------------------------------------------------------------------- fake NVML
class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__({3: "Not Supported", 2: "Invalid Argument", 13: "Function Not Found",
                          25: "Argument Version Mismatch", 15: "GPU is lost", 16: "GPU requires reset",
                          999: "Unknown Error"}.get(value, f"error {value}"))
        self.value = value


# A GPU's `state` in a spec: how NVML fails every question about it (its handle still given), and how nvidia-smi
# prints each of its values; "lost": no handle at all (NVML_ERROR_GPU_IS_LOST), nvidia-smi's "Unable to determine
# the device handle" line. `probe_failed`: on the PCI bus, never counted by the driver; with `bound` the nvidia
# driver is bound to it all the same (its probe passed, its initialisation failed: "RmInitAdapter failed!").
STATE_CODES = {"requires reset": 16, "unknown error": 999}
STATE_TEXT = {"requires reset": "[GPU requires reset]", "unknown error": "[Unknown Error]"}


class _FieldValue:
    def __init__(self, ret: int, val: int) -> None:
        self.nvmlReturn = ret
        self.valueType = 1
        self.value = type("V", (), {"uiVal": val, "ullVal": val})()


class _FabricInfo(ctypes.Structure):  # pynvml's c_nvmlGpuFabricInfo_t, for nvmlDeviceGetGpuFabricInfo
    _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint)]


_FABRIC_V2 = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint),
              ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint), ("healthMask", ctypes.c_uint32)]


class _FabricInfoV2(ctypes.Structure):  # pynvml's c_nvmlGpuFabricInfo_v2_t (= c_nvmlGpuFabricInfoV_t)
    _fields_ = _FABRIC_V2

    def __init__(self) -> None:
        super().__init__(version=0x02000024)  # nvmlGpuFabricInfo_v2


class _FabricInfoV3(ctypes.Structure):  # pynvml's c_nvmlGpuFabricInfo_v3_t
    _fields_ = _FABRIC_V2 + [("healthSummary", ctypes.c_uint8)]

    def __init__(self) -> None:
        super().__init__(version=0x3000028)  # nvmlGpuFabricInfo_v3


class FakeNvml:
    """pynvml's surface, answering from a node spec. Counters given as [base, step] grow by `step` each time they are
    read (two reads a moment apart see them move); NS answers NVML_ERROR_NOT_SUPPORTED."""

    NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED, NVML_FEATURE_ENABLED = 0, 3, 1
    NVML_FI_DEV_NVLINK_LINK_COUNT, NVML_FI_DEV_NVLINK_GET_SPEED = 91, 164
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 271
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC = 1, 0
    NVML_MEMORY_LOCATION_DRAM, NVML_MEMORY_LOCATION_SRAM = 2, 7
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 0, 1
    NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_RECOVERY = 0, 1
    NVML_NVLINK_ERROR_DL_CRC_FLIT, NVML_NVLINK_ERROR_DL_CRC_DATA = 2, 3
    NVMLError = NVMLError
    c_nvmlGpuFabricInfo_t = _FabricInfo
    c_nvmlGpuFabricInfo_v2_t = c_nvmlGpuFabricInfoV_t = _FabricInfoV2
    c_nvmlGpuFabricInfo_v3_t = _FabricInfoV3

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.reads: dict = {}
        self.inited = 0

    # -- plumbing
    def _counted(self) -> list:
        return [g for g in self.spec["gpus"] if not g.get("probe_failed")]

    def _g(self, h: int) -> dict:
        g = self._counted()[h]
        if g.get("state") in STATE_CODES:
            raise NVMLError(STATE_CODES[g["state"]])
        return g

    def _v(self, value: Any) -> Any:
        if value == NS or value is None:
            raise NVMLError(3)
        if isinstance(value, dict) and "nvml_error" in value:  # a read that fails with this NVML error
            raise NVMLError(value["nvml_error"])
        return value

    def _counter(self, key: tuple, spec: Any) -> int:
        if spec == NS or spec is None:
            raise NVMLError(3)
        base, step = spec if isinstance(spec, (list, tuple)) else (spec, 0)
        n = self.reads.get(key, 0)
        self.reads[key] = n + 1
        return int(base + step * n)

    def nvmlInit(self) -> None:
        self.inited += 1

    def nvmlShutdown(self) -> None:
        self.inited -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self._counted())

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        g = self._counted()[i]
        if g.get("lost") or g.get("state") == "lost":
            raise NVMLError(15)
        if g.get("handle_error"):
            raise NVMLError(g["handle_error"])
        return i

    # -- identity
    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        dom, rest = self._counted()[h]["bus_id"].split(":", 1)
        return type("P", (), {"busId": f"0000{dom}:{rest}".upper().encode()})()

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._g(h)["name"]

    def nvmlDeviceGetVbiosVersion(self, h: int) -> str:
        return self._v(self._g(h)["vbios"])

    # -- state
    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return int(self._v(self._g(h)["persistence"]))

    def nvmlDeviceGetMigMode(self, h: int) -> list:
        return list(self._v(self._g(h)["mig"]))

    def nvmlDeviceGetEccMode(self, h: int) -> list:
        on = int(self._v(self._g(h)["ecc_mode"]))
        return [on, on]

    def nvmlDeviceGetTotalEccErrors(self, h: int, etype: int, ctype: int) -> int:
        return int(self._v(self._v(self._g(h)["ecc_volatile"])["total"]))

    def nvmlDeviceGetMemoryErrorCounter(self, h: int, etype: int, ctype: int, loc: int) -> int:
        where = {self.NVML_MEMORY_LOCATION_DRAM: "dram", self.NVML_MEMORY_LOCATION_SRAM: "sram"}[loc]
        return int(self._v(self._v(self._g(h)["ecc_volatile"]).get(where)))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple:
        return tuple(self._v(self._g(h)["remapped_rows"]))

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list:
        rp = self._v(self._g(h)["retired_pages"])
        return [0x1000 * k for k in range(rp["sbe" if cause == 0 else "dbe"])]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(self._v(self._g(h)["retired_pages"])["pending"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._v(self._g(h)["clocks"]))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return type("U", (), {"gpu": self._v(self._g(h)["utilization"]), "memory": 0})()

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._v(self._g(h)["uuid"])

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return type("M", (), {"used": self._v(self._g(h)["memory_used"]), "total": 80 << 30, "free": 0})()

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list:
        return [type("Proc", (), {"pid": p["pid"], "usedGpuMemory": p.get("used")})()
                for p in self._v(self._g(h)["processes"])]

    def nvmlDeviceGetGpuFabricInfo(self, h: int, ref: Any) -> int:
        f = self._v(self._g(h)["fabric"])
        info = ref._obj
        info.state, info.status = f["state"], f["status"]
        info.cliqueId = f.get("clique_id") or 0
        info.clusterUuid[:] = list(bytes.fromhex((f.get("cluster_uuid") or ZERO_UUID).replace("-", "")))
        return 0

    def nvmlDeviceGetGpuFabricInfoV(self, h: int, ref: Any) -> int:
        """The versioned call: NVML_ERROR_FUNCTION_NOT_FOUND from a driver without it, ARGUMENT_VERSION_MISMATCH for
        a struct newer than the driver knows (the spec's `api`)."""
        f = self._v(self._g(h)["fabric"])
        info = ref._obj
        api = f.get("api", 3)
        if api < 2:
            raise NVMLError(13)
        if info.version >> 24 > api:
            raise NVMLError(25)
        info.state, info.status = f["state"], f["status"]
        info.cliqueId = f.get("clique_id") or 0
        info.clusterUuid[:] = list(bytes.fromhex((f.get("cluster_uuid") or ZERO_UUID).replace("-", "")))
        info.healthMask = f.get("health_mask") or 0
        if hasattr(info, "healthSummary"):
            info.healthSummary = f.get("health_summary") or 0
        return 0

    def nvmlDeviceGetFieldValues(self, h: int, fields: list) -> list:
        g = self._counted()[h]
        if g.get("state") in STATE_CODES:
            return [_FieldValue(STATE_CODES[g["state"]], 0) for _f in fields]
        return self._field_values(h, fields)

    # -- PCIe
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._v(self._g(h)["pcie"]["gen"])

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: int) -> int:
        return self._v(self._g(h)["pcie"]["max_gen"])

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._v(self._g(h)["pcie"]["width"])

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._v(self._g(h)["pcie"]["max_width"])

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return self._counter(("replay", h), self._g(h)["pcie"]["replay"])

    # -- fields and NVLink
    def _field_values(self, h: int, fields: list) -> list:
        out = []
        for f in fields:
            fid, scope = f if isinstance(f, tuple) else (f, None)
            nvl = self._g(h)["nvlink"]
            if fid == self.NVML_FI_DEV_NVLINK_LINK_COUNT:
                count = nvl.get("count")
                out.append(_FieldValue(3, 0) if count in (None, NS) else _FieldValue(0, count))
            elif fid == self.NVML_FI_DEV_NVLINK_GET_SPEED:
                out.append(_FieldValue(0, nvl.get("speed", H100_LINK_MBPS)))
            elif fid == self.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                ra = self._g(h).get("recovery_action")
                out.append(_FieldValue(3, 0) if ra in (None, NS) else _FieldValue(0, ra))
            else:
                out.append(_FieldValue(3, 0))
        return out

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        nvl = self._g(h)["nvlink"]
        if nvl.get("count") in (None, NS) or link >= nvl["count"]:
            raise NVMLError(3)
        return 0 if link in nvl.get("down", []) else 1

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        kind = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data"}[counter]
        errs = self._g(h)["nvlink"].get("errors", {})
        if errs == NS:
            raise NVMLError(3)
        return self._counter(("nvlink", h, link, kind), (errs.get(str(link)) or {}).get(kind, 0))


# ---------------------------------------------------------------------------------------------- fake nvidia-smi
def _na(v: Any) -> str:
    return "[N/A]" if v in (None, NS) else str(v)


def _state(v: Any) -> Optional[str]:
    return None if v in (None, NS) else ("Enabled" if v else "Disabled")


def _smi_value(g: dict, name: str) -> str:
    pcie = g["pcie"]
    ecc = g["ecc_volatile"] if g["ecc_volatile"] != NS else {}
    mig = g["mig"] if g["mig"] != NS else None
    rp = g["retired_pages"] if g["retired_pages"] != NS else None
    table = {
        "index": g["index"], "name": g["name"], "uuid": g["uuid"], "memory.total": 81559,
        "pci.bus_id": "0000" + g["bus_id"].upper(), "gpu_bus_id": "0000" + g["bus_id"].upper(),
        "vbios_version": g["vbios"], "driver_version": DRIVER,
        "persistence_mode": _state(g["persistence"]),
        "mig.mode.current": None if mig is None else ("Enabled" if mig[0] else "Disabled"),
        "mig.mode.pending": None if mig is None else ("Enabled" if mig[1] else "Disabled"),
        "ecc.mode.current": _state(g["ecc_mode"]),
        "ecc.errors.uncorrected.volatile.total": ecc.get("total"),
        "ecc.errors.uncorrected.volatile.sram": ecc.get("sram"),
        "ecc.errors.uncorrected.volatile.dram": ecc.get("dram"),
        "retired_pages.sbe": None if rp is None else rp["sbe"], "retired_pages.dbe": None if rp is None else rp["dbe"],
        "retired_pages.pending": None if rp is None else ("Yes" if rp["pending"] else "No"),
        "clocks_event_reasons.active": f"0x{g['clocks']:016x}" if isinstance(g["clocks"], int) else None,
        "utilization.gpu": g["utilization"],
        "memory.used": g["memory_used"] >> 20 if isinstance(g["memory_used"], int) else None,
        "pcie.link.gen.current": pcie["gen"],
        "pcie.link.gen.gpumax": pcie["max_gen"], "pcie.link.gen.max": pcie["max_gen"],
        "pcie.link.width.current": pcie["width"], "pcie.link.width.max": pcie["max_width"],
    }
    if name not in table:
        raise KeyError(name)
    return _na(table[name])


RECOVERY_TEXT = {0: "None", 1: "Reset", 2: "Reboot", 3: "Drain P2P", 4: "Drain and Reset", 5: "Recover IMEX Domain",
                 6: "Bus Reset", 7: "System Reboot"}
FABRIC_TEXT = {0: "N/A", 1: "Not Started", 2: "In Progress", 3: "Completed"}
# How R570+/R580 print the fabric health (tests/data/hwnodes/FORMATS.md); an incorrect configuration's printed words
# were not seen: NVML's constant names (facts/fabrichealth.py) stand in, and the reader keeps any word but None.
HEALTH_SUMMARY_TEXT = {0: "N/A", 1: "Healthy", 2: "Unhealthy", 3: "Limited Capacity"}


def _health_lines(f: Any, v: Any) -> list:
    """The Fabric block's CliqueId, ClusterUUID and Health lines for the spec's fabric (N/A where not reported)."""
    from ncclcheck.facts.fabrichealth import ITEMS

    done = isinstance(f, dict) and f.get("state") == 3
    known = isinstance(f, dict) and f.get("api", 3) >= 2
    mask = (f.get("health_mask") or 0) if known else 0
    summary = (f.get("health_summary") or 0) if known and f.get("api", 3) >= 3 else 0
    L = [_q_line(2, "CliqueId", v(f.get("clique_id", 0) if done else "N/A")),
         _q_line(2, "ClusterUUID", v(f.get("cluster_uuid") or ZERO_UUID if done else "N/A")), _q_line(2, "Health"),
         _q_line(3, "Summary", v(HEALTH_SUMMARY_TEXT.get(summary, "N/A")))]
    for key, shift, width, values, label in ITEMS:
        got = values.get((mask >> shift) & width)
        text = ("N/A" if got is None else str(got) if isinstance(got, bool) else
                "None" if got == "none" else got.title() if key == "bandwidth" else got)
        L.append(_q_line(3, {"route recovery in progress": "Route Recovery in progress"}.get(label, label.title()),
                         v(text)))
    return L
CLOCK_NAMES = (("Idle", 0x1), ("Applications Clocks Setting", 0x2), ("SW Power Cap", 0x4), ("HW Slowdown", 0x8),
               ("HW Thermal Slowdown", 0x40), ("HW Power Brake Slowdown", 0x80), ("Sync Boost", 0x10),
               ("SW Thermal Slowdown", 0x20), ("Display Clock Setting", 0x100))


def _q_line(depth: int, key: str, value: Any = None) -> str:
    pad = "    " * depth
    if value is None:
        return f"{pad}{key}\n"
    return f"{pad}{key:<{55 - len(pad)}}: {value}\n"


def _yes(v: Any, yes: str = "Yes", no: str = "No") -> str:
    return "N/A" if v in (None, NS) else (yes if v else no)


def _q_gpu(g: dict) -> str:
    """One GPU's block of `nvidia-smi -q` as driver 580 prints it (tests/data/nvml/h100-vm-1gpu-smi.json), with the
    values of the spec; a GPU in an error state prints its error in every value."""
    bad = STATE_TEXT.get(g.get("state"))
    v = (lambda x: bad) if bad else (lambda x: "N/A" if x in (None, NS) else x)  # noqa: E731
    pcie, ecc, mig, rp, rr = g["pcie"], g["ecc_volatile"], g["mig"], g["retired_pages"], g["remapped_rows"]
    f = g.get("fabric")
    L = [f"GPU 0000{g['bus_id'].upper()}\n", _q_line(1, "Product Name", v(g["name"])),
         _q_line(1, "Persistence Mode", v(_yes(g["persistence"], "Enabled", "Disabled"))), _q_line(1, "MIG Mode"),
         _q_line(2, "Current", v("N/A" if mig == NS else _yes(mig[0], "Enabled", "Disabled"))),
         _q_line(2, "Pending", v("N/A" if mig == NS else _yes(mig[1], "Enabled", "Disabled"))),
         _q_line(1, "GPU UUID", v(g["uuid"])), _q_line(1, "VBIOS Version", v(g["vbios"])),
         _q_line(1, "GPU Recovery Action", v(RECOVERY_TEXT.get(g.get("recovery_action"), "N/A"))),
         _q_line(1, "PCI"), _q_line(2, "Bus Id", "0000" + g["bus_id"].upper()), _q_line(2, "GPU Link Info"),
         _q_line(3, "PCIe Generation"), _q_line(4, "Max", v(pcie["max_gen"])), _q_line(4, "Current", v(pcie["gen"])),
         _q_line(4, "Device Current", v(pcie["gen"])), _q_line(4, "Device Max", v(pcie["max_gen"])),
         _q_line(4, "Host Max", "N/A"), _q_line(3, "Link Width"), _q_line(4, "Max", v(f"{pcie['max_width']}x")),
         _q_line(4, "Current", v(f"{pcie['width']}x")), _q_line(2, "Replays Since Reset", v(0)),
         _q_line(1, "Clocks Event Reasons")]
    for name, bit in CLOCK_NAMES:
        depth = 3 if name in ("HW Thermal Slowdown", "HW Power Brake Slowdown") else 2
        state = "N/A" if g["clocks"] in (None, NS) else ("Active" if g["clocks"] & bit else "Not Active")
        L.append(_q_line(depth, name, v(state)))
    used = g["memory_used"]
    L += [_q_line(1, "FB Memory Usage"), _q_line(2, "Total", v("81559 MiB")), _q_line(2, "Reserved", v("480 MiB")),
          _q_line(2, "Used", v("N/A" if used in (None, NS) else f"{used >> 20} MiB")), _q_line(1, "Utilization"),
          _q_line(2, "GPU", v("N/A" if g["utilization"] in (None, NS) else f"{g['utilization']} %")),
          _q_line(1, "ECC Mode"), _q_line(2, "Current", v(_yes(g["ecc_mode"], "Enabled", "Disabled"))),
          _q_line(2, "Pending", v(_yes(g["ecc_mode"], "Enabled", "Disabled"))), _q_line(1, "ECC Errors"),
          _q_line(2, "Volatile")]
    e = {} if ecc == NS else ecc
    L += [_q_line(3, "SRAM Correctable", v(0 if e else "N/A")),
          _q_line(3, "SRAM Uncorrectable Parity", v(0 if e else "N/A")),
          _q_line(3, "SRAM Uncorrectable SEC-DED", v(e.get("sram", "N/A"))),
          _q_line(3, "DRAM Correctable", v(0 if e else "N/A")),
          _q_line(3, "DRAM Uncorrectable", v(e.get("dram", "N/A"))),
          _q_line(1, "Retired Pages"),
          _q_line(2, "Single Bit ECC", v("N/A" if rp == NS else rp["sbe"])),
          _q_line(2, "Double Bit ECC", v("N/A" if rp == NS else rp["dbe"])),
          _q_line(2, "Pending Page Blacklist", v("N/A" if rp == NS else _yes(rp["pending"])))]
    if rr == NS:
        L.append(_q_line(1, "Remapped Rows", v("N/A")))
    else:
        L += [_q_line(1, "Remapped Rows"), _q_line(2, "Correctable Error", v(rr[0])),
              _q_line(2, "Uncorrectable Error", v(rr[1])), _q_line(2, "Pending", v(_yes(rr[2]))),
              _q_line(2, "Remapping Failure Occurred", v(_yes(rr[3])))]
    L += [_q_line(1, "Fabric"),
          _q_line(2, "State", v("N/A" if f in (None, NS) else FABRIC_TEXT.get(f["state"], "N/A"))),
          _q_line(2, "Status", v("N/A" if f in (None, NS) or f["state"] == 0 else
                                 ("Success" if f["status"] == 0 else f"Failure ({f['status']})")))]
    L += _health_lines(f if isinstance(f, dict) else {}, v)
    procs = g["processes"]
    if procs in (None, NS) or bad:
        L.append(_q_line(1, "Processes", v("N/A")))
    elif not procs:
        L.append(_q_line(1, "Processes", "None"))
    else:
        L.append(_q_line(1, "Processes"))
        for p in procs:
            used = p.get("used")
            L += [_q_line(2, "GPU instance ID", "N/A"), _q_line(2, "Compute instance ID", "N/A"),
                  _q_line(2, "Process ID", p["pid"]), _q_line(3, "Type", "C"), _q_line(3, "Name", "python3"),
                  _q_line(3, "Used GPU Memory", "N/A" if used is None else f"{used >> 20} MiB")]
    return "".join(L)


def render_q(spec: dict) -> tuple:
    """(text, exit code) of `nvidia-smi -q` on the node: every GPU the driver counts, a lost one as its own line
    (and exit 15, as nvidia-smi exits for a GPU it cannot reach)."""
    counted = [g for g in spec["gpus"] if not g.get("probe_failed")]
    out = ["\n==============NVSMI LOG==============\n\n", _q_line(0, "Driver Version", DRIVER),
           _q_line(0, "CUDA Version", "13.0"), "\n", _q_line(0, "Attached GPUs", len(counted))]
    rc = 0
    for g in counted:
        if g.get("lost") or g.get("state") == "lost":
            out.insert(1, f"Unable to determine the device handle for GPU 0000{g['bus_id'].upper()}: GPU is lost.  "
                          "Reboot the system to recover this GPU\n")
            rc = 15
            continue
        out.append(_q_gpu(g))
    return "".join(out), rc


def render_q_one(spec: dict, ident: str) -> tuple:
    """(text, exit code) of `nvidia-smi -q -i ident` (an index or a PCI bus id): the same header, this GPU's block;
    a lost one's line and exit 15; exit 6 (nvidia-smi(1): "A query to find an object was unsuccessful") for a GPU the
    driver does not count."""
    from ncclcheck.facts.nvml import normal_bus_id

    counted = [g for g in spec["gpus"] if not g.get("probe_failed")]
    bus = normal_bus_id(ident)
    g = next((x for k, x in enumerate(counted) if (bus and x["bus_id"] == bus) or ident == str(k)), None)
    if g is None:
        return "", 6
    head = ["\n==============NVSMI LOG==============\n\n", _q_line(0, "Driver Version", DRIVER),
            _q_line(0, "CUDA Version", "13.0"), "\n", _q_line(0, "Attached GPUs", len(counted))]
    if g.get("lost") or g.get("state") == "lost":
        return (f"Unable to determine the device handle for GPU 0000{g['bus_id'].upper()}: GPU is lost.  "
                "Reboot the system to recover this GPU\n"), 15
    return "".join(head) + _q_gpu(g), 0


def _nvlink_blocks(spec: dict):
    """(the `GPU i: name (UUID: ...)` line, the GPU, its NVLink spec or None where it prints no link) for each GPU
    nvidia-smi's nvlink commands list: the ones the driver counts and gives a handle for."""
    for i, g in enumerate(x for x in spec["gpus"] if not x.get("probe_failed") and not x.get("lost")):
        nvl = g["nvlink"]
        quiet = nvl.get("count") in (None, NS) or g.get("state") in STATE_TEXT
        yield f"GPU {i}: {g['name']} (UUID: {g['uuid']})\n", g, None if quiet else nvl


def render_nvlink_status(spec: dict) -> str:
    """`nvidia-smi nvlink -s`: per GPU its links' speed in GB/s, `<inactive>` for a link that is down."""
    out = []
    for head, _g, nvl in _nvlink_blocks(spec):
        out.append(head)
        if nvl is None:
            continue
        for link in range(nvl["count"]):
            speed = nvl.get("speed", H100_LINK_MBPS)
            out.append(f"\t Link {link}: " + ("<inactive>" if link in nvl.get("down", []) else
                                              f"{speed / 1000:.3f} GB/s") + "\n")
    return "".join(out)


# How often nvidia-smi was asked for each counter ({key: reads}): counters given as [base, step] grow by step a read,
# as FakeNvml's do. A child nvidia-smi keeps them in a file beside the spec (_SMI loads and saves it).
SMI_READS: dict = {}


def _smi_counter(key: str, value: Any) -> int:
    base, step = value if isinstance(value, (list, tuple)) else (value, 0)
    n = SMI_READS.get(key, 0)
    SMI_READS[key] = n + 1
    return int(base + step * n)


def render_nvlink_errors(spec: dict) -> str:
    """`nvidia-smi nvlink -e` as drivers before Blackwell print it: per link its replay, recovery and CRC (flit and
    data together) errors."""
    out = []
    for head, g, nvl in _nvlink_blocks(spec):
        out.append(head)
        if nvl is None:
            continue
        errs = nvl.get("errors", {})
        for link in range(nvl["count"]):
            e = {} if errs == NS else (errs.get(str(link)) or {})
            val = {k: _smi_counter(f"{g['bus_id']}/{link}/{k}", e.get(k, 0))
                   for k in ("replay", "recovery", "crc_flit", "crc_data")}
            out.append(f"\t Link {link}: Replay Errors: {val['replay']}\n"
                       f"\t Link {link}: Recovery Errors: {val['recovery']}\n"
                       f"\t Link {link}: CRC Errors: {val['crc_flit'] + val['crc_data']}\n")
    return "".join(out)


def smi_answer(spec: dict, argv: list) -> str:
    """What nvidia-smi prints for argv on this node; RuntimeError (run_cmd's failure) where it would exit non-zero,
    CommandFailed with what it printed where it prints and exits non-zero (a lost GPU)."""
    from ncclcheck.facts.util import CommandFailed

    args = list(argv[1:])
    raw = (spec.get("smi_text") or {}).get(" ".join(args))
    if raw is not None:  # a recorded node (tests/data/hwnodes): its own text
        return raw
    gpus = [g for g in spec["gpus"] if not g.get("probe_failed")]
    if args[:1] == ["topo"]:
        return "\tGPU0\nGPU0\t X \n"
    if args == ["-q"]:
        text, rc = render_q(spec)
        if rc:
            raise CommandFailed(f"nvidia-smi exited {rc}", text, rc)
        return text
    if args[:2] == ["-q", "-i"] and len(args) == 3:
        text, rc = render_q_one(spec, args[2])
        if rc:
            raise CommandFailed(f"nvidia-smi exited {rc}" + ("" if text else ": No devices were found"), text, rc)
        return text
    if args == ["nvlink", "-s"]:
        return render_nvlink_status(spec)
    if args == ["nvlink", "-e"]:
        return render_nvlink_errors(spec)
    query = next((a for a in args if a.startswith("--query-")), None)
    if query is None:
        raise RuntimeError("nvidia-smi exited 2: unsupported arguments in the fake")
    kind, _, fields = query[len("--query-"):].partition("=")
    names = fields.split(",")
    lines = []
    if kind == "gpu":
        for n in names:
            try:
                _smi_value(gpus[0], n)
            except KeyError:
                raise RuntimeError(f'nvidia-smi exited 2: Field "{n}" is not a valid field to query.') from None
        lines = [", ".join(_smi_value(g, n) for n in names) for g in gpus if not g.get("lost")]
    else:
        raise RuntimeError(f"nvidia-smi exited 2: --query-{kind} is not in the fake")
    return "".join(line + "\n" for line in lines)


# ------------------------------------------------------------------------------------------------- the tree
def _write(root: Path, rel: str, text: str) -> Path:
    p = Path(root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _link(root: Path, rel: str, target: str) -> None:
    p = Path(root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink() or p.exists():
        p.unlink()
    os.symlink(target, p)


def pci_function(root: Path, chain, *, bus_root: str = "pci0000:00", numa_node: Optional[int] = 0,
                 vendor: str = "0x10de", cls: str = "0x030200") -> Path:
    """A PCI function at the end of `chain` (bus ids from the root port down) as real directories under
    sys/devices/<bus_root>/..., each bridge (vendor 0x8086, class 0x0604) with its numa_node, and the kernel's
    sys/bus/pci/devices/<bdf> link for each element."""
    root = Path(root)
    rel = "sys/devices/" + bus_root
    for i, bdf in enumerate(chain):
        rel += "/" + bdf
        if numa_node is not None:
            _write(root, f"{rel}/numa_node", f"{numa_node}\n")
        last = i == len(chain) - 1
        _write(root, f"{rel}/vendor", f"{vendor if last else '0x8086'}\n")
        _write(root, f"{rel}/class", f"{cls if last else '0x060400'}\n")
        link = f"sys/bus/pci/devices/{bdf}"
        _link(root, link, os.path.relpath(root / rel, (root / link).parent))
    return root / rel


def ib_hca(root: Path, dev: str, *, fw_ver: str = "28.39.1002", node_guid: str = "a088:c203:0012:3456",
           numa_node: Optional[int] = 0, netdevs=(), board_id: Optional[str] = None, hca_type: Optional[str] = None,
           pci=None, bus_root: str = "pci0000:00") -> Path:
    """/sys/class/infiniband/<dev>: firmware, GUID, board and model; with `pci` (its chain from the root port down)
    its `device` link leads into sys/devices/<bus_root>/... as the kernel's does, else `device` is a plain directory
    holding numa_node."""
    root = Path(root)
    base = f"sys/class/infiniband/{dev}"
    _write(root, f"{base}/fw_ver", f"{fw_ver}\n")
    _write(root, f"{base}/node_guid", f"{node_guid}\n")
    if board_id is not None:
        _write(root, f"{base}/board_id", f"{board_id}\n")
    if hca_type is not None:
        _write(root, f"{base}/hca_type", f"{hca_type}\n")
    if pci:
        target = pci_function(root, pci, bus_root=bus_root, numa_node=numa_node, vendor="0x15b3", cls="0x020700")
        _link(root, f"{base}/device", os.path.relpath(target, root / base))
    elif numa_node is not None:
        _write(root, f"{base}/device/numa_node", f"{numa_node}\n")
    for i, nd in enumerate(netdevs):
        _write(root, f"{base}/device/net/{nd}/dev_port", f"{i}\n")
    return root / base


def ib_port(root: Path, dev: str, port: int = 1, *, state: str = "4: ACTIVE", phys_state: str = "5: LinkUp",
            rate: str = "400 Gb/sec (4X NDR)", link_layer: str = "InfiniBand", gids=None,
            empty_gid_slots: int = 4) -> Path:
    """gids: {index: (gid, type, ndev-or-None)}; empty_gid_slots all-zero slots follow them, as on real ports
    (their type/ndev files read EINVAL: empty here)."""
    root = Path(root)
    base = f"sys/class/infiniband/{dev}/ports/{port}"
    for name, text in (("state", state), ("phys_state", phys_state), ("rate", rate), ("link_layer", link_layer)):
        _write(root, f"{base}/{name}", f"{text}\n")
    gids = gids if gids is not None else {0: ("fe80:0000:0000:0000:a088:c203:0012:3456", "IB/RoCE v1", None)}
    for i, (gid, gtype, ndev) in gids.items():
        _write(root, f"{base}/gids/{i}", f"{gid}\n")
        _write(root, f"{base}/gid_attrs/types/{i}", f"{gtype}\n")
        _write(root, f"{base}/gid_attrs/ndevs/{i}", f"{ndev}\n" if ndev else "")
    start = max(gids, default=-1) + 1
    for i in range(start, start + empty_gid_slots):
        _write(root, f"{base}/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000\n")
        _write(root, f"{base}/gid_attrs/types/{i}", "")
        _write(root, f"{base}/gid_attrs/ndevs/{i}", "")
    return root / base


# The counters every port has (ports/N/counters) and mlx5's (ports/N/hw_counters), as facts/rdma.py reads them
ZERO_COUNTERS = {n: 0 for n in ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors",
                                "port_rcv_remote_physical_errors", "port_xmit_discards",
                                "local_link_integrity_errors", "excessive_buffer_overrun_errors")}
ZERO_HW_COUNTERS = {n: 0 for n in ("local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err", "out_of_buffer",
                                   "out_of_sequence", "rnr_nak_retry_err", "np_cnp_sent", "rp_cnp_handled")}


def ib_counters(root: Path, dev: str, port: int = 1, hw: bool = False, **values: int) -> Path:
    """ports/<port>/counters/<name> (hw: hw_counters/<name>) = value, one file per keyword."""
    base = f"sys/class/infiniband/{dev}/ports/{port}/{'hw_counters' if hw else 'counters'}"
    for name, v in values.items():
        _write(root, f"{base}/{name}", f"{v}\n")
    return Path(root) / base


def peermem(root: Path, which: str = "nvidia_peermem", version: str = "580.95.05") -> Path:
    """One of the three files NCCL's ncclIbGdrSupport looks for: nvidia_peermem (the driver's module), nv_mem or
    nv_mem_nc (MLNX_OFED's peer-memory clients)."""
    rel = {"nvidia_peermem": "sys/module/nvidia_peermem/version",
           "nv_mem": "sys/kernel/mm/memory_peers/nv_mem/version",
           "nv_mem_nc": "sys/kernel/mm/memory_peers/nv_mem_nc/version"}[which]
    return _write(root, rel, f"{version}\n")


def nvidia_module(root: Path, flavor: str = "open", version: str = "580.95.05") -> Path:
    """/sys/module/nvidia: the open flavor taints "OE" (out of tree, unsigned), the proprietary one "POE"."""
    _write(root, "sys/module/nvidia/version", f"{version}\n")
    return _write(root, "sys/module/nvidia/taint", ("POE" if flavor == "proprietary" else "OE") + "\n")


def kernel(root: Path, release: str) -> Path:
    return _write(root, "proc/sys/kernel/osrelease", f"{release}\n")


def mlx5_core_version(root: Path, version: str) -> Path:
    return _write(root, "sys/module/mlx5_core/version", f"{version}\n")


def _aer(kind: str, total: int) -> str:
    key = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL", "fatal": "TOTAL_ERR_FATAL"}[kind]
    return "".join(f"{n} 0\n" for n in ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr")) + \
        f"{key} {total}\n"


def write_aer(root: Path, spec: dict, i: int) -> None:
    """GPU i's AER totals as the spec says now (a test rewrites them between the two counter reads)."""
    g = spec["gpus"][i]
    d = _device_dir(spec, g["bus_id"])
    for kind, total in zip(("correctable", "nonfatal", "fatal"), g["pcie"]["aer"]):
        _write(root, f"{d}/aer_dev_{kind}", _aer(kind, total))


def _switch(pair: int) -> tuple:
    """(root complex, root port) of the PCIe switch of GPU pair `pair` (GPUs 2*pair, 2*pair + 1 and their HCAs)."""
    return f"pci0000:{0x10 + pair:02x}", f"0000:{0x10 + pair:02x}:01.0"


def _gpu_chain(idx: int, bus: str) -> list:
    pair = idx // 2
    return [_switch(pair)[1], f"0000:{0x17 + 0x20 * pair:02x}:{idx % 2:02x}.0", bus]


def _hca_chain(i: int) -> list:
    """HCA i under GPU i's switch, on the switch's next downstream ports (rail-aligned: GPU i's nearest NIC)."""
    pair = i // 2
    return [_switch(pair)[1], f"0000:{0x17 + 0x20 * pair:02x}:{2 + i % 2:02x}.0",
            f"0000:{0x1a + 0x20 * pair + i % 2:02x}:00.0"]


def _device_dir(spec: dict, bus: str) -> str:
    """The real directory of a GPU: under its PCIe switch's downstream port, under a root port (one per GPU pair)."""
    idx = next(i for i, g in enumerate(spec["gpus"]) if g["bus_id"] == bus)
    return f"sys/devices/{_switch(idx // 2)[0]}/" + "/".join(_gpu_chain(idx, bus))


def kmsg_line(seq: int, t_s: float, msg: str, prio: int = 3) -> str:
    return f"{prio},{seq},{int(t_s * 1e6)},-;{msg}\n"


def xid_line(bus: str, code: int, text: str = "") -> str:
    """The driver's Xid line for a GPU (the bus id as NVRM prints it: domain:bus:device, no function)."""
    short = bus.rsplit(".", 1)[0]
    return f"NVRM: Xid (PCI:{short}): {code}, pid=4242, name=python3, {text or 'GPU error'}"


def write_tree(root: Path, spec: dict) -> Path:
    """<root>/sys, <root>/proc and <root>/dev as the node of `spec` shows them."""
    root = Path(root)
    for g in spec["gpus"]:
        if g.get("sysfs") is False:  # a GPU whose PCI directory was not recorded
            continue
        idx, pcie = g["index"], g["pcie"]
        d = pci_function(root, _gpu_chain(idx, g["bus_id"]), bus_root=_switch(idx // 2)[0], numa_node=idx // 4)
        for name, text in (("current_link_speed", pcie["sysfs_speed"]), ("max_link_speed", pcie["sysfs_max_speed"]),
                           ("current_link_width", pcie["width"]), ("max_link_width", pcie["max_width"])):
            (d / name).write_text(f"{text}\n")
        write_aer(root, spec, idx)
        if not g.get("probe_failed") or g.get("bound"):  # the nvidia driver bound it (one failed at probe has none)
            drv = root / "sys/bus/pci/drivers/nvidia"
            _link(root, f"sys/bus/pci/drivers/nvidia/{g['bus_id']}", os.path.relpath(d, drv))
            _link(root, os.path.relpath(d / "driver", root), os.path.relpath(drv, d))
    for sw in spec["nvswitches"]:
        pci_function(root, [sw], bus_root="pci0000:00", numa_node=None, cls="0x068000")
    for i, dev in enumerate(spec["ib_ports"]):
        ib_hca(root, dev, fw_ver=spec["hca_fw"], node_guid=f"a088:c203:0012:{i:04x}", numa_node=i // 4,
               board_id=spec["hca_board"], hca_type=spec["hca_type"], pci=_hca_chain(i), bus_root=_switch(i // 2)[0])
        ib_port(root, dev, 1, link_layer=spec["ib_link_layer"].get(dev, "InfiniBand"),
                gids={0: (f"fe80:0000:0000:0000:a088:c203:0012:{i:04x}", "IB/RoCE v1", None)})
        values = {**ZERO_COUNTERS, **ZERO_HW_COUNTERS, **spec["ib_counters"].get(dev, {})}
        ib_counters(root, dev, 1, **{k: v for k, v in values.items() if k not in ZERO_HW_COUNTERS})
        ib_counters(root, dev, 1, hw=True, **{k: v for k, v in values.items() if k in ZERO_HW_COUNTERS})
    if spec["gpus"]:
        nvidia_module(root, spec["nvidia_module"], DRIVER)
        if spec["peermem"]:
            peermem(root, spec["peermem"], DRIVER)
    if spec["ib_ports"] and spec["ofed"]:
        mlx5_core_version(root, spec["ofed"])
    kernel(root, spec["kernel"])
    _write(root, "proc/uptime", f"{spec['uptime_s']:.2f} 1000.00\n")
    _write(root, "proc/sys/kernel/random/boot_id", "5e0c8f0a-1111-4222-8333-444455556666\n")
    _write(root, "proc/sys/kernel/dmesg_restrict", f"{spec['dmesg_restrict']}\n")
    if spec["gpus"]:
        _write(root, "proc/driver/nvidia/version",
               f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {DRIVER}  Release Build\n")
    mods = ["nvidia_uvm 4956160 0 - Live 0x0", "nvidia 11579392 1 nvidia_uvm, Live 0x0"]
    if spec.get("nouveau"):
        mods.append("nouveau 2961408 0 - Live 0x0")
    _write(root, "proc/modules", "\n".join(mods) + "\n")
    lines = [kmsg_line(0, 0.0, "Linux version 6.8.0 (buildd@lcy02) #1 SMP"),
             kmsg_line(1, 0.5, "Command line: BOOT_IMAGE=/vmlinuz root=/dev/sda1")]
    for k, (t_s, msg) in enumerate(spec["kernel_log"]):
        lines.append(kmsg_line(k + 2, t_s, msg))
    if spec.get("kmsg_readable", True):  # unreadable: absent (a test as root cannot make a file it cannot open)
        _write(root, "dev/kmsg", "".join(lines))
    write_imex(root, spec.get("imex"))
    return root


IMEX_MAJOR = 234  # the major /proc/devices gives nvidia-caps-imex-channels in the posted setups


def imex_domain(addrs: list, states: Optional[list] = None, links: Optional[dict] = None,
                domain: str = "UP") -> str:
    """`nvidia-imex-ctl -N` of a domain as the IMEX guide's tool prints it (facts/imex.py): the legend, the nodes
    (READY unless `states` says), the From/To matrix (C unless `links` {(from, to): letter} says), the state."""
    states = states or ["READY"] * len(addrs)
    links = links or {}
    out = ["Connectivity Table Legend:", "I - Invalid - Node wasn't reachable, no connection status available",
           "N - Never Connected", "R - Recovering - Connection was lost, but clean up has not yet been triggered.",
           "D - Disconnected - Connection was lost, and clean up has been triggered.",
           "A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.",
           "C - Connected - Ready for operation", "", "11/28/2026 10:39:43.659", "Nodes:"]
    out += [f"Node #{i:<3} - {a:<15} - {st}" for i, (a, st) in enumerate(zip(addrs, states))]
    n = len(addrs)
    out += ["", " Nodes From\\To  " + "   ".join(str(i) for i in range(n))]
    out += [f"{i:>8}        " + "   ".join(links.get((i, j), "C") for j in range(n)) for i in range(n)]
    out.append(f"Domain State: {domain}")
    return "\n".join(out) + "\n"


def write_imex(root: Path, imex: Optional[dict]) -> None:
    """The IMEX channels (character devices, as the driver makes them) and the driver's /proc/devices line of a spec's
    "imex": {"channels": [names], "major": bool, "ctl": nvidia-imex-ctl -N's text or None, "ctl_rc": its exit}."""
    if not imex:
        return
    if imex.get("channels") is not None:
        d = Path(root) / "dev" / "nvidia-caps-imex-channels"
        d.mkdir(parents=True, exist_ok=True)
        for i, name in enumerate(imex["channels"]):
            os.mknod(d / name, 0o666 | stat.S_IFCHR, os.makedev(IMEX_MAJOR, i))
    devices = ["Character devices:", "195 nvidia-frontend", "510 nvidia-uvm"]
    if imex.get("major", True):
        devices.append(f"{IMEX_MAJOR} nvidia-caps-imex-channels")
    _write(root, "proc/devices", "\n".join(devices) + "\n")


# ------------------------------------------------------------------- fake drivers for a child process (the bench)
_PYNVML = '''"""A fake pynvml (ncclcheck_lab/fakehw.py) answering from the node spec in $NCCLCHECK_FAKE_HW."""
import json, os
from ncclcheck_lab.fakehw import FakeNvml
with open(os.environ["NCCLCHECK_FAKE_HW"]) as _f:
    _FAKE = FakeNvml(json.load(_f))
def __getattr__(name):
    return getattr(_FAKE, name)
'''
# A node without NVML's binding (no GPU, or read through nvidia-smi): this pynvml.py, first on the child's path, keeps
# the machine's own binding (and through it the machine's GPUs) out of the fake node.
_NO_PYNVML = '''"""No NVML binding on this fake node (ncclcheck_lab/fakehw.py): the machine's own is never read."""
raise ImportError("No module named 'pynvml'")
'''
_SMI = '''#!{python}
"""A fake nvidia-smi (ncclcheck_lab/fakehw.py) answering from the node spec in $NCCLCHECK_FAKE_HW."""
import json, os, sys
import time
t0 = time.time()
from ncclcheck_lab import fakehw  # found through $PYTHONPATH (env_for)
with open(os.environ["NCCLCHECK_FAKE_HW"]) as f:
    spec = json.load(f)
time.sleep(float(spec.get("smi_delay_s") or 0))  # a node without persistence mode answers each call slowly
with open(os.environ["NCCLCHECK_FAKE_HW"] + ".calls", "a") as f:  # when each call ran (bench_hwnodes reads it)
    f.write(json.dumps([sys.argv[1:], t0, time.time()]) + "\\n")
# Only `nvlink -e` reads counters; the calls of one collection run at once, so the file is replaced whole
counting = sys.argv[1:] == ["nvlink", "-e"]
reads = os.environ["NCCLCHECK_FAKE_HW"] + ".reads"
if counting and os.path.exists(reads):
    with open(reads) as f:
        fakehw.SMI_READS.update(json.load(f))
try:
    sys.stdout.write(fakehw.smi_answer(spec, sys.argv))
    if counting:
        mine = reads + "." + str(os.getpid())  # (no braces: this text is a str.format template)
        with open(mine, "w") as f:
            json.dump(fakehw.SMI_READS, f)
        os.replace(mine, reads)
except RuntimeError as e:
    sys.stdout.write(getattr(e, "stdout", "") or "")
    sys.stderr.write(str(e).split(": ", 1)[-1] + "\\n")
    sys.exit(getattr(e, "returncode", None) or 2)
'''


def install(root: Path, spec: dict, with_pynvml: bool = True, base: Optional[dict] = None) -> dict:
    """Write the spec, a pynvml.py (unless not wanted: the nvidia-smi path) and an nvidia-smi under <root>/bin; the
    environment (env_for, over `base` or this process's) that makes a child ncclcheck read the fake tree through
    them and nothing of the machine's GPUs: no NVML binding but the fake's, no nvidia-smi but the fake's."""
    root = Path(root)
    write_tree(root, spec)
    _write(root, "spec.json", json.dumps(spec))
    (root / "bin").mkdir(exist_ok=True)
    # a node without a GPU has no driver, no binding that works and no nvidia-smi: the machine's are hidden (a GPU
    # machine running the tests must not lend its own GPUs to the fake)
    _write(root, "py/pynvml.py", _PYNVML if spec["gpus"] and with_pynvml else _NO_PYNVML)
    env = env_for(root, base)
    if spec["gpus"]:
        smi = _write(root, "bin/nvidia-smi", _SMI.format(python=sys.executable))
        smi.chmod(0o755)
    else:
        env["PATH"] = _path_without_nvidia_smi(root, env["PATH"])
    imex = spec.get("imex") or {}
    if imex.get("ctl") is not None:
        _write(root, "imex-ctl.txt", imex["ctl"])
        ctl = _write(root, "bin/nvidia-imex-ctl",
                     f"#!/bin/sh\ncat '{root / 'imex-ctl.txt'}'\nexit {int(imex.get('ctl_rc', 0))}\n")
        ctl.chmod(0o755)
    return env


def _path_without_nvidia_smi(root: Path, path: str) -> str:
    """PATH with each directory holding an nvidia-smi (the machine's) replaced by a copy of it, under root, of links
    to everything else it holds: a fake node without GPUs finds no nvidia-smi, and every other tool as before."""
    out = []
    for i, d in enumerate(p for p in path.split(os.pathsep) if p):
        if not os.path.isfile(os.path.join(d, "nvidia-smi")):
            out.append(d)
            continue
        copy_dir = root / "hostbin" / str(i)
        copy_dir.mkdir(parents=True, exist_ok=True)
        for name in os.listdir(d):
            link = copy_dir / name
            if name != "nvidia-smi" and not os.path.lexists(link):
                os.symlink(os.path.join(d, name), link)
        out.append(str(copy_dir))
    return os.pathsep.join(out)


def env_for(root: Path, base: Optional[dict] = None) -> dict:
    root = Path(root)
    env = dict(os.environ if base is None else base)
    lab = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "py"), lab, env.get("PYTHONPATH", "")) if p)
    env["PATH"] = os.pathsep.join((str(root / "bin"), env.get("PATH", "")))
    env.update(NCCLCHECK_SYSFS_ROOT=str(root / "sys"), NCCLCHECK_PROCFS_ROOT=str(root / "proc"),
               NCCLCHECK_DEVFS_ROOT=str(root / "dev"), NCCLCHECK_FAKE_HW=str(root / "spec.json"))
    return env


def faulty(spec: dict, **changes: Any) -> dict:
    """A copy of spec with GPU fields changed: faulty(spec, gpu=3, remapped_rows=[0, 0, True, False])."""
    out = copy.deepcopy(spec)
    i = changes.pop("gpu", 0)
    for k, v in changes.items():
        out["gpus"][i][k] = v
    return out


__all__ = ["NS", "SMI_READS", "STATE_CODES", "ZERO_COUNTERS", "ZERO_HW_COUNTERS", "FakeNvml", "NVMLError", "env_for",
           "faulty", "gpu_spec", "ib_counters", "ib_hca", "ib_port", "install", "kernel", "kmsg_line",
           "mlx5_core_version", "node_spec", "nvidia_module", "pci_function", "peermem", "render_nvlink_errors",
           "render_nvlink_status", "render_q", "render_q_one", "smi_answer", "write_aer", "write_tree", "xid_line"]
