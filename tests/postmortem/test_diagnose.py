"""diagnose on real failures: a 4-rank gloo job under torchrun that skipped a collective, called another op, sent
another size or dtype, or lost a rank to SIGKILL (fixtures/ made by fixtures/make_fixtures.py, kept with it)."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import pytest

from ncclcheck.postmortem.analyze import analyse
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.postmortem.inputs import read_inputs
from ncclcheck.postmortem.unpickle import RefusedPickle, loads_plain
from tests.conftest import run_cli

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def fixture(name: str) -> str:
    return os.path.join(FIX, name)


def root(name: str):
    rep = diagnose([fixture(name)])
    return rep, rep.checks[0]


@pytest.mark.parametrize("name, kind, ranks", [
    ("skip", "op_mismatch", [3]),  # rank 3 skipped all_reduce #4 and went on to the barrier
    ("skip_wrapped", "op_mismatch", [3]),  # the same after the ring buffer wrapped (seq 29.. in a 16-entry buffer)
    ("other_op", "op_mismatch", [3]),
    ("size", "size_mismatch", [3]),
    ("dtype", "dtype_mismatch", [3]),
    ("subgroup_skip", "never_entered", [3]),
    # the same job where rank 3 woke in time to enter the barrier: ranks 1, 2 wait for it in group 1, it waits for
    # them in group 0 (a cycle); its own order of collectives shows it skipped group 1's #2
    ("subgroup_skip_moved_on", "never_entered", [3]),
    ("kill", "no_dump", [3]),
])
def test_each_real_failure_names_the_culprit_first(name, kind, ranks):
    rep, first = root(name)
    assert first.id == "postmortem.root_cause" and first.status.value == "fail"
    assert first.evidence["kind"] == kind and first.evidence["ranks"] == ranks
    assert rep.exit_code == 1 and rep.root_cause() is first


def test_kill_names_host_signal_and_collective():
    _, first = root("kill")
    assert "rank 3 (host localhost, local rank 3)" in first.summary
    assert "SIGKILL" in first.summary and "all_reduce #4 of default_pg" in first.summary


def test_subgroup_hang_is_blamed_where_the_rank_stopped_not_where_others_queued():
    rep, first = root("subgroup_skip")
    assert first.evidence["pg"] == "1" and "never entered all_reduce #2" in first.summary
    blocked = [c for c in rep.extra["postmortem"]["causes"] if c["kind"] == "blocked"]
    assert blocked and blocked[0]["ranks"] == [1, 2] and not blocked[0]["cause"]


def test_size_mismatch_survives_the_aborted_rank():
    rep, first = root("size")
    pm = rep.extra["postmortem"]
    assert "2048" in first.summary and "1024" in first.summary
    dead = [c for c in pm["causes"] if c["kind"] == "no_dump"]
    assert dead[0]["ranks"] == [2] and "SIGABRT" in dead[0]["text"] and not dead[0]["cause"]


def test_healthy_job_passes():
    rep, first = root("healthy")
    assert first.status.value == "pass" and rep.exit_code == 0


def test_json_dumps_read_like_pickles(tmp_path):
    for name in os.listdir(fixture("kill")):
        if name.endswith(".json") and name.startswith("nccl_trace") or name == "launcher.log":
            shutil.copy(os.path.join(fixture("kill"), name), tmp_path / name)
    inp = read_inputs([str(tmp_path)])
    assert sorted(inp.dumps) == [0, 1, 2] and {d.form for d in inp.dumps.values()} == {"json"}
    assert analyse(inp)["causes"][0]["ranks"] == [3]


def test_wrapped_buffer_is_compared_by_sequence_id():
    pm = diagnose([fixture("skip_wrapped")]).extra["postmortem"]
    g = pm["groups"][0]
    assert g["wrapped"] and g["mismatch"]["seq"] == 41 and min(w[0] for w in g["windows"].values()) > 1


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ncclcheck-pwned",))


def test_a_pickle_naming_a_class_is_refused_unrun(tmp_path):
    data = pickle.dumps({"version": "2.10", "entries": [_Evil()]})
    with pytest.raises(RefusedPickle):
        loads_plain(data)
    (tmp_path / "nccl_trace_rank_0").write_bytes(data)
    shutil.copy(os.path.join(fixture("kill"), "nccl_trace_rank_1"), tmp_path / "nccl_trace_rank_1")
    rep = diagnose([str(tmp_path)])
    inputs = next(c for c in rep.checks if c.id == "postmortem.inputs")
    assert inputs.status.value == "warn" and ("posix.system" in inputs.summary or "os.system" in inputs.summary)
    assert not os.path.exists("/tmp/ncclcheck-pwned")


def test_garbage_is_not_a_crash(tmp_path):
    (tmp_path / "nccl_trace_rank_0").write_bytes(b"\x80\x04garbage")
    (tmp_path / "nccl_trace_rank_1.json").write_text(json.dumps({"version": 1, "entries": [1, "x", {"pg_id": []}],
                                                                 "pg_status": [], "pg_config": "no"}))
    rep = diagnose([str(tmp_path)])
    assert rep.checks[0].id == "postmortem.root_cause"


def test_cli_exit_codes_and_schema(tmp_path, validate_report):
    out = tmp_path / "r.json"
    p = run_cli("diagnose", fixture("kill"), "--json", str(out), "--html", str(tmp_path / "r.html"),
                "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"))
    assert p.returncode == 1, p.stderr
    doc = validate_report(out.read_text())
    assert doc["command"] == "diagnose" and doc["postmortem"]["causes"][0]["ranks"] == [3]
    html = (tmp_path / "r.html").read_text()
    assert "Last collectives per rank" in html and "no dump" in html
    assert "postmortem.root_cause" in (tmp_path / "r.xml").read_text()
    assert run_cli("diagnose", fixture("healthy")).returncode == 0
    bad = run_cli("diagnose", str(tmp_path / "nope"))
    assert bad.returncode == 2 and "no such file" in bad.stderr and "Traceback" not in bad.stderr
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("")  # nothing a job printed, nothing a job left
    (tmp_path / "empty" / "blob.bin").write_bytes(b"\x00\x01binary")
    assert run_cli("diagnose", str(tmp_path / "empty")).returncode == 2


DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "nccl")


def test_ncclras_json_among_the_inputs_runs_nccl_ras(tmp_path):
    shutil.copy(os.path.join(DATA, "ras-dead-rank.json"), tmp_path / "ras.json")
    rep = diagnose([str(tmp_path)])
    ras = [c for c in rep.checks if c.id == "nccl.ras"]
    assert ras and ras[0].status.value == "fail" and rep.exit_code == 1
    first = rep.checks[0]  # the verdict says it too, not "nothing wrong found"
    assert first.status.value == "fail" and first.evidence["kind"] == "ras_dead"


def test_ncclras_text_reports_are_read_like_the_json_form(tmp_path):
    """The real text report of a running job (ncclras 2.28.3, a lent H100) is RAS output, not a log; one that
    names a rank's asynchronous error (rendered from the client's format strings) names that rank as the cause."""
    from tests.steps.test_nccl_diag import ASYNC, _text_report

    shutil.copy(os.path.join(DATA, "ras-text-running-ok.txt"), tmp_path / "ras.txt")
    rep = diagnose([str(tmp_path)])
    assert [r["kind"] for r in read_inputs([str(tmp_path)]).read] == ["ncclras"]
    assert [c.status.value for c in rep.checks if c.id == "nccl.ras"] == ["pass"]
    (tmp_path / "ras.txt").write_text(_text_report(ASYNC, flags="ERROR"))
    rep = diagnose([str(tmp_path)])
    first = rep.checks[0]
    assert first.status.value == "fail" and first.evidence["kind"] == "ras_error" and first.evidence["ranks"] == [6]
    assert "gpu7" in first.summary


def test_preflight_ties_dumped_ranks_to_hosts(tmp_path):
    pre = tmp_path / "pre.json"
    pre.write_text(json.dumps({
        "schema": "ncclcheck.report/1", "command": "preflight", "version": "x", "status": "pass", "exit_code": 0,
        "started": "", "duration_s": 0, "checks": [], "recommendations": [
            {"name": "NCCL_SOCKET_IFNAME", "value": "=eth0", "node": None, "reason": "r"}],
        "world": {"nnodes": 2, "world_size": 4, "backend": "gloo", "master": None, "launcher": "torchrun"},
        "nodes": [{"node_rank": 0, "hostname": "gpu01", "facts": {}}, {"node_rank": 1, "hostname": "gpu02",
                                                                      "facts": {}}]}))
    dumps = tmp_path / "d"
    dumps.mkdir()
    for r in (0, 1, 2):
        shutil.copy(os.path.join(FIX, "kill", f"nccl_trace_rank_{r}"), dumps)
    (dumps / "nccl.gpu01.77.log").write_text(
        "gpu01:77:77 [0] NCCL INFO comm 0x5 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0\n"
        "gpu01:77:77 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n")
    rep = diagnose([str(dumps)], str(pre))
    first = rep.checks[0]
    assert first.evidence["ranks"] == [3] and "host gpu02, local rank 1" in first.summary
    transport = next(c for c in rep.checks if c.id == "postmortem.transport")
    assert transport.status.value == "warn" and "docker0" in transport.summary and "=eth0" in transport.summary


def test_regenerated_failure_is_named(tmp_path):
    """The fixture script still makes what the fixtures hold, on the installed torch (a fresh, real failure)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", os.path.join(FIX, "make_fixtures.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    mk.make("dtype", str(tmp_path / "dtype"))
    first = diagnose([str(tmp_path / "dtype")]).checks[0]
    assert first.evidence["kind"] == "dtype_mismatch" and first.evidence["ranks"] == [3]


