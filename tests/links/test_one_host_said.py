"""links on one machine says what it measured: loopback between ranks of one host, not a network link."""

from __future__ import annotations

from ncclcheck.links.analyze import analyze
from ncclcheck.render.links import render_links


def _text(parts) -> str:
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    term = Console(file=buf, width=200)
    for p in parts:
        term.print(p)
    return buf.getvalue()


def test_ranks_of_one_host_are_said_to_be_loopback():
    res = analyze([[None, 0.3], [0.3, None]], size=1 << 20, hosts=["vm", "vm"])
    assert res.section["one_host"] == "vm"
    [slow] = [c for c in res.checks if c.id == "links.slow"]
    assert slow.status.value == "pass" and "every rank on vm: loopback between ranks of one host" in slow.summary
    assert "loopback transfers between ranks of one host" in _text(render_links(res.section))
    two = analyze([[None, 0.3], [0.3, None]], size=1 << 20, hosts=["h1", "h2"])
    assert "one_host" not in two.section and "loopback" not in two.checks[-1].summary
