"""Nodes that share one host (issue 32): two torchrun or preflight processes on one machine, containers on the host
network. The shared network stack is claimed (facts.host.network_identity) and proven by the mesh probe; a world all
on one host is judged as such (loopback is right, and recommended, and accepted by the checks that follow), and a
mixed layout (two nodes on one host, one elsewhere) keeps its real multi-host verdict."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ncclcheck.checks import CrossInput, run_cross_checks, run_local_checks
from ncclcheck.checks.local import LocalInput, rejudge_one_host
from ncclcheck.facts import host as host_facts
from ncclcheck.model import Status
from ncclcheck.nccl.reachability import build_matrix, host_groups, one_host
from ncclcheck.preflight import wire
from ncclcheck.preflight.decide import recommendations
from ncclcheck.preflight.probe import MeshListener, local_peers, probe_peers
from tests.conftest import REPO, cli_env, free_port
from tests.fakefacts import facts, iface

KEY_A = "d65b70f3-7bde-4c1d-8705-62aedb66058c/4026531833"
KEY_B = "0f3c70f3-7bde-4c1d-8705-62aedb66058c/4026531840"


def _ok(dst, addr):
    return {"peer": dst, "iface": "eth0", "addr": addr, "port": 4000, "ok": True, "reached": dst, "error": None}


def _refused(dst, addr):
    return {"peer": dst, "iface": "eth0", "addr": addr, "port": 4000, "ok": False, "reached": None,
            "error": "refused"}


# --- the proof: a claim and a probe on an address local to the prober, both needed

def test_the_probe_proves_a_claimed_peer_on_the_probers_own_address_and_only_then():
    """Two listeners on one address (two nodes on one host): the prober connects to its own address only towards
    a peer that claims its identity, and the reply with that peer's id is the proof."""
    listeners = {r: MeshListener(r, f"{r}" * 16, {"eth0": ["127.0.0.1"]}) for r in (0, 1)}
    for li in listeners.values():
        li.start()
    try:
        peers = {0: {"id": "0" * 16, "endpoints": listeners[0].endpoints}}
        claimed = probe_peers(1, peers, timeout_s=1.0, deadline_s=3.0, own_addresses={"127.0.0.1"}, same_host={0})
        unclaimed = probe_peers(1, peers, timeout_s=1.0, deadline_s=3.0, own_addresses={"127.0.0.1"})
    finally:
        for li in listeners.values():
            li.close()
    assert local_peers(claimed, {"127.0.0.1"}) == {0}, claimed
    assert local_peers(unclaimed, {"127.0.0.1"}) == set() and not unclaimed[0]["ok"], unclaimed


def test_host_groups_need_the_claim_and_the_proof_and_join_transitively():
    eps = {r: {"eth0": [["198.18.0.1", 4000 + r]]} for r in range(3)}
    proven = {1: [_ok(0, "198.18.0.1")], 2: [_ok(1, "198.18.0.1")]}
    assert host_groups([0, 1, 2], eps, proven, {0: KEY_A, 1: KEY_A, 2: KEY_A}) == [[0, 1, 2]]
    assert host_groups([0, 1, 2], eps, proven, {0: KEY_A, 1: KEY_A, 2: KEY_B}) == [[0, 1]]  # claims differ
    assert host_groups([0, 1, 2], eps, proven, {}) == []  # a simulated world (no identity) proves nothing
    assert host_groups([0, 1, 2], eps, {1: [_refused(0, "198.18.0.1")]}, {0: KEY_A, 1: KEY_A}) == []
    # reached over the network, not on an address of the prober's own: no proof of one network stack
    far = {0: {"eth0": [["198.18.0.1", 4000]]}, 1: {"eth0": [["198.18.0.2", 4001]]}}
    assert host_groups([0, 1], far, {1: [_ok(0, "198.18.0.1")]}, {0: KEY_A, 1: KEY_A}) == []


def test_the_directory_carries_shared_claims_only_and_drops_bad_ones():
    eps = {0: {"id": "a" * 16, "endpoints": {"eth0": [["198.18.0.1", 4000]]}, "host": KEY_A},
           1: {"id": "b" * 16, "endpoints": {"eth0": [["198.18.0.1", 4001]]}, "host": KEY_A},
           2: {"id": "c" * 16, "endpoints": {"eth0": [["198.18.0.2", 4002]]}, "host": KEY_B}}
    packed = wire.pack_directory(eps, 3)
    assert packed["h"] == {KEY_A: [0, 1]}
    got = wire.unpack_directory(packed)
    assert [got[r].get("host") for r in range(3)] == [KEY_A, KEY_A, None]
    packed["h"] = {"$(reboot)/1": [2], KEY_B: [7, "x", 2]}
    got = wire.unpack_directory(json.loads(json.dumps(packed)))
    assert [got[r].get("host") for r in range(3)] == [None, None, KEY_B]


