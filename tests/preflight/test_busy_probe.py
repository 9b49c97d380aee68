"""Busy is not unreachable: a probe says which half timed out, a suspect is retried with a longer bound, and a node
that answered late or whose own prober was starved is named as loaded, not cut off (issue 27)."""

from __future__ import annotations

import dataclasses
import socket
import threading

from ncclcheck.checks import CrossInput, run_cross_checks
from ncclcheck.model import Status
from ncclcheck.nccl.reachability import build_matrix
from ncclcheck.preflight import probe, wire
from ncclcheck.rendezvous.budget import FIXED
from tests.fakefacts import facts, iface


def _nodes(n):
    return [(r, f"h{r}", facts(interfaces=[iface("eth0", ipv4=f"10.0.0.{r + 1}", speed=100000)])) for r in range(n)]


EPS = {r: {"eth0": [[f"10.0.0.{r + 1}", 4000]]} for r in range(3)}


def _rec(src, dst, error=None):
    return {"peer": dst, "iface": "eth0", "addr": f"10.0.0.{dst + 1}", "port": 4000, "ok": error is None,
            "reached": dst if error is None else None, "reached_id": None, "expected_id": None, "error": error}


def _reach(errors: dict, load=None):
    """Full mesh of 3 nodes; errors {(src, dst): error text} for the failed attempts."""
    attempts = {s: [_rec(s, d, errors.get((s, d))) for d in range(3) if d != s] for s in range(3)}
    mesh = build_matrix([0, 1, 2], EPS, attempts)
    checks = run_cross_checks(CrossInput(_nodes(3), mesh=mesh, attempts=attempts, load=load or {}))
    return next(c for c in checks if c.id == "net.peer_reachability")


LATE = "late: accepted, then no reply within 2 s (and on a retry with 6 s)"
NO_ANSWER = "no_answer: the TCP connect was not answered within 2 s (and on a retry with 6 s)"


def test_a_node_that_accepted_and_answered_late_is_loaded_not_unreachable():
    pr = _reach({(0, 2): LATE, (1, 2): LATE}, load={2: {"lag_ms": 900, "loaded": True}})
    assert pr.status is Status.WARN, pr.summary
    assert "node 2 (h2)" in pr.summary and "loaded, not cut off" in pr.summary
    assert "900 ms late" in pr.detail and pr.evidence["loaded"]["2"]["answered_late"]


def test_a_dropped_syn_to_a_node_is_still_named_whatever_its_load():
    pr = _reach({(0, 2): NO_ANSWER, (1, 2): NO_ANSWER}, load={2: {"lag_ms": 900, "loaded": True}})
    assert pr.status is Status.FAIL and "node 2 (h2)" in pr.summary and "loaded" not in pr.summary


def test_a_starved_prober_that_reached_nobody_is_loaded_only_when_it_measured_its_own_lag():
    errors = {(2, 0): NO_ANSWER, (2, 1): NO_ANSWER}
    assert _reach(errors).status is Status.FAIL  # no evidence of load: it reached none of its peers
    pr = _reach(errors, load={2: {"lag_ms": 3000, "loaded": True}})
    assert pr.status is Status.WARN and "node 2 (h2)" in pr.summary and "loaded" in pr.summary


def _unreported(errors: dict, silent: int):
    """Full mesh of 3 nodes where node `silent`'s row of results never reached node 0."""
    attempts = {s: [_rec(s, d, errors.get((s, d))) for d in range(3) if d != s] for s in range(3) if s != silent}
    mesh = build_matrix([0, 1, 2], EPS, attempts)
    checks = run_cross_checks(CrossInput(_nodes(3), mesh=mesh, attempts=attempts))
    return mesh, next(c for c in checks if c.id == "net.peer_reachability")


def test_a_node_whose_results_never_came_is_unmeasured_not_a_firewall():
    # bench_scale at 16,384 nodes on 2 cores: 1,630 rows arrived after node 0's mesh bound, and every one of those
    # nodes was named "reached none of the peers it probed: its outgoing connections fail (firewall...)"
    mesh, pr = _unreported({}, silent=2)
    assert mesh["eth0"]["unreported"] == [2]
    assert pr.status is Status.WARN, pr.summary
    assert "node 2 (h2) never reported its own probe results" in pr.summary and "firewall" not in pr.summary
    assert pr.evidence["unreported"] == [2] and pr.evidence["unreported_total"] == 1


def test_a_node_whose_results_never_came_and_that_nobody_reached_is_still_named():
    mesh, pr = _unreported({(0, 2): NO_ANSWER, (1, 2): NO_ANSWER}, silent=2)
    assert pr.status is Status.FAIL and "node 2 (h2)" in pr.summary and "never reported" not in pr.summary


def test_read_load_keeps_only_small_counts_and_judges_the_lag():
    assert wire.read_load({"lag_ms": 700, "retried": 2, "recovered": 1}, 0.5) == {
        "lag_ms": 700, "retried": 2, "recovered": 1, "loaded": True}
    assert wire.read_load({"lag_ms": "x", "retried": -1, "evil": 1}, 0.5) == {}
    assert wire.read_load([1], 0.5) == {}


class Server:
    """A loopback peer that accepts and then replies after `delay` s, or never (delay None)."""

    def __init__(self, delay):
        self.delay, self.sock = delay, socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port, self.stop, self.conns = self.sock.getsockname()[1], threading.Event(), []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.delay is not None:
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        req = probe.json.loads(conn.recv(4096).split(b"\n")[0])
        self.stop.wait(self.delay)
        conn.sendall(probe.json.dumps({"magic": probe.MAGIC, "node": 1, "id": "n1", "nonce": req["nonce"],
                                       "time": 0.0}).encode() + b"\n")

    def close(self):
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            c.close()


