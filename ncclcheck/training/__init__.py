"""`ncclcheck.guard()`: the preflight as the first line of a training script, inside the launcher's world.

    import ncclcheck
    ncclcheck.guard()                # raises ncclcheck.PreflightFailed on every rank when the job cannot train
    dist.init_process_group("nccl")  # or fabric.launch()

An entry point like the CLI (it sits beside cli.py, above api): it reads the launcher's world once
(agent.launchers), runs api.run_preflight in-process as this rank (preflight.cluster's protocol: one process per node
collects and probes, the node's other ranks wait in the store for node 0's result, every wait bounded by the
Budget), prints the report once per job (global rank 0) and turns a failing report into PreflightFailed on every
rank. It leaves nothing behind: the store connection is a client of the launcher's store under torchrun and fabric
(its keys under their own prefix); under srun, mpirun and plain env:// rank 0 hosts the store on MASTER_PORT and
every rank leaves only once it is closed (preflight.cluster's Lifeline), so the script's own store binds that port
next; the mesh listeners are closed, no thread, signal handler or fd redirect remains (unless postmortem_dir= armed
the job: then training/arm.py's hooks stay, as asked).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, Optional

# The variables `apply=True` may set: the interface and HCA choices the recommendations make.
APPLIED = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA")
# Launchers that start every rank but export no torch.distributed world (srun, mpirun): `apply=True` exports the
# world the guard read from their variables, so the script's env:// init_process_group needs no boilerplate.
WORLD_EXPORTING = ("slurm", "mpi")
OFF_VAR = "NCCLCHECK_GUARD"  # NCCLCHECK_GUARD=0: guard() returns None at once (no script edit needed)


class PreflightFailed(RuntimeError):
    """The job cannot train as launched. str(exc) is the root cause and its fix; `.report` the full Report."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


