"""The bound of a measured figure: what the links it crossed can carry, as pure functions of each node's link facts.

One function per topology (docs/bounds.md gives each formula and its sources):
- `nic_path`        one node's network egress: the NICs its transport uses (IB/RoCE ports, or socket interfaces
                    with their line rate or shaper);
- `intra_node`      GPU to GPU inside a node: NVLink links x per-link speed, else PCIe generation x width;
- `ring_bound`      ring collectives across nodes: the slowest node's aggregate NIC bandwidth, capped by the
                    intra-node bound (nccl-tests' busbw is defined so that this is the figure to compare with);
- `alltoall_bound`  all_to_all across nodes: one NIC of the slowest node;
- `direction_bound` a links direction a -> b: the smaller of a's egress (line rate, shaper) and b's ingress (line
                    rate, an ingress policer or an ingress redirect to a shaped ifb);
- `pair_bound`      the smaller bound of two ends (kept for callers that judge both directions alike).
A bound is an upper bound or nothing: a figure above it (`ABOVE_LIMIT_NOISE`) proves the bound wrong (`bound_wrong`).
Figures are GB/s (1e9 bytes per second), as busbw is. Nothing here reads the machine: facts/links.py does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..model import ABOVE_LIMIT_NOISE  # a figure above its bound by more than this proves it wrong
from .rules import parse_spec

# The fraction of the bound a healthy run reaches at large sizes, per transport; the rule and its sources:
EXPECTED_FRACTION = {
    # IB/RoCE: ~0.96 of line per NIC (24 of 25 GB/s on 200G, 48 of 50 on 400G): nccl-tests #212, #319; nccl #450.
    "ib": 0.9,
    "roce": 0.9,
    # NVLink ring: ~0.8 of the data rate (H100 ~370 of 18 x 25 = 450 GB/s ring all_reduce: nccl-tests #267). The bound
    # is NVML's per-link figure, the raw signalling rate (H100: 26.56 GB/s per link for 25 of data, 478 per GPU),
    # so the expected share of it is 370 / 478 = 0.77.
    "nvlink": 0.75,
    # PCIe: NCCL's own topology model rates Gen4 x16 at 24 of its 31.5 GB/s (0.76): nccl src/graph/topo.h.
    "pcie": 0.7,
    # TCP sockets: no published norm (4-6 GB/s on 100GbE, under 60 % at 32 Gb/s: nccl #209, #412, nccl-tests #119).
    # Calibrated in the lab (docs/bounds.md, scripts/bench_efficiency.py): gloo over tbf-shaped veth reaches
    # 0.85-0.97 of the shaper; 0.5 leaves room for real NICs and flags a run at a third of its link.
    "socket": 0.5,
}
NCCL_UNKNOWN_SPEED_GBIT = 10  # nccl src/transport/net_socket.cc: speed <= 0 -> assume 10000 Mb/s
RING_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv")

NO_LINK = "none"  # Bound.transport when the figure crosses no link at all (one rank, loopback): nothing to judge


@dataclass(frozen=True)
class Bound:
    """A bound (GB/s) and what sets it; gbps None = unknown, with `by` saying why. `transport` keys
    EXPECTED_FRACTION (NO_LINK: nothing crossed a link); `virtual`: a virtual device's fixed speed, not a line rate."""

    gbps: Optional[float]
    by: str
    transport: Optional[str] = None
    virtual: bool = False
    notes: tuple = field(default_factory=tuple)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"bound_gbps": self.gbps, "bound_by": self.by}
        if self.transport:
            d["bound_transport"] = self.transport
        if self.virtual:
            d["bound_virtual"] = True
        if self.notes:
            d["bound_notes"] = list(self.notes)
        return d


