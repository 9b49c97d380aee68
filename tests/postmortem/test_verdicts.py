"""Issue 32, diagnose: a verdict that is never wrong. Each seen item reproduced from a real run (fixtures made by
make_fixtures.py: real gloo jobs under torchrun on this machine) or, for NCCL-only families, from lines rendered from
NCCL's and torch's format strings (fixtures/nccl_rendered, RENDERED NOT CAPTURED: no GPU was lent; each HOW.md says
which source line)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ncclcheck.nccl import failures
from ncclcheck.postmortem.analyze import strip_own_output
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.recommend.postmortem import recommend_postmortem
from tests.conftest import run_cli

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
RENDERED = os.path.join(FIX, "nccl_rendered")


def job(path: str) -> list:
    """What the job left in a fixture folder: every file but the HOW.md that says how it was made."""
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n != "HOW.md")


def verdict(path: str):
    rep = diagnose(job(path))
    return rep, rep.checks[0], rep.extra["postmortem"]


# --- a job that failed is never "nothing wrong" ----------------------------------------------------------------

def test_a_dead_job_with_an_nccl_warn_is_never_clean():
    """Seen: NCCL_NET=IB without InfiniBand, the only rank exited 1 after the WARN; diagnose said exit 0."""
    rep, first, _ = verdict(os.path.join(RENDERED, "net_plugin"))
    assert rep.exit_code == 1 and first.status.value == "fail"
    assert first.evidence["kind"] == "net_plugin" and first.evidence["ranks"] == [0]
    assert "NCCL_NET" in first.fix


def test_an_exit_code_alone_is_the_job_failed_cause_not_identified():
    """A real 2-rank job whose rank 1 exited 1 without a word: torchrun's first observed failure is the root, rank 0
    (SIGTERMed by torchrun afterwards) and its 'Connection closed by peer' are consequences."""
    rep, first, pm = verdict(os.path.join(FIX, "exit1"))
    assert rep.exit_code == 1 and first.evidence["kind"] == "exited" and first.evidence["ranks"] == [1]
    assert first.summary.startswith("the job failed; the cause is not in this text: rank 1")
    assert "code 1" in first.summary
    later = [c for c in pm["causes"][1:]]
    assert later and not any(c["cause"] for c in later)
    assert any(c["ranks"] == [0] and "stopped it after rank 1" in c["text"] for c in later)


def test_the_launcher_table_alone_never_passes(tmp_path):
    """Only torchrun's output, the table naming exit codes: never exit 0 (the launcher table of the real exit1 run
    with every worker line cut off)."""
    with open(os.path.join(FIX, "exit1", "launcher.log")) as f:
        text = f.read()
    (tmp_path / "launcher.log").write_text(text[text.index("torch.distributed.elastic.multiprocessing.errors"):])
    rep = diagnose([str(tmp_path)])
    assert rep.exit_code == 1 and rep.checks[0].evidence["ranks"] == [1]


def test_an_unknown_nccl_warn_is_a_symptom_the_job_failed_and_the_cause_is_not_in_the_text(tmp_path):
    """An NCCL WARN no row knows is quoted as what the job said, never named its cause (issue 61 class 2): the job
    failed, the cause is not in this text, and the verdict says what to collect next."""
    # src/debug.cc's WARN header around a message no class knows (rendered, as NCCL formats it)
    (tmp_path / "out.log").write_text("gpu0001.lab:4242:4259 [0] transport/p2p.cc:275 NCCL WARN Cuda P2P "
                                      "something new happened\nrank 0 step 0 ok\n")
    rep = diagnose([str(tmp_path)])
    first = rep.checks[0]
    assert rep.exit_code == 1 and first.evidence["kind"] == "job_failed" and "something new happened" in first.summary
    assert "NCCL_DEBUG" in first.fix


def test_a_python_exception_is_a_cause_even_without_a_launcher(tmp_path):
    (tmp_path / "out.log").write_text("step 0 ok\nTraceback (most recent call last):\n  File \"train.py\", line 9, "
                                      "in <module>\n    main()\nValueError: batch 17 has no labels\n")
    rep = diagnose([str(tmp_path)])
    assert rep.exit_code == 1 and rep.checks[0].evidence["kind"] == "exception"
    assert "batch 17 has no labels" in rep.checks[0].summary


def test_only_consequences_make_the_job_failed_cause_not_identified(tmp_path):
    """A watchdog timeout with the flight recorder armed without TORCH_NCCL_ENABLE_TIMING, two ranks waiting in the
    collective: the dumps cannot say whose GPU did not start it; the job failed (SIGABRT) and says so, exit 1 (was:
    exit 0). (The rendered fixture's rank, given a peer that waits in the same all_reduce.)"""
    import json

    src = os.path.join(RENDERED, "gpu_stuck_untimed")
    for name in os.listdir(src):
        shutil.copy(os.path.join(src, name), tmp_path / name)
    doc = json.loads((tmp_path / "nccl_trace_rank_0.json").read_text())
    doc["pg_config"]["0"]["ranks"] = "[0, 1]"
    (tmp_path / "nccl_trace_rank_0.json").write_text(json.dumps(doc))
    (tmp_path / "nccl_trace_rank_1.json").write_text(json.dumps(doc))
    rep, first, pm = verdict(str(tmp_path))
    assert rep.exit_code == 1 and first.evidence["kind"] == "job_failed"
    assert any(c["kind"] == "not_completed" and "TORCH_NCCL_ENABLE_TIMING" in c["text"] for c in pm["causes"])


def test_a_rank_alone_in_its_group_whose_collective_never_completed_is_its_own_gpu():
    """The same dump as it is: rank 0 is the group's only member, so no peer could hold its all_reduce #4; timing
    or not, its own GPU work did (the real H100 capture `stuck` is this shape: test_real_captures.py)."""
    rep, first, pm = verdict(os.path.join(RENDERED, "gpu_stuck_untimed"))
    assert rep.exit_code == 1 and first.evidence["kind"] == "not_started" and first.evidence["ranks"] == [0]
    assert "all_reduce #4" in first.summary and "no other rank" in first.summary and "GPU" in first.fix
    assert not any(c["kind"] == "not_completed" for c in pm["causes"])


# --- a healthy job's output ends well ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["plain_healthy", "mpirun_late_master"])
def test_a_jobs_own_prints_alone_are_not_a_jobs_log(name):
    """Real jobs' output that holds only the script's own prints ("rank 0 step 3 ok"): no line of torch, NCCL, gloo,
    CUDA, a launcher or a scheduler, so nothing in it is a job's log to judge (exit 2, one line), not "ended well"."""
    p = run_cli("diagnose", *job(os.path.join(FIX, name)))
    assert p.returncode == 2 and "not a job's log" in p.stderr and "Traceback" not in p.stderr, p.stdout + p.stderr


@pytest.mark.parametrize("name", ["guarded_healthy"])
def test_a_healthy_jobs_output_is_no_failure_and_says_where_it_stops(name):
    """Seen: a healthy job's output was 'bad input' (exit 2); a guarded one failed with 'the ranks did not all join
    in time' from c10d's waitForInput poll lines (exit 1). Both are real 4-rank torchrun jobs. Their output stops at
    their last step: no line shows the end (torchrun prints none for a job that succeeded), so the verdict is a
    warning that says where each rank was, never a failure and never "ended well"."""
    p = run_cli("diagnose", *job(os.path.join(FIX, name)), "--json", "-")
    assert p.returncode == 0, p.stdout + p.stderr
    root = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "postmortem.root_cause")
    assert root["status"] == "warn" and root["evidence"]["kind"] == "stopped"
    assert "none shows the job's end" in root["summary"] and "at steps" in root["summary"]


