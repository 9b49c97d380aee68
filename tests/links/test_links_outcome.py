"""From run_job's outcome to the report: the verdict every rank returned, or a partial one from streamed rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from ncclcheck.links.analyze import analyze
from ncclcheck.links.outcome import from_outcome


@dataclass
class Outcome:  # the fields of runner.JobOutcome that links reads
    world_size: int
    results: dict = field(default_factory=dict)
    emitted: list = field(default_factory=list)
    failures: list = field(default_factory=list)


def _verdict(dead=()):
    m = [[None, 1.0, 1.0], [1.0, None, 1.0], [1.0, 1.0, None]]
    res = analyze(m, size=1 << 20, dead=dead)
    return {"links": res.section, "checks": [c.to_json() for c in res.checks]}


def test_the_ranks_verdict_is_used_and_a_dead_nodes_own_failure_is_not_repeated():
    out = Outcome(6, results={0: _verdict(dead=[2]), 1: _verdict(dead=[2])},
                  failures=[{"rank": 4, "reason": "no result from node 2"}, {"rank": 5, "reason": "x"}])
    section, checks, partial = from_outcome(out, {}, ranks_per_node=2)
    assert section["dead"] == [2]
    assert [c.id for c in checks] == ["links.dead", "links.slow"]
    assert not partial


def test_other_rank_failures_are_named_first():
    out = Outcome(3, results={0: _verdict()}, failures=[{"rank": 1, "reason": "crashed"}])
    _, checks, partial = from_outcome(out, {})
    assert checks[0].id == "links.world" and "rank 1" in checks[0].summary and partial


def test_without_any_result_the_streamed_rows_make_a_partial_matrix():
    rows = [{"kind": "links_row", "rank": 0, "data": {"round": 0, "a": 0, "b": 1, "gbps_ab": 10.0, "gbps_ba": 10.0}},
            {"kind": "links_row", "rank": 0, "data": {"round": 0, "a": 2, "b": 3, "gbps_ab": 0.1, "gbps_ba": 10.0}}]
    section, checks, partial = from_outcome(Outcome(4, emitted=rows, failures=[{"rank": 0, "reason": "killed"}]),
                                            {"size": 1024})
    assert partial and section["size"] == 1024 and section["matrix_gbps"][2][3] == 0.1
    assert checks[0].id == "links.world"
