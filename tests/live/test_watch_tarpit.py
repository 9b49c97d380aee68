"""A tarpit rank costs watch one bound, not two (issue 63): a rank that answers the first look and then holds its
clock exchange open until the bound is not asked again for the second look, and is named."""

from __future__ import annotations

import time

from tests.live.test_watch_bounds import _honest, _register, _watch, store  # noqa: F401 - the fixture


def _tarpit(rank: int):
    honest = _honest(rank)

    def reply(req: dict) -> bytes:
        if req["kind"] == "all":
            return honest(req)
        time.sleep(120)  # holds the connection: no reply before watch's bound
        return b""
    return reply


def test_a_rank_that_holds_its_clock_exchange_is_not_asked_again(store, tmp_path):  # noqa: F811
    port, st, fakes = store
    _register(st, fakes, {0: _honest(0), 1: _tarpit(1), 2: _honest(2), 3: _honest(3), 4: _honest(4)})
    p, _peak, doc = _watch(port, tmp_path)
    kinds = [r["kind"] for r in fakes[1].asked]
    # its phases may be asked beside the first look (watch samples alongside it); never the second look's progress
    assert "all" in kinds and "progress" not in kinds, kinds
    unanswered = doc["nodes"] and next(c for c in doc["checks"] if c["id"] == "live.answered")
    assert "held its clock exchange open" in unanswered["evidence"]["unanswered"]["1"], unanswered
