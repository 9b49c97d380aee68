"""Records and requests carry the job's id and the run's nonce (issue 45 item 8): with one token for a whole pool,
signed records copied from job A's store into job B's must not point B's watch at A's ranks. Two real jobs' stores
(TCPStore servers on loopback) and their responders registering as armed ranks do; the same token for both."""

from __future__ import annotations

import json
import socket

import pytest

from ncclcheck.live import wire
from ncclcheck.live.fetch import ask, read_registry
from ncclcheck.live.responder import Responder
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import Guard, JsonStore
from ncclcheck_lab.loopstore import loopback_store
from tests.conftest import run_cli
from tests.live.test_responder import Fake, asker

TOKEN = b"one-token-for-the-whole-pool"
B = Budget(timeout_s=5.0, live_request_s=1.0)


class Job:
    """A job's store and two armed ranks registered in it, as start() registers them (no job id: torchrun's static
    rendezvous calls every run "none", so both jobs are "nojob" and only the run tells them apart)."""

    def __init__(self) -> None:
        self.server = loopback_store(timeout_s=10)
        self.port = self.server.port
        self.st = JsonStore(self.server, guard=Guard(token=TOKEN))
        self.ranks = [Responder(r, 2, r, ("127.0.0.1", self.port), Guard(token=TOKEN), B, Fake(),
                                bind="127.0.0.1").start() for r in (0, 1)]
        for r in self.ranks:
            assert r.registered.wait(30), "a responder did not register"

    @property
    def run(self) -> str:
        return self.ranks[0].run

    def close(self) -> None:
        for r in self.ranks:
            r.close()


@pytest.fixture
def jobs():
    a, b = Job(), Job()
    yield a, b
    a.close()
    b.close()


def test_every_rank_of_a_job_registers_under_one_run_and_each_job_has_its_own(jobs):
    a, b = jobs
    assert a.ranks[0].run == a.ranks[1].run and b.ranks[0].run == b.ranks[1].run and a.run != b.run
    reg = read_registry(JsonStore(b.server, guard=Guard(token=TOKEN)))
    assert reg.run == b.run and sorted(reg.records) == [0, 1] and reg.ignored == []


def test_a_signed_record_copied_from_another_job_is_ignored_and_named(jobs, validate_report):
    a, b = jobs
    copied = a.server.get(wire.rank_key(1))  # signed with the pool's token, for the same key: its signature holds
    b.server.set(wire.rank_key(1), copied)
    before = list(a.ranks[1].refused)
    p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(b.port), "--timeout", "5", "--json", "-",
                env={"NCCLCHECK_TOKEN": TOKEN.decode()})
    doc = validate_report(p.stdout)
    assert doc["live"]["registered"] == [0], doc["live"]
    said = doc["live"]["unanswered"]["1"]
    assert said.startswith("its record was ignored: its record is another run's") and a.run[:8] in said, said
    assert any(x.startswith(wire.rank_key(1)) and "another run's" in x for x in doc["trust"]["ignored"]), doc["trust"]
    assert doc["trust"]["level"] == "token"
    assert a.ranks[1].refused == before and a.ranks[1].served == 0  # B's watch never reached A's rank 1


def test_a_request_for_another_job_or_run_is_refused_by_the_responder(jobs):
    a, b = jobs
    got = ask(a.ranks[1].record(), "progress", asker(TOKEN, run=b.run), B.deadline(5), B)  # watch's own check
    assert got.doc is None and "another job's responder" in got.why and a.run[:8] in got.why, got.why
    with socket.create_connection((a.ranks[1].addr, a.ranks[1].port), timeout=5) as s:  # and the responder's
        hello = json.loads(wire.recv_frame(s, wire.MAX_HELLO, B.deadline(5), B))
        s.sendall(wire.frame(wire.seal(Guard(token=TOKEN), wire.request_key(hello["challenge"]),
                                       {"kind": "all", "job": "nojob", "run": b.run})))
        out = json.loads(wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B))
    assert out["error"].startswith("a request for another job: its request is another run's"), out
    assert a.ranks[1].served == 0
