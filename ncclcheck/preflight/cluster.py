"""Multi-node world formation for preflight: bounded rendezvous through a c10d TCPStore, fact upload, mesh probe,
cross-node checks on node 0, one compact verdict, and one agreed exit code.

    outcome = run_cluster_preflight(config, placement, local_facts, local_results)
    ... build the Report from outcome.world / nodes / checks / recommendations ...
    code = outcome.agree_exit_code(report.exit_code)   # node 0 publishes, the others adopt

Protocol (all values JSON, keys under "ncclcheck/<run>/"), sized so node 0's store carries O(n) bytes and every other
node O(1): node 0 hosts the store at MASTER_ADDR:MASTER_PORT (a plain socket probe runs first so a blocked port is
named in seconds); every node leader uploads its join record once (`join/count` counter + `join/<i>` = {node_rank,
nnodes, hostname, pid, uuid, facts, checks}); node 0 alone reads them, decides when the world is complete (every rank
0..N-1 joined, then a short grace for duplicates) or the deadline passed, and publishes a compact `world/verdict`
(no per-node lists). Then each node publishes `mesh/ep/<rank>` and reads the endpoints of the peers it probes:
up to nccl.reachability.FULL_MESH_MAX nodes everyone, from the one packed `mesh/dir` node 0 publishes once every
node's endpoints are in (12 bytes a peer); above it ring neighbours + seeded random peers, waited for and read in
one request. It publishes its packed `mesh/row/<rank>` (a healthy row is runs of peer ranks, whatever n).
Node 0 alone runs the cross-node checks and rules and publishes `world/result`: the checks with the nodes they
name, the aggregated node-local exceptions and the recommendations, whose size grows with the problems, not with n.
Finally node 0 publishes `world/final` with the exit code. Every wait on another node's key blocks in the store (one
request), never polls.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import time
import uuid as _uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ..agent import roles
from ..agent.launchers import Placement
from ..checks import CrossInput, run_cross_checks
from ..config import FIXED_BOUNDS_S, Budget, Config, format_endpoint
from ..facts import hostname_of
from ..facts.net import is_local_address
from ..model import CheckResult, NodeInfo, Recommendation, Status, WorldInfo, failed, passed, skipped
from ..nccl import reachability
from ..recommend import NodeView, recommend_local
from ..recommend.mesh import MeshView, merge_recommendations, recommend_mesh
from ..rendezvous.store import JsonStore, StoreLost, first_line, open_store
from . import keys as K
from . import probe, shared_dirs
from . import verdict as wire

log = logging.getLogger(__name__)

JOIN_GRACE_S = FIXED_BOUNDS_S["join_grace"]
FINAL_WAIT_S = FIXED_BOUNDS_S["final_agreement"]


@dataclass
class ClusterOutcome:
    """What the multi-node part of preflight found. `formed` is False when the world could not form."""

    world: WorldInfo
    nodes: list  # list[NodeInfo], node-rank order (only this node when the world did not form)
    checks: list  # list[CheckResult]: rendezvous.* plus cross-node checks, and every node's local results
    recommendations: list  # list[Recommendation]
    formed: bool = False
    verdict: dict = field(default_factory=dict)
    _store: Optional[JsonStore] = None
    _is_host: bool = False
    _members: int = 0
    _deadline_s: float = FINAL_WAIT_S

    def agree_exit_code(self, exit_code: int) -> int:
        """Node 0 publishes its exit code and waits (bounded) until every member read it; others adopt it.

        Every process of a formed world then exits with the same code, so srun/CI fail as a whole. Without a
        formed world each node keeps its own code. Closes the store.
        """
        st, self._store = self._store, None
        if st is None or not self.formed:
            return exit_code
        end = time.monotonic() + self._deadline_s
        try:
            if self._is_host:
                st.set(K.FINAL, {"exit_code": exit_code})
                st.wait_count(K.FINAL_ACK, self._members - 1, end)
                return exit_code
            final = wait_get(st, K.FINAL, end)
            st.add(K.FINAL_ACK, 1)
            if isinstance(final, dict) and isinstance(final.get("exit_code"), int):
                return max(final["exit_code"], exit_code) if exit_code == 3 else final["exit_code"]
            return exit_code
        except Exception as exc:  # noqa: BLE001 - the store going away at the end must not become a crash
            log.warning("could not agree on the exit code: %s", exc)
            return exit_code

    def close(self) -> None:
        self._store = None


def _master_result(results: list) -> Optional[CheckResult]:
    for r in results:
        if r.id == "rendezvous.master_reachable":
            return r
    return None


def _world_info(config: Config, placement: Placement, nnodes: int) -> WorldInfo:
    w = config.world
    nproc = placement.local_world_size or w.nproc_per_node or 1
    return WorldInfo(
        nnodes=nnodes,
        world_size=placement.world_size if placement.worker_mode else nnodes * nproc,
        backend=w.backend,
        master=format_endpoint(placement.master_addr, placement.master_port),
        launcher=placement.launcher,
    )


# ---------------------------------------------------------------------------------------------------------------
# Verdict: who joined, who is missing, who is duplicated, who disagrees on --nnodes


def decide(joins: list, expected_nnodes: int, final: bool) -> dict:
    """Pure: the world verdict from join records. `complete` when every rank of the reference --nnodes joined.

    The reference --nnodes is the majority's (ties: node 0's, it hosts the rendezvous). Ranks outside it, duplicate
    ranks (each named by hostname) and nodes started with a different --nnodes make the world fail to form.
    """
    counts = Counter(j.get("nnodes") for j in joins if isinstance(j.get("nnodes"), int))
    ref = expected_nnodes
    if counts:
        top = max(counts.values())
        leaders = [n for n, c in counts.items() if c == top]
        ref = expected_nnodes if expected_nnodes in leaders else min(leaders)
    by_rank: dict = {}
    for j in joins:
        by_rank.setdefault(j.get("node_rank"), []).append(j)
    present = sorted(r for r in by_rank if isinstance(r, int) and 0 <= r < ref)
    missing = [r for r in range(ref) if r not in by_rank]
    dups = {r: [f"{j.get('hostname')} (pid {j.get('pid')})" for j in js] for r, js in by_rank.items() if len(js) > 1}
    out_of_range = sorted(r for r in by_rank if not (isinstance(r, int) and 0 <= r < ref))
    mismatch = [{"node_rank": j.get("node_rank"), "hostname": j.get("hostname"), "nnodes": j.get("nnodes")}
                for j in joins if j.get("nnodes") != ref]
    complete = not missing
    ok = complete and not dups and not out_of_range and not mismatch
    members = [by_rank[r][0] for r in present]
    return {
        "ok": ok, "complete": complete, "final": final, "nnodes": ref, "missing": missing,
        "duplicates": {str(r): h for r, h in dups.items()}, "out_of_range": out_of_range, "nnodes_mismatch": mismatch,
        "members": [{"node_rank": m["node_rank"], "uuid": m["uuid"], "hostname": m.get("hostname"),
                     "key": m.get("_key")} for m in members],
        "joined": [{"node_rank": j.get("node_rank"), "hostname": j.get("hostname"), "nnodes": j.get("nnodes"),
                    "pid": j.get("pid")} for j in joins],
    }


def world_check(verdict: dict, elapsed_s: float, timeout_s: float) -> CheckResult:
    """rendezvous.world from a verdict: names missing ranks, duplicate ranks and --nnodes disagreements."""
    cid = "rendezvous.world"
    n = verdict.get("nnodes")
    ev = {k: verdict.get(k) for k in ("nnodes", "missing", "duplicates", "out_of_range", "nnodes_mismatch",
                                      "joined")}
    if verdict.get("ok"):
        members = verdict.get("members") or []
        hosts = ", ".join(f"{m['node_rank']}={m.get('hostname')}" for m in members[:8])
        more = f", and {len(members) - 8:,} more" if len(members) > 8 else ""
        return passed(cid, f"all {n:,} node ranks joined in {elapsed_s:.1f} s" + (f" ({hosts}{more})" if hosts else ""),
                      evidence=ev)
    problems, fixes = [], []
    if verdict.get("missing"):
        miss = ",".join(map(str, verdict["missing"]))
        problems.append(f"node rank(s) {miss} never joined within {timeout_s:g} s")
        fixes.append(f"start ncclcheck with --node-rank {miss} on the missing node(s), or check why they cannot "
                     "reach MASTER_ADDR:MASTER_PORT (their own reports say)")
    for r, hosts in (verdict.get("duplicates") or {}).items():
        problems.append(f"node rank {r} claimed by {len(hosts)} nodes: {', '.join(hosts)}")
        fixes.append("give every node a distinct --node-rank (0..N-1)")
    if verdict.get("out_of_range"):
        problems.append(f"node rank(s) {','.join(map(str, verdict['out_of_range']))} are outside 0..{n - 1}")
    for m in verdict.get("nnodes_mismatch") or []:
        problems.append(f"node {m['node_rank']} ({m['hostname']}) was started with --nnodes {m['nnodes']}, "
                        f"the others with {n}")
    if verdict.get("nnodes_mismatch"):
        fixes.append(f"start every node with the same --nnodes ({n})")
    return failed(cid, "; ".join(problems) or "the world did not form", evidence=ev,
                  fix="; ".join(fixes) or "see the other nodes' reports")


# ---------------------------------------------------------------------------------------------------------------
# The preflight itself


@dataclass
class _Ctx:
    config: Config
    placement: Placement
    facts: dict
    results: list
    node_id: str
    log_path: Optional[str]
    start: float
    join_grace_s: float = JOIN_GRACE_S
    observer: Any = None  # progress on the deciding process's terminal (n of N nodes joined, mesh rows in)

    @property
    def budget(self) -> Budget:
        return self.config.budget or Budget(self.config.world.timeout_s)

    @property
    def timeout_s(self) -> float:
        return self.budget.bound("join")

    @property
    def rdzv_deadline(self) -> float:
        return self.budget.deadline("join", since=self.start)


def _alone(ctx: _Ctx, extra: list, nnodes: Optional[int] = None) -> ClusterOutcome:
    """The world did not form: this node's own report, saying why from its side."""
    p = ctx.placement
    return ClusterOutcome(
        world=_world_info(ctx.config, p, nnodes or p.nnodes),
        nodes=[NodeInfo(p.node_rank, hostname_of(ctx.facts), ctx.facts)],
        checks=list(ctx.results) + extra,
        recommendations=[],
        formed=False,
    )


