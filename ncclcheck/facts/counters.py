"""Every cumulative error counter of the node, read twice inside one run: one window per run, whatever reads it.

What is read: every RDMA port's counters (rdma.counter_snapshot), every physical netdev's carrier changes
(net.carrier_snapshot), and every NVIDIA GPU's PCIe AER totals (sysfs), PCIe replays and NVLink CRC / replay /
recovery errors (NVML: per GPU the sum over its up links, per link kept aside to name the link that moved). The first
read is taken when a command starts reading facts and the last when it is done, at least FIXED.counter_window_s
apart (the caller's bound: the facts layer sets none); the checks (checks/counters.py for the fabric, checks/gpu.py
for the GPUs) judge what changed between them and, with --baseline, since a saved run's last read of the same boot.
A counter's lifetime value says nothing about now (a link that flapped last month keeps its link_downed forever).

The one rule for a difference is `deltas` (and `resets`): a counter that went down between two reads was reset in
between (a driver reload, a port or GPU reset), so its change is unknown and it is left out, never read as negative
or as its whole new value.
"""

from __future__ import annotations

import contextvars
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from . import host, links, net, rdma, smi, smilink
from . import nvml as nv_
from .pcitree import nvidia_bound_gpu_bus_ids, nvidia_gpu_bus_ids
from .roots import sysfs

SMI_TIMEOUT_S = 5.0

MAX_GPUS = 64
GPU_COUNTERS = ("pcie.replay", "pcie.aer_correctable", "pcie.aer_nonfatal", "pcie.aer_fatal",
                *(f"nvlink.{k}" for k, _ in links.NVLINK_COUNTERS))
# kept in this process only: a monotonic clock, the NVML session, per-link values, the injected runner
_PRIVATE = ("mono", "nvml", "nvlinks", "run", "pending")


def _gpu_counters(nv: Any, run: Optional[Callable] = None, pending: Optional[list] = None) -> tuple:
    """({bus: {counter: total}}, {bus: {nvlink counter: {link: value}}}) now: AER for every GPU on the PCI bus (from
    sysfs, no driver call) and, through an open NVML session, each GPU's replay counter and its up links' errors."""
    totals: dict = {}
    per_link: dict = {}
    for bus in nvidia_gpu_bus_ids()[:MAX_GPUS]:
        aer = links.read_aer(sysfs("bus", "pci", "devices", bus)) or {}
        vals = {f"pcie.aer_{k}": aer.get(k) for k in ("correctable", "nonfatal", "fatal")}
        if any(v is not None for v in vals.values()):
            totals[bus] = vals
    if nv is None:
        if pending is not None and (run is not None or _smi_asked()):  # in the background: window() merges it
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ncclcheck-counters")
            pending.append(pool.submit(contextvars.copy_context().run, _smi_nvlink_read, run))
            pool.shutdown(wait=False)  # its thread ends with the read
        else:
            _merge_nvlink(totals, per_link, _smi_nvlink_read(run))
        return _known(totals), per_link
    try:
        count = min(int(nv.nvmlDeviceGetCount()), MAX_GPUS)
    except Exception:  # noqa: BLE001 - gpu_health says why NVML failed; the counters are just not read
        count = 0
    for i in range(count):
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            bus = nv_.bus_id(nv.nvmlDeviceGetPciInfo(h).busId)
        except Exception:  # noqa: BLE001,S112 - a GPU the driver lost: gpu_health names it
            continue
        if bus is None:
            continue
        t = totals.setdefault(bus, {})
        replay, _why = nv_.ask(nv, "nvmlDeviceGetPcieReplayCounter", h)
        t["pcie.replay"] = replay if isinstance(replay, int) else None
        for link in _up_links(nv, h):
            for k, v in links.nvlink_errors(nv, h, link).items():
                per_link.setdefault(bus, {}).setdefault(f"nvlink.{k}", {})[str(link)] = v
        for name, by_link in per_link.get(bus, {}).items():
            vals = [v for v in by_link.values() if isinstance(v, int)]
            t[name] = sum(vals) if vals else None
    return _known(totals), per_link


def _smi_asked() -> bool:
    """Whether nvidia-smi has GPUs to ask about here: installed, and a GPU on the bus (a CPU node asks nothing)."""
    return bool(nvidia_gpu_bus_ids()) and shutil.which("nvidia-smi") is not None


def _smi_nvlink_read(run: Optional[Callable] = None) -> dict:
    """Without NVML, each GPU's NVLink error counters from `nvidia-smi nvlink -e` (facts/smilink.py), by bus id:
    {bus: {link: counters}}. nvidia-smi numbers GPUs as NVML does: in PCI bus order among the GPUs the nvidia driver
    holds."""
    if run is None and shutil.which("nvidia-smi") is None:
        return {}
    bound = nvidia_bound_gpu_bus_ids()[:MAX_GPUS]
    if not bound:
        return {}
    got = smilink.read_errors(run or smi.run, SMI_TIMEOUT_S)
    return {bound[i]: by_link for i, by_link in (got.get("links") or {}).items()
            if isinstance(i, int) and 0 <= i < len(bound)}


def _merge_nvlink(totals: dict, per_link: dict, read: dict) -> None:
    """nvidia-smi's per-link counters into a read's totals and per-link values. Drivers before Blackwell print one
    CRC count (flit and data together): it is kept as crc_flit, so the CRC rule counts it once; Blackwell's failed
    recoveries are its recovery errors."""
    for bus, by_link in read.items():
        for link, c in by_link.items():
            vals = {"crc_flit": c.get("crc_flit") if c.get("crc_flit") is not None else c.get("crc"),
                    "crc_data": c.get("crc_data"), "replay": c.get("replay"),
                    "recovery": c.get("recovery") if c.get("recovery") is not None else c.get("recovery_failed")}
            for k, v in vals.items():
                if isinstance(v, int):
                    per_link.setdefault(bus, {}).setdefault(f"nvlink.{k}", {})[str(link)] = v
        t = totals.setdefault(bus, {})
        for name, vals_by_link in per_link.get(bus, {}).items():
            t[name] = sum(vals_by_link.values())


