"""links_job on a real multi-process gloo world over loopback (4 ranks as 4 nodes unless said otherwise)."""

from __future__ import annotations

import pytest

from ncclcheck.config import Config
from ncclcheck.rendezvous.budget import Budget
from tests.dist_harness import run_world

JOB = "ncclcheck.links.job:links_job"
FAULTY = "tests.links_faults:links_job_with_faults"  # links_job with injected slow or dying peers
# A shared 2-core test machine time-slices the ranks (a transfer now and then waits a 4 ms scheduler tick), so the
# tests take the best of a few iterations and a wide relative margin; the faults they inject are 100x, not 2x.
BASE = {"size": 1 << 20, "iters": 5, "stat": "best", "relative": 0.05}

pytestmark = pytest.mark.slow


def _rank0(run):
    assert not run.errors, run.errors
    assert 0 in run.results, (run.exitcodes, run.errors)
    return run.results[0]


def _slow(res):
    return [c for c in res["checks"] if c["id"] == "links.slow" and c["status"] == "fail"]


def test_healthy_full_schedule_fills_the_matrix_and_flags_nothing():
    run = run_world(JOB, BASE, 4, timeout_s=10)
    res = _rank0(run)
    sec = res["links"]
    m = sec["matrix_gbps"]
    assert all((m[a][b] is None) == (a == b) for a in range(4) for b in range(4))
    assert sec["slow"] == [] and sec["slow_nodes"] == [] and sec["dead"] == []
    # 3 rounds of 2 simultaneous pairs; on a loaded machine a pair a scheduler hiccup slowed is measured once more in a
    # 4th round (full mode's re-test of suspects) and cleared: the product's answer to noise, not a fault
    assert [len(r) for r in sec["rounds"][:3]] == [2, 2, 2], sec["rounds"]
    first = {tuple(sorted(p)) for r in sec["rounds"][:3] for p in r}
    assert all(tuple(sorted(p)) in first for r in sec["rounds"][3:] for p in r), (sec["rounds"], m)
    # ranks of one machine: their traffic crosses loopback, which bounds nothing (links.efficiency says so)
    assert {c["id"]: c["status"] for c in res["checks"]} == {"links.slow": "pass", "links.efficiency": "skip"}
    # every rank returns the same verdict; rows were streamed as the rounds finished
    assert all(run.results[r]["links"] == sec for r in range(4))
    rows = [d for _, kind, d in run.emits if kind == "links_row"]
    assert sorted({(d["a"], d["b"]) for d in rows}) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert len(rows) == sum(len(r) for r in sec["rounds"])  # a row per pair measured, re-tests too
    assert all(d["gbps_ab"] and d["gbps_ba"] and d["error"] is None for d in rows)


def test_slow_transmit_on_rank_2_names_node_2_only():
    run = run_world(FAULTY, {**BASE, "faults": {"slow_rank": 2, "delay_s": 0.1}}, 4, timeout_s=10)
    res = _rank0(run)
    assert res["links"]["slow_nodes"] == [2] and res["links"]["slow"] == []
    [c] = _slow(res)
    assert c["node"] == 2 and "outgoing" in c["detail"]


def test_slow_path_between_two_nodes_names_the_link_not_a_node():
    run = run_world(FAULTY, {**BASE, "faults": {"slow_link": [1, 3], "delay_s": 0.1}}, 4, timeout_s=10)
    sec = _rank0(run)["links"]
    assert sec["slow_nodes"] == [] and [(s["a"], s["b"]) for s in sec["slow"]] == [(1, 3)]


def test_killed_node_is_named_and_the_others_finish_within_the_timeout():
    run = run_world(FAULTY, {**BASE, "faults": {"exit_rank": 2, "exit_round": 1}}, 4, timeout_s=10, bound_s=60)
    res = _rank0(run)
    sec = res["links"]
    assert sec["dead"] == [2] and sec["dead_round"] == {"2": 1}
    assert [c["node"] for c in res["checks"] if c["id"] == "links.dead"] == [2]
    assert run.exitcodes[2] == 17 and all(run.exitcodes[r] == 0 for r in (0, 1, 3))
    assert sorted(run.results) == [0, 1, 3]
    # the survivors did not sit out a timeout per remaining round: the partner saw the connection close
    assert sec["wall_s"] < 10
    # pairs after the death were skipped, not attempted; node 2's row is empty apart from what it sent before dying
    assert all(2 not in p for rnd in sec["rounds"][2:] for p in rnd)
    rows = [d for _, kind, d in run.emits if kind == "links_row" and 2 in (d["a"], d["b"])]
    assert rows and all(d["error"] for d in rows if d["gbps_ab"] is None or d["gbps_ba"] is None)


