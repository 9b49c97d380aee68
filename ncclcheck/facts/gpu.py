"""NVIDIA GPUs: count, names, memory, CUDA/NCCL/driver versions and topology.

The NCCL version that matters is the one torch loads, so torch is consulted, but never imported here: the caller hands
in a loader (`load_torch`), called only on a node with an NVIDIA driver. facts/ stays importable without torch."""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from ..units import is_decimal
from . import smi
from .roots import procfs, read_text
from .util import run_cmd

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str], float], str]
SMI_TIMEOUT_S = 5.0
MAX_DEVICES = 64
_DRIVER_RE = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+(?:\.\d+)+)")


def _default_run(argv: Sequence[str], timeout_s: float) -> str:
    return smi.run(argv, timeout_s) if argv and argv[0] == "nvidia-smi" else run_cmd(argv, timeout_s)


def _no_torch() -> Any:
    raise RuntimeError("torch was not consulted (no loader given)")


def usable_gpu_count(load_torch: Callable[[], Any]) -> int:
    """GPUs that torch can use in this process (CUDA_VISIBLE_DEVICES applied); 0 without a usable CUDA torch."""
    try:
        torch = load_torch()
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no usable CUDA is simply zero GPUs
        return 0


def device_memory_bytes(load_torch: Callable[[], Any]) -> Optional[int]:
    """The smallest total memory of the GPUs torch can use (a rank per GPU), None without GPUs."""
    try:
        torch = load_torch()
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return min(int(torch.cuda.get_device_properties(i).total_memory) for i in range(n)) if n else None
    except Exception:  # noqa: BLE001 - no usable CUDA: the host-memory bound applies instead
        return None


def nccl_version_str(v: Any) -> Optional[str]:
    """torch.cuda.nccl.version(): a tuple (2, 21, 5) in torch 2.x, an int code (22105 / 2708) in older releases."""
    if isinstance(v, (tuple, list)) and v:
        return ".".join(str(int(x)) for x in v)
    if isinstance(v, int) and v > 0:
        # NCCL_VERSION_CODE: major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before
        if v >= 20900:
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
        return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
    return None


def driver_from_procfs() -> Optional[str]:
    m = _DRIVER_RE.search(read_text(procfs("driver", "nvidia", "version")) or "")
    return m.group(1) if m else None


def _smi_devices(run: Runner) -> list:
    out = run(list(smi.DEVICES), SMI_TIMEOUT_S)
    devices = []
    for line in out.splitlines()[:MAX_DEVICES]:
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 5 or not is_decimal(cols[0]) or len(cols[0]) > 4:
            continue
        # A name may hold commas (nvidia-smi does not quote it): the index leads, memory, UUID and bus id close
        name = ", ".join(cols[1:-3])[:96]
        mem_mib = cols[-3]
        mem = int(mem_mib) << 20 if is_decimal(mem_mib) and len(mem_mib) <= 12 else None  # MiB; "inf", junk: unknown
        devices.append({"index": int(cols[0]), "name": name, "memory_bytes": mem, "uuid": cols[-2][:96],
                        "pci_bus_id": cols[-1][:32]})
    return devices


def _select_visible(devices: list, visible: Optional[str]) -> list:
    """nvidia-smi ignores CUDA_VISIBLE_DEVICES; apply it (indices or GPU-uuid prefixes) and renumber like CUDA does."""
    if visible is None:
        return devices
    chosen = []
    for tok in (t.strip() for t in visible.split(",")):
        if not tok:
            break
        if is_decimal(tok):
            match = [d for d in devices if d["index"] == int(tok)]
        else:
            match = [d for d in devices if d["uuid"] and d["uuid"].startswith(tok)]
        if not match:
            break  # CUDA stops at the first invalid entry
        chosen.append(match[0])
    return [dict(d, index=i) for i, d in enumerate(chosen)]


def _has_driver(which: Callable[[str], Optional[str]]) -> bool:
    return os.path.exists(procfs("driver", "nvidia", "version")) or which("nvidia-smi") is not None


