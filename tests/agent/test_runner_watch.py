"""The agent's watch over its local ranks: a rank that dies before the world formed stops the others at once."""

from __future__ import annotations

from dataclasses import replace

from ncclcheck.agent import runner
from ncclcheck.rendezvous.budget import FIXED


class _Proc:
    def __init__(self, exitcode):
        self.exitcode = exitcode

    def is_alive(self) -> bool:
        return self.exitcode is None

    def join(self, timeout=None) -> None:
        pass


class _Store:
    def __init__(self, ready: int):
        self.ready = ready

    def add(self, key: str, n: int) -> int:
        return self.ready if key.startswith("ready/") else 0


def test_a_rank_dead_before_the_world_formed_stops_the_one_waiting_for_it():
    # NCCL on one GPU with two ranks: rank 1 fails in set_device, rank 0 waits in its first collective for it.
    procs = {0: _Proc(None), 1: _Proc(1)}
    stop, why = runner._watch(procs, _Store(ready=1), stall_s=1e6, node=0, start_s=1e6,
                              budget=replace(FIXED, kill_grace_s=0.05))
    assert stop == [0] and why == "stopped: rank 1 exited before the world formed"


def test_a_rank_dead_after_the_world_formed_is_left_to_the_stall_bound():
    # Once every local rank joined, a job may outlive a dead rank (links names it): only the stall bound stops it.
    procs = {0: _Proc(None), 1: _Proc(1)}
    stop, why = runner._watch(procs, _Store(ready=2), stall_s=0.3, node=0, start_s=1e6,
                              budget=replace(FIXED, kill_grace_s=0.0))
    assert stop == [0] and why is None
