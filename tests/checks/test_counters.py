"""ib.counters: error counters judged on their change inside one run (the fault staged between the two reads on a
fake tree) or since a saved run of the same host and boot, never on their lifetime value."""

from __future__ import annotations

from ncclcheck.checks import LocalInput
from ncclcheck.checks.counters import CID, baseline_checks, check_counters
from ncclcheck.model import Status
from tests.checks.fabric_facts import node_facts, node_infos
from tests.fakesys import gpu_node


def judge(facts: dict):
    return check_counters(LocalInput.of(facts, node_rank=0))


def test_still_counters_pass_with_their_window(fs):
    gpu_node(fs)
    c = judge(node_facts())
    assert c.status is Status.PASS
    assert c.summary.startswith("no error counter moved on 4 RDMA port(s) and 4 netdev(s) in ")
    assert c.evidence["deltas"] == [] and c.evidence["window"].startswith("in ")


def test_large_lifetime_counters_that_do_not_move_are_healthy(fs):
    """Azure/azurehpc#648: a node drained for ever on counts from last month. Lifetime values are not a verdict."""
    gpu_node(fs)
    fs.ib_counters("mlx5_0", 1, link_downed=57, symbol_error=123456, port_rcv_errors=99)
    fs.carrier("ib0", 40)
    assert judge(node_facts()).status is Status.PASS


def test_link_down_between_the_reads_fails_naming_port_delta_window_action(fs):
    gpu_node(fs)
    c = judge(node_facts(between=lambda: fs.ib_counters("mlx5_2", 1, link_downed=1)))
    assert c.status is Status.FAIL
    assert c.summary.startswith("mlx5_2/1: link_downed +1: the link went down and up "
                                "(/sys/class/infiniband/mlx5_2/ports/1/counters/link_downed, in ")
    assert c.summary.endswith("): isolate the node") and c.evidence["action"] == "isolate the node"
    assert c.evidence["deltas"] == [{"where": "mlx5_2/1", "counter": "link_downed", "from": 0, "to": 1, "delta": 1}]
    assert "Reseat or replace the cable" in c.fix


def test_netdev_carrier_flap_fails(fs):
    gpu_node(fs)
    c = judge(node_facts(between=lambda: fs.carrier("ib1", 4, up=2, down=2)))
    assert c.status is Status.FAIL
    assert "ib1: carrier_changes +2" in c.summary and "ib1: carrier_down_count +1" in c.summary
    assert "/sys/class/net/ib1/carrier_changes" in c.summary and c.evidence["action"] == "isolate the node"


def test_symbol_errors_warn_and_monitor(fs):
    gpu_node(fs)
    c = judge(node_facts(between=lambda: fs.ib_counters("mlx5_1", 1, symbol_error=37, port_rcv_errors=2)))
    assert c.status is Status.WARN
    assert "mlx5_1/1: symbol_error +37" in c.summary and "mlx5_1/1: port_rcv_errors +2" in c.summary
    assert c.summary.endswith("): monitor") and c.evidence["action"] == "monitor"


def test_retransmission_timeouts_warn_but_out_of_sequence_is_only_shown(fs):
    gpu_node(fs)
    c = judge(node_facts(between=lambda: fs.ib_counters("mlx5_0", 1, hw=True, out_of_sequence=900, np_cnp_sent=5)))
    assert c.status is Status.PASS and len(c.evidence["deltas"]) == 2  # adaptive routing, congestion control
    c = judge(node_facts(between=lambda: fs.ib_counters("mlx5_0", 1, hw=True, local_ack_timeout_err=3)))
    assert c.status is Status.WARN and "mlx5_0/1: local_ack_timeout_err +3" in c.summary
    assert "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err" in c.summary


