"""The one table of commands: a command is one row here (name, what it does, where its code lives, its runner,
whether it forms a world, its flag groups, the Config sections those flags fill) plus its own package.

Everything that lists commands is derived from this table, never kept by hand: the argument parser and the Config
(options.py: the flag groups' parsers and builders), the CLI's dispatch (cli.py), `ncclcheck.run_<name>` and
`ncclcheck.__all__` (api.py, __init__.py), the commands a check id may belong to (checks/registry.py) and the index
of packages in docs/architecture.md (tests/test_commands.py holds each of them to this table).

Plain data: runners are named as "module:function" strings and imported when a command runs, so that reading the
table (every `ncclcheck --help`) imports no command's code and no layer below points upward. Every runner has the
same signature: run(config, observer=None, placement=None) -> Report.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):  # not a dataclass: `ncclcheck --help` reads this table, and dataclasses costs it ~5 ms
    name: str
    help: str  # one line in `ncclcheck --help`
    package: str  # where the command's code lives (ncclcheck/<package>/), for a newcomer and the docs' index
    runner: str  # "ncclcheck.<module>:<function>", called as run(config, observer=None, placement=None)
    flags: tuple  # flag groups (options.FLAG_GROUPS), in the order --help shows them
    world: bool = False  # forms a world across nodes: the launcher's world must agree with the flags, the report is
    # one per job (global rank 0), and a Ctrl-C before its world formed still writes a partial report
    ranks: bool = False  # a world command that starts ranks of its own (bench, links, sweep): --nproc-per-node is
    # the ranks it runs; the others (preflight, recommend) run one process per node and count it as one rank
    progress: bool = False  # reports progress while it runs (a bar on a terminal, lines on a pipe)
    node_local: bool = False  # its report is about this node alone (its facts, a saved run rendered): every node's
    # leader writes its own output files, none is node 0's
    description: str = ""  # the subcommand's --help text (default: help)
    checks_as: str = ""  # its report holds the check ids of that command (recommend runs preflight's checks)
    recommends: bool = False  # its report can hold recommended variables: --env-out is offered (render/formats.py)

    @property
    def api_name(self) -> str:
        return "run_" + self.name.replace("-", "_")


COMMANDS: tuple = (
    Command("preflight", "checks before a job: node, network, world", "preflight",
            "ncclcheck.preflight.pipeline:run", ("world", "output", "facts", "preflight", "hardware"), world=True,
            progress=True, recommends=True,
            description="Node-local checks, then (multi-node) world formation, cross-node checks and a full-mesh "
                        "probe, then recommended settings."),
    Command("bench", "collective bandwidth/latency sweeps (nccl-tests semantics)", "bench",
            "ncclcheck.bench.pipeline:run", ("world", "output", "bench"), world=True, ranks=True, progress=True),
    Command("links", "node-to-node bandwidth matrix; names slow links/nodes", "links",
            "ncclcheck.links.pipeline:run", ("world", "output", "links"), world=True, ranks=True, progress=True),
    Command("recommend", "print the recommended environment", "preflight (recommend runs preflight's checks)",
            "ncclcheck.preflight.pipeline:run", ("world", "output", "facts", "recommend"), world=True,
            checks_as="preflight", recommends=True),
    Command("report", "render a saved run: terminal, --html, --junit, --markdown, ...", "render",
            "ncclcheck.render.validate:run", ("report", "output", "report_format"), node_local=True, recommends=True,
            description="Render a saved run (RUN.json, written by --json) again, to the terminal and to any of the "
                        "output files."),
    Command("health", "node health for Slurm's HealthCheckProgram / Prolog: GPUs, NVLink, PCIe, GPUDirect "
            "RDMA, IB (seconds, no torch)", "health",
            "ncclcheck.health.run:run", ("output", "slurm", "health", "hardware"),
            description="This node's GPUs (count, memory errors, Xid, NVLink, PCIe, clocks, fabric), NCCL "
                        "interface, RDMA ports and their error counters, GPUDirect RDMA, GPU-NIC affinity, /dev/shm, "
                        "memlock and NCCL settings against what is expected of it; with --drain, drain it in Slurm."),
    Command("sweep", "inside an allocation: find and drain the bad nodes (links rounds, suspects re-paired with good "
            "nodes)", "sweep", "ncclcheck.sweep.run:run", ("world", "output", "slurm", "sweep"), world=True,
            ranks=True, progress=True,
            description="Run with one task per node: srun --ntasks-per-node=1 ncclcheck sweep --drain"),
    Command("diagnose", "what a failed or hung job left -> rank, host, collective, cause", "postmortem",
            "ncclcheck.postmortem.diagnose:run", ("output", "diagnose"), recommends=True,
            description="Reads flight-recorder dumps, NCCL logs, the launcher's output and error files and ncclras "
                        "JSON (files, directories, globs; each recognised by its content) and names the root cause "
                        "first. Exit 0: nothing wrong found; 1: a cause named; 2: bad input."),
    Command("watch", "while a job runs or hangs: every armed rank fetched live -> rank, host, process group, "
            "collective, cause (the job is left running)", "live (watch) and its responder in every armed rank",
            "ncclcheck.live.watch:run", ("watch_job", "output", "watch"), progress=True,
            description="Reads the armed ranks' addresses from the job's store, fetches every rank's flight "
                        "recorder, stacks and progress at once, looks at progress again a moment later, and names the "
                        "culprit of a hang with diagnose's analysis (docs/live.md). Exit 0: the job is making "
                        "progress; 1: a cause named (or nothing armed); 2: bad flags."),
    Command("env", "this node's facts (versions, GPUs, network, RDMA)", "facts (read), steps/world.py (the report)",
            "ncclcheck.steps.world:run_env", ("output", "facts", "hardware"), node_local=True),
)
BY_NAME: dict = {c.name: c for c in COMMANDS}
NAMES: tuple = tuple(BY_NAME)
WORLD: tuple = tuple(c.name for c in COMMANDS if c.world)


def command(name: str) -> Command:
    """The row of one command (KeyError for a name no row has)."""
    return BY_NAME[name]


__all__ = ["BY_NAME", "COMMANDS", "Command", "NAMES", "WORLD", "command"]
