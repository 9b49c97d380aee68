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
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Optional

from ..checks.postmortem import PostmortemInput
from ..checks.registry import POSTMORTEM, run_checks
from ..config import Config
from ..model import CheckResult, NodeInfo, Report, Status, WorldInfo, failed, passed, skipped, warned
from ..postmortem import flight
from ..postmortem.analyze import NO_ANSWER_IN_BOUND, analyse, ranks_text
from ..postmortem.inputs import Inputs, _add_dump
from ..rendezvous.budget import Budget
from ..rendezvous.store import Guard, JsonStore, Limits, StoreLost
from . import pace, reach, straggle, wire

MAX_WORKERS = 64  # ranks asked at once; the rest queue within the same bound
DUMP_NAME = "ncclcheck_live_rank_{}.json"  # a name ending in the rank, as torch's own dumps are named
UNANSWERED_NAME = "ncclcheck_live_unanswered.json"


@dataclass
class Answer:
    rank: int
    doc: Optional[dict] = None  # the reply
    why: str = ""  # why there is none
    elapsed_s: Optional[float] = None  # how long its answer took (None: not asked)
    nbytes: int = 0


def read_registry(st: JsonStore) -> tuple[int, dict, dict]:
    """(world size, {rank: record} of the newest attempt, {rank: why not there}) from the job's store."""
    w = st.get_now(f"{wire.PREFIX}world", lambda v: None if isinstance(v, dict) and type(v.get("world_size")) is int
                   and 0 < v["world_size"] <= flight.MAX_WORLD else "not a world size")
    if w is None:
        return 0, {}, {}
    n = w["world_size"]
    rows = st.read_present([f"{wire.PREFIX}rank/{r}" for r in range(n)])
    records, missing = {}, {}
    for r, (there, v) in enumerate(rows):
        if not there:
            missing[r] = "never registered in the job's store (not armed, or it stopped before arming)"
        elif v is None:  # the store refused it (unsigned with a token, not JSON, too large): its reason
            key = f"{wire.PREFIX}rank/{r}: "
            why = next((x[len(key):] for x in reversed(st.rejected) if x.startswith(key)), "unreadable")
            missing[r] = f"its record in the store was refused ({why})"
        elif bad := wire.record_problem(r, v):
            missing[r] = f"its record in the store was refused ({bad})"
        else:
            records[r] = v
    newest = max((v["attempt"] for v in records.values()), default=0)
    for r in [r for r, v in records.items() if v["attempt"] < newest]:
        missing[r] = f"registered in attempt {records.pop(r)['attempt']}, not in the job's newest ({newest})"
    return n, records, missing


def ask(rec: dict, kind: str, guard: Guard, end: float, budget: Budget, args: Optional[dict] = None) -> Answer:
    """One rank's reply to one request (`args`: a "reach" request's ranks), every step bounded by `end`."""
    r = rec["rank"]
    t0 = budget.now()
    family = socket.AF_INET6 if ":" in rec["addr"] else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(budget.left(end))
            s.connect((rec["addr"], rec["port"]))
            hello = wire.loads(wire.recv_frame(s, wire.MAX_HELLO, end, budget))
            ch = hello.get("challenge") if isinstance(hello, dict) else None
            if not isinstance(ch, str) or not re.fullmatch(f"[0-9a-f]{{{wire.CHALLENGE_CHARS}}}", ch) \
                    or hello.get("rank") != r:
                return Answer(r, why=f"{rec['addr']}:{rec['port']} is not rank {r}'s responder")
            if hello.get("auth") is True and guard.token is None:
                return Answer(r, why="it answers only with the job's key: give watch NCCLCHECK_TOKEN or --token-file")
            s.settimeout(budget.left(end))
            wire.send_frame(s, wire.seal(guard, wire.request_key(ch), {"kind": kind, **(args or {})}))
            data = wire.recv_frame(s, wire.MAX_REPLY, end, budget)
    except TimeoutError:
        return Answer(r, why=f"no answer from {rec['addr']}:{rec['port']} {NO_ANSWER_IN_BOUND}",
                      elapsed_s=budget.since(t0))
    except (OSError, wire.WireError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Answer(r, why=f"{rec['addr']}:{rec['port']}: {what}", elapsed_s=budget.since(t0))
    doc, why = wire.open_sealed(guard, wire.reply_key(ch), data)
    if isinstance(doc, dict) and "error" in doc and "rank" not in doc:
        doc, why = None, ""
    if doc is None:
        try:  # a refusal is sent unsealed: say what the responder said
            said = json.loads(data).get("error")
        except (ValueError, AttributeError):
            said = None
        return Answer(r, why=f"it refused the request: {str(said)[:200]}" if said else f"its reply: {why}",
                      elapsed_s=budget.since(t0))
    if not isinstance(doc, dict) or doc.get("rank") != r:
        return Answer(r, why=f"its reply is not rank {r}'s", elapsed_s=budget.since(t0))
    return Answer(r, doc, elapsed_s=budget.since(t0), nbytes=len(data))


def fetch_all(records: dict, kind: str, guard: Guard, budget: Budget) -> dict:
    """{rank: Answer} for every record, asked concurrently under ONE bound (Budget.live_fetch_s)."""
    end = budget.deadline(budget.live_fetch_s)
    if not records:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(records)), thread_name_prefix="ncclcheck-watch") as ex:
        futs = {ex.submit(ask, rec, kind, guard, end, budget): r for r, rec in records.items()}
        wait_futures(futs, timeout=budget.remaining(end) + budget.thread_join_s)
        out = {}
        for f, r in futs.items():
            if f.done() and not f.cancelled() and f.exception() is None:
                out[r] = f.result()
            else:
                f.cancel()
                out[r] = Answer(r, why="not asked before the bound passed (too many ranks did not answer before it)")
    return out


