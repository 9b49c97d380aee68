"""health's checks (pure, on fake facts), the bound on its own checks, and the drain rules: reason text, the prefix
rule, scontrol's output and its failures, the hostlist collector and the sweep's per-node verdicts."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ncclcheck.agent.launchers import expand_nodelist
from ncclcheck.checks.health import Expect, health_checks
from ncclcheck.config import Config, HealthConfig, SlurmActionConfig
from ncclcheck.health import drain
from ncclcheck.health.run import run_health
from ncclcheck.health.scontrol import Scontrol, ScontrolError, gres_gpus, parse_show_node, parse_show_nodes
from ncclcheck.hostranges import collect as compress_hostlist
from ncclcheck.links.analyze import analyze
from ncclcheck.sweep.verdict import BAD, HEALTHY, NO_RESULTS, SUSPECT, node_verdicts
from tests.fakefacts import facts, ib_one_active_one_down, iface, port

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def by_id(results, cid):
    found = [r for r in results if r.id == cid]
    assert found, [r.id for r in results]
    return found[0]


# ------------------------------------------------------------------------------------------------ the checks
def test_healthy_node_passes_every_expectation():
    f = facts(gpu={"count": 8, "source": "nvidia-smi", "reason": None},
              rdma={"devices": [{"name": "mlx5_0", "ports": [port(1, rate=400.0)]}]})
    res = health_checks(f, Expect(gpus=8, ifname="=eth0", mtu=1500, min_speed_mbps=100000, ib_rate_gbps=400))
    assert [r.status.value for r in res if r.id.startswith("health.")] == ["pass", "pass", "pass"], res
    assert all(r.node == 0 for r in res)


def test_a_missing_gpu_fails_against_the_expected_count():
    r = by_id(health_checks(facts(gpu={"count": 7, "source": "nvidia-smi", "reason": None}),
                            Expect(gpus=8, gpus_from="Gres=gpu:8")), "health.gpus")
    assert r.status.value == "fail" and "7 of 8" in r.summary and "Gres=gpu:8" in r.summary


def test_a_prologs_cuda_visible_devices_is_the_jobs_share_not_the_nodes_gpus():
    """Slurm gives a Prolog the job's GPUs in CUDA_VISIBLE_DEVICES (2 of 8); the node's Gres says 8: the node's GPUs
    are the driver's list (NVML and nvidia-smi ignore the variable), all 8 there, so the node is healthy, never
    "2 of 8 GPUs visible" and drained. A GPU missing from the driver's list still fails."""
    gh = {"source": "nvml", "gpus": [{"index": i, "bus_id": f"0000:{i:02x}:00.0"} for i in range(8)]}
    gpu = {"count": 2, "source": "nvidia-smi", "reason": None, "visible_devices": "0,1"}
    r = by_id(health_checks(facts(gpu=gpu, gpu_health=gh), Expect(gpus=8, gpus_from="Gres=gpu:8")), "health.gpus")
    assert r.status.value == "pass" and r.evidence["visible"] == 8 and r.evidence["visible_devices"] == "0,1", r
    gh7 = dict(gh, gpus=gh["gpus"][:7])
    r = by_id(health_checks(facts(gpu=gpu, gpu_health=gh7), Expect(gpus=8, gpus_from="Gres=gpu:8")), "health.gpus")
    assert r.status.value == "fail" and "7 of 8" in r.summary, r
    # without the variable the count is the process's, as it always was
    r = by_id(health_checks(facts(gpu=dict(gpu, visible_devices=None), gpu_health=gh), Expect(gpus=8)), "health.gpus")
    assert r.status.value == "fail" and "2 of 8" in r.summary, r


def test_gpus_not_counted_fail_when_gpus_are_expected():
    r = by_id(health_checks(facts(gpu={"unavailable": "nvidia-smi hung"}), Expect(gpus=8)), "health.gpus")
    assert r.status.value == "fail" and "nvidia-smi hung" in r.summary


@pytest.mark.parametrize("eth0, expect, words", [
    (iface("eth0", ipv4="10.0.0.1", running=False, up=False), Expect(ifname="=eth0"), "eth0 is down"),
    (iface("eth0", ipv4="10.0.0.1", mtu=1500), Expect(ifname="=eth0", mtu=9000), "eth0 MTU 1500, expected 9000"),
    (iface("eth0", ipv4="10.0.0.1", speed=25000), Expect(ifname="=eth0", min_speed_mbps=100000), "speed 25000"),
    (iface("eth0"), Expect(ifname="=eth0"), "no IPv4 address"),
    # NCCL's own choice, counting an interface that went down (so the down link is judged, not skipped)
    (iface("eth0", ipv4="10.0.0.1", running=False, up=False), Expect(), "eth0 is down"),
], ids=["down", "mtu", "speed", "no-address", "default-choice-down"])
def test_nccl_interface_problems_fail_naming_the_interface(eth0, expect, words):
    f = facts(interfaces=[iface("lo", "loopback", "127.0.0.1"), eth0])
    r = by_id(health_checks(f, expect), "health.nccl_interface")
    assert r.status.value == "fail" and words in r.summary, r.summary


