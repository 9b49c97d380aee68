"""The first screen is the answer (issue 77): the verdict, the root cause and its fix, the recommended settings, then
what failed or warned; the passes counted by kind and the skips one row per reason; every row a `--verbose` (console)
or a click (HTML) away. The JSON keeps every row.

The console is read through the CLI (`ncclcheck report` of a kept two-node run, and a real two-node preflight on
loopback); the HTML's first screen is what headless Chromium lays out in a 1400x900 window (skipped without it)."""

from __future__ import annotations

import html
import json
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import free_port

from ..conftest import REPO, cli_env, run_cli
from .conftest import load_example
from .test_screenshot import _browser, _png_rows

KEPT = pathlib.Path(REPO) / "tests" / "data" / "first_screen" / "preflight-pass-2node-cpu.json"
FIRST = 25  # lines of the console's first screen
GPU_SKIP = "no NVIDIA GPU on the PCI bus and no NVIDIA driver"


def _first_screen_holds_the_answer(out: str, doc: dict) -> list[str]:
    """The checks every passing run's console must pass: the verdict and every recommended `export` line within
    the first FIRST lines, and no passing check's own row. Returns the lines."""
    lines = out.splitlines()
    head = "\n".join(lines[:FIRST])
    assert re.search(r"^PASS  \d+ passed, 0 warnings, 0 failed, \d+ skipped", head, re.M), out
    for r in doc["recommendations"]:
        value = r["value"] if r["name"].startswith("GLOO") else f"'{r['value']}'"
        assert f"export {r['name']}={value}" in head, (r, out)
    assert {r["name"] for r in doc["recommendations"]} >= {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}
    passing = {c["id"] for c in doc["checks"] if c["status"] == "pass"}
    skipping = {c["id"] for c in doc["checks"] if c["status"] == "skip"}
    for cid in passing - skipping:  # a passing check is counted, not shown (its id may name a skip row)
        assert not re.search(rf"\b{re.escape(cid)}\b", out), (cid, out)
    return lines


def _skip_rows(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("skip ")]


def test_a_kept_two_node_pass_answers_on_the_first_screen_and_verbose_shows_every_row(validate_report):
    doc = validate_report(json.loads(KEPT.read_text()))
    res = run_cli("report", str(KEPT), env={"COLUMNS": "100"})
    assert res.returncode == 0, res.stderr
    lines = _first_screen_holds_the_answer(res.stdout, doc)
    assert len(lines) <= 30, res.stdout
    skips = _skip_rows(lines)
    # identical skips are one row: twelve GPU checks on two nodes that said the same thing
    gpu = [ln for ln in skips if GPU_SKIP in ln]
    assert len(gpu) == 1 and "12 gpu checks" in gpu[0] and gpu[0].split()[-len(GPU_SKIP.split()) - 1] == "all", skips
    reasons = [re.split(r"\s{2,}", ln.strip())[-1] for ln in skips]
    assert len(reasons) == len(set(reasons)), skips  # each reason once (this run: every skip on every node)
    assert sum(1 for c in doc["checks"] if c["status"] == "skip") == 44 and len(skips) == 11
    passes = next(ln for ln in lines if ln.startswith("pass "))
    assert "32 results" in passes and "rendezvous 3" in passes and "host 10" in passes, passes
    assert "--verbose" in lines[-1], lines[-1]

    verbose = run_cli("report", str(KEPT), "--verbose", env={"COLUMNS": "100"})
    assert verbose.returncode == 0, verbose.stderr
    for c in doc["checks"]:  # every check and its words, a skip said alike on both nodes once (common.py)
        assert c["id"] in verbose.stdout and c["summary"].split(":")[0][:40] in " ".join(verbose.stdout.split())
    assert sum(GPU_SKIP in ln for ln in verbose.stdout.splitlines()) == 12  # one row per GPU check, not per node
    vlines = verbose.stdout.splitlines()
    verdict = next(i for i, ln in enumerate(vlines) if ln.startswith("PASS  32 passed"))
    assert verdict < vlines.index(next(ln for ln in vlines if ln.startswith("status  check"))) < FIRST  # still first

    machine = run_cli("report", str(KEPT), "--json", "-")
    assert len(json.loads(machine.stdout)["checks"]) == len(doc["checks"]) == 76  # the JSON keeps every row