def counters(doc: Optional[dict]) -> dict:
    """{pg: (enqueued, completed)} of a reply's progress."""
    prog = doc.get("progress") if isinstance(doc, dict) else None
    out = {}
    for pg, v in (prog.items() if isinstance(prog, dict) else ()):
        if isinstance(v, dict):
            out[str(pg)] = tuple(x if type(x) is int else -1 for x in (v.get("enqueued"), v.get("completed")))
    return out


def moved(first: dict, second: dict) -> list:
    """The ranks whose counters changed between two looks."""
    return sorted(r for r, a in second.items() if a.doc is not None and r in first and first[r].doc is not None
                  and counters(a.doc) != counters(first[r].doc))


def live_doc(a: Answer, rec: dict, clock: Optional[dict] = None) -> Optional[dict]:
    """The rank's flight recorder with its own word (flight.LIVE_KEY): what diagnose reads from --dump; `clock`:
    its host's clock offset as watch measured it (postmortem/slow.py corrects the call times with it)."""
    fr = a.doc.get("flight") if a.doc else None
    if not isinstance(fr, dict):
        return None
    me = {k: a.doc.get(k) for k in ("rank", "host", "local_rank", "pid", "time", "progress", "stacks")}
    me["addr"] = f"{rec['addr']}:{rec['port']}"
    if clock:
        me["clock"] = {"offset_ns": clock["offset_ns"], "err_ns": clock["err_ns"]}
    if a.doc.get("flight_dropped"):
        me["flight_dropped"] = a.doc["flight_dropped"]
    return {**fr, flight.LIVE_KEY: me}


def build_inputs(first: dict, records: dict, missing: dict, docs: dict, observer: Optional[str] = None) -> Inputs:
    """diagnose's Inputs from what was fetched: one flight-recorder document per answering rank. observer: the host
    watch asks from (a host cut off is told from the other hosts all silent by where the watcher stands)."""
    inp = Inputs(observer=observer)
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
    if inp.unanswered:
        f = os.path.join(path, UNANSWERED_NAME)
        write_atomic(f, json.dumps({"schema": flight.UNANSWERED_SCHEMA, "observer": inp.observer,
                                    "ranks": {str(r): w for r, w in sorted(inp.unanswered.items())},
                                    "hosts": {str(r): inp.hosts[r] for r in sorted(inp.unanswered) if r in inp.hosts}}))
        written.append(f)
    return written


def _stalled(analysis: dict, frozen: list) -> Optional[dict]:
    """The group whose every rank entered its last collective, none completed it, and nobody's counters moved: it
    stalls inside the transport (gloo's flight recorder does not say started, so this is read from the frozen
    counters). None when there is none."""
    for g in analysis.get("groups", []):
        done = g.get("last_completed") or {}
        open_ = [r for r in g["entered"] if done.get(str(r), -1) < g["seq"]]
        if g["entered"] and not g["not_entered"] and not g["no_dump"] and open_ == g["entered"] \
                and set(open_) <= set(frozen):
            return g
    return None


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


