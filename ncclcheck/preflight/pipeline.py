"""`ncclcheck preflight` (and `recommend`) as one pipeline, in the order it runs: the golden file, this process's
place, this node's facts, the master probe, the node-local checks, then either the cluster protocol (cluster.py) or
the standalone world, NCCL's saved diagnostics, drift against the golden file, the exit code every process of a
formed world adopts from node 0, and the Report, built once; then the baseline is saved."""

from __future__ import annotations

from typing import Any, Optional

from ..checks import run_local_checks
from ..checks.local import LocalInput, judged_among_joined
from ..config import CHECK_RANKS_DEFAULT, Config, WorldConfig, format_endpoint
from ..errors import interruption
from ..facts import hostname_of
from ..model import NodeInfo, Report, WorldInfo, exit_code_for, failed, overall_status
from ..recommend import NodeView, recommend_local
from ..rendezvous.waits import Waits
from ..steps import world as w
from ..version import __version__


def run(config: Config, observer=None, placement=None) -> Report:
    """Node-local checks, then (multi-node) world formation and cross-node checks, then recommendations. Every
    wait for another node is said on the observer while it lasts (rendezvous/waits.py)."""
    clock = w.Clock()
    command = config.command if config.command in ("preflight", "recommend") else "preflight"
    budget = w.budget(config)
    golden = _load_golden(config)  # a bad baseline file is a usage error before anything runs
    placement = w.placement(config, placement)
    world = w.world_of(config, placement)
    nofile = None
    if placement.node_leader and placement.multi_node:
        from ..agent.limits import ensure_nofile

        # before any socket: node 0 holds a store connection per node (a soft limit of 1,024 stops the world there)
        nofile = ensure_nofile(placement.nnodes, bool(placement.hosts_store))
    facts = w.collect(config, world.master_addr, budget) if placement.node_leader else {}
    waits = Waits(observer, budget, node_rank=world.node_rank, host=hostname_of(facts) if facts else None)
    try:
        return _run(config, command, clock, budget, golden, placement, world, nofile, facts, waits, observer)
    finally:
        waits.close()


def _run(config: Config, command: str, clock: w.Clock, budget, golden, placement, world: WorldConfig,
         nofile: Optional[dict], facts: dict, waits: Waits, observer) -> Report:
    master = None
    if placement.node_leader and (placement.multi_node or not placement.worker_mode):
        # Under a launcher too: rank 0 binds MASTER_PORT unless torchrun's agent store already holds it.
        master = w.probe_master(world, budget, placement.hosts_store if placement.worker_mode else None, waits)
    inp = LocalInput.of(facts, node_rank=world.node_rank, multi_node=placement.multi_node,
                        nproc_per_node=world.nproc_per_node, backend=world.backend, master=master, nofile=nofile,
                        hw=_hw_expect(config, facts, golden))
    checks = run_local_checks(inp) if placement.node_leader else []
    if placement.node_leader and config.hardware.host_copy:
        from ..agent.context import load_torch
        from ..steps.hostcopy import host_copy_check

        checks.append(host_copy_check(facts, world.node_rank, load_torch))
    outcome = None
    if placement.multi_node or placement.worker_mode:
        from . import cluster

        try:
            outcome = cluster.run_cluster_preflight(config, placement, facts, checks, budget, observer=observer,
                                                    waits=waits)
        except KeyboardInterrupt as exc:
            return _interrupted(config, command, clock, world, placement, facts, checks, interruption(exc))
        world_info, nodes, checks = outcome.world, outcome.nodes, list(outcome.checks)
        recs = outcome.recommendations or recommend_local(NodeView(facts, multi_node=True))
    else:
        if config.storage.dirs:  # imported only when asked for: it brings the cross-node checks with it
            from .shared_dirs import standalone_checks

            checks += standalone_checks(facts, world.node_rank, hostname_of(facts), config.storage.dirs, budget)
        world_info = WorldInfo(nnodes=1, world_size=world.nproc_per_node or CHECK_RANKS_DEFAULT, backend=world.backend,
                               master=format_endpoint(world.master_addr, world.master_port), launcher="ncclcheck")
        nodes = [NodeInfo(world.node_rank, hostname_of(facts), facts)]
        recs = recommend_local(NodeView(facts, multi_node=False))
    if config.command == "recommend" and config.postmortem_dir:
        from ..recommend.postmortem import recommend_postmortem

        recs = list(recs) + recommend_postmortem(config.postmortem_dir, nodes)  # arm the job: diagnose can read it
    checks += _nccl_diagnostics(config, nodes, recs)
    if golden is not None:
        from ..checks.registry import baseline_results

        checks += baseline_results(nodes, golden, config.baseline.path)  # drift, and ib.counters since the saved run
    agreed = None
    if outcome is not None:
        # Every process leaves with the same code, so srun/CI fail as a whole (node 0 publishes the verdict).
        agreed = outcome.agree_exit_code(exit_code_for(overall_status(checks), config.output.strict))
    report = Report(command=command, version=__version__, started=clock.started, duration_s=clock.elapsed(),
                    world=world_info, nodes=nodes, checks=checks, recommendations=recs, strict=config.output.strict,
                    prints=placement.node_leader if outcome is not None else True, agreed_exit_code=agreed,
                    node_0_reported=outcome is not None and outcome.node_0_reported,
                    trust=outcome.trust if outcome is not None and outcome.trust else None)
    w.save_baseline(config.baseline.save if config.baseline else None, report)
    return report


