"""torch's flight-recorder dumps read as data, then compared across ranks per process group by sequence id.

A dump (pickle or JSON, NCCL or gloo) holds each process group's last N collectives of one rank: collective_seq_id,
profiling_name ("nccl:all_reduce"), input/output sizes and dtypes, state, retired, and per group the last enqueued /
completed sequence ids (pg_status). The ring buffer keeps only the last N entries, so ranks are compared by sequence
id, never by position, and only where their windows overlap (a wrapped buffer is normal, not an error).

Gloo marks a collective that failed (timed out, peer closed) as retired like one that succeeded, so completion is not
trusted to find the culprit: what each rank *enqueued* is. A rank that never enqueued the collective its peers are in
did not enter it; ranks that enqueued different ops, sizes or dtypes at one sequence id mismatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from . import callseries
from .bound import clip
from .fields import MAX_ID
from .fields import dtypes as _dtypes
from .fields import op as _op
from .fields import sizes as _sizes
from .group_ranks import MAX_WORLD, ranks_of
from .stacks import is_library

MAX_ENTRIES = 100_000  # per dump; torch's default buffer is 2,000
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")
DEFAULT_PG = "0"


class Coll:
    """One collective as one rank enqueued it. Sizes and dtypes stay as the dump had them (compared with ==, which
    is C speed) and are checked only when shown or when ranks differ: 1,024 ranks x 2,000 entries is 2M of them."""

    __slots__ = ("seq", "op", "in_sizes", "in_dtypes", "record_id", "time_ns", "timeout_ms", "done")

    def __init__(self, seq: int, op: str, in_sizes: Any, in_dtypes: Any, record_id: int, time_ns: Optional[int],
                 timeout_ms: Optional[int], done: bool) -> None:
        self.seq, self.op, self.in_sizes, self.in_dtypes = seq, op, in_sizes, in_dtypes
        self.record_id, self.time_ns, self.timeout_ms, self.done = record_id, time_ns, timeout_ms, done

    @classmethod
    def of(cls, seq: int, e: dict) -> Coll:
        """The entry as read: every field type-checked here, when it is looked at."""
        rid, tns, tmo = e.get("record_id"), e.get("time_created_ns"), e.get("timeout_ms")
        return cls(seq, _op(e.get("profiling_name"))[1], e.get("input_sizes"), e.get("input_dtypes"),
                   _int(rid, -1), _int(tns), _int(tmo), _done(e))

    def signature(self) -> tuple:
        return (self.op, _sizes(self.in_sizes), _dtypes(self.in_dtypes))

    def to_json(self) -> dict:
        return {"seq": self.seq, "op": self.op, "input_sizes": [list(s) for s in _sizes(self.in_sizes)],
                "input_dtypes": list(_dtypes(self.in_dtypes)), "done": self.done}


@dataclass
class GroupTrace:
    name: str
    desc: str = ""
    ranks: Optional[list] = None  # the group's global ranks when the dump says so (NCCL does; gloo often not)
    last_enqueued: int = -1
    last_completed: int = -1
    # last_completed was read from the dump (pg_status, or an entry marked completed), not the default: only then
    # does "enqueued past completed" say that the rank is still inside its last collective.
    completion_known: bool = False
    colls: dict = field(default_factory=dict)  # seq -> the raw entry (a dict); Coll.of() reads one when needed
    # seq -> every entry of a coalesced group, in order (its ops, then the closing "coalesced" entry): collectives
    # issued together share one collective_seq_id; colls keeps the last (the closing entry)
    multi: dict = field(default_factory=dict)
    p2p: list = field(default_factory=list)  # point-to-point entries (send, recv, a batch's ops), in record order
    first_seq_partial: bool = False  # the ring buffer wrapped: this rank's lowest seq may have lost its first ops
    # seq -> (time_created_ns, callseries.sig) of collectives a live reply sent as a call series, beside the entries
    # it kept whole (postmortem/callseries.py): call times only, read by postmortem/slow.py, never by the hang analysis
    calls: dict = field(default_factory=dict)

    @property
    def enqueued(self) -> int:
        return max([self.last_enqueued, *self.colls.keys()])

    def coll(self, seq: int) -> Optional[Coll]:
        e = self.colls.get(seq)
        return None if e is None else Coll.of(seq, e)

    def all(self) -> list:
        return [Coll.of(q, e) for q, e in self.colls.items()]

    @property
    def window(self) -> tuple:
        return (min(self.colls), max(self.colls)) if self.colls else (None, None)


@dataclass
class RankDump:
    rank: int
    source: str
    form: str  # pickle | json
    version: str
    backend: Optional[str]
    groups: dict  # name -> GroupTrace
    last: Optional[tuple] = None  # (group, seq) of the newest entry this rank recorded
    entries: int = 0
    timing: bool = False  # the job ran with TORCH_NCCL_ENABLE_TIMING=1: "scheduled" then means "not started on the GPU"
    unusable: dict = field(default_factory=dict)  # why -> entries of this dump that could not be used
    call: Optional[dict] = None  # live (watch): the c10d call its main thread blocks in (op, peer, group, size)


def rank_from_name(path: str) -> Optional[int]:
    """torch writes <prefix><rank> (TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank): the trailing
    number of the file name, the only place a dump names its rank."""
    m = _RANK_IN_NAME.search(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def is_dump(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("entries"), list) and "version" in doc


def _int(v: Any, default: Optional[int] = None) -> Optional[int]:
    return v if type(v) is int and -MAX_ID <= v <= MAX_ID else default


def _count(v: Any) -> Optional[int]:
    """A pg_status counter: an int in the pickle, a decimal string ("7", "-1") in torch's JSON dump."""
    if type(v) is str and 0 < len(v) <= 12 and v.lstrip("-").isdigit():
        v = int(v)
    return _int(v)


