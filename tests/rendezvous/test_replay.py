"""Issue 36, hole 4: records signed in one run replayed into another run of the same token (no launcher job id, so
both runs use the key prefix `ncclcheck/preflight/`). Run A is a real 2-node preflight whose node 0 writes are
captured as they went on the wire; run B, same token, has a real failure on node 0, and a stranger keeps writing A's
signed `world/verdict`, `world/result` and `world/final` into B's store. Before the run nonce, node 1 of B read A's
pass and exited 0; now it ignores them, names them as replays, and keeps B's failure."""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
import threading

import pytest

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.config import Config, WorldConfig
from ncclcheck.model import failed, passed
from ncclcheck.preflight import cluster
from ncclcheck.preflight import keys as K
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import Guard, JsonStore
from tests.conftest import free_port

TOKEN = b"one-token-for-the-whole-pool"
REPLAYED = (K.VERDICT, K.RESULT, K.FINAL)




def _budget(cfg) -> Budget:
    """Short fixed bounds: a node that refuses what it reads waits out its bound, and so does node 0 for it."""
    return dataclasses.replace(Budget.of(cfg), final_agreement_s=1.0, verdict_grace_s=1.0)


def _node(port: int, rank: int, timeout_s: float = 8.0):
    w = WorldConfig(nnodes=2, node_rank=rank, master_addr="127.0.0.1", master_port=port, timeout_s=timeout_s,
                    token=TOKEN, trust="none")
    cfg = Config(command="preflight", world=w)
    return cfg, detect_placement({}, w)


class _Recorder:
    """A torch store whose `set`s are kept as they went on the wire (key -> bytes): the eavesdropper's copy."""

    def __init__(self, raw, seen: dict) -> None:
        self._raw, self._seen = raw, seen

    def set(self, key, value):
        self._seen[key] = bytes(value) if not isinstance(value, str) else value.encode()
        return self._raw.set(key, value)

    def __getattr__(self, name):
        return getattr(self._raw, name)


def _code(outcome) -> int:
    own = 1 if any(c.status.value == "fail" for c in outcome.checks) else 0
    return outcome.agree_exit_code(own)


def _run(port: int, node0_checks: list, captured: dict | None = None, stranger=None):
    """A 2-node preflight on loopback: (node 0's outcome, its code, node 1's outcome, its code)."""
    real_open = cluster.open_store

    def recording_open(*a, **kw):
        st = real_open(*a, **kw)
        if captured is not None and st.server:
            return JsonStore(_Recorder(st.raw, captured), st.prefix, st.server, st.guard)
        return st

    out: dict = {}
    cfg0, p0 = _node(port, 0)

    def node0():
        o = cluster.run_cluster_preflight(cfg0, p0, {}, node0_checks, _budget(cfg0), join_grace_s=0.2)
        out["n0"] = (o, _code(o))

    cluster.open_store = recording_open
    try:
        t = threading.Thread(target=node0, daemon=True)
        t.start()
        if stranger is not None:
            stranger.start()
            for _ in range(2000):  # A's records are in B's store before node 1 looks
                if stranger.wrote or not stranger.is_alive():
                    break
                stranger.stop.wait(0.01)
        cfg1, p1 = _node(port, 1)
        o1 = cluster.run_cluster_preflight(cfg1, p1, {}, [passed("host.shm", "fine", node=1)], _budget(cfg1))
        c1 = _code(o1)
        t.join(60)
    finally:
        cluster.open_store = real_open
    return out["n0"][0], out["n0"][1], o1, c1


