"""watch's side of a slow job (issues 47, 56): each host's clock measured, where the ranks work in a step sampled,
postmortem/slow.py on the fetched flight recorders, a transfer probe between the hosts (live/pace.py's "rate"), and
--follow's history.

- clocks: one answering rank per host is asked "clock" up to CLOCK_TRIES times one after another (until a round trip
  is within CLOCK_ENOUGH_NS), CLOCK_AT_ONCE hosts at once; the exchange with the shortest round trip gives the
  offset (remote - midpoint) and its error (half the round trip).
- phases: PHASE_RANKS ranks on as many hosts sample their own progress counters during the pause between watch's two
  looks (pace's "phase"): postmortem/phase.py places each step where the ranks work outside collectives.
- the probe: when a unit is named, or the job runs slower than its own best, the hosts of the group download a blob
  from each other in rounds (`probe`, its rule there); what it measures slow is a finding of its own, beside the
  late units (`with_probe`: every cause kept, a consequence said as one, with why).
- --follow: each look's findings are compared with the last look's: a unit named now and not before starts a
  slowdown, one named before and not now ends it (a line each, at the slowdown's own times); each slowdown is kept
  with its start and end, each rank's NVRx scores per look; the job's end while followed is a normal end.
"""

from __future__ import annotations

import bisect
import queue
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, NamedTuple, Optional

from ..checks import slowness
from ..postmortem import phase, slow
from ..render import slow as words
from ..rendezvous.budget import FIXED, Budget
from . import pace
from .fetch import fan_out
from .kept import Kept

CLOCK_TRIES = 4  # exchanges per host at most: the shortest round trip is kept
CLOCK_ENOUGH_NS = 1_000_000  # a round trip this short ends a host's tries: an error of 0.5 ms at most, a tenth of
# the rule's floor (5 % of the step) at a 100 ms step; on a LAN the first exchange nearly always is (4 a host are
# 2,048 connections at 512 hosts)
CLOCK_AT_ONCE = 16  # hosts whose clocks are asked at once: an exchange's error is half its round trip, and the round
# trip grows with the exchanges in flight (this process's threads, the answering processes' queues): 64 at once over
# 512 simulated hosts (scripts/bench_live.py) measured errors of up to 13 ms, which cut a 100 ms late rank's cost
# below the rule's floor in one run of two
STALE_S = FIXED.live_confirm_s  # a recorder reply built longer ago than watch's pause between its looks is stale
MAX_STALE_ROWS = 64  # stale ranks the slow section lists (the rest counted among the unjudged)
MAX_HISTORY = 64  # looks kept in --follow's history
MAX_HISTORY_RANKS = 256  # ranks whose history is kept (the slowest relative to the best, when more)
THREADS = 16
MAX_EVENTS = 256  # --follow's start and end lines kept (the newest)
MAX_SLOWDOWNS = 256  # --follow's slowdowns kept: every open one and the newest ended ones (issue 63: a job watched
# for days whose slowdowns came and went grew the list, the report and watch's memory without end)
PROBE_ROUNDS = 4  # rounds of the transfer probe measured at most (slowness.CONSISTENT of them must agree)
PROBE_ATTEMPTS = 6  # ... and asked at most: a round whose downloads of a unit were refused measured nothing of it
PROBE_FLOOR = 0.3  # the share of the others' rate a host's directions lose, per round, to be slow in it: a link at
# half the others' rate loses 0.5; the lab's loaded healthy directions, measured together, stay within 0.3 of each
# other in most rounds (one round's 3x is one round)
CAPACITY_FLOOR = 0.4  # ... and its best round at most 0.6 of the others' typical (each direction's median round): a
# shaped link never measures faster than its shaper, a busy CPU or the job's traffic only slow a transfer down; a link
# at half the others' rate lacks 0.5 (the lab's: 0.47-0.55). Not the others' best: where transfers are CPU-bound,
# that is one lucky round: healthy hosts lacked up to 0.65 of it, 7 probes of 60 named one (scripts/probe_noise.py:
# against the typical, 0.29 at most, nothing named in 120 probes)
EVERY_ROUND_FLOOR = 0.5  # ... or a share lost in every one of PROBE_ROUNDS rounds this large: the lab's half-rate h3
# lost 0.56-0.89 each round while a bucket let its best round through; at CAPACITY_FLOOR (0.4), 2 probes of 120 named
# a healthy host where every transfer is CPU-bound (scripts/probe_noise.py, twice), where the rule without it named none
PAIR_FLOOR, PAIR_CAPACITY_FLOOR = 0.5, 0.67  # one direction alone (not a host: the median of several) is one value
# a round, noisier: on the lab's loaded 2-core machine a healthy h1 -> h3 read 0.40 of the others' best in every round
# of one probe, a CPU-bound simulated one lacked 0.58 of the others' typical: a slow path alone is named at a third
# of the others' rate (a shaped pair: 5x+)
PROBE_WORK_SHARE = 0.5  # a job whose ranks work outside collectives under this share of its step is probed though
# nobody is named (_suspects): its step is mostly communication, where a link slow all along hides
MAX_LOST = 32  # units whose shares the probe's JSON keeps (`lost`): those slow in half their rounds or more
PHASE_RANKS = 3  # ranks (on as many hosts) that sample their progress: where a step computes is the program's
PHASE_REPLY_BYTES = 1 << 20  # a "phase" reply at most: a 2 s window's rows (~1,000 of ~86 bytes) of 12 process groups
PHASE_REPLY_ITEMS = 1 << 16  # ... and its JSON values (what watch builds of it: ~3 MB of objects a rank at most); a
# window holding more is trimmed to its newest rows by the responder, and said
GLANCE_BYTES, GLANCE_ITEMS = 256 << 10, 1 << 14  # the one recorder read before the first look: its newest entries
MAX_STEP_ENTRIES = 256  # flight-recorder entries the job's step is estimated from
YOUNG_MIN = 8  # entries of a young window's newest part whose pattern gives its step (4 steps of 2 collectives)
RECENT_STEPS = 8  # the job's newest steps whose median is its step now: what the sampling that follows will see. The
# whole window's median was the pace before a slowdown that began fewer than half its steps ago (issue 65's 2 s lab
# job, a straggler 24 steps in: 2.0 s read, 2.85 s stepped; 6 s of sampling held one measure of its compute, "untold")
PHASE_STEPS = 3  # steps a sampling window holds where it can: each place of the step measured twice
PHASE_FAST_STEPS = 20  # steps a fast job's window holds, not the whole pause: the sampling spends the same CPU a
# window (live/pace.phase_pace), so a shorter one samples densely. The lab's 25 ms job sampled over 2 s was sampled
# every ~4.5 ms (a read of its recorder ~0.09 ms): its 4 ms compute fell between two samples in half the steps, read
# 0, and its median placed no step ("too few"); over 20 steps (0.5 s) it is sampled every ~2.2 ms (the floor,
# Budget.live_phase_every_s: its CPU allows ~1.1 ms) and its compute is "compute" in every watch (issue 65)
FIXED_PHASE_MAX_S = FIXED.live_phase_max_s  # what a responder samples at most (it refuses a longer request)
PHASE_MIN_S = FIXED.live_phase_min_s  # a fast job's window at least
RATE_REPLY_BYTES = 64 << 10  # a "rate" reply: a few dozen values per target