def _seqid(v: Any) -> Optional[int]:
    """A sequence id: an int, or the decimal string torch's own analyzer tests write ("3"); None for anything else."""
    if type(v) is int:
        return v if 0 <= v <= MAX_ID else None
    if type(v) is str and 0 < len(v) <= 19 and v.isdigit():
        n = int(v)
        return n if n <= MAX_ID else None
    return None


def _str(v: Any, limit: int = 200) -> str:
    return v[:limit] if isinstance(v, str) else ""


def _timed(e: dict) -> bool:
    """Does this entry show the start event torch records only with TORCH_NCCL_ENABLE_TIMING=1? Without it an NCCL
    entry goes from scheduled to completed and never says started (torch's FlightRecorder: the start event is null);
    gloo writes 0 for the discovered times."""
    t, d = e.get("time_discovered_started_ns"), e.get("duration_ms")
    return e.get("state") == "started" or (type(t) is int and t > 0) or (type(d) in (int, float) and d is not None)


def _done(e: dict) -> bool:
    return e.get("retired") is True or e.get("state") == "completed"


P2P_OPS = ("send", "recv")  # profiling names "nccl:send 0->1", "nccl:recv 1<-0" (group ranks)
_COUNTER_IN_OP_IDS = ("gloo", "c10d")  # their pg_status counts every op (op_id), not collectives (work->seq_)
MAX_P2P = 100_000  # point-to-point entries kept per dump


def _is_p2p(e: dict) -> bool:
    if e.get("is_p2p") is True:
        return True
    prof = e.get("profiling_name")
    return type(prof) is str and _op(prof)[1].split(" ", 1)[0] in P2P_OPS


def _unusable(counts: dict, why: str) -> None:
    counts[why] = counts.get(why, 0) + 1


