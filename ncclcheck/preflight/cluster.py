"""Multi-node world formation for preflight: bounded rendezvous through a c10d TCPStore, fact upload, mesh probe,
cross-node checks on node 0, one compact verdict, and one agreed exit code.

    outcome = run_cluster_preflight(config, placement, local_facts, local_results)
    ... build the Report from outcome.world / nodes / checks / recommendations ...
    code = outcome.agree_exit_code(report.exit_code)   # node 0 publishes, the others adopt

Protocol (all values JSON, keys under "ncclcheck/<run>/"), sized so node 0's store carries O(n) bytes and every other
node O(1): node 0 hosts the store at MASTER_ADDR:MASTER_PORT (a plain socket probe runs first so a blocked port is
named in seconds); node 0 publishes `world/ref` (a digest of each of its own facts groups and checks) and every node
leader uploads its join record once (`join/count` counter + `join/<i>` = {node_rank, nnodes, hostname, pid, uuid,
facts, checks}), sending whole only the groups and checks that differ from node 0's (preflight/joinref.py; ~3 KB of
~13 KB on a healthy node); node 0 alone reads them, decides when the world is complete (every rank
0..N-1 joined, then a short grace for duplicates) or the deadline passed, and publishes a compact `world/verdict`
(no per-node lists). Then each node publishes `mesh/ep/<rank>` and reads the endpoints of the peers it probes:
up to nccl.reachability.FULL_MESH_MAX nodes everyone, from the one packed `mesh/dir` node 0 publishes once every
node's endpoints are in (12 bytes a peer); above it ring neighbours + seeded random peers, waited for and read in
one request. It publishes its packed `mesh/row/<rank>` (a healthy row is runs of peer ranks, whatever n).
Node 0 alone runs the cross-node checks and rules and publishes `world/result`: the checks with the nodes they
name, the aggregated node-local exceptions and the recommendations, whose size grows with the problems, not with n.
Finally node 0 publishes `world/final` with the exit code. Every wait on another node's key blocks in the store (one
request), never polls. Every record read back is checked (rendezvous.store; the record shapes are here), every
counter is read capped, and a node leaves with max(its own exit code, the agreed one).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import time
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import hostranges
from ..agent.launchers import Placement, store_host
from ..agent.limits import spaced_collector
from ..checks import CrossInput, run_cross_checks
from ..checks.local import judged_among_joined, rejudge_one_host
from ..config import CHECK_RANKS_DEFAULT, Config
from ..facts import hostname_of, munge
from ..facts.ports import port_holder
from ..model import CheckResult, NodeInfo, Status, WorldInfo, failed, skipped
from ..nccl import reachability
from ..rendezvous import agree
from ..rendezvous import trust as T
from ..rendezvous.budget import Budget
from ..rendezvous.journal import Journal
from ..rendezvous.store import Guard, JsonStore, Limits, StoreLost, counter_cap, open_store, preload
from ..rendezvous.waits import Waits
from . import joinref, probe, second_master, shared_dirs, wire
from . import keys as K
from .decide import (
    JoinTally,
    decide,
    master_failed,
    master_result,
    mesh_note,
    port_taken,
    recommendations,
    tie_to_master,
    world_check,
)

log = logging.getLogger(__name__)


@dataclass
class ClusterOutcome:
    """What the multi-node part of preflight found. `formed` is False when the world could not form."""

    world: WorldInfo
    nodes: list  # list[NodeInfo], node-rank order (only this node when the world did not form)
    checks: list  # list[CheckResult]: rendezvous.* plus cross-node checks, and every node's local results
    recommendations: list  # list[Recommendation]
    formed: bool = False
    verdict: dict = field(default_factory=dict)
    rejected: list = field(default_factory=list)  # store records dropped as bad ("key: why"), for the log and tests
    trust: dict = field(default_factory=dict)  # the report's `trust`: level, where the key came from, what was ignored
    _session: Optional[T.Session] = None  # node 0's challenge answerer and key file, ended with the run
    _store: Optional[JsonStore] = None
    _is_host: bool = False
    _members: int = 0
    _budget: Optional[Budget] = None
    # The store is hosted by a rank of this job that closes it on the way out (srun, mpirun, env://: no launcher
    # agent) and the job's own init_process_group uses that port next: the members leave only once it is closed.
    _outlast_host: bool = False
    _endpoint: Optional[tuple] = None  # (address, port): the master's, for members; where it listens, for node 0
    _waits: Optional[Waits] = None  # where the final agreement's wait is said (rendezvous/waits.py)
    heard_node_0: bool = False  # a world that did not form: node 0 published why (its console says it too)

    @property
    def node_0_reported(self) -> bool:
        """Node 0 printed the job's report: the world formed, or node 0 decided and said why it did not."""
        return self.formed or self.heard_node_0

    def agree_exit_code(self, exit_code: int) -> int:
        """Node 0 publishes its exit code and waits (bounded) until every member read it; every other node leaves
        with max(its own, the agreed one) (rendezvous.agree), so srun/CI fail as a whole and nothing read from the
        store makes a node look healthier than it is. Without a formed world each node keeps its own code."""
        st, self._store = self._store, None
        if st is None or not self.formed or self._budget is None:
            self.close()
            return exit_code
        # Leaving while node 0 still holds its store would let this rank's next TCPStore client (the script's
        # env:// init on the same MASTER_PORT) reach ncclcheck's store just before it closes: "Failed to recv, got 0
        # bytes" in init_process_group (seen under srun and mpirun in the lab). So node 0 closes a Lifeline only
        # once its store is gone, and the members leave when it closes.
        lifeline = None
        try:
            if self._outlast_host and self._is_host and self._endpoint:
                lifeline = probe.Lifeline(self._endpoint[0])
                st.set(K.LIFELINE, {"port": lifeline.port})
            waits = self._waits or Waits(None, self._budget)
            b = self._budget
            with waits.wait("final", b.deadline(b.final_agreement_s), b.work_notice_s, decider=self._is_host,
                            members=self._members - 1):
                code = agree.exit_code(st, K.FINAL, exit_code, self._is_host, self._members, self._budget,
                                       outlast=self._outlast_host)
            self._note_ignored(st)
            if self._session is not None:  # every member acknowledged: no challenge is left to answer
                self._session.close()
            held = st.get_now(K.LIFELINE, _lifeline_record) if self._outlast_host and not self._is_host else None
        except Exception as exc:  # noqa: BLE001 - the store going away at the end must not become a crash
            log.warning("could not agree on the exit code: %s", exc)
            code, held = exit_code, None
        b = self._budget
        if lifeline is not None:
            st = None  # the last reference to node 0's store, unless a cycle holds it: then the collector's
            gc.collect()
            end = b.deadline(b.final_agreement_s)
            while not probe.check_bind(self._endpoint[1]).bindable and not b.passed(end):
                time.sleep(b.release_poll_s)  # bounded: at worst the members meet the old race, never a hang
            lifeline.close()
        elif held is not None and self._endpoint:
            st = None
            probe.await_lifeline(self._endpoint[0], held["port"], b.deadline(b.final_agreement_s), b)
        self.close()
        return code

    def _note_ignored(self, st: JsonStore) -> None:
        """The records dropped during the agreement too (a forged or replayed exit code) reach the report."""
        if self.trust and st.rejected:
            self.trust["ignored"] = list(st.rejected)

    def close(self) -> None:
        self._store = None
        if self._session is not None:
            self._session.close()
            self._session = None


