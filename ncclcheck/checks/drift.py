"""`baseline.drift`: every node's facts against a saved known-good run (a golden configuration), difference by
difference: versions (python, torch, CUDA, NCCL, driver), NCCL_/TORCH_NCCL_/GLOO_ variables, traffic interfaces
(present, MTU, speed), RDMA ports (state, rate, link layer) and installed packages.

Pure: facts in, CheckResults out. Addresses, MACs and hostnames are per node by nature and never compared. The
baseline is any ncclcheck JSON report with node facts (`preflight --save-baseline`, `preflight --json`, `recommend
--json`, `health --json`, `env --json`). Only what both runs measured is compared: a group of facts one run did not
collect (health never collects the CUDA and NCCL versions only torch knows; an older report lacks a newer group) is
"not in the baseline" or "not measured by this run", counted and named, never a difference: a saved health run used
as the next one's baseline must read "same as the baseline", not "python version (none) -> 3.11.7".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..errors import UsageError
from ..model import CheckResult, NodeInfo, load_saved_report, passed, skipped, warned

CHECK_ID = "baseline.drift"
VERSIONS = ("python", "torch", "cuda", "nccl", "driver")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")
# The interfaces collectives travel on; bridges, veths and tunnels come and go with containers and would be noise.
TRAFFIC_KINDS = ("physical", "ipoib")
SHOWN = 6  # differences named in the one-line summary; the detail and evidence have all of them
# What a baseline for drift is made by (its reports carry node facts); the refusal of any other names them.
MADE_BY = ("preflight", "recommend", "health", "env")

FIX = ("Bring this node back to the baseline (same image, driver and settings), or, if the change is intended, "
       "save a new baseline from a run that passed: `ncclcheck preflight --save-baseline GOLDEN.json`.")


def _s(v: Any) -> Optional[str]:
    return None if v is None else str(v)


def _collected(group: Any, key: str) -> bool:
    """Did the run collect this group (a fact reader that failed says `unavailable` instead)?"""
    return isinstance(group, Mapping) and "unavailable" not in group and key in group


def groups(facts: Mapping) -> dict[str, dict[str, Optional[str]]]:
    """The comparable part of one node's facts, by group: group -> {what -> value} (what reads like 'torch
    version'). A group the run did not collect is absent; inside a collected group an absent item is absent on that
    node (an interface gone, a variable unset). Each version is a group of its own: a run knows some and not others
    (health never imports torch, so it cannot know the CUDA and NCCL versions torch was built with)."""
    out: dict[str, dict[str, Optional[str]]] = {}
    versions = facts.get("versions")
    for k in VERSIONS:
        if _collected(versions, k):
            out[f"{k} version"] = {f"{k} version": _s(versions[k])}
    env = facts.get("env")
    if _collected(env, "vars") and isinstance(env["vars"], Mapping):
        redacted = set(env.get("redacted") or [])
        out["NCCL/Gloo variables"] = {f"${name}": _s(value) for name, value in sorted(env["vars"].items())
                                      if name.startswith(ENV_PREFIXES) and name not in redacted}
    ifs = facts.get("interfaces")
    if isinstance(ifs, list):
        group: dict[str, Optional[str]] = {}
        for i in ifs:
            if isinstance(i, Mapping) and i.get("kind") in TRAFFIC_KINDS:
                group[f"interface {i.get('name')}"] = "up" if i.get("up") and i.get("running") else "down"
                group[f"interface {i.get('name')} MTU"] = _s(i.get("mtu"))
                group[f"interface {i.get('name')} speed (Mb/s)"] = _s(i.get("speed_mbps"))
        out["interfaces"] = group
    rdma = facts.get("rdma")
    if _collected(rdma, "devices") and isinstance(rdma["devices"], list):
        group = {}
        for dev in rdma["devices"]:
            for p in (dev.get("ports") or []) if isinstance(dev, Mapping) else []:
                where = f"RDMA {dev.get('name')}/{p.get('port')}"
                group[where] = _s(p.get("state"))
                group[f"{where} rate (Gb/s)"] = _s(p.get("rate_gbps"))
                group[f"{where} link layer"] = _s(p.get("link_layer"))
        out["RDMA ports"] = group
    pk = facts.get("packages")
    if isinstance(pk, Mapping) and "unavailable" not in pk:
        if isinstance(pk.get("items"), Mapping):
            out["packages"] = {f"package {name}": _s(ver) for name, ver in pk["items"].items()}
        if pk.get("hash"):
            out["packages (hash)"] = {"packages (hash)": _s(pk.get("hash"))}
    return out


def fingerprint(facts: Mapping) -> dict[str, Optional[str]]:
    """Every compared item of one node's facts, flat: what -> value."""
    return {what: v for group in groups(facts).values() for what, v in group.items()}


