"""Who slows a running job, from the flight recorder's call times (issue 47): the rank or host that calls collectives
late, consistently, and what it costs the job; the same records read live by `ncclcheck watch` and after the fact by
`ncclcheck diagnose`.

Per process group, over the newest collectives every member recorded (a window), each rank's arrival at each
collective is its entry's `time_created_ns` (torch's CLOCK_REALTIME on its host) less its host's clock offset:
- measured by watch (the responder's "clock" answer, NTP-style: offset and half the round trip as its error);
- else, on gloo (a collective every rank waits in: nobody enters #k+1 before everybody entered #k), the smallest
  shift of each host's clock that its own records do not contradict (a host whose ranks "entered" #k after another
  host's ranks entered #k+1 has a clock ahead by at least that); a host whose records contradict nothing keeps its
  clock: a rank is never blamed for an offset its records prove, and never excused by one they do not;
- else the hosts' own clocks, said so.
Steps are found in the job's own rhythm. Where the job repeats a pattern of collectives (DDP's buckets, a model's
layers; in a young job's window, after its start, which repeats nothing: `pattern`), a step begins at the place
in the pattern where the ranks work outside collectives: measured, from the ranks' own record of when each
collective ended (watch samples a few ranks' progress counters every Budget.live_phase_every_s for a moment,
live/pace.py; with TORCH_NCCL_ENABLE_TIMING the GPU's own duration of each collective),
never guessed from the gaps between calls alone: when a step's big all_reduce takes longer than its compute, the
longest gap follows the all_reduce, not the compute. Without such a record (a dump of gloo ranks that watch did not
sample), the longest median gap of the pattern, said so. Without a pattern, a collective begins a step when the
latest rank's arrival came after a gap of at least GAP_SHARE of the window's long gaps (with GPU durations: of the
work outside collectives). At each collective the latest unit (rank, or host with all its ranks) costs the job
its lead over the next-latest unit (the collective could have begun that much earlier), less the clocks' error
across two hosts. Per step a unit's share is its cost over the step's time; checks/slowness.judge names a unit whose
share stays at or above slowness.FLOOR (the rule and its floors are stated there). A unit whose cost falls on
collectives the ranks call with no work before them (it left the previous one late) is a "communication" suspect;
one whose cost falls where the ranks work before calling is "compute". The job against its own best stretch
(slowness.JOB_FLOOR) is reported, never named alone: an evaluation pass is slower too.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Optional

from ..checks import slowness
from ..model import CheckResult, failed, passed, skipped, warned
from ..render import slow as words
from . import callseries, flight, phase
from .bound import MAX_REPORT_ROWS

MAX_CELLS = 1 << 18  # ranks x collectives per group: the newest collectives kept (1,024 ranks: 256 of them)
MAX_WINDOW = 1024  # collectives per group at most
MIN_WINDOW = 16  # fewer common collectives than this: not analysed (said)
GAP_SHARE = 0.5  # a step begins after a gap of at least half the 90th-percentile gap around it
GAP_AROUND = 32  # ... among this many collectives each side
MAX_PERIOD = 256  # collectives in one step's repeating pattern at most
PERIOD_MATCH = 0.9  # ... repeated this often in the window (an evaluation pass breaks it: then the gaps)
HEAD_CUTS = 16  # no pattern across the window: sought in its newest 15/16, 14/16, ... (at least MIN_WINDOW)
MIN_PHASE = 2  # measures of the work before each place of the pattern, at least: fewer, its gaps decide (said)
MIN_WORK_NS = 1_000_000  # the longest work outside collectives in a step, at least, for a measure to place it: a job
# that never leaves its collectives for 1 ms has no compute phase to find (its gaps decide)
UNTOLD_KIND = "untold"  # a finding's kind when no measure of where the ranks work placed its group's steps
# why (a finding's "untold"): "not sampled" (nothing measured where the ranks work: a gloo dump watch did not sample),
# "too few" (sampled, but too few measures of each place of the pattern), "no pattern" (one collective a step: a rank
# late at each call is late after its work either way; only the GPU's durations tell)
PASSES = 3  # judgements of a group at most: each sets the units named so far aside and judges the rest again
COMM_SHARE = 0.45  # a unit is a communication suspect when about half its cost or more falls inside steps (where
# it did no work: it left the collective before late; a rank that leaves every collective late is late at the one
# that begins a step too: ~0.5); a compute straggler's cost falls mostly where a step begins. Not all: the last to
# arrive at gloo's ring all_reduce leaves it late too, and on issue 65's lab jobs (500 ms steps, the all_reduce 5x
# the compute) 29-33 % of a compute straggler's cost fell inside its steps, against 99 % of a slow link's ranks';
# at 0.3 it read "communication" in 1 watch of 3
MAX_OFFSET_NS = 10**15  # a clock offset read from a dump: more than ~11 days is not one
OFFSET_WIDTH = 0.02  # a host's clock offset read from records: where most collectives agree within 2 % of
# a collective's typical interval
_EVERYONE_WAITS = ("all", "_all", "reduce_scatter", "_reduce_scatter", "barrier")


def _median(xs: list) -> float:
    return statistics.median(xs) if xs else 0.0


def _pct(xs: list, q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def _times(g: flight.GroupTrace) -> dict:
    """{seq: time_created_ns} of a rank's collectives in a group: its whole entries' and, where a live reply sent
    only their call times, its call series' (postmortem/callseries.py)."""
    out = {q: c[0] for q, c in g.calls.items()}
    for q, e in g.colls.items():
        t = e.get("time_created_ns")
        if type(t) is int and t > 0:
            out[q] = t
    return out


