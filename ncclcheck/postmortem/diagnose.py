"""`ncclcheck diagnose PATH...` as a Report: read the inputs, analyse them, run the postmortem.* checks (and nccl.ras
on ncclras output). Nothing here prints; the report's `postmortem` section carries what the renderers draw."""

from __future__ import annotations

import datetime as _dt
import time
from typing import Optional

from ..checks.nccl_ras import ras_check_from_text
from ..checks.postmortem import PostmortemInput
from ..checks.registry import POSTMORTEM, run_checks
from ..errors import UsageError
from ..model import LAUNCHERS, NodeInfo, Recommendation, Report, WorldInfo, clean_text
from ..render.common import one_line
from .analyze import analyse, empty_dumps
from .inputs import NOT_A_JOB_LOG, load_preflight, read_inputs
from .slow import analyse as analyse_slow
from .slow import check as slow_check

KINDS = ("flight-recorder dumps (pickle or JSON)", "NCCL_DEBUG logs", "a launcher's output", "torchelastic error "
         "files", "`ncclras -f json` output")


def diagnose(paths: list[str], preflight_path: Optional[str] = None, version: str = "?") -> Report:
    """The report of what the job left under `paths`. UsageError when nothing there is anything diagnose reads."""
    t0 = time.monotonic()
    started = _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")
    preflight = plain_preflight(load_preflight(preflight_path))
    inp = read_inputs(paths)
    if preflight is None and inp.reports:
        preflight = plain_preflight(next((d for _, d in inp.reports if d.get("command") in ("preflight", "recommend")),
                                         None))
    if not inp.recognised() and not empty_dumps(inp):  # an empty dump is a finding (a rank killed while dumping)
        if inp.refused:
            first = inp.refused[0]
            more = f" (and {len(inp.refused) - 1} more refused)" if len(inp.refused) > 1 else ""
            raise UsageError(one_line(clean_text(f"nothing under {' '.join(paths)} could be read: {first['path']}: "
                                      f"{first['why']}{more}")))
        said = next((r for r in inp.read if r.get("note") == NOT_A_JOB_LOG), None)
        if said is not None:
            raise UsageError(one_line(clean_text(f"{said['path']}: {NOT_A_JOB_LOG}")))
        raise UsageError(f"nothing under {' '.join(paths)} is one of: {', '.join(KINDS)}")
    analysis = analyse(inp, preflight, here=_this_host)
    checks = run_checks(POSTMORTEM, PostmortemInput(analysis))
    for path, text in inp.ras:
        checks.append(ras_check_from_text(text, path))
    # who slowed the job, from the same call times watch reads live (and the clocks and phases watch --dump kept)
    analysis["slow"] = analyse_slow(inp.dumps, {r["rank"]: r["host"] for r in analysis["ranks"] if r.get("host")},
                                    inp.clocks, inp.phases, unjudged=[r["rank"] for r in analysis["ranks"]])
    checks.append(slow_check("postmortem.slow", analysis["slow"]))
    nodes = []
    hosts = {r["host"] for r in analysis["ranks"] if r.get("host")}
    world = WorldInfo(nnodes=max(1, len(hosts)), world_size=analysis["world_size"], backend=_backend(inp),
                      launcher=_launcher(inp))
    if preflight:
        nodes = [NodeInfo(n["node_rank"], n.get("hostname", "?"), {}) for n in preflight.get("nodes") or []
                 if isinstance(n, dict) and isinstance(n.get("node_rank"), int)]
        world = WorldInfo(nnodes=max(1, len(nodes)), world_size=analysis["world_size"], backend=world.backend,
                          launcher=world.launcher)
    recs = [Recommendation.from_json(r) for r in (preflight or {}).get("recommendations") or []
            if isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("value"), str)]
    return Report(command="diagnose", version=version, started=started, duration_s=time.monotonic() - t0,
                  world=world, nodes=nodes, checks=checks, recommendations=recs, extra={"postmortem": analysis})


def plain_preflight(doc) -> Optional[dict]:
    """Only what diagnose reads of a preflight report, each field of the type it must have: a report found among a
    job's files is as hostile as any file there ("world": "w" had crashed diagnose with an AttributeError)."""
    if not isinstance(doc, dict):
        return None
    world = doc.get("world") if isinstance(doc.get("world"), dict) else {}
    nodes = [{"node_rank": n["node_rank"], "hostname": n["hostname"] if isinstance(n.get("hostname"), str) else "?",
              "interfaces": _interface_names(n.get("facts"))}
             for n in doc.get("nodes") or [] if isinstance(doc.get("nodes"), list)
             and isinstance(n, dict) and type(n.get("node_rank")) is int]
    recs = [r for r in doc.get("recommendations") or [] if isinstance(doc.get("recommendations"), list)
            and isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("value"), str)]
    return {"command": doc.get("command") if isinstance(doc.get("command"), str) else "?",
            "world": {k: world[k] for k in ("world_size", "nnodes") if type(world.get(k)) is int},
            "nodes": nodes, "recommendations": recs}


MAX_INTERFACES = 256  # of one node's facts: a report listing more is not one a host wrote


def _interface_names(facts) -> list:
    """The interface names of a node's facts (a hostile report's are checked: short strings, bounded count)."""
    ifs = facts.get("interfaces") if isinstance(facts, dict) else None
    return [i["name"] for i in (ifs if isinstance(ifs, list) else [])[:MAX_INTERFACES]
            if isinstance(i, dict) and isinstance(i.get("name"), str) and 0 < len(i["name"]) <= 64
            and i["name"].isprintable()]


def _this_host() -> Optional[dict]:
    """This machine's hostname and interface names (facts/), read only when a cause on a host asks for them."""
    from ..facts import hostname
    from ..facts.net import read_interfaces

    try:
        return {"host": hostname(), "interfaces": [i["name"] for i in read_interfaces()]}
    except Exception:  # a machine whose interfaces cannot be listed: the verdict says how to list them instead
        return None


def _backend(inp) -> str:
    found = {d.backend for d in inp.dumps.values() if d.backend in ("nccl", "gloo")}
    return found.pop() if len(found) == 1 else "none"


def _launcher(inp) -> str:
    """The launcher whose failure report or own lines are among the inputs (torchrun's output with no table when
    its agent was itself stopped), else the one the armed ranks' stacks name (their launcher's variables); "none"
    when none or several."""
    said = {f.get("launcher", "torchrun") for f in inp.failures} | set(inp.launchers.values())
    if not said:
        said = {st["launcher"] for st in inp.stacks.values() if st.get("launcher") in LAUNCHERS}
    return said.pop() if len(said) == 1 else "none"


def run(config, observer=None, placement=None) -> Report:
    """The commands table's runner for `diagnose` (commands.py): its paths and --preflight from the Config."""
    from ..version import __version__

    return diagnose(list(config.diagnose.paths), config.diagnose.preflight, __version__)