def normalise(doc: dict, rank: int, source: str, form: str) -> RankDump:
    """One rank's dump as GroupTraces; every field type-checked (a dump may be hostile or from another version).
    Entries that cannot be used are counted by why (RankDump.unusable): a dump read and then silently dropped would
    read as "nothing wrong"."""
    groups: dict = {}
    last, last_id = None, -1
    entries = doc["entries"][:MAX_ENTRIES]
    backend = None
    names: dict = {}
    timing = False
    unusable: dict = {}
    first_rid = None
    for e in entries:
        if type(e) is not dict:
            _unusable(unusable, "an entry that is not a record")
            continue
        if first_rid is None:
            first_rid = e.get("record_id")
        pg = e.get("process_group")
        try:  # a pickle's (name, desc) tuple: read it once per dump
            name = names.get(pg) if type(pg) is tuple else None
        except TypeError:  # a tuple holding a list: not what torch writes, read it the slow way
            name, pg = None, list(pg)
        if name is None:
            name = _str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(_int(e.get("pg_id"), 0))
            if type(pg) is tuple and len(names) < 10_000:
                names[pg] = name
        p2p = e.get("is_p2p") is True or (e.get("is_p2p") is None and _is_p2p(e))
        seq = e.get("collective_seq_id")
        if type(seq) is not int or not 0 <= seq <= MAX_ID:
            seq = _seqid(seq)
            if seq is None and not p2p:
                _unusable(unusable, "no collective_seq_id, or one that is not a whole number")
                continue
        g = groups.get(name)
        if g is None:
            desc = _str(pg[1]) if isinstance(pg, (list, tuple)) and len(pg) > 1 else ""
            g = groups[name] = GroupTrace(name, desc)
        if backend is None:
            backend = _op(e.get("profiling_name"))[0] or None
        if p2p:  # its collective_seq_id is the group's last collective's: kept apart, paired by postmortem/p2p.py
            if len(g.p2p) < MAX_P2P:
                g.p2p.append(e)
            continue
        prev = g.colls.get(seq)
        if prev is not None:  # a coalesced group: every op of it shares the seq, the closing entry comes last
            group = g.multi.get(seq)
            if group is None:
                group = g.multi[seq] = [prev]
            group.append(e)
        g.colls[seq] = e
        if not timing and _timed(e):
            timing = True
        if seq > g.last_completed and _done(e):
            g.last_completed, g.completion_known = seq, True
        rid = e.get("record_id")
        if type(rid) is int and last_id <= rid <= MAX_ID:
            last, last_id = (name, seq), rid
    wrapped = type(first_rid) is int and first_rid > 0
    by_ops = backend in _COUNTER_IN_OP_IDS
    status = doc.get("pg_status")
    for key, st in (status.items() if isinstance(status, dict) else ()):
        if not isinstance(st, dict) or not isinstance(key, str):
            continue
        g = groups.get(key) or groups.setdefault(key, GroupTrace(key))
        enqueued, completed = _count(st.get("last_enqueued_collective")), _count(st.get("last_completed_collective"))
        if by_ops and g.colls:  # gloo counts point-to-point ops too: the counters are op ids, not sequence ids
            enqueued, completed = _op_to_seq(g, enqueued), _op_to_seq(g, completed)
        elif g.p2p and g.colls and _newest_is_p2p(g):
            # NCCL's counters hold the last work's own sequence number: a send's is its p2p_seq_id, not a
            # collective's; the entries say what this rank enqueued and completed
            enqueued = completed = None
        g.last_enqueued = max(g.last_enqueued, -1 if enqueued is None else enqueued)
        if completed is not None:
            g.last_completed, g.completion_known = max(g.last_completed, completed), True
        started = _count(st.get("last_started_collective"))
        if started is not None and started >= 0:
            timing = True
    for g in groups.values():
        g.first_seq_partial = wrapped
    config = doc.get("pg_config")
    for key, cfg in (config.items() if isinstance(config, dict) else ()):
        ranks = ranks_of(cfg)
        # gloo writes the default group's config under the empty name; NCCL under the group's name
        target = groups.get(key) or (groups.get(DEFAULT_PG) if key == "" else None)
        if target is not None and ranks:
            target.ranks = ranks
    if entries and not groups and not unusable:
        _unusable(unusable, "no entry names a process group")
    me = doc.get(LIVE_KEY)
    if isinstance(me, dict) and me.get("rank") == rank and "calls" in me:
        for key, calls in callseries.decode(me["calls"]).items():
            if key in groups:  # the newest entry of every group is kept whole: its group is known
                groups[key].calls = calls
    return RankDump(rank, source, form, _str(doc.get("version"), 20), backend, groups, last, len(entries),
                    timing and backend == "nccl", unusable, live_call(doc, rank))


