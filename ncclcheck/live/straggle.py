"""watch's side of a slow job (issue 47): each host's clock measured, postmortem/slow.py on the fetched flight
recorders, a short transfer probe between the suspects' hosts (live/pace.py's "rate"), and --follow's history.

- clocks: one answering rank per host is asked "clock" CLOCK_TRIES times one after another, every host at once; the
  exchange with the shortest round trip gives the offset (remote - midpoint) and its error (half the round trip).
- the probe: when a unit is named, or the job runs slower than its own best with every rank in time, the hosts of
  the suspects (all hosts of the group when there is none) and their neighbours in the ring of hosts download a blob
  from each other; links/analyze.classify (the rule of `ncclcheck links`) names the slow host or link in the
  matrix. A unit on the slow host is "communication" (not its compute); a unit elsewhere whose lateness shows where
  no work separates two collectives is the slow link's consequence and is left out.
- --follow: each look's findings are compared with the last look's: a unit named now and not before starts a
  slowdown, one named before and not now ends it (a line each); each rank's NVRx scores are kept per look.
"""

from __future__ import annotations

import statistics
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, Optional

from ..postmortem import slow
from ..render import slow as words
from ..rendezvous.budget import Budget
from . import pace
from .fetch import fan_out

CLOCK_TRIES = 4  # exchanges per host: the shortest round trip is kept
CLOCK_REPLY_BYTES = 4096  # a clock reply is a few dozen bytes
MAX_HISTORY = 64  # looks kept in --follow's history
MAX_HISTORY_RANKS = 256  # ranks whose history is kept (the slowest relative to the best, when more)
THREADS = 16


