"""What the links can carry, read on this node: NIC line rates and shapers, IB/RoCE port rates, NVLink and PCIe.

One JSON-able dict (`collect()`), turned into the bound of a measured figure by ncclcheck/nccl/bounds.py. Every part
degrades to a stated reason, never an exception. docs/bounds.md says where each figure comes from.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .pcitree import nvidia_gpu_bus_ids
from .rdma import parse_rate, parse_state
from .roots import read_int, read_text, sysfs
from .util import link_name, listdir, run_cmd

# /sys/class/net/IF/speed: ethtool's SPEED_UNKNOWN is -1; old kernels print it as an unsigned 16- or 32-bit number.
UNKNOWN_SPEEDS = (-1, 0, 65535, 4294967295)
# veth, tun/tap and a few others report a fixed figure whatever carries their traffic (drivers/net/veth.c: 10000).
VIRTUAL_DRIVER_NOTE = "the kernel reports a fixed speed for this virtual device, whatever carries its traffic"
TC_TIMEOUT_S = 2.0
MAX_TC_BYTES = 1 << 20
MAX_ITEMS = 256  # qdiscs, classes, bond slaves, GPUs: bound the work on a hostile tree or tc output
ARPHRD_LOOPBACK = 772

Runner = Callable[[Sequence[str], float], str]


def _net(name: str, *parts: str) -> str:
    return sysfs("class", "net", name, *parts)


def _read_attr(path: str) -> str:
    """One sysfs attribute, raising the read's OSError: its errno is the fact (EINVAL = link down)."""
    with open(path, "rb") as f:
        return f.read(64).decode("ascii", "strict").strip()


def read_speed(name: str) -> dict:
    """{"speed_mbps": int | None, "speed_unknown": reason | None} from /sys/class/net/IF/speed.

    A down link fails the read with EINVAL, a driver without ethtool support with EOPNOTSUPP; -1, 0, 65535 and
    4294967295 are the encodings of "unknown" kernels have used."""
    path = _net(name, "speed")
    try:
        text = _read_attr(path)
    except FileNotFoundError:
        return {"speed_mbps": None, "speed_unknown": "no speed attribute"}
    except OSError as e:
        if e.errno == errno.EINVAL:
            return {"speed_mbps": None, "speed_unknown": "link down (speed reads EINVAL)"}
        if e.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
            return {"speed_mbps": None, "speed_unknown": "the driver does not report a speed (EOPNOTSUPP)"}
        return {"speed_mbps": None, "speed_unknown": f"speed unreadable: {e.strerror or e}"}
    except (UnicodeDecodeError, ValueError):
        return {"speed_mbps": None, "speed_unknown": "speed is not text"}
    if not text:
        return {"speed_mbps": None, "speed_unknown": "speed reads empty"}
    try:
        value = int(text)
    except ValueError:
        return {"speed_mbps": None, "speed_unknown": f"speed reads {text[:20]!r}"}
    if value in UNKNOWN_SPEEDS or value < 0:
        return {"speed_mbps": None, "speed_unknown": f"the kernel says unknown ({value})"}
    return {"speed_mbps": value, "speed_unknown": None}


def _virtual_reason(name: str) -> Optional[str]:
    """Why this interface's speed is not a line rate (veth, tun/tap), or None for a real (or stacked) device."""
    if os.path.isdir(_net(name, "device")) or os.path.isdir(_net(name, "bonding")):
        return None
    if listdir(sysfs("class", "net", name), MAX_ITEMS) and any(
            n.startswith("lower_") for n in listdir(_net(name), MAX_ITEMS)):
        return None  # a VLAN or macvlan: its speed is its lower device's
    if os.path.exists(_net(name, "tun_flags")):
        return f"tun/tap: {VIRTUAL_DRIVER_NOTE}"
    ifindex, iflink = read_int(_net(name, "ifindex")), read_int(_net(name, "iflink"))
    if ifindex is not None and iflink is not None and ifindex != iflink:
        return f"veth (its peer is interface {iflink}): {VIRTUAL_DRIVER_NOTE}"
    return f"no device behind it: {VIRTUAL_DRIVER_NOTE}"


