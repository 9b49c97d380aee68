"""A stranger on the master port (issue 21, the store side): garbage join records, a counter raised to 10^9 and a
forged agreement neither crash node 0 nor keep it past --timeout nor lower anyone's exit code; a port someone else
holds is refused and its holder named."""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading

import pytest

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.config import Config, WorldConfig
from ncclcheck.model import passed
from ncclcheck.preflight import cluster
from ncclcheck.rendezvous.budget import Budget
from tests.conftest import free_port


def _join(**kw):
    j = {"node_rank": 1, "nnodes": 2, "hostname": "h1", "pid": 7, "uuid": "u", "facts": {},
         "checks": [{"id": "host.shm", "status": "pass", "node": 1, "summary": "ok"}]}
    j.update(kw)
    return j


@pytest.mark.parametrize("record, why", [
    ([1, 2], "not a join record"),
    (_join(node_rank="1"), "node_rank is not int"),
    (_join(facts=[]), "facts is not dict"),
    (_join(checks=[{"id": "host.shm", "status": "bogus", "node": 1}]), "unknown status"),
    (_join(checks=[{"id": "host.shm", "status": "pass", "node": 0}]), "a node may only report itself"),
])
def test_a_bad_join_record_is_refused_with_its_reason(record, why):
    assert why in (cluster._join_record(record) or "")


def test_a_good_join_record_passes():
    assert cluster._join_record(_join()) is None


def _node0(port: int, timeout_s: float):
    w = WorldConfig(nnodes=2, node_rank=0, master_addr="127.0.0.1", master_port=port, timeout_s=timeout_s)
    cfg = Config(command="preflight", world=w)
    return cfg, detect_placement({}, w)


def test_a_stranger_writing_garbage_and_a_huge_counter_neither_crashes_nor_holds_node_0():
    import torch.distributed as dist

    port = free_port()
    cfg, placement = _node0(port, 4.0)
    out = {}

    def run():
        out["o"] = cluster.run_cluster_preflight(cfg, placement, {}, [passed("host.shm", "ok", node=0)],
                                                 Budget.of(cfg), join_grace_s=0.2)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            threading.Event().wait(0.05)
    stranger = dist.TCPStore("127.0.0.1", port, None, False, timeout=dt.timedelta(seconds=10))
    pre = "ncclcheck/preflight/"
    a = stranger.add(pre + "join/count", 1)
    stranger.set(pre + f"join/{a}", "[1, 2]")
    b = stranger.add(pre + "join/count", 1)
    stranger.set(pre + f"join/{b}", '{"node_rank": 1, "nnodes": 2, "checks": [{"status": "bogus"}]}')
    stranger.add(pre + "join/count", 10**9)
    stranger.set(pre + "world/final", '{"exit_code": 0}')
    t.join(120)
    assert not t.is_alive(), "node 0 kept waiting past its bound"
    o = out["o"]
    w = next(c for c in o.checks if c.id == "rendezvous.world")
    assert not o.formed and w.status.value == "fail" and "1 never joined" in w.summary
    named = " ".join(o.rejected)
    assert f"join/{a}: not a join record" in named and f"join/{b}:" in named and "join/count: counter at" in named


def test_node_0_refuses_a_port_someone_else_holds_and_names_the_holder():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        cfg, placement = _node0(port, 2.0)
        o = cluster.run_cluster_preflight(cfg, placement, {}, [], Budget.of(cfg))
    w = next(c for c in o.checks if c.id == "rendezvous.world")
    assert not o.formed and w.status.value == "fail"
    assert f"pid {os.getpid()}" in w.summary and w.evidence["holder"].startswith(f"pid {os.getpid()}")


def _node(port: int, rank: int, token: bytes, timeout_s: float = 3.0):
    w = WorldConfig(nnodes=2, node_rank=rank, master_addr="127.0.0.1", master_port=port, timeout_s=timeout_s,
                    token=token)
    cfg = Config(command="preflight", world=w)
    return cfg, detect_placement({}, w)


def test_with_a_token_a_store_signed_by_someone_else_fails_the_node_that_joins_it():
    port = free_port()
    cfg0, p0 = _node(port, 0, b"the-job")
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("n0", cluster.run_cluster_preflight(
        cfg0, p0, {}, [], Budget.of(cfg0), join_grace_s=0.2)), daemon=True)
    t.start()
    cfg1, p1 = _node(port, 1, b"a-stranger")
    o1 = cluster.run_cluster_preflight(cfg1, p1, {}, [], Budget.of(cfg1))
    t.join(60)
    w1 = next(c for c in o1.checks if c.id == "rendezvous.world")
    assert not o1.formed and "is not this job's" in w1.summary
    assert any("host: signed with another token" in r for r in o1.rejected)
    w0 = next(c for c in out["n0"].checks if c.id == "rendezvous.world")
    assert not out["n0"].formed and "1 never joined" in w0.summary  # its join was never written for node 0


def test_with_the_same_token_two_nodes_form_the_world():
    port = free_port()
    cfg0, p0 = _node(port, 0, b"the-job", 10.0)
    out = {}

    def node0() -> None:  # node 0 agrees too, as a real run does: a member waits for its published exit code
        o0 = out["n0"] = cluster.run_cluster_preflight(cfg0, p0, {}, [], Budget.of(cfg0), join_grace_s=0.2)
        out["code0"] = o0.agree_exit_code(0)

    t = threading.Thread(target=node0, daemon=True)
    t.start()
    cfg1, p1 = _node(port, 1, b"the-job", 10.0)
    o1 = cluster.run_cluster_preflight(cfg1, p1, {}, [], Budget.of(cfg1))
    code = o1.agree_exit_code(0)
    t.join(60)
    assert o1.formed and out["n0"].formed and code == 0 == out["code0"] and o1.rejected == []


def test_a_member_of_a_squatted_store_does_not_wait_its_mesh_bound_for_a_directory_that_never_comes():
    """A process holding the master port wrote a verdict and a result but no mesh directory (CI: the lab's squat
    case took T + 12 s on a loaded machine). The member reads the result at once instead of waiting T."""
    import json
    import time

    import torch.distributed as dist

    from ncclcheck.preflight import keys as K
    from ncclcheck.rendezvous.roles import run_prefix

    port = free_port()
    squatter = dist.TCPStore("127.0.0.1", port, None, True, timeout=dt.timedelta(seconds=5), wait_for_workers=False)
    ok = {"id": "rendezvous.world", "status": "pass", "node": None, "summary": "all 2 nodes joined", "detail": "",
          "fix": "", "evidence": {}}
    for key, value in ((K.HOST, {"hostname": "h0", "pid": 1, "uuid": "squatter"}),
                       (K.VERDICT, {"ok": True, "nnodes": 2, "elapsed_s": 0.1, "last_join": 99, "members_n": 2}),
                       (K.RESULT, {"checks": [ok], "local": [], "recommendations": [], "mesh": {}}),
                       (K.FINAL, {"exit_code": 0})):
        squatter.set(run_prefix("nojob") + key, json.dumps(value))
    cfg, placement = _node(port, 1, None, timeout_s=30.0)
    start = time.monotonic()
    o = cluster.run_cluster_preflight(cfg, placement, {}, [], Budget.of(cfg))
    took = time.monotonic() - start
    del squatter
    assert o.formed  # without a token the stranger's word is all this node has (docs/trust.md)
    assert took < 15, f"the member waited {took:.1f} s of its 30 s mesh bound for a directory nobody writes"
