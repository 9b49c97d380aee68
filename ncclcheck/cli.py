"""Command line: argv -> Config (built once), run the API, render, exit. The only module that exits.

Exit codes (DESIGN.md): 0 passed (warnings allowed), 1 a check failed / a gate missed / no world, 2 usage error,
3 internal error (a bug: the log's path is printed), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM, handled like
Ctrl-C: the partial report is written). Importing this module must not import torch:
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
    StorageConfig,
    build_world,
    parse_float,
    parse_fraction,
    parse_int,
)
from .errors import (
    EXIT_FAIL,  # noqa: F401 - the exit codes' names, importable from here as before
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,  # noqa: F401
    EXIT_TERMINATED,
    EXIT_USAGE,
    Terminated,
    UsageError,
)

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
                   "Paths expand %%j (job id), %%n (node rank), %%h (hostname), %%r (rank: every rank writes). "
                   "One report per job: a path the same on every node is written by node 0 only; %%n or %%h "
                   "gives each node its own (so do --env-out and --prometheus, always: they are read on the node)")
    g.add_argument("--quiet", action="store_true",
                   help="print only the verdict, on global rank 0 (the other processes print nothing)")
    g.add_argument("--print-all", action="store_true",
                   help="every process prints its full report (default: global rank 0 prints it, every other node "
                        "one line), and every node writes its own report files: beside node 0's when the path is "
                        "the same on every node (run.json -> run.node1.json)")
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
    _save_baseline_flags(p)


def _save_baseline_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--save-baseline", metavar="FILE", help="save this run's JSON as a baseline (a FAILED run is "
                   "refused unless --force)")
    p.add_argument("--force", action="store_true", help="with --save-baseline: save the run even when it FAILED")


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
    p.add_argument("--shared-dir", metavar="DIR", action="append", default=[],
                   help="a directory every node must see as ONE shared, writable filesystem with room (checkpoints): "
                        "proven with a per-run nonce file and per-node markers, all removed afterwards (repeatable)")
    p.add_argument("--need", metavar="SIZE", help="free space each node's view of every --shared-dir must have, "
                   "e.g. a checkpoint's size (64G; binary suffixes K M G T)")
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
    b.add_argument("--min-efficiency", metavar="F",
                   help="gate: fail if busbw at the gate size is below F x the bound of the links crossed (0-1)")
    b.add_argument("--gate-size", metavar="SIZE", help="size the gates look at (default: the largest)")
    b.add_argument("--baseline", metavar="RUN.json", help="gate: fail on busbw regression against a saved run")
    b.add_argument("--tolerance", default="0.1", help="allowed relative regression against --baseline (0.1)")
    _save_baseline_flags(b)
    b.add_argument("--nccl-capture", action="store_true",
                   help="on GPUs: capture NCCL's debug log, topology and graph dumps per host and check the transport")

    k = sub.add_parser("links", parents=[world, out], help="node-to-node bandwidth matrix; names slow links/nodes")
    k.add_argument("--size", default="64M", help="message size per transfer (default 64M)")
    k.add_argument("--iters", default="5", help="transfers per direction per pair (default 5)")
    k.add_argument("--rounds", default="auto", choices=["auto", "full", "quick", "scale"],
                   help="full: every pair (n-1 rounds); scale: one pairing + re-tests of slow pairs (<= 4 rounds); "
                        "quick: a few random rounds; auto: full below 16 nodes, scale from 16")
    k.add_argument("--min-gbps", help="gate: any link below this GB/s fails the run (links.min_gbps)")
    k.add_argument("--min-efficiency", metavar="F",
                   help="gate: fail if a pair's GB/s is below F x the bound of its two ends (0-1)")
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
    r.add_argument("--postmortem", metavar="DIR", help="also arm the job so that its failure can be diagnosed: "
                   "flight recorder, dump on timeout, NCCL debug log, all written under DIR (ncclcheck diagnose DIR)")

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

    _health_parsers(sub, world, out)
    d = sub.add_parser("diagnose", parents=[out], help="what a failed or hung job left -> rank, host, collective, "
                       "cause", description="Reads flight-recorder dumps, NCCL logs, the launcher's output and error "
                       "files and ncclras JSON (files, directories, globs; each recognised by its content) and names "
                       "the root cause first. Exit 0: nothing wrong found; 1: a cause named; 2: bad input.")
    d.add_argument("paths", metavar="PATH", nargs="+", help="a file, a directory (read recursively) or a glob")
    d.add_argument("--preflight", metavar="RUN.json", help="a saved preflight report: ties ranks to hosts and "
                   "compares NCCL's choices with its recommendations")

    e = sub.add_parser("env", parents=[facts], help="this node's facts (versions, GPUs, network, RDMA)")
    e.add_argument("--json", metavar="PATH", help="write the JSON report; '-' = stdout")
    return parser


def _slurm_flags() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("Slurm (docs/slurm.md)")
    g.add_argument("--drain", action="store_true", help="drain failing nodes with scontrol (Reason='ncclcheck: "
                   "<check id>: <detail>'); resume after a clean run only nodes ncclcheck drained")
    g.add_argument("--dry-run", action="store_true", help="print the scontrol commands instead of running them")
    return p


def _health_parsers(sub, world: argparse.ArgumentParser, out: argparse.ArgumentParser) -> None:
    h = sub.add_parser("health", parents=[out, _slurm_flags()], help="node-local health check for Slurm's "
                       "HealthCheckProgram / Prolog (seconds, no torch)",
                       description="This node's GPUs, NCCL interface, RDMA ports, /dev/shm, memlock and NCCL "
                                   "settings against what is expected of it; with --drain, drain it in Slurm.")
    h.add_argument("--node", help="the Slurm node name (default: SLURMD_NODENAME, else the hostname)")
    h.add_argument("--gpus", help="expected GPU count (default: the node's gpu Gres in Slurm, if any)")
    h.add_argument("--ifname", help="the NCCL interface(s), NCCL_SOCKET_IFNAME syntax, e.g. =eth0 (default: "
                                    "NCCL_SOCKET_IFNAME, else NCCL's own first choice)")
    h.add_argument("--mtu", help="expected MTU of the NCCL interface")
    h.add_argument("--min-speed", metavar="MBPS", help="minimum link speed of the NCCL interface, Mb/s")
    h.add_argument("--ib-rate", metavar="GBPS", help="every RDMA port ACTIVE at least at this rate, Gb/s")
    h.add_argument("--baseline", metavar="GOLDEN.json", help="compare with a saved known-good run (baseline.drift)")
    h.add_argument("--timeout", help="bound on the node's own checks, seconds (default 20, at most 40: Slurm "
                                     "kills a HealthCheckProgram at 60 s)")
    w = sub.add_parser("sweep", parents=[world, out, _slurm_flags()], help="inside an allocation: find and drain "
                       "the bad nodes (links rounds, suspects re-paired with good nodes)",
                       description="Run with one task per node: srun --ntasks-per-node=1 ncclcheck sweep --drain")
    w.add_argument("--size", default="64M", help="message size per transfer (default 64M)")
    w.add_argument("--iters", default="5", help="transfers per direction per pair (default 5)")
    w.add_argument("--min-gbps", help="any link below this GB/s is slow")
    w.add_argument("--relative", default="0.5", help="a link below this fraction of the typical link is slow (0.5)")
    w.add_argument("--seed", default="0", help="which random pairing is measured first (vary it across runs)")
    w.add_argument("--good-out", metavar="FILE", help="write the healthy nodes' hostlist (for sbatch -w)")
    w.add_argument("--bad-out", metavar="FILE", help="write the bad nodes' hostlist (for sbatch --exclude)")


def _slurm_configs(args: argparse.Namespace, env) -> dict:
    """health's and sweep's parts of the Config (SLURMD_NODENAME and the allocation's node list read here, once)."""
    from .config import HealthConfig, SlurmActionConfig, SweepConfig
    from .rendezvous.budget import FIXED

    act = SlurmActionConfig(drain=bool(args.drain) and not args.dry_run, dry_run=bool(args.dry_run))
    if args.command == "sweep":
        return {"sweep": SweepConfig(nodelist=env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST"),
                                     slurm=act, good_out=args.good_out, bad_out=args.bad_out)}
    timeout = parse_float(args.timeout, "--timeout") or FIXED.health_timeout_s
    if timeout > FIXED.health_max_timeout_s:
        raise UsageError(f"--timeout {timeout:g}: at most {FIXED.health_max_timeout_s:g} s (Slurm kills a "
                         "HealthCheckProgram at 60 s, and scontrol needs time too)")
    speed = parse_int(args.min_speed, "--min-speed", 1)
    return {"health": HealthConfig(
        node=args.node or env.get("SLURMD_NODENAME") or None, gpus=parse_int(args.gpus, "--gpus", 0),
        ifname=args.ifname, mtu=parse_int(args.mtu, "--mtu", 68, 65536), min_speed_mbps=speed,
        ib_rate_gbps=parse_float(args.ib_rate, "--ib-rate"), timeout_s=timeout, slurm=act)}


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
    if getattr(args, "quiet", False) and getattr(args, "print_all", False):
        raise UsageError("--quiet (only rank 0's verdict) and --print-all (every process's full report) contradict "
                         "each other: give one")
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

    for flag in _PATH_FLAGS:
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
        cfg["postmortem_dir"] = _postmortem_dir(args.postmortem)
    if cmd == "diagnose":
        from .config import DiagnoseConfig

        if args.preflight and not os.path.isfile(args.preflight):
            raise UsageError(f"--preflight {args.preflight}: no such file")
        cfg["diagnose"] = DiagnoseConfig(paths=tuple(args.paths), preflight=args.preflight)
    if cmd == "report":
        input_file(args.run, "", "a JSON report written by --json")
        cfg["report_input"] = args.run
    if cmd == "bench":
        cfg["bench"] = bench_config_from_args(args)
    if cmd == "preflight":
        cfg["storage"] = storage_config_from_args(args)
    if cmd in ("preflight", "bench", "links"):
        cfg["nccl_diag"] = nccl_diag_config_from_args(args)
    if cmd in ("preflight", "links") and (args.baseline or args.save_baseline):
        cfg["baseline"] = baseline_config_from_args(args)
    if cmd in ("health", "sweep"):
        cfg.update(_slurm_configs(args, env))
    if cmd == "health" and args.baseline:
        if not os.path.isfile(args.baseline):
            raise UsageError(f"--baseline {args.baseline}: no such file")
        cfg["baseline"] = BaselineConfig(path=args.baseline)
    if cmd in ("links", "sweep"):
        from .units import parse_size

        cfg["links"] = LinksConfig(
            size=parse_size(args.size),
            iters=parse_int(args.iters, "--iters", 1, 100000),
            rounds=getattr(args, "rounds", "scale"),
            min_gbps=parse_float(args.min_gbps, "--min-gbps"),
            min_efficiency=parse_fraction(args.min_efficiency, "--min-efficiency"),
            relative=parse_float(args.relative, "--relative"),
            seed=parse_int(args.seed, "--seed", 0, 2**31 - 1),
        )
    return Config(**cfg)


def _postmortem_dir(path: Optional[str]) -> Optional[str]:
    """recommend --postmortem DIR: an absolute path (every rank writes there), not an existing file."""
    if not path:
        return None
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--postmortem {path}: exists and is not a directory")
    return os.path.abspath(path)


def input_file(path: str, flag: str, what: str) -> None:
    """UsageError (one line) unless `path` is a regular file this process can read; the message says which of
    missing, a directory, not a regular file (/dev/null, a FIFO) or unreadable it is, and what was expected."""
    name = f"{flag} {path}" if flag else path
    if not os.path.exists(path):
        raise UsageError(f"{name}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{name}: is a directory, not {what}")
    if not os.path.isfile(path):
        raise UsageError(f"{name}: not a regular file (a device or a pipe), not {what}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{name}: permission denied")
    if os.path.getsize(path) == 0:
        raise UsageError(f"{name}: the file is empty, not {what}")


RAS_READ_LIMIT = 64 << 20  # bytes of --nccl-ras read: ncclras output of a very large job fits many times over


def _check_ras_file(path: str) -> None:
    """--nccl-ras must be `ncclras -f json` output: a wrong or binary file is a usage error, as a missing one is,
    not a skipped check that lets the run pass."""
    from .checks.nccl_ras import parse_ras_json

    input_file(path, "--nccl-ras", "`ncclras -f json` output")
    with open(path, "rb") as f:
        data = f.read(RAS_READ_LIMIT)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--nccl-ras {path}: a binary file, not `ncclras -f json` output") from None
    try:
        parse_ras_json(text)
    except ValueError as exc:
        raise UsageError(f"--nccl-ras {path}: not `ncclras -f json` output ({exc}); NCCL >= 2.28.7 writes that "
                         "form") from None


def storage_config_from_args(args: argparse.Namespace) -> StorageConfig:
    from .units import parse_size

    dirs = tuple(getattr(args, "shared_dir", None) or ())
    if any(not d.strip() for d in dirs):
        raise UsageError("--shared-dir needs a directory, got an empty value")
    from .preflight.shared_dirs import MAX_DIRS

    if len(dirs) > MAX_DIRS:
        raise UsageError(f"--shared-dir given {len(dirs)} times: at most {MAX_DIRS}")
    need = getattr(args, "need", None)
    if need is not None and not dirs:
        raise UsageError("--need SIZE applies to --shared-dir: give the directory it is about")
    try:
        need_bytes = parse_size(need) if need is not None else None
    except UsageError as exc:
        raise UsageError(f"--need: {exc}") from None
    return StorageConfig(dirs=dirs, need_bytes=need_bytes)


def nccl_diag_config_from_args(args: argparse.Namespace) -> NcclDiagConfig:
    ras, debug = getattr(args, "nccl_ras", None), tuple(getattr(args, "nccl_debug", None) or ())
    for path in debug:
        input_file(path, "--nccl-debug", "a saved NCCL_DEBUG=INFO log")
    if ras:
        _check_ras_file(ras)
    return NcclDiagConfig(ras=ras, debug=debug, capture=bool(getattr(args, "nccl_capture", False)))


def baseline_config_from_args(args: argparse.Namespace) -> BaselineConfig:
    if args.baseline:
        input_file(args.baseline, "--baseline", "a JSON report written by --json")
    tol = parse_float(getattr(args, "tolerance", None) or "0.1", "--tolerance")
    if tol >= 1:
        raise UsageError("--tolerance is a fraction: 0.1 means 10%")
    return BaselineConfig(path=args.baseline, save=args.save_baseline, tolerance=tol)


_WORLD_COMMANDS = ("preflight", "recommend", "bench", "links", "sweep")
_PATH_FLAGS = ("json", "html", "junit", "markdown", "env_out", "save_baseline", "prometheus", "good_out", "bad_out")


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
    if args.baseline:
        input_file(args.baseline, "--baseline", "a JSON report written by --json")
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
        min_efficiency=parse_fraction(args.min_efficiency, "--min-efficiency"),
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


def log_host() -> str:
    """This host's short name as it goes into log file names (ncclcheck-<host>-<stamp>-<pid>.log): with a home
    shared by the nodes, each host keeps its own last LOG_KEEP runs and a log says where it was written."""
    from .facts import hostname

    short = hostname().split(".")[0] or "host"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in short)


