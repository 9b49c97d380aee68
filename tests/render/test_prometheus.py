"""Prometheus text exposition: every example parses with prometheus_client's own parser, names start with
ncclcheck_, check statuses are one-hot, bench and links figures arrive in base units, hostile label values stay
inside their quotes."""

from __future__ import annotations

import pytest

from ncclcheck.model import BenchRow, Report, WorldInfo
from ncclcheck.render.prometheus import render_prometheus

from .conftest import load_example

parser = pytest.importorskip("prometheus_client.parser")


def _samples(text: str) -> dict:
    """name -> [(labels, value)] through the reference parser (raises on malformed exposition)."""
    out: dict = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _one(samples, name, **labels):
    hits = [v for lb, v in samples[name] if all(lb.get(k) == str(v2) for k, v2 in labels.items())]
    assert len(hits) == 1, (name, labels, samples.get(name))
    return hits[0]


def test_every_example_parses_and_every_name_is_prefixed(example):
    name, report = example
    text = render_prometheus(report)
    assert text.endswith("\n")
    s = _samples(text)
    assert s and all(n.startswith("ncclcheck_") for n in s)
    assert _one(s, "ncclcheck_run_exit_code", command=report.command) == report.exit_code
    assert _one(s, "ncclcheck_run_status", status=report.status.value) == 1
    assert _one(s, "ncclcheck_run_duration_seconds") == pytest.approx(report.duration_s)
    assert _one(s, "ncclcheck_run_timestamp_seconds") > 1.5e9


def test_check_status_is_one_hot_per_check_and_node():
    report = load_example("preflight-fail-3node")
    s = _samples(render_prometheus(report))
    for c in report.checks:
        node = "all" if c.node is None else str(c.node)
        vals = {lb["status"]: v for lb, v in s["ncclcheck_check_status"] if lb["check"] == c.id and lb["node"] == node}
        assert vals[c.status.value] == 1 and sum(vals.values()) == 1, (c.id, vals)
    failing = [lb for lb, v in s["ncclcheck_check_status"] if lb["status"] == "fail" and v == 1]
    assert failing, "the failing example must export at least one failing check"


def test_bench_rows_in_base_units_with_p99():
    row = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 150.0, 6.99, 13.98, 0, [150.0, 149.0],
                   {"iter_stats": {"iters": 20, "p50_us": 149.0, "p99_us": 310.0, "min_us": 140.0, "max_us": 320.0,
                                   "cv": 0.25, "high_variation": True}})
    rep = Report(command="bench", version="0.1.0", started="2026-01-01T00:00:00+00:00", duration_s=3.5,
                 world=WorldInfo(world_size=2, backend="gloo"), bench=[row])
    s = _samples(render_prometheus(rep))
    lb = {"op": "all_reduce", "dtype": "float32", "bytes": 1 << 20, "in_place": "false"}
    assert _one(s, "ncclcheck_bench_busbw_bytes_per_second", **lb) == pytest.approx(13.98e9)
    assert _one(s, "ncclcheck_bench_algbw_bytes_per_second", **lb) == pytest.approx(6.99e9)
    assert _one(s, "ncclcheck_bench_time_seconds", **lb) == pytest.approx(150e-6)
    assert _one(s, "ncclcheck_bench_time_p99_seconds", **lb) == pytest.approx(310e-6)
    assert _one(s, "ncclcheck_bench_time_cv_ratio", **lb) == pytest.approx(0.25)
    assert _one(s, "ncclcheck_bench_wrong_elements", **lb) == 0
    assert _one(s, "ncclcheck_run_timestamp_seconds") == 1767225600.0


def test_links_matrix_and_slow_node():
    report = load_example("links-slow-node")
    s = _samples(render_prometheus(report))
    assert _one(s, "ncclcheck_link_bandwidth_bytes_per_second", a=0, b=3) == pytest.approx(11.2e9)
    assert _one(s, "ncclcheck_link_bandwidth_bytes_per_second", a=0, b=1, a_hostname="gpu-c01") == pytest.approx(46.1e9)
    assert len(s["ncclcheck_link_bandwidth_bytes_per_second"]) == 12  # 4 nodes, no diagonal
    assert _one(s, "ncclcheck_link_slow_node", node=3, hostname="gpu-c04") == 1


def test_hostile_label_values_are_escaped():
    from ncclcheck.model import NodeInfo, warned

    evil = 'h"1\\n} ncclcheck_fake 1\n# x'
    rep = Report(command="preflight", version="0", started="now", nodes=[NodeInfo(0, evil)],
                 checks=[warned("host.shm", "small", node=0)])
    text = render_prometheus(rep)
    s = _samples(text)
    assert _one(s, "ncclcheck_check_status", check="host.shm", status="warn") == 1
    assert [lb["hostname"] for lb, _ in s["ncclcheck_check_status"]][0] == evil
    assert "ncclcheck_fake" not in s and "ncclcheck_run_timestamp_seconds" not in s  # "now" is no timestamp
