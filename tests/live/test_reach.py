"""A stalled group whose ranks all answer watch: which pair of its hosts does not connect (live/reach.py). The
responders' "reach" on real loopback sockets and a real TCPStore (no torch collectives), the matrix read as hosts."""

from __future__ import annotations

import socket

import pytest

from ncclcheck.live import reach, wire
from ncclcheck.live.fetch import ask
from ncclcheck.live.peers import routable_peer
from ncclcheck.live.responder import Responder
from ncclcheck.live.watch import locate
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import Guard, JsonStore
from ncclcheck_lab.loopstore import loopback_store
from tests.live.test_responder import RUN, Fake, asker

B = Budget(timeout_s=5.0, live_request_s=1.0, live_reach_s=2.0)
SLACK = Budget(timeout_s=10.0, live_request_s=2.0, live_reach_s=6.0)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def job(request):
    """A job's store (a real TCPStore server on loopback) and two armed ranks on 'hosts' h1 and h2, registered the
    way responders register; rank 4 ('h3') is registered at a port nothing listens on (its host's link is gone)."""

    param = getattr(request, "param", None)
    token, budget = param if isinstance(param, tuple) else (param, B)  # (token, the responders' budget)
    server = loopback_store(timeout_s=5)
    master = ("127.0.0.1", server.port)
    st = JsonStore(server, guard=Guard(token=token))
    st.set(wire.WORLD_KEY, {"world_size": 6, "attempt": 0, "job": "nojob", "run": RUN})
    rs = []
    for rank, host in ((0, "h1"), (2, "h2")):
        r = Responder(rank, 6, 0, master, Guard(token=token), budget, Fake(), bind="127.0.0.1").start(
            register=False, run=RUN)
        r.host = host
        st.set(f"{wire.PREFIX}rank/{rank}", r.record())
        rs.append(r)
    gone = {**rs[0].record(), "rank": 4, "host": "h3", "port": _closed_port()}
    st.set(f"{wire.PREFIX}rank/4", gone)
    yield st, rs, token
    for r in rs:
        r.close()


def _records(st: JsonStore) -> dict:
    return {r: st.get_now(f"{wire.PREFIX}rank/{r}") for r in (0, 2, 4)}


@pytest.mark.parametrize("job", [b"the-job-token"], indirect=True)
def test_a_responder_connects_to_the_ranks_the_store_holds_and_says_which_fail(job):
    st, (a, b), token = job
    got = ask(a.record(), "reach", asker(token), B.deadline(10), B, {"ranks": [2, 4, 5]})
    assert got.why == "", got.why
    assert got.doc["reach"]["2"]["ok"] is True
    assert got.doc["reach"]["4"] == {**got.doc["reach"]["4"], "ok": False, "kind": "refused"}
    assert got.doc["unknown"] == {"5": "not registered"}  # never connected to: nowhere to connect


@pytest.mark.parametrize("ranks", [[], list(range(wire.MAX_REACH + 1)), [1, 1], ["198.18.0.9"], [-1], "2"])
def test_a_reach_request_that_names_anything_but_a_few_ranks_is_refused(job, ranks):
    st, (a, b), token = job
    got = ask(a.record(), "reach", asker(token), B.deadline(10), B, {"ranks": ranks})
    assert got.doc is None and "refused the request" in got.why and "distinct ranks" in got.why, got.why


@pytest.mark.parametrize("job", [b"the-job-token"], indirect=True)
def test_with_a_token_a_strangers_record_is_never_connected_to(job):
    st, (a, b), token = job
    stranger = JsonStore(st.raw)  # unsigned: a process without the job's key pointing a rank elsewhere
    stranger.set(f"{wire.PREFIX}rank/3", {**a.record(), "rank": 3, "host": "h9", "port": b.port})
    got = ask(a.record(), "reach", asker(token), B.deadline(10), B, {"ranks": [2, 3]})
    assert got.doc["reach"]["2"]["ok"] is True and "3" not in got.doc["reach"]
    assert got.doc["unknown"]["3"] == "refused"


# each responder opens the job's store and connects to the others within its reach bound: 2 s was too short on the
# 2-core machine running the suite two tests at a time (h1 -> h2 "unreached" in 2 runs of 3)
@pytest.mark.parametrize("job", [(None, SLACK)], indirect=True)
def test_watch_names_the_host_no_other_host_connects_to(job):
    st, (a, b), token = job
    found = locate({"ranks": [0, 1, 2, 3, 4, 5]}, _records(st), asker(token, run=RUN), SLACK)
    assert found["hosts"] == ["h3"] and found["pairs"] == [], found
    assert found["unanswered"] == {"h3": found["unanswered"]["h3"]}  # it could not be asked either
    assert "no connect between host h3 and the group's other hosts succeeded" in found["said"], found["said"]


def test_one_host_has_no_pair_to_probe(job):
    st, (a, b), token = job
    assert locate({"ranks": [0]}, _records(st), asker(token), B) is None


