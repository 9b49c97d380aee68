# ruff: noqa: E501  (torch's lines stay one line each, as it prints them)
"""An unarmed job's log (no dump): the rank that never entered a collective, ranks that diverged, a stall every rank
entered, named from torch's watchdog lines alone (issue 61), in torch 2.0's format ("[E ProcessGroupNCCL.cpp:828]
[Rank N] Watchdog caught ...") and 2.13's ("[rankN]:[E1120 hh:mm:ss.nnnnnnnnn ...] [PG ID 0 PG GUID 0(default_pg) Rank
N] ...", " failure detected by watchdog at work sequence id: ..."), and gloo's timeouts, which number nothing."""

from __future__ import annotations

from ncclcheck.postmortem.diagnose import diagnose


def _root(tmp_path, text: str):
    (tmp_path / "job.log").write_text(text)
    rep = diagnose([str(tmp_path / "job.log")])
    return rep, rep.checks[0], rep.extra["postmortem"]["causes"][0]


def _v20(rank: int, seq: int, op: str = "ALLREDUCE", numel: int = 262144) -> str:
    return (f"[E ProcessGroupNCCL.cpp:828] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            f"OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.\n")


def _v213(rank: int, seq: int, enq: int, op: str = "ALLREDUCE", numel: int = 262144) -> str:
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    return (f"[rank{rank}]:[E1120 10:11:02.123456789 ProcessGroupNCCL.cpp:632] {pg} Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600040 milliseconds before timing out.\n"
            f"[rank{rank}]:[E1120 10:11:02.123556789 ProcessGroupNCCL.cpp:2271] {pg}  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {enq}, last completed work: {seq - 1}\n")


NRANKS = "gpu-node-0{h}:4{r}11:4{r}12 [{r}] NCCL INFO comm 0x5a3c2e00 rank {r} nranks 4 cudaDev {r} busId 1a000 - Init COMPLETE\n"


def test_torch_2_0_the_rank_missing_from_the_timeout_reports_never_entered(tmp_path):
    init = "".join(NRANKS.format(h=1 + r // 2, r=r) for r in range(4))
    rep, first, root = _root(tmp_path, init + _v20(0, 41) + _v20(1, 41) + _v20(3, 41))
    assert rep.exit_code == 1 and first.evidence["kind"] == "never_entered" and first.evidence["ranks"] == [2]
    assert "all_reduce #41 of default_pg" in first.summary


def test_torch_2_13_a_rank_behind_in_its_own_last_enqueued_work_never_entered(tmp_path):
    dump = ("[rank2]:[E1120 10:11:05.323556789 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] Received a dump "
            "signal due to a collective timeout from rank 0 and we will try our best to dump the debug info. Last enqueued NCCL "
            "work: 1203, last completed NCCL work: 1203.\n")
    rep, first, root = _root(tmp_path, _v213(0, 1204, 1204) + _v213(1, 1204, 1204) + _v213(3, 1204, 1204) + dump)
    assert first.evidence["kind"] == "never_entered" and first.evidence["ranks"] == [2] and "#1203" in first.summary


def test_torch_2_0_ranks_in_different_ops_at_one_sequence_number_diverged(tmp_path):
    rep, first, root = _root(tmp_path, _v20(0, 812) + _v20(1, 812, "ALLGATHER") + _v20(2, 812) + _v20(3, 812))
    assert first.evidence["kind"] == "collective_mismatch" and first.evidence["ranks"] == [1]
    assert "all_gather #812" in first.summary and "all_reduce #812" in first.summary


def test_torch_2_13_one_rank_with_other_element_counts_is_a_size_mismatch(tmp_path):
    rep, first, root = _root(tmp_path, _v213(0, 640, 640) + _v213(1, 640, 640, numel=262400) + _v213(2, 640, 640))
    assert first.evidence["kind"] == "collective_mismatch" and first.evidence["ranks"] == [1] and "262400" in first.summary


def test_every_rank_in_the_collective_it_enqueued_is_a_stall_no_rank_is_blamed(tmp_path):
    rep, first, root = _root(tmp_path, "".join(_v213(r, 12, 12) for r in range(4)))
    assert rep.exit_code == 1 and first.evidence["kind"] == "job_failed" and "the cause is not in this text" in first.summary
    assert "no rank skipped it" in first.summary and [h["id"] for h in root["hypotheses"]][:2] == ["network", "p2p"]


def test_a_job_of_one_rank_its_launch_command_says_waits_on_its_own_gpu(tmp_path):
    text = "== torchrun --standalone --nproc-per-node 1 train.py\n" + _v213(0, 6, 6)
    rep, first, root = _root(tmp_path, text)
    assert first.evidence["kind"] == "not_started" and "own GPU work" in first.summary


def test_gloo_timeouts_number_nothing_the_silent_rank_is_still_named(tmp_path):
    t = "[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete\n"
    table = "".join(f"[{r}]:\n  rank      : {r} (local_rank: {r})\n  exitcode  : {1 if r != 2 else -15} (pid: 10{r})\n" for r in (0, 1, 2, 3))
    text = "".join(t.format(r=r) for r in (0, 1, 3)) + "Root Cause (first observed failure):\n" + table
    rep, first, root = _root(tmp_path, text)
    assert first.evidence["kind"] == "never_entered" and first.evidence["ranks"] == [2]
