"""scripts/bench_accuracy.py's classifier on synthetic outcomes (a miss is a false healthy, a false cause or a false
alarm, each for the reason a user would give), its --list, and docs/accuracy.md against the one scenario table.
No lab: the benchmark itself runs the corpus (scripts/, not the test suite)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ncclcheck_lab import accuracy_corpus as ac
from ncclcheck_lab import bench_accuracy as ba

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = os.path.join(ROOT, "scripts", "bench_accuracy.py")
DOC = os.path.join(ROOT, "docs", "accuracy.md")

SLOW_H3 = ac.Expect(1, (ac.Need("links.slow", ("h3",)),), ("h1", "h2", "h4"))
DECOY = ac.Expect(0, (ac.Need("net.peer_reachability", ("docker0",), ("pass", "warn", "fail")),))


def out(exits, *items, wrong=()):
    return ac.Outcome(dict(exits), [ac.Item(*i) for i in items], list(wrong))


def cls(exp, o) -> str:
    return ac.classify(exp, o)[0]


def test_healthy_run_passing_is_right_and_failing_is_a_false_alarm():
    assert cls(ac.Expect(0), out({"h1": 0, "h2": 0}, ("net.mtu_consistent", "pass", "MTU 1500"))) == ac.RIGHT
    assert cls(ac.Expect(0), out({"h1": 0, "h2": 1})) == ac.FALSE_ALARM
    # a warning that does not fail the run is allowed; a hang on a healthy run is an alarm, not a verdict
    assert cls(ac.Expect(0), out({"h1": 0}, ("x.y", "warn", "node 1 (h2) odd"))) == ac.RIGHT
    assert cls(ac.Expect(0), out({"h1": None})) == ac.FALSE_ALARM


def test_fault_called_healthy_is_a_false_healthy():
    assert cls(SLOW_H3, out({"h1": 0, "h2": 0, "h3": 0, "h4": 0})) == ac.FALSE_HEALTHY
    # one node exiting 0 on a broken job is already a false healthy, whatever the others said
    assert cls(SLOW_H3, out({"h1": 1, "h3": 0}, ("links.slow", "fail", "node 2 (h3) slow"))) == ac.FALSE_HEALTHY
    # a must-name on a passing run (the decoy interface) that nothing flagged
    assert cls(DECOY, out({"h1": 0}, ("net.peer_reachability", "pass", "eth0 reachable"))) == ac.FALSE_HEALTHY


def test_fault_named_wrong_is_a_false_cause():
    right = out({"h1": 1, "h2": 1}, ("links.slow", "fail", "node 2 (h3): slow with 3 of 3 peers"))
    assert cls(SLOW_H3, right) == ac.RIGHT
    assert cls(SLOW_H3, out({"h1": 1}, ("links.slow", "fail", "node 1 (h2): slow"))) == ac.FALSE_CAUSE
    # the right node, and a healthy one convicted beside it
    both = out({"h1": 1}, ("links.slow", "fail", "node 2 (h3) slow"), ("links.slow", "fail", "node 0 (h1) slow"))
    assert ac.classify(SLOW_H3, both) == (ac.FALSE_CAUSE, "a failure names h1")
    # the other node may be explained in the detail (who could not reach whom), not convicted in the headline
    explained = out({"h1": 1}, ("links.slow", "fail", "node 2 (h3) slow", "slow with h1, h2, h4"))
    assert cls(SLOW_H3, explained) == ac.RIGHT
    # a crash, a usage error or a hang on a fault names no cause
    assert cls(SLOW_H3, out({"h1": 3})) == ac.FALSE_CAUSE
    assert cls(SLOW_H3, out({"h1": 1, "h2": None})) == ac.FALSE_CAUSE
    # the right verdict computed from a wrong bound
    assert cls(SLOW_H3, out({"h1": 1}, ("links.slow", "fail", "node 2 (h3) slow"),
                            wrong=["links 0->2 efficiency 4.90"])) == ac.FALSE_CAUSE


def test_a_wrong_check_or_status_is_not_the_needed_one():
    assert cls(SLOW_H3, out({"h1": 1}, ("links.efficiency", "fail", "h3"))) == ac.FALSE_CAUSE
    assert cls(SLOW_H3, out({"h1": 1}, ("links.slow", "warn", "h3"))) == ac.FALSE_CAUSE
    prefix = ac.Expect(1, (ac.Need("rendezvous.", ("h2",)),))
    assert cls(prefix, out({"h1": 1}, ("rendezvous.world", "fail", "node rank 0 claimed by h1 and h2"))) == ac.RIGHT


def test_names_are_whole_tokens():
    assert ac.names_in("h1", "node 0 (h1)") and not ac.names_in("h1", "node 9 (h10)")
    assert ac.names_in("198.18.5.1:29500", "master 198.18.5.1:29500.") and not ac.names_in("198.18.5.1", "198.18.5.10")
    assert ac.names_in("rank 3", "rank 3 (host h2)") and not ac.names_in("rank 3", "rank 30")


def test_report_items_carry_node_and_evidence_tokens_and_wrong_efficiencies():
    doc = {"checks": [{"id": "rendezvous.world", "status": "fail", "node": 0, "summary": "never joined",
                       "detail": "d", "evidence": {"missing": [2]}},
                      {"id": "postmortem.root_cause", "status": "fail", "node": None, "summary": "s",
                       "evidence": {"kind": "no_dump", "ranks": [3]}}],
           "links": {"efficiency": [[None, 1.6], [0.9, None]], "bound_by": [[None, "node 1 eth0: tbf"], [None]]}}
    items, wrong = ba.merge([doc, doc])
    assert [i.text for i in items] == ["never joined | node 0 | missing:2", "s | kind:no_dump rank 3"]
    assert wrong == ["links 0->1 efficiency 1.60 (bound node 1 eth0: tbf)"]


def test_corpus_is_large_unique_and_every_kind_has_a_runner_and_a_healthy_run():
    names = [s.name for s in ac.SCENARIOS]
    assert len(names) >= 40 and len(set(names)) == len(names)
    assert {s.kind for s in ac.SCENARIOS} == set(ba.RUNNERS)
    for kind in {s.kind for s in ac.SCENARIOS}:
        assert any(s.kind == kind and s.expect.exit == 0 for s in ac.SCENARIOS), f"{kind}: no run that must pass"
    for s in ac.SCENARIOS:
        assert ac.describe(s) and s.expect.describe()


def test_list_prints_every_scenario_and_only_filters():
    p = subprocess.run([sys.executable, SCRIPT, "--list"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == f"{len(ac.SCENARIOS)} scenario(s)"
    listed = [ln.split()[0] for ln in p.stdout.splitlines()[:-1]]
    assert listed == [s.name for s in ac.SCENARIOS]
    p = subprocess.run([sys.executable, SCRIPT, "--list", "--only", "sweep"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and all(ln.split()[1] == "sweep" for ln in p.stdout.splitlines()[:-1]), p.stdout


def test_docs_table_is_the_corpus():
    text = open(DOC).read()
    m = re.search(r"<!-- corpus table[^>]*-->\n(.*?)<!-- end of corpus table -->", text, re.S)
    assert m, "docs/accuracy.md lost its table markers"
    assert m.group(1) == ac.markdown_table(), "regenerate: python3 scripts/bench_accuracy.py --markdown"


@pytest.mark.parametrize("pattern, expected", [("pf-healthy", {"pf-healthy", "pf-healthy-4"}),
                                               ("diag-fixture", {s.name for s in ac.SCENARIOS
                                                                 if s.kind == "diag-fixture"})])
def test_only_matches_glob_substring_or_kind(pattern, expected):
    assert {s.name for s in ba.selected([pattern])} == expected


def _kinds(s) -> set:
    """The cause classes a scenario's verdict must name (its kind:K tokens)."""
    return {n[len("kind:"):] for need in s.expect.needs for n in (*need.names, *need.one_of) if n.startswith("kind:")}


