"""The facts layer: the only code that reads hardware, sysfs, procfs and the resolver. One JSON-able dict per node."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, Callable, Optional

from .util import hostname  # written in util, below every collector (facts/links.py asks it too)

log = logging.getLogger(__name__)

__all__ = ["collect_node_facts", "collect_health_facts", "GROUPS", "hostname", "hostname_of"]

GROUPS = ("host", "interfaces", "route", "rdma", "gdr", "pci", "gpu", "gpu_health", "versions", "packages", "code",
          "paths", "storage", "env", "counters")


def _safe(group: str, fn: Callable[[], Any]) -> Any:
    """A collector's result, or {"unavailable": reason}: one broken group must never cost the others."""
    try:
        return fn()
    except Exception as e:
        log.warning("facts group %r unavailable", group, exc_info=True)
        return {"unavailable": f"{type(e).__name__}: {e}"}


def collect_node_facts(code_path: Optional[str] = None, paths: Iterable[str] = (),
                       master_addr: Optional[str] = None, tool_version: Optional[str] = None,
                       load_torch: Optional[Callable[[], Any]] = None, shared_dirs: Iterable[str] = (),
                       need_bytes: Optional[int] = None, counter_window_s: float = 0.0,
                       xid_window_s: Optional[float] = None) -> dict:
    """Every group of docs/facts.md for this node. Never raises; cheap on a CPU node (torch is not imported).
    counter_window_s: every error counter (the fabric's and the GPUs': facts/counters.py) is read at the start and
    again at the end, at least this far apart: one window per run (the caller's FIXED.counter_window_s: the facts
    layer sets no bound of its own)."""
    from . import (
        code,
        counters,
        envvars,
        gdr,
        gpu,
        gpuhealth,
        host,
        net,
        packages,
        pcitree,
        rdma,
        smi,
        storage,
        versions,
    )
    from . import paths as paths_mod

    facts: dict = {}
    _safe("smi", smi.prefetch)  # every nvidia-smi question at once (facts/smi.py)
    first = _safe("counters", counters.snapshot)  # every counter, read again when the rest is read
    facts["host"] = _safe("host", host.collect)
    facts["interfaces"] = _safe("interfaces", net.read_interfaces)
    facts["route"] = _safe("route", lambda: net.route_to(master_addr)) if master_addr else None
    facts["rdma"] = _safe("rdma", rdma.collect)
    facts["gdr"] = _safe("gdr", gdr.collect)
    facts["pci"] = _safe("pci", pcitree.collect)
    facts["gpu"] = _safe("gpu", lambda: gpu.collect(load_torch=load_torch))
    facts["gpu_health"] = _safe("gpu_health", lambda: gpuhealth.collect(xid_window_s=xid_window_s))
    facts["versions"] = _safe("versions", lambda: versions.collect(facts["gpu"], tool_version))
    facts["packages"] = _safe("packages", packages.collect)
    facts["code"] = _safe("code", lambda: code.collect(code_path))
    facts["paths"] = _safe("paths", lambda: paths_mod.collect(list(paths)))
    facts["storage"] = _safe("storage", lambda: storage.collect(list(shared_dirs), need_bytes))
    facts["env"] = _safe("env", envvars.collect)
    facts["counters"] = _safe("counters", lambda: counters.window(first, counter_window_s))
    smi.clear()
    facts["collected_at"] = time.time()
    return facts


def collect_health_facts(on_group: Optional[Callable[[str], None]] = None, counter_window_s: float = 0.0,
                         xid_window_s: Optional[float] = None) -> dict:
    """The groups `ncclcheck health` reads, for Slurm's HealthCheckProgram and Prolog: no resolver (a slow DNS must
    not eat Slurm's 60 s), no torch (GPUs from nvidia-smi only). Versions and packages are read on every run (about
    20 ms), so that a saved health run is a whole baseline for the next one, not a partial one.
    `on_group(name)` is called before each group, so a caller bounding the whole can name the group that hung.
    counter_window_s: as collect_node_facts's."""
    from . import counters, envvars, gdr, gpu, gpuhealth, host, net, packages, pcitree, rdma, smi, versions

    step = on_group or (lambda _name: None)
    facts: dict = {}
    step("smi")
    _safe("smi", smi.prefetch)  # every nvidia-smi question at once (facts/smi.py)
    step("counters")
    first = _safe("counters", counters.snapshot)  # every counter, read again when the rest is read
    step("host")
    facts["host"] = _safe("host", host.collect_local)
    step("interfaces")
    facts["interfaces"] = _safe("interfaces", net.read_interfaces)
    step("rdma")
    facts["rdma"] = _safe("rdma", rdma.collect)
    step("gdr")
    facts["gdr"] = _safe("gdr", gdr.collect)
    step("pci")
    facts["pci"] = _safe("pci", pcitree.collect)
    step("gpu")
    facts["gpu"] = _safe("gpu", gpu.collect)
    step("gpu_health")
    facts["gpu_health"] = _safe("gpu_health", lambda: gpuhealth.collect(xid_window_s=xid_window_s))
    step("env")
    facts["env"] = _safe("env", envvars.collect)
    step("versions")
    # Without torch the CUDA and NCCL versions torch was built with are unknown, not none: left out, so that a
    # baseline's comparison skips them (checks/drift.py) instead of reading "cuda version 12.4 -> (none)".
    facts["versions"] = _safe("versions", lambda: {k: v for k, v in versions.collect(facts["gpu"]).items()
                                                   if k not in versions.TORCH_ONLY})
    step("packages")
    facts["packages"] = _safe("packages", packages.collect)
    step("counters")
    facts["counters"] = _safe("counters", lambda: counters.window(first, counter_window_s))
    smi.clear()
    facts["collected_at"] = time.time()
    return facts


def hostname_of(facts: Optional[dict]) -> str:
    """A node's hostname from its facts, or this machine's when the facts lack it (a non-leader rank)."""
    return ((facts or {}).get("host") or {}).get("hostname") or hostname()