def measure_clocks(records: dict, answered: list, asker: Any, budget: Budget) -> dict:
    """{host: {"offset_ns", "err_ns", "rank"}} for each host with an answering rank, against this process's clock."""
    first: dict = {}
    for r in sorted(answered):
        if r in records:
            first.setdefault(records[r]["host"], r)
    if len(first) < 2:
        return {}
    end = budget.deadline(budget.live_fetch_s)

    def one(rank: int) -> Optional[dict]:
        best = None
        for _ in range(CLOCK_TRIES):
            doc, _why, sent, got = pace.exchange(records[rank], {"kind": "clock"}, asker, end, budget,
                                                 limit=CLOCK_REPLY_BYTES)
            t = doc.get("time_ns") if doc else None
            if type(t) is not int or not got >= sent > 0:
                continue
            rtt = got - sent
            if best is None or rtt < best[1]:
                best = (t - (sent + got) // 2, rtt)
        return None if best is None else {"offset_ns": best[0], "err_ns": best[1] // 2 + 1, "rank": rank}

    with ThreadPoolExecutor(max_workers=fan_out(len(first)), thread_name_prefix="ncclcheck-watch") as ex:
        futs = {h: ex.submit(one, r) for h, r in first.items()}
        wait_futures(list(futs.values()), timeout=budget.remaining(end) + budget.thread_join_s)
        got = {h: f.result() for h, f in futs.items() if f.done() and f.exception() is None}
    return {h: c for h, c in got.items() if c}


def rank_clocks(clocks: dict, records: dict) -> dict:
    """{rank: {"offset_ns", "err_ns"}} from the per-host clocks."""
    return {r: {"offset_ns": clocks[rec["host"]]["offset_ns"], "err_ns": clocks[rec["host"]]["err_ns"]}
            for r, rec in records.items() if rec["host"] in clocks}


def plan(hosts: list, suspects: set) -> dict:
    """{host: [hosts it downloads from]}: every other host while they fit in one request, else each suspect and its
    ring neighbours (two each side) with each other; no suspect: every host with its ring neighbours."""
    hosts = sorted(hosts)
    n = len(hosts)
    if n - 1 <= pace.MAX_RATE_TARGETS:
        return {h: [x for x in hosts if x != h] for h in hosts}
    ring = {h: [hosts[(i + d) % n] for d in (-2, -1, 1, 2)] for i, h in enumerate(hosts)}
    if not suspects:
        return ring
    out: dict = {}
    for s in sorted(suspects):
        out.setdefault(s, ring[s])
        for h in ring[s]:
            out.setdefault(h, [])
            if s not in out[h] and len(out[h]) < pace.MAX_RATE_TARGETS:
                out[h].append(s)
    return {h: t for h, t in out.items() if t}


def probe(group_ranks: list, suspects: set, records: dict, asker: Any, budget: Budget) -> Optional[dict]:
    """The transfer probe between the group's hosts: {"hosts": slow hosts, "pairs": [[from, to]] slow directions
    no slow host explains, "slow_bps", "ref_bps", "matrix", "asked", "n_hosts", "bytes", "said", "looks"}; None
    with one host. A host or direction is named only when two looks both name it."""
    by_host: dict = {}
    for r in sorted(group_ranks):
        if r in records:
            by_host.setdefault(records[r]["host"], r)
    if len(by_host) < 2:
        return None
    first = _measure(by_host, suspects, records, asker, budget)
    if not (first["hosts"] or first["pairs"]):
        return first
    # One 1 MiB download a direction is one sample: on a loaded host a healthy direction read several times slower
    # once (a straggler lab job beside the suite's other lane: the late rank's host measured slow, and the compute
    # straggler was called communication). What is slow is slow again: only what a second look names too is kept.
    again = _measure(by_host, suspects, records, asker, budget)
    hosts = [h for h in first["hosts"] if h in again["hosts"]]
    pairs = [pr for pr in first["pairs"] if pr in again["pairs"] or any(h in again["hosts"] for h in pr)]
    once = [h for h in first["hosts"] if h not in hosts] + [f"{a} -> {b}" for a, b in first["pairs"]
                                                           if [a, b] not in pairs]
    out = dict(first, hosts=hosts, pairs=pairs, looks=2, unconfirmed=once, matrix_again_mbps=again.get("matrix_mbps"))
    out["said"] = words.probe(out)
    return out


def _measure(by_host: dict, suspects: set, records: dict, asker: Any, budget: Budget) -> dict:
    """One look: every planned host downloads from its targets at once; the matrix and what classify names."""
    from ..links.analyze import classify

    todo = plan(list(by_host), suspects & set(by_host))
    end = budget.deadline(budget.live_rate_wait_s(max(len(t) for t in todo.values())))
    with ThreadPoolExecutor(max_workers=min(THREADS, len(todo)), thread_name_prefix="ncclcheck-watch") as ex:
        futs = {h: ex.submit(pace.exchange, records[by_host[h]],
                             {"kind": "rate", "ranks": [by_host[t] for t in targets]}, asker, end, budget)
                for h, targets in todo.items()}
        wait_futures(list(futs.values()), timeout=budget.remaining(end) + budget.thread_join_s)
        replies = {h: f.result()[0] for h, f in futs.items() if f.done() and f.exception() is None}
    names = sorted(by_host)
    idx = {h: i for i, h in enumerate(names)}
    host_of_rank = {r: h for h, r in by_host.items()}
    matrix: list = [[None] * len(names) for _ in names]
    for prober, doc in replies.items():
        row = doc.get("rate") if isinstance(doc, dict) else None
        for k, v in (row.items() if isinstance(row, dict) else ()):
            src = host_of_rank.get(int(k)) if isinstance(k, str) and k.isdigit() else None
            bps = v.get("bps") if isinstance(v, dict) else None
            if src is not None and src != prober and type(bps) in (int, float) and 0 < bps < 1e13 and v.get("ok"):
                matrix[idx[src]][idx[prober]] = bps / 1e9  # the direction src -> prober, in links' GB/s
    cells = [v for row in matrix for v in row if v is not None]
    out: dict = {"asked": len(replies), "n_hosts": len(names), "bytes": pace.RATE_BYTES, "hosts": [], "pairs": [],
                 "matrix_mbps": {a: {b: round(matrix[idx[a]][idx[b]] * 1e3, 2) for b in names
                                     if matrix[idx[a]][idx[b]] is not None} for a in names}}
    if not cells:
        out["said"] = None
        return out
    c = classify(matrix)
    out["hosts"] = [names[i] for i in c.slow_nodes]
    explained = set(c.slow_nodes)
    out["pairs"] = [[names[a], names[b]] for a, b in c.slow_cells if a not in explained and b not in explained]
    slow_cells = [matrix[a][b] for a, b in c.slow_cells]
    out["slow_bps"] = round(statistics.median(slow_cells) * 1e9) if slow_cells else None
    out["ref_bps"] = round((c.reference_gbps or 0) * 1e9)
    out["said"] = words.probe(out)
    return out


def judge(inp: Any, records: dict, clocks: dict, asker: Any, budget: Budget, node_of: Optional[dict] = None,
          follow: Optional[Follow] = None) -> tuple[dict, Any]:
    """(the report's live.slow section, the live.slow check) from the fetched flight recorders (diagnose's Inputs),
    the measured clocks and, when something is suspect, the probe (--follow: probed again only when the suspects
    change)."""
    hosts = {r: (inp.hosts.get(r) or {}).get("host") or records.get(r, {}).get("host") for r in inp.dumps}
    section = slow.analyse(inp.dumps, hosts, rank_clocks(clocks, records))
    also: list = []
    job = section.get("job") or {}
    if section["named"] or job.get("slower"):
        suspects = {f["host"] for f in section["named"] if f.get("host")}
        group = [r for r in inp.dumps if section.get("pg") in inp.dumps[r].groups]
        if follow is not None and follow.probed is not None and follow.probed[0] == suspects:
            found = follow.probed[1]
        else:
            t0 = budget.now()
            found = probe(group, suspects, records, asker, budget)
            if found is not None:
                found["took_s"] = round(budget.since(t0), 3)
            if follow is not None:
                follow.probed = (suspects, found)
        section["probe"] = found
        if found and found.get("said") and (found["hosts"] or found["pairs"]):
            slow_hosts = set(found["hosts"]) | {h for p in found["pairs"] for h in p}
            kept = []
            for f in section["named"]:
                if f.get("host") in slow_hosts:
                    kept.append(dict(f, kind="communication", probe=found))
                elif f["kind"] == "compute":
                    kept.append(dict(f, probe=found))
            if not any(f.get("host") in slow_hosts for f in kept):
                also.append({"unit": "link", "kind": "communication", "hosts": sorted(slow_hosts),
                             "pairs": found["pairs"], "said": found["said"], "job_share": job.get("share") or 0,
                             "since_ns": job.get("since_ns")})
            section["named"] = kept
        elif found:
            section["named"] = [dict(f, probe=found) for f in section["named"]]
    section["links"] = also
    return section, slow.check("live.slow", section, tuple(also), node_of)


class Follow:
    """--follow's record of a slow job: each look's named units against the last look's (a start or an end said
    once each, through `say`), and each rank's NVRx scores per look (bounded)."""

    def __init__(self, say: Any = None) -> None:
        self.say = say
        self.current: dict = {}  # key -> finding
        self.events: list = []
        self.history: list = []  # [{"t_ns", "ranks": {rank: {relative, individual, share}}}]
        self.last: Optional[dict] = None
        self.probed: Optional[tuple] = None  # (the suspects' hosts, the probe's result) of the last probe

    @staticmethod
    def key(f: dict) -> str:
        return f"{f.get('unit')}:{f.get('rank') if f.get('unit') == 'rank' else f.get('host') or f.get('hosts')}"

    def look(self, t_ns: int, section: dict) -> None:
        self.last = section
        now = {self.key(f): f for f in [*section.get("named", []), *section.get("links", [])]}
        for k, f in now.items():
            if k not in self.current:
                self._event(t_ns, "start", f)
        for k, f in self.current.items():
            if k not in now:
                self._event(t_ns, "end", f)
        self.current = now
        ranks = sorted(section.get("ranks", []), key=lambda r: r.get("relative", 1.0))[:MAX_HISTORY_RANKS]
        self.history = [*self.history[-(MAX_HISTORY - 1):],
                        {"t_ns": t_ns, "ranks": {str(r["rank"]): {k: r.get(k) for k in ("relative", "individual",
                                                                                         "share")}
                                                 for r in ranks}}]

    def _event(self, t_ns: int, what: str, f: dict) -> None:
        text = words.link_finding(f) if f.get("unit") == "link" else words.finding(f)
        line = f"{words.when(t_ns)} slowdown {'starts' if what == 'start' else 'ends'}: " + \
            (text if what == "start" else (words.who(f) if f.get("unit") != "link" else ", ".join(f["hosts"])))
        self.events.append({"t_ns": t_ns, "event": what, "unit": f.get("unit"), "rank": f.get("rank"),
                            "host": f.get("host") or f.get("hosts"), "text": line})
        if self.say is not None:
            self.say(line)

    def section(self) -> dict:
        return {"history": self.history, "events": self.events}
