"""`postmortem.*` checks: what `diagnose` found in a failed job's remains, as check results. Pure functions of the
analysis (postmortem/analyze.py's plain `postmortem` section). postmortem.root_cause comes first, so the report's
root cause is the verdict; the others fail when they hold a cause and warn when they hold only consequences."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..model import CheckResult, failed, passed, skipped, warned
from ..nccl import rules

SHOWN = 8


@dataclass(frozen=True)
class PostmortemInput:
    analysis: dict  # the report's `postmortem` section


def _by(analysis: dict, kinds: tuple) -> list:
    return [c for c in analysis.get("causes", []) if c["kind"] in kinds]


ROOT = "postmortem.root_cause"


# What the root cause's rank did, in a consequence's words ("because rank 1 raised"); a kind not listed is referred
# to by the check that says it.
_DID = {"exception": "raised", "exited": "exited with a failing code", "died": "was killed", "no_dump": "left no dump",
        "never_entered": "never entered the collective", "op_mismatch": "called another op",
        "size_mismatch": "called another size", "dtype_mismatch": "called another dtype", "stalled": "stopped",
        "not_started": "never started the collective on its GPU", "host_cut": "could not be reached"}


def because(root: dict) -> str:
    """The root cause in a consequence's words: `because rank 1 raised (postmortem.root_cause)`."""
    ranks = root.get("ranks") or []
    who = (f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}") if ranks else ""
    did = _DID.get(root.get("kind", ""))
    if did and did.startswith("called another ") and len(ranks) > 1:  # no side is the odd one: each called its own
        did = did.replace("another ", "different ") + "s"
    return f"because {who} {did} ({ROOT})" if who and did else f"because of the root cause ({ROOT})"


def _as_consequence(c: dict, root: dict, short: bool = False) -> str:
    """A consequence said as one: its own words when they already name the root cause, else with the reason.
    short: without the line it quotes (a row's summary; the detail keeps the line)."""
    text = c["text"]
    if "root cause" in text:
        return text
    if short:
        text = text.split(' ("', 1)[0]
    return f"{text}, {because(root)}"


# A root cause between ranks (each side called what the other did not): a line of one side follows from the other's
# call, a consequence, never the side's own evidence
_BETWEEN = ("op_mismatch", "size_mismatch", "dtype_mismatch", "state_mismatch")


def _own(c: dict, root: Optional[dict]) -> bool:
    """A line of the root cause's own ranks that is no cause of its own (rank 2's dump signal beside "rank 2 never
    entered"): the root cause's evidence, said with it (its detail), never a consequence of itself."""
    ranks = set(c.get("ranks") or [])
    if root is None or c is root or c["cause"] or not ranks or root.get("kind") in _BETWEEN:
        return False
    return ranks <= set(root.get("ranks") or [])


def _result(check_id: str, found: list, ok: str, evidence: dict, root: Optional[dict] = None) -> CheckResult:
    """A check of one kind of finding. The root cause among them is referred to, not said again (postmortem.root_cause
    says it, with its fix, and is the one FAIL of that cause): what follows from it on other ranks is a consequence,
    named as one and warned, never a second failure. A check that holds nothing else passes saying so: a row that
    restates the root cause tells the user nothing."""
    if not found:
        return passed(check_id, ok, evidence=evidence)
    mine = [c for c in found if _own(c, root)]
    found = [c for c in found if not _own(c, root)]
    if all(c is root for c in found):
        return passed(check_id, f"nothing besides the root cause ({ROOT})" + (
            f" and {len(mine)} line(s) of its own rank(s), said with it" if mine else ""), evidence=evidence)
    lines = [c["text"] for c in found[:SHOWN]] + ([f"... and {len(found) - SHOWN} more"] if len(found) > SHOWN else [])
    make = failed if any(c["cause"] for c in found) else warned
    rest = [c for c in found if c is not root]
    if len(rest) < len(found):  # the root cause is among them: said once, by postmortem.root_cause
        also = next((c for c in rest if c["cause"]), None)
        if also:  # a cause of its own beside the root cause: its own failure
            return failed(check_id, f"{also['text']} (besides the root cause, {ROOT})", detail="\n".join(lines),
                          fix=also["fix"], evidence=evidence)
        said = [_as_consequence(c, root) for c in rest]
        more = len(said) - 1
        return warned(check_id, _as_consequence(rest[0], root, short=True) + (
                          f"; and {more} more consequence(s) of it" if more else ""),
                      detail="\n".join(said[:SHOWN]), evidence=evidence, findings=tuple(said[:SHOWN]))
    if root is not None and not any(c["cause"] for c in found):  # what followed from the root cause, said as such
        said = [_as_consequence(c, root) for c in found]
        more = len(said) - 1
        return warned(check_id, _as_consequence(found[0], root, short=True) + (
                          f"; and {more} more consequence(s) of it" if more else ""),
                      detail="\n".join(said[:SHOWN]), evidence=evidence, findings=tuple(said[:SHOWN]))
    fix = next((c["fix"] for c in found if c["fix"]), "")
    return make(check_id, found[0]["text"], detail="\n".join(lines), fix=fix, evidence=evidence,
                findings=tuple(lines))