def _connect(ctx: _Ctx) -> tuple:
    """(store, decider, problem CheckResult or None). Plain-socket probe first, then the TCPStore, bounded."""
    p = ctx.placement
    host = roles.is_server(p, os.environ)
    prefix = roles.run_prefix(os.environ)
    addr, port = p.master_addr, p.master_port
    if host:
        b = probe.check_bind(port)
        if not b.bindable:
            if b.in_use:
                # Maybe another node started as rank 0 on this host first: join it, and be named as a duplicate.
                try:
                    st = open_store(addr, port, False, 3.0, ctx.log_path, prefix)
                    if st.has(K.HOST):
                        return st, False, None
                except ConnectionError:
                    pass
            return None, True, failed(
                "rendezvous.world", f"node 0 cannot host the rendezvous on port {port}: {b.error}",
                evidence=b.to_json(),
                fix=f"Free the port (ss -ltnp 'sport = :{port}') or choose another --master-port on every node.")
        try:
            st = open_store(addr if is_local_address(addr) else "0.0.0.0", port, True, ctx.timeout_s,
                            ctx.log_path, prefix)
        except ConnectionError as e:
            return None, True, failed("rendezvous.world", f"node 0 could not start the rendezvous store: {e}",
                                      fix="See the log; check --master-port is free on node 0.")
        st.set(K.HOST, {"hostname": hostname_of(ctx.facts), "pid": os.getpid(), "uuid": ctx.node_id})
        return st, True, None
    decider = roles.is_decider(p)
    m = _master_result(ctx.results)
    if m is not None and m.status is Status.FAIL and (m.evidence or {}).get("mode") == "connect":
        # The master probe already spent its bound (T) and its check names the cause: a second probe would
        # double the time before the cause is named (issue 13: 2 x T on every non-master node).
        return None, decider, _master_failed(m, addr, port)
    if m is None or m.status is Status.FAIL:
        pr = probe.probe_master(addr, port, ctx.budget.deadline("master_probe"))
        if not pr.ok:
            return None, decider, failed(
                "rendezvous.world", f"could not join: master {format_endpoint(addr, port)} {pr.status} after "
                f"{pr.attempts} attempts in {pr.elapsed_s:.1f} s", evidence=pr.to_json(),
                fix="See rendezvous.master_reachable: start node 0 first, check MASTER_ADDR/MASTER_PORT and the "
                    "firewall between the nodes.")
    try:
        st = open_store(addr, port, False, ctx.budget.bound("join"), ctx.log_path, prefix)
    except ConnectionError as e:
        return None, decider, failed(
            "rendezvous.world", f"could not join the rendezvous store at {format_endpoint(addr, port)}: {e}",
            fix="Check that node 0 runs ncclcheck (not another service) on MASTER_PORT.")
    return st, decider, None