def test_the_same_output_with_its_end_line_ended_well(tmp_path):
    """The guarded job's output with torchrun's own closing line (its agent's INFO at the worker group's success)."""
    with open(os.path.join(FIX, "guarded_healthy", "launcher.log")) as f:
        text = f.read()
    end = ("[2026-11-28 05:00:00,000] torch.distributed.elastic.agent.server.api: [INFO] [default] worker group "
           "successfully finished. Waiting 300 seconds for other agents to finish.\n")
    (tmp_path / "launcher.log").write_text(text + end)
    p = run_cli("diagnose", str(tmp_path / "launcher.log"), "--json", "-")
    assert p.returncode == 0, p.stdout + p.stderr
    root = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "postmortem.root_cause")
    assert root["status"] == "pass" and root["summary"].startswith("the job ended well: torchrun's agent")


# --- ncclcheck's own and routine lines are never a cause -------------------------------------------------------

def test_c10d_wait_polls_are_routine_and_real_store_timeouts_are_not():
    with open(os.path.join(FIX, "guarded_healthy", "launcher.log")) as f:
        polls = [ln for ln in f if "waitForInput" in ln]
    assert len(polls) >= 2 and all(failures.classify(ln) is None for ln in polls)
    real = "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined."
    assert failures.classify(real).id == "init_timeout"


def test_the_guards_report_is_not_the_jobs_output():
    with open(os.path.join(FIX, "guarded_healthy", "launcher.log")) as f:
        text = f.read()
    kept = strip_own_output(text)
    assert "ncclcheck preflight" in text and "Recommended environment" in text
    assert "ncclcheck" not in kept and "Recommended environment" not in kept and "export NCCL" not in kept
    assert kept.count("step 3 ok") == 4 and len(kept.splitlines()) == len(text.splitlines())


