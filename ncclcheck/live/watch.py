"""`ncclcheck watch`: every armed rank's flight recorder, stacks and progress fetched live, then diagnose's analysis
on them -> the rank, host, process group, collective and cause, while the job still runs (the job is left alone).

1. the ranks' addresses, from the job's store (wire.PREFIX; signed with the job's key when there is one);
2. every rank asked at once for everything (one bound for all: Budget.live_fetch_s), a rank that does not answer
   kept as evidence, with why;
3. Budget.live_confirm_s later, every rank asked for its progress again: a job whose counters moved is making
   progress (exit 0); one whose counters stayed frozen is analysed with postmortem/analyze.py, the same analysis
   `diagnose` runs on dumps (exit 1 with the cause it names).
`--dump DIR` writes what was fetched as flight-recorder JSON files (each with the rank's own word: host, stacks) that
`ncclcheck diagnose DIR` reads to the same answer. `--follow` looks every Budget.live_follow_poll_s and speaks once
progress has stopped for Budget.live_stall_s.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, Optional

from ..agent.limits import spaced_collector
from ..checks.postmortem import PostmortemInput
from ..checks.registry import POSTMORTEM, run_checks
from ..config import Config
from ..facts import munge
from ..model import CheckResult, NodeInfo, Report, Status, WorldInfo, failed, passed, skipped, warned
from ..postmortem import flight
from ..postmortem.analyze import GARBAGE, analyse, ranks_text
from ..postmortem.inputs import Inputs, _add_dump
from ..postmortem.phase import of_doc as phase_of_doc
from ..postmortem.stacks import from_record, to_record
from ..rendezvous.budget import Budget
from ..rendezvous.store import Guard, JsonStore, Limits, StoreLost
from ..rendezvous.waits import Waits
from ..units import format_duration
from . import outlast, pace, reach, straggle, wire
from .auth import Session, choose
from .fetch import Answer, Asker, fetch_all, fetch_each, keep_room, read_registry
from .kept import Kept

# what to do when no rank registered: the one step that arms a job for diagnose and watch, and what keeps a rank
# from registering
NOT_ARMED_FIX = ("arm every rank before init_process_group, as for diagnose: ncclcheck.arm(DIR), or "
                 "ncclcheck.guard(postmortem_dir=DIR); either registers the rank here unless given live=False "
                 "(guard() without postmortem_dir registers only with live=True). A rank registers in the store at "
                 "MASTER_ADDR:MASTER_PORT once RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set (arm()'s notes "
                 "say when they were not); watch that store (under torchrun its --master-addr/--master-port, or "
                 "the rdzv endpoint); a token-signed job needs the same token here (docs/live.md)")
DUMP_NAME = "ncclcheck_live_rank_{}.json"  # a name ending in the rank, as torch's own dumps are named
UNANSWERED_NAME = "ncclcheck_live_unanswered.json"


def live_doc(a: Answer, rec: dict, clock: Optional[dict] = None, phase: Optional[dict] = None) -> Optional[dict]:
    """The rank's flight recorder with its own word (flight.LIVE_KEY): what diagnose reads from --dump; `clock`:
    its host's clock offset as watch measured it (postmortem/slow.py corrects the call times with it); `phase`: its
    progress as sampled (postmortem/phase.py: where in a step the ranks work outside collectives)."""
    fr = a.doc.get("flight") if a.doc else None
    if not isinstance(fr, dict):
        return None
    me = {k: a.doc.get(k) for k in ("rank", "host", "local_rank", "pid", "time", "progress", "stacks")}
    if a.doc.get("calls"):  # the call times of entries that did not fit whole (postmortem/callseries.py)
        me["calls"] = a.doc["calls"]
    me["addr"] = f"{rec['addr']}:{rec['port']}"
    if clock:
        me["clock"] = {"offset_ns": clock["offset_ns"], "err_ns": clock["err_ns"]}
    if phase:
        me["phase"] = phase
    if a.doc.get("flight_dropped"):
        me["flight_dropped"] = a.doc["flight_dropped"]
    return {**fr, flight.LIVE_KEY: me}


def live_docs(answers: dict, records: dict, clocks: dict, sampled: Optional[dict] = None) -> dict:
    """{rank: live_doc} of every answer with flight-recorder entries, each with its host's measured clock and, where
    sampled, its phase."""
    by_rank = straggle.rank_clocks(clocks, records)
    sampled = sampled or {}
    return {r: d for r, a in answers.items() if a.doc is not None
            and (d := live_doc(a, records[r], by_rank.get(r), sampled.get(r))) is not None and d.get("entries")}


def build_inputs(first: dict, records: dict, missing: dict, docs: dict, observer: Optional[str] = None,
                 ends: Optional[dict] = None) -> Inputs:
    """diagnose's Inputs from what was fetched: one flight-recorder document per answering rank. observer: the host
    watch asks from (a host cut off is told from the other hosts all silent by where the watcher stands). ends: the
    end records ranks left in the store (what their stacks files say of how they ended: diagnose's own reading)."""
    inp = Inputs(observer=observer)
    for r, v in (ends or {}).items():
        said = from_record(r, v, f"rank {r}'s word in the job's store ({wire.end_key(r)})")
        if said is not None:
            inp.stacks[r] = said
    for r, doc in sorted(docs.items()):
        _add_dump(inp, f"live://{records[r]['addr']}:{records[r]['port']}/rank{r}", doc, "json")
    for r, a in first.items():
        if a.doc is None:
            inp.unanswered[r] = a.why
        elif r not in docs:
            inp.unanswered[r] = a.doc.get("flight_error") or "its flight recorder is empty: arm the job before " \
                                                             "init_process_group (TORCH_FR_BUFFER_SIZE)"
            inp.hosts[r] = {"host": records[r]["host"], "local_rank": records[r].get("local_rank")}
    for r, why in missing.items():
        inp.unanswered[r] = why
    for r, rec in records.items():
        inp.hosts.setdefault(r, {"host": rec["host"], "local_rank": rec.get("local_rank")})
    return inp


def write_dump(path: str, docs: dict, inp: Inputs) -> list:
    """--dump DIR: each rank's document as DIR/ncclcheck_live_rank_<r>.json and the unanswered ranks: what
    `diagnose DIR` reads to the same answer. Returns the files written."""
    from ..render.files import write_atomic

    os.makedirs(path, exist_ok=True)
    written = []
    for r, doc in sorted(docs.items()):
        f = os.path.join(path, DUMP_NAME.format(r))
        write_atomic(f, json.dumps(doc, separators=(",", ":"), default=str))
        written.append(f)
    if inp.unanswered or inp.stacks:  # and the ends ranks said in the store (flight.ENDS_KEY): diagnose reads them
        f = os.path.join(path, UNANSWERED_NAME)
        write_atomic(f, json.dumps({"schema": flight.UNANSWERED_SCHEMA, "observer": inp.observer,
                                    "ranks": {str(r): w for r, w in sorted(inp.unanswered.items())},
                                    "hosts": {str(r): inp.hosts[r] for r in sorted(inp.unanswered) if r in inp.hosts},
                                    flight.ENDS_KEY: {str(r): to_record(s) for r, s in sorted(inp.stacks.items())}}))
        written.append(f)
    return written


def _stalled(analysis: dict, frozen: list) -> Optional[dict]:
    """The hang that stalls inside the transport while its ranks answer watch, the group to probe for a cut link:
    {"pg", "seq", "op", "desc", "ranks" (whose hosts are probed), "head" (what the ranks did)}; None when there is
    none. Two forms, whichever way the ring happened to stand when the packets stopped:
    - every rank of a group entered its last collective, none completed it, and nobody's counters moved (gloo's
      flight recorder does not say started, so this is read from the frozen counters);
    - the root cause is ranks inside a collective others of the group completed (analyse's "unfinished": the data
      they wait for never came): the cut may lie between them and the ranks that finished, so every host of the
      group is probed."""
    causes = analysis.get("causes", [])
    root = next((c for c in causes if c["cause"]), None)
    groups = {g["pg"]: g for g in analysis.get("groups", [])}
    if root is not None and root["kind"] == "unfinished" and root["pg"] in groups and set(root["ranks"]) <= set(frozen):
        g = groups[root["pg"]]
        return {"pg": g["pg"], "seq": root["seq"], "op": g.get("op"), "desc": g.get("desc"), "ranks": g["dumped"],
                "head": root["text"]}
    if root is not None:
        return None
    for g in groups.values():
        done = g.get("last_completed") or {}
        open_ = [r for r in g["entered"] if done.get(str(r), -1) < g["seq"]]
        if g["entered"] and not g["not_entered"] and not g["no_dump"] and open_ == g["entered"] \
                and set(open_) <= set(frozen):
            return {"pg": g["pg"], "seq": g["seq"], "op": g.get("op"), "desc": g.get("desc"), "ranks": g["entered"],
                    "head": f"every rank ({ranks_text(g['entered'])}) entered {g['op'] or 'collective'} #{g['seq']} "
                            f"of {_group_name(g)} and none completed it while watched"}
    return None


def _group_name(g: dict) -> str:
    return g["desc"] if g.get("desc") and g["desc"] != "undefined" else f"process group {g['pg']}"


def _reach_matrix(answers: dict) -> dict:
    """{from_rank: {to_rank: {"ok", "kind"}}} from the responders' "reach" replies, what is not that dropped (a
    reply may be hostile: only booleans and short words are kept)."""
    out: dict = {}
    for r, a in answers.items():
        row = a.doc.get("reach") if a.doc else None
        for k, v in (row.items() if isinstance(row, dict) else ()):
            if isinstance(k, str) and k.isdigit() and isinstance(v, dict) and type(v.get("ok")) is bool:
                kind = v.get("kind") if isinstance(v.get("kind"), str) and len(v["kind"]) <= 20 else "error"
                out.setdefault(r, {})[int(k)] = {"ok": v["ok"], "kind": kind}
    return out


def locate(group: dict, records: dict, asker: Asker, budget: Budget) -> Optional[dict]:
    """Which pair of the stalled group's hosts does not connect: one responder per host connects to the others
    (live/reach.py); {"hosts", "pairs", "failed", "asked", "links", "unanswered", "said"}, None with one host."""
    hosts: dict = {}
    for r in sorted(group["ranks"]):
        if r in records:
            hosts.setdefault(records[r]["host"], r)
    if len(hosts) < 2:
        return None
    plan = reach.pairs_to_ask(hosts)
    answers = fetch_each({r: records[r] for r in plan}, "reach", asker, budget, budget.live_reach_wait_s,
                         {r: {"ranks": to} for r, to in plan.items()})
    found = reach.cut_links(_reach_matrix(answers), {r: rec["host"] for r, rec in records.items()})
    found["unanswered"] = {records[r]["host"]: a.why or (a.doc or {}).get("error", "")
                           for r, a in answers.items() if a.doc is None or "reach" not in a.doc or a.doc.get("error")}
    found["said"] = reach.said(found, len(hosts))
    return found


def _cut(found: Optional[dict]) -> bool:
    return found is not None and bool(found["hosts"] or found["pairs"])


def _ends(found: dict) -> str:
    """The hosts at the ends of what reach found cut: the cut-off hosts, else both ends of every failing pair."""
    return ", ".join(found["hosts"] or sorted({h for p in found["pairs"] for h in p}))


_LINK_FIX = ("check the link between {} and the rest (cables, switch ports, firewall rules, routes); `ncclcheck links` "
             "on those nodes measures it once the job is stopped")


def _stall_check(g: dict, found: Optional[dict]) -> CheckResult:
    """live.progress for a stalled group (_stalled), with where the link is cut when the reach probe found it."""
    ev = {"pg": g["pg"], "seq": g["seq"], "ranks": g["ranks"]}
    if found is not None:
        ev["reach"] = found
    if _cut(found):
        return failed("live.progress", f"{g['head']}: {found['said']}", evidence=ev, fix=_LINK_FIX.format(_ends(found)))
    tail = f": {found['said']}" if found is not None and found.get("said") and found["asked"] else \
        ": it stalls inside the collective (a link, a NIC, a peer's GPU)"
    return failed("live.progress", g["head"] + tail, evidence=ev,
                  fix="find the link: `ncclcheck links` on the same nodes; NCCL's RAS (`ncclras`) on the live hang; "
                      "the NICs' error counters")


def link_is_the_cause(analysis: dict, g: dict, found: dict) -> dict:
    """The analysis once the ranks' reach probe found the stalled group's link cut: that link is the root cause, and
    what the flight recorder said of the ranks (behind inside a collective, or all inside it) is what it explains;
    no rank is the cause. Kind "link_cut" (the schema's live kinds)."""
    cause = {"kind": "link_cut", "cause": True, "pg": g["pg"], "seq": g["seq"], "ranks": [],
             "text": f"{found['said']}; {g['head']}", "fix": _LINK_FIX.format(_ends(found)),
             "source": "watch (the ranks' connects to each other)"}
    return {**analysis, "verdict": cause["text"],
            "causes": [cause, *(dict(c, cause=False) for c in analysis.get("causes", []))]}


def _started() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _report(config: Config, t0: float, checks: list, extra: dict, world_size: int = 0, hosts: int = 0,
            backend: str = "none", trust: Optional[dict] = None, records: Optional[dict] = None) -> Report:
    """The watch report; `records`: the ranks' store records, whose hosts are the report's nodes (what the kubectl
    labels name) and whose launcher the header says."""
    from ..version import __version__

    w = config.world
    names = sorted({rec["host"] for rec in (records or {}).values()})
    return Report(command="watch", version=__version__, started=_started(), duration_s=time.monotonic() - t0,
                  world=WorldInfo(nnodes=max(1, hosts), world_size=world_size, backend=backend,
                                  master=f"{w.master_addr}:{w.master_port}", launcher=_launcher(records or {})),
                  nodes=[NodeInfo(i, h) for i, h in enumerate(names)], checks=checks, strict=config.output.strict,
                  extra=extra, trust=trust)


def _launcher(records: dict) -> str:
    """The launcher most ranks say started them (pace.launcher_of, in their store record), "none" when unsaid."""
    said = [rec.get("launcher") for rec in records.values() if rec.get("launcher") in pace.LAUNCHERS]
    return max(set(said), key=said.count) if said else "none"


def _trust(session: Session, st: JsonStore, ignored: list) -> dict:
    """The report's `trust`: watch's level, and the records it ignored (another job's or run's, unsigned...)."""

    source = {"token": "the job's token", "munge": f"a munge credential of uid {os.getuid()}",
              "none": "nothing: without a key anyone can write the store's records"}[session.level]
    seen = [*ignored, *(x for x in st.rejected if x.startswith(wire.PREFIX) and x not in ignored)]
    return {"level": session.level, "source": source, **({"ignored": seen[:64]} if seen else {})}


def look(config: Config, budget: Budget, st: JsonStore, session: Session, t0: float,
         follow: Optional[straggle.Follow] = None) -> Report:
    """One watch: fetch everything, look at progress again, analyse when it did not move; when it moved, who slows
    it (live.slow). `follow`: --follow's history, kept in the report."""
    phase = budget.now()
    reg = read_registry(st, ends=True)
    # every rank's recorder decoded and analysed: millions of objects, for as long as the look's bound at most
    with spaced_collector(len(reg.records), bounded=True):
        return _look(config, budget, st, session, t0, follow, reg, budget.since(phase))


def _look(config: Config, budget: Budget, st: JsonStore, session: Session, t0: float,
          follow: Optional[straggle.Follow], reg: Any, registry_s: float) -> Report:
    """look() once the registry is read (`reg`, in `registry_s`)."""
    w = config.world
    where = f"{w.master_addr}:{w.master_port}"
    n, records, missing = reg.n, reg.records, reg.missing
    asker = Asker(session, reg.job, reg.run)
    trust = _trust(session, st, reg.ignored)
    live: dict = {"master": where, "world_size": n, "registered": sorted(records), "rejected": list(st.rejected),
                  "job": reg.job, "run": reg.run, "trust": session.level}
    if not records:
        why = (f"no armed rank registered in the job's store at {where}" if n == 0 else
               f"none of the {n} ranks registered in the job's store at {where} could be read: "
               f"{next(iter(missing.values()), '')}")
        return _report(config, t0, [failed("live.answered", why, fix=NOT_ARMED_FIX,
                                            evidence={"rejected": list(st.rejected)})], {"live": live}, n,
                       trust=trust)
    phase = budget.now()
    # A few ranks' phases are sampled alongside the first look, not after it (at 4,096 ranks the first look takes
    # seconds: the sampling is over by its end), for three of the job's steps where they are longer than the pause
    # between the looks: one rank's recorder first says how long a step is and how many groups it has.
    hung = threading.Event()
    # each rank's first answer leaves its connection open for the second look and the re-asks (wire: "keep")
    with Kept(keep_room(len(records))) as kept, \
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="ncclcheck-watch") as ex:
        step_us, groups = straggle.glance(records, asker, budget)
        sampling = ex.submit(straggle.sample_phases, records, sorted(records), asker, budget,
                             straggle.phase_window(budget.live_confirm_s, step_us), dict.fromkeys(records, groups))
        first = fetch_all(records, "all", asker, budget, kept=kept)
        phases = {"since_start": budget.since(t0) - budget.since(phase), "registry": registry_s,
                  "fetch": budget.since(phase)}
        answered = sorted(r for r, a in first.items() if a.doc is not None)
        phase = budget.now()
        # Each rank is looked at again live_confirm_s after its own first answer: a rank that answered early does not
        # wait for the last one (at 4,096 ranks the first look took seconds; then a pause and a second look as long
        # made the answer ~13 s). The hosts' clocks are measured first, while no look's requests compete with them
        # (an exchange's error is half its round trip: measured beside the second look, on the shared machine of
        # scripts/bench_live.py, the errors took a 100 ms late rank's cost below the rule's floor).
        # What the first look's recorders say is read beside the second look's wait, once the clocks are known and
        # the phases sampled: the documents, the analysis of who slows the job and the transfer probe it calls for (at
        # 4,096 ranks the analysis took ~1 s and the probe seconds after the second look); the second look adds no
        # recorder, so judge() takes the analysis as it is and the probe when its suspects are the same; a job found
        # hung stops it.
        tarpit: set = set()  # answered the first look, then held the clock exchange to its bound: asked no more
        clocks = straggle.measure_clocks(records, answered, asker, budget, silent=tarpit)
        phases["clocks"] = budget.since(phase)
        early = ex.submit(_early, first, reg, clocks, asker, budget, hung, sampling)
        again = [r for r in answered if r not in tarpit]
        second = fetch_all({r: records[r] for r in again}, "progress", asker, budget,
                           {r: (first[r].done_at or phase) + budget.live_confirm_s for r in again}, kept)
        phases["second_look"] = budget.since(phase) - phases["clocks"]
        # a rank that did not move is looked at again until the job's own step says it is late (live/outlast.py)
        second, past = outlast.look_until(records, first, second, asker, budget, kept)
        if past:
            phases["outlast"] = past
        went = outlast.moved(first, second)
        frozen = sorted(r for r in answered if r not in went and r in second and second[r].doc is not None)
        span = budget.live_confirm_s + past  # between the two looks a rank's progress is judged over
        if not went or frozen:
            hung.set()
    # the pool's end waited for the sampling and the probe: bounded inside (their deadlines, their threads' join)
    phases["phase_samples"] = budget.since(phase)
    phase = budget.now()
    read = early.result() if early.exception() is None else None
    if read is None:  # the early reading failed: made here (the sampling's result kept)
        read = (*_read(first, reg, clocks, sampling.result() if sampling.exception() is None else
                       straggle.Sampled({}, [])), None, None)
    docs, inp, section, probed = read
    for r, a in second.items():  # answered the first look, not the second: gone meanwhile
        if a.doc is None and r not in inp.unanswered:
            inp.unanswered[r] = a.why if a.garbage else f"answered, then not {budget.live_confirm_s:g} s later " \
                                                        f"({a.why})"
    for r in sorted(tarpit):
        if r not in inp.unanswered:
            inp.unanswered[r] = f"answered, then held its clock exchange open for {budget.live_fetch_s:g} s " \
                                "without a reply: not asked again"
    garbage = sorted(r for r in inp.unanswered if inp.unanswered[r].startswith(GARBAGE))
    live.update({
        "answered": answered, "moved": went, "frozen": frozen,
        "unanswered": {str(r): w_ for r, w_ in sorted(inp.unanswered.items())}, "garbage": garbage,
        "confirm_s": budget.live_confirm_s, "outlast_s": round(past, 3),
        "ranks": [{"rank": r, "host": records[r]["host"], "addr": f"{records[r]['addr']}:{records[r]['port']}",
                   "pid": (first[r].doc or {}).get("pid") if r in first else None,
                   "answer_s": round(first[r].elapsed_s, 4) if r in first and first[r].elapsed_s is not None else None,
                   "bytes": first[r].nbytes if r in first else 0,
                   "where": inp.where.get(r),
                   "progress": (second.get(r) or first.get(r) or Answer(r)).doc.get("progress")
                   if (second.get(r) or first.get(r) or Answer(r)).doc else None} for r in sorted(records)],
    })
    if config.watch.dump_dir:
        live["dump"] = write_dump(config.watch.dump_dir, docs, inp)
    hosts = len({rec["host"] for rec in records.values()})
    not_answered = sorted(inp.unanswered)
    progressing = bool(went) and not frozen
    ans_check = (passed("live.answered", f"all {n} ranks answered") if not not_answered else
                 (warned if progressing else failed)(
                     "live.answered", _answered_text(inp.unanswered, garbage, n),
                     detail="\n".join(f"rank {r}: {inp.unanswered[r]}" for r in not_answered[:8]),
                     fix="a rank that does not answer is dead, not armed, or unreachable from here; one that answers "
                         "with garbage is not the responder its record says (a forged record, another program on "
                         "that port) or sent more than watch decodes (docs/live.md, docs/trust.md)",
                     evidence={"unanswered": live["unanswered"], "garbage": garbage}))
    node_of = {h: i for i, h in enumerate(sorted({rec["host"] for rec in records.values()}))}
    if progressing:
        prog = passed("live.progress", f"the job is making progress: {ranks_text(went)} completed or enqueued "
                      f"collectives between two looks {span:.3g} s apart",
                      evidence={"moved": went})
        phase = budget.now()
        section, slow_check = straggle.judge(inp, records, clocks, asker, budget, node_of, follow, probed,
                                             section)
        phases["slow"] = budget.since(phase)
        live["phases_s"] = {k: round(v, 3) for k, v in phases.items()}
        if follow is not None:
            follow.look(time.time_ns(), section)
        live["slow"] = {**section, **(follow.section() if follow is not None else {})}
        return _report(config, t0, [prog, slow_check, ans_check], {"live": live}, n, hosts, _backend(docs), trust,
                       records)
    analysis = analyse(inp)  # its phase from the second look's end: the documents read as diagnose reads them too
    checks = run_checks(POSTMORTEM, PostmortemInput(analysis))
    root = next(c for c in checks if c.id == "postmortem.root_cause")
    phases["analysis"] = budget.since(phase)
    group = _stalled(analysis, frozen)
    phase = budget.now()
    found = locate(group, records, asker, budget) if group is not None else None
    phases["reach"] = budget.since(phase)
    live["phases_s"] = {k: round(v, 3) for k, v in phases.items()}
    stalled = _stall_check(group, found) if group is not None else None
    if group is not None and _cut(found):  # the link, not the ranks that wait on it
        analysis = link_is_the_cause(analysis, group, found)
        checks = run_checks(POSTMORTEM, PostmortemInput(analysis))
        root = next(c for c in checks if c.id == "postmortem.root_cause")
    if went:
        prog = warned("live.progress", f"{ranks_text(went)} made progress, {ranks_text(frozen)} did not, in "
                      f"{span:.3g} s", evidence={"moved": went, "frozen": frozen})
    elif stalled is not None:
        prog = stalled
    elif root.status is Status.FAIL:
        # the cause is postmortem.root_cause's to say, once, as the one failure: the hang is its consequence, with
        # how long it has lasted
        stuck = stuck_s(docs, second, frozen)
        prog = warned("live.progress", f"no rank made progress in {span:.3g} s: the job is hung"
                      + (f", stuck for {format_duration(stuck)} since its last collective call" if stuck else "")
                      + f", a consequence of its root cause ({root.id})", evidence={"frozen": frozen, "stuck_s": stuck})
    else:
        prog = warned("live.progress", f"no collective progress in {span:.3g} s on "
                      f"{ranks_text(frozen) if frozen else 'any rank'}, and no rank waits in a collective another "
                      "has not entered: a long compute step, data loading, or a hang outside collectives (the stacks "
                      "in the report's live.ranks say where each rank is)", evidence={"frozen": frozen})
    more = []
    if follow is not None and follow.last is not None:  # what --follow saw while the job still ran
        live["slow"] = {**follow.last, **follow.section()}
        more = [skipped("live.slow", "not judged on this look: the job does not progress (the slowdowns --follow "
                        f"saw before: {len(follow.events)} events in live.slow)")]
    return _report(config, t0, [*checks, prog, *more, ans_check], {"live": live, "postmortem": analysis},
                   max(n, analysis["world_size"]), hosts, _backend(docs), trust, records)