def _master_failed(m: CheckResult, addr: str, port: int) -> CheckResult:
    """rendezvous.world when this node's master probe failed: the probe's own finding, not a second probe."""
    ev = m.evidence or {}
    return failed("rendezvous.world", f"could not join: master {format_endpoint(addr, port)} "
                  f"{ev.get('kind') or 'unreachable'} after {ev.get('attempts', '?')} attempts in "
                  f"{float(ev.get('elapsed_s') or 0):.1f} s", evidence=ev,
                  fix="See rendezvous.master_reachable: start node 0 first, check MASTER_ADDR/MASTER_PORT and the "
                      "firewall between the nodes.")


def _tie_to_master(wcheck: CheckResult, results: list) -> CheckResult:
    """On node 0: ranks that never joined while MASTER_ADDR is not an address of this host are most likely the
    same fault (the others were sent elsewhere): say so in the verdict, with the fix."""
    m = _master_result(results)
    ev = (m.evidence or {}) if m is not None else {}
    if wcheck.status is not Status.FAIL or not (wcheck.evidence or {}).get("missing") or ev.get("mode") != "bind":
        return wcheck
    if ev.get("local") is not False and ev.get("local") is not None:
        return wcheck
    why = "does not resolve here" if ev.get("local") is None else "is not an address of this host"
    return failed(wcheck.id, f"{wcheck.summary}; MASTER_ADDR {ev.get('addr')} {why}, so the other nodes were "
                  "sent elsewhere", detail=wcheck.detail, evidence=dict(wcheck.evidence or {}, master=ev),
                  fix=f"Set MASTER_ADDR to an address of node 0 (this host) on every node, then {wcheck.fix}")


