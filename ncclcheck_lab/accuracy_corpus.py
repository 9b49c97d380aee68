"""The fault corpus of scripts/bench_accuracy.py as data, the verdict each scenario must give, and the classifier of a
miss (false_healthy / false_cause / false_alarm).

Pure: no lab, no subprocess, no ncclcheck import. The table below is the one place each scenario is written;
docs/accuracy.md's table is rendered from it (`python3 scripts/bench_accuracy.py --markdown`) and a fast test
(tests/bench/test_accuracy_corpus.py) checks the two agree. How a scenario is made is described from its fields, not
written a second time.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Optional

PORT = 29500
RIGHT, FALSE_HEALTHY, FALSE_CAUSE, FALSE_ALARM = "right", "false_healthy", "false_cause", "false_alarm"
CLASSES = (RIGHT, FALSE_HEALTHY, FALSE_CAUSE, FALSE_ALARM)
# An efficiency above 1 is a wrong bound, not a figure. A token bucket lets its burst (max(64 KiB, rate/250 s))
# through at line speed, so a few-MiB transfer can honestly read a little above its rate: past this it is the bound.
EFFICIENCY_WRONG_ABOVE = 1.2


# -- what a verdict must say -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Need:
    """One thing the verdict must name: an item whose id is `check` (or starts with it, when it ends with '.'),
    with a status among `statuses`, whose text or detail names every one of `names` and at least one of `one_of`
    (word-bounded: a cause an expert accepts under more than one class)."""

    check: str
    names: tuple = ()
    statuses: tuple = ("fail",)
    one_of: tuple = ()

    def describe(self) -> str:
        st = "" if self.statuses == ("fail",) else f" ({'/'.join(self.statuses)})"
        said = [" or ".join(self.one_of)] if self.one_of else []
        said += list(self.names)
        return f"`{self.check}`{st} naming {', '.join(said)}" if said else f"`{self.check}`{st}"


@dataclass(frozen=True)
class Expect:
    """The verdict: every process's exit code, what it must name, what no failing item's headline may name."""

    exit: int
    needs: tuple = ()
    forbid: tuple = ()

    @property
    def fault(self) -> bool:
        return self.exit != 0 or bool(self.needs)

    def describe(self) -> str:
        parts = [f"exit {self.exit}"]
        parts += [n.describe() for n in self.needs]
        if self.forbid:
            parts.append(f"no failure naming {', '.join(self.forbid)}")
        if not self.needs and self.exit == 0:
            parts.append("no failing check")
        return "; ".join(parts)


# -- what a run gave -------------------------------------------------------------------------------------------------
@dataclass
class Item:
    """One finding of the verdict: a check (or a sweep node verdict, a diagnose cause) with its status and the text
    it shows a user (summary, detail, and tokens from its evidence such as `rank 3`, `kind:no_dump`)."""

    check: str
    status: str
    text: str  # the headline: what a user reads first (summary, node, evidence tokens)
    detail: str = ""  # the explanation under it: may name other nodes (who could not reach whom)


@dataclass
class Outcome:
    """What a scenario's run gave: each process's exit code (None = still running at the deadline: killed), the
    items of its verdict, and wrong figures or crashes seen (an efficiency above 1, a traceback)."""

    exits: dict
    items: list = field(default_factory=list)
    wrong: list = field(default_factory=list)
    note: str = ""

    def summary(self, limit: int = 4) -> str:
        ex = ",".join(f"{k}={v}" for k, v in self.exits.items())
        bad = [i for i in self.items if i.status in ("fail", "warn")]
        shown = "; ".join(f"{i.status} {i.check}: {i.text[:110]}" for i in bad[:limit])
        more = f" (+{len(bad) - limit})" if len(bad) > limit else ""
        wrong = f" WRONG: {'; '.join(self.wrong)}" if self.wrong else ""
        note = f" [{self.note}]" if self.note else ""
        return f"exit {ex}; {shown or 'nothing failing'}{more}{wrong}{note}"


def names_in(name: str, text: str) -> bool:
    """name appears in text as a whole token: h1 not in h10, 198.18.5.1 not in 198.18.5.10, rank 3 not in rank 30."""
    return re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w]|\.\d)", text) is not None


def _matches(need: Need, item: Item) -> bool:
    if need.check.endswith("."):
        idok = item.check.startswith(need.check)
    else:
        idok = item.check == need.check
    text = item.text + " | " + item.detail
    return (idok and item.status in need.statuses and all(names_in(n, text) for n in need.names)
            and (not need.one_of or any(names_in(n, text) for n in need.one_of)))


def classify(exp: Expect, out: Outcome) -> tuple:
    """(class, why): right, or the kind of miss. A run that hung past its deadline gave no verdict: on a healthy
    scenario a false alarm, on a fault a false cause (something is wrong, nothing was named)."""
    codes = list(out.exits.values())
    failing = [i for i in out.items if i.status == "fail"]
    if not codes:
        return FALSE_CAUSE if exp.fault else FALSE_ALARM, "no process ran"
    hung = [k for k, v in out.exits.items() if v is None]
    if hung:
        return (FALSE_CAUSE if exp.fault else FALSE_ALARM), f"no verdict by the deadline: {', '.join(hung)}"
    if exp.exit == 0:
        bad = {k: v for k, v in out.exits.items() if v != 0}
        if bad:
            return FALSE_ALARM, "exit " + ", ".join(f"{k}={v}" for k, v in bad.items()) + " on a run that must pass"
    else:
        passed = [k for k, v in out.exits.items() if v == 0]
        if passed:
            return FALSE_HEALTHY, f"exit 0 from {', '.join(passed)} on a fault"
        other = {k: v for k, v in out.exits.items() if v != exp.exit}
        if other:
            return FALSE_CAUSE, "exit " + ", ".join(f"{k}={v}" for k, v in other.items()) + f", not {exp.exit}"
    missing = [n for n in exp.needs if not any(_matches(n, i) for i in out.items)]
    if missing:
        said = any(i.status in ("fail", "warn") for i in out.items)
        why = "not named: " + "; ".join(n.describe() for n in missing)
        if not said and exp.exit == 0:
            return FALSE_HEALTHY, why + " (nothing flagged)"
        return FALSE_CAUSE, why
    wrongly = sorted({n for n in exp.forbid for i in failing if names_in(n, i.text)})
    if wrongly:
        return (FALSE_CAUSE if exp.fault else FALSE_ALARM), f"a failure names {', '.join(wrongly)}"
    if not exp.fault and failing:
        return FALSE_ALARM, f"failing: {', '.join(sorted({i.check for i in failing}))}"
    if out.wrong:
        return FALSE_CAUSE, "; ".join(out.wrong)
    return RIGHT, ""


# -- the scenarios ---------------------------------------------------------------------------------------------------
# What a scenario's evidence is (issue 44 B: the corpus's 86 of 86 hid NCCL cases rendered from format strings):
# - real capture: bytes a real job left on real hardware, as a user would hand them over (tests/postmortem/fixtures/
#   nccl-h100: NCCL on an H100);
# - lab-staged: a fault this project staged with real processes (the namespace lab, or torchrun on loopback whose
#   output and dumps were kept): real launchers, real torch, real bytes, the fault made on purpose;
# - rendered: lines rendered from NCCL's and torch's format strings (tests/postmortem/fixtures/nccl_rendered): no
#   process wrote them. No class of cause rests on these alone (tests/bench/test_accuracy_corpus.py checks it).
# - public thread: a failure a real user posted in a public thread (an issue, a forum), its cause settled there (a
#   maintainer's answer, the reporter's confirmed fix), rewritten in our own identifiers: real programs' output, of
#   jobs and hardware this project never had.
REAL, FIELD, LAB, RENDERED = "real capture", "public thread", "lab-staged", "rendered"
EVIDENCE = (REAL, FIELD, LAB, RENDERED)


@dataclass(frozen=True)
class Scenario:
    """One corpus entry. kind says which runner makes it (bench_accuracy.RUNNERS); placement is (host, node rank)
    per started node agent (default: node i on h(i+1) for i < nnodes); lab are netlab scenario switches (healthy
    first, torn down after); opts are the runner's own settings; evidence is what kind of evidence it is (EVIDENCE)."""

    name: str
    kind: str
    expect: Expect
    lab: tuple = ()
    nnodes: int = 3
    placement: tuple = ()
    opts: tuple = ()  # (key, value) pairs: frozen, and printed in the table in this order
    neighbour_of: str = ""
    evidence: str = LAB

    def opt(self, key: str, default=None):
        return dict(self.opts).get(key, default)

    def hosts(self) -> list:
        """(host, node rank) of each process started."""
        return list(self.placement) or [(f"h{i + 1}", i) for i in range(self.nnodes)]

    @property
    def needs_lab(self) -> bool:
        return self.kind not in ("diag-fixture", "hostile", "diag-log")

    @property
    def needs_slurm(self) -> bool:
        return self.kind == "sweep" or self.opt("launcher") == "srun" or self.opt("launcher_job") == "srun"


