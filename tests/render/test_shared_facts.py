"""A large report writes a facts group that is the same on many nodes once (`shared.facts`) and every reader gets
every node's facts back exactly: Report.from_json, `ncclcheck report`, the raw-dict readers (drift, baselines) and
each renderer; a reference that points at nothing is a one-line error, never a traceback or a silent gap."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from ncclcheck.errors import UsageError
from ncclcheck.model import LARGE_FROM_NODES, NodeInfo, Report, WorldInfo, load_saved_report, passed
from ncclcheck.render.html import render_html
from ncclcheck.render.json import load_schema
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown
from ncclcheck.render.validate import load_report

PACKAGES = {"hash": "sha256:" + "a" * 64, "count": 40, "items": {f"pkg{i}": f"1.{i}.0" for i in range(40)}}


def _facts(r: int, odd: bool = False) -> dict:
    pk = copy.deepcopy(PACKAGES)
    if odd:
        pk["items"]["pkg7"], pk["hash"] = "9.9.9", "sha256:" + "b" * 64
    return {"host": {"hostname": f"gpu{r:04d}.invalid", "cpu_count": 2}, "packages": pk,
            "versions": {"python": "3.11.7", "torch": "2.13.0+cpu", "nccl": None, "platform": "Linux-x86_64"},
            "env": {"vars": {}, "redacted": []}, "collected_at": 1795406292.5 + r}


def _report(n: int) -> Report:
    nodes = [NodeInfo(r, f"gpu{r:04d}.invalid", _facts(r, odd=r == 5)) for r in range(n)]
    checks = [passed("host.shm", "/dev/shm is 16 GiB", node=r) for r in range(n)]
    return Report(command="preflight", version="t", started="", world=WorldInfo(nnodes=n, world_size=n),
                  nodes=nodes, checks=checks)


def test_a_large_report_writes_each_repeated_group_once_and_reads_back_every_fact():
    rep = _report(64)
    text = rep.to_json()
    doc = json.loads(text)
    jsonschema.validate(doc, load_schema())
    shared = doc["shared"]["facts"]
    assert len(shared["packages"]) == 1 and len(shared["versions"]) == 1
    assert doc["nodes"][5]["facts"]["packages"]["items"]["pkg7"] == "9.9.9"  # one node's own list stays inline
    assert doc["nodes"][6]["facts"]["packages"] == {"$ref": "#/shared/facts/packages/0"}
    assert "host" not in shared and "env" not in shared  # per-node values and short ones stay inline
    assert text.count('"pkg39"') == 2  # the shared list and node 5's own, not 64 times
    back = Report.from_json(text)
    assert [n.facts for n in back.nodes] == [n.facts for n in rep.nodes]
    assert back.to_json() == text and "shared" not in back.extra


def test_a_small_report_is_written_as_before():
    rep = _report(LARGE_FROM_NODES - 1)
    doc = json.loads(rep.to_json())
    assert "shared" not in doc and doc["nodes"][0]["facts"]["packages"] == PACKAGES
    assert rep.to_json().startswith('{\n  "schema"')  # indented


def test_one_line_per_node_and_per_check_on_a_large_report():
    text = _report(16).to_json()
    lines = text.splitlines()
    assert sum(1 for line in lines if line.startswith('{"node_rank":')) == 16
    assert sum(1 for line in lines if line.startswith('{"id":"host.shm"')) == 16


def test_report_command_and_every_renderer_read_the_shared_facts(tmp_path):
    rep = _report(64)
    path = tmp_path / "run.json"
    path.write_text(rep.to_json())
    loaded = load_report(str(path))
    assert [n.facts for n in loaded.nodes] == [n.facts for n in rep.nodes]
    for render in (render_html, render_markdown, render_junit):
        assert render(loaded) == render(rep)
    assert "pkg39" in render_html(loaded)  # the odd node's facts are drawn in full, not as a reference
    raw = load_saved_report(str(path), "--baseline run.json")  # drift and baselines read the dict
    assert raw["nodes"][5]["facts"]["packages"]["items"]["pkg7"] == "9.9.9"
    assert raw["nodes"][6]["facts"]["packages"] == PACKAGES


@pytest.mark.parametrize("ref", ["#/shared/facts/packages/7", "#/shared/facts/versions/0", "#/nodes/0/facts/packages",
                                 "https://example.invalid/x.json", 5])
def test_a_reference_to_nothing_is_a_one_line_usage_error(tmp_path, ref):
    doc = json.loads(_report(16).to_json())
    doc["nodes"][3]["facts"]["packages"] = {"$ref": ref}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    for read in (lambda: load_report(str(path)), lambda: load_saved_report(str(path), "--baseline run.json")):
        with pytest.raises(UsageError) as info:
            read()
        assert "facts.packages" in str(info.value) and "\n" not in str(info.value)


def test_a_reference_inside_a_shared_value_is_data_not_followed(tmp_path):
    doc = json.loads(_report(16).to_json())
    doc["shared"]["facts"]["versions"][0] = {"$ref": "#/shared/facts/versions/0"}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    rep = load_report(str(path))
    assert rep.nodes[0].facts["versions"] == {"$ref": "#/shared/facts/versions/0"}  # one level, no loop