def _probe(server, per, suspect):
    budget = dataclasses.replace(FIXED, probe_suspect_s=suspect)
    stats: dict = {}
    (rec,) = probe.probe_peers(0, {1: {"id": "n1", "endpoints": {"eth0": [["127.0.0.1", server.port]]}}},
                               timeout_s=per, deadline_s=30.0, budget=budget, stats=stats)
    return rec, stats


def test_accepted_but_silent_is_late_and_retried_before_it_stands():
    s = Server(None)
    try:
        rec, stats = _probe(s, 0.2, 0.4)
    finally:
        s.close()
    assert not rec["ok"] and rec["error"].startswith("late: accepted") and "retry" in rec["error"]
    assert stats["retried"] == 1 and stats["recovered"] == 0


def test_a_slow_answer_recovers_on_the_retry_with_the_longer_bound():
    s = Server(1.0)
    try:
        rec, stats = _probe(s, 0.2, 20.0)
    finally:
        s.close()
    assert rec["ok"] and rec["reached"] == 1, rec
    assert stats["retried"] == 1 and stats["recovered"] == 1


def test_refused_is_definite_and_not_retried():
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    try:
        (rec,) = probe.probe_peers(0, {1: {"id": "n1", "endpoints": {"eth0": [["127.0.0.1", port]]}}},
                                   timeout_s=1.0, deadline_s=10.0, stats=(stats := {}))
    finally:
        dead.close()
    assert rec["error"].startswith("refused") and stats["retried"] == 0


def _sampled(n: int, silent: set, errors: dict):
    """A sampled mesh of n nodes (above FULL_MESH_MAX) where the rows of `silent` never reached node 0."""
    from ncclcheck.nccl.reachability import probe_targets

    eps = {r: {"eth0": [[f"10.0.{r // 250}.{r % 250 + 1}", 4000]]} for r in range(n)}

    def rec(s, d):
        err = errors.get((s, d))
        return {"peer": d, "iface": "eth0", "addr": eps[d]["eth0"][0][0], "port": 4000, "ok": err is None,
                "reached": d if err is None else None, "reached_id": None, "expected_id": None, "error": err}

    attempts = {s: [rec(s, d) for d in probe_targets(n, s)] for s in range(n) if s not in silent}
    mesh = build_matrix(list(range(n)), eps, attempts)
    nodes = [(r, f"h{r}", facts(interfaces=[iface("eth0", ipv4=eps[r]["eth0"][0][0], speed=100000)]))
             for r in range(n)]
    checks = run_cross_checks(CrossInput(nodes, mesh=mesh, attempts=attempts))
    return mesh, next(c for c in checks if c.id == "net.peer_reachability")


def _probers(n: int, x: int) -> set:
    from ncclcheck.nccl.reachability import probe_targets

    return {s for s in range(n) if x in probe_targets(n, s)}


def test_a_node_whose_every_prober_went_silent_is_unmeasured_not_cut_off():
    # bench_scale at 16,384 nodes on 2 cores (2026-11-25): whole worker processes starved, and 195 nodes whose own
    # row arrived (every probe of theirs answered) but whose every prober's row did not were named "no interface of
    # 195 nodes is reachable from every other node": nothing had failed against them, nothing was measured.
    n, x = 40, 17
    silent = _probers(n, x) - {0}
    mesh, pr = _sampled(n, silent, {})
    # the silent probers are unmeasured too (nothing failed against them); the check names them by what they did
    assert mesh["eth0"]["unmeasured"] == sorted(silent | {x}), mesh["eth0"].get("unmeasured")
    assert pr.status is Status.WARN, pr.summary
    assert f"node {x} (h{x}) went unmeasured" in pr.summary and "firewall" not in pr.summary
    assert pr.evidence["unmeasured"] == [x]
    # ... and so is a node whose own row never came either (no probe result about it at all)
    mesh, pr = _sampled(n, silent | {x}, {})
    assert x in mesh["eth0"]["unmeasured"] and pr.status is Status.WARN, pr.summary


def test_one_reported_failure_against_an_otherwise_unmeasured_node_names_it():
    n, x = 40, 17
    probers = sorted(_probers(n, x) - {0})
    witness = probers[0]  # the one prober whose row came, and it could not reach x
    mesh, pr = _sampled(n, set(probers[1:]), {(witness, x): NO_ANSWER})
    assert x not in (mesh["eth0"].get("unmeasured") or [])
    assert pr.status is Status.FAIL and f"node {x} (h{x})" in pr.summary, pr.summary


def test_a_loaded_prober_whose_connects_were_refused_is_still_named():
    # bench_scale at 16,384 nodes (2026-11-25): the node whose every probe goes to a closed port sat in a starved
    # worker, its prober woke late, and it was excused as "loaded" with 4,083 busy nodes: the fault went unnamed.
    # Load makes probes time out; it does not refuse them.
    refused = "refused: [Errno 111] Connection refused"
    pr = _reach({(2, 0): refused, (2, 1): refused}, load={2: {"lag_ms": 3000, "loaded": True}})
    assert pr.status is Status.FAIL and "node 2 (h2)" in pr.summary and "loaded" not in pr.summary, pr.summary