def guard(timeout: Optional[float] = None, paths: tuple = (), code_path: Optional[str] = None,
          json: Optional[str] = None, strict: bool = False, apply: bool = False,
          postmortem_dir: Optional[str] = None, quiet: bool = False, shared_dirs: tuple = (),
          need: Optional[str] = None, live: Optional[bool] = None) -> Any:
    """Run the multi-node preflight in the launcher's world before the job touches it.

    timeout: T, each named wait's bound (--timeout); every rank ends within T + the fixed graces.
    paths / code_path: shared paths that must be the same on every node, and the code tree hashed (--paths, --code).
    json: where global rank 0 writes the JSON report. strict: warnings fail too (--strict).
    apply: set the recommended NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME / NCCL_IB_HCA in os.environ where unset; under
    srun and mpirun also the world (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR...) where unset (world_exports).
    quiet: rank 0 prints the report only when it fails, and no node says what it waits for (without it, each node's
    first rank says on stderr what it waits for once a wait outlasts a healthy one: docs/troubleshooting.md).
    shared_dirs / need: directories that must be one writable filesystem on every node, with at least `need` free
    (--shared-dir, --need: the checkpoint directory).
    postmortem_dir: arm the job so a failure can be diagnosed (ncclcheck.arm, training/arm.py): the flight recorder's
    and NCCL's debug log's variables set in os.environ where unset, and every rank writes its flight recorder and
    Python stacks there when it raises, times out, gets SIGTERM or SIGUSR1 (the only handlers the guard leaves); and,
    as arm() does, registers the rank for `ncclcheck watch` (live): one step arms the job for both.
    live: this rank's responder (live/responder.py), so `ncclcheck watch --master-addr H --master-port P` can fetch
    its flight recorder, stacks and progress while the job runs or hangs (docs/live.md); with a job token it answers
    only requests sealed with it. None (the default): on when postmortem_dir arms the job, off without it (a guard
    that only checks opens no listening socket); False: never; True: also without postmortem_dir. The responder is on
    `report.extra["live_responder"]`'s address.
    Returns the Report (None when NCCLCHECK_GUARD=0); raises PreflightFailed on every rank when it fails.
    """
    env = os.environ
    if str(env.get(OFF_VAR, "")).strip() == "0":
        return None
    from .. import api
    from ..agent.launchers import detect_placement
    from ..config import Config, OutputConfig, StorageConfig, build_world
    from ..errors import UsageError
    from ..units import parse_size

    try:
        world = build_world(timeout=None if timeout is None else str(timeout), env=env)
        placement = guard_placement(detect_placement(env, world), env)
        storage = StorageConfig(dirs=tuple(shared_dirs), need_bytes=None if need is None else parse_size(str(need)))
        output = OutputConfig(files={"json": json} if json else {}, strict=strict)
        config = Config(command="preflight", world=world, output=output,
                        code_path=code_path, paths=tuple(paths), storage=storage)
        report = api.run_preflight(config, placement=placement, observer=_waits_observer(placement, quiet))
    except UsageError as e:  # the launcher's variables do not describe a world: every rank says so alike
        raise PreflightFailed(f"ncclcheck.guard: {e}") from None
    speaks = placement.rank == 0
    failing = report.exit_code != 0
    if failing:
        if speaks:
            _emit(report, json, False)
        raise PreflightFailed(failure_message(report, placement.rank), report)
    notes = []
    live = bool(postmortem_dir) if live is None else live  # arming for diagnose arms for watch: one step
    responder_args = {"token": world.token, "rank": placement.rank, "world_size": placement.world_size,
                      "local_rank": placement.local_rank, "master": (placement.master_addr, placement.master_port)}
    if postmortem_dir:
        from .arm import arm

        # the variables of recommend_postmortem's table (torch's current names, per-host dump names from the
        # report's nodes) where unset, and the hooks that write every rank's evidence (training/arm.py)
        armed = arm(postmortem_dir, nodes=report.nodes, node_rank=placement.node_rank, env=env, live=live,
                    responder_args=responder_args)
        report.extra["guard_postmortem"] = armed.env
        if armed.live:
            report.extra["live_responder"] = armed.live
        notes.append(f"armed the post-mortem under {armed.directory} ({', '.join(armed.env) or 'variables as set'};"
                     f" each rank writes its flight recorder and stacks there when it fails or is stopped; "
                     f"`ncclcheck diagnose` it after a failure)" + "".join(f"; {n}" for n in armed.notes))
    elif live:  # live without the post-mortem: the responder alone (with it, arm() starts it)
        from ..live.responder import start

        responder = start(env, **responder_args)
        if responder is not None:
            report.extra["live_responder"] = f"{responder.addr}:{responder.port}"
            notes.append(f"live: rank {placement.rank} answers `ncclcheck watch` at {responder.addr}:{responder.port}"
                         + (f" (requests authenticated: {responder.level})" if responder.auth else ""))
    if apply:
        applied = {**world_exports(placement, env), **apply_recommendations(report.recommendations, env,
                                                                            placement.node_rank)}
        report.extra["guard_applied"] = applied
        if applied:
            from ..nccl.rules import assignment

            notes.append("set " + " ".join(assignment(k, v) for k, v in applied.items())
                         + " (the recommendation" + (" and the launcher's world, each rank its own" if "RANK" in applied
                                                     else "") + "; variables you set are never changed)")
    if speaks:
        _emit(report, json, quiet, tuple(notes))
    return report


def _waits_observer(placement: Any, quiet: bool) -> Any:
    """Each node's leader says on stderr what it waits for while a wait outlasts a healthy one (a node that never
    joins, a master that refuses): a plain line each, in the job's log as on a terminal. quiet: nothing."""
    if quiet or not placement.node_leader:
        return None
    from ..render.progress import WaitLines

    return WaitLines(sys.stderr, command="guard")


