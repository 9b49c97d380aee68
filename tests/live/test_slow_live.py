"""`ncclcheck watch` on a running job that is slow (issue 47), against real responders on loopback whose flight
recorders are a simulated job laid on the wall clock (ncclcheck_lab/livesim.py): the late rank is named with its
host, what it costs per step and since when; a healthy job names nobody; the clock, blob and rate requests; the
header names the launcher; --follow's start and end lines; diagnose reads watch's --dump to the same straggler."""

from __future__ import annotations

import json
import socket
import time

import pytest

from ncclcheck.live import pace, straggle
from ncclcheck.live.auth import Session
from ncclcheck.live.watch import watch
from ncclcheck.options import api_config
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.render.labels import render_labels
from ncclcheck.render.prometheus import render_prometheus
from ncclcheck.rendezvous.budget import FIXED
from ncclcheck_lab import livesim
from ncclcheck_lab.slowsim import Job

pytestmark = pytest.mark.slow


@pytest.fixture
def store():
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    st = dist.TCPStore("127.0.0.1", port, None, True)
    yield port
    del st


def run(job: Job, port: int, past: int = 40, **flags) -> tuple:
    rs = livesim.start(livesim.laid(job, past), list(range(job.world)), port)
    try:
        assert all(r.registered.wait(30) for r in rs)
        report = watch(api_config("watch", {"master_addr": "127.0.0.1", "master_port": str(port), "timeout": "10",
                                            **flags}, "test"))
    finally:
        for r in rs:
            r.close()
    return report, {c.id: c for c in report.checks}


def test_watch_names_the_rank_that_calls_late_with_its_host_cost_and_since_when(store, tmp_path, validate_report):
    job = Job(world=6, per_host=2, step_us=40_000, slow={5: (0, 0.5)}, jitter=0.02, steps=400)
    report, checks = run(job, store, dump=str(tmp_path / "dump"))
    slow = checks["live.slow"]
    assert checks["live.progress"].status.value == "pass"
    assert slow.status.value == "fail" and report.exit_code == 1, slow
    assert slow.summary.startswith("rank 5 (host h3) calls collectives late: ")
    assert "compute" in slow.summary and "of the job's" in slow.summary
    f = slow.evidence["named"][0]
    assert (f["rank"], f["host"], f["kind"]) == (5, "h3", "compute")
    assert f["cost_us"] == pytest.approx(20_000, rel=0.25)
    assert slow.evidence["nodes"] == [2]  # h3, the third of the report's nodes: its kubectl labels
    assert report.world.launcher == "torchrun" and [n.hostname for n in report.nodes] == ["h1", "h2", "h3"]
    live = report.extra["live"]["slow"]
    assert live["clock"]["source"] == "measured" and live["probe"]["hosts"] == []  # loopback: links alike
    assert {r["rank"] for r in live["ranks"]} == set(range(6))
    validate_report(json.loads(report.to_json()))
    prom = render_prometheus(report)  # as every command writes them: an operator alerts on who
    assert 'ncclcheck_slow{command="watch",kind="compute",unit="rank",rank="5",host="h3"} 1.0' in prom
    assert 'ncclcheck_rank_relative_score{command="watch",rank="5",host="h3"}' in prom
    labels = [ln for ln in render_labels(report).splitlines() if ln.startswith("kubectl label")]
    assert "check.ncclcheck.io/live.slow=fail" in next(ln for ln in labels if " h3 " in ln)
    assert "check.ncclcheck.io/live.slow=fail" not in next(ln for ln in labels if " h1 " in ln)
    # diagnose on watch's dump: the same straggler from the same records, the clocks watch measured
    again = diagnose([str(tmp_path / "dump")])
    same = next(c for c in again.checks if c.id == "postmortem.slow")
    assert same.status.value == "fail" and same.evidence["named"][0]["rank"] == 5
    assert again.extra["postmortem"]["slow"]["clock"]["source"] == "measured"
    validate_report(json.loads(again.to_json()))


def test_a_healthy_job_with_jitter_names_nobody(store):
    report, checks = run(Job(world=6, per_host=2, step_us=40_000, jitter=0.2, seed=3, steps=400), store)
    assert checks["live.slow"].status.value == "pass", checks["live.slow"]
    assert report.exit_code == 0


