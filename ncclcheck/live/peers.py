"""The one guard of every request that makes a responder connect somewhere or send something large (issue 55).

`reach` connects to other ranks' responders, `rate` downloads a blob from them, `blob` sends one: a responder that
connected wherever a store record said, for whoever asked, was a port scanner and a request forger for a stranger
(`rate` of ranks 100-103 written at loopback ports read "refused", "timeout", or an SSH banner's first four bytes as
"a frame of 1,397,966,893 bytes"), and one that built a 4 MiB blob for every stranger's request sent him 43,000
times the bytes he sent. So, for every such kind (wire.GUARDED), here and nowhere else:

- targets: only ranks of this job (below its world size) whose store records name this job, run and attempt
  (`resolve`); where the records are signed with a key every rank holds (`token`: signed_records) a connect is
  reported as it went; otherwise (no key, or `munge`, whose records nobody signs: any process that reaches the master
  port may have written them) never loopback or another special address unless this responder listens there, and of
  each target only whether rank r's own responder answered its hello there ("unreached" otherwise, whatever the
  port did), each target's answer at the end of its bound (`settle`), so its writer learns nothing about any port;
- askers of a blob: only ranks of this job, from the address the store holds for the rank they name (`asker_problem`,
  remembered a while); the blob itself is small (pace.MAX_BLOB) and built once (Responder.blob);
- cost: each such request's CPU (and the kernel's, per MiB received) is charged to the responder's Spend, the
  allowance its replies are built within (live/loop.py); past it (by more than Budget.live_guarded_credit_s, so
  that the reply one watcher's look just built does not keep its reach out) the request is refused "busy" before
  any work.
"""

from __future__ import annotations

import collections
import ipaddress
import time
from typing import Any, NamedTuple, Optional

from . import wire

SIGNED_LEVELS = ("token",)  # levels whose store records are signed with a key every rank holds (munge's are not)
ASKERS_KEPT = 64  # (rank, address) answers a responder remembers for blob requests


class Targets(NamedTuple):
    """What `resolve` found: {rank: its checked record} to connect to, {str(rank): why not}, whether the records
    were signed, and why the store could not be read ("" when it was)."""

    records: dict
    unknown: dict
    signed: bool
    error: str


def signed_records(level: str) -> bool:
    return level in SIGNED_LEVELS


def resolve(me: Any, ranks: list, end: float) -> Targets:
    """The records of `ranks` that responder `me` may connect to for a request, read from the job's store within
    `end` (never an address the request names): ranks of this job whose records are this job's, run's and attempt's,
    and, where they are unsigned, at an address a peer rank may listen on (routable_peer). Itself left out."""
    from ..rendezvous.store import StoreLost, open_store

    signed = signed_records(me.level)
    unknown: dict = {}
    inside = []
    for r in ranks:
        if r >= me.world_size:
            unknown[str(r)] = f"not a rank of this job (world size {me.world_size})"
        elif r != me.rank:
            inside.append(r)
    if not inside:
        return Targets({}, unknown, signed, "")
    try:
        st = open_store(me.master[0], me.master[1], False, me.budget.left(end), guard=me.guard)
        rows = st.read_present([wire.rank_key(r) for r in inside])
    except (ConnectionError, StoreLost) as exc:
        return Targets({}, unknown, signed, f"the job's store: {str(exc)[:200]}")
    records = {}
    for r, (there, v) in zip(inside, rows):
        why = "not registered" if not there else "refused" if v is None else record_problem(me, r, v, signed)
        if why:
            unknown[str(r)] = why
        else:
            records[r] = v
    return Targets(records, unknown, signed, "")


def record_problem(me: Any, r: int, v: Any, signed: bool) -> Optional[str]:
    """Why the store's record of rank r is not one responder `me` may connect to (None when it is)."""
    bad = wire.record_problem(r, v) or wire.foreign(v, me.job, me.run or "")
    if bad:
        return bad
    if (v["world_size"], v["attempt"]) != (me.world_size, me.attempt):
        return f"its record is another attempt's ({v['world_size']} ranks, attempt {v['attempt']})"
    if not signed and not routable_peer(v["addr"], me.addr):
        return "its address is not one another rank of this job may have (loopback, unspecified, multicast, " \
               "link-local or another family): not tried"
    return None


def routable_peer(addr: str, mine: str) -> bool:
    """Is addr one a peer rank's responder may listen on, seen from a responder listening on `mine`? Never the
    unspecified, multicast, broadcast or link-local addresses, nor loopback unless this responder listens on
    loopback itself (a job on one host): an unsigned record naming them is a stranger's."""
    a, m = ipaddress.ip_address(addr), ipaddress.ip_address(mine)
    if a.version != m.version or a.is_unspecified or a.is_multicast or a.is_link_local \
            or (a.version == 4 and str(a) == "255.255.255.255"):
        return False
    return m.is_loopback or not a.is_loopback


UNREACHED = {"ok": False, "kind": "unreached"}  # all an unsigned record's target is said to have done, if not answer


def settle(me: Any, end: float) -> None:
    """Wait out the bound `end` of a target read from an unsigned record: the answer takes the same time whatever
    the address did (refused at once, silent, a service's banner)."""
    me.wait_until(end)


class Askers:
    """A responder's answers to "may this connection have a blob?": the rank it names must be of this job, and the
    connection must come from the address the store holds for that rank (a record of this job, run and attempt;
    signed where the level signs records). Remembered for Budget.live_asker_s, at most ASKERS_KEPT of them, so a
    probe's repeated downloads cost one store read and a stranger's flood costs at most one read per new name, each
    within the responder's Spend."""

    def __init__(self) -> None:
        self._seen: collections.OrderedDict = collections.OrderedDict()  # (rank, addr) -> (at, why or "")

    def problem(self, me: Any, rank: Any, addr: str) -> Optional[str]:
        if type(rank) is not int or not 0 <= rank < me.world_size:
            return f"a blob is sent only to a rank of this job (world size {me.world_size}) that names itself"
        key = (rank, addr)
        hit = self._seen.get(key)
        if hit is not None and me.budget.within(hit[0], me.budget.live_asker_s):
            return hit[1] or None
        found = resolve_one(me, rank)
        why = found if isinstance(found, str) else (
            "" if found["addr"] == addr else f"it does not come from rank {rank}'s address")
        self._seen[key] = (time.monotonic(), why)
        self._seen.move_to_end(key)
        while len(self._seen) > ASKERS_KEPT:
            self._seen.popitem(last=False)
        return why or None


def resolve_one(me: Any, rank: int) -> Any:
    """Rank `rank`'s checked record (a dict) or why there is none (a str), read from the job's store (itself: its
    own record)."""
    if rank == me.rank:
        return me.record()
    found = resolve(me, [rank], me.budget.deadline(me.budget.live_reach_s))
    if found.error:
        return found.error
    return found.records.get(rank) or found.unknown.get(str(rank), "not registered")
