"""`nccl.ras`: what NCCL's own RAS client says about a running job (`ncclras -f json`, NCCL >= 2.28.7, or its text
report, nccl_ras_text.py, which every client writes): ranks that
are missing from a communicator (dead or unresponsive), ranks with an asynchronous error or an abort, and ranks that
issued fewer collectives than their peers (in a hung job, those are where it hangs).

Pure: the client's output in, a parsed summary and one CheckResult out. Field names follow NCCL's writer
(src/ras/client_support.cc: nccl_version, communicators[].ranks[].status, missing_ranks[].status.considered_dead).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from ..model import CheckResult, failed, passed, skipped, warned
from .nccl_ras_text import looks_like_ras_text, parse_ras_text

CHECK_ID = "nccl.ras"
SHOWN = 5


def _rank_ref(r: Mapping) -> dict:
    return {"rank": r.get("rank"), "host": r.get("host"), "pid": r.get("pid"), "cuda_dev": r.get("cuda_dev")}


def _lagging(ranks: list) -> list[dict]:
    """Ranks whose count of some collective is below the communicator's highest: they stopped issuing work first."""
    counts = [(r, r.get("collective_counts") or {}) for r in ranks if isinstance(r, Mapping)]
    out = []
    ops = {op for _, c in counts for op in c}
    for op in sorted(ops):
        top = max(int(c.get(op, 0)) for _, c in counts)
        for r, c in counts:
            if int(c.get(op, 0)) < top:
                out.append({**_rank_ref(r), "op": op, "count": int(c.get(op, 0)), "max": top})
    return out


def parse_ras_json(text: str) -> dict:
    """The facts a verdict needs from `ncclras -f json`. Raises ValueError when the text is not that output."""
    start = (text or "").find("{")
    if start < 0:
        raise ValueError("no JSON object in the RAS output")
    doc, _ = json.JSONDecoder().raw_decode(text[start:])  # the client may print a trailing line after the object
    if not isinstance(doc, Mapping) or not isinstance(doc.get("communicators"), list):
        raise ValueError("no communicators list")
    comms = []
    for c in doc["communicators"]:
        if not isinstance(c, Mapping):
            continue
        ranks = [r for r in c.get("ranks") or [] if isinstance(r, Mapping)]
        missing = [r for r in c.get("missing_ranks") or [] if isinstance(r, Mapping)]
        errors = []
        for r in ranks:
            st = r.get("status") or {}
            if st.get("async_error") or st.get("abort_flag"):
                errors.append({**_rank_ref(r), "async_error": st.get("async_error"),
                               "abort": bool(st.get("abort_flag"))})
        comms.append({
            "hash": c.get("hash"), "size": c.get("size"), "ranks_count": c.get("ranks_count", len(ranks)),
            "dead": [_rank_ref(r) for r in missing if (r.get("status") or {}).get("considered_dead")],
            "unresponsive": [_rank_ref(r) for r in missing if not (r.get("status") or {}).get("considered_dead")],
            "errors": errors, "lagging": _lagging(ranks),
        })
    ras = doc.get("ras") or {}
    return {"version": doc.get("nccl_version"), "timestamp": doc.get("timestamp"), "communicators": comms,
            "timeouts": int(ras.get("timeouts_count") or 0)}


def parse_ras(text: str) -> dict:
    """The summary of either form of the client's output (JSON first). Raises ValueError when it is neither."""
    try:
        return parse_ras_json(text)
    except ValueError as exc:
        if looks_like_ras_text(text):
            return parse_ras_text(text)
        raise ValueError(f"neither `ncclras -f json` output ({exc}) nor ncclras's text report") from None


def _ref(r: Mapping) -> str:
    gpu = f", GPU {r['cuda_dev']}" if r.get("cuda_dev") is not None else ""
    who = f"rank {r['rank']}" if r.get("rank") is not None else f"process {r.get('pid')}"  # text DEAD: processes
    return f"{who} ({r.get('host') or '?'}{gpu})"


