"""The HTML report: self-contained, every check shown, plots and heatmap when there is data, hostile text inert."""

from __future__ import annotations

import base64
import dataclasses
import re
from html.parser import HTMLParser

import pytest

from ncclcheck.render import html as html_mod
from ncclcheck.render import plots
from ncclcheck.render.html import render_html

from .conftest import load_example


class Page(HTMLParser):
    """Collects what the assertions need: elements with attributes, visible text, script bodies."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)

    def find(self, tag: str, **attrs) -> list[dict]:
        return [a for t, a in self.elements if t == tag and all(a.get(k) == v for k, v in attrs.items())]

    def with_class(self, tag: str, cls: str) -> list[dict]:
        return [a for t, a in self.elements if t == tag and cls in (a.get("class") or "").split()]


def test_every_check_is_in_the_page(example):
    _, report = example
    page = Page(render_html(report))
    shown = [a["data-check"] for a in page.find("tr") if "data-check" in a]
    assert set(shown) == {c.id for c in report.checks}
    # every check once per node, but a skip that says the same thing on several nodes is one row (common.py)
    skips = {(c.id, c.summary) for c in report.checks if c.status.value == "skip" and c.node is not None}
    assert len(shown) == len(report.checks) - sum(
        len([c for c in report.checks if (c.id, c.summary) == k and c.node is not None]) - 1 for k in skips)
    # failures first
    statuses = [a["class"].split()[1] for a in page.with_class("tr", "check")]
    order = {"status-fail": 0, "status-warn": 1, "status-pass": 2, "status-skip": 3}  # issue 24: PASS above SKIP
    assert statuses == sorted(statuses, key=order.get)


def test_no_external_urls(example):
    _, report = example
    text = render_html(report)
    page = Page(text)
    for _tag, attrs in page.elements:
        for key in ("src", "href", "action", "data", "poster"):
            value = attrs.get(key) or ""
            assert not re.match(r"\s*(https?:)?//", value, re.I), (key, value)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert "@import" not in text and "url(" not in text


def test_header_names_the_root_cause():
    page = Page(render_html(load_example("preflight-fail-3node")))
    assert page.find("p", id="root-cause")
    text = " ".join(page.text)
    assert "Root cause:" in text and "node 2 never joined" in text


def test_plots_per_op_and_images_decode():
    pytest.importorskip("matplotlib")
    report = load_example("bench-gate-fail")
    page = Page(render_html(report))
    figures = page.with_class("figure", "plot")
    assert sorted(f["data-op"] for f in figures) == ["all_gather", "all_reduce"]
    images = page.find("img")
    assert len(images) == 2
    for img in images:
        head, _, data = img["src"].partition(",")
        assert head == "data:image/svg+xml;base64"
        svg = base64.b64decode(data, validate=True).decode("utf-8")
        assert "<svg" in svg and "busbw" in svg


def test_without_matplotlib_the_page_still_renders_with_a_note(monkeypatch):
    monkeypatch.setattr(plots, "plots_available", lambda: False)
    page = Page(render_html(load_example("bench-gate-fail")))
    assert page.find("p", id="plots-missing")
    assert not page.find("img")
    assert page.with_class("table", "bench")


def test_heatmap_marks_slow_cells():
    report = load_example("links-slow-node")
    page = Page(render_html(report))
    assert page.with_class("table", "heatmap")
    slow = page.with_class("td", "slow")
    assert len(slow) == 6  # three slow pairs, both directions of the matrix
    assert {a["title"] for a in slow} == {f"node {a} to node {b}" for a in (0, 1, 2) for b in (3,)} | {
        f"node 3 to node {b}" for b in (0, 1, 2)}
    assert len(page.with_class("th", "slow-node")) == 2  # column and row header of node 3


def test_no_plots_or_heatmap_without_data():
    page = Page(render_html(load_example("preflight-pass-2node")))
    assert not page.with_class("figure", "plot")
    assert not page.with_class("table", "heatmap")
    assert len(page.with_class("details", "node")) == 2


def test_hostile_strings_stay_text(hostile_report):
    text = render_html(hostile_report)
    page = Page(text)
    assert len(page.find("script")) == 1  # only our own copy-button script
    assert page.find("img", src="x") == []
    assert "<script>alert" not in text and "<img src=x" not in text
    assert any("<script>alert('x')</script>" in t for t in page.text)
    assert any("<img src=x onerror=alert(1)>" in t for t in page.text)


def test_copy_button_and_export_block():
    page = Page(render_html(load_example("preflight-fail-3node")))
    assert page.find("button", id="copy-env")
    assert page.find("pre", id="env-block")
    assert "export NCCL_SOCKET_IFNAME='=eth0'" in "".join(page.text)
    assert "clipboard" in "".join(page.scripts)


def test_facts_of_each_node_are_shown():
    text = " ".join(Page(render_html(load_example("preflight-pass-2node"))).text)
    for expected in ("ens1f0np0", "enp65s0f0np0", "200 Gb/s", "9000", "10.40.0.11/16", "NVIDIA H100 80GB HBM3",
                     "mlx5_7", "400 Gb/sec (4X NDR)", "2.21.5", "unlimited"):
        assert expected in text, expected


def test_unavailable_fact_groups_render_as_a_note():
    report = load_example("preflight-pass-2node")
    report.nodes[0].facts["interfaces"] = {"unavailable": "psutil failed"}
    report.nodes[0].facts["rdma"] = "garbage from an old version"
    text = " ".join(Page(html_mod.render_html(report)).text)
    assert "unavailable: psutil failed" in text


def test_bench_note_column_names_what_a_user_can_act_on():
    """Issue 15: the note column showed raw dicts ("arrival: {'barrier_wait_us': ...}"); now it names the late rank,
    unsteady iterations, wrong ranks and rounding, and stays empty otherwise."""
    from ncclcheck.model import BenchRow, Report

    stats = {"iters": 20, "p50_us": 100.0, "p99_us": 900.0, "min_us": 90.0, "max_us": 950.0, "cv": 0.45,
             "high_variation": True}
    arrival = {"barrier_wait_us": [1.0, 2.0], "start_offset_us": [0.5, 400.0], "wall_start_s": [1.0, 1.0]}
    late = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 500.0, 2.0, 4.0, 3, [500.0, 100.0],
                    {"arrival": arrival, "late_rank": 1, "late_by_us": 399.5, "arrival_spread_us": 399.5,
                     "iter_stats": stats, "rank_wrong": [0, 3], "in_place_call": True})
    quiet = BenchRow("all_reduce", 2 << 20, 1 << 19, "float32", False, 600.0, 2.0, 4.0, 0, [600.0, 590.0],
                     {"arrival": arrival, "arrival_spread_us": 2.0, "in_place_call": True,
                      "iter_stats": dict(stats, cv=0.01, high_variation=False, p99_us=610.0)})
    rep = Report(command="bench", version="0", started="now", bench=[late, quiet])
    page = render_html(rep)
    assert "barrier_wait_us" not in page and "in_place_call" not in page and "{" not in _bench_section(page)
    text = " ".join(Page(page).text)
    assert "rank 1 arrived" in text and "late" in text and "unsteady: iterations vary by 45%" in text
    assert "wrong results on rank 1" in text
    notes = re.findall(r"<td>([^<]*)</td></tr>", _bench_section(page))
    assert notes[1] == ""  # nothing to act on: an empty note


def _bench_section(page: str) -> str:
    return page[page.index('<section id="bench">'):page.index("</section>", page.index('<section id="bench">'))]


def test_storage_table_shows_each_nodes_view_of_the_shared_dir():
    page = render_html(load_example("preflight-storage-3node"))
    assert page.count("<h3>Storage</h3>") == 3
    assert "<td>tmpfs</td><td><code>ncclcheck-lab-local</code></td>" in page  # h3: a local tmpfs, not the share
    assert "<td>ro</td>" in page  # h2: the read-only bind mount


def test_a_plots_caption_explains_only_the_marks_it_draws():
    """Red circles only where a row was wrong, the dashed line only where a bound is known."""
    pytest.importorskip("matplotlib")
    from ncclcheck.model import BenchRow

    def rows(wrong: int, bound):
        extra = {"bound_gbps": bound} if bound is not None else {}
        return [BenchRow(op="all_reduce", bytes=n, count=n // 4, dtype="float32", in_place=False, time_us=10.0,
                         algbw_gbps=1.0, busbw_gbps=1.0, wrong=wrong if n == 1 << 20 else 0,
                         rank_time_us=[10.0, 10.0], extra=dict(extra)) for n in (1 << 20, 1 << 22)]

    report = load_example("bench-gate-fail")
    for wrong, bound, circles, dashed in ((0, None, False, False), (3, None, True, False), (0, 12.5, False, True)):
        rep = dataclasses.replace(report, bench=rows(wrong, bound))
        [cap] = [t for t in Page(render_html(rep)).text if "bus bandwidth and time per operation" in t]
        assert ("red circles" in cap) == circles and ("dashed line" in cap) == dashed, cap
