"""The words of a slow job's verdict (postmortem/slow.py's findings, watch's probe of the suspects' links): one
sentence per finding, the same in watch, diagnose and every format. Formats only: every number comes from the
finding."""

from __future__ import annotations

import datetime as _dt
from typing import Optional

from ..units import format_bytes, format_us


def when(ns: Optional[int]) -> str:
    """A call time (ns since the epoch, the watcher's clock) as local 'HH:MM:SS'; '?' when not one."""
    if type(ns) is not int or not 0 < ns < 1 << 62:
        return "?"
    return _dt.datetime.fromtimestamp(ns / 1e9).strftime("%H:%M:%S")


def pct(share: float) -> str:
    return f"{100 * share:.0f} %" if share >= 0.1 else f"{100 * share:.1f} %"


def who(f: dict) -> str:
    """'rank 5 (host h3)', 'host h2 (ranks 2, 3)'."""
    if f.get("unit") == "rank":
        return f"rank {f['rank']}" + (f" (host {f['host']})" if f.get("host") else "")
    ranks = f.get("ranks") or []
    shown = ", ".join(str(r) for r in ranks[:6]) + (f" and {len(ranks) - 6} more" if len(ranks) > 6 else "")
    return f"host {f['host']}" + (f" (rank{'s' if len(ranks) != 1 else ''} {shown})" if ranks else "")


def group(f: dict) -> str:
    desc = f.get("desc")
    return desc if desc and desc != "undefined" else f"process group {f.get('pg')}"


def finding(f: dict) -> str:
    """One named unit: who, what it costs per step and as a share of the step, since when, and why this kind."""
    verb = "leaves collectives late" if f.get("kind") == "communication" else "calls collectives late"
    text = (f"{who(f)} {verb}: {format_us(f.get('cost_us') or 0)} per step, {pct(f.get('share') or 0)} of the job's "
            f"{format_us(f.get('step_us') or 0)} step, in {pct(f.get('consistent') or 0)} of {f.get('steps')} steps "
            f"since {'at least ' if f.get('before_window') else ''}{when(f.get('since_ns'))} (collective "
            f"#{f.get('since_seq')} of {group(f)}{', the oldest recorded step' if f.get('before_window') else ''})")
    probe = f.get("probe")
    if f.get("kind") == "untold":
        why = untold(f)
    elif f.get("kind") == "communication":
        why = ("communication: its links measure slow: " + probe["said"]) if probe and probe.get("said") and \
            f.get("host") in (probe.get("hosts") or []) + [h for pr in probe.get("pairs") or [] for h in pr] else \
            ("communication: its lateness shows where no work separates two collectives (it left the one before "
             "late)" + (f"; {links_seen(probe, f.get('host'))} ({probe['said']})" if probe and
                        probe.get("said") else ""))
    else:
        why = "compute: it works longer than the others before each call"
        slow = [*(probe.get("hosts") or []), *(f"{a} -> {b}" for a, b in probe.get("pairs") or [])] if probe else []
        mine = f.get("host") in [*(probe or {}).get("hosts", []), *(h for pr in (probe or {}).get("pairs", [])
                                                                     for h in pr)]
        if probe and probe.get("rounds") and mine:
            why += (f"; its host's transfers measure slow too ({probe['said']}), served by its ranks' own processes: "
                    "the CPU they lack, not its link (its lateness falls where the ranks work, not inside their "
                    "collectives)")
        elif probe and probe.get("rounds"):
            why += f"; {links_seen(probe, f.get('host'))}" + (
                f"; {', '.join(slow)} measure{'s' if len(slow) == 1 else ''} slow: another finding" if slow else "")
    return f"{text}: {why}{_explains(f.get('explains'))}"


def under_floor(f: dict) -> str:
    """A unit late consistently under the floor that names one (checks/slowness.under_floor)."""
    share, floor = f.get('share') or 0, f.get('floor') or 0
    cost = pct(share) if pct(share) != pct(floor) else f"{100 * share:.2f} %"  # 4.98 % is not the 5.0 % floor
    return (f"{who(f)} calls collectives late step after step, under the floor: it costs the job "
            f"{cost} of its {format_us(f.get('step_us') or 0)} step (median), at least "
            f"{pct(f.get('under_floor') or 0)} in {pct(f.get('consistent') or 0)} of the newest {f.get('steps')} steps "
            f"of {group(f)}; a rank or host is named slow from {pct(floor)}, and jitter makes a rank "
            "this late in few steps, not most")