class _Replayer(threading.Thread):
    """A stranger on B's master port writing A's captured bytes under the same keys before node 1 looks."""

    def __init__(self, port: int, records: dict) -> None:
        super().__init__(daemon=True)
        self.port, self.records, self.stop, self.wrote = port, records, threading.Event(), 0

    def run(self) -> None:
        import torch.distributed as dist

        while not self.stop.is_set():  # a plain connect first: torch's client backs off for seconds when refused
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                self.stop.wait(0.01)
        store = dist.TCPStore("127.0.0.1", self.port, None, False, timeout=dt.timedelta(seconds=10))
        todo = dict(self.records)
        while store is not None and not self.stop.is_set():
            try:
                for k, v in todo.items():
                    store.set(k, v)
                # once each, then only the exit code again and again (so that before the fix node 1 surely read A's
                # exit code): a record rewritten faster than node 1 reads can make the run fail, never pass
                todo = {k: v for k, v in self.records.items() if k.endswith(K.FINAL)}
                self.wrote += 1
            except Exception:  # noqa: BLE001 - B's store went away: the run is over
                return
            self.stop.wait(0.002)


def test_records_signed_in_another_run_of_the_same_token_are_ignored_and_named():
    captured: dict = {}
    port_a = free_port()
    _, code0_a, o1_a, code1_a = _run(port_a, [passed("host.shm", "fine", node=0)], captured)
    assert o1_a.formed and (code0_a, code1_a) == (0, 0), [c.summary for c in o1_a.checks if c.status.value == "fail"]
    prefix = "ncclcheck/preflight/"
    records = {prefix + k: captured[prefix + k] for k in REPLAYED}
    assert all(v.startswith(b"ncclcheck-hmac") for v in records.values())  # really A's signed records

    port_b = free_port()
    replayer = _Replayer(port_b, records)
    fault = failed("host.shm", "/dev/shm is 64 MiB", node=0)
    try:
        _, code0_b, o1_b, code1_b = _run(port_b, [fault], stranger=replayer)
    finally:
        replayer.stop.set()
        replayer.join(10)
    assert replayer.wrote > 0, "the replay never happened"
    assert code0_b == 1
    assert code1_b == 1, f"node 1 adopted run A's records: {o1_b.checks}"
    replays = [r for r in o1_b.rejected if "a replay" in r]
    assert replays, o1_b.rejected
    assert o1_b.trust["level"] == "token"
    assert any(r in o1_b.trust["ignored"] for r in replays)  # named in the report's trust section


def test_a_guard_refuses_a_value_signed_for_another_run_and_names_it_a_replay(hash_store):
    a = JsonStore(hash_store, "p/", guard=Guard(token=TOKEN, run="a" * 32))
    a.set(K.FINAL, {"exit_code": 0})
    b = JsonStore(hash_store, "p/", guard=Guard(token=TOKEN, run="b" * 32))
    assert b.get_now(K.FINAL) is None
    assert b.rejected == [f"{K.FINAL}: a replay: signed with the job's key in another run (aaaaaaaa; this run is "
                          "bbbbbbbb)"]
    fresh = JsonStore(hash_store, "p/", guard=Guard(token=TOKEN))  # a member before it learnt the run
    assert fresh.get_now(K.FINAL) == {"exit_code": 0}


def test_only_a_challenge_may_be_signed_before_the_run_is_known(hash_store):
    member = JsonStore(hash_store, "p/", guard=Guard(token=TOKEN))
    member.set("trust/hello/1", {"challenge": "c"})
    member.set(K.RESULT, {"checks": []})
    node0 = JsonStore(hash_store, "p/", guard=Guard(token=TOKEN, run="a" * 32))
    assert node0.get_now("trust/hello/1") == {"challenge": "c"}
    assert node0.get_now(K.RESULT) is None and "a replay" in node0.rejected[-1]


@pytest.mark.parametrize("tamper", [b"ncclcheck-hmac2:zz:", b"ncclcheck-hmac2:" + b"a" * 40 + b":"])
def test_a_malformed_envelope_is_unsigned(hash_store, tamper):
    hash_store.set("p/x", tamper + b"0" * 64 + b":{}")
    st = JsonStore(hash_store, "p/", guard=Guard(token=TOKEN, run="a" * 32))
    assert st.get_now("x") is None and st.rejected == ["x: not signed with the job token"]
