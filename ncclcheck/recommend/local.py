"""Node-local recommendation rules: what one node's facts say the job should set. Never debug-only switches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..model import Recommendation
from ..nccl import pcipath, rules
from ..units import format_mbps_link

# Kind preference when no master route decides: IPoIB and real NICs before virtual ones.
_KIND_RANK = {"ipoib": 0, "physical": 1, "virtual": 2, "vpn": 3}
FAST_SOCKET_MBPS = 100_000  # 100G and up, socket-only: more NCCL socket threads pay off (NCCL-FACTS.md)


@dataclass(frozen=True)
class NodeView:
    """One node's facts plus what the run is (multi-node or not) — the input of every local rule."""

    facts: dict
    node: Optional[int] = None  # set only when a recommendation is per-node
    multi_node: bool = False

    @property
    def interfaces(self) -> list:
        ifs = self.facts.get("interfaces")
        return ifs if isinstance(ifs, list) else []

    @property
    def rdma(self) -> dict:
        r = self.facts.get("rdma")
        return r if isinstance(r, dict) and "unavailable" not in r else {}

    @property
    def nccl_version(self) -> Optional[str]:
        return (self.facts.get("versions") or {}).get("nccl")


def candidate_interfaces(view: NodeView) -> list:
    """Running interfaces with IPv4 that a job may use, best first: never loopback/docker/bridge/veth."""
    cands = [
        i for i in view.interfaces
        if i.get("running") and rules.has_ipv4(i) and i.get("kind") not in rules.NEVER_FOR_MULTI_NODE
    ]
    return sorted(cands, key=lambda i: (_KIND_RANK.get(i.get("kind"), 9), -(i.get("speed_mbps") or 0)))


def chosen_interface(view: NodeView) -> tuple:
    """(interface dict, why) for the socket interface: the one routing to the master, else the best candidate."""
    route = view.facts.get("route")
    byname = {i["name"]: i for i in view.interfaces}
    if isinstance(route, dict) and route.get("interface") in byname:
        iface = byname[route["interface"]]
        if iface.get("kind") not in rules.NEVER_FOR_MULTI_NODE:
            return iface, f"it carries the route to the master {route.get('target')} (source {route.get('source')})"
    cands = candidate_interfaces(view)
    if cands:
        best = cands[0]
        speed = format_mbps_link(best.get("speed_mbps"))
        speed = "" if speed == "?" else f" ({speed})"
        return best, f"the fastest running {best.get('kind')} interface with an address{speed}"
    return None, ""


def rule_socket_ifname(view: NodeView) -> list:
    iface, why = chosen_interface(view)
    if iface is None:
        return []
    name = iface["name"]
    order = rules.nccl_default_order(view.interfaces, view.nccl_version)
    default_note = f"; unset, NCCL would bootstrap on {order[0]}" if order and order[0] != name else ""
    return [
        Recommendation("NCCL_SOCKET_IFNAME", rules.exact_ifname(name), f"{name}: {why}{default_note}; "
                       f"{rules.EXACT_NOTE}", node=view.node),
        Recommendation("GLOO_SOCKET_IFNAME", name, "same interface as NCCL; Gloo takes exact names", node=view.node),
    ]


def rule_ib(view: NodeView) -> list:
    ports = rules.all_ib_ports(view.rdma)
    if not ports:
        return []
    active = rules.active_ib_ports(view.rdma)
    if not active:
        return [Recommendation("NCCL_IB_DISABLE", "1",
                               f"{len(ports)} RDMA port(s) present but none ACTIVE: say sockets explicitly rather "
                               "than rely on NCCL's silent fallback", node=view.node)]
    out = []
    skipped = [f"{d}:{p}" for d, p, x in ports if (d, p, x) not in active]
    reason = "ACTIVE ports only, exact form (a bare mlx5_1 also matches mlx5_10..19)"
    if skipped:
        reason += f"; leaves out {', '.join(skipped)} (not ACTIVE)"
    no_v2 = rules.roce_without_v2_ipv4_gid(active)
    if no_v2 and len(no_v2) < len(active):  # with none left, ib.devices says why; the list stays whole
        active = [a for a in active if a not in no_v2]
        reason += f"; leaves out {', '.join(f'{d}:{p}' for d, p, _ in no_v2)} (no RoCE v2 IPv4 GID)"
    out.append(Recommendation("NCCL_IB_HCA", rules.hca_value(active), reason + _per_local_rank(view, active),
                              node=view.node))
    roce = [x for _, _, x in active if (x.get("link_layer") or "").lower() == "ethernet"]
    if roce and view.nccl_version and not rules.dynamic_gid_index(view.nccl_version):
        idx = {x.get("roce_v2_gid_index") for x in roce} - {None}
        if len(idx) == 1:
            i = idx.pop()
            out.append(Recommendation("NCCL_IB_GID_INDEX", str(i),
                                      f"RoCE v2 GID with an IPv4-mapped address is at index {i}; NCCL "
                                      f"{view.nccl_version} (< 2.21) defaults to 0", node=view.node))
    return out


def _per_local_rank(view: NodeView, active: list) -> str:
    """Each local rank's own NCCL_IB_HCA, its GPU's nearest of `active` by NCCL's PCI distance (nccl/pcipath.py), as
    words for the reason: NCCL picks each GPU's nearest NIC of the node-wide list by itself, so this is for a launcher
    that sets NCCL_IB_HCA per process (one NIC pinned per rank). Empty when it would say nothing (one NIC, or no PCI
    placement)."""
    if len(active) < 2:
        return ""
    per = [m for m in pcipath.gpu_nic_map(view.facts, pcipath.nic_places(view.rdma, active)) if m["nearest"]]
    if not per:
        return ""
    said = ", ".join(f"local rank {m['local_rank']} {rules.assignment('NCCL_IB_HCA', '=' + ','.join(m['nearest']))}"
                     f" ({m['distance']})" for m in per[:8]) + (f", +{len(per) - 8} more" if len(per) > 8 else "")
    return "; per local rank (its GPU's nearest NIC by NCCL's PCI distance, to pin one per process): " + said


def rule_socket_threads(view: NodeView) -> list:
    if rules.active_ib_ports(view.rdma):
        return []
    iface, _ = chosen_interface(view)
    speed = (iface or {}).get("speed_mbps") or 0
    if speed < FAST_SOCKET_MBPS:
        return []
    why = f"socket-only transport on a {format_mbps_link(speed)} link: 4 threads x 4 sockets (product <= 64)"
    return [Recommendation("NCCL_SOCKET_NTHREADS", "4", why, node=view.node),
            Recommendation("NCCL_NSOCKS_PERTHREAD", "4", why, node=view.node)]


RULES = [rule_socket_ifname, rule_ib, rule_socket_threads]


def recommend_local(view: NodeView) -> list:
    out: list = []
    for rule in RULES:
        out.extend(rule(view))
    return out