UNDER_FLOOR_FIX = ("confirm it on {who}: `ncclcheck watch --follow` looks every few seconds and names it once it "
                   "costs the floor; NCCL with TORCH_NCCL_ENABLE_TIMING=1 gives each collective's own time, and "
                   "`py-spy dump --pid <pid>` on that rank shows what it does before its calls")


UNTOLD = {  # postmortem/slow.py's reasons a finding's kind is not told
    "not sampled": "where the ranks work outside collectives was not measured",
    "too few": "too few samples of where the ranks work outside collectives to place its steps",
    "no pattern": "one collective a step: its lateness falls after its work whether it computes or left the "
                  "collective before late, and no collective's own time was recorded",
}


def untold(f: dict) -> str:
    """Why a finding's kind (compute or communication) is not told, with the measure that failed it."""
    failed = "; ".join(measure(m) for m in (f.get("sampling") or [])[:2])
    gap = "" if f.get("untold") == "no pattern" else (
        "; its steps were cut at the longest gap between calls, which falls after the step's longest collective "
        "when its communication outlasts its compute")
    probe = f.get("probe") or {}
    mine = f.get("host") in [*(probe.get("hosts") or []), *(h for pr in probe.get("pairs") or [] for h in pr)]
    seen = (f"; its host's transfers measure slow ({probe['said']}): its link, or a CPU too short to serve them"
            if mine and probe.get("said") else
            f"; {links_seen(probe, f.get('host'))} ({probe['said']})" if probe.get("said") else "")
    return (f"compute or communication not told: {UNTOLD.get(f.get('untold'), 'not measured')}"
            f"{' (' + failed + ')' if failed else ''}{gap}{seen}")


LOOKS = ("diagnose", "watch", "watch --follow")  # what read the recorders a verdict comes from (slow.check's look)

UNTOLD_LOOK = {  # why this look could not tell a late unit's kind, by its finding's "untold" (None: the look's own)
    "no pattern": "this look saw one collective a step, and a rank late at every call is late after its work "
                  "whether it computed longer or left the collective before late",
    "too few": "this look sampled too few of the ranks' steps to place where in a step they work",
    ("not sampled", "diagnose"): "these recorders hold no samples of where the ranks work (watch samples them "
                                 "while the job runs; a dump the job wrote has none)",
    "not sampled": "this look's sampling of where the ranks work got no samples (said beside the verdict)",
}


def untold_fix(who_: str, why: Optional[str], backend: Optional[str], look: str) -> str:
    """The fix of a unit whose kind (compute or communication) is not told, from what the look measured: why it
    could not tell (the finding's "untold"; gloo records no collective's own time) and what would: each
    collective's own GPU time (NCCL with TORCH_NCCL_ENABLE_TIMING=1), py-spy on the late rank, and a longer look
    where samples were missing (never the look that just ran)."""
    said = UNTOLD_LOOK.get((why, look)) or UNTOLD_LOOK.get(why) or "this look measured nothing of where the ranks work"
    if backend == "gloo":
        said += "; gloo records no collective's own time"
        timing = "the same job on NCCL with TORCH_NCCL_ENABLE_TIMING=1 (the flight recorder then holds each " \
                 "collective's own GPU time)"
    elif backend == "nccl":
        said += "; the job's NCCL recorder holds no collective's own time without TORCH_NCCL_ENABLE_TIMING=1"
        timing = "TORCH_NCCL_ENABLE_TIMING=1 in the job's environment (each collective's own GPU time)"
    else:
        timing = "NCCL with TORCH_NCCL_ENABLE_TIMING=1 (each collective's own GPU time)"
    would = [timing, f"`py-spy dump --pid PID` on {who_}, a few times (in its own code, or waiting inside the "
                     "collective)"]
    if why != "no pattern":  # samples of where the ranks work place a repeating step; one collective a step, never
        if look == "diagnose":
            would.append("`ncclcheck watch --follow` while the job runs (it samples where the ranks work, every "
                          "look)")
        elif look == "watch":
            would.append("a longer look: `ncclcheck watch --follow` samples again at every look")
    listed = "; ".join(would[:-1]) + f"; or {would[-1]}" if len(would) > 1 else would[0]
    return (f"tell whether {who_} computes or communicates late: {said}. What tells them apart: {listed}; then the "
            "verdict's fix names its CPU, data loader or GPU, or its links")


def measure(m: dict) -> str:
    """One sampled rank's measure of where it works that failed or was cut (live/straggle.Sampled.asked)."""
    who_ = "watch" if m.get("rank") is None else f"rank {m['rank']}" + (f" (host {m['host']})" if m.get("host") else "")
    asked = f"{format_bytes(m.get('asked_bytes') or 0)} or {m.get('asked_items') or 0:,} values asked"
    if m.get("error"):
        return f"{who_}: its sampling of where it works got no samples: {m['error']} ({asked})"
    return (f"{who_}: its sampling of where it works lacks its {m.get('dropped'):,} oldest rows, over the "
            f"{asked} ({m.get('rows') or 0:,} rows kept)")


