"""One vocabulary (issue 34): every format of the same saved report says the same things with the same words, the
entries of render/words.py. The reports are real CLI runs (tests/render/words/make_reports.sh says how each was
made) plus the example reports the golden tests use."""

from __future__ import annotations

import html
import io
import json
import pathlib
import re
import types
from collections import Counter

import pytest

from ncclcheck.model import Report, Status
from ncclcheck.render import common, console, words
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.labels import render_labels
from ncclcheck.render.markdown import md_text, render_markdown
from ncclcheck.render.prometheus import render_prometheus

from ..conftest import run_cli

HERE = pathlib.Path(__file__).parent
SAVED = {p.stem: p for p in sorted((HERE / "words").glob("*.json"))}
SAVED.update({n: HERE / "examples" / f"{n}.json" for n in ("bench-gate-fail", "links-slow-node",
                                                             "preflight-fail-3node")})


def _load(name: str) -> Report:
    return Report.from_json(json.loads(SAVED[name].read_text()))


def _console(report: Report) -> str:
    buf = io.StringIO()
    term = console.make_console(buf, {}, width=400)  # wide: captions on one line each
    for part in console.render_report(report):
        term.print(part)
    return buf.getvalue()


def _every_format(report: Report) -> dict[str, str]:
    return {"console": _console(report), "markdown": render_markdown(report), "html": render_html(report),
            "junit": render_junit(report), "prometheus": render_prometheus(report), "labels": render_labels(report)}


def _md_cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def _bench_placements(fmt: str, text: str) -> Counter:
    """(size cell, placement cell) of every bench row, as each format shows it."""
    if fmt == "console":
        rows = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d+\*?\s+\d+\s", ln)]
        return Counter((int(r[0].rstrip("*")), r[2]) for r in rows)
    if fmt == "markdown":
        lines = text.splitlines()
        head = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {words.COLUMN['op']} | "))
        cols = _md_cells(lines[head])
        where, size = cols.index(words.COLUMN["placement"]), cols.index(words.COLUMN["size"])
        rows = [_md_cells(ln) for ln in lines[head + 2:] if ln.startswith("|")]
        return Counter((r[size], r[where]) for r in rows)
    table = re.search(r'<table class="bench">(.*?)</table>', text, re.S).group(1)
    heads = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    where, size = heads.index(words.COLUMN["placement"]), heads.index(words.COLUMN["size"])
    body = table.split("<tbody>")[1]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]
    return Counter((html.unescape(r[size]), html.unescape(r[where])) for r in rows)


