# ruff: noqa: E501  (log lines stay one line each, as launchers and NCCL write them)
"""Launcher prefixes, torchrun's failure table and the failure-message table, on real output: our fixtures'
torchrun logs, and NCCL lines in the shapes public NVIDIA/nccl and pytorch issue threads show (no GPU here to make
NCCL fail; docs/gpu-record holds what a GPU run captured)."""

from __future__ import annotations

import os

import pytest

from ncclcheck.nccl import failures
from ncclcheck.nccl.debuglog import split_by_rank, split_prefix
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.postmortem.launcher import parse_failure_table
from tests.conftest import run_cli

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


@pytest.mark.parametrize("line, rank, rest", [
    ("[rank3]: RuntimeError: boom", 3, "RuntimeError: boom"),
    ("12: node017:511:540 [0] NCCL INFO x", 12, "node017:511:540 [0] NCCL INFO x"),
    (" 3: hello", 3, "hello"),
    ("[1,5]<stderr>: NCCL WARN y", 5, "NCCL WARN y"),
    ("[default3]:local rank output", None, "local rank output"),  # torchrun --tee's LOCAL rank: no global one
    ("plain line", None, "plain line"),
    ("RuntimeError: boom", None, "RuntimeError: boom"),
    # Open MPI 5, PMIx's host form, a tag whose <stderr> a web page ate, MPICH, srun under a hetjob
    ("[1,5]<stderr>: x", 5, "x"), ("[1,5][node-b:4242]<stdout>: x", 5, "x"), ("[1,5]: x", 5, "x"),
    ("[5] x", 5, "x"), ("P1  5: x", 5, "x"),
    # time stamps, journald, docker, kubectl, Ray, SkyPilot, Lightning, pdsh, lost colour codes: no rank of their own
    ("2024-04-02T10:21:55.104331857Z stdout F [rank2]: RuntimeError: boom", 2, "RuntimeError: boom"),
    ("Apr  2 10:21:54 gpu-node-02 kernel: Out of memory: Killed process 51232 (python)", None,
     "Out of memory: Killed process 51232 (python)"),
    ("[pod/job-worker-1/pytorch] [rank9]: x", 9, "x"),
    ("(RayTrainWorker pid=4242, ip=198.18.0.7) [rank3]: x", 3, "x"),
    ("[36m(RayTrainWorker pid=4242)[0m x", None, "x"),
    ("(worker1, rank=1, pid=4242, ip=198.18.0.7) x", None, "x"),
    ("[rank: 1] Seed set to 42", None, "Seed set to 42"),
    ("node-b: [rank8]: Traceback (most recent call last):", 8, "Traceback (most recent call last):"),
    ("trn-07: node-b:1:2 [0] NCCL INFO x", None, "node-b:1:2 [0] NCCL INFO x"),
    ("3: [rank11]: x", 11, "x"),  # srun -l torchrun: srun's label is the node's task, torch's the global rank
    ("[2024-04-02 10:21:55,104] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1", None,
     "[INFO] [launch.py:319:sigkill_handler] Killing subprocess 1"),
])
def test_launcher_prefixes(line, rank, rest):
    assert split_prefix(line) == (rank, rest)


def test_unprefixed_nccl_lines_follow_the_rank_their_process_stated():
    text = ("gpu01:77:77 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
            "gpu01:77:90 [1] NCCL INFO comm 0x5 rank 9 nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0\n"
            "gpu01:77:90 [1] misc/socket.cc:484 NCCL WARN socketProgress: Connection closed by remote peer gpu02<4312>\n"
            "launcher says bye\n")
    parts = split_by_rank(text)
    assert len(parts[9]) == 3 and parts[None] == ["launcher says bye"]


def test_failure_table_of_a_real_sigkill():
    with open(os.path.join(FIX, "kill", "launcher.log")) as f:
        rows = {r["rank"]: r for r in parse_failure_table(f.read())}
    assert rows[3]["signal"] == "SIGKILL" and rows[3]["exitcode"] == -9 and rows[3]["first"]
    assert rows[0]["exitcode"] == 1 and rows[0]["host"] == "localhost" and rows[0]["local_rank"] == 0