def _interrupted(config: Config, command: str, clock: w.Clock, world: WorldConfig, placement, facts: dict,
                 checks: list, by: str = "Ctrl-C") -> Report:
    """Ctrl-C (or SIGTERM) while the world formed or the mesh was probed: this node's own findings, and a failed
    rendezvous.world saying the cross-node part never finished (the CLI writes it and exits 130)."""
    return Report(
        command=command, version=__version__, started=clock.started, duration_s=clock.elapsed(),
        world=WorldInfo(nnodes=world.nnodes, world_size=placement.world_size, backend=world.backend,
                        master=format_endpoint(world.master_addr, world.master_port), launcher=placement.launcher),
        nodes=[NodeInfo(world.node_rank, hostname_of(facts), facts)] if facts else [],
        checks=judged_among_joined(list(checks), facts, world.node_rank) + [failed(
            "rendezvous.world", f"interrupted ({by}) before the world formed and the cross-node checks ran: "
            "only this node's own checks are here", node=world.node_rank,
            fix="Run it again on every node; `--timeout` bounds each wait if a node is slow to join.")],
        recommendations=recommend_local(NodeView(facts, multi_node=True)) if facts else [],
        strict=config.output.strict, partial=True, interrupted=True, interrupted_by=by)


def _hw_expect(config: Config, facts: dict, golden: Optional[list]) -> Any:
    """The GPU hardware checks' expectations before a job: a process already on a GPU shares it with the job."""
    from ..checks.gpu import hw_expect

    return hw_expect(config.hardware, facts, golden, config.baseline.path if config.baseline else None, "warn")


def _load_golden(config: Config) -> Optional[Any]:
    """The nodes of preflight --baseline's saved run, or None without one."""
    if not (config.baseline and config.baseline.path):
        return None
    from ..checks.drift import load_golden

    return load_golden(config.baseline.path)


def _nccl_diagnostics(config: Config, nodes: list, recommendations: list) -> list:
    """nccl.ras from saved `ncclras -f json` output and nccl.transport from saved NCCL_DEBUG captures."""
    diag = config.nccl_diag
    if diag is None or not (diag.ras or diag.debug):
        return []
    from ..clean import clean_log_text, clean_name
    from ..infile import read_doc

    out: list = []
    if diag.ras:  # a document, within infile.MAX_DOC_BYTES (options.py refused a larger one before the run)
        from ..checks.nccl_ras import ras_check_from_text

        text = clean_log_text(read_doc(diag.ras, f"--nccl-ras {diag.ras}").decode("utf-8", errors="replace"))
        out.append(ras_check_from_text(text, clean_name(diag.ras)))
    if diag.debug:  # logs, streamed line by line within their bounds
        from ..steps.nccl_debug import checks_from_files

        out.extend(checks_from_files(diag.debug, nodes, recommendations))
    return out