def _sig(g: flight.GroupTrace, q: int) -> tuple:
    return callseries.sig(g.colls[q]) if q in g.colls else g.calls[q][1]


def _window(dumps: dict, name: str, ranks: list) -> tuple[list, list]:
    """(seqs, {rank: [time_created_ns per seq]}): the newest contiguous collectives every rank recorded with a call
    time, at most MAX_WINDOW and MAX_CELLS / ranks of them."""
    common = None
    times = {}
    for r in ranks:
        times[r] = mine = _times(dumps[r].groups[name])
        common = set(mine) if common is None else common & mine.keys()
        if not common:
            return [], {}
    seqs = sorted(common)
    keep = max(MIN_WINDOW, min(MAX_WINDOW, MAX_CELLS // max(1, len(ranks))))
    run = [seqs[-1]]
    for q in reversed(seqs[:-1]):
        if q != run[-1] - 1 or len(run) >= keep:
            break
        run.append(q)
    run.reverse()
    return run, {r: [times[r][q] for q in run] for r in ranks}


def _densest(values: list, width: float) -> float:
    """The middle of the `width` that holds the most of `values` (ties: the one nearest 0)."""
    xs = sorted(values)
    best, j = (0, 0.0), 0
    for i, x in enumerate(xs):
        while xs[j] < x - width:
            j += 1
        mid = (xs[j] + x) / 2
        if (i - j + 1, -abs(mid)) > (best[0], -abs(best[1])):
            best = (i - j + 1, mid)
    return best[1]


def _record_offsets(arr: dict, host_of: dict, ref: str) -> dict:
    """{host: (offset_ns, lowest, highest)}: each host's clock against `ref`'s as its records say. Where two
    collectives are called back to back, every rank left the first together and called the second at once, so the
    earliest call of a host there, against ref's, is the offset: the value most collectives agree on (within
    OFFSET_WIDTH of a collective's typical interval; a straggler's late calls spread or sit elsewhere; ties: the
    smaller offset). It is kept within what no record contradicts: a rank of the host cannot call #k+1 before a rank
    of ref called #k, nor the other way round."""
    by_host: dict = {}
    for r in arr:
        by_host.setdefault(host_of.get(r), []).append(r)
    base = by_host.get(ref) or []
    if not base:
        return {}
    k = len(next(iter(arr.values())))
    rmax = [max(arr[r][i] for r in base) for i in range(k)]
    rmin = [min(arr[r][i] for r in base) for i in range(k)]
    width = OFFSET_WIDTH * _median([rmin[i] - rmin[i - 1] for i in range(1, k)])
    out = {}
    for h, rs in by_host.items():
        if h == ref:
            continue
        hmax = [max(arr[r][i] for r in rs) for i in range(k)]
        hmin = [min(arr[r][i] for r in rs) for i in range(k)]
        low = max(hmax[i] - rmin[i + 1] for i in range(k - 1))  # h's clock is at least this far ahead of ref's
        high = -max(rmax[i] - hmin[i + 1] for i in range(k - 1))  # ... and at most this
        guess = _densest([hmin[i] - rmin[i] for i in range(k)], width)
        shift = guess if low > high else min(max(guess, low), high)
        out[h] = (int(shift), low, high)
    return out


def _clocks(arr: dict, host_of: dict, clocks: dict, ops: set, backend: Optional[str]) -> tuple[dict, dict, dict]:
    """({host: offset_ns}, {host: error_ns}, what was used) for the window's ranks."""
    hosts = sorted({host_of.get(r) for r in arr}, key=str)
    measured: dict = {}
    for r in arr:
        c = clocks.get(r)
        h = host_of.get(r)
        if c and (h not in measured or c["err_ns"] < measured[h][1]):
            measured[h] = (c["offset_ns"], c["err_ns"])
    if len(hosts) < 2:
        return {}, {}, {"source": "one host: one clock"}
    if all(h in measured for h in hosts):
        return ({h: measured[h][0] for h in hosts}, {h: measured[h][1] for h in hosts},
                {"source": "measured", "hosts": {str(h): {"offset_us": round(measured[h][0] / 1e3, 1),
                                                        "err_us": round(measured[h][1] / 1e3, 1)} for h in hosts}})
    if backend == "gloo" and ops and all(op.startswith(_EVERYONE_WAITS) for op in ops):
        ref = host_of.get(min(arr))
        got = _record_offsets(arr, host_of, ref)
        return ({h: v[0] for h, v in got.items()}, {},
                {"source": "records", "reference": ref,
                 "hosts": {str(h): {"offset_us": round(v[0] / 1e3, 1), "lowest_us": round(v[1] / 1e3, 1),
                                    "highest_us": round(v[2] / 1e3, 1)} for h, v in got.items()}})
    return {}, {}, {"source": "hosts' own clocks (not measured; a host whose clock is ahead looks late)"}


def period(sigs: list) -> int:
    """The number of collectives in the job's repeating pattern (op and sizes) when there is one of 2 or more
    (DDP's buckets, a model's layers), else 0: PERIOD_MATCH of the window repeats p collectives later."""
    n = len(sigs)
    for p in range(1, min(MAX_PERIOD, n // 4) + 1):
        if sum(1 for i in range(n - p) if sigs[i] == sigs[i + p]) >= PERIOD_MATCH * (n - p):
            return p if p > 1 else 0
    return 0


def pattern(sigs: list) -> tuple[int, int]:
    """(period, the index where it begins): the window's pattern from its first collective when one holds across
    it, else the newest part's that holds one (the window cut at HEAD_CUTS-ths, oldest cut first). A young job's
    window holds its start (DDP's broadcast of the model, a launcher's barriers, a warm-up that sizes its buffers),
    which repeats nothing: its steps are the newest part's, never the gaps' guess (issue 65's 500 ms lab job, watched
    200 steps in, was "untold" so). (0, 0) without one: one collective a step, or none repeats."""
    n = len(sigs)
    p = period(sigs)
    if p or n < 2 * MIN_WINDOW:
        return p, 0
    for c in range(1, HEAD_CUTS):
        cut = n * c // HEAD_CUTS
        if n - cut < MIN_WINDOW:
            break
        p = period(sigs[cut:])
        if p:  # the start's last collectives the cut kept (PERIOD_MATCH forgives a tenth): set aside too, up to
            # the last break of the pattern in the oldest quarter of what the cut kept
            odd = [i for i in range(cut, cut + (n - cut) // 4) if sigs[i] != sigs[i + p]]
            return p, odd[-1] + 1 if odd else cut
    return 0, 0


def _work(phases: dict, name: str, ranks: list) -> dict:
    """{seq: ns the sampled ranks of this group worked before calling it} (the median of the sampled ranks) from
    watch's phase samples (postmortem/phase.py)."""
    per: dict = {}
    for r in ranks:
        rows = (phases.get(r) or {}).get(name)
        for q, w in (phase.outside_from_samples(rows) if rows else {}).items():
            per.setdefault(q, []).append(w)
    return {q: _median(ws) for q, ws in per.items()}


def _steps(latest: list, sigs: list, seqs: list, work: dict,
           durations: Optional[list]) -> tuple[list, set, str, Optional[str], Optional[float]]:
    """(indices where a step begins, indices the ranks work before calling, how they were found, None when a measure
    placed them, else why none did: UNTOLD's key, the ns a step's ranks work outside collectives where measured). A
    repeating
    pattern of collectives is a step, begun at the place in the pattern where the ranks work outside collectives the
    longest (measured: `work`, {seq: ns}, watch's samples; `durations`, the work before each collective from the
    GPU's durations); without a measure, at the place with the longest median gap before it. Without a pattern, a
    step begins after a gap (of work, when measured) of at least GAP_SHARE x the 90th-percentile one around it
    (GAP_AROUND collectives each side: a job whose steps slow down mid-window keeps its short steps)."""
    k = len(latest)
    gaps = [0] + [latest[i] - latest[i - 1] for i in range(1, k)]
    if durations is not None:
        work = {seqs[i]: durations[i] for i in range(1, k)}
    p = period(sigs)
    if p:
        by: dict = {}
        for q, w in work.items():
            by.setdefault((q - seqs[0]) % p, []).append(w)
        med = {j: _median(v) for j, v in by.items() if len(v) >= MIN_PHASE}
        top = max(med.values(), default=0)
        if len(med) == p and top >= MIN_WORK_NS:
            at = max(range(p), key=lambda j: (med[j], -j))
            busy = {j for j in range(p) if med[j] >= GAP_SHARE * top}
            source = "the GPU's durations" if durations is not None else "sampled"
            return (list(range(at if at else p, k, p)), {i for i in range(1, k) if i % p in busy},
                    f"a pattern of {p} collectives, begun where the ranks work outside collectives ({source})", None,
                    float(sum(med.values())))
        at = max(range(p), key=lambda j: _median(gaps[j + p if j == 0 else j::p]))
        starts = list(range(at if at else p, k, p))
        return (starts, set(starts), f"a pattern of {p} collectives, begun after its longest gap (not measured)",
                "too few" if work else "not sampled", None)
    series = [0.0] + [durations[i] for i in range(1, k)] if durations is not None else gaps
    out = []
    for i in range(1, k):
        hi = _pct(series[max(1, i - GAP_AROUND):i + GAP_AROUND + 1], 0.9)
        if hi > 0 and series[i] >= GAP_SHARE * hi:
            out.append(i)
    # one collective a step (or no pattern): a rank late at every call is late after its work whether it worked
    # longer or left the collective before late; only each collective's own time (the GPU's durations) tells them
    return out, set(out), ("the work between collectives (the GPU's durations)" if durations is not None else
                           "the job's compute gaps"), None if durations is not None else "no pattern", None


def _costs(a: dict, ranks: list, host_of: dict, err: dict, k: int) -> tuple[list, list, list]:
    """(the latest call of each collective, [(the latest rank, its lead over the next-latest)], [(the latest host, its
    lead over the next host's latest)]) of `ranks` only, less the clocks' error across two hosts."""
    hosts = {host_of.get(r) for r in ranks}
    latest, cost_rank, cost_host = [], [], []
    for i in range(k):
        col = [(a[r][i], r) for r in ranks]
        col.sort(reverse=True)
        (t1, r1), (t2, r2) = col[0], col[1]
        lost = t1 - t2 - (err.get(host_of.get(r1), 0) + err.get(host_of.get(r2), 0)
                          if host_of.get(r1) != host_of.get(r2) else 0)
        latest.append(t1)
        cost_rank.append((r1, max(0, lost)))
        if len(hosts) > 1:
            h1 = host_of.get(r1)
            other = next(((t, r) for t, r in col if host_of.get(r) != h1), None)
            lost_h = t1 - other[0] - err.get(h1, 0) - err.get(host_of.get(other[1]), 0) if other else 0
            cost_host.append((h1, max(0, lost_h)))
    return latest, cost_rank, cost_host


def _group(name: str, desc: str, arr: dict, seqs: list, sigs: list, host_of: dict, off: dict, err: dict,
           work: dict, colls: Optional[list]) -> dict:
    """One group's window -> its steps, each unit's cost per step, the verdicts and the per-rank scores. work: {seq:
    ns worked before calling it} from watch's samples; colls: [[each rank's entry] per collective] (GPU durations)."""
    ranks = sorted(arr)
    k = len(seqs)
    a = {r: [t - o for t in arr[r][:k]] for r in ranks for o in (off.get(host_of.get(r), 0),)}
    hosts = sorted({host_of.get(r) for r in ranks}, key=str)
    latest, cost_rank, cost_host = _costs(a, ranks, host_of, err, k)
    durations = phase.outside_from_durations(colls, latest) if colls else None
    starts, busy, how, untold, work_ns = _steps(latest, sigs, seqs, work, durations)
    out: dict = {"pg": name, "desc": desc, "ranks": len(ranks), "hosts": len(hosts), "collectives": k,
                 "first_seq": seqs[0] if seqs else None, "last_seq": seqs[-1] if seqs else None,
                 "steps": max(0, len(starts) - 1), "steps_by": how, "untold": untold, "found": [], "job": None,
                 "scores": {}, "last_slow": {}}
    if len(starts) - 1 < slowness.MIN_SAMPLES:
        out["why"] = (f"{max(0, len(starts) - 1)} steps in the window of {k} collectives: the rule needs "
                      f"{slowness.MIN_SAMPLES}")
        return out
    step_of = {}
    spans = list(zip(starts, starts[1:]))
    for j, (s, e) in enumerate(spans):
        for i in range(s, e):
            step_of[i] = j
    dur = [latest[e] - latest[s] for s, e in spans]
    out["step_us"] = round(_median(dur[-slowness.MIN_SAMPLES:]) / 1e3, 1)
    # the share of a step its ranks work outside collectives, where measured: under PROBE_WORK_SHARE, a link slow since
    # before the window hides in the job's pace (no rank late, no faster stretch) and only watch's probe finds it
    out["work_share"] = round(min(1.0, work_ns / _median(dur)), 3) if work_ns is not None and _median(dur) else None
    under: list = []  # units late consistently under the floor (slowness.under_floor), from the first pass only

    def judged(cost_rank: list, cost_host: list, last_slow: dict) -> list:
        """The units whose costs the rule names (each unit's newest slow step in last_slow)."""
        found: list = []
        for unit, costs in (("rank", cost_rank), ("host", cost_host)):
            per: dict = {}
            inside: dict = {}
            for i, (u, c) in enumerate(costs):
                j = step_of.get(i)
                if j is None or c <= 0:
                    continue
                per.setdefault(u, [0] * len(spans))[j] += c
                if i not in busy:
                    inside.setdefault(u, [0] * len(spans))[j] += c
            for u, cs in per.items():
                shares = [c / d if d > 0 else 0.0 for c, d in zip(cs, dur)]
                end = slowness.last_slow(shares)
                if end is not None:  # its newest slowdown's last slow step, ended or not (watch --follow's end): the
                    # last call it made the others wait for there, when its slow work (or its late leaving) ended
                    at = max(i for i in range(*spans[end]) if costs[i][0] == u and costs[i][1] > 0)
                    last_slow[f"{unit}:{u}"] = latest[at]
                v = slowness.judge(shares)
                if not v.slow:
                    lean = slowness.under_floor(shares)
                    if lean is not None:
                        under.append({"unit": unit, "rank": u if unit == "rank" else None, "pg": name, "desc": desc,
                                      "ranks": [u] if unit == "rank" else [r for r in ranks if host_of.get(r) == u],
                                      "host": host_of.get(u) if unit == "rank" else u, "share": round(lean.share, 4),
                                      "steps": lean.samples, "consistent": round(lean.consistent, 4),
                                      "step_us": out["step_us"], "floor": slowness.FLOOR,
                                      "under_floor": round(slowness.FLOOR * slowness.UNDER_FLOOR, 4)})
                    continue
                total = sum(cs[v.since:])
                s0 = spans[v.since][0]
                found.append({
                    "unit": unit, "rank": u if unit == "rank" else None,
                    "ranks": [u] if unit == "rank" else [r for r in ranks if host_of.get(r) == u],
                    "host": host_of.get(u) if unit == "rank" else u, "pg": name, "desc": desc,
                    "cost_us": round(_median(cs[v.since:]) / 1e3, 1), "share": round(v.share, 4),
                    "steps": v.samples, "consistent": round(v.consistent, 4), "step_us": out["step_us"],
                    # it began after the call before its first late one: its slow work (or its late leaving) then
                    "since_seq": seqs[s0], "since_ns": latest[s0 - 1] if s0 else latest[s0],
                    "before_window": v.since == 0,
                    "last_ns": last_slow.get(f"{unit}:{u}"),
                    "inside": round(sum((inside.get(u) or [0] * len(spans))[v.since:]) / total, 4) if total else 0.0,
                    "per_step": cs,  # (dropped below) what it cost each step: the rest of the job's slowdown
                    "since_step": v.since,  # (dropped below) its first slow step
                })
        return found

    # a unit late at the same collectives as another named one costs the job only its lead over it there (a compute
    # straggler whose lateness a slow host's matches reads as nothing): the named units set aside, the others are
    # judged again against the rest, up to PASSES times
    found, aside = judged(cost_rank, cost_host, out["last_slow"]), set()
    out["under_floor"] = list(under)
    for _ in range(PASSES - 1):
        aside |= {r for f in found for r in f["ranks"]}
        rest = [r for r in ranks if r not in aside]
        if not found or len(rest) < 2 or len(rest) == len(ranks):
            break
        again: dict = {}
        new = [f for f in judged(*_costs(a, rest, host_of, err, k)[1:], again)
               if not any(f["unit"] == g["unit"] and f["ranks"] == g["ranks"] for g in found)]
        if not new:
            break
        out["last_slow"].update({key: ns for key, ns in again.items() if any(
            key == f"{f['unit']}:{f['rank'] if f['unit'] == 'rank' else f['host']}" for f in new)})
        found.extend(new)
    found = [_own_rank(f, a, host_of, step_of, spans, dur) if f["unit"] == "host" and not any(
        g["unit"] == "rank" and g["host"] == f["host"] for g in found) else f for f in found]
    for f in found:  # --follow dates its end by the unit's newest slow step: the host's, now the rank's
        if f.get("over_host") and f"host:{f['host']}" in out["last_slow"]:
            out["last_slow"][f"rank:{f['rank']}"] = out["last_slow"][f"host:{f['host']}"]
    for f in found:  # told only where a measure placed the steps: the longest gap is a guess, reversed when a
        # step's collectives outlast its compute (issue 65); then the finding says why it is not told
        f["kind"] = ("communication" if f["inside"] >= COMM_SHARE else "compute") if untold is None else UNTOLD_KIND
        if untold is not None:
            f["untold"] = untold
    out["found"] = _explained(found)
    # the job against its own best, among steps of the newest step's kind (its collectives): an evaluation pass's
    # steps are other collectives, shorter or longer, and no reference for training's
    kinds = [tuple(sigs[s:e]) for s, e in spans]
    alike = [j for j, kd in enumerate(kinds) if kd == kinds[-1]]
    best, lost = slowness.own_best_shares([dur[j] for j in alike])
    jv = slowness.judge(lost, floor=slowness.JOB_FLOOR)
    out["job"] = {"slower": jv.slow, "best_step_us": round(best / 1e3, 1) if best else None,
                  "step_us": out["step_us"], "share": round(jv.share, 4), "floor": slowness.JOB_FLOOR,
                  **({"since_seq": seqs[spans[alike[jv.since]][0]], "since_ns": latest[spans[alike[jv.since]][0]],
                      "steps": jv.samples} if jv.slow else {})}
    # the job's slowdown that the named units do not cost it (a slow link's, which slows every rank alike), with its
    # own start: a link found slow beside a straggler is dated by it, not by the straggler's start
    costs = [sum(f["per_step"][j] for f in out["found"]) for j in range(len(spans))]
    if any(costs):
        _, rest = slowness.own_best_shares([dur[j] - costs[j] for j in alike])
        rv = slowness.judge(rest, floor=slowness.JOB_FLOOR)
        out["job"]["rest"] = {"slower": rv.slow, "share": round(rv.share, 4),
                              **({"since_seq": seqs[spans[alike[rv.since]][0]],
                                  "since_ns": latest[spans[alike[rv.since]][0]]} if rv.slow else {})}
    for f in found:
        f.pop("per_step", None)
        f.pop("since_step", None)
    work = {}
    for r in ranks:
        waited = [0] * len(spans)
        for i in range(spans[0][0], spans[-1][1]):
            waited[step_of[i]] += latest[i] - a[r][i]
        work[r] = [max(0, d - w) for d, w in zip(dur, waited)]
    sc = slowness.scores(work)
    recent = spans[-slowness.MIN_SAMPLES][0]
    mine = {}
    for i in range(recent, spans[-1][1]):
        u, c = cost_rank[i]
        mine[u] = mine.get(u, 0) + c
    span_ns = latest[spans[-1][1]] - latest[recent]
    out["scores"] = {r: {**sc.get(r, {}), "share": round(mine.get(r, 0) / span_ns, 4) if span_ns > 0 else 0.0}
                     for r in ranks}
    return out


def _own_rank(f: dict, a: dict, host_of: dict, step_of: dict, spans: list, dur: list) -> dict:
    """A host named with none of its ranks is its one rank's finding when that rank alone makes the host late: it
    arrives after its own host's other ranks by the floor's share of a step, consistently (the rule), over the host's
    slow steps. The lead is read on one clock (no error between two hosts), and a cause the host's ranks share (a CPU
    quota, a slow link) makes them late together, so it leads over none of them consistently. A rank whose lead over
    the next-latest rank of the job dips under the floor in a few steps (the others' jitter), while its host's lead
    over the other hosts does not, is that rank, never "host h2 (ranks 2, 3)" (issue 65: its host-mate was on time)."""
    mates = f["ranks"]
    if len(mates) < 2:
        return f
    lead: dict = {r: [0] * len(spans) for r in mates}
    for i in range(spans[0][0], spans[-1][1]):
        col = sorted(((a[r][i], r) for r in mates), reverse=True)
        lead[col[0][1]][step_of[i]] += col[0][0] - col[1][0]
    since = f["since_step"]
    own = [r for r in mates if slowness.judge([c / d if d > 0 else 0.0 for c, d in
                                               zip(lead[r][since:], dur[since:])]).slow]
    if len(own) != 1:
        return f
    return {**f, "unit": "rank", "rank": own[0], "ranks": own, "over_host": True}


def _explained(found: list) -> list:
    """A host named beside one of its ranks that explains at least half of its share is that rank's finding."""
    ranks = [f for f in found if f["unit"] == "rank"]
    keep = list(ranks)
    for f in found:
        if f["unit"] == "host" and not any(r["host"] == f["host"] and r["share"] >= 0.5 * f["share"] for r in ranks):
            keep.append(f)
    return sorted(keep, key=lambda f: -f["share"])


def analyse(dumps: dict, hosts: dict, clocks: Optional[dict] = None, phases: Optional[dict] = None,
            unjudged: Iterable = (), sampling: Optional[list] = None) -> dict:
    """The report's `slow` section from {rank: flight.RankDump}, {rank: host name}, the measured clock offsets
    {rank: {"offset_ns", "err_ns"}} (watch; None: not measured) and watch's phase samples {rank: {pg: rows}}
    (postmortem/phase.py; None: not sampled). unjudged: the job's ranks whose flight recorder could not be read (no
    answer, no dump): a verdict on the others never speaks for them. sampling: what each rank watch asked to sample
    answered (live/straggle.Sampled.asked): a refused, unanswered or trimmed sampling is a finding about the measure
    (`measure`), and it is why a finding's kind is not told when no samples arrived."""
    clocks, phases = clocks or {}, phases or {}
    names = sorted({n for d in dumps.values() for n in d.groups}, key=lambda n: (n != flight.DEFAULT_PG, n))
    groups, found, under = [], [], []
    host_of = {r: (hosts.get(r) or f"rank {r}'s host") for r in dumps}
    clock_used: dict = {}
    for name in names:
        ranks = sorted(r for r, d in dumps.items()
                       if name in d.groups and (d.groups[name].colls or d.groups[name].calls))
        if len(ranks) < 2:
            continue
        seqs, arr = _window(dumps, name, ranks)
        if len(seqs) < MIN_WINDOW:
            groups.append({"pg": name, "ranks": len(ranks), "collectives": len(seqs),
                           "why": f"{len(seqs)} collectives every rank recorded: the rule needs {MIN_WINDOW}"})
            continue
        ref = dumps[ranks[0]].groups[name]
        sigs = [_sig(ref, q) for q in seqs]
        cut = pattern(sigs)[1]  # the job's start before its pattern: set aside (the group's "set_aside")
        seqs, sigs, arr = seqs[cut:], sigs[cut:], {r: ts[cut:] for r, ts in arr.items()}
        ops = {flight._op(k[0])[1] for k in sigs}
        backends = {dumps[r].backend for r in ranks}
        backend = backends.pop() if len(backends) == 1 else None
        off, err, used = _clocks(arr, host_of, clocks, ops, backend)
        clock_used = clock_used or used
        timed = [[dumps[r].groups[name].colls[q] for r in ranks] for q in seqs] \
            if all(dumps[r].timing and all(q in dumps[r].groups[name].colls for q in seqs) for r in ranks) else None
        g = _group(name, ref.desc, arr, seqs, sigs, host_of, off, err, _work(phases, name, ranks), timed)
        if cut:
            g["set_aside"] = cut  # the oldest collectives of the window, before the job's pattern began
        for f in g["found"]:
            if f.get("untold"):  # what would tell its kind depends on it: gloo records no collective's own time
                f["backend"] = backend
        found.extend(g.pop("found"))
        under.extend(g.pop("under_floor", None) or [])
        groups.append(g)
    best: dict = {}
    for f in sorted(found, key=lambda f: -f["share"]):  # a unit named in several groups: its largest share
        best.setdefault((f["unit"], f["rank"] if f["unit"] == "rank" else f["host"]), f)
    named = sorted(best.values(), key=lambda f: -f["share"])
    measure = [dict(a) for a in (sampling or []) if a.get("error") or a.get("dropped")][:MAX_REPORT_ROWS]
    for f in named:
        if f.get("untold") and measure:
            f["sampling"] = measure[:4]  # the measure that failed it, said with its kind
    last_slow: dict = {}
    for g in groups:
        for k, ns in (g.pop("last_slow", None) or {}).items():
            last_slow[k] = max(ns, last_slow.get(k, ns))
    main = next((g for g in groups if g.get("job")), None)
    ranks = []
    if main is not None:
        ranks = [{"rank": r, "host": hosts.get(r), **s} for r, s in sorted(main.pop("scores").items())]
    for g in groups:
        g.pop("scores", None)
    # a unit late under the floor that is not also named (in another group, or as its host): said only when nothing is
    named_units = {u for f in named for u in [(f["unit"], f["rank"] if f["unit"] == "rank" else f["host"]),
                                                *(("rank", r) for r in f.get("ranks") or [])]}
    lean_hosts = {f["host"] for f in under if f["unit"] == "rank"}  # a host late through its late rank: that rank
    leaning = sorted((f for f in under if (f["unit"], f["rank"] if f["unit"] == "rank" else f["host"])
                      not in named_units and not (f["unit"] == "host" and f["host"] in lean_hosts)),
                     key=lambda f: -f["share"])[:MAX_REPORT_ROWS]
    return {"floor": slowness.FLOOR, "job_floor": slowness.JOB_FLOOR, "consistent": slowness.CONSISTENT,
            "min_steps": slowness.MIN_SAMPLES, "clock": clock_used, "groups": groups, "named": named,
            "under_floor": leaning,
            "last_slow": dict(sorted(last_slow.items(), key=lambda kv: -kv[1])[:MAX_REPORT_ROWS]),
            "job": main["job"] if main else None, "pg": main["pg"] if main else None,
            "ranks": ranks[:MAX_REPORT_ROWS], "unjudged": _unjudged(unjudged, dumps), "measure": measure}


def _unjudged(ranks: Iterable, dumps: dict) -> dict:
    """{"count", "ranks" (the first MAX_REPORT_ROWS)} of the ranks not judged for want of their flight recorder."""
    out = sorted({r for r in ranks if r not in dumps})
    return {"count": len(out), "ranks": out[:MAX_REPORT_ROWS]}


FIX_COMPUTE = ("find what {who} does before each collective that the others do not: CPU contention or a CPU quota "
               "on its host (other processes, a cgroup's cpu.max, `top -H`), its data loader, a slower or throttled "
               "GPU (`nvidia-smi -q -d PERFORMANCE,CLOCK`), host-to-device copies or synchronisation it alone does")
FIX_COMMUNICATION = ("check {who}'s links: the NIC's negotiated speed (`ethtool <if>`), traffic shaping (`tc qdisc "
                     "show dev <if>`), the switch port's errors; `ncclcheck links` on the job's nodes measures them "
                     "once the job stops")


def fix_for(found: list, look: str = "diagnose") -> str:
    """Each finding's fix, once per kind: the compute fix naming its units, the links fix naming its hosts, and for a
    kind not told (UNTOLD_KIND) why this look could not tell it and what would (render/slow.untold_fix: from the
    finding's "untold", its group's backend and `look`, the look that made the report), never one of the two
    guessed."""
    untold = [f for f in found if f.get("kind") == UNTOLD_KIND]
    compute = [f for f in found if f.get("kind") == "compute" and f.get("unit") != "link"]
    comm = [f for f in found if f not in compute and f not in untold]
    parts = []
    alike: dict = {}  # findings untold for the same reason on the same backend: one fix naming them all
    for f in untold:
        alike.setdefault((f.get("untold"), f.get("backend")), []).append(f.get("who") or words.who(f))
    for (why, backend), who in alike.items():
        parts.append(words.untold_fix(", ".join(dict.fromkeys(who)), why, backend, look))
    if compute:
        parts.append(FIX_COMPUTE.format(who=", ".join(dict.fromkeys(f.get("who") or words.who(f) for f in compute))))
    if comm:
        hosts = sorted({h for f in comm for h in (f["host"] if isinstance(f.get("host"), list) else
                                                  [f["host"]] if f.get("host") else f.get("hosts", []))})
        parts.append(FIX_COMMUNICATION.format(who=", ".join(hosts) or "the named hosts"))
    return "; and ".join(parts)


def check(check_id: str, section: Optional[dict], also: tuple = (), node_of: Optional[dict] = None,
          look: Optional[str] = None) -> CheckResult:
    """`postmortem.slow` (diagnose) / `live.slow` (watch): fail naming every slow unit (and `also`: watch's links
    findings), each a finding of its own; pass saying what was judged; skip when nothing could be. node_of: {host:
    node index} for the report's nodes (evidence.nodes: the kubectl labels of the named hosts). look: what read the
    recorders (render/slow.LOOKS: "diagnose", "watch", "watch --follow"; default by check_id), so that a fix never
    tells the user to run what just ran."""
    look = look or ("watch" if check_id == "live.slow" else "diagnose")
    if not section or not any(g.get("steps") for g in section.get("groups", [])):
        why = next((g["why"] for g in (section or {}).get("groups", []) if g.get("why")),
                   "no process group with call times from two ranks or more")
        return skipped(check_id, f"not judged: {why}")
    found = [*section.get("named", []), *also]
    ev = {k: section.get(k) for k in ("floor", "job_floor", "consistent", "min_steps", "pg")}
    ev["clock"] = (section.get("clock") or {}).get("source")
    if section.get("stale"):
        ev["stale"] = section["stale"]
    measure = [words.measure(m) for m in section.get("measure") or []]
    if measure:
        ev["measure"] = section["measure"]
    detail = "\n".join([f"{words.floors(section)}; {words.clock(section)}; {words.steps(section)}", *measure])
    if found:
        texts = [*(words.link_finding(f) if f.get("unit") == "link" else words.finding(f) for f in found), *measure]
        hosts = sorted({h for f in found for h in ([f["host"]] if f.get("host") else f.get("hosts", []))})
        ev.update(named=found, **({"nodes": sorted(node_of[h] for h in hosts if h in node_of)} if node_of else {}))
        if (section.get("unjudged") or {}).get("count"):
            ev["unjudged"] = section["unjudged"]
        return failed(check_id, texts[0], detail="\n".join([*texts[:len(found)], detail]), findings=tuple(texts),
                      fix=fix_for(found, look), evidence=ev)
    g = next(g for g in section["groups"] if g.get("steps"))
    job = words.job(section.get("job"))
    said = (f"no rank or host calls collectives late consistently ({g['steps']} steps of {words.group(g)} "
            f"judged{'; ' + job if job else ''})")
    unjudged = section.get("unjudged") or {}
    if unjudged.get("count"):  # unmeasured is never healthy: the ranks not read may be the slow ones
        ev["unjudged"] = unjudged
        said = f"{said}, among the {g['ranks']:,} ranks read; {words.unjudged(unjudged, section.get('stale'))}"
        return warned(check_id, said, detail=detail, evidence=ev, findings=(said, *measure) if measure else ())
    lean = section.get("under_floor") or []
    if lean:  # late step after step, under the floor that names a unit: said with its share, never a silent pass
        texts = [words.under_floor(f) for f in lean]
        ev["under_floor"] = lean
        return warned(check_id, texts[0], detail="\n".join([*texts, said, detail]), findings=(*texts, *measure),
                      fix=words.UNDER_FLOOR_FIX.format(who=", ".join(words.who(f) for f in lean)), evidence=ev)
    probe = section.get("probe") or {}
    if probe.get("unmeasured") and (section.get("job") or {}).get("slower"):
        # the job runs slower than its best and the probe that would name a slow link could not measure all of
        # them: unmeasured, never healthy
        said = f"{said}; {words.probe_unmeasured(probe)}"
        return warned(check_id, said, detail=detail, evidence=ev, findings=(said, *measure) if measure else ())
    # a measure refused or trimmed is said beside the verdict (on the console too), whatever the verdict
    return passed(check_id, said, detail=detail, evidence=ev, findings=(said, *measure) if measure else ())


def clock_of(doc: dict, rank: int) -> Optional[dict]:
    """The clock offset watch measured for this rank's host and wrote into its --dump (flight.LIVE_KEY "clock"):
    {"offset_ns", "err_ns"}, None when there is none or it is not two bounded integers."""
    me = doc.get(flight.LIVE_KEY) if isinstance(doc, dict) else None
    c = me.get("clock") if isinstance(me, dict) and me.get("rank") == rank else None
    if isinstance(c, dict) and type(c.get("offset_ns")) is int and type(c.get("err_ns")) is int \
            and abs(c["offset_ns"]) < MAX_OFFSET_NS and 0 <= c["err_ns"] < MAX_OFFSET_NS:
        return {"offset_ns": c["offset_ns"], "err_ns": c["err_ns"]}
    return None
