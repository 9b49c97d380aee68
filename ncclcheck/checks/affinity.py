"""pci.affinity: each local rank's GPU and its nearest RDMA NIC by NCCL's own distance over the PCI tree (PIX, PXB,
PHB, SYS: nccl/pcipath.py), with their NUMA nodes; and an NCCL_IB_HCA that leaves a GPU only NICs farther than its
nearest, on the far socket (SYS) or beyond NCCL's GPUDirect RDMA level (NCCL_NET_GDR_LEVEL, PXB by default), named
with the GPU, the NICs it keeps and the ones it lost.

A GPU whose nearest NIC is SYS by the hardware's own layout is said, not failed: NCCL can still reach a near NIC
through another GPU over NVLink (PXN), and no setting changes the wiring.
"""

from __future__ import annotations

from ..model import CheckResult, passed, skipped, warned
from ..nccl import pcipath, rules
from . import actions
from .local import LocalInput

CID = "pci.affinity"
SHOWN = 4


def _gpu(m: dict) -> str:
    numa = f", NUMA {m['numa']}" if m.get("numa") is not None else ""
    return f"GPU {m['index']} ({m['bus_id']}{numa})"


def check_affinity(inp: LocalInput) -> CheckResult:
    """pci.affinity: each local rank's GPU's nearest RDMA NIC (NCCL's PCI distance, NUMA node), and a set NCCL_IB_HCA
    that puts a GPU on a far NIC."""
    node, facts = inp.node_rank, inp.facts
    rdma = facts.get("rdma") if isinstance(facts.get("rdma"), dict) else {}
    if "unavailable" in rdma:
        return skipped(CID, f"RDMA facts unavailable: {rdma['unavailable']}", node=node)
    active = rules.active_ib_ports(rdma)
    if not active:
        return skipped(CID, "no ACTIVE RDMA port", node=node)
    gpus = pcipath.local_gpus(facts)
    if not gpus:
        return skipped(CID, "no NVIDIA GPU on the PCI bus", node=node)
    nics = pcipath.nic_places(rdma, active)
    every = pcipath.gpu_nic_map(facts, nics)
    if all(m["distance"] is None for m in every):
        return skipped(CID, "no PCI path for the GPUs or the NICs (a virtual PCI tree, or sysfs not readable)",
                       node=node, evidence={"gpus": every})
    level = pcipath.gdr_level(inp.env)
    hca = inp.env.get("NCCL_IB_HCA")
    spec = rules.parse_spec(hca)
    allowed = [(d, p, x) for d, p, x in active if spec is None or spec.matches(d, p)]
    kept = pcipath.gpu_nic_map(facts, pcipath.nic_places(rdma, allowed)) if spec is not None else every
    ev: dict = {"gpus": [{**m, "nearest_allowed": k["nearest"], "distance_allowed": k["distance"]}
                         for m, k in zip(every, kept)], "nccl_ib_hca": hca, "gdr_level": level}
    worse = [(m, k) for m, k in zip(every, kept) if spec is not None and m["distance"] is not None and (
        k["distance"] is None or pcipath.LEVELS.index(k["distance"]) > pcipath.LEVELS.index(m["distance"]))]
    far = [(m, k) for m, k in worse if k["distance"] in (None, "SYS") or
           (pcipath.within(m["distance"], level) and not pcipath.within(k["distance"], level))]
    if far:
        ev[actions.KEY] = actions.RESTART_JOB
        parts = []
        for m, k in far[:SHOWN]:
            kept_txt = f"{', '.join(k['nearest'])} ({k['distance']})" if k["nearest"] else "none of its NICs"
            parts.append(f"{_gpu(m)} gets {kept_txt} instead of {', '.join(m['nearest'])} ({m['distance']})")
        more = f"; +{len(far) - SHOWN} more" if len(far) > SHOWN else ""
        lost_gdr = any(not pcipath.within(k["distance"] or "SYS", level) for _, k in far)
        return warned(CID, f"{rules.assignment('NCCL_IB_HCA', hca)} puts GPUs on far NICs: {'; '.join(parts)}{more}; "
                           f"{actions.said(actions.RESTART_JOB)}", node=node, evidence=ev,
                      detail="Traffic of those GPUs crosses the CPU's root complex or the socket interconnect"
                             + (f", and beyond NCCL_NET_GDR_LEVEL ({level}) NCCL stages it through host memory "
                                "(no GPUDirect RDMA)" if lost_gdr else "") + ".",
                      fix="Unset NCCL_IB_HCA (NCCL picks each GPU's nearest NIC itself) or list every GPU's nearest "
                          "NIC in it (`ncclcheck recommend` gives it per local rank).")
    shown = ", ".join(f"GPU {m['index']} -> {'/'.join(m['nearest']) or '?'} ({m['distance'] or '?'})"
                      for m in every[:SHOWN]) + (f", +{len(every) - SHOWN} more" if len(every) > SHOWN else "")
    sys_only = [m for m in every if m["distance"] == "SYS"]
    note = (f"; {len(sys_only)} GPU(s) have no NIC on their socket (NCCL reaches one through another GPU, PXN, "
            "where NVLink allows)" if sys_only else "")
    said = f" under {rules.assignment('NCCL_IB_HCA', hca)}" if spec is not None else ""
    return passed(CID, f"nearest NIC per GPU{said}: {shown}{note}", node=node, evidence=ev)