def test_every_scenario_says_its_evidence_and_no_class_rests_on_rendered_cases_alone():
    """Issue 44 B: the corpus's NCCL cases were rendered from format strings and scored 86/86 while real captures
    were misnamed. Each scenario says what kind of evidence it is (a fixture's from its folder), and every class of
    cause a rendered case names is also named by a real capture or a lab-staged job."""
    assert all(s.evidence in ac.EVIDENCE for s in ac.SCENARIOS)
    for s in ac.SCENARIOS:
        if s.kind == "diag-fixture":
            assert s.evidence == ac.fixture_evidence(s.opt("fixture")), s.name
    assert {s.evidence for s in ac.SCENARIOS} == set(ac.EVIDENCE)
    rendered = set().union(*(_kinds(s) for s in ac.SCENARIOS if s.evidence == ac.RENDERED))
    made = set().union(*(_kinds(s) for s in ac.SCENARIOS if s.evidence != ac.RENDERED))
    assert rendered and rendered <= made, f"resting on rendered cases alone: {sorted(rendered - made)}"
    real = {s.opt("fixture") for s in ac.SCENARIOS if s.evidence == ac.REAL and s.kind == "diag-fixture"}
    assert {f"nccl-h100/{d}" for d in ("dupgpu", "badif", "ibforced", "stuck")} | {"live/gpu-stuck-live"} <= real
    for card in ("gpu-h100", "gpu-h200"):  # every captured folder is scored
        assert {f[len(card) + 1:] for f in real if f.startswith(f"{card}/")} == {
            d for d in os.listdir(os.path.join(ROOT, "tests", "postmortem", "fixtures", card))
            if os.path.isdir(os.path.join(ROOT, "tests", "postmortem", "fixtures", card, d))}