def compare(baseline: Mapping, current: Mapping) -> tuple[list[dict], dict]:
    """([{"what", "baseline", "now"}] for every item of a group both runs collected whose value differs (None:
    absent on that side), {"not_in_baseline": {group: items}, "not_measured": {group: items}}: the groups one run
    collected and the other did not, with how many items each holds, never compared)."""
    b, c = groups(baseline), groups(current)
    if "packages" in b and "packages" in c:  # both listed them: the list names what differs, the hash says less
        b.pop("packages (hash)", None)
        c.pop("packages (hash)", None)
    elif "packages (hash)" in b and "packages (hash)" in c:  # one side only hashed: compare hashes, not lists
        b.pop("packages", None)
        c.pop("packages", None)
    else:  # one side did not collect packages: its list is what the other lacks (its hash is the same fact)
        for side in (b, c):
            if "packages" in side:
                side.pop("packages (hash)", None)
    diffs: list[dict] = []
    for name in [g for g in b if g in c]:
        bg, cg = b[name], c[name]
        for what in dict.fromkeys(list(bg) + list(cg)):
            if bg.get(what) != cg.get(what):
                diffs.append({"what": what, "baseline": bg.get(what), "now": cg.get(what)})
    skipped_groups = {"not_in_baseline": {g: len(items) for g, items in c.items() if g not in b},
                      "not_measured": {g: len(items) for g, items in b.items() if g not in c}}
    return diffs, skipped_groups


def differences(baseline: Mapping, current: Mapping) -> list[dict]:
    """[{"what", "baseline", "now"}] for every item both runs measured whose value differs (None: absent on that
    side)."""
    return compare(baseline, current)[0]


def baseline_nodes(doc: Any, source: str = "baseline") -> list[NodeInfo]:
    """The nodes of a saved report that carry facts; UsageError (one line) when there are none, naming the command
    that wrote the report and the ones whose reports are baselines."""
    nodes = doc.get("nodes") if isinstance(doc, Mapping) else None
    out = [NodeInfo(int(n.get("node_rank", i)), str(n.get("hostname", "?")), n["facts"])
           for i, n in enumerate(nodes or []) if isinstance(n, Mapping) and isinstance(n.get("facts"), Mapping)
           and n["facts"]]
    if not out:
        made = doc.get("command") if isinstance(doc, Mapping) and isinstance(doc.get("command"), str) else None
        what = f"a report of `ncclcheck {made}`" if made else "the report"
        raise UsageError(f"{source}: {what} holds no node facts to compare; a baseline is a report of "
                         f"{', '.join(MADE_BY[:-1])} or {MADE_BY[-1]} (`ncclcheck preflight --save-baseline FILE`)")
    return out


def load_golden(path: str) -> list[NodeInfo]:
    """The nodes of the saved report at `path` for --baseline (read and checked as every saved report is, its shared
    facts expanded); UsageError, one line, when it is no such report or holds no node facts."""
    source = f"--baseline {path}"
    return baseline_nodes(load_saved_report(path, source), source)


def _match(node: NodeInfo, base: Sequence[NodeInfo]) -> NodeInfo:
    """The same host in the baseline, else the same node rank, else the baseline's first node (a golden node)."""
    for b in base:
        if b.hostname == node.hostname:
            return b
    if len(base) > 1:
        for b in base:
            if b.node_rank == node.node_rank:
                return b
    return base[0]


def _word(d: dict) -> str:
    return f"{d['what']} {d['baseline'] or '(none)'} -> {d['now'] or '(none)'}"


def _not_compared(skip: dict) -> str:
    """'; not compared: 147 facts not in the baseline (packages, torch version, ...)' or ''."""
    parts = []
    for key, words in (("not_in_baseline", "not in the baseline"), ("not_measured", "not measured by this run")):
        got = skip.get(key) or {}
        if got:
            n = sum(got.values())
            parts.append(f"{n} fact{'s' if n != 1 else ''} {words} ({', '.join(got)})")
    return f"; not compared: {'; '.join(parts)}" if parts else ""


def drift_checks(nodes: Sequence[NodeInfo], base: Sequence[NodeInfo], source: str = "baseline") -> list[CheckResult]:
    """One baseline.drift result per node that has facts: pass when nothing both runs measured differs, warn naming
    every difference; either way the facts one run did not collect are counted and named, not compared."""
    out: list[CheckResult] = []
    for node in nodes:
        if not node.facts:
            continue
        ref = _match(node, base)
        diffs, skip = compare(ref.facts, node.facts)
        compared = sum(1 for g in groups(node.facts) if g in groups(ref.facts))
        ev = {"baseline": source, "baseline_node": ref.node_rank, "baseline_hostname": ref.hostname,
              "differences": diffs, "not_compared": skip}
        note = _not_compared(skip)
        if not compared:
            out.append(skipped(CHECK_ID, f"nothing to compare: this run and the baseline ({ref.hostname}) measured "
                                         f"no fact in common{note}", node=node.node_rank, evidence=ev))
            continue
        if not diffs:
            out.append(passed(CHECK_ID, f"same as the baseline ({ref.hostname}){note}", node=node.node_rank,
                              evidence=ev))
            continue
        shown = "; ".join(_word(d) for d in diffs[:SHOWN]) + (f"; +{len(diffs) - SHOWN} more" if len(diffs) > SHOWN
                                                               else "")
        out.append(warned(
            CHECK_ID, f"{len(diffs)} difference{'s' if len(diffs) > 1 else ''} from the baseline: {shown}{note}",
            detail=f"Compared with {ref.hostname} (node {ref.node_rank}) in {source}:\n"
                   + "\n".join(_word(d) for d in diffs),
            fix=FIX, node=node.node_rank, evidence=ev))
    if not out:
        out.append(skipped(CHECK_ID, "no node facts on this process to compare with the baseline"))
    return out


__all__ = ["CHECK_ID", "MADE_BY", "groups", "fingerprint", "compare", "differences", "baseline_nodes",
           "load_golden", "drift_checks"]
