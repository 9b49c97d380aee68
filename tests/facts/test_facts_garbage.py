"""Property tests: garbage, empty, truncated and binary sysfs/procfs files degrade to None, never raise."""

from __future__ import annotations

import contextlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclcheck.facts import host, net, rdma
from tests.fakesys import FakeSys, container_shm_64mib, docker0_decoy, ib_port_down, roce_gid_index_3

NET_ATTRS = ["type", "flags", "operstate", "mtu", "speed", "carrier", "address", "ifindex", "iflink",
             "device/numa_node", "tun_flags"]
PORT_ATTRS = ["state", "phys_state", "rate", "link_layer", "gids/0", "gids/3", "gid_attrs/types/3",
              "gid_attrs/ndevs/3"]
DEV_ATTRS = ["fw_ver", "node_guid", "device/numa_node"]

garbage = st.one_of(
    st.binary(max_size=300),
    st.just(b""),
    st.just(b"\xff\xfe\x00"),
    st.just(b"4:"),  # truncated state
    st.just(b"400 Gb/s"),  # truncated rate
    st.text(max_size=80).map(str.encode),
    st.integers().map(lambda i: str(i).encode()),
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@contextlib.contextmanager
def _fresh(monkeypatch):
    with tempfile.TemporaryDirectory(prefix="ncclcheck-fakesys-") as root:
        yield FakeSys(root, monkeypatch)


@pytest.mark.slow  # 60 generated trees each: the fast tier stays fast, the full suite keeps them
@SETTINGS
@given(attr=st.sampled_from(NET_ATTRS), data=garbage)
def test_net_attribute_garbage(monkeypatch, attr, data):
    with _fresh(monkeypatch) as fs:
        docker0_decoy(fs)
        fs.write(f"sys/class/net/eth0/{attr}", data)
        ifs = {i["name"]: i for i in net.read_interfaces(addrs=fs.addrs(), stats=fs.stats())}
    e = ifs["eth0"]
    assert e["kind"] in ("physical", "ipoib", "loopback", "docker", "bridge", "veth", "virtual", "vpn")
    for k in ("mtu", "speed_mbps", "type", "numa_node", "carrier"):
        assert e[k] is None or isinstance(e[k], int)
    assert e["up"] in (True, False, None) and e["running"] in (True, False, None)


@pytest.mark.slow  # 60 generated trees each: the fast tier stays fast, the full suite keeps them
@SETTINGS
@given(attr=st.sampled_from(PORT_ATTRS + DEV_ATTRS), data=garbage, roce=st.booleans())
def test_rdma_attribute_garbage(monkeypatch, attr, data, roce):
    base = "sys/class/infiniband/mlx5_0/" + ("ports/1/" if attr in PORT_ATTRS else "")
    with _fresh(monkeypatch) as fs:
        (roce_gid_index_3 if roce else ib_port_down)(fs)
        fs.write(base + attr, data)
        d = rdma.collect()["devices"][0]
    p = d["ports"][0]
    assert p["state_code"] is None or isinstance(p["state_code"], int)
    assert p["rate_gbps"] is None or isinstance(p["rate_gbps"], float)
    assert p["roce_v2_gid_index"] in (None, 3)
    assert all(isinstance(g["gid"], str) and g["gid"] for g in p["gids"])


@pytest.mark.slow  # 60 generated trees each: the fast tier stays fast, the full suite keeps them
@SETTINGS
@given(data=garbage)
def test_procfs_garbage(monkeypatch, data):
    with _fresh(monkeypatch) as fs:
        container_shm_64mib(fs)
        for rel in ("proc/sys/net/ipv4/ip_local_port_range", "proc/meminfo", "proc/1/cgroup"):
            fs.write(rel, data)
        assert host.port_range() is None or len(host.port_range()) == 2
        assert host.mem_total_bytes() is None or host.mem_total_bytes() >= 0
        host.container_hint()
        fs.write("proc/mounts", data + b"\nshm /dev/shm tmpfs rw,size=" + data + b" 0 0\n")
        s = host.shm()
    assert "unavailable" in s or s["total_bytes"] is None or s["total_bytes"] >= 0


@pytest.mark.parametrize("missing", ["sys/class/net/eth0/device", "sys/class/net", "sys/class/infiniband/mlx5_0/ports",
                                     "sys/class/infiniband/mlx5_0/ports/1/gids", "sys/class/infiniband", "proc"])
def test_missing_directories(tmp_path, monkeypatch, missing):
    import shutil

    fs = ib_port_down(docker0_decoy(FakeSys(tmp_path, monkeypatch)))
    shutil.rmtree(tmp_path / missing)
    net.read_interfaces(addrs=fs.addrs(), stats=fs.stats())
    rdma.collect()
    host.port_range()
    host.shm()


@pytest.mark.slow  # 60 generated trees each: the fast tier stays fast, the full suite keeps them
@SETTINGS
@given(name=st.text(min_size=1, max_size=20))
def test_odd_interface_names_from_getifaddrs(monkeypatch, name):
    with _fresh(monkeypatch):
        ifs = net.read_interfaces(addrs={name: []}, stats={})
    assert all(i["name"] == name for i in ifs)