def locate(group: dict, records: dict, guard: Guard, budget: Budget) -> Optional[dict]:
    """Which pair of the stalled group's hosts does not connect: one responder per host connects to the others
    (live/reach.py); {"hosts", "pairs", "failed", "asked", "links", "unanswered", "said"}, None with one host."""
    hosts: dict = {}
    for r in sorted(group["entered"]):
        if r in records:
            hosts.setdefault(records[r]["host"], r)
    if len(hosts) < 2:
        return None
    plan = reach.pairs_to_ask(hosts)
    end = budget.deadline(budget.live_reach_wait_s)
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(plan)), thread_name_prefix="ncclcheck-watch") as ex:
        futs = {r: ex.submit(ask, records[r], "reach", guard, end, budget, {"ranks": to}) for r, to in plan.items()}
        wait_futures(list(futs.values()), timeout=budget.remaining(end) + budget.thread_join_s)
        answers = {r: f.result() if f.done() and f.exception() is None else Answer(r, why="no reach answer in time")
                   for r, f in futs.items()}
    found = reach.cut_links(_reach_matrix(answers), {r: rec["host"] for r, rec in records.items()})
    found["unanswered"] = {records[r]["host"]: a.why or (a.doc or {}).get("error", "")
                           for r, a in answers.items() if a.doc is None or "reach" not in a.doc or a.doc.get("error")}
    found["said"] = reach.said(found, len(hosts))
    return found


def _stall_check(g: dict, found: Optional[dict]) -> CheckResult:
    """live.progress for a stalled group, with where the link is cut when the reach probe found it."""
    name = g["desc"] if g.get("desc") and g["desc"] != "undefined" else f"process group {g['pg']}"
    head = (f"every rank ({ranks_text(g['entered'])}) entered {g['op'] or 'collective'} #{g['seq']} of {name} and "
            "none completed it while watched")
    ev = {"pg": g["pg"], "seq": g["seq"], "ranks": g["entered"]}
    if found is not None:
        ev["reach"] = found
    cut = found is not None and (found["hosts"] or found["pairs"])
    if cut:
        ends = found["hosts"] or sorted({h for p in found["pairs"] for h in p})
        return failed("live.progress", f"{head}: {found['said']}", evidence=ev,
                      fix=f"check the link between {', '.join(ends)} and the rest (cables, switch ports, firewall "
                          f"rules, routes); `ncclcheck links` on those nodes measures it once the job is stopped")
    tail = f": {found['said']}" if found is not None and found.get("said") and found["asked"] else \
        ": it stalls inside the collective (a link, a NIC, a peer's GPU)"
    return failed("live.progress", head + tail, evidence=ev,
                  fix="find the link: `ncclcheck links` on the same nodes; NCCL's RAS (`ncclras`) on the live hang; "
                      "the NICs' error counters")


def _started() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _report(config: Config, t0: float, checks: list, extra: dict, world_size: int = 0, hosts: int = 0,
            backend: str = "none", records: Optional[dict] = None) -> Report:
    """The watch report; `records`: the ranks' store records, whose hosts are the report's nodes (what the kubectl
    labels name) and whose launcher the header says."""
    from ..version import __version__

    w = config.world
    names = sorted({rec["host"] for rec in (records or {}).values()})
    return Report(command="watch", version=__version__, started=_started(), duration_s=time.monotonic() - t0,
                  world=WorldInfo(nnodes=max(1, hosts), world_size=world_size, backend=backend,
                                  master=f"{w.master_addr}:{w.master_port}", launcher=_launcher(records or {})),
                  nodes=[NodeInfo(i, h) for i, h in enumerate(names)], checks=checks, strict=config.output.strict,
                  extra=extra)


def _launcher(records: dict) -> str:
    """The launcher most ranks say started them (pace.launcher_of, in their store record), "none" when unsaid."""
    said = [rec.get("launcher") for rec in records.values() if rec.get("launcher") in pace.LAUNCHERS]
    return max(set(said), key=said.count) if said else "none"


