"""RDMA devices and ports (InfiniBand, RoCE, EFA) read straight from /sys/class/infiniband, never from ibstat."""

from __future__ import annotations

import os
import re
from typing import Optional

from ..units import is_decimal
from .pcitree import placement
from .roots import read_int, read_text, sysfs
from .util import listdir

MAX_GIDS = 1024  # IB ports expose 128-256 GID slots; bound the work on a hostile tree
_STATE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
# The port's error counters NCCL's users meet as hangs and retransmissions (IB PMA counters, also kept on RoCE ports):
# cumulative since the driver loaded, so only their change over a window means anything (checks/counters.py).
PORT_COUNTERS = ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors",
                 "port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors",
                 "excessive_buffer_overrun_errors")
# mlx5's transport counters (ports/N/hw_counters): retransmission timeouts, sequence errors, receive buffer overruns,
# and the congestion-control ones (CNPs), read where the driver has them.
HW_COUNTERS = ("local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err", "out_of_buffer", "out_of_sequence",
               "rnr_nak_retry_err", "np_cnp_sent", "rp_cnp_handled")
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
        "board_id": read_text(os.path.join(d, "board_id"), 256) or None,
        "hca_type": read_text(os.path.join(d, "hca_type"), 256) or None,
        "numa_node": numa if numa is not None and numa >= 0 else None,
        "node_guid": read_text(os.path.join(d, "node_guid")) or None,
        "pci": placement(os.path.join(d, "device")),
        "ports": [read_port(dev, p) for p in ports],
    }


def _read_counter_dir(path: str, names: tuple, unreadable: Optional[dict] = None) -> dict:
    """{name: value} for the counters of `names` that exist and read as integers (a missing one is left out: not
    every driver has every counter, and 0 would claim it was read). One that exists and reads as no number (`N/A`,
    junk, an I/O error on a wedged port) goes into `unreadable` as {name: what it read}: unmeasured, never quiet."""
    out = {}
    for n in names:
        f = os.path.join(path, n)
        v = read_int(f)
        if v is not None and v >= 0:
            out[n] = v
        elif unreadable is not None and os.path.lexists(f):
            text = read_text(f, 64)
            unreadable[n] = "unreadable" if text is None else repr(text[:16]) if text else "empty"
    return out


def read_port_counters(dev: str, port: int) -> dict:
    """{"counters": {...}, "hw_counters": {...}} of one port, as they read now, and "unreadable": {name: what it
    read} when a counter there reads as no number."""
    p = sysfs("class", "infiniband", dev, "ports", str(port))
    bad: dict = {}
    out = {"counters": _read_counter_dir(os.path.join(p, "counters"), PORT_COUNTERS, bad),
           "hw_counters": _read_counter_dir(os.path.join(p, "hw_counters"), HW_COUNTERS, bad)}
    if bad:
        out["unreadable"] = bad
    return out


def counter_snapshot() -> dict:
    """Every RDMA port's error counters now: {"mlx5_0/1": {"counters": {...}, "hw_counters": {...}}}."""
    out = {}
    for dev in listdir(sysfs("class", "infiniband")):
        if dev.startswith("."):
            continue
        for p in listdir(sysfs("class", "infiniband", dev, "ports")):
            if is_decimal(p):
                out[f"{dev}/{int(p)}"] = read_port_counters(dev, int(p))
    return out


def driver_version() -> Optional[str]:
    """mlx5_core's module version: set by MLNX_OFED / DOCA-OFED builds (e.g. "24.10-1.1.4"), absent from the kernel's
    inbox driver (None)."""
    return read_text(sysfs("module", "mlx5_core", "version"), 256) or None


def collect() -> dict:
    """{"devices": [...], "mlx5_core_version"}; a node without /sys/class/infiniband has no devices (that is a fact,
    not an error)."""
    names = [n for n in listdir(sysfs("class", "infiniband")) if not n.startswith(".")]
    return {"devices": [read_device(n) for n in names], "mlx5_core_version": driver_version()}