def _explains(units: Optional[list]) -> str:
    """What a slow link explains: the units that leave collectives late elsewhere (its consequence), and why."""
    if not units:
        return ""
    names = ", ".join(who(u) for u in units[:4]) + (f" and {len(units) - 4} more" if len(units) > 4 else "")
    one = len(units) == 1
    return (f"; it explains {names} leaving collectives late ({'its' if one else 'their'} own links measure like the "
            f"others', {'its' if one else 'their'} lateness falls where no work separates two collectives: "
            f"{'it waits' if one else 'they wait'} for data that crosses the slow link)")


def link_finding(p: dict) -> str:
    """The probe named a host or link that no named rank sits on: communication, with what it measured, said beside
    the ranks named (if any: each its own finding), with what it explains."""
    hosts = [h for h in p.get("hosts") or [] if not any(h in pr for pr in p.get("pairs") or [])]
    what = (f"host{'s' if len(hosts) > 1 else ''} {', '.join(hosts)}'s link{'s' if len(hosts) > 1 else ''} "
            f"measure{'' if len(hosts) > 1 else 's'} slow" if hosts else
            f"the link{'s' if len(p.get('pairs') or []) > 1 else ''} "
            f"{'; '.join(f'{a} -> {b}' for a, b in (p.get('pairs') or [])[:4])} measure"
            f"{'' if len(p.get('pairs') or []) > 1 else 's'} slow")
    besides = p.get("besides") or []
    text = f"{what} while the job runs: communication: {p['said']}"
    if p.get("job_slower"):
        text += (f"; the job's steps are {pct(p.get('job_share') or 0)} slower than its best stretch since "
                 f"{when(p.get('since_ns'))}")
    elif p.get("step_us"):  # probed with nobody named: a communication-bound job's pace (live/straggle._suspects)
        text += (f"; the job steps in {format_us(p['step_us'])} across the recorder's whole window, no stretch of it "
                 f"faster: slow since before the window, or from the job's start")
    if besides:
        text += f"; {', '.join(besides[:4])} late besides: another finding"
    elif not p.get("explains"):
        text += "; every rank calls collectives in time"
    return text + _explains(p.get("explains"))


def slowdown(s: dict) -> str:
    """One slowdown --follow saw, with its start and end (the times of its first and last slow step)."""
    end = f"to {when(s.get('end_ns'))}" if s.get("end_ns") else "still slow at the end"
    return f"{s.get('who')} ({s.get('kind')}) from {when(s.get('start_ns'))} {end}: {s.get('text')}"


def slowdown_end(s: dict, why: str = "") -> str:
    """--follow's line when a slowdown ended: its last slow step's time (and why it is said now)."""
    return (f"{when(s.get('end_ns'))} slowdown ends: {s.get('who')} (its last slow step; slow since "
            f"{when(s.get('start_ns'))}{'; ' + why if why else ''})")


def steps(section: dict) -> str:
    """How the main group's steps were found (a measure of where the ranks work, or the gaps alone)."""
    g = next((g for g in section.get("groups", []) if g.get("pg") == section.get("pg")), None)
    return f"steps: {g['steps_by']}" if g and g.get("steps_by") else "steps: not found"


def job(j: Optional[dict]) -> str:
    """The job against its own best stretch, said beside a verdict that names nobody."""
    if not j or not j.get("best_step_us"):
        return ""
    if j.get("slower"):
        return (f"the job's steps ({format_us(j['step_us'])}) are {pct(j['share'])} slower than its best stretch "
                f"({format_us(j['best_step_us'])}) since {when(j.get('since_ns'))}, every rank calling in time: "
                "not named (an evaluation pass is slower too; a slow link is named by watch's probe)")
    return f"steps of {format_us(j['step_us'])} (its best stretch: {format_us(j['best_step_us'])})"


def floors(section: dict) -> str:
    return (f"named only when it costs at least {pct(section.get('floor') or 0)} of each step in "
            f"{pct(section.get('consistent') or 0)} of every {section.get('min_steps')} steps since it began; the "
            f"job against its own best: {pct(section.get('job_floor') or 0)}")


def clock(section: dict) -> str:
    c = section.get("clock") or {}
    src = c.get("source") or "?"
    if src == "measured":
        errs = [h.get("err_us") or 0 for h in (c.get("hosts") or {}).values()]
        return f"host clocks measured (largest error {format_us(max(errs, default=0))})"
    if src == "records":
        return "host clocks read from the records' own order (not measured)"
    return src


