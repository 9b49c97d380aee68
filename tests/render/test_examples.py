"""The example reports are real reports: they validate against the published schema and survive a round trip."""

from __future__ import annotations

import json
import pathlib

import jsonschema

from ncclcheck.model import Report

from .conftest import EXAMPLES

SCHEMA = json.loads((pathlib.Path(__file__).parents[2] / "ncclcheck/schema/report-1.schema.json").read_text())


def test_there_are_five_examples():
    assert {p.stem for p in EXAMPLES} == {"preflight-pass-2node", "preflight-fail-3node", "bench-gate-fail",
                                          "links-slow-node", "preflight-storage-3node"}


def test_examples_validate_against_the_schema_and_round_trip():
    for path in EXAMPLES:
        data = json.loads(path.read_text())
        jsonschema.validate(data, SCHEMA)
        report = Report.from_json(data)
        again = report.to_dict()
        jsonschema.validate(again, SCHEMA)
        assert again["status"] == data["status"], path.name
        assert again["exit_code"] == data["exit_code"], path.name


def test_examples_cover_the_scenarios_they_are_named_after():
    by = {p.stem: Report.from_json(json.loads(p.read_text())) for p in EXAMPLES}
    assert by["preflight-pass-2node"].exit_code == 0
    assert any(r.node is not None for r in by["preflight-pass-2node"].recommendations)
    failed = by["preflight-fail-3node"]
    assert failed.root_cause().id == "rendezvous.world"
    assert failed.world.nnodes == 3 and len(failed.nodes) == 2
    bench = by["bench-gate-fail"]
    assert {r.op for r in bench.bench} == {"all_reduce", "all_gather"} and len(bench.bench) == 12
    assert sum(1 for r in bench.bench if r.wrong) == 1
    assert any(c.id == "bench.min_busbw" and c.status.value == "fail" for c in bench.checks)
    links = by["links-slow-node"]
    assert len(links.links["matrix_gbps"]) == 4 and links.links["slow_nodes"] == [3]
