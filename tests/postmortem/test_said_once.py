"""A failed job's report says its root cause once, as the one FAIL row; what followed from it is a consequence,
named as one, in every renderer; a rank has one host name everywhere; the HTML grid draws what the verdict says.
The fixture is a real run of the README's fail.py shape: rank 1 raised before its 6th all_reduce, torchrun's table
says `localhost`, the stacks files say the machine's name."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser

from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


def _report(case: str):
    d = os.path.join(FIX, case)
    return diagnose([os.path.join(d, f) for f in sorted(os.listdir(d)) if not f.endswith(".md")])


def test_one_fail_row_and_the_consequence_named_as_one():
    rep = _report("raised_unretired")
    assert rep.exit_code == 1
    assert [c.id for c in rep.checks if c.status.value == "fail"] == ["postmortem.root_cause"]
    root = rep.checks[0]
    assert "rank 1 (host vm, local rank 1) raised RuntimeError: simulated bug at" in root.summary, root.summary
    assert re.search(r"armed_job\.py:\d+ in <module>", root.summary)
    warn = next(c for c in rep.checks if c.id == "postmortem.nccl_warnings")
    assert warn.status.value == "warn"
    assert warn.summary == ("rank 0 (host vm, local rank 0): a peer closed the connection (it died or was stopped), "
                            "because rank 1 raised (postmortem.root_cause)"), warn.summary
    junit = render_junit(rep)
    assert junit.count("<failure") == 1, junit
    md = render_markdown(rep)
    assert "because rank 1 raised" in md


def test_one_host_name_per_rank_in_every_output():
    """torchrun's table says localhost; the ranks' own stacks say vm: every output says vm."""
    rep = _report("raised_unretired")
    pm = rep.extra["postmortem"]
    said = [pm["verdict"], *(c["text"] for c in pm["causes"]), *(c.summary + c.detail for c in rep.checks),
            render_markdown(rep), render_html(rep)]
    assert not [s for s in said if "host localhost" in s or "· localhost" in s or "| localhost |" in s]
    assert {r["host"] for r in pm["ranks"]} == {"vm"}  # (launcher.failures keeps torchrun's record as it said it)


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self._cls, self._in = [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        if tag == "td" and self.rows:
            self._cls, self._in = dict(attrs).get("class"), True

    def handle_data(self, data):
        if self._in and self.rows:
            self.rows[-1].append((data.strip(), self._cls))
            self._in = False


def test_the_html_grid_draws_a_failed_collective_as_failed():
    """gloo's recorder retires rank 0's failed all_reduce #6 as it retires a completed one: the grid follows the
    verdict, never draws it green."""
    html = render_html(_report("raised_unretired"))
    grid = html[html.index("Last collectives per rank"):]
    p = _Cells()
    p.feed(grid[:grid.index("</table>")])
    rows = {r[0][0]: dict(r[1:]) for r in p.rows if r}
    rank0 = next(v for k, v in rows.items() if k.startswith("rank 0"))
    assert rank0["all_reduce #6"] == "failed", rank0
    assert rank0["all_reduce #4"] == "done"
    assert all(k.startswith(("rank 0 · vm", "rank 1 · vm")) for k in rows), rows


def test_an_op_mismatch_names_each_sides_line_and_its_timeouts_as_consequences():
    """Both ranks entered sequence id 6, each its own op: the verdict gives each side's file:line from its stacks
    file, and the gloo timeouts are its consequences, never "the dumps say which rank did not enter"."""
    for case, odd in (("op_mismatch_gather", "all_gather(1024 Float) at /tmp/w64/mm.py:17 in <module>"),
                      ("op_mismatch_barrier", "barrier() at /tmp/w64/mm2.py:14 in <module>")):
        rep = _report(case)
        assert [c.id for c in rep.checks if c.status.value == "fail"] == ["postmortem.root_cause"], case
        root = rep.checks[0].summary
        assert re.search(r"rank 0 all_reduce\(1024 Float\) at /tmp/w64/mm2?\.py:19 in <module> vs rank 1 ", root), root
        assert root.endswith(odd), root
        warn = next(c for c in rep.checks if c.id == "postmortem.nccl_warnings")
        assert warn.status.value == "warn" and "because ranks 0, 1 called different ops" in warn.summary, warn.summary
        assert not any("which rank did not enter the collective" in (c.fix or "") for c in rep.checks), case


def test_the_launchers_log_alone_names_the_rank_that_raised_not_the_one_that_waited():
    """torchrun's first observed failure is rank 0 (it timed out waiting); rank 1 raised before it and was stopped
    while still exiting: its traceback, above rank 0's in the log, names it and its line."""
    rep = diagnose([os.path.join(FIX, "raised_then_stopped", "launcher.log")])
    root = rep.checks[0].summary
    assert root.startswith("rank 1 ") and "raised RuntimeError: simulated bug at " in root, root
    assert re.search(r"armed_job\.py:77 in <module>; then, still exiting, it was told to stop \(SIGTERM\)", root)
    rep = diagnose([os.path.join(FIX, "raised_unretired", "launcher.log")])
    assert re.search(r"^rank 1 .*raised RuntimeError: simulated bug at .*armed_job\.py:69 in <module>",
                     rep.checks[0].summary), rep.checks[0].summary


def test_each_side_of_a_mismatch_gets_its_ranks_line_live_or_from_their_stacks():
    from ncclcheck.postmortem.analyze import _at, _lines
    from ncclcheck.postmortem.inputs import Inputs

    inp = Inputs()
    inp.stacks = {0: {"where": "train.py:19 in <module>"}, 1: {"where": "train.py:17 in <module>"}}
    inp.where = {1: "train.py:18 in <module>: dist.barrier()"}  # a live rank's stack now (watch) comes first
    lines = _lines(inp)
    assert _at([0], lines) == " at train.py:19 in <module>"
    assert _at([1], lines) == " at train.py:18 in <module>: dist.barrier()"
    both = " at train.py:19 in <module> (rank 0); train.py:18 in <module>: dist.barrier() (rank 1)"
    assert _at([0, 1], lines) == both
    assert _at([2], lines) == ""


def test_a_preflights_host_name_is_kept_over_the_launchers_localhost(tmp_path):
    """With the launcher's log and the job's preflight report (no stacks), each rank has the preflight's host name,
    never torchrun's standalone `localhost`."""
    import json
    import pathlib

    log = os.path.join(FIX, "raised_then_stopped", "launcher.log")
    assert "host localhost" in diagnose([log]).checks[0].summary  # alone, torchrun's table is all there is
    # a real preflight report (its schema is checked at intake), its one node on host gpu07
    example = pathlib.Path(__file__).parents[1] / "render" / "examples" / "preflight-pass-2node.json"
    pf = json.loads(example.read_text())
    pf["nodes"] = [dict(pf["nodes"][0], node_rank=0, hostname="gpu07")]
    pf["world"] = dict(pf["world"], nnodes=1, world_size=2)
    (tmp_path / "pf.json").write_text(json.dumps(pf))
    rep = diagnose([log], preflight_path=str(tmp_path / "pf.json"))
    assert rep.checks[0].summary.startswith("rank 1 (host gpu07, local rank 1) raised"), rep.checks[0].summary