SHAPED4 = tuple(f"slow-link h{i} 1gbit" for i in range(1, 5))  # links lab tests' baseline: network-bound pairs
OK, FAIL_RANK = Expect(0), None


def _need(check, *names, statuses=("fail",)):
    return Need(check, tuple(names), tuple(statuses))


ANY = ("pass", "warn", "fail", "skip")
T_PRE = "tests/lab/test_preflight_lab.py"
T_LAU = "tests/lab/test_launchers_lab.py"
T_GRD = "tests/lab/test_guard_lab.py"
T_LNK = "tests/lab/test_links_lab.py"
T_BND = "tests/lab/test_bounds_lab.py"
T_SLM = "tests/lab/test_slurm_health_lab.py"
T_DIA = "tests/postmortem/test_diagnose.py"
T_LIV = "tests/live/test_watch.py"
T_SLW = "tests/live/test_slow_live.py"
T_DLB = "tests/lab/test_diagnose_lab.py"
T_DRP = "tests/lab/test_dropped_link_lab.py"


def _pf(name, expect, lab=(), nnodes=3, placement=(), neighbour="", **opts):
    return Scenario(name, "preflight", expect, tuple(lab), nnodes, tuple(placement), tuple(opts.items()), neighbour)


def _links(name, expect, lab=SHAPED4, neighbour=T_LNK, **opts):
    return Scenario(name, "links", expect, tuple(lab), 4, (), tuple(opts.items()), neighbour)


def _sweep(name, expect, lab=SHAPED4, nnodes=4, neighbour=T_SLM):
    return Scenario(name, "sweep", expect, tuple(lab), nnodes, (), (), neighbour)


def fixture_dir(name: str) -> str:
    """A diag-fixture's folder, from the repository's root: tests/postmortem/fixtures/NAME, or for `live/NAME` what
    `ncclcheck watch --dump` kept of a real hung job (tests/live/fixtures/NAME)."""
    live, _, rest = name.partition("live/")
    return f"tests/live/fixtures/{rest}" if not live and rest else f"tests/postmortem/fixtures/{name}"


# Fixture folders of bytes real jobs left on a real GPU: the H100 captures handed over (nccl-h100) and those of the
# lent H100 and H200 of 2026-11-25 (gpu-h100, gpu-h200: make_gpu_captures.sh; live/gpu-stuck-live: `watch --dump` of a
# stuck NCCL job).
REAL_FIXTURES = ("nccl-h100/", "gpu-h100/", "gpu-h200/", "live/gpu-")


