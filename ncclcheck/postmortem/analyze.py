"""From the inputs to findings: ranks tied to hosts, the flight recorder compared per process group, log lines
classified by the failure table, the launcher's exit codes; then the causes ordered, root cause first.

Order of causes (each a dict with `cause: True`; consequences follow with `cause: False`): a mismatch at one sequence
id; a rank that never entered the collective the others wait in and is not itself waiting elsewhere; the earliest
log line of a cause class; a rank that left no dump and died (its signal from the launcher). The output is the
report's `postmortem` section: plain JSON, which checks/postmortem.py turns into checks and the renderers draw.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Optional

from ..nccl import endings, failures, hypotheses
from ..nccl.debuglog import nccl_header
from ..nccl.failclass import what_of
from ..render import words
from . import context, flight, inventory, launcher, own, p2p, precedence, stacks, watchlines
from .bound import CUT, MAX_FIELD_CHARS, MAX_LISTED_RANKS, MAX_REPORT_ROWS, clip, clip_all
from .inputs import Inputs
from .logscan import RAISED as _RAISED
from .logscan import strip_own_output  # noqa: F401 - read here by tests; the reader blanks ncclcheck's own lines

SHOWN = 6  # ranks named in one sentence before "and N more"
GPUS_PER_NODE = 8  # the GPUs of the largest common node (HGX/DGX): a rank numbered past them runs on another host
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
             set(empty_dumps(inp)) | set(inp.unanswered) | _ranks_with_lines(inp))  # a rank that printed ran
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
    """rank -> {host, local_rank} from the launcher's table, NCCL's own lines, the preflight's placement, then what
    a live rank said of itself (`ncclcheck watch`)."""
    out: dict = {r: {**h, "from": "live"} for r, h in inp.hosts.items()}
    if preflight:
        world = preflight.get("world") or {}
        nodes = {n.get("node_rank"): n.get("hostname") for n in preflight.get("nodes") or [] if isinstance(n, dict)}
        ws, nn = preflight_world_size(preflight), world.get("nnodes")
        if ws and type(nn) is int and 0 < nn <= ws and ws % nn == 0 and nodes:
            per = ws // nn
            for r in range(ws):
                if nodes.get(r // per) and r not in out:
                    out[r] = {"host": nodes[r // per], "local_rank": r % per, "from": "preflight"}
    for r, info in log_ranks.items():
        out[r] = {**out.get(r, {}), **info, "from": "nccl log"}
    for f in inp.failures:
        r = f.get("rank")
        if isinstance(r, int):
            said = {k: f[k] for k in ("host", "local_rank") if f.get(k) is not None}
            if _loopback_name(said.get("host")) and (out.get(r) or {}).get("host"):
                said.pop("host")  # torchrun's standalone table says localhost: the name already known is the host's
            out[r] = {**out.get(r, {}), **said, "from": "launcher"}
    # What a rank said of itself names its host last, so a rank has one host name in every output: torchrun's table
    # says `localhost` where the rank's stacks, watch and the preflight say the machine's name.
    for r, said in inp.stacks.items():
        if said.get("host"):
            out[r] = {"local_rank": None, **out.get(r, {}), "host": said["host"], "from": "stacks"}
    for r, h in inp.hosts.items():
        if h.get("host"):
            out[r] = {**out.get(r, {}), "host": h["host"], "from": "live"}
            if h.get("local_rank") is not None:
                out[r]["local_rank"] = h["local_rank"]
    return out


def _loopback_name(host: Optional[str]) -> bool:
    return isinstance(host, str) and (host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost")
                                      or host.startswith("127.") or host == "::1")


_GUARD_RANK = re.compile(r"preflight failed \(rank (\d+)")


# gloo's enforce failures end in std::terminate: the process that printed the line is the one that died of SIGABRT
# (torchrun prints a worker's stderr without a rank prefix unless asked, so the line alone names no rank)
_GLOO_ABORT = re.compile(r"gloo::EnforceNotMet|enforce fail at .*gloo|Received data size doesn't match|"
                         r"terminate called after throwing", re.IGNORECASE)


def _short(host: Optional[str]) -> str:
    return (host or "").split(".")[0].lower()


def _tie_aborts(events: list, failures_: list) -> None:
    """Rank-less lines tied to a rank by the launcher's failure table (torchrun prefixes only Python's tracebacks
    with `[rankN]:`; C++ and NCCL write to stderr bare):
    - a gloo abort: the one rank that launcher saw die of SIGABRT (more than one: it stays rank-less);
    - the last line of a Python traceback (the exception that ended a process): the one rank that launcher saw
      exit with a code;
    - an NCCL line "host:pid:tid [dev]": the one failed rank of that host whose local rank is that device (ranks
      call set_device(LOCAL_RANK); two ranks on one device stay rank-less)."""
    ranked = [f for f in failures_ if isinstance(f.get("rank"), int)]
    if not ranked:
        return
    oom = [f for f in ranked if f.get("oom")]  # srun's "Out Of Memory": the OOM killer's line is about that rank
    if len(oom) == 1:
        for e in events:
            if e["rank"] is None and e["class"] == "oom_killed":
                e["rank"], e["host"] = oom[0]["rank"], e["host"] or oom[0].get("host")
                e["tied"] = "the launcher's failure records: the only rank it reports out of memory"
    by_dev: dict = {}  # (short host, local rank) -> failed ranks there
    aborted: dict = {}  # launcher output -> its ranks that died of SIGABRT
    exited: dict = {}  # launcher output -> its ranks that exited with a code
    for f in ranked:
        by_dev.setdefault((_short(f.get("host")), f.get("local_rank")), []).append(f)
        if f.get("signal") == "SIGABRT":
            aborted.setdefault(f.get("source"), []).append(f)
        elif not f.get("signal") and isinstance(f.get("exitcode"), int) and f["exitcode"] > 0:
            exited.setdefault(f.get("source"), []).append(f)
    for e in events:
        if e["rank"] is not None:
            continue
        head = nccl_header(e["line"])
        if head is not None:
            if e["class"] == "duplicate_gpu":  # two ranks on one device: the device names neither
                continue
            same = by_dev.get((_short(head["host"]), head["cuda_dev"]), [])
            if len(same) == 1:
                e["rank"], e["tied"] = same[0]["rank"], "NCCL's host and device = the launcher's host and local rank"
            continue
        if e.get("raised"):  # a traceback's last line: the process it ended exited 1 (Python), not by a signal
            one = exited.get(e["source"], [])
            if len(one) == 1:
                e["rank"], e["host"] = one[0]["rank"], one[0].get("host")
                e["tied"] = "the launcher's failure table: the only rank that exited with a code (an exception)"
            continue
        if not _GLOO_ABORT.search(e["line"]):
            continue
        one = aborted.get(e["source"], [])
        if len(one) == 1:
            e["rank"], e["host"] = one[0]["rank"], one[0].get("host")
            e["tied"] = "the launcher's failure table: the only rank that died of SIGABRT"


def _exceptions(lines: list) -> set:
    """Indices of the exception lines that end Python tracebacks ("RuntimeError: ..."): a process that printed one
    ended in it; pasted without its "Traceback (most recent call last):" (an excerpt: "[rank11]: torch.OutOfMemoryError:
    ..."), the line alone says the same. torchrun's own ChildFailedError is the launcher reporting a worker, not a
    failure of its own."""
    out: set = set()
    for i, line in enumerate(lines):
        if (m := _RAISED.match(line)) and not m.group(1).endswith("ChildFailedError"):
            out.add(i)
    return out



def _target(cls, part, i: int, line: str) -> dict:
    """A name that did not resolve, on a line that names none: the address the rank's lines last said they would
    connect to before it ({"target": "host:port"}), else nothing."""
    t = part.target
    if cls.id != "name_not_resolved" or t is None or t[0] > part.index[i] or t[1].rsplit(":", 1)[0] in line:
        return {}
    return {"target": t[1]}

def _logs(inp: Inputs) -> tuple:
    """(events, per-rank NCCL facts, rank -> host info): every classified line with its rank, in file order."""
    events: list = []
    per_rank: dict = {}
    hosts: dict = {}
    for log in inp.logs:  # each log read once (postmortem/logscan.py): per rank, the lines read here, in file order
        path = log.path
        for rank, part in log.ranks().items():
            lines = part.lines
            had = len(events)
            raised = _exceptions(lines)
            last = precedence.after_last_error(lines)  # NCCL's words under torch's wrapper
            told: set = set()  # lines read as the rest of an exception's message above them
            for i, line in enumerate(lines):
                if i in told:
                    continue
                cls = None if launcher.record_line(line) else failures.classify(line)
                if cls is None and i in raised:
                    cls = failures.GUARD_FAILED if "PreflightFailed" in line else failures.EXCEPTION
                if cls is None and i in last:
                    cls = failures.BY_ID["nccl_warn"]
                if cls is failures.EXCEPTION and (more := _message_goes_on(lines, part.index, i)) is not None:
                    cls, line = more[0], f"{line} {lines[i + 1].strip()}"  # its message's own words name it
                    told.add(i + 1)
                said = rank if rank is not None else failures.said_rank(line)
                if said is None and log.ray and (pid := launcher.pid_named(line)) in log.ray:
                    said = log.ray[pid][0]  # a Ray worker's pid in the line, as its worker table gives the rank
                if line.startswith("slurmstepd:"):  # srun -l labels it with the node's first task: not its rank
                    said = None
                if cls is failures.GUARD_FAILED:  # the guard's verdict: its first failing check is the next line
                    m = _GUARD_RANK.search(line)  # its message names the rank that raised it
                    said = rank if rank is not None or not m else int(m.group(1))
                    line = next((ln.strip() for ln in lines[i + 1:i + 3] if ln.strip()), line)
                if cls is None:
                    continue
                head = nccl_header(line) or precedence.header_anywhere(line) or (
                    {"host": part.hosts[i]} if part.hosts[i] else None)  # NCCL's header, else the prefix's host
                events.append({"rank": said, "class": cls.id, "cause": cls.cause, "line": clip(line.strip(), 400),
                               "named": failures.ranks_named(cls, line),  # read whole: the line is cut below
                               "about": failures.ranks_about(cls, line),
                               "source": path, "order": (path, part.index[i]), "host": head["host"] if head else None,
                               "seq": failures.seq_of(line), "raised": i in raised,
                               **({"at": stacks.raised_at(lines, i)} if i in raised else {}),
                               "nccl": i in last or "NCCL WARN" in line,
                               **_target(cls, part, i, line)})
            if len(events) == had and part.nccl and part.nccl.get("error_return"):  # failed inside NCCL, no WARN
                head = part.head or ({"host": part.host} if part.host else None)
                events.append({"rank": rank, "class": failures.NCCL_ERROR_RETURN.id, "cause": False,
                               "line": part.nccl["error_return"], "named": [], "about": [], "source": path,
                               "order": (path, part.index[0] if part.index else 0),
                               "host": head["host"] if head else None, "seq": None, "raised": False, "nccl": True})
            if rank is None:
                continue
            parsed = part.nccl  # NCCL's facts from all the rank's lines (None: no line of it holds "NCCL")
            if parsed and (parsed.get("version") or parsed.get("bootstrap") or parsed.get("transports")):
                per_rank[rank] = parsed
            if part.head:  # its first NCCL header, else the host its lines' prefix named
                hosts[rank] = part.head
            elif part.host is not None:
                hosts[rank] = {"host": part.host, "local_rank": None}
        if (retrying := log.ends_retrying) is not None:  # the text stops inside NCCL's retries of one connect
            count, line = retrying
            cls = failures.classify(line.replace(", retrying", ""))  # what the connect got: refused, unreachable
            head = nccl_header(line)
            if cls is not None:
                # what refused it, or why nothing listens, the text does not say: a failure, not its cause
                events.append({"rank": None, "class": cls.id, "cause": False, "line": line, "named": [],
                               "about": [], "source": log.path, "order": (log.path, log.retries[0]),
                               "host": head["host"] if head else None, "seq": None, "raised": False, "nccl": False,
                               "retries": count})
        for r, ip in log.ray.values():  # Ray Train's table says each rank's node
            hosts.setdefault(r, {"host": ip, "local_rank": None})
    for e in inp.error_files:
        cls = failures.classify(e["message"])
        if cls is not None:
            events.append({"rank": e.get("rank"), "class": cls.id, "cause": cls.cause, "line": clip(e["message"], 400),
                           "source": e["path"], "order": (e["path"], 0), "host": None, "seq": None})
    if not events:  # no line failed: a program that shows its progress and stopped showing it (said, with suspects)
        events += [{"rank": None, "class": failures.NO_PROGRESS.id, "cause": False, "line": log.tests_stalled,
                    "source": log.path, "order": (log.path, 0), "host": None, "seq": None, "named": [],
                    "hypotheses": True} for log in inp.logs if log.tests_stalled]
    _store_missing(events, inp)
    precedence.tie_by_pid(events, inp.failures)
    _tie_aborts(events, inp.failures)
    return precedence.not_restated(events, inp.failures), per_rank, hosts


def _ranks_with_lines(inp: Inputs) -> set:
    """The ranks whose own lines (a launcher's prefix) the logs hold."""
    return {r for log in inp.logs for r in log.ranks() if isinstance(r, int)}


def _store_missing(events: list, inp: Inputs) -> None:
    """A store's "7/8 clients joined" names the ranks that never came when exactly that many of its ranks printed no
    line of their own (the launcher's records and the logs' prefixes say which did)."""
    for e in events:
        if e["class"] != "init_timeout" or not failures.store_joined(e["line"]):
            continue
        spoke = _ranks_with_lines(inp) | {x["rank"] for x in events if isinstance(x["rank"], int)}
        total = failures.store_joined(e["line"])[1]
        e["about"] = failures.store_missing(e["line"], set(range(total)) - spoke)


def _message_goes_on(lines: list, index: list, i: int) -> Optional[tuple]:
    """(class,) when the exception line i's message goes on, indented, on the very next line of the text and that line
    names a cause ("RuntimeError: Gloo connectFullMesh failed with [...]" / "  timed out connecting: SO_ERROR:
    Connection refused, remote=[127.0.0.1]"): an exception's message of several lines is one message."""
    if i + 1 >= len(lines) or index[i + 1] != index[i] + 1 or not lines[i + 1][:1].isspace():
        return None
    cls = failures.classify(lines[i + 1])
    return (cls,) if cls is not None and cls.cause else None


def _who(rank: int, hosts: dict) -> str:
    h = hosts.get(rank) or {}
    bits = [f"host {h['host']}"] if h.get("host") else []
    if h.get("local_rank") is not None:
        bits.append(f"local rank {h['local_rank']}")
    return f"rank {rank}" + (f" ({', '.join(bits)})" if bits else "")


def _who_all(ranks: list, hosts: dict) -> str:
    """'rank 3 (host h2, local rank 1)'; 'ranks 0, 1 (host vm)' when every one of them is on one host; 'rank 0 (host
    a), rank 4 (host b)' when a few are on several."""
    if len(ranks) == 1:
        return _who(ranks[0], hosts)
    on = {(hosts.get(r) or {}).get("host") for r in ranks}
    if len(ranks) <= SHOWN and len(on - {None}) > 1:
        return ", ".join(_who(r, hosts) for r in sorted(ranks))
    one = on.pop() if len(on) == 1 else None
    return ranks_text(ranks) + (f" (host {one})" if one else "")


def _coll(g: dict, seq: Optional[int] = None, op: Optional[str] = None) -> str:
    return f"{op or g.get('op') or 'collective'} #{g['seq'] if seq is None else seq} of {group_name(g)}"


def group_name(g: dict) -> str:
    """default_pg; a subgroup (dist.new_group) with its name and its ranks: "tp (process group 2: ranks 0, 1)",
    "process group 1 (ranks 1, 2, 3)": a rank missing from a subgroup's collective is told by the group it is in."""
    desc = g["desc"] if g.get("desc") and g["desc"] != "undefined" else ""
    members = g.get("members") or []
    if g["pg"] == flight.DEFAULT_PG or not members:
        return desc or f"process group {g['pg']}"
    ranks = ranks_text(members)
    return f"{desc} (process group {g['pg']}: {ranks})" if desc else f"process group {g['pg']} ({ranks})"


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


def _sig(v: dict, output: bool = False) -> str:
    """all_reduce(1024 Float), barrier(), all_reduce(4x4 Float -> 4x4 Half) with its output: what one rank
    enqueued, as a person reads it."""
    def side(sizes: list, dtypes: list) -> str:
        shapes = ", ".join("x".join(str(n) for n in s) or "scalar" for s in sizes)
        dt = "/".join(dict.fromkeys(dtypes))
        return f"{shapes}{' ' + dt if dt else ''}"
    out = f" -> {side(v.get('output_sizes') or [], v.get('output_dtypes') or [])}" if output else ""
    return f"{v['op']}({side(v['input_sizes'], v['input_dtypes'])}{out})"


def _fr_causes(groups: list, inp: Inputs, hosts: dict, by_rank: dict) -> list:
    causes = []
    by_name = {g["pg"]: g for g in groups}
    p2p_causes, p2p_waits = p2p.causes(inp.dumps, groups, lambda r: _who(r, hosts), _coll)
    causes.extend(p2p_causes)
    for g in groups:
        if g["mismatch"]:
            causes.append(_mismatch_cause(g, g["mismatch"], hosts, _lines(inp)))
        inside = g.get("unfinished") or {}
        stuck = [r for r in g["not_entered"] if str(r) not in inside and r not in p2p_waits and
                 not _blocked_elsewhere(r, g["pg"], inp, by_name)]
        stuck_set = set(stuck)  # 200,000 ranks: a list membership test here was quadratic (issue 36 hole 5)
        behind = [r for r in g["not_entered"] if r not in stuck_set and str(r) not in inside and r not in p2p_waits]
        sending = [r for r in g["not_entered"] if r in p2p_waits and str(r) not in inside]
        if sending:
            causes.append({"kind": "blocked", "cause": False, "pg": g["pg"], "seq": g["seq"], "ranks": sending,
                           "text": f"{ranks_text(sending)} did not reach {_coll(g)}: "
                                   + "; ".join(f"rank {r} waits in {p2p_waits[r].text()}" for r in sending[:SHOWN]),
                           "fix": "", "source": "flight recorder"})
        if inside:
            causes.extend(_unfinished(g, inside, inp, hosts))
        if stuck:
            waited = len(g["entered"])
            tmo = f" (timeout {g['timeout_ms'] / 1000:g} s)" if g.get("timeout_ms") else ""
            text = (f"{_who(stuck[0], hosts) if len(stuck) == 1 else ranks_text(stuck)} never entered {_coll(g)}; "
                    f"the other {waited} rank{'s' if waited != 1 else ''} waited in it{tmo}")
            seen = inp.stacks.get(stuck[0])
            if stuck[0] in inp.where:  # a live rank's stack: where it is now
                text += f"; rank {stuck[0]}'s main thread is at {inp.where[stuck[0]]}"
            elif seen and seen["where"]:  # an armed rank's stacks file: where it was
                why = seen["reason"] + (f", then {seen['then']}" if seen.get("then") else "")
                text += f"; rank {stuck[0]}'s stack ({why}) was at {seen['where']}"
            causes.append({"kind": "never_entered", "cause": True, "pg": g["pg"], "seq": g["seq"], "ranks": stuck,
                           "text": text, "fix": "find why that rank stopped issuing collectives (its own log and "
                           "stack: a rank-dependent branch, an exception caught and ignored, a data loader that ran "
                           "out first); " + (f"its whole stack is in {seen['path']}" if seen else
                                             "py-spy dump --pid on a live hang shows where it is"),
                           "source": "flight recorder"})
        if behind:
            causes.append({"kind": "blocked", "cause": False, "pg": g["pg"], "seq": g["seq"], "ranks": behind,
                           "text": f"{ranks_text(behind)} did not reach {_coll(g)}: they were waiting in another "
                                   "group's collective", "fix": "", "source": "flight recorder"})
    for g in groups:
        causes.extend(_state_causes(g, inp, hosts))
    causes.extend(_state_mismatch(groups, inp, hosts, any(c["cause"] for c in causes)))
    causes.extend(_unusable(inp, any(c["cause"] for c in causes)))
    if not any(c["cause"] for c in causes) and any(c["kind"] == "blocked" for c in causes):
        causes.insert(0, _cycle(inp, hosts, [r for c in causes if c["kind"] == "blocked" for r in c["ranks"]]))
        causes = [c for c in causes if c]

    def stopped_here(c: dict) -> int:  # the group in which the culprits' last collective is explains the others
        last = [inp.dumps[r].last for r in c["ranks"] if r in inp.dumps and inp.dumps[r].last]
        return 0 if c["kind"] != "never_entered" or any(x[0] == c["pg"] for x in last) else 1

    return sorted(causes, key=lambda c: (c["kind"] == "never_entered", stopped_here(c)))


_sig_of = _sig


def _lines(inp: Inputs) -> dict:
    """rank -> the line of the job's own code it was at: a live rank's stack now (watch), else its stacks file."""
    out = {r: s["where"] for r, s in inp.stacks.items() if s.get("where")}
    out.update({r: w for r, w in inp.where.items() if w})
    return out


def _at(ranks: list, lines: dict) -> str:
    """' at train.py:12 in main' when those ranks' stacks name one line; each rank's line when they differ."""
    said = {r: lines[r] for r in ranks if lines.get(r)}
    if not said:
        return ""
    if len(set(said.values())) == 1 and len(said) == len(ranks):
        return f" at {next(iter(said.values()))}"
    return " at " + "; ".join(f"{w} (rank {r})" for r, w in list(said.items())[:3])


def _mismatch_cause(g: dict, mm: dict, hosts: dict, lines: Optional[dict] = None) -> dict:
    """One sequence id where ranks called different things (or the one thing they all called breaks its own
    rules), as torch's matcher names it: the op, which side (input / output), and where in a coalesced group."""
    major, odd = mm["variants"][0], mm["variants"][1:]
    what = mm["kind"] + (f" ({mm['side']})" if mm.get("side") else "")
    where = _coll(g, mm["seq"], major["op"])
    if mm.get("group_len", 1) > 1:
        where = (f"op {mm['position'] + 1} of {mm['group_len']} ({major['op']}) of the coalesced group "
                 f"#{mm['seq']} of {group_name(g)}")
    why = f" ({mm['why']})" if mm.get("why") else ""
    out = mm.get("side") not in (None, "input")

    lines = lines or {}

    def _sig(v: dict) -> str:  # what the ranks called, and where in their code (each side's file:line)
        return _sig_of(v, out) + _at(v["ranks"], lines)
    if not odd:  # every rank called it alike, and it breaks its own collective's rules
        text = f"{what} mismatch at {where}: {ranks_text(major['ranks'])} called {_sig(major)}{why}"
    elif mm["culprits"]:
        parts = [f"{ranks_text(v['ranks'])} called {_sig(v)}" for v in odd]
        text = f"{what} mismatch at {where}: " + "; ".join(parts) + \
            f" where {ranks_text(major['ranks'])} called {_sig(major)}{why}"
        if len(mm["culprits"]) == 1:
            text = f"{_who(mm['culprits'][0], hosts)}: " + text
    else:
        text = f"{what} mismatch at {where}: " + " vs ".join(f"{ranks_text(v['ranks'])} {_sig(v)}"
                                                             for v in mm["variants"]) + why
    return {"kind": f"{mm['kind']}_mismatch", "cause": True, "pg": g["pg"], "seq": mm["seq"],
            "ranks": mm["culprits"] or sorted(r for v in mm["variants"] for r in v["ranks"]), "text": text,
            "fix": failures.BY_ID["collective_mismatch"].fix, "source": "flight recorder",
            **({"side": mm["side"]} if mm.get("side") else {}),
            **({"position": mm["position"]} if mm.get("group_len", 1) > 1 else {})}


def _state_mismatch(groups: list, inp: Inputs, hosts: dict, have_cause: bool) -> list:
    """torch's COLLECTIVE_STATE_MISMATCH: at the collective every rank entered, some completed it and others did
    not (NCCL records completion; gloo marks every entry retired): those still inside wait for data that never
    came. A cause when nothing else is (a rooted collective can finish on the root's side first)."""
    out = []
    for g in groups:  # NCCL's entries say completed; gloo's only retired (a failed one too): not compared there
        opened = {int(r): st for r, st in (g.get("open_states") or {}).items()
                  if int(r) in inp.dumps and inp.dumps[int(r)].backend != "gloo"}
        finished = [r for r in g["entered"] if r not in opened]
        if not opened or not finished or g["not_entered"] or g["no_dump"]:
            continue
        waiting = sorted(opened)
        states = "/".join(sorted(set(opened.values())))
        its = "its" if len(waiting) == 1 else "their"
        out.append({"kind": "state_mismatch", "cause": not have_cause and not out, "pg": g["pg"], "seq": g["seq"],
                    "ranks": waiting, "text": f"state mismatch at {_coll(g)}: {ranks_text(finished)} completed it; "
                    f"{_who(waiting[0], hosts) if len(waiting) == 1 else ranks_text(waiting)} did not (state "
                    f"{states}): {its} data never came or {its} GPU never finished it",
                    "fix": "find the link or the GPU: `ncclcheck links` on the same nodes (pairwise), NCCL's RAS "
                           "(`ncclras`) on a live hang; arm the next run with TORCH_NCCL_ENABLE_TIMING=1 (ncclcheck "
                           "recommend --postmortem DIR --format env) so started and scheduled tell them apart",
                    "source": "flight recorder"})
    return out


def _unusable(inp: Inputs, have_cause: bool) -> list:
    """A dump read and then unusable is said, with why: unmeasured is never healthy (a dump whose sequence ids were
    all unreadable had read as "nothing wrong found")."""
    out = []
    for r, d in sorted(inp.dumps.items()):
        if not d.unusable:
            continue
        n = sum(d.unusable.values())
        used = d.entries - n
        whys = "; ".join(f"{k} ({v})" for k, v in sorted(d.unusable.items(), key=lambda kv: -kv[1])[:4])
        none = used <= 0
        out.append({"kind": "unusable_dump", "cause": none and not have_cause and not any(c["cause"] for c in out),
                    "pg": None, "seq": None, "ranks": [r],
                    "text": f"rank {r}'s flight-recorder dump ({d.source}) was read but "
                            f"{'none' if none else n} of its {d.entries} entries could be used: {whys}"
                            + ("; its collectives are not compared" if none else ""),
                    "fix": "pass the dumps torch wrote (TORCH_FR_DUMP_TEMP_FILE / the watchdog's dump), unedited; a "
                           "dump another tool rewrote may have lost torch's fields",
                    "source": "flight recorder"})
    return out


def _unfinished(g: dict, inside: dict, inp: Inputs, hosts: dict) -> list:
    """Ranks still inside an earlier collective of the group that others completed (flight.analyse_groups): behind,
    not culprits. A consequence while anything else explains it (a host that does not answer, a dead rank); the
    cause when nothing does (analyse promotes it): the data they wait for inside it never came. Where NCCL's
    recorder shows one of them never started it on its GPU (timing on), that rank is the cause (_state_causes)."""
    seq = min(inside.values())
    ranks = sorted(int(r) for r, q in inside.items() if q == seq)
    done = sorted(int(r) for r, c in (g.get("last_completed") or {}).items() if c >= seq)
    who = _who(ranks[0], hosts) if len(ranks) == 1 else ranks_text(ranks)
    mine = inp.dumps[ranks[0]].groups[g["pg"]].coll(seq)
    states = {str(r): flight.entry_state(inp.dumps[r], g["pg"], seq) for r in ranks}
    gpu = _state_causes(dict(g, seq=seq, op=mine.op if mine else None, open_states=states, not_entered=[]), inp, hosts)
    return [c for c in gpu if c["kind"] == "not_started"] + [{
            "kind": "unfinished", "cause": False, "pg": g["pg"], "seq": seq, "ranks": ranks,
            "text": f"{who} never finished {_coll(g, seq, mine.op if mine else 'collective')}, which "
                    f"{ranks_text(done)} completed: the data they wait for inside it never came (a peer that stopped "
                    f"sending mid-collective, a NIC or a link); so they never reached {_coll(g)}",
            "fix": "find the link: `ncclcheck links` on the same nodes (pairwise); the hosts of the ranks that did not "
                   "answer or left no dump first", "source": "flight recorder"}]


def _state_causes(g: dict, inp: Inputs, hosts: dict) -> list:
    """Where the ranks that entered the last collective stand in it (NCCL's flight recorder): "scheduled" with
    timing on = called, its GPU never started it (its stream busy in earlier work); "started" on every rank = it
    began and never finished (a peer's GPU, a NIC or a link). Without TORCH_NCCL_ENABLE_TIMING=1 torch never
    records "started", so "scheduled" says nothing about the GPU: then only that it did not complete."""
    opened = {int(r): st for r, st in (g.get("open_states") or {}).items()
              if int(r) in inp.dumps and inp.dumps[int(r)].backend == "nccl"}
    if not opened:
        return []
    timed = set(g.get("timing") or [])
    not_started = sorted(r for r, st in opened.items() if st == "scheduled" and r in timed)
    started = sorted(r for r, st in opened.items() if st == "started")
    unknown = sorted(r for r, st in opened.items() if st == "scheduled" and r not in timed)
    coll = _coll(g)
    if not_started:
        who = _who(not_started[0], hosts) if len(not_started) == 1 else ranks_text(not_started)
        rest = f"; {ranks_text(started)} started it and waited" if started else ""
        return [{"kind": "not_started", "cause": True, "pg": g["pg"], "seq": g["seq"], "ranks": not_started,
                 "text": f"{who} called {coll} but its GPU never started it (flight recorder: state scheduled, "
                         f"timing on): its CUDA stream was still busy with earlier work{rest}",
                 "fix": "look at that rank's GPU, not the network: a kernel before the collective did not end (a "
                        "hung or very long kernel, a spin on device memory, a GPU fault): `py-spy dump --native "
                        "--pid` on a live hang, `nvidia-smi` (100 % utilisation on that GPU), `dmesg -T | grep -i "
                        "xid` on its host", "source": "flight recorder"}]
    if started and not g["not_entered"] and not g["no_dump"] and not unknown:
        return [{"kind": "stalled", "cause": True, "pg": g["pg"], "seq": g["seq"], "ranks": started,
                 "text": f"{ranks_text(started) if len(started) > 1 else _who(started[0], hosts)} started {coll} "
                         "and never finished it (flight recorder: state started): the collective stalled inside "
                         "NCCL, a peer's GPU, a NIC or a link",
                 "fix": "find the link: `ncclcheck links` on the same nodes (pairwise), NCCL's RAS (`ncclras`) on a "
                        "live hang, the NICs' error counters; NCCL_DEBUG=INFO shows which transport each peer used",
                 "source": "flight recorder"}]
    if unknown:
        return [{"kind": "not_completed", "cause": False, "pg": g["pg"], "seq": g["seq"], "ranks": unknown,
                 "text": f"{ranks_text(unknown)} never completed {coll}; whether their GPUs started it is unknown "
                         "(the job ran without TORCH_NCCL_ENABLE_TIMING=1)",
                 "fix": "arm the next run: ncclcheck recommend --postmortem DIR --format env (sets "
                        "TORCH_NCCL_ENABLE_TIMING=1)", "source": "flight recorder"}]
    return []


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


def _exit_text(f: dict) -> str:
    if f.get("signal"):
        return f"died of {f['signal']}"
    return f"exited with code {f.get('exitcode')}"


def first_failure(by_rank: dict) -> Optional[int]:
    """torchrun's "first observed failure": each agent (one per node) names its own; across nodes the earliest by
    its time stamp. Stamps are whole seconds of when each agent noticed (each polls its workers every
    --monitor-interval), so a death and the exit it caused on another node read a second apart either way: within
    that resolution a rank killed by a signal of its own (never SIGTERM: an agent's stop) comes before one that
    exited with a code (often a peer's consequence: gloo raised when the killed rank's sockets closed)."""
    firsts = [f for f in by_rank.values() if f.get("first")]
    if not firsts:
        return None
    stamps = {f["rank"]: precedence.stamp_s(f.get("time")) for f in firsts}
    if all(v is not None for v in stamps.values()):
        t0 = min(stamps.values())
        near = [f for f in firsts if stamps[f["rank"]] - t0 <= precedence.STAMP_TICKS_APART]
        best = min(near, key=lambda f: (f.get("signal") in (None, "SIGTERM"), stamps[f["rank"]], f["rank"]))
    else:
        best = min(firsts, key=lambda f: (str(f.get("time") or ""), f.get("signal") in (None, "SIGTERM"), f["rank"]))
    return best["rank"]


def _failed(f: dict) -> bool:
    """A launcher's record of a rank that ended badly: a signal or a non-zero exit code."""
    return bool(f.get("signal")) or (isinstance(f.get("exitcode"), int) and f["exitcode"] != 0)


def _dead_causes(groups: list, world: list, inp: Inputs, hosts: dict, by_rank: dict, have_cause: bool,
                 covered: frozenset = frozenset(), watched: frozenset = frozenset(), at_exit: bool = False) -> list:
    out = []
    empty = empty_dumps(inp)
    no_dump = sorted(({r for g in groups for r in g["no_dump"]} |
                      ({r for r in world if r not in inp.dumps} if inp.dumps else set())) - covered)
    if not inp.dumps:  # no flight recorder at all: the launcher's failed ranks alone (and the empty dumps)
        no_dump = sorted(({r for r, f in by_rank.items() if _failed(f)} | set(empty)) - covered)
    first = first_failure(by_rank)
    firsts = {r for r, f in by_rank.items() if f.get("first")}
    first_group: dict = {}  # rank -> the first group it left no dump for (one pass: linear in ranks x groups)
    for g in groups:
        for r in g["no_dump"]:
            first_group.setdefault(r, g)

    def order(r: int) -> tuple:  # the launcher's first failure first; SIGTERM is usually the launcher stopping others
        f = by_rank.get(r) or {}
        return (r != first, not f.get("first"), f.get("signal") == "SIGTERM", not f.get("signal"),
                str(f.get("time") or ""), r)

    ordered = sorted(no_dump, key=order)
    for r in ordered[:MAX_RANK_CAUSES]:
        f = by_rank.get(r) or {}
        death = _death(r, by_rank)
        where = first_group.get(r)
        # torchrun stops the other workers with SIGTERM once one failed: those are consequences of the first
        stopped = (f.get("signal") == "SIGTERM" or bool(f.get("stopped"))) and first is not None and r not in firsts
        kind = "no_dump" if inp.dumps else "died" if f.get("signal") else "exited"
        # torchrun's first observed failure is the root; an abort or an exit code after it is usually its
        # consequence (NCCL's watchdog, gloo, Python), but a kill from outside (the OOM killer, an operator) or a
        # crash is nobody's: two at once are two causes. Any of them yields to a cause found elsewhere (have_cause).
        # torchrun's SIGKILL past its grace is its stop
        own = f.get("signal") in precedence.OWN_DEATHS and not f.get("stopped")
        # NCCL's watchdog takes its process down with SIGABRT once a collective timed out: the timeout's consequence
        aborted = f.get("signal") == "SIGABRT" and (r in watched or None in watched)
        # SIGTERM is what a launcher, the scheduler or an operator sends to stop a process: whoever sent it had a
        # reason this death does not say (a peer's failure, a time limit, scancel), so it is never the cause itself
        told = f.get("signal") == "SIGTERM"
        cause = not have_cause and not stopped and not aborted and not told and (first is None or r == first or own)
        if r in empty:
            kind = "no_dump"
            text = f"rank {r}'s dump is empty: killed while dumping? ({_who(r, hosts)}, {empty[r]})"
        elif kind == "exited":
            text = f"{_who(r, hosts)} {_exit_text(f)}"
        elif r in inp.unanswered:  # live: a registered rank whose responder did not answer
            why = inp.unanswered[r]
            text = f"{_who(r, hosts)} {why}" if why.startswith(GARBAGE) else f"{_who(r, hosts)} did not answer ({why})"
        else:
            text = f"{_who(r, hosts)} left no dump" if inp.dumps else f"{_who(r, hosts)} died"
            if inp.dumps and inp.stacks and r not in inp.stacks and not f.get("signal"):  # armed: peers wrote theirs
                text = f"{_who(r, hosts)}{words.LEFT_NOTHING_ARMED}"
        if r == first and len(by_rank) > 1:
            text += " (the launcher's first observed failure)"
        if where is not None:
            text += f"; the other ranks were in {_coll(where)}"
        if death and kind != "exited":
            text += f"; {death}"
        if stopped:
            text += f" (the launcher stopped it after rank {first} failed)"
        elif aborted:
            text += words.WATCHDOG_ABORT
        elif f.get("signal") == "SIGABRT" and at_exit:
            text += words.ABORTED_AT_EXIT
        fix = ("read that rank's own output, the last lines before it exited (torchrun --redirects 3 --log-dir DIR "
               "keeps each rank's apart), and arm the next run so it leaves what names the cause: ncclcheck "
               "recommend --postmortem DIR --format env" if kind == "exited" else
               "find why it died: `dmesg -T | grep -i -e oom -e killed` on its host (the OOM killer sends SIGKILL), "
               "the scheduler's log (preemption, time limit), its own stderr")
        # with nothing else found, the rank that left nothing is the suspect, signal or not
        c = {"kind": kind, "cause": cause, "pg": where["pg"] if where else None,
             "seq": where["seq"] if where else None, "ranks": [r], "text": text, "fix": "" if stopped else fix,
             "source": "launcher" if death else "flight recorder"}
        out.append(not_in_text(c, ["exited"]) if kind == "exited" and cause else c)
    rest = ordered[MAX_RANK_CAUSES:]
    if rest:  # one small file naming rank 999,999 made a million causes (3.9 GB, a 600 MB report): one line for them
        out.append({"kind": "no_dump" if inp.dumps else "died", "cause": False, "pg": None, "seq": None,
                    **_listed(rest), "text": f"{ranks_text(rest)} also left no dump" if inp.dumps else
                    f"{ranks_text(rest)} also died", "fix": "", "source": "flight recorder"})
    return out


# watch's words for a rank whose responder let the bound pass (live/watch.py ask): a connect or reply that hung, as
# across a cut link or to a powered-off host; a refusal or a reset says the host is there and the rank is not
NO_ANSWER_IN_BOUND = "within the bound"
# ... and for a rank whose responder answered with what watch refused (over its bounds, not sealed, not JSON, not that
# rank's): it answered, so it is neither silent nor dead (a forged record may point at a stranger's listener)
GARBAGE = "answered with garbage"


def _silent_hosts(groups: list, world: list, inp: Inputs, hosts: dict, have_cause: bool) -> tuple[list, set]:
    """Live (`ncclcheck watch`): a host none of whose ranks answered is one fault, named once with its ranks, not a
    line per rank. Seen from the watcher's own host (inp.observer), every other host silent (two or more) while its
    own ranks answer is that host cut off: one cut link explains it, every other host down at once does not. Returns
    (causes, the ranks they cover)."""
    if not inp.unanswered:
        return [], set()
    by_host: dict = {}
    for r in world:
        h = (hosts.get(r) or {}).get("host")
        if h:
            by_host.setdefault(h, []).append(r)
    silent = {h: rs for h, rs in by_host.items()
              if all(r in inp.unanswered and not inp.unanswered[r].startswith(GARBAGE) for r in rs)}
    talking = [h for h in by_host if h not in silent]
    if not silent or not talking:  # nobody answered: nothing to tell one host from another by
        return [], set()
    first_group: dict = {}
    for g in groups:
        for r in g["no_dump"]:
            first_group.setdefault(r, g)

    def waiting(rs: list) -> tuple[str, Optional[dict]]:
        g = next((first_group[r] for r in rs if r in first_group), None)
        return (f"; {ranks_text(g['entered'])} wait in {_coll(g)}" if g and g["entered"] else ""), g

    def cut(rs: list) -> bool:
        return all(NO_ANSWER_IN_BOUND in inp.unanswered[r] for r in rs)

    fix = ("from another host, reach its ranks' addresses (the report's live.ranks): a host that answers ping "
           "but not the ports is a firewall; none at all is its link or the host itself (its console, `ip link`, "
           "the switch port); `ncclcheck links` on the same nodes names the dead pair")
    order = sorted(silent, key=lambda h: silent[h][0])
    if inp.observer in talking and len(talking) == 1 and len(silent) >= 2 and all(cut(silent[h]) for h in order):
        mine, others = by_host[inp.observer], sorted(r for h in order for r in silent[h])
        tail, g = waiting(others)
        text = (f"host {inp.observer} ({ranks_text(mine)}), where watch runs, reaches none of the other "
                f"{len(order)} hosts ({', '.join(order)}: {ranks_text(others)} did not answer; rank {others[0]}: "
                f"{inp.unanswered[others[0]]}): {inp.observer}'s link is cut (one cut link explains every silent "
                f"host){tail}")
        return [{"kind": "host_cut", "cause": not have_cause, "pg": g["pg"] if g else None,
                 "seq": g["seq"] if g else None, "ranks": mine, "text": text, "fix": fix, "source": "live"}], \
            set(others)
    out, covered = [], set()
    for h in order:
        rs = silent[h]
        tail, g = waiting(rs)
        what = "the host is down or its link is cut" if cut(rs) else "its ranks are gone or refuse"
        text = (f"host {h} ({ranks_text(rs)}): none of its ranks answered (rank {rs[0]}: {inp.unanswered[rs[0]]}): "
                f"{what}{tail}")
        out.append({"kind": "host_cut" if cut(rs) else "no_dump", "cause": not have_cause and not out,
                    "pg": g["pg"] if g else None, "seq": g["seq"] if g else None, "ranks": rs, "text": text,
                    "fix": fix, "source": "live"})
        covered.update(rs)
    return out, covered


def _listed(ranks: list) -> dict:
    """A cause's ranks: the first MAX_LISTED_RANKS of them, and ranks_total when there are more (a million ranks
    listed were 7.9 MB of one report)."""
    ranks = sorted(ranks)
    return {"ranks": ranks[:MAX_LISTED_RANKS], **({"ranks_total": len(ranks)} if len(ranks) > MAX_LISTED_RANKS
                                                  else {})}




def _log_causes(events: list, hosts: dict, by_rank: Optional[dict] = None) -> list:
    out = []
    seen: dict = {}  # (class, rank or the ranks its message names, wrapper) -> its cause
    by_rank = by_rank or {}
    first = first_failure(by_rank)
    after_first = first is not None and by_rank[first].get("signal") != "SIGTERM"
    wraps = precedence.wrappers(events)  # torch's wrapper text -> NCCL's own line about the same failure
    # a line with no rank of a class some rank's own line has ("Assertion ... failed" above "[rank0]: ... device-side
    # assert triggered"): the ranked line says the same fault, with its rank
    ranked = {e["class"] for e in events if e["rank"] is not None}
    per_class: dict = {}  # class -> causes given a line of their own
    rest: dict = {}  # class -> [ranks past MAX_RANK_CAUSES], one line for them (one per rank was O(ranks) lines)
    peers: dict = {}  # rank (None too) -> the first peer its closed connections name
    lost = None  # the node srun says Slurm lost: the steps it cancelled elsewhere for it are its consequence
    for e in events:
        if e["class"] == "peer_closed" and (p := failures.peer_of(e["line"])):
            peers.setdefault(e["rank"], p)
        if e["class"] == "node_failure" and lost is None:
            lost = failures.lost_node(e["line"])
    # the job spans hosts: two hosts named, or more ranks than the largest common node has GPUs
    spans = (len({_short(h.get("host")) for h in hosts.values() if h.get("host")} |
                 {_short(e["host"]) for e in events if e.get("host")}) >= 2
             or max((e["rank"] for e in events if isinstance(e["rank"], int)), default=0) >= GPUS_PER_NODE)
    for i, e in enumerate(events):
        cls = failures.BY_ID[e["class"]]
        near = cls.id in failures.LOOPBACK_FROM and failures.loopback_peer(e["line"])
        if near and (spans or failures.hostname_loopback(e["line"])):
            cls = failures.LOOPBACK  # its own words name 127.x as the peer, across hosts (or the hostname's 127.0.1.1)
            e = dict(e, **{"class": cls.id})
        if cls.id == "node_failure" and (node := failures.lost_node(e["line"])):
            e = dict(e, host=node)  # srun's line is about the node it names, wherever srun ran
        named = e.get("named") or []  # "rank 0 and rank 1 both on ...": one fault of both
        named = e.get("about") or (named if e["rank"] is None or e["rank"] in named else [])  # or those it is about
        key = (e["class"], tuple(named) if named else e["rank"], i in wraps)
        if i in wraps and events[wraps[i]]["class"] == e["class"]:
            continue  # the wrapper's class is its NCCL line's: that line says it all
        if e["rank"] is None and not named and e["class"] in ranked:
            continue
        if key in seen:
            if seen[key].get("host") is None and e["host"]:
                seen[key]["host"] = e["host"]  # NCCL's header of the same fault, read in another file
            continue
        per_class[e["class"]] = per_class.get(e["class"], 0) + 1
        if per_class[e["class"]] > MAX_RANK_CAUSES and e["rank"] is not None:
            rest.setdefault(e["class"], []).append(e["rank"])
            continue
        ranks = named or ([e["rank"]] if e["rank"] is not None else [])
        who = (_who_all(ranks, hosts) if ranks else
               f"host {e['host']}" if e["host"] else f"{e['source'].rsplit('/', 1)[-1]} (no rank on the line)")
        seq = f" (SeqNum {e['seq']})" if e.get("seq") is not None else ""
        # the line's own words, quoted: what proves the cause (or, for a consequence, what the rank saw), described
        # as what it is (a dump signal in the watchdog's family is a dump signal, not a timeout of its own)
        said_as = what_of(cls, e["line"])
        what = (f"{said_as}: {e['line']}" if cls.id in ("exception", "guard_failed") else
                said_as + words.nccl_said(failures.warn_text(e["line"])) if e.get("nccl") else
                said_as + words.line_said(failures.telling(e["line"])))
        if near and cls.id != failures.LOOPBACK.id:
            what += words.LOOPBACK_PEER
        peer = peers.get(e["rank"], peers.get(None)) if cls.id == "peer_closed" else None
        if peer and peer not in what:  # a wrapper's words name no peer; the rank's NCCL line does
            what += words.the_peer(peer)
        if e.get("target"):
            what += words.last_target(e["target"])
        if e.get("retries"):
            what += words.ends_retrying(e["retries"])
        if CUT in e["line"] and CUT not in what:  # warn_text's own cut hid the mark: say it was cut
            what += f" ... {CUT}]"
        cause = cls.cause and not e.get("retries")  # a connect retried to the text's end: why, it does not say
        if i in wraps:
            said = events[wraps[i]]
            cause = False
            what = (cls.what if cls.cause else words.WRAPPER) + words.wrapper_of(said["rank"],
                                                                               failures.BY_ID[said["class"]].what)
        elif cause and lost and cls.id == "scheduler_cancelled" and failures.cancelled_for_a_node(e["line"]):
            cause = False
            what += words.after_node_lost(lost)
        elif (cause and after_first and ranks and first not in ranks and e["rank"] != first
              and cls.id in precedence.AFTER_A_DEATH):
            cause = False
            what += f" (after rank {first} {_exit_text(by_rank[first])}, the launcher's first observed failure)"
        c = {"kind": e["class"], "cause": cause, "pg": None, "seq": e.get("seq"), "ranks": ranks,
             "text": f"{who}: {what}{seq}", "fix": cls.fix, "line": e["line"], "source": e["source"],
             **({"host": e["host"]} if e["host"] else {})}
        if e.get("tied"):
            c["tied_by"] = e["tied"]
        if e.get("hypotheses"):
            c = suspected(c, [cls.id])
        seen[key] = c
        out.append(c)
    for cls_id, ranks in rest.items():
        cls = failures.BY_ID[cls_id]
        out.append({"kind": cls_id, "cause": False, "pg": None, "seq": None, **_listed(ranks),
                    "text": f"{ranks_text(ranks)} also: {cls.what}", "fix": cls.fix, "source": "logs"})
    # torchrun's "first observed failure" first: its own lines before other ranks' (file order within each)
    return sorted(out, key=lambda c: first not in c["ranks"]) if first is not None else out


def _ras_causes(inp: Inputs) -> tuple:
    """(causes, rank -> host) from ncclras outputs (either form): dead ranks and ranks with an error or abort are
    causes, ranks behind their peers (where a hang sits) too; unresponsive ranks are listed as consequences."""
    from ..checks.nccl_ras import parse_ras

    out, hosts = [], {}
    for path, text in inp.ras:
        try:
            parsed = parse_ras(text)
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
                        hosts[r["rank"]] = {"host": clip(str(r["host"]), MAX_FIELD_CHARS), "local_rank": None}
                    extra = (f" ({r['said']})" if r.get("said") else f" ({r['op']} {r['count']} of {r['max']})"
                             if kind == "ras_lagging" else "")
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


def analyse(inp: Inputs, preflight: Optional[dict] = None,
            here: Optional[Callable[[], Optional[dict]]] = None) -> dict:
    """The report's `postmortem` section (plain JSON). here: this machine's {"host", "interfaces"} when asked (diagnose
    reads them through facts/; a cause on this very host may name what it has)."""
    events, per_rank, log_hosts = _logs(inp)
    ras, ras_hosts = _ras_causes(inp)
    log_hosts = {**ras_hosts, **log_hosts}
    nranks = [p["nranks"] for p in per_rank.values() if p.get("nranks")]
    world = _world(inp, preflight, nranks)
    hosts = _hosts(inp, preflight, log_hosts)
    by_rank = {f["rank"]: f for f in inp.failures if isinstance(f.get("rank"), int)}
    groups = flight.analyse_groups(inp.dumps, world)
    fr = _alone_causes(groups, inp, hosts, _fr_causes(groups, inp, hosts, by_rank))
    if not inp.dumps:  # an unarmed job: where each rank stood, from its watchdog lines
        seen = {e["rank"] for e in events if isinstance(e["rank"], int)} | _ranks_with_lines(inp)
        stated = max((w for log in inp.logs for w in log.worlds), default=None)
        fr += watchlines.causes(events, max(len(world), stated or 0), seen, lambda r: _who(r, hosts), ranks_text,
                                stated)
    # a rank the launcher stopped after a rank died of its own signal did not skip what it never reached
    fr = precedence.stopped_not_skipped(fr, by_rank, inp.stacks, first_failure(by_rank), groups)
    logs = inventory.causes(_with_context(_log_causes(events, hosts, by_rank), inp, preflight, here), inp)
    # a dump read but unusable is the cause only when nothing else explains the failure (a launcher's death, a log
    # line): known only here, once every source of causes was read
    have = any(c["cause"] and c["kind"] != "unusable_dump" for c in fr + logs + ras)
    silent, covered = _silent_hosts(groups, world, inp, hosts, have)
    watched = frozenset(e["rank"] for e in events if e["class"] == "watchdog_timeout")
    at_exit = any(e["class"] == "shutdown_crash" for e in events)  # a SIGABRT as a process exited
    dead = silent + _dead_causes(groups, world, inp, hosts, by_rank, have or bool(silent), frozenset(covered),
                                 watched, at_exit)
    if have or any(c["cause"] for c in dead):
        fr = [dict(c, cause=False) if c["kind"] == "unusable_dump" else c for c in fr]
    fr = own.said_by_lines(fr, logs)  # a rank's own cause outranks what the others imply of it
    ordered = ([c for c in fr if c["cause"]] + [c for c in ras if c["cause"]] + [c for c in logs if c["cause"]] +
               [c for c in dead if c["cause"]] + [c for c in fr + ras + dead + logs if not c["cause"]])
    if not any(c["cause"] for c in ordered):  # nothing else explains ranks stuck inside a collective others finished
        first = next((c for c in ordered if c["kind"] == "unfinished"), None)
        if first is not None:
            ordered = [dict(first, cause=True)] + [c for c in ordered if c is not first]
    # what a rank said of itself (it raised, exited, was killed) outranks what the others' recorders imply of it
    ends = own.ends(inp.stacks, by_rank, events, inp.error_files, first_failure(by_rank), frozenset(inp.dumps))
    ordered = own.first(ordered, ends, groups, lambda r: _who(r, hosts), _coll, ranks_text)
    ended = next((log.end for log in inp.logs if log.end), None)
    if _survived(events, inp, by_rank):  # every failure line came before the job's own end: it went on past them
        ordered = [dict(c, cause=False, survived=True) for c in ordered]
    else:
        ordered = _peer_ended(_never_nothing(ordered, by_rank, hosts), by_rank, hosts)
    phases = _phases(inp)
    if not ordered and inp.logs and not inp.dumps and ended is None:  # nothing failed, and nothing ended either
        ordered = _stopped(phases, inp.logs[0].path)
    ordered = _one_line(ordered, events, inp)
    verdict = _verdict(ordered, groups, hosts, by_rank)
    ranks = []
    for r in world:
        h = hosts.get(r) or {}
        f = by_rank.get(r) or {}
        d = inp.dumps.get(r)
        ranks.append({"rank": r, "host": h.get("host"), "local_rank": h.get("local_rank"),
                      "dump": d.source if d else None, "exitcode": f.get("exitcode"), "signal": f.get("signal"),
                      "last": list(d.last) if d and d.last else None})
    failed = inp.failures if len(inp.failures) <= MAX_REPORT_ROWS else \
        sorted(inp.failures, key=lambda f: (not f.get("first"), f.get("rank") or 0))[:MAX_REPORT_ROWS]
    return clip_all({  # every text from an input cut at MAX_ITEM_CHARS, with a mark (bound.py)
        "verdict": verdict,
        "world_size": len(world),
        "inputs": inp.read,
        "refused": inp.refused,
        "ranks": ranks if len(ranks) <= MAX_REPORT_ROWS else
        [r for r in ranks if r["dump"] is None or r["exitcode"]][:MAX_REPORT_ROWS],
        "groups": groups if len(world) <= MAX_REPORT_ROWS else
        [dict(g, last_enqueued={}, last_completed={}, windows={}) for g in groups],
        "causes": ordered,
        "launcher": {"failures": failed, "first": first_failure(by_rank),
                     **({"failures_total": len(inp.failures)} if failed is not inp.failures else {})},
        "error_files": [{k: e[k] for k in ("path", "rank", "message")} for e in inp.error_files],
        "transport": _transport(per_rank, preflight),
        "ended": _ended(ended, ordered),
        "phases": {("none" if r is None else str(r)): endings.PHASE_IDS[p]
                   for r, p in list(phases.items())[:MAX_REPORT_ROWS]},
        "timeline": _timeline(inp.dumps, ordered) if len(inp.dumps) <= 256 else {},
    })


# The kinds of finding whose (group, sequence id) is where the job stopped: a collective some rank of the group never
# entered or that ended a rank, so it did not complete for the job, whatever a rank's recorder says of it
_STOPPED_AT = ("exception", "exited", "died", "no_dump", "never_entered", "blocked", "op_mismatch", "size_mismatch",
               "dtype_mismatch", "stalled", "not_started", "host_cut")


def _timeline(dumps: dict, causes: list) -> dict:
    """flight.timeline() with the verdict's knowledge: a collective the verdict names as where the job stopped is
    `failed` on every rank that recorded it. gloo's recorder retires a failed entry too, so its `done` alone would draw
    rank 0's failed all_reduce #6 as completed."""
    stopped = {(c["pg"], c["seq"]) for c in causes if c["kind"] in _STOPPED_AT and c.get("seq") is not None}
    out = flight.timeline(dumps)
    for cells in out.values():
        for c in cells:
            if (c["pg"], c["seq"]) in stopped:
                c["failed"] = True
    return out


MAX_EXPLAINED = 8  # causes given their host's context (each reads that host's NCCL lines again)


def _with_context(causes: list, inp: Inputs, preflight: Optional[dict],
                  here: Optional[Callable[[], Optional[dict]]]) -> list:
    """Log causes whose class needs what else the evidence says of their host (postmortem/context.py): the
    interface setting and the interfaces that exist, the network plugins NCCL tried."""
    done = 0
    for c in causes:
        if not c["cause"] or done >= MAX_EXPLAINED:
            continue
        got = context.explain(c["kind"], c.get("host"), inp.logs, preflight, here)
        if got:
            done += 1
            c["text"] += got["text"]
            c["fix"] = got.get("fix") or c["fix"]
    return causes


def _alone_causes(groups: list, inp: Inputs, hosts: dict, causes: list) -> list:
    """A group with one member whose NCCL collective never completed: no peer could hold it, so that rank's own GPU
    work did (a kernel queued before it that never ended), whether or not timing was on (the real H100 capture
    `stuck`: torch.cuda._sleep before all_reduce #6, timing off). Replaces the "never completed, unknown whether
    started" that says nothing more; with timing on, _state_causes already names it."""
    alone = []
    for g in groups:
        members, states = g.get("members") or [], g.get("open_states") or {}
        r = members[0] if len(members) == 1 else None
        d = inp.dumps.get(r) if r is not None else None
        if d is None or d.backend != "nccl" or states.get(str(r)) != "scheduled" or r in (g.get("timing") or []):
            continue
        alone.append({"kind": "not_started", "cause": True, "pg": g["pg"], "seq": g["seq"], "ranks": [r],
                      "text": words.own_gpu_hang(_who(r, hosts), _coll(g), "scheduled", False),
                      "fix": words.OWN_GPU_FIX, "source": "flight recorder"})
    held = {(c["pg"], c["seq"], tuple(c["ranks"])) for c in alone}
    return alone + [c for c in causes if not (c["kind"] == "not_completed" and
                                              (c["pg"], c["seq"], tuple(c["ranks"])) in held)]


def _never_nothing(causes: list, by_rank: dict, hosts: dict) -> list:
    """A job that failed is never "nothing wrong": with no cause found, a rank the launcher saw fail, or a failure
    message that is only a consequence (a watchdog timeout, a peer gone, an NCCL warning no row knows), becomes "the
    job failed; the cause is not in this text", the root: the failing lines quoted, and what to suspect, most likely
    first, with how to test each (nccl/hypotheses.py). RAS's "unresponsive" alone is not a failure (the job may still
    run)."""
    if any(c["cause"] for c in causes):
        return causes
    first = first_failure(by_rank)
    # a death by SIGABRT where a watchdog fired is the watchdog's abort: what the watchdog saw leads, not it
    watched = any(c["kind"] in ("watchdog_timeout", "stalled_all", "stalled_one") for c in causes)
    failed = sorted((f for f in by_rank.values() if _failed(f) and not (watched and f.get("signal") == "SIGABRT")),
                    key=lambda f: (f["rank"] != first, f.get("signal") == "SIGTERM", f["rank"]))
    seen = sorted((c for c in causes if c["kind"] not in _NOT_A_FAILURE), key=lambda c: _EVIDENCE.get(c["kind"], 99))
    if failed:
        f = failed[0]
        seen = [c for c in seen if not (c["kind"] in ("died", "exited") and c["ranks"] == [f["rank"]])]  # itself
        text, ranks = f"{_who(f['rank'], hosts)} {_exit_text(f)}", [f["rank"]]
        if seen:
            text += f"; then {len(seen)} consequence(s), the first: {seen[0]['text']}"
    elif seen:
        text, ranks = seen[0]["text"], seen[0]["ranks"]
    else:
        return causes
    kinds = (["died" if failed[0].get("signal") else "exited"] if failed else []) + [c["kind"] for c in seen]
    root = not_in_text({"kind": "job_failed", "cause": True, "pg": None, "seq": None, "ranks": ranks, "text": text,
                        "source": "launcher" if failed else seen[0].get("source")}, kinds)
    return [root, *causes]


def _ended(ended: Optional[tuple], causes: list) -> Optional[dict]:
    """The line that shows the job's end, and the verdict's words for it (with the failure lines it went past)."""
    if ended is None:
        return None
    text = words.ended(endings.BY_ID[ended[1]].what, ended[2])
    past = [c for c in causes if c.get("survived")]
    if past:
        text += words.survived(len(past), past[0]["text"])
    return {"sign": ended[1], "line": ended[2], "text": text}


ONE_LINE_TEXT = 3  # a paste of at most this many lines with one failure line in it: that line is all there is


def _one_line(causes: list, events: list, inp: Inputs) -> list:
    """A cause named from the one line a paste holds, a line several situations print ("exitcode: -9", "Connection
    refused"): still named, with what else it may be and how to tell, most likely first, as its `hypotheses`."""
    root = next((c for c in causes if c["cause"]), None)
    if (root is None or len(events) != 1 or inp.dumps or sum(log.lines for log in inp.logs) > ONE_LINE_TEXT
            or root["kind"] not in hypotheses.ONE_LINE):
        return causes
    found = hypotheses.suspects([root["kind"]], hypotheses.ONE_LINE)
    said = dict(root, fix=root["fix"] + words.else_suspects(found),
                hypotheses=[{"id": s.id, "what": s.what, "test": s.test} for s in found])
    return [said if c is root else c for c in causes]


def _survived(events: list, inp: Inputs, by_rank: dict) -> bool:
    """Did the job go on past every failure line to its own end (nccl-tests' OK, torchrun's SUCCEEDED, exit 0)? A
    WARN the job survived (a plugin that failed before NCCL fell back, NCCL's service thread at teardown) is no
    failure: no rank failed (no launcher record, no dump), each line is an NCCL WARN and came before an end a program
    printed (not a script's own "done"), in the log that ends."""
    ends = {log.path: log.end[0] for log in inp.logs if log.end and log.end[1] not in endings.WORDS_ONLY}
    return bool(ends and events and not inp.dumps and not any(_failed(f) for f in by_rank.values())
                and all(e["source"] in ends and e["order"][1] < ends[e["source"]] and not e.get("raised")
                        and e.get("nccl") for e in events))  # NCCL's own WARNs: what NCCL falls back from


def _phases(inp: Inputs) -> dict:
    """rank (None: lines of no rank) -> the latest phase its lines show (nccl/endings.py), every log together."""
    out: dict = {}
    for log in inp.logs:
        for r, part in log.ranks().items():
            out[r] = max(out.get(r, 0), part.phase)
        if log.steps_at or log.tests_rows:  # a loop's own prints, nccl-tests' rows: no rank of their own
            out[None] = max(out.get(None, 0), endings.STEPS)
    if len(out) > 1 and out.get(None) == endings.LAUNCHED:
        del out[None]  # lines of no rank that show nothing (a banner, a shell's echo) place no rank
    return out


def _stopped(phases: dict, source: str) -> list:
    """No line shows a failure and none shows the job ending: where each rank was when the text stops (a hang there, or
    a text cut short), with what stops a job in that phase, as a warning (never "nothing wrong", never a cause)."""
    behind = min(phases.values(), default=endings.LAUNCHED)
    at: dict = {}
    for r, p in phases.items():
        at.setdefault(p, []).append(r)
    said = [(endings.PHASE_NAMES[p], sorted(r for r in rs if r is not None)) for p, rs in sorted(at.items())]
    c = {"kind": "stopped", "cause": False, "pg": None, "seq": None,
         "ranks": sorted(r for r in at.get(behind, []) if r is not None), "text": words.stopped(said, ranks_text),
         "source": source, "phase": endings.PHASE_IDS[behind]}
    return [suspected(c, [f"stopped_{endings.PHASE_IDS[behind]}"])]


def _peer_ended(causes: list, by_rank: dict, hosts: dict) -> list:
    """A root that only says a rank failed (its exit, "the cause is not in this text") gives way to the peer that
    ended cleanly before it, where the rank's closed connection and the launcher's table say so (precedence.py)."""
    root = next((c for c in causes if c["cause"]), None)
    if root is None or root["kind"] not in ("exited", "job_failed"):
        return causes
    failed = [f for f in by_rank.values() if _failed(f)]
    closed = precedence.peer_ended_cleanly(causes, failed)
    if closed is None:
        return causes
    f = failed[0]
    cls = failures.EARLY_EXIT
    host = (hosts.get(f["rank"]) or {}).get("host") or f.get("host")
    return [{"kind": cls.id, "cause": True, "pg": None, "seq": None, "ranks": [],
             "text": words.peer_ended(_who(f["rank"], hosts)) + cls.what + words.line_said(
                 failures.telling(closed["line"])), "fix": cls.fix, "source": closed["source"],
             **({"host": host} if host else {})},
            *(_consequence(c, cls.fix) if c is root else c for c in causes if c is not root or c["kind"] == "exited")]


def _consequence(c: dict, fix: str) -> dict:
    """A finding demoted below the cause found for it: no longer "the cause is not in this text", no suspects."""
    out = {k: v for k, v in c.items() if k != "hypotheses"}
    return {**out, "cause": False, "text": c["text"].removeprefix(words.NOT_IN_TEXT), "fix": fix}


# findings that are no failure of their own: RAS cannot reach a rank (the job may still run); a program stopped showing
# progress (the text may only be cut short): said, never the job's failure
_NOT_A_FAILURE = ("ras_unresponsive", failures.NO_PROGRESS.id)
# what a text without a cause shows, the most telling first: a hang before a peer gone, before an exit code, before
# words no row knows
_EVIDENCE = {k: i for i, k in enumerate(hypotheses.BY_EVIDENCE)}


def not_in_text(root: dict, kinds: list) -> dict:
    """A root that says the job failed and the text does not say why: its words, and the suspects of what was seen,
    most likely first, each with how to test it (also kept as `hypotheses` in the JSON)."""
    return suspected({**root, "text": words.NOT_IN_TEXT + root["text"]}, kinds)


def suspected(c: dict, kinds: list) -> dict:
    """A finding with the suspects of the evidence kinds seen, most likely first, as its fix and its `hypotheses`."""
    found = hypotheses.suspects(kinds)
    return {**c, "fix": words.suspects_fix(found),
            "hypotheses": [{"id": s.id, "what": s.what, "test": s.test} for s in found]}


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
        said = (by_rank.get(r) or {}).get("signal")
        if death and death not in text and not (said and said in text) and root["kind"] not in ("exited",
                                                                                              "job_failed"):
            text += f"; {death}"
    elif not root["ranks"] and not root.get("host"):  # a line of no rank: the launcher's own word on who failed
        said = next((c for c in causes if c["kind"] == "rank_failed" and c.get("line")), None)
        if said is not None:
            text += words.launcher_said(failures.telling(said["line"]))
    text += _elsewhere(root, hosts, by_rank)
    return text


def _elsewhere(root: dict, hosts: dict, by_rank: dict) -> str:
    """The other hosts whose ranks the launcher reports ended badly of their own (not stopped by it): '; the launcher
    reports ranks 8-15 on gpu-st-02 failed too (exit code 1)'."""
    mine = {(hosts.get(r) or {}).get("host") for r in root["ranks"]} | {root.get("host")}
    by_host: dict = {}
    for r, f in sorted(by_rank.items()):
        if r in root["ranks"] or not _failed(f) or f.get("signal") == "SIGTERM" or f.get("stopped"):
            continue
        h = f.get("host") or (hosts.get(r) or {}).get("host")
        if h and h not in mine:
            by_host.setdefault(h, []).append(r)
    if not by_host:
        return ""
    said = [f"{ranks_text(rs)} on {h}" for h, rs in list(by_host.items())[:4]]
    return words.failed_elsewhere(", ".join(said) + (f" and {len(by_host) - 4} more hosts" if len(by_host) > 4
                                                     else ""))