def wait_keys(st: JsonStore, keys: list[str], deadline: float) -> bool:
    """Block in the store until every key exists or the deadline passes (one request, no polling): True if all do.

    Polling would cost every node a request every few tens of milliseconds, so node 0's store would carry traffic
    growing with n times the wait; a blocking wait costs one request whatever the wait.
    """
    if not keys:
        return True
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return all(st.has(k) for k in keys)
    try:
        st.raw.wait([st.prefix + k for k in keys], _dt.timedelta(seconds=remaining))
        return True
    except Exception as exc:  # noqa: BLE001 - torch raises DistStoreError on timeout, DistNetworkError when lost
        if type(exc).__name__ == "DistStoreError" and "timeout" in str(exc).lower():
            return False
        raise StoreLost(first_line(exc)) from None


def get_many(st: JsonStore, keys: list[str]) -> list:
    """The values of keys that all exist, in one request (JSON-decoded; None where a value is not JSON)."""
    if not keys:
        return []
    try:
        raw = st.raw.multi_get([st.prefix + k for k in keys])
    except Exception as exc:  # noqa: BLE001 - DistNetworkError when the store went away
        raise StoreLost(first_line(exc)) from None
    out = []
    for v in raw:
        try:
            out.append(json.loads(bytes(v).decode("utf-8")))
        except (ValueError, UnicodeDecodeError):
            out.append(None)
    return out


