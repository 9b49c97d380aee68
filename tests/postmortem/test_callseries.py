"""A live reply's call series (postmortem/callseries.py): at scale a look's share per rank holds ~20 whole entries,
and a look that reaches its ranks over seconds leaves them a few collectives in common; the series carries the
newest collectives' call times in one value each, so a slow rank is still judged. Encoded by the responder's reply
cap, decoded with every value checked, read by postmortem/slow.py and never by the hang analysis."""

from __future__ import annotations

import json

import pytest

from ncclcheck.live.responder import _cap
from ncclcheck.postmortem import callseries, flight, slow
from ncclcheck_lab.slowsim import Job, docs

SHARE = (12_032, 610)  # what one rank of 4,096 is asked to fit in (live/fetch.py's Allowance.per_rank)


def test_the_series_holds_every_kept_call_time_and_what_each_collective_was():
    d = docs(Job(world=2, steps=40))[0]
    series = callseries.encode(d["entries"], 30)
    calls = callseries.decode(json.loads(json.dumps(series)))["0"]
    by_seq = {e["collective_seq_id"]: e for e in d["entries"]}
    assert sorted(calls) == list(range(51, 81))  # the newest 30 of 80
    for q, (t, sig) in calls.items():
        assert t == by_seq[q]["time_created_ns"] and sig == callseries.sig(by_seq[q])


def test_the_series_reads_only_the_newest_entries_its_room_holds(monkeypatch):
    """A rank's reply costs what its series keeps, not its recorder's length: torch keeps 2,000 entries and at
    4,096 ranks the series holds ~150 calls; reading every entry's group to share the room cost the rank 0.4 ms a
    reply. The room goes to the groups that called within it: a group that called only before (an init barrier's)
    takes no share of it."""
    d = docs(Job(world=2, steps=1000))[0]
    entries = [dict(d["entries"][0], process_group=["init", ""], collective_seq_id=1), *d["entries"][1:]]
    nbytes, items = SHARE[0] // 2, SHARE[1] // 2
    cap = min(nbytes // callseries.CALL_BYTES, items // 2)
    read = []
    group_of = callseries.group_of
    monkeypatch.setattr(callseries, "group_of", lambda e: read.append(e) or group_of(e))
    series = callseries.fitting(entries, nbytes, items)
    assert list(series) == ["0"] and len(series["0"]["t"]) == cap, {k: len(v["t"]) for k, v in series.items()}
    assert len(read) <= 2 * cap < len(entries), (len(read), cap, len(entries))


def test_a_coalesced_group_is_its_closing_entry_and_a_missing_seq_is_a_gap():
    d = docs(Job(world=2, steps=10))[0]
    entries = [e for e in d["entries"] if e["collective_seq_id"] != 15]
    closing = dict(entries[-1], profiling_name="gloo:coalesced")
    series = callseries.encode([*entries, closing], 10)
    calls = callseries.decode(series)["0"]
    assert 15 not in calls and sorted(calls) == [11, 12, 13, 14, 16, 17, 18, 19, 20]
    assert calls[20][1][0] == "gloo:coalesced"  # the group's closing entry stands for it, as flight keeps it


@pytest.mark.parametrize("bad", [
    None, [], {"0": None}, {"0": {"last": "9", "t": [1], "sig": [0], "sigs": [["a", "b"]]}},
    {"0": {"last": 9, "t": [1, 2], "sig": [0], "sigs": [["a", "b"]]}},  # lengths differ
    {"0": {"last": 9, "t": [1] * 5000, "sig": [0] * 5000, "sigs": [["a", "b"]]}},  # over MAX_CALLS
    {"0": {"last": 2 ** 70, "t": [1], "sig": [0], "sigs": [["a", "b"]]}},
    {"0": {"last": 9, "t": [1], "sig": [0], "sigs": [["a" * 500, "b"]]}},  # a signature past its bound
    {"0": {"last": 9, "t": [1.5], "sig": [7], "sigs": [["a", "b"]]}},  # a time that is no integer, an index past
])
def test_a_hostile_series_is_left_out_never_raised(bad):
    assert callseries.decode(bad) == {}


def test_a_series_decoded_in_bulk_is_what_each_value_checked_alone_gives():
    """decode pairs a series whose every value is good in bulk; for any series, good, with holes, or with bad values
    among good ones (a bool, a float, a time past MAX_ID, an index past the table, a bad signature), the result is
    what checking each value alone gives."""
    import random

    from ncclcheck.postmortem.fields import MAX_ID

    def alone(s: dict) -> dict:
        table = [tuple(x) if isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) and len(y) <= 200
                                                                          for y in x) else None for x in s["sigs"]]
        first = s["last"] - len(s["t"]) + 1
        return {first + i: (ti, table[k]) for i, (ti, k) in enumerate(zip(s["t"], s["sig"]))
                if first + i > 0 and type(ti) is int and 0 < ti <= MAX_ID and type(k) is int and 0 <= k < len(table)
                and table[k] is not None}

    rng = random.Random(5)
    odd = [None, True, 1.5, 0, -3, MAX_ID + 1, "7"]
    for _ in range(3000):
        n, nsigs = rng.randint(1, 12), rng.randint(1, 3)
        t = [rng.randint(1, 10**18) for _ in range(n)]
        ix = [rng.randrange(nsigs) for _ in range(n)]
        sigs = [["all_reduce", f"[[{i}]]"] for i in range(nsigs)]
        for _ in range(rng.choice((0, 0, 1, 2))):  # most series good, some with a bad value
            which = rng.choice(("t", "ix", "sig"))
            if which == "t":
                t[rng.randrange(n)] = rng.choice(odd)
            elif which == "ix":
                ix[rng.randrange(n)] = rng.choice((*odd, nsigs, -1))
            else:
                sigs[rng.randrange(nsigs)] = ["a" * 300, "b"]
        s = {"last": rng.randint(1, 30), "t": t, "sig": ix, "sigs": sigs}
        want = alone(s)
        assert callseries.decode({"0": s}) == ({"0": want} if want else {}), s


