"""preflight --save-baseline / --baseline on real runs: the same machine passes, an edited golden file warns naming
each difference (exit 1 with --strict); a file that is no baseline is a one-line usage error."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def _drift(doc: dict) -> list[dict]:
    return [c for c in doc["checks"] if c["id"] == "baseline.drift"]


def test_save_then_compare_then_drift(tmp_path, validate_report):
    golden = tmp_path / "golden.json"
    p = run_cli("preflight", "--save-baseline", str(golden), "--quiet")
    assert p.returncode == 0, p.stderr
    saved = json.loads(golden.read_text())
    assert saved["nodes"][0]["facts"]["versions"]["torch"]

    p = run_cli("preflight", "--baseline", str(golden), "--json", "-")
    assert p.returncode == 0, p.stderr
    (same,) = _drift(validate_report(p.stdout))
    assert same["status"] == "pass"

    facts = saved["nodes"][0]["facts"]
    facts["versions"]["torch"] = "1.0.0"
    facts["env"]["vars"]["NCCL_IB_DISABLE"] = "1"
    golden.write_text(json.dumps(saved))
    p = run_cli("preflight", "--baseline", str(golden), "--json", "-")
    (d,) = _drift(validate_report(p.stdout))
    assert d["status"] == "warn" and "torch version 1.0.0 -> " in d["summary"]
    assert "$NCCL_IB_DISABLE 1 -> (none)" in d["detail"]
    assert run_cli("preflight", "--baseline", str(golden), "--strict", "--quiet").returncode == 1


def test_bad_baseline_files_are_usage_errors(tmp_path):
    empty = tmp_path / "x.json"
    empty.write_text(json.dumps({"schema": "ncclcheck.report/1", "nodes": []}))
    notjson = tmp_path / "y.json"
    notjson.write_text("{")
    for path in (empty, notjson, tmp_path / "missing.json"):
        p = run_cli("preflight", "--baseline", str(path))
        assert p.returncode == 2 and "--baseline" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = run_cli("links", "--baseline", str(empty))
    assert p.returncode == 2 and "no links matrix" in p.stderr, p.stderr