@pytest.mark.parametrize("name", sorted(SAVED))
def test_every_format_takes_its_shared_words_from_the_one_table(name):
    report = _load(name)
    out = _every_format(report)
    # header: the same counts and the same launcher phrase at the top of every format that has a header
    phrase = words.world_phrase(report.world)
    assert phrase.startswith(words.count(report.world.nnodes, "node"))
    assert f"{words.LAUNCHED_BY} {report.world.launcher}" in phrase
    assert phrase in out["console"].splitlines()[0]
    assert md_text(phrase) in out["markdown"]
    assert html.escape(phrase) in out["html"]
    assert f'name="world.summary" value="{html.escape(phrase)}"' in out["junit"]
    heads = [out["console"].splitlines()[0], out["markdown"].splitlines()[2],
             re.search(r'<p class="meta">(.*?)</p>', out["html"]).group(1)]
    assert not [h for h in heads if "node(s)" in h or "rank(s)" in h or "world size" in h], heads
    # status: the run's word in each human format; the check rows' words are the table's
    word = words.STATUS_WORD[report.status]
    assert f"{word} (exit {report.exit_code})" in out["markdown"]
    assert f">{word}</span>" in out["html"]
    assert out["console"].rstrip().splitlines()[-1].startswith(word) or word in out["console"]
    for c in report.checks:
        assert words.STATUS_WORD[c.status] in out["markdown"]
        assert re.search(rf"^{re.escape(words.status_mark(c.status))}\s+{re.escape(c.id)}\s", out["console"], re.M)
    flat = " ".join(out["console"].split())
    # efficiency: the caption of each op is the table's sentence, never a '?' for an unknown bound
    for cap in common.efficiency_captions(report.bench or []).values():
        assert words.EFF_DEFINITION in cap
        assert cap in flat  # rich folds a caption to its table's width
        assert md_text(cap) in out["markdown"]
        assert html.escape(cap) in out["html"]
    effs, _ = common.efficiency_span(report.links)
    if effs:  # a links run's span of efficiencies: one sentence
        span = words.efficiency_span_text(common.efficiency_text(min(effs)), common.efficiency_text(max(effs)))
        assert span in flat and md_text(span) in out["markdown"] and html.escape(span) in out["html"]
    for fmt, text in out.items():
        assert not re.search(r"bound \?|\? GB/s|\(\?\)", text), fmt
    # placement: the same row is the same table entry in every format (the short word where the column is narrow)
    if report.bench:
        want_label = Counter((r.bytes, words.placement(r).label) for r in report.bench)
        want_word = Counter((r.bytes, words.placement(r).word) for r in report.bench)
        assert _bench_placements("console", out["console"]) == want_word
        from ncclcheck.units import format_bytes

        sized = Counter({(format_bytes(b), p): n for (b, p), n in want_label.items()})
        assert _bench_placements("markdown", out["markdown"]) == sized
        assert _bench_placements("html", out["html"]) == sized
    # nodes: every node of the run is named in the header and labelled
    hosts = common.hostnames(report)
    if 1 < len(hosts) <= 4:
        head = out["console"].splitlines()[0]
        assert all(h.split(".")[0] in head for h in hosts.values())
    for h in {h.lower() for h in hosts.values()}:
        assert out["labels"].count(f"kubectl label node {h} ") == 1


def test_the_single_form_reads_the_same_in_every_format():
    """The all_reduce rows of a real CPU run: 'one' on the terminal, 'single form (in place)' in HTML, 'out' in
    Markdown before words.py."""
    report = _load("bench-cpu-single-form")
    single = [r for r in report.bench if r.op == "all_reduce"]
    assert single and all(words.placement(r) is words.SINGLE_FORM for r in single)
    out = _every_format(report)
    assert words.SINGLE_FORM_LEGEND in " ".join(out["console"].split())  # under the table: 'single under place: ...'
    assert words.SINGLE_FORM.word in out["console"]
    assert md_text(words.SINGLE_FORM_NOTE) in out["markdown"]
    assert html.escape(words.SINGLE_FORM_NOTE) in out["html"]
    md_rows = [ln for ln in out["markdown"].splitlines() if ln.startswith("| all\\_reduce |")]
    assert md_rows and all(f"| {words.SINGLE_FORM.label} |" in ln for ln in md_rows)
    assert f"{words.BOUND_UNKNOWN} (" in " ".join(out["console"].split())


def test_a_links_header_names_every_node_of_the_run():
    """A real 2-node links report whose `nodes` lists node 0 only: the header read `[h1]`."""
    report = _load("links-2node-only-h1-listed")
    assert [n.hostname for n in report.nodes] == ["h1"] and report.links["hosts"] == ["h1", "h2"]
    head = _console(report).splitlines()[0]
    assert head.endswith("[h1, h2]")
    assert words.world_phrase(report.world) == "2 nodes, 2 ranks, launched by ncclcheck"
    labels = render_labels(report)
    assert "kubectl label node h1 " in labels and "kubectl label node h2 " in labels


def test_a_header_that_knows_fewer_names_than_nodes_counts_the_rest():
    """A 2-node bench report names only the node that printed it: the header must not read as the whole run."""
    doc = json.loads(SAVED["links-2node-only-h1-listed"].read_text())
    doc["command"], doc["links"] = "bench", None
    head = _console(Report.from_json(doc)).splitlines()[0]
    assert head.endswith("[h1 +1 more]"), head