def _newest_is_p2p(g: GroupTrace) -> bool:
    rid = g.p2p[-1].get("record_id")
    last = g.colls[max(g.colls)].get("record_id")
    return type(rid) is int and type(last) is int and rid > last


def _op_to_seq(g: GroupTrace, counter: Optional[int]) -> Optional[int]:
    """gloo's pg_status counter (an op id: sends and receives count too) as the collective sequence id of the newest
    collective at or before it; older than the window: one before it."""
    if counter is None or counter < 0:
        return counter
    best, lowest = None, None
    for seq, e in reversed(g.colls.items()):  # newest first: the counter is almost always the newest entry's
        op = e.get("op_id")
        if type(op) is not int:
            return counter  # no op ids: the counter is what it says
        if op <= counter:
            best = seq if best is None or seq > best else best
            break
        lowest = seq
    if best is not None:
        return best
    return (lowest - 1) if lowest is not None else counter


UNANSWERED_SCHEMA = "ncclcheck.live-unanswered/1"  # watch --dump's list of the ranks that did not answer
MAX_UNANSWERED = 100_000
ENDS_KEY = "ends"  # ... and, rank -> the end record a rank left in the job's store (postmortem/stacks.from_record)
LIVE_KEY = "ncclcheck_live"  # what `ncclcheck watch` adds to a rank's flight recorder: the rank's own word


def where_of(stacks: Any) -> Optional[str]:
    """Where a live rank's main thread was, as a person reads it: its innermost frame in the job's own code
    (stacks.is_library: the standard library's, installed packages', torch's and ncclcheck's frames skipped),
    `file:line in func: code`, and the library frame it waits in when that is deeper."""
    main = next((t for t in stacks if isinstance(t, dict) and t.get("main") is True), None) \
        if isinstance(stacks, list) else None
    frames = main.get("frames") if main else None
    if not isinstance(frames, list):
        return None
    rows = [f for f in frames[-64:] if isinstance(f, dict) and isinstance(f.get("file"), str)
            and type(f.get("line")) is int]
    if not rows:
        return None
    own = [f for f in rows if not is_library(f["file"])]
    f, inner = (own or rows)[-1], rows[-1]
    code = _str(f.get("code"), 120)
    deeper = f" (inside {inner['file'].rsplit('/', 1)[-1]}:{inner['line']} in {_str(inner.get('func'), 80)})" \
        if inner is not f else ""
    return clip(f"{f['file'].rsplit('/', 1)[-1]}:{f['line']} in {_str(f.get('func'), 80)}"
                + (f": {code}" if code else "") + deeper, 320)


def live_self(doc: dict, rank: int) -> Optional[dict]:
    """{"who": {host, local_rank}, "where"} from the LIVE_KEY section of a dump, when it is one for this rank."""
    me = doc.get(LIVE_KEY)
    if not isinstance(me, dict) or me.get("rank") != rank or not isinstance(me.get("host"), str):
        return None
    local = me.get("local_rank")
    return {"who": {"host": clip(me["host"], 200), "local_rank": local if type(local) is int and 0 <= local < MAX_WORLD
                    else None}, "where": where_of(me.get("stacks"))}


