"""Network interfaces (psutil addresses + /sys/class/net) and the route the kernel would take to the master."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from typing import Any, Callable, Optional

from .roots import read_int, read_text, sysfs
from .util import bounded, link_name, listdir

IFF_UP = 0x1
IFF_RUNNING = 0x40
ARPHRD_INFINIBAND = 32
ARPHRD_LOOPBACK = 772

# Host-side ends of container veth pairs. A veth NOT named like this (a container's own eth0, every lab host's eth0)
# is the interface that container must use, so it is classified "virtual", not "veth".
VETH_PEER_PREFIXES = ("veth", "cali", "lxc")
VPN_PREFIXES = ("tun", "tap", "wg", "tailscale", "zt", "utun", "ppp")
DOCKER_BRIDGE = re.compile(r"^(docker\d*|br-[0-9a-f]{12})$")
ZERO_MAC = re.compile(r"^(00:)*00$")


def _net(name: str, *parts: str) -> str:
    return sysfs("class", "net", name, *parts)


def _prefixlen(family: int, netmask: Optional[str]) -> Optional[int]:
    if not netmask:
        return None
    try:
        if family == socket.AF_INET6:
            return bin(int(ipaddress.IPv6Address(netmask.split("%")[0]))).count("1")
        return bin(int(ipaddress.IPv4Address(netmask))).count("1")
    except ValueError:
        return None


def _addr_lists(entries: Any) -> tuple:
    """psutil snicaddr entries -> (ipv4, ipv6) lists of {"address", "prefixlen"}; link-layer entries ignored."""
    v4, v6 = [], []
    for a in entries or ():
        family = getattr(a, "family", None)
        address = getattr(a, "address", None)
        if not address:
            continue
        if family == socket.AF_INET:
            v4.append({"address": address, "prefixlen": _prefixlen(family, getattr(a, "netmask", None))})
        elif family == socket.AF_INET6:
            # psutil keeps the scope ("fe80::1%eth0"); the name is already the interface.
            v6.append({"address": address.split("%")[0], "prefixlen": _prefixlen(family, getattr(a, "netmask", None))})
    return v4, v6


def classify(name: str, if_type: Optional[int], has_device: bool, driver: Optional[str], is_bridge: bool,
             is_tun: bool) -> str:
    """physical | ipoib | loopback | docker | bridge | veth | virtual | vpn, from sysfs attributes and the name."""
    if if_type == ARPHRD_LOOPBACK or name == "lo":
        return "loopback"
    if if_type == ARPHRD_INFINIBAND:
        return "ipoib"
    if DOCKER_BRIDGE.match(name):
        return "docker"
    if is_bridge or name.startswith("virbr"):
        return "bridge"
    if is_tun or driver in ("tun", "wireguard") or name.startswith(VPN_PREFIXES):
        return "vpn"
    # veth has no `device` link (its iflink is the peer's ifindex). Only host-side peer names count as "veth".
    if name.startswith(VETH_PEER_PREFIXES) and (driver == "veth" or not has_device):
        return "veth"
    return "physical" if has_device else "virtual"


def _stat_flags(stat: Any) -> Optional[set]:
    flags = getattr(stat, "flags", None)  # psutil >= 5.9.3: "up,broadcast,running,multicast"
    return set(flags.split(",")) if isinstance(flags, str) else None


def _up_running(flags: Optional[int], operstate: Optional[str], stat: Any) -> tuple:
    """(up, running) as getifaddrs() would report them.

    The sysfs `flags` file holds dev->flags, which never carries IFF_RUNNING (the kernel adds it in dev_get_flags()
    when the device is up and operstate is up or unknown), so RUNNING is derived the same way here.
    """
    stat_flags = _stat_flags(stat)
    if flags is not None:
        up = bool(flags & IFF_UP)
    elif stat is not None and getattr(stat, "isup", None) is not None:
        up = bool(stat.isup)
    elif operstate is not None:
        up = operstate in ("up", "unknown")
    else:
        return None, None
    if not up:
        return False, False
    if flags is not None and flags & IFF_RUNNING:
        return True, True
    if operstate is not None:
        return True, operstate in ("up", "unknown")
    if stat_flags is not None:
        return True, "running" in stat_flags
    return True, None


def read_interface(name: str, addrs: Any = (), stat: Any = None) -> dict:
    """One interface's facts; every sysfs attribute degrades to None on its own."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"bad interface name {name!r}")
    if_type = read_int(_net(name, "type"))
    operstate = read_text(_net(name, "operstate"))
    operstate = operstate.lower() if operstate else None
    flags = read_int(_net(name, "flags"))
    has_device = os.path.isdir(_net(name, "device"))
    driver = link_name(_net(name, "device", "driver"))
    mtu = read_int(_net(name, "mtu"))
    if mtu is None and stat is not None:
        mtu = getattr(stat, "mtu", None) or None
    speed = read_int(_net(name, "speed"))
    if speed is not None and speed <= 0:  # -1 (virtual NICs) or 0: unknown
        speed = None
    numa = read_int(_net(name, "device", "numa_node"))
    if numa is not None and numa < 0:
        numa = None
    mac = read_text(_net(name, "address"))
    if mac is not None and (not mac or ZERO_MAC.match(mac)):
        mac = None
    carrier = read_int(_net(name, "carrier"))  # EINVAL while the interface is down -> None
    up, running = _up_running(flags, operstate, stat)
    v4, v6 = _addr_lists(addrs)
    kind = classify(
        name, if_type, has_device, driver,
        is_bridge=os.path.isdir(_net(name, "bridge")),
        is_tun=os.path.exists(_net(name, "tun_flags")),
    )
    return {
        "name": name, "kind": kind, "up": up, "running": running, "operstate": operstate, "carrier": carrier,
        "mtu": mtu, "speed_mbps": speed, "type": if_type, "mac": mac, "numa_node": numa, "driver": driver,
        "ipv4": v4, "ipv6": v6,
    }