def _said(r: Mapping, legacy: str) -> str:
    """One named rank and what RAS said of it. The text form carries RAS's words (`said`), with the GPU, or names a
    process or only a communicator group; the JSON form names rank and host, and `legacy` says the rest."""
    if not r.get("said"):
        return f"rank {r['rank']} ({r.get('host') or '?'}) {legacy}"
    return f"{_ref(r)} {r['said']}" if r.get("rank") is not None or r.get("pid") is not None else r["said"]


def _who(refs: list) -> str:
    words = [_ref(r) for r in refs[:SHOWN]]
    return ", ".join(words) + (f" and {len(refs) - SHOWN} more" if len(refs) > SHOWN else "")


def ras_check(parsed: Optional[dict], source: str = "ncclras") -> CheckResult:
    """fail: a rank is dead, or has an async error or abort; warn: a rank is unresponsive or behind its peers, or the
    RAS collective itself timed out somewhere; pass: every communicator complete and in step."""
    if not parsed:
        return skipped(CHECK_ID, "no RAS output to read (run `ncclras -f json > ras.json` on a node of a running "
                                 "NCCL >= 2.28.7 job, then pass --nccl-ras ras.json)")
    comms = parsed["communicators"]
    dead = [r for c in comms for r in c["dead"]]
    gone = [r for c in comms for r in c["unresponsive"]]
    errs = [r for c in comms for r in c["errors"]]
    lag = [r for c in comms for r in c["lagging"]]
    ev = {"source": source, "nccl_version": parsed.get("version"), "communicators": len(comms), "dead": dead,
          "unresponsive": gone, "errors": errs, "lagging": lag, "timeouts": parsed.get("timeouts", 0)}
    lines = []
    if dead:
        lines.append(f"dead: {_who(dead)}")
    if errs:
        lines.append("error: " + ", ".join(
            _said(r, "aborted" if r.get("abort") else f"async error {r.get('async_error')}") for r in errs[:SHOWN]))
    if gone:
        lines.append(f"missing (unresponsive, not yet dead): {_who(gone)}")
    if lag:
        lines.append("behind their peers: " + ", ".join(
            _said(r, f"{r.get('op')} {r.get('count')} of {r.get('max')}") for r in lag[:SHOWN]))
    fix = ("Drain the named host(s): check the GPU (nvidia-smi -q, dmesg for Xid errors) and its NICs, then restart "
           "the job without them; `ncclcheck preflight` on the remaining nodes confirms they can train together.")
    if dead or errs:
        return failed(CHECK_ID, lines[0], detail="\n".join(lines), fix=fix, evidence=ev, findings=tuple(lines))
    if gone or lag or parsed.get("timeouts"):
        summary = lines[0] if lines else f"the RAS query timed out on {parsed['timeouts']} leg(s)"
        return warned(CHECK_ID, summary, detail="\n".join(lines), fix=fix, evidence=ev, findings=tuple(lines))
    n = sum(c["ranks_count"] or 0 for c in comms)
    # RAS sees NCCL's own state: a rank whose GPU never started a collective it called reads as in step (a lent
    # H100's hung job: RUNNING, OK; docs/gpu.md), so a pass says what it covers
    what = f"{len(comms)} communicator{' group' if parsed.get('form') == 'text' else ''}(s), {n} ranks"
    return passed(CHECK_ID, f"{what}, none missing, none behind, no error (NCCL {parsed.get('version') or '?'}); "
                            "RAS does not see a CUDA stream stuck before a collective", evidence=ev)


def ras_check_from_text(text: str, source: str) -> CheckResult:
    """ras_check on raw client output, either form; anything else is a skip saying so, never a crash."""
    try:
        parsed: Any = parse_ras(text)
    except ValueError as exc:
        return skipped(CHECK_ID, f"{source}: not ncclras output ({exc})")
    return ras_check(parsed, source)


__all__ = ["CHECK_ID", "parse_ras", "parse_ras_json", "ras_check", "ras_check_from_text"]