CALL_OPS = frozenset(("send", "recv", "isend", "irecv", "batch_isend_irecv", "all_reduce", "broadcast", "reduce",
                      "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
                      "all_to_all_single", "gather", "scatter", "barrier", "monitored_barrier", "all_gather_object",
                      "broadcast_object_list", "send_object_list", "recv_object_list"))


def live_call(doc: Any, rank: int) -> Optional[dict]:
    """The c10d call a live rank's main thread blocks in (the responder reads it from the frame: live/calls.py):
    {"op", "peer", "size", "dtype", "group": {"name", "desc", "ranks"}}, each field checked; None when absent."""
    me = doc.get(LIVE_KEY) if isinstance(doc, dict) else None
    stacks = me.get("stacks") if isinstance(me, dict) and me.get("rank") == rank else None
    main = next((t for t in stacks if isinstance(t, dict) and t.get("main") is True), None) \
        if isinstance(stacks, list) else None
    call = main.get("call") if isinstance(main, dict) else None
    if not isinstance(call, dict) or call.get("op") not in CALL_OPS:
        return None
    peer, size = call.get("peer"), call.get("size")
    grp = call.get("group") if isinstance(call.get("group"), dict) else {}
    ranks = grp.get("ranks")
    return {"op": call["op"], "peer": peer if type(peer) is int and 0 <= peer < MAX_WORLD else None,
            "size": [n for n in size[:8] if type(n) is int and 0 <= n <= MAX_ID] if isinstance(size, list) else None,
            "dtype": _str(call.get("dtype"), 20) or None,
            "group": {"name": _str(grp.get("name"), 64), "desc": _str(grp.get("desc"), 64),
                      "ranks": [r for r in ranks[:MAX_LISTED] if type(r) is int and 0 <= r < MAX_WORLD]
                      if isinstance(ranks, list) else None}}


MAX_LISTED = 4096  # a live call's group ranks kept


# ---------------------------------------------------------------------------------------------------------------
# comparison across ranks


def _majority(groups: dict) -> tuple:
    """The signature most ranks share (ties: the one with the lowest rank)."""
    return max(groups, key=lambda sig: (len(groups[sig]), -min(groups[sig])))