def look(config: Config, budget: Budget, st: JsonStore, guard: Guard, t0: float,
         follow: Optional[straggle.Follow] = None) -> Report:
    """One watch: fetch everything, look at progress again, analyse when it did not move; when it moved, who slows
    it (live.slow). `follow`: --follow's history, kept in the report."""
    w = config.world
    where = f"{w.master_addr}:{w.master_port}"
    phase = budget.now()
    n, records, missing = read_registry(st)
    registry_s = budget.since(phase)
    live: dict = {"master": where, "world_size": n, "registered": sorted(records), "rejected": list(st.rejected)}
    if not records:
        why = (f"no armed rank registered in the job's store at {where}" if n == 0 else
               f"none of the {n} ranks registered in the job's store at {where} could be read: "
               f"{next(iter(missing.values()), '')}")
        return _report(config, t0, [failed("live.answered", why, fix="arm the job: ncclcheck.arm(DIR) or "
                                            "ncclcheck.guard(postmortem_dir=DIR, live=True) on every rank "
                                            "(docs/live.md); a token-signed job needs the same token here",
                                            evidence={"rejected": list(st.rejected)})], {"live": live}, n)
    phase = budget.now()
    first = fetch_all(records, "all", guard, budget)
    phases = {"since_start": budget.since(t0) - budget.since(phase), "registry": registry_s,
              "fetch": budget.since(phase)}
    pause = budget.deadline(budget.live_confirm_s)
    answered = sorted(r for r, a in first.items() if a.doc is not None)
    clocks = straggle.measure_clocks(records, answered, guard, budget)  # within the pause between the two looks
    phases["clocks"] = budget.since(phase) - phases["fetch"]
    time.sleep(budget.remaining(pause))
    phase = budget.now()
    second = fetch_all({r: records[r] for r, a in first.items() if a.doc is not None}, "progress", guard, budget)
    phases["second_look"] = budget.since(phase)
    went = moved(first, second)
    frozen = sorted(r for r in answered if r not in went and r in second and second[r].doc is not None)
    by_rank = straggle.rank_clocks(clocks, records)
    docs = {r: d for r in answered if (d := live_doc(first[r], records[r], by_rank.get(r))) is not None
            and d.get("entries")}
    inp = build_inputs(first, records, missing, docs, socket.gethostname())
    for r, a in second.items():  # answered the first look, not the second: gone meanwhile
        if a.doc is None and r not in inp.unanswered:
            inp.unanswered[r] = f"answered, then not {budget.live_confirm_s:g} s later ({a.why})"
    live.update({
        "answered": answered, "moved": went, "frozen": frozen,
        "unanswered": {str(r): w_ for r, w_ in sorted(inp.unanswered.items())},
        "confirm_s": budget.live_confirm_s,
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
                     "live.answered", f"{ranks_text(not_answered)} of {n} did not answer: "
                     f"rank {not_answered[0]}: {inp.unanswered[not_answered[0]]}",
                     detail="\n".join(f"rank {r}: {inp.unanswered[r]}" for r in not_answered[:8]),
                     fix="a rank that does not answer is dead, not armed, or unreachable from here (docs/live.md)",
                     evidence={"unanswered": live["unanswered"]}))
    node_of = {h: i for i, h in enumerate(sorted({rec["host"] for rec in records.values()}))}
    if progressing:
        prog = passed("live.progress", f"the job is making progress: {ranks_text(went)} completed or enqueued "
                      f"collectives between two looks {budget.live_confirm_s:g} s apart",
                      evidence={"moved": went})
        phase = budget.now()
        section, slow_check = straggle.judge(inp, records, clocks, guard, budget, node_of, follow)
        phases["slow"] = budget.since(phase)
        live["phases_s"] = {k: round(v, 3) for k, v in phases.items()}
        if follow is not None:
            follow.look(time.time_ns(), section)
        live["slow"] = {**section, **(follow.section() if follow is not None else {})}
        return _report(config, t0, [prog, slow_check, ans_check], {"live": live}, n, hosts, _backend(docs), records)
    analysis = analyse(inp)
    checks = run_checks(POSTMORTEM, PostmortemInput(analysis))
    root = next(c for c in checks if c.id == "postmortem.root_cause")
    group = _stalled(analysis, frozen) if root.status is not Status.FAIL else None
    stalled = _stall_check(group, locate(group, records, guard, budget)) if group is not None else None
    if went:
        prog = warned("live.progress", f"{ranks_text(went)} made progress, {ranks_text(frozen)} did not, in "
                      f"{budget.live_confirm_s:g} s", evidence={"moved": went, "frozen": frozen})
    elif stalled is not None:
        prog = stalled
    elif root.status is Status.FAIL:
        prog = failed("live.progress", f"no rank made progress in {budget.live_confirm_s:g} s: hung "
                      f"({root.summary})", evidence={"frozen": frozen})
    else:
        prog = warned("live.progress", f"no collective progress in {budget.live_confirm_s:g} s on "
                      f"{ranks_text(frozen) if frozen else 'any rank'}, and no rank waits in a collective another "
                      "has not entered: a long compute step, data loading, or a hang outside collectives (the stacks "
                      "in the report's live.ranks say where each rank is)", evidence={"frozen": frozen})
    more = []
    if follow is not None and follow.last is not None:  # what --follow saw while the job still ran
        live["slow"] = {**follow.last, **follow.section()}
        more = [skipped("live.slow", "not judged on this look: the job does not progress (the slowdowns --follow "
                        f"saw before: {len(follow.events)} events in live.slow)")]
    return _report(config, t0, [*checks, prog, *more, ans_check], {"live": live, "postmortem": analysis},
                   max(n, analysis["world_size"]), hosts, _backend(docs), records)


