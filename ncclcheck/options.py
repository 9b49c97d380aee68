"""Every command's options, written once: the argparse parsers the CLI uses and the keyword arguments the Python
API takes are the same flags, and both become the one Config here. Choices and defaults come from the tables and
the Config classes (bench/ops.py's ops and dtypes, links/schedule.py's rounds, render/formats.py's outputs,
config.py's BenchConfig, LinksConfig and BaselineConfig), never from literals of their own."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from .commands import BY_NAME, NAMES, WORLD
from .commands import COMMANDS as TABLE
from .errors import UsageError
from .version import __version__

if TYPE_CHECKING:  # imported when a command's flags are built or parsed, never for `ncclcheck --help`
    from .config import BaselineConfig, BenchConfig, Config, LinksConfig, NcclDiagConfig, StorageConfig

# The commands and their flag groups come from the one table (commands.py); these names stay for the tests and
# modules that read them.
COMMANDS = NAMES
WORLD_COMMANDS = WORLD


def _default(which: str) -> Any:
    """The defaults of one Config class (bench, links or base) that the flags' help and parsing fall back to,
    imported when a command's flags are built or parsed: `ncclcheck --help` imports none of config.py."""
    from .config import BaselineConfig, BenchConfig, LinksConfig

    return {"bench": BenchConfig, "links": LinksConfig, "base": BaselineConfig}[which]()