def test_nccl_socket_ifname_in_the_environment_picks_the_interface():
    f = facts(interfaces=[iface("eth0", ipv4="10.0.0.1"), iface("ib0", "ipoib", "10.1.0.1", mtu=2044)],
              env={"NCCL_SOCKET_IFNAME": "=ib0"})
    assert by_id(health_checks(f, Expect(mtu=2044)), "health.nccl_interface").status.value == "pass"
    assert by_id(health_checks(f, Expect(mtu=1500)), "health.nccl_interface").status.value == "fail"


def test_no_interface_matching_the_given_name_fails():
    r = by_id(health_checks(facts(), Expect(ifname="=bond0")), "health.nccl_interface")
    assert r.status.value == "fail" and "no interface matches --ifname='=bond0'" in r.summary


def test_rdma_ports_down_or_slow_fail_with_an_expected_rate():
    r = by_id(health_checks(facts(rdma=ib_one_active_one_down()), Expect(ib_rate_gbps=400)), "health.ib_ports")
    assert r.status.value == "fail" and "mlx5_1:1" in r.summary
    slow = {"devices": [{"name": "mlx5_0", "ports": [port(1, rate=200.0)]}]}
    r = by_id(health_checks(facts(rdma=slow), Expect(ib_rate_gbps=400)), "health.ib_ports")
    assert r.status.value == "fail" and "below 400 Gb/s" in r.summary
    none_active = {"devices": [{"name": "mlx5_0", "ports": [port(1, state="DOWN")]}]}
    assert by_id(health_checks(facts(rdma=none_active), Expect()), "health.ib_ports").status.value == "fail"
    assert by_id(health_checks(facts(rdma=ib_one_active_one_down()), Expect()), "health.ib_ports").status.value \
        == "warn"


def test_a_hung_fact_read_fails_in_time_naming_the_group():
    release = threading.Event()

    def stuck(on_group):
        on_group("gpu")
        release.wait(30)
        return {}

    try:
        cfg = Config(command="health", health=HealthConfig(timeout_s=0.2))
        rep = run_health(cfg, "0", collect=stuck, scontrol=Scontrol(binary=""))
    finally:
        release.set()
    r = by_id(rep.checks, "health.timeout")
    assert r.status.value == "fail" and "stuck reading gpu" in r.summary and rep.exit_code == 1


# ------------------------------------------------------------------------------------------------ drain rules
@given(st.text(max_size=600), st.text(max_size=40))
def test_reason_is_one_printable_line_of_at_most_255_bytes(detail, cid):
    text = drain.reason(cid, detail)
    assert text.startswith("ncclcheck: ") and len(text.encode()) <= 255
    assert all(0x20 <= ord(c) <= 0x7e for c in text) and '"' not in text


def test_reason_keeps_a_hostile_interface_name_on_one_line():
    text = drain.reason("health.nccl_interface", 'eth0\nState=RESUME "x"\x1b[31m MTU 1500' + "y" * 400)
    assert "\n" not in text and "\x1b" not in text and text.endswith("...") and len(text) == 255


OURS = "ncclcheck: health.gpus: 7 of 8 GPUs visible"


@pytest.mark.parametrize("state, reason, failure, kind", [
    ("IDLE", None, OURS, "drain"),
    ("ALLOCATED", None, OURS, "drain"),  # a Prolog: drain now, the running job may finish
    ("IDLE+DRAIN", "admin: bad DIMM", OURS, "none"),  # another's reason: untouched
    ("IDLE+DRAIN", None, OURS, "none"),  # drained with no reason: untouched (NHC's rule too)
    ("DOWN*", "Not responding", OURS, "none"),
    ("IDLE+DRAIN", "NHC: check_hw_ib: No IB port is ACTIVE", OURS, "none"),
    ("IDLE+DRAIN", "ncclcheck: health.nccl_interface: eth0 is down", OURS, "drain"),  # ours: re-worded
    ("IDLE+DRAIN", OURS, OURS, "none"),  # ours, same words: nothing to do
    ("IDLE+DRAIN", OURS, None, "resume"),  # healthy again, drained by us
    ("MIXED+DRAIN", OURS, None, "resume"),
    ("IDLE+DRAIN", "admin: bad DIMM", None, "none"),  # healthy, but not ours to resume
    ("IDLE+DRAIN", None, None, "none"),
    ("DOWN+DRAIN", OURS, None, "none"),  # down as well: not ncclcheck's to bring back
    ("IDLE", None, None, "none"),
])
def test_prefix_rule(state, reason, failure, kind):
    assert drain.plan("h1", drain.NodeState("h1", state, reason), failure).kind == kind


def test_show_node_of_a_real_slurm_parses_state_reason_and_gres():
    st_ = parse_show_node((DATA / "show_node_drained.txt").read_text())
    assert (st_.name, st_.state, st_.reason, st_.gres) == ("h2", "IDLE+DRAIN", "admin: bad DIMM, ticket 4711", None)
    assert st_.drained and not st_.down and not drain.ours(st_.reason)
    every = parse_show_nodes((DATA / "show_node_all.txt").read_text())
    assert sorted(every) == ["h1", "h2"] and every["h1"].state == "IDLE" and every["h1"].reason is None


