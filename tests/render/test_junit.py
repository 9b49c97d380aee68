"""JUnit output: valid for CI parsers, one test case per check, failures carry the fix, strict runs fail on warnings."""

from __future__ import annotations

import pathlib
import xml.etree.ElementTree as ET

import pytest

from ncclcheck.model import Report, Status
from ncclcheck.render.junit import render_junit

from .conftest import load_example

XSD = pathlib.Path(__file__).parent / "junit.xsd"


def _cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml.encode("utf-8"))
    return {c.get("name"): c for c in root.iter("testcase")}


def test_valid_against_the_junit_xsd(example):
    xmlschema = pytest.importorskip("xmlschema", reason="xmlschema is in the `test` extra")
    _, report = example
    xmlschema.XMLSchema(str(XSD)).validate(render_junit(report))


def test_hostile_strings_stay_valid_xml(hostile_report):
    xml = render_junit(hostile_report)
    root = ET.fromstring(xml.encode("utf-8"))  # control characters removed, markup escaped
    failure = next(root.iter("failure"))
    assert "<script>" in failure.get("message")
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(xml)


def test_structure_counts_and_names(example):
    name, report = example
    root = ET.fromstring(render_junit(report).encode("utf-8"))
    assert root.tag == "testsuites"
    cases = list(root.iter("testcase"))
    assert len(cases) == len(report.checks) == int(root.get("tests"))
    for suite in root.findall("testsuite"):
        assert suite.get("name") in ("preflight", "bench", "links")
        own = suite.findall("testcase")
        assert int(suite.get("tests")) == len(own)
        assert int(suite.get("failures")) == sum(1 for c in own if c.find("failure") is not None)
        assert int(suite.get("skipped")) == sum(1 for c in own if c.find("skipped") is not None)
        for c in own:
            assert c.get("classname").startswith("ncclcheck.")
            assert float(c.get("time")) >= 0
    failures = int(root.get("failures"))
    assert (failures > 0) == (report.exit_code == 1), name


def test_failed_check_carries_detail_and_fix():
    report = load_example("preflight-fail-3node")
    case = _cases(render_junit(report))["net.socket_ifname[node 1]"]
    assert case.get("classname") == "ncclcheck.net"
    failure = case.find("failure")
    assert failure.get("message") == "NCCL_SOCKET_IFNAME=eth1 matches no interface on cpu-b02"
    assert "Fix: export NCCL_SOCKET_IFNAME==eth0" in failure.text


def test_skip_and_warn():
    report = load_example("preflight-fail-3node")
    cases = _cases(render_junit(report))
    assert cases["code.consistent"].find("skipped").get("message") == "skipped: the world did not form"
    warn = cases["net.interfaces"]
    assert warn.find("failure") is None
    assert warn.find("system-out").text.startswith("WARN: ")


def test_bench_gates_are_their_own_suite_named_per_op():
    root = ET.fromstring(render_junit(load_example("bench-gate-fail")).encode("utf-8"))
    bench = root.find("testsuite[@name='bench']")
    names = {c.get("name"): c for c in bench.findall("testcase")}
    assert set(names) == {"bench.correctness[all_reduce]", "bench.correctness[all_gather]",
                          "bench.min_busbw[all_reduce]", "bench.min_busbw[all_gather]"}
    assert names["bench.min_busbw[all_reduce]"].find("failure") is not None
    assert names["bench.correctness[all_reduce]"].find("failure") is None


def test_strict_run_reports_warnings_as_failures():
    report = load_example("preflight-pass-2node")
    data = report.to_dict()
    data["checks"][0]["status"] = "warn"
    data["exit_code"] = 1  # what a --strict run writes for a warning
    strict = Report.from_json(data)
    assert strict.strict and strict.status is Status.WARN
    root = ET.fromstring(render_junit(strict).encode("utf-8"))
    assert root.get("failures") == "1"
    data["exit_code"] = 0
    lenient = Report.from_json(data)
    assert ET.fromstring(render_junit(lenient).encode("utf-8")).get("failures") == "0"
