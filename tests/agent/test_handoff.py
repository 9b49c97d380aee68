"""A spawned rank gets its job as a "module:qualname" reference and its description as bounded JSON, never a pickle:
what cannot be named is refused in the parent in one line, and what is not a description is refused by the child in
one line (exit 2), never a traceback."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from ncclcheck.agent import handoff, runner
from ncclcheck.agent.handoff import MAX_BYTES, Handoff, HandoffError, decode, job_ref, resolve
from ncclcheck.agent.launchers import detect_placement
from ncclcheck.config import Config, WorldConfig
from ncclcheck.rendezvous.budget import Budget
from tests.jobs_for_tests import allreduce_job

AGENT = os.path.dirname(runner.__file__)


def _spec(**over) -> dict:
    spec = {"host": "127.0.0.1", "port": 29500, "prefix": "ncclcheck/job/", "rank": 1, "world_size": 2,
            "local_rank": 1, "local_world_size": 2, "node_rank": 0, "nnodes": 1, "backend": "gloo",
            "log_path": None, "log_dir": "/tmp/x", "progress": False, "env": {"NCCL_DEBUG": "INFO"},
            "token": b"\x01secret", "budget": Budget(timeout_s=7)}
    spec.update(over)
    return spec


def _doc(**over) -> bytes:
    d = json.loads(Handoff.of(allreduce_job, {"do": {"1": "x"}}).for_rank(_spec()))
    d.update(over)
    return json.dumps(d).encode()


def test_a_description_round_trips_with_the_job_imported_by_name():
    spec, fn, payload = decode(Handoff.of(allreduce_job, {"do": {"1": "x"}}).for_rank(_spec()))
    assert fn is allreduce_job and payload == {"do": {"1": "x"}}
    assert spec == _spec() and spec["budget"].timeout_s == 7 and spec["token"] == b"\x01secret"


def _closure():
    def inner(ctx, payload):
        return {}
    return inner


@pytest.mark.parametrize("job, why", [
    (lambda ctx, p: {}, "lambda"), (_closure(), "nested"), (print, "not a plain function"),
    (type("M", (), {"__call__": lambda s, c, p: {}})(), "not a plain function"),
])
def test_a_job_a_rank_cannot_import_by_name_is_refused_in_the_parent(job, why):
    with pytest.raises(HandoffError, match=why) as e:
        job_ref(job)
    assert "\n" not in str(e.value) and "top level of an importable module" in str(e.value)


def test_a_function_of_main_is_refused():
    ns: dict = {"__name__": "__main__"}
    exec("def job(ctx, payload):\n    return {}\n", ns)  # what a heredoc or the REPL defines
    with pytest.raises(HandoffError, match="__main__"):
        job_ref(ns["job"])


def test_a_payload_that_is_not_json_is_refused():
    with pytest.raises(HandoffError, match="not JSON"):
        Handoff.of(allreduce_job, {"x": object()})
    with pytest.raises(HandoffError, match="not JSON"):
        Handoff.of(allreduce_job, {"x": float("nan")})


def test_an_oversized_description_is_refused_on_both_sides():
    with pytest.raises(HandoffError, match="over the"):
        Handoff.of(allreduce_job, {"x": "a" * MAX_BYTES}).for_rank(_spec())
    with pytest.raises(HandoffError, match="over"):
        decode(b" " * (MAX_BYTES + 1))


@pytest.mark.parametrize("ref", [
    "os:system",  # a builtin, not a function defined under that name
    "subprocess:os.system",  # reached through another module's attribute
    "__main__:job", "tests.jobs_for_tests:<lambda>", "tests.jobs_for_tests:allreduce_job()",
    "no_such_module_xyz:job", "tests.jobs_for_tests:no_such_job", "tests.jobs_for_tests", "a:b:c",
    "tests.jobs_for_tests:os.path.join", 42, None,
])
def test_a_target_that_is_not_an_importable_function_is_refused(ref):
    with pytest.raises(HandoffError):
        resolve(ref)
    with pytest.raises(HandoffError):
        decode(_doc(job=ref))


@pytest.mark.parametrize("data", [
    b"\x80\x04\x95pickle", b"not json", b"[1, 2]", b"[" * 100000, b'{"format": "ncclcheck-rank/1"}',
])
def test_what_is_not_a_description_is_refused(data):
    with pytest.raises(HandoffError):
        decode(data)


@pytest.mark.parametrize("field, value", [
    ("rank", "1"), ("rank", True), ("port", 1.5), ("env", {"A": 1}), ("token", "zz"), ("budget", {"timeout_s": 1}),
    ("budget", "60"), ("progress", 1), ("host", None),
])
def test_a_spec_field_of_the_wrong_type_is_refused(field, value):
    d = json.loads(_doc())
    d["spec"][field] = value
    with pytest.raises(HandoffError):
        decode(json.dumps(d).encode())
    d["spec"].pop(field)
    with pytest.raises(HandoffError):
        decode(json.dumps(d).encode())


def test_a_non_finite_budget_is_refused():
    d = json.loads(_doc())
    d["spec"]["budget"]["timeout_s"] = 1e400  # json reads it as inf
    with pytest.raises(HandoffError, match="finite"):
        decode(json.dumps(d).replace("Infinity", "1e400").encode())


def test_the_spawned_child_refuses_a_bad_description_in_one_line():
    """The child program the runner starts, fed garbage on its stdin: exit 2, one line, no traceback."""
    for data in (b"\x80\x04K\x01.", _doc(job="os:system")):
        p = subprocess.run([sys.executable, "-c", runner._CHILD_CODE, runner._PACKAGE_ROOT], input=data,
                           capture_output=True, timeout=120)
        err = p.stderr.decode()
        assert p.returncode == 2, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "refused" in err


def test_a_job_that_cannot_be_handed_over_is_one_line_per_rank():
    w = WorldConfig(nproc_per_node=2, timeout_s=5)
    out = runner.run_job(w, detect_placement({}, w), lambda ctx, p: {}, {}, budget=Budget.of(Config("t", world=w)))
    assert not out.ok and [f["rank"] for f in out.failures] == [0, 1]
    assert "\n" not in out.failures[0]["reason"] and "lambda" in out.failures[0]["reason"]


def test_no_module_of_the_agent_uses_pickle():
    """Project rule: a pickle is read only through postmortem/unpickle.py; the agent hands ranks JSON."""
    for name in os.listdir(AGENT):
        if name.endswith(".py"):
            with open(os.path.join(AGENT, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                assert not any(n.split(".")[0] in ("pickle", "_pickle", "cPickle", "dill", "cloudpickle")
                               for n in names), f"{name} imports {names}"
    assert "pickle" not in runner._CHILD_CODE and "pickle" not in handoff.__dict__