def test_without_a_key_reach_probes_only_this_jobs_ranks_and_says_nothing_about_a_port(job):
    """Issue 45: reach was a port scanner without a token: a stranger registered ranks 100-103 at ports of his
    choice and read open / refused / timing for each from inside the rank's host. Without a key, a rank at or past
    the world size, or whose record names no job and run, is never connected to; a record naming this job's run
    (anyone can read it and write one) gets one connect whose only outcome said is whether that rank's own responder
    answered its hello there: an open port and a closed one read the same, and no time is given."""
    st, (a, b), token = job
    listening = socket.create_server(("127.0.0.1", 0))  # a service on the rank's host: open, not a responder
    closed = _closed_port()
    stranger = JsonStore(st.raw)
    for r, port in ((100, listening.getsockname()[1]), (101, closed)):  # past the world size (6)
        stranger.set(f"{wire.PREFIX}rank/{r}", {**a.record(), "rank": r, "host": "h9", "port": port})
    stranger.set(f"{wire.PREFIX}rank/1", {"v": wire.VERSION, "rank": 1, "addr": "127.0.0.1", "port": closed,
                                          "host": "h9", "attempt": 0})  # no job, no run
    stranger.set(f"{wire.PREFIX}rank/3", {**a.record(), "rank": 3, "host": "h9", "port": listening.getsockname()[1]})
    stranger.set(f"{wire.PREFIX}rank/5", {**a.record(), "rank": 5, "host": "h9", "port": closed})
    try:
        got = ask(a.record(), "reach", asker(), B.deadline(10), B, {"ranks": [1, 2, 3, 5, 100, 101]})
    finally:
        listening.close()
    assert got.why == "", got.why
    assert got.doc["unknown"]["100"] == got.doc["unknown"]["101"] == "not a rank of this job (world size 6)"
    assert "names no job and run" in got.doc["unknown"]["1"]
    assert got.doc["reach"]["2"] == {"ok": True, "kind": "ok"}  # rank 2's own responder answered its hello
    assert got.doc["reach"]["3"] == got.doc["reach"]["5"] == {"ok": False, "kind": "unreached"}  # open = closed
    assert got.doc["checked"] == "hello" and not any("ms" in v for v in got.doc["reach"].values())


def test_an_unsigned_record_never_sends_a_rank_to_loopback_or_a_special_address():
    assert routable_peer("198.18.0.3", "198.18.0.2") and routable_peer("127.0.0.1", "127.0.0.1")
    for addr in ("127.0.0.1", "0.0.0.0", "224.0.0.1", "169.254.1.1", "255.255.255.255", "::1"):
        assert not routable_peer(addr, "198.18.0.2"), addr


def _m(rows: dict) -> dict:
    return {s: {d: {"ok": ok, "kind": "ok" if ok else "timeout"} for d, ok in row.items()} for s, row in rows.items()}


HOSTS = {0: "h1", 2: "h2", 4: "h3", 6: "h4"}


def test_the_pair_that_does_not_connect_is_named_and_the_others_are_not():
    found = reach.cut_links(_m({0: {2: True, 4: True, 6: True}, 2: {0: True, 4: False, 6: True},
                                4: {0: True, 2: False, 6: True}, 6: {0: True, 2: True, 4: True}}), HOSTS)
    assert found["pairs"] == [["h2", "h3"]] and found["hosts"] == [] and found["links"] == 6
    text = reach.said(found, 4)
    assert "the link between h2 <-> h3 does not connect (TCP; h2 -> h3: timeout, h3 -> h2: timeout)" in text
    assert "the other 5 pairs of its 4 hosts connect" in text


def test_one_direction_failing_is_still_the_pair():
    found = reach.cut_links(_m({0: {2: True, 4: True}, 2: {0: True, 4: True}, 4: {0: True, 2: False}}), HOSTS)
    assert found["pairs"] == [["h2", "h3"]] and "h3 -> h2: timeout" in reach.said(found, 3)


def test_every_pair_connecting_says_it_is_not_a_cut_link():
    found = reach.cut_links(_m({0: {2: True, 4: True}, 2: {0: True, 4: True}, 4: {0: True, 2: True}}), HOSTS)
    assert found["pairs"] == found["hosts"] == []
    assert reach.said(found, 3).startswith("every pair of its 3 hosts connects (TCP): not a cut link")


def test_a_host_cut_off_is_the_host_not_each_of_its_pairs():
    found = reach.cut_links(_m({0: {2: True, 4: False, 6: True}, 2: {0: True, 4: False, 6: True},
                                6: {0: True, 2: True, 4: False}}), HOSTS)  # h3 itself did not answer
    assert found["hosts"] == ["h3"] and found["pairs"] == []


def test_nothing_asked_says_nothing():
    assert reach.said(reach.cut_links({}, HOSTS), 3) is None


def test_a_large_group_asks_each_host_only_its_ring_neighbours():
    small = reach.pairs_to_ask({f"h{i:03d}": i * 8 for i in range(5)})
    assert small[0] == [8, 16, 24, 32]
    hosts = {f"h{i:04d}": i * 8 for i in range(1000)}
    plan = reach.pairs_to_ask(hosts)
    assert all(len(v) == 4 and len(v) <= wire.MAX_REACH for v in plan.values())
    assert plan[0] == sorted([8, 16, 999 * 8, 998 * 8])