def fixture_evidence(name: str) -> str:
    """A diag fixture's kind of evidence, from the folder it lives in."""
    return REAL if name.startswith(REAL_FIXTURES) else RENDERED if name.startswith("nccl_rendered/") else LAB


def _fix(name, kind, ranks, neighbour=T_DIA, names=(), forbid=()):
    need = () if kind is None else (_need("postmortem.root_cause", f"kind:{kind}", *(f"rank {r}" for r in ranks),
                                          *names),)
    return Scenario(f"diag-{name.replace('_', '-').replace('/', '-')}", "diag-fixture",
                    Expect(0 if kind is None else 1, need, tuple(forbid)), opts=(("fixture", name),),
                    neighbour_of=neighbour, evidence=fixture_evidence(name))


T_REAL = "tests/postmortem/test_real_captures.py"
T_GPU = "tests/postmortem/test_gpu_captures.py"
T_VER = "tests/postmortem/test_verdicts.py"
WRAPPER = "invalid usage"  # torch's wrapper of an NCCL error: never the headline where NCCL's own line exists
# What each job of make_gpu_captures.sh must tell (fixtures/gpu-CARD/README.md's table), whichever card ran it:
# case -> (the root cause's kind, None for a job that ended well; its ranks; words it says; words it must not say)
GPU_CASES = {
    "healthy": (None, [], (), ()),
    "guarded": (None, [], (), ()),
    "ib_fallback": (None, [], (), ()),
    "net_plugin": ("net_plugin", [0], ("NCCL_NET=IB",), (WRAPPER,)),
    "no_socket_if": ("no_socket_interface", [0], (), (WRAPPER,)),
    "duplicate_gpu": ("duplicate_gpu", [0, 1], (), (WRAPPER,)),
    "device_assert": ("device_assert", [0], (), ()),
    "gpu_stuck": ("not_started", [0], ("all_reduce #6",), ()),
    "killed": ("died", [0], (), ()),
}
# The cards they ran on, and the cases kept of each (the H200's `guarded` was not kept: its README says why)
GPU_CARDS = {"gpu-h100": tuple(GPU_CASES), "gpu-h200": tuple(c for c in GPU_CASES if c != "guarded")}


KILL3 = (_need("postmortem.root_cause", "kind:no_dump", "rank 3"),)


def _hostile(name, what, expect=None, base="kill", command="diagnose"):
    return Scenario(f"hostile-{name}", "hostile", expect or Expect(1, KILL3),
                    opts=(("file", what), ("base", base), ("command", command)), neighbour_of="ncclcheck/postmortem")