def test_quick_mode_retests_the_slow_pair_members_and_names_the_node():
    # 0.4 s per send: node 1 must be far below the healthy pair of round 1 (under a parallel suite on two cores a
    # healthy 1 MiB pair once measured low enough that a 0.1 s delay was within --relative of it: no suspect, no
    # re-test)
    payload = {**BASE, "rounds": "quick", "quick_rounds": 1, "seed": 3}
    run = run_world(FAULTY, {**payload, "faults": {"slow_rank": 1, "delay_s": 0.4}}, 4, timeout_s=10)
    sec = _rank0(run)["links"]
    assert sec["mode"] == "quick" and len(sec["rounds"]) >= 2  # one random round, then re-tests
    assert sec["slow_nodes"] == [1] and sec["slow"] == []


def test_only_local_rank_0_of_each_node_carries_traffic():
    run = run_world(JOB, {**BASE, "by": "node"}, 6, nproc_per_node=2, timeout_s=10)
    sec = _rank0(run)["links"]
    assert sec["unit"] == "node" and len(sec["matrix_gbps"]) == 3
    # 3 nodes: one pair + a bye per round (then, only if loopback noise made a suspect, its re-test: issue 13)
    assert sorted(len(r) for r in sec["rounds"][:3]) == [1, 1, 1]
    assert all(len(r) == 1 for r in sec["rounds"][3:])
    assert {run.results[r]["role"] for r in (1, 3, 5)} == {"idle"}
    assert all(run.results[r]["links"] == sec for r in range(6))


def test_node_dying_between_rounds_is_caught_by_its_heartbeat_not_the_timeout():
    # dies before its pair connects: no partner sees a connection close, and the op timeout is a long 30 s
    faults = {"exit_rank": 3, "exit_round": 1, "exit_at": "start"}
    run = run_world(FAULTY, {**BASE, "heartbeat_s": 3.0, "faults": faults}, 4, timeout_s=30, bound_s=90)
    sec = _rank0(run)["links"]
    assert sec["dead"] == [3] and sec["dead_round"] == {"3": 1}
    assert sec["wall_s"] < 20
    assert sorted(run.results) == [0, 1, 2]


def test_through_the_runner_as_the_cli_runs_it():
    from ncclcheck.agent.launchers import detect_placement
    from ncclcheck.agent.runner import run_job
    from ncclcheck.config import WorldConfig
    from ncclcheck.links.job import links_job

    w = WorldConfig(nproc_per_node=3, timeout_s=60)
    out = run_job(w, detect_placement({}, w), links_job, {**BASE, "by": "rank"}, budget=Budget.of(Config('t', world=w)))
    assert out.ok, out.failures
    sec = out.results[0]["links"]
    assert sec["unit"] == "rank" and len(sec["matrix_gbps"]) == 3 and sec["slow"] == []
    assert sum(e["kind"] == "links_row" for e in out.emitted) == 3


# --------------------------------------------------------------------- the scalable mode (--rounds scale, issue 12)
SCALE = {**BASE, "rounds": "scale"}  # seed 0: round 1 pairs (0, 2), (1, 4), (3, 5) of 6 ranks; (1, 2), (3, 4) of 5


def _first_pair_of_round_1(n: int) -> list:
    from ncclcheck.links.schedule import scale_first_round

    return list(scale_first_round(n, 0)[0][0])


def test_scale_mode_names_a_slow_node_in_three_rounds():
    run = run_world(FAULTY, {**SCALE, "faults": {"slow_rank": 1, "delay_s": 0.1}}, 6, timeout_s=20)
    sec = _rank0(run)["links"]
    assert sec["mode"] == "scale" and sec["slow_nodes"] == [1] and sec["slow"] == [], sec
    # the pairing, then the members of the slow pair against two good partners each; no confirming round needed
    assert len(sec["rounds"]) == 3
    partners = {b if a == 1 else a for rd in sec["rounds"][1:] for a, b in rd if 1 in (a, b)}
    assert len(partners) == 2 and 4 not in partners


def test_scale_mode_names_a_slow_path_after_confirming_it():
    a, b = _first_pair_of_round_1(6)
    run = run_world(FAULTY, {**SCALE, "faults": {"slow_link": [a, b], "delay_s": 0.1}}, 6, timeout_s=20)
    sec = _rank0(run)["links"]
    assert sec["slow_nodes"] == [] and [(s["a"], s["b"]) for s in sec["slow"]] == [(a, b)], sec
    assert len(sec["rounds"]) == 4 and sec["rounds"][-1] == [[a, b]]  # the pair itself, measured again
    assert not sec["slow"][0]["ambiguous"]


