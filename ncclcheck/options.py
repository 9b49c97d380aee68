"""Every command's options, written once: the argparse parsers the CLI uses and the keyword arguments the Python
API takes are the same flags, and both become the one Config here. Choices and defaults come from the tables and
the Config classes (bench/ops.py's ops and dtypes, links/schedule.py's rounds, render/formats.py's outputs,
config.py's BenchConfig, LinksConfig and BaselineConfig), never from literals of their own."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping
from typing import Any, Optional

from .config import (
    BACKENDS,
    DEFAULT_MASTER_PORT,
    DEFAULT_TIMEOUT_S,
    BaselineConfig,
    BenchConfig,
    Budget,
    Config,
    LinksConfig,
    NcclDiagConfig,
    OutputConfig,
    build_world,
    parse_float,
    parse_int,
)
from .errors import UsageError
from .render.formats import FORMATS, PATH_HELP
from .version import __version__

COMMANDS = ("preflight", "bench", "links", "recommend", "report", "env")
WORLD_COMMANDS = ("preflight", "recommend", "bench", "links")
_BENCH, _LINKS, _BASE = BenchConfig(), LinksConfig(), BaselineConfig()


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting itself; the hint
    names the subcommand's own --help."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_args(self, args=None, namespace=None):  # noqa: D401 - argparse API
        ns, extras = self.parse_known_args(args, namespace)
        if extras:  # argparse reports these from the top parser: point at the subcommand's help instead
            prog = f"{self.prog} {ns.command}" if getattr(ns, "command", None) else self.prog
            raise UsageError(f"unrecognized arguments: {' '.join(extras)} (see '{prog} --help')")
        return ns


def _world_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("world (like torchrun; fall back to NCCLCHECK_* then MASTER_ADDR/MASTER_PORT/NODE_RANK)")
    g.add_argument("--nnodes", help="number of nodes (default 1: standalone on this machine)")
    g.add_argument("--node-rank", help="this node's rank, 0..nnodes-1")
    g.add_argument("--nproc-per-node", help="ranks per node (default: one per GPU, 2 CPU ranks without GPUs)")
    g.add_argument("--master-addr", help="address of node rank 0 (host, or host:port like an rdzv endpoint)")
    g.add_argument("--master-port", help=f"rendezvous port on node rank 0 (default {DEFAULT_MASTER_PORT})")
    g.add_argument("--backend", help=f"{' | '.join(BACKENDS)} (default auto: nccl with GPUs, else gloo)")
    g.add_argument("--timeout", help="hang bound in seconds: the longest any single wait (master probe, join, mesh "
                                     "probe, each collective) may last before its cause is named; never cuts a "
                                     f"sweep short (default {DEFAULT_TIMEOUT_S:g})")


def _output_flags(p: argparse.ArgumentParser, command: str) -> None:
    """The one output table's flags (every command), plus the console flags of the commands that have them."""
    g = p.add_argument_group("output", PATH_HELP)
    for fmt in FORMATS.values():
        g.add_argument(fmt.flag, metavar="PATH" if fmt.stdout else "FILE", help=fmt.help)
    if command == "env":
        return
    g.add_argument("--quiet", action="store_true",
                   help="print only the verdict, on global rank 0 (the other processes print nothing)")
    if command == "report":
        return
    g.add_argument("--print-all", action="store_true",
                   help="every process prints its full report (default: global rank 0 prints it, every other node "
                        "one line)")
    g.add_argument("--strict", action="store_true", help="warnings fail (exit 1)")


def _facts_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--code", metavar="PATH", help="code to hash and compare across nodes (default: working dir)")
    p.add_argument("--path", metavar="P", action="append", default=[],
                   help="a path that must exist with the same content on every node (repeatable)")


def _baseline_flags(p: argparse.ArgumentParser, metavar: str, what: str, tolerance: Optional[str] = None) -> None:
    p.add_argument("--baseline", metavar=metavar, help=what)
    if tolerance:
        p.add_argument("--tolerance", help=f"{tolerance} ({_BASE.tolerance:g})")
    p.add_argument("--save-baseline", metavar="FILE", help="save this run's JSON as a baseline")


