"""`ncclcheck watch` on a running job that is slow (issue 47), against real responders on loopback whose flight
recorders are a simulated job laid on the wall clock (ncclcheck_lab/livesim.py): the late rank is named with its
host, what it costs per step and since when; a healthy job names nobody; the clock, blob and rate requests; the
header names the launcher; --follow's start and end lines; diagnose reads watch's --dump to the same straggler."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ncclcheck.live import pace, straggle, wire
from ncclcheck.live.auth import Session
from ncclcheck.live.watch import watch
from ncclcheck.options import api_config
from ncclcheck.postmortem import flight, slow
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.render.labels import render_labels
from ncclcheck.render.prometheus import render_prometheus
from ncclcheck.rendezvous.budget import FIXED, Budget
from ncclcheck_lab import livesim
from ncclcheck_lab.loopstore import loopback_store
from ncclcheck_lab.slowsim import Job
from ncclcheck_lab.slowsim import docs as slowsim_docs
from tests.conftest import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def store():
    port = free_port()
    st = loopback_store(port)
    yield port
    del st


def run(job: Job, port: int, past: int = 40, silent: frozenset = frozenset(), **flags) -> tuple:
    rs = livesim.start(livesim.laid(job, past), list(range(job.world)), port, silent=silent)
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
    assert slow.evidence["nodes"] == [2], slow.evidence["named"]  # h3, the third of the report's nodes: its labels
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


def test_ranks_that_never_answer_cost_one_bound_hold_no_slot_and_the_late_rank_among_the_others_is_named(
        store, monkeypatch):
    """Ranks 0 and 1 registered and never answer. Two ranks at once (a look of 4,096 asks 128): asked first, they held
    both slots for the whole bound and no other rank was asked (at 4,096 ranks, 81 silent ones left 366 unread, the
    late rank among them); parked after Budget.live_park_s, they hold none. Rank 0 is also the step's glance's first
    choice and its host's sampled rank: watch answers within its one bound T (10 s), not T for the glance and T again
    for the look. Every other rank is read, the late rank 5 named, the two silent ones said not judged."""
    from ncclcheck.live import fetch

    monkeypatch.setattr(fetch, "fan_out", lambda n: min(n, 2))
    job = Job(world=6, per_host=2, step_us=40_000, slow={5: (0, 0.5)}, jitter=0.02, steps=400)
    t0 = time.monotonic()
    report, checks = run(job, store, silent=frozenset({0, 1}))
    took = time.monotonic() - t0
    assert sorted(report.extra["live"]["answered"]) == [2, 3, 4, 5]
    slow = checks["live.slow"]
    assert [(f["unit"], f["rank"]) for f in slow.evidence["named"]] == [("rank", 5)], slow
    assert slow.evidence["unjudged"] == {"count": 2, "ranks": [0, 1]}, slow.evidence
    assert took < 2 * 10, f"watch took {took:.1f} s with two silent ranks: its bound T twice (the glance's, the look's)"


def test_the_watch_command_names_the_late_rank_beside_ranks_that_never_answer(store, validate_report):
    """The same silence through `ncclcheck watch` as a user runs it (a process of its own, its JSON on stdout): ranks 0
    and 1 registered and never answer, rank 5 is late. The command answers within one bound T, exit 1, naming rank 5
    from the ranks that answered and saying 0 and 1 were not judged and did not answer."""
    from tests.conftest import run_cli

    job = Job(world=6, per_host=2, step_us=40_000, slow={5: (0, 0.5)}, jitter=0.02, steps=400)
    rs = livesim.start(livesim.laid(job, 40), list(range(job.world)), store, silent=frozenset({0, 1}))
    try:
        assert all(r.registered.wait(30) for r in rs)
        t0 = time.monotonic()
        p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(store), "--timeout", "10",
                    "--json", "-", timeout=120)
        took = time.monotonic() - t0
    finally:
        for r in rs:
            r.close()
    doc = validate_report(p.stdout)
    checks = {c["id"]: c for c in doc["checks"]}
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    slow = checks["live.slow"]
    assert slow["status"] == "fail" and [(f["unit"], f["rank"]) for f in slow["evidence"]["named"]] == [("rank", 5)]
    assert slow["evidence"]["unjudged"] == {"count": 2, "ranks": [0, 1]}, slow["evidence"]
    assert sorted(doc["live"]["answered"]) == [2, 3, 4, 5]
    assert checks["live.answered"]["status"] == "warn" and sorted(doc["live"]["unanswered"]) == ["0", "1"]
    assert took < 2 * 10 + 10, f"watch took {took:.1f} s with two silent ranks (T = 10 s, and the command's start)"


def test_the_phase_sampling_of_a_silent_rank_ends_within_the_looks_bound(monkeypatch):
    """A sampled rank that never answers is waited for until the window and a request have passed, or the look's
    bound T where that is later, never T plus a reply's whole send allowance (a watch of --timeout 8 answered in
    14 s)."""
    budget = Budget(timeout_s=8.0)
    ends: list = []

    def exchange(rec, req, asker, end, budget_, *a):
        ends.append(end - budget_.now())
        return None, "no reply", 0, 0

    monkeypatch.setattr(pace, "exchange", exchange)
    records = {r: {"rank": r, "host": f"h{r // 2}", "addr": "127.0.0.1", "port": 1} for r in range(4)}
    for seconds in (0.8, 2.0):
        ends.clear()
        straggle.sample_phases(records, sorted(records), None, budget, seconds)
        assert ends and max(ends) <= max(seconds + budget.live_request_s, budget.live_fetch_s) + 0.5, ends
    short = Budget(timeout_s=1.0)  # a bound shorter than the window: the window and a request still fit
    ends.clear()
    straggle.sample_phases(records, sorted(records), None, short, 2.0)
    assert min(ends) >= 2.0 + short.live_request_s - 0.5, ends


def test_a_healthy_job_with_jitter_names_nobody(store):
    report, checks = run(Job(world=6, per_host=2, step_us=40_000, jitter=0.2, seed=3, steps=400), store)
    assert "live.slow" in checks, {k: c.summary for k, c in checks.items()}
    assert checks["live.slow"].status.value == "pass", checks["live.slow"]
    assert report.exit_code == 0


def test_the_clock_phase_blob_and_rate_requests(store):
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
        got, why, _, _ = pace.exchange(recs[1], {"kind": "phase", "s": 0.5}, me, end, FIXED)
        rows = got["phase"]["0"] if got else []
        assert len(rows) >= 3 and all(len(x) == 4 and x[0] <= x[1] for x in rows), (rows, why)
        assert rows[-1][2] > rows[0][2] and rows[-1][3] > rows[0][3]  # it called and completed collectives meanwhile
        assert pace.exchange(recs[1], {"kind": "phase", "s": FIXED.live_phase_max_s + 1}, me, end, FIXED)[0] is None
        clocks = straggle.measure_clocks(recs, [0, 1, 2], me, FIXED)
        assert set(clocks) == {"h1", "h2", "h3"} and all(abs(c["offset_ns"]) < 50_000_000 for c in clocks.values())
    finally:
        for r in rs:
            r.close()



def test_a_download_is_timed_to_its_last_byte_not_through_the_opening_of_the_blob(store, monkeypatch):
    """A rate is the link's: opening the MiB that came (its JSON, its seal) is the prober's CPU, which a loaded prober
    spends late, and it read as a slower link."""
    job = livesim.laid(Job(world=2, per_host=1), 10)
    rs = livesim.start(job, [0, 1], store)
    try:
        assert all(r.registered.wait(30) for r in rs)
        recs = {r.rank: r.record() for r in rs}
        me = pace.Caller(Session("none", None, store, FIXED), rs[0].job, rs[0].run)
        opened = Session.open_reply
        late = 1.0

        def slow_open(self, challenge, data, limit=wire.MAX_REPLY):
            if len(data) >= pace.RATE_BYTES:
                time.sleep(late)
            return opened(self, challenge, data, limit)

        monkeypatch.setattr(Session, "open_reply", slow_open)
        t0 = time.monotonic()
        blob = pace.download(recs[1], me, pace.RATE_BYTES, FIXED.deadline(10), FIXED, source="127.0.0.1", asker=0)
        wall = time.monotonic() - t0
        assert blob["ok"] and blob["kind"] == "ok", blob
        assert blob["ms"] / 1e3 <= wall - late, (blob, wall)
    finally:
        for r in rs:
            r.close()


def test_a_clock_is_read_when_its_request_is_read_even_while_the_answer_worker_is_busy(store):
    """The responder's connection loop answers "clock" itself (wire.AT_ONCE): a clock read after the answer worker's
    queue is later than the request by that wait, and the watcher's error (half the round trip) with it. Here the
    worker is held inside the flight recorder (a torch dump under load) while the clock is asked."""
    import threading

    from ncclcheck.live.responder import Responder, Sources
    from ncclcheck.rendezvous.store import Guard

    held, inside = threading.Event(), threading.Event()

    class Held(Sources):
        def flight(self, entries=True):
            if entries:
                inside.set()
                held.wait(20)
            return {"entries": [], "pg_status": {}}

        def stacks(self):
            return []

    r = Responder(0, 2, 0, ("127.0.0.1", store), Guard(), sources=Held(), bind="127.0.0.1").start()
    try:
        assert r.registered.wait(30)
        rec, end = r.record(), FIXED.deadline(20)
        me = pace.Caller(Session("none", None, store, FIXED), r.job, r.run)
        t = threading.Thread(target=pace.exchange, args=(rec, {"kind": "all"}, me, end, FIXED), daemon=True)
        t.start()
        assert inside.wait(10)
        doc, why, sent, got = pace.exchange(rec, {"kind": "clock"}, me, end, FIXED)
        assert doc is not None and sent <= doc["time_ns"] <= got, why
        assert not held.is_set() and got - sent < 5 * 10**9  # answered while the worker still waits
    finally:
        held.set()
        r.close()


def test_a_hosts_clock_is_asked_until_one_round_trip_is_short_enough(monkeypatch):
    """A host's clock: its exchange with the shortest round trip, asked until one is within CLOCK_ENOUGH_NS (then
    more would not tell the rule anything: 2,048 connections at 512 hosts), CLOCK_TRIES at most."""
    records = {0: {"host": "h1", "rank": 0}, 1: {"host": "h2", "rank": 1}, 2: {"host": "h3", "rank": 2}}
    rtts = {0: [300_000], 1: [5_000_000, 2_000_000, 800_000, 100], 2: [9_000_000, 4_000_000, 3_000_000, 2_500_000]}
    asked: dict = {}

    def exchange(rec, doc, caller, end, budget, limit=0, kept=None):
        r = rec["rank"]
        rtt = rtts[r][len(asked.setdefault(r, []))]
        asked[r].append(rtt)
        sent = 10**18
        return {"time_ns": sent + rtt // 2 + 1000 * r}, "", sent, sent + rtt

    monkeypatch.setattr(pace, "exchange", exchange)
    clocks = straggle.measure_clocks(records, [0, 1, 2], None, FIXED)
    assert {r: len(v) for r, v in asked.items()} == {0: 1, 1: 3, 2: straggle.CLOCK_TRIES}
    assert [clocks[h]["err_ns"] for h in ("h1", "h2", "h3")] == [150_001, 400_001, 1_250_001]
    assert [clocks[h]["offset_ns"] for h in ("h1", "h2", "h3")] == [0, 1000, 2000]

def test_follow_says_when_a_slowdown_starts_and_ends_at_its_first_and_last_slow_step():
    said = []
    f = straggle.Follow(said.append)
    t = 1_800_000_000 * 10**9
    began, last = t + 3 * 10**9, t + 9 * 10**9  # the slowdown's first and last slow steps, not the looks' times
    late = {"unit": "rank", "rank": 5, "host": "h3", "kind": "compute", "cost_us": 20_000, "share": 0.3,
            "step_us": 60_000, "steps": 9, "consistent": 1.0, "since_ns": began, "since_seq": 41,
            "pg": "0", "desc": "default_pg", "last_ns": t + 7 * 10**9}
    ranks = [{"rank": 5, "host": "h3", "relative": 0.7, "individual": 0.7, "share": 0.3}]
    looks = [([], {}), ([late], {}), ([dict(late, last_ns=t + 8 * 10**9)], {}), ([], {"rank:5": last})]
    for i, (named, last_slow) in enumerate(looks):
        f.look(t + (5 + 5 * i) * 10**9, {"named": named, "links": [], "ranks": ranks, "last_slow": last_slow})
    assert [(e["event"], e["t_ns"]) for e in f.events] == [("start", began), ("end", last)]
    assert "slowdown starts: rank 5 (host h3) calls collectives late" in said[0]
    assert "slowdown ends: rank 5 (host h3) (its last slow step" in said[1]
    (s,) = f.section()["slowdowns"]
    assert (s["start_ns"], s["end_ns"], s["kind"]) == (began, last, "compute")
    assert len(f.section()["history"]) == 4 and f.section()["history"][-1]["ranks"]["5"]["relative"] == 0.7
    check = f.check("its store went away")  # the job ended: the slowdown it saw is the verdict, with both times
    assert check.status.value == "fail" and check.summary.startswith("rank 5 (host h3) (compute) from ")
    json.dumps(f.section())


def _rates(slow_host_in: list, slow_bps: float = 1e7, loaded_in: tuple = (), per_round: int = 6):
    """A pace.exchange stand-in: each round's rate replies (`per_round` downloads each: 3 hosts, every pair), 1 GB/s
    a direction, `slow_bps` to and from h2 in the rounds listed, every direction at `slow_bps` in the rounds
    `loaded_in` (a machine that was busy then)."""
    calls = {"n": 0}

    def exchange(rec, doc, asker, end, budget, limit=0):
        at = calls["n"] // per_round
        calls["n"] += 1
        slow = at in slow_host_in
        rate = {str(r): {"ok": True, "bytes": pace.RATE_BYTES,
                         "bps": slow_bps if (slow and (r == 2 or rec["host"] == "h2")) or at in loaded_in else 1e9}
                for r in doc["ranks"]}
        return {"rate": rate}, "", 0, 0
    return exchange


def test_a_probe_download_refused_is_said_with_the_probe_never_left_out(monkeypatch):
    """A rate request refused (a responder over its share) gives no rate: the direction is named as not measured in
    the probe's JSON and words, not silently missing from its matrix."""
    records = {0: {"host": "h1"}, 2: {"host": "h2"}, 4: {"host": "h3"}}
    rates = _rates([], per_round=6)

    def exchange(rec, doc, asker, end, budget, limit=0):
        if rec["host"] == "h1" and doc["ranks"] == [4]:
            rates(rec, doc, asker, end, budget)
            return None, "refused: busy: over its share of the CPU for rate requests", 0, 0
        return rates(rec, doc, asker, end, budget)

    monkeypatch.setattr(pace, "exchange", exchange)
    out = straggle.probe([0, 2, 4], {"h2"}, records, None, FIXED)
    assert out["unmeasured"] == [{"from": "h3", "to": "h1", "why": "refused: busy: over its share of the CPU for rate "
                                                                   "requests"}], out["unmeasured"]
    assert "1 direction not measured in a round or more (h3 -> h1: refused: busy" in out["said"], out["said"]
    # a job slower than its best, nobody named, its probe not whole: a warning, never a pass
    section = {"groups": [{"pg": "0", "steps": 12, "ranks": 6}], "named": [], "probe": out,
               "job": {"slower": True, "share": 0.4, "step_us": 300_000.0, "best_step_us": 80_000.0}}
    check = slow.check("live.slow", section)
    assert check.status.value == "warn" and "could not measure 1 direction" in check.summary, check
    assert slow.check("live.slow", dict(section, probe=dict(out, unmeasured=[]))).status.value == "pass"