def test_scale_mode_does_not_blame_a_link_for_a_passing_hiccup():
    # The pair is slow in round 1 only: both members pass their re-tests and the pair itself measures normal when
    # confirmed, so nothing is named (before the confirming round this named the link).
    a, b = _first_pair_of_round_1(6)
    faults = {"slow_link": [a, b], "delay_s": 0.1, "slow_rounds": [0]}
    run = run_world(FAULTY, {**SCALE, "faults": faults}, 6, timeout_s=20)
    sec = _rank0(run)["links"]
    assert sec["slow_nodes"] == [] and sec["slow"] == [], sec
    # the hiccup's pair is confirmed in a last round; on a loaded machine another pair that read slow in round 1 may
    # be confirmed beside it (CI once: [[0, 2], [3, 5]]), and neither is named
    assert len(sec["rounds"]) == 4 and [a, b] in sec["rounds"][-1], sec["rounds"]


def test_scale_mode_measures_the_node_that_sat_out_the_pairing():
    run = run_world(JOB, SCALE, 5, timeout_s=20)
    sec = _rank0(run)["links"]
    m = sec["matrix_gbps"]
    assert [x for x in range(5) if all(m[x][y] is None for y in range(5))] == [], m  # every node has a link
    # node 0 sat out round 1; it meets two good partners (two, so that a slow one would be named, not guessed at)
    assert sorted(p for rd in sec["rounds"][1:] for p in rd) == [[0, 1], [0, 2]]
    assert len(sec["rounds"]) == 3 and sec["slow"] == [] and sec["slow_nodes"] == []


def test_a_passing_stall_on_short_transfers_is_not_a_slow_link():
    """Stop 39's CI flake, staged: a healthy direction whose first transfers stalled on a busy CPU (here 3 sends of
    1 -> 3, warmup included, wait 100 ms; then it is as fast as any). Timed over exactly --iters 3 transfers of ~1 ms
    (--min-time 0) the median is a stall and link 1-3 is called slow; timed for --min-time (0.25 s by default) the
    median is the link, and nothing is slow."""
    noisy = {"size": 1 << 20, "iters": 3, "stat": "median", "relative": 0.05}
    faults = {"slow_link": [1, 3], "delay_s": 0.1, "hiccups": 3}
    # what the floor removes is real without it: link 1-3 slow (or node 1 or 3, where the machine's load slowed its
    # other directions too). A precondition, not the claim: asked up to 3 times, since CI once read nothing slow at
    # all (another direction's stall on the loaded machine raised the reference)
    for _ in range(3):
        short = _rank0(run_world(FAULTY, {**noisy, "min_time_s": 0, "faults": faults}, 4, timeout_s=10))["links"]
        if (1, 3) in [(s["a"], s["b"]) for s in short["slow"]] or {1, 3} & set(short["slow_nodes"]):
            break
    else:
        raise AssertionError({k: short.get(k) for k in ("slow", "slow_nodes", "tx_us", "rounds")})
    timed = _rank0(run_world(FAULTY, {**noisy, "faults": faults}, 4, timeout_s=10))["links"]
    assert timed["slow"] == [] and timed["slow_nodes"] == [], timed
    assert 3 < len(timed["tx_us"]["1->3"]) <= 256  # more than --iters transfers, at most the cap
    assert len(short["tx_us"]["1->3"]) == 3
    # the report says how each was timed (the header's "x 3" is a least count under --min-time)
    assert short["min_time_s"] == 0 and timed["min_time_s"] > 0 and timed["iters"] == 3


@pytest.mark.parametrize("command", ["links", "sweep"])
def test_min_time_reaches_the_job_and_a_bad_one_is_a_usage_error(command):
    from ncclcheck.cli import build_parser, config_from_args
    from ncclcheck.config import UsageError
    from ncclcheck.links.job import payload_from_config

    def payload(*flags):
        return payload_from_config(config_from_args(build_parser().parse_args([command, *flags]), env={}).links)

    assert payload("--min-time", "0")["min_time_s"] == 0 and payload("--min-time", "2.5")["min_time_s"] == 2.5
    assert payload()["min_time_s"] is None  # the Budget's links_min_time_s, in the job
    for bad in ("-1", "61", "nan", "x"):
        with pytest.raises(UsageError):
            payload("--min-time", bad)