def _closest(word: str, choices) -> Optional[str]:
    """The choice a typo most likely meant (difflib's ratio, 0.6 and up), or None."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1)
    return found[0] if found else None


def _did_you_mean(message: str) -> str:
    """argparse's 'invalid choice' message (a command, --rounds ...) with the choice a typo most likely meant."""
    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if m is None or "did you mean" in message:  # newer Pythons suggest on their own
        return message
    near = _closest(m[1], re.findall(r"'([^']*)'", m[2]) or [c.strip() for c in m[2].split(",")])
    return f"{message[:m.end(1) + 1]}; did you mean '{near}'? {message[m.end(1) + 2:]}" if near else message


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting itself; the hint
    names the subcommand's own --help, and a typo the flag or choice it most likely meant. No abbreviations: a
    prefix of a flag is a typo, not that flag (`--nnode 2` ran as --nnodes 2, and a flag added later would have
    made an abbreviation in a job script ambiguous)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UsageError(f"{_did_you_mean(message)} (see '{self.prog} --help')")

    def parse_args(self, args=None, namespace=None):  # noqa: D401 - argparse API
        ns, extras = self.parse_known_args(args, namespace)
        if extras:  # argparse reports these from the top parser: point at the subcommand's help instead
            command = getattr(ns, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            raise UsageError(f"{unrecognized(extras, subparser(self, command) if command else self)} "
                             f"(see '{prog} --help')")
        return ns


def unrecognized(extras: list, parser: argparse.ArgumentParser) -> str:
    """'unrecognized argument --nnode; did you mean --nnodes?': the flags argparse did not know, each with the
    option of `parser` it most likely meant; their values are left out (they belong to the mistyped flag). Extras
    with no flag among them are named as they are."""
    flags = [e.split("=", 1)[0] for e in extras if e.startswith("-") and e != "-"]
    if not flags:
        return f"unrecognized arguments: {' '.join(extras)}"
    text = f"unrecognized argument{'s' if len(flags) > 1 else ''} {' '.join(flags)}"
    options = [o for o in parser._option_string_actions if o.startswith("--")]
    near = {f: m for f in flags if (m := _closest(f, options))}
    if len(near) == 1 and len(flags) == 1:
        return f"{text}; did you mean {near[flags[0]]}?"
    if near:
        return f"{text}; did you mean " + ", ".join(f"{m} (for {f})" for f, m in near.items()) + "?"
    return text


def nproc_help(command: str) -> str:
    """--nproc-per-node's help for one command, with the default that command runs (config.py defines both)."""
    from .config import CHECK_RANKS_DEFAULT, CPU_RANKS_DEFAULT

    if not BY_NAME[command].ranks:
        return (f"ranks per node the job will run: gpu.count checks the visible GPUs against it (default "
                f"{CHECK_RANKS_DEFAULT}: {command} itself runs one process per node and counts it as one rank; "
                "under a launcher, its local world size)")
    return f"ranks per node (default: one per GPU, {CPU_RANKS_DEFAULT} CPU ranks without GPUs)"


def _world_flags(p: argparse.ArgumentParser, command: str) -> None:
    from .config import BACKENDS, DEFAULT_MASTER_PORT
    from .rendezvous.budget import FIXED as _FIXED

    g = p.add_argument_group("world (like torchrun; fall back to NCCLCHECK_* then MASTER_ADDR/MASTER_PORT/NODE_RANK)")
    g.add_argument("--nnodes", help="number of nodes (default 1: standalone on this machine)")
    g.add_argument("--node-rank", help="this node's rank, 0..nnodes-1")
    g.add_argument("--nproc-per-node", help=nproc_help(command))
    g.add_argument("--master-addr", help="address of node rank 0 (host, or host:port like an rdzv endpoint)")
    g.add_argument("--master-port", help=f"rendezvous port on node rank 0 (default {DEFAULT_MASTER_PORT})")
    g.add_argument("--backend", help=f"{' | '.join(BACKENDS)} (default auto: nccl with GPUs, else gloo)")
    g.add_argument("--timeout", help="hang bound in seconds: the longest any single wait (master probe, join, mesh "
                                     "probe, each collective) may last before its cause is named; never cuts a "
                                     f"sweep short (default {_FIXED.timeout_s:g})")
    g.add_argument("--token-file", metavar="PATH",
                   help="a job secret shared by every node (or NCCLCHECK_TOKEN): every store value is signed with it "
                        "and unsigned values are ignored, so a stranger on the master port cannot change a verdict "
                        "(docs/architecture.md, Time bounds and trust)")


def _output_flags(p: argparse.ArgumentParser, command: str) -> None:
    """The output table's flags that this command honours (commands.py says what its report can hold and whether it
    forms a world), plus the console flags of the commands that have them."""
    from .commands import command as row
    from .render.formats import FORMATS, PATH_HELP

    me = row(command)
    g = p.add_argument_group("output", PATH_HELP if me.world else PATH_HELP.split(". ")[0] + ".")
    for fmt in FORMATS.values():  # accepted on every command (scripts pass them alike); listed where they do something
        listed = me.recommends or not fmt.needs_recommendations
        g.add_argument(fmt.flag, metavar="PATH" if fmt.stdout else "FILE",
                       help=fmt.help if listed else argparse.SUPPRESS)
    if command == "env":
        return
    g.add_argument("--quiet", action="store_true",
                   help="print only the verdict, on global rank 0 (the other processes print nothing)" if me.world
                   else "print only the verdict")
    # every command with a report on the console (not env: it prints facts, not checks)
    g.add_argument("--verbose", action="store_true",
                   help="every check's row (default: failures and warnings each a row, passes counted by kind, "
                        "skips one row per reason)")
    if command == "report":
        return
    # one process per rank or node: who prints and who writes is what --print-all changes (accepted everywhere,
    # listed only there)
    every = ("every process prints its full report (default: global rank 0 prints it, every other node one line), "
             "and every node writes its own report files: beside node 0's when the path is the same on every node "
             "(run.json -> run.node1.json)")
    g.add_argument("--print-all", action="store_true", help=every if me.world else argparse.SUPPRESS)
    g.add_argument("--strict", action="store_true", help="warnings fail (exit 1)")


def _facts_flags(p: argparse.ArgumentParser, command: str) -> None:
    p.add_argument("--code", metavar="PATH", help="code to hash and compare across nodes (default: working dir)")
    p.add_argument("--path", metavar="P", action="append", default=[],
                   help="a path that must exist with the same content on every node (repeatable)")


def _baseline_flags(p: argparse.ArgumentParser, metavar: str, what: str, tolerance: Optional[str] = None) -> None:
    _BASE = _default("base")

    p.add_argument("--baseline", metavar=metavar, help=what)
    if tolerance:
        p.add_argument("--tolerance", help=f"{tolerance} ({_BASE.tolerance:g})")
    p.add_argument("--save-baseline", metavar="FILE", help="save this run's JSON as a baseline (a FAILED run is "
                   "refused unless --force)")
    p.add_argument("--force", action="store_true", help="with --save-baseline: save the run even when it FAILED")


def _capture_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nccl-capture", action="store_true",
                   help="on GPUs: capture NCCL's debug log, topology and graph dumps per host and check the transport")


def _bench_flags(b: argparse.ArgumentParser, command: str) -> None:
    _BENCH = _default("bench")

    from .bench.ops import DTYPES, OPS
    from .bench.timing import TIMINGS
    from .units import describe_sizes

    b.add_argument("--sizes", help=f"1M-1G (doubling), 1M-1G:4, 1K,64K,1M, 8M (default {describe_sizes(_BENCH.sizes)})")
    b.add_argument("--ops", help=f"comma list: {','.join(OPS)} or 'all' (default {','.join(_BENCH.ops)})")
    b.add_argument("--dtype", help=f"{' | '.join(DTYPES)} (default {_BENCH.dtype})")
    b.add_argument("--iters", help=f"timed iterations per size (default {_BENCH.iters})")
    b.add_argument("--warmup", help=f"warm-up iterations per size (default {_BENCH.warmup})")
    b.add_argument("--in-place", action="store_true", help="in-place variants")
    b.add_argument("--timing", choices=TIMINGS, help="how time is taken: "
                   + "; ".join(f"{k}: {v}" for k, v in TIMINGS.items()) + f" (default {_BENCH.timing})")
    b.add_argument("--check", action="store_true", help="verify results elementwise; wrong > 0 fails")
    b.add_argument("--min-busbw", metavar="GBPS", help="gate: fail if busbw at the gate size is below this")
    b.add_argument("--min-efficiency", metavar="F",
                   help="gate: fail if busbw at the gate size is below F x the bound of the links crossed (0-1)")
    b.add_argument("--gate-size", metavar="SIZE", help="size the gates look at (default: the largest)")
    _baseline_flags(b, "RUN.json", "gate: fail on busbw regression against a saved run",
                    "allowed relative regression against --baseline")
    _capture_flag(b)