def _up_links(nv: Any, h: Any) -> list:
    """The links NVML reports up (a down one is gpu.nvlink's finding; its counters do not move)."""
    return [link for link in range(min(links.link_count(nv, h) or 0, links.MAX_ITEMS)) if links.link_up(nv, h, link)]


def _known(totals: dict) -> dict:
    """Only the values read (a healthy node's facts stay small: no None per counter and GPU)."""
    return {bus: {k: v for k, v in c.items() if v is not None} for bus, c in totals.items()
            if any(v is not None for v in c.values())}


def snapshot(clock: Callable[[], float] = time.monotonic, nvml: Any = None, run: Optional[Callable] = None) -> dict:
    """One read of every counter: {"at" (epoch s), "ports", "netdevs", "gpus"} and, for this process only, "mono"
    (monotonic s, for this run's window), "nvml" (the NVML session the last read reuses) and "nvlinks" (per link).
    `nvml` and `run` are for tests (a fake binding, nvidia-smi's answers); by default the bindings are imported if
    installed, else nvidia-smi is asked."""
    nv = None
    if nvidia_gpu_bus_ids() or nvml is not None:  # no GPU on the bus: no NVML to load (a CPU node pays nothing)
        nv, _why = nv_.load(nvml)
    # nvidia-smi's first answer (0.1-1 s) is awaited by window(): the collection goes on meanwhile
    return _read(clock, nv, run, pending=[])


def _read(clock: Callable[[], float], nv: Any, run: Optional[Callable] = None,
          pending: Optional[list] = None) -> dict:
    gpus, per_link = _gpu_counters(nv, run, pending)
    return {"at": time.time(), "mono": clock(), "ports": rdma.counter_snapshot(), "netdevs": net.carrier_snapshot(),
            "gpus": gpus, "nvml": nv, "nvlinks": per_link, "run": run, "pending": pending or []}


def _settle(snap: dict) -> None:
    """Merge the background nvidia-smi read of a snapshot into it (nothing where it failed or outlived its bound)."""
    for fut in snap.pop("pending", None) or []:
        try:
            read = fut.result(timeout=SMI_TIMEOUT_S)
        except Exception:  # noqa: BLE001,S112 - gpu_health says why nvidia-smi failed; the counters are not read
            continue
        gpus = snap.setdefault("gpus", {})
        _merge_nvlink(gpus, snap.setdefault("nvlinks", {}), read)


def window(first: Optional[dict], min_s: float = 0.0, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> dict:
    """The `counters` fact group: {"boot_id", "interval_s", "first", "last", "gpu_links"} with the last read taken
    now, after waiting out what is left of min_s (the caller's FIXED.counter_window_s) since the first, through the
    first read's NVML session (then closed). No GPU or RDMA counter, no wait. A first read that failed
    ({"unavailable"} or None) leaves only this read: {"first": None} (nothing judged in-run). gpu_links: {bus:
    {nvlink counter: {link: increase}}}, only the links that moved (a quiet node: {})."""
    ok = isinstance(first, dict) and "unavailable" not in first and "mono" in first
    if ok:
        _settle(first)
    nv = first.get("nvml") if ok else None
    try:
        # A node with no GPU and no RDMA port waits for nothing: its carrier counts are judged over the run itself
        if ok and (first.get("ports") or first.get("gpus")):
            left = min_s - (clock() - first["mono"])
            if left > 0:
                sleep(min(left, min_s))
        last = _read(clock, nv, first.get("run") if ok else None)
    finally:
        if nv is not None:
            nv_.close(nv)
    interval = last["mono"] - first["mono"] if ok else None
    moved = {bus: d for bus, kinds in last["nvlinks"].items()
             if (d := deltas((first.get("nvlinks") or {}).get(bus) or {}, kinds))} if ok else {}
    return {"boot_id": host.boot_id(), "interval_s": round(interval, 3) if interval is not None else None,
            "first": _public(first) if ok else None, "last": _public(last), "gpu_links": moved}


def _public(snap: dict) -> dict:
    """A read as the report keeps it: a monotonic clock, a session and per-link values mean nothing outside this
    process (and per-link values of every link would make a node's facts ten times larger)."""
    return {k: v for k, v in snap.items() if k not in _PRIVATE}


def deltas(before: dict, after: dict) -> dict:
    """{device: {counter: increase}} for every counter read both times that increased (a quiet node: {}): the one
    rule for what changed between two reads of {device: {counter: value}}."""
    out: dict = {}
    for dev, now in (after or {}).items():
        then = (before or {}).get(dev) if isinstance(before, dict) else None
        if not isinstance(now, dict) or not isinstance(then, dict):
            continue
        for name, v in now.items():
            b = then.get(name)
            if _count(v) and _count(b) and v > b:
                out.setdefault(dev, {})[name] = v - b
    return out


def resets(before: dict, after: dict) -> list:
    """[(device, counter)] of the counters that went down between the reads (reset in between)."""
    out = []
    for dev, now in (after or {}).items():
        then = (before or {}).get(dev) if isinstance(before, dict) else None
        if isinstance(now, dict) and isinstance(then, dict):
            out += [(dev, name) for name, v in now.items() if _count(v) and _count(then.get(name)) and v < then[name]]
    return out


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


__all__ = ["GPU_COUNTERS", "deltas", "resets", "snapshot", "window"]