def _capture_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nccl-capture", action="store_true",
                   help="on GPUs: capture NCCL's debug log, topology and graph dumps per host and check the transport")


def _bench_flags(b: argparse.ArgumentParser) -> None:
    from .bench.ops import DTYPES, OPS
    from .units import describe_sizes

    b.add_argument("--sizes", help=f"1M-1G (doubling), 1M-1G:4, 1K,64K,1M, 8M (default {describe_sizes(_BENCH.sizes)})")
    b.add_argument("--ops", help=f"comma list: {','.join(OPS)} or 'all' (default {','.join(_BENCH.ops)})")
    b.add_argument("--dtype", help=f"{' | '.join(DTYPES)} (default {_BENCH.dtype})")
    b.add_argument("--iters", help=f"timed iterations per size (default {_BENCH.iters})")
    b.add_argument("--warmup", help=f"warm-up iterations per size (default {_BENCH.warmup})")
    b.add_argument("--in-place", action="store_true", help="in-place variants")
    b.add_argument("--check", action="store_true", help="verify results elementwise; wrong > 0 fails")
    b.add_argument("--min-busbw", metavar="GBPS", help="gate: fail if busbw at the gate size is below this")
    b.add_argument("--gate-size", metavar="SIZE", help="size the gates look at (default: the largest)")
    _baseline_flags(b, "RUN.json", "gate: fail on busbw regression against a saved run",
                    "allowed relative regression against --baseline")
    _capture_flag(b)


