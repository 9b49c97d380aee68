"""The bound of each figure (nccl/bounds.py) and the efficiency checks of bench and links, on fake link facts."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ncclcheck.bench import efficiency as E
from ncclcheck.bench.gates import outcome
from ncclcheck.config import BenchConfig
from ncclcheck.links import efficiency as LE
from ncclcheck.model import BenchRow
from ncclcheck.nccl import bounds as B

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "ncclcheck" / "schema" /
                     "report-1.schema.json").read_text())


def nic(name="eth0", speed=None, virtual=None, tbf_bps=None, unknown=None, **kw):
    qd = [{"kind": "tbf", "root": True, "rate_bytes_per_s": tbf_bps / 8}] if tbf_bps else [{"kind": "noqueue",
                                                                                           "root": True}]
    return {"name": name, "speed_mbps": speed, "speed_unknown": unknown if speed is None else None,
            "virtual": virtual, "shaper": {"qdiscs": qd}, **kw}


def node(*netdevs, default="eth0", ib=(), env=None, nvlink=None, pcie=()):
    return {"netdevs": list(netdevs), "default_interface": default, "ib_ports": list(ib), "env": env or {},
            "nvlink": nvlink, "pcie_gpus": list(pcie)}


def ib(dev, port=1, gbit=400.0, state="ACTIVE", layer="InfiniBand"):
    return {"device": dev, "port": port, "rate_gbps": gbit, "state": state, "link_layer": layer}


# ------------------------------------------------------------------------------------------------- one interface
def test_line_rate_in_gbytes():
    b = B.netdev_bound(nic(speed=100000))
    assert (b.gbps, b.by, b.transport, b.virtual) == (12.5, "eth0: line rate", "socket", False)


def test_a_shaper_below_the_line_rate_is_the_bound():
    b = B.netdev_bound(nic(speed=10000, tbf_bps=1e9))
    assert (b.gbps, b.by) == (0.125, "eth0: tbf")


def test_a_veths_10000_is_no_bound():
    # issue 44: the kernel's fixed figure for a virtual device; a lab's veths carried 1.9 GB/s against its "1.25"
    b = B.netdev_bound(nic(speed=10000, virtual="veth: fixed"))
    assert b.gbps is None and b.virtual and "veth/virtual" in b.by and "not a line rate" in b.notes[0]
    assert B.expected_fraction(b) is None  # not judged


def test_unknown_speed_is_unknown_and_states_nccls_10_gbit_assumption():
    b = B.netdev_bound(nic(unknown="the kernel says unknown (-1)"))
    assert b.gbps is None and "unknown (-1)" in b.by and any("assumes 10 Gb/s" in n for n in b.notes)


def test_unknown_speed_under_a_shaper_is_the_shaper():
    assert B.netdev_bound(nic(unknown="x", tbf_bps=200e6)).gbps == 0.025


def test_htb_default_class_chain_takes_the_smallest_ceil():
    sh = {"qdiscs": [{"kind": "htb", "root": True, "default_class": "1:10"}],
          "classes": [{"classid": "1:1", "parent": None, "ceil_bytes_per_s": 50e6},
                      {"classid": "1:10", "parent": "1:1", "ceil_bytes_per_s": 125e6},
                      {"classid": "1:20", "parent": "1:1", "ceil_bytes_per_s": 1e6}]}
    g, how, note = B.shaper_bound(sh)
    assert g == 0.05 and how.startswith("htb class 1:10") and "not attributed" in note


def test_htb_default_0_does_not_bound_unclassified_traffic():
    sh = {"qdiscs": [{"kind": "htb", "root": True, "default_class": None}],
          "classes": [{"classid": "1:20", "parent": None, "ceil_bytes_per_s": 1e6}]}
    b = B.netdev_bound(nic(speed=10000, shaper=sh))
    assert b.gbps == 1.25 and any("default 0" in n for n in b.notes)


# ------------------------------------------------------------------------------------------------- one node
def test_nccl_uses_active_ib_ports_summed_and_honours_nccl_ib_hca():
    f = node(nic(speed=100000), ib=[ib("mlx5_0"), ib("mlx5_1"), ib("mlx5_2", state="DOWN")])
    b = B.nic_path(f, "nccl", 3)
    assert (b.gbps, b.transport) == (100.0, "ib") and b.by == "node 3 mlx5_0:1, mlx5_1:1: 2 IB ports"
    f["env"] = {"NCCL_IB_HCA": "=mlx5_1:1"}
    assert B.nic_path(f, "nccl").gbps == 50.0
    f["env"] = {"NCCL_IB_DISABLE": "1"}
    assert B.nic_path(f, "nccl").transport == "socket"


def test_roce_is_its_own_transport():
    b = B.nic_path(node(ib=[ib("mlx5_0", gbit=200.0, layer="Ethernet")]), "nccl")
    assert (b.gbps, b.transport) == (25.0, "roce") and "RoCE" in b.by


def test_gloo_never_uses_ib_and_follows_gloo_socket_ifname():
    f = node(nic("eth0", 10000), nic("eth1", 100000), ib=[ib("mlx5_0")])
    assert B.nic_path(f, "gloo").by == "eth0: line rate"
    f["env"] = {"GLOO_SOCKET_IFNAME": "eth1"}
    assert B.nic_path(f, "gloo").gbps == 12.5


def test_nccl_socket_ifname_sums_the_interfaces_it_matches():
    f = node(nic("eth0", 25000), nic("eth1", 25000), nic("docker0", 10000), env={"NCCL_SOCKET_IFNAME": "eth"})
    b = B.nic_path(f, "nccl")
    assert b.gbps == 6.25 and b.by == "eth0: line rate + eth1: line rate"


def test_node_without_facts_is_unknown():
    assert B.nic_path(None, "gloo", 2).by.startswith("node 2 link facts unavailable")


# ------------------------------------------------------------------------------------------------- inside a node
def test_pcie_gbps_by_generation():
    assert B.pcie_gbps(16.0, 16) == pytest.approx(31.5, rel=1e-3)  # Gen4 x16
    assert B.pcie_gbps(8.0, 16) == pytest.approx(15.75, rel=1e-3)  # Gen3 x16
    assert B.pcie_gbps(5.0, 16) == pytest.approx(8.0)  # Gen2 x16, 8b/10b
    assert B.pcie_gbps(32.0, 16) == pytest.approx(63.0, rel=1e-3)  # Gen5 x16


def test_nvlink_sum_of_up_links_slowest_gpu_bounds():
    nv = {"gpus": [{"index": 0, "links": [{"up": True, "speed_mbytes_per_s": 26562}] * 18},
                   {"index": 1, "links": [{"up": True, "speed_mbytes_per_s": 26562}] * 17 + [{"up": False}]}]}
    b = B.intra_node(node(nvlink=nv), 2, True)
    assert b.transport == "nvlink" and b.gbps == pytest.approx(17 * 26.562) and b.by.startswith("GPU 1: 17 NVLink")


def test_pcie_only_gpus_bound_by_the_slowest_link_and_say_when_it_runs_below_its_maximum():
    pcie = [{"bus_id": "0000:19:00.0", "gts": 16.0, "width": 16},
            {"bus_id": "0000:3b:00.0", "gts": 8.0, "width": 16, "max_gts": 16.0, "max_width": 16}]
    b = B.intra_node(node(nvlink={"unavailable": "no NVLink"}, pcie=pcie), 2, True)
    assert b.transport == "pcie" and b.gbps == pytest.approx(15.75, rel=1e-3) and "0000:3b:00.0" in b.by
    assert "below its maximum" in b.notes[0]


def test_cpu_ranks_on_one_host_cross_no_link():
    assert B.intra_node(node(), 2, False).gbps is None


# ------------------------------------------------------------------------------------------------- collectives
def test_ring_is_the_slowest_node_and_alltoall_one_nic():
    nets = {0: B.Bound(12.5, "node 0 eth0", "socket"), 1: B.Bound(0.125, "node 1 eth0: tbf", "socket")}
    assert B.op_bound("all_reduce", 2, "gloo", 1, nets, B.Bound(None, "-")).by == "node 1 eth0: tbf"
    intra = B.Bound(0.1, "node 0 GPU 0: PCIe", "pcie")
    assert B.op_bound("all_gather", 2, "nccl", 8, nets, intra).transport == "pcie"  # capped by inside the node
    assert B.op_bound("all_gather", 2, "nccl", 1, nets, intra).transport == "socket"  # one rank: no intra link
    two = B.op_bound("all_reduce", 2, "nccl", 1, nets, intra)
    assert any("NCCL_ALGO=Ring" in n for n in two.notes)


def test_pair_is_the_smaller_end():
    a, b = B.Bound(1.25, "a"), B.Bound(0.025, "b")
    assert B.pair_bound(a, b) is b and B.pair_bound(b, a) is b


# ------------------------------------------------------------------------------------------------- bench
def row(op, size, busbw, ranks=2):
    return BenchRow(op=op, bytes=size, count=size // 4, dtype="float32", in_place=False, time_us=1.0,
                    algbw_gbps=busbw, busbw_gbps=busbw, wrong=None, rank_time_us=[1.0] * ranks)


def records(*nodes):
    return [{"rank": i, "kind": E.RECORD_KIND, "data": {"node": i, "hostname": f"h{i + 1}", "links": f}}
            for i, f in enumerate(nodes)]


def bench_world(*nodes, backend="gloo", rpn=1):
    return {"nnodes": len(nodes), "backend": backend, "ranks_per_node": rpn, "records": records(*nodes)}


def test_rows_summary_and_checks_carry_bound_and_efficiency_and_the_schema_accepts_them():
    cfg = BenchConfig(sizes=(1 << 20, 4 << 20), ops=("all_reduce",), min_efficiency=0.6)
    rows = [row("all_reduce", 1 << 20, 0.01), row("all_reduce", 4 << 20, 0.02)]
    w = bench_world(node(nic(speed=10000, tbf_bps=1e9)), node(nic(speed=10000, tbf_bps=200e6)))
    checks, extra, _ = outcome(cfg, rows, world=w)
    assert [(r.extra["bound_gbps"], r.extra["efficiency"]) for r in rows] == [(0.025, 0.4), (0.025, 0.8)]
    assert rows[1].extra["bound_by"] == "node 1 eth0: tbf"
    [eff] = [c for c in checks if c.id == "bench.efficiency"]
    assert eff.status.value == "pass" and "node 1 eth0: tbf" in eff.summary
    [gate] = [c for c in checks if c.id == "bench.min_efficiency"]
    assert gate.status.value == "pass"
    [s] = extra["bench_summary"]["per_op"]
    assert (s["bound_gbps"], s["efficiency"], s["expected_efficiency"]) == (0.025, 0.8, 0.5)
    validate_bench(checks, rows, extra)


def validate_bench(checks, rows, extra):
    report = {"schema": "ncclcheck.report/1", "command": "bench", "version": "0", "status": "pass", "exit_code": 0,
              "started": "", "duration_s": 0, "world": {"nnodes": 2, "world_size": 2, "backend": "gloo",
                                                        "master": None, "launcher": "ncclcheck"},
              "nodes": [], "checks": [c.to_json() for c in checks], "recommendations": [],
              "bench": [r.to_json() for r in rows], **extra}
    jsonschema.validate(report, SCHEMA)


def test_a_busbw_above_its_bound_names_the_bound_wrong_and_shows_no_efficiency():
    # busbw 4x the bound (issue 32: "pairs reached 95%-381% of their bound"): the bound is wrong, never a figure.
    cfg = BenchConfig(sizes=(4 << 20,), ops=("all_reduce",), min_efficiency=0.6)
    rows = [row("all_reduce", 4 << 20, 0.1)]
    w = bench_world(node(nic(speed=10000, tbf_bps=1e9)), node(nic(speed=10000, tbf_bps=200e6)))
    checks, extra, _ = outcome(cfg, rows, world=w)
    assert rows[0].extra["bound_gbps"] == 0.025 and rows[0].extra["efficiency"] is None
    assert rows[0].extra["bound_trusted"] is False
    [eff] = [c for c in checks if c.id == "bench.efficiency"]
    assert eff.status.value == "warn"
    assert eff.summary.startswith("bound of all_reduce is wrong: measured busbw 0.1 GB/s")
    assert "node 1 eth0: tbf" in eff.summary and "%" not in eff.summary
    [gate] = [c for c in checks if c.id == "bench.min_efficiency"]
    assert gate.status.value == "fail" and "bound wrong" in gate.summary
    [s] = extra["bench_summary"]["per_op"]
    assert s["efficiency"] is None and s["bound_trusted"] is False
    validate_bench(checks, rows, extra)


def test_below_the_expected_fraction_warns_naming_the_link_and_the_gate_fails():
    cfg = BenchConfig(sizes=(4 << 20,), ops=("all_reduce",), min_efficiency=0.8)
    rows = [row("all_reduce", 4 << 20, 0.01)]
    w = bench_world(node(nic(speed=10000, tbf_bps=1e9)), node(nic(speed=10000, tbf_bps=1e9)))
    checks, _, _ = outcome(cfg, rows, world=w)
    [eff] = [c for c in checks if c.id == "bench.efficiency"]
    assert eff.status.value == "warn" and "limited by node 0 eth0: tbf" in eff.summary
    [gate] = [c for c in checks if c.id == "bench.min_efficiency"]
    assert gate.status.value == "fail" and "8% < required 80%" in gate.summary


def test_unknown_bound_warns_and_cannot_pass_the_gate():
    cfg = BenchConfig(sizes=(4 << 20,), ops=("all_reduce",), min_efficiency=0.5)
    w = bench_world(node(nic(unknown="the kernel says unknown (-1)")), node(nic(speed=10000)))
    checks, _, _ = outcome(cfg, [row("all_reduce", 4 << 20, 1.0)], world=w)
    [eff] = [c for c in checks if c.id == "bench.efficiency"]
    assert eff.status.value == "warn" and "bound unknown" in eff.summary and "assumes 10 Gb/s" in eff.detail
    assert [c.status.value for c in checks if c.id == "bench.min_efficiency"] == ["fail"]


def test_a_node_that_sent_no_facts_is_named():
    w = bench_world(node(nic(speed=10000)), node(nic(speed=10000)))
    w["records"] = w["records"][:1] + [{"kind": E.RECORD_KIND, "data": "garbage"}]
    checks, _, _ = outcome(BenchConfig(sizes=(4 << 20,), ops=("all_reduce",)), [row("all_reduce", 4 << 20, 1.0)],
                           world=w)
    [eff] = [c for c in checks if c.id == "bench.efficiency"]
    assert "node 1 sent no link facts" in eff.summary


def test_single_host_cpu_ranks_skip():
    checks, _, _ = outcome(BenchConfig(sizes=(4 << 20,), ops=("all_reduce",)), [row("all_reduce", 4 << 20, 1.0)],
                           world=bench_world(node(nic(speed=10000)), rpn=2) | {"nnodes": 1})
    assert [c.status.value for c in checks if c.id == "bench.efficiency"] == ["skip"]


# ------------------------------------------------------------------------------------------------- links
def test_links_matrices_and_the_slow_end_named():
    m = [[None, 0.12, 0.12], [0.12, None, 0.12], [0.024, 0.024, None]]  # node 2's egress shaper: out of it only
    by_node = {0: node(nic(speed=10000, tbf_bps=1e9)), 1: node(nic(speed=10000, tbf_bps=1e9)),
               2: node(nic(speed=10000, tbf_bps=200e6))}
    fields, checks = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], 0.9)
    # direction-aware (issue 32): node 2's tbf bounds what it sends; what it receives is bounded by the sender
    assert fields["bound_gbps"][0][1] == fields["bound_gbps"][0][2] == 0.125 and fields["bound_gbps"][2][0] == 0.025
    assert fields["bound_by"][2][1] == "node 2 eth0: tbf (sender)"
    assert fields["bound_by"][1][2] == "node 1 eth0: tbf (sender)"
    assert fields["efficiency"][0][1] == pytest.approx(0.96) and fields["wrong_bounds"] == []
    assert [c.status.value for c in checks] == ["pass", "pass"]
    m[0][2] = 0.005
    _, checks = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], 0.9)
    assert checks[0].status.value == "warn" and "node 0 (h1) -> node 2 (h3)" in checks[0].summary
    assert checks[1].status.value == "fail"


def test_links_into_a_host_with_an_egress_shaper_are_bounded_by_the_sender_not_by_its_shaper():
    # issue 32: pairs INTO the shaped host ran at 0.05 GB/s against a bound of 0.0125 (95%-381%). tbf shapes what a
    # host sends; into it the bound is the sender's egress and its own line rate.
    m = [[None, 0.6, 0.05], [0.6, None, 0.05], [0.012, 0.012, None]]
    by_node = {0: node(nic(speed=10000, virtual="veth")), 1: node(nic(speed=10000, virtual="veth")),
               2: node(nic(speed=10000, virtual="veth", tbf_bps=100e6))}
    fields, checks = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], None)
    # into node 2: its sender's egress (a veth: no limit of its own, so no bound), never node 2's own shaper
    assert fields["bound_gbps"][0][2] is None and fields["bound_gbps"][2][0] == 0.0125
    effs = [e for row in fields["efficiency"] for e in row if e is not None]
    assert max(effs) <= 1 and fields["wrong_bounds"] == []
    # the shaper on node 0 instead (a neighbour): the same rule, no direction above its bound
    by_node = {0: node(nic(speed=10000, virtual="veth", tbf_bps=100e6)), 1: node(nic(speed=10000, virtual="veth")),
               2: node(nic(speed=10000, virtual="veth"))}
    m = [[None, 0.012, 0.012], [0.05, None, 0.6], [0.05, 0.6, None]]
    fields, _ = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], None)
    assert fields["bound_gbps"][1][0] is None and fields["bound_gbps"][0][1] == 0.0125
    assert fields["wrong_bounds"] == []


def test_a_direction_above_its_bound_is_named_a_wrong_bound_and_never_a_percentage():
    # Node 2's egress is shaped invisibly to ncclcheck the other way: a bound that its figure beats is wrong.
    m = [[None, 0.12, 0.12], [0.12, None, 0.12], [0.6, 0.12, None]]
    by_node = {x: node(nic(speed=1000)) for x in range(3)}
    fields, checks = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], 0.5)
    assert fields["efficiency"][2][0] is None and fields["bound_trusted"][2][0] is False
    assert fields["bound_trusted"][0][1] is True
    assert fields["wrong_bounds"] == [{"a": 2, "b": 0, "gbps": 0.6, "bound_gbps": 0.125,
                                       "bound_by": "node 2 eth0: line rate (sender)"}]
    eff, gate = checks
    assert eff.status.value == "warn" and eff.summary.startswith(
        "bound of node 2 (h3) -> node 0 (h1) is wrong: measured 0.6 GB/s > bound 0.125 GB/s (bound_by node 2 eth0")
    assert "%" not in eff.summary and gate.status.value == "fail" and "bound wrong" in gate.summary


def test_links_on_one_host_cross_no_link():
    fields, checks = LE.evaluate([[None, 1.0], [1.0, None]], {}, "gloo", "rank", None, None)
    assert fields["bound_gbps"] == [[None, None], [None, None]] and checks[0].status.value == "skip"


def test_eight_h100s_on_nvlink_get_the_bound_and_the_published_figure_beside_it():
    h100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "links": [{"up": True, "speed_mbytes_per_s": 26562}] * 18}
    f = node(nvlink={"gpus": [dict(h100, index=i) for i in range(8)]})
    cfg = BenchConfig(sizes=(1 << 30,), ops=("all_reduce",))
    rows = [row("all_reduce", 1 << 30, 370.0, ranks=8)]
    checks, extra, _ = outcome(cfg, rows, world=bench_world(f, backend="nccl", rpn=8))
    [s] = extra["bench_summary"]["per_op"]
    assert s["bound_by"].startswith("GPU 0: 18 NVLink links") and s["bound_gbps"] == pytest.approx(478.116)
    assert "published 8xH100" in s["reference"]  # the per-SKU note stays, as a second opinion
    [eff] = [c for c in checks if c.id == "bench.efficiency"]
    assert eff.status.value == "pass" and "nvlink" in eff.summary  # 370 of 478 = 77%, expected >= 75%


def test_a_slow_node_whose_own_shaper_explains_it_is_said():
    m = [[None, 0.12, 0.12], [0.12, None, 0.12], [0.024, 0.024, None]]  # node 2's egress shaper: out of it only
    by_node = {0: node(nic(speed=10000, tbf_bps=1e9)), 1: node(nic(speed=10000, tbf_bps=1e9)),
               2: node(nic(speed=10000, tbf_bps=200e6))}
    _, checks = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], None, slow_nodes=[2])
    assert "own bound explains it (node 2 (h3): 0.025 GB/s, node 2 eth0: tbf)" in checks[0].summary
    # a slow node whose bound is like the others' is a fault: nothing is explained
    by_node[2] = node(nic(speed=10000, tbf_bps=1e9))
    m[0][2] = m[2][0] = m[1][2] = m[2][1] = 0.1
    _, checks = LE.evaluate(m, by_node, "gloo", "node", ["h1", "h2", "h3"], None, slow_nodes=[2])
    assert "explains" not in checks[0].summary


@pytest.mark.parametrize("garbage", [
    {"netdevs": 5}, {"netdevs": [{"name": "eth0", "speed_mbps": "fast", "shaper": {"qdiscs": "x"}}],
                     "default_interface": "eth0"},
    {"ib_ports": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "rate_gbps": "400"}], "env": {}},
    {"ib_ports": [{"state": "ACTIVE", "rate_gbps": float("nan")}]}, {"env": "NCCL_IB_HCA"},
    {"nvlink": {"gpus": [{"links": "many"}]}, "pcie_gpus": [{"gts": True, "width": [16]}]},
    {"netdevs": [{"name": "eth0", "speed_mbps": 10000, "shaper": {"qdiscs": [{"kind": "tbf", "root": True,
                                                                               "rate_bytes_per_s": -1e9}]}}],
     "default_interface": "eth0"},
])
def test_link_facts_off_the_wire_never_raise(garbage):
    for backend in ("gloo", "nccl"):
        b = B.nic_path(garbage, backend, 1)
        assert b.gbps is None or b.gbps > 0
        hostile_ingress = {"name": "eth0", "ingress": {"redirects": "x", "police_bytes_per_s": 7}}
        r = B.nic_path({**garbage, "netdevs": [hostile_ingress]}, backend, 1, "ingress")
        assert r.gbps is None or r.gbps > 0
        i = B.intra_node(garbage, 8, True, 1)
        assert i.gbps is None or i.gbps > 0
    checks, _, _ = outcome(BenchConfig(sizes=(4 << 20,), ops=("all_reduce",)), [row("all_reduce", 4 << 20, 1.0)],
                           world=bench_world(garbage, garbage, backend="nccl", rpn=8))
    assert [c.id for c in checks if c.id == "bench.efficiency"] == ["bench.efficiency"]