def _this_hosts_log(name: str, host: str) -> bool:
    """A run log of this host, or one named before logs were named by host (ncclcheck-<YYYYMMDD>-...)."""
    if not (name.startswith("ncclcheck-") and name.endswith(".log")):
        return False
    rest = name[len("ncclcheck-"):]
    return rest.startswith(host + "-") or (rest[:8].isdigit() and rest[8:9] == "-")


def _prune_logs(directory: str, keep: int = LOG_KEEP, host: str = "") -> None:
    """Keep this host's newest `keep` runs' logs (a run: ncclcheck-<host>-<stamp>-<pid>.log and its .d side
    directory); other hosts' logs in a shared directory are theirs to prune."""
    import shutil

    try:
        runs = sorted((n[:-4] for n in os.listdir(directory) if _this_hosts_log(n, host)),
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


def _private_dir(directory: str, own: bool) -> None:
    """Make the log directory 0700: logs hold node facts, environment values and torch's messages. A directory of
    our own (the default one) that an older version left 0755 is tightened; one named by NCCLCHECK_LOG_DIR that
    already exists is the user's to set."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if own:
        st = os.stat(directory)
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(directory, 0o700)


class _PrivateFileHandler(logging.FileHandler):
    """A log file created 0600 (logging's own FileHandler creates it with the umask's mode, usually 0644)."""

    def _open(self):
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)


def _setup_logging() -> str:
    """Everything detailed (tracebacks, torch's native noise) goes to this run's log file, not the console.

    The file is created on the first record only (delay=True) and removed at exit when nothing was written, so
    a clean run leaves nothing behind; the last LOG_KEEP runs are kept."""
    directory = log_dir()
    try:
        _private_dir(directory, own=not os.environ.get("NCCLCHECK_LOG_DIR"))
    except OSError:
        directory = tempfile.gettempdir()
    host = log_host()
    _prune_logs(directory, LOG_KEEP - 1, host)
    path = os.path.join(directory, f"ncclcheck-{host}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    handler = _PrivateFileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if os.environ.get("NCCLCHECK_DEBUG") else logging.WARNING)
    return path


# torch's native lines that every healthy run may print (c10d, when the hostname does not resolve as it expects):
# they alone are not "something to log", so a clean run leaves no log and its report points at none.
TORCH_NOISE = ("The hostname of the client socket cannot be retrieved",)
_NOISE_SCAN_BYTES = 1 << 16  # a log longer than this holds more than noise


def has_content(path: Optional[str]) -> bool:
    """Does the log hold anything besides torch's routine noise (so that printing its path points the user at
    details)?"""
    try:
        size = os.path.getsize(path) if path else 0
        if size == 0:
            return False
        if size > _NOISE_SCAN_BYTES:
            return True
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return False
    return any(not any(n in ln for n in TORCH_NOISE) for ln in lines)


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
    if config.command == "diagnose":
        return api.run_diagnose(config)
    if config.command == "bench":
        return api.run_bench(config, placement=placement, **progress)
    if config.command == "links":
        return api.run_links(config, placement=placement, **progress)
    if config.command == "health":
        return api.run_health(config)
    if config.command == "sweep":
        return api.run_sweep(config, placement=placement, **progress)
    if config.command == "report":
        from .model import load_saved_report
        from .render.validate import schema_problem

        return load_saved_report(config.report_input, config.report_input, schema_problem)
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


def seat_of(config: Config, placement, per_rank_paths: bool = False, per_node_paths: bool = False) -> Seat:
    """writes: the default rule of render.files.own_path (global rank 0 writes a path shared by every node; %n/%h
    paths or --print-all add the other nodes' first ranks, %r paths every rank); each file is decided by it."""
    out = config.output
    if placement is None or config.command in ("env", "report", "health", "diagnose"):
        leader = placement is None or placement.node_leader
        return Seat(full=leader, line=False, writes=leader or per_rank_paths,
                    launcher=placement.launcher if placement else "ncclcheck")
    full = placement.rank == 0 or out.print_all
    if config.command == "recommend" and config.recommend_format != "text":
        full = placement.node_leader or out.print_all  # per-node data on stdout (`> nccl.env` on every node)
    writes = placement.rank == 0 or per_rank_paths or (placement.node_leader and (per_node_paths or out.print_all))
    return Seat(full=full, line=not full and placement.node_leader and not out.quiet, writes=writes,
                launcher=placement.launcher, rank=placement.rank, node_rank=placement.node_rank)


_OUTPUT_FIELDS = {"json": "json_path", "html": "html", "junit": "junit", "markdown": "markdown", "env_out": "env_out",
                  "prometheus": "prometheus"}  # flag -> OutputConfig field
# Files read on the node that wrote them (the training container sources its nccl.env; node_exporter reads a local
# textfile directory): every node's first rank writes these, whatever the path. The others are the job's report.
_NODE_FILES = ("env_out", "prometheus")


def own_outputs(config: Config, placement, templates: dict) -> tuple[Config, Optional[str]]:
    """(config with only the output paths this process writes, the --save-baseline path it writes or None).

    The baseline is taken out of the API's hands so that the CLI writes it like every other file: once per job,
    and refused for a failed run unless --force (_emit)."""
    import dataclasses

    from .render.files import own_path, per_rank

    if placement is None or config.command in ("env", "report"):
        leader = placement is None or placement.node_leader

        def mine(flag: str, path: Optional[str]) -> Optional[str]:
            return path if leader or per_rank(templates.get(flag)) else None
    else:
        def mine(flag: str, path: Optional[str]) -> Optional[str]:
            if flag in _NODE_FILES:
                return path if placement.node_leader or per_rank(templates.get(flag)) else None
            return own_path(path, templates.get(flag), rank=placement.rank, node_rank=placement.node_rank,
                            node_leader=placement.node_leader, every_node=config.output.print_all)

    output = dataclasses.replace(config.output, **{f: mine(flag, getattr(config.output, f))
                                                   for flag, f in _OUTPUT_FIELDS.items()})
    changes: dict = {"output": output}
    save = None
    if config.bench is not None and config.bench.save_baseline:
        save = mine("save_baseline", config.bench.save_baseline)
        changes["bench"] = dataclasses.replace(config.bench, save_baseline=None)
    if config.baseline is not None and config.baseline.save:
        save = mine("save_baseline", config.baseline.save)
        changes["baseline"] = dataclasses.replace(config.baseline, save=None)
    return dataclasses.replace(config, **changes), save


def _observer(config: Config, seat: Seat):
    """Progress and each measured row on the console that prints the full report: a live bar on a terminal, plain
    flushed lines on a pipe or in a file (render/progress.py)."""
    if not seat.full or config.output.json_path == "-" or config.output.quiet:
        return None
    from .render.progress import make_observer

    return make_observer(sys.stdout, os.environ, seat.launcher)


def _one_line(config: Config, report, seat: Seat, given: tuple = ()) -> str:
    """The line a non-zero node prints: who it is, its verdict and exit code, where the full report is; `given`:
    the files asked for that node 0 writes and this process does not."""
    from .facts import hostname

    me = next((n.hostname for n in report.nodes if n.node_rank == seat.node_rank), None) or hostname()
    first = next((n.hostname for n in report.nodes if n.node_rank == 0), None)
    where = "global rank 0's console" + (f" (node 0, {first})" if first else " (node 0)")
    text = (f"ncclcheck {report.command}: node {seat.node_rank} ({me}) rank {seat.rank}: {report.status.value.upper()}"
            f", exit {report.exit_code}; full report on {where}")
    if config.output.json_path and config.output.json_path != "-":
        text += f"; JSON in {config.output.json_path}"
    if given:  # one report per job: say where it is and how to get this node's own
        text += (f"; node 0 writes {', '.join(given)} (this node writes its own with %n or %h in the path, or with "
                 "--print-all)")
    root = report.root_cause() if report.status.value == "fail" else None
    if root is not None:  # a world that did not form has no shared report: say here what went wrong from this side
        text += f"; root cause{'' if root.node is None else f' on node {root.node}'}: [{root.id}] {root.summary}"
    from .render.common import one_line

    return one_line(text)  # hostnames and summaries came from other nodes: one line, whatever they hold


def _save_baseline(path: Optional[str], force: bool, report) -> None:
    """--save-baseline: a later run is judged against this file, so a FAILED run is refused unless --force."""
    if not path:
        return
    if report.status.value == "fail" and not force:
        _say(f"ncclcheck: --save-baseline {path}: not saved: this run FAILED (a baseline is what later runs are "
             "judged against); --force saves it anyway")
        return
    from .render.files import write_atomic
    from .render.json import render_json

    write_atomic(path, render_json(report))


def _not_mine(asked: Config, mine: Config) -> tuple:
    """The output files asked for that another process (node 0) writes, for this node's one line."""
    return tuple(getattr(asked.output, f) for f in _OUTPUT_FIELDS.values()
                 if getattr(asked.output, f) not in (None, "-") and getattr(mine.output, f) is None)


def _emit(config: Config, report, log_path: str, seat: Optional[Seat] = None, given: tuple = (),
          rows_shown: bool = False) -> None:
    from .render import console as view
    from .render.json import render_json

    seat = seat or Seat(full=report.prints, line=False, writes=report.prints)
    if not report.log_path and has_content(log_path):  # printed only when it holds the details referred to
        report.log_path = log_path
    out = config.output
    json_to_stdout = out.json_path == "-" and seat.full
    # The paths in config.output are this process's own (own_outputs): write each one given.
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

        write_atomic(out.prometheus, render_prometheus(report), private=False)
    if out.format == "labels" and seat.full:
        from .render.labels import render_labels

        sys.stdout.write(render_labels(report))
        return  # stdout is the script; nothing else may be mixed into it
    machine_stdout = out.json_path == "-" or (config.command == "recommend" and config.recommend_format != "text")
    term = view.make_console(sys.stderr if machine_stdout else sys.stdout, os.environ, seat.launcher)
    if not seat.full:
        if seat.line:
            term.print(_one_line(config, report, seat, given), markup=False, highlight=False, soft_wrap=True)
        return
    if config.command == "recommend" and config.recommend_format in ("env", "json"):
        if config.recommend_format == "env":
            from .render.envfile import render_envfile

            sys.stdout.write(render_envfile(report))
        else:
            import json

            sys.stdout.write(json.dumps([r.to_json() for r in report.recommendations], indent=2) + "\n")
        from .render.common import one_line

        bad = [c for c in report.checks if c.status.value in ("fail", "warn")]
        for c in bad:
            term.print(one_line(f"# {c.status.value}: [{c.id}] {c.summary}" + (f" -- fix: {c.fix}" if c.fix else "")),
                       markup=False, highlight=False)
        return
    if config.command == "env":
        for part in view.render_env(report):
            term.print(part)
        return
    written = [p for p in (out.html, out.junit, out.markdown, out.env_out, out.prometheus) if p]
    if out.quiet or (config.command == "report" and written):
        # `report RUN.json --html F` renders a saved run into files: the verdict says what is in them, not the
        # whole text report again (issue 24)
        term.print(view.verdict(report))
        if not out.quiet:
            term.print(f"wrote {', '.join(written)}", markup=False, highlight=False, soft_wrap=True)
        return
    for part in view.render_report(report, rows_shown=rows_shown):
        term.print(part)


@contextlib.contextmanager
def _native_stderr_to(log_path: str) -> Iterator[None]:
    """torch's C++ code (c10d, gloo, NCCL) writes to fd 2 whenever it likes ("[c10d] The hostname of the client
    socket cannot be retrieved..."): point fd 2 at the run's log for the whole run, in every mode (spawned ranks
    inherit it), while Python's sys.stderr keeps writing to the console through a duplicate of the old fd 2."""
    try:
        saved = os.dup(2)
        target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
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


def _value_flags(parser: argparse.ArgumentParser) -> set:
    """Every option string, of every subcommand, that takes a value."""
    out: set = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _value_flags(sub)
        elif action.option_strings and action.nargs != 0:
            out.update(action.option_strings)
    return out


def join_dash_values(parser: argparse.ArgumentParser, argv: list) -> list:
    """`--sizes -1M` -> `--sizes=-1M`: argparse takes a value that starts with '-' and a digit or '.' for an option
    and answers a bare "expected one argument"; joined, the flag's own check names what is wrong with the value
    ("sizes cannot be negative"), as `--sizes=-1M` already did."""
    flags, out, i = _value_flags(parser), [], 0
    while i < len(argv):
        a = argv[i]
        if a in flags and i + 1 < len(argv) and len(argv[i + 1]) > 1 and argv[i + 1][0] == "-" \
                and (argv[i + 1][1].isdigit() or argv[i + 1][1] == "."):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread, so it takes Ctrl-C's path: partial report,
    then exit 143. A second SIGTERM while that report is written is ignored (Slurm sends one, then SIGKILL after
    KillWait). Only in the main thread, where Python delivers signals; the previous handler is restored after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Optional[list] = None) -> int:
    with _sigterm_as_interrupt():
        try:
            return _main_argv(argv)
        except KeyboardInterrupt as exc:  # before any report existed (parsing flags, setting up the log)
            _say("ncclcheck: " + _interrupted_word(exc))
            return _interrupt_code(exc)


def _interrupt_code(exc: BaseException) -> int:
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def _interrupted_word(exc: BaseException) -> str:
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


def _main_argv(argv: Optional[list]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(join_dash_values(parser, list(sys.argv[1:] if argv is None else argv)))
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
        asked = config
        config, save = own_outputs(config, placement, templates)
        seat = seat_of(config, placement, any(per_rank(t) for t in templates.values()))
        observer = _observer(config, seat)
        try:
            report = _run(config, log_path, observer, placement)
        finally:
            if observer is not None:
                observer.stop()  # a bar left running would garble the report (or the error) printed next
        if report.interrupted:  # the partial report is written; its exit code and ours say what cut it short
            report.interrupt_code = EXIT_TERMINATED if report.interrupted_by == "SIGTERM" else EXIT_INTERRUPTED
        _emit(config, report, log_path, seat, _not_mine(asked, config), getattr(observer, "streamed", 0) > 0)
        _save_baseline(save, bool(getattr(args, "force", False)), report)
        if report.interrupted:
            _say("ncclcheck: " + ("terminated (SIGTERM)" if report.interrupted_by == "SIGTERM" else "interrupted"))
        return report.exit_code
    except UsageError as exc:
        _say(f"ncclcheck: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        _say("ncclcheck: " + _interrupted_word(exc))
        return _interrupt_code(exc)
    except Exception as exc:  # noqa: BLE001 - the one place that turns a bug into exit 3 with the log's path
        log.exception("internal error")
        print(f"ncclcheck: internal error: {type(exc).__name__}: {exc} -- this is a bug; details in {log_path}",
              file=sys.stderr)
        return EXIT_INTERNAL