def test_verbose_and_quiet_contradict():
    res = run_cli("report", str(KEPT), "--verbose", "--quiet")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--verbose" in res.stderr, res.stderr


def test_failures_and_their_fixes_come_before_the_folded_rows():
    # at a width of its own: CI's lanes may give a narrower one, where the table wraps a fix inside its cell
    res = run_cli("report", str(pathlib.Path(REPO) / "tests" / "render" / "examples" / "preflight-fail-3node.json"),
                  env={"COLUMNS": "160"})
    lines = res.stdout.splitlines()
    verdict = next(i for i, ln in enumerate(lines) if ln.startswith("FAIL  "))
    assert res.returncode == 1 and verdict <= 2 and lines[verdict + 1].startswith("root cause: [rendezvous.world]")
    at = {word: next(i for i, ln in enumerate(lines) if ln.startswith(word)) for word in
          ("Recommended environment", "FAIL    net.socket_ifname", "WARN    net.interfaces", "pass ", "skip ")}
    assert list(at.values()) == sorted(at.values()), at  # what to set, then what failed, then the folded rest
    assert "fix: Pin NCCL_SOCKET_IFNAME" in res.stdout and at["skip "] < FIRST




@pytest.mark.slow  # two real preflight processes on loopback, ~10 s
def test_a_real_two_node_preflight_answers_in_its_first_25_lines(tmp_path):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "ncclcheck", "preflight", "--nnodes", "2", "--node-rank", str(r),
                               "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", "20",
                               "--json", str(tmp_path / "pf%n.json")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env=cli_env({"COLUMNS": "100"})) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    said = "\n".join(f"--- node {r} rc={p.returncode}\n{o}\n{e[-2000:]}" for r, (p, (o, e)) in
                     enumerate(zip(procs, outs)))
    assert [p.returncode for p in procs] == [0, 0], said
    doc = json.loads((tmp_path / "pf0.json").read_text())
    lines = _first_screen_holds_the_answer(outs[0][0], doc)
    skips = _skip_rows(lines)
    reasons = [re.split(r"\s{2,}", ln.strip())[-1] for ln in skips]
    assert len(reasons) == len(set(reasons)) and len(skips) < sum(c["status"] == "skip" for c in doc["checks"]), said


# A probe added to a copy of the page (as ncclcheck_lab/bench_report.py times it): after the load event, the text of
# every text node laid out wholly above the fold (FOLD_PX: the screenshot's height; --dump-dom's own window is the
# same width but shorter), in document order, as JSON in a <pre> that --dump-dom prints.
PROBE_JS = """<script>window.addEventListener('load', function(){
  var h = FOLD_PX, out = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), n;
  while ((n = walker.nextNode())) {
    if (!n.textContent.trim() || (n.parentElement && n.parentElement.closest('script,style'))) continue;
    var range = document.createRange(); range.selectNodeContents(n);
    var rects = range.getClientRects(), seen = false;
    for (var i = 0; i < rects.length; i++)
      if (rects[i].width > 0 && rects[i].height > 0 && rects[i].top >= 0 && rects[i].bottom <= h) seen = true;
    if (seen) out.push(n.textContent.trim());
  }
  var pre = document.createElement('pre'); pre.id = 'ncclcheck-first-screen';
  pre.textContent = JSON.stringify({width: window.innerWidth, height: h, text: out});
  document.body.appendChild(pre);
});</script>"""

CHROMIUM = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--window-size=1400,900"]


def _first_screen(browser: str, page: pathlib.Path, tmp_path, fold: int = 900) -> dict:
    probe = tmp_path / f"probe-{page.name}"
    probe.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", PROBE_JS.replace("FOLD_PX", str(fold)) + "</body>", 1), encoding="utf-8")
    res = subprocess.run([browser, *CHROMIUM, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          probe.as_uri()], capture_output=True, text=True, timeout=90, check=False)
    m = re.search(r'<pre id="ncclcheck-first-screen">(.*?)</pre>', res.stdout, re.S)
    assert m, f"no probe in chromium's DOM (exit {res.returncode}): {res.stderr[-300:]}"
    return json.loads(html.unescape(m.group(1)))


