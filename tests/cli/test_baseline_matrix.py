"""A saved run is a baseline (issue 53, item 8): every report ncclcheck writes, given to every command that takes
--baseline, is either compared on what both runs measured or refused with a one-line reason (exit 2) before anything
runs. On the same node, seconds apart, a comparison finds no difference, and the facts one run did not collect are
counted as not compared (a health report as preflight's baseline read "68 differences ...: python version (none) ->
3.11.7")."""

from __future__ import annotations

import json
import os

import pytest

import ncclcheck
from ncclcheck.bench.gates import load_baseline
from ncclcheck.checks.drift import load_golden
from ncclcheck.errors import UsageError
from ncclcheck.links.baseline import load_links_baseline
from ncclcheck.render.json import render_json
from tests.conftest import REPO, run_cli

SAVED = os.path.join(REPO, "tests", "cli", "fixtures", "baselines")  # real reports of the slow commands (HOW.md)
FRESH = ("preflight", "recommend", "env", "health")  # made here, on this node, by the test
PRODUCERS = FRESH + ("bench", "links", "sweep", "diagnose", "watch", "report-of-preflight", "report-of-bench")
# What each command that takes --baseline can compare with; every other report is refused.
LEGAL = {"health": {"preflight", "recommend", "env", "health", "report-of-preflight"},
         "preflight": {"preflight", "recommend", "env", "health", "report-of-preflight"},
         "bench": {"bench", "report-of-bench"},
         "links": {"links", "sweep"}}
# How each taker reads its baseline: the loader its pipeline calls first, before any world forms.
LOADERS = {"health": load_golden, "preflight": load_golden, "bench": load_baseline, "links": load_links_baseline}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """{producer: path} of one report of every kind."""
    d = tmp_path_factory.mktemp("baselines")
    out = {}
    for name in FRESH:
        out[name] = str(d / f"{name}.json")
        with open(out[name], "w") as f:
            f.write(render_json(getattr(ncclcheck, f"run_{name}")()))
    for name in ("bench", "links", "sweep", "diagnose", "watch"):
        out[name] = os.path.join(SAVED, f"{name}.json")
    for kind, src in (("report-of-preflight", out["preflight"]), ("report-of-bench", out["bench"])):
        out[kind] = str(d / f"{kind}.json")
        with open(out[kind], "w") as f:
            f.write(render_json(ncclcheck.run_report(run=src)))
    return out


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.parametrize("taker", sorted(LEGAL))
@pytest.mark.parametrize("producer", PRODUCERS)
def test_every_report_is_a_baseline_or_refused_in_one_line(reports, taker, producer):
    path = reports[producer]
    if producer in LEGAL[taker]:
        assert LOADERS[taker](path)
        return
    with pytest.raises(UsageError) as exc:
        LOADERS[taker](path)
    text = str(exc.value)
    made = json.load(open(path))["command"]
    assert "\n" not in text and f"--baseline {path}" in text and f"`ncclcheck {made}`" in text, text


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.parametrize("taker", ["health", "preflight"])
@pytest.mark.parametrize("producer", sorted(LEGAL["health"]))
def test_the_same_node_seconds_later_is_the_same(reports, taker, producer):
    """Compared on what both runs measured: no difference; what one of them did not collect is counted, not
    compared (health collects no CUDA/NCCL version: torch's own); two health runs measured the same."""
    rep = getattr(ncclcheck, f"run_{taker}")(baseline=reports[producer])
    (drift,) = [c for c in rep.checks if c.id == "baseline.drift"]
    assert drift.status.value == "pass" and drift.evidence["differences"] == [], drift.summary
    skip = drift.evidence["not_compared"]
    collected_less = (producer == "health") != (taker == "health")  # one side measured more: said, not compared
    assert bool(skip["not_in_baseline"] or skip["not_measured"]) == collected_less, drift.summary
    for key, words in (("not_in_baseline", "not in the baseline"), ("not_measured", "not measured by this run")):
        n = sum(skip[key].values())
        assert (f"{n} fact{'s' if n != 1 else ''} {words} ({', '.join(skip[key])})" in drift.summary) == (n > 0)
    if producer == "health" and taker == "preflight":  # issue 53's own case, the other way round: no '(none) ->'
        assert "(none)" not in drift.summary and "cuda version" in drift.summary


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_through_the_cli_health_after_health_and_a_refusal(reports, tmp_path):
    """The issue's commands as typed: `health --json G.json`, then `health --baseline G.json`; and a bench report
    as health's baseline: exit 2, one line, nothing run."""
    golden = tmp_path / "G.json"
    assert run_cli("health", "--json", str(golden)).returncode == 0
    res = run_cli("health", "--baseline", str(golden), "--json", "-")
    assert res.returncode == 0, res.stderr[-2000:]
    (drift,) = [c for c in json.loads(res.stdout)["checks"] if c["id"] == "baseline.drift"]
    assert drift["status"] == "pass" and drift["summary"].startswith("same as the baseline")
    assert drift["summary"] == "same as the baseline (vm)".replace("vm", drift["evidence"]["baseline_hostname"])
    for taker in ("health", "preflight", "links"):
        res = run_cli(taker, "--baseline", reports["bench"] if taker != "links" else reports["health"])
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr[-2000:]
        assert "Traceback" not in res.stderr and "holds no" in res.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_bench_compares_the_rows_both_runs_measured_and_counts_the_rest(reports, cpu_world):
    """The saved bench measured all_reduce at 64K; this run 64K and 128K: one row compared, one not in the baseline
    (counted), and a tolerance no CPU noise can miss."""
    rep = ncclcheck.run_bench(sizes="64K-128K", ops="all_reduce", iters=2, warmup=1, baseline=reports["bench"],
                              tolerance="0.99")
    (gate,) = [c for c in rep.checks if c.id == "bench.baseline"]
    assert gate.status.value == "pass" and "1 row within 99% of the baseline" in gate.summary, gate.summary
    assert "1 row absent in the baseline" in gate.summary and len(gate.evidence["compared"]) == 1


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.parametrize("producer", sorted(LEGAL["links"]))
def test_links_compares_with_a_links_or_sweep_report(reports, producer, cpu_world):
    rep = ncclcheck.run_links(size="64K", baseline=reports[producer], tolerance="0.99")
    (gate,) = [c for c in rep.checks if c.id == "links.baseline"]
    assert gate.status.value == "pass" and gate.evidence["compared"], gate.summary