def test_the_score_is_said_per_kind_of_evidence():
    results = [{"evidence": ac.REAL, "class": ac.RIGHT}, {"evidence": ac.REAL, "class": ac.FALSE_CAUSE},
               {"evidence": ac.LAB, "class": ac.RIGHT}]
    assert ac.by_evidence(results) == "real capture 1/2, lab-staged 1/1"


def test_the_context_keeps_every_part_of_a_need():
    """Context.expect rebuilds each Need to put the lab's addresses in: a Need that lost `one_of` there passed every
    log case whatever class its verdict named (the log tier read 60/60 where 53 were right)."""
    need = ac.Need("postmortem.root_cause", ("rank 0",), ("fail",), ("kind:not_started",))
    ctx = ba.Context(1.0)
    try:
        assert ctx.expect(ac.Expect(1, (need,))).needs == (need,)
    finally:
        ctx.close()
    wrong = out({"diagnose": 1}, ("postmortem.root_cause", "fail", "rank 0 stalled | kind:job_failed rank 0"))
    assert cls(ac.Expect(1, (need,)), wrong) == ac.FALSE_CAUSE


def test_the_log_tier_prints_its_figures_beside_the_baseline():
    """scripts/bench_accuracy.py --only diag-log's small run: three pasted logs (a real capture's cause, a public
    thread's failed job whose cause its text does not hold, a healthy one) through the CLI; its lines say right per
    kind of evidence, the failed jobs called ended well, the healthy ones given a cause, and the baseline on the same
    logs (docs/accuracy.md has the whole run)."""
    names = ("log-h100-dupgpu", "log-nccl-tests-internal-error-no-warn-2-18", "log-gpu-h100-healthy")
    p = subprocess.run([sys.executable, SCRIPT, *(x for n in names for x in ("--only", n))], capture_output=True,
                       text=True, timeout=300)
    lines = p.stdout.splitlines()
    assert p.returncode == 0, p.stdout
    assert lines[-1] == "scenarios=3 right=3 false_healthy=0 false_cause=0 false_alarm=0", p.stdout
    logs = next(ln for ln in lines if ln.startswith("logs: "))
    assert logs.startswith("logs: 3/3 right") and "ended well: 0" in logs and "given a cause: 0" in logs
    base = next(ln for ln in lines if ln.startswith("logs, baseline"))
    assert "1/3 right" in base and "on the 1 logs that hold the cause: ncclcheck 1, baseline 0" in base


def test_a_batchs_first_score_is_written_once_and_never_replaced(tmp_path, monkeypatch):
    """`bench_accuracy.py --first-score BATCH`: the batch's figures as it was first scored, kept; asked again, it
    refuses (exit with a message), and a run of only some of its cases is no first score."""
    here = tmp_path / ac.BATCH_DIR / "Z"
    here.mkdir(parents=True)
    (here / "one.log").write_text("x:1:2 [0] misc/socket.cc:1 NCCL WARN Duplicate GPU detected\n")
    (here / "two.log").write_text("step 1 loss 0.3\n")
    (here / "cases.jsonl").write_text(
        json.dumps({"name": "one", "tier": "thread", "source": "a thread", "expect": "cause", "class": "duplicate_gpu",
                    "proof": "Duplicate GPU detected", "batch": "Z"}) + "\n" +
        json.dumps({"name": "two", "tier": "thread", "source": "another thread", "expect": "healthy",
                    "batch": "Z"}) + "\n")
    monkeypatch.setattr(ba, "REPO", tmp_path)
    results = [{"name": "log-one", "class": ac.RIGHT}, {"name": "log-two", "class": ac.FALSE_ALARM}]
    with pytest.raises(SystemExit, match="1 of its 2 cases"):
        ba.record_first_score("Z", results[:1])
    ba.record_first_score("Z", results)
    first = ba.first_scores()["Z"]
    assert (first["right"], first["of"], first["given_cause"], first["held"], first["held_ours"],
            first["held_baseline"], first["missed"]) == (1, 2, 1, 1, 1, 1, ["two"])
    with pytest.raises(SystemExit, match="never replaced"):
        ba.record_first_score("Z", [{"name": "log-one", "class": ac.RIGHT}, {"name": "log-two", "class": ac.RIGHT}])
    assert ba.first_scores()["Z"] == first
    assert any(line.startswith("batch Z: first score 1/2 (50 %)") for line in ba.log_summary(results))
