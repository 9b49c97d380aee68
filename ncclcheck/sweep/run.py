"""run_sweep: links in its scale mode over the allocation's nodes, one verdict per node, then (global rank 0 only,
with --drain or --dry-run) drain the proven-bad nodes and resume ncclcheck's own drains of nodes found healthy,
by the prefix rule (health/drain.py) through the one scontrol module (health/scontrol.py)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional

from ..config import Config, LinksConfig, SweepConfig
from ..health import drain as drainmod
from ..health.scontrol import Scontrol, ScontrolError
from ..hostranges import collect as compress_hostlist
from ..model import Report, failed, passed, warned
from .verdict import BAD, HEALTHY, NO_RESULTS, SUSPECT, UNKNOWN, node_verdicts

SLURM_CHECK = "slurm.drain"
UNMEASURED_CHECK = "sweep.unmeasured"


def node_names(nodelist: Optional[str], hosts: list, n: int) -> list:
    """Slurm's names of the n nodes: the allocation's node list (node rank i = its i-th name, as Slurm numbers
    SLURM_NODEID), else the hostnames links recorded."""
    from ..agent.launchers import expand_nodelist

    try:
        names = expand_nodelist(nodelist) if nodelist else []
    except ValueError:
        names = []
    if len(names) == n:
        return names
    return [(hosts[i] if i < len(hosts) and hosts[i] else f"node{i}") for i in range(n)]


def run_sweep(config: Config, run_links: Callable, observer=None, scontrol: Optional[Scontrol] = None,
              placement=None) -> Report:
    """`ncclcheck sweep`. `run_links` is api.run_links (the job, its world and its analysis are links'); `placement`
    is this process's place in the job, read once by the caller (None: read here)."""
    from ..agent.launchers import detect_placement

    placement = placement or detect_placement(os.environ, config.world)
    sw = config.sweep or SweepConfig()
    links_cfg = dataclasses.replace(config.links or LinksConfig(), rounds="scale")
    measured = run_links(dataclasses.replace(config, command="links", links=links_cfg), observer=observer,
                         placement=placement)
    section = measured.links or {}
    n = len(section.get("matrix_gbps") or []) or measured.world.nnodes
    names = node_names(sw.nodelist, list(section.get("hosts") or []), n)
    if n > 1 and len(set(names)) < n:  # several ranks on one host: not an allocation of one task per node
        return _not_nodes(measured, names)
    verdicts = node_verdicts(section, names)
    by = {s: [v.name for v in verdicts if v.status == s] for s in (HEALTHY, BAD, SUSPECT, NO_RESULTS, UNKNOWN)}
    sweep = {"nodes": [v.to_json() for v in verdicts], "good": compress_hostlist(by[HEALTHY]),
             "bad": compress_hostlist(by[BAD]), "suspect": compress_hostlist(by[SUSPECT]),
             "no_results": compress_hostlist(by[NO_RESULTS]), "unknown": compress_hostlist(by[UNKNOWN])}
    extra, checks = {**measured.extra, "sweep": sweep}, list(measured.checks)
    checks.append(_unmeasured_check(verdicts))
    # One process acts for the job: global rank 0, which holds the verdict.
    acts = placement.rank == 0
    if acts and sw.slurm.acts and not measured.interrupted:
        sc = scontrol or Scontrol(dry_run=sw.slurm.dry_run)
        checks.extend(_act(sc, verdicts))
        extra["slurm"] = {"commands": list(sc.commands), "dry_run": sw.slurm.dry_run}
    if acts:
        _write_lists(sw, sweep)
    return dataclasses.replace(measured, command="sweep", checks=checks, extra=extra)


def _not_nodes(measured: Report, names: list) -> Report:
    """Ranks that share a host are not nodes: what links measured between them is loopback inside that host, so no
    node is judged, listed or drained, and the run says where to run it instead."""
    shared = sorted({h for h in names if names.count(h) > 1})
    why = (f"{len(names)} ranks ran on {len(set(names))} host(s) ({', '.join(shared[:4])} holds several): sweep "
           "measured loopback between ranks of one host, no link between nodes; no node judged, listed or drained")
    check = warned(UNMEASURED_CHECK, why, evidence={"hosts": names},
                   fix="Run it inside an allocation with one task per node: srun --ntasks-per-node=1 ncclcheck sweep "
                       "(--drain to act)")
    sweep = {"nodes": [], "good": "", "bad": "", "suspect": "", "no_results": "", "unknown": ""}
    return dataclasses.replace(measured, command="sweep", checks=[*measured.checks, check],
                               extra={**measured.extra, "sweep": sweep})


def _unmeasured_check(verdicts: list) -> object:
    """sweep.unmeasured: a sweep that could not measure a node has not proven it healthy; the run does not pass
    (nothing is drained for it: only proven-bad nodes are)."""
    left = [v for v in verdicts if v.status in (UNKNOWN, NO_RESULTS)]
    if not left:
        return passed(UNMEASURED_CHECK, f"every one of the {len(verdicts)} nodes was measured")
    names = compress_hostlist([v.name for v in left])
    return failed(UNMEASURED_CHECK, f"{len(left)} of {len(verdicts)} nodes not proven healthy (could not be measured): "
                                    f"{names}; {left[0].name}: {left[0].message}",
                  detail="\n".join(f"{v.name}: {v.message}" for v in left),
                  evidence={"nodes": [v.name for v in left]},
                  fix="Not drained (nothing was proven); left out of the good list. links.pair_error names why each "
                      "pair failed: a link slower than --size / --timeout needs a larger --timeout or a smaller "
                      "--size.")


def _act(sc: Scontrol, verdicts: list) -> list:
    """Drain the bad nodes, resume ncclcheck's drains of healthy ones; suspects and nodes without results are left
    alone (nothing was proven about them). One slurm.drain result per node acted on or refused."""
    targets = [v for v in verdicts if v.status in (BAD, HEALTHY)]
    if not targets:
        return []
    try:
        states = sc.show_nodes()
    except ScontrolError as e:
        bad = [v.name for v in targets if v.status == BAD]
        res = failed if bad else warned  # as health says it: Slurm's state unread is never a pass
        return [res(SLURM_CHECK, f"could not read the nodes' Slurm state, nothing drained or resumed: {e}",
                    evidence={"error": str(e), "bad": bad},
                    fix="Run the sweep where scontrol reaches slurmctld (inside the allocation, as root or "
                        "SlurmUser).")]
    out = []
    for v in targets:
        action = drainmod.plan(v.name, states.get(v.name), v.drain_reason if v.status == BAD else None)
        if action.kind == "none" and v.status == HEALTHY:
            continue  # a healthy node nobody drained: nothing to say
        try:
            sc.apply(action)
        except ScontrolError as e:
            res = failed if v.status == BAD else warned  # a healthy node only could not be resumed
            out.append(res(SLURM_CHECK, f"could not {action.kind} {v.name}: {e}", node=v.node,
                           evidence=action.to_json(), fix="Check scontrol permissions (root or SlurmUser)."))
            continue
        verb = {"drain": "drained", "resume": "resumed", "none": "left"}[action.kind]
        if sc.dry_run and action.kind != "none":
            verb = f"would have {verb} (--dry-run: {sc.commands[-1]})"
        out.append(passed(SLURM_CHECK, f"{verb} {v.name}: {action.why}", node=v.node, evidence=action.to_json()))
    return out


def _write_lists(sw: SweepConfig, section: dict) -> None:
    from ..render.files import write_atomic

    for path, key in ((sw.good_out, "good"), (sw.bad_out, "bad")):
        if path:
            write_atomic(path, section[key] + "\n")


def run(config: Config, observer=None, placement=None) -> Report:
    """The commands table's runner for `sweep` (commands.py): links' own pipeline measures."""
    from ..links.pipeline import run as run_links

    return run_sweep(config, run_links, observer=observer, placement=placement)
