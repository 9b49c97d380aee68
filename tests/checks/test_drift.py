"""baseline.drift names every difference per node against a golden run (versions, NCCL variables, interfaces, RDMA
ports, packages) and never per-node identities; links.baseline fails a link slower than its baseline."""

from __future__ import annotations

import copy

import pytest

from ncclcheck.checks.drift import CHECK_ID, baseline_nodes, compare, differences, drift_checks
from ncclcheck.errors import UsageError
from ncclcheck.links.baseline import compare_links
from ncclcheck.model import NodeInfo, Status
from tests.fakefacts import facts, iface, port


def _golden():
    return facts(env={"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_HCA": "=mlx5_0"},
                 rdma={"devices": [{"name": "mlx5_0", "ports": [port(1)]}]},
                 packages={"hash": "sha256:a", "count": 2, "items": {"torch": "2.13.0", "numpy": "2.1.0"}})


def test_identical_node_passes_and_identity_is_ignored():
    g = _golden()
    other = copy.deepcopy(g)
    other["interfaces"] = [iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4="10.0.0.9", speed=100000)]
    other["host"] = dict(g["host"], hostname="node9")
    assert differences(g, other) == []
    (r,) = drift_checks([NodeInfo(0, "node9", other)], [NodeInfo(0, "node1", g)], "golden.json")
    assert r.status is Status.PASS and r.id == CHECK_ID and r.node == 0


def test_every_kind_of_drift_is_named():
    g = _golden()
    now = _golden()
    now["versions"] = dict(now["versions"], torch="2.12.0", nccl="2.21.5")
    now["env"] = {"vars": {"NCCL_SOCKET_IFNAME": "=eth1", "NCCL_DEBUG": "INFO"}, "redacted": []}
    now["interfaces"] = [iface("eth0", mtu=1500, speed=25000), iface("ib0", kind="ipoib", mtu=2044)]
    now["rdma"] = {"devices": [{"name": "mlx5_0", "ports": [port(1, state="DOWN", rate=200.0)]}]}
    now["packages"] = {"hash": "sha256:b", "count": 2, "items": {"torch": "2.12.0", "scipy": "1.14"}}
    diffs = {d["what"]: (d["baseline"], d["now"]) for d in differences(g, now)}
    assert diffs["torch version"] == ("2.13.0", "2.12.0") and diffs["nccl version"] == (None, "2.21.5")
    assert diffs["$NCCL_SOCKET_IFNAME"] == ("=eth0", "=eth1") and diffs["$NCCL_DEBUG"] == (None, "INFO")
    assert diffs["$NCCL_IB_HCA"] == ("=mlx5_0", None)
    assert diffs["interface eth0 speed (Mb/s)"] == ("100000", "25000") and diffs["interface ib0"] == (None, "up")
    assert diffs["RDMA mlx5_0/1"] == ("ACTIVE", "DOWN") and diffs["RDMA mlx5_0/1 rate (Gb/s)"] == ("400.0", "200.0")
    assert diffs["package torch"] == ("2.13.0", "2.12.0") and diffs["package numpy"] == ("2.1.0", None)
    assert diffs["package scipy"] == (None, "1.14")
    assert "interface docker0" not in diffs and "interface lo" not in diffs  # not traffic interfaces
    (r,) = drift_checks([NodeInfo(1, "node2", now)], [NodeInfo(0, "node1", g)], "golden.json")
    assert r.status is Status.WARN and r.node == 1 and "torch version 2.13.0 -> 2.12.0" in r.summary
    assert len(r.evidence["differences"]) == len(diffs) and "golden.json" in r.detail and r.fix


def test_redacted_variables_are_not_compared():
    g, now = facts(env={"NCCL_X": "1"}), facts(env={"NCCL_X": "1"})
    now["env"] = {"vars": {"NCCL_X": "1", "NCCL_TOKEN": "<redacted>"}, "redacted": ["NCCL_TOKEN"]}
    assert differences(g, now) == []


def test_nodes_match_by_hostname_then_rank():
    a, b = facts(versions={"torch": "A"}), facts(versions={"torch": "B"})
    base = [NodeInfo(0, "h0", a), NodeInfo(1, "h1", b)]
    res = drift_checks([NodeInfo(0, "h1", b), NodeInfo(1, "hX", b)], base)
    assert [r.status for r in res] == [Status.PASS, Status.PASS]  # h1 by name; hX by its rank (1)


def test_a_baseline_without_facts_is_a_usage_error():
    with pytest.raises(UsageError, match="no node facts"):
        baseline_nodes({"schema": "ncclcheck.report/1", "nodes": [{"node_rank": 0, "hostname": "h", "facts": {}}]})


def _links_doc(matrix, hosts=None):
    section = {"matrix_gbps": matrix, "size": 1 << 26}
    if hosts:
        section["hosts"] = hosts
    return {"schema": "ncclcheck.report/1", "links": section, "nodes": []}


def test_links_slower_than_baseline_fail_and_name_the_link():
    base = _links_doc([[None, 40.0, 40.0], [40.0, None, 40.0], [40.0, 40.0, None]], ["a", "b", "c"])
    now = {"matrix_gbps": [[None, 39.0, 20.0], [39.5, None, 38.0], [21.0, 38.5, None]], "hosts": ["a", "b", "c"]}
    r = compare_links(now, [], base, 0.1, "golden.json")
    assert r.status is Status.FAIL and r.id == "links.baseline"
    assert {(s["a"], s["b"]) for s in r.evidence["slower"]} == {("a", "c"), ("c", "a")}
    assert "a -> c" in r.summary or "c -> a" in r.summary
    assert r.evidence["matched_by"] == "hostname"