def _mismatch(dumps: dict, name: str, ranks: list, group_size: Optional[int] = None) -> Optional[dict]:
    """The first sequence id at which the ranks' enqueued collectives differ as torch's matcher sees them (the op,
    input and output sizes and dtypes; every op of a coalesced group, in order), or at which the one collective they
    all called breaks its own rules (postmortem/match.py)."""
    from . import match

    groups = [dumps[r].groups[name] for r in ranks]
    first: dict = {}  # seq -> the first rank's entry; then every other rank's entry is compared with it
    differ: set = set()
    for g in groups:  # rank-major, inlined: 1,024 ranks x 2,000 entries is 2M comparisons
        for seq, e in g.colls.items():
            f = first.get(seq)
            if f is None:
                first[seq] = e
            elif f is not e and seq not in differ:
                try:
                    if (f.get("profiling_name") != e.get("profiling_name") or
                            f.get("input_sizes") != e.get("input_sizes") or
                            f.get("input_dtypes") != e.get("input_dtypes") or
                            f.get("output_sizes") != e.get("output_sizes") or
                            f.get("output_dtypes") != e.get("output_dtypes")):
                        differ.add(seq)
                except RecursionError:  # a hostile, deeply nested value: not the same as anything
                    differ.add(seq)
    # a rank whose ring buffer wrapped may hold only the tail of its oldest coalesced group: not compared there
    partial = {(r, min(g.colls)) for r, g in zip(ranks, groups) if g.first_seq_partial and g.colls}

    def sig_of(r: int, g: GroupTrace, seq: int) -> Optional[tuple]:
        if seq not in g.colls or (r, seq) in partial:
            return None
        return match.group_sig(g.multi.get(seq) or [g.colls[seq]])

    for seq in {q for g in groups for q in g.multi} - differ:
        if len({s for r, g in zip(ranks, groups) if (s := sig_of(r, g, seq)) is not None}) > 1:
            differ.add(seq)
    own: dict = {}  # seq -> (position, kind, side, why): what every rank called breaks its collective's own rules
    for seq in first:
        if seq not in differ:
            holder = next(((r, g) for r, g in zip(ranks, groups) if seq in g.colls and (r, seq) not in partial), None)
            found = match.own_in_group(sig_of(holder[0], holder[1], seq), group_size) if holder else None
            if found:
                own[seq] = found
    for seq in sorted(differ | set(own)):
        if seq in own:
            pos, kind, side, why = own[seq]
            sig = sig_of(*next((r, g) for r, g in zip(ranks, groups) if sig_of(r, g, seq) is not None), seq)
            have = sorted(r for r, g in zip(ranks, groups) if seq in g.colls)
            return {"seq": seq, "kind": kind, "side": side, "position": pos, "group_len": len(sig), "why": why,
                    "variants": [_variant(have, sig, pos)], "culprits": []}
        by_sig: dict = {}
        for r, g in zip(ranks, groups):
            sig = sig_of(r, g, seq)
            if sig is not None:
                by_sig.setdefault(sig, []).append(r)
        if len(by_sig) < 2:
            continue
        major = _majority(by_sig)
        diffs = [(d, s) for s in by_sig if s != major and (d := match.first_difference(major, s))]
        if not diffs:  # they differ only where torch's matcher does not look (all_to_all's sizes, dtype order)
            continue
        (pos, kind, side), _ = min(diffs, key=lambda t: t[0][0])
        others = [s for _, s in diffs]
        why = ""
        if kind == "count":
            kind, why = "size", "a coalesced group of " + " vs ".join(
                f"{len(s)} op{'s' if len(s) != 1 else ''}" for s in [major, *others])
        else:
            bad = next((found for s in [*others, major] if pos < len(s) and (found := match.own(s[pos], group_size))),
                       None)
            why = bad[2] if bad else ""
        # the odd ones out are the culprits only when the majority is a real one (1 vs 1 names nobody)
        clear = len(by_sig[major]) > max(len(by_sig[s]) for s in others)
        return {"seq": seq, "kind": kind, "side": side, "position": pos, "group_len": len(major), "why": why,
                "variants": [_variant(sorted(by_sig[s]), s, pos) for s in [major, *others]],
                "culprits": sorted(r for s in others for r in by_sig[s]) if clear else []}
    return None


def _variant(ranks: list, sig: tuple, pos: int) -> dict:
    """What some ranks called at one sequence id: the op at `pos` (of a coalesced group: its ops listed)."""
    op = sig[min(pos, len(sig) - 1)] if sig else ("?", (), (), (), ())
    out = {"ranks": ranks, "op": op[0], "input_sizes": [list(x) for x in op[1]], "input_dtypes": list(op[2]),
           "output_sizes": [list(x) for x in op[3]], "output_dtypes": list(op[4])}
    if len(sig) > 1:
        out["ops"] = [s[0] for s in sig[:64]]
    return out


def _members(name: str, dumps: dict, world: list) -> list:
    """The group's ranks: what a dump's pg_config says, else the ranks that recorded it; the default group is
    every rank of the job."""
    for d in dumps.values():
        g = d.groups.get(name)
        if g is not None and g.ranks:
            return sorted(set(g.ranks))
    if name == DEFAULT_PG:
        return list(world)
    return sorted(r for r, d in dumps.items() if name in d.groups)


def entry_state(dump: RankDump, name: str, seq: int) -> str:
    """torch's state of one rank's collective #seq of group `name` (scheduled / started / completed), "?" unknown."""
    g = dump.groups.get(name)
    e = g.colls.get(seq) if g is not None else None
    return (_str(e.get("state"), 20) or "?") if e is not None else "?"


