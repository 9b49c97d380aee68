"""`host.sources`: every source of this node's facts answered within its bound (facts/util.py, the one bounded
runner for local tools and blocking reads). A source that did not (nvidia-smi or NVML's init blocking in a wedged
driver, a sysfs read behind stuck firmware) fails the node naming it: on a real cluster a wedged GPU is the node a
preflight or a health check exists to find, and the checks that needed that source can only skip. A tool whose
output was cut at its bound warns, naming it."""

from __future__ import annotations

from ..model import CheckResult, failed, passed, skipped, warned
from .local import LocalInput

CID = "host.sources"
SHOWN = 3

FIX = ("A tool or read that blocks is a node in trouble: see whether `nvidia-smi` answers, `dmesg | grep -i -e NVRM "
       "-e xid` and the driver's state (`systemctl status nvidia-persistenced`); a wedged GPU driver needs a GPU "
       "reset or a reboot before the node takes a job.")


def _items(group: object, key: str) -> list:
    got = group.get(key) if isinstance(group, dict) else None
    return [x for x in got if isinstance(x, dict) and isinstance(x.get("why"), str)] if isinstance(got, list) else []


def check_sources(inp: LocalInput) -> CheckResult:
    s = inp.facts.get("sources")
    node = inp.node_rank
    if not isinstance(s, dict):
        return skipped(CID, "not collected", node=node)
    unanswered, cut = _items(s, "unanswered"), _items(s, "cut")
    ev = {"bound_s": s.get("bound_s"), "unanswered": unanswered, "cut": cut}
    if unanswered:
        more = f" (+{len(unanswered) - SHOWN} more)" if len(unanswered) > SHOWN else ""
        return failed(CID, "; ".join(u["why"] for u in unanswered[:SHOWN]) + more, node=node, evidence=ev,
                      detail="The facts that source gives are unavailable in this report; the checks that need "
                             "them skip, saying so.", fix=FIX)
    if cut:
        return warned(CID, "; ".join(c["why"] for c in cut[:SHOWN]), node=node, evidence=ev,
                      fix="A tool that prints without end is misbehaving: run it by hand on the node.")
    return passed(CID, "every local tool and read of the node's facts answered within its bound", node=node,
                  evidence=ev)


__all__ = ["CID", "check_sources"]