def test_the_guards_report_in_this_versions_words_is_not_the_jobs_output():
    """The fixture's report is in the words of the version that made it ("1 node(s), 4 rank(s), torchrun"); the same
    report in today's header words (render/words.py) is skipped too: its rows quote what it found, never a cause."""
    from ncclcheck.model import WorldInfo
    from ncclcheck.render import words

    with open(os.path.join(FIX, "guarded_healthy", "launcher.log")) as f:
        text = f.read()
    now = words.world_phrase(WorldInfo(nnodes=1, world_size=4, launcher="torchrun"))
    renamed = text.replace("1 node(s), 4 rank(s), torchrun", now)
    assert renamed != text and now in renamed
    kept = strip_own_output(renamed)
    assert "ncclcheck" not in kept and "Recommended environment" not in kept and "export NCCL" not in kept


def test_the_guards_one_line_report_hides_none_of_the_jobs_lines_after_it():
    """The guard's passing report is one line (header and verdict): read as a report's first line, the job's lines
    after it were taken for ncclcheck's own and dropped, rank 1's traceback with them (fixtures/raised_unretired)."""
    with open(os.path.join(FIX, "raised_unretired", "launcher.log")) as f:
        text = f.read()
    kept = strip_own_output(text)
    assert text.startswith("ncclcheck preflight") and "PASS (" in text.splitlines()[0]
    assert not kept.splitlines()[0] and "[rank1]: RuntimeError: simulated bug" in kept


def test_a_launcher_none_is_never_printed_as_a_launchers_name():
    from ncclcheck.model import WorldInfo
    from ncclcheck.render import words

    assert "launched by" not in words.world_phrase(WorldInfo(nnodes=1, world_size=2, launcher="none"))
    assert words.world_phrase(WorldInfo(nnodes=1, world_size=2, launcher="torchrun")).endswith("launched by torchrun")


@pytest.mark.parametrize("fixture", ["raised_unretired", "kill_mid_stopped", "loader_hang"])
def test_each_finding_is_said_once(fixture):
    """The root cause is said by postmortem.root_cause's row and the closing verdict line (as every command's report
    ends), its fix once: the checks of one kind of finding refer to it instead of saying it again (watch said one
    sentence four times: the root cause, collectives, live.progress, the verdict; issue 53 item 7)."""
    import io

    from ncclcheck.render import console

    rep, first, pm = verdict(os.path.join(FIX, fixture))
    said = next(c["text"] for c in pm["causes"] if c["cause"])
    for c in rep.checks[1:]:
        assert said not in c.summary, (c.id, c.summary)
    buf = io.StringIO()
    term = console.make_console(buf, {}, width=100_000)  # one line per row: the sentence is found whole
    for part in console.render_report(rep, verbose=True):
        term.print(part, soft_wrap=True)
    out = buf.getvalue()
    assert out.count(first.summary) == 2 and out.count(first.fix) == 1, out


def test_a_guarded_job_whose_rank_was_killed_names_the_kill():
    """Seen: the guard's c10d lines were the root cause, rank 2's SIGKILL demoted. A real guarded 4-rank job."""
    rep, first, pm = verdict(os.path.join(FIX, "guarded_kill"))
    assert first.evidence["kind"] == "died" and first.evidence["ranks"] == [2] and "SIGKILL" in first.summary
    assert not any(c["kind"] == "init_timeout" for c in pm["causes"])
    assert [c["ranks"] for c in pm["causes"] if c["cause"]] == [[2]]  # the SIGTERMed ranks are consequences


# --- gloo's abort tied to its rank -----------------------------------------------------------------------------

def test_a_rankless_gloo_abort_is_tied_to_the_sigabrt_rank(tmp_path):
    """Seen: 'Received data size doesn't match' blamed on 'torchrun.log (no rank on the line)'. The real size-mismatch
    job's torchrun output alone: rank 2 (the receiver) aborted, the one SIGABRT in torchrun's table."""
    shutil.copy(os.path.join(FIX, "size", "launcher.log"), tmp_path / "torchrun.log")
    rep = diagnose([str(tmp_path)])
    first = rep.checks[0]
    assert first.evidence["kind"] == "collective_mismatch" and first.evidence["ranks"] == [2]
    assert "rank 2 (host localhost" in first.summary and "no rank on the line" not in first.summary
    root = rep.extra["postmortem"]["causes"][0]
    assert "SIGABRT" in root["tied_by"]


# --- NCCL's failure families (rendered from NCCL's format strings) ---------------------------------------------

