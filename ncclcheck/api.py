"""The Python API the CLI is a thin layer over: run_preflight(), run_env(), run_recommend(), run_bench(),
run_links(), run_diagnose() -> Report. Usable from notebooks and other tools; nothing here prints or exits."""

from __future__ import annotations

import datetime as _dt
import os
import time
from typing import Optional

from . import __version__
from .checks import run_local_checks
from .checks.local import LocalInput
from .config import Config, WorldConfig, format_endpoint
from .errors import interruption
from .facts import hostname_of
from .model import NodeInfo, Report, WorldInfo
from .recommend import NodeView, recommend_local


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _config(config: Optional[Config], command: str, **overrides) -> Config:
    if config is None:
        world = overrides.pop("world", None) or WorldConfig()
        return Config(command=command, world=world, **overrides)
    return config


def _collect(config: Config, master_addr: Optional[str] = None) -> dict:
    from .agent.runner import load_torch
    from .facts import collect_node_facts

    return collect_node_facts(load_torch=load_torch, code_path=config.code_path, paths=config.paths,
                              master_addr=master_addr or config.world.master_addr, tool_version=__version__,
                              shared_dirs=config.storage.dirs, need_bytes=config.storage.need_bytes)


def _probe_master(world: WorldConfig, budget, hosts_store: Optional[bool] = None) -> Optional[dict]:
    """Single-node view of the master: the process that will host the store tests the port is bindable; others
    connect (bounded by the budget's master-probe phase). hosts_store None: node 0 hosts it (launcher mode)."""
    if world.master_addr is None:
        return None
    from .preflight import probe

    if world.node_rank == 0 if hosts_store is None else hosts_store:
        return probe.bind_test(world.master_addr, world.master_port)
    return probe.probe_master(world.master_addr, world.master_port, deadline=budget.deadline(budget.master_probe_s),
                              budget=budget).to_json()


def _placement(config: Config, placement=None):
    """The launcher's world, read once per process: the CLI passes the one it read; the Python API reads it here."""
    if placement is not None:
        return placement
    from .agent.launchers import detect_placement

    return detect_placement(os.environ, config.world)


def _budget(config: Config):
    """The run's time bounds, built once where a command starts and passed down (rendezvous/budget.py)."""
    from .rendezvous.budget import Budget

    return Budget.of(config)


def _world_of(config: Config, placement) -> WorldConfig:
    """The world as agent.launchers decided it (the launcher's variables, the flags, the defaults: one rule), with
    the flags' backend and timeout."""
    w = config.world
    nproc = placement.local_world_size if placement.worker_mode else (w.nproc_per_node or
                                                                        placement.local_world_size or None)
    return WorldConfig(nnodes=placement.nnodes, node_rank=placement.node_rank, nproc_per_node=nproc or None,
                       master_addr=placement.master_addr, master_port=placement.master_port, backend=w.backend,
                       timeout_s=w.timeout_s, token=w.token, origin=w.origin)


def _log_path() -> Optional[str]:
    import logging

    for h in logging.getLogger().handlers:
        if getattr(h, "baseFilename", None):
            return h.baseFilename
    return None


