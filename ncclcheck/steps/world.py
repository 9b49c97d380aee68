"""The world a command runs in, as every pipeline sees it: this process's placement (agent.launchers), the world
values derived from it, this node's facts, the bounded master probe, the refusals before any rank starts, and the
run's side directory beside its log."""

from __future__ import annotations

import datetime as _dt
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ..config import Config, WorldConfig, format_endpoint
from ..errors import UsageError, WorldError
from ..model import Report, WorldInfo, failed
from ..version import __version__


@dataclass(frozen=True)
class Clock:
    """When a command started: the report's `started` (wall clock, ISO) and its duration (monotonic)."""

    t0: float = field(default_factory=time.monotonic)
    started: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(
        timespec="seconds"))

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def placement(config: Config, given: Any = None):
    """This process's place in the job (agent.launchers: the launcher's world reconciled with the flags), read once
    per process: the CLI passes the one it read (`given`); the Python API reads it here."""
    if given is not None:
        return given
    from ..agent.launchers import detect_placement

    return detect_placement(os.environ, config.world)


def budget(config: Config):
    """The run's time bounds, built once where a command starts and passed down (rendezvous/budget.py)."""
    from ..rendezvous.budget import Budget

    return Budget.of(config)


def world_of(config: Config, placement) -> WorldConfig:
    """The world as agent.launchers decided it (the launcher's variables, the flags, the defaults: one rule), with
    the flags' backend and timeout."""
    w = config.world
    nproc = placement.local_world_size if placement.worker_mode else (w.nproc_per_node or
                                                                        placement.local_world_size or None)
    return WorldConfig(nnodes=placement.nnodes, node_rank=placement.node_rank, nproc_per_node=nproc or None,
                       master_addr=placement.master_addr, master_port=placement.master_port, backend=w.backend,
                       timeout_s=w.timeout_s, token=w.token, origin=w.origin)


def collect(config: Config, master_addr: Optional[str] = None, budget=None) -> dict:
    """This node's facts (facts/), read once by the node's leader within the Budget's facts_s: a source that does
    not answer (a wedged driver, a read that blocks) is named in the facts, never waited on."""
    from ..agent.context import load_torch
    from ..facts import collect_node_facts
    from ..rendezvous.budget import FIXED, Budget

    budget = budget or Budget.of(config)
    return collect_node_facts(load_torch=load_torch, code_path=config.code_path, paths=config.paths,
                              master_addr=master_addr or config.world.master_addr, tool_version=__version__,
                              shared_dirs=config.storage.dirs, need_bytes=config.storage.need_bytes,
                              counter_window_s=FIXED.counter_window_s, xid_window_s=config.hardware.xid_window_s,
                              bound_s=budget.facts_s)


def probe_master(world: WorldConfig, budget, hosts_store: Optional[bool] = None, waits=None) -> Optional[dict]:
    """Single-node view of the master: the process that will host the store tests the port is bindable; others
    connect (bounded by the budget's master-probe phase), saying on `waits` (rendezvous/waits.py) what they wait
    for while they retry. hosts_store None: node 0 hosts it (launcher mode)."""
    if world.master_addr is None:
        return None
    from ..preflight import probe

    if world.node_rank == 0 if hosts_store is None else hosts_store:
        return probe.bind_test(world.master_addr, world.master_port)
    return probe.probe_master_said(world.master_addr, world.master_port, budget.deadline(budget.master_probe_s),
                                   budget, waits).to_json()


def log_path() -> Optional[str]:
    """The run's log file (the CLI's file handler on the root logger), or None from the Python API."""
    for h in logging.getLogger().handlers:
        if getattr(h, "baseFilename", None):
            return h.baseFilename
    return None