def _world_info(config: Config, placement: Placement, nnodes: int) -> WorldInfo:
    w = config.world
    nproc = placement.local_world_size or w.nproc_per_node or CHECK_RANKS_DEFAULT
    return WorldInfo(
        nnodes=nnodes,
        world_size=placement.world_size if placement.worker_mode else nnodes * nproc,
        backend=w.backend,
        master=placement.master,
        launcher=placement.launcher,
    )


# ---------------------------------------------------------------------------------------------------------------
# What may be read back: the shape of each record (a record that does not fit is dropped and named by the store)

_STATUSES = {s.value for s in Status}
MAX_CHECKS = 4096  # node-local checks one node may upload (ncclcheck has a few dozen)
MAX_HOSTNAME = 255  # characters of a join record's hostname (DNS names are at most 253, a UTS name 64)
MISSING_SAID = 64  # node ranks a join wait names as missing (then a count): a line, not thousands of ranks
MAX_READERS = 1024  # processes of one node that read the verdict (its local ranks; --nproc-per-node is at most 1024)


def _bad_check(c: Any, node: Optional[int]) -> Optional[str]:
    if not isinstance(c, dict) or not isinstance(c.get("id"), str) or c.get("status") not in _STATUSES:
        return "a check without an id or with an unknown status"
    if node is not None and c.get("node") != node:
        return f"a check naming node {c.get('node')!r}, uploaded by node {node}: a node may only report itself"
    for k in ("summary", "detail", "fix"):
        if c.get(k) is not None and not isinstance(c.get(k), str):
            return f"a check whose {k} is not text"
    if c.get("evidence") is not None and not isinstance(c.get("evidence"), dict):
        return "a check whose evidence is not an object"
    return None


def _join_record(j: Any) -> Optional[str]:
    if not isinstance(j, dict):
        return "not a join record (a JSON object)"
    for k, t in (("node_rank", int), ("nnodes", int), ("pid", int), ("uuid", str), ("hostname", str),
                 ("facts", dict), ("checks", list)):
        if type(j.get(k)) is not t:
            return f"a join record whose {k} is not {t.__name__}"
    if j["node_rank"] < 0 or j["nnodes"] < 1:
        return "a join record with a negative node rank or no nodes"
    if len(j["hostname"]) > MAX_HOSTNAME:  # a 6 MB "hostname" was printed whole into the report
        return f"a join record whose hostname is {len(j['hostname']):,} characters long (at most {MAX_HOSTNAME})"
    if len(j["checks"]) > MAX_CHECKS:
        return f"a join record with {len(j['checks']):,} checks"
    named = "same" in j  # compacted: a check id stands for node 0's own check (joinref)
    for c in j["checks"]:
        if named and isinstance(c, str):
            continue
        if why := _bad_check(c, j["node_rank"]):
            return why
    return None


def _verdict_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or type(v.get("ok")) is not bool or type(v.get("nnodes")) is not int:
        return "not a world verdict"
    if v.get("last_join") is not None and type(v.get("last_join")) is not int:
        return "a world verdict whose last_join is not an integer"
    return None


def _result_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict):
        return "not a cross-node result"
    for key in ("checks", "local", "recommendations"):
        if not isinstance(v.get(key) or [], list):
            return f"a cross-node result whose {key} is not a list"
    for c in (v.get("checks") or []) + (v.get("local") or []):
        if why := _bad_check(c, None):
            return why
    for r in v.get("recommendations") or []:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("value"), str):
            return "a recommendation without a name or a value"
    return None


def _dict(v: Any) -> Optional[str]:
    return None if isinstance(v, dict) else "not a JSON object"


# ---------------------------------------------------------------------------------------------------------------
# The preflight itself


@dataclass
class _Ctx:
    config: Config
    placement: Placement
    facts: dict
    results: list
    node_id: str
    budget: Budget
    start: float
    guard: Guard
    join_grace_s: float
    observer: Any = None  # progress on the deciding process's terminal (n of N nodes joined, mesh rows in)
    level: str = "none"  # the trust level this node expects (rendezvous/trust.py)
    session: Optional[T.Session] = None
    waits: Optional[Waits] = None  # where each wait is said while it lasts (rendezvous/waits.py)
    joining: Optional[_Joining] = None  # node 0's join wait, opened before it starts the store it hosts
    ref: Optional[joinref.Reference] = None  # what the deciding node's own join records are compacted against

    @property
    def timeout_s(self) -> float:
        return self.budget.join_s

    @property
    def rdzv_deadline(self) -> float:
        return self.budget.deadline(self.budget.join_s, since=self.start)

    @property
    def cap(self) -> int:
        return counter_cap(self.placement.nnodes)


