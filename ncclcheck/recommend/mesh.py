"""Cluster-wide recommendation rules from the full-mesh reachability matrix (reachability.build_matrix).

NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME: the interface that is present, running and reached from every other node,
fastest first; one value for the cluster when a common name works, per-node values (Recommendation.node) when the
usable interface's name differs between nodes. NCCL takes name prefixes (eth1 also matches eth10), so the exact
`=name` form is used when the name is a prefix of another interface present on some node; Gloo takes exact names.
Never docker/virbr/lo/veth/bridge interfaces (rules.NEVER_FOR_MULTI_NODE), whatever the probe says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .. import hostranges
from ..model import Recommendation
from ..nccl import reachability, rules
from ..units import format_mbps_link

_KIND_RANK = {"ipoib": 0, "physical": 1, "virtual": 2, "vpn": 3}
_NEVER_PREFIXES = ("docker", "virbr", "lo", "veth", "br-", "cni", "flannel")


@dataclass(frozen=True)
class MeshView:
    """Every node's facts plus the matrix: the input of every cluster-wide rule."""

    nodes: list  # [(node_rank, hostname, facts)]
    mesh: dict  # reachability.build_matrix output
    one_host: bool = False  # every node shares one network stack (reachability.one_host): loopback connects them
    # rank -> {interface name: its facts}, built once: the rules ask per node and interface, and a scan of every
    # node's facts per ask was O(n^2) (3 s of node 0's time at 8,192 nodes, issue 27)
    _ifaces: dict = field(init=False, repr=False, compare=False)
    _ranks: list = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict = {}
        for r, _, f in self.nodes:
            if r in index:
                continue  # the first node listed with a rank is the one asked about, as before
            named: dict = {}
            for i in (f or {}).get("interfaces") or []:
                if isinstance(i, dict):
                    named.setdefault(i.get("name"), i)
            index[r] = named
        object.__setattr__(self, "_ifaces", index)
        object.__setattr__(self, "_ranks", [r for r, _, _ in self.nodes])

    @property
    def ranks(self) -> list:
        return list(self._ranks)

    def iface(self, rank: int, name: str) -> dict:
        return self._ifaces.get(rank, {}).get(name) or {}

    def all_names(self) -> set:
        return {i.get("name") for _, _, f in self.nodes for i in (f or {}).get("interfaces") or []
                if isinstance(i, dict) and i.get("name")}


def _allowed(itf: dict, name: str) -> bool:
    return (bool(itf) and itf.get("running", True) and itf.get("kind") not in rules.NEVER_FOR_MULTI_NODE
            and not name.startswith(_NEVER_PREFIXES))


def _rank_key(itf: dict) -> tuple:
    return (-(itf.get("speed_mbps") or 0), _KIND_RANK.get(itf.get("kind"), 9), itf.get("name", ""))


def usable_per_node(view: MeshView) -> dict:
    """{rank: [interface names every other node reached, allowed for a job, best first]}."""
    reached = reachability.reachable_by_node(view.mesh, view.ranks)
    out = {}
    for r in view.ranks:
        names = [n for n in reached.get(r, []) if _allowed(view.iface(r, n), n)]
        out[r] = sorted(names, key=lambda n, r=r: _rank_key(view.iface(r, n)))
    return out


def nccl_value(name: str, present: set) -> str:
    """'=eth0': the exact form always, as on a single node (nccl.rules.exact_ifname); `present` is kept for callers
    that say which present names a bare prefix would also have matched."""
    return rules.exact_ifname(name)


def _unusable_note(view: MeshView, chosen: set) -> str:
    notes = []
    for name, e in sorted(view.mesh.items()):
        if name in chosen or reachability.usable_everywhere(e, view.ranks):
            continue
        if e.get("duplicates"):
            a, rs = next(iter(e["duplicates"].items()))
            notes.append(f"{name} unusable: same address {a} on nodes {hostranges.rank_ranges(rs)}")
        elif e.get("errors"):
            pair, err = next(iter(sorted(e["errors"].items())))
            notes.append(f"{name} unusable: {pair} {err}")
    return ("; " + "; ".join(notes)) if notes else ""


