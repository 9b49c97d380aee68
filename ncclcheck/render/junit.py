"""JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters): every check is a test case.

Shape: `<testsuites>` with one `<testsuite>` per section (preflight checks, bench gates, links), one `<testcase>` per
check, named `<id>[node N]` (bench gates scoped to an op add `[op]`). A failed check carries `<failure>` with the
summary as message and detail + fix as text; a skipped one `<skipped>` with its reason; a warning passes with the
text in `<system-out>`, unless the run was strict, where the report itself counts warnings as failures.
Valid against the common junit-10.xsd shape (tests/render/junit.xsd).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from ..model import CheckResult, Report, Status, clean_text
from ..units import format_size_short
from .common import check_case_name, display_checks, hostnames, node_label, trust_text
from .words import IN_PLACE, STATUS_WORD, world_phrase

# XML 1.0 cannot carry most control characters even escaped; text from other machines may contain them.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

SECTION_ORDER = ("preflight", "bench", "links")
EVIDENCE_CHARS = 4000  # of a check's evidence in its testcase text; CI shows the message, a person the JSON


def _x(text: object) -> str:
    return _XML_ILLEGAL.sub("\ufffd", clean_text(str(text)))


def section_of(check: CheckResult) -> str:
    prefix = check.id.split(".", 1)[0]
    return prefix if prefix in ("bench", "links") else "preflight"


def _body(report: Report, c: CheckResult) -> str:
    parts = [f"{c.id} on {node_label(c.node, report)}: {c.summary}", *(f"+ {m}" for m in c.more)]
    if c.detail:
        parts += ["", c.detail]
    if c.fix:
        parts += ["", f"Fix: {c.fix}"]
    if c.evidence:
        ev = json.dumps(c.evidence, sort_keys=True, default=str)
        if len(ev) > EVIDENCE_CHARS:  # a cross-node check's evidence holds a value per node (170 KB at 1,024 nodes)
            ev = ev[:EVIDENCE_CHARS] + f" ... ({len(ev) - EVIDENCE_CHARS:,} more characters: the JSON has them)"
        parts += ["", "Evidence: " + ev]
    return _x("\n".join(parts))


def _case_time(c: CheckResult) -> float:
    t = c.evidence.get("duration_s") if isinstance(c.evidence, dict) else None
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 else 0.0


def _testcase(report: Report, c: CheckResult) -> tuple[ET.Element, str]:
    """The element and how it counts: 'pass', 'failure' or 'skipped'."""
    case = ET.Element("testcase", {
        "classname": _x(f"ncclcheck.{c.id.split('.', 1)[0]}"),
        "name": _x(check_case_name(c)),
        "time": f"{_case_time(c):.3f}",
    })
    if c.status is Status.FAIL or (c.status is Status.WARN and report.strict):
        kind = "fail" if c.status is Status.FAIL else "warn (strict)"
        more = f" (+{len(c.more)} more finding{'s' if len(c.more) > 1 else ''})" if c.more else ""
        ET.SubElement(case, "failure", {"message": _x(c.summary + more), "type": kind}).text = _body(report, c)
        return case, "failure"
    if c.status is Status.SKIP:
        ET.SubElement(case, "skipped", {"message": _x(c.summary)})
        return case, "skipped"
    if c.status is Status.WARN:
        ET.SubElement(case, "system-out").text = f"{STATUS_WORD[Status.WARN]}: " + _body(report, c)
    elif isinstance(c.evidence, dict) and "bound_gbps" in c.evidence:  # bench.efficiency: the figures CI keeps
        ET.SubElement(case, "system-out").text = _body(report, c)
    return case, "pass"


def _not_measured_cases(c: CheckResult) -> list[tuple[ET.Element, str]]:
    """One skipped testcase per op x size a run did not measure (bench.coverage's evidence), with the reason."""
    items = c.evidence.get("not_measured") if isinstance(c.evidence, dict) else None
    out = []
    for m in items or []:
        if not isinstance(m, dict) or m.get("unsupported"):
            continue
        where = f" {IN_PLACE.label}" if m.get("in_place") else ""  # the test's name: stable, from words.py
        what = f"{m.get('op')}{where} {format_size_short(int(m.get('bytes') or 0))}"
        name = f"bench.measure[{what}]"
        case = ET.Element("testcase", {"classname": "ncclcheck.bench", "name": _x(name), "time": "0.000"})
        ET.SubElement(case, "skipped", {"message": _x(f"not measured: {m.get('reason')}")})
        out.append((case, "skipped"))
    return out


def _properties(report: Report) -> ET.Element:
    props = ET.Element("properties")
    world = report.world
    values = [
        ("ncclcheck.command", report.command), ("ncclcheck.version", report.version),
        ("ncclcheck.status", report.status.value), ("ncclcheck.exit_code", report.exit_code),
        ("ncclcheck.strict", str(report.strict).lower()), ("ncclcheck.partial", str(report.partial).lower()),
        ("world.nnodes", world.nnodes), ("world.world_size", world.world_size), ("world.backend", world.backend),
        ("world.launcher", world.launcher), ("world.master", world.master or ""),
        ("world.summary", world_phrase(world)),  # the words every other format's header uses
    ]
    if report.log_path:
        values.append(("ncclcheck.log", report.log_path))
    if report.trust:
        values.append(("ncclcheck.trust", report.trust.get("level") or "none"))
        values.append(("ncclcheck.trust_detail", trust_text(report) or ""))
    for name, value in values:
        ET.SubElement(props, "property", {"name": name, "value": _x(value)})
    return props


def render_junit(report: Report) -> str:
    """The JUnit XML document as a string (UTF-8 declared)."""
    by_section: dict[str, list[CheckResult]] = {}
    # one testcase per check and node (on a large run per check, naming the nodes)
    for c in display_checks(report, ordered=False, same_skips=False):
        by_section.setdefault(section_of(c), []).append(c)
    if not by_section:
        by_section["preflight"] = []
    # The node's name: node 0's on the job's report, the one node's on a node's own report (%n, --print-all).
    names = hostnames(report)
    host = names.get(0) or next(iter(names.values()), None) or "localhost"
    root = ET.Element("testsuites", {"name": _x(f"ncclcheck {report.command}")})
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for index, section in enumerate(s for s in SECTION_ORDER if s in by_section):
        cases = [_testcase(report, c) for c in by_section[section]]
        cases += [k for c in by_section[section] for k in _not_measured_cases(c)]
        counts = {
            "tests": len(cases),
            "failures": sum(1 for _, k in cases if k == "failure"),
            "skipped": sum(1 for _, k in cases if k == "skipped"),
        }
        for k, v in counts.items():
            totals[k] += v
        suite = ET.SubElement(root, "testsuite", {
            "name": section, "tests": str(counts["tests"]), "failures": str(counts["failures"]), "errors": "0",
            "skipped": str(counts["skipped"]),
            "time": f"{sum(_case_time(c) for c in by_section[section]):.3f}",
            "timestamp": _x(report.started), "hostname": _x(host), "id": str(index), "package": "ncclcheck",
        })
        suite.append(_properties(report))
        for case, _ in cases:
            suite.append(case)
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("skipped", str(totals["skipped"]))
    root.set("time", f"{max(report.duration_s, 0.0):.3f}")
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
