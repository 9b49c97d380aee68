"""GPUDirect RDMA: what NCCL's IB transport reads to decide whether a NIC may read and write GPU memory.

NCCL (src/transport/net_ib.cc, ncclIbGdrSupport) enables its nvidia-peermem route when any of three files exists:
/sys/kernel/mm/memory_peers/nv_mem/version, /sys/kernel/mm/memory_peers/nv_mem_nc/version (the MLNX_OFED peer-memory
clients) or /sys/module/nvidia_peermem/version (the driver's own module). Its other route, DMA-BUF, it probes with
CUDA (cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)) and verbs (ibv_reg_dmabuf_mr(fd=-1) answering
EOPNOTSUPP or not): neither can be read without a CUDA context or the verbs library. What can be read is what they
need: a kernel that registers DMA-BUF memory regions (5.12 and later) and the NVIDIA kernel module's flavor (only the
open flavor exports GPU memory as DMA-BUF: the proprietary one cannot use the kernel's GPL-only dma-buf symbols).
The flavor is read from the module's taint flags: the proprietary module taints the kernel "P", the open one does
not. Nothing here judges (checks/gdr.py does).
"""

from __future__ import annotations

import os

from . import host
from .roots import read_text, sysfs

# NCCL's own probe, in its order: name -> path under the sysfs root.
PEER_MEMORY = (("nv_mem", ("kernel", "mm", "memory_peers", "nv_mem", "version")),
               ("nv_mem_nc", ("kernel", "mm", "memory_peers", "nv_mem_nc", "version")),
               ("nvidia_peermem", ("module", "nvidia_peermem", "version")))
NOT_READ = ("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (needs a CUDA context)",
            "ibv_reg_dmabuf_mr on each HCA (needs the verbs library; rdma-core 34+ and an HCA driver with DMA-BUF)")


def read_peer_memory() -> dict:
    """{name: {"path", "present", "version"}} for NCCL's three peer-memory files (present: the file exists, as
    NCCL's access(F_OK) asks; version: its text when readable)."""
    out = {}
    for name, parts in PEER_MEMORY:
        path = sysfs(*parts)
        out[name] = {"path": "/sys/" + "/".join(parts), "present": os.path.exists(path),
                     "version": (read_text(path, 256) or None)}
    return out


def read_nvidia_module() -> dict:
    """The NVIDIA kernel module as /sys/module/nvidia shows it: loaded, version, taint flags (e.g. "POE")."""
    base = sysfs("module", "nvidia")
    return {"loaded": os.path.isdir(base), "version": read_text(os.path.join(base, "version"), 256) or None,
            "taint": read_text(os.path.join(base, "taint"), 64)}


def collect() -> dict:
    """The `gdr` fact group."""
    return {"peer_memory": read_peer_memory(), "nvidia_module": read_nvidia_module(),
            "kernel": host.kernel_release(), "not_read": list(NOT_READ)}