def _trimmed(job: Job, behind: dict, drop_series: bool = False) -> dict:
    """Each rank's reply as a look at 4,096 ranks gets it (capped to one rank's share), rank r asked `behind[r]`
    collectives before the newest: read back as watch keeps it (the series with the rank's own word)."""
    out = {}
    for r, d in docs(job).items():
        k = len(d["entries"]) - behind.get(r, 0)
        doc = dict(d, entries=d["entries"][:k])
        reply = json.loads(_cap({"rank": r, "host": job.host(r), "flight": doc}, *SHARE))
        fr = reply["flight"]
        assert len(fr["entries"]) < 30 and reply.get("flight_dropped")
        if not drop_series:
            fr[flight.LIVE_KEY] = {"rank": r, "host": job.host(r), "calls": reply["calls"]}
        out[r] = flight.normalise(fr, r, f"live://rank{r}", "json")
    return out


def test_a_slow_rank_is_judged_on_trimmed_replies_asked_seconds_apart():
    job = Job(world=64, per_host=8, steps=60, slow={63: (0, 0.1)}, jitter=0.01, seed=3)
    behind = {r: (r * 12) // 64 for r in range(64)}  # a look of 6 s at 2 collectives a second
    dumps = _trimmed(job, behind)
    out = slow.analyse(dumps, {r: job.host(r) for r in dumps})
    assert [(f["unit"], f["rank"]) for f in out["named"]] == [("rank", 63)]
    g = next(g for g in out["groups"] if g["pg"] == "0")
    assert g["collectives"] >= slow.MIN_WINDOW
    # without the series the same replies leave too few collectives in common: said, never judged healthy
    bare = _trimmed(job, behind, drop_series=True)
    out = slow.analyse(bare, {r: job.host(r) for r in bare})
    assert out["named"] == [] and "the rule needs" in out["groups"][0]["why"]


def test_the_hang_analysis_reads_only_whole_entries():
    job = Job(world=4, per_host=2, steps=30)
    dumps = _trimmed(job, {})
    g = dumps[0].groups["0"]
    assert len(g.calls) > len(g.colls) and set(g.colls) <= set(g.calls)
    assert all(isinstance(e, dict) for e in g.colls.values())  # the series never becomes an entry