def read_bond(name: str) -> Optional[dict]:
    """A bond's mode and slaves with their speeds; None when `name` is not a bond."""
    b = _net(name, "bonding")
    if not os.path.isdir(b):
        return None
    slaves = (read_text(os.path.join(b, "slaves")) or "").split()[:MAX_ITEMS]
    active = read_text(os.path.join(b, "active_slave")) or None  # active-backup only
    out = []
    for s in slaves:
        if "/" in s or s in (".", ".."):
            continue
        state = read_text(_net(s, "bonding_slave", "state"))
        out.append({"name": s, **read_speed(s), "operstate": read_text(_net(s, "operstate")),
                    "state": state or None})
    return {"mode": (read_text(os.path.join(b, "mode")) or "").split(" ")[0] or None, "active_slave": active,
            "slaves": out}


def _lower(name: str) -> Optional[str]:
    lowers = [n[len("lower_"):] for n in listdir(_net(name), MAX_ITEMS) if n.startswith("lower_")]
    return lowers[0] if lowers else None


# ------------------------------------------------------------------------------------------------------- shapers
_TC_RATE = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)(i?)(bit|bps)$", re.IGNORECASE)
_TC_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_CLASS_LINE = re.compile(r"^class htb (\S+) (?:parent (\S+)|root)\b.*?\brate (\S+) ceil (\S+)")


def parse_tc_rate(text: str) -> Optional[float]:
    """A rate as tc prints it ("1Gbit", "200Mbit", "12500Kbps") -> bytes per second; None when not one."""
    m = _TC_RATE.match(text.strip())
    if not m:
        return None
    prefix = m.group(2).lower()
    scale = 1024 ** ("kmgt".index(prefix) + 1) if m.group(3) and prefix else _TC_UNITS[prefix]
    value = float(m.group(1)) * scale
    return value / 8 if m.group(4).lower() == "bit" else value


def parse_qdiscs(text: str) -> list:
    """`tc -j qdisc show dev IF` -> [{"kind", "handle", "root", "rate_bytes_per_s"?, "default_class"?}]."""
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("tc -j qdisc output is not a list")
    out = []
    for q in data[:MAX_ITEMS]:
        if not isinstance(q, dict) or not isinstance(q.get("kind"), str):
            continue
        opts = q.get("options") if isinstance(q.get("options"), dict) else {}
        item: dict[str, Any] = {"kind": q["kind"][:32], "handle": str(q.get("handle", ""))[:16],
                                "root": q.get("root") is True, "parent": str(q.get("parent", ""))[:16] or None}
        if q["kind"] == "tbf" and isinstance(opts.get("rate"), (int, float)) and opts["rate"] > 0:
            item["rate_bytes_per_s"] = float(opts["rate"])  # JSON gives bytes per second (the text form, bits)
        if q["kind"] == "htb":
            item["default_class"] = _htb_default(item["handle"], opts.get("default"))
        out.append(item)
    return out


def _htb_default(handle: str, default: Any) -> Optional[str]:
    """htb's `default` option (hex minor: "0x10" or 16) -> the class id "1:10"; None for 0 (unclassified = unshaped)."""
    try:
        minor = int(default, 16) if isinstance(default, str) else int(default)
    except (TypeError, ValueError):
        return None
    major = handle.split(":")[0] or "1"
    return f"{major}:{minor:x}" if minor else None


