"""Builders of node facts dicts (docs/facts.md shape) for checks and recommendation tests, named by scenario."""

from __future__ import annotations

import copy


def iface(name, kind="physical", ipv4=None, running=True, up=True, mtu=1500, speed=None):
    return {"name": name, "kind": kind, "up": up, "running": running, "operstate": "up" if running else "down",
            "mtu": mtu, "speed_mbps": speed, "type": 772 if kind == "loopback" else 1, "mac": None,
            "numa_node": None, "driver": None,
            "ipv4": [{"address": a, "prefixlen": 24} for a in ([ipv4] if isinstance(ipv4, str) else ipv4 or [])],
            "ipv6": []}


def port(n, state="ACTIVE", phys="LinkUp", rate=400.0, link_layer="InfiniBand", gid=None):
    code = {"ACTIVE": 4, "DOWN": 1, "INIT": 2}.get(state, 0)
    return {"port": n, "state": state, "state_code": code, "phys_state": phys, "phys_state_code": 5,
            "rate": f"{rate:g} Gb/sec (4X NDR)", "rate_gbps": rate, "link_layer": link_layer, "netdevs": [],
            "roce_v2_gid_index": gid, "gids": []}


BASE = {
    "collected_at": 0.0,
    "host": {"hostname": "node1", "fqdn": "node1", "resolves_to": ["10.0.0.1"], "fqdn_resolves_to": ["10.0.0.1"],
             "resolve_error": None, "loopback": False,
             "shm": {"path": "/dev/shm", "total_bytes": 16 << 30, "free_bytes": 16 << 30},
             "memlock": {"soft": None, "hard": None}, "port_range": [32768, 60999], "cpu_count": 8,
             "mem_total_bytes": 64 << 30, "kernel": "6.8", "os": "test", "in_container": False},
    "interfaces": [iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4="10.0.0.1", speed=100000),
                   iface("docker0", "docker", "172.17.0.1", running=False)],
    "route": None,
    "rdma": {"devices": []},
    "gpu": {"count": 0, "source": "none", "reason": "no NVIDIA driver", "devices": [], "visible_devices": None,
            "driver": None, "cuda": None, "nccl": None, "topology": None},
    "versions": {"python": "3.11.7", "torch": "2.13.0", "cuda": None, "nccl": None, "driver": None,
                 "ncclcheck": "0.1.0", "platform": "Linux"},
    "packages": {"hash": "sha256:x", "count": 1, "items": {"torch": "2.13.0"}},
    "code": {"path": "/w", "kind": "tree", "hash": "sha256:c", "git_head": None, "dirty": None, "files": 1,
             "bytes": 1, "reason": None},
    "paths": [],
    "env": {"vars": {}, "redacted": []},
}


def facts(**changes):
    """BASE with top-level groups replaced; `env=` takes a plain {name: value} dict."""
    f = copy.deepcopy(BASE)
    env = changes.pop("env", None)
    if env is not None:
        f["env"] = {"vars": dict(env), "redacted": []}
    for k, v in changes.items():
        if k in f and isinstance(f[k], dict) and isinstance(v, dict) and "unavailable" not in v and k != "rdma":
            f[k] = {**f[k], **v}
        else:
            f[k] = v
    return f


def ib_one_active_one_down():
    return {"devices": [
        {"name": "mlx5_0", "fw_ver": "28.1", "numa_node": 0, "node_guid": None, "ports": [port(1)]},
        {"name": "mlx5_1", "fw_ver": "28.1", "numa_node": 0, "node_guid": None,
         "ports": [port(1, state="DOWN", phys="Disabled")]},
    ]}


def roce_v2_at_3():
    return {"devices": [{"name": "mlx5_0", "fw_ver": "28.1", "numa_node": 0, "node_guid": None,
                         "ports": [port(1, rate=200.0, link_layer="Ethernet", gid=3)]}]}