SCENARIOS = (
    # --- preflight, launcher ncclcheck, on the lab ---
    _pf("pf-healthy", OK, neighbour=T_PRE),
    _pf("pf-healthy-4", OK, nnodes=4, neighbour=T_PRE),
    _pf("pf-docker-decoy", Expect(0, (_need("net.peer_reachability", "docker0", statuses=ANY),)), ["docker-decoy"],
        neighbour=T_PRE),
    _pf("pf-dead-nic", Expect(0, (_need("net.peer_reachability", "eth1", statuses=ANY),)), ["dead-nic"],
        neighbour=T_PRE),
    _pf("pf-dead-nic-h3-only", Expect(0, (_need("net.peer_reachability", "eth1", statuses=ANY),)), ["dead-nic h3"],
        neighbour=T_PRE),
    _pf("pf-decoy-and-dead-nic", Expect(0, (_need("net.peer_reachability", "docker0", statuses=ANY),
                                             _need("net.peer_reachability", "eth1", statuses=ANY))),
        ["docker-decoy", "dead-nic"], neighbour=T_PRE),
    _pf("pf-blocked-port", Expect(1, (_need("rendezvous.master_reachable", "{h1}:29500"),)),
        [f"blocked-port h1 {PORT}"], neighbour=T_PRE),
    _pf("pf-blocked-port-reject", Expect(1, (_need("rendezvous.master_reachable", "{h1}:29500"),)),
        [f"blocked-port h1 {PORT} reject"], neighbour=T_PRE),
    _pf("pf-wrong-master-ip", Expect(1, (_need("rendezvous.master_reachable", "{unused}"),)),
        master="{unused}", neighbour=T_PRE),
    _pf("pf-wrong-master-name", Expect(1, (_need("rendezvous.master_reachable", "nosuchhost.invalid"),)),
        nnodes=2, placement=[("h2", 1)], master="nosuchhost.invalid", neighbour=T_PRE),
    _pf("pf-node2-never-starts", Expect(1, (_need("rendezvous.world", "missing:2"),)),
        placement=[("h1", 0), ("h2", 1)], neighbour=T_PRE),
    _pf("pf-node0-never-starts", Expect(1, (_need("rendezvous.master_reachable", "{h1}:29500"),)),
        placement=[("h2", 1), ("h3", 2)], neighbour=T_PRE),
    _pf("pf-two-never-start", Expect(1, (_need("rendezvous.world", "missing:2", "missing:3"),)),
        nnodes=4, placement=[("h1", 0), ("h2", 1)], neighbour=T_PRE),
    _pf("pf-duplicate-rank-1", Expect(1, (_need("rendezvous.world", "h2", "h3"),)),
        placement=[("h1", 0), ("h2", 1), ("h3", 1)], neighbour=T_PRE),
    _pf("pf-duplicate-rank-0", Expect(1, (_need("rendezvous.", "h2"),)),
        placement=[("h1", 0), ("h2", 0), ("h3", 1), ("h4", 2)], neighbour=T_PRE),
    _pf("pf-code-drift-h3", Expect(1, (_need("code.consistent", "h3"),), ("h1", "h2")), code_drift="h3",
        neighbour=T_PRE),
    _pf("pf-code-drift-h1", Expect(1, (_need("code.consistent", "h1"),), ("h2", "h3")), code_drift="h1",
        neighbour=T_PRE),
    _pf("pf-inbound-drop-h2", Expect(1, (_need("net.peer_reachability", "h2"),), ("h1", "h3")), ["inbound-drop h2"],
        neighbour=T_PRE),
    _pf("pf-inbound-drop-h1", Expect(1, (_need("net.peer_reachability", "h1"),), ("h2", "h3")),
        [f"inbound-drop h1 {PORT}"], neighbour=T_PRE),
    _pf("pf-dropped-link-h2-h3", Expect(1, (_need("net.peer_reachability", "h2", "h3"),), ("h1",)),
        ["dropped-link h2 h3"], neighbour=T_DRP),
    # node 2 cannot reach the master at all: the rendezvous is where it shows
    _pf("pf-dropped-link-h1-h3", Expect(1, (_need("rendezvous.master_reachable", "{h1}:29500", "node 2"),), ("h2",)),
        ["dropped-link h1 h3"], neighbour=T_DRP),
    _pf("pf-code-drift-and-inbound-drop", Expect(1, (_need("code.consistent", "h3"),
                                                      _need("net.peer_reachability", "h2")), ("h1",)),
        ["inbound-drop h2"], code_drift="h3", neighbour=T_PRE),
    _pf("pf-hostname-loopback-first", Expect(1, (_need("host.hostname_resolves", "node 1"),)),
        ["hostname-loopback-first h2"], neighbour=T_PRE),
    _pf("pf-mtu-h3", Expect(1, (_need("net.mtu_consistent", "node 2"),)), ["mtu h3 1400"], neighbour=T_SLM),
    _pf("samehost-preflight", OK, placement=[("h1", 0), ("h1", 1), ("h2", 2)], neighbour=T_PRE),
    # --- preflight under the real launchers (3 hosts x 2 ranks) ---
    Scenario("torchrun-healthy", "launcher", OK, opts=(("launcher", "torchrun"),), neighbour_of=T_LAU),
    Scenario("torchrun-code-drift-h3", "launcher", Expect(1, (_need("code.consistent", "h3"),), ("h1", "h2")),
             opts=(("launcher", "torchrun"), ("code_drift", "h3")), neighbour_of=T_LAU),
    Scenario("torchrun-c10d-code-drift-h1", "launcher", Expect(1, (_need("code.consistent", "h1"),), ("h2", "h3")),
             opts=(("launcher", "torchrun-c10d"), ("code_drift", "h1")), neighbour_of=T_LAU),
    Scenario("srun-healthy", "launcher", OK, opts=(("launcher", "srun"),), neighbour_of=T_LAU),
    Scenario("srun-blocked-port", "launcher", Expect(1, (_need("rendezvous.master_reachable", "29500"),)),
             lab=(f"blocked-port h1 {PORT}",), opts=(("launcher", "srun"),), neighbour_of=T_LAU),
    Scenario("srun-inbound-drop-h2", "launcher", Expect(1, (_need("net.peer_reachability", "h2"),), ("h1", "h3")),
             lab=("inbound-drop h2 {slurmd}",), opts=(("launcher", "srun"),), neighbour_of=T_LAU),
    Scenario("mpirun-healthy", "launcher", OK, opts=(("launcher", "mpirun"),), neighbour_of=T_LAU),
    Scenario("mpirun-blocked-port", "launcher", Expect(1, (_need("rendezvous.master_reachable", "{h1}:29500"),)),
             lab=(f"blocked-port h1 {PORT}",), opts=(("launcher", "mpirun"),), neighbour_of=T_LAU),
    # --- the guard in a training script under torchrun ---
    Scenario("guard-healthy", "guard", OK, neighbour_of=T_GRD),
    Scenario("guard-samehost", "guard", OK, placement=(("h1", 0), ("h1", 1), ("h2", 2)), neighbour_of=T_GRD),
    Scenario("guard-inbound-drop-h3", "guard", Expect(1, (_need("guard.failed", "h3"),)), lab=("inbound-drop h3",),
             neighbour_of=T_GRD),
    # --- links on 4 hosts shaped to 1 Gbit/s, one fault each ---
    _links("links-healthy", OK),
    _links("links-slow-h3", Expect(1, (_need("links.slow", "h3"),), ("h1", "h2", "h4")),
           SHAPED4 + ("slow-link h3 100mbit",)),
    _links("links-slow-h1", Expect(1, (_need("links.slow", "h1"),), ("h2", "h3", "h4")),
           SHAPED4 + ("slow-link h1 100mbit",)),
    _links("links-slow-h3-300mbit", Expect(1, (_need("links.slow", "h3"),), ("h1", "h2", "h4")),
           SHAPED4 + ("slow-link h3 300mbit",)),
    _links("links-slow-h3-30mbit", Expect(1, (_need("links.slow", "h3"),), ("h1", "h2", "h4")),
           SHAPED4 + ("slow-link h3 30mbit",)),
    _links("links-slow-h2-and-h4", Expect(1, (_need("links.slow", "h2"), _need("links.slow", "h4")), ("h1", "h3")),
           SHAPED4 + ("slow-link h2 100mbit", "slow-link h4 100mbit")),
    _links("links-slow-pair-h2-h4", Expect(1, (_need("links.slow", "h2", "h4"),), ("h1", "h3")),
           SHAPED4 + ("slow-pair h2 h4 100mbit",)),
    _links("links-slow-pair-h4-h2", Expect(1, (_need("links.slow", "h2", "h4"),), ("h1", "h3")),
           SHAPED4 + ("slow-pair h4 h2 100mbit",)),
    _links("links-slow-pair-h1-h3", Expect(1, (_need("links.slow", "h1", "h3"),), ("h2", "h4")),
           SHAPED4 + ("slow-pair h1 h3 100mbit",)),
    _links("links-egress-only-h3", Expect(1, (_need("links.slow", "h3"),), ("h1", "h2", "h4")),
           SHAPED4 + ("slow-link h3 200mbit egress",), neighbour=T_BND),
    _links("links-into-h3-shaped-at-senders", Expect(1, (_need("links.slow", "h3"),)),
           SHAPED4 + ("slow-pair h1 h3 100mbit", "slow-pair h2 h3 100mbit", "slow-pair h4 h3 100mbit"),
           neighbour=T_BND),
    Scenario("bench-bound-slowest-host", "bench", Expect(0, (_need("bench.efficiency", "node 2", statuses=("pass",)),)),
             lab=("slow-link h1 1gbit", "slow-link h2 1gbit", "slow-link h3 200mbit"), neighbour_of=T_BND),
    # --- sweep under a real Slurm on the lab ---
    _sweep("sweep-healthy", OK),
    _sweep("sweep-slow-h3", Expect(1, (_need("sweep.bad", "h3"),), ("h1", "h2", "h4")),
           SHAPED4 + ("slow-link h3 100mbit",)),
    _sweep("sweep-slow-h1", Expect(1, (_need("sweep.bad", "h1"),), ("h2", "h3", "h4")),
           SHAPED4 + ("slow-link h1 100mbit",)),
    _sweep("sweep-slow-h2-and-h4", Expect(1, (_need("sweep.bad", "h2"), _need("sweep.bad", "h4")), ("h1", "h3")),
           SHAPED4 + ("slow-link h2 100mbit", "slow-link h4 100mbit")),
    _sweep("sweep-3-nodes-slow-h3", Expect(1, (_need("sweep.bad", "h3"),), ("h1", "h2")),
           SHAPED4 + ("slow-link h3 100mbit",), nnodes=3),
    _sweep("sweep-egress-only-h3", Expect(1, (_need("sweep.bad", "h3"),), ("h1", "h2", "h4")),
           SHAPED4 + ("slow-link h3 100mbit egress",)),
    # --- diagnose: the real captures of tests/postmortem/fixtures ---
    _fix("skip", "op_mismatch", [3]),
    _fix("skip_wrapped", "op_mismatch", [3]),
    _fix("other_op", "op_mismatch", [3]),
    _fix("size", "size_mismatch", [3]),
    _fix("dtype", "dtype_mismatch", [3]),
    _fix("subgroup_skip", "never_entered", [3]),
    _fix("subgroup_skip_moved_on", "never_entered", [3]),
    _fix("kill", "no_dump", [3]),
    _fix("healthy", None, []),
    # --- diagnose of what `ncclcheck watch --dump` kept of real hung jobs (tests/live/fixtures, each with HOW.md) ---
    _fix("live/sleep", "never_entered", [3], neighbour=T_LIV),
    _fix("live/dropped-h2", "host_cut", [2, 3], neighbour=T_LIV),
    # the ring's far side finished the collective before the cut: the ranks still inside it are not culprits
    _fix("live/dropped-h2-ring-ahead", "host_cut", [2, 3], neighbour=T_LIV),
    _fix("live/dropped-node0", "host_cut", [0, 1], neighbour=T_LIV),
    # --- ... and of a running communication-bound job (its big all_reduce ~2.2x its compute): who slows it ---
    Scenario("diag-live-comm-bound-straggler", "diag-fixture",
             Expect(1, (_need("postmortem.slow", "rank 3", "compute"),), ("communication",)),
             opts=(("fixture", "live/comm-bound-straggler"),), neighbour_of=T_SLW,
             evidence=fixture_evidence("live/comm-bound-straggler")),
    Scenario("diag-live-comm-bound-healthy", "diag-fixture", Expect(0, ()),
             opts=(("fixture", "live/comm-bound-healthy"),), neighbour_of=T_SLW,
             evidence=fixture_evidence("live/comm-bound-healthy")),
    # --- diagnose: real NCCL failures captured on an H100 (fixtures/nccl-h100, its README's table) ---
    _fix("nccl-h100/dupgpu", "duplicate_gpu", [0, 1], T_REAL, ("CUDA device 60",), (WRAPPER,)),
    _fix("nccl-h100/badif", "no_socket_interface", [0], T_REAL, ("NCCL_SOCKET_IFNAME=eth9",), (WRAPPER,)),
    _fix("nccl-h100/ibforced", "net_plugin", [0], T_REAL, ("NCCL_NET=IB",), (WRAPPER,)),
    _fix("nccl-h100/stuck", "not_started", [0], T_REAL, ("all_reduce #6",), ("SignalException",)),
    # --- diagnose: real NCCL jobs on a lent H100 and H200 (fixtures/gpu-CARD, its README's table) ---
    *(_fix(f"{card}/{case}", GPU_CASES[case][0], GPU_CASES[case][1], T_GPU, *GPU_CASES[case][2:])
      for card, cases in GPU_CARDS.items() for case in cases),
    # --- a live watch's dump of a stuck NCCL job ---
    _fix("live/gpu-stuck-live", "not_started", [0], T_GPU, ("all_reduce #6",)),
    # --- the same classes rendered from NCCL's and torch's format strings (each twinned by a real capture above) ---
    _fix("nccl_rendered/duplicate_gpu", "duplicate_gpu", [0, 1], T_VER),
    _fix("nccl_rendered/no_socket_if", "no_socket_interface", [0], T_VER),
    _fix("nccl_rendered/net_plugin", "net_plugin", [0], T_VER),
    _fix("nccl_rendered/gpu_stuck", "not_started", [0], T_VER, ("all_reduce #4",)),
    # --- diagnose: real armed torchrun jobs on loopback, kept (issue 44 items 4 and 5) ---
    # ranks torchrun stopped mid-step after rank 1's SIGKILL never reached all_reduce #6: stopped, not skipped
    _fix("kill_mid_stopped", "no_dump", [1], T_VER, ("SIGKILL",)),
    # a deadlocked DataLoader: the user's loop line, not the selectors.py frame it waits in
    _fix("loader_hang", "never_entered", [2], T_VER, ("<module> (inside selectors.py",)),
    # rank 1 raised before all_reduce #6 and gloo had not marked its #5 complete (issue 53 item 1): its own word
    _fix("raised_unretired", "exception", [1], T_VER, ("RuntimeError: simulated bug", "armed_job.py:69 in <module>"),
         ("NIC",)),
    # --- diagnose: real jobs made on the lab (2 hosts x 2 gloo ranks), read whole or launcher output only ---
    Scenario("diag-torchrun-kill", "diag-job", Expect(1, (_need("postmortem.root_cause", "rank 3", "h2"),)),
             opts=(("job", "kill"), ("launcher_job", "torchrun"), ("read", "all")), neighbour_of=T_DLB),
    Scenario("diag-torchrun-kill-logs-only", "diag-job", Expect(1, (_need("postmortem.root_cause", "rank 3"),)),
             opts=(("job", "kill"), ("launcher_job", "torchrun"), ("read", "logs")), neighbour_of=T_DLB),
    Scenario("diag-srun-size", "diag-job",
             Expect(1, (_need("postmortem.root_cause", "kind:size_mismatch", "rank 3"),)),
             opts=(("job", "size"), ("launcher_job", "srun"), ("read", "all")), neighbour_of=T_DLB),
    Scenario("diag-srun-size-logs-only", "diag-job", Expect(1, (_need("postmortem.", "rank 3"),)),
             opts=(("job", "size"), ("launcher_job", "srun"), ("read", "logs")), neighbour_of=T_DLB),
    Scenario("diag-torchrun-healthy", "diag-job", OK,
             opts=(("job", "healthy"), ("launcher_job", "torchrun"), ("read", "all")), neighbour_of=T_DLB),
    Scenario("diag-torchrun-healthy-logs-only", "diag-job", OK,
             opts=(("job", "healthy"), ("launcher_job", "torchrun"), ("read", "logs")), neighbour_of=T_DLB),
    Scenario("diag-guard-healthy-output", "diag-job", OK,
             opts=(("job", "guard"), ("launcher_job", "torchrun"), ("read", "logs")), neighbour_of=T_GRD),
    # armed (ncclcheck.arm) armed_job.py jobs: rank 1 SIGKILLed mid-run while the others work unevenly (torchrun
    # stops some of them before the step's all_reduce); rank 3's DataLoader deadlocks
    Scenario("diag-torchrun-kill-mid", "diag-job",
             Expect(1, (_need("postmortem.root_cause", "rank 1", "SIGKILL"),)),
             opts=(("job", "kill_mid"), ("launcher_job", "torchrun"), ("read", "all"), ("worker", "armed")),
             neighbour_of=T_DLB),
    # The user's own frame (the DataLoader line, <module>) is what must be named. Which stack rank 3 leaves is a race
    # of torchrun's teardown: its SIGTERM dump, hung "(inside selectors.py ...)", or, when the launcher's signal
    # reached the DataLoader worker first (1 run of 11 on 2026-11-25), the RuntimeError that worker's death raised,
    # at the same <module> line. Both name the line; the corpus asked for the first shape only.
    Scenario("diag-torchrun-loader", "diag-job",
             Expect(1, (_need("postmortem.root_cause", "kind:never_entered", "rank 3", "armed_job.py",
                              "in <module>"),)),
             opts=(("job", "loader"), ("launcher_job", "torchrun"), ("read", "all"), ("worker", "armed")),
             neighbour_of=T_DLB),
    # issue 53 item 1: rank 3 ends on its own before its 6th all_reduce (armed as the README says, with the guard):
    # what it said of itself is the cause, with its line, whatever the others' recorders say (gloo may not have
    # marked its 5th complete); the header names torchrun
    *(Scenario(f"diag-torchrun-{job}", "diag-job",
               Expect(1, (_need("postmortem.root_cause", f"kind:{kind}", "rank 3", *words),), ("NIC",)),
               opts=(("job", job), ("launcher_job", "torchrun"), ("read", "all"), ("worker", "guarded")),
               neighbour_of="tests/training/test_self_ended.py")
      for job, kind, words in (("raise", "exception", ("RuntimeError: simulated bug", "armed_job.py", "in <module>")),
                               ("exit", "exited", ("sys.exit(3)", "armed_job.py", "in <module>")),
                               ("sigkill", "no_dump", ("SIGKILL",)))),
    Scenario("diag-guard-failed-output", "diag-job",
             Expect(1, (_need("postmortem.root_cause"),), ("waitForInput", "999ms")),
             opts=(("job", "guard-inbound-drop-h3"), ("launcher_job", "torchrun"), ("read", "logs")),
             neighbour_of=T_GRD),
    # --- hostile files beside a real capture: the verdict must not change, nothing may crash ---
    _hostile("deep-json-dump", "deep-json"),
    _hostile("evil-pickle", "evil-pickle"),
    _hostile("truncated-pickle", "truncated-pickle"),
    _hostile("error-file-types", "error-types"),
    _hostile("dump-json-types", "dump-types"),
    _hostile("binary-log", "binary-log"),
    _hostile("absurd-failure-table", "failure-table"),
    _hostile("report-among-dumps", "report-in-dir"),
    _hostile("evil-pickle-in-healthy", "evil-pickle", Expect(0), base="healthy"),
    _hostile("report-wrong-types", "report-types", Expect(2), base="", command="report"),
    _hostile("report-deep-json", "deep-json", Expect(2), base="", command="report"),
    # --- issue 46: staged with gloo under torchrun (tests/postmortem/fixtures, make_fixtures.py; gloo's recorder keeps
    # no coalesced group and no send/recv: docs/postmortem.md), and watch --dump of a real 4-stage gloo pipeline ---
    _fix("coalesced_size", "size_mismatch", [3], neighbour="tests/postmortem/test_fr_classes.py"),
    _fix("output_dtype", "exception", [3], neighbour="tests/postmortem/test_fr_classes.py"),
    _fix("pipeline_skip", "never_entered", [1], neighbour="tests/postmortem/test_fr_classes.py"),
    _fix("p2p_size", "collective_mismatch", [1], neighbour="tests/postmortem/test_fr_classes.py"),
    _fix("live/pipeline-skip", "p2p_unmatched", [2], neighbour="tests/live/test_pipeline_live.py"),
    _fix("live/pipeline-cycle", "p2p_cycle", [0, 1, 2, 3], neighbour="tests/live/test_pipeline_live.py"),
)


