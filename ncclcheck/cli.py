"""Command line: argv -> Config (built once), run the API, render, exit. The only module that exits.

Exit codes (DESIGN.md): 0 passed (warnings allowed), 1 a check failed / a gate missed / no world, 2 usage error,
3 internal error (a bug: the log's path is printed), 130 interrupted. Importing this module must not import torch:
`ncclcheck --help` and usage errors stay fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from typing import Optional

from . import __version__
from .config import (
    BenchConfig,
    Config,
    LinksConfig,
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
    g.add_argument("--master-addr", help="address of node rank 0")
    g.add_argument("--master-port", help="rendezvous port on node rank 0 (default 29500)")
    g.add_argument("--backend", help="auto | nccl | gloo (default auto: nccl with GPUs, else gloo)")
    g.add_argument("--timeout", help="bound in seconds on every phase (default 60)")
    return p


def _output_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("--json", metavar="PATH", help="write the JSON report (schema ncclcheck.report/1); '-' = stdout")
    g.add_argument("--quiet", action="store_true", help="print only the verdict")
    g.add_argument("--strict", action="store_true", help="warnings fail (exit 1)")
    g.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per check)")
    g.add_argument("--markdown", metavar="FILE", help="write Markdown (e.g. $GITHUB_STEP_SUMMARY)")
    return p


def _facts_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--code", metavar="PATH", help="code to hash and compare across nodes (default: working dir)")
    p.add_argument("--path", metavar="P", action="append", default=[],
                   help="a path that must exist with the same content on every node (repeatable)")
    return p


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

    k = sub.add_parser("links", parents=[world, out], help="node-to-node bandwidth matrix; names slow links/nodes")
    k.add_argument("--size", default="64M", help="message size per transfer (default 64M)")
    k.add_argument("--iters", default="5", help="transfers per direction per pair (default 5)")
    k.add_argument("--rounds", default="auto", choices=["auto", "full", "quick", "scale"],
                   help="full: every pair (n-1 rounds); scale: one pairing + re-tests of slow pairs (<= 4 rounds); "
                        "quick: a few random rounds; auto: full below 16 nodes, scale from 16")
    k.add_argument("--min-gbps", help="gate: a link below this GB/s is slow")
    k.add_argument("--relative", default="0.5",
                   help="a link below this fraction of the typical node's best link is slow (0.5)")

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
    rp.add_argument("--quiet", action="store_true")

    e = sub.add_parser("env", parents=[facts], help="this node's facts (versions, GPUs, network, RDMA)")
    e.add_argument("--json", metavar="PATH", help="write the JSON report; '-' = stdout")
    return parser


def config_from_args(args: argparse.Namespace, env=None) -> Config:
    """Turn parsed flags into the one typed Config. Raises UsageError on any bad value."""
    env = os.environ if env is None else env
    cmd = args.command
    world_kw = {k: getattr(args, k, None) for k in ("nnodes", "node_rank", "nproc_per_node", "master_addr",
                                                     "master_port", "backend", "timeout")}
    world = build_world(**world_kw, env=env)
    output = OutputConfig(  # every command has the flags it accepts; getattr covers those it does not
        json_path=getattr(args, "json", None),
        quiet=bool(getattr(args, "quiet", False)),
        strict=bool(getattr(args, "strict", False)),
        html=getattr(args, "html", None),
        junit=getattr(args, "junit", None),
        markdown=getattr(args, "markdown", None),
        env_out=getattr(args, "env_out", None),
    )
    from .render.files import check_writable

    for flag in ("json", "html", "junit", "markdown", "env_out", "save_baseline"):
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
        if not os.path.isfile(args.run):
            raise UsageError(f"{args.run}: no such file")
        cfg["report_input"] = args.run
    if cmd == "bench":
        cfg["bench"] = bench_config_from_args(args)
    if cmd == "links":
        from .units import parse_size

        cfg["links"] = LinksConfig(
            size=parse_size(args.size),
            iters=parse_int(args.iters, "--iters", 1, 100000),
            rounds=args.rounds,
            min_gbps=parse_float(args.min_gbps, "--min-gbps"),
            relative=parse_float(args.relative, "--relative"),
        )
    return Config(**cfg)


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


def _setup_logging() -> str:
    """Everything detailed (tracebacks, torch's native noise) goes to a per-run log file, not the console."""
    log_dir = os.environ.get("NCCLCHECK_LOG_DIR") or tempfile.gettempdir()
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, f"ncclcheck-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if os.environ.get("NCCLCHECK_DEBUG") else logging.INFO)
    return path


def _run(config: Config, log_path: str):
    from . import api

    if config.command == "preflight":
        return api.run_preflight(config)
    if config.command == "recommend":
        return api.run_recommend(config)
    if config.command == "env":
        return api.run_env(config)
    if config.command == "bench":
        return api.run_bench(config)
    if config.command == "links":
        return api.run_links(config)
    if config.command == "report":
        import json

        from .model import Report

        try:
            with open(config.report_input, encoding="utf-8") as f:
                return Report.from_json(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{config.report_input}: not an ncclcheck JSON report ({exc})") from None
    raise UsageError(f"'{config.command}' is not available yet in this version")


def _emit(config: Config, report, log_path: str) -> None:
    from rich.console import Console

    from .render import console as view
    from .render.json import render_json

    if not report.prints:  # another rank of this node prints and writes the same report
        return
    report.log_path = report.log_path or log_path
    out = config.output
    json_to_stdout = out.json_path == "-"
    if out.json_path:
        text = render_json(report)
        if json_to_stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            from .render.files import write_atomic

            write_atomic(out.json_path, text)
    term = Console(stderr=json_to_stdout or (config.command == "recommend" and config.recommend_format != "text"),
                   highlight=False)
    from .render.files import write_outputs

    write_outputs(report, html=out.html, markdown=out.markdown, junit=out.junit, env_out=out.env_out)
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


def main(argv: Optional[list] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        config = config_from_args(args)
    except UsageError as exc:
        print(f"ncclcheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    log_path = _setup_logging()
    try:
        report = _run(config, log_path)
        _emit(config, report, log_path)
        return report.exit_code
    except UsageError as exc:
        print(f"ncclcheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ncclcheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place that turns a bug into exit 3 with the log's path
        log.exception("internal error")
        print(f"ncclcheck: internal error: {type(exc).__name__}: {exc} -- this is a bug; details in {log_path}",
              file=sys.stderr)
        return EXIT_INTERNAL
