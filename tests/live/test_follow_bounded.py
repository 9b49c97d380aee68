"""--follow's slowdowns are bounded (issue 63): a job watched for days whose slowdowns come and go keeps every open
one and the newest ended ones, and says how many it let go."""

from __future__ import annotations

from ncclcheck.live import straggle


def _section(rank):
    named = [] if rank is None else [{"unit": "rank", "rank": rank, "host": f"h{rank}", "kind": "late",
                                      "last_ns": 1}]
    return {"named": named, "links": [], "ranks": []}


def test_the_slowdown_list_is_trimmed_to_its_bound_keeping_the_open_one():
    f = straggle.Follow()
    n = straggle.MAX_SLOWDOWNS + 100
    for i in range(n):
        f.look(2 * i, _section(i % 7))
        f.look(2 * i + 1, _section(None))
    f.look(2 * n, _section(3))  # open at the end
    assert len(f.slowdowns) <= straggle.MAX_SLOWDOWNS + 1
    assert f.slowdowns[-1]["end_ns"] is None and f.section()["slowdowns_dropped"] == n - straggle.MAX_SLOWDOWNS