def stuck_s(docs: dict, second: dict, ranks: list) -> Optional[float]:
    """How long the job has been stuck: from the newest collective call any of `ranks` recorded to the time it
    answered the second look, each on its own rank's clock (no offset between hosts enters). None when no rank says
    both."""
    out = []
    for r in ranks:
        doc = docs.get(r) or {}
        ans = second.get(r)
        mine = ans.doc if ans is not None and ans.doc else doc.get(flight.LIVE_KEY) or {}
        now = mine.get("time")
        made = outlast.calls_s(doc.get("entries"), 8)
        if isinstance(now, (int, float)) and made:
            out.append(now - made[-1])
    return round(max(0.0, min(out)), 1) if out else None


def _read(answers: dict, reg: Any, clocks: dict, sampled: straggle.Sampled) -> tuple[dict, Inputs]:
    """(documents, diagnose's Inputs) of a look's recorders with the measured clocks and sampled phases."""
    docs = live_docs(answers, reg.records, clocks, sampled.rows)
    inp = build_inputs(answers, reg.records, reg.missing, docs, socket.gethostname(), reg.ends)
    inp.sampling = list(sampled.asked)
    inp.stale = straggle.stale_of(answers)
    return docs, inp


def with_phases(docs: dict, inp: Inputs, sampled: straggle.Sampled) -> None:
    """The sampled phases put in documents and Inputs made before the sampling ended, where live_doc and
    build_inputs put them; what each sampled rank's sampling was as a measure in Inputs.sampling."""
    inp.sampling = list(sampled.asked)
    for r, rows in sampled.rows.items():
        if r in docs and rows:
            docs[r][flight.LIVE_KEY]["phase"] = rows
            got = phase_of_doc(docs[r], r, flight.LIVE_KEY)
            if got:
                inp.phases[r] = got


