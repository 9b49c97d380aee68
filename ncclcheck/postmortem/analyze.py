"""From the inputs to findings: ranks tied to hosts, the flight recorder compared per process group, log lines
classified by the failure table, the launcher's exit codes; then the causes ordered, root cause first.

Order of causes (each a dict with `cause: True`; consequences follow with `cause: False`): a mismatch at one sequence
id; a rank that never entered the collective the others wait in and is not itself waiting elsewhere; the earliest
log line of a cause class; a rank that left no dump and died (its signal from the launcher). The output is the
report's `postmortem` section: plain JSON, which checks/postmortem.py turns into checks and the renderers draw.
"""

from __future__ import annotations

from typing import Optional

from ..nccl import failures
from ..nccl.debuglog import nccl_header, parse_nccl_debug, split_by_rank
from . import flight
from .inputs import Inputs

SHOWN = 6  # ranks named in one sentence before "and N more"
MAX_RANK_CAUSES = 256  # ranks given a cause line each; the rest share one (the report stays readable and bounded)
MAX_NPROC_PER_NODE = 1024  # the most ranks a node runs (config's --nproc-per-node bound): bounds a file's world_size


def ranks_text(ranks: list, limit: int = SHOWN) -> str:
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    words = ", ".join(str(r) for r in ranks[:limit])
    return f"ranks {words}" + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


def _world(inp: Inputs, preflight: Optional[dict], nranks: list) -> list:
    known = (set(inp.dumps) | {f["rank"] for f in inp.failures if isinstance(f.get("rank"), int)} |
             set(empty_dumps(inp)))
    sizes = [len(g.ranks) for d in inp.dumps.values() for n, g in d.groups.items()
             if n == flight.DEFAULT_PG and g.ranks]
    sizes += nranks
    if preflight:
        ws = preflight_world_size(preflight)
        if ws and not inp.dumps:
            sizes.append(ws)
    top = max([max(known) + 1 if known else 0, *sizes]) if (known or sizes) else 0
    return list(range(max(0, min(top, flight.MAX_WORLD))))


def preflight_world_size(preflight: dict) -> Optional[int]:
    """The preflight's world_size, only when its own nodes can hold it (at most 1,024 ranks per node listed): a
    report saying 10^12 ranks made diagnose loop to 23 GB (issue 36 hole 3)."""
    world = preflight.get("world") if isinstance(preflight.get("world"), dict) else {}
    ws, nodes = world.get("world_size"), preflight.get("nodes")
    most = min(flight.MAX_WORLD, MAX_NPROC_PER_NODE * max(1, len(nodes) if isinstance(nodes, list) else 1))
    return ws if type(ws) is int and 0 < ws <= most else None


def empty_dumps(inp: Inputs) -> dict:
    """rank -> path of each zero-byte dump (a rank killed while dumping, issue 32)."""
    return {r["empty_dump"]: r["path"] for r in inp.refused if isinstance(r.get("empty_dump"), int)}