# -- the log corpus (issue 61): one log each, as users paste them, with no dump and no guard ------------------------
# Each case is a file and a line of LOG_DIR/cases.jsonl (its fields: tests/postmortem/fixtures/pasted/README.md): the
# tier says what made it (a real capture, a public thread, a job staged here, lines rendered from the programs' format
# strings), `expect` the level of verdict a diligent expert gives from that text alone: the cause (its class, or one an
# expert accepts as the same answer, and what it names), "failed" (the job failed; the cause is not in this text),
# "stopped" (no line shows a failure, but the program's output stops before its end: a hang, or a paste cut short,
# said as a warning with the suspects of a hang) or "healthy" (nothing in it shows a failure).
LOG_DIR = "tests/postmortem/fixtures/pasted"
# Fresh batches of public threads (issue 74), one folder each; FIRST_SCORES keeps each batch's score as ncclcheck gave
# it the first time it read them, before anything was changed for them (the figure a user should expect on a log
# nobody here has seen), written once by `bench_accuracy.py --only diag-log --first-score BATCH`
BATCH_DIR = f"{LOG_DIR}/batches"
FIRST_SCORES = f"{BATCH_DIR}/first_scores.json"
LOG_TIERS = {"capture": REAL, "thread": FIELD, "staged": LAB, "program": RENDERED}
NOT_IN_TEXT = "the cause is not in this text"  # the words of the middle verdict (render/words.NOT_IN_TEXT)
ROOT = "postmortem.root_cause"


