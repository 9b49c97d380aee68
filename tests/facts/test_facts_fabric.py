"""The fabric's facts from fake sysfs trees: where GPUs and HCAs sit in the PCI tree, NCCL's GPUDirect RDMA files,
HCA firmware / board / OFED, and the error counters read twice inside one run."""

from __future__ import annotations

import pytest

from ncclcheck.facts import counters, gdr, net, pcitree, rdma
from tests.fakesys import GPU_NODE_GPUS, GPU_NODE_HCAS, gpu_node


def test_gpu_and_hca_placements_follow_the_kernels_links(fs):
    gpu_node(fs)
    gpus = pcitree.collect()["gpus"]
    assert [g["bus_id"] for g in gpus] == [c[-1] for _, c in GPU_NODE_GPUS]
    assert gpus[0] == {"bus_id": "0000:03:00.0", "root": "pci0000:00",
                       "path": ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"], "numa": [0, 0, 0, 0]}
    assert gpus[2]["root"] == "pci0000:80" and gpus[2]["numa"][-1] == 1
    devs = {d["name"]: d for d in rdma.collect()["devices"]}
    for name, root, chain in GPU_NODE_HCAS:
        assert devs[name]["pci"]["path"] == list(chain) and devs[name]["pci"]["root"] == root


def test_a_device_outside_devices_pci_has_no_path_not_a_guess(fs):
    fs.ib_device("mlx5_0")  # device/ is a plain directory: no link into /sys/devices/pci...
    fs.ib_port("mlx5_0")
    p = rdma.collect()["devices"][0]["pci"]
    assert "unavailable" in p and "no PCI path" in p["unavailable"]


def test_numa_minus_one_is_unknown(fs):
    fs.gpu_at(["0000:00:06.0"], numa_node=-1)
    assert pcitree.collect()["gpus"][0]["numa"] == [None]


def test_hca_board_type_and_ofed(fs):
    gpu_node(fs, fw_ver="28.41.1000", board_id="MT_0000000970", hca_type="MT4129", ofed="24.10-1.1.4")
    r = rdma.collect()
    d = r["devices"][0]
    assert (d["fw_ver"], d["board_id"], d["hca_type"]) == ("28.41.1000", "MT_0000000970", "MT4129")
    assert r["mlx5_core_version"] == "24.10-1.1.4"


def test_inbox_driver_has_no_ofed_version(fs):
    gpu_node(fs, ofed=None)
    assert rdma.collect()["mlx5_core_version"] is None


def test_gdr_reads_nccls_three_files_and_the_module_flavor(fs):
    gpu_node(fs, peermem="nv_mem_nc", flavor="proprietary", kernel="5.15.0-91-generic")
    g = gdr.collect()
    assert {n: x["present"] for n, x in g["peer_memory"].items()} == {
        "nv_mem": False, "nv_mem_nc": True, "nvidia_peermem": False}
    assert g["peer_memory"]["nv_mem_nc"]["path"] == "/sys/kernel/mm/memory_peers/nv_mem_nc/version"
    assert g["nvidia_module"] == {"loaded": True, "version": "580.95.05", "taint": "POE"}
    assert g["kernel"] == "5.15.0-91-generic"
    assert any("DMA_BUF_SUPPORTED" in n for n in g["not_read"])


def test_no_nvidia_module(fs):
    g = gdr.collect()
    assert g["nvidia_module"] == {"loaded": False, "version": None, "taint": None}
    assert not any(x["present"] for x in g["peer_memory"].values())


def test_port_counters_missing_ones_are_left_out(fs):
    fs.ib_device("mlx5_0")
    fs.ib_port("mlx5_0")
    fs.ib_counters("mlx5_0", 1, link_downed=3, symbol_error=12)
    fs.write("sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors", "garbage\n")
    fs.ib_counters("mlx5_0", 1, hw=True, local_ack_timeout_err=7)
    snap = rdma.counter_snapshot()
    # a missing counter is left out; one that reads as no number is left out of the values and kept as unreadable
    # (issue 63: unmeasured is never "no error counter moved")
    assert snap == {"mlx5_0/1": {"counters": {"link_downed": 3, "symbol_error": 12},
                                 "hw_counters": {"local_ack_timeout_err": 7},
                                 "unreadable": {"port_rcv_errors": "'garbage'"}}}


def test_carrier_snapshot_reads_physical_netdevs_only(fs):
    fs.net("eth0", "physical", speed=100000)
    fs.carrier("eth0", 4, up=2, down=2)
    fs.net("vethabc", "veth")
    fs.carrier("vethabc", 10)
    assert net.carrier_snapshot() == {"eth0": {"carrier_changes": 4, "carrier_up_count": 2, "carrier_down_count": 2}}


def test_counter_window_waits_out_the_minimum_and_reads_twice(fs):
    gpu_node(fs)
    t = [100.0]
    waits = []

    def sleep(s):
        waits.append(s)
        t[0] += s
        fs.ib_counters("mlx5_1", 1, link_downed=1)  # the link drops while the run reads the rest

    first = counters.snapshot(clock=lambda: t[0])
    t[0] += 0.1
    w = counters.window(first, 0.5, sleep=sleep, clock=lambda: t[0])
    assert waits == [pytest.approx(0.4)]
    assert w["interval_s"] == 0.5
    assert w["first"]["ports"]["mlx5_1/1"]["counters"]["link_downed"] == 0
    assert w["last"]["ports"]["mlx5_1/1"]["counters"]["link_downed"] == 1
    assert "mono" not in w["first"] and "mono" not in w["last"]


def test_counter_window_never_waits_with_nothing_to_watch_or_a_long_collection(fs):
    t = [0.0]
    first = counters.snapshot(clock=lambda: t[0])
    w = counters.window(first, 0.5, sleep=lambda s: (_ for _ in ()).throw(AssertionError("waited")),
                        clock=lambda: t[0])
    assert w["first"] == {"at": w["first"]["at"], "ports": {}, "netdevs": {}, "gpus": {}}
    gpu_node(fs)
    first = counters.snapshot(clock=lambda: t[0])
    t[0] += 2.0
    w = counters.window(first, 0.5, sleep=lambda s: (_ for _ in ()).throw(AssertionError("waited")),
                        clock=lambda: t[0])
    assert w["interval_s"] == 2.0


def test_counter_window_without_a_first_read(fs):
    gpu_node(fs)
    w = counters.window({"unavailable": "boom"}, 0.5, sleep=lambda s: None)
    assert w["first"] is None and w["interval_s"] is None and w["last"]["ports"]