@pytest.mark.parametrize("case, kind, ranks", [
    ("net_plugin", "net_plugin", [0]),
    ("no_socket_if", "no_socket_interface", [0]),
    ("duplicate_gpu", "duplicate_gpu", [0, 1]),  # both ranks NCCL's message names: one fault of the two
    ("version_mismatch", "version_mismatch", [0, 1]),
    ("ib_device", "ib_device", [0]),
    ("cuda_error", "device_assert", [0]),  # the CUDA error's own words: a device-side assert, a bug of a kernel
    ("peer_gone", "died", [1]),  # the SIGKILLed peer, not the survivor's "remote process exited"
    ("gpu_stuck", "not_started", [0]),
    ("gpu_stuck_peer", "not_started", [1]),
    ("stalled", "stalled", [0, 1]),
])
def test_nccl_families_name_their_cause(case, kind, ranks):
    rep, first, pm = verdict(os.path.join(RENDERED, case))
    assert rep.exit_code == 1 and first.evidence["kind"] == kind and first.evidence["ranks"] == ranks, first.summary
    assert first.fix


def test_a_gpu_that_never_started_the_collective_is_the_hang_not_a_consequence():
    """Seen: 'no cause found, only consequences' (exit 0) on a rank whose GPU never started its all_reduce."""
    rep, first, _ = verdict(os.path.join(RENDERED, "gpu_stuck"))
    assert "never started" in first.summary and "all_reduce #4" in first.summary
    assert "network" in first.fix


def test_peer_gone_lists_the_survivors_lines_as_consequences():
    _, _, pm = verdict(os.path.join(RENDERED, "peer_gone"))
    survivor = [c for c in pm["causes"] if c["ranks"] == [0]]
    assert survivor and not any(c["cause"] for c in survivor)
    assert failures.classify("remote process exited or there was a network error").id == "peer_closed"


# --- arming: recommend --postmortem / guard(postmortem_dir=) ----------------------------------------------------