def _from_torch(facts: dict, load_torch: Callable[[], Any], reasons: list) -> Any:
    """CUDA and NCCL versions as torch sees them, and torch's GPU count; the torch module, or None if unusable.

    torch.cuda.device_count() asks NVML first and does not initialise CUDA in this process, so workers forked later
    can still use CUDA; get_device_properties() would, so it is only a fallback when nvidia-smi is absent."""
    try:
        torch = load_torch()
        facts["cuda"] = getattr(torch.version, "cuda", None)
        if facts["cuda"] is None:
            reasons.append("torch is a CPU build (torch.version.cuda is None)")
        try:
            facts["nccl"] = nccl_version_str(torch.cuda.nccl.version())
        except Exception as e:
            reasons.append(f"torch.cuda.nccl.version() failed: {e}")
        if torch.cuda.is_available():
            facts["count"] = int(torch.cuda.device_count())
            facts["source"] = "torch"
        elif facts["cuda"] is not None:
            reasons.append("torch.cuda.is_available() is False")
        return torch
    except Exception as e:
        reasons.append(f"torch unusable: {e}")
        return None


def _torch_devices(torch: Any, count: int) -> list:
    devs = []
    for i in range(count):
        p = torch.cuda.get_device_properties(i)
        bus = getattr(p, "pci_bus_id", None)
        pci = (f"{getattr(p, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"
               if isinstance(bus, int) else None)
        devs.append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory),
                     "uuid": str(p.uuid) if getattr(p, "uuid", None) is not None else None, "pci_bus_id": pci})
    return devs


# Terminal escapes (nvidia-smi topo -m underlines its header even when not on a terminal: seen with driver 580).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _smi_text(run: Runner, argv: list, what: str, reasons: list) -> Optional[str]:
    try:
        return _ANSI.sub("", run(argv, SMI_TIMEOUT_S))
    except Exception as e:
        reasons.append(f"{what}: {e}")
        return None


def collect(run: Optional[Runner] = None, which: Optional[Callable[[str], Optional[str]]] = None,
            load_torch: Optional[Callable[[], Any]] = None) -> dict:
    """GPU facts; each part that fails leaves its fields null and says why in `reason`."""
    run = run or _default_run
    which = which or shutil.which
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    facts: dict = {"count": 0, "source": "none", "reason": None, "devices": [], "visible_devices": visible,
                   "driver": None, "cuda": None, "nccl": None, "topology": None}
    if not _has_driver(which):
        facts["reason"] = "no NVIDIA driver"
        return facts
    reasons: list = []
    have_smi = which("nvidia-smi") is not None
    smi_devices = None
    # topo -m is asked beside the device list: each nvidia-smi call costs 0.1-1 s (persistence mode off: the slow end)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ncclcheck-topo")
    topo_reasons: list = []
    topo = pool.submit(_smi_text, run, list(smi.TOPOLOGY), "nvidia-smi topo -m failed", topo_reasons) \
        if have_smi else None
    pool.shutdown(wait=False)
    if have_smi:
        try:
            smi_devices = _select_visible(_smi_devices(run), visible)
        except Exception as e:
            reasons.append(f"nvidia-smi query failed: {e}")
    torch = _from_torch(facts, load_torch or _no_torch, reasons)
    if smi_devices is not None:
        facts["devices"] = smi_devices
        if facts["source"] == "none":
            facts["count"], facts["source"] = len(smi_devices), "nvidia-smi"
    elif facts["source"] == "torch":
        try:
            facts["devices"] = _torch_devices(torch, facts["count"])
        except Exception as e:
            reasons.append(f"device properties unavailable: {e}")
    facts["driver"] = driver_from_procfs()
    if facts["driver"] is None and have_smi:
        lines = _smi_text(run, ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          "driver version unavailable", reasons) or ""
        facts["driver"] = next((s.strip() for s in lines.splitlines() if s.strip()), None)
    if topo is not None:
        facts["topology"] = (topo.result() or "").strip() or None
        reasons += topo_reasons
    facts["reason"] = "; ".join(reasons) or None
    if reasons:
        log.info("gpu facts degraded: %s", facts["reason"])
    return facts
