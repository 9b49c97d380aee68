"""NCCL's and Gloo's own rules for interface and HCA selection, as pure functions over facts.

Mirrors NCCL's src/misc/socket.cc (findInterfaces / matchIfList) and net_ib.cc (NCCL_IB_HCA parsing) as documented in
NCCL's environment-variable guide; see shared NCCL-FACTS.md "Socket interface selection" and "Variable syntax".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# which variables a recommendation may carry and how one is written live in envnames.py (renderers read them too)
from ..envnames import ENV_EXACT, ENV_LOADS_CODE, ENV_PREFIXES, assignment, env_name_allowed  # noqa: F401
from ..units import is_decimal


def exports(pairs: list) -> str:
    """`export A=x B=y` for [(name, value)], each as `assignment` writes it."""
    return "export " + " ".join(assignment(n, v) for n, v in pairs)


def allowed_recommendations(recs: list) -> tuple[list, list]:
    """(kept, dropped): the recommendations whose variable may be set, and the names of those that may not."""
    kept, dropped = [], []
    for r in recs:
        (kept if env_name_allowed(getattr(r, "name", None)) else dropped).append(r)
    return kept, [getattr(r, "name", None) for r in dropped]


# Kinds NCCL would happily pick but a multi-node job must not: addresses that are the same on every node or that
# only reach this host. (NCCL itself only demotes docker/lo/virbr; veth/cni/flannel are NOT excluded by it.)
NEVER_FOR_MULTI_NODE = ("loopback", "docker", "veth", "bridge")


@dataclass(frozen=True)
class IfSpec:
    """A parsed NCCL_SOCKET_IFNAME / NCCL_IB_HCA value: '^' = exclude list, '=' = exact names, else prefixes."""

    names: tuple
    exclude: bool = False
    exact: bool = False

    def matches(self, name: str, port: Optional[int] = None) -> bool:
        hit = any(_match_one(item, name, port, self.exact) for item in self.names)
        return not hit if self.exclude else hit


def _match_one(item: str, name: str, port: Optional[int], exact: bool) -> bool:
    # "mlx5_0:1" restricts to one port; a bare device matches all its ports.
    dev, _, p = item.partition(":")
    if p and port is not None and is_decimal(p) and int(p) != port:
        return False
    return name == dev if exact else name.startswith(dev)


def parse_spec(value: Optional[str]) -> Optional[IfSpec]:
    """'^=docker0,lo' -> IfSpec(('docker0','lo'), exclude=True, exact=True). None/empty -> None (unset)."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    exclude = v.startswith("^")
    if exclude:
        v = v[1:]
    exact = v.startswith("=")
    if exact:
        v = v[1:]
    names = tuple(n.strip() for n in v.split(",") if n.strip())
    return IfSpec(names=names, exclude=exclude, exact=exact)


# NCCL_SOCKET_IFNAME reads a bare name as a PREFIX (eth1 also selects eth10, bond0 selects bond0.2093); a leading
# '=' makes the names EXACT (NCCL's docs: "=eth0"). ncclcheck recommends one form, standalone and multi-node alike:
# the exact one, which stays right when a VLAN or a second NIC whose name extends this one appears later.
EXACT_NOTE = ("the leading '=' means exactly this name (without it NCCL reads a name as a prefix: eth1 also "
              "matches eth10)")


def exact_ifname(name: str) -> str:
    """The NCCL_SOCKET_IFNAME value that selects exactly this interface: '=eth0'."""
    return f"={name}"


def has_ipv4(iface: dict) -> bool:
    return bool(iface.get("ipv4"))


def has_usable_address(iface: dict) -> bool:
    """IPv4, or IPv6 that is not link-local (NCCL skips fe80::/10 unless asked)."""
    if iface.get("ipv4"):
        return True
    return any(not str(a.get("address", "")).lower().startswith("fe80") for a in iface.get("ipv6") or [])


def version_tuple(version: Optional[str]) -> Optional[tuple]:
    """'2.21.5' -> (2, 21, 5); None or garbage -> None."""
    if not version:
        return None
    try:
        return tuple(int(x) for x in str(version).split(".")[:3])
    except ValueError:
        return None


