"""Every wait of a links measurement derives from its size, the bound it expects and --timeout (issue 32): a slow but
working direction is measured slow, never timed out by the bound a fast direction earned."""

from __future__ import annotations

import statistics
from datetime import timedelta
from types import SimpleNamespace

from ncclcheck.links import job
from ncclcheck.rendezvous.budget import Budget

T = 60.0


class Recorder(job.Channel):
    """The pair channel without a process group: records each op's bound (what gloo's wait(timeout) would get)."""

    def __init__(self, budget: Budget):
        import torch

        self.torch, self.budget, self.cuda, self.device = torch, budget, False, torch.device("cpu")
        self.td, self.limit_s, self.ops = timedelta(seconds=T), T, []

    def send(self, t) -> None:
        self.ops.append(("send", t.numel(), self.td.total_seconds()))

    def recv(self, t) -> None:
        self.ops.append(("recv", t.numel(), self.td.total_seconds()))
        if t.numel() == 1:
            t.fill_(1)  # the receiver's "go on"


def opts(budget: Budget) -> SimpleNamespace:
    return SimpleNamespace(size=1024, warmup=1, iters=2, timeout_s=T, budget_s=budget.links_direction_s(T),
                           stat=statistics.median, budget=budget, min_time_s=0.0, max_transfers=3, send_cap=3)


def test_the_second_direction_of_a_pair_gets_its_own_first_transfer_bound_not_the_fast_ones_3_s():
    # issue 32: 0 -> 2 fast (tightened to the 3 s floor), then 2 -> 0 on a 100 Mb/s link: "Timed out waiting 3000ms
    # for recv operation to complete" although --timeout 60.
    b = Budget(timeout_s=T)
    ch, o = Recorder(b), opts(b)
    job._send_side(ch, o, T)  # node 0 sends first: instantaneous here, so tightened to the floor
    assert ch.ops[-1][2] == b.links_first_op_floor_s
    ch.ops.clear()
    job._recv_side(ch, o, 300.0)  # then receives the slow direction, whose expected transfer is long
    first_data_recv = next(op for op in ch.ops if op[0] == "recv" and op[1] == o.size)
    assert first_data_recv[2] == 300.0, ch.ops


def test_a_directions_transfer_bound_comes_from_its_size_and_expected_bound_never_below_the_timeout():
    b = Budget(timeout_s=T)
    assert b.links_transfer_s(64 << 20, 0.0125, T) == T  # 5.4 s at 100 Mb/s: --timeout covers it
    assert b.links_transfer_s(1 << 30, 0.0125, T) == b.links_expect_factor * (1 << 30) / 0.0125e9  # 1 GiB: longer
    assert b.links_transfer_s(1 << 30, None, T) == T  # unknown bound: --timeout


def test_a_transfer_bound_from_the_store_is_validated_and_capped():
    b = Budget(timeout_s=T)
    o = opts(b)
    assert job._limit([120.0, 30.0], 0, o) == 120.0 and job._limit([120.0, 30.0], 1, o) == T  # never below T
    assert job._limit([1e12, "x"], 0, o) == b.links_transfer_cap_s(T) and job._limit([1e12, "x"], 1, o) == T
    assert job._limit(None, 0, o) == T and job._limit([float("nan"), True], 0, o) == T
    msg = {"pairs": [[0, 2]], "limits": {"0-2": [T, 300.0]}}
    assert job._pair_limits(msg, 2, 0) == [T, 300.0]
    assert job._round_s(msg, o) == b.links_round_s(300.0, o.budget_s)