def _min_time_help() -> str:
    from .rendezvous.budget import FIXED as _FIXED

    return (f"time each direction at least this long: short transfers are repeated beyond --iters (a few ms "
            f"each is CPU-scheduler noise, not a link); 0: exactly --iters (default {_FIXED.links_min_time_s:g})")


def _links_flags(k: argparse.ArgumentParser, command: str) -> None:
    _LINKS = _default("links")
    min_time_help = _min_time_help()

    from .links.schedule import ROUNDS, SCALE_FROM
    from .units import format_size_short

    k.add_argument("--size", help=f"message size per transfer (default {format_size_short(_LINKS.size)})")
    k.add_argument("--iters", help=f"transfers per direction per pair (default {_LINKS.iters})")
    k.add_argument("--min-time", metavar="SECONDS", help=min_time_help)
    k.add_argument("--rounds", choices=ROUNDS,
                   help="full: every pair (n-1 rounds); scale: one pairing + re-tests of slow pairs (<= 4 rounds); "
                        f"quick: a few random rounds; auto: full below {SCALE_FROM} nodes, scale from {SCALE_FROM} "
                        f"(default {_LINKS.rounds})")
    k.add_argument("--min-gbps", help="gate: any link below this GB/s fails the run (links.min_gbps)")
    k.add_argument("--min-efficiency", metavar="F",
                   help="gate: fail if a pair's GB/s is below F x the bound of its two ends (0-1)")
    k.add_argument("--relative",
                   help="a link below this fraction of the typical link, and clearly set apart, is slow "
                        f"({_LINKS.relative:g})")
    _baseline_flags(k, "RUN.json", "gate: fail on a link slower than the same link in a saved links run",
                    "allowed relative slowdown against --baseline")
    k.add_argument("--seed",
                   help=f"quick/scale modes pair nodes at random from this seed (default {_LINKS.seed}: every run "
                        "measures the same pairs; vary it, e.g. --seed $(date +%%j), to cover other pairs across runs)")
    _capture_flag(k)


def _preflight_flags(p: argparse.ArgumentParser, command: str) -> None:
    p.add_argument("--nccl-ras", metavar="FILE", help="read saved ncclras output (`-f json` or its text report) "
                   "into the nccl.ras check (dead, missing and lagging ranks of a running job)")
    p.add_argument("--shared-dir", metavar="DIR", action="append", default=[],
                   help="a directory every node must see as ONE shared, writable filesystem with room (checkpoints): "
                        "proven with a per-run nonce file and per-node markers, all removed afterwards (repeatable)")
    p.add_argument("--need", metavar="SIZE", help="free space each node's view of every --shared-dir must have, "
                   "e.g. a checkpoint's size (64G; binary suffixes K M G T)")
    p.add_argument("--nccl-debug", metavar="FILE", action="append", default=[],
                   help="read a saved NCCL_DEBUG=INFO capture into nccl.transport (repeatable)")
    _baseline_flags(p, "GOLDEN.json", "compare every node's versions, NCCL variables, interfaces, RDMA ports and "
                    "packages with a saved known-good run (baseline.drift warns; --strict fails)")


def _recommend_flags(r: argparse.ArgumentParser, command: str) -> None:
    r.add_argument("--format", default="text", choices=["text", "env", "json"],
                   help="env: 'export NAME=value' lines to source")
    r.add_argument("--postmortem", metavar="DIR", help="also arm the job so that its failure can be diagnosed: "
                   "flight recorder, dump on timeout, NCCL debug log, all written under DIR (ncclcheck diagnose DIR)")


def _report_flags(rp: argparse.ArgumentParser, command: str) -> None:
    rp.add_argument("run", metavar="RUN.json")


def _report_format_flags(rp: argparse.ArgumentParser, command: str) -> None:
    rp.add_argument("--format", default="text", choices=["text", "labels"],
                    help="labels: kubectl commands that label (and taint) each node of the run (docs/deploy.md)")


def _diagnose_flags(d: argparse.ArgumentParser, command: str) -> None:
    d.add_argument("paths", metavar="PATH", nargs="+", help="a file, a directory (read recursively) or a glob")
    d.add_argument("--preflight", metavar="RUN.json", help="a saved preflight report: ties ranks to hosts and "
                   "compares NCCL's choices with its recommendations")


