"""preflight --nccl-ras / --nccl-debug read recorded NCCL outputs into checks; bench --nccl-capture says plainly that
it needs GPUs on a CPU run; the HTML report links the files a GPU run captured."""

from __future__ import annotations

import json

import pytest

from ncclcheck.model import BenchRow, Report
from ncclcheck.render.html import render_html
from tests.conftest import REPO, run_cli

DATA = f"{REPO}/tests/data/nccl"


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_preflight_reads_ras_and_debug_captures(validate_report):
    p = run_cli("preflight", "--nccl-ras", f"{DATA}/ras-dead-rank.json", "--nccl-debug", f"{DATA}/nccl.node-a.511",
                "--json", "-")
    assert p.returncode == 1, p.stderr  # a dead rank fails the run
    doc = validate_report(p.stdout)
    ras = next(c for c in doc["checks"] if c["id"] == "nccl.ras")
    assert ras["status"] == "fail" and "rank 6" in ras["summary"]
    tr = next(c for c in doc["checks"] if c["id"] == "nccl.transport")
    assert "NET/IB" in tr["summary"] or "NET/IB" in tr["detail"]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_ncclras_text_report_reaches_preflight_and_diagnose(tmp_path, validate_report):
    """The text report a real client printed (ncclras 2.28.3 has no -f json; a lent H100, docs/gpu.md) is read by
    both commands that take RAS output, at the CLI."""
    p = run_cli("preflight", "--nccl-ras", f"{DATA}/ras-text-running-ok.txt", "--json", "-")
    ras = next(c for c in validate_report(p.stdout)["checks"] if c["id"] == "nccl.ras")
    assert ras["status"] == "pass" and "NCCL 2.28.9" in ras["summary"], ras
    (tmp_path / "ras.txt").write_text(open(f"{DATA}/ras-text-running-ok.txt").read())
    p = run_cli("diagnose", str(tmp_path), "--json", "-")
    doc = validate_report(p.stdout)
    assert [c["status"] for c in doc["checks"] if c["id"] == "nccl.ras"] == ["pass"], p.stdout[-2000:]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_missing_capture_file_is_a_usage_error():
    p = run_cli("preflight", "--nccl-ras", "/nonexistent/ras.json")
    assert p.returncode == 2 and "--nccl-ras" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [["bench", "--sizes", "4K", "--ops", "all_reduce", "--iters", "2", "--warmup", "1"],
                                 ["links", "--size", "4K", "--iters", "2", "--nproc-per-node", "2"]])
def test_nccl_capture_on_cpu_is_a_skip_with_the_reason(cmd):
    p = run_cli(*cmd, "--nccl-capture", "--json", "-", timeout=180)
    # links on one loaded host may warn about a loopback link; bench must pass as before
    assert p.returncode == 0 or (cmd[0] == "links" and p.returncode == 1), p.stderr
    tr = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "nccl.transport")
    assert tr["status"] == "skip" and "needs the nccl backend" in tr["summary"]


def test_html_links_the_captured_files():
    row = BenchRow("all_reduce", 4, 1, "float32", False, 1.0, 0.0, 0.0, None, [1.0])
    rep = Report(command="bench", version="0", started="now", bench=[row],
                 extra={"nccl_captures": {"gpu-a": {"node_rank": 0, "debug": ["/l/nccl.gpu-a.1"],
                                                    "topo": "/l/nccl-topo.gpu-a.xml"}}})
    page = render_html(Report.from_json(rep.to_json()))
    assert 'href="file:///l/nccl-topo.gpu-a.xml"' in page and ">debug log<" in page