def test_rounds_whose_downloads_of_a_host_were_refused_are_asked_again_not_counted_fast(monkeypatch):
    """h2 at half the others' rate, its downloads refused in the first two rounds (its responders over their share on
    a loaded host): the probe asks more rounds until 3 of 4 measured ones can say it, and names h2."""
    records = {0: {"host": "h1"}, 2: {"host": "h2"}, 4: {"host": "h3"}}
    rates = _rates(list(range(straggle.PROBE_ATTEMPTS)), slow_bps=4e8)
    calls = {"n": 0}

    def exchange(rec, doc, asker, end, budget, limit=0):
        at = calls["n"] // 6
        calls["n"] += 1
        got = rates(rec, doc, asker, end, budget)
        if at < 2 and (rec["host"] == "h2" or doc["ranks"] == [2]):
            return None, "refused: busy: over its share of the CPU for rate requests", 0, 0
        return got

    monkeypatch.setattr(pace, "exchange", exchange)
    out = straggle.probe([0, 2, 4], {"h2"}, records, None, FIXED)
    assert out["hosts"] == ["h2"] and out["rounds"] == 5, out
    assert len(out["lost"]["h2"]["rounds"]) == 3 and out["unmeasured"], out


def test_the_probe_turns_never_make_a_host_serve_two_downloads_at_once():
    hosts = [f"h{i}" for i in range(1, 8)]
    for todo in (straggle.plan(hosts[:3], set()), straggle.plan(hosts, {"h4"}), straggle.plan(hosts, set())):
        turns = straggle.schedule(todo)
        assert sorted(e for t in turns for e in t) == sorted((p, t) for p, ts in todo.items() for t in ts)
        for turn in turns:
            assert len({p for p, _ in turn}) == len(turn) == len({t for _, t in turn}), turn
    assert len(straggle.schedule(straggle.plan(hosts[:3], set()))) == 2  # every pair of 3 hosts: 2 turns