@dataclass(frozen=True)
class LogCase:
    name: str
    tier: str
    file: str  # from the repository's root
    source: str  # the thread's address, or how it was made
    expect: str  # cause | failed | healthy
    cls: str = ""
    also: tuple = ()
    names: tuple = ()
    proof: str = ""  # a piece of the one line that proves the cause (the baseline is right when its line holds it)
    settled: str = ""
    batch: str = ""  # the fresh batch of public threads it came in (BATCH_DIR/<batch>), scored once before any fix
    open: str = ""  # why ncclcheck still misses it (a known miss, said where the corpus is scored; never hidden)


def log_cases(root: str = ".") -> list:
    """The log corpus, as every cases.jsonl under LOG_DIR lists it (its own, and a maker's beside the logs it made:
    staged/make_staged.py writes staged/cases.jsonl)."""
    out = []
    for here, dirs, files in sorted(os.walk(os.path.join(root, LOG_DIR))):
        dirs.sort()
        if "cases.jsonl" not in files:
            continue
        with open(os.path.join(here, "cases.jsonl")) as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    beside = os.path.relpath(os.path.join(here, f"{d['name']}.log"), root)  # the log beside it
                    out.append(LogCase(d["name"], d["tier"], d.get("file") or beside,
                                       d.get("source", ""), d["expect"], d.get("class", ""), tuple(d.get("also", ())),
                                       tuple(d.get("names", ())), d.get("proof", ""), d.get("settled", ""),
                                       d.get("batch", ""), d.get("open", "")))
    return out