def test_network_identity_is_read_from_procfs_and_unavailable_in_a_fake_tree(tmp_path, monkeypatch):
    ident = host_facts.network_identity()
    assert re.match(r"^[0-9a-f-]{36}/\d+$", ident["key"]) and ident["netns"].startswith("net:["), ident
    assert wire.host_key(ident["key"]) == ident["key"]
    monkeypatch.setenv("NCCLCHECK_PROCFS_ROOT", str(tmp_path))
    assert "unavailable" in host_facts.network_identity()


# --- the verdicts

def _node(r, eth0, hostname_loopback=False, env=None):
    f = facts(interfaces=[iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4=eth0, speed=10000),
                          iface("docker0", "docker", "172.17.0.1")], env=env or {},
              route={"target": "127.0.0.1", "interface": "lo", "source": "127.0.0.1"})
    if hostname_loopback:
        f["host"] = dict(f["host"], hostname="vm", resolves_to=["127.0.0.1"], loopback=True)
    return (r, "vm", f)


def _world(addrs, groups):
    """Nodes at `addrs` (one eth0 address each; equal addresses = one host), every probe answered; docker0 is
    172.17.0.1 on every host. Returns (nodes, matrix, cross-node checks by id, recommendations)."""
    n = len(addrs)
    nodes = [_node(r, a, hostname_loopback=True) for r, a in enumerate(addrs)]
    eps = {r: {"eth0": [[a, 4000 + r]], "docker0": [["172.17.0.1", 5000 + r]]} for r, a in enumerate(addrs)}
    attempts = {s: [_ok(d, addrs[d]) for d in range(n) if d != s] for s in range(n)}
    matrix = build_matrix(list(range(n)), eps, attempts, same_host=groups)
    cross = {c.id: c for c in run_cross_checks(CrossInput(nodes, mesh=matrix, attempts=attempts, same_host=groups))}
    return nodes, matrix, cross, recommendations(nodes, matrix, groups)


def _recs(recs):
    return {(r.name, r.value) for r in recs if r.name.endswith("SOCKET_IFNAME")}


def test_two_nodes_on_one_host_pass_with_loopback_and_its_advice_passes_the_checks():
    nodes, _, cross, recs = _world(["198.18.0.1", "198.18.0.1"], [[0, 1]])
    peer = cross["net.peer_reachability"]
    assert peer.status is Status.PASS and "share one host's network stack" in peer.summary, peer
    assert _recs(recs) == {("NCCL_SOCKET_IFNAME", "=lo"), ("GLOO_SOCKET_IFNAME", "lo")}
    # follow the advice: the same nodes with it exported, judged again as one host -> nothing fails or warns
    advised = {name: value for name, value in _recs(recs)}
    for r, _, f in nodes:
        f = dict(f, env={"vars": advised, "redacted": []})
        before = run_local_checks(LocalInput.of(f, node_rank=r, multi_node=True))
        after = rejudge_one_host(before, f, r)
        bad = [(c.id, c.status.value, c.summary) for c in after if c.status in (Status.FAIL, Status.WARN)]
        assert not bad, bad
        # judged as nodes apart, the same advice fails: it is advice for one host only
        assert {c.id for c in before if c.status is Status.FAIL} >= {"net.socket_ifname"}
        assert {c.id for c in before if c.status is Status.WARN} >= {"host.hostname_resolves"}


def test_without_the_proof_the_same_world_still_fails_as_before():
    """The regression this fixes: one host's one address read as a docker0-like duplicate."""
    _, _, cross, _ = _world(["198.18.0.1", "198.18.0.1"], [])
    assert cross["net.peer_reachability"].status is Status.FAIL


def test_two_nodes_on_one_host_and_one_elsewhere_keep_a_multi_host_verdict():
    _, matrix, cross, recs = _world(["198.18.0.1", "198.18.0.1", "198.18.0.2"], [[0, 1]])
    assert not one_host([0, 1, 2], [[0, 1]])
    peer = cross["net.peer_reachability"]
    assert peer.status is Status.PASS and "share one host's network stack" not in peer.summary, peer
    assert "share one host" in peer.summary and peer.evidence["same_host"] == [[0, 1]]
    assert matrix["eth0"]["duplicates"] == {} and matrix["docker0"]["duplicates"] == {"172.17.0.1": [0, 1, 2]}
    assert _recs(recs) == {("NCCL_SOCKET_IFNAME", "=eth0"), ("GLOO_SOCKET_IFNAME", "eth0")}


