"""Progress travels from a spawned rank 0 through the store to the agent's observer; no live display on a pipe."""

from __future__ import annotations

import io

import pytest

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.agent.relay import StoreObserver, progress_journal, replay
from ncclcheck.agent.runner import run_job
from ncclcheck.config import Config, WorldConfig
from ncclcheck.render.progress import LineObserver, RichObserver, make_observer
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import JsonStore
from tests.jobs_for_tests import progress_job


def FakeStore():
    """A JsonStore over torch's in-memory HashStore: the real wrapper, no network."""
    import torch.distributed as dist

    return JsonStore(dist.HashStore())


class Recorder:
    def __init__(self) -> None:
        self.calls: list = []

    def start(self, total: int, label: str) -> None:
        self.calls.append(("start", total, label))

    def advance(self, label: str = "") -> None:
        self.calls.append(("advance", label))

    def stop(self) -> None:
        self.calls.append(("stop",))


def test_store_observer_events_replay_in_order_and_incrementally():
    st, rec = FakeStore(), Recorder()
    obs = StoreObserver(st)
    obs.start(2, "bench")
    obs.advance("1M")
    journal = progress_journal(st)
    replay(journal, rec)
    obs.advance("2M")
    obs.stop()
    done = replay(journal, rec)
    assert done == 4
    assert rec.calls == [("start", 2, "bench"), ("advance", "1M"), ("advance", "2M"), ("stop",)]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_spawned_rank_zero_progress_reaches_the_agents_observer():
    w = WorldConfig(nproc_per_node=2, timeout_s=60)
    rec = Recorder()
    out = run_job(w, detect_placement({}, w), progress_job, {"steps": 3}, budget=Budget.of(Config('t', world=w)),
                  observer=rec)
    assert out.ok, out.failures
    assert rec.calls[0] == ("start", 3, "steps")
    assert [c for c in rec.calls if c[0] == "advance"] == [("advance", "step 1"), ("advance", "step 2"),
                                                          ("advance", "step 3")]
    assert rec.calls[-1] == ("stop",)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_progress_only_on_a_terminal():
    # elsewhere plain flushed lines (issue 24: rows reach a pipe as they are measured), never a live display
    assert isinstance(make_observer(io.StringIO(), {}), LineObserver)
    assert isinstance(make_observer(FakeTty(), {"TERM": "dumb"}), LineObserver)
    assert isinstance(make_observer(FakeTty(), {}, launcher="mpi"), LineObserver)
    assert isinstance(make_observer(FakeTty(), {"TERM": "xterm"}), RichObserver)


def test_every_process_adopts_the_deciders_job_outcome():
    from dataclasses import replace

    from ncclcheck.agent.runner import JobOutcome, agree
    from ncclcheck.rendezvous.budget import FIXED

    quick = replace(FIXED, final_agreement_s=0.2)
    st = FakeStore()
    mine = JobOutcome(world_size=2, backend="gloo", results={0: {"x": 1}, 1: {"x": 2}})
    assert agree(st, mine, decider=True, budget=quick) is mine
    late = JobOutcome(world_size=2, backend="gloo", results={1: {"x": 2}})
    got = agree(st, late, decider=False, budget=quick)
    assert (got.results, got.failures, got.ok) == ({0: {"x": 1}, 1: {"x": 2}}, [], True)
    assert agree(FakeStore(), late, decider=False, budget=quick) is late  # nothing published: keep our own
