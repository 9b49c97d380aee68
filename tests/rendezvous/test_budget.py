"""Every time bound of the package lives in rendezvous/budget.py: a scan of the package's syntax trees finds no
seconds literal passed to a wait and no deadline arithmetic with a literal anywhere else.

The search, to repeat by hand (issue 20): python3 -m pytest tests/rendezvous/test_budget.py -q
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from ncclcheck.config import WorldConfig
from ncclcheck.rendezvous.budget import FIXED, Budget

PKG = pathlib.Path(__file__).resolve().parents[2] / "ncclcheck"
# facts/ sits below rendezvous/ (it may not import the Budget): its bounds are on local subprocesses and the
# resolver (git, nvidia-smi, journalctl, getaddrinfo), not on waits for other processes; the GPU health facts' pause
# between two reads of the error counters is a sampling interval, not a wait. Left as they are, named here.
EXEMPT = {"rendezvous/budget.py", "facts/code.py", "facts/gpu.py", "facts/host.py", "facts/paths.py",
          "facts/util.py", "facts/links.py", "facts/gpuhealth.py", "facts/kernlog.py", "facts/smi.py",
          "facts/counters.py"}
WAITS = {"sleep", "join", "wait", "settimeout", "timedelta", "select", "wait_for", "communicate"}
TIME_WORDS = ("timeout", "deadline", "grace", "poll", "bound", "wait", "_s")


def _numeric(n: ast.AST) -> bool:
    """A number, or arithmetic / min / max with a number in it (not a slice, not a string)."""
    if isinstance(n, ast.Constant):
        return isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
    if isinstance(n, ast.UnaryOp):
        return _numeric(n.operand)
    if isinstance(n, ast.BinOp):
        return _numeric(n.left) or _numeric(n.right)
    if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("min", "max", "float"):
        return any(_numeric(a) for a in n.args)
    return False


def _monotonic(n: ast.AST) -> bool:
    return any(isinstance(x, ast.Attribute) and x.attr in ("monotonic", "perf_counter") for x in ast.walk(n))


def _timeish(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in TIME_WORDS[:-1]) or low.endswith("_s")


def findings(root: pathlib.Path = PKG) -> list[str]:
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if rel in EXEMPT:
            continue
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            what = None
            if isinstance(n, ast.Call):
                fn = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                if fn in WAITS and n.args and _numeric(n.args[0]):
                    what = f"{fn}() with a literal"
                for k in n.keywords:
                    if k.arg and _timeish(k.arg) and _numeric(k.value):
                        what = f"{k.arg}= with a literal"
            elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names = [getattr(t, "id", getattr(t, "attr", "")) for t in targets]
                if any(_timeish(x) for x in names) and _numeric(n.value) and not rel.startswith(("model", "checks/")):
                    what = f"{', '.join(names)} = a literal"
            elif isinstance(n, (ast.BinOp, ast.Compare)) and _monotonic(n) and any(
                    _numeric(x) for x in ast.iter_child_nodes(n)):
                what = "clock arithmetic with a literal"
            if what:
                out.append(f"{rel}:{n.lineno}: {what}")
    return out


def test_no_seconds_literal_or_timeout_arithmetic_outside_the_budget():
    assert findings() == []


def test_the_scan_finds_what_it_looks_for(tmp_path):
    (tmp_path / "bad.py").write_text("import time\nPOLL_S = 0.1\ntime.sleep(2)\nend = time.monotonic() + 5\n"
                                     "f(timeout=3.0)\n")
    assert [x.split(": ", 1)[1] for x in findings(tmp_path)] == [
        "POLL_S = a literal", "sleep() with a literal", "clock arithmetic with a literal", "timeout= with a literal"]


def test_timeout_is_stored_once_and_every_named_wait_is_t():
    b = Budget.of(type("C", (), {"world": WorldConfig(timeout_s=15.0)})())
    assert b.timeout_s == 15.0
    assert b.master_probe_s == b.join_s == b.mesh_s == b.collective_s == 15.0
    assert b.verdict_wait_s == 15.0 + b.verdict_grace_s
    assert b.rank_start_bound_s == b.rank_start_s + 15.0
    assert b.stall_s(5) == 5 * 15.0 + b.stall_grace_s and b.stall_s(0) == 15.0 + b.stall_grace_s


def test_links_bounds_follow_the_op_bound():
    op = FIXED.links_op_s(None)
    assert op == FIXED.timeout_s and FIXED.links_op_s(7) == 7.0
    d = FIXED.links_direction_s(op)
    assert d == max(FIXED.links_direction_floor_s, op * FIXED.links_direction_share)
    assert FIXED.links_round_s(op, d) == 3 * op + 2 * d + FIXED.links_round_slack_s
    assert FIXED.links_tightened_s(0.001, 60) == FIXED.links_first_op_floor_s
    assert FIXED.links_tightened_s(10, 60) == 60


def test_the_budget_is_frozen():
    with pytest.raises(AttributeError):
        FIXED.timeout_s = 1.0  # type: ignore[misc]


def test_node_0s_grace_for_a_duplicate_outlasts_a_waiting_nodes_pause_between_probes():
    # a duplicate node rank that was waiting for node 0 connects within one pause: a shorter grace missed it (CI)
    assert FIXED.join_grace_s > FIXED.probe_retry_max_s