@pytest.mark.parametrize("slow_in, slow_bps, loaded, named, rounds", [
    ([0, 1, 2, 3], 1e7, (), ["h2"], 3),  # 100x slow in every round (3 of 4 settle it)
    ([0, 1, 2, 3], 5e8, (), ["h2"], 3),  # half the others' rate, in every round: the one-round rule let it through
    ([0, 1, 2, 3], 5e8, (1,), ["h2"], 4),  # ... and a round where the whole machine was busy: 3 rounds of 4
    ([0], 1e7, (), [], 3),  # once: a loaded host's one slow round is not a slow link (three rounds settle it)
    ([0, 2, 3], 1e7, (), [], 4),  # slow 3 rounds of 4 but at the others' rate once: no shaper lets that through
    ([], 1e9, (), [], 2),  # healthy: two rounds
])
def test_the_transfer_probe_names_what_most_rounds_measure_slow(monkeypatch, slow_in, slow_bps, loaded, named,
                                                                rounds):
    """One 1 MiB download a direction is one sample: a host measured slow once (a loaded lab host beside the suite's
    other lane turned a compute straggler into "communication") is not named; a host at half the others' rate in 3
    rounds of 4 is."""
    records = {0: {"host": "h1"}, 1: {"host": "h1"}, 2: {"host": "h2"}, 4: {"host": "h3"}}
    monkeypatch.setattr(pace, "exchange", _rates(slow_in, slow_bps, loaded))
    out = straggle.probe([0, 1, 2, 4], {"h2"}, records, None, FIXED)
    assert out["hosts"] == named and out["rounds"] == rounds, out
    assert out["moved"] == rounds * 6 * pace.RATE_BYTES and f"{rounds} round" in out["said"]
    if named:
        assert f"h2 sends at {slow_bps / 1e6:.1f} MB/s against 1.00 GB/s" in out["said"], out["said"]
        lost = out["lost"]["h2"]  # what the rule read, in the JSON: a share per round, its best against the typical
        assert len(lost["rounds"]) == rounds and lost["best"] >= straggle.CAPACITY_FLOOR, lost
    elif len(slow_in) > 1:  # slow in most rounds but not in its best: said, not named
        assert out["unconfirmed"] == ["h2"] and "not consistently: nothing named" in out["said"], out["said"]
    else:  # slow in one round of three: noise, not said
        assert "every pair of the 3 hosts measures alike" in out["said"], out["said"]