def side_dir() -> Optional[str]:
    """This run's side directory beside its log (<log>.d: worker logs, NCCL debug files); the CLI removes it at
    exit when nothing was written there."""
    path = log_path()
    if not path:
        return None
    side = path[:-4] + ".d" if path.endswith(".log") else path + ".d"
    try:
        os.makedirs(side, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return side


def job_world(config: Config, where, budget, observer=None):
    """(WorldConfig, Placement) for a job: worker mode takes the launcher's world; bounded master probe first, said
    on the observer while it retries."""
    world = world_of(config, where)
    if where.multi_node and not where.worker_mode and world.node_rank != 0:
        from ..facts import hostname
        from ..rendezvous.waits import Waits

        waits = Waits(observer, budget, node_rank=world.node_rank, host=hostname())
        try:
            m = probe_master(world, budget, waits=waits)
        finally:
            waits.close()
        if not m.get("ok"):
            raise WorldError(f"cannot reach master {format_endpoint(world.master_addr, world.master_port)}: "
                             f"{m.get('error')}")
    return world, where


def run_world_job(world: WorldConfig, placement, job, payload: dict, budget, observer=None, step_ops=1, env=None):
    """run_job with the run's log directory, so NCCL debug files and worker logs land beside the run's log."""
    from ..agent.runner import run_job

    check_gpus(world, placement)
    return run_job(world, placement, job, payload, observer=observer, log_dir=side_dir(), step_ops=step_ops,
                   env=env, budget=budget)


def check_gpus(world: WorldConfig, placement) -> None:
    """UsageError before any rank starts when NCCL ranks would share a GPU or have none: NCCL refuses two ranks on
    one device ("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device ..." from ncclCommInitRank, seen
    with NCCL 2.28.9), and a rank without one fails in torch.cuda.set_device."""
    from ..agent.runner import gpu_count, resolve_backend

    local = local_ranks(world, placement)
    gpus = gpu_count()
    if resolve_backend(world.backend, gpus, local) != "nccl" or gpus >= local:
        return
    if gpus == 0:
        raise UsageError("--backend nccl needs one GPU per rank and torch sees no CUDA device here; "
                         "use --backend gloo (or auto)")
    raise UsageError(f"--backend nccl with {local} ranks on this host needs {local} GPUs and it has {gpus}: NCCL "
                     f"refuses two ranks on one GPU (\"Duplicate GPU detected\"); use --nproc-per-node {gpus} "
                     "or --backend gloo")


def local_ranks(world: WorldConfig, placement) -> int:
    """Ranks on this node: the launcher's in worker mode, else --nproc-per-node, else one per GPU (or the CPU
    default)."""
    return placement.local_world_size if placement.worker_mode else (world.nproc_per_node or _default_nproc())


def _default_nproc() -> int:
    from ..agent.runner import gpu_count
    from ..config import CPU_RANKS_DEFAULT

    return gpu_count() or CPU_RANKS_DEFAULT


def world_failure_report(config: Config, command: str, clock: Clock, why: str, where) -> Report:
    """The report of a job whose world could not form because the master was unreachable from this node."""
    w = world_of(config, where)
    return Report(command=command, version=__version__, started=clock.started, duration_s=clock.elapsed(),
                  world=WorldInfo(nnodes=w.nnodes, world_size=0, backend=w.backend,
                                  master=format_endpoint(w.master_addr, w.master_port)),
                  checks=[failed("rendezvous.master_reachable", why, node=w.node_rank,
                                 fix="Check MASTER_ADDR/MASTER_PORT and the firewall; `ncclcheck preflight` "
                                     "names the cause.")],
                  strict=config.output.strict, partial=True)


def interrupted_report(config: Config, command: str, clock: Clock, by: str, where) -> Report:
    """Ctrl-C or SIGTERM before the world formed (a rank still importing torch, probing the master or joining the
    store when torchrun forwarded scancel's SIGTERM): nothing was measured, and the report that says so is still
    written, as every later interrupt's is. `where` is the placement, or None when it was never read."""
    w = world_of(config, where) if where is not None else config.world
    launcher = where.launcher if where is not None else "ncclcheck"
    size = where.world_size if where is not None else 0
    return Report(command=command, version=__version__, started=clock.started, duration_s=clock.elapsed(),
                  world=WorldInfo(nnodes=w.nnodes, world_size=size, backend=w.backend,
                                  master=format_endpoint(w.master_addr, w.master_port), launcher=launcher),
                  nodes=this_node(where) if where is not None else [],
                  checks=[failed("rendezvous.world", f"interrupted ({by}) before the world formed: nothing was "
                                 "measured", node=w.node_rank,
                                 fix="Run it again; `--timeout` bounds each wait if a node is slow to join.")],
                  strict=config.output.strict, partial=True, interrupted=True, interrupted_by=by)


def job_report(command: str, config: Config, clock: Clock, world: WorldConfig, placement, out: Any,
               hosts: Optional[list] = None, **fields: Any) -> Report:
    """The Report of a bench/links run: world from the job's outcome, timed from the command's start."""
    return Report(command=command, version=__version__, started=clock.started, duration_s=clock.elapsed(),
                  world=WorldInfo(nnodes=placement.nnodes, world_size=out.world_size, backend=out.backend,
                                  master=format_endpoint(world.master_addr, world.master_port),
                                  launcher=placement.launcher),
                  nodes=job_nodes(placement, hosts), strict=config.output.strict,
                  interrupted=out.interrupted, interrupted_by=out.interrupted_by, node_0_reported=out.decided,
                  trust=job_trust(world) if placement.multi_node else None, **fields)


def job_trust(world: WorldConfig) -> dict:
    """bench's and links' store records are signed with a token only (no per-run key: docs/trust.md)."""
    t = {"level": "token" if world.token is not None else "none", "source": world.token_source}
    if world.token_warning:
        t["warning"] = world.token_warning
    return t


def this_node(placement) -> list:
    """The node that measured a job, by name (JUnit's hostname, the header): no facts, those are preflight's."""
    from ..facts import hostname
    from ..model import NodeInfo

    return [NodeInfo(placement.node_rank, hostname(), {})]


def job_nodes(placement, hosts: Optional[list] = None) -> list:
    """Every node of the job by name when the job gathered their names (links: each node's hostname, by node rank),
    else the node that measured it: a 2-node links report listed only node 0, and its header read `[h1]`."""
    from ..model import NodeInfo

    mine = this_node(placement)
    if not isinstance(hosts, list) or len(hosts) != placement.nnodes or len(hosts) < 2:
        return mine
    own = {n.node_rank: n for n in mine}
    return [own.get(i) or NodeInfo(i, h if isinstance(h, str) else "", {}) for i, h in enumerate(hosts)]


def save_baseline(path: Optional[str], report: Report) -> None:
    """--save-baseline: this run's JSON, written by the process that prints the report."""
    if path and report.prints:
        from ..render.files import write_atomic

        write_atomic(path, report.to_json())




def env_report(config: Config) -> Report:
    """`ncclcheck env` in one step: this node's facts as a report without verdicts."""
    from ..facts import hostname_of
    from ..model import NodeInfo

    clock = Clock()
    facts = collect(config)
    return Report(command="env", version=__version__, started=clock.started, duration_s=clock.elapsed(),
                  world=WorldInfo(nnodes=1, world_size=0, backend="none", launcher="none"),
                  nodes=[NodeInfo(config.world.node_rank, hostname_of(facts), facts)])


def run_env(config: Config, observer=None, placement=None) -> Report:
    """The commands table's runner for `env` (commands.py)."""
    return env_report(config)