def _alone(ctx: _Ctx, extra: list, nnodes: Optional[int] = None) -> ClusterOutcome:
    """The world did not form: this node's own report, saying why from its side. Its checks whose verdict depends
    on who joined are judged among the nodes that joined (checks.local.judged_among_joined): none outranks the node
    that never joined."""
    p = ctx.placement
    missing = [r for c in extra if c.id == "rendezvous.world" for r in (c.evidence or {}).get("missing") or []
               if isinstance(r, int)]
    return ClusterOutcome(
        world=_world_info(ctx.config, p, nnodes or p.nnodes),
        nodes=[NodeInfo(p.node_rank, hostname_of(ctx.facts), ctx.facts)],
        checks=judged_among_joined(list(ctx.results), ctx.facts, p.node_rank, missing) + extra,
        recommendations=[],
        formed=False,
        rejected=list(ctx.guard.rejected),
    )


def _lifeline_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or type(v.get("port")) is not int or not 0 < v["port"] < 65536:
        return "not a port"
    return None


def _host_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or not isinstance(v.get("uuid"), str):
        return "not the store host's record"
    return None


def _join(ctx: _Ctx, ref: Optional[dict] = None) -> dict:
    """This node's join record (its leader appends it once to the world it joins), compacted against node 0's
    reference when it read one."""
    p = ctx.placement
    return joinref.compact(
        {"node_rank": p.node_rank, "nnodes": p.nnodes, "hostname": hostname_of(ctx.facts), "pid": os.getpid(),
         "uuid": ctx.node_id, "launcher": p.launcher, "facts": ctx.facts, "checks": [c.to_json() for c in ctx.results]},
        ref)


def _join_checked(ctx: _Ctx) -> Callable[[Any], Optional[str]]:
    """Node 0's check of a join record read back: its shape, then node 0's own values put back where it names them
    (joinref.Reference.expand), so every reader of the record sees it whole."""
    def check(j: Any) -> Optional[str]:
        why = _join_record(j)
        if why is None and ctx.ref is not None:
            why = ctx.ref.expand(j)
        elif why is None and "same" in j:
            why = "a join record compacted against a reference, in a world without one"
        return why
    return check


def _reference(ctx: _Ctx, st: JsonStore) -> Optional[dict]:
    """The reference node 0 published (a member's look, never a wait: without one it sends its whole record)."""
    (exists, v), = st.read_present([K.REF], joinref.read_reference)
    return v if exists else None


def _member(ctx: _Ctx) -> second_master.Member:
    """How this node joins another node 0's store as a member (a second node rank 0 telling the real one)."""
    p = ctx.placement
    return second_master.Member(
        p.prefix, ctx.node_id, ctx.level, ctx.cap, ctx.cap * MAX_READERS,
        lambda: Guard(token=ctx.config.world.token, limits=Limits.for_nodes(p.nnodes)), _shared_dir(ctx),
        ctx.config.world.token_source)


def _not_at_master(ctx: _Ctx) -> bool:
    """Node 0 hosting while MASTER_ADDR resolves to none of this host's addresses (the master probe's bind mode)."""
    m = master_result(ctx.results)
    ev = (m.evidence or {}) if m is not None else {}
    return ctx.placement.hosts_store and ev.get("mode") == "bind" and ev.get("local") is False


def _connect(ctx: _Ctx) -> tuple:
    """(store, decider, problem CheckResult or None). Plain-socket probe first, then the TCPStore, bounded."""
    p, b = ctx.placement, ctx.budget
    addr, port = p.master_addr, p.master_port
    if p.hosts_store:
        bc = probe.check_bind(port)
        if not bc.bindable:
            # Never join a store this node did not create: whoever holds the port could write any verdict.
            who = port_holder(port) if bc.in_use else None
            problem = port_taken(port, bc.error, who, bc.to_json(), hostname_of(ctx.facts))
            if (problem.evidence or {}).get("duplicate_of_rank0"):  # the real node 0 runs here: tell it
                told = second_master.look(addr, port, _member(ctx), lambda: _join(ctx), b, probe_first=False)
                problem = port_taken(port, bc.error, who, bc.to_json(), hostname_of(ctx.facts), told.to_json())
            return None, True, problem
        ctx.joining = _Joining(ctx)
        if "torch.distributed" not in sys.modules:
            # Said now: starting the store imports torch first (seconds on a loaded host, while the nodes cannot join
            # yet), and its libraries' loading holds the interpreter, so the pacing thread could speak only after it
            ctx.joining.said.seen(True)
        try:
            st = open_store(store_host(p), port, True, b.join_s, p.prefix, ctx.guard, clients=p.nnodes)
        except ConnectionError as e:
            return None, True, failed("rendezvous.world", f"node 0 could not start the rendezvous store: {e}",
                                      fix="See the log; check --master-port is free on node 0.")
        problem = _trust_offer(ctx, st)
        if problem is None:
            st.set(K.HOST, {"hostname": hostname_of(ctx.facts), "pid": os.getpid(), "uuid": ctx.node_id})
        return st, True, problem
    decider = p.decider
    m = master_result(ctx.results)
    if m is not None and m.status is Status.FAIL and (m.evidence or {}).get("mode") == "connect":
        # The master probe already spent its bound (T) and its check names the cause: a second probe would
        # double the time before the cause is named (issue 13: 2 x T on every non-master node).
        return None, decider, master_failed(m, addr, port)
    if m is None or m.status is Status.FAIL:
        preload()
        pr = probe.probe_master_said(addr, port, b.deadline(b.master_probe_s), b, ctx.waits)
        if not pr.ok:
            return None, decider, failed(
                "rendezvous.world", f"could not join: master {p.master} {pr.status} after "
                f"{pr.attempts} attempts in {pr.elapsed_s:.1f} s", evidence=pr.to_json(),
                fix="See rendezvous.master_reachable: start node 0 first, check MASTER_ADDR/MASTER_PORT and the "
                    "firewall between the nodes.")
    preload()  # torch's import is not a wait on node 0: the store connect's wait is said without it
    with ctx.waits.wait("store", b.deadline(b.member_connect_s(ctx.rdzv_deadline)), b.work_notice_s, addr=addr,
                        port=port):
        try:
            st = open_store(addr, port, False, b.join_s, p.prefix, ctx.guard, b.member_connect_s(ctx.rdzv_deadline))
        except ConnectionError as e:
            return None, decider, _store_unjoined(ctx, str(e))
    if decider:
        # torchrun's agent hosts this store and signs nothing, so the job's record of who runs it comes from the
        # decider (global rank 0), the first of the job's own processes in it: the others wait for that signed
        # record, as they wait for the store host's own elsewhere, and a store without it is still not this job's.
        problem = _trust_offer(ctx, st)
        if problem is None and ctx.guard.token is not None and p.agent_store:
            st.set(K.HOST, {"hostname": hostname_of(ctx.facts), "pid": os.getpid(), "uuid": ctx.node_id})
        return st, decider, problem
    if ctx.level == "token" and st.wait_get(K.HOST, ctx.rdzv_deadline, b, _host_record) is None:
        return None, decider, failed(
            "rendezvous.world", f"the store at {p.master} is not this job's: its host never signed its record with "
            "the job token", evidence={"rejected": list(ctx.guard.rejected)},
            fix="Give every node the same NCCLCHECK_TOKEN / --token-file; if they have it, another process holds "
                "MASTER_PORT on node 0's host (ss -ltnp there).")
    try:
        with ctx.waits.wait("store", ctx.rdzv_deadline, b.work_notice_s, addr=addr, port=port):
            ctx.session = T.accept(st, ctx.level, p.master_port, ctx.cap * MAX_READERS, ctx.rdzv_deadline, b,
                                   _shared_dir(ctx), ctx.config.world.token_source)
    except T.TrustError as e:
        return None, decider, failed(
            "rendezvous.world", f"the store at {p.master} is not one this node may believe (trust: {ctx.level}): "
            f"{e}", evidence={"rejected": list(ctx.guard.rejected)},
            fix=_TRUST_FIX[ctx.level])
    return st, decider, None


