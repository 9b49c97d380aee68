"""The Python API the CLI is a thin layer over: one function per command, each taking either a Config or the
command's own flags as keyword arguments (`run_preflight(nnodes=2)`, `run_bench(sizes="1M", ops="all_reduce")`),
and returning the command's Report. Each makes one call into its command's pipeline; nothing here prints or
exits."""

from __future__ import annotations

from typing import Any, Optional

from .config import Config
from .model import Report


def _config(command: str, config: Optional[Config], options: dict, api_name: str) -> Config:
    """The Config given, or the one the command's flags (as keyword arguments) make, exactly as the CLI makes it."""
    if config is not None:
        if options:
            raise TypeError(f"{api_name}() takes a Config or keyword arguments, not both")
        return config
    from .options import api_config

    return api_config(command, options, api_name)


def run_preflight(config: Optional[Config] = None, observer: Any = None, placement: Any = None,
                  **options: Any) -> Report:
    """Node-local checks, then (multi-node) world formation and cross-node checks, then recommendations.

    Keyword arguments are `ncclcheck preflight`'s flags (nnodes=, node_rank=, master_addr=, timeout=, code=,
    path=, baseline=, strict=, ...). Raises UsageError on a bad value."""
    from .preflight.pipeline import run

    return run(_config("preflight", config, options, "run_preflight"), observer, placement=placement)


def run_recommend(config: Optional[Config] = None, placement: Any = None, **options: Any) -> Report:
    """The preflight whose recommendations `ncclcheck recommend` prints (report.recommendations).

    Keyword arguments are `ncclcheck recommend`'s flags."""
    from .preflight.pipeline import run

    return run(_config("recommend", config, options, "run_recommend"), placement=placement)


def run_bench(config: Optional[Config] = None, observer: Any = None, placement: Any = None, **options: Any) -> Report:
    """Collective sweeps on real process groups (NCCL on GPUs, gloo on CPUs) with nccl-tests' semantics.

    Keyword arguments are `ncclcheck bench`'s flags (sizes="1M-64M" or a list of byte counts, ops=, dtype=, iters=,
    warmup=, check=, min_busbw=, nproc_per_node=, ...); the defaults are the CLI's (config.BenchConfig)."""
    from .bench.pipeline import run

    return run(_config("bench", config, options, "run_bench"), observer, placement=placement)


def run_links(config: Optional[Config] = None, observer: Any = None, placement: Any = None, **options: Any) -> Report:
    """Node-to-node bandwidth in disjoint-pair rounds; names the slow node or link.

    Keyword arguments are `ncclcheck links`' flags (size=, iters=, rounds=, min_gbps=, relative=, seed=, ...)."""
    from .links.pipeline import run

    return run(_config("links", config, options, "run_links"), observer, placement=placement)


def interrupted_report(config: Config, placement: Any = None, by: str = "Ctrl-C", clock: Any = None) -> Report:
    """The report of a run of a world-forming command (preflight, bench, links, sweep) that Ctrl-C or SIGTERM cut
    short before its world formed: failed, partial, nothing measured. `clock` is the command's start (steps.world
    Clock); by default, now."""
    from .steps.world import Clock
    from .steps.world import interrupted_report as build

    return build(config, config.command, clock or Clock(), by, placement)


def run_env(config: Optional[Config] = None, **options: Any) -> Report:
    """This node's facts only (like torch's collect_env, plus NCCL, network and RDMA); no verdicts.

    Keyword arguments are `ncclcheck env`'s flags (code=, path=)."""
    from .steps.world import env_report

    return env_report(_config("env", config, options, "run_env"))


def run_diagnose(config: Optional[Config] = None, **options: Any) -> Report:
    """What a failed or hung job left -> the rank, host, collective and cause: `run_diagnose(paths=["logs/"])`.

    Keyword arguments are `ncclcheck diagnose`'s (paths=, preflight=)."""
    from .postmortem.diagnose import diagnose
    from .version import __version__

    config = _config("diagnose", config, options, "run_diagnose")
    return diagnose(list(config.diagnose.paths), config.diagnose.preflight, __version__)


def run_watch(config: Optional[Config] = None, observer: Any = None, **options: Any) -> Report:
    """While a job runs or hangs: every armed rank fetched live -> the rank, host, collective and cause, or who
    slows it: `run_watch(master_addr="h0", master_port=29500)`. Keyword arguments are `ncclcheck watch`'s flags;
    observer.row("slow_event", {"text"}) receives --follow's lines (a slowdown starts, ends)."""
    from .live.watch import watch

    return watch(_config("watch", config, options, "run_watch"), observer)


def run_health(config: Optional[Config] = None, **options: Any) -> Report:
    """Node-local health for Slurm's HealthCheckProgram / Prolog (no torch), with optional drain/resume.

    Keyword arguments are `ncclcheck health`'s flags (gpus=, ifname=, mtu=, drain=, dry_run=, ...)."""
    from .health.run import run_health as _run_health
    from .version import __version__

    return _run_health(_config("health", config, options, "run_health"), __version__)


def run_sweep(config: Optional[Config] = None, observer: Any = None, placement: Any = None, **options: Any) -> Report:
    """Inside an allocation: links' rounds with re-tests, a verdict per node, only proven-bad nodes drained.

    Keyword arguments are `ncclcheck sweep`'s flags (size=, iters=, drain=, good_out=, bad_out=, ...)."""
    from .sweep.run import run_sweep as _run_sweep

    return _run_sweep(_config("sweep", config, options, "run_sweep"), run_links, observer=observer,
                      placement=placement)


def run_report(config: Optional[Config] = None, **options: Any) -> Report:
    """A saved run (`ncclcheck report RUN.json`), checked against the schema: `run_report(run="run.json")`."""
    from .render.validate import load_report

    return load_report(_config("report", config, options, "run_report").report_input)


__all__ = ["run_bench", "run_diagnose", "run_env", "run_health", "run_links", "run_preflight", "run_recommend",
           "run_report", "run_sweep", "run_watch"]
