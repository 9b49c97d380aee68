"""The facts layer: the only code that reads hardware, sysfs, procfs and the resolver. One JSON-able dict per node."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, Callable, Optional

from ..clean import clean_doc
from .util import hostname  # written in util, below every collector (facts/links.py asks it too)

log = logging.getLogger(__name__)

__all__ = ["collect_node_facts", "collect_health_facts", "GROUPS", "hostname", "hostname_of"]

GROUPS = ("host", "interfaces", "route", "rdma", "gdr", "pci", "gpu", "gpu_health", "versions", "packages", "code",
          "paths", "storage", "env", "counters", "sources")


# What each group reads, in the words of a group that did not finish within the collection's bound.
READS = {"counters": "the error counters (sysfs, NVML)", "host": "the host (resolver, /dev/shm, limits)",
         "interfaces": "the network interfaces (sysfs)", "route": "the route to the master (resolver)",
         "rdma": "the RDMA devices (sysfs)", "gdr": "GPUDirect RDMA (sysfs, modules)", "pci": "the PCI tree (sysfs)",
         "gpu": "the GPUs (nvidia-smi, torch)", "gpu_health": "the GPUs' health (NVML, nvidia-smi, kernel log)",
         "versions": "the versions (nvidia-smi, packages)", "packages": "the installed packages",
         "code": "the code (git)", "paths": "the --path paths", "storage": "the --shared-dir paths",
         "env": "the environment"}


def _safe(group: str, fn: Callable[[], Any], bounded: bool = False) -> Any:
    """A collector's result, or {"unavailable": reason}: one broken group must never cost the others. bounded: the
    collector runs under the collection's bound (util.call_bounded): one whose read blocks (a firmware or driver in
    trouble) is left behind and named, and the collection goes on."""
    from .util import GROUP_GRACE_S, Unanswered, call_bounded, current

    try:
        if bounded and current().deadline is not None:
            c = current()
            return call_bounded(READS.get(group, group), fn, c.bound_s or 0, grace_s=GROUP_GRACE_S)
        return fn()
    except Unanswered as e:
        return {"unavailable": str(e)}
    except Exception as e:
        log.warning("facts group %r unavailable", group, exc_info=True)
        return {"unavailable": f"{type(e).__name__}: {e}"}


def collect_node_facts(code_path: Optional[str] = None, paths: Iterable[str] = (),
                       master_addr: Optional[str] = None, tool_version: Optional[str] = None,
                       load_torch: Optional[Callable[[], Any]] = None, shared_dirs: Iterable[str] = (),
                       need_bytes: Optional[int] = None, counter_window_s: float = 0.0,
                       xid_window_s: Optional[float] = None, bound_s: Optional[float] = None) -> dict:
    """Every group of docs/facts.md for this node. Never raises; cheap on a CPU node (torch is not imported).
    counter_window_s: every error counter (the fabric's and the GPUs': facts/counters.py) is read at the start and
    again at the end, at least this far apart: one window per run (the caller's FIXED.counter_window_s: the facts
    layer sets no bound of its own). bound_s: the whole collection's bound (the caller's Budget.facts_s): every
    group, tool and blocking read runs under it (util.collection) and one that does not answer is named in the
    group's `unavailable` and in `sources`, never waited on."""
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
    from .util import collection

    facts: dict = {}
    with collection(bound_s) as c:
        def safe(group: str, fn: Callable[[], Any]) -> Any:
            return _safe(group, fn, bounded=True)

        safe("smi", smi.prefetch)  # every nvidia-smi question at once (facts/smi.py)
        first = safe("counters", counters.snapshot)  # every counter, read again when the rest is read
        facts["host"] = safe("host", host.collect)
        facts["interfaces"] = safe("interfaces", net.read_interfaces)
        facts["route"] = safe("route", lambda: net.route_to(master_addr)) if master_addr else None
        facts["rdma"] = safe("rdma", rdma.collect)
        facts["gdr"] = safe("gdr", gdr.collect)
        facts["pci"] = safe("pci", pcitree.collect)
        facts["gpu"] = safe("gpu", lambda: gpu.collect(load_torch=load_torch))
        facts["gpu_health"] = safe("gpu_health", lambda: gpuhealth.collect(xid_window_s=xid_window_s))
        facts["versions"] = safe("versions", lambda: versions.collect(facts["gpu"], tool_version))
        facts["packages"] = safe("packages", packages.collect)
        facts["code"] = safe("code", lambda: code.collect(code_path))
        facts["paths"] = safe("paths", lambda: paths_mod.collect(list(paths)))
        facts["storage"] = safe("storage", lambda: storage.collect(list(shared_dirs), need_bytes))
        facts["env"] = safe("env", envvars.collect)
        facts["counters"] = safe("counters", lambda: counters.window(first, counter_window_s))
        smi.clear()
        facts["sources"] = c.said()
    facts["collected_at"] = time.time()
    return clean_doc(facts)  # a GPU process's name (any user sets it), a tool's or a sysfs string: cleaned here


def collect_health_facts(on_group: Optional[Callable[[str], None]] = None, counter_window_s: float = 0.0,
                         xid_window_s: Optional[float] = None, bound_s: Optional[float] = None) -> dict:
    """The groups `ncclcheck health` reads, for Slurm's HealthCheckProgram and Prolog: no resolver (a slow DNS must
    not eat Slurm's 60 s), no torch (GPUs from nvidia-smi only). Versions and packages are read on every run (about
    20 ms), so that a saved health run is a whole baseline for the next one, not a partial one.
    `on_group(name)` is called before each group, so a caller bounding the whole can name the group that hung.
    counter_window_s: as collect_node_facts's; bound_s: its tools and blocking reads run under it (the caller bounds
    the whole and names the group that hung)."""
    from .util import collection

    with collection(bound_s) as c:
        facts = _health_facts(on_group or (lambda _name: None), counter_window_s, xid_window_s)
        facts["sources"] = c.said()
    return clean_doc(facts)  # local text is cleaned where it enters, as every other node's is


def _health_facts(step: Callable[[str], None], counter_window_s: float, xid_window_s: Optional[float]) -> dict:
    from . import counters, envvars, gdr, gpu, gpuhealth, host, net, packages, pcitree, rdma, smi, versions

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