def _backend(docs: dict) -> str:
    found = {flight._op(e.get("profiling_name"))[0] for d in docs.values() for e in d.get("entries", [])[-4:]
             if isinstance(e, dict)}
    found &= {"nccl", "gloo"}
    return found.pop() if len(found) == 1 else "none"


def _connect(config: Config, budget: Budget) -> tuple[Optional[JsonStore], Optional[CheckResult]]:
    from ..preflight.probe import probe_master
    from ..rendezvous.store import open_store

    w = config.world
    probe = probe_master(w.master_addr, w.master_port, budget.deadline(budget.connect_attempt_s), budget=budget)
    if not probe.ok:
        return None, failed("rendezvous.master_reachable", f"the job's store at {w.master_addr}:{w.master_port} "
                            f"does not answer ({probe.status}: {probe.last_error}): the job is not running there, "
                            "or this host cannot reach it", fix="give the job's MASTER_ADDR and MASTER_PORT (under "
                            "torchrun: its --master-addr/--master-port or rdzv endpoint)",
                            evidence=probe.to_json())
    guard = Guard(token=w.token, limits=Limits(max_value_bytes=64 << 10, max_total_bytes=256 << 20))
    try:
        return open_store(w.master_addr, w.master_port, False, budget.left(budget.deadline(budget.timeout_s)),
                          guard=guard), None
    except ConnectionError as exc:
        return None, failed("rendezvous.master_reachable", f"the job's store at {w.master_addr}:{w.master_port}: "
                            f"{exc}", evidence={})


def watch(config: Config, observer=None) -> Report:
    """`ncclcheck watch`: one look (or, with --follow, looks until progress stops), as a Report. observer: where
    --follow's lines go (a slowdown starting or ending; agent/context.show_row's "slow_event")."""
    from ..agent.context import show_row

    budget = Budget.of(config)
    t0 = time.monotonic()
    st, bad = _connect(config, budget)
    if st is None:
        return _report(config, t0, [bad], {"live": {}})
    try:
        follow = None
        if config.watch.follow:
            follow = straggle.Follow(lambda line: show_row(observer, "slow_event", {"text": line}))
            _follow(config, budget, st, follow)
        return look(config, budget, st, st.guard, t0, follow)
    except StoreLost as exc:
        return _report(config, t0, [failed("rendezvous.master_reachable", f"the job's store went away: {exc}",
                                           fix="the job ended or its master died")], {"live": {}})


def _follow(config: Config, budget: Budget, st: JsonStore, follow: straggle.Follow) -> None:
    """Look at every rank's flight recorder every live_follow_poll_s until no progress for live_stall_s (or no rank
    answers), then return for the full look; each look that progressed is judged for a slowdown (follow)."""
    still_since = None
    last: dict = {}
    while True:
        _, records, missing = read_registry(st)
        now = fetch_all(records, "flight", st.guard, budget)
        if not any(a.doc is not None for a in now.values()):
            return
        if not last or moved(last, now):
            _judge_follow(records, missing, now, st.guard, budget, follow)
        if last and not moved(last, now):
            still_since = still_since or time.monotonic()
            if not budget.within(still_since, budget.live_stall_s):
                return
        else:
            still_since = None
        last = now
        time.sleep(budget.live_follow_poll_s)


def _judge_follow(records: dict, missing: dict, now: dict, guard: Guard, budget: Budget,
                  follow: straggle.Follow) -> None:
    """One --follow look at a progressing job: who slows it (a start or an end said through the observer)."""
    answered = sorted(r for r, a in now.items() if a.doc is not None)
    clocks = straggle.measure_clocks(records, answered, guard, budget)
    by_rank = straggle.rank_clocks(clocks, records)
    docs = {r: d for r in answered if (d := live_doc(now[r], records[r], by_rank.get(r))) is not None
            and d.get("entries")}
    inp = build_inputs(now, records, missing, docs)
    node_of = {h: i for i, h in enumerate(sorted({rec["host"] for rec in records.values()}))}
    section, _ = straggle.judge(inp, records, clocks, guard, budget, node_of, follow)
    follow.look(time.time_ns(), section)