def test_links_match_by_hostname_when_ranks_moved():
    base = _links_doc([[None, 40.0], [10.0, None]], ["a", "b"])
    now = {"matrix_gbps": [[None, 10.5], [40.0, None]], "hosts": ["b", "a"]}  # same links, ranks swapped
    assert compare_links(now, [], base, 0.1).status is Status.PASS


def test_links_within_tolerance_pass_and_nothing_to_compare_warns():
    base = _links_doc([[None, 40.0], [40.0, None]])
    assert compare_links({"matrix_gbps": [[None, 37.0], [38.0, None]]}, [], base, 0.1).status is Status.PASS
    assert compare_links({"matrix_gbps": [[None]]}, [], base, 0.1).status is Status.WARN


def _health_like(full: dict) -> dict:
    """What `health --json` (no baseline) collects of the same node: no versions, no packages."""
    return {k: v for k, v in copy.deepcopy(full).items() if k not in ("versions", "packages")}


def test_a_fact_the_baseline_did_not_collect_is_counted_never_a_difference():
    """Issue 53: a health report as the baseline read '68 differences from the baseline: python version (none) ->
    3.11.7; ...'."""
    now = _golden()
    (r,) = drift_checks([NodeInfo(0, "h", now)], [NodeInfo(0, "h", _health_like(now))], "G.json")
    assert r.status is Status.PASS and r.evidence["differences"] == []
    skip = r.evidence["not_compared"]
    assert skip["not_measured"] == {} and skip["not_in_baseline"]["packages"] == 2  # the list, not its hash too
    assert set(skip["not_in_baseline"]) == {"python version", "torch version", "cuda version", "nccl version",
                                            "driver version", "packages"}
    assert r.summary == ("same as the baseline (h); not compared: 7 facts not in the baseline (python version, torch "
                         "version, cuda version, nccl version, driver version, packages)")
    # the other way round: what this run did not measure
    (back,) = drift_checks([NodeInfo(0, "h", _health_like(now))], [NodeInfo(0, "h", now)])
    assert back.status is Status.PASS and "7 facts not measured by this run" in back.summary


def test_versions_only_torch_knows_are_skipped_when_health_has_no_torch():
    golden = facts(versions={"cuda": "12.4", "nccl": "2.21.5"})
    now = copy.deepcopy(golden)
    now["versions"] = {k: v for k, v in now["versions"].items() if k not in ("cuda", "nccl")}
    diffs, skip = compare(golden, now)
    assert diffs == [] and skip["not_measured"] == {"cuda version": 1, "nccl version": 1}
    now["versions"]["driver"] = "999.1"  # what both measured still differs
    assert [d["what"] for d in compare(golden, now)[0]] == ["driver version"]


def test_a_group_that_could_not_be_read_is_not_compared():
    golden, now = facts(env={"NCCL_DEBUG": "INFO"}), facts()
    now["env"] = {"unavailable": "PermissionError: ..."}
    diffs, skip = compare(golden, now)
    assert diffs == [] and skip["not_measured"] == {"NCCL/Gloo variables": 1}
    # collected on both sides, an interface or a variable gone IS a difference
    now = facts()
    assert {d["what"] for d in differences(golden, now)} == {"$NCCL_DEBUG"}


def test_a_baseline_of_another_command_is_refused_naming_it():
    doc = {"schema": "ncclcheck.report/1", "command": "bench", "nodes": [{"node_rank": 0, "hostname": "h",
                                                                          "facts": {}}]}
    with pytest.raises(UsageError, match=r"a report of `ncclcheck bench` holds no node facts to compare; a baseline "
                                         r"is a report of preflight, recommend, health or env"):
        baseline_nodes(doc, "--baseline b.json")


def test_links_measured_now_but_not_in_the_baseline_are_counted():
    base = _links_doc([[None, 40.0], [40.0, None]], ["a", "b"])
    now = {"matrix_gbps": [[None, 39.0, 30.0], [39.5, None, 30.0], [30.0, 30.0, None]], "hosts": ["a", "b", "c"]}
    r = compare_links(now, [], base, 0.1)
    assert r.status is Status.PASS and len(r.evidence["compared"]) == 2 and len(r.evidence["not_in_baseline"]) == 4
    assert r.summary == "2 links within 10% of the baseline; 4 measured links not in the baseline, not compared"


def test_a_large_reports_shared_facts_are_resolved_for_the_comparison(tmp_path):
    """From 8 nodes a report writes a group shared by several nodes once (`$ref`s): the baseline reader resolves
    them (it read the raw JSON, and every `$ref` group was 'absent')."""
    from ncclcheck.checks.drift import load_golden
    from ncclcheck.model import Report
    from ncclcheck.render.json import render_json

    g = _golden()
    rep = Report(command="preflight", version="t", started="now", nodes=[NodeInfo(i, f"n{i}", copy.deepcopy(g))
                                                                         for i in range(8)])
    text = render_json(rep)
    assert '"$ref"' in text
    path = tmp_path / "big.json"
    path.write_text(text)
    base = load_golden(str(path))
    assert len(base) == 8 and base[3].facts["versions"] == g["versions"]
    (r,) = drift_checks([NodeInfo(3, "n3", g)], base)
    assert r.status is Status.PASS and r.evidence["not_compared"] == {"not_in_baseline": {}, "not_measured": {}}
