"""Point-to-point (pipeline-parallel) hangs: each rank's sends paired with its peer's receives, in order, per process
group and direction; an unmatched send or recv names who waits, for whom, and what the peer does instead; a pair of
another size or dtype is named; waits that go round (0 -> 1 -> 2 -> 0) are a cycle.

Two sources: NCCL's flight recorder records every send and recv ("nccl:send 0->1", "nccl:recv 1<-0": ranks of the
group, p2p_seq_id counted per group, a batch's ops closed by a "coalesced" entry that carries their state); gloo's
records none, so a live rank's own word stands in (`ncclcheck watch`: the c10d call its main thread blocks in, read
from the frame by live/calls.py: op, peer, size, dtype).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from . import flight
from .match import _shape

_META = re.compile(r"^(send|recv) (\d{1,7})(->|<-)(\d{1,7})$")
SEND, RECV = "send", "recv"


@dataclass
class P2POp:
    rank: int  # who posted it (global)
    kind: str  # send | recv
    peer: Optional[int]  # global rank of the other side, when known
    pg: str
    seq: Optional[int]  # p2p_seq_id (NCCL counts them per group, over every peer)
    sizes: tuple
    dtypes: tuple
    done: bool
    record: int  # record_id: this rank's order
    batched: bool = False

    def text(self) -> str:
        what = f"{self.kind}{f' #{self.seq}' if self.seq else ''}"
        size = f"{_shape(self.sizes)}{' ' + '/'.join(dict.fromkeys(self.dtypes)) if self.dtypes else ''}"
        side = "to" if self.kind == SEND else "from"
        peer = f" {side} rank {self.peer}" if self.peer is not None else ""
        return f"{'a batched ' if self.batched else ''}{what} ({size}){peer}"


def _members(dumps: dict, pg: str, groups: dict) -> list:
    g = groups.get(pg)
    return list(g["members"]) if g and g.get("members") else []


def ops_of(dump: flight.RankDump, rank: int, groups: dict, dumps: dict) -> list:
    """The rank's point-to-point ops from its flight recorder, in its own order; a batch's ops take the state of
    the "coalesced" entry that closes it (torch records the ops of a batch without one)."""
    out: list = []
    for name, g in dump.groups.items():
        if not g.p2p:
            continue
        members = sorted(_members(dumps, name, groups))
        closing = {}
        for e in g.p2p:
            if flight._op(e.get("profiling_name"))[1] == "coalesced":
                closing[flight._seqid(e.get("p2p_seq_id"))] = flight._done(e)
        for e in g.p2p:
            m = _META.match(flight._op(e.get("profiling_name"))[1])
            if not m:
                continue
            kind, local_peer = m.group(1), int(m.group(4))  # "send me->peer", "recv me<-peer": ranks of the group
            peer = members[local_peer] if local_peer < len(members) else (
                next((r for r in members if r != rank), None) if len(members) == 2 else None)
            seq = flight._seqid(e.get("p2p_seq_id"))
            batched = seq in closing
            sizes = flight._sizes(e.get("input_sizes" if kind == SEND else "output_sizes") or e.get("input_sizes"))
            dtypes = flight._dtypes(e.get("input_dtypes" if kind == SEND else "output_dtypes") or
                                    e.get("input_dtypes"))
            rid = flight._int(e.get("record_id"), -1)
            out.append(P2POp(rank, kind, peer, name, seq, sizes, dtypes, closing[seq] if batched else flight._done(e),
                             rid, batched))
    return sorted(out, key=lambda o: o.record)


def live_op(dump: flight.RankDump) -> Optional[P2POp]:
    """A live rank blocked in send/recv (its own word: gloo records no point-to-point op)."""
    c = dump.call
    if not c or c["op"] not in ("send", "recv", "isend", "irecv"):
        return None
    kind = SEND if "send" in c["op"] else RECV
    return P2POp(dump.rank, kind, c["peer"], (c.get("group") or {}).get("name") or flight.DEFAULT_PG, None,
                 (tuple(c["size"]),) if c.get("size") is not None else (), (c["dtype"],) if c.get("dtype") else (),
                 False, 1 << 62)


@dataclass
class Pairing:
    waits: dict  # rank -> the P2POp it waits in that no peer op matches
    mismatched: list  # [(send, recv)] paired ops of another size or dtype


def pair(ops: dict, dumps: dict) -> Pairing:
    """Every direction (src -> dst, per group): the k-th send paired with the k-th recv, counted from the start
    where neither ring buffer wrapped, else from the last pair both completed."""
    chans: dict = {}
    for r, lst in ops.items():
        for o in lst:
            if o.peer is None:
                continue
            key = (o.pg, r, o.peer) if o.kind == SEND else (o.pg, o.peer, r)
            chans.setdefault(key, ([], []))[0 if o.kind == SEND else 1].append(o)
    waits: dict = {}
    bad: list = []
    for (pg, src, dst), (sends, recvs) in chans.items():
        if src not in ops or dst not in ops:  # the other side left nothing: dead ranks are named elsewhere
            continue
        off = _offset(sends, recvs, dumps, src, dst, pg)
        for i, s in enumerate(sends):
            j = i - off
            if 0 <= j < len(recvs):
                r = recvs[j]
                if (s.sizes and r.sizes and _numel(s.sizes) != _numel(r.sizes)) or \
                        (s.dtypes and r.dtypes and set(s.dtypes) != set(r.dtypes)):
                    bad.append((s, r))
            elif not s.done and j >= 0:
                waits.setdefault(src, s)
        for j, r in enumerate(recvs):
            if not 0 <= j + off < len(sends) and not r.done and j + off >= 0:
                waits.setdefault(dst, r)
    return Pairing(waits, bad)


def _numel(sizes: tuple) -> int:
    n = 0
    for s in sizes:
        k = 1
        for d in s:
            k *= d
        n += k
    return n


def _offset(sends: list, recvs: list, dumps: dict, src: int, dst: int, pg: str) -> int:
    """How many sends precede the first recv kept: 0 when neither side's buffer wrapped; else lined up at the last
    op completed on both sides (a send and its recv complete together)."""
    wrapped = any(dumps[r].groups[pg].first_seq_partial for r in (src, dst) if r in dumps and pg in dumps[r].groups)
    if not wrapped:
        return 0
    ls = max((i for i, s in enumerate(sends) if s.done), default=-1)
    lr = max((j for j, r in enumerate(recvs) if r.done), default=-1)
    return ls - lr if ls >= 0 and lr >= 0 else 0


FIX_UNMATCHED = ("make the pipeline's schedule post every recv its peer sends (a stage that skipped one: a rank-"
                 "dependent branch, a micro-batch count that differs by stage); the waiting rank's stack shows its "
                 "send: `py-spy dump --pid` on a live hang, or ncclcheck watch")
FIX_CYCLE = ("order each pair's send and recv so that one side receives first (alternate by stage parity), or post "
             "them together: batch_isend_irecv / isend + irecv, then wait")
FIX_SIZE = "make both sides of the pair send and receive the same shape and dtype (the pipeline's activation shape)"


def collect(dumps: dict, groups: dict) -> dict:
    """rank -> its point-to-point ops: the flight recorder's, else the live call it blocks in; [] for a rank that
    left a dump and posted none (its peer waiting for it is then unmatched)."""
    out = {}
    for r, d in dumps.items():
        got = ops_of(d, r, groups, dumps)
        live = live_op(d) if not got else None
        out[r] = got or ([live] if live else [])
    return out


def causes(dumps: dict, groups_list: list, who, coll) -> tuple[list, dict]:
    """(causes, rank -> the op it waits in): unmatched sends and recvs named at the rank that never posted the other
    side (followed along chains of waits), cycles of waits, pairs of another size or dtype. `who(rank)` and
    `coll(group, seq, op)` are analyze.py's words for a rank and a collective."""
    groups = {g["pg"]: g for g in groups_list}
    ops = collect(dumps, groups)
    if not any(ops.values()):
        return [], {}
    p = pair(ops, dumps)
    out: list = []
    for s, r in p.mismatched[:16]:
        kind = "size" if _numel(s.sizes) != _numel(r.sizes) else "dtype"
        out.append({"kind": f"{kind}_mismatch", "cause": True, "pg": s.pg, "seq": s.seq, "ranks": sorted({s.rank,
                    r.rank}), "text": f"{kind} mismatch between a send and its recv: {who(s.rank)} posted {s.text()}; "
                    f"rank {r.rank} posted {r.text()}", "fix": FIX_SIZE, "source": "flight recorder", "p2p": True})
    named: set = set()
    for a in sorted(p.waits):
        chain, seen = [a], {a}
        nxt = p.waits[a].peer
        while nxt in p.waits and nxt not in seen:
            chain.append(nxt)
            seen.add(nxt)
            nxt = p.waits[nxt].peer
        if nxt in seen:  # round: a cycle of point-to-point waits
            loop = chain[chain.index(nxt):]
            key = frozenset(loop)
            if key in named:
                continue
            named.add(key)
            steps = " -> ".join(f"rank {r} waits in {p.waits[r].text()}" for r in loop)
            out.append({"kind": "p2p_cycle", "cause": True, "pg": p.waits[loop[0]].pg, "seq": p.waits[loop[0]].seq,
                        "ranks": sorted(loop), "text": f"a cycle of point-to-point waits: {steps}: each waits for "
                        "the next, none can go on", "fix": FIX_CYCLE, "source": _source(dumps, loop)})
            continue
        last = chain[-1]
        op = p.waits[last]
        if nxt is None or nxt in named:
            continue
        named.add(nxt)
        other = "recv from" if op.kind == SEND else "send to"
        doing, dead = _doing(nxt, dumps, groups, coll)
        out.append({"kind": "p2p_unmatched", "cause": not dead, "pg": op.pg, "seq": op.seq, "ranks": [nxt],
                    "text": f"{who(last)} waits in {op.text()}; rank {nxt} never posted the {other} rank {last} "
                            f"and {doing}", "fix": FIX_UNMATCHED, "source": _source(dumps, [last])})
    return out, dict(p.waits)


def _source(dumps: dict, ranks: list) -> str:
    return "live" if any(dumps[r].call for r in ranks if r in dumps) else "flight recorder"


def _doing(rank: int, dumps: dict, groups: dict, coll) -> tuple[str, bool]:
    """What a rank does instead of the op its peer waits for: (words, it left nothing)."""
    d = dumps.get(rank)
    if d is None:
        return "left no dump", True
    if d.last is not None:
        name, seq = d.last
        g = groups.get(name)
        c = d.groups[name].coll(seq) if name in d.groups else None
        if g is not None and c is not None:
            done = d.groups[name].last_completed >= seq and not d.call
            return (f"{'its last collective was' if done else 'waits in'} {coll(g, seq, c.op)}"
                    + (" instead" if not done else "")), False
    if d.call:
        return f"its main thread is in {d.call['op']}", False
    return "posted no point-to-point op", False