def test_failure_table_under_srun_label():
    with open(os.path.join(FIX, "kill", "launcher.log")) as f:
        labelled = "".join(f"1: {ln}" for ln in f)
    rows = {r["rank"]: r for r in parse_failure_table(labelled)}
    assert rows[3]["signal"] == "SIGKILL"


@pytest.mark.parametrize("line, cls, cause", [
    ("gpu7:1:1 [0] bootstrap.cc:64 NCCL WARN Bootstrap : no socket interface found", "no_socket_interface", True),
    ("gpu7:1:1 [0] init.cc:733 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000", "duplicate_gpu", True),
    ("gpu7:1:9 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4242> with error 12, opcode 0, len 0, vendor err 129", "ib_completion_error", True),
    ("gpu7:1:9 [3] include/shm.h:28 NCCL WARN Error: failed to extend /dev/shm/nccl-Xy to 9637892 bytes", "shm_exhausted", True),
    # NCCL's result alone: a wrapper of the WARN that names the call (the middle verdict where that WARN is absent)
    ("torch.distributed.DistBackendError: NCCL error in: ../init.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details)", "unhandled_system_error", False),
    ("gpu7:1:9 [3] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory", "memlock", True),
    ("[rank2]:[E1123 00:18:50 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600056 milliseconds before timing out.", "watchdog_timeout", False),
    ("gpu7:1:9 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu08<50412>", "peer_closed", False),
    ("gpu7:1:9 [3] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.9<45321> failed : Connection refused", "connection_refused", True),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.", "init_timeout", True),
    ("node-b:921:1146 [2] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.120.0.31<45321> failed : No route to host", "no_route", True),
])
def test_failure_table_classes(line, cls, cause):
    got = failures.classify(line)
    assert got is not None and got.id == cls and got.cause is cause and got.fix


def test_every_class_has_a_fix_and_one_id():
    assert len(failures.BY_ID) == len(failures.TABLE) + len(failures.READ_ELSEWHERE)
    assert all(c.fix and c.what for c in failures.BY_ID.values())


def test_watchdog_seqnum_is_read():
    line = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE"
    assert failures.seq_of(line) == 1234 and failures.optype_of(line) == "allreduce"


def test_nccl_log_alone_names_the_earliest_cause(tmp_path):
    (tmp_path / "out.log").write_text(
        "[rank1]:gpu02:5:5 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
        "[rank0]:gpu01:7:7 [0] NCCL WARN Bootstrap : no socket interface found\n"
        "[rank1]:gpu02:5:9 [1] NCCL WARN socketProgress: Connection closed by remote peer gpu01<5001>\n")
    rep = diagnose([str(tmp_path)])
    assert rep.checks[0].evidence["kind"] == "no_socket_interface" and rep.checks[0].evidence["ranks"] == [0]
    assert "NCCL_SOCKET_IFNAME" in rep.checks[0].fix


def test_recommend_postmortem_env_arms_the_job(tmp_path):
    p = run_cli("recommend", "--postmortem", str(tmp_path / "pm"), "--format", "env", timeout=180)
    assert p.returncode in (0, 1), p.stderr
    out = p.stdout
    for line in ("export TORCH_FR_BUFFER_SIZE=", "export TORCH_NCCL_DUMP_ON_TIMEOUT=1", "export NCCL_DEBUG=INFO",
                 "export NCCL_DEBUG_SUBSYS=INIT,NET", f"export NCCL_DEBUG_FILE={tmp_path}/pm/nccl.%h.%p.log",
                 f"export TORCH_FR_DUMP_TEMP_FILE={tmp_path}/pm/nccl_trace_rank_", "export TORCH_NCCL_ENABLE_TIMING=1"):
        assert line in out, out
    # torch 2.13 (installed) reads the TORCH_FR_* names and warns on every rank for the old spellings
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in out and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in out