def log_expect(c: LogCase) -> Expect:
    if c.expect == "healthy":  # nothing wrong: no failure, and the text shows the job's end (a warning is not that)
        return Expect(0, (Need(ROOT, (), ("pass",)),))
    if c.expect == "stopped":  # no failure shown, the text stops before the job ended: a warning with its suspects
        kinds = (c.cls, *c.also, *(("no_progress",) if c.cls == "stopped" else ()))  # nccl-tests' own stop is one
        return Expect(0, (Need(ROOT, c.names, ("warn",), tuple(f"kind:{k}" for k in kinds)),))
    if c.expect == "failed":
        return Expect(1, (Need(ROOT, (NOT_IN_TEXT, *c.names)),))
    return Expect(1, (Need(ROOT, c.names, one_of=tuple(f"kind:{k}" for k in (c.cls, *c.also))),))


def log_scenario(c: LogCase) -> Scenario:
    return Scenario(f"log-{c.name}", "diag-log", log_expect(c), opts=(("file", c.file), ("tier", c.tier)),
                    neighbour_of=c.source, evidence=LOG_TIERS[c.tier])


LOG_SCENARIOS = tuple(log_scenario(c) for c in log_cases(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCENARIOS = SCENARIOS + LOG_SCENARIOS

# The naive reading a diagnosis must beat: the last line that holds "NCCL WARN" or "Error", shown as the cause.
_BASELINE = re.compile(r"NCCL WARN|Error")


def baseline_line(text: str) -> Optional[str]:
    """The line the baseline shows: the last one holding "NCCL WARN" or "Error" (None: it says nothing failed)."""
    return next((ln for ln in reversed(text.splitlines()) if _BASELINE.search(ln)), None)


def baseline_right(c: LogCase, text: str) -> bool:
    """Is the baseline's line the answer? On a cause: it holds the line that proves it; on a job whose cause the
    text does not hold: it shows a failure at all; on a healthy job: it shows none."""
    line = baseline_line(text)
    if c.expect in ("healthy", "stopped"):  # no line shows a failure: the baseline shows none, and says nothing
        return line is None and c.expect == "healthy"
    if c.expect == "failed":
        return line is not None
    return line is not None and bool(c.proof) and c.proof in line

HOSTILE_FILES = {
    "deep-json": "a JSON file nested 200,000 deep",
    "evil-pickle": "a pickle that calls os.system",
    "truncated-pickle": "a flight-recorder pickle cut in half",
    "error-types": "a torchelastic error file whose fields have the wrong types",
    "dump-types": "a flight-recorder JSON dump whose fields have the wrong types",
    "binary-log": "a .log of random bytes, NULs and invalid UTF-8",
    "failure-table": "a torchrun failure table with an absurd rank and exit code",
    "report-in-dir": "an ncclcheck report (its schema id right) whose checks, world and nodes have the wrong types",
    "report-types": "an ncclcheck report whose checks and world have the wrong types",
}


def describe(s: Scenario) -> str:
    """How the scenario is made, in words, from its fields (the docs' 'how it is made' column)."""
    lab = "; ".join(f"`{x}`" for x in s.lab if x not in SHAPED4)
    base = "every host shaped to 1gbit, then " if set(SHAPED4) <= set(s.lab) else ""
    faults = f"; netlab {base}{lab}" if lab else ("; every host shaped to 1gbit" if base else "")
    opts = dict(s.opts)
    drift = f"; `--code` differs on {opts['code_drift']}" if "code_drift" in opts else ""
    if s.kind == "preflight":
        where = ", ".join(f"{h}:{r}" for h, r in s.hosts())
        master = f"; master `{opts['master']}`" if "master" in opts else ""
        return f"`preflight --nnodes {s.nnodes}` (ncclcheck launcher) as host:node {where}{master}{faults}{drift}"
    if s.kind == "launcher":
        return f"`preflight` under {opts['launcher']}, 3 hosts x 2 ranks{faults}{drift}"
    if s.kind == "guard":
        where = ", ".join(f"{h}:{r}" for h, r in s.hosts())
        return f"tests/fixtures/train_ddp.py (guard line) under torchrun, 2 ranks per node, host:node {where}{faults}"
    if s.kind == "links":
        return f"`links --size 4M --iters 3` on 4 hosts{faults}"
    if s.kind == "bench":
        return f"`bench --sizes 2M-8M:4 --ops all_reduce,all_gather --min-efficiency 0.5` on 3 hosts{faults}"
    if s.kind == "sweep":
        return f"`srun -N {s.nnodes} ncclcheck sweep --drain --size 2M` on Slurm in the lab{faults}"
    if s.kind == "diag-fixture":
        return f"`diagnose {fixture_dir(opts['fixture'])}`"
    if s.kind == "diag-log":
        return f"`diagnose {opts['file']}` ({opts['tier']})"
    if s.kind == "diag-job":
        what = {"all": "dumps and launcher output", "logs": "the launcher output only"}[opts["read"]]
        made = "guard-healthy" if opts["job"] == "guard" else opts["job"]
        worker = {"armed": "armed_job.py (armed with ncclcheck.arm)",
                  "guarded": "armed_job.py (armed with ncclcheck.guard(postmortem_dir=))"}.get(opts.get("worker"),
                                                                                             "fr_worker.py")
        job = (f"the `{made}` scenario's job" if made.startswith("guard")
               else f"{worker} `{made}`, 2 hosts x 2 gloo ranks")
        return f"{job} under {opts['launcher_job']} on the lab; `diagnose` of {what}"
    if s.kind == "hostile":
        what = HOSTILE_FILES[opts["file"]]
        if opts["command"] == "report":
            return f"`report FILE` of {what}"
        return f"`diagnose` of fixtures/{opts['base']} plus {what}"
    raise ValueError(s.kind)


def markdown_table(scenarios=None) -> str:
    """docs/accuracy.md's table: one row per scenario, rendered from the table above (the log tier's cases are listed
    by their own cases.jsonl, tests/postmortem/fixtures/pasted)."""
    scenarios = [s for s in SCENARIOS if s.kind != "diag-log"] if scenarios is None else scenarios
    rows = ["| scenario | evidence | how it is made | the verdict it must give | neighbour of |",
            "|---|---|---|---|---|"]
    for s in scenarios:
        cells = [f"`{s.name}`", s.evidence, describe(s), s.expect.describe(), s.neighbour_of]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def by_name() -> dict:
    return {s.name: s for s in SCENARIOS}


def result_json(s: Scenario, cls: str, why: str, out: Optional[Outcome], seconds: float) -> dict:
    return {"name": s.name, "kind": s.kind, "evidence": s.evidence, "expect": s.expect.describe(), "class": cls,
            "why": why,
            "got": out.summary() if out else "", "seconds": round(seconds, 1),
            "exits": out.exits if out else {}, "items": [vars(i) for i in out.items] if out else [],
            "wrong": out.wrong if out else []}


def by_evidence(results: list) -> str:
    """'real capture 4/4, lab-staged 80/80, rendered 4/4': right of run, per kind of evidence."""
    parts = []
    for kind in EVIDENCE:
        mine = [r for r in results if r.get("evidence") == kind]
        if mine:
            parts.append(f"{kind} {sum(r['class'] == RIGHT for r in mine)}/{len(mine)}")
    return ", ".join(parts)


def dumps(results: list) -> str:
    return json.dumps({"schema": "ncclcheck.accuracy/1", "results": results}, indent=1)