def nccl_default_order(interfaces: list, nccl_version: Optional[str] = None) -> list:
    """Names NCCL would use, in order, when NCCL_SOCKET_IFNAME is unset. The first is the bootstrap interface.

    1. names starting with 'ib'; 2. (NCCL_COMM_ID subnet: not modelled) 3. anything not ^docker,lo,virbr
    (before 2.28.3: ^docker,lo); 4. docker*, then lo, then virbr*. Since 2.28.3 only RUNNING interfaces count;
    before, any interface with an address did.
    """
    v = version_tuple(nccl_version)
    new_rules = v is None or v >= (2, 28, 3)
    usable = [i for i in interfaces if has_usable_address(i) and (i.get("running") if new_rules else True)]
    demoted = ("docker", "lo", "virbr") if new_rules else ("docker", "lo")
    order: list = []

    def add(pred):
        for i in usable:
            if i["name"] not in order and pred(i["name"]):
                order.append(i["name"])

    add(lambda n: n.startswith("ib"))
    add(lambda n: not n.startswith(demoted))
    add(lambda n: n.startswith("docker"))
    add(lambda n: n.startswith("lo"))
    add(lambda n: n.startswith("virbr"))
    return order


def socket_ifname_matches(spec: IfSpec, interfaces: list) -> list:
    """Interfaces (dicts) NCCL_SOCKET_IFNAME would select, in getifaddrs order."""
    return [i for i in interfaces if spec.matches(i["name"])]


def prefix_collisions(name: str, interfaces: list) -> list:
    """Other present names that the prefix `name` also matches (eth1 -> eth10), the reason for the '=' form."""
    return [i["name"] for i in interfaces if i["name"] != name and i["name"].startswith(name)]


def gloo_names(value: Optional[str]) -> list:
    """GLOO_SOCKET_IFNAME: exact names, comma list used round-robin."""
    if not value:
        return []
    return [n.strip() for n in value.split(",") if n.strip()]


def active_ib_ports(rdma: dict) -> list:
    """[(dev, port, port_dict)] of ACTIVE ports, in device order."""
    out = []
    for dev in (rdma or {}).get("devices") or []:
        for p in dev.get("ports") or []:
            if p.get("state") == "ACTIVE" or p.get("state_code") == 4:
                out.append((dev["name"], p.get("port"), p))
    return out


def all_ib_ports(rdma: dict) -> list:
    out = []
    for dev in (rdma or {}).get("devices") or []:
        for p in dev.get("ports") or []:
            out.append((dev["name"], p.get("port"), p))
    return out


def hca_value(ports: list) -> str:
    """Exact NCCL_IB_HCA form for the given ports: '=mlx5_0:1,mlx5_1:1' (a bare mlx5_1 would also match mlx5_10)."""
    return "=" + ",".join(f"{d}:{p}" for d, p, _ in ports)


def dynamic_gid_index(nccl_version: Optional[str]) -> bool:
    """NCCL >= 2.21 picks the RoCE GID index itself; NCCL_IB_GID_INDEX should then be left unset."""
    v = version_tuple(nccl_version)
    return v is not None and v >= (2, 21)


def roce_without_v2_ipv4_gid(ports: list) -> list:
    """[(dev, port, port_dict)] of the RoCE ports (link layer Ethernet) among `ports` that have no RoCE v2 GID holding
    an IPv4 address (rdma facts roce_v2_gid_index None). NCCL (>= 2.21 by itself, older releases through
    NCCL_IB_GID_INDEX) wants that GID under its default NCCL_IB_ADDR_FAMILY=AF_INET; without one it keeps GID index
    0, a RoCE v1 link-local GID that does not route, and the port's connections fail or hang. The usual cause: the
    port's netdev has no IPv4 address (or the address sits on a VLAN netdev of another port)."""
    return [(d, p, x) for d, p, x in ports
            if (x.get("link_layer") or "").lower() == "ethernet" and x.get("roce_v2_gid_index") is None]


ROCE_NO_V2_DETAIL = ("NCCL looks for the RoCE v2 GID that holds the netdev's IPv4 address (NCCL >= 2.21 by itself, "
                     "older releases at NCCL_IB_GID_INDEX); without one it keeps GID index 0, a RoCE v1 link-local "
                     "GID that does not route: connections across subnets fail (\"Got completion with error 12\", "
                     "IBV_WC_RETRY_EXC_ERR) or hang.")


def roce_no_v2_fix(ports: list) -> str:
    nds = sorted({n for _, _, x in ports for n in (x.get("netdevs") or [])})
    on = f" ({', '.join(nds)})" if nds else ""
    return (f"Give the port's netdev{on} its IPv4 address (the RoCE v2 GID appears with it: "
            "`grep . /sys/class/infiniband/<dev>/ports/<n>/gid_attrs/types/*`), check its VLAN, or leave the port out "
            "with an exact NCCL_IB_HCA.")