def parse_htb_classes(text: str) -> list:
    """`tc -j class show dev IF` -> [{"classid", "parent", "rate_bytes_per_s", "ceil_bytes_per_s"}].

    iproute2 6.1 prints htb classes as text even with -j (captured in tests/data/tc); a JSON list is read too."""
    out = []
    stripped = (text or "").strip()
    if stripped.startswith("["):
        for c in json.loads(stripped)[:MAX_ITEMS]:
            if isinstance(c, dict) and c.get("class") == "htb":
                opts = c.get("options") if isinstance(c.get("options"), dict) else c
                out.append({"classid": str(c.get("handle", ""))[:16], "parent": c.get("parent"),
                            "rate_bytes_per_s": _num(opts.get("rate")), "ceil_bytes_per_s": _num(opts.get("ceil"))})
        return out
    for line in stripped.splitlines()[:MAX_ITEMS]:
        m = _CLASS_LINE.match(line.strip())
        if m:
            out.append({"classid": m.group(1), "parent": m.group(2), "rate_bytes_per_s": parse_tc_rate(m.group(3)),
                        "ceil_bytes_per_s": parse_tc_rate(m.group(4))})
    return out


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _default_run(argv: Sequence[str], timeout_s: float) -> str:
    return run_cmd(argv, timeout_s)


_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")  # what the kernel accepts as an interface name (IFNAMSIZ - 1)
MAX_REDIRECTS = 4  # ifb devices followed from one interface's ingress


def parse_ingress_filters(text: str) -> dict:
    """`tc -j filter show dev IF ingress` -> what limits what IF receives: {"police_bytes_per_s": [...],
    "police_rate_unknown": bool, "redirect_devs": [...]} (mirred redirects to another device, an ifb whose egress
    is shaped: tests/data/tc/ingress_ifb_100mbit.filter.json).

    A `police` action's rate is read when tc prints it in JSON (bytes per second, as tbf's; a string rate as the text
    form): iproute2 5.14-6.x print it in the text form only, so a policer without a rate is flagged, not guessed."""
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("tc -j filter output is not a list")
    police: list = []
    unknown, devs = False, []
    for f in data[:MAX_ITEMS]:
        opts = f.get("options") if isinstance(f, dict) and isinstance(f.get("options"), dict) else {}
        acts = opts.get("actions") if isinstance(opts.get("actions"), list) else []
        for a in acts[:MAX_ITEMS]:
            if not isinstance(a, dict):
                continue
            if a.get("kind") == "police":
                rate = a.get("rate")
                bps = _num(rate) if not isinstance(rate, str) else parse_tc_rate(rate)
                if bps:
                    police.append(bps)
                else:
                    unknown = True
            elif a.get("kind") == "mirred" and a.get("mirred_action") == "redirect":
                dev = a.get("to_dev")
                if isinstance(dev, str) and _IFNAME.match(dev) and dev not in devs and dev not in (".", ".."):
                    devs.append(dev)
    return {"police_bytes_per_s": police, "police_rate_unknown": unknown, "redirect_devs": devs[:MAX_REDIRECTS]}


def read_ingress(name: str, run: Optional[Runner] = None) -> dict:
    """What limits IF's ingress (it has an ingress or clsact qdisc): policers, and the egress shaper of each device
    its ingress is redirected to (ifb). {"unavailable": reason} when tc fails."""
    run = run or _default_run
    try:
        parsed = parse_ingress_filters(run(["tc", "-j", "filter", "show", "dev", name, "ingress"],
                                           TC_TIMEOUT_S)[:MAX_TC_BYTES])
    except (RuntimeError, ValueError) as e:
        return {"unavailable": f"tc filter: {e}"}
    redirects = [{"dev": d, "shaper": read_shaper(d, run, ingress=False)} for d in parsed.pop("redirect_devs")]
    return {**parsed, "redirects": redirects}


