"""`--prometheus FILE` on the commands that check or measure: a real run writes an exposition the reference parser
reads, named ncclcheck_*; an unwritable path is a usage error before anything runs."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, run_cli

parser = pytest.importorskip("prometheus_client.parser")


def _names(path) -> dict:
    out: dict = {}
    for fam in parser.text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_preflight_writes_check_metrics(tmp_path):
    prom = tmp_path / "ncclcheck.prom"
    p = run_cli("preflight", "--prometheus", str(prom))
    assert p.returncode in (0, 1), p.stderr
    s = _names(prom)
    checks = {lb["check"] for lb, v in s["ncclcheck_check_status"]}
    assert {"host.shm", "net.interfaces"} <= checks
    assert [v for lb, v in s["ncclcheck_run_exit_code"]] == [p.returncode]
    assert not [f for f in tmp_path.iterdir() if f.name != prom.name]  # no temp file left beside it


@pytest.mark.slow
def test_bench_writes_busbw_and_p99(tmp_path):
    prom = tmp_path / "bench.prom"
    p = run_cli("bench", "--sizes", "64K", "--ops", "all_reduce", "--iters", "5", "--warmup", "1",
                "--prometheus", str(prom), timeout=180)
    assert p.returncode == 0, p.stderr
    s = _names(prom)
    (lb, busbw), = s["ncclcheck_bench_busbw_bytes_per_second"]
    assert lb == {"op": "all_reduce", "dtype": "float32", "bytes": "65536", "in_place": "false"} and busbw > 0
    (_, p99), = s["ncclcheck_bench_time_p99_seconds"]
    (_, mean), = s["ncclcheck_bench_time_seconds"]
    assert p99 > 0 and mean > 0


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_report_converts_a_saved_run(tmp_path):
    prom = tmp_path / "links.prom"
    p = run_cli("report", f"{REPO}/tests/render/examples/links-slow-node.json", "--quiet", "--prometheus", str(prom))
    assert p.returncode == 1, p.stderr  # the saved run failed; report keeps its exit code
    s = _names(prom)
    assert len(s["ncclcheck_link_bandwidth_bytes_per_second"]) == 12


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_unwritable_prometheus_path_is_a_usage_error():
    p = run_cli("preflight", "--prometheus", "/nonexistent-dir/x.prom")
    assert p.returncode == 2 and "--prometheus" in p.stderr and "Traceback" not in p.stderr