def _store_unjoined(ctx: _Ctx, error: str) -> CheckResult:
    """rendezvous.world when the store connect failed after node 0's port was found open: one more look tells a
    node 0 that closed its store (it decided without this node: its window is --timeout from its own start) from one
    that holds the port without answering as a store."""
    p, b = ctx.placement, ctx.budget
    again = probe.probe_master(p.master_addr, p.master_port, b.deadline(b.connect_attempt_s), budget=b)
    ev = {"error": error, "probe_after": again.to_json(), "waited_s": round(b.since(ctx.start), 3)}
    if again.status == "refused":
        return failed(
            "rendezvous.world", f"node 0 closed the rendezvous store at {p.master} before this node joined: it was "
            f"listening when this node probed it, and refuses now (it decides --timeout, {b.join_s:g} s, after its "
            f"own start, without the nodes not yet joined)", evidence=ev,
            fix="Node 0's own report names the world it saw; start every node within --timeout of node 0, or give a "
                "larger --timeout when nodes start slowly (a loaded host imports torch in seconds).")
    return failed("rendezvous.world", f"could not join the rendezvous store at {p.master}: {error}", evidence=ev,
                  fix="Check that node 0 runs ncclcheck (not another service) on MASTER_PORT.")


_TRUST_FIX = {
    "token": "Give every node the same NCCLCHECK_TOKEN / --token-file; if they have it, another process holds "
             "MASTER_PORT on node 0's host (ss -ltnp there).",
    "munge": "Check munged on both hosts (munge -n | unmunge), that every task runs as the same user, and that no "
             "other process holds MASTER_PORT on node 0's host; or give every node NCCLCHECK_TOKEN.",
    "shared-file": "Check that the first --shared-dir is the same shared directory on every node, owned by the "
                   "job's user; or give every node NCCLCHECK_TOKEN.",
    "none": "",
}


def _shared_dir(ctx: _Ctx) -> Optional[str]:
    dirs = ctx.config.storage.dirs
    return dirs[0] if dirs else None


def _trust_level(config: Config, placement: Placement) -> str:
    """The level this node expects: its own configuration only (the same on every node of a job), never what the
    store says, so a stranger cannot talk it down (rendezvous/trust.py)."""
    w = config.world
    slurm = placement.launcher == "slurm" or munge.in_slurm_job(os.environ)
    return T.choose(w.token is not None, w.trust, slurm, munge.available() and munge.running(os.environ),
                    config.storage.dirs[0] if config.storage.dirs else None)


def _trust_offer(ctx: _Ctx, st: JsonStore) -> Optional[CheckResult]:
    """Node 0: hand out the run's key and nonce (rendezvous/trust.py); a failed check when it cannot."""
    p, b = ctx.placement, ctx.budget
    try:
        ctx.session = T.offer(st, ctx.level, p.master_port, ctx.cap * MAX_READERS, b, _shared_dir(ctx),
                              ctx.config.world.token_source)
    except T.TrustError as e:
        return failed("rendezvous.world", f"{e} (trust: {ctx.level})", fix=_TRUST_FIX[ctx.level])
    return None