def test_the_clock_blob_and_rate_requests(store):
    job = livesim.laid(Job(world=3, per_host=1), 10)
    rs = livesim.start(job, [0, 1, 2], store)
    try:
        assert all(r.registered.wait(30) for r in rs)
        recs = {r.rank: r.record() for r in rs}
        end = FIXED.deadline(10)
        me = pace.Caller(Session("none", None, store, FIXED), rs[0].job, rs[0].run)  # watch's asker, duck-typed
        doc, why, sent, got = pace.exchange(recs[1], {"kind": "clock"}, me, end, FIXED)
        assert doc and sent <= doc["time_ns"] <= got, why
        # a blob goes to a rank of the job asking from its own address (rank 0's: 127.0.0.1), nobody else
        blob = pace.download(recs[2], me, 1000, end, FIXED, source="127.0.0.1", asker=0)
        assert blob["ok"] and blob["kind"] == "ok" and blob["bytes"] >= 1000, blob
        for source, asker in (("127.0.0.1", None), ("127.0.0.1", 7), ("127.0.0.2", 0)):
            refused = pace.download(recs[2], me, 1000, end, FIXED, source=source, asker=asker)
            assert not refused["ok"] and refused["kind"].startswith("refused: a blob for"), (source, asker, refused)
        refused, why, _, _ = pace.exchange(recs[2], {"kind": "blob", "bytes": pace.MAX_BLOB + 1, "from": 0}, me, end,
                                           FIXED)
        assert refused is None
        rate, why, _, _ = pace.exchange(recs[0], {"kind": "rate", "ranks": [1, 2]}, me, end, FIXED)
        assert rate and set(rate["rate"]) == {"1", "2"}, why
        assert all(v["ok"] and v["bytes"] >= pace.RATE_BYTES and v["bps"] > 0 for v in rate["rate"].values())
        clocks = straggle.measure_clocks(recs, [0, 1, 2], me, FIXED)
        assert set(clocks) == {"h1", "h2", "h3"} and all(abs(c["offset_ns"]) < 50_000_000 for c in clocks.values())
    finally:
        for r in rs:
            r.close()


def test_follow_says_when_a_slowdown_starts_and_ends():
    said = []
    f = straggle.Follow(said.append)
    late = {"unit": "rank", "rank": 5, "host": "h3", "kind": "compute", "cost_us": 20_000, "share": 0.3,
            "step_us": 60_000, "steps": 9, "consistent": 1.0, "since_ns": time.time_ns(), "since_seq": 41,
            "pg": "0", "desc": "default_pg"}
    ranks = [{"rank": 5, "host": "h3", "relative": 0.7, "individual": 0.7, "share": 0.3}]
    for named in ([], [late], [late], []):
        f.look(time.time_ns(), {"named": named, "links": [], "ranks": ranks})
    assert [e["event"] for e in f.events] == ["start", "end"]
    assert "slowdown starts: rank 5 (host h3) calls collectives late" in said[0]
    assert said[1].endswith("slowdown ends: rank 5 (host h3)")
    assert len(f.section()["history"]) == 4 and f.section()["history"][-1]["ranks"]["5"]["relative"] == 0.7
    json.dumps(f.section())


def _rates(slow_host_in: list):
    """A pace.exchange stand-in: each look's rate replies, 1 GB/s a direction, 10 MB/s from h2 in the looks listed."""
    looks = {"n": -1, "seen": set()}

    def exchange(rec, doc, asker, end, budget, limit=0):
        if rec["host"] in looks["seen"] or not looks["seen"]:  # a new look starts when a host asks again
            looks["n"] += 1
            looks["seen"] = set()
        looks["seen"].add(rec["host"])
        slow = looks["n"] in slow_host_in
        rate = {str(r): {"ok": True, "bps": 1e7 if (slow and r == 2) else 1e9} for r in doc["ranks"]}
        return {"rate": rate}, "", 0, 0
    return exchange


@pytest.mark.parametrize("slow_in, named", [([0, 1], ["h2"]), ([0], [])])
def test_the_transfer_probe_names_only_what_two_looks_both_measure_slow(monkeypatch, slow_in, named):
    """One 1 MiB download a direction is one sample: a host measured slow once (a loaded lab host beside the suite's
    other lane turned a compute straggler into "communication") is not named unless a second look agrees."""
    records = {0: {"host": "h1"}, 1: {"host": "h1"}, 2: {"host": "h2"}, 4: {"host": "h3"}}
    monkeypatch.setattr(pace, "exchange", _rates(slow_in))
    out = straggle.probe([0, 1, 2, 4], {"h2"}, records, None, FIXED)
    assert out["hosts"] == named and out["looks"] == 2, out
    if named:
        assert "h2 sends at 10.0 MB/s" in out["said"], out["said"]
    else:
        assert out["unconfirmed"] == ["h2"] and "a second did not: nothing named" in out["said"], out["said"]