def _root(analysis: dict) -> Optional[dict]:
    return next((c for c in analysis.get("causes", []) if c["cause"]), None)


def check_root_cause(inp: PostmortemInput) -> CheckResult:
    """The one verdict: the earliest cause, and what it explains."""
    a = inp.analysis
    root = _root(a)
    ev = {"causes": len(a.get("causes", [])), "world_size": a.get("world_size")}
    if root is None:
        conseq = [c for c in a.get("causes", [])]
        end = a.get("ended")
        if end and conseq and all(c.get("survived") for c in conseq):  # lines the job went on past, to its end
            return passed(ROOT, end["text"], detail="\n".join(c["text"] for c in conseq[:SHOWN]),
                          evidence={**ev, "ended": end["sign"], "survived": len(conseq)})
        if conseq and conseq[0].get("hypotheses"):  # no failure shown, and what the text does show has suspects
            return warned("postmortem.root_cause", conseq[0]["text"],
                          detail="\n".join(c["text"] for c in conseq[:SHOWN]), fix=conseq[0]["fix"],
                          evidence={**ev, "kind": conseq[0]["kind"], "ranks": conseq[0]["ranks"]})
        if conseq:
            return warned("postmortem.root_cause", "no cause found, only consequences: " + conseq[0]["text"],
                          detail="\n".join(c["text"] for c in conseq[:SHOWN]),
                          fix="arm the next run so it leaves what names the cause: ncclcheck recommend --postmortem "
                              "DIR --format env", evidence=ev)
        logs = [r for r in a.get("inputs", []) if r["kind"] in ("launcher_output", "nccl_log", "log")]
        end = a.get("ended")
        if logs and end:  # a job's output with no failure that shows its end: the line that shows it
            return passed("postmortem.root_cause", end["text"], evidence={**ev, "ended": end["sign"]})
        return passed("postmortem.root_cause", "nothing wrong found in what the job left", evidence=ev)
    others = [c["text"] for c in a["causes"] if c is not root][:SHOWN]
    detail = "\n".join(["then (consequences and other findings):", *others]) if others else ""
    return failed(ROOT, a.get("verdict") or root["text"], detail=detail, fix=root["fix"],
                  evidence={**ev, "kind": root["kind"], "ranks": root["ranks"], "pg": root.get("pg"),
                            "seq": root.get("seq"), "source": root.get("source")})


def check_inputs(inp: PostmortemInput) -> CheckResult:
    """What was read, and what was refused (a pickle that names a class is never loaded)."""
    a = inp.analysis
    kinds: dict = {}
    for r in a.get("inputs", []):
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    # what reading a file bounded (its middle skipped for its size or the time, lines cut) is said with it
    partly = [{"path": r["path"], "note": r["note"]} for r in a.get("inputs", [])
              if r.get("note") and r["kind"] in ("launcher_output", "nccl_log", "log")]
    ev = {"kinds": kinds, "refused": a.get("refused", []), "partly": partly}
    said = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(kinds.items()))
    if partly:
        said += "; " + "; ".join(f"{r['path']}: {r['note']}" for r in partly[:SHOWN]) + (
            f"; and {len(partly) - SHOWN} more" if len(partly) > SHOWN else "")
    if a.get("refused"):
        bad = a["refused"]
        return warned("postmortem.inputs", f"{len(bad)} file(s) not read: {bad[0]['path']}: {bad[0]['why']}",
                      detail="\n".join(f"{r['path']}: {r['why']}" for r in bad[:SHOWN]) + (f"\nread: {said}"),
                      fix="pass the job's own dumps and logs; a refused pickle was not written by torch's flight "
                          "recorder", evidence=ev)
    return passed("postmortem.inputs", f"read {said or 'nothing'}", evidence=ev)


def check_collectives(inp: PostmortemInput) -> CheckResult:
    """Per process group: ranks that never entered the collective the others wait in."""
    a = inp.analysis
    groups = a.get("groups", [])
    ev = {"groups": len(groups), "wrapped": [g["pg"] for g in groups if g.get("wrapped")]}
    unusable = _by(a, ("unusable_dump",))
    if not groups and unusable:  # read, and nothing in them could be used: said, never "no dumps"
        return _result("postmortem.collectives", unusable, "", ev, _root(a))
    if not groups:
        return skipped("postmortem.collectives", "no flight-recorder dumps among the inputs (arm the job: "
                       "ncclcheck recommend --postmortem DIR --format env)")
    n = len(groups)
    return _result("postmortem.collectives", _by(a, ("never_entered", "blocked", "unfinished", "p2p_unmatched",
                                                     "p2p_cycle", "unusable_dump")),
                   f"{n} process group(s): every rank with a dump entered the same last collective", ev, _root(a))