def wait_get(st: JsonStore, key: str, deadline: float) -> object:
    """The value of key once it exists (blocking in the store), or None at the deadline."""
    return st.get_now(key) if wait_keys(st, [key], deadline) else None


def _read_joins(st: JsonStore, seen: dict) -> list:
    n = st.add(K.JOIN_COUNT, 0)
    for i in range(1, n + 1):
        if i not in seen:
            v = st.get_now(K.JOIN.format(i))
            if v is not None:
                v["_key"] = K.JOIN.format(i)
                v["_index"] = i
                seen[i] = v
    return [seen[i] for i in sorted(seen)]


def _host_decides(ctx: _Ctx, st: JsonStore) -> tuple:
    """(full verdict, join records by index). Node 0 reads each join record once, as it arrives."""
    seen: dict = {}
    complete_at = None
    shown = _Shown(ctx.observer, ctx.placement.nnodes, "nodes joined")
    while True:
        joins = _read_joins(st, seen)
        if joins:
            shown.update(len({j.get("node_rank") for j in joins}),
                         f"node {joins[-1].get('node_rank')} ({joins[-1].get('hostname')})")
        now = time.monotonic()
        v = decide(joins, ctx.placement.nnodes, final=False)
        if v["complete"] and complete_at is None:
            complete_at = now
        if (complete_at is not None and now - complete_at >= ctx.join_grace_s) or now >= ctx.rdzv_deadline:
            v = decide(_read_joins(st, seen), ctx.placement.nnodes, final=True)
            v["elapsed_s"] = now - ctx.start
            shown.stop()
            st.set(K.VERDICT, wire.compact_world(v, max(seen, default=0)))
            return v, seen
        time.sleep(0.05)


class _Shown:
    """Progress of a wait (`start` once, `advance` per new arrival) on an Observer, or nothing without one."""

    def __init__(self, observer: Any, total: int, label: str) -> None:
        self.observer, self.count = observer, 0
        if observer is not None:
            observer.start(total, label)

    def update(self, count: int, label: str) -> None:
        while self.observer is not None and self.count < count:
            self.count += 1
            self.observer.advance(label)

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer = None


@dataclass
class _Mesh:
    """One node's part of the mesh phase: its listener (kept up until node 0 has every row) and its targets."""

    listener: Optional[probe.MeshListener]
    n: int
    index: int
    end: float


def _peer_endpoints(st: JsonStore, n: int, rank: int, decider: bool, end: float) -> dict:
    """{rank: {"id", "endpoints"}} of the peers this node probes.

    Full mesh: node 0 waits for every node's endpoints (over loopback: its own store) and publishes them packed in
    one `mesh/dir`; every other node waits for that one key and reads it, so its cost per peer is the 12 bytes of
    the peer's entry, not two key names and a JSON record. Sampled mesh: wait for exactly this node's targets (so
    probing starts as soon as they listen, not all nodes at once), then one request for all their endpoints.
    """
    targets = reachability.probe_targets(n, rank)
    if not reachability.sampled(n):
        if decider:
            keys = [K.MESH_EP.format(r) for r in range(n)]
            complete = wait_keys(st, keys, end)
            values = get_many(st, keys) if complete else [st.get_now(k) for k in keys]  # a silent peer costs the wait
            st.set(K.MESH_DIR, probe.pack_directory(dict(enumerate(values)), n))
            eps = {r: v for r, v in enumerate(values) if isinstance(v, dict)}
        else:
            eps = probe.unpack_directory(wait_get(st, K.MESH_DIR, end))
        return {t: eps[t] for t in targets if t in eps}
    keys = [K.MESH_EP.format(t) for t in targets]
    # Per-key reads would cost node 0's link a round trip per peer.
    complete = wait_keys(st, keys, end)
    values = get_many(st, keys) if complete else [st.get_now(k) for k in keys]  # a silent peer costs the wait
    return {t: v for t, v in zip(targets, values) if isinstance(v, dict)}