def test_a_counter_that_went_down_was_reset_not_healed(fs):
    gpu_node(fs)
    fs.ib_counters("mlx5_0", 1, symbol_error=500)
    c = judge(node_facts(between=lambda: fs.ib_counters("mlx5_0", 1, symbol_error=0)))
    assert c.status is Status.PASS and "reset in between" in c.summary and c.evidence["reset"] == [
        "mlx5_0/1 symbol_error"]


def test_one_read_only_is_no_verdict(fs):
    gpu_node(fs)
    f = node_facts()
    f["counters"]["first"] = None
    assert judge(f).status is Status.SKIP


def test_nothing_to_watch_skips(fs):
    assert judge(node_facts()).status is Status.SKIP


def _saved(facts: dict, seconds_ago: float) -> dict:
    import copy

    then = copy.deepcopy(facts)
    then["counters"]["last"]["at"] -= seconds_ago
    return then


def test_baseline_window_flaps_and_errors(fs):
    gpu_node(fs)
    golden = node_facts(hostname="gpu7")
    golden = _saved(golden, 3 * 3600)
    fs.ib_counters("mlx5_3", 1, link_downed=6)
    now = node_facts(hostname="gpu7")
    (c,) = baseline_checks(node_infos(now), node_infos(golden), "golden.json")
    assert c.status is Status.FAIL and c.id == CID
    assert c.summary.startswith("mlx5_3/1: link_downed +6: 6 flap(s) (>= 5 fail) (")
    assert "since golden.json (3.0 h ago)): isolate the node" in c.summary
    fs.ib_counters("mlx5_3", 1, link_downed=0)
    golden2 = _saved(node_facts(hostname="gpu7"), 3 * 3600)
    fs.ib_counters("mlx5_3", 1, link_downed=1, symbol_error=10)
    (c,) = baseline_checks(node_infos(node_facts(hostname="gpu7")), node_infos(golden2), "golden.json")
    assert c.status is Status.WARN and c.evidence["action"] == "monitor"


def test_baseline_of_another_host_or_boot_says_nothing(fs):
    gpu_node(fs)
    golden = _saved(node_facts(hostname="gpu1"), 60)
    (c,) = baseline_checks(node_infos(node_facts(hostname="gpu2")), node_infos(golden), "g.json")
    assert c.status is Status.SKIP and "has no counters of gpu2" in c.summary
    golden = _saved(node_facts(hostname="gpu2"), 60)
    golden["counters"]["boot_id"] = "0" * 8 + "-0000-0000-0000-" + "0" * 12
    now = node_facts(hostname="gpu2")
    now["counters"]["boot_id"] = "1" * 8 + "-0000-0000-0000-" + "0" * 12
    (c,) = baseline_checks(node_infos(now), node_infos(golden), "g.json")
    assert c.status is Status.SKIP and "rebooted since g.json" in c.summary


def test_counters_that_read_as_no_number_are_a_skip_saying_why_never_quiet(fs):
    """Issue 63: N/A, junk or an empty file on every port gave "no error counter moved on 4 RDMA port(s)"."""
    gpu_node(fs)
    for i in range(4):
        fs.ib_counters(f"mlx5_{i}", 1, symbol_error="N/A", link_downed="junk", port_rcv_errors="")
    c = judge(node_facts())
    assert c.status is Status.SKIP and "read as no number" in c.summary and "no error counter moved" not in c.summary
    assert "symbol_error: 'N/A'" in c.summary or "link_downed: 'junk'" in c.summary
    assert set(c.evidence["unreadable"]) == {f"mlx5_{i}/1" for i in range(4)}


def test_a_counter_that_moved_is_judged_beside_ports_that_read_as_no_number(fs):
    gpu_node(fs)
    fs.ib_counters("mlx5_3", 1, symbol_error="N/A")
    c = judge(node_facts(between=lambda: fs.ib_counters("mlx5_2", 1, link_downed=1)))
    assert c.status is Status.FAIL and c.evidence["unreadable"] == {"mlx5_3/1": {"symbol_error": "'N/A'"}}