def _hosts(inp: Inputs, preflight: Optional[dict], log_ranks: dict) -> dict:
    """rank -> {host, local_rank} from the launcher's table, NCCL's own lines, then the preflight's placement."""
    out: dict = {}
    if preflight:
        world = preflight.get("world") or {}
        nodes = {n.get("node_rank"): n.get("hostname") for n in preflight.get("nodes") or [] if isinstance(n, dict)}
        ws, nn = preflight_world_size(preflight), world.get("nnodes")
        if ws and type(nn) is int and 0 < nn <= ws and ws % nn == 0 and nodes:
            per = ws // nn
            for r in range(ws):
                if nodes.get(r // per):
                    out[r] = {"host": nodes[r // per], "local_rank": r % per, "from": "preflight"}
    for r, info in log_ranks.items():
        out[r] = {**out.get(r, {}), **info, "from": "nccl log"}
    for f in inp.failures:
        r = f.get("rank")
        if isinstance(r, int):
            said = {k: f[k] for k in ("host", "local_rank") if f.get(k) is not None}
            out[r] = {**out.get(r, {}), **said, "from": "launcher"}
    return out


def _logs(inp: Inputs) -> tuple:
    """(events, per-rank NCCL facts, rank -> host info): every classified line with its rank, in file order."""
    events: list = []
    per_rank: dict = {}
    hosts: dict = {}
    for path, text in inp.logs:
        for rank, lines in split_by_rank(text).items():
            for i, line in enumerate(lines):
                cls = failures.classify(line)
                if cls is None:
                    continue
                head = nccl_header(line)
                events.append({"rank": rank, "class": cls.id, "cause": cls.cause, "line": line.strip()[:400],
                               "source": path, "order": (path, i), "host": head["host"] if head else None,
                               "seq": failures.seq_of(line)})
            if rank is None:
                continue
            if any("NCCL" in ln for ln in lines):
                parsed = parse_nccl_debug("\n".join(lines))
                if parsed.get("version") or parsed.get("bootstrap") or parsed.get("transports"):
                    per_rank[rank] = parsed
            head = next((h for h in map(nccl_header, lines) if h), None)
            if head:
                hosts[rank] = {"host": head["host"], "local_rank": head["cuda_dev"]}
    for e in inp.error_files:
        cls = failures.classify(e["message"])
        if cls is not None:
            events.append({"rank": e.get("rank"), "class": cls.id, "cause": cls.cause, "line": e["message"][:400],
                           "source": e["path"], "order": (e["path"], 0), "host": None, "seq": None})
    return events, per_rank, hosts


def _who(rank: int, hosts: dict) -> str:
    h = hosts.get(rank) or {}
    bits = [f"host {h['host']}"] if h.get("host") else []
    if h.get("local_rank") is not None:
        bits.append(f"local rank {h['local_rank']}")
    return f"rank {rank}" + (f" ({', '.join(bits)})" if bits else "")


def _coll(g: dict, seq: Optional[int] = None, op: Optional[str] = None) -> str:
    name = g["desc"] if g.get("desc") and g["desc"] != "undefined" else f"process group {g['pg']}"
    return f"{op or g.get('op') or 'collective'} #{g['seq'] if seq is None else seq} of {name}"


def _death(rank: int, by_rank: dict) -> str:
    f = by_rank.get(rank)
    if not f:
        return ""
    if f.get("signal"):
        return f"the launcher reports it died of {f['signal']}"
    return f"the launcher reports exit code {f.get('exitcode')}" if f.get("exitcode") is not None else ""


def _blocked_elsewhere(rank: int, name: str, inp: Inputs, groups: dict) -> bool:
    """Is `rank` waiting in a collective of another group that some rank has not entered? Then it did not skip
    this group's collective: it is stuck behind someone else."""
    d = inp.dumps.get(rank)
    if d is None or d.last is None or d.last[0] == name:
        return False
    other = groups.get(d.last[0])
    return bool(other and other["not_entered"] and d.last[1] >= other["seq"] and rank in other["entered"])


def _sig(v: dict) -> str:
    """all_reduce(1024 Float), barrier(): what one rank enqueued, as a person reads it."""
    shapes = ", ".join("x".join(str(n) for n in s) or "scalar" for s in v["input_sizes"])
    dtypes = "/".join(dict.fromkeys(v["input_dtypes"]))
    return f"{v['op']}({shapes}{' ' + dtypes if dtypes else ''})"


def _fr_causes(groups: list, inp: Inputs, hosts: dict, by_rank: dict) -> list:
    causes = []
    by_name = {g["pg"]: g for g in groups}
    for g in groups:
        mm = g["mismatch"]
        if mm:
            major, odd = mm["variants"][0], mm["variants"][1:]
            what = {"op": "op", "dtype": "dtype", "size": "size"}[mm["kind"]]
            if mm["culprits"]:
                parts = [f"{ranks_text(v['ranks'])} called {_sig(v)}" for v in odd]
                text = (f"{what} mismatch at {_coll(g, mm['seq'], major['op'])}: " + "; ".join(parts) +
                        f" where {ranks_text(major['ranks'])} called {_sig(major)}")
                if len(mm["culprits"]) == 1:
                    text = f"{_who(mm['culprits'][0], hosts)}: " + text
            else:
                text = (f"{what} mismatch at {_coll(g, mm['seq'], major['op'])}: " +
                        " vs ".join(f"{ranks_text(v['ranks'])} {_sig(v)}" for v in mm["variants"]))
            causes.append({"kind": f"{mm['kind']}_mismatch", "cause": True, "pg": g["pg"], "seq": mm["seq"],
                           "ranks": mm["culprits"] or sorted(r for v in mm["variants"] for r in v["ranks"]),
                           "text": text, "fix": failures.BY_ID["collective_mismatch"].fix, "source": "flight recorder"})
        stuck = [r for r in g["not_entered"] if not _blocked_elsewhere(r, g["pg"], inp, by_name)]
        stuck_set = set(stuck)  # 200,000 ranks: a list membership test here was quadratic (issue 36 hole 5)
        behind = [r for r in g["not_entered"] if r not in stuck_set]
        if stuck:
            waited = len(g["entered"])
            tmo = f" (timeout {g['timeout_ms'] / 1000:g} s)" if g.get("timeout_ms") else ""
            text = (f"{_who(stuck[0], hosts) if len(stuck) == 1 else ranks_text(stuck)} never entered {_coll(g)}; "
                    f"the other {waited} rank{'s' if waited != 1 else ''} waited in it{tmo}")
            causes.append({"kind": "never_entered", "cause": True, "pg": g["pg"], "seq": g["seq"], "ranks": stuck,
                           "text": text, "fix": "find why that rank stopped issuing collectives (its own log and "
                           "stack: a rank-dependent branch, an exception caught and ignored, a data loader that ran "
                           "out first); py-spy dump --pid on a live hang shows where it is",
                           "source": "flight recorder"})
        if behind:
            causes.append({"kind": "blocked", "cause": False, "pg": g["pg"], "seq": g["seq"], "ranks": behind,
                           "text": f"{ranks_text(behind)} did not reach {_coll(g)}: they were waiting in another "
                                   "group's collective", "fix": "", "source": "flight recorder"})
    if not any(c["cause"] for c in causes) and any(c["kind"] == "blocked" for c in causes):
        causes.insert(0, _cycle(inp, hosts, [r for c in causes if c["kind"] == "blocked" for r in c["ranks"]]))
        causes = [c for c in causes if c]

    def stopped_here(c: dict) -> int:  # the group in which the culprits' last collective is explains the others
        last = [inp.dumps[r].last for r in c["ranks"] if r in inp.dumps and inp.dumps[r].last]
        return 0 if c["kind"] != "never_entered" or any(x[0] == c["pg"] for x in last) else 1

    return sorted(causes, key=lambda c: (c["kind"] == "never_entered", stopped_here(c)))


def _cycle(inp: Inputs, hosts: dict, blocked: list) -> Optional[dict]:
    """Ranks that each wait for another (A in group 1 waits for B; B went on to group 0 and waits for A): compare the
    ranks' own orders of collectives; the first position where a minority did something else is where it skipped."""
    need = set.union(*(set(inp.dumps[r].groups) for r in blocked if r in inp.dumps)) if blocked else set()
    involved = sorted(r for r, d in inp.dumps.items() if need and need <= set(d.groups))
    orders = {r: [(c.record_id, g.name, c.seq) for g in inp.dumps[r].groups.values() for c in g.all()]
              for r in involved}
    shared = set.intersection(*(set(d.groups) for r, d in inp.dumps.items() if r in involved)) if involved else set()
    seqs = {r: [(n, q) for _, n, q in sorted(o) if n in shared] for r, o in orders.items()}
    for i in range(max((len(v) for v in seqs.values()), default=0)):
        by: dict = {}
        for r, v in seqs.items():
            if i < len(v):
                by.setdefault(v[i], []).append(r)
        if len(by) < 2:
            continue
        major = max(by, key=lambda k: (len(by[k]), -min(by[k])))
        odd = sorted(r for k, rs in by.items() if k != major for r in rs)
        if len(by[major]) <= len(odd):
            return None
        went = next(k for k in by if k != major)
        text = (f"{_who(odd[0], hosts) if len(odd) == 1 else ranks_text(odd)} skipped collective #{major[1]} of "
                f"process group {major[0]} and went on to #{went[1]} of process group {went[0]}; "
                f"{ranks_text(by[major])} wait in it")
        return {"kind": "never_entered", "cause": True, "pg": major[0], "seq": major[1], "ranks": odd, "text": text,
                "fix": "make every rank call the group's collectives in the same order (a rank-dependent branch "
                       "skipped one)", "source": "flight recorder"}
    return None


def _dead_causes(groups: list, world: list, inp: Inputs, hosts: dict, by_rank: dict, have_cause: bool) -> list:
    out = []
    empty = empty_dumps(inp)
    no_dump = sorted({r for g in groups for r in g["no_dump"]} |
                     ({r for r in world if r not in inp.dumps} if inp.dumps else set()))
    if not inp.dumps:  # no flight recorder at all: the launcher's dead ranks alone (and the empty dumps)
        no_dump = sorted({r for r, f in by_rank.items() if f.get("signal")} | set(empty))
    first_group: dict = {}  # rank -> the first group it left no dump for (one pass: linear in ranks x groups)
    for g in groups:
        for r in g["no_dump"]:
            first_group.setdefault(r, g)
    def order(r: int) -> tuple:  # the launcher's first failure first; SIGTERM is usually the launcher stopping others
        f = by_rank.get(r) or {}
        return (not f.get("first"), f.get("signal") == "SIGTERM", not f.get("signal"), str(f.get("time") or ""), r)

    ordered = sorted(no_dump, key=order)
    for r in ordered[:MAX_RANK_CAUSES]:
        death = _death(r, by_rank)
        where = first_group.get(r)
        text = f"{_who(r, hosts)} left no dump" if inp.dumps else f"{_who(r, hosts)} died"
        if r in empty:
            text = f"rank {r}'s dump is empty: killed while dumping? ({_who(r, hosts)}, {empty[r]})"
        if where is not None:
            text += f"; the other ranks were in {_coll(where)}"
        if death:
            text += f"; {death}"
        # with nothing else found, the rank that left nothing is the suspect, signal or not
        out.append({"kind": "no_dump" if inp.dumps else "died", "cause": not have_cause,
                    "pg": where["pg"] if where else None, "seq": where["seq"] if where else None, "ranks": [r],
                    "text": text, "fix": "find why it died: `dmesg -T | grep -i -e oom -e killed` on its host (the "
                    "OOM killer sends SIGKILL), the scheduler's log (preemption, time limit), its own stderr",
                    "source": "launcher" if death else "flight recorder"})
    rest = ordered[MAX_RANK_CAUSES:]
    if rest:  # one small file naming rank 999,999 made a million causes (3.9 GB, a 600 MB report): one line for them
        out.append({"kind": "no_dump" if inp.dumps else "died", "cause": False, "pg": None, "seq": None,
                    "ranks": sorted(rest), "text": f"{ranks_text(rest)} also left no dump" if inp.dumps else
                    f"{ranks_text(rest)} also died", "fix": "", "source": "flight recorder"})
    return out


def _log_causes(events: list, hosts: dict) -> list:
    out = []
    seen: set = set()
    for e in events:
        key = (e["class"], e["rank"])
        if key in seen:
            continue
        seen.add(key)
        cls = failures.BY_ID[e["class"]]
        who = (_who(e["rank"], hosts) if e["rank"] is not None else f"host {e['host']}" if e["host"] else
               f"{e['source'].rsplit('/', 1)[-1]} (no rank on the line)")
        seq = f" (SeqNum {e['seq']})" if e.get("seq") is not None else ""
        out.append({"kind": e["class"], "cause": cls.cause, "pg": None, "seq": e.get("seq"),
                    "ranks": [e["rank"]] if e["rank"] is not None else [], "text": f"{who}: {cls.what}{seq}",
                    "fix": cls.fix, "line": e["line"], "source": e["source"]})
    return out


def _ras_causes(inp: Inputs) -> tuple:
    """(causes, rank -> host) from `ncclras -f json` outputs: dead ranks and ranks with an error or abort are causes,
    ranks behind their peers (where a hang sits) too; unresponsive ranks are listed as consequences."""
    from ..checks.nccl_ras import parse_ras_json

    out, hosts = [], {}
    for path, text in inp.ras:
        try:
            parsed = parse_ras_json(text)
        except ValueError:
            continue
        for c in parsed["communicators"]:
            for kind, rows, cause, what in (
                    ("ras_dead", c["dead"], True, "NCCL's RAS considers it dead"),
                    ("ras_error", c["errors"], True, "NCCL's RAS reports an asynchronous error or abort"),
                    ("ras_lagging", c["lagging"], True, "it issued fewer collectives than its peers (where the "
                                                        "hang sits)"),
                    ("ras_unresponsive", c["unresponsive"], False, "NCCL's RAS cannot reach it (not yet dead)")):
                for r in rows:
                    if not isinstance(r.get("rank"), int):
                        continue
                    if r.get("host"):
                        hosts[r["rank"]] = {"host": str(r["host"])[:255], "local_rank": None}
                    extra = f" ({r['op']} {r['count']} of {r['max']})" if kind == "ras_lagging" else ""
                    out.append({"kind": kind, "cause": cause, "pg": None, "seq": None, "ranks": [r["rank"]],
                                "text": f"rank {r['rank']} ({r.get('host') or '?'}"
                                        f"{', GPU ' + str(r['cuda_dev']) if r.get('cuda_dev') is not None else ''})"
                                        f": {what}{extra}",
                                "fix": "drain that host: check its GPU (nvidia-smi -q, dmesg for Xid errors) and "
                                       "NICs, then restart the job without it", "source": path})
    return out, hosts


def _transport(per_rank: dict, preflight: Optional[dict]) -> dict:
    rows = {}
    for r, p in sorted(per_rank.items()):
        ifs = [i["ifname"] for i in p.get("bootstrap", []) + p.get("socket_interfaces", [])]
        rows[str(r)] = {"interfaces": list(dict.fromkeys(ifs)), "net": p.get("net_transport") or p.get("network"),
                        "transports": p.get("transports", {}), "version": p.get("version"),
                        "ib_devices": [f"{d['device']}:{d['port']}" for d in p.get("ib_devices", [])]}
    recs = [r for r in (preflight or {}).get("recommendations") or [] if isinstance(r, dict)]
    return {"ranks": rows, "recommended": {r.get("name"): r.get("value") for r in recs
                                           if r.get("node") is None and str(r.get("name", "")).startswith("NCCL_")}}


def analyse(inp: Inputs, preflight: Optional[dict] = None) -> dict:
    """The report's `postmortem` section (plain JSON)."""
    events, per_rank, log_hosts = _logs(inp)
    ras, ras_hosts = _ras_causes(inp)
    log_hosts = {**ras_hosts, **log_hosts}
    nranks = [p["nranks"] for p in per_rank.values() if p.get("nranks")]
    world = _world(inp, preflight, nranks)
    hosts = _hosts(inp, preflight, log_hosts)
    by_rank = {f["rank"]: f for f in inp.failures if isinstance(f.get("rank"), int)}
    groups = flight.analyse_groups(inp.dumps, world)
    fr = _fr_causes(groups, inp, hosts, by_rank)
    logs = _log_causes(events, hosts)
    have = any(c["cause"] for c in fr + logs + ras)
    dead = _dead_causes(groups, world, inp, hosts, by_rank, have)
    ordered = ([c for c in fr if c["cause"]] + [c for c in ras if c["cause"]] + [c for c in logs if c["cause"]] +
               [c for c in dead if c["cause"]] + [c for c in fr + ras + dead + logs if not c["cause"]])
    verdict = _verdict(ordered, groups, hosts, by_rank)
    ranks = []
    for r in world:
        h = hosts.get(r) or {}
        f = by_rank.get(r) or {}
        d = inp.dumps.get(r)
        ranks.append({"rank": r, "host": h.get("host"), "local_rank": h.get("local_rank"),
                      "dump": d.source if d else None, "exitcode": f.get("exitcode"), "signal": f.get("signal"),
                      "last": list(d.last) if d and d.last else None})
    return {
        "verdict": verdict,
        "world_size": len(world),
        "inputs": inp.read,
        "refused": inp.refused,
        "ranks": ranks if len(ranks) <= 4096 else [r for r in ranks if r["dump"] is None or r["exitcode"]][:4096],
        "groups": groups if len(world) <= 4096 else [dict(g, last_enqueued={}, last_completed={}, windows={})
                                                     for g in groups],
        "causes": ordered,
        "launcher": {"failures": inp.failures, "first": next((f["rank"] for f in inp.failures if f.get("first")),
                                                             None)},
        "error_files": [{k: e[k] for k in ("path", "rank", "message")} for e in inp.error_files],
        "transport": _transport(per_rank, preflight),
        "timeline": flight.timeline(inp.dumps) if len(inp.dumps) <= 256 else {},
    }


def _verdict(causes: list, groups: list, hosts: dict, by_rank: dict) -> Optional[str]:
    """One sentence a person can act on: the root cause, then what it explains."""
    root = next((c for c in causes if c["cause"]), None)
    if root is None:
        return None
    text = root["text"]
    if len(root["ranks"]) == 1:
        r = root["ranks"][0]
        for c in causes:
            if c is not root and c["kind"] == "no_dump" and c["ranks"] == [r]:
                text += f"; rank {r} left no dump"
        death = _death(r, by_rank)
        if death and death not in text:
            text += f"; {death}"
    return text