def run_preflight(config: Optional[Config] = None, observer=None, placement=None, **overrides) -> Report:
    """Node-local checks, then (multi-node) world formation and cross-node checks, then recommendations."""
    config = _config(config, "preflight", **overrides)
    t0, started = time.monotonic(), _now_iso()
    budget = _budget(config)
    golden = _load_golden(config)  # a bad baseline file is a usage error before anything runs
    placement = _placement(config, placement)
    world = _world_of(config, placement)
    nofile = None
    if placement.node_leader and placement.multi_node:
        from .agent.limits import ensure_nofile

        # before any socket: node 0 holds a store connection per node (issue 27: a 1,024 soft limit stops the world)
        nofile = ensure_nofile(placement.nnodes, bool(placement.hosts_store))
    facts = _collect(config, world.master_addr) if placement.node_leader else {}
    master = None
    if placement.node_leader and (placement.multi_node or not placement.worker_mode):
        # Under a launcher too: rank 0 binds MASTER_PORT unless torchrun's agent store already holds it.
        master = _probe_master(world, budget, placement.hosts_store if placement.worker_mode else None)
    inp = LocalInput.of(facts, node_rank=world.node_rank, multi_node=placement.multi_node,
                        nproc_per_node=world.nproc_per_node, backend=world.backend, master=master, nofile=nofile)
    checks = run_local_checks(inp) if placement.node_leader else []
    command = config.command if config.command in ("preflight", "recommend") else "preflight"
    if placement.multi_node or placement.worker_mode:
        from .preflight import cluster as _world

        try:
            out = _world.run_cluster_preflight(config, placement, facts, checks, budget, observer=observer)
        except KeyboardInterrupt as exc:
            return _interrupted_preflight(config, command, started, t0, world, placement, facts, checks,
                                          interruption(exc))
        report = Report(command=command, version=__version__, started=started, world=out.world, nodes=out.nodes,
                        checks=out.checks, strict=config.output.strict,
                        recommendations=out.recommendations or recommend_local(NodeView(facts, multi_node=True)))
        report.prints = placement.node_leader
        _nccl_diagnostics(config, report)
        _compare_golden(config, report, golden)
        report.duration_s = time.monotonic() - t0
        # Every process leaves with the same code, so srun/CI fail as a whole (node 0 publishes the verdict).
        report.agreed_exit_code = out.agree_exit_code(report.exit_code)
        return report
    from .preflight.shared_dirs import standalone_checks

    checks += standalone_checks(facts, world.node_rank, hostname_of(facts), config.storage.dirs, budget)
    report = Report(
        command=command,
        version=__version__,
        started=started,
        world=WorldInfo(nnodes=1, world_size=world.nproc_per_node or 1, backend=world.backend,
                        master=format_endpoint(world.master_addr, world.master_port),
                        launcher="ncclcheck"),
        nodes=[NodeInfo(world.node_rank, hostname_of(facts), facts)],
        checks=checks,
        recommendations=recommend_local(NodeView(facts, multi_node=False)),
        strict=config.output.strict,
    )
    _nccl_diagnostics(config, report)
    _compare_golden(config, report, golden)
    report.duration_s = time.monotonic() - t0
    return report


def _interrupted_preflight(config: Config, command: str, started: str, t0: float, world: WorldConfig, placement,
                           facts: dict, checks: list, by: str = "Ctrl-C") -> Report:
    """Ctrl-C (or SIGTERM) while the world formed or the mesh was probed: this node's own findings, and a failed
    rendezvous.world saying the cross-node part never finished (the CLI writes it and exits 130)."""
    from .model import failed

    report = Report(
        command=command, version=__version__, started=started,
        world=WorldInfo(nnodes=world.nnodes, world_size=placement.world_size, backend=world.backend,
                        master=format_endpoint(world.master_addr, world.master_port), launcher=placement.launcher),
        nodes=[NodeInfo(world.node_rank, hostname_of(facts), facts)] if facts else [],
        checks=list(checks) + [failed(
            "rendezvous.world", f"interrupted ({by}) before the world formed and the cross-node checks ran: "
            "only this node's own checks are here", node=world.node_rank,
            fix="Run it again on every node; `--timeout` bounds each wait if a node is slow to join.")],
        recommendations=recommend_local(NodeView(facts, multi_node=True)) if facts else [],
        strict=config.output.strict, partial=True)
    report.interrupted, report.interrupted_by = True, by
    report.duration_s = time.monotonic() - t0
    return report


