"""RDMA devices and ports (InfiniBand, RoCE, EFA) read straight from /sys/class/infiniband, never from ibstat."""

from __future__ import annotations

import os
import re
from typing import Optional

from ..units import is_decimal
from .roots import read_int, read_text, sysfs
from .util import listdir

MAX_GIDS = 1024  # IB ports expose 128-256 GID slots; bound the work on a hostile tree
_STATE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_IPV4_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}$")


def parse_state(text: Optional[str]) -> tuple:
    """'4: ACTIVE' -> (4, 'ACTIVE'); a bare name or number keeps what it can; garbage -> (None, None)."""
    if not text:
        return None, None
    m = _STATE.match(text)
    if m:
        return int(m.group(1)), m.group(2)
    if is_decimal(text):
        return int(text), None
    return (None, text) if text.replace("_", "").isalnum() else (None, None)


def parse_rate(text: Optional[str]) -> Optional[float]:
    """'400 Gb/sec (4X NDR)' -> 400.0."""
    m = _RATE.match(text or "")
    return float(m.group(1)) if m else None


def _is_zero_gid(gid: str) -> bool:
    return not gid.replace(":", "").strip("0")


def _port_netdevs_from_device(dev: str, port: int) -> list:
    """IPoIB netdevs under <dev>/device/net; a multi-port function is split by dev_port (0-based)."""
    base = sysfs("class", "infiniband", dev, "device", "net")
    names = listdir(base)
    if len(names) <= 1:
        return names
    by_port = [n for n in names if read_int(os.path.join(base, n, "dev_port")) == port - 1]
    return by_port or names


def read_port(dev: str, port: int) -> dict:
    p = sysfs("class", "infiniband", dev, "ports", str(port))
    state_code, state = parse_state(read_text(os.path.join(p, "state")))
    phys_code, phys = parse_state(read_text(os.path.join(p, "phys_state")))
    rate = read_text(os.path.join(p, "rate"))
    gids = []
    indices = sorted(int(n) for n in listdir(os.path.join(p, "gids"), MAX_GIDS) if is_decimal(n))
    for i in indices:
        gid = read_text(os.path.join(p, "gids", str(i)))
        if not gid or _is_zero_gid(gid):
            continue
        gids.append({
            "index": i, "gid": gid.lower(),
            # both read EINVAL for unpopulated slots -> None
            "type": read_text(os.path.join(p, "gid_attrs", "types", str(i))) or None,
            "ndev": read_text(os.path.join(p, "gid_attrs", "ndevs", str(i))) or None,
        })
    # NCCL < 2.21 needs this index on RoCE: type "RoCE v2" and the netdev's IPv4 address as an IPv4-mapped GID.
    roce_v2 = next(
        (g["index"] for g in gids if (g["type"] or "").lower() == "roce v2" and _IPV4_MAPPED.match(g["gid"])), None
    )
    netdevs = list(dict.fromkeys(g["ndev"] for g in gids if g["ndev"])) or _port_netdevs_from_device(dev, port)
    return {
        "port": port, "state": state, "state_code": state_code, "phys_state": phys, "phys_state_code": phys_code,
        "rate": rate or None, "rate_gbps": parse_rate(rate),
        "link_layer": read_text(os.path.join(p, "link_layer")) or None,
        "netdevs": netdevs, "roce_v2_gid_index": roce_v2, "gids": gids,
    }


def read_device(dev: str) -> dict:
    d = sysfs("class", "infiniband", dev)
    numa = read_int(os.path.join(d, "device", "numa_node"))
    ports = sorted(int(n) for n in listdir(os.path.join(d, "ports")) if is_decimal(n))
    return {
        "name": dev,
        "fw_ver": read_text(os.path.join(d, "fw_ver")) or None,
        "numa_node": numa if numa is not None and numa >= 0 else None,
        "node_guid": read_text(os.path.join(d, "node_guid")) or None,
        "ports": [read_port(dev, p) for p in ports],
    }


def collect() -> dict:
    """{"devices": [...]}; a node without /sys/class/infiniband has no devices (that is a fact, not an error)."""
    names = [n for n in listdir(sysfs("class", "infiniband")) if not n.startswith(".")]
    return {"devices": [read_device(n) for n in names]}
