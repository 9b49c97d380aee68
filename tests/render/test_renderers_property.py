"""Property tests of the renderers over arbitrary strings, as another node or a hand-edited report could send them.

Env files and the kubectl labels script parse (`bash -n`), and sourcing or running them runs nothing (a canary file
never appears) and sets no variable outside the allow-list; HTML contains no tag it did not write itself; JUnit
parses as XML. The strings go straight into Report objects (no ingestion cleaning): the renderers must hold alone.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclcheck.model import CheckResult, NodeInfo, Recommendation, Report, Status, WorldInfo
from ncclcheck.nccl.rules import env_name_allowed
from ncclcheck.render.envfile import render_envfile
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.labels import render_labels

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")
CANARY = "/tmp/ncclcheck-canary-property"

# What an attacker would write, whole, mixed into arbitrary unicode (surrogates cannot be encoded: left out).
_PAYLOADS = [f"$(touch {CANARY})", f"`touch {CANARY}`", f"'; touch {CANARY}; '", f'"; touch {CANARY}; "',
             f"\ntouch {CANARY}\n", f"\r\ntouch {CANARY} #", "\x1b]0;owned\x07", "\x1b[2J", "\x9b31m",
             "<script>x()</script>", "<img src=x onerror=alert(1)>", "]]>", "&amp;", "\x00", "\u202e", "${IFS}",
             "*", "\\", "EOF\n"]
_TEXT = st.lists(st.one_of(st.sampled_from(_PAYLOADS), st.text(st.characters(blacklist_categories=("Cs",)),
                                                                 max_size=12)), max_size=4).map("".join)
_NAMES = st.one_of(st.sampled_from(["NCCL_SOCKET_IFNAME", "BASH_ENV", "LD_PRELOAD", "PATH", "PROMPT_COMMAND",
                                    "NCCL_NET_PLUGIN", "GLOO_SOCKET_IFNAME", "FI_PROVIDER", "ENV",
                                    "NCCL_X$(touch /tmp/ncclcheck-canary-property)", "A B", "1X"]), _TEXT)
_RANK = st.one_of(st.none(), st.integers(0, 3))


@st.composite
def reports(draw) -> Report:
    nodes = [NodeInfo(r, draw(_TEXT), {"host": {"hostname": draw(_TEXT)}}) for r in range(draw(st.integers(0, 3)))]
    checks = [CheckResult(draw(st.sampled_from(["net.socket_ifname", "host.shm", "x.y", "bench.min_busbw[a b]"])),
                          draw(st.sampled_from(list(Status))), draw(_TEXT), detail=draw(_TEXT), fix=draw(_TEXT),
                          node=draw(_RANK), evidence={"nodes": [0, 1], "note": draw(_TEXT)})
              for _ in range(draw(st.integers(0, 3)))]
    recs = [Recommendation(draw(_NAMES), draw(_TEXT), draw(_TEXT), node=draw(_RANK))
            for _ in range(draw(st.integers(0, 4)))]
    return Report(command=draw(st.one_of(st.just("preflight"), _TEXT)), version=draw(_TEXT), started=draw(_TEXT),
                  world=WorldInfo(nnodes=max(1, len(nodes)), world_size=2, backend="gloo", master=draw(_TEXT)),
                  nodes=nodes, checks=checks, recommendations=recs)


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _clean_canary():
    if os.path.exists(CANARY):
        os.remove(CANARY)


def _bash(args: list, tmp_path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, *args], capture_output=True, timeout=20, cwd=tmp_path,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path), **env})


@_SETTINGS
@given(report=reports(), rank=st.sampled_from(["0", "1", "3", "", "9"]))
def test_env_file_parses_runs_nothing_and_sets_only_allowed_names(tmp_path, report, rank):
    _clean_canary()
    path = tmp_path / "env.sh"
    path.write_bytes(render_envfile(report).encode("utf-8", "surrogateescape"))
    assert _bash(["-n", str(path)], tmp_path, {}).returncode == 0, path.read_text()
    # Which names the file sets: the environment before and after sourcing it, NUL-separated (values may hold \n).
    probe = f'env -0 > before; . {path}; env -0 > after'
    out = _bash(["-c", probe], tmp_path, {"NCCLCHECK_NODE_RANK": rank} if rank else {})
    assert out.returncode == 0, out.stderr
    assert not os.path.exists(CANARY), path.read_text()

    def names(f):
        return {item.split(b"=", 1)[0].decode() for item in (tmp_path / f).read_bytes().split(b"\0") if item}

    added = names("after") - names("before")
    assert all(env_name_allowed(n) for n in added), (added, path.read_text())


@_SETTINGS
@given(report=reports())
def test_labels_script_parses_and_runs_nothing_but_kubectl(tmp_path, report):
    _clean_canary()
    kubectl = tmp_path / "kubectl"  # a stand-in that records its arguments, one per line
    kubectl.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> "$HOME/calls"\n')
    kubectl.chmod(0o755)
    path = tmp_path / "labels.sh"
    path.write_text(render_labels(report))
    assert _bash(["-n", str(path)], tmp_path, {}).returncode == 0, path.read_text()
    out = _bash([str(path)], tmp_path, {})
    assert out.returncode == 0, (out.stderr, path.read_text())
    assert not os.path.exists(CANARY), path.read_text()
    calls = (tmp_path / "calls").read_text().split("\n") if (tmp_path / "calls").exists() else []
    assert all("\x1b" not in a and "$(" not in a for a in calls), calls


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, tuple(sorted(k for k, _ in attrs))))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)


def _tags(text: str) -> list:
    p = _Tags()
    p.feed(text)
    p.close()
    return p.tags


def _placeholders(report: Report) -> Report:
    """The same report with every peer string replaced by a plain word: equal strings stay equal, empty stay empty,
    so the page has the same structure and differs only in text."""
    words: dict = {}

    def w(s):
        if not isinstance(s, str) or not " ".join(s.split()):
            return s
        return words.setdefault(s, f"word{len(words)}")

    return Report(command=report.command, version=w(report.version), started=w(report.started), world=WorldInfo(
        nnodes=report.world.nnodes, world_size=2, backend="gloo", master=w(report.world.master)),
        nodes=[NodeInfo(n.node_rank, w(n.hostname), {"host": {"hostname": w(n.facts["host"]["hostname"])}})
               for n in report.nodes],
        checks=[CheckResult(c.id, c.status, w(c.summary), detail=w(c.detail), fix=w(c.fix), node=c.node,
                            evidence={"nodes": [0, 1], "note": w(c.evidence["note"])}) for c in report.checks],
        recommendations=[Recommendation(r.name, w(r.value), w(r.reason), node=r.node) for r in report.recommendations])


@_SETTINGS
@given(report=reports().filter(lambda r: r.command == "preflight"))
def test_html_has_no_tag_it_did_not_write(report):
    got = _tags(render_html(report))
    want = _tags(render_html(_placeholders(report)))
    assert got == want


@_SETTINGS
@given(report=reports())
def test_junit_parses(report):
    root = ET.fromstring(render_junit(report).encode("utf-8"))
    assert root.tag == "testsuites"