def _early(first: dict, reg: Any, clocks: dict, asker: Asker, budget: Budget, hung: threading.Event,
           sampling: Future) -> tuple:
    """(documents, Inputs, the slow analysis, the probe or None) of the first look's recorders. The documents are
    made while the phases are sampled (~0.3 s at 4,096 ranks), the analysis and the probe once the sampling is over:
    the probe's downloads share the job's links and CPU, and beside the sampling of a communication-bound lab job
    they left its steps unmeasured (its big all_reduce slowed while a rank sampled where it works)."""
    docs, inp = _read(first, reg, clocks, straggle.Sampled({}, []))
    wait_futures([sampling], timeout=budget.live_phase_max_s + budget.live_request_s + budget.live_send_s
                 + budget.thread_join_s)
    with_phases(docs, inp, sampling.result() if sampling.done() and sampling.exception() is None else
                straggle.Sampled({}, [{"rank": None, "host": None, "asked_bytes": 0, "asked_items": 0, "rows": 0,
                                       "dropped": 0, "error": "the sampling did not end within its bound"}]))
    section, probed = straggle.early_probe(inp, reg.records, clocks, asker, budget, hung)
    return docs, inp, section, probed


def _answered_text(unanswered: dict, garbage: list, n: int) -> str:
    """live.answered's summary: the ranks that did not answer, and apart from them those that answered garbage."""
    silent = [r for r in sorted(unanswered) if r not in garbage]
    parts = [f"{ranks_text(silent)} of {n} did not answer: rank {silent[0]}: {unanswered[silent[0]]}"] if silent else []
    if garbage:
        parts.append(f"{ranks_text(garbage)} of {n} {GARBAGE}: rank {garbage[0]}: "
                     f"{unanswered[garbage[0]][len(GARBAGE):].strip(' ()')}")
    return "; ".join(parts)