def _mesh_start(ctx: _Ctx, st: JsonStore, n: int, leader: bool, decider: bool) -> _Mesh:
    """Listen, publish this node's endpoints, read only its targets' endpoints, probe them, publish the row."""
    p = ctx.placement
    end = ctx.budget.deadline("mesh")
    m = _Mesh(None, n, p.node_rank, end)
    if not leader:
        return m
    addrs = reachability.candidate_addresses(ctx.facts.get("interfaces"), include_loopback=False)
    m.listener = probe.MeshListener(p.node_rank, ctx.node_id, addrs)
    m.listener.start()
    ep: dict = {"id": ctx.node_id, "endpoints": m.listener.endpoints}
    if m.listener.bind_errors:
        ep["bind_errors"] = m.listener.bind_errors
    st.set(K.MESH_EP.format(p.node_rank), ep)
    eps = _peer_endpoints(st, n, p.node_rank, decider, end)
    budget = max(1.0, end - time.monotonic())  # what is left of the mesh phase's bound (T)
    own = {a for addrs_ in addrs.values() for a in addrs_}
    rows = probe.probe_peers(p.node_rank, eps, deadline_s=budget, own_addresses=own)
    # The clock check reads timings only of probes to or from the reference node (node rank 0, which decides):
    # node 0's row (over loopback) keeps them all, the others only theirs towards node 0.
    timed = None if decider else {0}
    st.set(K.MESH_ROW.format(p.node_rank), probe.pack_row(rows, eps, timed=timed))
    st.add(K.MESH_ROWS, 1)
    return m


def _mesh_collect(st: JsonStore, m: _Mesh, observer: Any = None) -> tuple:
    """Node 0: (matrix, attempts_by_rank) once every node published its row or the mesh phase ended."""
    shown = _Shown(observer, m.n, "mesh probes")
    while time.monotonic() < m.end:
        done = st.add(K.MESH_ROWS, 0)
        shown.update(done, f"{done} of {m.n} nodes probed")
        if done >= m.n:
            break
        time.sleep(0.1)
    shown.stop()
    eps, attempts = {}, {}
    for r in range(m.n):
        v = st.get_now(K.MESH_EP.format(r))
        eps[r] = v if isinstance(v, dict) else {"id": None, "endpoints": {}}
    published = {r: e.get("endpoints") or {} for r, e in eps.items()}
    for r in range(m.n):
        row = st.get_now(K.MESH_ROW.format(r))
        if isinstance(row, dict):
            attempts[r] = probe.unpack_row(row, published)
    ranks = list(range(m.n))
    matrix = reachability.build_matrix(ranks, published, attempts)
    return matrix, attempts


def run_cluster_preflight(
    config: Config,
    placement: Placement,
    local_facts: dict,
    local_results: list,
    log_path: Optional[str] = None,
    join_grace_s: float = JOIN_GRACE_S,
    observer: Any = None,
) -> ClusterOutcome:
    """Form the world (bounded), exchange facts as JSON, probe the mesh, run cross-node checks and rules.

    local_results are this node's node-local CheckResults (node=node_rank). Returns the aggregated outcome; every
    node of a formed world returns the same nodes/checks/recommendations. Never raises for network trouble: it
    becomes a failed rendezvous.* check. Call `outcome.agree_exit_code(code)` once the report is built.
    """
    ctx = _Ctx(config, placement, local_facts, list(local_results), _uuid.uuid4().hex[:16], log_path,
               time.monotonic(), join_grace_s, observer)
    if not placement.master_addr or not placement.master_port:
        return _alone(ctx, [skipped("rendezvous.world", "single node: no world to form")])
    st, decider, problem = _connect(ctx)
    if problem is not None:
        return _alone(ctx, [problem])
    try:
        return _after_connect(ctx, st, decider)
    except StoreLost as e:
        who = "this node hosts it" if decider else "node 0 hosts it"
        return _alone(ctx, [failed("rendezvous.world", f"lost the rendezvous store ({who}): {e}",
                                   fix="Look at node 0's report and log: it exited or crashed before the others "
                                       "finished.")])


