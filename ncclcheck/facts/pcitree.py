"""Where a device sits in the PCI tree, read as NCCL reads it: the device's path under /sys/devices/pci<domain>:<bus>
(the chain of bridges from the root complex down to it) and the numa_node of each element. nccl/pcipath.py turns two
such placements into NCCL's distance (PIX, PXB, PHB, SYS); nothing here judges.

A path is what the kernel's symlinks resolve to (/sys/bus/pci/devices/<bdf>, /sys/class/infiniband/<dev>/device), so
a device whose link does not lead under devices/pci... (a fake tree written as plain directories, a virtual device)
has no path, and says so, rather than a guessed one.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from .roots import read_int, read_text, sysfs, sysfs_root
from .util import link_name, listdir

PCI_VENDOR_NVIDIA = "0x10de"
PCI_CLASS_GPU = ("0x0300", "0x0302")  # VGA controller, 3D controller
PCI_CLASS_NVSWITCH = ("0x0680",)  # bridge, other: how an NVSwitch shows on the PCI bus
MAX_DEPTH = 16  # bridges between a root complex and a device: real trees have 2-6; bound a hostile tree
MAX_GPUS = 256
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")


def nvidia_functions(classes: tuple, limit: int = MAX_GPUS) -> list:
    """NVIDIA PCI functions (vendor 0x10de) whose class starts with one of `classes`, by bus id."""
    base = sysfs("bus", "pci", "devices")
    out = []
    for bdf in listdir(base, 4096):
        d = os.path.join(base, bdf)
        if (read_text(os.path.join(d, "vendor")) or "").lower() != PCI_VENDOR_NVIDIA:
            continue
        if not (read_text(os.path.join(d, "class")) or "").lower().startswith(classes):
            continue
        out.append(bdf)
        if len(out) >= limit:
            break
    return out


def nvidia_gpu_bus_ids() -> list:
    """NVIDIA GPUs on the PCI bus (vendor 0x10de, display class), by bus id: the order nvidia-smi numbers them."""
    return nvidia_functions(PCI_CLASS_GPU)


def driver_of(bdf: str) -> Optional[str]:
    """The driver a PCI function is bound to (its `driver` link: "nvidia", "vfio-pci"), None when none is."""
    return link_name(sysfs("bus", "pci", "devices", bdf, "driver"))


def nvidia_bound_gpu_bus_ids() -> list:
    """The GPUs the nvidia driver holds, by bus id: the ones NVML and nvidia-smi count and number, in this order."""
    return [b for b in nvidia_gpu_bus_ids() if driver_of(b) == "nvidia"]


def nvswitch_bus_ids() -> list:
    """The node's NVSwitches: what makes it an NVSwitch node whose GPUs need the fabric manager
    (HARDWARE-ANCHORS.md row 8)."""
    return nvidia_functions(PCI_CLASS_NVSWITCH)


def _numa(path: str) -> Optional[int]:
    n = read_int(os.path.join(path, "numa_node"))
    return n if n is not None and n >= 0 else None


def placement(link: str) -> dict:
    """{"bus_id", "root": "pci0000:16", "path": [bridge bus ids from the root port down, the device last],
    "numa": [numa_node of each element of path, None where unknown or -1]} of the device a sysfs link points at, or
    {"unavailable": why}. The kernel's numa_node of -1 ("no affinity", common in VMs) is kept as None."""
    try:
        real = os.path.realpath(link)
        base = os.path.realpath(sysfs_root())
    except (OSError, ValueError) as e:
        return {"unavailable": f"cannot resolve {link}: {e}"}
    prefix = os.path.join(base, "devices") + os.sep
    if not real.startswith(prefix):
        return {"unavailable": f"{link} does not lead under {prefix}pci... (no PCI path)"}
    parts = real[len(prefix):].split(os.sep)
    if not parts or not ROOT.match(parts[0]):
        return {"unavailable": f"{link} is not under a PCI root complex ({parts[0] if parts else '?'})"}
    chain = []
    for p in parts[1:]:
        if not BDF.match(p):
            break  # below the PCI function: virtio, net/..., the device's own attributes
        chain.append(p)
    if not chain or len(chain) > MAX_DEPTH:
        return {"unavailable": f"{link}: {len(chain)} PCI elements under {parts[0]}"}
    numa = []
    for i in range(len(chain)):
        numa.append(_numa(os.path.join(prefix, parts[0], *chain[: i + 1])))
    return {"bus_id": chain[-1], "root": parts[0], "path": chain, "numa": numa}


def upstream(bdf: str) -> Optional[str]:
    """The PCI bridge directly above a device (its upstream switch port or root port: what its link trains against);
    None on a root bus (a VM's GPU at 00:06.0 has no bridge above it) or where its place cannot be read."""
    p = placement(sysfs("bus", "pci", "devices", bdf))
    path = p.get("path") or []
    return path[-2] if len(path) >= 2 else None


def gpu_placements() -> list:
    """Every NVIDIA GPU on the PCI bus with its placement (bus_id always; root/path/numa or unavailable)."""
    out = []
    for bdf in nvidia_gpu_bus_ids():
        p = placement(sysfs("bus", "pci", "devices", bdf))
        out.append({**p, "bus_id": bdf} if "unavailable" not in p else {"bus_id": bdf, **p})
    return out


def collect() -> dict:
    """The `pci` fact group: {"gpus": [placements]} (NICs carry their own in the rdma group)."""
    return {"gpus": gpu_placements()}