def _backend(docs: dict) -> str:
    found = {flight._op(e.get("profiling_name"))[0] for d in docs.values() for e in d.get("entries", [])[-4:]
             if isinstance(e, dict)}
    found &= {"nccl", "gloo"}
    return found.pop() if len(found) == 1 else "none"


def _connect(config: Config, budget: Budget, waits: Waits) -> tuple[Optional[JsonStore], Optional[CheckResult],
                                                                     Optional[Session]]:
    """The job's store, or why not. One look wants a running job (a connect's bound); --follow may be started with
    the job, so it retries a store that is not up yet until --timeout, saying what it met (rendezvous/waits.py)."""
    from ..preflight.probe import probe_master, probe_master_said
    from ..rendezvous.store import ConnectTimedOut, open_store

    w = config.world
    if config.watch.follow:
        probe = probe_master_said(w.master_addr, w.master_port, budget.deadline(budget.timeout_s), budget, waits)
    else:
        probe = probe_master(w.master_addr, w.master_port, budget.deadline(budget.connect_attempt_s), budget=budget)
    if not probe.ok:
        return None, failed("rendezvous.master_reachable", f"the job's store at {w.master_addr}:{w.master_port} "
                            f"does not answer ({probe.status}: {probe.last_error}): the job is not running there, "
                            "or this host cannot reach it", fix="give the job's MASTER_ADDR and MASTER_PORT (under "
                            "torchrun: its --master-addr/--master-port or rdzv endpoint)",
                            evidence=probe.to_json()), None
    # the store's records are signed only with a token; munge seals requests and replies, never the records
    level = choose(w.token, os.environ)
    guard = Guard(token=w.token if level == "token" else None,
                  limits=Limits(max_value_bytes=64 << 10, max_total_bytes=256 << 20))
    # its port answered: a store that does not take the client within one try (a quarter of the bound: in a loaded
    # process one once took longer) is tried again while the bound lasts; a refusal is final
    end = budget.deadline(budget.timeout_s)
    while True:
        try:
            st = open_store(w.master_addr, w.master_port, False, budget.timeout_s, guard=guard,
                            connect_s=budget.left(end))
            return st, None, Session(level, w.token, int(w.master_port), budget)
        except ConnectionError as exc:
            if not isinstance(exc, ConnectTimedOut) or budget.remaining(end) < budget.connect_attempt_s:
                return None, failed("rendezvous.master_reachable", f"the job's store at {w.master_addr}:"
                                    f"{w.master_port}: {exc}", evidence={}), None


