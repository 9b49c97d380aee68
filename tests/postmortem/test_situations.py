# ruff: noqa: E501  (a log line stays one line, as the program prints it)
"""Issue 74: read the situation a log describes, not one message. One test per class of miss the issue found on logs
nobody here had seen, each on text in the shape the programs print (their format strings, cited beside each).

The texts name hosts (node-a, node-b, pod-a) and addresses of 198.18.0.0/15 only as words of a log: diagnose reads
them and never looks a name up or connects anywhere (tests/conftest.py's guards hold every in-process test to that,
and test_reading_a_log_never_reaches_for_the_network holds the CLI to it)."""

from __future__ import annotations

import pytest

from ncclcheck.postmortem.diagnose import diagnose
from tests.conftest import run_cli

H = "node-a:2001:2090 [0]"
B = "node-b:3001:3090 [0]"


def root_of(tmp_path, text: str, name: str = "job.log") -> tuple:
    """(exit code, root_cause check as JSON) of diagnose on one pasted text."""
    (tmp_path / name).write_text(text)
    rep = diagnose([str(tmp_path / name)])
    root = next(c for c in rep.checks if c.id == "postmortem.root_cause")
    return rep.exit_code, root


def failed_as(tmp_path, text: str, kind: str) -> None:
    """diagnose on one pasted text fails (exit 1) with a root cause of this kind."""
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == kind, root.summary


# --- 1. one message is not one fixed story: what else the log says decides ------------------------------------------