def _host_decides(ctx: _Ctx, st: JsonStore) -> tuple:
    """(full verdict, join records by index, the join journal, a rival node rank 0 or None). Node 0 reads each join
    record once, as it arrives, and blocks in the store for the next one; the loop ends at the join bound or a grace
    after the last rank joined. A node 0 not at MASTER_ADDR looks there meanwhile while nobody else joined it
    (second_master.Watch): finding another node rank 0 there ends the loop (this node is the duplicate)."""
    journal = Journal(st, K.JOIN, ctx.cap, _join_checked(ctx))
    seen: dict = {}
    joining = ctx.joining or _Joining(ctx)
    tally = joining.tally  # per arrival O(1); decide() (O(n)) once, at the end
    complete_at = None
    shown = _Shown(ctx.observer, ctx.placement.nnodes, "nodes joined")
    b = ctx.budget
    p = ctx.placement
    watch = second_master.Watch(p.master_addr, p.master_port, _member(ctx), lambda: _join(ctx), b) \
        if _not_at_master(ctx) else None
    rival = None
    said = joining.said

    def take() -> list:
        new = journal.read_since()
        for i, v in new:
            v["_key"], v["_index"] = K.JOIN_RECORD.format(i), i
            seen[i] = v
            joining.add(v)
        return [v for _, v in new]

    try:
        while True:
            new = take()
            if new:
                shown.update(len(tally.ranks), f"node {new[-1].get('node_rank')} ({new[-1].get('hostname')})")
            if tally.complete and complete_at is None:
                complete_at = b.now()
                said.end()  # the grace that follows listens for a duplicate: nothing to wait for, nothing to say
            end = ctx.rdzv_deadline if complete_at is None else min(ctx.rdzv_deadline,
                                                                      b.deadline(ctx.join_grace_s, complete_at))
            if new and complete_at is None:
                b.pause(end, b.join_batch_s)  # joins are streaming in: let a batch gather before the next look
            if watch is not None and any(v.get("uuid") != ctx.node_id for v in seen.values()):
                watch = None  # another node joined this one: MASTER_ADDR leads here (a service address, NAT)
            if watch is not None and watch.due():
                rival = watch.look()
            watching = watch is not None and not watch.done and rival is None  # each wait ends at the next look
            # wait_next is False at the end, or once the counter reached its cap (nothing more can honestly arrive).
            # Once every rank joined, the grace for a duplicate usually ends unanswered (and while watching, each wait
            # ends at the next look): looks, not a blocking request
            nxt = journal.wait_next if complete_at is None and not watching else journal.poll_next
            until = min(end, watch.next) if watching else end
            if rival is not None or b.passed(end) or (not nxt(until, b) and (until >= end or journal.done >= ctx.cap)):
                take()
                v = decide([seen[i] for i in sorted(seen)], ctx.placement.nnodes, final=True)
                v["elapsed_s"] = b.since(ctx.start)
                if ctx.guard.rejected:
                    v["rejected"] = list(ctx.guard.rejected)
                shown.stop()
                said.end()  # before the verdict is out: the members wait for it, node 0 no longer does
                agree.publish(st, K.VERDICT, wire.compact_world(v, max(seen, default=0)))
                return v, seen, journal, rival
    finally:
        said.end()  # a wait that ended on an error is not said any more


class _Joining:
    """Node 0's wait for the nodes to join, said from its start: the join bound counts from this node's start, the
    store's start (torch's import) included, and the user waits for the other nodes from then on. This node counts
    as joined from the start (it joins the store it hosts as soon as it listens)."""

    def __init__(self, ctx: _Ctx) -> None:
        p = ctx.placement
        self.tally, self.nnodes = JoinTally(p.nnodes), p.nnodes
        self.me = p.node_rank if p.node_leader else None
        self.named: list = [(p.node_rank, hostname_of(ctx.facts))] if p.node_leader else []  # the first that joined
        self.said = ctx.waits.wait("join", ctx.rdzv_deadline, facts=self.facts, since=ctx.start)

    def add(self, join: dict) -> None:
        self.tally.add(join)
        r = join.get("node_rank")
        if r != self.me and len(self.named) < hostranges.NAMED_ONE_BY_ONE:
            self.named.append((r, join.get("hostname")))

    def facts(self) -> dict:
        """What the wait has seen; read by the waits' thread: membership tests and lengths only, never an iteration
        over what the joining thread changes."""
        missing = [r for r in range(self.nnodes) if r not in self.tally.ranks and r != self.me]
        return {"nnodes": self.nnodes, "joined": self.nnodes - len(missing), "missing": missing[:MISSING_SAID],
                "missing_n": len(missing), "hosts": self.named[:]}


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
    local_peers: frozenset = frozenset()  # peers this node's own probe proved to share its network stack


def _peer_endpoints(st: JsonStore, n: int, rank: int, decider: bool, end: float, b: Budget) -> dict:
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
            complete = st.wait(keys, end, b)
            # a silent peer costs the wait
            values = st.get_many(keys, _dict) if complete else [st.get_now(k, _dict) for k in keys]
            st.set(K.MESH_DIR, wire.pack_directory(dict(enumerate(values)), n))
            eps = {r: v for r, v in enumerate(values) if isinstance(v, dict)}
        elif _decided_without_mesh(st):
            return {}
        else:
            eps = wire.unpack_directory(st.wait_get(K.MESH_DIR, end, b, _dict))
        return {t: eps[t] for t in targets if t in eps}
    keys = [K.MESH_EP.format(t) for t in targets]
    # Per-key reads would cost node 0's link a round trip per peer.
    complete = st.wait(keys, end, b)
    values = st.get_many(keys, _dict) if complete else [st.get_now(k, _dict) for k in keys]
    return {t: v for t, v in zip(targets, values) if isinstance(v, dict)}


def _decided_without_mesh(st: JsonStore) -> bool:
    """A cross-node result already in the store with no mesh directory before it. Node 0 publishes the directory
    before it collects rows and decides, so whoever wrote this result decided without any node's probe (a process
    squatting the master port, not ncclcheck's node 0): waiting for a directory that never comes would cost the
    whole mesh bound (T) for nothing. Only a result this node believes counts (signed, with a token): an unsigned
    one from a stranger must not make a real node 0's member skip its probe."""
    if st.has(K.RESULT) and not st.has(K.MESH_DIR) and st.get_now(K.RESULT, _result_record) is not None:
        log.warning("the rendezvous store held a cross-node result before any mesh directory: its host did not "
                    "probe the mesh (is the master port held by another process?); not waiting for one")
        return True
    return False