def watch(config: Config, observer=None) -> Report:
    """`ncclcheck watch`: one look (or, with --follow, looks until progress stops), as a Report. observer: where
    --follow's lines go (a slowdown starting or ending; agent/context.show_row's "slow_event") and what it waits for
    (rendezvous/waits.py: --follow started with the job)."""
    budget = Budget.of(config)
    t0 = time.monotonic()
    waits = Waits(observer, budget)
    try:
        return _watch(config, budget, t0, waits, observer)
    finally:
        waits.close()


def _watch(config: Config, budget: Budget, t0: float, waits: Waits, observer: Any) -> Report:
    from ..agent.context import show_row

    st, bad, session = _connect(config, budget, waits)
    if st is None or session is None:
        return _report(config, t0, [bad], {"live": {}})
    follow = None
    try:
        if config.watch.follow:
            follow = straggle.Follow(lambda line: show_row(observer, "slow_event", {"text": line}))
            ended = _follow(config, budget, st, session, follow, waits)
            if ended is not None:
                return _ended(config, t0, follow, ended)
        return look(config, budget, st, session, t0, follow)
    except munge.MungeError as exc:  # watch's own credential (trust munge): said, never a traceback
        return _report(config, t0, [failed("live.answered", f"watch could not make its munge credential: {exc}",
                                           fix="check munged here (munge -n | unmunge), or give the job's token")],
                       {"live": {}}, trust={"level": session.level, "source": "munge"})
    except StoreLost as exc:
        if follow is not None and follow.looks:  # the job ended between --follow's looks: what they saw stays
            return _ended(config, t0, follow, f"its store went away ({str(exc)[:120]})")
        return _report(config, t0, [failed("rendezvous.master_reachable", f"the job's store went away: {exc}",
                                           fix="the job ended or its master died")], {"live": {}})