def _stall(docs: dict, frozen: list) -> tuple:
    """(analysis, _stalled's group) of the ranks' live flight recorders (tests/live/test_watch.py's _group)."""
    from ncclcheck.live.watch import _stalled
    from ncclcheck.postmortem import flight
    from ncclcheck.postmortem.analyze import analyse
    from ncclcheck.postmortem.inputs import Inputs

    inp = Inputs()
    inp.dumps = {r: flight.normalise(d, r, f"rank{r}", "json") for r, d in docs.items()}
    a = analyse(inp)
    return a, _stalled(a, frozen)


def _root(analysis: dict):
    from ncclcheck.checks.postmortem import PostmortemInput
    from ncclcheck.checks.registry import POSTMORTEM, run_checks

    return next(c for c in run_checks(POSTMORTEM, PostmortemInput(analysis)) if c.id == "postmortem.root_cause")


SIX = {0: "h1", 1: "h1", 2: "h2", 3: "h2", 4: "h3", 5: "h3"}
H2_H3 = _m({0: {2: True, 4: True}, 2: {0: True, 4: False}, 4: {0: True, 2: False}})


def test_the_stall_check_names_the_link_when_reach_found_it_and_says_so_when_it_did_not():
    from ncclcheck.live.watch import _stall_check
    from tests.live.test_watch import _group

    a, g = _stall({r: _group(8, 7, [7, 8]) for r in range(6)}, list(range(6)))
    assert g["ranks"] == [0, 1, 2, 3, 4, 5] and g["seq"] == 8 and _root(a).status.value != "fail"
    cut = reach.cut_links(H2_H3, SIX)
    cut["said"] = reach.said(cut, 3)
    c = _stall_check(g, cut)
    assert c.summary.startswith("every rank (ranks 0, 1, 2, 3, 4, 5) entered all_reduce #8 of default_pg and none "
                                "completed it")
    assert "the link between h2 <-> h3 does not connect" in c.summary and "h2, h3" in c.fix
    fine = reach.cut_links(_m({0: {2: True}, 2: {0: True}}), SIX)
    fine["said"] = reach.said(fine, 2)
    assert "every pair of its 2 hosts connects (TCP): not a cut link" in _stall_check(g, fine).summary
    assert "stalls inside the collective" in _stall_check(g, None).summary  # one host: nothing to probe


def test_ranks_left_inside_a_collective_one_rank_finished_are_probed_and_the_cut_link_is_the_cause():
    """CI's run of the lab's h2 <-> h3 cut: gloo's ring had handed rank 0 (h1) all it needed for all_reduce #6 before
    the packets stopped, so rank 0 finished #6 and entered #7 while ranks 1-5 stayed inside #6. analyse names them
    behind (the data never came); every rank answers, so the ranks' connects to each other are asked, over every
    host of the group (h1's too), and the link they find is the root cause: no rank is."""
    from ncclcheck.live.watch import _stall_check, link_is_the_cause
    from tests.live.test_watch import _group

    docs = {0: _group(7, 6, [6, 7]), **{r: _group(6, 5, [5, 6]) for r in range(1, 6)}}
    a, g = _stall(docs, list(range(6)))
    assert _root(a).evidence["kind"] == "unfinished" and _root(a).evidence["ranks"] == [1, 2, 3, 4, 5]
    assert g is not None and g["ranks"] == [0, 1, 2, 3, 4, 5] and g["seq"] == 6
    found = reach.cut_links(H2_H3, SIX)
    found["said"] = reach.said(found, 3)
    prog = _stall_check(g, found)
    assert "ranks 1, 2, 3, 4, 5 never finished all_reduce #6 of default_pg, which rank 0 completed" in prog.summary
    assert "the link between h2 <-> h3 does not connect" in prog.summary
    root = _root(link_is_the_cause(a, g, found))
    assert root.status.value == "fail" and root.evidence["kind"] == "link_cut" and root.evidence["ranks"] == []
    assert root.summary.startswith("the link between h2 <-> h3 does not connect"), root.summary
    # a rank whose counters moved is not stalled: nothing is probed
    assert _stall(docs, [0, 1, 2, 3, 4])[1] is None
    # every pair connecting: the ranks behind stay the root cause, and the probe's answer is said
    fine = reach.cut_links(_m({0: {2: True, 4: True}, 2: {0: True, 4: True}, 4: {0: True, 2: True}}), SIX)
    fine["said"] = reach.said(fine, 3)
    assert "every pair of its 3 hosts connects" in _stall_check(g, fine).summary


def test_a_rank_that_never_entered_is_the_cause_and_no_link_is_probed():
    from tests.live.test_watch import _group

    docs = {r: _group(7, 6, [6, 7]) for r in range(5)} | {5: _group(6, 6, [5, 6])}
    a, g = _stall(docs, list(range(6)))
    assert _root(a).evidence["kind"] == "never_entered" and g is None