def _mesh_start(ctx: _Ctx, st: JsonStore, n: int, leader: bool, decider: bool) -> _Mesh:
    """Listen, publish this node's endpoints, read only its targets' endpoints, probe them, publish the row."""
    p, b = ctx.placement, ctx.budget
    end = b.deadline(b.mesh_s)
    m = _Mesh(None, n, p.node_rank, end)
    if not leader:
        return m
    addrs = reachability.candidate_addresses(ctx.facts.get("interfaces"), include_loopback=False)
    m.listener = probe.MeshListener(p.node_rank, ctx.node_id, addrs, budget=b)
    m.listener.start()
    ep: dict = {"id": ctx.node_id, "endpoints": m.listener.endpoints}
    if m.listener.bind_errors:
        ep["bind_errors"] = m.listener.bind_errors
    me = identity_key(ctx.facts)
    if me:
        ep["host"] = me
    st.set(K.MESH_EP.format(p.node_rank), ep)
    with ctx.waits.wait("mesh", end, b.work_notice_s, decider=decider, nodes=n):
        eps = _peer_endpoints(st, n, p.node_rank, decider, end, b)
    own = {a for addrs_ in addrs.values() for a in addrs_}
    same = {r for r, e in eps.items() if me and wire.host_key(e.get("host")) == me}
    # what is left of the mesh phase's bound (T)
    stats: dict = {}
    rows = probe.probe_peers(p.node_rank, eps, deadline_s=b.left(end, b.mesh_probe_floor_s), own_addresses=own,
                             budget=b, stats=stats, same_host=same)
    m.local_peers = frozenset(probe.local_peers(rows, own) & same)
    # The clock check reads timings only of probes to or from the reference node (node rank 0, which decides):
    # node 0's row (over loopback) keeps them all, the others only theirs towards node 0.
    timed = None if decider else {0}
    row = wire.pack_row(rows, eps, timed=timed)
    row["load"] = stats  # how late this node's own prober woke: node 0 tells a loaded node from a cut-off one
    st.set(K.MESH_ROW.format(p.node_rank), row)
    return m


ROWS_PER_REQUEST = 256  # mesh rows node 0 waits for in one request (the progress line moves a chunk at a time)


def _mesh_collect(st: JsonStore, m: _Mesh, b: Budget, observer: Any = None, said: Any = None) -> tuple:
    """Node 0: (matrix, attempts_by_rank) once every node published its row or the mesh phase ended. Blocks in
    the store for each row in turn (one request each), all within the mesh phase's bound; `said` (a Waits wait)
    hears how many rows are in."""
    shown = _Shown(observer, m.n, "mesh probes")
    # Rows are waited for a chunk at a time (one request blocks until all of a chunk's rows exist): a request per row
    # cost node 0 16,384 round trips through its front at 16,384 nodes, most of them for rows already there.
    for lo in range(0, m.n, ROWS_PER_REQUEST):
        hi = min(m.n, lo + ROWS_PER_REQUEST)
        if not st.wait([K.MESH_ROW.format(r) for r in range(lo, hi)], m.end, b):
            break
        shown.update(hi, f"{hi} of {m.n} nodes probed")
        if said is not None:
            said.seen(done=hi)
    shown.stop()
    eps, attempts = {}, {}
    for r, v in enumerate(st.get_present([K.MESH_EP.format(r) for r in range(m.n)], _dict)):
        eps[r] = v if isinstance(v, dict) else {"id": None, "endpoints": {}}
    published = {r: e.get("endpoints") or {} for r, e in eps.items()}
    load = {}
    for r, row in enumerate(st.get_present([K.MESH_ROW.format(r) for r in range(m.n)], _dict)):
        if isinstance(row, dict):
            attempts[r] = wire.unpack_row(row, published)
            load[r] = wire.read_load(row.get("load"), b.loaded_lag_s)
    ranks = list(range(m.n))
    claimed = {r: wire.host_key(e.get("host")) for r, e in eps.items()}
    groups = reachability.host_groups(ranks, published, attempts, {r: k for r, k in claimed.items() if k})
    matrix = reachability.build_matrix(ranks, published, attempts, same_host=groups)
    return matrix, attempts, load, groups


def identity_key(facts: dict) -> Optional[str]:
    """This node's network identity claim (facts.host.network_identity), None when it could not be read."""
    ident = ((facts or {}).get("host") or {}).get("network_identity")
    return wire.host_key(ident.get("key")) if isinstance(ident, dict) else None


def run_cluster_preflight(
    config: Config,
    placement: Placement,
    local_facts: dict,
    local_results: list,
    budget: Budget,
    join_grace_s: Optional[float] = None,
    observer: Any = None,
    waits: Optional[Waits] = None,
) -> ClusterOutcome:
    """Form the world (bounded), exchange facts as JSON, probe the mesh, run cross-node checks and rules.

    local_results are this node's node-local CheckResults (node=node_rank). Returns the aggregated outcome; every
    node of a formed world returns the same nodes/checks/recommendations. Never raises for network trouble: it
    becomes a failed rendezvous.* check. Call `outcome.agree_exit_code(code)` once the report is built. `waits`:
    where each wait for another node is said while it lasts (rendezvous/waits.py); the caller closes it.
    """
    guard = Guard(token=config.world.token, limits=Limits.for_nodes(placement.nnodes))
    ctx = _Ctx(config, placement, local_facts, list(local_results), _uuid.uuid4().hex[:16], budget, budget.now(),
               guard, budget.join_grace_s if join_grace_s is None else join_grace_s, observer,
               waits=waits or Waits(None, budget))
    if not placement.master_addr or not placement.master_port:
        return _alone(ctx, [skipped("rendezvous.world", "single node: no world to form")])
    ctx.level = _trust_level(config, placement)
    if config.world.token_warning:
        log.warning("%s", config.world.token_warning)
    try:
        st, decider, problem = _connect(ctx)
        if problem is not None:
            out = _alone(ctx, [problem])
        else:
            try:
                with spaced_collector(placement.nnodes, decider):
                    out = _after_connect(ctx, st, decider)
            except StoreLost as e:
                who = "this node hosts it" if decider else "node 0 hosts it"
                out = _alone(ctx, [failed("rendezvous.world", f"lost the rendezvous store ({who}): {e}",
                                          fix="Look at node 0's report and log: it exited or crashed before the "
                                              "others finished.")])
    finally:
        if ctx.joining is not None:
            ctx.joining.said.end()
    for r in guard.rejected:
        log.warning("ignored a store record: %s", r)
    out.rejected = list(guard.rejected)
    session = ctx.session or T.Session(T.Trust(ctx.level))
    out.trust = session.trust.to_json(guard.rejected)
    if config.world.token_warning:
        out.trust["warning"] = config.world.token_warning
    if out._store is None or not out.formed:
        session.close()  # no agreement follows: node 0's answerer and key file end here
    else:
        out._session = session
    out._waits = ctx.waits
    return out