def _load_golden(config: Config):
    """The nodes of preflight --baseline's saved run, or None without one."""
    if not (config.baseline and config.baseline.path):
        return None
    import json

    from .checks.drift import baseline_nodes
    from .errors import UsageError

    path = config.baseline.path
    try:
        with open(path, encoding="utf-8") as f:
            return baseline_nodes(json.load(f), f"--baseline {path}")
    except (OSError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: cannot read it as JSON ({exc})") from None


def _nccl_diagnostics(config: Config, report: Report) -> None:
    """nccl.ras from saved `ncclras -f json` output and nccl.transport from saved NCCL_DEBUG captures."""
    diag = config.nccl_diag
    if diag is None or not (diag.ras or diag.debug):
        return
    from .errors import UsageError

    def read(flag: str, path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from None

    if diag.ras:
        from .checks.nccl_ras import ras_check_from_text

        report.checks.append(ras_check_from_text(read("--nccl-ras", diag.ras), diag.ras))
    if diag.debug:
        from .bench.nccl_debug import checks_from_captures

        texts = {p: read("--nccl-debug", p) for p in diag.debug}
        report.checks.extend(checks_from_captures(texts, report.nodes, report.recommendations))


def _compare_golden(config: Config, report: Report, golden) -> None:
    """baseline.drift per node against --baseline, then --save-baseline (before the exit code is agreed)."""
    if golden is not None:
        from .checks.drift import drift_checks

        report.checks.extend(drift_checks(report.nodes, golden, config.baseline.path))
    _save_baseline(config, report)


def _save_baseline(config: Config, report: Report) -> None:
    if config.baseline and config.baseline.save and report.prints:
        from .render.files import write_atomic
        from .render.json import render_json

        write_atomic(config.baseline.save, render_json(report))


def run_recommend(config: Optional[Config] = None, placement=None, **overrides) -> Report:
    config = _config(config, "recommend", **overrides)
    report = run_preflight(config, placement=placement)
    if config.postmortem_dir:
        from .recommend.postmortem import recommend_postmortem

        report.recommendations.extend(recommend_postmortem(config.postmortem_dir, report.nodes))
    return report


def run_diagnose(config: Optional[Config] = None, **overrides) -> Report:
    """What a failed or hung job left (config.diagnose.paths) -> the rank, host, collective and cause."""
    config = _config(config, "diagnose", **overrides)
    from .postmortem.diagnose import diagnose

    return diagnose(list(config.diagnose.paths), config.diagnose.preflight, __version__)


def run_env(config: Optional[Config] = None, **overrides) -> Report:
    """This node's facts only (like torch's collect_env, plus NCCL, network and RDMA); no verdicts."""
    config = _config(config, "env", **overrides)
    t0, started = time.monotonic(), _now_iso()
    facts = _collect(config)
    report = Report(command="env", version=__version__, started=started,
                    world=WorldInfo(nnodes=1, world_size=0, backend="none", launcher="none"),
                    nodes=[NodeInfo(config.world.node_rank, hostname_of(facts), facts)])
    report.duration_s = time.monotonic() - t0
    return report


def _job_world(config: Config, placement, budget):
    """(WorldConfig, Placement) for a job: worker mode takes the launcher's world; bounded master probe first."""
    from .errors import WorldError

    world = _world_of(config, placement)
    if placement.multi_node and not placement.worker_mode and world.node_rank != 0:
        m = _probe_master(world, budget)
        if not m.get("ok"):
            raise WorldError(f"cannot reach master {format_endpoint(world.master_addr, world.master_port)}: "
                             f"{m.get('error')}")
    return world, placement



def _side_dir() -> Optional[str]:
    """This run's side directory beside its log (<log>.d: worker logs, NCCL debug files); the CLI removes it at
    exit when nothing was written there."""
    path = _log_path()
    if not path:
        return None
    side = path[:-4] + ".d" if path.endswith(".log") else path + ".d"
    try:
        os.makedirs(side, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return side


def _run_world_job(world: WorldConfig, placement, job, payload: dict, budget, observer=None, step_ops=1,
                   env=None):
    """run_job with the run's log directory, so NCCL debug files and worker logs land beside the run's log."""
    from .agent.runner import run_job

    _check_gpus(world, placement)
    return run_job(world, placement, job, payload, observer=observer, log_dir=_side_dir(), step_ops=step_ops,
                   env=env, budget=budget)


def _job_report(command: str, config: Config, started: str, t0: float, world: WorldConfig, placement, out,
                **fields) -> Report:
    """The Report of a bench/links run: world from the job's outcome, timed from the command's start."""
    from .facts import hostname

    # The node that measured it, by name (JUnit's hostname, the header): no facts, those are preflight's.
    report = Report(command=command, version=__version__, started=started,
                    world=WorldInfo(nnodes=placement.nnodes, world_size=out.world_size, backend=out.backend,
                                    master=format_endpoint(world.master_addr, world.master_port),
                                    launcher=placement.launcher),
                    nodes=[NodeInfo(placement.node_rank, hostname(), {})], strict=config.output.strict, **fields)
    report.duration_s = time.monotonic() - t0
    return report

def run_bench(config: Optional[Config] = None, observer=None, placement=None, **overrides) -> Report:
    """Collective sweeps on real process groups (NCCL on GPUs, gloo on CPUs) with nccl-tests' semantics."""
    from .bench import gates
    from .bench.collectives import bench_config_to_payload, bench_job, rows_from_result, validate
    from .errors import WorldError
    from .model import BenchRow, failed

    config = _config(config, "bench", **overrides)
    t0, started = time.monotonic(), _now_iso()
    budget = _budget(config)
    placement = _placement(config, placement)
    try:
        world, placement = _job_world(config, placement, budget)
    except WorldError as exc:
        return _world_failure_report(config, "bench", started, t0, str(exc), placement)
    world_size = placement.world_size if placement.worker_mode else world.nnodes * _local_ranks(world, placement)
    cfg = validate(config.bench, world_size)  # UsageError before any rendezvous
    _check_memory(cfg, world, placement, world_size)
    base_rows = gates.load_baseline(cfg.baseline) if cfg.baseline else None
    # Between two rows: the size's agreement, warm-up, barrier, timed iterations, check and stats collectives.
    step_ops = (cfg.warmup + cfg.iters + 6) * (2 if cfg.in_place else 1)
    out = _run_world_job(world, placement, bench_job, bench_config_to_payload(cfg), budget, observer, step_ops)
    result = out.results.get(0)
    if result is not None:
        rows = rows_from_result(result)
        skips, stopped = result.get("skipped", []), result.get("stopped")
    else:  # the world broke or was interrupted: report what rank 0 emitted before it did
        rows = [BenchRow.from_json(e["data"]) for e in out.emitted if e.get("kind") == "bench_row"]
        skips, stopped = [], {"reason": "world broke", "detail": "; ".join(
            f"rank {f['rank']}: {f['reason']}" for f in out.failures)}
        hang = next((e["data"] for e in out.emitted if e.get("kind") == "bench_stopped"), None)
        if out.interrupted:
            stopped = {"reason": "interrupted", "detail": f"interrupted ({out.interrupted_by}) before the sweep ended"}
        elif isinstance(hang, dict):
            stopped = hang
    checks, extra, partial = gates.outcome(cfg, rows, skips, stopped, hardware=None, base_rows=base_rows,
                                           backend=out.backend,
                                           world={"nnodes": placement.nnodes, "backend": out.backend,
                                                  "ranks_per_node": _local_ranks(world, placement),
                                                  "records": out.emitted})
    if out.world_size > 1 and rows:
        from .bench.straggler import find_stragglers

        # Arrival = each rank's start of the timed loop after the shared barrier (bench records it per row).
        timing = [{"arrival_us": (r.extra.get("arrival") or {}).get("start_offset_us"),
                   "rank_time_us": r.rank_time_us} for r in rows]
        checks.extend(find_stragglers(timing).checks)
    if config.nccl_diag and config.nccl_diag.capture:
        checks.extend(_nccl_capture(config, world, placement, out.backend, extra, budget))
    if out.failures and not out.interrupted:
        first = out.failures[0]
        checks.insert(0, failed("bench.world", f"rank {first['rank']} failed: {first['reason']}",
                                evidence={"failures": out.failures},
                                fix="Run `ncclcheck preflight` with the same world flags to find the cause."))
    report = _job_report("bench", config, started, t0, world, placement, out, checks=checks, bench=rows, extra=extra,
                         partial=partial or bool(out.failures))
    report.interrupted, report.interrupted_by = out.interrupted, out.interrupted_by
    if cfg.save_baseline:
        from .render.files import write_atomic
        from .render.json import render_json

        write_atomic(cfg.save_baseline, render_json(report))
    return report


def _nccl_capture(config: Config, world: WorldConfig, placement, backend: str, extra: dict, budget) -> list:
    """bench/links --nccl-capture: a fresh world whose ranks log NCCL's choices and dump its topology and graph per
    host; nccl.transport per node, and the files' paths in the report (`nccl_captures`)."""
    from .bench.nccl_debug import captures_section, nccl_debug_env, nccl_debug_job, transport_checks
    from .facts import hostname
    from .model import skipped

    if backend != "nccl":
        return [skipped("nccl.transport", f"--nccl-capture needs the nccl backend on GPUs; this run used {backend}")]

    # NCCL reads its debug and dump variables once, at init: they go into the spawned ranks' environment.
    log_dir = _side_dir()
    nproc = _local_ranks(world, placement)
    env = nccl_debug_env(log_dir, hostname().split(".")[0], dump_rank=placement.node_rank * nproc) if log_dir else None
    out = _run_world_job(world, placement, nccl_debug_job, {"log_dir": log_dir}, budget, env=env)
    results = [r for _, r in sorted(out.results.items())]
    extra["nccl_captures"] = captures_section(results)
    # What NCCL chose, against what preflight would recommend on this node (its interfaces, RDMA ports, NCCL_*).
    recs = recommend_local(NodeView(_collect(config), multi_node=world.nnodes > 1))
    return transport_checks(results, recs)


def _check_memory(cfg, world: WorldConfig, placement, world_size: int) -> None:
    """UsageError when the ranks of this node cannot allocate the largest --sizes (before any rank starts)."""
    from .agent.runner import gpu_count, load_torch, resolve_backend
    from .bench.memory import check_fits
    from .facts.gpu import device_memory_bytes
    from .facts.host import mem_available_bytes

    local = _local_ranks(world, placement)
    on_gpu = resolve_backend(world.backend, gpu_count(), local) == "nccl"
    check_fits(cfg, world_size, local, mem_available_bytes(), device_memory_bytes(load_torch) if on_gpu else None)


def _check_gpus(world: WorldConfig, placement) -> None:
    """UsageError before any rank starts when NCCL ranks would share a GPU or have none: NCCL refuses two ranks on
    one device ("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device ..." from ncclCommInitRank, seen
    with NCCL 2.28.9), and a rank without one fails in torch.cuda.set_device."""
    from .agent.runner import gpu_count, resolve_backend
    from .errors import UsageError

    local = _local_ranks(world, placement)
    gpus = gpu_count()
    if resolve_backend(world.backend, gpus, local) != "nccl" or gpus >= local:
        return
    if gpus == 0:
        raise UsageError("--backend nccl needs one GPU per rank and torch sees no CUDA device here; "
                         "use --backend gloo (or auto)")
    raise UsageError(f"--backend nccl with {local} ranks on this host needs {local} GPUs and it has {gpus}: NCCL "
                     f"refuses two ranks on one GPU (\"Duplicate GPU detected\"); use --nproc-per-node {gpus} "
                     "or --backend gloo")


def _local_ranks(world: WorldConfig, placement) -> int:
    """Ranks on this node: the launcher's in worker mode, else --nproc-per-node, else one per GPU (or the CPU
    default)."""
    return placement.local_world_size if placement.worker_mode else (world.nproc_per_node or _default_nproc())


def _default_nproc() -> int:
    from .agent.runner import CPU_RANKS_DEFAULT, gpu_count

    return gpu_count() or CPU_RANKS_DEFAULT


def _world_failure_report(config: Config, command: str, started: str, t0: float, why: str, placement) -> Report:
    from .model import failed

    w = _world_of(config, placement)
    report = Report(command=command, version=__version__, started=started,
                    world=WorldInfo(nnodes=w.nnodes, world_size=0, backend=w.backend,
                                    master=format_endpoint(w.master_addr, w.master_port)),
                    checks=[failed("rendezvous.master_reachable", why, node=w.node_rank,
                                   fix="Check MASTER_ADDR/MASTER_PORT and the firewall; `ncclcheck preflight` "
                                       "names the cause.")],
                    strict=config.output.strict, partial=True)
    report.duration_s = time.monotonic() - t0
    return report


def run_links(config: Optional[Config] = None, observer=None, placement=None, **overrides) -> Report:
    """Node-to-node bandwidth in disjoint-pair rounds; names the slow node or link (ncclcheck.links)."""
    from .config import LinksConfig
    from .errors import WorldError
    from .links.job import links_job, payload_from_config
    from .links.outcome import from_outcome

    config = _config(config, "links", **overrides)
    t0, started = time.monotonic(), _now_iso()
    base = None
    if config.baseline and config.baseline.path:
        from .links.baseline import load_links_baseline

        base = load_links_baseline(config.baseline.path)
    budget = _budget(config)
    placement = _placement(config, placement)
    try:
        world, placement = _job_world(config, placement, budget)
    except WorldError as exc:
        return _world_failure_report(config, "links", started, t0, str(exc), placement)
    payload = payload_from_config(config.links or LinksConfig())
    # Between two emitted pair rows: one round (pair setup, warm-up, timed transfers both ways, the report).
    out = _run_world_job(world, placement, links_job, payload, budget, observer, step_ops=5)
    nproc = _local_ranks(world, placement)
    section, checks, partial = from_outcome(out, payload, ranks_per_node=nproc)
    extra: dict = {}
    if config.nccl_diag and config.nccl_diag.capture:
        checks.extend(_nccl_capture(config, world, placement, out.backend, extra, budget))
    report = _job_report("links", config, started, t0, world, placement, out, checks=checks, links=section,
                         partial=partial, extra=extra)
    report.interrupted, report.interrupted_by = out.interrupted, out.interrupted_by
    if base is not None:
        from .links.baseline import compare_links

        report.checks.append(compare_links(section, report.nodes, base, config.baseline.tolerance,
                                           config.baseline.path))
    _save_baseline(config, report)
    return report


def run_health(config: Optional[Config] = None, **overrides) -> Report:
    """Node-local health for Slurm's HealthCheckProgram / Prolog (no torch), with optional drain/resume."""
    from .health.run import run_health as _run_health

    return _run_health(_config(config, "health", **overrides), __version__)


def run_sweep(config: Optional[Config] = None, observer=None, placement=None, **overrides) -> Report:
    """Inside an allocation: links' rounds with re-tests, a verdict per node, only proven-bad nodes drained."""
    from .sweep.run import run_sweep as _run_sweep

    return _run_sweep(_config(config, "sweep", **overrides), run_links, observer=observer, placement=placement)