def _after_connect(ctx: _Ctx, st: JsonStore, decider: bool) -> ClusterOutcome:
    placement = ctx.placement
    leader = placement.node_leader
    my_join = 0
    if leader:
        my_join = st.add(K.JOIN_COUNT, 1)
        st.set(K.JOIN.format(my_join), {
            "node_rank": placement.node_rank, "nnodes": placement.nnodes, "hostname": hostname_of(ctx.facts),
            "pid": os.getpid(), "uuid": ctx.node_id, "launcher": placement.launcher,
            "facts": ctx.facts, "checks": [c.to_json() for c in ctx.results],
        })
    joins: dict = {}
    if decider:
        verdict, joins = _host_decides(ctx, st)
        if not verdict.get("ok"):
            # Keep the store up until everyone who joined has read the verdict (bounded): a node must learn why.
            st.wait_count(K.VERDICT_READ, len(verdict.get("joined", [])) - 1, time.monotonic() + FINAL_WAIT_S)
    else:
        # Node 0 was up when we connected, so it decides within its join bound (T) from now, plus the fixed grace.
        verdict = wait_get(st, K.VERDICT, ctx.budget.deadline("join") + ctx.budget.bound("verdict_grace"))
        if not isinstance(verdict, dict):
            return _alone(ctx, [failed("rendezvous.world", "node 0 hosts the rendezvous but never published who "
                                       "joined (it may have crashed or been stopped)",
                                       fix="Look at node 0's report and log.")])
        if leader:
            st.add(K.VERDICT_READ, 1)
    elapsed = float(verdict.get("elapsed_s") or (time.monotonic() - ctx.start))
    wcheck = _tie_to_master(world_check(verdict, elapsed, ctx.timeout_s), ctx.results if decider else [])
    if decider:
        me_in = any(m["uuid"] == ctx.node_id for m in verdict.get("members", [])) or not leader
    else:  # an ok verdict admits every join node 0 read; a later join claimed a rank already taken
        me_in = not leader or my_join <= int(verdict.get("last_join") or 0)
    if not verdict.get("ok") or not me_in:
        if verdict.get("ok") and not me_in:
            wcheck = failed("rendezvous.world", f"node rank {placement.node_rank} was already taken when this node "
                            "joined; the world formed without it", evidence={"verdict": verdict},
                            fix="give every node a distinct --node-rank (0..N-1)")
        return _alone(ctx, [wcheck], verdict.get("nnodes"))
    n = int(verdict.get("nnodes") or len(verdict.get("members") or []))
    # --shared-dir: every node leader proves the directories are one filesystem (preflight/shared_dirs.py)
    shared = shared_dirs.exchange(st.scoped("shared/"), placement.node_rank, n, ctx.config.storage.dirs,
                                  ctx.budget.bound("shared_dir"), ctx.budget) \
        if leader and ctx.config.storage.dirs else None
    mesh = _mesh_start(ctx, st, n, leader, decider)
    try:
        if decider:
            return _decide_result(ctx, st, verdict, joins, wcheck, mesh, shared)
        result = wait_get(st, K.RESULT, mesh.end + FINAL_WAIT_S + ctx.timeout_s)
    finally:
        if mesh.listener is not None:
            mesh.listener.close()
    if result is None:
        return _alone(ctx, [wcheck, failed("rendezvous.world", "node 0 never published the cross-node verdict "
                                           "(it may have crashed or been stopped)",
                                           fix="Look at node 0's report and log.")], n)
    cross, local_groups, recs, _mesh_info = wire.read_result(result)
    return ClusterOutcome(
        world=_world_info(ctx.config, placement, n),
        nodes=[NodeInfo(placement.node_rank, hostname_of(ctx.facts), ctx.facts)] if leader else [],
        checks=list(ctx.results) + (cross or [wcheck]) + local_groups,  # cross[0] is node 0's rendezvous.world
        recommendations=recs,
        formed=True,
        verdict=verdict,
        _store=st,
        _is_host=False,
        _members=_expected_processes(placement, n),
    )


