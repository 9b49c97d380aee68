"""scripts/responder_cost.py at a small size (its figures are docs/live.md's and docs/trust.md's): every phase trained,
each flood hit its target, unauthenticated requests refused with a key, and the watcher's own request answered while
nobody floods. No timing is judged here: the script prints the ratios."""

from __future__ import annotations

import os

import pytest

from ncclcheck_lab.responder_cost import CONTROL, PHASES, measure, render

pytestmark = pytest.mark.slow


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the trainer and the stranger each need a CPU")
def test_responder_cost_small_size_fills_its_fields():
    before = os.sched_getaffinity(0)
    res = measure(rounds=1, phase_s=0.4, key="token", threads=2)
    # it pins its caller for the flood, then gives it its CPUs back: left pinned, every later test of this pytest
    # worker, and what they started, ran on one CPU (a healthy links world once measured a pair 20x slow there)
    assert os.sched_getaffinity(0) == before
    rows = res["phases"]
    assert list(rows) == list(PHASES)
    for phase, row in rows.items():
        assert row["steps_per_s"] > 0 and row["control"] == CONTROL[phase] and row["rounds"] == 1, (phase, row)
        if "+" in phase:
            assert row["flood"]["connects_per_s"] > 0, (phase, row)
    for kind in ("requests", "blob", "rate"):  # with a key: refused, never answered (nor connected for)
        flooded = rows[f"armed+{kind}"]["flood"]
        assert flooded["replies_per_s"] == 0 and flooded["refusals_per_s"] > 0, (kind, flooded)
    assert rows["armed"]["watcher_asked"] == rows["armed"]["watcher_answered"] == 1, rows["armed"]
    text = render(res)
    assert "armed+requests" in text and "vs unarmed+requests: ratio" in text and "vs unarmed+rate: ratio" in text

