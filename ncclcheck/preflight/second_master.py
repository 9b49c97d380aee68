"""A second node rank 0: how it finds the real one and tells it, so no node of the job passes (pf-duplicate-rank-0).

Two processes started with --node-rank 0 each host a rendezvous; the other nodes join the one at MASTER_ADDR. The
real node 0 never heard of the other, so it formed its world and passed while the second one failed alone. Now:
- a node 0 that is not at MASTER_ADDR (rendezvous.master_reachable: MASTER_ADDR is not an address of this host)
  looks there once at its start and again every Budget.second_master_poll_s while nobody has joined it; a node 0 on
  the real one's host finds MASTER_PORT held by ncclcheck's store front;
- when an ncclcheck store answers there whose host record is another process's (this node's own, reached through a
  service address or NAT, is not a rival), this node joins it as any member does, through the same trust handshake,
  so its record is authenticated as any member's is, and appends its own join record, claiming node rank 0;
- the real node 0 reads join records until it publishes its cross-node result (preflight/cluster.py): the existing
  rendezvous.world names "node rank 0 claimed by 2 nodes: h1 (pid ...), h2 (pid ...)", and every member reads it.
Nothing new is written or read: one more join record in the join journal (counter capped, record checked), through
the member path. Every step is bounded: one connect of second_master_probe_s, then second_master_tell_s in all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config import format_endpoint
from ..model import CheckResult, failed
from ..rendezvous import trust as T
from ..rendezvous.budget import Budget
from ..rendezvous.journal import Journal
from ..rendezvous.store import Guard, StoreLost, open_store
from . import keys as K
from . import probe

log = logging.getLogger(__name__)

NOTHING, SELF, UNKNOWN, RIVAL = "nothing", "self", "unknown", "rival"


@dataclass
class Look:
    """What answers at MASTER_ADDR:MASTER_PORT: nothing, this node itself, something that is not an ncclcheck store
    of this job (unknown), or another node rank 0 (rival: its host record, and whether this node told it)."""

    status: str
    host: dict = field(default_factory=dict)  # the rival's record: hostname, pid, uuid
    told: bool = False
    error: str = ""

    def to_json(self) -> dict:
        return {"status": self.status, "host": self.host, "told": self.told, "error": self.error}


def _host_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or not isinstance(v.get("uuid"), str):
        return "not the store host's record"
    return None


@dataclass
class Member:
    """How this node would join a store as a member: the same level, key and limits as its own world."""

    prefix: str
    node_id: str
    level: str
    cap: int
    readers_cap: int
    make_guard: Callable[[], Guard]
    shared_dir: Optional[str] = None
    token_source: str = ""


def look(addr: str, port: int, me: Member, join: Callable[[], dict], b: Budget, probe_first: bool = True) -> Look:
    """One bounded look at addr:port; a rival node rank 0 found there is told (this node's join record)."""
    if probe_first and not probe.probe_master(addr, port, b.deadline(b.second_master_probe_s),
                                              connect_timeout_s=b.second_master_probe_s, budget=b).ok:
        return Look(NOTHING)
    end = b.deadline(b.second_master_tell_s)
    try:
        st = open_store(addr, port, False, b.second_master_tell_s, me.prefix, me.make_guard())
    except ConnectionError as exc:
        return Look(UNKNOWN, error=str(exc))
    found = Look(UNKNOWN, error="no ncclcheck node 0's record there")
    try:
        host = st.wait_get(K.HOST, end, b, _host_record)
        if host is None:
            return found
        if host["uuid"] == me.node_id:
            return Look(SELF, host)
        found = Look(RIVAL, {k: host.get(k) for k in ("hostname", "pid", "uuid")})
        T.accept(st, me.level, port, me.readers_cap, end, b, me.shared_dir, me.token_source)
        i = Journal(st, K.JOIN, me.cap).append(join())
        # c10d answers no SET: one answered request after it, on the same connection, says the record is there
        found.told = st.has(K.JOIN_RECORD.format(i))
        if not found.told:
            found.error = "its store did not keep this node's join record"
    except (StoreLost, T.TrustError) as exc:
        log.warning("a second node rank 0 could not tell the real one at %s: %s", format_endpoint(addr, port), exc)
        found.error = str(exc)
    return found


def duplicate_check(found: Look, me: str, addr: str, port: int) -> CheckResult:
    """rendezvous.world on the second node rank 0: who the real one is, and whether it was told."""
    h = found.host
    who = f"{h.get('hostname') or '?'} (pid {h.get('pid')})"
    told = ("; this node told it, so its world fails naming this node too" if found.told else
            f"; this node could not tell it ({found.error}), so look at that node's report too")
    return failed("rendezvous.world", f"this node ({me}) is a duplicate of node rank 0: node rank 0 at "
                  f"{format_endpoint(addr, port)} is {who}, which hosts the rendezvous the other nodes join{told}",
                  evidence={"duplicate_of_rank0": True, "master": found.to_json()},
                  fix=f"Give this node ({me}) its own --node-rank (0..N-1; only node 0 keeps 0).")


class Watch:
    """A node 0 not at MASTER_ADDR: looks there now and every second_master_poll_s, until it finds something (a
    rival, itself, or a store that is not one) or another node joined it (then MASTER_ADDR reaches this node)."""

    def __init__(self, addr: str, port: int, me: Member, join: Callable[[], dict], b: Budget) -> None:
        self.addr, self.port, self.me, self.join, self.b = addr, port, me, join, b
        self.next = b.now()
        self.done = False  # found something: a rival, this node itself, or a store that is not one

    def due(self) -> bool:
        return not self.done and self.b.passed(self.next)

    def look(self) -> Optional[Look]:
        """The rival, once found; None otherwise (and the next look's time is set)."""
        got = look(self.addr, self.port, self.me, self.join, self.b)
        self.next = self.b.deadline(self.b.second_master_poll_s)
        self.done = got.status != NOTHING  # itself, or not a store of this job: looking again finds the same
        if got.status == RIVAL:
            return got
        if self.done:
            log.info("MASTER_ADDR %s answers: %s %s", format_endpoint(self.addr, self.port), got.status, got.error)
        return None