def test_a_links_report_lists_every_node_it_measured():
    from ncclcheck.steps.world import job_nodes

    placement = types.SimpleNamespace(node_rank=0, nnodes=2)
    assert [(n.node_rank, n.hostname) for n in job_nodes(placement, ["h1", "h2"])][1] == (1, "h2")
    assert len(job_nodes(placement, None)) == 1 and len(job_nodes(placement, ["h1"])) == 1


def test_labels_are_one_kubernetes_node_per_hostname():
    """Two preflight nodes on one machine (one hostname): one label line and one taint line, with the worst of
    the two; distinct hostnames still get a line each."""
    report = _load("preflight-2node-same-hostname")
    host = report.nodes[0].hostname.lower()
    assert {n.hostname.lower() for n in report.nodes} == {host} and len(report.nodes) == 2
    text = render_labels(report)
    assert text.count(f"kubectl label node {host} ") == 1
    assert text.count(f"kubectl taint node {host} ") == 1
    assert "node ranks 0, 1 share hostname" in text
    # node 1 fails a check that node 0 passes: the one Kubernetes node is labelled failed and tainted
    doc = json.loads(SAVED["preflight-2node-same-hostname"].read_text())
    shm = next(c for c in doc["checks"] if c["id"] == "host.shm" and c["node"] == 1)
    shm["status"] = "fail"
    merged = render_labels(Report.from_json(doc))
    line = next(ln for ln in merged.splitlines() if ln.startswith(f"kubectl label node {host} "))
    assert "ncclcheck.io/preflight=fail" in line and "check.ncclcheck.io/host.shm=fail" in line
    assert f"kubectl taint node {host} --overwrite" in merged
    # distinct names: a line each
    doc["nodes"][1]["hostname"] = "other"
    apart = render_labels(Report.from_json(doc))
    assert apart.count("kubectl label node ") == 2 and "share hostname" not in apart


def test_help_says_the_ranks_each_command_runs_by_default():
    """preflight --help said '2 CPU ranks' while a standalone preflight counts 1: the number comes from config.py."""
    from ncclcheck.config import CHECK_RANKS_DEFAULT, CPU_RANKS_DEFAULT

    pre = " ".join(run_cli("preflight", "--help").stdout.split())
    assert f"(default {CHECK_RANKS_DEFAULT}: preflight itself runs one process per node" in pre
    assert "CPU ranks" not in pre
    bench = " ".join(run_cli("bench", "--help").stdout.split())
    assert f"{CPU_RANKS_DEFAULT} CPU ranks without GPUs" in bench
    ran = run_cli("preflight", "--json", "-", "--quiet")
    assert json.loads(ran.stdout)["world"]["world_size"] == CHECK_RANKS_DEFAULT


def test_status_words_are_the_tables_in_the_terminal_columns():
    assert [words.status_mark(s) for s in (Status.FAIL, Status.WARN, Status.PASS, Status.SKIP)] == \
        ["FAIL", "WARN", "pass", "skip"]
    assert words.efficiency_caption(None, "loopback") == "eff = busbw / bound; bound unknown (loopback)"
    assert words.efficiency_caption(25.0) == "eff = busbw / bound; bound 25 GB/s"
    assert words.efficiency_caption(0.025, "tbf") == "eff = busbw / bound; bound 0.025 GB/s (tbf)"


def test_a_node_local_header_says_no_ranks_not_launched_by_none():
    """Issue 53, item 7: `ncclcheck env` and `health` opened with '1 node, 0 ranks, launched by none'."""
    from ncclcheck.model import WorldInfo

    assert words.world_phrase(WorldInfo(nnodes=1, world_size=0, launcher="none")) == "1 node, no ranks started"
    assert words.world_phrase(WorldInfo(nnodes=2, world_size=4, launcher="torchrun")) == (
        "2 nodes, 4 ranks, launched by torchrun")
    assert re.match(words.HEADER_LINE, "ncclcheck health 1 node, no ranks started [vm]")  # diagnose still skips it