def read_shaper(name: str, run: Optional[Runner] = None, ingress: bool = True) -> dict:
    """The root qdisc of IF as `tc` shows it (this network namespace): {"qdiscs": [...], "classes": [...]} or
    {"unavailable": reason}. Only tbf and htb limit a rate; the rest (noqueue, fq_codel, mq...) do not. With an
    ingress (or clsact) qdisc, `ingress` holds what limits what IF receives (read_ingress)."""
    run = run or _default_run
    try:
        qdiscs = parse_qdiscs(run(["tc", "-j", "qdisc", "show", "dev", name], TC_TIMEOUT_S)[:MAX_TC_BYTES])
    except (RuntimeError, ValueError) as e:
        return {"unavailable": f"tc qdisc: {e}"}
    out: dict[str, Any] = {"qdiscs": qdiscs}
    if any(q["kind"] == "htb" for q in qdiscs):
        try:
            out["classes"] = parse_htb_classes(run(["tc", "-j", "class", "show", "dev", name],
                                                   TC_TIMEOUT_S)[:MAX_TC_BYTES])
        except (RuntimeError, ValueError) as e:
            out["classes_unavailable"] = f"tc class: {e}"
    if ingress and any(q["kind"] in ("ingress", "clsact") for q in qdiscs):
        out["ingress"] = read_ingress(name, run)
    return out


