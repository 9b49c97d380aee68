"""gdr.support: whether NCCL can move data between this node's GPUs and its InfiniBand/RoCE HCAs without staging it
in host memory (GPUDirect RDMA), from what NCCL itself reads (facts/gdr.py), on a node with GPUs and ACTIVE HCA ports;
and across nodes, the node without it named (the NVIDIA/nccl#897 shape: GDRDMA on one side only).

NCCL's routes, in its order: a peer-memory file (nv_mem, nv_mem_nc, nvidia_peermem: net_ib.cc ncclIbGdrSupport), or
DMA-BUF, which needs a kernel of 5.12 or later (RDMA memory regions from a dma-buf fd: the kernel's 5.12 cycle) and
the open NVIDIA kernel module (the proprietary one cannot export GPU memory as dma-buf), plus what NCCL probes with
CUDA and verbs at init and nothing here can read (facts gdr.not_read). Without either, NCCL says nothing louder than
"NET/IB : GPU Direct RDMA Disabled for HCA" at INFO and runs every transfer through host memory.
"""

from __future__ import annotations

import re
from typing import Optional

from ..model import CheckResult, failed, passed, skipped, warned
from ..nccl import rules
from . import actions
from .cross import CrossInput, _single, _who
from .local import LocalInput

CID = "gdr.support"
DMABUF_KERNEL = (5, 12)
PEER_ORDER = ("nv_mem", "nv_mem_nc", "nvidia_peermem")  # NCCL's order of looking
CONSEQUENCE = ("NCCL registers no GPU memory with the HCAs there: every transfer to or from that node is staged "
               "through host memory (NCCL_DEBUG=INFO: \"NET/IB : GPU Direct RDMA Disabled for HCA\", channels "
               "\"via NET/IB/N\" without \"/GDRDMA\"), with less bandwidth and more CPU, and every ring through it "
               "runs at its pace")
FIX = ("Load the driver's peer-memory module after the HCA driver: `modprobe nvidia-peermem` (persist it in "
       "/etc/modules-load.d/), then resume the node; or use DMA-BUF: the open NVIDIA kernel module (nvidia-open) on a "
       "kernel >= 5.12 with an HCA stack that registers dma-buf memory (rdma-core 34+, MLNX_OFED/DOCA-OFED or inbox).")


def _obj(v) -> dict:
    return v if isinstance(v, dict) else {}


def _kernel(release: Optional[str]) -> Optional[tuple]:
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def gpu_count(facts: dict) -> int:
    """NVIDIA GPUs on this node: on the PCI bus (the pci group) or, failing that, as nvidia-smi/torch counted them."""
    pci = facts.get("pci") if isinstance(facts.get("pci"), dict) else {}
    on_bus = len(pci.get("gpus") or []) if "unavailable" not in pci else 0
    g = facts.get("gpu") if isinstance(facts.get("gpu"), dict) else {}
    counted = g.get("count") if isinstance(g.get("count"), int) and "unavailable" not in g else 0
    return max(on_bus, counted)


def verbs_ports(facts: dict) -> list:
    """ACTIVE InfiniBand/RoCE ports ("dev:port"): the ones NCCL's IB transport uses (EFA has its own plugin)."""
    rdma = facts.get("rdma") if isinstance(facts.get("rdma"), dict) else {}
    if "unavailable" in rdma:
        return []
    return [f"{d}:{p}" for d, p, x in rules.active_ib_ports(rdma)
            if (x.get("link_layer") or "").lower() in ("infiniband", "ethernet")]


def not_applicable(facts: dict) -> Optional[str]:
    """Why GPUDirect RDMA does not matter on this node (None: it does)."""
    env = (facts.get("env") or {}).get("vars") or {}
    if not gpu_count(facts):
        return "no NVIDIA GPU on this node"
    if not verbs_ports(facts):
        return "no ACTIVE InfiniBand/RoCE port (NCCL's IB transport is not used)"
    if env.get("NCCL_IB_DISABLE") == "1":
        return "NCCL_IB_DISABLE=1: NCCL uses no RDMA"
    return None


def route(facts: dict) -> dict:
    """{"route": "nv_mem" | "nv_mem_nc" | "nvidia_peermem" | "dma-buf" | None, "known": bool, "why": text}.
    route None and known: no GPUDirect RDMA; known False: it could not be told."""
    g = facts.get("gdr")
    if not isinstance(g, dict) or "unavailable" in g:
        return {"route": None, "known": False, "why": f"GPUDirect RDMA facts unavailable: "
                                                         f"{(g or {}).get('unavailable', 'not collected')}"}
    peer = _obj(g.get("peer_memory"))  # another node's facts: any shape
    for name in PEER_ORDER:
        p = _obj(peer.get(name))
        if p.get("present"):
            ver = f" {p['version']}" if p.get("version") else ""
            return {"route": name, "known": True, "why": f"{p.get('path')} exists ({name}{ver})"}
    env = (facts.get("env") or {}).get("vars") or {}
    mod = _obj(g.get("nvidia_module"))
    taint = mod.get("taint")
    kernel = g.get("kernel") if isinstance(g.get("kernel"), str) else None
    kv = _kernel(kernel)
    none = "no peer-memory module (none of NCCL's nv_mem, nv_mem_nc, nvidia_peermem files)"
    if str(env.get("NCCL_DMABUF_ENABLE", "")).strip() == "0":
        return {"route": None, "known": True, "why": f"{none}, and NCCL_DMABUF_ENABLE=0 turns DMA-BUF off"}
    if kv is not None and kv < DMABUF_KERNEL:
        return {"route": None, "known": True, "why": f"{none}, and kernel {kernel} is older than {DMABUF_KERNEL[0]}."
                                                     f"{DMABUF_KERNEL[1]} (no DMA-BUF memory regions)"}
    if mod.get("loaded") and isinstance(taint, str) and "P" in taint:
        return {"route": None, "known": True, "why": f"{none}, and the proprietary NVIDIA kernel module "
                                                     f"(taint {taint!r}) exports no DMA-BUF"}
    if not mod.get("loaded"):
        return {"route": None, "known": False, "why": f"{none}, and the NVIDIA kernel module is not loaded "
                                                      "(/sys/module/nvidia absent): DMA-BUF cannot be told"}
    if kv is None or not isinstance(taint, str):
        return {"route": None, "known": False, "why": f"{none}; kernel {kernel or '?'}, module taint "
                                                      f"{taint if isinstance(taint, str) else 'unreadable'}: "
                                                      "DMA-BUF cannot be told"}
    return {"route": "dma-buf", "known": True,
            "why": f"{none}; DMA-BUF: kernel {kernel} and the open NVIDIA kernel module (taint {taint!r})"}


