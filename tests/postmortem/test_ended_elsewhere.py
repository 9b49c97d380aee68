# ruff: noqa: E501  (the launchers' lines stay one line each, as they print them)
"""A failure whose cause is a rank or a node that left no error line of its own (issue 61): a peer that ended with
exit code 0 while the others still ran collectives (only the survivor's closed connection and torchrun's table that
lists no other failure show it), and a node Slurm lost (srun names it; the steps slurmstepd cancelled on the nodes
that survived are its consequence)."""

from __future__ import annotations

from ncclcheck.postmortem.diagnose import diagnose


def _causes(tmp_path, text: str) -> list:
    (tmp_path / "job.log").write_text(text)
    return diagnose([str(tmp_path / "job.log")]).extra["postmortem"]["causes"]


def _table(rows: str) -> str:
    return ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============================================================\ntrain.py FAILED\n"
            "------------------------------------------------------------\nFailures:\n" + rows +
            "------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n"
            "  time      : 2026-11-26_21:42:47\n  host      : node-a\n  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : 1 (pid: 28575)\n  error_file: <N/A>\n"
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
            "============================================================\n")


CLOSED = ("[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
          "[{peer}]:25008. This is typically caused by a remote worker crashing. Check the logs of the remote worker.\n")
RANK1_FAILED = ("[1]:\n  time      : 2026-11-26_21:42:47\n  host      : node-a\n  rank      : 1 (local_rank: 1)\n"
                "  exitcode  : -11 (pid: 28576)\n  error_file: <N/A>\n  traceback : Signal 11 (SIGSEGV) received by PID 28576\n")


def test_a_peer_on_the_same_host_that_closed_while_the_table_lists_no_other_failure_ended_cleanly(tmp_path):
    causes = _causes(tmp_path, CLOSED.format(peer="127.0.0.1") + _table("  <NO_OTHER_FAILURES>\n"))
    root = next(c for c in causes if c["cause"])
    assert root["kind"] == "early_exit" and "exit code 0" in root["text"] and "rank 0" in root["text"]
    assert "not in this text" not in " ".join(c["text"] for c in causes)


def test_a_peer_the_table_lists_as_crashed_is_the_cause_not_an_early_exit(tmp_path):
    causes = _causes(tmp_path, CLOSED.format(peer="127.0.0.1") + _table(RANK1_FAILED))
    assert "early_exit" not in {c["kind"] for c in causes}


def test_a_peer_on_another_host_may_have_failed_under_another_agent(tmp_path):
    causes = _causes(tmp_path, CLOSED.format(peer="198.18.0.12") + _table("  <NO_OTHER_FAILURES>\n"))
    assert "early_exit" not in {c["kind"] for c in causes}


NODE_FAILURE = """0: step 3 loss 2.2982
1: step 3 loss 2.2982
srun: error: Node failure on gpu-b
0: slurmstepd-gpu-a: error: *** STEP 1.0 ON gpu-a CANCELLED AT 2026-11-26T22:30:51 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
srun: error: gpu-a: task 0: Terminated
"""


def test_the_node_slurm_lost_is_the_cause_and_the_survivors_cancelled_step_its_consequence(tmp_path):
    causes = _causes(tmp_path, NODE_FAILURE)
    root = next(c for c in causes if c["cause"])
    assert root["kind"] == "node_failure" and root["text"].startswith("host gpu-b:")
    cancelled = next(c for c in causes if c["kind"] == "scheduler_cancelled")
    assert not cancelled["cause"] and "gpu-b" in cancelled["text"]


def test_a_step_cancelled_for_a_node_failure_srun_does_not_name_is_still_the_schedulers_cause(tmp_path):
    causes = _causes(tmp_path, "\n".join(ln for ln in NODE_FAILURE.splitlines() if "Node failure on" not in ln))
    assert next(c for c in causes if c["cause"])["kind"] == "scheduler_cancelled"