@pytest.mark.slow
def test_the_html_first_screen_holds_the_verdict_the_settings_and_the_failures(tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium/google-chrome installed (apt-get install -y chromium)")
    page = tmp_path / "pf.html"
    res = run_cli("report", str(KEPT), "--html", str(page))
    assert res.returncode == 0 and page.exists(), res.stderr
    png = tmp_path / "pf.png"
    subprocess.run([browser, *CHROMIUM, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
                    page.as_uri()], capture_output=True, timeout=90, check=False)
    width, height, rows = _png_rows(png.read_bytes())
    assert (width, height) == (1400, 900)
    assert len({rows[y][x:x + 3] for y in range(0, height, 30) for x in range(0, width * 3, 90)}) > 20  # not blank

    seen = _first_screen(browser, page, tmp_path, fold=height)
    assert seen["width"] == width, seen  # laid out as wide as the screenshot
    text = " ".join(seen["text"])
    assert "ncclcheck preflight" in text and "PASS (exit 0)" in text, text
    assert "export NCCL_SOCKET_IFNAME='=lo'" in text and "export GLOO_SOCKET_IFNAME=lo" in text, text
    assert "32 results" in text and "12 gpu checks" in text and GPU_SKIP in text, text
    assert "host.shm" not in text  # every row is a click away, not on the first screen
    assert seen["text"].count(GPU_SKIP) == 1, seen["text"]  # identical skips are one row
    doc = page.read_text(encoding="utf-8")
    assert re.search(r'<details class="all-checks" id="all-checks">', doc)  # closed: no `open`
    # every row in the folded table, a skip said alike on both nodes once: 76 results, 58 rows
    assert doc.count('data-check="gpu.xid"') == 1 and doc.count("data-check=") == 58

    failing = tmp_path / "fail.html"
    res = run_cli("report", str(pathlib.Path(REPO) / "tests" / "render" / "examples" / "preflight-fail-3node.json"),
                  "--html", str(failing))
    assert failing.exists(), res.stderr
    text = " ".join(_first_screen(browser, failing, tmp_path)["text"])
    assert "FAIL (exit 1)" in text and "node 2 never joined" in text and "Fix:" in text, text
    assert "export NCCL_SOCKET_IFNAME='=eth0'" in text, text
    for row in ("NCCL_SOCKET_IFNAME=eth1 matches no interface on cpu-b01", "docker0 has the same address"):
        assert row in text, (row, text)
    assert load_example("preflight-fail-3node").status.value == "fail"


def test_skips_fold_by_reason_and_nodes_and_a_flood_of_reasons_is_counted():
    import dataclasses
    import io

    from ncclcheck.model import NodeInfo, Report, skipped
    from ncclcheck.render import console
    from ncclcheck.render import html as html_mod
    from ncclcheck.render.common import FOLDED_SKIPS, skips_by_reason

    nodes = [NodeInfo(i, f"h{i}", {}) for i in range(3)]
    checks = [skipped(cid, "no NVIDIA GPU", node=n) for cid in ("gpu.xid", "gpu.mig", "gpu.pcie") for n in range(3)]
    checks += [skipped("ib.devices", "no RDMA devices", node=n) for n in (0, 2)]  # not every node: named
    checks += [skipped("gdr.support", "no RDMA devices", node=1)]  # the same words on another node: its own row
    report = Report(command="preflight", version="t", started="now", duration_s=0.0, checks=checks, nodes=nodes)
    folds = [(f.ids, f.nodes, f.results) for f in skips_by_reason(report)]
    assert folds == [(("gpu.xid", "gpu.mig", "gpu.pcie"), (), 9), (("ib.devices",), (0, 2), 2),
                     (("gdr.support",), (1,), 1)], folds

    many = dataclasses.replace(report, checks=checks + [skipped("paths.exist", f"no file on h{i}", node=i % 3)
                                                        for i in range(300)])
    buf = io.StringIO()
    console.print_parts(console.make_console(buf, {}), console.render_report(many, verbose=False))
    rows = [ln for ln in buf.getvalue().splitlines() if ln.startswith("skip ")]
    assert len(rows) == FOLDED_SKIPS + 1 and "291 more results" in rows[-1] and "291 other reasons" in rows[-1], rows
    page = html_mod.render_html(many)
    assert page.count('class="folded status-skip"') == html_mod.FOLDED_REASONS + 1, page.count("folded")
    assert page.count('data-check="paths.exist"') == 300  # every row still in the closed block
