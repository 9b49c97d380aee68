"""The one check registry and the one runner: every check id a report can hold, with the commands that report it
(preflight, bench, links) and where it is made: run here on facts (local: one node's facts; cross: every node's
facts and the mesh probe; with the fact groups it reads and its function) or made by a step of a command's pipeline
(step: the module named). docs/troubleshooting.md has a row per id, and a test holds the two together.

Order is dependency order: the first failure is the root cause a user should fix first (the master is unreachable
before anything about interfaces matters). A check that raises is a bug in that check: it becomes a skip naming the
bug, and never hides the others. A check whose fact groups were not collected at all (not merely "unavailable",
which checks explain themselves) is skipped here, so no check runs on data that is not there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..commands import BY_NAME
from ..model import CheckResult, skipped
from . import affinity, counters, cross, firmware, gdr, imex, local, postmortem, sources, storage
from . import gpu as hw

log = logging.getLogger(__name__)

LOCAL, CROSS, STEP, POSTMORTEM = "local", "cross", "step", "postmortem"
# The commands a check id may belong to: names of the commands table's rows (commands.py; KeyError on a typo).
PREFLIGHT, BENCH, LINKS, HEALTH, SWEEP, DIAGNOSE, WATCH = (BY_NAME[n].name for n in (
    "preflight", "bench", "links", "health", "sweep", "diagnose", "watch"))
JOBS = (BENCH, LINKS)
NODE = (PREFLIGHT, HEALTH)  # node-local checks `health` runs too (a Slurm HealthCheckProgram or Prolog)


@dataclass(frozen=True)
class CheckSpec:
    id: str
    scope: str  # LOCAL | CROSS | POSTMORTEM (a failed job's remains: postmortem.PostmortemInput): run by run_checks
    # below; STEP: made by the pipeline step in `made_by`
    needs: tuple  # fact groups (docs/facts.md) the check reads; () = none beyond the run's own data
    fn: Optional[Callable[[Any], Any]]  # LocalInput | CrossInput -> CheckResult | [CheckResult]; None for STEP
    commands: tuple = (PREFLIGHT,)  # the commands whose reports hold it (recommend runs preflight's)
    made_by: str = ""  # STEP: the module that makes it
    # judges the node's hardware (GPUs, their links, the RDMA fabric): its findings name a device and an action
    # (checks/hwaction.py); docs/hardware.md's table has a row for it
    hardware: bool = False


REGISTRY: tuple = (
    CheckSpec("rendezvous.master_reachable", LOCAL, (), local.check_master_reachable),
    # a source of the facts that did not answer (a wedged driver) explains every check that needed it
    CheckSpec(sources.CID, LOCAL, ("sources",), sources.check_sources, NODE),
    CheckSpec("host.hostname_resolves", LOCAL, ("host",), local.check_hostname_resolves),
    CheckSpec("net.socket_ifname", LOCAL, ("interfaces", "env"), local.check_socket_ifname, NODE),
    CheckSpec("net.interfaces", LOCAL, ("interfaces",), local.check_interfaces),
    CheckSpec("ib.devices", LOCAL, ("rdma",), local.check_ib_devices),
    CheckSpec(gdr.CID, LOCAL, ("gdr", "rdma"), gdr.check_gdr, NODE, hardware=True),
    CheckSpec(affinity.CID, LOCAL, ("rdma", "pci"), affinity.check_affinity, NODE, hardware=True),
    CheckSpec(counters.CID, LOCAL, ("counters",), counters.check_counters, NODE, hardware=True),
    CheckSpec("gpu.count", LOCAL, ("gpu",), local.check_gpu_count),
    # The GPUs' hardware (checks/gpu.py), the driver first: a GPU off the bus or a driver that cannot drive it
    # explains everything after it
    CheckSpec(hw.NOUVEAU, LOCAL, ("gpu_health",), hw.check_nouveau, NODE, hardware=True),
    CheckSpec(hw.READABLE, LOCAL, ("gpu_health",), hw.check_readable, NODE, hardware=True),
    CheckSpec(hw.XID, LOCAL, ("gpu_health",), hw.check_xid, NODE, hardware=True),
    CheckSpec(hw.MEMORY, LOCAL, ("gpu_health",), hw.check_memory, NODE, hardware=True),
    CheckSpec(hw.PCIE, LOCAL, ("gpu_health",), hw.check_pcie, NODE, hardware=True),
    CheckSpec(hw.NVLINK, LOCAL, ("gpu_health",), hw.check_nvlink, NODE, hardware=True),
    CheckSpec(hw.FABRIC, LOCAL, ("gpu_health",), hw.check_fabric, NODE, hardware=True),
    # the service a job spanning trays of a multi-node NVLink domain needs beside a trained fabric
    CheckSpec(imex.CID, LOCAL, ("gpu_health", "env"), imex.check_imex, NODE),
    CheckSpec(hw.MIG, LOCAL, ("gpu_health",), hw.check_mig, NODE, hardware=True),
    CheckSpec(hw.CLOCKS, LOCAL, ("gpu_health",), hw.check_clocks, NODE, hardware=True),
    CheckSpec(hw.PERSISTENCE, LOCAL, ("gpu_health",), hw.check_persistence, NODE, hardware=True),
    CheckSpec(hw.PROCESSES, LOCAL, ("gpu_health",), hw.check_processes, NODE, hardware=True),
    CheckSpec(hw.VBIOS, LOCAL, ("gpu_health",), hw.check_vbios, NODE, hardware=True),
    CheckSpec("host.shm", LOCAL, ("host",), local.check_shm, NODE),
    CheckSpec("host.memlock", LOCAL, ("host",), local.check_memlock, NODE),
    CheckSpec("host.nofile", LOCAL, (), local.check_nofile),
    CheckSpec("env.nccl", LOCAL, ("env",), local.check_env_nccl, NODE),
    CheckSpec("env.cuda", LOCAL, ("env",), local.check_env_cuda, NODE),
    CheckSpec("paths.exist", LOCAL, ("paths",), local.check_paths_exist),
    CheckSpec("versions.consistent", CROSS, ("versions",), cross.check_versions),
    CheckSpec("packages.consistent", CROSS, ("packages",), cross.check_packages),
    CheckSpec("code.consistent", CROSS, ("code",), cross.check_code),
    CheckSpec("paths.consistent", CROSS, ("paths",), cross.check_paths),
    CheckSpec(storage.WRITABLE, CROSS, ("storage",), storage.check_writable),
    CheckSpec(storage.SPACE, CROSS, ("storage",), storage.check_space),
    CheckSpec(storage.SHARED, CROSS, ("storage",), storage.check_shared),
    CheckSpec(storage.THROUGHPUT, CROSS, ("storage",), storage.check_throughput),
    CheckSpec("net.peer_reachability", CROSS, ("interfaces",), cross.check_peer_reachability),
    CheckSpec("net.mtu_consistent", CROSS, ("interfaces",), cross.check_mtu),
    CheckSpec("ib.devices", CROSS, ("rdma",), cross.check_ib),
    CheckSpec(gdr.CID, CROSS, ("gdr",), gdr.check_gdr_cross, hardware=True),
    CheckSpec(firmware.CID, CROSS, ("rdma",), firmware.check_firmware, hardware=True),
    CheckSpec("gpu.count", CROSS, ("gpu",), cross.check_gpu_count),
    CheckSpec(hw.VBIOS, CROSS, ("gpu_health",), cross.check_vbios, hardware=True),
    CheckSpec("env.nccl", CROSS, ("env",), cross.check_env),
    CheckSpec("time.clock_skew", CROSS, (), cross.check_clock_skew),
    # diagnose: the verdict first (the report's root cause), then the findings it was drawn from
    CheckSpec("postmortem.root_cause", POSTMORTEM, (), postmortem.check_root_cause, (DIAGNOSE, WATCH)),
    CheckSpec("postmortem.collectives", POSTMORTEM, (), postmortem.check_collectives, (DIAGNOSE, WATCH)),
    CheckSpec("postmortem.mismatch", POSTMORTEM, (), postmortem.check_mismatch, (DIAGNOSE, WATCH)),
    CheckSpec("postmortem.ranks", POSTMORTEM, (), postmortem.check_ranks, (DIAGNOSE, WATCH)),
    CheckSpec("postmortem.nccl_warnings", POSTMORTEM, (), postmortem.check_nccl_warnings, (DIAGNOSE, WATCH)),
    CheckSpec("postmortem.transport", POSTMORTEM, (), postmortem.check_transport, (DIAGNOSE, WATCH)),
    CheckSpec("postmortem.inputs", POSTMORTEM, (), postmortem.check_inputs, (DIAGNOSE, WATCH)),
    # Made by the steps of the commands' pipelines, from what they measured or read rather than from facts.
    CheckSpec("rendezvous.master_reachable", STEP, (), None, JOBS, "steps/world.py (the master probe of a job)"),
    CheckSpec("rendezvous.master_reachable", STEP, (), None, (WATCH,), "live/watch.py (the job's store)"),
    CheckSpec("live.answered", STEP, (), None, (WATCH,), "live/watch.py (every registered rank answered)"),
    CheckSpec("live.progress", STEP, (), None, (WATCH,), "live/watch.py (progress between two looks)"),
    CheckSpec("live.slow", STEP, (), None, (WATCH,), "live/watch.py, postmortem/slow.py (who slows a running job)"),
    CheckSpec("postmortem.slow", STEP, (), None, (DIAGNOSE,), "postmortem/diagnose.py, postmortem/slow.py (who "
              "slowed the job, from its dumps)"),
    CheckSpec("rendezvous.world", STEP, (), None, (PREFLIGHT,), "preflight/cluster.py, preflight/pipeline.py"),
    CheckSpec("nccl.ras", STEP, (), None, (PREFLIGHT,), "checks/nccl_ras.py (--nccl-ras)"),
    CheckSpec("nccl.transport", STEP, (), None, (PREFLIGHT, *JOBS),
              "steps/nccl_debug.py (--nccl-debug, --nccl-capture)"),
    CheckSpec("baseline.drift", STEP, (), None, (PREFLIGHT,), "checks/drift.py (--baseline)"),
    CheckSpec(counters.CID, STEP, (), None, NODE, "checks/counters.py (--baseline: since a saved run)", hardware=True),
    CheckSpec("gpu.host_copy", STEP, (), None, (PREFLIGHT,), "checks/gpu.py, steps/hostcopy.py (preflight --gpu)",
              hardware=True),
    CheckSpec("bench.world", STEP, (), None, (BENCH,), "bench/pipeline.py"),
    CheckSpec("bench.correctness", STEP, (), None, (BENCH,), "bench/gates.py"),
    CheckSpec("bench.min_busbw", STEP, (), None, (BENCH,), "bench/gates.py"),
    CheckSpec("bench.baseline", STEP, (), None, (BENCH,), "bench/gates.py"),
    CheckSpec("bench.efficiency", STEP, (), None, (BENCH,), "bench/efficiency.py"),
    CheckSpec("bench.min_efficiency", STEP, (), None, (BENCH,), "bench/efficiency.py (--min-efficiency)"),
    CheckSpec("bench.unsupported", STEP, (), None, (BENCH,), "bench/gates.py"),
    CheckSpec("bench.coverage", STEP, (), None, (BENCH,), "bench/coverage.py"),
    CheckSpec("bench.stragglers", STEP, (), None, (BENCH,), "bench/straggler.py"),
    CheckSpec("links.world", STEP, (), None, (LINKS, SWEEP), "links/outcome.py"),
    CheckSpec("links.slow", STEP, (), None, (LINKS, SWEEP), "links/analyze.py"),
    CheckSpec("links.dead", STEP, (), None, (LINKS, SWEEP), "links/analyze.py, links/job.py"),
    CheckSpec("links.pair_error", STEP, (), None, (LINKS, SWEEP), "links/analyze.py"),
    CheckSpec("links.incomplete", STEP, (), None, (LINKS, SWEEP), "links/analyze.py"),
    CheckSpec("links.min_gbps", STEP, (), None, (LINKS, SWEEP), "links/analyze.py"),
    CheckSpec("links.efficiency", STEP, (), None, (LINKS, SWEEP), "links/efficiency.py"),
    CheckSpec("links.min_efficiency", STEP, (), None, (LINKS, SWEEP), "links/efficiency.py (--min-efficiency)"),
    CheckSpec("links.baseline", STEP, (), None, (LINKS,), "links/baseline.py (--baseline)"),
    CheckSpec("health.gpus", STEP, (), None, (HEALTH,), "checks/health.py"),
    CheckSpec("health.nccl_interface", STEP, (), None, (HEALTH,), "checks/health.py"),
    CheckSpec("health.ib_ports", STEP, (), None, (HEALTH,), "checks/health.py"),
    CheckSpec("health.timeout", STEP, (), None, (HEALTH,), "health/run.py"),
    CheckSpec("sweep.unmeasured", STEP, (), None, (SWEEP,), "sweep/run.py"),
    CheckSpec("slurm.drain", STEP, (), None, (HEALTH, SWEEP), "health/run.py, sweep/run.py"),
)


def check_ids(command: Optional[str] = None) -> list:
    """Every registered check id (of one command's reports), in registry order, once each."""
    if command is not None:
        command = BY_NAME[command].checks_as or command
    ids = [s.id for s in REGISTRY if command is None or command in s.commands]
    return list(dict.fromkeys(ids))


def unregistered(command: str, ids: Iterable[str]) -> list:
    """The ids among `ids` that have no registry row for `command` (recommend reports preflight's)."""
    known = set(check_ids(command))
    return sorted({i for i in ids if i not in known})


def specs(scope: str, prefix: str = "", command: Optional[str] = None) -> list:
    return [s for s in REGISTRY if s.scope == scope and s.id.startswith(prefix)
            and (command is None or command in s.commands)]


def hardware_ids() -> list:
    """The check ids that judge the node's hardware (a finding names a device and an action): docs/hardware.md's
    table has a row for each."""
    return list(dict.fromkeys(s.id for s in REGISTRY if s.hardware))


def _missing(spec: CheckSpec, inp: Any) -> list:
    if spec.scope == LOCAL:
        return [g for g in spec.needs if g not in inp.facts]
    return [g for g in spec.needs if not any(g in (f or {}) for _, _, f in inp.nodes)]


def run_checks(scope: str, inp: Any, prefix: str = "", command: Optional[str] = None) -> list:
    """Every check of one scope (whose id starts with prefix; of one command's reports, if given) on one input (a
    LocalInput or a CrossInput), in registry order."""
    node = getattr(inp, "node_rank", None) if scope == LOCAL else None
    out: list[CheckResult] = []
    for spec in specs(scope, prefix, command):
        missing = _missing(spec, inp)
        if missing:
            out.append(skipped(spec.id, f"not collected: {', '.join(missing)}", node=node))
            continue
        out += guarded(spec.id, lambda spec=spec: spec.fn(inp), node)
    return out


def guarded(cid: str, fn: Callable[[], Any], node: Optional[int] = None) -> list:
    """fn()'s results as a list, or, when it raises, one skip of `cid` naming the error: the one per-check guard,
    so that one broken check (or one field it could not read) costs that check, never the run, the report or the
    drain."""
    try:
        res = fn()
    except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
        log.exception("check %s crashed", cid)
        res = skipped(cid, f"internal error in this check ({type(exc).__name__}: {str(exc)[:200]}); see the log",
                      node=node)
    return res if isinstance(res, list) else [res]


def baseline_results(nodes: Iterable, golden: Iterable, source: str) -> list:
    """baseline.drift and ib.counters since the saved run (--baseline), node by node, each under the per-check guard:
    a field of one node's facts that a reader cannot use costs that node's one check."""
    from .counters import baseline_checks
    from .drift import drift_checks

    golden = list(golden)
    out: list = []
    nodes = [n for n in nodes if n.facts]
    for node in nodes:
        out += guarded("baseline.drift", lambda node=node: drift_checks([node], golden, source), node.node_rank)
    if not nodes:  # no node with facts on this process: drift_checks says so once
        out += guarded("baseline.drift", lambda: drift_checks([], golden, source))
    for node in nodes:
        out += guarded(counters.CID, lambda node=node: baseline_checks([node], golden, source), node.node_rank)
    return out
