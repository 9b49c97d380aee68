"""What the log says NCCL chose on each host, compared across hosts as an expert compares it: the NCCL version each
host printed ("NCCL version 2.18.1+cuda12.1") and the interfaces it bootstrapped and sent over ("Bootstrap : Using
br-3f2a:172.18.0.1<0>", "NET/Socket : Using [0]eth0:...").

Two findings read these facts, each only beside a failure it explains (a healthy job may mix nothing and use lo):
- hosts that printed different NCCL versions, beside a failure of the connection between ranks (an address NCCL
  could not parse, a bootstrap message of another size, a socket closed mid-init): the versions are the cause, the
  failure their consequence (NCCL's wire format is not kept across versions);
- hosts whose NCCL chose different networks (IB on one, sockets or a plugin on another), beside the same failures;
- NCCL bootstrapping or sending over a container bridge or virtual interface (docker0, br-*, veth*, virbr*, cni*,
  flannel*, cali*), beside a connection failure: another host cannot reach that address.
Plain dicts in, cause dicts out; the words are render/words.py's.
"""

from __future__ import annotations

import re
from typing import Optional

from ..nccl import failures
from ..render import words

# the failures two NCCL versions (or an unreachable interface) explain: how ranks reach and talk to each other
CONNECTION = ("socket_family", "no_socket_interface", "bootstrap_truncated", "transport_mismatch", "nccl_warn",
              "nccl_warn_socket", "nccl_warn_net", "unhandled_system_error", "nccl_error", "peer_closed",
              "init_timeout", "connection_refused", "no_route", "proxy_failed", "watchdog_timeout", "comm_aborted",
              "job_failed")
REACH = ("no_route", "connection_refused", "init_timeout", "peer_closed", "nccl_warn_socket", "nccl_warn",
         "unhandled_system_error", "watchdog_timeout", "job_failed", "proxy_failed", "socket_family")
VIRTUAL = re.compile(r"^(?:docker\d{0,3}|br-[0-9a-f]{1,16}|veth\w{0,16}|virbr\d{0,3}|cni\d{0,3}|flannel\S{0,16}|"
                     r"cali\w{0,16}|lxcbr\d{0,3}|podman\d{0,3}|kube-bridge|weave|vxlan\S{0,12})$")
# a failure that names no address it could not reach: two networks are its cause (an unreachable address is its own)
MIXED = tuple(k for k in CONNECTION if k not in ("no_route", "connection_refused", "no_socket_interface",
                                                  "socket_family"))
MAX_HOSTS = 4096


def facts(inp) -> dict:
    """host -> {"versions": [...], "interfaces": [...]} from every log's NCCL lines (a source of no rank too)."""
    out: dict = {}
    for log in inp.logs:
        for host, p in log.nccl_by_host().items():
            if host not in out and len(out) >= MAX_HOSTS:
                continue
            me = out.setdefault(host, {"versions": [], "interfaces": [], "networks": []})
            net = p.get("network")
            if net and net not in me["networks"]:
                me["networks"].append(net)
            if p.get("version") and p["version"] not in me["versions"]:
                me["versions"].append(p["version"])
            for i in p.get("bootstrap", []) + p.get("socket_interfaces", []):
                if i["ifname"] not in me["interfaces"]:
                    me["interfaces"].append(i["ifname"])
    return out


def _differ(hosts: dict, key: str, what: str, cls_id: str, explained: list) -> Optional[dict]:
    """The hosts grouped by one fact NCCL printed (`key`: its version, the network it chose), a cause of class
    `cls_id` when they hold two values or more. A host that printed two values (it switched networks between
    communicators) says nothing here."""
    by_value: dict = {}
    for h, f in hosts.items():
        if len(f[key]) == 1:
            by_value.setdefault(f[key][0], []).append(h)
    if len(by_value) < 2:
        return None
    said = "; ".join(f"{v} on {', '.join(hs[:4])}{' and more' if len(hs) > 4 else ''}"
                     for v, hs in sorted(by_value.items()))
    return _root(cls_id, words.hosts_differ(what, said, explained[0]["text"]), explained)


def _root(cls_id: str, text: str, explained: list, **more) -> dict:
    """The cause the inventory names, in the shape of a log cause, its source and line those of the first failure it
    explains."""
    cls = failures.BY_ID[cls_id]
    return {"kind": cls.id, "cause": True, "pg": None, "seq": None, "ranks": [], **more, "text": text,
            "fix": cls.fix, "source": explained[0].get("source"), "line": explained[0].get("line", "")}


def _version_cause(hosts: dict, explained: list) -> Optional[dict]:
    return _differ(hosts, "versions", "NCCL version", "version_mismatch", explained)


def _network_cause(hosts: dict, explained: list) -> Optional[dict]:
    """Hosts whose NCCL chose different networks ("Using network IB" on one, "Socket" or a plugin on another): their
    ranks cannot connect, whatever the failure line says."""
    return _differ(hosts, "networks", "network", "transport_mismatch", explained)


def _bridge_cause(hosts: dict, explained: list) -> Optional[dict]:
    used = {h: [i for i in f["interfaces"] if VIRTUAL.match(i)] for h, f in hosts.items()}
    used = {h: i for h, i in used.items() if i}
    if not used:
        return None
    said = "; ".join(f"{h}: {', '.join(i[:6])}" for h, i in list(used.items())[:4])
    return _root("virtual_interface", words.virtual_interface(said, explained[0]["text"]), explained,
                 host=next(iter(used)))


def causes(found: list, inp) -> list:
    """The log's causes with what the hosts' inventory explains put first, the failures it explains demoted to its
    consequences; `found` as it is when the inventory explains nothing."""
    hosts = facts(inp)
    if len(hosts) < 1:
        return found
    strong = [c for c in found if c["cause"] and c["kind"] not in CONNECTION]
    if strong:  # a cause of another kind (a GPU, memory, a rank's own error): the inventory is not why
        return found
    for kinds, make in ((CONNECTION, _version_cause), (MIXED, _network_cause), (REACH, _bridge_cause)):
        explained = [c for c in found if c["kind"] in kinds]
        if not explained:
            continue
        root = make(hosts, explained)
        if root is not None:
            return [root] + [dict(c, cause=False) if c in explained else c for c in found]
    return found
