"""`baseline.drift`: every node's facts against a saved known-good run (a golden configuration), difference by
difference: versions (python, torch, CUDA, NCCL, driver), NCCL_/TORCH_NCCL_/GLOO_ variables, traffic interfaces
(present, MTU, speed), RDMA ports (state, rate, link layer), the GPUs' VBIOS per model and installed packages.

Pure: facts in, CheckResults out. Addresses, MACs and hostnames are per node by nature and never compared. The
baseline is any ncclcheck JSON report with node facts (`preflight --save-baseline`, `preflight --json`, `env --json`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..errors import UsageError
from ..model import CheckResult, NodeInfo, passed, skipped, warned
from .gpu import vbios_of

CHECK_ID = "baseline.drift"
VERSIONS = ("python", "torch", "cuda", "nccl", "driver")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")
# The interfaces collectives travel on; bridges, veths and tunnels come and go with containers and would be noise.
TRAFFIC_KINDS = ("physical", "ipoib")
SHOWN = 6  # differences named in the one-line summary; the detail and evidence have all of them

FIX = ("Bring this node back to the baseline (same image, driver and settings), or, if the change is intended, "
       "save a new baseline from a run that passed: `ncclcheck preflight --save-baseline GOLDEN.json`.")


def _s(v: Any) -> Optional[str]:
    return None if v is None else str(v)


def fingerprint(facts: Mapping) -> dict[str, Optional[str]]:
    """The comparable part of one node's facts as flat `what -> value` pairs (what reads like 'torch version')."""
    out: dict[str, Optional[str]] = {}
    versions = facts.get("versions") or {}
    for k in VERSIONS:
        out[f"{k} version"] = _s(versions.get(k))
    env = facts.get("env") or {}
    redacted = set(env.get("redacted") or [])
    for name, value in sorted((env.get("vars") or {}).items()):
        if name.startswith(ENV_PREFIXES) and name not in redacted:
            out[f"${name}"] = _s(value)
    for i in facts.get("interfaces") or []:
        if i.get("kind") in TRAFFIC_KINDS:
            out[f"interface {i.get('name')}"] = "up" if i.get("up") and i.get("running") else "down"
            out[f"interface {i.get('name')} MTU"] = _s(i.get("mtu"))
            out[f"interface {i.get('name')} speed (Mb/s)"] = _s(i.get("speed_mbps"))
    for dev in (facts.get("rdma") or {}).get("devices") or []:
        for p in dev.get("ports") or []:
            where = f"RDMA {dev.get('name')}/{p.get('port')}"
            out[where] = _s(p.get("state"))
            out[f"{where} rate (Gb/s)"] = _s(p.get("rate_gbps"))
            out[f"{where} link layer"] = _s(p.get("link_layer"))
    for model, vbios in (vbios_of(dict(facts)) or {}).items():
        out[f"{model} VBIOS"] = _s(vbios)
    pk = facts.get("packages") or {}
    if isinstance(pk.get("items"), Mapping):
        for name, ver in pk["items"].items():
            out[f"package {name}"] = _s(ver)
    elif pk.get("hash"):
        out["packages (hash)"] = _s(pk.get("hash"))
    return out


def differences(baseline: Mapping, current: Mapping) -> list[dict]:
    """[{"what", "baseline", "now"}] for every item whose value differs (None: absent on that side)."""
    b, c = fingerprint(baseline), fingerprint(current)
    if "packages (hash)" in b or "packages (hash)" in c:  # one side only hashed: compare hashes, not lists
        b = {k: v for k, v in b.items() if not k.startswith("package ")}
        c = {k: v for k, v in c.items() if not k.startswith("package ")}
    keys = list(dict.fromkeys(list(b) + list(c)))
    return [{"what": k, "baseline": b.get(k), "now": c.get(k)} for k in keys if b.get(k) != c.get(k)]


def baseline_nodes(doc: Any, source: str = "baseline") -> list[NodeInfo]:
    """The nodes of a saved report that carry facts; UsageError (one line) when there are none."""
    nodes = doc.get("nodes") if isinstance(doc, Mapping) else None
    out = [NodeInfo(int(n.get("node_rank", i)), str(n.get("hostname", "?")), n["facts"])
           for i, n in enumerate(nodes or []) if isinstance(n, Mapping) and isinstance(n.get("facts"), Mapping)
           and n["facts"]]
    if not out:
        raise UsageError(f"{source}: no node facts in it (save one with `ncclcheck preflight --save-baseline FILE`)")
    return out


def match_node(node: NodeInfo, base: Sequence[NodeInfo]) -> NodeInfo:
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


def drift_checks(nodes: Sequence[NodeInfo], base: Sequence[NodeInfo], source: str = "baseline") -> list[CheckResult]:
    """One baseline.drift result per node that has facts: pass when nothing differs, warn naming every difference."""
    out: list[CheckResult] = []
    for node in nodes:
        if not node.facts:
            continue
        ref = match_node(node, base)
        diffs = differences(ref.facts, node.facts)
        ev = {"baseline": source, "baseline_node": ref.node_rank, "baseline_hostname": ref.hostname,
              "differences": diffs}
        if not diffs:
            out.append(passed(CHECK_ID, f"same as the baseline ({ref.hostname})", node=node.node_rank, evidence=ev))
            continue
        shown = "; ".join(_word(d) for d in diffs[:SHOWN]) + (f"; +{len(diffs) - SHOWN} more" if len(diffs) > SHOWN
                                                               else "")
        out.append(warned(
            CHECK_ID, f"{len(diffs)} difference{'s' if len(diffs) > 1 else ''} from the baseline: {shown}",
            detail=f"Compared with {ref.hostname} (node {ref.node_rank}) in {source}:\n"
                   + "\n".join(_word(d) for d in diffs),
            fix=FIX, node=node.node_rank, evidence=ev))
    if not out:
        out.append(skipped(CHECK_ID, "no node facts on this process to compare with the baseline"))
    return out


__all__ = ["CHECK_ID", "fingerprint", "differences", "baseline_nodes", "drift_checks", "match_node"]