def _links_flags(k: argparse.ArgumentParser) -> None:
    from .links.schedule import ROUNDS, SCALE_FROM
    from .units import format_size_short

    k.add_argument("--size", help=f"message size per transfer (default {format_size_short(_LINKS.size)})")
    k.add_argument("--iters", help=f"transfers per direction per pair (default {_LINKS.iters})")
    k.add_argument("--rounds", choices=ROUNDS,
                   help="full: every pair (n-1 rounds); scale: one pairing + re-tests of slow pairs (<= 4 rounds); "
                        f"quick: a few random rounds; auto: full below {SCALE_FROM} nodes, scale from {SCALE_FROM} "
                        f"(default {_LINKS.rounds})")
    k.add_argument("--min-gbps", help="gate: any link below this GB/s fails the run (links.min_gbps)")
    k.add_argument("--relative",
                   help="a link below this fraction of the typical link, and clearly set apart, is slow "
                        f"({_LINKS.relative:g})")
    _baseline_flags(k, "RUN.json", "gate: fail on a link slower than the same link in a saved links run",
                    "allowed relative slowdown against --baseline")
    k.add_argument("--seed",
                   help=f"quick/scale modes pair nodes at random from this seed (default {_LINKS.seed}: every run "
                        "measures the same pairs; vary it, e.g. --seed $(date +%%j), to cover other pairs across runs)")
    _capture_flag(k)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ncclcheck", description="Can these nodes train together? Which node, interface or "
                     "setting is wrong? Then: are the collectives' numbers normal?")
    parser.add_argument("--version", action="version", version=f"ncclcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("preflight", help="checks before a job: node, network, world",
                       description="Node-local checks, then (multi-node) world formation, cross-node checks and "
                                   "a full-mesh probe, then recommended settings.")
    _world_flags(p)
    _output_flags(p, "preflight")
    _facts_flags(p)
    p.add_argument("--nccl-ras", metavar="FILE", help="read saved `ncclras -f json` output into the nccl.ras check "
                   "(dead, missing and lagging ranks of a running job)")
    p.add_argument("--nccl-debug", metavar="FILE", action="append", default=[],
                   help="read a saved NCCL_DEBUG=INFO capture into nccl.transport (repeatable)")
    _baseline_flags(p, "GOLDEN.json", "compare every node's versions, NCCL variables, interfaces, RDMA ports and "
                    "packages with a saved known-good run (baseline.drift warns; --strict fails)")

    b = sub.add_parser("bench", help="collective bandwidth/latency sweeps (nccl-tests semantics)")
    _world_flags(b)
    _output_flags(b, "bench")
    _bench_flags(b)

    k = sub.add_parser("links", help="node-to-node bandwidth matrix; names slow links/nodes")
    _world_flags(k)
    _output_flags(k, "links")
    _links_flags(k)

    r = sub.add_parser("recommend", help="print the recommended environment")
    _world_flags(r)
    _output_flags(r, "recommend")
    _facts_flags(r)
    r.add_argument("--format", default="text", choices=["text", "env", "json"],
                   help="env: 'export NAME=value' lines to source")

    rp = sub.add_parser("report", help="render a saved run: terminal, --html, --junit, --markdown, ...",
                        description="Render a saved run (RUN.json, written by --json) again, to the terminal and to "
                                    "any of the output files.")
    rp.add_argument("run", metavar="RUN.json")
    _output_flags(rp, "report")
    rp.add_argument("--format", default="text", choices=["text", "labels"],
                    help="labels: kubectl commands that label (and taint) each node of the run (docs/deploy.md)")

    e = sub.add_parser("env", help="this node's facts (versions, GPUs, network, RDMA)")
    _output_flags(e, "env")
    _facts_flags(e)
    return parser


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand."""
    for action in parser._subparsers._group_actions:  # argparse keeps subparsers here; there is no public API
        if command in action.choices:
            return action.choices[command]
    raise KeyError(command)


def options_of(command: str) -> dict[str, Any]:
    """The command's options (its flags' keyword names) with their unset values: what the Python API accepts."""
    sub = subparser(build_parser(), command)
    return {a.dest: a.default for a in sub._actions if a.dest != "help" and a.option_strings}


def namespace_for(command: str, options: Mapping[str, Any], api_name: str) -> argparse.Namespace:
    """The Namespace the CLI would have parsed for `command` with these keyword arguments (TypeError on a keyword
    the command does not have, as any Python function)."""
    known = options_of(command)
    unknown = sorted(set(options) - set(known) - ({"run"} if command == "report" else set()))
    if unknown:
        raise TypeError(f"{api_name}() got an unexpected keyword argument {unknown[0]!r} (its keywords are "
                        f"`ncclcheck {command}`'s flags: {', '.join(sorted(known))})")
    return argparse.Namespace(command=command, **{**known, **dict(options)})


def config_from_args(args: argparse.Namespace, env=None, started: Optional[float] = None) -> Config:
    """Turn parsed flags (or the API's keyword arguments, as a Namespace) into the one typed Config, with the run's
    Budget clocked from `started` (time.monotonic() when the process started). Raises UsageError on any bad
    value."""
    env = os.environ if env is None else env
    cmd = args.command
    world_kw = {k: _text(getattr(args, k, None)) for k in ("nnodes", "node_rank", "nproc_per_node", "master_addr",
                                                            "master_port", "backend", "timeout")}
    world = build_world(**world_kw, env=env)
    seat = placement_of(cmd, world, env)  # a launcher's world contradicting the flags is a usage error, now
    files = _files(args)
    _expand_paths(args, files, seat, env)
    output = OutputConfig(  # every command has the flags it accepts; getattr covers those it does not
        files=files,
        quiet=bool(getattr(args, "quiet", False)),
        print_all=bool(getattr(args, "print_all", False)),
        strict=bool(getattr(args, "strict", False)),
        format=getattr(args, "format", None) or "text" if cmd == "report" else "text",
    )
    _check_paths(files, getattr(args, "save_baseline", None))
    code = getattr(args, "code", None)
    if code is not None and not os.path.exists(code):
        raise UsageError(f"--code {code}: no such file or directory")
    cfg: dict[str, Any] = dict(command=cmd, world=world, output=output, code_path=code,
                               paths=_strings(getattr(args, "path", None)),
                               budget=Budget(world.timeout_s, started if started is not None else time.monotonic()))
    if cmd == "recommend":
        cfg["recommend_format"] = args.format or "text"
    if cmd == "report":
        if not args.run:
            raise UsageError("report needs the saved run's path (RUN.json)")
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
        cfg["links"] = links_config_from_args(args)
    return Config(**cfg)


def _text(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _strings(value: Any) -> tuple:
    """A repeatable flag's values: a list from argparse, or one string or any iterable from the API."""
    if value is None:
        return ()
    return (value,) if isinstance(value, (str, os.PathLike)) else tuple(value)


def _files(args: argparse.Namespace) -> dict[str, str]:
    """{format: path} for every output flag given (render/formats.py)."""
    files = {}
    for name, fmt in FORMATS.items():
        path = getattr(args, fmt.dest, None)
        if path is None:
            continue
        path = os.fspath(path)
        if path == "-" and not fmt.stdout:
            raise UsageError(f"{fmt.flag} cannot go to stdout: give a file path")
        files[name] = path
    return files


def _check_paths(files: Mapping[str, str], save_baseline: Optional[str]) -> None:
    """Every output path is writable before anything runs: a typo is exit 2 in a second, not a lost report."""
    from .render.files import check_writable

    flags = [(FORMATS[name].flag, path) for name, path in files.items()] + [("--save-baseline", save_baseline)]
    for flag, path in flags:
        if path and path != "-":
            try:
                check_writable(path)
            except UsageError as exc:
                raise UsageError(f"{flag}: {exc}") from None


def nccl_diag_config_from_args(args: argparse.Namespace) -> NcclDiagConfig:
    ras, debug = getattr(args, "nccl_ras", None), _strings(getattr(args, "nccl_debug", None))
    for flag, path in [("--nccl-ras", ras)] + [("--nccl-debug", d) for d in debug]:
        if path and not os.path.isfile(path):
            raise UsageError(f"{flag} {path}: no such file")
    return NcclDiagConfig(ras=ras, debug=debug, capture=bool(getattr(args, "nccl_capture", False)))


def _tolerance(args: argparse.Namespace) -> float:
    tol = parse_float(_text(getattr(args, "tolerance", None)), "--tolerance")
    if tol is None:
        return _BASE.tolerance
    if tol >= 1:
        raise UsageError("--tolerance is a fraction: 0.1 means 10%")
    return tol


def baseline_config_from_args(args: argparse.Namespace) -> BaselineConfig:
    if args.baseline and not os.path.isfile(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file")
    return BaselineConfig(path=args.baseline, save=args.save_baseline, tolerance=_tolerance(args))


def placement_of(command: str, world, env):
    """This process's place in the job (agent.launchers) for commands that form a world; env and report only need
    it for %j/%n/%r in paths, so there a launcher's inconsistent variables are not an error."""
    from .agent.launchers import detect_placement

    if command in WORLD_COMMANDS:
        return detect_placement(env, world)
    try:
        return detect_placement(env, world)
    except UsageError:
        return None


def _expand_paths(args: argparse.Namespace, files: dict, placement, env) -> None:
    """%j %n %h %r in output paths, the same expansion on every process (so %n/%h/%r give distinct files). The
    templates stay on args._templates: the CLI decides from them whether every rank writes."""
    from .agent.launchers import job_id
    from .facts import hostname
    from .render.files import expand_path

    fields = {"j": placement.job_id if placement else job_id(env), "n": placement.node_rank if placement else 0,
              "r": placement.rank if placement else 0, "h": hostname()}
    templates = {}
    for name, path in list(files.items()):
        if path != "-" and "%" in path:
            files[name] = expand_path(path, fields)
            templates[name] = path
    save = getattr(args, "save_baseline", None)
    if save and "%" in save:
        args.save_baseline = expand_path(save, fields)
        templates["save_baseline"] = save
    if templates:
        args._templates = templates


def _sizes(value: Any) -> tuple:
    from .units import parse_sizes

    if value is None:
        return _BENCH.sizes
    if isinstance(value, str):
        return tuple(parse_sizes(value))
    items = [value] if isinstance(value, int) else list(value)
    if not items or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in items):
        raise UsageError(f"--sizes {value!r}: expected the sizes grammar (e.g. '1M-64M') or positive byte counts")
    return tuple(sorted(set(items)))


def _ops(value: Any) -> tuple:
    """--ops: names from the op table (bench/ops.py) or 'all', as a comma list or any iterable of names."""
    from .bench.ops import OPS

    if value is None:
        return _BENCH.ops
    items = [o.strip() for o in (value.split(",") if isinstance(value, str) else value) if str(o).strip()]
    ops = tuple(OPS) if items == ["all"] else tuple(dict.fromkeys(items))
    bad = [o for o in ops if o not in OPS]
    if bad or not ops:
        raise UsageError(f"unknown op {', '.join(bad) or '(none)'}: choose from {', '.join(OPS)} or 'all'")
    return ops


def _dtype(value: Any) -> str:
    from .bench.ops import DTYPES

    if value is None:
        return _BENCH.dtype
    if value not in DTYPES:
        raise UsageError(f"unknown dtype {value!r}: choose from {', '.join(DTYPES)}")
    return value


def bench_config_from_args(args: argparse.Namespace) -> BenchConfig:
    from .units import parse_size

    ops, dtype = _ops(args.ops), _dtype(args.dtype)
    if args.baseline and not os.path.isfile(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file")
    iters, warmup = parse_int(_text(args.iters), "--iters", 1, 1_000_000), parse_int(_text(args.warmup), "--warmup",
                                                                                     0, 1_000_000)
    gate = args.gate_size
    return BenchConfig(
        sizes=_sizes(args.sizes),
        ops=ops,
        dtype=dtype,
        iters=_BENCH.iters if iters is None else iters,
        warmup=_BENCH.warmup if warmup is None else warmup,
        in_place=bool(args.in_place),
        check=bool(args.check),
        min_busbw_gbps=parse_float(_text(args.min_busbw), "--min-busbw"),
        gate_size=None if gate is None else gate if isinstance(gate, int) else parse_size(gate),
        baseline=args.baseline,
        tolerance=_tolerance(args),
        save_baseline=args.save_baseline,
    )


def links_config_from_args(args: argparse.Namespace) -> LinksConfig:
    from .links.schedule import ROUNDS
    from .units import parse_size

    size = args.size if isinstance(args.size, int) else parse_size(args.size) if args.size is not None else None
    iters = parse_int(_text(args.iters), "--iters", 1, 100000)
    seed = parse_int(_text(args.seed), "--seed", 0, 2**31 - 1)
    relative = parse_float(_text(args.relative), "--relative")
    if args.rounds is not None and args.rounds not in ROUNDS:
        raise UsageError(f"--rounds must be one of {', '.join(ROUNDS)}, got {args.rounds!r}")
    return LinksConfig(
        size=_LINKS.size if size is None else size,
        iters=_LINKS.iters if iters is None else iters,
        rounds=args.rounds or _LINKS.rounds,
        min_gbps=parse_float(_text(args.min_gbps), "--min-gbps"),
        relative=_LINKS.relative if relative is None else relative,
        seed=_LINKS.seed if seed is None else seed,
    )


def api_config(command: str, options: Mapping[str, Any], api_name: str, env=None) -> Config:
    """The Config for a Python-API call: keyword arguments are the command's flags (`run_bench(sizes="1M")`)."""
    return config_from_args(namespace_for(command, options, api_name), env=env)


def flags_of(command: str) -> set:
    """Every flag the command accepts (for docs tests: the README names only flags that exist)."""
    sub = subparser(build_parser(), command)
    return {s for a in sub._actions for s in a.option_strings}


__all__ = ["COMMANDS", "api_config", "build_parser", "config_from_args", "flags_of", "options_of", "subparser"]
