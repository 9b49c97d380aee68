"""Host facts: name resolution (bounded), /dev/shm, memlock, ephemeral port range, CPU/memory, OS, container."""

from __future__ import annotations

import ipaddress
import os
import platform
import re
import resource
import socket
import threading
import time
from typing import Any, Callable, Optional

from ..units import is_decimal
from .roots import procfs, procfs_root, read_text

RESOLVE_TIMEOUT_S = 2.0
_CONTAINER_HINTS = ("docker", "kubepods", "containerd", "libpod", "podman", "lxc", "crio")


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


def _addresses(getaddrinfo: Callable, name: str) -> list:
    infos = getaddrinfo(name, None, 0, socket.SOCK_STREAM)
    out = []
    for fam, _t, _p, _c, sa in infos:
        if fam in (socket.AF_INET, socket.AF_INET6) and sa[0] not in out:
            out.append(sa[0])
    return out


def resolve(hostname: str, getfqdn: Optional[Callable] = None, getaddrinfo: Optional[Callable] = None,
            timeout_s: float = RESOLVE_TIMEOUT_S) -> dict:
    """fqdn and the addresses of both names, all within timeout_s in total.

    getfqdn() and getaddrinfo() block for the resolver's whole retry cycle on broken DNS and take no timeout, so
    they run in daemon threads (two chains in parallel) and whatever is late is reported as timed out.
    """
    getfqdn = getfqdn or socket.getfqdn
    getaddrinfo = getaddrinfo or socket.getaddrinfo
    res: dict = {}

    def by_name() -> None:
        try:
            res["host"] = _addresses(getaddrinfo, hostname)
        except Exception as e:
            res["host_error"] = f"{hostname}: {e}"

    def by_fqdn() -> None:
        try:
            res["fqdn"] = getfqdn()
        except Exception as e:
            res["fqdn_error"] = f"getfqdn: {e}"
            return
        try:
            res["fqdn_addrs"] = _addresses(getaddrinfo, res["fqdn"])
        except Exception as e:
            res["fqdn_addrs_error"] = f"{res['fqdn']}: {e}"

    threads = [threading.Thread(target=f, daemon=True, name="ncclcheck-resolve") for f in (by_name, by_fqdn)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    snap = dict(res)  # late threads may still write; read one snapshot
    errors = [snap[k] for k in ("host_error", "fqdn_error", "fqdn_addrs_error") if k in snap]
    if "host" not in snap and "host_error" not in snap:
        errors.append(f"{hostname}: timed out after {timeout_s:g}s")
    if "fqdn" not in snap and "fqdn_error" not in snap:
        errors.append(f"getfqdn: timed out after {timeout_s:g}s")
    elif "fqdn" in snap and "fqdn_addrs" not in snap and "fqdn_addrs_error" not in snap:
        errors.append(f"{snap['fqdn']}: timed out after {timeout_s:g}s")
    host_addrs = snap.get("host", [])
    fqdn_addrs = snap.get("fqdn_addrs", [])
    return {
        "fqdn": snap.get("fqdn"),
        "resolves_to": host_addrs,
        "fqdn_resolves_to": fqdn_addrs,
        "resolve_error": "; ".join(errors) or None,
        # Gloo binds to what the hostname resolves to: that is the address that must not be loopback.
        "loopback": bool(host_addrs) and all(_is_loopback(a) for a in host_addrs),
        # c10d rendezvous publishes getfqdn() to its peers
        "fqdn_loopback": bool(fqdn_addrs) and all(_is_loopback(a) for a in fqdn_addrs),
    }


_SIZE_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _parse_size_option(options: str) -> Optional[int]:
    for opt in options.split(","):
        if opt.startswith("size="):
            val = opt[5:].strip().lower()
            num, suffix = (val[:-1], val[-1]) if val and val[-1] in "kmgt" else (val, "")
            if is_decimal(num):
                return int(num) * _SIZE_SUFFIX[suffix]
    return None


def shm(path: str = "/dev/shm") -> dict:
    """Size of /dev/shm from <procfs>/mounts (so fake trees control it); statvfs only when procfs has no line."""
    total = None
    found = False
    for line in (read_text(procfs("mounts"), limit=1 << 20) or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == path:
            found = True
            total = _parse_size_option(fields[3])  # later mounts shadow earlier ones: keep the last
    try:
        st = os.statvfs(path)
        vfs_total, vfs_free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        vfs_total = vfs_free = None
    if not found or total is None:
        if vfs_total is None:
            return {"unavailable": f"no {path} mount in {procfs('mounts')} and statvfs failed"}
        return {"path": path, "total_bytes": vfs_total, "free_bytes": vfs_free}
    # free space only when statvfs describes the same filesystem the mounts line does
    return {"path": path, "total_bytes": total, "free_bytes": vfs_free if vfs_total == total else None}


def memlock(getrlimit: Optional[Callable] = None) -> dict:
    soft, hard = (getrlimit or resource.getrlimit)(resource.RLIMIT_MEMLOCK)

    def b(v: int) -> Optional[int]:
        return None if v == resource.RLIM_INFINITY or v < 0 else int(v)

    return {"soft": b(soft), "hard": b(hard)}


def nofile(getrlimit: Optional[Callable] = None) -> dict:
    """RLIMIT_NOFILE (soft, hard): node 0 holds one store connection per node, so its soft limit bounds the world."""
    soft, hard = (getrlimit or resource.getrlimit)(resource.RLIMIT_NOFILE)

    def b(v: int) -> Optional[int]:
        return None if v == resource.RLIM_INFINITY or v < 0 else int(v)

    return {"soft": b(soft), "hard": b(hard)}


def port_range() -> Optional[list]:
    parts = (read_text(procfs("sys", "net", "ipv4", "ip_local_port_range")) or "").split()
    if len(parts) == 2 and all(is_decimal(p) for p in parts):
        return [int(parts[0]), int(parts[1])]
    return None


def mem_total_bytes() -> Optional[int]:
    for line in (read_text(procfs("meminfo")) or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and is_decimal(parts[1]):
                return int(parts[1]) * 1024  # the kernel's "kB" is KiB
    if procfs_root() != "/proc":
        return None  # a fake or host procfs without meminfo: do not mix in this machine's memory
    import psutil

    return int(psutil.virtual_memory().total)


def mem_available_bytes() -> Optional[int]:
    """MemAvailable: what the ranks of a bench on this host can allocate without swapping."""
    for line in (read_text(procfs("meminfo")) or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and is_decimal(parts[1]):
                return int(parts[1]) * 1024
    if procfs_root() != "/proc":
        return None
    import psutil

    return int(psutil.virtual_memory().available)


def os_pretty_name(path: str = "/etc/os-release") -> Optional[str]:
    for line in (read_text(path) or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"').strip("'") or None
    return None


def container_hint(root: str = "/") -> Optional[str]:
    """Why we think we are in a container, or None."""
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if os.path.exists(os.path.join(root, marker.lstrip("/"))):
            return marker
    cgroup = read_text(procfs("1", "cgroup")) or ""
    for hint in _CONTAINER_HINTS:
        if hint in cgroup:
            return f"{procfs('1', 'cgroup')} mentions {hint}"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "KUBERNETES_SERVICE_HOST is set"
    return None


def hosts_lines(hostname: str, path: str = "/etc/hosts") -> list:
    """The /etc/hosts lines that name `hostname` (or its short form), in file order: a fix can quote them."""
    short = hostname.split(".")[0]
    out = []
    for line in (read_text(path) or "").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and any(w in (hostname, short) for w in words[1:]):
            out.append(line.strip())
    return out


_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_NETNS = re.compile(r"^net:\[(\d{1,20})\]$")


def boot_id() -> Optional[str]:
    """This boot's random id (<procfs>/sys/kernel/random/boot_id), lower case; None when unreadable or malformed.
    Counters kept since the driver loaded reset with it: a delta across two boot ids means nothing."""
    boot = (read_text(procfs("sys", "kernel", "random", "boot_id")) or "").strip().lower()
    return boot if _BOOT_ID.match(boot) else None


def kernel_release() -> Optional[str]:
    """The running kernel's release (<procfs>/sys/kernel/osrelease, else uname), e.g. "6.8.0-1064-azure"."""
    return read_text(procfs("sys", "kernel", "osrelease")) or platform.release() or None


def network_identity() -> dict:
    """Which running kernel and which network namespace this process is in: {"boot_id", "netns", "key"}.

    Nodes with the same key share one network stack: an address local to one is local to the other and loopback
    connects them. The boot id (random per boot, <procfs>/sys/kernel/random/boot_id) tells machines apart and the
    namespace inode (readlink <procfs>/self/ns/net) tells containers and netns lab hosts on one machine apart. Not
    the hostname (cloned images and clusters of VMs all say "vm" or "localhost") nor /etc/machine-id (copied with
    the image), nor the addresses (docker0 is 172.17.0.1 everywhere). A claim only: the mesh probe proves it
    (preflight/probe.py connects to the peer on an address local to the prober and must reach the peer)."""
    boot = boot_id() or (read_text(procfs("sys", "kernel", "random", "boot_id")) or "").strip().lower()
    try:
        ns = os.readlink(procfs("self", "ns", "net"))
    except OSError as e:
        return {"unavailable": f"{procfs('self', 'ns', 'net')}: {e.strerror or e}"}
    m = _NETNS.match(ns)
    if not _BOOT_ID.match(boot) or not m:
        return {"unavailable": f"boot id {boot[:40]!r} / network namespace {ns[:40]!r} not in the kernel's format"}
    return {"boot_id": boot, "netns": ns, "key": f"{boot}/{m.group(1)}"}


def collect(gethostname: Optional[Callable] = None, getfqdn: Optional[Callable] = None,
            getaddrinfo: Optional[Callable] = None, getrlimit: Optional[Callable] = None) -> dict:
    hostname = (gethostname or socket.gethostname)()
    facts: dict[str, Any] = {"hostname": hostname}
    facts.update(resolve(hostname, getfqdn, getaddrinfo))
    facts["hosts_lines"] = hosts_lines(hostname)
    facts["network_identity"] = network_identity()
    try:
        facts["shm"] = shm()
    except Exception as e:
        facts["shm"] = {"unavailable": str(e)}
    try:
        facts["memlock"] = memlock(getrlimit)
    except Exception as e:
        facts["memlock"] = {"unavailable": str(e)}
    try:
        facts["nofile"] = nofile(getrlimit)
    except Exception as e:
        facts["nofile"] = {"unavailable": str(e)}
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    kernel = kernel_release()
    hint = container_hint()
    facts.update({
        "port_range": port_range(), "cpu_count": os.cpu_count(), "cpu_affinity_count": affinity,
        "mem_total_bytes": mem_total_bytes(), "kernel": kernel, "os": os_pretty_name(),
        "in_container": hint is not None, "container_hint": hint,
    })
    return facts


def collect_local(gethostname: Optional[Callable] = None, getrlimit: Optional[Callable] = None) -> dict:
    """The node-local part of collect(): hostname, /dev/shm, memlock; no resolver call (health runs under Slurm's
    time limit, and a resolver that does not answer can take longer than that)."""
    facts: dict[str, Any] = {"hostname": (gethostname or socket.gethostname)()}
    for name, fn in (("shm", shm), ("memlock", lambda: memlock(getrlimit))):
        try:
            facts[name] = fn()
        except Exception as e:
            facts[name] = {"unavailable": str(e)}
    return facts