def rule_socket_ifname(view: MeshView) -> list:
    if len(view.ranks) >= 2 and view.one_host:
        return _one_host_loopback(view)
    if len(view.ranks) < 2 or not view.mesh:
        return []
    usable = usable_per_node(view)
    if any(not u for u in usable.values()):
        return []  # net.peer_reachability fails with the matrix as evidence; there is nothing safe to recommend
    present = view.all_names()
    n = len(view.ranks)
    common = set.intersection(*(set(u) for u in usable.values()))
    if common:
        # Fastest by the slowest node's speed for that name: a job runs at its slowest link.
        best = min(common, key=lambda nm: (-min((view.iface(r, nm).get("speed_mbps") or 0) for r in view.ranks),
                                           _KIND_RANK.get(view.iface(view.ranks[0], nm).get("kind"), 9), nm))
        speed = min((view.iface(r, best).get("speed_mbps") or 0) for r in view.ranks)
        why = (f"{best} connects every pair of the {n} nodes in the full-mesh probe"
               f"{f' ({format_mbps_link(speed)})' if speed else ''}{_unusable_note(view, {best})}")
        value = nccl_value(best, present)
        also = sorted(o for o in present if o != best and o.startswith(best))
        why += f"; {rules.EXACT_NOTE}" + (f"; here {best} as a prefix also matches {', '.join(also)}" if also else "")
        return [Recommendation("NCCL_SOCKET_IFNAME", value, why),
                Recommendation("GLOO_SOCKET_IFNAME", best, f"same interface as NCCL ({best}); Gloo takes exact names")]
    out = []
    note = _unusable_note(view, set(u[0] for u in usable.values()))  # the same for every node: once, not n times
    for r in view.ranks:
        name = usable[r][0]
        why = (f"interface names differ between nodes; on node {r} {name} is reached from every other node"
               f"{note}; {rules.EXACT_NOTE}")
        out.append(Recommendation("NCCL_SOCKET_IFNAME", nccl_value(name, present), why, node=r))
        out.append(Recommendation("GLOO_SOCKET_IFNAME", name, "same interface as NCCL on this node; exact name",
                                  node=r))
    return out


def _one_host_loopback(view: MeshView) -> list:
    """Every node on one host: loopback, which needs no NIC, no address and no firewall rule, and which the checks
    accept for such a run (checks/local.py one_host). Nothing when the nodes name no running loopback interface."""
    names = set()
    for r in view.ranks:
        names.add(next((n for n, i in view._ifaces.get(r, {}).items()
                        if i.get("kind") == "loopback" and i.get("running", True)), None))
    if len(names) != 1 or None in names:
        return []
    lo = names.pop()
    why = (f"all {len(view.ranks)} nodes share one host's network stack (proven by the mesh probe): {lo} connects "
           f"them without a NIC; {rules.EXACT_NOTE}")
    return [Recommendation("NCCL_SOCKET_IFNAME", nccl_value(lo, view.all_names()), why),
            Recommendation("GLOO_SOCKET_IFNAME", lo, f"same interface as NCCL ({lo}); Gloo takes exact names")]


# MTU alignment is not an environment variable: net.mtu_consistent carries the `ip link set ... mtu` fix.
RULES: list[Callable[[MeshView], list]] = [rule_socket_ifname]


def recommend_mesh(view: MeshView) -> list:
    out: list = []
    for rule in RULES:
        out.extend(rule(view))
    return out


def merge_recommendations(mesh_recs: list, per_node: dict, names_from_mesh: Optional[set] = None) -> list:
    """Cluster recommendations = the mesh rules' plus each node's local ones, collapsed to one node=None entry
    where every node agrees. Local socket-interface advice is dropped when the mesh rule decided it."""
    names_from_mesh = names_from_mesh if names_from_mesh is not None else {r.name for r in mesh_recs}
    out = list(mesh_recs)
    ranks = sorted(per_node)
    by_name: dict = {}
    for r in ranks:
        for rec in per_node[r]:
            if rec.name in names_from_mesh:
                continue
            by_name.setdefault(rec.name, {})[r] = rec
    for name, recs in by_name.items():
        values = {rec.value for rec in recs.values()}
        if len(recs) == len(ranks) and len(values) == 1:
            first = recs[ranks[0]]
            out.append(Recommendation(name, first.value, first.reason + f" (all {len(ranks)} nodes)"))
        else:
            out.extend(Recommendation(name, rec.value, rec.reason, node=r) for r, rec in sorted(recs.items()))
    return out
