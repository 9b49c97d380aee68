"""What a bench run did not measure, and why: nothing cut short is reported as a pass (issue 13).

`coverage(cfg, rows, skips, stopped)` lists every requested (op, size, placement) without a row; the backend's
"cannot run this" skips are bench.unsupported's, everything else (a hang, a dead rank, an interrupt) makes
`bench.coverage` warn, and fail when a gate (--min-busbw, --baseline) could not be evaluated because of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from ..config import BenchConfig
from ..model import BenchRow, CheckResult, failed, passed, warned
from ..render import words
from ..units import format_size_short


def _requested(row: BenchRow) -> int:
    return int((row.extra or {}).get("requested_bytes") or row.bytes)


def not_measured(cfg: BenchConfig, rows: Iterable[BenchRow], skips: Iterable[dict] = (),
                 stopped: Optional[dict] = None) -> list[dict]:
    """[{op, bytes, in_place, reason}] for each requested measurement with no row, in sweep order."""
    have = {(r.op, _requested(r), bool(r.in_place)) for r in rows}
    unsupported = {(s.get("op"), bool(s.get("in_place"))): s.get("reason") for s in skips}
    why = _why(stopped)
    out = []
    for op in cfg.ops:
        for size in cfg.sizes:
            for in_place in ((False, True) if cfg.in_place else (False,)):
                if (op, size, in_place) in have:
                    continue
                reason = unsupported.get((op, in_place))
                out.append({"op": op, "bytes": size, "in_place": in_place,
                            "reason": f"not supported: {reason}" if reason else why,
                            "unsupported": bool(reason)})
    return out


def _why(stopped: Optional[dict]) -> str:
    if not stopped:
        return "no result came back for it"
    where = ""
    if stopped.get("op"):
        where = f" at {stopped['op']} {format_size_short(int(stopped.get('bytes') or 0))}"
    return f"the run stopped{where}: {stopped.get('reason') or 'cut short'}"


def coverage_check(cfg: BenchConfig, rows: list[BenchRow], skips: Iterable[dict] = (),
                   stopped: Optional[dict] = None) -> CheckResult:
    """bench.coverage: pass when every requested op x size was measured (or the backend cannot run it)."""
    missing = not_measured(cfg, rows, skips, stopped)
    cut = [m for m in missing if not m["unsupported"]]
    total = len(cfg.ops) * len(cfg.sizes) * (2 if cfg.in_place else 1)
    ev = {"requested": total, "measured": total - len(missing), "not_measured": missing, "stopped": stopped}
    if not cut:
        return passed("bench.coverage", f"every requested op x size was measured ({total - len(missing)} of {total}"
                                         f"{'; the rest the backend cannot run' if missing else ''})", evidence=ev)
    lines = [f"{m['op']}{' in-place' if m['in_place'] else ''} {format_size_short(m['bytes'])}: {m['reason']}"
             for m in cut]
    gated = cfg.min_busbw_gbps is not None or cfg.baseline is not None
    gate_size = cfg.gate_size if cfg.gate_size is not None else max(cfg.sizes)
    gate_lost = gated and any(m["bytes"] == gate_size and not m["in_place"] for m in cut)
    # A run stopped by Ctrl-C or SIGTERM (a time limit, scancel) did not do what was asked: it fails, as its exit
    # code (130/143) says, so that its JSON never reads healthier than the process ended.
    interrupted = (stopped or {}).get("reason") == "interrupted"
    res = failed if gate_lost or interrupted else warned
    detail = (stopped or {}).get("detail") or ""
    if interrupted:  # the user stopped it: what it measured and how to finish, never a hang's cause and fix
        by = (stopped or {}).get("by") or "Ctrl-C"
        return failed("bench.coverage", words.interrupted_run(by, ev["measured"], total),
                      detail="\n".join(([detail] if detail else []) + lines), evidence=ev,
                      fix=words.interrupted_fix(by) + ("; the gate could not be evaluated" if gate_lost else ""))
    summary = f"{len(cut)} of {total} requested measurements not made ({lines[0]}" + (
        f"; +{len(cut) - 1} more)" if len(cut) > 1 else ")")
    return res("bench.coverage", summary, detail="\n".join(([detail] if detail else []) + lines), evidence=ev,
               fix="The cause is named above (a hang names the op, size and the ranks that did not arrive); fix it "
                   "and run again" + ("; the gate could not be evaluated" if gate_lost else ""))