def _watch_job_flags(w: argparse.ArgumentParser, command: str) -> None:
    from .config import DEFAULT_MASTER_PORT
    from .rendezvous.budget import FIXED as _FIXED

    g = w.add_argument_group("the job (like torchrun; fall back to NCCLCHECK_* then MASTER_ADDR/MASTER_PORT)")
    g.add_argument("--master-addr", help="the job's master (its store: torchrun's --master-addr / rdzv host)")
    g.add_argument("--master-port", help=f"the job's master port (default {DEFAULT_MASTER_PORT})")
    g.add_argument("--timeout", help="the one bound on fetching every rank at once, and with --follow how long "
                                     f"progress may stop before watch speaks (default {_FIXED.timeout_s:g})")
    g.add_argument("--token-file", metavar="PATH", help="the job's secret (or NCCLCHECK_TOKEN): armed ranks that "
                   "have it answer only requests sealed with it")


def _watch_flags(w: argparse.ArgumentParser, command: str) -> None:
    w.add_argument("--dump", metavar="DIR", help="write what was fetched under DIR (flight-recorder JSON per rank): "
                   "`ncclcheck diagnose DIR` gives the same answer later")
    w.add_argument("--follow", action="store_true", help="look every few seconds and speak once progress stopped "
                   "for --timeout seconds (or every rank stopped answering)")


class FlagGroup(NamedTuple):
    """A set of flags several commands may share: how it adds them to a parser, and which sections of the Config
    it builds from them (None: the flags are read elsewhere, e.g. the world's by build_world for every command)."""

    add: Callable[[argparse.ArgumentParser, str], None]
    build: Optional[Callable[[argparse.Namespace, Any, dict], dict]] = None