def _decide_result(ctx: _Ctx, st: JsonStore, verdict: dict, joins: dict, wcheck: CheckResult,
                   mesh: _Mesh, shared: Optional[dict] = None) -> ClusterOutcome:
    """Node 0: every node's facts and rows -> cross-node checks and rules -> `world/result`; the full outcome."""
    matrix, attempts = _mesh_collect(st, mesh, ctx.observer)
    members = {m["node_rank"]: joins.get(_index(m.get("key"))) or {} for m in verdict["members"]}
    nodes = [(r, j.get("hostname") or "?", j.get("facts") or {}) for r, j in sorted(members.items())]
    local: list = []
    for _, j in sorted(members.items()):
        local.extend(CheckResult.from_json(c) for c in j.get("checks") or [])
    cross = [_mesh_note(c, matrix, len(nodes), {r: h for r, h, _ in nodes})
             for c in run_cross_checks(CrossInput(nodes, mesh=matrix, attempts=attempts, shared=shared))]
    recs = _recommendations(nodes, matrix)
    hosts = {r: h for r, h, _ in nodes}
    mesh_info = {"nodes": mesh.n, "sampled": reachability.sampled(mesh.n),
                 "pairs_tested": max((e.get("pairs_tested") or 0 for e in matrix.values()), default=0)}
    st.set(K.RESULT, wire.build_result([wcheck, *cross], local, recs, hosts, mesh_info))
    return ClusterOutcome(
        world=_world_info(ctx.config, ctx.placement, len(members)),
        nodes=[NodeInfo(r, h, f) for r, h, f in nodes],
        checks=local + [wcheck] + cross,
        recommendations=recs,
        formed=True,
        verdict=verdict,
        _store=st,
        _is_host=True,
        _members=_expected_processes(ctx.placement, len(members)),
    )


def _mesh_note(c: CheckResult, matrix: dict, n: int, hosts: dict) -> CheckResult:
    """net.peer_reachability as the user needs it at scale: whether the mesh was sampled and how many pairs were
    tested, and which nodes reached none of the peers they probed (the check names them as unreachable)."""
    if c.id != "net.peer_reachability" or not matrix:
        return c
    stuck = sorted({r for e in matrix.values() if not e.get("duplicates") for r in e.get("cannot_reach") or []})
    summary, detail, ev = c.summary, c.detail, dict(c.evidence)
    if reachability.sampled(n):
        tested = max((e.get("pairs_tested") or 0) for e in matrix.values())
        summary += (f" (sampled mesh: {tested:,} of {n * (n - 1):,} node pairs tested per interface, ring neighbours "
                    f"+ {reachability.SAMPLE_PEERS} random peers per node)")
        ev.update(sampled=True, pairs_tested=tested)
    if stuck:
        named = ", ".join(f"node {r} ({hosts.get(r, '?')})" for r in stuck[:8])
        detail = (f"{named} reached none of the peers it probed, which other nodes reached: its outgoing "
                  f"connections fail (firewall, routing or a dead NIC on that node). " + detail).strip()
        ev["cannot_reach"] = stuck
    return replace(c, summary=summary, detail=detail, evidence=ev)


def _index(key: object) -> int:
    try:
        return int(str(key).rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return -1


def _expected_processes(placement: Placement, nmembers: int) -> int:
    """How many processes read world/final: node leaders in launcher mode, every rank in worker mode."""
    return placement.world_size if placement.worker_mode else nmembers


def _recommendations(nodes: list, matrix: dict) -> list:
    mesh_recs = recommend_mesh(MeshView(nodes, matrix))
    per_node: dict[int, list[Recommendation]] = {}
    for r, _, f in nodes:
        try:
            per_node[r] = recommend_local(NodeView(f, node=None, multi_node=True))
        except Exception:  # noqa: BLE001 - a broken local rule must not hide the cluster's advice
            log.exception("local recommendation rules failed on node %s's facts", r)
            per_node[r] = []
    ifname = {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}
    # The matrix decides the socket interface; when it could not (nothing usable everywhere) say nothing rather
    # than repeat a per-node guess that the probe just showed does not connect the nodes.
    return merge_recommendations(mesh_recs, per_node, names_from_mesh=ifname)