def _ended(config: Config, t0: float, follow: straggle.Follow, why: str) -> Report:
    """--follow's report when the job ended while watched: a normal end (live.progress passes), and every slowdown
    its looks saw, each with its start and end (live.slow: fail when one was seen, pass when none was)."""
    follow.finish(time.time_ns(), "the job ended", follow.stepped_ns)
    n, records = follow.world
    prog = passed("live.progress", f"the job ended while watched ({why}) after {follow.looks} looks that saw it "
                  "make progress", evidence={"ended": why, "looks": follow.looks})
    live = {"master": f"{config.world.master_addr}:{config.world.master_port}", "world_size": n, "ended": why,
            "slow": {**(follow.last or {}), **follow.section()}}
    return _report(config, t0, [prog, follow.check(why)], {"live": live}, n,
                   len({rec["host"] for rec in records.values()}), follow.backend, None, records)


def _follow(config: Config, budget: Budget, st: JsonStore, session: Session,
            follow: straggle.Follow, waits: Waits) -> Optional[str]:
    """Look at every rank's flight recorder every live_follow_poll_s until no progress for live_stall_s (then None:
    the full look names the hang) or the job ended (its store went away, or no rank answers and then the store goes
    away: why, said); each look that progressed is judged for a slowdown (follow)."""
    still_since = None
    last: dict = {}
    if not _registered(st, budget, waits):
        return None  # the full look names what it found: no armed rank
    while True:
        began = time.monotonic()  # looks begin every live_follow_poll_s, however long each took (issue 65)
        try:
            reg = read_registry(st)
        except StoreLost as exc:
            return f"its store went away ({str(exc)[:120]})" if follow.looks else None
        asker = Asker(session, reg.job, reg.run)
        # A job seen stepping has its phases sampled before its recorders are read, not after: the look then judges
        # the steps up to its own moment, and a slowdown that began during the sampling is in this look, not the next
        # (sampled after the read, a look judged records a sampling window old: each line came a look later)
        sampled = _sample(reg.records, last, asker, budget) if last else None
        now = fetch_all(reg.records, "flight", asker, budget)
        fetched_ns = time.time_ns()
        if not any(a.doc is not None for a in now.values()):
            return _store_gone(st, budget) if follow.looks else None
        follow.world = (reg.n, reg.records)
        if not last or outlast.moved(last, now):
            _judge_follow(reg, now, asker, budget, follow, sampled, began)
        if last and not outlast.moved(last, now):
            still_since = still_since or time.monotonic()
            if not budget.within(still_since, budget.live_stall_s):
                return None
        else:
            still_since = None
            follow.stepped_ns = fetched_ns
        last = now
        _tick(reg.records, now, asker, budget, follow, began + budget.live_follow_poll_s)