def links_seen(probe: dict, host) -> str:
    """What the probe says of a host it did not name slow: measured like the others, or not measured at all."""
    if host in (probe.get("unmeasured_hosts") or []):
        return "its host's links were not measured (no transfer of it gave its link's rate)"
    return "its host's links measure like the others'"


def probe(p: dict) -> str:
    """What the TCP probe between the hosts measured while the job ran: the slow host or link, or that they measure
    alike; and what it cost (rounds, bytes, seconds)."""
    cost = _cost(p)
    if p.get("hosts"):
        one = len(p["hosts"]) == 1
        return (f"host{'' if one else 's'} {', '.join(p['hosts'])} sen{'ds' if one else 'd'} at "
                f"{_rate(p.get('slow_bps'))} against {_rate(p.get('ref_bps'))} between the other hosts ({cost})")
    if p.get("pairs"):
        shown = "; ".join(f"{a} -> {b}" for a, b in p["pairs"][:4])
        return (f"the link{'s' if len(p['pairs']) > 1 else ''} {shown} carr{'ies' if len(p['pairs']) == 1 else 'y'} "
                f"{_rate(p.get('slow_bps'))} against {_rate(p.get('ref_bps'))} elsewhere ({cost})")
    if p.get("unconfirmed"):
        return (f"{', '.join(p['unconfirmed'][:4])} measured slow in some rounds, not consistently: nothing named "
                f"({_rate(p.get('ref_bps'))}; {cost})")
    gone = p.get("unmeasured_hosts") or []
    if gone:
        n = (p.get("n_hosts") or 0) - len(gone)
        return (f"host{'s' if len(gone) > 1 else ''} {', '.join(gone[:4])} not measured: none of "
                f"{'their' if len(gone) > 1 else 'its'} transfers gave a link's rate; the other {n} "
                f"host{'s' if n != 1 else ''} measure alike ({_rate(p.get('ref_bps'))}; {cost})")
    return f"every pair of the {p.get('n_hosts')} hosts measures alike ({_rate(p.get('ref_bps'))}; {cost})"


def probe_unmeasured(p: dict) -> str:
    """A job slower than its best whose links the probe could not all measure: what was not, and why."""
    gone = p.get("unmeasured") or []
    return (f"the probe of its links could not measure {len(gone)} direction{'s' if len(gone) != 1 else ''} in a "
            f"round or more ({gone[0]['from']} -> {gone[0]['to']}: {gone[0]['why']}): a slow link may be unnamed; "
            "watch again in a minute (a responder refuses a probe past its CPU share)") if gone else ""


def _cost(p: dict) -> str:
    n = p.get("rounds") or 1
    gone = p.get("unmeasured") or []
    return (f"TCP probe while the job runs: {n} round{'s' if n != 1 else ''} of {format_bytes(p.get('bytes') or 0)} "
            f"per direction, {format_bytes(p.get('moved') or 0)} in {p.get('took_s') or 0:.1f} s"
            + (f"; {len(gone)} direction{'s' if len(gone) != 1 else ''} not measured in a round or more "
               f"({gone[0]['from']} -> {gone[0]['to']}: {gone[0]['why']})" if gone else ""))


def _rate(bps) -> str:
    if not isinstance(bps, (int, float)) or bps <= 0:
        return "?"
    return f"{bps / 1e6:.1f} MB/s" if bps < 1e9 else f"{bps / 1e9:.2f} GB/s"


def unjudged(u: dict, stale: Optional[list] = None) -> str:
    """The ranks a slow verdict could not speak for (no flight recorder read, or one read stale): "N rank(s) not
    judged: ranks a, b and M more (no flight recorder read: no answer in time, or no dump; rank 0's was 12.3 s
    old: its responder, past its CPU share, sent the last one it built)"."""
    shown = u.get("ranks") or []
    n = u.get("count") or len(shown)
    listed = ", ".join(str(r) for r in shown[:6]) + (f" and {n - len(shown[:6]):,} more" if n > len(shown[:6]) else "")
    why = "no flight recorder read: no answer in time, or no dump"
    if stale:
        olds = ", ".join(f"rank {s['rank']}'s {s['built_s']:.1f} s" for s in stale[:4])
        why += (f"; recorders sent old ({olds}{' and more' if len(stale) > 4 else ''}): a responder past its CPU "
                "share sends the last one it built; ask again in a few seconds")
    return f"{n:,} rank(s) not judged: {listed} ({why})"