test_regenerated_failure_is_named = pytest.mark.slow(test_regenerated_failure_is_named)


def test_an_armed_gloo_jobs_files_name_the_rank_that_never_entered_and_where_it_was():
    """armed_skip: what ncclcheck.arm left (JSON dumps and stacks, no pickle, no NCCL) is enough on its own."""
    inp = read_inputs([fixture("armed_skip")])
    assert sorted(inp.dumps) == [0, 1, 2] and all(d.form == "json" for d in inp.dumps.values())
    assert sorted(inp.stacks) == [0, 1, 2] and not [log.path for log in inp.logs if "stacks" in log.path]
    assert inp.stacks[0]["where"] == "<REPO>/tests/fixtures/armed_job.py:51 in <module>"  # where it raised
    a = analyse(inp)
    root = a["causes"][0]
    assert root["kind"] == "never_entered" and root["ranks"] == [2]
    assert "rank 2's stack (told to stop (SIGTERM)) was at <REPO>/tests/fixtures/armed_job.py:48 in <module>" \
        in root["text"]  # the sleep: where rank 2 was instead of the collective
    assert "stacks_rank_2.txt" in root["fix"]


def test_a_stacks_file_is_read_as_untrusted_text(tmp_path):
    (tmp_path / "stacks_rank_1.txt").write_text("ncclcheck stacks: rank 99999999 pid 1\nreason: x\n")
    (tmp_path / "stacks_rank_2.txt").write_text("ncclcheck stacks: rank 2 pid 7\nreason: " + "r" * 100_000 +
                                                "\nthreads: 0x1 MainThread\n\nThread 0x1 (most recent call first):\n"
                                                '  File "' + "f" * 5000 + '", line 3 in g\n')
    inp = read_inputs([str(tmp_path)])
    assert [r["why"] for r in inp.refused] == ["a stacks file whose header names no rank"]
    got = inp.stacks[2]
    assert len(got["reason"]) < 400 and got["where"] is None  # a 5,000-character file name is not a frame
