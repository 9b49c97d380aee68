"""Interfaces and routes: the facts NCCL_SOCKET_IFNAME advice rests on."""

from __future__ import annotations

import socket

import pytest

from ncclcheck.facts import net
from tests.fakesys import docker0_decoy, psutil_addrs, snicstats


@pytest.fixture
def docker0_no_carrier(fs):
    return docker0_decoy(fs, docker_running=False)


def by_name(fs):
    return {i["name"]: i for i in net.read_interfaces(addrs=fs.addrs(), stats=fs.stats())}


def test_docker0_decoy_kinds_states_and_order(docker0_no_carrier):
    fs = docker0_no_carrier
    ifs = net.read_interfaces(addrs=fs.addrs(), stats=fs.stats())
    assert [i["name"] for i in ifs] == ["lo", "eth0", "docker0", "vethabc123"]  # getifaddrs order kept
    d = {i["name"]: i for i in ifs}
    assert {n: i["kind"] for n, i in d.items()} == {
        "lo": "loopback", "eth0": "physical", "docker0": "docker", "vethabc123": "veth"}
    eth0 = d["eth0"]
    assert (eth0["up"], eth0["running"], eth0["speed_mbps"], eth0["mtu"], eth0["type"]) == (True, True, 100000, 9000, 1)
    assert (eth0["driver"], eth0["numa_node"], eth0["carrier"], eth0["operstate"]) == ("mlx5_core", 0, 1, "up")
    assert eth0["ipv4"] == [{"address": "198.18.0.1", "prefixlen": 24}]
    assert eth0["ipv6"] == [{"address": "fe80::1", "prefixlen": 64}]
    docker0 = d["docker0"]
    assert (docker0["up"], docker0["running"], docker0["carrier"], docker0["speed_mbps"]) == (True, False, None, None)
    assert docker0["ipv4"] == [{"address": "172.17.0.1", "prefixlen": 16}]
    lo = d["lo"]
    assert (lo["up"], lo["running"], lo["operstate"], lo["mac"], lo["type"]) == (True, True, "unknown", None, 772)


def test_docker0_with_containers_is_running(fs):
    docker0_decoy(fs, docker_running=True)
    d = by_name(fs)["docker0"]
    assert (d["kind"], d["up"], d["running"]) == ("docker", True, True)


def test_running_comes_from_operstate_because_sysfs_flags_never_carry_iff_running(fs):
    fs.net("eth0", speed=25000)
    assert (fs.sysfs / "class/net/eth0/flags").read_text().strip() == "0x1003"
    assert by_name(fs)["eth0"]["running"] is True


def test_admin_down_interface_is_neither_up_nor_running(fs):
    fs.net("eth1", up=False)
    e = by_name(fs)["eth1"]
    assert (e["up"], e["running"], e["operstate"]) == (False, False, "down")


def test_lab_hosts_eth0_is_a_veth_but_the_right_interface_so_virtual(fs):
    # in a network namespace (or a container) eth0 is a veth end: it must not be shunned as a docker-style veth
    fs.net("eth0", "veth", addrs=["198.18.0.2/24"])
    assert by_name(fs)["eth0"]["kind"] == "virtual"


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [("ib0", "ipoib", "ipoib"), ("virbr0", "virtual", "bridge"), ("br0", "bridge", "bridge"),
     ("br-0123456789ab", "bridge", "docker"), ("tun0", "vpn", "vpn"), ("wg0", "virtual", "vpn"),
     ("tailscale0", "virtual", "vpn"), ("cali12345", "veth", "veth"), ("bond0", "virtual", "virtual"),
     ("ens1f0", "physical", "physical")],
)
def test_kinds(fs, name, kind, expected):
    fs.net(name, kind)
    assert by_name(fs)[name]["kind"] == expected


def test_sysfs_only_interfaces_are_listed_after_getifaddrs_ones(fs):
    fs.net("eth0", addrs=["198.18.0.1/24"])
    fs.net("eth1")
    addrs = {"eth0": fs.addrs()["eth0"]}
    assert [i["name"] for i in net.read_interfaces(addrs=addrs, stats=fs.stats())] == ["eth0", "eth1"]


def test_interface_without_sysfs_falls_back_to_psutil_stats(fs):
    addrs = psutil_addrs({"eth9": ["10.0.0.5/8"]})
    stats = {"eth9": snicstats(True, 0, 0, 1500, "up,broadcast,running,multicast")}
    e = net.read_interfaces(addrs=addrs, stats=stats)[0]
    assert (e["up"], e["running"], e["mtu"], e["kind"], e["ipv4"]) == (
        True, True, 1500, "virtual", [{"address": "10.0.0.5", "prefixlen": 8}])


def test_route_to_localhost_uses_loopback():
    r = net.route_to("127.0.0.1", addrs=psutil_addrs({"lo": ["127.0.0.1/8"], "eth0": ["198.18.0.1/24"]}))
    assert r == {"target": "127.0.0.1", "target_ip": "127.0.0.1", "interface": "lo", "source": "127.0.0.1"}


def test_route_to_maps_source_address_to_its_interface():
    # 127.0.0.2 is routed over lo with source 127.0.0.1 on every Linux; the owner is found by address
    r = net.route_to("127.0.0.2", addrs=psutil_addrs({"eth0": ["198.18.0.1/24"], "lo0": ["127.0.0.1/8"]}))
    assert (r["interface"], r["source"], r["target_ip"]) == ("lo0", "127.0.0.1", "127.0.0.2")


def test_route_to_unresolvable_master_says_why():
    def resolver(target, timeout):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    r = net.route_to("nosuchmaster", resolver=resolver)
    assert r["unavailable"].startswith("cannot resolve nosuchmaster:")
    assert "Name or service not known" in r["unavailable"]