def build_parser(commands: Optional[tuple] = None) -> argparse.ArgumentParser:
    """The CLI's parser: one subcommand per row of the commands table, its flags from the row's flag groups.

    `commands`: the subcommands whose flags are built (default: all). The CLI builds only the one in its argv, so
    `ncclcheck --help` lists the commands without importing what their flags' defaults come from (config.py, the
    op tables, the Budget)."""
    parser = _Parser(prog="ncclcheck", description="A multi-node PyTorch job's whole life. Before it: can these nodes "
                     "train together, and which node, interface or setting is wrong? Are the collectives' numbers "
                     "normal? While it runs: which rank, host or link hangs or slows it (watch)? After it failed: "
                     "which rank, host and collective, and why (diagnose)?")
    parser.add_argument("--version", action="version", version=f"ncclcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for row in TABLE:
        p = sub.add_parser(row.name, help=row.help, description=row.description or None)
        if commands is None or row.name in commands:
            for group in row.flags:
                FLAG_GROUPS[group].add(p, row.name)
    return parser


def command_in(argv: list) -> tuple:
    """The subcommand an argv names, as build_parser's `commands` (the first word that is not a flag; () when there
    is none or it is no command: argparse then says what is wrong)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return (first,) if first in BY_NAME else ()


def _slurm_flags(p: argparse.ArgumentParser, command: str) -> None:
    g = p.add_argument_group("Slurm (docs/slurm.md)")
    g.add_argument("--drain", action="store_true", help="drain failing nodes with scontrol (Reason='ncclcheck: "
                   "<check id>: <detail>'); resume after a clean run only nodes ncclcheck drained")
    g.add_argument("--dry-run", action="store_true", help="print the scontrol commands instead of running them")


def _health_flags(h: argparse.ArgumentParser, command: str) -> None:

    from .rendezvous.budget import FIXED as _FIXED
    h.add_argument("--node", help="the Slurm node name (default: SLURMD_NODENAME, else the hostname)")
    h.add_argument("--gpus", help="expected GPU count (default: the node's gpu Gres in Slurm, if any)")
    h.add_argument("--ifname", help="the NCCL interface(s), NCCL_SOCKET_IFNAME syntax, e.g. =eth0 (default: "
                                    "NCCL_SOCKET_IFNAME, else NCCL's own first choice)")
    h.add_argument("--mtu", help="expected MTU of the NCCL interface")
    h.add_argument("--min-speed", metavar="MBPS", help="minimum link speed of the NCCL interface, Mb/s")
    h.add_argument("--ib-rate", metavar="GBPS", help="every RDMA port ACTIVE at least at this rate, Gb/s")
    h.add_argument("--baseline", metavar="GOLDEN.json", help="compare with a saved known-good run (baseline.drift)")
    h.add_argument("--timeout", help=f"bound on the node's own checks, seconds (default "
                                     f"{_FIXED.health_timeout_s:g}, at most {_FIXED.health_max_timeout_s:g}: Slurm "
                                     "kills a HealthCheckProgram at 60 s)")


MIG_CHOICES = {"on": True, "off": False, "any": None}
# Slurm runs a Prolog with this in its environment (Slurm 21.08 and later): any GPU process then is a leftover
PROLOG_CONTEXT = ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd")


def _hardware_flags(p: argparse.ArgumentParser, command: str) -> None:
    g = p.add_argument_group("GPU hardware (docs/hardware.md)")
    g.add_argument("--xid-window", metavar="HOURS", help="judge the kernel log's GPU fault lines (Xid, SXid, "
                   "the driver's NVRM lines) of the last HOURS only (default: since boot)")
    if command == "env":
        return
    g.add_argument("--mig", choices=list(MIG_CHOICES), help="the MIG mode every GPU should have (default off: NCCL "
                   "runs no collective across MIG instances)")
    if command == "health":
        g.add_argument("--prolog", action="store_true", help="run as a Slurm Prolog: any process holding GPU memory "
                       "is a leftover (set by itself when SLURM_SCRIPT_CONTEXT=prolog_slurmd)")
    if command == "preflight":
        g.add_argument("--gpu", action="store_true", help="also measure host-to-device and device-to-host copies "
                       "(torch, pinned memory) against the PCIe bound: seconds")


def _hardware_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    from .config import HardwareConfig, parse_float

    hours = parse_float(_text(getattr(args, "xid_window", None)), "--xid-window")
    mig = getattr(args, "mig", None)
    prolog = bool(getattr(args, "prolog", False)) or env.get(PROLOG_CONTEXT[0]) == PROLOG_CONTEXT[1]
    return {"hardware": HardwareConfig(xid_window_s=None if hours is None else hours * 3600,
                                       mig=MIG_CHOICES[mig] if mig else False, prolog=prolog,
                                       host_copy=bool(getattr(args, "gpu", False)))}


def _sweep_flags(w: argparse.ArgumentParser, command: str) -> None:
    _LINKS = _default("links")
    min_time_help = _min_time_help()

    from .units import format_size_short

    w.add_argument("--size", help=f"message size per transfer (default {format_size_short(_LINKS.size)})")
    w.add_argument("--iters", help=f"transfers per direction per pair (default {_LINKS.iters})")
    w.add_argument("--min-time", metavar="SECONDS", help=min_time_help)
    w.add_argument("--min-gbps", help="any link below this GB/s is slow")
    w.add_argument("--relative", help=f"a link below this fraction of the typical link is slow ({_LINKS.relative:g})")
    w.add_argument("--seed", help=f"which random pairing is measured first (default {_LINKS.seed}; vary it across "
                                  "runs)")
    w.add_argument("--good-out", metavar="FILE", help="write the healthy nodes' hostlist (for sbatch -w)")
    w.add_argument("--bad-out", metavar="FILE", help="write the bad nodes' hostlist (for sbatch --exclude)")


def _slurm_configs(args: argparse.Namespace, env) -> dict:
    """health's and sweep's parts of the Config (SLURMD_NODENAME and the allocation's node list read here, once)."""
    from .config import HealthConfig, SlurmActionConfig, SweepConfig, parse_float, parse_int
    from .rendezvous.budget import FIXED as _FIXED

    act = SlurmActionConfig(drain=bool(args.drain) and not args.dry_run, dry_run=bool(args.dry_run))
    if args.command == "sweep":
        return {"sweep": SweepConfig(nodelist=env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST"),
                                     slurm=act, good_out=args.good_out, bad_out=args.bad_out)}
    timeout = parse_float(_text(args.timeout), "--timeout") or _FIXED.health_timeout_s
    if timeout > _FIXED.health_max_timeout_s:
        raise UsageError(f"--timeout {timeout:g}: at most {_FIXED.health_max_timeout_s:g} s (Slurm kills a "
                         "HealthCheckProgram at 60 s, and scontrol needs time too)")
    speed = parse_int(_text(args.min_speed), "--min-speed", 1)
    return {"health": HealthConfig(
        node=args.node or env.get("SLURMD_NODENAME") or None, gpus=parse_int(_text(args.gpus), "--gpus", 0),
        ifname=args.ifname, mtu=parse_int(_text(args.mtu), "--mtu", 68, 65536), min_speed_mbps=speed,
        ib_rate_gbps=parse_float(_text(args.ib_rate), "--ib-rate"), timeout_s=timeout, slurm=act)}


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


def _check_ras_file(path: str) -> None:
    """--nccl-ras must be ncclras output (`-f json` or its text report): a wrong or binary file is a usage error, as
    a missing one is, not a skipped check that lets the run pass."""
    from .checks.nccl_ras import parse_ras
    from .infile import read_doc

    input_file(path, "--nccl-ras", "ncclras output")
    data = read_doc(path, f"--nccl-ras {path}")  # infile.MAX_DOC_BYTES: ncclras output of 16,384 ranks fits
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--nccl-ras {path}: a binary file, not ncclras output") from None
    try:
        parse_ras(text)
    except ValueError as exc:
        raise UsageError(f"--nccl-ras {path}: not ncclras output: {exc}") from None


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand."""
    for action in parser._subparsers._group_actions:  # argparse keeps subparsers here; there is no public API
        if command in action.choices:
            return action.choices[command]
    raise KeyError(command)


def options_of(command: str) -> dict[str, Any]:
    """The command's options (its flags' and positionals' keyword names: report's run, diagnose's paths) with their
    unset values: what the Python API accepts."""
    sub = subparser(build_parser(), command)
    return {a.dest: a.default for a in sub._actions if a.dest != "help"}


def namespace_for(command: str, options: Mapping[str, Any], api_name: str) -> argparse.Namespace:
    """The Namespace the CLI would have parsed for `command` with these keyword arguments (TypeError on a keyword
    the command does not have, as any Python function)."""
    known = options_of(command)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"{api_name}() got an unexpected keyword argument {unknown[0]!r} (its keywords are "
                        f"`ncclcheck {command}`'s flags: {', '.join(sorted(known))})")
    return argparse.Namespace(command=command, **{**known, **dict(options)})


def config_from_args(args: argparse.Namespace, env=None) -> Config:
    """Turn parsed flags (or the API's keyword arguments, as a Namespace) into the one typed Config. Raises
    UsageError on any bad value. The launcher's world read here (this process's Placement) is kept on args as
    `_placement`, so the run reads it once."""
    from .config import Config, OutputConfig, build_world
    from .rendezvous.budget import FIXED as _FIXED

    env = os.environ if env is None else env
    cmd = args.command
    world_kw = {k: _text(getattr(args, k, None)) for k in ("nnodes", "node_rank", "nproc_per_node", "master_addr",
                                                            "master_port", "backend", "timeout")}
    world = build_world(**world_kw, env=env, token_file=_text(getattr(args, "token_file", None)))
    if world.timeout_s is not None and world.timeout_s > _FIXED.max_timeout_s:
        # 1e308 hung a member silently and overflowed on node 0 and in bench (exit 3)
        raise UsageError(f"--timeout {world.timeout_s:g}: at most {_FIXED.max_timeout_s:g} s (a day): a bound "
                         "past it never expires")
    seat = placement_of(cmd, world, env)
    args._placement = seat  # a launcher's world contradicting the flags is a usage error, now
    files = _files(args)
    _expand_paths(args, files, seat, env)
    if getattr(args, "quiet", False) and getattr(args, "print_all", False):
        raise UsageError("--quiet (only rank 0's verdict) and --print-all (every process's full report) contradict "
                         "each other: give one")
    if getattr(args, "quiet", False) and getattr(args, "verbose", False):
        raise UsageError("--quiet (only the verdict) and --verbose (every check's row) contradict each other: give one")
    output = OutputConfig(  # every command has the flags it accepts; getattr covers those it does not
        files=files,
        quiet=bool(getattr(args, "quiet", False)),
        print_all=bool(getattr(args, "print_all", False)),
        verbose=bool(getattr(args, "verbose", False)),
        strict=bool(getattr(args, "strict", False)),
    )
    _check_paths(files, [(f"--{d.replace('_', '-')}", getattr(args, d, None))
                         for d in ("save_baseline", "good_out", "bad_out")])
    cfg: dict[str, Any] = dict(command=cmd, world=world, output=output)
    for group in BY_NAME[cmd].flags:  # each flag group fills its own sections of the Config, in the row's order
        build = FLAG_GROUPS[group].build
        if build is not None:
            cfg.update(build(args, env, cfg))
    return Config(**cfg)


def _facts_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    code = getattr(args, "code", None)
    if code is not None and not os.path.exists(code):
        raise UsageError(f"--code {code}: no such file or directory")
    return {"code_path": code, "paths": _strings(getattr(args, "path", None))}


def _preflight_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    out = {"storage": storage_config_from_args(args), "nccl_diag": nccl_diag_config_from_args(args)}
    if args.baseline or args.save_baseline:
        out["baseline"] = baseline_config_from_args(args)
    return out


def _bench_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    return {"bench": bench_config_from_args(args), "nccl_diag": nccl_diag_config_from_args(args)}


def _links_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    out = {"nccl_diag": nccl_diag_config_from_args(args)}
    if args.baseline or args.save_baseline:
        out["baseline"] = baseline_config_from_args(args)
    return {**out, "links": links_config_from_args(args)}


def _recommend_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    return {"recommend_format": args.format or "text", "postmortem_dir": _postmortem_dir(args.postmortem)}


def _report_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    if not args.run:
        raise UsageError("report needs the saved run's path (RUN.json)")
    input_file(args.run, "", "a JSON report written by --json")
    return {"report_input": args.run}


def _report_format_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    import dataclasses

    return {"output": dataclasses.replace(cfg["output"], format=getattr(args, "format", None) or "text")}


def _diagnose_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    from .config import DiagnoseConfig

    if not args.paths:
        raise UsageError("diagnose needs at least one PATH (a file, a directory or a glob)")
    if args.preflight and not os.path.isfile(args.preflight):
        raise UsageError(f"--preflight {args.preflight}: no such file")
    return {"diagnose": DiagnoseConfig(paths=_strings(args.paths), preflight=args.preflight)}


def _watch_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    return {"watch": watch_config_from_args(args, cfg["world"])}


def _health_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    from .config import BaselineConfig

    out = _slurm_configs(args, env)
    if args.baseline:
        input_file(args.baseline, "--baseline", "a JSON report written by --json")
        out["baseline"] = BaselineConfig(path=args.baseline)
    return out


def _sweep_config(args: argparse.Namespace, env, cfg: dict) -> dict:
    return {**_slurm_configs(args, env), "links": links_config_from_args(args)}


def watch_config_from_args(args: argparse.Namespace, world) -> Any:
    """watch's flags: a master to read the ranks from is required; --dump must be a directory (made if absent)."""
    from .config import WatchConfig

    if not world.master_addr:
        raise UsageError("watch needs the job's master: --master-addr HOST (or MASTER_ADDR)")
    dump = _text(args.dump)
    if dump is not None:
        if not dump.strip():
            raise UsageError("--dump needs a directory")
        if os.path.exists(dump) and not os.path.isdir(dump):
            raise UsageError(f"--dump {dump}: exists and is not a directory")
    return WatchConfig(dump_dir=dump, follow=bool(args.follow))


def _text(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _strings(value: Any) -> tuple:
    """A repeatable flag's values: a list from argparse, or one string or any iterable from the API."""
    if value is None:
        return ()
    return (value,) if isinstance(value, (str, os.PathLike)) else tuple(value)


def _files(args: argparse.Namespace) -> dict[str, str]:
    """{format: path} for every output flag given (render/formats.py)."""
    from .render.formats import FORMATS

    files = {}
    for name, fmt in FORMATS.items():
        path = getattr(args, fmt.dest, None)
        if path is None:
            continue
        path = os.fspath(path)
        if not str(path).strip():  # `env --json ''` wrote nothing and exited 0
            raise UsageError(f"{fmt.flag} needs a file path (or - for stdout), got an empty value")
        if path == "-" and not fmt.stdout:
            raise UsageError(f"{fmt.flag} cannot go to stdout: give a file path")
        files[name] = path
    return files


def _check_paths(files: Mapping[str, str], others: list) -> None:
    """Every output path is writable before anything runs: a typo is exit 2 in a second, not a lost report."""
    from .render.files import check_writable
    from .render.formats import FORMATS

    flags = [(FORMATS[name].flag, path) for name, path in files.items()] + others
    for flag, path in flags:
        if path and path != "-":
            try:
                check_writable(path)
            except UsageError as exc:
                raise UsageError(f"{flag}: {exc}") from None


def storage_config_from_args(args: argparse.Namespace) -> StorageConfig:
    from .config import StorageConfig
    from .units import parse_size

    dirs = tuple(os.fspath(d) for d in _strings(getattr(args, "shared_dir", None)))
    if any(not d.strip() for d in dirs):
        raise UsageError("--shared-dir needs a directory, got an empty value")
    if dirs:  # imported only when asked for: it brings the cross-node checks with it
        from .preflight.shared_dirs import MAX_DIRS

        if len(dirs) > MAX_DIRS:
            raise UsageError(f"--shared-dir given {len(dirs)} times: at most {MAX_DIRS}")
    need = getattr(args, "need", None)
    if need is not None and not dirs:
        raise UsageError("--need SIZE applies to --shared-dir: give the directory it is about")
    try:
        need_bytes = parse_size(str(need)) if need is not None else None
    except UsageError as exc:
        raise UsageError(f"--need: {exc}") from None
    return StorageConfig(dirs=dirs, need_bytes=need_bytes)


def nccl_diag_config_from_args(args: argparse.Namespace) -> NcclDiagConfig:
    from .config import NcclDiagConfig

    ras, debug = getattr(args, "nccl_ras", None), _strings(getattr(args, "nccl_debug", None))
    for path in debug:
        input_file(path, "--nccl-debug", "a saved NCCL_DEBUG=INFO log")
    if ras:
        _check_ras_file(ras)
    return NcclDiagConfig(ras=ras, debug=debug, capture=bool(getattr(args, "nccl_capture", False)))


def _tolerance(args: argparse.Namespace) -> float:
    from .config import parse_float
    _BASE = _default("base")

    tol = parse_float(_text(getattr(args, "tolerance", None)), "--tolerance")
    if tol is None:
        return _BASE.tolerance
    if tol >= 1:
        raise UsageError("--tolerance is a fraction: 0.1 means 10%")
    return tol


def baseline_config_from_args(args: argparse.Namespace) -> BaselineConfig:
    from .config import BaselineConfig

    if args.baseline:
        input_file(args.baseline, "--baseline", "a JSON report written by --json")
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
    for dest in ("save_baseline", "good_out", "bad_out"):
        path = getattr(args, dest, None)
        if path and "%" in path:
            setattr(args, dest, expand_path(path, fields))
            templates[dest] = path
    if templates:
        args._templates = templates


def _sizes(value: Any) -> tuple:
    _BENCH = _default("bench")

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
    _BENCH = _default("bench")

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
    _BENCH = _default("bench")

    from .bench.ops import DTYPES

    if value is None:
        return _BENCH.dtype
    if value not in DTYPES:
        raise UsageError(f"unknown dtype {value!r}: choose from {', '.join(DTYPES)}")
    return value


def bench_config_from_args(args: argparse.Namespace) -> BenchConfig:
    from .config import BenchConfig, parse_float, parse_fraction, parse_int
    _BENCH = _default("bench")

    from .bench.timing import TIMINGS
    from .units import parse_size

    ops, dtype = _ops(args.ops), _dtype(args.dtype)
    if args.baseline:
        input_file(args.baseline, "--baseline", "a JSON report written by --json")
    iters, warmup = parse_int(_text(args.iters), "--iters", 1, 1_000_000), parse_int(_text(args.warmup), "--warmup",
                                                                                     0, 1_000_000)
    gate = args.gate_size
    timing = getattr(args, "timing", None) or _BENCH.timing
    if timing not in TIMINGS:  # the Python API passes strings argparse never saw
        raise UsageError(f"--timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
    return BenchConfig(
        sizes=_sizes(args.sizes),
        ops=ops,
        dtype=dtype,
        iters=_BENCH.iters if iters is None else iters,
        warmup=_BENCH.warmup if warmup is None else warmup,
        in_place=bool(args.in_place),
        check=bool(args.check),
        min_busbw_gbps=parse_float(_text(args.min_busbw), "--min-busbw"),
        min_efficiency=parse_fraction(_text(args.min_efficiency), "--min-efficiency"),
        gate_size=None if gate is None else gate if isinstance(gate, int) else parse_size(gate),
        baseline=args.baseline,
        tolerance=_tolerance(args),
        save_baseline=args.save_baseline,
        timing=timing,
    )


def links_config_from_args(args: argparse.Namespace) -> LinksConfig:
    from .config import LinksConfig, parse_float, parse_fraction, parse_int
    from .rendezvous.budget import FIXED as _FIXED
    _LINKS = _default("links")

    from .links.schedule import ROUNDS
    from .units import parse_size

    size = args.size if isinstance(args.size, int) else parse_size(args.size) if args.size is not None else None
    iters = parse_int(_text(args.iters), "--iters", 1, 100000)
    seed = parse_int(_text(args.seed), "--seed", 0, 2**31 - 1)
    relative = parse_float(_text(args.relative), "--relative")
    min_time = parse_float(_text(getattr(args, "min_time", None)), "--min-time", positive=False)
    if min_time is not None and not 0 <= min_time <= _FIXED.links_min_time_max_s:
        raise UsageError(f"--min-time must be between 0 and {_FIXED.links_min_time_max_s:g} seconds, got {min_time:g}")
    rounds = getattr(args, "rounds", None) if args.command == "links" else "scale"  # sweep: links' scalable mode
    if rounds is not None and rounds not in ROUNDS:
        raise UsageError(f"--rounds must be one of {', '.join(ROUNDS)}, got {rounds!r}")
    return LinksConfig(
        size=_LINKS.size if size is None else size,
        iters=_LINKS.iters if iters is None else iters,
        rounds=rounds or _LINKS.rounds,
        min_gbps=parse_float(_text(args.min_gbps), "--min-gbps"),
        min_efficiency=parse_fraction(_text(getattr(args, "min_efficiency", None)), "--min-efficiency"),
        relative=_LINKS.relative if relative is None else relative,
        seed=_LINKS.seed if seed is None else seed,
        min_time_s=min_time,
    )


# The flag groups the commands table names (commands.py: each row's `flags`, in --help order).
FLAG_GROUPS: dict = {
    "world": FlagGroup(_world_flags),
    "watch_job": FlagGroup(_watch_job_flags),
    "output": FlagGroup(_output_flags),
    "facts": FlagGroup(_facts_flags, _facts_config),
    "preflight": FlagGroup(_preflight_flags, _preflight_config),
    "recommend": FlagGroup(_recommend_flags, _recommend_config),
    "bench": FlagGroup(_bench_flags, _bench_config),
    "links": FlagGroup(_links_flags, _links_config),
    "report": FlagGroup(_report_flags, _report_config),
    "report_format": FlagGroup(_report_format_flags, _report_format_config),
    "diagnose": FlagGroup(_diagnose_flags, _diagnose_config),
    "watch": FlagGroup(_watch_flags, _watch_config),
    "slurm": FlagGroup(_slurm_flags),
    "health": FlagGroup(_health_flags, _health_config),
    "hardware": FlagGroup(_hardware_flags, _hardware_config),
    "sweep": FlagGroup(_sweep_flags, _sweep_config),
}


def api_config(command: str, options: Mapping[str, Any], api_name: str, env=None) -> Config:
    """The Config for a Python-API call: keyword arguments are the command's flags (`run_bench(sizes="1M")`)."""
    return config_from_args(namespace_for(command, options, api_name), env=env)


def flags_of(command: str) -> set:
    """Every flag the command accepts (for docs tests: the README names only flags that exist)."""
    sub = subparser(build_parser(), command)
    return {s for a in sub._actions for s in a.option_strings}


__all__ = ["COMMANDS", "api_config", "build_parser", "config_from_args", "flags_of", "options_of", "subparser"]
