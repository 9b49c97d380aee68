"""RDMA devices from sysfs: what NCCL_IB_HCA and NCCL_IB_GID_INDEX advice rests on."""

from __future__ import annotations

import pytest

from ncclcheck.facts import rdma
from tests.fakesys import ib_port_down, no_rdma, roce_gid_index_3


def test_ib_one_port_active_one_down(fs):
    ib_port_down(fs)
    devs = rdma.collect()["devices"]
    assert [d["name"] for d in devs] == ["mlx5_0", "mlx5_1"]
    d0, d1 = devs
    assert (d0["fw_ver"], d0["numa_node"], d0["node_guid"]) == ("28.39.1002", 0, "a088:c203:0012:3456")
    p = d0["ports"][0]
    assert (p["port"], p["state"], p["state_code"], p["phys_state"], p["phys_state_code"]) == (
        1, "ACTIVE", 4, "LinkUp", 5)
    assert (p["rate"], p["rate_gbps"], p["link_layer"]) == ("400 Gb/sec (4X NDR)", 400.0, "InfiniBand")
    assert p["netdevs"] == ["ib0"]
    assert p["roce_v2_gid_index"] is None
    assert p["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:a088:c203:0012:3456", "type": "IB/RoCE v1",
                          "ndev": None}]  # the all-zero slots are skipped
    q = d1["ports"][0]
    assert (q["state"], q["state_code"], q["phys_state"], q["phys_state_code"], q["rate_gbps"]) == (
        "DOWN", 1, "Disabled", 3, 10.0)
    assert (d1["numa_node"], q["netdevs"]) == (1, ["ib1"])


def test_roce_v2_ipv4_mapped_gid_is_index_3(fs):
    roce_gid_index_3(fs)
    p = rdma.collect()["devices"][0]["ports"][0]
    assert p["link_layer"] == "Ethernet"
    assert p["roce_v2_gid_index"] == 3  # not 1 (v2 but link-local), not 2 (mapped but v1)
    assert [g["index"] for g in p["gids"]] == [0, 1, 2, 3]
    assert [g["type"] for g in p["gids"]] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    assert p["netdevs"] == ["ens1f0"]
    assert p["rate_gbps"] == 100.0


def test_no_infiniband_class_is_no_devices_not_unavailable(fs):
    no_rdma(fs)
    assert rdma.collect() == {"devices": [], "mlx5_core_version": None}


def test_multi_port_function_splits_ipoib_netdevs_by_dev_port(fs):
    fs.ib_device("mlx4_0", netdevs=["ib0", "ib1"])
    fs.ib_port("mlx4_0", 1, gids={})
    fs.ib_port("mlx4_0", 2, gids={})
    ports = rdma.collect()["devices"][0]["ports"]
    assert [p["netdevs"] for p in ports] == [["ib0"], ["ib1"]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4: ACTIVE", (4, "ACTIVE")), ("5: LinkUp", (5, "LinkUp")), ("2: Polling", (2, "Polling")),
     ("ACTIVE", (None, "ACTIVE")), ("7", (7, None)), ("", (None, None)), (None, (None, None)),
     (":::", (None, None))],
)
def test_parse_state(text, expected):
    assert rdma.parse_state(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("400 Gb/sec (4X NDR)", 400.0), ("2.5 Gb/sec (1X SDR)", 2.5), ("100 Gb/sec (2X HDR)", 100.0),
     ("", None), (None, None), ("fast", None)],
)
def test_parse_rate(text, expected):
    assert rdma.parse_rate(text) == expected
