"""Whole-node preflight on fake sysfs/procfs trees: facts -> checks -> exact recommended values, as a user sees them."""

from __future__ import annotations

import socket

import psutil
import pytest

from ncclcheck.api import run_preflight
from ncclcheck.config import Config
from ncclcheck.model import Status
from tests.fakesys import FakeSys, container_shm_64mib, docker0_decoy, ib_port_down, no_rdma, roce_gid_index_3


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fake node with eth0 + docker0 + a host-side veth + lo; psutil answers from the fake tree."""
    fs = docker0_decoy(FakeSys(tmp_path, monkeypatch))
    fs.port_range(32768, 60999)
    monkeypatch.setattr(psutil, "net_if_addrs", fs.addrs)
    monkeypatch.setattr(psutil, "net_if_stats", fs.stats)
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX"):
        monkeypatch.delenv(var, raising=False)
    return fs


def preflight(**kw):
    rep = run_preflight(Config("preflight", code_path=None, **kw))
    return rep, {c.id: c for c in rep.checks}, {r.name: r.value for r in rep.recommendations}


def statuses(rep, cid):
    return {c.status for c in rep.checks if c.id == cid}


def test_eth0_docker0_veth_lo_recommends_eth0_exactly(node):
    no_rdma(node)
    rep, checks, recs = preflight()
    assert recs["NCCL_SOCKET_IFNAME"] == "=eth0" and recs["GLOO_SOCKET_IFNAME"] == "eth0"
    kinds = {i["name"]: i["kind"] for i in rep.nodes[0].facts["interfaces"]}
    assert kinds == {"eth0": "physical", "docker0": "docker", "vethabc123": "veth", "lo": "loopback"}
    assert checks["ib.devices"].status is Status.SKIP
    assert "NCCL_IB_HCA" not in recs and "NCCL_IB_DISABLE" not in recs
    assert rep.exit_code == 0


def test_ib_one_active_one_down(node):
    ib_port_down(node)
    rep, _, recs = preflight()
    assert recs["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert statuses(rep, "ib.devices") == {Status.WARN}
    assert "NCCL_SOCKET_NTHREADS" not in recs  # IB carries the traffic, not sockets


def test_roce_gid_index_3(node):
    roce_gid_index_3(node)
    rep, _, recs = preflight()
    assert recs["NCCL_IB_HCA"] == "=mlx5_0:1"
    port = rep.nodes[0].facts["rdma"]["devices"][0]["ports"][0]
    assert port["roce_v2_gid_index"] == 3 and port["link_layer"] == "Ethernet"
    # No NCCL loaded on a CPU node: the version is unknown, so no GID index is recommended (NCCL >= 2.21 picks it).
    assert "NCCL_IB_GID_INDEX" not in recs


def test_container_shm_64mib_warns_with_fix(node):
    container_shm_64mib(node)
    rep, checks, _ = preflight()
    assert checks["host.shm"].status is Status.WARN
    assert checks["host.shm"].evidence["total_bytes"] == 64 << 20
    assert "--shm-size" in checks["host.shm"].fix


def test_hostname_on_127_0_1_1(node, monkeypatch):
    real = socket.getaddrinfo

    def fake(host, *a, **kw):
        if host == socket.gethostname() or host == socket.getfqdn():
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 0))]
        return real(host, *a, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    rep, checks, _ = preflight()
    assert rep.nodes[0].facts["host"]["loopback"] is True
    assert checks["host.hostname_resolves"].status is Status.PASS  # one node: loopback is fine
    assert "127.0.1.1" in checks["host.hostname_resolves"].summary


def test_socket_ifname_naming_no_interface_fails(node, monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ens5")
    rep, checks, _ = preflight()
    assert checks["net.socket_ifname"].status is Status.FAIL
    assert rep.root_cause().id == "net.socket_ifname" and rep.exit_code == 1
