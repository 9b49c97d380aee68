"""NCCL's distance between a GPU and a NIC from where each sits in the PCI tree (facts/pcitree.py's placements), as
NCCL computes it (src/graph/xml.cc ncclTopoGetXmlFromSys, src/graph/paths.cc):

- From a device NCCL climbs two levels at a time ("rewind two '/' and follow the upper PCI switch"): the parent of a
  device is its grandparent in sysfs (a switch's upstream port, skipping the downstream port it hangs off), until
  the next level up is the root complex (pci<domain>:<bus>): the device then hangs off a CPU node, one per NUMA node
  (the numa_node of the last PCI element before the root; -1 in a VM makes one "unknown" CPU).
- Path types: a hop between a device and a PCI switch is PIX; a hop between two PCI switches makes the path PXB;
  a hop through a CPU node makes it PHB; between two CPU nodes (the SMP interconnect) SYS.

So a GPU and a NIC under one switch are PIX, under nested switches PXB, under different switches or root ports of
one NUMA node PHB (nvidia-smi topo says NODE there, NCCL has no such level), on different NUMA nodes SYS.
NCCL uses GPUDirect RDMA only up to NCCL_NET_GDR_LEVEL, PXB by default (ncclTopoCheckGdr): beyond that a GPU's
traffic to that NIC is staged through host memory.
"""

from __future__ import annotations

from typing import Optional

LEVELS = ("PIX", "PXB", "PHB", "SYS")  # nearest first; NCCL's PATH_PIX..PATH_SYS
GDR_DEFAULT_LEVEL = "PXB"
# NCCL_NET_GDR_LEVEL's names (and the integers it also takes: 0 LOC, 1 NVL/PIX.. in older releases, so names only)
_LEVEL_NAMES = {"LOC": -1, "PIX": 0, "PXB": 1, "PHB": 2, "SYS": 3}


def parents(place: dict) -> Optional[tuple]:
    """(NCCL's chain of PCI switch bus ids above the device, nearest first; the CPU node's NUMA id) or None when the
    placement has no PCI path."""
    path = place.get("path") if isinstance(place, dict) else None
    if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
        return None
    numa = place.get("numa") if isinstance(place.get("numa"), list) else []
    chain = []
    i = len(path) - 1  # the device
    while True:
        if i - 2 < 0:  # the next level up (one or two '/') is the root complex: a CPU node
            numa_id = numa[i] if i < len(numa) else None
            return tuple(chain), numa_id if isinstance(numa_id, int) else -1
        i -= 2
        chain.append(path[i])


def distance(a: dict, b: dict) -> Optional[str]:
    """NCCL's path type between two placed devices ("PIX", "PXB", "PHB", "SYS"), or None when either has no path."""
    pa, pb = parents(a), parents(b)
    if pa is None or pb is None:
        return None
    (chain_a, numa_a), (chain_b, numa_b) = pa, pb
    common = next(((i, chain_b.index(s)) for i, s in enumerate(chain_a) if s in chain_b), None)
    if common is not None:  # bus ids carry the PCI domain: a switch in both chains is one switch
        return "PIX" if common == (0, 0) else "PXB"
    return "PHB" if numa_a == numa_b else "SYS"


def gdr_level(env: dict) -> str:
    """The farthest distance NCCL uses GPUDirect RDMA at: NCCL_NET_GDR_LEVEL by name, else PXB."""
    v = str((env or {}).get("NCCL_NET_GDR_LEVEL") or "").strip().upper()
    return v if v in _LEVEL_NAMES else GDR_DEFAULT_LEVEL


def within(level: str, limit: str) -> bool:
    """level is at most limit (PIX within PXB; SYS not within PHB)."""
    return _LEVEL_NAMES.get(level, 99) <= _LEVEL_NAMES.get(limit, -2)


def nearest(gpu: dict, nics: list) -> tuple:
    """(best distance, [names of the NICs at it]) among nics = [(name, placement)]; (None, []) when none has a
    path."""
    scored = [(d, name) for name, place in nics if (d := distance(gpu, place)) is not None]
    if not scored:
        return None, []
    best = min(LEVELS.index(d) for d, _ in scored)
    return LEVELS[best], [n for d, n in scored if LEVELS.index(d) == best]


def _bus(b) -> Optional[str]:
    if not isinstance(b, str):
        return None
    b = b.strip().lower()
    return b[4:] if len(b) == 16 and b.count(":") == 2 else b  # nvidia-smi's 8-digit domain -> sysfs's 4


def local_gpus(facts: dict) -> list:
    """The GPUs a node's local ranks get, in local-rank order: [{"local_rank", "index", "bus_id", "place"}].

    Local rank r uses CUDA device r (torch's cuda:LOCAL_RANK), the r-th of CUDA_VISIBLE_DEVICES when that lists
    indices; CUDA numbers identical GPUs in PCI bus order, as nvidia-smi does. GPU indices and bus ids come from
    nvidia-smi (facts gpu.devices), else from the PCI bus order of the pci group. A GPU without a PCI path keeps
    place {} (its distances are unknown)."""
    pci = facts.get("pci") if isinstance(facts.get("pci"), dict) else {}
    places = {_bus(g.get("bus_id")): g for g in pci.get("gpus") or [] if isinstance(g, dict)}
    g = facts.get("gpu") if isinstance(facts.get("gpu"), dict) else {}
    devices = [d for d in g.get("devices") or [] if isinstance(d, dict) and _bus(d.get("pci_bus_id"))]
    if devices:
        order = [(d.get("index", i), _bus(d.get("pci_bus_id"))) for i, d in enumerate(devices)]
    else:
        order = list(enumerate(sorted(b for b in places if b)))
    visible = ((facts.get("env") or {}).get("vars") or {}).get("CUDA_VISIBLE_DEVICES")
    if isinstance(visible, str) and visible.strip():
        wanted = [v.strip() for v in visible.split(",") if v.strip()]
        if all(v.isdigit() for v in wanted):
            by_index = {int(i): b for i, b in order if isinstance(i, int)}
            order = [(int(v), by_index[int(v)]) for v in wanted if int(v) in by_index]
    return [{"local_rank": r, "index": i, "bus_id": b, "place": places.get(b) or {}} for r, (i, b) in
            enumerate(order)]


def nic_places(rdma: dict, ports: list) -> list:
    """[("dev:port", placement)] for ports = [(dev, port, port_dict)] (rules.active_ib_ports), from the rdma group."""
    by_dev = {d.get("name"): d.get("pci") or {} for d in (rdma or {}).get("devices") or [] if isinstance(d, dict)}
    return [(f"{d}:{p}", by_dev.get(d) or {}) for d, p, _ in ports]


def gpu_nic_map(facts: dict, nics: list) -> list:
    """Every local rank's GPU with its nearest NIC(s) among nics = [("dev:port", placement)]: [{"local_rank",
    "index", "bus_id", "numa", "distance", "nearest"}] (distance None: a placement is unknown)."""
    out = []
    for g in local_gpus(facts):
        numa = (g["place"].get("numa") or [None])[-1] if g["place"] else None
        d, names = nearest(g["place"], nics) if g["place"] else (None, [])
        out.append({"local_rank": g["local_rank"], "index": g["index"], "bus_id": g["bus_id"], "numa": numa,
                    "distance": d, "nearest": names})
    return out