def _sample(records: dict, last: dict, asker: Asker, budget: Budget) -> straggle.Sampled:
    """The phases of a few ranks that answered the last look, over the window its recorders' step asks for."""
    answered = sorted(r for r, a in last.items() if a.doc is not None and r in records)
    return straggle.sample_phases(records, answered, asker, budget,
                                  straggle.phase_window(budget.live_confirm_s, straggle.step_us_of(last)),
                                  straggle.groups_of(last))


def _tick(records: dict, now: dict, asker: Asker, budget: Budget, follow: straggle.Follow, until: float) -> None:
    """The pause until the next --follow look (`until`: live_follow_poll_s after this look began; none when the look
    took longer), one answering rank's progress read every live_follow_tick_s meanwhile: the last moment it moved is
    the job's last step seen (follow.stepped_ns), what a slowdown still on when the job ends is stamped with (the look
    before the end was up to a pause earlier)."""
    end = until
    r = next((r for r in sorted(now) if now[r].doc is not None and r in records), None)
    seen = (now[r].doc or {}).get("progress") if r is not None else None
    while time.monotonic() < end:
        left = end - time.monotonic()
        if left > 0:
            time.sleep(min(budget.live_follow_tick_s, left))
        if r is None:
            continue
        got = fetch_all({r: records[r]}, "progress", asker, budget).get(r)
        prog = got.doc.get("progress") if got is not None and got.doc is not None else None
        if prog is None:
            return  # no answer: the next look tells whether the job ended
        if prog != seen:
            follow.stepped_ns = time.time_ns()
        seen = prog


