"""The Python API the CLI is a thin layer over: run_preflight(), run_env(), run_recommend(), run_bench(),
run_links() -> Report. Usable from notebooks and other tools; nothing here prints or exits."""

from __future__ import annotations

import datetime as _dt
import time
from typing import Optional

from . import __version__
from .checks import run_local_checks
from .checks.local import LocalInput
from .config import Config, WorldConfig
from .model import NodeInfo, Report, WorldInfo
from .recommend import NodeView, recommend_local


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _config(config: Optional[Config], command: str, **overrides) -> Config:
    if config is None:
        world = overrides.pop("world", None) or WorldConfig()
        return Config(command=command, world=world, **overrides)
    return config


def _collect(config: Config) -> dict:
    from .facts import collect_node_facts

    return collect_node_facts(code_path=config.code_path, paths=config.paths,
                              master_addr=config.world.master_addr)


def _hostname(facts: dict) -> str:
    import socket

    return (facts.get("host") or {}).get("hostname") or socket.gethostname()


def _probe_master(world: WorldConfig) -> Optional[dict]:
    """Single-node view of the master: node 0 tests the port is bindable; others connect (bounded)."""
    if world.master_addr is None:
        return None
    from . import probe

    if world.node_rank == 0:
        return probe.bind_test(world.master_addr, world.master_port)
    return probe.probe_master(world.master_addr, world.master_port, deadline=time.monotonic() + world.timeout_s)


def run_preflight(config: Optional[Config] = None, **overrides) -> Report:
    """Node-local checks, then (multi-node) world formation and cross-node checks, then recommendations."""
    config = _config(config, "preflight", **overrides)
    t0, started = time.monotonic(), _now_iso()
    world = config.world
    facts = _collect(config)
    master = _probe_master(world)
    inp = LocalInput.of(facts, node_rank=world.node_rank, multi_node=world.multi_node,
                        nproc_per_node=world.nproc_per_node, backend=world.backend, master=master)
    checks = run_local_checks(inp)
    recs = recommend_local(NodeView(facts, multi_node=world.multi_node))
    report = Report(
        command=config.command if config.command in ("preflight", "recommend") else "preflight",
        version=__version__,
        started=started,
        world=WorldInfo(nnodes=world.nnodes, world_size=world.nnodes * (world.nproc_per_node or 1),
                        backend=world.backend, master=f"{world.master_addr}:{world.master_port}"
                        if world.master_addr else None, launcher="ncclcheck"),
        nodes=[NodeInfo(world.node_rank, _hostname(facts), facts)],
        checks=checks,
        recommendations=recs,
        strict=config.output.strict,
    )
    report.duration_s = time.monotonic() - t0
    return report


def run_recommend(config: Optional[Config] = None, **overrides) -> Report:
    config = _config(config, "recommend", **overrides)
    return run_preflight(config)


def run_env(config: Optional[Config] = None, **overrides) -> Report:
    """This node's facts only (like torch's collect_env, plus NCCL, network and RDMA); no verdicts."""
    config = _config(config, "env", **overrides)
    t0, started = time.monotonic(), _now_iso()
    facts = _collect(config)
    report = Report(command="env", version=__version__, started=started,
                    world=WorldInfo(nnodes=1, world_size=0, backend="none", launcher="none"),
                    nodes=[NodeInfo(config.world.node_rank, _hostname(facts), facts)])
    report.duration_s = time.monotonic() - t0
    return report