def test_the_saved_captures_name_the_unreachable_peer():
    """tests/data/nccl: two hosts' NCCL_DEBUG files (shapes from NVIDIA/nccl threads); node-b cannot route."""
    data = os.path.join(os.path.dirname(FIX), "..", "data", "nccl")
    rep = diagnose([os.path.join(data, "nccl.node-a.511"), os.path.join(data, "nccl.node-b.924")])
    first = rep.checks[0]
    assert first.status.value == "fail" and first.evidence["kind"] == "no_route" and "node-b" in first.summary
    transport = next(c for c in rep.checks if c.id == "postmortem.transport")
    assert transport.evidence["ranks"]["0"]["net"] == "IB" and transport.evidence["ranks"]["0"]["interfaces"] == ["eth0"]


@pytest.mark.parametrize("first, second, kind", [
    # a terminal's wrap mid-word: the watchdog's words split, the rank's prefix on the first part only
    ("[rank3]:[E1120 10:11:02.423456789 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog "
     "caught collective oper", "ation timeout: WorkNCCL(SeqNum=1204, OpType=ALLREDUCE, NumelIn=262144, "
     "NumelOut=262144, Timeout(ms)=600000) ran for 600040 milliseconds before timing out.", "watchdog_timeout"),
    # a web page's wrap at a space: the NCCL WARN's known words only whole across the two lines
    ("gpu-node-03:2231:2290 [1] misc/shmutils.cc:85 NCCL WARN Error while creating shared memory",
     "segment /dev/shm/nccl-AbC (size 9637888), error: No space left on device (28)", "shm_exhausted"),
])
def test_a_wrapped_line_is_read_as_one(tmp_path, first, second, kind):
    (tmp_path / "job.log").write_text(f"{first}\n{second}\n")
    rep = diagnose([str(tmp_path / "job.log")])
    causes = rep.extra["postmortem"]["causes"]
    mine = next(c for c in causes if c["kind"] == kind)
    assert first.split("]")[-1].strip()[:20] in mine["line"] and second[:20] in mine["line"]
    assert kind != "watchdog_timeout" or mine["ranks"] == [3]


def test_a_line_cut_into_several_at_a_fixed_width_is_read_whole(tmp_path):
    """A log collector's fixed-width cut (Ray's memory monitor, 116 columns): the node's address is on the third line
    of the message; the lines after the message are not part of it."""
    msg = ("(raylet) node_manager.cc:3007: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
           "crashed due to other reasons at node (ID: 5c1e07a9d3f24b81e6b7730d4e9f1c0a2d85b3e6f41a07c9d2e5b184, IP: "
           "198.18.3.26) over the last time period. To see more information about the Workers killed on this node, "
           "use `ray logs raylet.out -ip 198.18.3.26`")
    cut = [msg[i:i + 72] for i in range(0, len(msg), 72)]  # the first part alone names nothing
    (tmp_path / "job.log").write_text("\n".join([*cut, "Traceback (most recent call last):", "done"]) + "\n")
    causes = diagnose([str(tmp_path / "job.log")]).extra["postmortem"]["causes"]
    mine = next(c for c in causes if c["kind"] == "oom_killed")
    assert "IP: 198.18.3.26)" in mine["line"] and "Traceback" not in mine["line"]


def test_a_progress_bars_redraw_is_not_the_rest_of_the_line_before(tmp_path):
    bar = "Preparing test set...:  45%|####4     | 30/67 [27:15<23:13, 37.65s/it]"
    stop = "slurmstepd: error: *** STEP 48211.0 ON gpu-node-07 CANCELLED AT 2024-04-23T12:18:08 DUE TO TIME LIMIT ***"
    (tmp_path / "job.log").write_text(f"{bar}\n{stop}\n")
    causes = diagnose([str(tmp_path / "job.log")]).extra["postmortem"]["causes"]
    assert next(c for c in causes if c["cause"])["line"] == stop