def guard_placement(placement: Any, env: Mapping[str, str]) -> Any:
    """The launcher's placement with the guard's own key prefix: `ncclcheck/<job>-guard<restart>/`, so a torchrun
    restart (same agent store, same run id) never reads an earlier attempt's verdict, and the CLI's preflight keys
    and torch's own (under other prefixes) never meet the guard's."""
    restart = str(env.get("TORCHELASTIC_RESTART_COUNT") or "0").strip()
    restart = "".join(c for c in restart if c.isdigit()) or "0"
    return dataclasses.replace(placement, job_id=f"{placement.job_id}-guard{restart}")


def failure_message(report: Any, rank: int) -> str:
    """One paragraph: what failed (node, host, check id), why, and the fix; then how many other problems."""
    from ..model import Status

    bad = [c for c in report.checks if c.status is Status.FAIL]
    if not bad and report.strict:
        bad = [c for c in report.checks if c.status is Status.WARN]
    hosts = {n.node_rank: n.hostname for n in report.nodes}
    lines = [f"ncclcheck preflight failed (rank {rank}, exit code {report.exit_code}):"]
    seen = set()
    for c in bad:
        key = (c.id, c.node, c.summary)
        if key in seen:
            continue
        seen.add(key)
        where = "" if c.node is None else f" on node {c.node}" + (f" ({hosts[c.node]})" if c.node in hosts else "")
        lines.append(f"  [{c.id}]{where}: {c.summary}")
        if c.fix:
            lines.append(f"    fix: {c.fix}")
        if len(seen) == 3:
            break
    more = len({(c.id, c.node, c.summary) for c in bad}) - len(seen)
    if more > 0:
        lines.append(f"  ... and {more} more (the full report is on global rank 0)")
    if not bad:
        lines.append("  the world agreed on a failing exit code (see global rank 0's report)")
    return "\n".join(lines)


def world_exports(placement: Any, env: MutableMapping[str, str]) -> dict:
    """Under srun and mpirun: set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR and
    MASTER_PORT from the launcher's placement (the master the guard itself used: MASTER_ADDR/MASTER_PORT as given,
    else the first host of the Slurm node list and 15000 + the job id's last four digits) where the user has not set
    them, so `dist.init_process_group(backend)` (env://) finds its world. Returns {name: value} of what it set."""
    if placement.launcher not in WORLD_EXPORTING:
        return {}
    world = {"RANK": placement.rank, "WORLD_SIZE": placement.world_size, "LOCAL_RANK": placement.local_rank,
             "LOCAL_WORLD_SIZE": placement.local_world_size, "NODE_RANK": placement.node_rank,
             "MASTER_ADDR": placement.master_addr, "MASTER_PORT": placement.master_port}
    applied = {}
    for name, value in world.items():
        if value is None or str(env.get(name) or "").strip():
            continue
        env[name] = applied[name] = str(value)
    return applied


def apply_recommendations(recs: list, env: MutableMapping[str, str], node_rank: int) -> dict:
    """Set each recommended APPLIED variable this node is told (a node-specific value wins over the job's) where the
    user has not set it. Returns {name: value} of what it set."""
    from .arm import set_unset

    return set_unset(recs, env, node_rank, APPLIED)


def _emit(report: Any, json_path: Optional[str], quiet: bool, notes: tuple = ()) -> None:
    """Global rank 0: the report on stderr (the script's stdout stays its own), the JSON where asked. A run that
    passed is one line (the job's log is the script's, not ours); a warning or a failure gets the full report."""
    from ..model import Status
    from ..render import console as view

    if json_path:
        from ..render.json import render_json

        if json_path == "-":
            sys.stdout.write(render_json(report))
            sys.stdout.flush()
        else:
            from ..render.files import write_atomic

            write_atomic(json_path, render_json(report))
    if quiet:
        return
    term = view.make_console(sys.stderr, os.environ, report.world.launcher or "ncclcheck")
    if report.status is Status.PASS:
        term.print(view.one_line_verdict(report, notes), soft_wrap=True)
        return
    view.print_parts(term, view.render_report(report, verbose=False, folded_hint=False))  # the guard has no --verbose
    for note in notes:
        term.print(note, markup=False, highlight=False, soft_wrap=True)
