"""A reply a request asks packed (`"pack": "gzip"`, live/wire.py) goes gzipped where that is smaller, and the asker
inflates it within what it asked for (issue 65: a look's ~1 MB a rank of flight-recorder JSON filled the slow link
watch was there to find, and the job stalled under it: the phases it sampled then held no step)."""

from __future__ import annotations

import gzip
import json
import socket

import pytest

from ncclcheck.live import wire
from ncclcheck.live.auth import Session
from ncclcheck.live.fetch import ask
from ncclcheck.live.responder import Responder, Sources
from ncclcheck.rendezvous.store import Guard
from tests.live.test_responder import RUN, B, asker

TOKEN = b"the-job-token"


def _entry(i: int) -> dict:
    return {"collective_seq_id": i, "record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"],
            "profiling_name": "gloo:all_reduce", "input_sizes": [[64]], "output_sizes": [[64]],
            "state": "completed", "time_created_ns": 1_700_000_000_000_000_000 + i * 25_000_000, "is_p2p": False,
            "timeout_ms": 600_000, "thread_name": "python3"}


FR = {"version": "2.10", "entries": [_entry(i) for i in range(2000)],
      "pg_status": {"0": {"last_enqueued_collective": "1999", "last_started_collective": "-1",
                          "last_completed_collective": "1998"}}}


class Busy(Sources):
    def flight(self, entries: bool = True) -> dict:
        return json.loads(json.dumps(FR if entries else {**FR, "entries": []}))


@pytest.fixture(params=[None, TOKEN], ids=["unsealed", "sealed"])
def busy(request):
    r = Responder(3, 4, 3, ("127.0.0.1", 1), Guard(token=request.param), B, Busy(), bind="127.0.0.1").start(
        register=False, run=RUN)
    yield r, request.param
    r.close()


def _frame(r: Responder, token, doc: dict) -> bytes:
    """The reply frame's bytes as they came off the wire, to a request of `doc`."""
    with socket.create_connection((r.addr, r.port), timeout=5) as s:
        hello = json.loads(wire.recv_frame(s, wire.MAX_HELLO, B.deadline(5), B))
        session = Session("token" if token else "none", token, 1, B)
        s.sendall(wire.frame(session.request(hello["challenge"], {"job": "nojob", "run": RUN, **doc})))
        return wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B)


def test_a_recorders_reply_goes_gzipped_and_opens_as_the_json_it_was(busy):
    r, token = busy
    plain = _frame(r, token, {"kind": "flight"})
    packed = _frame(r, token, {"kind": "flight", "pack": wire.PACK})
    assert not plain.startswith(wire.GZIP_MAGIC) and packed.startswith(wire.GZIP_MAGIC)
    assert len(packed) * 10 < len(plain), (len(packed), len(plain))
    a = ask({"rank": r.rank, "addr": r.addr, "port": r.port}, "all", asker(token), B.deadline(5), B)
    assert a.why == "" and [e["collective_seq_id"] for e in a.doc["flight"]["entries"]] == list(range(2000))


def test_a_small_reply_and_a_request_that_does_not_ask_go_as_json(busy):
    r, token = busy
    assert not _frame(r, token, {"kind": "progress", "pack": wire.PACK}).startswith(wire.GZIP_MAGIC)
    assert not wire.wants_packed({"pack": wire.PACK}, "blob")  # a rate probe's bytes are what it measures
    assert not wire.wants_packed({"pack": "zstd"}, "all") and wire.wants_packed({"pack": "gzip"}, "all")


def _session(token=None) -> Session:
    return Session("token" if token else "none", token, 1, B)


def test_a_packed_reply_that_inflates_past_what_was_asked_is_refused_unread():
    bomb = gzip.compress(b" " * (64 << 20), 9)  # 64 MiB of spaces in ~64 KiB
    assert len(bomb) < 1 << 17
    doc, why = _session().open_reply("c" * wire.CHALLENGE_CHARS, bomb, 1 << 20)
    assert doc is None and "inflated" in why and "1,048,576" in why


@pytest.mark.parametrize("mangle", ["cut", "trailing", "flipped", "not-gzip"])
def test_a_packed_reply_cut_padded_or_tampered_with_is_refused(mangle):
    ch = "c" * wire.CHALLENGE_CHARS
    guard = Guard(token=TOKEN)
    guard.run = RUN
    good = gzip.compress(wire.seal(guard, wire.reply_key(ch), {"rank": 1, "pad": "x" * 9000}))
    doc, why = _session(TOKEN).open_reply(ch, good, 1 << 20)
    assert doc == {"rank": 1, "pad": "x" * 9000}, why
    bad = {"cut": good[:-9], "trailing": good + b"\0", "flipped": good[:40] + bytes([good[40] ^ 1]) + good[41:],
           "not-gzip": wire.GZIP_MAGIC + b"nonsense"}[mangle]
    doc, why = _session(TOKEN).open_reply(ch, bad, 1 << 20)
    assert doc is None and why


def test_a_reply_is_packed_even_when_its_own_build_emptied_the_spend(busy):
    """Building a big recorder's reply (~0.13 s of CPU for 2,000 entries) empties the responder's Spend: the lab's
    link cell showed the look's replies went as JSON when packing waited for the Spend. Packing costs less than the
    send of the JSON it replaces, so it is done whatever the Spend holds."""
    r, token = busy
    r.spend.charge(10.0)
    assert not r.spend.allows()
    assert _frame(r, token, {"kind": "flight", "pack": wire.PACK}).startswith(wire.GZIP_MAGIC)


def test_a_rate_probes_blob_and_a_clock_are_asked_as_they_are():
    """A blob's bytes are what a rate probe times (packed padding would time nothing), and a clock's reply is a few
    dozen bytes: their requests ask nothing packed; a phase's does."""
    from ncclcheck.live import pace

    caller = pace.Caller(_session(), "nojob", RUN)
    for kind, packed in (("blob", False), ("clock", False), ("phase", True)):
        doc = json.loads(pace._request(caller, "c" * wire.CHALLENGE_CHARS, {"kind": kind}, 1 << 20)[4:])
        assert ("pack" in doc) is packed, kind