def test_an_address_of_no_family_beside_two_nccl_versions_is_the_versions(tmp_path):
    """src/misc/socket.cc "ncclSocketInit: connecting to address %s with family %d is neither AF_INET(2) nor
    AF_INET6(10)" reads as a setting that matches no interface; the hosts' "NCCL version" lines say otherwise."""
    text = "\n".join([f"{H} NCCL INFO Bootstrap : Using eth0:198.18.1.1<0>", f"{H} NCCL INFO NCCL version 2.18.1+cuda12.1",
                      f"{B} NCCL INFO Bootstrap : Using eth0:198.18.1.2<0>", f"{B} NCCL INFO NCCL version 2.21.5+cuda12.4",
                      f"{H} misc/socket.cc:47 NCCL WARN ncclSocketInit: connecting to address  with family 59936 is "
                      f"neither AF_INET(2) nor AF_INET6(10)"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "version_mismatch"
    assert "2.18.1 on node-a" in root.summary and "2.21.5 on node-b" in root.summary


def test_the_same_warn_with_one_version_stays_an_interface_setting(tmp_path):
    text = (f"{H} NCCL INFO NCCL version 2.27.3+cuda12.9\n{H} misc/socket.cc:47 NCCL WARN ncclSocketInit: connecting to "
            f"address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "no_socket_interface"


def test_eagain_at_teardown_is_no_thread_limit(tmp_path):
    """misc/socket.cc's service thread prints EAGAIN's words as it shuts down; "raise ulimit -u" was the old answer.
    Before nccl-tests' closing OK line, it is a WARN the job went past."""
    text = "\n".join([f"{H} NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
                      "#       size         count      type   redop    root     time   algbw   busbw #wrong",
                      "     8388608       2097152     float     sum      -1    120.1   69.85  104.78      0",
                      f"{H} misc/socket.cc:730 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable",
                      "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 104.78"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 0 and root.status.value == "pass" and "did not stop it" in root.summary
    assert "ulimit" not in root.summary


def test_a_net_plugin_warn_the_job_went_past_is_no_cause(tmp_path):
    text = "\n".join([f"{H} NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.7.4",
                      f"{H} nccl_net_ofi_rdma_init:7734 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available",
                      f"{H} NCCL INFO Using network IB", "# Out of bounds values : 0 OK"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 0 and root.status.value == "pass"


def test_the_same_warn_before_a_failure_is_still_read(tmp_path):
    text = (f"{H} nccl_net_ofi_rdma_init:7734 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available\n"
            f"{H} NCCL INFO Using network IB\n[rank0]: torch.distributed.DistBackendError: NCCL error in: "
            f"ProcessGroupNCCL.cpp:1970, unhandled system error\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1


# --- 2. the log's own inventory ---------------------------------------------------------------------------------------

def test_nccl_on_a_docker_bridge_beside_no_route_is_the_bridge(tmp_path):
    text = "\n".join([f"{H} NCCL INFO Bootstrap : Using br-3f2a91c0d1:172.18.0.1<0>",
                      f"{H} NCCL INFO NET/Socket : Using [0]br-3f2a91c0d1:172.18.0.1<0> [1]veth12ab:fe80::1%veth12ab<0> "
                      f"[2]eth0:198.18.1.1<0>",
                      f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 172.18.0.1<45321> failed : No "
                      f"route to host"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "virtual_interface" and "br-3f2a91c0d1" in root.summary


# --- 3. the location is evidence, never words ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, kind", [
    ("misc/shmutils.cc:93 NCCL WARN Call to open failed : No such file or directory", "shm_not_shared"),
    ("graph/xml.h:85 NCCL WARN Attribute arch of node cpu not found", "topology_xml"),
    ("transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'", "nvls"),
    ("transport/p2p.cc:310 NCCL WARN Something new about IPC handles", "nccl_warn_p2p"),
    ("graph/search.cc:1132 NCCL WARN Could not find a path for pattern 4, falling back to simple order",
     "nccl_warn_topology"),
])
def test_a_warn_is_placed_by_the_file_it_was_printed_in(tmp_path, line, kind):
    (tmp_path / "job.log").write_text(f"{H} {line}\n")
    rep = diagnose([str(tmp_path / "job.log")])
    assert rep.exit_code == 1
    assert kind in [c["kind"] for c in rep.extra["postmortem"]["causes"]], rep.checks[0].summary


def test_the_word_shm_in_a_file_name_is_not_a_full_dev_shm(tmp_path):
    rc, root = root_of(tmp_path, f"{H} misc/shmutils.cc:93 NCCL WARN Call to open failed : No such file or directory\n")
    assert "too small or full" not in root.summary


# --- 4. where the log stops ---------------------------------------------------------------------------------------------

PHASES = {
    "launched": "[rank0]: starting the script\n",
    "rendezvous": "[rank0]: [I torch/distributed/elastic] Rendezvous'ing worker group\n",
    "NCCL init": f"{H} NCCL INFO Bootstrap : Using eth0:198.18.1.1<0>\n",
    "init complete": f"{H} NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n",
    "steps": f"{H} NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
             "[rank0]: step 120 loss 2.314\n",
    "teardown": "[rank0]: step 120 loss 2.314\n[rank0]: calling destroy_process_group\n",
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_log_that_stops_without_failing_says_where_it_stopped(tmp_path, phase):
    rc, root = root_of(tmp_path, PHASES[phase])
    assert rc == 0 and root.status.value == "warn" and root.evidence["kind"] == "stopped", root.summary
    assert f"at {phase}" in root.summary and "ended well" not in root.summary
    assert root.fix  # what stops a job there, most likely first


def test_the_same_log_with_an_end_ended_well(tmp_path):
    rc, root = root_of(tmp_path, PHASES["steps"] + "[rank0]: step 121 loss 2.301\n"
                       "[I torch/distributed/elastic/agent/server/api.py] [default] worker group successfully finished. "
                       "Waiting 300 seconds for other agents to finish.\n")
    assert rc == 0 and root.status.value == "pass" and root.summary.startswith("the job ended well")


# --- 5. wrappers ------------------------------------------------------------------------------------------------------

def test_ray_tunes_summary_is_the_wrappers_report_not_the_cause(tmp_path):
    """ray/tune: "Trial %s errored after %d iterations", TuneError("Trials did not complete", ...)."""
    text = "\n".join([
        "2024-05-01 10:05:00,000\tERROR tune_controller.py:1331 -- Trial task failed for trial TorchTrainer_a1b2c_00000",
        "Trial TorchTrainer_a1b2c_00000 errored after 0 iterations at 2024-05-01 10:05:00. Total running time: 5min 0s",
        "Error file: /tmp/ray/session/artifacts/TorchTrainer_a1b2c_00000/error.txt",
        "ray.tune.error.TuneError: ('Trials did not complete', [TorchTrainer_a1b2c_00000])"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "job_failed" and "the cause is not in this text" in root.summary
    assert "raised an exception" not in root.summary


# --- 6. signals named ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig, kind, word", [("1", "hangup", "terminal"), ("15", "job_failed", "scheduler")])
def test_the_signal_the_launcher_got_says_who_stopped_it(tmp_path, sig, kind, word):
    """torch/distributed/elastic/multiprocessing/api.py: SignalException(f"Process {os.getpid()} got signal: ...")."""
    text = ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 4123 got signal: " + sig + "\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == kind and word in root.summary, root.summary


def test_a_rank_killed_by_signal_9_names_the_oom_killer(tmp_path):
    text = ("E0501 10:00:00.000000 140 torch/distributed/elastic/multiprocessing/api.py:881] failed (exitcode: -9) "
            "local_rank: 1 (pid: 24517) of binary: /usr/bin/python3\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and "out-of-memory killer" in root.summary + root.fix


# --- 8. text from another program is not a job's log ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Collecting torch==2.3.0\n  Downloading torch-2.3.0-cp310-cp310-manylinux1_x86_64.whl (779.1 MB)\n"
    "Collecting nvidia-nccl-cu12==2.20.5\nSuccessfully installed nvidia-nccl-cu12-2.20.5 torch-2.3.0\n",
    'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n'
    "\tat java.util.Arrays.copyOf(Arrays.java:3332)\n",
])
def test_another_programs_text_is_not_a_jobs_log(tmp_path, text):
    (tmp_path / "x.log").write_text(text)
    p = run_cli("diagnose", str(tmp_path / "x.log"))
    assert p.returncode == 2 and "not a job's log" in p.stderr and "Traceback" not in p.stderr, p.stdout + p.stderr


def test_a_java_heap_error_inside_a_jobs_log_is_no_gpu_oom(tmp_path):
    rc, root = root_of(tmp_path, f"{H} NCCL INFO Bootstrap : Using eth0:198.18.1.1<0>\n"
                                 'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n')
    assert "GPU ran out of memory" not in root.summary


# --- 7. confidence with grounds ---------------------------------------------------------------------------------------

def test_a_lone_line_several_situations_print_names_its_class_and_what_else_to_test(tmp_path):
    """The whole paste is torchrun's "failed (exitcode: -9)": the out-of-memory killer most often, a time limit's or an
    operator's kill otherwise; the verdict names the class and how to tell them apart."""
    (tmp_path / "job.log").write_text(
        "E0501 10:00:00.000000 140 torch/distributed/elastic/multiprocessing/api.py:881] failed (exitcode: -9) "
        "local_rank: 1 (pid: 24517) of binary: /usr/bin/python3\n")
    rep = diagnose([str(tmp_path / "job.log")])
    root = next(c for c in rep.extra["postmortem"]["causes"] if c["cause"])
    assert root["kind"] == "killed" and [h["id"] for h in root["hypotheses"]] == ["oom_host", "time_kill"]
    assert "sacct" in rep.checks[0].fix


def test_the_same_line_among_others_is_named_without_the_list(tmp_path):
    lines = [f"[rank1]:step {i} loss 0.5" for i in range(5)]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\nE0501 10:00:00.000000 140 torch/distributed/elastic/"
                                      "multiprocessing/api.py:881] failed (exitcode: -9) local_rank: 1 (pid: 24517) of "
                                      "binary: /usr/bin/python3\n")
    root = next(c for c in diagnose([str(tmp_path / "job.log")]).extra["postmortem"]["causes"] if c["cause"])
    assert root["kind"] == "killed" and "hypotheses" not in root


def test_hosts_on_different_networks_beside_a_connection_failure_is_the_networks(tmp_path):
    """NCCL's "Using network IB" on one host and "Using network Socket" on the other (init.cc)."""
    text = "\n".join([f"{H} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:198.18.1.1<0>",
                      f"{H} NCCL INFO Using network IB", f"{B} NCCL INFO NET/IB : No device found.",
                      f"{B} NCCL INFO NET/Socket : Using [0]eth0:198.18.1.2<0>", f"{B} NCCL INFO Using network Socket",
                      f"{H} misc/socket.cc:540 NCCL WARN Net : Connection closed by remote peer 198.18.1.2<51234>"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "transport_mismatch" and "IB on node-a" in root.summary


# --- batch B's classes: nccl-tests' own output is a job's log; its FAILED check is a failure; "Done!" ends nothing -----

def test_nccl_tests_output_alone_is_a_jobs_log_and_its_ok_line_ends_it(tmp_path):
    text = "\n".join(["# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20",
                      "#  Rank  0 Group  0 Pid  36216 on     node-a device  0 [0x10] NVIDIA A100-SXM4-40GB",
                      "   134217728      33554432     float     sum      -1   2644.1   50.76   95.17      0",
                      "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 95.17"]) + "\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 0 and root.status.value == "pass" and "nccl-tests" in root.summary


def test_nccl_tests_wrong_values_are_a_failure_whose_cause_is_not_in_the_text(tmp_path):
    text = ("       size         count    type     time   algbw   busbw  error\n"
            "  4294967296     134217728   float    29122  129.05  129.05  1e+00\n"
            " Out of bounds values : 2 FAILED\n Avg bus bandwidth    : 128.942\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "job_failed" and "wrong values" in root.summary


def test_a_dataset_downloads_done_is_no_end_of_the_job(tmp_path):
    text = "Using distributed PyTorch with nccl backend\nDownloading train-images-idx3-ubyte.gz\nProcessing...\nDone!\n"
    rc, root = root_of(tmp_path, text)
    assert rc == 0 and root.status.value == "warn" and root.evidence["kind"] == "stopped"


def test_torchelastics_succeeded_events_end_the_job(tmp_path):
    """torch/distributed/elastic/events: each worker's {"name": "torchelastic.worker.status.SUCCEEDED", ...} record."""
    rec = ('{"name": "torchelastic.worker.status.SUCCEEDED", "source": "WORKER", "timestamp": 0, "metadata": '
           '{"run_id": "none", "global_rank": %d, "state": "SUCCEEDED"}}')
    rc, root = root_of(tmp_path, "\n".join(rec % r for r in range(2)) + "\n")
    assert rc == 0 and root.status.value == "pass" and "torchrun" in root.summary


def test_reading_a_log_never_reaches_for_the_network(tmp_path):
    """The CLI itself, in a process of its own, with every lookup and connect made to raise before it runs: a log full
    of host names and addresses is read without resolving or reaching any of them."""
    import subprocess
    import sys

    text = "\n".join([f"{H} NCCL INFO Bootstrap : Using eth0:198.18.1.1<0>", f"{H} NCCL INFO NCCL version 2.18.1+cuda12.1",
                      f"{B} NCCL INFO NCCL version 2.21.5+cuda12.4",
                      "INFO 2020-01-17 00:55:01,702 Rank 1 will connect to TCPStore server at pod-a:47279",
                      f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 198.18.0.9<45321> failed : "
                      f"No route to host"]) + "\n"
    (tmp_path / "job.log").write_text(text)
    guard = ("import socket, sys\n"
             "def no(*a, **k): raise SystemExit(f'reached for the network: {a[:2]}')\n"
             "for n in ('getaddrinfo', 'gethostbyname', 'gethostbyname_ex', 'gethostbyaddr', 'getnameinfo', "
             "'create_connection'): setattr(socket, n, no)\n"
             "for n in ('connect', 'connect_ex', 'sendto', 'sendmsg'): setattr(socket.socket, n, no)\n"
             "from ncclcheck.cli import main\nsys.exit(main(['diagnose', sys.argv[1]]))\n")
    p = subprocess.run([sys.executable, "-c", guard, str(tmp_path / "job.log")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "reached for the network" not in p.stdout + p.stderr, p.stdout + p.stderr



def test_nccl_error_trace_alone_is_a_failure_whose_cause_is_not_in_the_text(tmp_path):
    # NCCLCHECK's trace ("%s:%d -> %d", src/include/checks.h) is printed only for an error: a text holding it and no
    # WARN failed inside NCCL (NVIDIA/nccl#1000: bootstrap over an IPoIB interface the containers could not use)
    text = "".join(f"node-a:2330:2658 [2] NCCL INFO {t}\n" for t in (
        "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ibp75s0:198.18.0.103<0>", "Using network IB",
        "misc/socket.cc:567 -> 2", "misc/socket.cc:618 -> 2", "bootstrap.cc:270 -> 2"))
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "job_failed" and "misc/socket.cc:567 -> 2" in root.summary


def test_nccl_error_trace_of_a_run_that_went_on_to_its_end_is_no_failure(tmp_path):
    text = ("node-a:1:1 [0] NCCL INFO transport/p2p.cc:300 -> 1\n"
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 0


def test_shm_open_refused_is_a_dev_shm_permission_not_a_full_dev_shm(tmp_path):
    # NCCL <= 2.11 include/shm.h (NVIDIA/nccl#328): EACCES from shm_open is /dev/shm's mode, not its size
    text = ("node-a:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied\n"
            "node-a:27106:27302 [0] NCCL INFO include/shm.h:41 -> 2\n"
            "node-a:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
            "nccl-shm-recv-0 (size 4460544)\n"
            "RuntimeError: NCCL error in ProcessGroupNCCL.cpp:290, unhandled system error\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "shm_permission"


@pytest.mark.parametrize("tail", ["", "Job exited with error code 137\n"])
def test_bashs_report_of_a_child_sigkill_ended_is_a_kill(tmp_path, tail):
    # bash's jobs.c, for a script's child a signal ended: "%s: line %d: " then "%5ld %-22s %s" (pid, strsignal,
    # command); a log viewer's "N | ms |" columns before each record (IBM/FfDL#127: a pod's memory limit)
    text = ("135 | 1534166953116 | I tensorflow/core/common_runtime/gpu/gpu_device.cc:1195] Creating TensorFlow device "
            "(/device:GPU:0) -> (device: 0, name: Tesla M40 24GB, pci bus id: 0000:00:06.0, compute capability: 5.2)\n"
            "136 | 1534166953117 | /opt/run/train.sh: line 18:    36 Killed                  python3 train.py "
            "--data ${DATA_DIR}/train.gz --lr 0.001 --iters 2000 --out ${RESULT_DIR}/model --log ${LOG_DIR}/x 2>&1\n"
            "137 | 1534166953118 | Training process finished. Exit code: 137\n"
            + "".join(f"138 | 1534166953119 | {t}" for t in [tail] if t))
    failed_as(tmp_path, text, "killed")


def test_a_wraps_rest_never_takes_away_the_class_its_line_had(tmp_path):
    # the next record appended as the rest of a cut line made "code: 137" "code: 137137"
    text = ("136 | 1534166953117 | + python3 train.py --data ${DATA_DIR}/train.gz --lr 0.001 --iters 2000 --out "
            "${RESULT_DIR}/model --log ${LOG_DIR}/train 2>&1\n"
            "137 | 1534166953118 | Training process finished. Exit code: 137\n"
            "138 | 1534166953119 | Job exited with an error\n")
    failed_as(tmp_path, text, "killed")


def test_lightning_1x_ddp_lines_are_a_jobs_log_that_stops_at_rendezvous(tmp_path):
    # pytorch_lightning 1.x: the Trainer's "GPU available: %s, used: %s" and its DDP plugin's "initializing ddp:
    # GLOBAL_RANK: %d, MEMBER: %d/%d" (Lightning-AI/pytorch-lightning#6206: a Slurm layout two processes per rank)
    text = ("GPU available: True, used: True\nTPU available: None, using: 0 TPU cores\n"
            "initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/4\ninitializing ddp: GLOBAL_RANK: 0, MEMBER: 1/4\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 0 and root.evidence["kind"] == "stopped" and "at rendezvous" in root.summary


@pytest.mark.parametrize("ms,kind", [(1, "pg_timeout_too_short"), (600000, "stalled_one")])
def test_a_watchdog_timeout_shorter_than_a_collective_is_the_setting(tmp_path, ms, kind):
    # ProcessGroupNCCL.cpp's "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d) ran for %d
    # milliseconds before timing out." (instructlab/training#520: a timeout of 1 ms set on purpose)
    text = (f"[rank3]:[E1 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={ms}) ran "
            f"for {ms + 89} milliseconds before timing out.\n")
    rc, root = root_of(tmp_path, text)
    got = root.evidence.get("kind")
    assert rc == 1 and (got == kind if kind == "pg_timeout_too_short" else got != "pg_timeout_too_short"), root.summary


def test_a_wrappers_report_of_nccls_result_is_a_failure_whose_cause_is_not_in_the_text(tmp_path):
    # Horovod's NCCL_CHECK: "<call> failed: <ncclGetErrorString>" (horovod/horovod#3929: it was out of memory)
    text = ("[1,1]<stderr>:Traceback (most recent call last):\n"
            '[1,1]<stderr>:  File "/usr/local/lib/python3.8/dist-packages/horovod/torch/mpi_ops.py", line 1290, in '
            "synchronize\n[1,1]<stderr>:    raise HorovodInternalError(e)\n"
            "[1,1]<stderr>:horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: invalid usage\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "job_failed" and "ncclCommInitRank failed" in root.summary


def test_a_windows_traceback_is_torchs_and_a_store_without_libuv_is_named(tmp_path):
    # TCPStore.cpp's TORCH_CHECK; a Windows traceback's paths hold backslashes (pytorch/pytorch#139990)
    text = ('  File "C:\\hostedtoolcache\\windows\\Python\\3.12.7\\x64\\Lib\\site-packages\\torch\\distributed\\'
            'rendezvous.py", line 189, in _create_c10d_store\n    return TCPStore(\n'
            "RuntimeError: use_libuv was requested but PyTorch was build without libuv support\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "tcpstore_no_libuv" and "USE_LIBUV=0" in root.fix


def test_a_heap_corruption_abort_under_open_mpi_is_a_failure_whose_cause_is_not_in_the_text(tmp_path):
    # glibc's malloc_printerr, then Open MPI's handler (opal/util/stacktrace.c) (NVIDIA/nccl#1611)
    text = ("free(): corrupted unsorted chunks\n[gpu-07:186363] *** Process received signal ***\n"
            "[gpu-07:186363] Signal: Aborted (6)\n[gpu-07:186363] Signal code:  (-6)\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "job_failed" and "heap corrupted" in root.summary


def test_a_name_that_did_not_resolve_is_the_one_the_rank_last_said_it_would_connect_to(tmp_path):
    # torchelastic's etcd rendezvous ("Rank %d will conenct to TCPStore server at %s:%d", its own spelling), then a
    # resolution failure whose message names no host (pytorch/elastic#54's pod name)
    text = ("INFO 2020-01-17 00:55:01,694 Using TCPStore for c10d::Store implementation\n"
            "INFO 2020-01-17 00:55:01,702 Rank 1 will conenct to TCPStore server at pod-a:47279\n"
            "Error: Rank -1 received an Exception. Detailed message: host not found: Name or service not known\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and root.evidence["kind"] == "name_not_resolved" and "pod-a:47279" in root.summary
    # an address said only after the failure is not the one it tried
    lines = text.splitlines(keepends=True)
    rc, root = root_of(tmp_path, lines[0] + lines[2] + lines[1])
    assert root.evidence["kind"] == "name_not_resolved" and "pod-a" not in root.summary


RETRY = f"{H} NCCL INFO Call to connect returned Connection refused, retrying\n"


@pytest.mark.parametrize("after,kind", [("", "job_failed"),
                                        (f"{H} NCCL INFO Connected all rings\n", "stopped"),
                                        ("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5\n", None)])
def test_a_text_that_ends_inside_nccls_connect_retries_stops_at_that_connect(tmp_path, after, kind):
    # src/misc/socket.cc: "Call to connect returned %s, retrying" (routine where the connect then succeeds;
    # huggingface/transformers CI: a port a zombie held, the text ends inside the retries)
    text = f"{H} NCCL INFO NET/Socket : Using [0]ens6:198.18.4.11<0>\n" + RETRY * 5 + after
    rc, root = root_of(tmp_path, text)
    if kind is None:
        assert rc == 0 and root.status.value == "pass"
    else:
        assert root.evidence["kind"] == kind and rc == (1 if kind == "job_failed" else 0), root.summary
    if kind == "job_failed":
        assert "retried 5 times where the text ends" in root.summary


def test_a_spawned_process_sigkill_ended_is_a_kill(tmp_path):
    # torch/multiprocessing/spawn.py: ProcessExitedException("process %d terminated with signal %s") (YOLOX#76)
    text = ("Traceback (most recent call last):\n  File \"tools/train.py\", line 113, in <module>\n    launch(\n"
            "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL\n")
    failed_as(tmp_path, text, "killed")


def test_the_agent_passing_on_sighup_says_it_got_one(tmp_path):
    # torch/distributed/elastic/multiprocessing/api.py: "Sending process %s closing signal %s" with the signal the
    # agent received; Python logging's default "LEVEL:logger:message" starts a record of its own, never a wrap's rest
    # (ultralytics#918: a tqdm bar's line before it)
    bar = "     39/100      13.9G      2.252      3.897      2.851      1.791         48        768:  43%| 496/1155 [05:07<06:48,  1.61it/s]"
    text = (f"Epoch    GPU_mem   box_loss   seg_loss   cls_loss   dfl_loss  Instances       Size\n{bar}\n"
            + "".join(f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {p} closing signal SIGHUP\n"
                      for p in (4193, 4194)))
    failed_as(tmp_path, text, "hangup")


def test_a_rank_that_died_of_sigbus_names_dev_shm_first(tmp_path):
    # torchrun's failure table ("exitcode  : -7", "Signal 7 (SIGBUS) received by PID") (tloen/alpaca-lora#338)
    text = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \nfinetune.py FAILED\n"
            "Failures:\n  <NO_OTHER_FAILURES>\nRoot Cause (first observed failure):\n[0]:\n"
            "  time      : 2023-04-14_06:35:35\n  host      : node-a\n  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : -7 (pid: 3111)\n  error_file: <N/A>\n  traceback : Signal 7 (SIGBUS) received by PID 3111\n")
    rc, root = root_of(tmp_path, text)
    assert rc == 1 and "/dev/shm" in root.summary and "/dev/shm" in root.fix, (root.summary, root.fix)