def _await_readers(st: JsonStore, cap: int, b: Budget) -> None:
    """Node 0, a world that did not form: keep the store up (bounded) until every process that connected to it, the
    nodes' other local ranks too, has read why. Only those that connected are waited for: a rank that could not reach
    the master (a wrong MASTER_ADDR) never acknowledges. Under srun/mpirun node 0's own rank 1 read "lost the
    rendezvous store" when only the nodes' leaders were waited for."""
    end = b.deadline(b.final_agreement_s)
    acked = 0
    while True:
        want = st.count(K.READERS, cap) - 1  # not node 0 itself
        if want <= acked or not agree.await_acks(st, K.VERDICT, want, end, b):
            return
        acked = want


def _master_elsewhere(ctx: _Ctx, verdict: dict) -> Optional[dict]:
    """Node 0 whose world nobody joined while MASTER_ADDR is not one of its addresses: one bounded connect to
    MASTER_ADDR:MASTER_PORT. An answer means another node rank 0 hosts the rendezvous there, which the others
    joined: this node is its duplicate (tie_to_master says so rather than blame ranks that may well have started)."""
    m = master_result(ctx.results)
    ev = (m.evidence or {}) if m is not None else {}
    if verdict.get("ok") or ev.get("mode") != "bind" or ev.get("local") is not False:
        return None
    if len(verdict.get("joined") or []) > 1:
        return None
    p, b = ctx.placement, ctx.budget
    return probe.probe_master(p.master_addr, p.master_port, b.deadline(b.connect_attempt_s), budget=b).to_json()


def _after_connect(ctx: _Ctx, st: JsonStore, decider: bool) -> ClusterOutcome:
    placement, b = ctx.placement, ctx.budget
    leader = placement.node_leader
    st.add(K.READERS, 1)  # before anything is read: node 0 keeps a failed world's store up for every reader
    if decider:  # before its own join record: every record after it may name node 0's own values
        ctx.ref = joinref.Reference.of(ctx.facts, ctx.results)
        st.set(K.REF, ctx.ref.record)
    my_join = 0
    if leader:
        ref = ctx.ref.record if ctx.ref is not None else _reference(ctx, st)
        my_join = Journal(st, K.JOIN, ctx.cap).append(_join(ctx, ref))
    joins: dict = {}
    journal = None
    if decider:
        verdict, joins, journal, rival = _host_decides(ctx, st)
        if not verdict.get("ok"):
            # Keep the store up until everyone who joined has read the verdict (bounded): a node must learn why.
            with ctx.waits.wait("readers", b.deadline(b.final_agreement_s), b.work_notice_s):
                _await_readers(st, ctx.cap * MAX_READERS, b)
        if rival is not None:
            return _alone(ctx, [second_master.duplicate_check(rival, hostname_of(ctx.facts), placement.master_addr,
                                                               placement.master_port)])
    else:
        # Node 0 was up when we connected, so it decides within its join bound (T) from now, plus the fixed grace.
        end = b.deadline(b.verdict_wait_s)
        with ctx.waits.wait("verdict", end, b.verdict_notice_s, addr=placement.master_addr,
                            port=placement.master_port):
            verdict = T.wait_believed(st, K.VERDICT, end, b, _verdict_record)
        if not isinstance(verdict, dict):
            return _alone(ctx, [failed("rendezvous.world", "node 0 hosts the rendezvous but never published who "
                                       "joined (it may have crashed or been stopped)",
                                       evidence={"rejected": list(ctx.guard.rejected)},
                                       fix="Look at node 0's report and log.")])
        if not verdict.get("ok"):
            # Only a world that did not form keeps its store up until every reader acknowledged why
            # (_await_readers); a formed world's node 0 waits for no verdict ack, and the two requests of one cost
            # every member a round trip each through node 0's front (16,384 of them at a time in bench_scale).
            agree.acknowledge(st, K.VERDICT)
    elapsed = float(verdict.get("elapsed_s") or b.since(ctx.start))
    elsewhere = _master_elsewhere(ctx, verdict) if decider else None
    wcheck = tie_to_master(world_check(verdict, elapsed, ctx.timeout_s), ctx.results if decider else [], elsewhere,
                           hostname_of(ctx.facts))
    if decider:
        me_in = any(m["uuid"] == ctx.node_id for m in verdict.get("members", [])) or not leader
    else:  # an ok verdict admits every join node 0 read; a later join claimed a rank already taken
        me_in = not leader or my_join <= int(verdict.get("last_join") or 0)
    if not verdict.get("ok") or not me_in:
        if verdict.get("ok") and not me_in:
            wcheck = failed("rendezvous.world", f"node rank {placement.node_rank} was already taken when this node "
                            "joined; the world formed without it", evidence={"verdict": verdict},
                            fix="give every node a distinct --node-rank (0..N-1)")
        out = _alone(ctx, [wcheck], verdict.get("nnodes"))
        out.heard_node_0 = True  # node 0 decided: its report names who joined and why the world did not form
        return out
    n = min(int(verdict.get("nnodes") or len(verdict.get("members") or [])), ctx.cap)
    # --shared-dir: every node leader proves the directories are one filesystem (preflight/shared_dirs.py)
    shared = shared_dirs.exchange(st.scoped(K.SHARED), placement.node_rank, n, ctx.config.storage.dirs,
                                  b.shared_dir_s, b) if leader and ctx.config.storage.dirs else None
    mesh = _mesh_start(ctx, st, n, leader, decider)
    try:
        if decider:
            return _decide_result(ctx, st, verdict, joins, wcheck, mesh, shared, journal)
        with ctx.waits.wait("result", b.result_deadline(mesh.end), b.work_notice_s):
            result = st.wait_get(K.RESULT, b.result_deadline(mesh.end), b, _result_record)
    finally:
        if mesh.listener is not None:
            mesh.listener.close()
    if result is None:
        return _alone(ctx, [wcheck, failed("rendezvous.world", "node 0 never published the cross-node verdict "
                                           "(it may have crashed or been stopped)",
                                           evidence={"rejected": list(ctx.guard.rejected)},
                                           fix="Look at node 0's report and log.")], n)
    cross, local_groups, recs, _mesh_info = wire.read_result(result)
    own = list(ctx.results)
    if leader and not reachability.sampled(n) and len(mesh.local_peers) == n - 1 > 0:
        # This node's own probe reached every other node on an address local to itself: the whole world is on
        # this host (its own measurement, not node 0's word), so its own checks judge as node 0 judged them.
        own = rejudge_one_host(own, ctx.facts, placement.node_rank)
    return ClusterOutcome(
        world=_world_info(ctx.config, placement, n),
        nodes=[NodeInfo(placement.node_rank, hostname_of(ctx.facts), ctx.facts)] if leader else [],
        checks=own + (cross or [wcheck]) + local_groups,  # cross[0] is node 0's rendezvous.world
        recommendations=recs,
        formed=True,
        verdict=verdict,
        _store=st,
        _is_host=False,
        _outlast_host=placement.worker_mode and not placement.agent_store,
        _endpoint=(placement.master_addr, placement.master_port),
        _members=_expected_processes(placement, n),
        _budget=b,
    )