@pytest.mark.parametrize("out, into", [({2}, set()), ({0}, set()), (set(), {1}), ({0, 2}, set())],
                         ids=["its-probes-fail", "on-node-0", "nobody-reaches-it", "two-at-once"])
def test_one_host_with_a_node_cut_off_on_it_still_names_the_node(out, into):
    """One shared network stack proves no pair: a node whose own probes all fail (a local firewall, a broken
    prober) or that nobody reaches is named, not passed as "loopback connects them" (bench_scale's probe fault)."""
    addrs = ["198.18.0.1"] * 4
    eps = {r: {"eth0": [[a, 4000 + r]], "docker0": [["172.17.0.1", 5000 + r]]} for r, a in enumerate(addrs)}
    attempts = {s: [(_refused if s in out or d in into else _ok)(d, addrs[d]) for d in range(4) if d != s]
                for s in range(4)}
    groups = host_groups(list(range(4)), eps, attempts, dict.fromkeys(range(4), KEY_A))
    assert groups == [[0, 1, 2, 3]]  # still proven one host: the others reached the cut-off node, or it them
    nodes = [_node(r, a, hostname_loopback=True) for r, a in enumerate(addrs)]
    matrix = build_matrix(list(range(4)), eps, attempts, same_host=groups)
    peer = {c.id: c for c in run_cross_checks(CrossInput(nodes, mesh=matrix, attempts=attempts,
                                                         same_host=groups))}["net.peer_reachability"]
    assert peer.status is Status.FAIL and "share one host's network stack" not in peer.summary, peer
    for r in out | into:
        assert re.search(rf"\bnode[s ]*[^;]*\b{r}\b", peer.summary), peer.summary


# --- real runs on this machine (loopback only)



def _two_nodes(tmp_path, env=None, tag="a"):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "ncclcheck", "preflight", "--nnodes", "2", "--node-rank", str(r),
                               "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", "20",
                               "--json", str(tmp_path / f"{tag}%n.json")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env=cli_env(env)) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    said = "\n".join(f"--- node {r} rc={p.returncode}\n{o[-3000:]}\n{e[-2000:]}"
                     for r, (p, (o, e)) in enumerate(zip(procs, outs)))
    return [p.returncode for p in procs], json.loads((tmp_path / f"{tag}0.json").read_text()), said


@pytest.mark.slow  # two real preflight processes, twice
def test_preflight_twice_on_one_machine_passes_and_so_does_its_own_advice(tmp_path):
    rcs, doc, said = _two_nodes(tmp_path)
    assert rcs == [0, 0], said
    peer = next(c for c in doc["checks"] if c["id"] == "net.peer_reachability")
    assert peer["status"] == "pass" and peer["evidence"]["same_host"] == [[0, 1]], peer
    advised = {r["name"]: r["value"] for r in doc["recommendations"] if r["name"].endswith("SOCKET_IFNAME")}
    assert advised == {"NCCL_SOCKET_IFNAME": "=lo", "GLOO_SOCKET_IFNAME": "lo"}, doc["recommendations"]
    rcs, doc, said = _two_nodes(tmp_path, advised, tag="b")
    assert rcs == [0, 0], said
    noisy = [(c["id"], c["status"]) for c in doc["checks"] if c["status"] in ("warn", "fail")]
    assert not noisy, said


@pytest.mark.slow  # two real torchrun agents, one rank each
def test_the_guard_passes_two_torchrun_nodes_on_one_machine():
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(r),
                               "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
                               os.path.join(REPO, "tests", "fixtures", "train_ddp.py")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env=cli_env({"GUARD_TIMEOUT": "20"})) for r in (0, 1)]
    outs = [p.communicate(timeout=180) for p in procs]
    said = "\n".join(f"--- node {r} rc={p.returncode}\n{o[-3000:]}\n{e[-3000:]}"
                     for r, (p, (o, e)) in enumerate(zip(procs, outs)))
    assert [p.returncode for p in procs] == [0, 0], said
    assert "TRAINED world=2" in outs[0][0] and "GUARD-FAILED" not in said, said
    # The report is its header line; a node that waited a second for its peer says so on a line of its own
    # (rendezvous/waits.py), which is progress, not a second report
    ours = [ln for o, e in outs for ln in (o + e).splitlines() if ln.startswith("ncclcheck preflight ")]
    assert len(ours) == 1 and ": PASS (" in ours[0], said
