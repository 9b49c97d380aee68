"""`nvidia-smi -q` read as NVML would answer: one call gives every GPU's health questions (identity, persistence, MIG,
ECC, row remapping, retired pages, recovery action, clock-event reasons, utilisation, memory, processes, PCIe, fabric),
turned into the same per-GPU facts facts/gpuhealth.py reads through NVML, so a check cannot tell the sources apart.

nvidia-smi prints what NVML returned: `N/A` (or `[N/A]`, `[Not Supported]`) where NVML said NVML_ERROR_NOT_SUPPORTED,
`[Unknown Error]`, `[GPU requires reset]`, `[GPU is lost]` where the call failed with that error (facts/nvml.py's read
states, written once there). A GPU whose handle could not be had is a line of its own ("Unable to determine the device
handle for GPU 0000:3B:00.0: Unknown Error") and is kept, with its bus id and state, never dropped.

The labels change across driver branches (R470 to R580: "Clocks Throttle Reasons" became "Clocks Event Reasons", the
ECC section split SRAM and DRAM, "GPU Recovery Action" and "Fabric" appeared); each fact lists the labels it accepts.
The text is untrusted: bounded in lines, GPUs, processes and value length; a value that is not a number is that
field's problem alone.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from . import fabrichealth
from . import nvml as nv_

MAX_LINES = 400_000  # a node of 64 GPUs prints ~250 lines each
MAX_GPUS = 64
MAX_PROCESSES = 32
MAX_VALUE = 256
MAX_DIGITS = 20  # 2**64 has 20 digits: a longer "number" is not one NVML could have returned

# A read that did not give a value, as nvidia-smi prints it -> facts/nvml.py's read state
_STATES = (("requires reset", nv_.RESET_REQUIRED), ("is lost", nv_.GPU_LOST), ("unknown error", nv_.UNKNOWN_ERROR),
           ("err!", nv_.UNKNOWN_ERROR), ("not supported", nv_.NOT_SUPPORTED), ("n/a", nv_.NOT_SUPPORTED),
           ("insufficient permissions", "insufficient permissions"), ("unknown", nv_.UNKNOWN_ERROR))
_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_NO_HANDLE = re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                        r"[0-9A-Fa-f]{2}(?:\.[0-7])?)\s*:\s*(.*)")
_NUM = re.compile(r"^\s*(-?\d+)(?:\.\d+)?\s*(?:x|%|MiB|KiB|GiB|us|ms|W|C|MHz)?\s*$")

# nvmlClocksEventReasons bits by the name nvidia-smi prints for each (nvml.h)
CLOCK_BITS = {"idle": 0x1, "applications clocks setting": 0x2, "sw power cap": 0x4, "hw slowdown": 0x8,
              "sync boost": 0x10, "sw thermal slowdown": 0x20, "hw thermal slowdown": 0x40,
              "hw power brake slowdown": 0x80, "display clock setting": 0x100}
# nvidia-smi's "GPU Recovery Action" words -> NVML's nvmlDeviceGpuRecoveryAction_t (most specific first)
RECOVERY_WORDS = (("drain and reset", 4), ("drain p2p", 3), ("bus reset", 6), ("imex", 5), ("system reboot", 7),
                  ("reboot", 2), ("reset", 1), ("none", 0))


def state_of(value: Optional[str]) -> Optional[str]:
    """The read state a printed value says (facts/nvml.py's constants), or None for a value."""
    if value is None:
        return nv_.NOT_SUPPORTED
    v = value.strip().strip("[]").strip().lower()
    if not v:
        return nv_.NOT_SUPPORTED
    for word, state in _STATES:
        if v == word or (word not in ("n/a", "unknown") and word in v):
            return state
    return None


def _entries(lines: list) -> list:
    """[(path, value)] of one GPU's block: path is the tuple of section labels down to the key (lower case)."""
    out: list = []
    stack: list = []  # [(indent, label)]
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        key, sep, value = line.strip().partition(":")
        key = key.strip().lower()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(label for _i, label in stack) + (key,)
        if sep:
            out.append((path, value.strip()[:MAX_VALUE]))
        stack.append((indent, key))
    return out


class _Block:
    """One GPU's entries, asked by section and key (each a few spellings across drivers)."""

    def __init__(self, entries: list) -> None:
        self.entries = entries
        self.missing: list = []  # facts whose label this driver does not print

    def get(self, sections: tuple, keys: tuple) -> tuple:
        """(value, found): the first entry whose key is one of `keys` under a section in `sections` ("" = top)."""
        for path, value in self.entries:
            if path[-1] in keys and (("" in sections and len(path) == 1) or any(s in path[:-1] for s in sections)):
                return value, True
        return None, False


class _Reader:
    """One GPU's facts from its block, keeping which reads were not supported and which failed, as _Asker does for
    NVML."""

    def __init__(self, block: _Block) -> None:
        self.b = block
        self.unsupported: list = []
        self.errors: dict = {}

    def raw(self, key: str, sections: tuple, labels: tuple) -> Optional[str]:
        value, found = self.b.get(sections, labels)
        if not found:
            self.b.missing.append(key)
            return None
        st = state_of(value)
        if st == nv_.NOT_SUPPORTED:
            self.unsupported.append(key)
            return None
        if st is not None:
            self.errors[key] = st
            return None
        return value

    def num(self, key: str, sections: tuple, labels: tuple) -> Optional[int]:
        v = self.raw(key, sections, labels)
        if v is None:
            return None
        m = _NUM.match(v)
        if not m or len(m.group(1).lstrip("-")) > MAX_DIGITS:
            self.errors[key] = f"not a number: {v[:40]!r}"
            return None
        return int(m.group(1))

    def flag(self, key: str, sections: tuple, labels: tuple) -> Optional[bool]:
        v = self.raw(key, sections, labels)
        if v is None:
            return None
        low = v.lower()
        if low in ("enabled", "yes", "active", "on", "true"):
            return True
        if low in ("disabled", "no", "not active", "off", "false"):
            return False
        self.errors[key] = f"neither yes nor no: {v[:40]!r}"
        return None


def _ecc(r: _Reader) -> dict:
    """Volatile uncorrected ECC counts: R450+ print SRAM/DRAM Uncorrectable (R575+ split SRAM in Parity and SEC-DED),
    earlier drivers Double Bit per location with a Total."""
    vol = ("volatile",)
    out: dict[str, Any] = {"total": None, "sram": None, "dram": None}
    dram = r.num("ecc_volatile_dram", vol, ("dram uncorrectable",))
    parts = [r.num("ecc_volatile_sram", vol, (k,)) for k in ("sram uncorrectable", "sram uncorrectable parity",
                                                              "sram uncorrectable sec-ded")]
    r.b.missing = [m for m in r.b.missing if m not in ("ecc_volatile_sram", "ecc_volatile_dram")]
    sram = [p for p in parts if isinstance(p, int)]
    out["sram"] = sum(sram) if sram else None
    out["dram"] = dram
    if out["sram"] is not None or dram is not None:
        out["total"] = (out["sram"] or 0) + (dram or 0)
        return out
    # Pre-R450: "Volatile / Double Bit / ... / Total"
    for path, value in r.b.entries:
        if len(path) >= 3 and "volatile" in path and "double bit" in path and path[-1] == "total":
            st = state_of(value)
            m = _NUM.match(value or "")
            if st is None and m and len(m.group(1)) <= MAX_DIGITS:
                out["total"] = int(m.group(1))
            elif st == nv_.NOT_SUPPORTED:
                r.unsupported.append("ecc_volatile")
            elif st is not None:
                r.errors["ecc_volatile"] = st
            break
    return out


def _remapped(r: _Reader) -> Optional[dict]:
    sec = ("remapped rows",)
    whole, found = r.b.get(("",), ("remapped rows",))
    if found and state_of(whole) is not None:  # "Remapped Rows : N/A" (pre-Ampere)
        r.raw("remapped_rows", ("",), ("remapped rows",))
        return None
    corr = r.num("remapped_rows", sec, ("correctable error",))
    unc = r.num("remapped_rows", sec, ("uncorrectable error",))
    pend = r.flag("remapped_rows", sec, ("pending",))
    fail = r.flag("remapped_rows", sec, ("remapping failure occurred",))
    if corr is None and unc is None and pend is None and fail is None:
        return None
    return {"correctable": corr, "uncorrectable": unc, "pending": bool(pend), "failure": bool(fail)}


def _retired(r: _Reader) -> Optional[dict]:
    sec = ("retired pages",)
    sbe = r.num("retired_pages", sec, ("single bit ecc",))
    dbe = r.num("retired_pages", sec, ("double bit ecc",))
    pend = r.flag("retired_pages_pending", sec, ("pending page blacklist", "pending"))
    if sbe is None and dbe is None:
        return None
    return {"sbe": sbe, "dbe": dbe, "pending": pend}


def _clocks(r: _Reader) -> Optional[int]:
    """The clock-event mask from each reason's Active / Not Active (R535+ "Clocks Event Reasons", earlier "Clocks
    Throttle Reasons"; "Clocks Throttle Reasons" with "Clocks Event Reasons Counters" after it on some)."""
    mask, seen = 0, 0
    for path, value in r.b.entries:
        if len(path) < 2 or not any(p in ("clocks event reasons", "clocks throttle reasons", "clocks_event_reasons")
                                    for p in path[:-1]):
            continue
        bit = CLOCK_BITS.get(path[-1])
        if bit is None:
            continue
        st = state_of(value)
        if st is not None:
            if st != nv_.NOT_SUPPORTED:
                r.errors["clock_event_reasons"] = st
            continue
        seen += 1
        if value.strip().lower() == "active":
            mask |= bit
    if not seen:
        if "clock_event_reasons" not in r.errors:
            r.unsupported.append("clock_event_reasons")
        return None
    return mask


def _processes(r: _Reader) -> Optional[list]:
    """Compute processes (type C or C+G: what nvmlDeviceGetComputeRunningProcesses lists)."""
    top, found = r.b.get(("",), ("processes",))
    if found and (top or "").strip().lower() == "none":
        return []
    if found and top and state_of(top) is not None:  # "Processes : [GPU requires reset]"
        return r.raw("processes", ("",), ("processes",))
    procs: list = []
    cur: Optional[dict] = None
    any_seen = False
    for path, value in r.b.entries:
        if "processes" not in path[:-1]:
            continue
        any_seen = True
        key = path[-1]
        if key == "process id":
            cur = {"pid": _int(value), "type": None, "used_bytes": None}
            procs.append(cur)
        elif cur is not None and key == "type":
            cur["type"] = value.strip().upper()
        elif cur is not None and key == "used gpu memory":
            mib = _int(value)
            cur["used_bytes"] = None if mib is None else mib << 20
    if not any_seen and not found:
        r.unsupported.append("processes")
        return None
    return [{"pid": p["pid"], "used_bytes": p["used_bytes"]} for p in procs
            if p["pid"] is not None and (p["type"] or "C").startswith("C")][:MAX_PROCESSES]


def _int(v: Optional[str]) -> Optional[int]:
    m = _NUM.match(v or "")
    return int(m.group(1)) if m and len(m.group(1).lstrip("-")) <= MAX_DIGITS else None


def _recovery(r: _Reader) -> Optional[int]:
    v = r.raw("recovery_action", ("",), ("gpu recovery action",))
    if v is None:
        return None
    low = v.lower()
    for word, code in RECOVERY_WORDS:
        if word in low:
            return code
    r.errors["recovery_action"] = f"unknown recovery action {v[:40]!r}"
    return None


def _fabric(r: _Reader) -> Optional[dict]:
    state = r.raw("fabric", ("fabric",), ("state",))
    if state is None:
        return None
    status = r.raw("fabric_status", ("fabric",), ("status",))
    st = state.strip().lower().replace(" ", "_")
    clique = _fabric_line(r, "cliqueid")
    uuid = _fabric_line(r, "clusteruuid")
    return {"state": st, "status": "success" if (status or "").strip().lower() == "success" else
            (None if status is None else f"error: {status[:80]}"),
            "clique_id": int(clique) if clique is not None and clique.isdigit() and len(clique) <= MAX_DIGITS
            and st == "completed" else None,
            "cluster_uuid": uuid.lower()[:64] if uuid is not None and st == "completed" else None,
            "health": fabrichealth.from_smi({"summary": _fabric_line(r, "summary"),
                                             **{item[0]: _fabric_line(r, item[-1]) for item in fabrichealth.ITEMS}})}


def _fabric_line(r: _Reader, label: str) -> Optional[str]:
    """One value under Fabric (R555+: CliqueId, ClusterUUID, the Health block; facts/fabrichealth.py), None where
    this driver prints no such line or N/A; a read that failed is kept as the fabric health's error."""
    value, found = r.b.get(("fabric",), (label,))
    if not found:
        return None
    st = state_of(value)
    if st is not None and st != nv_.NOT_SUPPORTED:
        r.errors["fabric_health"] = st
    return None if st is not None else value.strip()


def _gpu(i: int, bus: Optional[str], block: _Block) -> dict:
    r = _Reader(block)
    g: dict[str, Any] = {"index": i, "bus_id": nv_.normal_bus_id(bus), "uuid": r.raw("uuid", ("",), ("gpu uuid",)),
                         "name": r.raw("name", ("",), ("product name",)),
                         "vbios": r.raw("vbios", ("",), ("vbios version",))}
    pci_bus = r.raw("pci", ("pci",), ("bus id",))
    g["bus_id"] = g["bus_id"] or nv_.normal_bus_id(pci_bus)
    g["persistence"] = r.flag("persistence", ("",), ("persistence mode",))
    mig_cur = r.flag("mig", ("mig mode",), ("current",))
    mig_pend = r.flag("mig", ("mig mode",), ("pending",))
    g["mig"] = None if mig_cur is None else {"current": mig_cur, "pending": bool(mig_pend)}
    g["ecc_mode"] = r.flag("ecc_mode", ("ecc mode",), ("current",))
    g["ecc_uncorrected_volatile"] = _ecc(r) if g["ecc_mode"] is not False else {"total": None, "sram": None,
                                                                                 "dram": None}
    g["remapped_rows"] = _remapped(r)
    g["retired_pages"] = _retired(r) if g["remapped_rows"] is None else None
    g["recovery_action"] = _recovery(r)
    g["clock_event_reasons"] = _clocks(r)
    g["utilization_gpu"] = r.num("utilization", ("utilization",), ("gpu",))
    used = r.num("memory", ("fb memory usage",), ("used",))
    g["memory_used_bytes"] = None if used is None else used << 20
    g["processes"] = _processes(r)
    gen_sec, width_sec = ("pcie generation",), ("link width",)
    g["pcie_nvml"] = {"gen": r.num("pcie", gen_sec, ("current",)),
                      "max_gen": r.num("pcie", gen_sec, ("device max",)) if block.get(gen_sec, ("device max",))[1]
                      else r.num("pcie", gen_sec, ("max",)),
                      "width": r.num("pcie", width_sec, ("current",)), "max_width": r.num("pcie", width_sec, ("max",))}
    g["fabric"] = _fabric(r)
    g["unsupported"] = sorted(set(r.unsupported))
    if r.errors:
        g["errors"] = r.errors
    return g


def parse(text: str) -> dict:
    """{"driver", "gpus": [per-GPU facts as gpuhealth's NVML reader gives], "unreachable": [{"bus_id", "state"}],
    "attached": the GPU count the answer announces ("Attached GPUs : 8"; a complete answer prints that many GPUs,
    a block each or a line each for one without a handle), "lines_cut": lines past MAX_LINES were not read}."""
    every = (text or "").splitlines()
    lines = every[:MAX_LINES]
    driver = attached = None
    blocks: list = []  # [(bus, [lines])]
    unreachable: list = []
    for line in lines:
        m = _HEADER.match(line.strip()) if not line[:1].isspace() else None
        if m:
            if len(blocks) >= MAX_GPUS:
                break
            blocks.append((m.group(1), []))
            continue
        nh = _NO_HANDLE.search(line)
        if nh and len(unreachable) < MAX_GPUS:
            unreachable.append({"bus_id": nv_.normal_bus_id(nh.group(1)),
                                "state": state_of(nh.group(2)) or nh.group(2).strip()[:80]})
            continue
        if blocks and line[:1].isspace():
            blocks[-1][1].append(line)
        elif not blocks and line.lower().startswith("driver version"):
            driver = line.partition(":")[2].strip()[:32] or None
        elif not blocks and line.lower().startswith("attached gpus"):
            attached = _int(line.partition(":")[2])
    gpus = [_gpu(0, bus, _Block(_entries(body))) for bus, body in blocks]
    # NVML numbers the GPUs it counts in PCI bus order, a GPU without a handle included: so does this
    order = sorted({g["bus_id"] for g in gpus if g["bus_id"]} | {u["bus_id"] for u in unreachable if u["bus_id"]})
    for i, g in enumerate(gpus):
        g["index"] = order.index(g["bus_id"]) if g["bus_id"] in order else i
    for u in unreachable:
        u["index"] = order.index(u["bus_id"]) if u["bus_id"] in order else None
    return {"driver": driver, "gpus": gpus, "unreachable": unreachable, "attached": attached,
            "lines_cut": len(every) > MAX_LINES}


__all__ = ["CLOCK_BITS", "RECOVERY_WORDS", "parse", "state_of"]