def _decide_result(ctx: _Ctx, st: JsonStore, verdict: dict, joins: dict, wcheck: CheckResult,
                   mesh: _Mesh, shared: Optional[dict] = None, journal: Optional[Journal] = None) -> ClusterOutcome:
    """Node 0: every node's facts and rows -> cross-node checks and rules -> `world/result`; the full outcome.
    A decision step that fails becomes a failed check in the report (and in what the others read), never a node 0
    without a report. Join records that arrived after the verdict (a node claiming a rank already taken: a second
    node rank 0 telling this one, a late duplicate) are read last, so rendezvous.world names them."""
    with ctx.waits.wait("rows", mesh.end, ctx.budget.work_notice_s, nodes=mesh.n, done=0) as said:
        matrix, attempts, load, groups = _mesh_collect(st, mesh, ctx.budget, ctx.observer, said)
    members = {m["node_rank"]: joins.get(_index(m.get("key"))) or {} for m in verdict["members"]}
    nodes = [(r, j.get("hostname") or "?", j.get("facts") or {}) for r, j in sorted(members.items())]
    local: list = []
    for _, j in sorted(members.items()):
        local.extend(joinref.checks_of(j))
    hosts = {r: h for r, h, _ in nodes}
    if reachability.one_host([r for r, _, _ in nodes], groups):
        # Every node is on this host: the checks that assumed other hosts must reach each node judge again.
        for r, _, f in nodes:
            local = rejudge_one_host(local, f, r)
    try:
        cross = [mesh_note(c, matrix, len(nodes), hosts)
                 for c in run_cross_checks(CrossInput(nodes, mesh=matrix, attempts=attempts, shared=shared,
                                                      load=load, same_host=groups))]
        recs = recommendations(nodes, matrix, groups)
    except Exception as exc:  # noqa: BLE001 - the report must still be written, naming what failed
        log.exception("the cross-node decision failed")
        cross, recs = [failed("rendezvous.world", f"node 0 could not decide the cross-node checks: "
                              f"{type(exc).__name__}: {exc}", fix="This is a bug: see node 0's log.")], []
    if journal is not None:
        wcheck = _late_joins(ctx, journal, verdict, joins, wcheck)
    mesh_info = {"nodes": mesh.n, "sampled": reachability.sampled(mesh.n),
                 "pairs_tested": max((e.get("pairs_tested") or 0 for e in matrix.values()), default=0)}
    agree.publish(st, K.RESULT, wire.build_result([wcheck, *cross], local, recs, hosts, mesh_info))
    return ClusterOutcome(
        world=_world_info(ctx.config, ctx.placement, len(members)),
        nodes=[NodeInfo(r, h, f) for r, h, f in nodes],
        checks=local + [wcheck] + cross,
        recommendations=recs,
        formed=True,
        verdict=verdict,
        _store=st,
        _is_host=True,
        _members=_answering(ctx.placement, len(members), [r for r in members if r not in attempts]),
        _budget=ctx.budget,
        _outlast_host=ctx.placement.worker_mode and not ctx.placement.agent_store and ctx.placement.hosts_store,
        _endpoint=(store_host(ctx.placement), ctx.placement.master_port),
    )


def _late_joins(ctx: _Ctx, journal: Journal, verdict: dict, joins: dict, wcheck: CheckResult) -> CheckResult:
    """rendezvous.world again, once join records came after the world formed (node 0's last read before its
    result): the world was complete, so each one claims a rank already taken, or another --nnodes."""
    got = journal.read_since()
    if journal.pending:  # a writer between its counter and its record (a c10d SET is not answered): look once more
        journal.wait_next(ctx.budget.deadline(ctx.budget.journal_pending_s), ctx.budget)
        got += journal.read_since()
    late = []
    for i, v in got:
        v["_key"], v["_index"] = K.JOIN_RECORD.format(i), i
        late.append(v)
    if not late:
        return wcheck
    v = decide([joins[i] for i in sorted(joins)] + late, ctx.placement.nnodes, final=True)
    if v["ok"]:
        return wcheck
    c = world_check(v, float(verdict.get("elapsed_s") or 0.0), ctx.timeout_s)
    who = ", ".join(f"{j.get('hostname')} (pid {j.get('pid')}, node rank {j.get('node_rank')})" for j in late)
    return failed(c.id, f"{c.summary}; {who} joined after the world had formed", detail=c.detail,
                  evidence=dict(c.evidence or {}, late=[{k: j.get(k) for k in ("node_rank", "hostname", "pid")}
                                                        for j in late]), fix=c.fix)


def _index(key: object) -> int:
    try:
        return int(str(key).rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return -1


def _expected_processes(placement: Placement, nmembers: int) -> int:
    """How many processes read world/final: node leaders in launcher mode, every rank in worker mode."""
    return placement.world_size if placement.worker_mode else nmembers


def _answering(placement: Placement, nmembers: int, silent: list) -> int:
    """The processes node 0 waits for in the final agreement: every one expected, less those of a member that
    joined and then went silent (its mesh row never came, after node 0 waited the mesh's bound for it): a silent
    member costs node 0 one wait, not a second one of final_agreement_s for an acknowledgement that cannot come."""
    expected = _expected_processes(placement, nmembers)
    per_node = expected // nmembers if nmembers and expected % nmembers == 0 else 0
    return max(1, expected - per_node * len(silent))
