"""preflight --save-baseline / --baseline on real runs: the same machine passes, an edited golden file warns naming
each difference (exit 1 with --strict); a file that is no baseline is a one-line usage error."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli


def _report(**fields) -> dict:
    """The smallest report the published schema accepts (every saved report is checked against it), with `fields`."""
    return {"schema": "ncclcheck.report/1", "command": "preflight", "version": "0", "status": "pass", "exit_code": 0,
            "started": "2026-01-01T00:00:00+00:00", "duration_s": 0.0,
            "world": {"nnodes": 1, "world_size": 1, "backend": "gloo", "master": None, "launcher": "ncclcheck"},
            "nodes": [],
            "checks": [], "recommendations": [], **fields}


def _drift(doc: dict) -> list[dict]:
    return [c for c in doc["checks"] if c["id"] == "baseline.drift"]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
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


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_bad_baseline_files_are_usage_errors(tmp_path):
    empty = tmp_path / "x.json"
    empty.write_text(json.dumps(_report()))
    notjson = tmp_path / "y.json"
    notjson.write_text("{")
    for path in (empty, notjson, tmp_path / "missing.json"):
        p = run_cli("preflight", "--baseline", str(path))
        assert p.returncode == 2 and "--baseline" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = run_cli("links", "--baseline", str(empty))
    assert p.returncode == 2 and "no links matrix" in p.stderr, p.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_links_against_a_baseline_no_real_link_can_match(tmp_path):
    """A baseline of 1e6 GB/s per link: every measured link is slower by far more than --tolerance."""
    base = tmp_path / "links-golden.json"
    base.write_text(json.dumps(_report(command="links", links={"size": 1 << 20, "slow": [], "slow_nodes": [],
                                                               "matrix_gbps": [[None, 1e6], [1e6, None]]})))
    p = run_cli("links", "--size", "1M", "--baseline", str(base), "--tolerance", "0.2", "--json", "-", timeout=180)
    assert p.returncode == 1, p.stderr
    c = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "links.baseline")
    assert c["status"] == "fail" and "slower than the baseline by more than 20%" in c["summary"]
    assert c["evidence"]["compared"] and all(x["ratio"] < 0.8 for x in c["evidence"]["compared"])