def measure_clocks(records: dict, answered: list, asker: Any, budget: Budget, silent: Optional[set] = None) -> dict:
    """{host: {"offset_ns", "err_ns", "rank"}} for each host with an answering rank, against this process's clock.
    `silent` gets the ranks that did not answer a clock exchange by its bound (a tarpit: it answered the first
    look, then holds every connection open): the caller does not ask them again within the same look."""
    first: dict = {}
    for r in sorted(answered):
        if r in records:
            first.setdefault(records[r]["host"], r)
    if len(first) < 2:
        return {}
    end = budget.deadline(budget.live_fetch_s)

    def one(rank: int) -> Optional[dict]:
        with Kept(1) as kept:  # the tries ask on one connection (wire: "keep"), not a connection each
            return tries(rank, kept)

    def tries(rank: int, kept: Kept) -> Optional[dict]:
        best = None
        for _ in range(CLOCK_TRIES):
            doc, _why, sent, got = pace.exchange(records[rank], {"kind": "clock"}, asker, end, budget,
                                                 limit=pace.CLOCK_REPLY_BYTES, kept=kept)
            t = doc.get("time_ns") if doc else None
            if doc is None and budget.passed(end):  # held until the bound: not asked again in this look
                if silent is not None:
                    silent.add(rank)
                return best and {"offset_ns": best[0], "err_ns": best[1] // 2 + 1, "rank": rank}
            if type(t) is not int or not got >= sent > 0:
                continue
            rtt = got - sent
            if best is None or rtt < best[1]:
                best = (t - (sent + got) // 2, rtt)
            if rtt <= CLOCK_ENOUGH_NS:
                break
        return None if best is None else {"offset_ns": best[0], "err_ns": best[1] // 2 + 1, "rank": rank}

    with ThreadPoolExecutor(max_workers=min(CLOCK_AT_ONCE, fan_out(len(first))),
                            thread_name_prefix="ncclcheck-watch") as ex:
        futs = {h: ex.submit(one, r) for h, r in first.items()}
        wait_futures(list(futs.values()), timeout=budget.remaining(end) + budget.thread_join_s)
        got = {h: f.result() for h, f in futs.items() if f.done() and f.exception() is None}
    if silent is not None:
        silent.update(r for h, r in first.items() if h not in got)  # still held when the pool gave up on it
    return {h: c for h, c in got.items() if c}


class Sampled(NamedTuple):
    """What sample_phases got: {rank: {pg: rows}} of the ranks whose samples arrived, and what each asked rank's
    sampling was as a measure ({"rank", "host", "asked_bytes", "asked_items", "rows", "dropped", "error"}: every
    refusal, timeout and trimmed reply kept, for the verdict to say)."""

    rows: dict
    asked: list


def phase_ask(seconds: float, groups: int, budget: Budget) -> tuple[int, int]:
    """(bytes, JSON values) a "phase" reply of `seconds` holds at most: one row per sample of each group at most
    (every Budget.live_phase_every_s, whatever the job's step rate: a job stepping every 100 ms changes its counters
    ~4 times a step, a 2 s window holds ~80 of them, 400 values), within pace.PHASE_MAX_ROWS a group, within
    PHASE_REPLY_BYTES and PHASE_REPLY_ITEMS."""
    rows = min(pace.PHASE_MAX_ROWS, int(min(seconds, budget.live_phase_max_s) / budget.live_phase_every_s) + 2)
    nbytes, items = pace.phase_room(max(1, min(groups, phase.MAX_GROUPS)), rows)
    return min(nbytes, PHASE_REPLY_BYTES), min(items, PHASE_REPLY_ITEMS)


def phase_window(seconds: float, step_us: Optional[float]) -> float:
    """Seconds to sample: `seconds` (watch's pause between its looks) where the job's step is unknown; else
    PHASE_FAST_STEPS of its steps within that pause (at least PHASE_MIN_S: a fast job is sampled densely, over fewer
    of its steps), longer for a job whose step is long, so that the window holds PHASE_STEPS of its steps where it can
    (within Budget.live_phase_max_s)."""
    if not step_us or step_us <= 0:
        return seconds
    step = step_us / 1e6
    fast = min(seconds, max(PHASE_MIN_S, PHASE_FAST_STEPS * step))
    return round(max(fast, min(FIXED_PHASE_MAX_S, PHASE_STEPS * step)), 3)


def glance(records: dict, asker: Any, budget: Budget) -> tuple[Optional[float], int]:
    """(the job's step in us or None, the process groups of its rank) from the newest entries of a flight recorder (at
    most GLANCE_BYTES: the responder keeps the newest that fit), what the phases are sampled for, before the first
    look: the first of three ranks spread over the job (the lowest, the middle, the highest) to answer with a
    step. One rank alone cost the whole watch its bound T before the first look whenever that rank did not answer
    (a silent rank 0: a watch of --timeout 20 answered in 40 s)."""
    rs = sorted(records)
    if not rs:
        return None, 1
    picks = sorted({rs[0], rs[len(rs) // 2], rs[-1]})
    end = budget.deadline(budget.live_fetch_s)
    answers: queue.SimpleQueue = queue.SimpleQueue()

    def one(r: int) -> None:
        try:
            answers.put((r, pace.exchange(records[r], {"kind": "flight"}, asker, end, budget, GLANCE_BYTES,
                                          GLANCE_ITEMS)[0]))
        except Exception:  # a failed glance is a rank without a step, never the watch's end
            answers.put((r, None))

    for r in picks:  # daemon threads: each exchange ends by `end`; nobody waits for a silent one, nor does the exit
        threading.Thread(target=one, args=(r,), name="ncclcheck-watch-glance", daemon=True).start()
    got: dict = {}
    for _ in picks:
        try:
            r, doc = answers.get(timeout=budget.remaining(end))
        except queue.Empty:
            break
        if doc:
            got[r] = _Doc(doc)
            if step_us_of({r: got[r]}) is not None:
                got = {r: got[r]}
                break
    return step_us_of(got), max(groups_of(got).values(), default=1) or 1


class _Doc(NamedTuple):
    doc: Optional[dict]


def step_us_of(answers: dict) -> Optional[float]:
    """The job's step now (us) as the first look's flight recorders show it: from the newest MAX_STEP_ENTRIES entries
    of the first answer that has them, the median time between a call and the same place of the pattern one repeat
    later (postmortem/slow.py's period) over its newest RECENT_STEPS steps, None without one."""
    for r in sorted(answers):
        doc = getattr(answers[r], "doc", None) or {}
        fr = doc.get("flight") if isinstance(doc.get("flight"), dict) else {}
        es = [e for e in (fr.get("entries") or [])[-MAX_STEP_ENTRIES:]
              if isinstance(e, dict) and type(e.get("time_created_ns")) is int and not e.get("is_p2p")]
        if len(es) < 4:
            continue
        sigs = [(str(e.get("profiling_name")), str(e.get("input_sizes")), str(e.get("pg_id"))) for e in es]
        p, cut = slow.pattern(sigs)
        if not p and len(set(sigs)) > 1:  # a window too young for the analysis's cuts (slow.MIN_WINDOW): its start
            # breaks the pattern, and the time between two calls is no step (a job of two all_reduces a 3 s step
            # read 15 ms, and its phases were sampled for 0.3 s). The newest half's, or quarter's, pattern is.
            for c in (len(sigs) // 2, len(sigs) * 3 // 4):
                q = slow.period(sigs[c:]) if len(sigs) - c >= YOUNG_MIN else 0
                if q:
                    p, cut = q, c
                    break
        ts = [e["time_created_ns"] for e in es[cut:]]
        p = max(1, p)
        steps = [ts[i] - ts[i - p] for i in range(max(p, len(ts) - RECENT_STEPS * p), len(ts)) if ts[i] >= ts[i - p]]
        return statistics.median(steps) / 1e3 if steps else None
    return None


def groups_of(answers: dict) -> dict:
    """{rank: the process groups its answer's progress names} (a look's fetch.Answer-s): what its phases hold."""
    out = {}
    for r, a in answers.items():
        prog = (a.doc or {}).get("progress") if getattr(a, "doc", None) else None
        out[r] = len(prog) if isinstance(prog, dict) else 0
    return out


def sample_phases(records: dict, answered: list, asker: Any, budget: Budget, seconds: float,
                  groups: Optional[dict] = None) -> Sampled:
    """PHASE_RANKS of the ranks given, each on another host, sample their own progress for `seconds` at once
    (live/pace.py's "phase"): where in a step the ranks work outside collectives (postmortem/phase.py). Each is asked
    for what its window holds (phase_ask, from the groups its last answer named: `groups`, {rank: count}); what
    did not arrive, was refused or was trimmed is kept in Sampled.asked, never dropped unsaid."""
    first: dict = {}
    for r in sorted(answered):
        if r in records and len(first) < PHASE_RANKS:
            first.setdefault(records[r]["host"], r)
    if not first or seconds <= 0:
        return Sampled({}, [])
    # Within the look's one bound T where the window and a request fit in it: a sampled rank that never answers (a
    # silent rank 0, the lowest of its host) held the watch past T by a reply's send allowance (T 8 s: 14 s).
    end = budget.deadline(max(seconds + budget.live_request_s,
                              min(seconds + budget.live_request_s + budget.live_send_s, budget.live_fetch_s)))
    ask = {r: phase_ask(seconds, (groups or {}).get(r) or 1, budget) for r in first.values()}
    with ThreadPoolExecutor(max_workers=len(first), thread_name_prefix="ncclcheck-watch") as ex:
        futs = {r: ex.submit(pace.exchange, records[r], {"kind": "phase", "s": round(seconds, 3)}, asker, end, budget,
                             *ask[r]) for r in first.values()}
        wait_futures(list(futs.values()), timeout=budget.remaining(end) + budget.thread_join_s)
        got = {r: (f.result()[:2] if f.done() and f.exception() is None else
                   (None, "no reply within its bound" if not f.done() else f"{type(f.exception()).__name__}"))
               for r, f in futs.items()}
    rows, asked = {}, []
    for r, (doc, why) in sorted(got.items()):
        mine = phase.rows_of(doc.get("phase")) if doc else None
        d = doc.get("dropped") if doc else None
        if mine:
            rows[r] = mine
        asked.append({"rank": r, "host": records[r]["host"], "asked_bytes": ask[r][0], "asked_items": ask[r][1],
                      "rows": sum(len(v) for v in (mine or {}).values()),
                      "dropped": d if type(d) is int and d > 0 else 0,
                      "error": (why or "no reply")[:200] if not doc else
                      None if mine else "no change of its progress counters was sampled"})
    return Sampled(rows, asked)


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


def probe(group_ranks: list, suspects: set, records: dict, asker: Any, budget: Budget,
          stop: Optional[threading.Event] = None) -> Optional[dict]:
    """The transfer probe between the group's hosts, while the job runs: {"hosts": slow hosts, "pairs": [[from, to]]
    slow directions no slow host explains, "slow_bps", "ref_bps", "matrix_mbps" (each direction's median), "rounds",
    "n_hosts", "bytes", "moved", "took_s", "unconfirmed", "lost", "said"}; None with one host.

    One download a direction is one sample, and it competes with the job's own traffic and CPU: on the lab's loaded
    2-core machine a healthy direction read 3x slow once, and a link at half the others' rate read like them in one
    round. So it measures PROBE_ROUNDS rounds (each the planned downloads, in turns), and judges each
    host by the share its directions lose against the directions that do not touch it, per round, with the one
    slow-unit rule (checks/slowness.judge): a host (or a direction no slow host explains) whose share is at least
    PROBE_FLOOR in 3 of the 4 rounds, and whose best round still lacks CAPACITY_FLOOR of the others' typical, is slow; a
    link at half the others' rate loses 0.5 in both. The downloads of a round go in turns where no host serves two
    at once (schedule). The rounds stop as soon as nothing can pass the rule any more (a healthy job's probe costs
    two rounds)."""
    by_host: dict = {}
    for r in sorted(group_ranks):
        if r in records:
            by_host.setdefault(records[r]["host"], r)
    if len(by_host) < 2:
        return None
    t0 = budget.now()
    rounds: list = []
    moved = 0
    unmeasured: dict = {}  # (from, to) -> why its download gave no rate, in a round at least
    shared: dict = {}  # (from, to) -> the rates of its downloads an end's stranger traffic shared, never judged
    while len(rounds) < PROBE_ATTEMPTS and not (stop is not None and stop.is_set()):
        cells, got, failed, contended = _measure(by_host, suspects, records, asker, budget, stop)
        for d, v in contended.items():
            shared.setdefault(d, []).append(v)
        rounds.append(cells)
        moved += got
        for d, why in failed.items():
            unmeasured.setdefault(d, why)
        if not _judge_rounds(rounds, sorted(by_host))["open"]:
            break
    verdict = _judge_rounds(rounds, sorted(by_host))
    verdict.pop("open")
    out = {**verdict, "rounds": len(rounds), "n_hosts": len(by_host), "bytes": pace.RATE_BYTES, "moved": moved,
           "took_s": round(budget.since(t0), 3),
           # a download refused or unanswered is no rate: said with the probe, never a direction silently left out
           "unmeasured": [{"from": a, "to": b, "why": w} for (a, b), w in sorted(unmeasured.items())][:MAX_LOST]}
    if shared:  # what the transfers a stranger's traffic shared read: said beside the verdict, never judged
        out["contended_mbps"] = {f"{a} -> {b}": round(statistics.median(v) / 1e6, 2)
                                 for (a, b), v in sorted(shared.items())[:MAX_LOST]}
    touched = {h for cells in rounds for d in cells for h in d}
    # a host none of whose directions gave a rate in any round: its links are unknown, never "like the others'"
    out["unmeasured_hosts"] = sorted(h for h in by_host if h not in touched and any(h in d for d in unmeasured))
    if stop is not None and stop.is_set():
        out["stopped"] = True  # cut short (the job turned out hung): never a verdict
    out["said"] = words.probe(out) if any(rounds) else None
    return out


class _Round(NamedTuple):
    """One round's rates, indexed so that each unit's share costs its own directions, not the whole matrix (a ring
    of 512 hosts is 2,048 directions and as many units)."""

    cells: dict  # (from, to) -> bytes/s
    ordered: list  # every rate, sorted
    by_host: dict  # host -> the rates of the directions that touch it

    @classmethod
    def of(cls, cells: dict) -> _Round:
        by_host: dict = {}
        for (a, b), v in cells.items():
            by_host.setdefault(a, []).append(v)
            by_host.setdefault(b, []).append(v)
        return cls(cells, sorted(cells.values()), by_host)


def _median_without(ordered: list, drop: list) -> Optional[float]:
    rest = list(ordered)
    for v in drop:
        del rest[bisect.bisect_left(rest, v)]
    return statistics.median(rest) if rest else None


def _own(r: _Round, mine: Any) -> list:
    """The rates of a round's directions that touch `mine` (a host) or are it (a direction: both ways are dropped
    from its reference, its own is the one)."""
    if isinstance(mine, tuple):
        return [r.cells[d] for d in (mine, mine[::-1]) if d in r.cells]
    return r.by_host.get(mine, [])


def _share(mine_in: _Round, ref: _Round, mine: Any) -> Optional[float]:
    """1 - median(mine's rates in `mine_in`) / median(`ref`'s rates of the directions that do not touch it); None
    without both."""
    if isinstance(mine, tuple):
        own = [mine_in.cells[mine]] if mine in mine_in.cells else []
    else:
        own = mine_in.by_host.get(mine, [])
    other = _median_without(ref.ordered, _own(ref, mine)) if own else None
    return 1.0 - statistics.median(own) / other if other else None


def _shares(rounds: list, mine: Any) -> list:
    """Per round (_Round), the share of the rate a host (or a direction, a tuple) loses against the round's
    directions that do not touch it; rounds without both are left out."""
    return [x for x in (_share(r, r, mine) for r in rounds) if x is not None]


def _judge_rounds(rounds: list, names: list) -> dict:
    """What the rounds so far name ({"hosts", "pairs", "unconfirmed", "slow_bps", "ref_bps", "matrix_mbps", "lost":
    {unit: {"rounds": the share it lost per round, "best": the share its best round lacks of the others' typical}} of
    the units slow in half their rounds or more}) and whether another round could change it ("open": a unit not yet slow
    that could still be)."""
    need = slowness.CONSISTENT * PROBE_ROUNDS
    tries = PROBE_ATTEMPTS - len(rounds)
    dirs = sorted({d for cells in rounds for d in cells})
    indexed = [_Round.of(cells) for cells in rounds]
    best_of: dict = {}
    for cells in rounds:
        for d, v in cells.items():
            best_of[d] = max(v, best_of.get(d, 0.0))
    best = _Round.of(best_of)  # each direction's capacity: nothing lets a transfer go faster than its link
    per_dir = {d: statistics.median([c[d] for c in rounds if d in c]) for d in dirs}
    typical = _Round.of(per_dir)
    hosts, pairs, once, open_ = [], [], [], False
    lost: list = []  # (best round's share, unit, its shares) of the units slow in half their rounds or more
    for unit in [*names, *dirs]:
        sh = _shares(indexed, unit)
        above = sum(1 for x in sh if x >= (PAIR_FLOOR if isinstance(unit, tuple) else PROBE_FLOOR))
        # a round where its downloads gave no rate (refused: a responder over its share, on a loaded host) measured
        # nothing of it: another round is asked while one could still change its verdict (PROBE_ATTEMPTS at most);
        # rounds never measured count as not slow
        open_ = open_ or (above < need <= above + min(tries, max(0, PROBE_ROUNDS - len(sh))))
        pair = isinstance(unit, tuple)
        if above * 2 < max(1, len(sh)):
            continue
        kept = {"rounds": [round(x, 2) for x in sh], "best": round(_share(best, typical, unit) or 0.0, 2)}
        lost.append((kept["best"], unit if not pair else f"{unit[0]} -> {unit[1]}", kept))
        cap = PAIR_CAPACITY_FLOOR if pair else CAPACITY_FLOOR
        # its best round lacks the capacity floor, or it lacked that much in every one of PROBE_ROUNDS rounds: a
        # shaper's bucket, full after a quiet moment of the job's traffic, let two of h3's directions through near
        # the others' rate once each (its best: 0.34) while h3 lost 0.56-0.89 in each of 4 rounds (the lab's 500 ms
        # job with h3 at half rate, 47 % slower than its best: a false healthy); a healthy host's round past 0.4 is
        # one round (scripts/probe_noise.py)
        if slowness.judge(sh + [0.0] * (PROBE_ROUNDS - len(sh)), floor=PAIR_FLOOR if pair else PROBE_FLOOR,
                          min_samples=PROBE_ROUNDS).slow \
                and (kept["best"] >= cap or (len(sh) >= PROBE_ROUNDS and min(sh) >= max(cap, EVERY_ROUND_FLOOR))):
            (pairs if pair else hosts).append(unit)
        else:  # slow in half its rounds or more: said, not named
            once.append(unit)
    pairs = [list(d) for d in pairs if d[0] not in hosts and d[1] not in hosts]
    named = set(hosts) | {tuple(d) for d in pairs}

    def slow_dir(d: tuple) -> bool:
        return d[0] in named or d[1] in named or d in named

    maybe = {u for u in once if not isinstance(u, tuple)}
    once = [u if not isinstance(u, tuple) else f"{u[0]} -> {u[1]}" for u in once
            if not (isinstance(u, tuple) and (slow_dir(u) or u[0] in maybe or u[1] in maybe))]
    slow_d = [v for d, v in per_dir.items() if slow_dir(d)]
    ref_d = [v for d, v in per_dir.items() if not slow_dir(d)]
    matrix: dict = {}
    for (a, b), v in per_dir.items():
        matrix.setdefault(a, {})[b] = round(v / 1e6, 2)
    return {"hosts": hosts, "pairs": pairs, "unconfirmed": once, "open": open_ and tries > 0,
            "slow_bps": round(statistics.median(slow_d)) if slow_d else None,
            "ref_bps": round(statistics.median(ref_d)) if ref_d else None, "matrix_mbps": matrix,
            "lost": {u: k for _, u, k in sorted(lost, key=lambda x: -x[0])[:MAX_LOST]}}


def schedule(todo: dict) -> list:
    """The planned downloads ({prober: [targets]}) in turns where no host sends to two probers at once, nor downloads
    twice: a host serving two downloads halves each, and its links would read slow (with every pair planned: n-1
    turns, each host downloading from the one k places on in the ring of hosts)."""
    names = sorted({*todo, *(t for ts in todo.values() for t in ts)})
    at = {h: i for i, h in enumerate(names)}
    edges = sorted(((p, t) for p, ts in todo.items() for t in ts), key=lambda e: ((at[e[1]] - at[e[0]]) % len(names),
                                                                                  at[e[0]]))
    turns = []
    while edges:
        probers, targets, turn, rest = set(), set(), [], []
        for p, t in edges:
            if p in probers or t in targets:
                rest.append((p, t))
            else:
                turn.append((p, t))
                probers.add(p)
                targets.add(t)
        turns.append(turn)
        edges = rest
    return turns


def _measure(by_host: dict, suspects: set, records: dict, asker: Any, budget: Budget,
             stop: Optional[threading.Event] = None) -> tuple[dict, int, dict, dict]:
    """One round: the planned downloads, turn by turn (schedule), every download of a turn at once -> ({(from host,
    to host): bytes/s}, the bytes moved, {(from host, to host): why no rate}, {(from host, to host): bytes/s of a
    download an end's stranger traffic shared})."""
    cells: dict = {}
    failed: dict = {}
    contended: dict = {}
    moved = 0
    for turn in schedule(plan(list(by_host), suspects & set(by_host))):
        if stop is not None and stop.is_set():
            break
        end = budget.deadline(budget.live_rate_wait_s(1))
        with ThreadPoolExecutor(max_workers=min(THREADS, len(turn)), thread_name_prefix="ncclcheck-watch") as ex:
            futs = {(p, t): ex.submit(pace.exchange, records[by_host[p]], {"kind": "rate", "ranks": [by_host[t]]},
                                      asker, end, budget, RATE_REPLY_BYTES) for p, t in turn}
            wait_futures(list(futs.values()), timeout=budget.remaining(end) + budget.thread_join_s)
            replies = {e: f.result()[:2] if f.done() and f.exception() is None else (None, "no reply within its bound")
                       for e, f in futs.items()}
        for (prober, src), (doc, why) in replies.items():
            row = doc.get("rate") if isinstance(doc, dict) else None
            v = row.get(str(by_host[src])) if isinstance(row, dict) else None
            bps = v.get("bps") if isinstance(v, dict) else None
            got = v.get("bytes") if isinstance(v, dict) else None
            moved += got if type(got) is int and 0 <= got <= 2 * pace.RATE_BYTES else 0
            ends = v.get("contended") if isinstance(v, dict) else None
            if type(bps) in (int, float) and 0 < bps < 1e13 and v.get("ok") and isinstance(ends, list) and ends:
                # an end turned a stranger away while it ran (pace.contended): not the link's rate; another round
                # is asked while one could change the verdict, and the direction is said unmeasured with this why
                who = [h for e, h in (("source", src), ("prober", prober)) if e in ends]
                failed[(src, prober)] = f"contended: {' and '.join(who) or 'an end'} turned a stranger's requests " \
                                        "away during it"
                contended[(src, prober)] = float(bps)
            elif type(bps) in (int, float) and 0 < bps < 1e13 and v.get("ok"):
                cells[(src, prober)] = float(bps)  # the direction src -> prober
            else:
                failed[(src, prober)] = (why if doc is None else str((v or {}).get("kind") if isinstance(v, dict)
                                                                      else doc.get("error") or "no rate"))[:120]
    return cells, moved, failed, contended


def _suspects(section: dict) -> Optional[set]:
    """The hosts the probe looks at for this analysis (its named units'), None when nothing calls for a probe: a
    job whose ranks all call in time, no slower than its own best, and that works outside collectives at least
    PROBE_WORK_SHARE of its step (measured). One that waits inside them most of its step is probed with no suspect
    (every host and its ring neighbours): a link slow since before the recorder's window slows every rank alike and
    is the job's own pace there, so only a transfer tells it (the lab's 10 ms job with h3 slow from its start: a
    pass)."""
    job = section.get("job") or {}
    if not (section["named"] or job.get("slower")):
        g = next((g for g in section.get("groups", []) if g.get("pg") == section.get("pg")), {})
        share = g.get("work_share")
        return set() if share is not None and share < PROBE_WORK_SHARE else None
    return {f["host"] for f in section["named"] if f.get("host")}


def _hosts(inp: Any, records: dict) -> dict:
    """{rank: its host} of every rank read: what the rank said, else its store record."""
    return {r: (inp.hosts.get(r) or {}).get("host") or records.get(r, {}).get("host") for r in inp.dumps}


def _group_ranks(inp: Any, section: dict) -> list:
    return [r for r in inp.dumps if section.get("pg") in inp.dumps[r].groups]


def stale_of(answers: dict) -> dict:
    """{rank: seconds} of the answers whose recorder part was built more than STALE_S before it was sent (a responder
    past its CPU share serves the last one built, saying how old in `built_s`)."""
    out = {}
    for r, a in answers.items():
        age = (a.doc or {}).get("built_s") if isinstance(a.doc, dict) else None
        if isinstance(age, (int, float)) and not isinstance(age, bool) and STALE_S < age < 1e9:
            out[r] = round(float(age), 3)
    return out


def analysed(inp: Any, records: dict, clocks: dict) -> dict:
    """The slow section of the fetched flight recorders (diagnose's Inputs, their phases with them) with the measured
    clocks: postmortem/slow.py's analysis, which judge() says and early_probe() probes from. A rank whose recorder
    came stale (inp.stale) is not judged: the rule reads the collectives every rank recorded, so one old recorder
    would end the window where it ends, and the verdict would be about the job as it was then (the lab's matrix: a
    slow link's look judged 12 s back, before the link slowed)."""
    stale = getattr(inp, "stale", None) or {}
    dumps = {r: d for r, d in inp.dumps.items() if r not in stale} if stale else inp.dumps
    section = slow.analyse(dumps, _hosts(inp, records), rank_clocks(clocks, records), inp.phases,
                           unjudged=set(records) | set(inp.unanswered), sampling=inp.sampling)
    if stale:
        section["stale"] = [{"rank": r, "built_s": s} for r, s in sorted(stale.items())][:MAX_STALE_ROWS]
    return section


def early_probe(inp: Any, records: dict, clocks: dict, asker: Any, budget: Budget,
                stop: Optional[threading.Event] = None) -> tuple[dict, Optional[tuple]]:
    """(the analysis, (suspects, probe result) or None) from the first look's recorders alone, run while watch's
    second look waits: at 4,096 ranks the analysis took ~1 s and the probe seconds once the second look was over.
    judge() takes both: the analysis as its own (the second look adds no recorder), the probe when its suspects are
    the same; `stop` (set when the job turns out hung) ends the probe after the download in flight."""
    section = analysed(inp, records, clocks)
    suspects = _suspects(section)
    if suspects is None:
        return section, None
    return section, (_probe_key(section, suspects), probe(_group_ranks(inp, section), suspects, records, asker,
                                                          budget, stop))


def _probe_key(section: dict, suspects: set) -> tuple:
    """What a probe was made for: its suspects, and whether the job ran slower than its own best. A probe of a
    communication-bound job that looked healthy says nothing of a slowdown begun since (--follow keeps a probe for
    the same key): one made for no suspect then is not one made for no suspect now."""
    return frozenset(suspects), bool((section.get("job") or {}).get("slower"))


def judge(inp: Any, records: dict, clocks: dict, asker: Any, budget: Budget, node_of: Optional[dict] = None,
          follow: Optional[Follow] = None, probed: Optional[tuple] = None,
          section: Optional[dict] = None) -> tuple[dict, Any]:
    """(the report's live.slow section, the live.slow check) from the fetched flight recorders (diagnose's Inputs),
    the measured clocks and, when something is suspect, the probe (probed: (suspects, result) of a probe already
    run, kept when the suspects are the same; --follow: probed again only when the suspects change). section: the
    analysis of these recorders already made (early_probe's), else made here. Every cause found is kept: a late rank
    and a slow link are two findings, each said with its kind."""
    section = dict(section) if section is not None else analysed(inp, records, clocks)
    also: list = []
    job = section.get("job") or {}
    suspects = _suspects(section)
    if suspects is not None:
        if follow is not None and follow.probed is not None:
            probed = follow.probed
        key = _probe_key(section, suspects)
        if probed is not None and probed[0] == key and not (probed[1] or {}).get("stopped"):
            found = probed[1]
        else:
            found = probe(_group_ranks(inp, section), suspects, records, asker, budget)
        if follow is not None:
            follow.probed = (key, found)
        section["probe"] = found
        section["named"], also = with_probe(section["named"], found, job, _measured_steps(section))
    section["links"] = also
    return section, slow.check("live.slow", section, tuple(also), node_of,
                                "watch" if follow is None else "watch --follow")


def _measured_steps(section: dict) -> bool:
    """Were the main group's steps placed by a measure of where the ranks work (postmortem/phase.py), not by its
    gaps alone? Only then does a lateness "where no work separates two collectives" say communication."""
    g = next((g for g in section.get("groups", []) if g.get("pg") == section.get("pg")), {})
    return "outside collectives" in (g.get("steps_by") or "")


def with_probe(named: list, found: Optional[dict], job: dict, measured: bool) -> tuple[list, list]:
    """(the findings, each with what the probe measured of its host, and the links findings). A unit on a host whose
    transfers measure slow is "communication" (its links, not its compute), unless the steps were measured and its
    lateness falls where the ranks work: a rank short of CPU (a halved cgroup quota) serves the probe from the same
    starved process, so its host's transfers read slow too, and that is its compute, said so. A compute unit
    elsewhere stays its own finding; a communication suspect elsewhere (it leaves collectives late while its own
    links measure like the others') is the slow link's consequence only when the steps were measured (then the
    link's finding says it explains it, and why), else it stays named. A slow host or link none of the findings sits
    on is a finding of its own, beside the others."""
    if not found or not found.get("said"):
        return named, []
    slow_hosts = set(found["hosts"]) | {h for p in found["pairs"] for h in p}
    if not slow_hosts:
        return [dict(f, probe=found) for f in named], []
    starved = {f.get("host") for f in named if measured and f["kind"] == "compute" and f.get("host") in slow_hosts}
    kept, explained = [], []
    for f in named:
        if f.get("host") in starved or f["kind"] == slow.UNTOLD_KIND:  # a kind not told stays so: a host short of
            kept.append(dict(f, probe=found))  # CPU serves the probe slowly too, its link would be a guess
        elif f.get("host") in slow_hosts:
            kept.append(dict(f, kind="communication", probe=found))
        elif f["kind"] == "compute" or not measured:
            kept.append(dict(f, probe=found))
        else:
            explained.append({k: f.get(k) for k in ("unit", "rank", "ranks", "host", "share", "cost_us", "inside")})
    links = slow_hosts - starved
    if not links or any(f.get("host") in links for f in kept):
        kept = [dict(f, explains=explained) if f.get("host") in links else f for f in kept]
        return kept, []
    link = {"unit": "link", "kind": "communication", "hosts": sorted(links),
            "pairs": [p for p in found["pairs"] if not set(p) & starved], "said": found["said"],
            "job_share": job.get("share") or 0, "job_slower": bool(job.get("slower")), "step_us": job.get("step_us"),
            "since_ns": _link_since(job, kept),
            "explains": explained, "besides": [words.who(f) for f in kept]}
    return kept, [link]


def _link_since(job: dict, named: list) -> Optional[int]:
    """When a slow link's slowdown began: the job's, when nothing else is named; beside named units, the start of the
    slowdown they do not cost the job (postmortem/slow.py's job "rest"), never the straggler's start; None unknown."""
    if not named:
        return job.get("since_ns")
    rest = job.get("rest") or {}
    return rest.get("since_ns") if rest.get("slower") else None


class Follow:
    """--follow's record of a slow job: each look's named units against the last look's (a start or an end said
    once each, through `say`), each slowdown kept with its start and end (the time of its first and of its last slow
    step, not of the look that saw them), and each rank's NVRx scores per look (bounded)."""

    def __init__(self, say: Any = None) -> None:
        self.say = say
        self.current: dict = {}  # key -> finding
        self.events: list = []
        self.slowdowns: list = []  # [{"key", "who", "kind", "text", "start_ns", "end_ns" (None: lasts), ...}]
        self.slowdowns_dropped = 0  # the oldest ended slowdowns let go past MAX_SLOWDOWNS
        self.history: list = []  # [{"t_ns", "ranks": {rank: {relative, individual, share}}}]
        self.last: Optional[dict] = None
        self.looks = 0
        self.world: tuple = (0, {})  # (world size, the ranks' store records) of the newest look
        self.backend = "none"
        self.probed: Optional[tuple] = None  # (what it was made for: _probe_key, the probe's result) of the last probe
        self.stepped_ns: Optional[int] = None  # when the job's progress was last seen to move (its last step seen)

    @staticmethod
    def key(f: dict) -> str:
        return f"{f.get('unit')}:{f.get('rank') if f.get('unit') == 'rank' else f.get('host') or f.get('hosts')}"

    def look(self, t_ns: int, section: dict, took_s: Optional[float] = None) -> None:
        """One look's section at t_ns (took_s: the look's own seconds, kept in the history: a line is said within a
        pause plus a look of its event)."""
        self.last = section
        self.looks += 1
        now = {self.key(f): f for f in [*section.get("named", []), *section.get("links", [])]}
        last_slow = section.get("last_slow") or {}
        for k, f in now.items():
            if k not in self.current:
                self._start(t_ns, k, f)
            else:
                self._open(k)["last_ns"] = f.get("last_ns") or t_ns
        for k, f in self.current.items():
            if k not in now:
                self._end(t_ns, k, f, last_slow.get(k))
        self.current = now
        ranks = sorted(section.get("ranks", []), key=lambda r: r.get("relative", 1.0))[:MAX_HISTORY_RANKS]
        scores = {str(r["rank"]): {k: r.get(k) for k in ("relative", "individual", "share")} for r in ranks}
        self.history = [*self.history[-(MAX_HISTORY - 1):],
                        {"t_ns": t_ns, **({"took_s": round(took_s, 3)} if took_s is not None else {}), "ranks": scores}]

    def finish(self, t_ns: int, why: str, last_step_ns: Optional[int] = None) -> None:
        """The job ended while watched: every slowdown still on at the last look ends with the job, at its last step
        seen (last_step_ns: watch's reads of progress between looks), else at its last slow step seen."""
        for k, f in self.current.items():
            self._end(t_ns, k, f, last_step_ns, why)
        self.current = {}

    def _open(self, k: str) -> dict:
        return next(s for s in reversed(self.slowdowns) if s["key"] == k and s["end_ns"] is None)

    def _start(self, t_ns: int, k: str, f: dict) -> None:
        text = words.link_finding(f) if f.get("unit") == "link" else words.finding(f)
        start = f.get("since_ns") if type(f.get("since_ns")) is int else t_ns
        self.slowdowns.append({"key": k, "unit": f.get("unit"), "rank": f.get("rank"), "kind": f.get("kind"),
                               "host": f.get("host") or f.get("hosts"), "who": _who(f), "text": text,
                               "start_ns": start, "end_ns": None, "last_ns": f.get("last_ns") or t_ns,
                               "seen_ns": t_ns,
                               # a kind not told: why, and on what backend (what would tell it: the fix)
                               **({"untold": f["untold"], "backend": f.get("backend")} if f.get("untold") else {})})
        self._event(t_ns, "start", start, f, f"{words.when(start)} slowdown starts: {text}")

    def _end(self, t_ns: int, k: str, f: dict, last: Optional[int], why: str = "") -> None:
        s = self._open(k)
        end = last if type(last) is int and last >= s["start_ns"] else s["last_ns"]
        s["end_ns"], s["ended_seen_ns"] = end, t_ns
        self._event(t_ns, "end", end, f, words.slowdown_end(s, why))
        over = len(self.slowdowns) - MAX_SLOWDOWNS
        if over > 0:  # the oldest ended ones go; an open one stays until it ends
            gone = {id(x) for x in [x for x in self.slowdowns if x["end_ns"] is not None][:over]}
            self.slowdowns = [x for x in self.slowdowns if id(x) not in gone]
            self.slowdowns_dropped += len(gone)

    def _event(self, seen_ns: int, what: str, t_ns: int, f: dict, line: str) -> None:
        self.events.append({"t_ns": t_ns, "seen_ns": seen_ns, "event": what, "unit": f.get("unit"),
                            "rank": f.get("rank"), "kind": f.get("kind"), "host": f.get("host") or f.get("hosts"),
                            "text": line})
        self.events = self.events[-MAX_EVENTS:]
        if self.say is not None:
            self.say(line)

    def section(self) -> dict:
        return {"history": self.history, "events": self.events, "slowdowns": self.slowdowns, "looks": self.looks,
                **({"slowdowns_dropped": self.slowdowns_dropped} if self.slowdowns_dropped else {})}

    def check(self, ended: str) -> Any:
        """live.slow once the job ended while --follow watched it: every slowdown it saw, with its start and end
        (fail: the job was slowed), or the looks that saw none (pass)."""
        from ..model import failed, passed

        ev = {"slowdowns": self.slowdowns, "looks": self.looks}
        if not self.slowdowns:
            return passed("live.slow", f"no rank or host called collectives late consistently in {self.looks} looks "
                          f"while the job ran ({ended})", evidence=ev)
        texts = [words.slowdown(s) for s in self.slowdowns]
        return failed("live.slow", texts[0], detail="\n".join(texts), findings=tuple(texts),
                      fix=slow.fix_for(self.slowdowns, "watch --follow"), evidence=ev)


def _who(f: dict) -> str:
    return ", ".join(f["hosts"]) if f.get("unit") == "link" else words.who(f)