def check_gdr(inp: LocalInput) -> CheckResult:
    """gdr.support: NCCL's GPUDirect RDMA route on a node with GPUs and ACTIVE InfiniBand/RoCE ports (peer-memory
    module or DMA-BUF), or why there is none."""
    node, facts = inp.node_rank, inp.facts
    why = not_applicable(facts)
    if why:
        return skipped(CID, why, node=node)
    r = route(facts)
    ports = verbs_ports(facts)
    ev = {**r, "gpus": gpu_count(facts), "ports": ports,
          "not_read": list(((facts.get("gdr") or {}).get("not_read")) or [])}
    if r["route"] in PEER_ORDER:
        return passed(CID, f"GPUDirect RDMA through {r['route']} for {len(ports)} HCA port(s): {r['why']}",
                      node=node, evidence=ev)
    if r["route"] == "dma-buf":
        return passed(CID, f"GPUDirect RDMA through DMA-BUF for {len(ports)} HCA port(s): {r['why']}", node=node,
                      evidence=ev,
                      detail="What NCCL checks at init and a read cannot: the GPU's "
                             "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and each HCA's ibv_reg_dmabuf_mr; NCCL_DEBUG=INFO "
                             "says \"DMA-BUF is available on GPU device N\" and channels \"via NET/IB/N/GDRDMA\" "
                             "when both hold.")
    if not r["known"]:
        ev[actions.KEY] = actions.MONITOR
        return warned(CID, f"GPUDirect RDMA could not be told: {r['why']}; {actions.said(actions.MONITOR)}",
                      node=node, evidence=ev,
                      fix="Run a job with NCCL_DEBUG=INFO and look for \"GPU Direct RDMA Enabled\" or \"/GDRDMA\".")
    ev[actions.KEY] = actions.ISOLATE
    shown = ", ".join(ports[:4]) + (f" +{len(ports) - 4} more" if len(ports) > 4 else "")
    return failed(CID, f"no GPUDirect RDMA: {r['why']}; {len(ports)} HCA port(s) ({shown}) go through host memory; "
                       f"{actions.said(actions.ISOLATE)}", node=node, evidence=ev,
                  detail=CONSEQUENCE + ". NCCL looks for " + ", ".join(
                      str(((facts.get("gdr") or {}).get("peer_memory") or {}).get(n, {}).get("path") or n)
                      for n in PEER_ORDER) + ".", fix=FIX)


def check_gdr_cross(inp: CrossInput) -> CheckResult:
    """gdr.support (cross-node): the same GPUDirect RDMA on every GPU node with HCAs; a node without it is named."""
    if (s := _single(inp, CID)) is not None:
        return s
    routes: dict = {}
    for r, _h, f in inp.nodes:
        f = f or {}
        if "gdr" in f and not not_applicable(f):
            routes[r] = route(f)
    if len(routes) < 2:
        return skipped(CID, "fewer than two nodes with GPUs and ACTIVE InfiniBand/RoCE ports")
    have = sorted(r for r, x in routes.items() if x["route"])
    lack = sorted(r for r, x in routes.items() if x["known"] and not x["route"])
    unknown = sorted(r for r, x in routes.items() if not x["known"])
    ev = {"routes": {str(r): x["route"] for r, x in routes.items()}, "without": lack, "unknown": unknown,
          "why": {str(r): routes[r]["why"] for r in lack + unknown}}
    if lack:
        ev[actions.KEY] = actions.ISOLATE
        others = f" while {_who(inp, have)} have it" if have else " (no node has it)"
        return failed(CID, f"no GPUDirect RDMA on {_who(inp, lack)}{others}; {actions.said(actions.ISOLATE)}",
                      evidence=ev, detail=CONSEQUENCE + ". " + " ".join(
                          f"Node {r} ({inp.host(r)}): {routes[r]['why']}." for r in lack), fix=FIX)
    kinds = sorted({str(routes[r]["route"]) for r in have})
    if unknown:
        ev[actions.KEY] = actions.MONITOR
        return warned(CID, f"GPUDirect RDMA ({', '.join(kinds)}) on {_who(inp, have)}; could not be told on "
                           f"{_who(inp, unknown)}; {actions.said(actions.MONITOR)}", evidence=ev,
                      fix="Run a job with NCCL_DEBUG=INFO and look for \"/GDRDMA\" on the nodes named.")
    return passed(CID, f"GPUDirect RDMA on all {len(have)} GPU nodes with HCAs ({', '.join(kinds)})", evidence=ev)