def _num(x: Any) -> Optional[float]:
    """A finite non-negative number from the wire, else None (bool is not a number here)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x or x in (float("inf"), float("-inf")):
        return None
    return float(x) if x >= 0 else None


# A Bound's `by` names what sets it (an interface's tbf, its line rate, IB ports) and never its figure: the figure is
# `gbps`, which every renderer shows in the unit of the figures beside it (render/common.py's bound_gbps_text); a
# "200 Mb/s" in the words read beside a GB/s figure as two different rates.
def _gbit(gbps: float) -> str:
    """GB/s -> the link-rate wording people use ("100 Mb/s", "10 Gb/s"): only for a device's speed that is not a
    bound (a veth's fixed figure)."""
    bits = gbps * 8e9
    if bits >= 1e9:
        return f"{bits / 1e9:.3g} Gb/s"
    return f"{bits / 1e6:.3g} Mb/s"


def _min(bounds: list) -> Optional[Bound]:
    known = [b for b in bounds if b.gbps is not None]
    return min(known, key=lambda b: b.gbps) if known else None


# ---------------------------------------------------------------------------------------------- one interface
def htb_default_ceil(shaper: dict) -> tuple:
    """(bytes/s, class id) that htb's default class (and its parents) allow unclassified traffic; (None, why)."""
    root = next((q for q in shaper.get("qdiscs") or [] if q.get("kind") == "htb" and q.get("root")), None)
    if root is None:
        return None, None
    cls = root.get("default_class")
    if not cls:
        return None, "htb default 0: unclassified traffic is not shaped"
    classes = {c.get("classid"): c for c in shaper.get("classes") or [] if isinstance(c, dict)}
    rate, seen = None, set()
    while cls in classes and cls not in seen:
        seen.add(cls)
        c = classes[cls]
        ceil = _num(c.get("ceil_bytes_per_s")) or _num(c.get("rate_bytes_per_s"))
        if ceil:
            rate = ceil if rate is None else min(rate, ceil)
        cls = c.get("parent")
    return (rate, root.get("default_class")) if rate else (None, f"htb default class {root.get('default_class')} "
                                                                   "not found: unclassified traffic is not shaped")


def shaper_bound(shaper: Any) -> tuple:
    """(GB/s or None, text, note or None) of the root shaper of an interface's egress."""
    if not isinstance(shaper, dict) or shaper.get("unavailable"):
        return None, None, (shaper or {}).get("unavailable") if isinstance(shaper, dict) else None
    for q in shaper.get("qdiscs") or []:
        if q.get("kind") == "tbf" and q.get("root") and _num(q.get("rate_bytes_per_s")):
            g = _num(q["rate_bytes_per_s"]) / 1e9
            return g, "tbf", None
    rate, cls_or_why = htb_default_ceil(shaper)
    if rate:
        g = rate / 1e9
        note = ("htb classes reached through filters (per-destination limits) are not attributed to pairs"
                if len(shaper.get("classes") or []) > 1 else None)
        return g, f"htb class {cls_or_why}", note
    return None, None, cls_or_why


def netdev_bound(dev: dict) -> Bound:
    """One interface's egress: the smaller of its line rate (bond: the kernel's sum of active slaves) and its
    root tbf/htb shaper. A veth/tun line rate is the kernel's fixed figure and is flagged virtual."""
    name = dev.get("name", "?")
    notes: list = []
    line = _num(dev.get("speed_mbps")) / 8000 if _num(dev.get("speed_mbps")) else None
    virtual = bool(dev.get("virtual"))
    if virtual and line is not None:
        notes.append(f"{name} is virtual ({dev['virtual']}): {_gbit(line)} is not a line rate")
    bond = dev.get("bond")
    if bond and line is not None:
        notes.append(f"{name} is a bond ({bond.get('mode')}): one flow uses one slave; the bound is the sum")
    shaped, how, note = shaper_bound(dev.get("shaper"))
    if note:
        notes.append(f"{name}: {note}")
    if shaped is not None and (line is None or shaped <= line):
        return Bound(shaped, f"{name}: {how}", "socket", False, tuple(notes))
    if line is not None and virtual:
        # the kernel's fixed figure for a veth/tun/bridge whatever carries its traffic (a lab's veths measured 1.9
        # GB/s against their "10 Gb/s"): no bound at all, so the hosts are judged against each other only (issue 44)
        return Bound(None, f"{name}: unknown (veth/virtual: {_gbit(line)} is the kernel's fixed figure, not a line "
                           "rate)", "socket", True, tuple(notes))
    if line is not None:
        return Bound(line, f"{name}: line rate", "socket", False, tuple(notes))
    why = dev.get("speed_unknown") or "speed unknown"
    notes.append(f"NCCL's socket transport assumes {NCCL_UNKNOWN_SPEED_GBIT} Gb/s here (net_socket.cc)")
    return Bound(None, f"{name}: {why}", "socket", False, tuple(notes))


def ingress_limit(dev: dict) -> tuple:
    """(GB/s or None, text, note or None) of what an interface's ingress lets in: a `police` action on its ingress
    filters, or a mirred redirect to an ifb device whose egress is shaped (how ingress is shaped on Linux: the
    Kubernetes bandwidth plugin, wondershaper). facts/links.py reads both (`dev["ingress"]`)."""
    ing = dev.get("ingress")
    if not isinstance(ing, dict):
        return None, None, None
    if ing.get("unavailable"):
        return None, None, f"ingress filters not read: {ing['unavailable']}"
    found = []
    for rate in ing.get("police_bytes_per_s") or []:
        if _num(rate):
            g = _num(rate) / 1e9
            found.append((g, "ingress police"))
    note = None
    if ing.get("police_rate_unknown"):
        note = "an ingress policer whose rate tc did not print: what this host receives may be lower"
    for red in ing.get("redirects") or []:
        if not isinstance(red, dict):
            continue
        g, how, why = shaper_bound(red.get("shaper"))
        if g is not None:
            found.append((g, f"ingress via {red.get('dev', '?')}: {how}"))
        elif why:
            note = f"ingress redirected to {red.get('dev', '?')}: {why}"
    if not found:
        return None, None, note
    g, how = min(found)
    return g, how, note


def netdev_ingress_bound(dev: dict) -> Bound:
    """What one interface can receive: the smaller of its line rate and its ingress limit (policer, shaped ifb).
    Its egress shaper does not apply: a tbf/htb qdisc shapes what a host sends."""
    name = dev.get("name", "?")
    line = _num(dev.get("speed_mbps")) / 8000 if _num(dev.get("speed_mbps")) else None
    virtual = bool(dev.get("virtual"))
    notes: list = []
    if virtual and line is not None:
        notes.append(f"{name} is virtual ({dev['virtual']}): {_gbit(line)} is not a line rate")
    limited, how, note = ingress_limit(dev)
    if note:
        notes.append(f"{name}: {note}")
    if limited is not None and (line is None or limited <= line):
        return Bound(limited, f"{name}: {how}", "socket", False, tuple(notes))
    if line is not None and virtual:
        # the kernel's fixed figure for a veth/tun/bridge whatever carries its traffic (a lab's veths measured 1.9
        # GB/s against their "10 Gb/s"): no bound at all, so the hosts are judged against each other only (issue 44)
        return Bound(None, f"{name}: unknown (veth/virtual: {_gbit(line)} is the kernel's fixed figure, not a line "
                           "rate)", "socket", True, tuple(notes))
    if line is not None:
        return Bound(line, f"{name}: line rate", "socket", False, tuple(notes))
    why = dev.get("speed_unknown") or "speed unknown"
    return Bound(None, f"{name}: {why}", "socket", False, tuple(notes))


# ---------------------------------------------------------------------------------------------- one node's NICs
def _ib_selected(links: dict) -> list:
    env = links.get("env") or {}
    spec = parse_spec(env.get("NCCL_IB_HCA"))
    ports = [p for p in links.get("ib_ports") or [] if p.get("state") == "ACTIVE" and _num(p.get("rate_gbps"))]
    return [p for p in ports if spec is None or spec.matches(p.get("device", ""), p.get("port"))]


def _socket_names(links: dict, backend: str) -> tuple:
    env = links.get("env") or {}
    names = [d.get("name") for d in links.get("netdevs") or []]
    if backend == "nccl" and env.get("NCCL_SOCKET_IFNAME"):
        spec = parse_spec(env["NCCL_SOCKET_IFNAME"])
        return [n for n in names if spec and spec.matches(n)], "NCCL_SOCKET_IFNAME"
    if backend != "nccl" and env.get("GLOO_SOCKET_IFNAME"):
        want = [n.strip() for n in env["GLOO_SOCKET_IFNAME"].split(",") if n.strip()]
        return [n for n in names if n in want], "GLOO_SOCKET_IFNAME"
    default = links.get("default_interface")
    how = links.get("default_interface_how") or "the interface this host's name resolves to"
    return ([default] if default else []), how


MALFORMED = (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError, OverflowError)


def nic_path(links: Optional[dict], backend: str, node: Any = None, side: str = "egress") -> Bound:
    """nic_path_of, and for facts that came off the wire malformed (a peer may be hostile), an unknown bound that
    says so instead of an exception on node 0."""
    try:
        return nic_path_of(links, backend, node, side)
    except MALFORMED as e:
        return Bound(None, f"node {node} sent malformed link facts ({type(e).__name__})")


def intra_node(links: Optional[dict], ranks: int, on_gpu: bool, node: Any = None) -> Bound:
    """intra_node_of, guarded like nic_path."""
    try:
        return intra_node_of(links, ranks, on_gpu, node)
    except MALFORMED as e:
        return Bound(None, f"node {node} sent malformed link facts ({type(e).__name__})")


def nic_path_of(links: Optional[dict], backend: str, node: Any = None, side: str = "egress") -> Bound:
    """One node's network bound: NCCL on active IB/RoCE ports (NCCL_IB_HCA applied) sums their rates; otherwise
    the socket interfaces the backend uses (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME, else the one the host name
    resolves to) sum their egress bounds (side "egress": line rate, tbf/htb) or ingress bounds (side "ingress":
    line rate, policer, shaped ifb)."""
    where = f"node {node} " if node is not None else ""
    if not isinstance(links, dict) or links.get("unavailable"):
        why = (links or {}).get("unavailable") if isinstance(links, dict) else "no link facts from this node"
        return Bound(None, f"{where}link facts unavailable: {why}")
    env = links.get("env") or {}
    if backend == "nccl" and env.get("NCCL_IB_DISABLE") != "1":
        ports = _ib_selected(links)
        if ports:
            gbps = sum(p["rate_gbps"] for p in ports) / 8
            kind = "roce" if (ports[0].get("link_layer") or "").lower() == "ethernet" else "ib"
            names = ", ".join(f"{p['device']}:{p['port']}" for p in ports)
            what = f"{len(ports)} {'RoCE' if kind == 'roce' else 'IB'} ports" if len(ports) > 1 else \
                f"{'RoCE' if kind == 'roce' else 'IB'} port"
            return Bound(gbps, f"{where}{names}: {what}", kind)
    names, how = _socket_names(links, backend)
    loop = [n for n in names if n in (links.get("loopback_interfaces") or ["lo"])]
    if names and loop == names:
        return Bound(None, f"{where}{loop[0]} is loopback ({how}): no link bounds it", NO_LINK)
    devs = {d.get("name"): d for d in links.get("netdevs") or []}
    one = netdev_ingress_bound if side == "ingress" else netdev_bound
    per = [one(devs[n]) for n in names if n in devs]
    if not per:
        return Bound(None, f"{where}no socket interface known ({how} names none this node reported)", "socket",
                     notes=(f"NCCL's socket transport assumes {NCCL_UNKNOWN_SPEED_GBIT} Gb/s when it cannot read a "
                            "speed (net_socket.cc)",))
    notes = tuple(n for b in per for n in b.notes)
    if any(b.gbps is None for b in per):
        bad = next(b for b in per if b.gbps is None)
        return Bound(None, f"{where}{bad.by}", "socket", bad.virtual, notes=notes)
    by = " + ".join(b.by for b in per)
    return Bound(sum(b.gbps for b in per), f"{where}{by}", "socket", any(b.virtual for b in per), notes)


# ---------------------------------------------------------------------------------------------- inside a node
PCIE_ENCODING = ((5.0, 8 / 10), (32.0, 128 / 130), (float("inf"), 242 / 256))  # GT/s up to -> payload fraction


def pcie_gbps(gts: float, width: int) -> float:
    """One direction of a PCIe link in GB/s: GT/s x lanes x encoding / 8 (Gen1-2 8b/10b, Gen3-5 128b/130b, Gen6 FLIT
    242/256). Gen4 x16 = 31.5 GB/s, which NCCL's topology models as 24."""
    enc = next(e for top, e in PCIE_ENCODING if gts <= top)
    return gts * width * enc / 8


def intra_node_of(links: Optional[dict], ranks: int, on_gpu: bool, node: Any = None) -> Bound:
    """GPU to GPU inside one node: per GPU, the sum of its up NVLink links' speeds (NVML MB/s); the slowest GPU
    bounds a ring. Without NVLink, the slowest GPU's PCIe link. CPU ranks on one host cross no link."""
    where = f"node {node} " if node is not None else ""
    if ranks < 2:
        return Bound(None, f"{where}one rank: nothing crosses a link inside the node", NO_LINK)
    if not on_gpu:
        return Bound(None, f"{where}CPU ranks on one host talk through loopback and memory: no link bounds them",
                     NO_LINK)
    if not isinstance(links, dict):
        return Bound(None, f"{where}link facts unavailable")
    nv = links.get("nvlink") or {}
    per_gpu = []
    for g in (nv.get("gpus") or [])[:ranks]:
        up = [x.get("speed_mbytes_per_s") for x in g.get("links") or [] if x.get("up")]
        if up and all(_num(s) for s in up):
            per_gpu.append((sum(up) / 1000, len(up), g.get("index")))
    if per_gpu and len(per_gpu) >= min(ranks, len(nv.get("gpus") or [])):
        gbps, n, idx = min(per_gpu)
        return Bound(gbps, f"{where}GPU {idx}: {n} NVLink links, {gbps:.4g} GB/s", "nvlink",
                     notes=("NVML's per-link speed is the raw signalling rate (H100: 26.56 GB/s per link for 25 GB/s "
                            "of data)",
                            "with NVLS (NVSwitch) all_reduce busbw is not a wire figure and may exceed this"))
    pcie = [g for g in links.get("pcie_gpus") or [] if _num(g.get("gts")) and _num(g.get("width"))][:ranks]
    if pcie:
        worst = min(pcie, key=lambda g: pcie_gbps(g["gts"], g["width"]))
        gbps = pcie_gbps(worst["gts"], worst["width"])
        notes = ()
        if _num(worst.get("max_gts")) and _num(worst.get("max_width")) and \
                pcie_gbps(worst["max_gts"], worst["max_width"]) > gbps:
            notes = (f"GPU {worst['bus_id']} runs below its maximum link ({worst['max_gts']:g} GT/s "
                     f"x{worst['max_width']})",)
        return Bound(gbps, f"{where}GPU {worst['bus_id']}: PCIe {worst['gts']:g} GT/s x{worst['width']}", "pcie",
                     notes=notes)
    why = nv.get("unavailable") or "no NVLink or PCIe link read"
    return Bound(None, f"{where}GPU links unknown: {why}")


# ---------------------------------------------------------------------------------------------- collectives
def ring_bound(nets: dict, intra: Optional[Bound]) -> Bound:
    """Ring collectives across nodes: busbw <= the slowest node's NIC bound (nets: node -> nic_path Bound),
    capped by the intra-node bound when several ranks share a node."""
    unknown = [b for b in nets.values() if b.gbps is None and b.transport != NO_LINK]
    if not unknown and nets and all(b.transport == NO_LINK for b in nets.values()):
        first = next(iter(nets.values()))
        return intra if intra is not None and intra.gbps is not None else first
    unknown = unknown or [b for b in nets.values() if b.gbps is None]
    if unknown:
        return Bound(None, unknown[0].by, unknown[0].transport, notes=unknown[0].notes)
    net = _min([b for _, b in sorted(nets.items())])  # on a tie the lowest node rank names it
    if net is None:
        return Bound(None, "no node reported its links")
    notes = tuple(dict.fromkeys(n for b in nets.values() for n in b.notes))
    if intra is not None and intra.gbps is not None and intra.gbps < net.gbps:
        return Bound(intra.gbps, intra.by, intra.transport, intra.virtual, notes + intra.notes)
    return Bound(net.gbps, net.by, net.transport, net.virtual, notes)


def alltoall_bound(nets: dict, per_nic: dict, intra: Optional[Bound]) -> Bound:
    """all_to_all across nodes is bounded by one NIC of the slowest node (per_nic: node -> single-NIC Bound)."""
    return ring_bound(per_nic or nets, intra)


def op_bound(op: str, nnodes: int, backend: str, ranks_per_node: int, nets: dict, intra: Bound,
             per_nic: Optional[dict] = None) -> Bound:
    """The bound of `op`'s busbw on this world. One node: the intra-node bound. Several: the ring / alltoall rule,
    with the caveats NCCL's algorithms bring (Tree/NVLS on 2 nodes)."""
    if nnodes <= 1:
        return intra
    b = alltoall_bound(nets, per_nic or {}, intra if ranks_per_node > 1 else None) if op == "all_to_all" else \
        ring_bound(nets, intra if ranks_per_node > 1 else None)
    if backend == "nccl" and op == "all_reduce" and nnodes == 2:
        b = Bound(b.gbps, b.by, b.transport, b.virtual, b.notes + (
            "on 2 nodes NCCL may choose Tree or NVLS and exceed the network bound: NCCL_ALGO=Ring measures the "
            "network",))
    return b


def direction_bound(tx: Bound, rx: Bound) -> Bound:
    """A links direction a -> b: the smaller of the sender's egress (tx = nic_path(a, side="egress")) and the
    receiver's ingress (rx = nic_path(b, side="ingress")). An egress shaper bounds only what its host sends; what a
    host receives is bounded by the sender, its own line rate and its ingress limit. Unknown on either side: unknown
    (a bound from one side alone could be too low: the other may be faster, never slower, than it says)."""
    notes = tuple(dict.fromkeys(tx.notes + rx.notes))
    if _no_limit(tx) and rx.gbps is not None:
        return Bound(rx.gbps, f"{rx.by} (receiver)", rx.transport, rx.virtual, notes)
    if _no_limit(rx) and tx.gbps is not None:
        return Bound(tx.gbps, f"{tx.by} (sender)", tx.transport, tx.virtual, notes)
    if tx.gbps is None or rx.gbps is None:
        b = tx if tx.gbps is None else rx
        return Bound(None, b.by, b.transport, b.virtual, notes=b.notes)
    side, b = ("sender", tx) if tx.gbps <= rx.gbps else ("receiver", rx)
    return Bound(b.gbps, f"{b.by} ({side})", b.transport, b.virtual, notes)


def bound_wrong(gbps: Optional[float], bound: Bound) -> bool:
    """A figure above its bound (beyond ABOVE_LIMIT_NOISE) proves the bound wrong: it is not an efficiency to show."""
    return (gbps is not None and bound.gbps is not None and bound.gbps > 0
            and gbps > bound.gbps * (1 + ABOVE_LIMIT_NOISE))


def _no_limit(x: Bound) -> bool:
    """A virtual device with no shaper sets no limit of its own (its speed is the kernel's fixed figure): beside a
    side that has one, that side's limit is the bound; two such sides (or a genuinely unknown one) stay unknown."""
    return x.gbps is None and x.virtual


def pair_bound(a: Bound, b: Bound) -> Bound:
    """A links pair (either direction): the smaller bound of its two ends. The egress shaper is what a node can
    read; a link shaped one way only shows as an efficiency above 1 the other way."""
    if _no_limit(a) and b.gbps is not None:
        return b
    if _no_limit(b) and a.gbps is not None:
        return a
    if a.gbps is None or b.gbps is None:
        return a if a.gbps is None else b
    return a if a.gbps <= b.gbps else b


def efficiency(busbw_gbps: Optional[float], bound: Bound) -> Optional[float]:
    """figure / bound; None when the bound is unknown or proven wrong (bound_wrong): never a figure above 1 + noise."""
    if bound.gbps is None or bound.gbps <= 0 or busbw_gbps is None or bound_wrong(busbw_gbps, bound):
        return None
    return busbw_gbps / bound.gbps


def expected_fraction(bound: Bound) -> Optional[float]:
    """The fraction of `bound` a healthy run reaches (EXPECTED_FRACTION); None for a virtual or unknown bound."""
    if bound.gbps is None or bound.virtual:
        return None
    return EXPECTED_FRACTION.get(bound.transport or "")
