"""Command line: argv -> Config (built once), run the API, render, exit. The only module that exits.

Exit codes (DESIGN.md): 0 passed (warnings allowed), 1 a check failed / a gate missed / no world, 2 usage error,
3 internal error (a bug: the log's path is printed), 130 interrupted. Importing this module must not import torch:
`ncclcheck --help` and usage errors stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

from . import __version__
from .config import (
    BaselineConfig,
    BenchConfig,
    Config,
    LinksConfig,
    NcclDiagConfig,
    OutputConfig,
    build_world,
    parse_float,
    parse_int,
)
from .errors import UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

log = logging.getLogger("ncclcheck")


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting itself."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _world_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("world (like torchrun; fall back to NCCLCHECK_* then MASTER_ADDR/MASTER_PORT/NODE_RANK)")
    g.add_argument("--nnodes", help="number of nodes (default 1: standalone on this machine)")
    g.add_argument("--node-rank", help="this node's rank, 0..nnodes-1")
    g.add_argument("--nproc-per-node", help="ranks per node (default: one per GPU, 2 CPU ranks without GPUs)")
    g.add_argument("--master-addr", help="address of node rank 0 (host, or host:port like an rdzv endpoint)")
    g.add_argument("--master-port", help="rendezvous port on node rank 0 (default 29500)")
    g.add_argument("--backend", help="auto | nccl | gloo (default auto: nccl with GPUs, else gloo)")
    g.add_argument("--timeout", help="hang bound in seconds: the longest any single wait (master probe, join, mesh "
                                     "probe, each collective) may last before its cause is named; never cuts a "
                                     "sweep short (default 60)")
    g.add_argument("--token-file", metavar="PATH",
                   help="a job secret shared by every node (or NCCLCHECK_TOKEN): every store value is signed with it "
                        "and unsigned values are ignored, so a stranger on the master port cannot change a verdict "
                        "(docs/architecture.md, Time bounds and trust)")
    return p


def _output_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("--json", metavar="PATH", help="write the JSON report (schema ncclcheck.report/1); '-' = stdout. "
                   "Paths expand %%j (job id), %%n (node rank), %%h (hostname), %%r (rank: every rank writes)")
    g.add_argument("--quiet", action="store_true",
                   help="print only the verdict, on global rank 0 (the other processes print nothing)")
    g.add_argument("--print-all", action="store_true",
                   help="every process prints its full report (default: global rank 0 prints it, every other node "
                        "one line)")
    g.add_argument("--strict", action="store_true", help="warnings fail (exit 1)")
    g.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per check)")
    g.add_argument("--markdown", metavar="FILE", help="write Markdown (e.g. $GITHUB_STEP_SUMMARY)")
    g.add_argument("--prometheus", metavar="FILE",
                   help="write Prometheus text metrics (ncclcheck_*) atomically, e.g. for node_exporter's textfile "
                        "collector")
    return p


def _facts_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--code", metavar="PATH", help="code to hash and compare across nodes (default: working dir)")
    p.add_argument("--path", metavar="P", action="append", default=[],
                   help="a path that must exist with the same content on every node (repeatable)")
    return p


def _baseline_flags(p: argparse.ArgumentParser, metavar: str, what: str) -> None:
    p.add_argument("--baseline", metavar=metavar, help=what)
    p.add_argument("--save-baseline", metavar="FILE", help="save this run's JSON as a baseline")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ncclcheck", description="Can these nodes train together? Which node, interface or "
                     "setting is wrong? Then: are the collectives' numbers normal?")
    parser.add_argument("--version", action="version", version=f"ncclcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    world, out, facts = _world_flags(), _output_flags(), _facts_flags()

    p = sub.add_parser("preflight", parents=[world, out, facts], help="checks before a job: node, network, world",
                       description="Node-local checks, then (multi-node) world formation, cross-node checks and "
                                   "a full-mesh probe, then recommended settings.")
    p.add_argument("--env-out", metavar="FILE", help="write the recommended variables as a sourceable file")
    p.add_argument("--nccl-ras", metavar="FILE", help="read saved `ncclras -f json` output into the nccl.ras check "
                   "(dead, missing and lagging ranks of a running job)")
    p.add_argument("--nccl-debug", metavar="FILE", action="append", default=[],
                   help="read a saved NCCL_DEBUG=INFO capture into nccl.transport (repeatable)")
    _baseline_flags(p, "GOLDEN.json", "compare every node's versions, NCCL variables, interfaces, RDMA ports and "
                    "packages with a saved known-good run (baseline.drift warns; --strict fails)")

    b = sub.add_parser("bench", parents=[world, out], help="collective bandwidth/latency sweeps (nccl-tests semantics)")
    b.add_argument("--sizes", default="1M-64M", help="1M-1G (doubling), 1M-1G:4, 1K,64K,1M, 8M (default 1M-64M)")
    b.add_argument("--ops", default="all_reduce,all_gather",
                   help="comma list: all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,sendrecv or 'all'")
    b.add_argument("--dtype", default="float32", help="float32 | float16 | bfloat16 | int32 (default float32)")
    b.add_argument("--iters", default="20", help="timed iterations per size (default 20)")
    b.add_argument("--warmup", default="5", help="warm-up iterations per size (default 5)")
    b.add_argument("--in-place", action="store_true", help="in-place variants")
    b.add_argument("--check", action="store_true", help="verify results elementwise; wrong > 0 fails")
    b.add_argument("--min-busbw", metavar="GBPS", help="gate: fail if busbw at the gate size is below this")
    b.add_argument("--gate-size", metavar="SIZE", help="size the gates look at (default: the largest)")
    b.add_argument("--baseline", metavar="RUN.json", help="gate: fail on busbw regression against a saved run")
    b.add_argument("--tolerance", default="0.1", help="allowed relative regression against --baseline (0.1)")
    b.add_argument("--save-baseline", metavar="FILE", help="save this run's JSON as a baseline")
    b.add_argument("--nccl-capture", action="store_true",
                   help="on GPUs: capture NCCL's debug log, topology and graph dumps per host and check the transport")

    k = sub.add_parser("links", parents=[world, out], help="node-to-node bandwidth matrix; names slow links/nodes")
    k.add_argument("--size", default="64M", help="message size per transfer (default 64M)")
    k.add_argument("--iters", default="5", help="transfers per direction per pair (default 5)")
    k.add_argument("--rounds", default="auto", choices=["auto", "full", "quick", "scale"],
                   help="full: every pair (n-1 rounds); scale: one pairing + re-tests of slow pairs (<= 4 rounds); "
                        "quick: a few random rounds; auto: full below 16 nodes, scale from 16")
    k.add_argument("--min-gbps", help="gate: any link below this GB/s fails the run (links.min_gbps)")
    k.add_argument("--relative", default="0.5",
                   help="a link below this fraction of the typical link, and clearly set apart, is slow (0.5)")
    _baseline_flags(k, "RUN.json", "gate: fail on a link slower than the same link in a saved links run")
    k.add_argument("--seed", default="0",
                   help="quick/scale modes pair nodes at random from this seed (default 0: every run measures the "
                        "same pairs; vary it, e.g. --seed $(date +%%j), to cover other pairs across runs)")
    k.add_argument("--nccl-capture", action="store_true",
                   help="on GPUs: capture NCCL's debug log, topology and graph dumps per host and check the transport")
    k.add_argument("--tolerance", default="0.1", help="allowed relative slowdown against --baseline (0.1)")

    r = sub.add_parser("recommend", parents=[world, out, facts], help="print the recommended environment")
    r.add_argument("--format", default="text", choices=["text", "env", "json"],
                   help="env: 'export NAME=value' lines to source")
    r.add_argument("--env-out", metavar="FILE", help="write the recommended variables as a sourceable file")

    rp = sub.add_parser("report", help="render a saved run: terminal, --html, --junit, --markdown")
    rp.add_argument("run", metavar="RUN.json")
    rp.add_argument("--html", metavar="FILE")
    rp.add_argument("--junit", metavar="FILE")
    rp.add_argument("--markdown", metavar="FILE")
    rp.add_argument("--env-out", metavar="FILE")
    rp.add_argument("--prometheus", metavar="FILE", help="Prometheus text metrics of the saved run")
    rp.add_argument("--format", default="text", choices=["text", "labels"],
                    help="labels: kubectl commands that label (and taint) each node of the run (docs/deploy.md)")
    rp.add_argument("--quiet", action="store_true")

    e = sub.add_parser("env", parents=[facts], help="this node's facts (versions, GPUs, network, RDMA)")
    e.add_argument("--json", metavar="PATH", help="write the JSON report; '-' = stdout")
    return parser


def config_from_args(args: argparse.Namespace, env=None) -> Config:
    """Turn parsed flags into the one typed Config. Raises UsageError on any bad value. The launcher's world read
    here (this process's Placement) is kept on args as `_placement`, so the run reads it once."""
    env = os.environ if env is None else env
    cmd = args.command
    world_kw = {k: getattr(args, k, None) for k in ("nnodes", "node_rank", "nproc_per_node", "master_addr",
                                                     "master_port", "backend", "timeout")}
    world = build_world(**world_kw, env=env, token_file=getattr(args, "token_file", None))
    seat = placement_of(cmd, world, env)
    args._placement = seat  # a launcher's world contradicting the flags is a usage error, now
    _expand_paths(args, seat, env)
    output = OutputConfig(  # every command has the flags it accepts; getattr covers those it does not
        json_path=getattr(args, "json", None),
        quiet=bool(getattr(args, "quiet", False)),
        print_all=bool(getattr(args, "print_all", False)),
        strict=bool(getattr(args, "strict", False)),
        html=getattr(args, "html", None),
        junit=getattr(args, "junit", None),
        markdown=getattr(args, "markdown", None),
        env_out=getattr(args, "env_out", None),
        prometheus=getattr(args, "prometheus", None),
        format=getattr(args, "format", "text") if cmd == "report" else "text",
    )
    from .render.files import check_writable

    for flag in ("json", "html", "junit", "markdown", "env_out", "save_baseline", "prometheus"):
        path = getattr(args, flag, None)
        if path and path != "-":
            try:
                check_writable(path)
            except UsageError as exc:
                raise UsageError(f"--{flag.replace('_', '-')}: {exc}") from None
    code = getattr(args, "code", None)
    if code is not None and not os.path.exists(code):
        raise UsageError(f"--code {code}: no such file or directory")
    cfg = dict(command=cmd, world=world, output=output, code_path=code, paths=tuple(getattr(args, "path", []) or []))
    if cmd == "recommend":
        cfg["recommend_format"] = args.format
    if cmd == "report":
        if os.path.isdir(args.run):
            raise UsageError(f"{args.run}: is a directory, not a JSON report")
        if not os.path.isfile(args.run):
            raise UsageError(f"{args.run}: no such file")
        cfg["report_input"] = args.run
    if cmd == "bench":
        cfg["bench"] = bench_config_from_args(args)
    if cmd in ("preflight", "bench", "links"):
        cfg["nccl_diag"] = nccl_diag_config_from_args(args)
    if cmd in ("preflight", "links") and (args.baseline or args.save_baseline):
        cfg["baseline"] = baseline_config_from_args(args)
    if cmd == "links":
        from .units import parse_size

        cfg["links"] = LinksConfig(
            size=parse_size(args.size),
            iters=parse_int(args.iters, "--iters", 1, 100000),
            rounds=args.rounds,
            min_gbps=parse_float(args.min_gbps, "--min-gbps"),
            relative=parse_float(args.relative, "--relative"),
            seed=parse_int(args.seed, "--seed", 0, 2**31 - 1),
        )
    return Config(**cfg)


def nccl_diag_config_from_args(args: argparse.Namespace) -> NcclDiagConfig:
    ras, debug = getattr(args, "nccl_ras", None), tuple(getattr(args, "nccl_debug", None) or ())
    for flag, path in [("--nccl-ras", ras)] + [("--nccl-debug", d) for d in debug]:
        if path and not os.path.isfile(path):
            raise UsageError(f"{flag} {path}: no such file")
    return NcclDiagConfig(ras=ras, debug=debug, capture=bool(getattr(args, "nccl_capture", False)))


def baseline_config_from_args(args: argparse.Namespace) -> BaselineConfig:
    if args.baseline and not os.path.isfile(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file")
    tol = parse_float(getattr(args, "tolerance", None) or "0.1", "--tolerance")
    if tol >= 1:
        raise UsageError("--tolerance is a fraction: 0.1 means 10%")
    return BaselineConfig(path=args.baseline, save=args.save_baseline, tolerance=tol)


_WORLD_COMMANDS = ("preflight", "recommend", "bench", "links")
_PATH_FLAGS = ("json", "html", "junit", "markdown", "env_out", "save_baseline", "prometheus")


def placement_of(command: str, world, env):
    """This process's place in the job (agent.launchers) for commands that form a world; env and report only need
    it for %j/%n/%r in paths, so there a launcher's inconsistent variables are not an error."""
    from .agent.launchers import detect_placement

    if command in _WORLD_COMMANDS:
        return detect_placement(env, world)
    try:
        return detect_placement(env, world)
    except UsageError:
        return None


def _expand_paths(args: argparse.Namespace, placement, env) -> None:
    """%j %n %h %r in output paths, the same expansion on every process (so %n/%h/%r give distinct files)."""
    from .agent.launchers import job_id
    from .facts import hostname
    from .render.files import expand_path

    fields = {"j": placement.job_id if placement else job_id(env), "n": placement.node_rank if placement else 0,
              "r": placement.rank if placement else 0, "h": hostname()}
    for flag in _PATH_FLAGS:
        path = getattr(args, flag, None)
        if path and path != "-" and "%" in path:
            setattr(args, flag, expand_path(path, fields))
            if not hasattr(args, "_templates"):
                args._templates = {}
            args._templates[flag] = path


def bench_config_from_args(args: argparse.Namespace) -> BenchConfig:
    from .units import parse_size, parse_sizes

    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    known = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
    if ops == ("all",):
        ops = known
    bad = [o for o in ops if o not in known]
    if bad or not ops:
        raise UsageError(f"unknown op {', '.join(bad) or '(none)'}: choose from {', '.join(known)}")
    dtypes = ("float32", "float16", "bfloat16", "int32", "float64", "int8")
    if args.dtype not in dtypes:
        raise UsageError(f"unknown dtype {args.dtype!r}: choose from {', '.join(dtypes)}")
    if args.baseline and not os.path.isfile(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file")
    tol = parse_float(args.tolerance, "--tolerance")
    if tol >= 1:
        raise UsageError("--tolerance is a fraction: 0.1 means 10%")
    return BenchConfig(
        sizes=tuple(parse_sizes(args.sizes)),
        ops=ops,
        dtype=args.dtype,
        iters=parse_int(args.iters, "--iters", 1, 1_000_000),
        warmup=parse_int(args.warmup, "--warmup", 0, 1_000_000),
        in_place=args.in_place,
        check=args.check,
        min_busbw_gbps=parse_float(args.min_busbw, "--min-busbw"),
        gate_size=parse_size(args.gate_size) if args.gate_size else None,
        baseline=args.baseline,
        tolerance=tol,
        save_baseline=args.save_baseline,
    )


LOG_KEEP = 20  # runs whose logs are kept in the log directory


def log_dir(env=None) -> str:
    """$NCCLCHECK_LOG_DIR, else $XDG_STATE_HOME/ncclcheck, else ~/.local/state/ncclcheck: one predictable place."""
    env = os.environ if env is None else env
    if env.get("NCCLCHECK_LOG_DIR"):
        return env["NCCLCHECK_LOG_DIR"]
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "ncclcheck")


def _prune_logs(directory: str, keep: int = LOG_KEEP) -> None:
    """Keep the newest `keep` runs' logs (a run: ncclcheck-<stamp>-<pid>.log and its .d side directory)."""
    import shutil

    try:
        runs = sorted((n[:-4] for n in os.listdir(directory) if n.startswith("ncclcheck-") and n.endswith(".log")),
                      key=lambda n: os.path.getmtime(os.path.join(directory, n + ".log")))
    except OSError:
        return
    for name in runs[:-keep] if len(runs) > keep else []:
        if _in_flight(directory, name):
            continue
        with contextlib.suppress(OSError):
            os.remove(os.path.join(directory, name + ".log"))
        shutil.rmtree(os.path.join(directory, name + ".d"), ignore_errors=True)


def _in_flight(directory: str, name: str) -> bool:
    """Is this run still going (its process is alive and its log changed within a day)? Many ncclcheck processes
    share one log directory when nodes share a home or a host runs several (a lab of 16 namespace hosts): pruning
    by count alone deleted the side files of runs still writing them, which then failed."""
    pid = name.rsplit("-", 1)[-1]
    try:
        if not pid.isdigit() or int(pid) <= 1 or time.time() - os.path.getmtime(
                os.path.join(directory, name + ".log")) > 86400:
            return False
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except (OSError, OverflowError):
        return False
    return True


def _setup_logging() -> str:
    """Everything detailed (tracebacks, torch's native noise) goes to this run's log file, not the console.

    The file is created on the first record only (delay=True) and removed at exit when nothing was written, so
    a clean run leaves nothing behind; the last LOG_KEEP runs are kept."""
    directory = log_dir()
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        directory = tempfile.gettempdir()
    _prune_logs(directory, LOG_KEEP - 1)
    path = os.path.join(directory, f"ncclcheck-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if os.environ.get("NCCLCHECK_DEBUG") else logging.WARNING)
    return path


def has_content(path: Optional[str]) -> bool:
    """Does the log hold anything (so that printing its path points the user at details)?"""
    try:
        return bool(path) and os.path.getsize(path) > 0
    except OSError:
        return False


def _finish_logging(path: str) -> None:
    """Remove this run's log (and side directory) when nothing was written to them."""
    for h in list(logging.getLogger().handlers):
        if getattr(h, "baseFilename", None) == os.path.abspath(path):
            h.close()
            logging.getLogger().removeHandler(h)
    side = path[:-4] + ".d"
    if os.path.isdir(side):
        for name in os.listdir(side):
            f = os.path.join(side, name)
            if os.path.isfile(f) and not has_content(f):
                with contextlib.suppress(OSError):
                    os.remove(f)
        with contextlib.suppress(OSError):
            os.rmdir(side)
    if os.path.exists(path) and not has_content(path) and not os.path.isdir(side):
        with contextlib.suppress(OSError):
            os.remove(path)


def _run(config: Config, log_path: str, observer=None, placement=None):
    from . import api

    progress = {"observer": observer} if observer is not None else {}  # the API's own defaults otherwise
    if config.command == "preflight":
        return api.run_preflight(config, placement=placement, **progress)
    if config.command == "recommend":
        return api.run_recommend(config, placement=placement)
    if config.command == "env":
        return api.run_env(config)
    if config.command == "bench":
        return api.run_bench(config, placement=placement, **progress)
    if config.command == "links":
        return api.run_links(config, placement=placement, **progress)
    if config.command == "report":
        import json

        from .model import Report
        from .render.validate import schema_problem

        try:
            with open(config.report_input, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{config.report_input}: cannot read it ({exc})") from None
        except ValueError as exc:
            raise UsageError(f"{config.report_input}: not JSON ({exc})") from None
        problem = schema_problem(doc)
        if problem:
            raise UsageError(f"{config.report_input}: not an ncclcheck report (schema ncclcheck.report/1): "
                             f"{problem}")
        try:
            return Report.from_json(doc)
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{config.report_input}: not an ncclcheck JSON report ({exc})") from None
    raise UsageError(f"'{config.command}' is not available yet in this version")


@dataclass(frozen=True)
class Seat:
    """What this process prints and writes. One report per job: global rank 0 (node 0's agent in launcher mode)
    prints the full report; every other node's leader prints one line; other ranks print nothing."""

    full: bool  # the full report (or, with --quiet, the verdict)
    line: bool  # one line: node, verdict, where the full report is
    writes: bool  # --json/--html/... files (node leaders; every rank when a path has %r)
    launcher: str = "ncclcheck"
    rank: int = 0
    node_rank: int = 0


def seat_of(config: Config, placement, per_rank_paths: bool = False) -> Seat:
    out = config.output
    if placement is None or config.command in ("env", "report"):
        leader = placement is None or placement.node_leader
        return Seat(full=leader, line=False, writes=leader or per_rank_paths,
                    launcher=placement.launcher if placement else "ncclcheck")
    full = placement.rank == 0 or out.print_all
    if config.command == "recommend" and config.recommend_format != "text":
        full = placement.node_leader or out.print_all  # per-node data on stdout (`> nccl.env` on every node)
    return Seat(full=full, line=not full and placement.node_leader and not out.quiet,
                writes=placement.node_leader or per_rank_paths, launcher=placement.launcher, rank=placement.rank,
                node_rank=placement.node_rank)


def _observer(config: Config, seat: Seat):
    """Live progress on the console that prints the full report, only when it is a terminal (render/progress.py)."""
    if not seat.full or config.output.json_path == "-":
        return None
    from .render.progress import make_observer

    return make_observer(sys.stdout, os.environ, seat.launcher)


def _one_line(config: Config, report, seat: Seat) -> str:
    """The line a non-zero node prints: who it is, its verdict and exit code, where the full report is."""
    from .facts import hostname

    me = next((n.hostname for n in report.nodes if n.node_rank == seat.node_rank), None) or hostname()
    first = next((n.hostname for n in report.nodes if n.node_rank == 0), None)
    where = "global rank 0's console" + (f" (node 0, {first})" if first else " (node 0)")
    text = (f"ncclcheck {report.command}: node {seat.node_rank} ({me}) rank {seat.rank}: {report.status.value.upper()}"
            f", exit {report.exit_code}; full report on {where}")
    if seat.writes and config.output.json_path and config.output.json_path != "-":
        text += f"; JSON in {config.output.json_path}"
    root = report.root_cause() if report.status.value == "fail" else None
    if root is not None:  # a world that did not form has no shared report: say here what went wrong from this side
        text += f"; root cause{'' if root.node is None else f' on node {root.node}'}: [{root.id}] {root.summary}"
    return text


def _emit(config: Config, report, log_path: str, seat: Optional[Seat] = None) -> None:
    from .render import console as view
    from .render.json import render_json

    seat = seat or Seat(full=report.prints, line=False, writes=report.prints)
    if not report.log_path and has_content(log_path):  # printed only when it holds the details referred to
        report.log_path = log_path
    out = config.output
    json_to_stdout = out.json_path == "-" and seat.full
    if seat.writes or json_to_stdout:
        if out.json_path:
            text = render_json(report)
            if json_to_stdout:
                sys.stdout.write(text)
                sys.stdout.flush()
            elif out.json_path != "-":
                from .render.files import write_atomic

                write_atomic(out.json_path, text)
        from .render.files import write_outputs

        write_outputs(report, html=out.html, markdown=out.markdown, junit=out.junit, env_out=out.env_out)
        if out.prometheus:
            from .render.files import write_atomic
            from .render.prometheus import render_prometheus

            write_atomic(out.prometheus, render_prometheus(report))
    if out.format == "labels" and seat.full:
        from .render.labels import render_labels

        sys.stdout.write(render_labels(report))
        return  # stdout is the script; nothing else may be mixed into it
    machine_stdout = out.json_path == "-" or (config.command == "recommend" and config.recommend_format != "text")
    term = view.make_console(sys.stderr if machine_stdout else sys.stdout, os.environ, seat.launcher)
    if not seat.full:
        if seat.line:
            term.print(_one_line(config, report, seat), markup=False, highlight=False, soft_wrap=True)
        return
    if config.command == "recommend" and config.recommend_format in ("env", "json"):
        if config.recommend_format == "env":
            from .render.envfile import render_envfile

            sys.stdout.write(render_envfile(report))
        else:
            import json

            sys.stdout.write(json.dumps([r.to_json() for r in report.recommendations], indent=2) + "\n")
        bad = [c for c in report.checks if c.status.value in ("fail", "warn")]
        for c in bad:
            term.print(f"# {c.status.value}: [{c.id}] {c.summary}" + (f" -- fix: {c.fix}" if c.fix else ""),
                       markup=False, highlight=False)
        return
    if config.command == "env":
        for part in view.render_env(report):
            term.print(part)
        return
    if out.quiet:
        term.print(view.verdict(report))
        return
    for part in view.render_report(report):
        term.print(part)


@contextlib.contextmanager
def _native_stderr_to(log_path: str) -> Iterator[None]:
    """torch's C++ code (c10d, gloo, NCCL) writes to fd 2 whenever it likes ("[c10d] The hostname of the client
    socket cannot be retrieved..."): point fd 2 at the run's log for the whole run, in every mode (spawned ranks
    inherit it), while Python's sys.stderr keeps writing to the console through a duplicate of the old fd 2."""
    try:
        saved = os.dup(2)
        target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        yield
        return
    old_stderr = sys.stderr
    console = None
    try:
        sys.stderr.flush()
    except (AttributeError, ValueError, OSError):
        pass
    if old_stderr is sys.__stderr__ and old_stderr is not None:
        console = os.fdopen(os.dup(saved), "w", buffering=1, encoding=getattr(old_stderr, "encoding", None) or
                            "utf-8", errors="backslashreplace")
        sys.stderr = console
    os.dup2(target, 2)
    os.close(target)
    logging.captureWarnings(True)  # torch's Python warnings belong in the log too
    try:
        yield
    finally:
        logging.captureWarnings(False)
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        if console is not None:
            sys.stderr = old_stderr
            console.close()


def _say(line: str) -> None:
    """A line on stderr before any report exists (usage error, interrupted): once per node, not once per rank."""
    from .agent.launchers import speaks_for_node

    if speaks_for_node(os.environ):
        print(line, file=sys.stderr)


def main(argv: Optional[list] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        config = config_from_args(args)
    except UsageError as exc:
        _say(f"ncclcheck: error: {exc}")
        return EXIT_USAGE
    log_path = _setup_logging()
    with _native_stderr_to(log_path):
        return _run_and_emit(args, config, log_path)


def _run_and_emit(args: argparse.Namespace, config: Config, log_path: str) -> int:
    try:
        return _main(args, config, log_path)
    finally:
        _finish_logging(log_path)


def _main(args: argparse.Namespace, config: Config, log_path: str) -> int:
    from .render.files import per_rank

    try:
        placement = getattr(args, "_placement", None) or placement_of(config.command, config.world, os.environ)
        templates = getattr(args, "_templates", {})
        seat = seat_of(config, placement, any(per_rank(t) for t in templates.values()))
        observer = _observer(config, seat)
        try:
            report = _run(config, log_path, observer, placement)
        finally:
            if observer is not None:
                observer.stop()  # a bar left running would garble the report (or the error) printed next
        _emit(config, report, log_path, seat)
        if report.interrupted:  # the partial report is written; the exit code says it was interrupted
            _say("ncclcheck: interrupted")
            return EXIT_INTERRUPTED
        return report.exit_code
    except UsageError as exc:
        _say(f"ncclcheck: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say("ncclcheck: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place that turns a bug into exit 3 with the log's path
        log.exception("internal error")
        print(f"ncclcheck: internal error: {type(exc).__name__}: {exc} -- this is a bug; details in {log_path}",
              file=sys.stderr)
        return EXIT_INTERNAL