def check_mismatch(inp: PostmortemInput) -> CheckResult:
    """Ranks that called a different op, size or dtype at one sequence id."""
    a = inp.analysis
    if not a.get("groups"):
        return skipped("postmortem.mismatch", "no flight-recorder dumps among the inputs")
    return _result("postmortem.mismatch", _by(a, _BETWEEN),
                   "the ranks called the same op, sizes and dtypes at every sequence id they share", {}, _root(a))


def check_ranks(inp: PostmortemInput) -> CheckResult:
    """Ranks that left no dump or died, with the launcher's exit code or signal."""
    a = inp.analysis
    found = _by(a, ("no_dump", "died", "exited", "host_cut"))
    failures = (a.get("launcher") or {}).get("failures") or []
    ev = {"launcher_failures": len(failures), "launcher_first": (a.get("launcher") or {}).get("first")}
    if not found and not a.get("groups") and not failures:
        return skipped("postmortem.ranks", "neither dumps nor a launcher failure table among the inputs")
    return _result("postmortem.ranks", found, f"every rank of {a.get('world_size')} left a dump", ev, _root(a))


def check_nccl_warnings(inp: PostmortemInput) -> CheckResult:
    """NCCL, gloo and torch failure messages classified by the one failure table (nccl/failures.py)."""
    a = inp.analysis
    kinds = ("op_mismatch", "size_mismatch", "dtype_mismatch", "never_entered", "blocked", "no_dump", "died",
             "exited", "job_failed", "not_started", "stalled", "not_completed", "host_cut", "link_cut", "unfinished",
             "state_mismatch", "p2p_unmatched", "p2p_cycle", "unusable_dump")
    found = [c for c in a.get("causes", []) if c["kind"] not in kinds and not c["kind"].startswith("ras_")]
    if not any(r["kind"] in ("nccl_log", "launcher_output", "log", "error_file") for r in a.get("inputs", [])):
        return skipped("postmortem.nccl_warnings", "no logs among the inputs (NCCL_DEBUG_FILE, the launcher's "
                                                   "output)")
    return _result("postmortem.nccl_warnings", found, "no failure message in the logs", {}, _root(a))


def check_transport(inp: PostmortemInput) -> CheckResult:
    """Per rank, the interface and transport NCCL chose; ranks that disagree, or differ from the preflight."""
    t = inp.analysis.get("transport") or {}
    rows = t.get("ranks") or {}
    if not rows:
        return skipped("postmortem.transport", "no NCCL INFO lines among the inputs (NCCL_DEBUG=INFO, "
                                               "NCCL_DEBUG_SUBSYS=INIT,NET)")
    ifs = {tuple(r["interfaces"]) for r in rows.values() if r["interfaces"]}
    nets = {r["net"] for r in rows.values() if r["net"]}
    problems = []
    if len(ifs) > 1:
        problems.append("ranks used different interfaces: " + "; ".join(
            f"rank {k}: {', '.join(v['interfaces'])}" for k, v in list(rows.items())[:SHOWN]))
    if len(nets) > 1:
        problems.append("ranks used different transports: " + ", ".join(sorted(nets)))
    spec = (t.get("recommended") or {}).get("NCCL_SOCKET_IFNAME")
    if spec:
        from ..nccl.rules import parse_spec

        parsed = parse_spec(spec)
        off = sorted({i for r in rows.values() for i in r["interfaces"] if parsed and not parsed.matches(i)})
        if off:
            problems.append(f"NCCL used {', '.join(off)}; the preflight recommended "
                            f"{rules.assignment('NCCL_SOCKET_IFNAME', spec)}")
    ev = {"ranks": rows, "recommended": t.get("recommended") or {}}
    if problems:
        return warned("postmortem.transport", problems[0], detail="\n".join(problems), findings=tuple(problems),
                      fix=rules.exports([("NCCL_SOCKET_IFNAME", spec)]) if spec
                      else "set NCCL_SOCKET_IFNAME to the same interface on every node (`ncclcheck recommend`)",
                      evidence=ev)
    first = next(iter(rows.values()))
    return passed("postmortem.transport", f"{len(rows)} rank(s) used {', '.join(first['interfaces']) or '?'} "
                  f"over {first['net'] or 'intra-node transports'}", evidence=ev)