def _unfinished(dumps: dict, name: str, dumped: list, lagging: list, enq: dict) -> dict:
    """{rank: seq} for the lagging ranks still inside an earlier collective of this group that another rank
    completed: they called everything up to it and wait for data inside it (a ring whose far side finished before a
    link was cut), so they never skipped the collective the others wait in next."""
    done = {r: dumps[r].groups[name].last_completed for r in dumped}
    out = {}
    for r in lagging:
        g = dumps[r].groups.get(name)
        if g is not None and g.completion_known and done[r] < enq[r] and any(done[o] >= enq[r] for o in dumped
                                                                            if o != r):
            out[str(r)] = enq[r]
    return out


def analyse_groups(dumps: dict, world: list) -> list[dict]:
    """Per process group: where its ranks are, who never entered the collective the others wait in, the first
    mismatch, and the ranks of the group that left no dump."""
    names = sorted({n for d in dumps.values() for n in d.groups}, key=lambda n: (n != DEFAULT_PG, n))
    out = []
    for name in names:
        members = _members(name, dumps, world)
        dumped = [r for r in members if r in dumps and name in dumps[r].groups]
        absent = [r for r in members if r in dumps and name not in dumps[r].groups]  # dumped, never used the group
        no_dump = [r for r in members if r not in dumps]
        if not dumped:
            continue
        enq = {r: dumps[r].groups[name].enqueued for r in dumped}
        top = max(enq.values())
        entered = sorted(r for r in dumped if enq[r] >= top)
        lagging = sorted(r for r in dumped if enq[r] < top) + absent
        desc = next((dumps[r].groups[name].desc for r in dumped if dumps[r].groups[name].desc), "")
        ref = next((dumps[r].groups[name].coll(top) for r in entered if top in dumps[r].groups[name].colls), None)
        all_done = all(dumps[r].groups[name].last_completed >= top for r in dumped)
        unfinished = _unfinished(dumps, name, dumped, lagging, enq)
        # where each rank that entered the last collective stands in it, when it did not complete there: torch's
        # state (scheduled / started), read as "called, not started on its GPU" only where the dump shows timing
        open_states = {}
        for r in entered:
            e = dumps[r].groups[name].colls.get(top)
            if e is not None and not _done(e) and dumps[r].groups[name].last_completed < top:
                open_states[str(r)] = _str(e.get("state"), 20) or "?"
        out.append({
            "pg": name, "desc": desc, "members": members, "dumped": dumped, "no_dump": no_dump,
            "seq": top, "op": ref.op if ref else None,
            "input_sizes": [list(s) for s in _sizes(ref.in_sizes)] if ref else [],
            "input_dtypes": list(_dtypes(ref.in_dtypes)) if ref else [],
            "timeout_ms": ref.timeout_ms if ref else None,
            "entered": entered, "not_entered": lagging, "unfinished": unfinished,
            "last_enqueued": {str(r): enq[r] for r in dumped},
            "last_completed": {str(r): dumps[r].groups[name].last_completed for r in dumped},
            "windows": {str(r): list(dumps[r].groups[name].window) for r in dumped},
            "wrapped": any((dumps[r].groups[name].window[0] or 1) > 1 for r in dumped),
            "mismatch": _mismatch(dumps, name, dumped, len(members) if name == DEFAULT_PG or any(
                dumps[r].groups[name].ranks for r in dumped) else None),
            "in_step": not lagging and not no_dump and all_done,
            "open_states": open_states,
            "timing": sorted(r for r in dumped if dumps[r].timing),
        })
    return out


def timeline(dumps: dict, last_n: int = 8) -> dict:
    """Per rank, its last `last_n` collectives (any group), newest last: what the HTML timeline draws."""
    out = {}
    for r, d in sorted(dumps.items()):
        colls = sorted(((c.record_id, g.name, g.desc, c) for g in d.groups.values() for c in g.all()),
                       key=lambda t: t[0])[-last_n:]
        out[str(r)] = [{"pg": name, "desc": desc, **c.to_json()} for _, name, desc, c in colls]
    return out