@pytest.mark.parametrize("gres, n", [("gpu:8", 8), ("gpu:h100:4(S:0-1),gpu:a100:4", 8), ("nic:2", None),
                                     (None, None), ("gpu:h100:8(S:0-1),nic:1", 8)])
def test_gres_gpus(gres, n):
    assert gres_gpus(gres) == n


def _scontrol_script(tmp_path, body: str) -> str:
    p = tmp_path / "scontrol"
    p.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    p.chmod(0o755)
    return str(p)


def test_scontrol_that_does_not_answer_is_bounded_and_named(tmp_path):
    sc = Scontrol(binary=_scontrol_script(tmp_path, "time.sleep(60)"), bound_s=0.3)
    with pytest.raises(ScontrolError, match="did not answer within 0.3 s"):
        sc.show_node("h1")


def test_scontrol_failing_or_missing_is_one_line(tmp_path):
    sc = Scontrol(binary=_scontrol_script(tmp_path, "print('slurm_load_node error: Unable to contact slurm "
                                                    "controller', file=sys.stderr); sys.exit(1)"))
    with pytest.raises(ScontrolError, match="exited 1: slurm_load_node error: Unable to contact"):
        sc.show_node("h1")
    with pytest.raises(ScontrolError, match="scontrol not found on PATH"):
        Scontrol(binary="").show_node("h1")


def test_scontrol_gets_an_argument_list_never_a_shell():
    seen = []

    def run(argv, **kw):
        seen.append((argv, kw.get("shell")))
        return subprocess.CompletedProcess(argv, 0, "", "")

    reason = drain.reason("health.nccl_interface", "eth0; rm -rf / $(reboot) `id`")
    Scontrol(binary="/usr/bin/scontrol", run=run).drain("h1", reason)
    assert seen == [(["/usr/bin/scontrol", "update", "NodeName=h1", "State=DRAIN", f"Reason={reason}"], False)]


# ------------------------------------------------------------------------------------------------ hostlists
@given(st.lists(st.from_regex(r"[a-z]{1,4}(0{0,2}[0-9]{1,3})?", fullmatch=True), max_size=30))
def test_hostlist_expands_back_to_the_same_names(names):
    text = compress_hostlist(names)
    assert sorted(expand_nodelist(text)) == sorted(set(names))


@pytest.mark.parametrize("names, text", [(["h1", "h2", "h3", "h5"], "h[1-3,5]"), (["gpu01", "gpu02", "gpu10"],
                                         "gpu[01-02,10]"), (["h9", "h10"], "h[9-10]"), ([], "")])
def test_hostlist_is_compact(names, text):
    assert compress_hostlist(names) == text


# ------------------------------------------------------------------------------------------------ sweep verdicts
def _matrix(n, slow=(), rate=1.0, slow_rate=0.05):
    return [[None if a == b else (slow_rate if a in slow or b in slow else rate) for b in range(n)]
            for a in range(n)]


def _section(m, **kw):
    return analyze(m, size=1 << 20, hosts=[f"h{i + 1}" for i in range(len(m))], **kw).section


def test_sweep_verdict_names_only_the_proven_slow_node():
    # what links' scale mode measures on 4 nodes: the pairing, then each member of the slow pair with 2 good nodes
    m = [[None] * 4 for _ in range(4)]
    for a, b in [(0, 3), (1, 2), (3, 1), (0, 2), (3, 2), (0, 1)]:
        v = 0.05 if 3 in (a, b) else 1.0
        m[a][b] = m[b][a] = v
    verdicts = node_verdicts(_section(m), ["h1", "h2", "h3", "h4"])
    assert [v.status for v in verdicts] == [HEALTHY, HEALTHY, HEALTHY, BAD]
    bad = verdicts[3]
    assert bad.drain_reason.startswith("ncclcheck: links.slow: measured 0.05 GB/s") and "expected >= " in \
        bad.drain_reason and len(bad.drain_reason) <= 255


def test_sweep_verdict_leaves_an_unpinned_slow_pair_as_suspects_and_dead_nodes_without_results():
    m = [[None] * 4 for _ in range(4)]
    m[0][1] = m[1][0] = 0.05  # one pairing round only: nobody re-tested, nothing proven
    m[2][3] = m[3][2] = 1.0
    verdicts = node_verdicts(_section(m), ["h1", "h2", "h3", "h4"])
    assert [v.status for v in verdicts] == [SUSPECT, SUSPECT, HEALTHY, HEALTHY]
    m = _matrix(3)
    m[2] = [None] * 3
    for row in m:
        row[2] = None
    assert node_verdicts(_section(m, dead=[2]), ["a", "b", "c"])[2].status == NO_RESULTS


def test_slurm_action_config_acts_for_drain_or_dry_run():
    assert not SlurmActionConfig().acts and SlurmActionConfig(drain=True).acts and SlurmActionConfig(dry_run=True).acts