def test_arming_sets_timing_and_only_the_names_torch_reads():
    new = {"buffer": "TORCH_FR_BUFFER_SIZE", "dump": "TORCH_FR_DUMP_TEMP_FILE"}
    names = {r.name: r.value for r in recommend_postmortem("/pm", fr_names=new)}
    assert names["TORCH_NCCL_ENABLE_TIMING"] == "1" and names["TORCH_FR_DUMP_TEMP_FILE"] == "/pm/nccl_trace_rank_"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in names and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in names
    old = {"buffer": "TORCH_NCCL_TRACE_BUFFER_SIZE", "dump": "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
    names = {r.name for r in recommend_postmortem("/pm", fr_names=old)}
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in names and "TORCH_FR_BUFFER_SIZE" not in names
    both = {r.name for r in recommend_postmortem("/pm", ask_torch=False)}  # no torch to ask: both spellings
    assert {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"} <= both


def test_the_installed_torch_is_asked():
    from ncclcheck.facts.versions import flight_recorder_names

    # torch 2.13 (installed here) knows the TORCH_FR_* names and warns on the old ones
    assert flight_recorder_names() == {"buffer": "TORCH_FR_BUFFER_SIZE", "dump": "TORCH_FR_DUMP_TEMP_FILE"}


@pytest.mark.slow
def test_a_guarded_job_is_armed_without_torchs_deprecation_warnings(tmp_path):
    """A fresh real guarded job (make_fixtures.py's guarded_healthy): no deprecation warning from the variables the
    guard set, and diagnose says it ended well."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", os.path.join(FIX, "make_fixtures.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    assert mk.make_job("guarded_healthy", str(tmp_path / "g")) == 0
    log = (tmp_path / "g" / "launcher.log").read_text()
    assert "TORCH_NCCL_ENABLE_TIMING" in log and "is deprecated" not in log
    assert diagnose(job(str(tmp_path / "g"))).exit_code == 0


def test_across_two_agents_the_earliest_failure_is_the_root():
    """A real job of two torchrun agents (two "nodes" on loopback): node 1's rank was SIGKILLed before it joined, so
    node 0's rank timed out in init_process_group 6 s later. Each agent names its own first failure; the root is the
    earlier one, and node 0's store timeout (a cause class, and a rank-less traceback line tied to rank 0 by its
    agent's table) is its consequence."""
    rep, first, pm = verdict(os.path.join(FIX, "two_nodes_kill_at_init"))
    assert first.evidence["kind"] == "died" and first.evidence["ranks"] == [1] and "SIGKILL" in first.summary
    assert pm["launcher"]["first"] == 1
    timeout = [c for c in pm["causes"] if c["kind"] == "init_timeout"]
    assert timeout and timeout[0]["ranks"] == [0] and not timeout[0]["cause"]
    assert [c["ranks"] for c in pm["causes"] if c["cause"]] == [[1]]


@pytest.mark.parametrize("case, kind, signal", [("mpirun_exit1", "exited", None), ("mpirun_kill", "died", "SIGKILL")])
def test_under_mpirun_the_first_failed_process_is_the_root(case, kind, signal, validate_report, tmp_path):
    """Real 2-rank gloo jobs under Open MPI's mpirun (no torchrun table): mpirun's own report names the first
    process that failed; without reading it the job read as 'ended well' or blamed the survivor."""
    out = tmp_path / "r.json"
    p = run_cli("diagnose", *job(os.path.join(FIX, case)), "--json", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    doc = validate_report(out.read_text())
    root = doc["postmortem"]["causes"][0]
    assert root["kind"] == kind and root["ranks"] == [1] and root["cause"]
    assert doc["world"]["launcher"] == "mpi"
    if signal:
        assert signal in root["text"]
    assert all(not c["cause"] for c in doc["postmortem"]["causes"][1:])


@pytest.mark.parametrize("line, cls", [
    # slurmstepd's format strings (strings of the installed Slurm 22.05 plugins), rendered
    ("slurmstepd: error: *** STEP 4242.0 ON node07 CANCELLED AT 2026-11-23T10:00:00 DUE TO TIME LIMIT ***",
     "scheduler_cancelled"),
    ("slurmstepd: error: *** JOB 4242 ON node07 CANCELLED AT 2026-11-23T10:00:00 ***", "scheduler_cancelled"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your processes may have been killed "
     "by the cgroup out-of-memory handler.", "oom_killed"),
])
def test_the_schedulers_own_reasons_are_causes(line, cls):
    assert failures.classify(line).id == cls and failures.classify(line).cause


def test_a_job_the_scheduler_cancelled_is_never_clean(tmp_path):
    (tmp_path / "slurm-4242.out").write_text(
        "0: rank 0 step 0 ok\n1: rank 1 step 0 ok\nslurmstepd: error: *** STEP 4242.0 ON node07 CANCELLED AT "
        "2026-11-23T10:00:00 DUE TO TIME LIMIT ***\n")
    rep = diagnose([str(tmp_path)])
    assert rep.exit_code == 1 and rep.checks[0].evidence["kind"] == "scheduler_cancelled"
    assert "TIME LIMIT" in rep.extra["postmortem"]["causes"][0]["line"]


def test_a_job_the_guard_stopped_names_the_guards_check_not_its_report():
    """A real guarded 2-rank job with GLOO_SOCKET_IFNAME naming no interface: PreflightFailed, uncaught, ends every
    rank before init. The root is the guard's first failing check (tied to the rank its message names); the guard's
    console report (its rows, 'Recommended environment', its closing 'root cause on node 0' line) is stripped."""
    rep, first, pm = verdict(os.path.join(FIX, "guarded_fails"))
    assert rep.exit_code == 1 and first.evidence["kind"] == "guard_failed" and first.evidence["ranks"] == [1]
    assert "[net.socket_ifname]" in first.summary and "nonexistent0" in first.summary
    assert all(c["kind"] in ("guard_failed", "exited") for c in pm["causes"])
    with open(os.path.join(FIX, "guarded_fails", "launcher.log")) as f:
        kept = strip_own_output(f.read())
    assert "root cause on node 0" not in kept and "Recommended environment" not in kept
    assert kept.count("PreflightFailed: ncclcheck preflight failed") == 2


def test_a_survivors_own_exception_after_the_first_failure_is_a_consequence():
    """A real 2-rank job: rank 1 ended first (torchrun's first observed failure); rank 0 wrapped the collective's
    error in its own RuntimeError('training step 2 failed'). That exception is listed, after the root, as a
    consequence: it would otherwise outrank the first failure (log causes come before a death)."""
    rep, first, pm = verdict(os.path.join(FIX, "exit1_wrapped"))
    assert first.evidence["ranks"] == [1] and rep.exit_code == 1
    wrapped = [c for c in pm["causes"] if c["kind"] == "exception"]
    assert wrapped and wrapped[0]["ranks"] == [0] and not wrapped[0]["cause"]
    assert "training step 2 failed" in wrapped[0]["text"] and "first observed failure" in wrapped[0]["text"]


def test_two_ranks_killed_at_once_are_two_causes_the_first_observed_first():
    """A real 4-rank job whose ranks 1 and 3 were SIGKILLed in the same step: a kill from outside is nobody's
    consequence, so both are causes (torchrun's first observed one first); the ranks it SIGTERMed are not."""
    rep, first, pm = verdict(os.path.join(FIX, "kill_two"))
    killed = [c["ranks"][0] for c in pm["causes"] if c["cause"]]
    assert sorted(killed) == [1, 3] and killed[0] == pm["launcher"]["first"] == first.evidence["ranks"][0]
    assert all("SIGKILL" in c["text"] for c in pm["causes"] if c["cause"])


def test_nccls_default_warn_timestamp_keeps_the_header_readable():
    """NCCL prints WARN lines after a timestamp by default (src/debug.cc: NCCL_DEBUG_TIMESTAMP_LEVELS = WARN,
    "[%F %T] "); the host and device behind it still tie the line to its rank."""
    from ncclcheck.nccl.debuglog import nccl_header

    line = "[2026-11-23 10:00:00] gpu0001.lab:4242:4259 [3] plugin/net.cc:379 NCCL WARN Failed to initialize any"
    assert nccl_header(line) == {"host": "gpu0001.lab", "pid": 4242, "cuda_dev": 3}


def test_ranks_torchrun_stopped_mid_step_did_not_skip_the_collective_the_killed_rank_is_the_cause(tmp_path):
    """A real 4-rank armed job (armed_job.py kill_mid): rank 1 SIGKILLed mid-run; torchrun SIGTERMed ranks 0 and 3
    while they still worked, before all_reduce #6, which rank 2 waited in. Main named "ranks 0, 3 never entered
    all_reduce #6" (issue 44 item 4, 1 run in 4). Their dumps were written when they were stopped: the SIGKILLed
    rank is the cause, from the launcher's output; and from the armed files alone (rank 1 left neither dump nor
    stacks, the others' stacks say they were told to stop)."""
    rep, first, pm = verdict(os.path.join(FIX, "kill_mid_stopped"))
    assert rep.exit_code == 1 and first.evidence["ranks"] == [1] and "SIGKILL" in first.summary, first.summary
    stopped = [c for c in pm["causes"] if c["kind"] == "never_entered"]
    assert stopped and stopped[0]["ranks"] == [0, 3] and not stopped[0]["cause"]
    assert "stopped, not skipped" in stopped[0]["text"]
    assert [c["ranks"] for c in pm["causes"] if c["cause"]] == [[1]]
    for name in os.listdir(os.path.join(FIX, "kill_mid_stopped")):
        if name.startswith(("nccl_trace", "stacks_")):
            shutil.copy(os.path.join(FIX, "kill_mid_stopped", name), tmp_path / name)
    rep = diagnose([str(tmp_path)])
    assert rep.checks[0].evidence["ranks"] == [1] and rep.checks[0].evidence["kind"] == "no_dump"



def test_a_rank_that_raised_is_the_cause_though_gloo_had_not_marked_its_last_collective_complete(tmp_path):
    """A real 2-rank job armed with guard(postmortem_dir=) (armed_job.py raise): rank 1 raised RuntimeError before its
    6th all_reduce, and gloo had not yet marked its 5th complete (its dump: #5 not retired, last completed #3). main
    named "rank 1 never finished all_reduce #5: ... a NIC or a link" (issue 53 item 1, 2 runs in 9): what the rank
    said of itself (its stacks: raised, at its line) outranks what the recorders imply, and the header names the
    launcher from the stacks when the launcher's output is not there."""
    fix = os.path.join(FIX, "raised_unretired")
    for name in os.listdir(fix):
        if name.startswith(("nccl_trace", "stacks_")):
            shutil.copy(os.path.join(fix, name), tmp_path / name)
    for where in (fix, str(tmp_path)):  # with the launcher's output, and the armed files alone
        rep, first, pm = verdict(where)
        assert rep.exit_code == 1 and first.evidence["ranks"] == [1] and first.evidence["kind"] == "exception"
        assert first.summary.startswith("rank 1 ") and "RuntimeError: simulated bug" in first.summary
        assert "armed_job.py:69 in <module>" in first.summary and "NIC" not in first.summary, first.summary
        assert rep.world.launcher == "torchrun"
        assert [c["ranks"] for c in pm["causes"] if c["cause"]] == [[1]]  # rank 0's "peer closed": a consequence
        seen = [c for c in pm["causes"] if c["kind"] == "unfinished"]  # the recorder's view, no cause of its own
        assert seen and not seen[0]["cause"] and "raised RuntimeError" in seen[0]["text"]


def test_an_exception_out_of_a_collective_or_the_launchers_stop_is_no_ranks_own_end():
    """A survivor's exception out of its collective (a peer gone, a timeout), one chained to the launcher's stop
    reaching its DataLoader, or torch's wrapper of an NCCL error, is no end of its own: own.ends leaves it out; an
    exception in its own code, and sys.exit(3), are."""
    from ncclcheck.postmortem import own

    def st(reason, chain=(), collective=False):
        return {"reason": reason, "where": "train.py:9 in main", "path": "p", "time": "", "chain": list(chain),
                "from_collective": collective}

    stacks = {0: st("raised RuntimeError: Connection closed by peer [127.0.0.1]:1", collective=True),
              1: st("raised RuntimeError: DataLoader worker (pid(s) 7) exited unexpectedly",
                    ["RuntimeError: DataLoader worker (pid 7) is killed by signal: Terminated.",
                     "RuntimeError: DataLoader worker (pid(s) 7) exited unexpectedly"]),
              2: st("raised torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error",
                    ["torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error"]),
              3: st("raised ValueError: loss is NaN", ["ValueError: loss is NaN"]),
              4: st("sys.exit(3)"), 5: st("sys.exit(0)"), 6: st("told to stop (SIGTERM)")}
    got = own.ends(stacks, {}, [], [], None)
    assert [(e["rank"], e["kind"]) for e in got] == [(3, "exception"), (4, "exited")]
    # the launcher stopped rank 3 (its SIGTERM): what it raised meanwhile is its stop, not its own end
    got = own.ends(stacks, {3: {"rank": 3, "signal": "SIGTERM", "exitcode": -15}}, [], [], None)
    assert [e["rank"] for e in got] == [4]


def test_a_hung_dataloader_names_the_users_line_not_selectors():
    """A real 3-rank armed job (armed_job.py loader): rank 2's DataLoader worker deadlocked, its main thread waited
    in the DataLoader (innermost frame: selectors.py) until torchrun stopped it. The verdict names the user's own
    line (the innermost frame outside the standard library, site-packages and torch) and where it waited."""
    rep, first, _ = verdict(os.path.join(FIX, "loader_hang"))
    assert rep.exit_code == 1 and first.evidence["kind"] == "never_entered" and first.evidence["ranks"] == [2]
    assert "armed_job.py:92 in <module> (inside selectors.py:415 in select)" in first.summary, first.summary


# the main thread of a rank told to stop while Python's excepthook read source files (the DataLoader's worker, stopped
# by the same killpg, made the rank raise a moment before): library frames only, the job's own gone from the stack
_IN_EXCEPTHOOK = """Thread 0x00007f847142fb80 (most recent call first):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 331 in wait
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 629 in wait
  File "/work/wt/h1-causes/ncclcheck/training/arm.py", line 227 in _on_signal
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/linecache.py", line 136 in updatecache
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/linecache.py", line 46 in getlines
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/linecache.py", line 30 in getline
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/traceback.py", line 318 in line
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/traceback.py", line 74 in extract_tb
  File "/work/wt/h1-causes/ncclcheck/training/arm.py", line 200 in _excepthook
"""


def _main_thread_replaced(text: str, section: str) -> str:
    """The stacks file with its main thread's section (the last one of the fixture) replaced."""
    head, _, _ = text.rpartition("Thread 0x00007f847142fb80 (most recent call first):")
    return head + section


def test_a_stop_written_while_the_rank_was_already_raising_still_names_the_users_line(tmp_path):
    """diag-torchrun-loader, 1 run in the whole corpus: rank 2's stacks were read while its excepthook formatted the
    DataLoader's error through linecache, so its innermost frame was `linecache.py:136 in updatecache` and no frame
    of the job's was left. The writer now says where the script raised ("raised at:", from the exception's own
    traceback) and the verdict names that line, the same never_entered of the same rank; the library frame alone is
    never the answer while the job's own frame is known."""
    fix = os.path.join(FIX, "loader_hang")
    for name in os.listdir(fix):
        if name != "HOW.md":
            shutil.copy(os.path.join(fix, name), tmp_path / name)
    path = tmp_path / "stacks_rank_2.txt"
    text = path.read_text().replace(
        "reason: told to stop (SIGTERM)\n",
        "reason: told to stop (SIGTERM)\nraised at: /work/wt/h1-causes/tests/fixtures/armed_job.py:92 in <module>\n"
        "note: the script had raised RuntimeError: DataLoader worker (pid(s) 25130) is killed by signal: "
        "Terminated.: its frames were gone from the main thread's stack\n", 1)
    path.write_text(_main_thread_replaced(text, _IN_EXCEPTHOOK))
    rep, first, _ = verdict(str(tmp_path))
    assert rep.exit_code == 1 and first.evidence["kind"] == "never_entered" and first.evidence["ranks"] == [2]
    assert "armed_job.py:92 in <module>" in first.summary and "linecache" not in first.summary, first.summary


def test_library_frames_inside_the_users_frame_name_the_users_frame():
    """A stop that finds the main thread in linecache (a warning's or a traceback's source line being read) while
    the job's frame is further out: the job's frame, with the library frame it was inside."""
    from ncclcheck.postmortem import stacks

    text = open(os.path.join(FIX, "loader_hang", "stacks_rank_2.txt")).read()
    inner = _IN_EXCEPTHOOK.rsplit("  File", 1)[0]  # the excepthook frame out; the job's own frame below instead
    job_frame = '  File "/work/wt/h1-causes/tests/fixtures/armed_job.py", line 92 in <module>\n'
    got = stacks.parse(_main_thread_replaced(text, inner + job_frame), "s")
    assert got["where"] == "/work/wt/h1-causes/tests/fixtures/armed_job.py:92 in <module> " \
                           "(inside linecache.py:136 in updatecache)"


def test_the_users_frame_is_the_innermost_outside_libraries():
    from ncclcheck.postmortem import flight, stacks

    for path in ("/usr/lib/python3.11/selectors.py", "/opt/venv/lib/python3.12/site-packages/lightning/fit.py",
                 "/srv/pytorch/torch/utils/data/dataloader.py", "<frozen runpy>", "/x/ncclcheck/training/arm.py"):
        assert stacks.is_library(path), path
    assert not stacks.is_library("/home/me/ncclcheck/tests/fixtures/armed_job.py")
    live = [{"main": True, "frames": [
        {"file": "/home/me/train.py", "line": 42, "func": "main", "code": "for batch in loader:"},
        {"file": "/usr/lib/python3.11/site-packages/torch/utils/data/dataloader.py", "line": 725, "func": "__next__"},
        {"file": "/usr/lib/python3.11/selectors.py", "line": 415, "func": "select"}]}]
    assert flight.where_of(live) == "train.py:42 in main: for batch in loader: (inside selectors.py:415 in select)"


@pytest.mark.parametrize("fixture, what, line", [
    ("raised_then_stopped", "raised RuntimeError: simulated bug", "armed_job.py:77 in <module>"),
    ("exited_then_stopped", "called sys.exit(3)", "armed_job.py:79 in <module>")])
def test_a_rank_that_ended_on_its_own_then_was_stopped_still_exiting_is_the_cause(tmp_path, fixture, what, line):
    """A real 2-rank job (armed_job.py raise / exit, SLOW_EXIT_S=10): rank 1 raised (or asked sys.exit(3)), an atexit
    handler kept it alive, rank 0 timed out waiting for it (torchrun's "first observed failure") and torchrun stopped
    rank 1 with SIGTERM. Its stacks keep its own end as the reason and say the stop came after: the verdict names
    rank 1, what it did and its line, and the stop as what came after, with the launcher's table (rank 1: SIGTERM,
    rank 0 first) and with the armed files alone; nothing else is a cause."""
    fix = os.path.join(FIX, fixture)
    for name in os.listdir(fix):
        if name.startswith(("nccl_trace", "stacks_")):
            shutil.copy(os.path.join(fix, name), tmp_path / name)
    for where in (fix, str(tmp_path)):
        rep, first, pm = verdict(where)
        assert rep.exit_code == 1 and first.evidence["ranks"] == [1], first.summary
        assert first.summary.startswith(f"rank 1 {what} at ") or first.summary.startswith("rank 1 (host "), \
            first.summary
        assert what in first.summary and line in first.summary, first.summary
        assert "then, still exiting, it was told to stop (SIGTERM)" in first.summary, first.summary
        assert [c["ranks"] for c in pm["causes"] if c["cause"]] == [[1]], pm["causes"]
        assert rep.world.launcher == "torchrun"


def test_a_stop_after_a_ranks_own_end_keeps_it_a_stop_before_it_does_not():
    """own.ends with the launcher's table saying SIGTERM: a rank whose stacks say it raised (or asked sys.exit) and
    then was told to stop keeps its end; one that raised with no stop after it in its stacks (its exception may be
    the stop's consequence: a script's handler raising, a DataLoader's worker killed by the same killpg), or whose
    later word was an ask, is the launcher's stop, as before."""
    from ncclcheck.postmortem import own

    def st(reason, then=None, chain=()):
        return {"reason": reason, "where": "train.py:9 in main", "path": "p", "time": "", "chain": list(chain),
                "from_collective": False, "then": then}

    stacks = {1: st("raised ValueError: loss is NaN", "told to stop (SIGTERM)", ["ValueError: loss is NaN"]),
              2: st("sys.exit(3)", "told to stop (SIGTERM)"),
              3: st("raised ValueError: loss is NaN", None, ["ValueError: loss is NaN"]),
              4: st("raised ValueError: loss is NaN", "asked (SIGUSR1)", ["ValueError: loss is NaN"]),
              5: st("raised RuntimeError: DataLoader worker (pid(s) 7) is killed by signal: Terminated.",
                    "told to stop (SIGTERM)",
                    ["RuntimeError: DataLoader worker (pid(s) 7) is killed by signal: Terminated."])}
    table = {r: {"rank": r, "signal": "SIGTERM", "exitcode": -15} for r in stacks}
    got = own.ends(stacks, table, [], [], None)
    assert [(e["rank"], e["kind"], e["then"]) for e in got] == [(1, "exception", "told to stop (SIGTERM)"),
                                                                 (2, "exited", "told to stop (SIGTERM)")]
    # torchrun's SIGKILL past its grace (the agent's own stop) is the same stop
    table = {r: {"rank": r, "signal": "SIGKILL", "exitcode": -9, "stopped": "SIGKILL"} for r in stacks}
    assert [e["rank"] for e in own.ends(stacks, table, [], [], None)] == [1, 2]