def _follow(port: int, said: list, out: dict) -> Any:
    """`watch --follow` on the simulated job's store at `port`, in a thread (returned, started): each line it says
    appended to `said` as (when, its text), its report put in out["report"] when it ends."""
    import threading

    config = api_config("watch", {"master_addr": "127.0.0.1", "master_port": str(port), "timeout": "10",
                                  "follow": True}, "test")

    class Said:
        def row(self, kind, data):
            said.append((time.time_ns(), str(data)))

    t = threading.Thread(target=lambda: out.update(report=watch(config, Said())))
    t.start()
    return t


def test_follow_ends_with_the_jobs_end_and_keeps_every_slowdown_it_saw():
    """The job ends normally while --follow watches (its ranks stop answering, its store goes away): a normal end,
    exit by what was seen (a slowdown: 1), the slowdown kept with its start and end, not "the job's store went
    away"."""

    port = free_port()
    st = loopback_store(port)
    job = Job(world=6, per_host=2, step_us=40_000, slow={5: (0, 0.5)}, jitter=0.02, steps=2000)
    rs = livesim.start(livesim.laid(job, 40), list(range(job.world)), port)
    said: list = []
    out: dict = {}
    try:
        assert all(r.registered.wait(30) for r in rs)
        t = _follow(port, said, out)
        end = time.monotonic() + 60
        while not any("slowdown starts" in text for _, text in said) and time.monotonic() < end:
            time.sleep(0.2)
        time.sleep(3)  # the slowdown still on when the job ends
    finally:
        for r in rs:
            r.close()
        # the job ends when its last rank is closed: rank 5, closed last, still answered while the others closed (CI
        # saw its last step 17 ms after the first close)
        ended = time.time_ns()
        del st  # the job ended: its ranks and then its store are gone
    t.join(90)
    report = out["report"]
    checks = {c.id: c for c in report.checks}
    assert checks["live.progress"].status.value == "pass" and "the job ended while watched" in \
        checks["live.progress"].summary, checks["live.progress"]
    slow = checks["live.slow"]
    assert slow.status.value == "fail" and report.exit_code == 1, slow
    (s,) = report.extra["live"]["slow"]["slowdowns"]
    assert s["rank"] == 5 and s["start_ns"] and s["end_ns"] >= s["start_ns"], s
    assert [e["event"] for e in report.extra["live"]["slow"]["events"]] == ["start", "end"]
    # still on at the job's end: it ends with the job, at its last step seen (within a tick of progress reads and a
    # step), not at the look before (up to live_follow_poll_s earlier)
    assert ended - (FIXED.live_follow_tick_s + 0.5) * 1e9 <= s["end_ns"] <= ended, (s["end_ns"] - ended) / 1e9


def test_a_slow_link_beside_a_straggler_is_dated_by_its_own_start():
    """Rank 3 (h2) slow from the start, every transfer 3x slower from step 30 (the probe measures h3's link slow):
    the link's finding starts where the slowdown the rank does not cost begins, not at the rank's start."""
    from ncclcheck_lab.slowsim import timeline

    job = Job(world=6, per_host=2, step_us=40_000, slow={3: (0, 0.5)}, transfer_from=(30, 3), transfer_us=10_000,
              jitter=0.02, steps=60)
    dumps = {r: flight.normalise(d, r, f"rank{r}.json", "json") for r, d in slowsim_docs(job).items()}
    clocks = {r: {"offset_ns": 0, "err_ns": 50_000} for r in dumps}
    section = slow.analyse(dumps, {r: job.host(r) for r in dumps}, clocks)
    named, links = straggle.with_probe(section["named"], H3_SLOW, section["job"], False)
    assert [f["rank"] for f in named] == [3] and links and links[0]["hosts"] == ["h3"], (named, links)
    names, calls, _ = timeline(job)
    step30 = calls[0][30 * job.colls]
    assert abs(links[0]["since_ns"] - step30) <= 2 * (job.step_us + 3 * job.transfer_us * job.colls) * 1e3, \
        (links[0]["since_ns"] - step30) / 1e9
    assert named[0]["since_ns"] < step30 - 2 * 10**9  # the rank's own start: the window's first step, 30 steps before


FIXTURES = Path(__file__).parent / "fixtures"