def _registered(st: JsonStore, budget: Budget, waits: Waits) -> bool:
    """--follow started with the job: its store answers before its ranks arm. Wait for the first armed rank's record
    up to live_stall_s (--timeout), saying so; False when none came (or the store went away)."""
    t0 = budget.now()
    seen: dict = {"n": 0}
    with waits.wait("armed", budget.deadline(budget.live_stall_s), facts=lambda: dict(seen)):
        while True:
            try:
                reg = read_registry(st)
            except StoreLost:
                return False
            seen["n"] = reg.n
            if reg.records:
                return True
            if not budget.within(t0, budget.live_stall_s):
                return False
            time.sleep(min(budget.live_store_poll_s, budget.live_follow_poll_s))


def _store_gone(st: JsonStore, budget: Budget) -> Optional[str]:
    """No rank answers: the job ended when its store goes away too within live_stall_s (--timeout: a launcher closes
    it once its ranks exited), else None (the full look names who does not answer)."""
    t0 = budget.now()
    while budget.within(t0, budget.live_stall_s):
        try:
            read_registry(st)
        except StoreLost as exc:
            return f"its ranks stopped answering and its store went away ({str(exc)[:120]})"
        time.sleep(min(budget.live_store_poll_s, budget.live_follow_poll_s))
    return None


def _judge_follow(reg: Any, now: dict, asker: Asker, budget: Budget, follow: straggle.Follow,
                  sampled: Optional[straggle.Sampled], began: float) -> None:
    """One --follow look at a progressing job: who slows it (a start or an end said through the observer). sampled:
    the phases sampled before its recorders were read (None on the first look: sampled now); began: the look's start
    (time.monotonic), its duration kept in the history."""
    answered = sorted(r for r, a in now.items() if a.doc is not None)
    clocks = straggle.measure_clocks(reg.records, answered, asker, budget)
    if sampled is None:
        sampled = _sample(reg.records, now, asker, budget)
    docs, inp = _read(now, reg, clocks, sampled)
    node_of = {h: i for i, h in enumerate(sorted({rec["host"] for rec in reg.records.values()}))}
    section, _ = straggle.judge(inp, reg.records, clocks, asker, budget, node_of, follow)
    follow.backend = _backend(docs)
    follow.look(time.time_ns(), section, time.monotonic() - began)


def run(config: Config, observer=None, placement=None) -> Report:
    """The commands table's runner for `watch` (commands.py)."""
    return watch(config, observer)