def read_netdev(name: str, run: Optional[Runner] = None, shaper: bool = True) -> dict:
    """One interface's link: speed (or why unknown), virtual or not, bond slaves, lower device, shaper."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"bad interface name {name!r}")
    d: dict[str, Any] = {"name": name, **read_speed(name)}
    d["virtual"] = _virtual_reason(name)
    d["driver"] = link_name(_net(name, "device", "driver"))
    d["operstate"] = read_text(_net(name, "operstate"))
    bond = read_bond(name)
    if bond is not None:
        d["bond"] = bond
    lower = _lower(name)
    if lower:
        d["lower"] = lower
    if shaper:
        d["shaper"] = read_shaper(name, run)
        if "ingress" in d["shaper"]:
            d["ingress"] = d["shaper"].pop("ingress")  # what limits what it receives (nccl/bounds.ingress_limit)
    return d


# ---------------------------------------------------------------------------------------------------- RDMA ports
def read_ib_ports() -> list:
    """Every RDMA port: device, port, rate (Gb/s), state, physical state, link layer and its netdevs."""
    out = []
    for dev in listdir(sysfs("class", "infiniband"), MAX_ITEMS):
        if dev.startswith("."):
            continue
        for p in listdir(sysfs("class", "infiniband", dev, "ports"), MAX_ITEMS):
            if not p.isdigit():
                continue
            base = sysfs("class", "infiniband", dev, "ports", p)
            rate = read_text(os.path.join(base, "rate"))
            _, state = parse_state(read_text(os.path.join(base, "state")))
            _, phys = parse_state(read_text(os.path.join(base, "phys_state")))
            netdevs = _ib_netdevs(dev, int(p))
            out.append({"device": dev, "port": int(p), "rate": rate or None, "rate_gbps": parse_rate(rate),
                        "state": state, "phys_state": phys,
                        "link_layer": read_text(os.path.join(base, "link_layer")) or None, "netdevs": netdevs})
    return out


def _ib_netdevs(dev: str, port: int) -> list:
    """The netdev behind an RDMA port (RoCE: its Ethernet interface; IB: IPoIB), from the GID table or device/net."""
    base = sysfs("class", "infiniband", dev, "ports", str(port), "gid_attrs", "ndevs")
    names = []
    for i in listdir(base, 64):
        n = read_text(os.path.join(base, i))
        if n and "/" not in n and n not in names:
            names.append(n)
    if names:
        return names
    net = sysfs("class", "infiniband", dev, "device", "net")
    cands = listdir(net, 16)
    if len(cands) > 1:
        by_port = [n for n in cands if read_int(os.path.join(net, n, "dev_port")) == port - 1]
        return by_port or cands
    return cands


# -------------------------------------------------------------------------------------------------------- PCIe
_GTS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")


def parse_link_speed(text: Optional[str]) -> Optional[float]:
    """current_link_speed in both kernel formats ("16.0 GT/s PCIe", older "16 GT/s") -> 16.0 GT/s."""
    m = _GTS.match(text or "")
    return float(m.group(1)) if m else None


def read_pcie_gpus() -> list:
    """NVIDIA GPUs on the PCI bus (vendor 0x10de, display class): bus id, current/max link speed (GT/s) and width."""
    base = sysfs("bus", "pci", "devices")
    out = []
    for bdf in nvidia_gpu_bus_ids()[:MAX_ITEMS]:
        d = os.path.join(base, bdf)
        out.append({"bus_id": bdf,
                    "gts": parse_link_speed(read_text(os.path.join(d, "current_link_speed"))),
                    "width": read_int(os.path.join(d, "current_link_width")),
                    "max_gts": parse_link_speed(read_text(os.path.join(d, "max_link_speed"))),
                    "max_width": read_int(os.path.join(d, "max_link_width"))})
    return out


# ------------------------------------------------------------------------------------------------------ NVLink
def _import_nvml() -> Any:
    import pynvml  # the optional extra `nvidia-ml-py` (pip install 'ncclcheck[nvml]')

    return pynvml


def read_nvlink(nvml: Any = None) -> dict:
    """Per GPU: the NVLink link count (field NVML_FI_DEV_NVLINK_LINK_COUNT), each link's state and speed (field
    NVML_FI_DEV_NVLINK_GET_SPEED, MB/s, the link as scope id). Never loops to NVML_NVLINK_MAX_LINKS and never reads
    nvmlDeviceGetNvLinkVersion as a generation: A100 returns 5 and H100 has returned 7."""
    try:
        nv = nvml if nvml is not None else _import_nvml()
    except ImportError:
        return {"unavailable": "nvidia-ml-py is not installed (pip install 'ncclcheck[nvml]')"}
    try:
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...
        return {"unavailable": f"NVML: {e}"}
    try:
        gpus = []
        for i in range(min(int(nv.nvmlDeviceGetCount()), MAX_ITEMS)):
            gpus.append(_nvlink_gpu(nv, i))
        return {"gpus": gpus}
    except Exception as e:  # noqa: BLE001
        return {"unavailable": f"NVML: {e}"}
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001,S110 - nothing to do about a failed shutdown
            pass


def _field(nv: Any, handle: Any, field_id: int, scope: Optional[int] = None) -> Optional[int]:
    vals = nv.nvmlDeviceGetFieldValues(handle, [field_id if scope is None else (field_id, scope)])
    v = vals[0]
    if getattr(v, "nvmlReturn", 1) != getattr(nv, "NVML_SUCCESS", 0):
        return None
    return int(v.value.uiVal)


def _nvlink_gpu(nv: Any, i: int) -> dict:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    g: dict[str, Any] = {"index": i}
    try:
        bus = nv.nvmlDeviceGetPciInfo(h).busId
        g["bus_id"] = bus.decode() if isinstance(bus, bytes) else str(bus)
    except Exception:  # noqa: BLE001
        g["bus_id"] = None
    try:
        name = nv.nvmlDeviceGetName(h)
        g["name"] = (name.decode() if isinstance(name, bytes) else str(name))[:96]
    except Exception:  # noqa: BLE001
        g["name"] = None
    count = _field(nv, h, nv.NVML_FI_DEV_NVLINK_LINK_COUNT)
    g["link_count"] = count
    links = []
    for link in range(min(count or 0, MAX_ITEMS)):
        try:
            up = nv.nvmlDeviceGetNvLinkState(h, link) == nv.NVML_FEATURE_ENABLED
        except Exception:  # noqa: BLE001 - NVML_ERROR_NOT_SUPPORTED for an unused link
            up = False
        speed = _field(nv, h, nv.NVML_FI_DEV_NVLINK_GET_SPEED, link) if up else None
        links.append({"link": link, "up": up, "speed_mbytes_per_s": speed})
    g["links"] = links
    return g


# ---------------------------------------------------------------------------------------------------- the group
ENV_NAMES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET",
             "NCCL_ALGO")
RESOLVE_TIMEOUT_S = 2.0


def default_interface(addrs: Optional[dict] = None, resolve: Optional[Callable[[str], list]] = None) -> Optional[str]:
    """The interface owning the address this host's name resolves to: what gloo binds to without
    GLOO_SOCKET_IFNAME (torch's default device), and what peers reach us on. None when it does not resolve here."""
    from . import hostname
    from .net import resolve_host
    from .util import bounded

    try:
        ips = (resolve or (lambda h: bounded(lambda: resolve_host(h), RESOLVE_TIMEOUT_S)))(hostname())
    except Exception:  # noqa: BLE001 - unresolvable or slow resolver: no default interface
        return None
    if addrs is None:
        import psutil

        addrs = psutil.net_if_addrs()
    for ip in ips or []:
        for name, entries in addrs.items():
            if any((getattr(a, "address", "") or "").split("%")[0] == ip for a in entries):
                return name
    return None


def store_host(store: Any) -> Optional[str]:
    """The address a rank reached its world's store at (JsonStore -> TCPStore, or PrefixStore -> TCPStore), or
    None: the peer whose route names this node's interface when its host name does not resolve."""
    obj = store
    for _ in range(4):
        host = getattr(obj, "host", None) if obj is not None else None
        if isinstance(host, str) and host:
            return host[:256]
        obj = getattr(obj, "raw", None) or getattr(obj, "underlying_store", None)
    return None


def collect_for_job(run: Optional[Runner] = None, nvml: Any = None, with_gpus: bool = True,
                    peer: Optional[str] = None) -> dict:
    """What bench and links send from each node (local rank 0) so node 0 can bound every figure: every interface
    but loopback, the one the host name resolves to (else the one the kernel routes to `peer`, the world's store
    address, by), RDMA ports, GPU links, and the NCCL_/GLOO_ variables that choose among them."""
    names = [n for n in listdir(sysfs("class", "net"), 64) if n != "lo" and not n.startswith(".")]
    out = collect(names[:16], run=run, nvml=nvml, with_gpus=with_gpus)
    out["default_interface"] = default_interface()
    if out["default_interface"] is None and peer and peer not in ("0.0.0.0", "::"):
        from .net import route_to

        route = route_to(peer, resolver=lambda h, t: [(socket.AF_INET6 if ":" in h else socket.AF_INET, h)])
        out["default_interface"] = route.get("interface")
        out["default_interface_how"] = f"the route to {peer}"
    out["loopback_interfaces"] = [n for n in listdir(sysfs("class", "net"), 64)
                                  if read_int(_net(n, "type")) == ARPHRD_LOOPBACK]
    out["env"] = {k: os.environ[k][:256] for k in ENV_NAMES if k in os.environ}
    return out


def collect(interfaces: Sequence[str], run: Optional[Runner] = None, nvml: Any = None,
            with_gpus: bool = True) -> dict:
    """This node's links: the named interfaces (those the transport will use), RDMA ports, and, on a GPU node,
    PCIe and NVLink. Each part that cannot be read says why."""
    out: dict[str, Any] = {"netdevs": [], "ib_ports": [], "pcie_gpus": [], "nvlink": None}
    for name in list(dict.fromkeys(interfaces))[:16]:
        try:
            out["netdevs"].append(read_netdev(name, run))
        except ValueError:
            continue
    out["ib_ports"] = read_ib_ports()
    if with_gpus:
        out["pcie_gpus"] = read_pcie_gpus()
        out["nvlink"] = read_nvlink(nvml) if out["pcie_gpus"] or nvml is not None else {
            "unavailable": "no NVIDIA GPU on the PCI bus"}
    return out