def read_interfaces(addrs: Optional[Mapping] = None, stats: Optional[Mapping] = None) -> list:
    """All interfaces: getifaddrs() order (NCCL picks within a step by that order), then sysfs-only ones.

    addrs/stats default to psutil.net_if_addrs()/net_if_stats(); tests inject their own while sysfs comes from the
    fake root.
    """
    if addrs is None or stats is None:
        import psutil

        addrs = psutil.net_if_addrs() if addrs is None else addrs
        stats = psutil.net_if_stats() if stats is None else stats
    names = list(addrs)
    seen = set(names)
    names += [n for n in listdir(sysfs("class", "net")) if n not in seen]
    out = []
    for name in names:
        try:
            out.append(read_interface(name, addrs.get(name, ()), stats.get(name)))
        except ValueError:
            continue
    return out


CARRIER_COUNTERS = ("carrier_changes", "carrier_up_count", "carrier_down_count")
MAX_CARRIER_NETDEVS = 256


def carrier_snapshot() -> dict:
    """{netdev: {"carrier_changes", "carrier_up_count", "carrier_down_count"}} now, for every interface with a
    device behind it (physical and IPoIB: the links that can flap; bridges, veths and tunnels come and go with
    containers). carrier_changes counts both edges: one flap is 2. Readable without root."""
    out = {}
    for name in listdir(sysfs("class", "net"), MAX_CARRIER_NETDEVS):
        if name.startswith(".") or not os.path.exists(_net(name, "device")):
            continue
        vals = {k: v for k in CARRIER_COUNTERS if (v := read_int(_net(name, k))) is not None and v >= 0}
        if vals:
            out[name] = vals
    return out


def _resolve(target: str, timeout_s: float) -> list:
    infos = bounded(lambda: socket.getaddrinfo(target, None, type=socket.SOCK_DGRAM), timeout_s)
    return [(fam, sa[0]) for fam, _t, _p, _c, sa in infos if fam in (socket.AF_INET, socket.AF_INET6)]


def route_to(target: str, addrs: Optional[Mapping] = None, timeout_s: float = 2.0,
             resolver: Optional[Callable[[str, float], list]] = None) -> dict:
    """The local interface and source address the kernel would use to reach target (a UDP connect sends nothing)."""
    try:
        candidates = (resolver or _resolve)(target, timeout_s)
    except Exception as e:  # socket.gaierror, util.Timeout, UnicodeError from the codec
        return {"unavailable": f"cannot resolve {target}: {e}", "target": target}
    if not candidates:
        return {"unavailable": f"cannot resolve {target}: no IPv4/IPv6 address", "target": target}
    family, ip = candidates[0]
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((ip, 9))  # port is irrelevant: connect() on UDP only selects the route
            source = s.getsockname()[0]
    except OSError as e:
        return {"unavailable": f"no route to {target} ({ip}): {e.strerror or e}", "target": target, "target_ip": ip}
    source = source.split("%")[0]
    if addrs is None:
        import psutil

        addrs = psutil.net_if_addrs()
    interface = None
    for name, entries in addrs.items():
        if any((getattr(a, "address", "") or "").split("%")[0] == source for a in entries):
            interface = name
            break
    return {"target": target, "target_ip": ip, "interface": interface, "source": source}


def resolve_host(host: str) -> list[str]:
    """IPv4 first, then IPv6, unique, in getaddrinfo order. Raises socket.gaierror when the name does not resolve."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    v4 = [i[4][0] for i in infos if i[0] == socket.AF_INET]
    v6 = [i[4][0] for i in infos if i[0] == socket.AF_INET6]
    return list(dict.fromkeys(v4 + v6))


def is_local_address(host: str) -> Optional[bool]:
    """Does `host` name an address of this machine? None when it does not resolve."""
    try:
        addrs = resolve_host(host)
    except OSError:
        return None
    for a in addrs:
        family = socket.AF_INET6 if ":" in a else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((a, 0))
                return True
            except OSError:
                continue
    return False