def _without_phase(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["ncclcheck_live"].pop("phase", None)
        (dst / f.name).write_text(json.dumps(doc))
    return dst


def test_a_real_communication_bound_job_s_straggler_is_compute_where_its_ranks_were_sampled(tmp_path):
    """A lab job's watch --dump (fixtures/comm-bound-straggler/HOW.md): its big all_reduce takes ~2.2x its compute.
    With the ranks' sampled progress the step begins where they compute and rank 3 is "compute"; cut at the longest
    gap (the dump without its samples), the same rank would read "communication": its kind is not told."""
    got = diagnose([str(FIXTURES / "comm-bound-straggler")])
    slow = next(c for c in got.checks if c.id == "postmortem.slow")
    assert [(f["rank"], f["kind"]) for f in slow.evidence["named"]] == [(3, "compute")], slow
    g = next(g for g in got.extra["postmortem"]["slow"]["groups"] if g.get("steps"))
    assert "outside collectives (sampled)" in g["steps_by"], g
    before = diagnose([str(_without_phase(FIXTURES / "comm-bound-straggler", tmp_path / "gaps"))])
    old = next(c for c in before.checks if c.id == "postmortem.slow")
    assert [(f["rank"], f["kind"]) for f in old.evidence["named"]] == [(3, "untold")], old
    assert "check h2's links" not in old.fix and "not told" in old.summary, old
    healthy = next(c for c in diagnose([str(FIXTURES / "comm-bound-healthy")]).checks if c.id == "postmortem.slow")
    assert healthy.status.value == "pass", healthy


def _found(**kw) -> dict:
    return {"unit": "rank", "host": "h1", "ranks": [0], "share": 0.2, "cost_us": 20_000.0, "inside": 0.0,
            "step_us": 100_000.0, "steps": 12, "consistent": 1.0, "since_ns": 1, "since_seq": 3, "pg": "0", **kw}


H3_SLOW = {"hosts": ["h3"], "pairs": [], "said": "host h3 sends at 6.8 MB/s against 54.2 MB/s", "rounds": 3}


def test_a_slow_link_never_silences_a_compute_straggler_elsewhere():
    rank = _found(rank=3, host="h2", ranks=[3], kind="compute")
    named, links = straggle.with_probe([rank], H3_SLOW, {"share": 0.3, "slower": True}, True)
    assert [(f["rank"], f["kind"]) for f in named] == [(3, "compute")]
    (link,) = links
    assert link["hosts"] == ["h3"] and link["besides"] == ["rank 3 (host h2)"]
    check = slow.check("live.slow", {"groups": [{"pg": "0", "steps": 12}], "named": named}, tuple(links))
    assert len(check.findings) == 2 and "every rank calls collectives in time" not in " ".join(check.findings)
    assert "h3 measures slow: another finding" in check.findings[0]
    assert check.findings[1].startswith("host h3's link measures slow while the job runs: communication")
    assert "check h3's links" in check.fix and "find what rank 3 (host h2) does" in check.fix


def test_a_unit_on_the_slow_host_is_its_link_and_one_elsewhere_its_consequence_only_when_steps_were_measured():
    on_h3 = _found(rank=4, host="h3", ranks=[4], kind="communication", inside=0.6)
    named, links = straggle.with_probe([on_h3], H3_SLOW, {}, True)
    assert [(f["rank"], f["kind"]) for f in named] == [(4, "communication")] and not links
    assert "communication: its links measure slow: host h3 sends" in slow.check(
        "live.slow", {"groups": [{"pg": "0", "steps": 12}], "named": named}).summary
    elsewhere = _found(rank=0, host="h1", kind="communication", inside=0.8)
    named, links = straggle.with_probe([elsewhere], H3_SLOW, {}, True)
    assert named == [] and links[0]["explains"][0]["rank"] == 0
    words = slow.check("live.slow", {"groups": [{"pg": "0", "steps": 12}], "named": named}, tuple(links)).summary
    assert "it explains rank 0 (host h1) leaving collectives late (its own links measure like the others'" in words
    named, links = straggle.with_probe([elsewhere], H3_SLOW, {}, False)  # steps cut at the gaps: not known
    assert [(f["rank"], f["kind"]) for f in named] == [(0, "communication")] and not links[0]["explains"]


def test_a_measured_compute_straggler_whose_host_transfers_slow_is_compute_starved_not_its_link():
    """srun, h2's cgroup CPU quota halved: its ranks call late where they work, and the probe, served by the same
    starved processes, measures h2 slow too (issue 56's lab run): compute, said so; no link finding for h2."""
    h2 = {"hosts": ["h2"], "pairs": [], "said": "host h2 sends at 13.0 MB/s against 80.0 MB/s", "rounds": 3}
    rank = _found(rank=3, host="h2", ranks=[3], kind="compute")
    named, links = straggle.with_probe([rank], h2, {}, True)
    assert [(f["rank"], f["kind"]) for f in named] == [(3, "compute")] and not links
    said = slow.check("live.slow", {"groups": [{"pg": "0", "steps": 12}], "named": named}).summary
    assert "its host's transfers measure slow too" in said and "the CPU they lack, not its link" in said, said
    # steps cut at the gaps: the kind is not told, and the probe does not tell it (a starved host serves it slowly)
    named, links = straggle.with_probe([dict(rank, kind="untold", untold="not sampled")], h2, {}, False)
    assert named[0]["kind"] == "untold" and not links
    said = slow.check("live.slow", {"groups": [{"pg": "0", "steps": 12}], "named": named})
    assert "its host's transfers measure slow" in said.summary and "not told" in said.summary, said
    assert "check h2's links" not in said.fix


@pytest.mark.parametrize("kind", ["phase", "all"])
def test_a_rank_that_ends_while_its_responder_works_for_a_watch_ends_normally(tmp_path, kind):
    """A watch's sampling (or fetch) met the job's normal end: the responder's daemon thread was inside torch's
    flight recorder (C++) as the interpreter finalized, was unwound by pthread_exit, and the rank aborted
    ("terminate called without an active exception", SIGABRT) in the lab. The responder stops its work at exit."""
    import subprocess
    import sys
    import threading

    port = free_port()
    from tests.conftest import cli_env

    # the checkout first on its path (an uninstalled checkout's worker imported nothing: the lent H200's run)
    env = cli_env({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": str(port), "EXIT_AFTER_S": "1.0"})
    p = subprocess.Popen([sys.executable, str(FIXTURES / "exit_worker.py")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    rec = json.loads(p.stdout.readline())
    me = pace.Caller(Session("none", None, port, FIXED), rec["job"], rec["run"])
    asked = []

    def ask():
        while p.poll() is None:  # the job's end meets a request in flight: a 2 s sampling always does
            asked.append(pace.exchange(rec, {"kind": kind, "s": 2.0} if kind == "phase" else {"kind": kind}, me,
                                       FIXED.deadline(5), FIXED)[0])

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    out, err = p.communicate(timeout=120)
    t.join(10)
    assert p.returncode == 0, (p.returncode, err[-3000:])
    assert asked and (kind == "phase" or any(asked)), asked  # asked, at least once, while it ran


def test_a_probes_blobs_are_paid_from_the_spend_not_the_loops_share(store):
    """A 1 MiB blob's send was 5 ms of CPU counted against the loop's 1 % share of a 0.5 s window (5 ms): the loop
    stopped accepting after each, every download waited ~0.5 s, and a probe at 128 hosts took ~6 s. Its send is now
    paid from the Spend that every guarded request draws on, and the loop does not count it again."""
    from ncclcheck.live.auth import Session as _S
    from ncclcheck.live.fetch import Asker, read_registry
    from ncclcheck.rendezvous.store import Guard, open_store

    job = Job(world=4, per_host=2, steps=300, step_us=1_000_000.0)
    rs = livesim.start(livesim.laid(job, 40), list(range(4)), store)
    try:
        assert all(r.registered.wait(30) for r in rs)
        reg = read_registry(open_store("127.0.0.1", store, False, 10, guard=Guard()))
        out = straggle.probe([0, 1, 2, 3], {"h2"}, reg.records, Asker(_S("none", None, store, FIXED), reg.job,
                                                                       reg.run), FIXED)
        assert out["rounds"] >= 2 and out["moved"] >= 2 * 2 * pace.RATE_BYTES, out
        served = {r.rank: r for r in rs if r.rank in (0, 2)}  # each host's first rank probes and serves
        for r in served.values():
            blobs = out["rounds"]  # one download from the other host a round
            assert r.guarded_spend.spent >= blobs * FIXED.live_send_cost_s, (r.rank, r.guarded_spend.spent)
            assert r.spend.spent < blobs * FIXED.live_send_cost_s, (r.rank, r.spend.spent)  # builds: untouched
            assert r.loop.cpu_used < blobs * FIXED.live_send_cost_s, (r.rank, r.loop.cpu_used)
    finally:
        for r in rs:
            r.close()


def test_a_probe_stopped_because_the_job_hung_is_never_a_verdict(monkeypatch):
    import threading

    records = {0: {"host": "h1"}, 1: {"host": "h1"}, 2: {"host": "h2"}, 4: {"host": "h3"}}
    monkeypatch.setattr(pace, "exchange", _rates([0, 1, 2, 3], 1e7))
    stop = threading.Event()
    stop.set()
    out = straggle.probe([0, 1, 2, 4], {"h2"}, records, None, FIXED, stop)
    assert out["stopped"] and out["rounds"] == 0 and out["said"] is None


def test_the_probe_started_beside_the_second_look_is_kept_when_the_suspects_are_the_same(monkeypatch):
    """watch reads the first look's recorders (straggle.early_probe: the analysis and the probe it calls for) while its
    second look waits; judge() takes that analysis without making it again, keeps the probe for the same suspects,
    probes again for others, and never keeps one cut short."""
    from ncclcheck.postmortem.inputs import Inputs
    from ncclcheck_lab.slowsim import docs

    job = Job(world=6, per_host=2, slow={5: (0, 0.5)}, steps=40)
    inp = Inputs()
    for r, d in docs(job).items():
        inp.dumps[r] = flight.normalise(d, r, f"r{r}", "json")
    records = {r: {"host": job.host(r)} for r in range(6)}
    asked = []
    monkeypatch.setattr(straggle, "probe", lambda *a, **k: asked.append(a[1]) or {"hosts": [], "pairs": [],
                                                                                     "said": None})
    section, early = straggle.early_probe(inp, records, {}, None, FIXED)
    assert early[0] == (frozenset({"h3"}), False) and asked == [{"h3"}]
    assert [f["rank"] for f in section["named"]] == [5]
    made = []
    analysed = straggle.analysed
    monkeypatch.setattr(straggle, "analysed", lambda *a: made.append(1) or analysed(*a))
    out, check = straggle.judge(inp, records, {}, None, FIXED, probed=early, section=section)
    assert asked == [{"h3"}] and not made  # kept: no second probe, no second analysis
    assert [f["rank"] for f in out["named"]] == [5] and check.status.value == "fail" and "probe" not in section
    straggle.judge(inp, records, {}, None, FIXED, probed=({"h1"}, early[1]))
    straggle.judge(inp, records, {}, None, FIXED, probed=({"h3"}, {"stopped": True}))
    assert asked == [{"h3"}, {"h3"}, {"h3"}] and len(made) == 2


def test_a_sampling_whose_reads_cost_cpu_spans_its_whole_window_within_one_burst():
    """A real rank's recorder read costs CPU (~0.12 ms in a lab job busy in a big all_reduce): at one read every 2 ms
    the sampling's Spend ran dry after 0.8 s of 2, and the steps went unmeasured. The sampling paces itself so that
    the window fits one burst; a flood of requests still samples less, never more (the Spend is unchanged)."""
    import threading

    from ncclcheck.live.loop import Spend

    class Src:
        def flight(self, entries=True):
            t = time.thread_time() + 0.0004  # a read that costs 0.4 ms of this thread's CPU
            while time.thread_time() < t:
                pass
            return {"pg_status": {"0": {"last_enqueued_collective": "1", "last_completed_collective": "1"}}}

    class Me:
        budget = FIXED
        sources = Src()
        phase_spend = Spend(FIXED, pace.PHASE_SHARE)
        stopped = threading.Event()

        def stopping(self):
            return self.stopped.is_set()

    me = Me()
    t0 = time.monotonic()
    pace.phase(me, 1.0)
    took = time.monotonic() - t0
    assert took >= 0.9, f"the sampling stopped after {took:.2f} s of its 1 s window"
    assert me.phase_spend.spent <= FIXED.live_work_burst_s + 0.01  # within one burst (one more sample at most)


# --- issue 65: a job that steps every ~100 ms, its 16 MiB all_reduce outlasting its 20 ms of compute ---
def _fast(**kw) -> Job:
    """The issue's job, simulated: 3 hosts x 2 ranks, 20 ms of compute then a big all_reduce of 70 ms and a small
    one: a step of ~95 ms, whose 2 s sampling window changes the counters ~80 times (400 JSON values: over the 256
    a request took by default)."""
    return Job(world=6, per_host=2, step_us=20_000, transfer_by=(70_000, 2_000), jitter=0.02, steps=600, **kw)


def _sampled_ok(report) -> list:
    """The sampling as a measure: every asked rank's rows arrived, none refused nor trimmed, more than 256 values."""
    asked = report.extra["live"]["slow"].get("measure")
    assert asked == [], asked
    g = next(g for g in report.extra["live"]["slow"]["groups"] if g.get("steps"))
    assert "outside collectives (sampled)" in g["steps_by"], g
    return asked


def test_a_fast_stepping_jobs_compute_straggler_is_compute_with_a_compute_fix(store):
    report, checks = run(_fast(slow={5: (0, 0.5)}), store, past=60)
    slow = checks["live.slow"]
    assert slow.status.value == "fail" and report.exit_code == 1, slow
    _sampled_ok(report)
    # a unit without a rank (a host, a link) is said in the failure, never a KeyError (CI once met one here)
    assert [(f["unit"], f.get("rank"), f["kind"]) for f in slow.evidence["named"]] == [("rank", 5, "compute")], \
        (slow.summary, slow.evidence["named"], report.extra["live"]["slow"].get("probe"))
    assert "find what rank 5 (host h3) does before each collective" in slow.fix and "links" not in slow.fix, slow.fix


def test_a_fast_stepping_jobs_slow_link_is_its_host_and_communication(store):
    # the simulated slow link: both ranks of h3 leave every collective 15 ms late (what a slow link does to them)
    report, checks = run(_fast(leave_late={4: (0, 15_000), 5: (0, 15_000)}), store, past=60)
    slow = checks["live.slow"]
    assert slow.status.value == "fail" and report.exit_code == 1, slow
    _sampled_ok(report)
    assert [(f.get("host"), f["kind"]) for f in slow.evidence["named"]] == [("h3", "communication")], slow
    assert "check h3's links" in slow.fix and "find what" not in slow.fix, slow.fix


def test_a_healthy_fast_stepping_job_names_nobody(store):
    report, checks = run(_fast(), store, past=60)
    assert checks["live.slow"].status.value == "pass" and report.exit_code == 0, checks["live.slow"]
    _sampled_ok(report)


def test_a_refused_sampling_is_said_and_the_kind_is_not_told(store, monkeypatch):
    """Responders that refuse the sampling's reply (asked for 256 values, as every request asked by default, and not
    trimming it): the verdict still names the rank, says its kind is not told and why (never "check h3's links"),
    and each refusal is a finding about the measure of its own."""
    monkeypatch.setattr(straggle, "phase_ask", lambda seconds, groups, budget: (1 << 20, 256))
    monkeypatch.setattr(pace, "fit_rows", lambda rows, limit, items: (rows, 0))
    report, checks = run(_fast(slow={5: (0, 0.5)}), store, past=60)
    slow = checks["live.slow"]
    assert slow.status.value == "fail", slow
    measure = report.extra["live"]["slow"]["measure"]
    assert len(measure) == 3 and all("256 values" in m["error"] for m in measure), measure
    assert all("its sampling of where it works got no samples: refused" in t for t in slow.findings[1:]), slow
    assert len(slow.findings) == 4 and "its sampling of where it works got no" in slow.findings[0], slow
    f = slow.evidence["named"][0]
    assert (f["rank"], f["kind"], f["untold"]) == (5, "untold", "not sampled"), f
    assert "compute or communication not told" in slow.summary and "check h3's links" not in slow.fix, slow
    assert "cpu.max" not in slow.fix and "TORCH_NCCL_ENABLE_TIMING" in slow.fix, slow.fix


def test_a_trimmed_sampling_is_said_beside_the_verdict(store, monkeypatch):
    """A reply trimmed to what was asked keeps the newest rows and says how many it dropped: said, kind measured."""
    monkeypatch.setattr(straggle, "phase_ask", lambda seconds, groups, budget: (1 << 20, 256))
    report, checks = run(_fast(), store, past=60)
    measure = report.extra["live"]["slow"]["measure"]
    assert measure and all(m["dropped"] > 0 and m["error"] is None for m in measure), measure
    assert any("oldest rows" in t for t in checks["live.slow"].findings), checks["live.slow"]


def test_a_phase_reply_over_its_ask_keeps_the_newest_rows_and_says_how_many_it_dropped():
    rows = {"0": [[i, i + 1, i, i] for i in range(1, 401)], "1": [[i, i + 1, i, i] for i in range(1, 11)]}
    room = pace.phase_room(2, 100)
    kept, dropped = pace.fit_rows(rows, *room)
    assert dropped == 210 and kept["0"] == rows["0"][-190:] and kept["1"] == rows["1"]  # the longest group's oldest
    assert pace.fit_rows(rows, *pace.phase_room(2, 400)) == (rows, 0)
    # what watch asks for holds its window whatever the job's step rate: one row per sample
    nbytes, items = straggle.phase_ask(2.0, 1, FIXED)
    assert items >= pace.PHASE_ROW_ITEMS * int(2.0 / FIXED.live_phase_every_s) > 256


def test_follow_says_each_start_and_end_within_the_rules_steps_and_one_look_of_it():
    """Issue 65: a slowdown that begins and ends while --follow watches is said within the steps the rule needs
    (slowness.MIN_SAMPLES of them: never from one) plus one look (the pause between two looks' starts, and the look's
    own time) of its event, each line dated within a step of the truth. Rank 5 computes 1.5x from a step ~3 s after
    the watch begins, for 60 steps (~9 s)."""

    from ncclcheck.checks import slowness
    from ncclcheck_lab.slowsim import timeline

    port = free_port()
    st = loopback_store(port)
    past, begin, end = 40, 30, 90  # steps: before the watch, then the slowdown's first (~3 s in) and its end (~9 s on)
    job = Job(world=6, per_host=2, step_us=100_000, slow={5: (past + begin, 0.5)},
              slow_until={5: past + end}, jitter=0.02, steps=past + end + 400)
    # 400 entries a rank (torch keeps 2,000): a slowdown that ended a look ago is still in the recorders then
    rs = livesim.start(livesim.laid(job, past), list(range(job.world)), port, buffer=400)
    _, calls, _ = timeline(job)
    first = calls[5][(past + begin) * job.colls - 1]  # the call before its first late one: where a start is dated
    last = calls[5][(past + end - 1) * job.colls]  # its last slow step's late call: where an end is dated
    said: list = []
    out: dict = {}
    try:
        assert all(r.registered.wait(30) for r in rs)
        t = _follow(port, said, out)
        while time.time_ns() < last + 20 * 10**9 and t.is_alive() and not any(
                "slowdown ends" in text for _, text in said):
            time.sleep(0.2)
    finally:
        for r in rs:
            r.close()
        del st
    t.join(90)
    section = out["report"].extra["live"]["slow"]
    events = [e for e in section["events"] if e.get("rank") == 5]
    assert [e["event"] for e in events] == ["start", "end"], section["events"]
    slow_step = (job.step_us * 1.5 + job.transfer_us * job.colls) * 1e3
    took = max(h.get("took_s", 0) for h in section["history"])
    bound = (slowness.MIN_SAMPLES + 1) * slow_step + (FIXED.live_follow_poll_s + took) * 1e9
    lines = []
    for e, truth in zip(events, (first, last)):
        at = next(ns for ns, text in said if ("slowdown starts" if e["event"] == "start" else "slowdown ends") in text)
        lines.append(f"{e['event']}: dated {(e['t_ns'] - truth) / 1e6:+.0f} ms from the truth, said "
                     f"{(at - truth) / 1e9:.1f} s after it (bound {bound / 1e9:.1f} s)")
        assert abs(e["t_ns"] - truth) <= slow_step, lines
        assert at - truth <= bound, lines
    print("FIGURE follow latency (simulated, 6 ranks, 150 ms steps): " + "; ".join(lines))


def test_a_recorder_sent_stale_is_not_judged_and_never_ends_the_window_where_it_ends():
    """The lab's matrix (issue 65): a responder past its CPU share sent the recorder it built 12 s before (its reply's
    `built_s`). Read as it is, the collectives every rank recorded end where the stale one ends, before rank 5 slowed:
    nobody named. Not judged, said with its age, the others' window holds rank 5's slowdown: named, and the ranks not
    judged are said beside it."""
    from ncclcheck.live.fetch import Answer
    from ncclcheck.postmortem.inputs import Inputs

    job = Job(world=6, per_host=2, step_us=100_000, slow={5: (40, 0.5)}, steps=70)
    raw = slowsim_docs(job)
    raw[0] = dict(raw[0], entries=raw[0]["entries"][:60])  # rank 0's recorder as built 40 steps before the others'
    records = {r: {"host": job.host(r), "rank": r} for r in raw}
    answers = {r: Answer(r, doc={"built_s": 12.0 if r == 0 else 0.1}) for r in raw}
    inp = Inputs(dumps={r: flight.normalise(d, r, f"rank{r}.json", "json") for r, d in raw.items()})
    before = straggle.analysed(inp, records, {})
    assert before["named"] == [], before["named"]  # read as it is: the window ends at rank 0's newest, nobody named
    inp.stale = straggle.stale_of(answers)
    assert inp.stale == {0: 12.0}
    section = straggle.analysed(inp, records, {})
    assert [(f["unit"], f["rank"]) for f in section["named"]] == [("rank", 5)], section["named"]
    assert section["stale"] == [{"rank": 0, "built_s": 12.0}] and section["unjudged"]["ranks"] == [0]
    check = slow.check("live.slow", section)
    assert check.status.value == "fail" and check.evidence["stale"] == section["stale"], check
    section_healthy = straggle.analysed(Inputs(dumps={r: inp.dumps[r] for r in inp.dumps if r != 5}, stale={0: 12.0}),
                                        records, {})
    said = slow.check("live.slow", section_healthy)
    assert said.status.value == "warn" and "rank 0's 12.0 s" in said.summary and "past its CPU share" in said.summary


@pytest.mark.parametrize("ratio", [0.2, 5.0])
def test_a_job_waiting_in_collectives_most_of_its_step_is_probed_with_nobody_named(monkeypatch, ratio):
    """A link slow since before the recorder's window slows every rank alike, and the job steps at that pace all
    through the window: no rank is late, no stretch is faster, and watch passed it (a false healthy, found on the
    lab's matrix). A job whose ranks work outside collectives under straggle.PROBE_WORK_SHARE of a step (measured) is
    probed with no suspect; the probe naming h3 is a link finding, "communication", its fix h3's links, dated as
    older than the window. A compute-bound job (ratio 5) naming nobody is not probed."""
    from ncclcheck.postmortem.inputs import Inputs
    from ncclcheck_lab import slow_matrix

    job = slow_matrix.job_of(100, ratio, "none", 0)
    inp = Inputs()
    for r, d in slowsim_docs(job).items():
        inp.dumps[r] = flight.normalise(d, r, f"r{r}", "json")
    inp.phases, inp.sampling = slow_matrix.sampled(job, straggle.phase_window(FIXED.live_confirm_s,
                                                                               job.step_us + sum(job.transfer_by)))
    records = {r: {"host": job.host(r)} for r in range(6)}
    asked = []
    said = "host h3 sends at 1.1 MB/s against 24.0 MB/s between the other hosts"
    monkeypatch.setattr(straggle, "probe", lambda *a, **k: asked.append(a[1]) or {
        "hosts": ["h3"], "pairs": [], "said": said, "rounds": 3})
    section, check = straggle.judge(inp, records, {}, None, FIXED)
    g = next(g for g in section["groups"] if g.get("pg") == section["pg"])
    if ratio == 5.0:
        assert g["work_share"] > straggle.PROBE_WORK_SHARE and asked == [] and check.status.value == "pass"
        return
    assert g["work_share"] < straggle.PROBE_WORK_SHARE and asked == [set()]
    assert check.status.value == "fail" and [f["hosts"] for f in section["links"]] == [["h3"]]
    assert "check h3's links" in (check.fix or "") and "since before the window" in check.summary, check.summary


def test_follow_probes_again_when_a_job_probed_healthy_turns_slower_with_nobody_named(monkeypatch):
    """--follow keeps a probe while what it was made for holds. A communication-bound job probed with no suspect
    while it looked healthy, then slowed by a link (every transfer 3x from step 30: nobody late, the job slower than
    its best), is probed again: the healthy probe says nothing of the slowdown begun since."""
    from ncclcheck.postmortem.inputs import Inputs

    def inputs(job):
        inp = Inputs()
        for r, d in slowsim_docs(job).items():
            inp.dumps[r] = flight.normalise(d, r, f"r{r}", "json")
        return inp

    healthy = Job(world=6, per_host=2, step_us=5_000, transfer_us=30_000, jitter=0.02, steps=80)
    slowed = Job(world=6, per_host=2, step_us=5_000, transfer_us=30_000, transfer_from=(40, 3), jitter=0.02, steps=80)
    records = {r: {"host": healthy.host(r)} for r in range(6)}
    asked = []
    monkeypatch.setattr(straggle, "probe", lambda *a, **k: asked.append(a[1]) or {"hosts": [], "pairs": [],
                                                                                     "said": None})
    # the phases as watch samples them: the ranks compute 5 ms of each 35 ms step (work_share ~0.14)
    monkeypatch.setattr(slow, "_work", lambda phases, name, ranks: {q: 5_000_000 for q in range(1, 10_000)})
    follow = straggle.Follow()
    sec, check = straggle.judge(inputs(healthy), records, {}, None, FIXED, follow=follow)
    assert asked == [set()] and check.status.value == "pass" and not sec["job"]["slower"]
    straggle.judge(inputs(healthy), records, {}, None, FIXED, follow=follow)
    assert asked == [set()]  # the same: kept
    sec, _ = straggle.judge(inputs(slowed), records, {}, None, FIXED, follow=follow)
    assert sec["job"]["slower"] and not sec["named"] and asked == [set(), set()]


def test_a_host_slow_in_every_round_is_named_though_a_burst_let_two_directions_through_once(monkeypatch):
    """The lab's 500 ms job with h3's link at half rate, 47 % slower than its best: h3 lost 0.56-0.89 of the others'
    rate in each of 4 rounds, but a shaper's full bucket let two of its directions through near the others' rate
    once each, its best (each direction's fastest round) lacked only 0.34 (< CAPACITY_FLOOR) and watch passed the
    job. A host that lacks the capacity floor in every one of PROBE_ROUNDS rounds is named."""
    records = {0: {"host": "h1"}, 2: {"host": "h2"}, 4: {"host": "h3"}}
    calls = {"n": 0}
    burst = {0: ("h2", "h1"), 1: ("h1", "h2")}  # (from, to) let through at the others' rate in that round

    def exchange(rec, doc, asker, end, budget, limit=0):
        at = calls["n"] // 6
        calls["n"] += 1
        rate = {}
        for r in doc["ranks"]:
            d = (records[r]["host"], rec["host"])
            slow = "h2" in d and burst.get(at) != d
            rate[str(r)] = {"ok": True, "bytes": pace.RATE_BYTES, "bps": 4e8 if slow else 1e9}
        return {"rate": rate}, "", 0, 0

    monkeypatch.setattr(pace, "exchange", exchange)
    out = straggle.probe([0, 2, 4], {"h2"}, records, None, FIXED)
    lost = out["lost"]["h2"]
    assert lost["best"] < straggle.CAPACITY_FLOOR <= min(lost["rounds"]), lost
    assert out["hosts"] == ["h2"], out
