"""Rich terminal view of a `links` section: the node x node bandwidth matrix with slow cells highlighted, and the
slow nodes and links named. Returns renderables, never prints, decides nothing (the verdicts are the section's).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any, Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..units import format_bytes, format_gbps
from . import words
from .common import (
    NAMED_NODES,
    bound_gbps_text,
    bound_groups,
    efficiency_span,
    efficiency_text,
    links_pairs,
    links_schedule,
    links_slow_cells,
    name_nodes,
    wrong_bound_text,
)

# Above this many nodes the node x node matrix no longer fits a terminal (and at scale it is mostly empty: the
# scalable mode measures one pairing): the measured pairs are listed instead.
MATRIX_MAX_NODES = 12
PAIRS_SHOWN = 40  # more measured pairs than this: the slow and re-tested ones are listed, the rest summarised

SLOW = "bold red"
SLOW_NODE = "bold red"
DEAD = "dim red"


def _ints(xs: Any) -> list[int]:
    return [x for x in (xs or []) if isinstance(x, int)]


def _host(i: Any, links: Mapping, names: Optional[Mapping[int, str]]) -> str:
    hosts = links.get("hosts") or []
    from_section = hosts[i] if isinstance(i, int) and 0 <= i < len(hosts) and isinstance(hosts[i], str) else ""
    return (names or {}).get(i) or from_section


def _label(i: Any, links: Mapping, names: Optional[Mapping[int, str]]) -> str:
    unit = links.get("unit") or "node"
    host = _host(i, links, names)
    return f"{unit} {i} ({host})" if host else f"{unit} {i}"


def _many(xs: list[int], links: Mapping, names: Optional[Mapping[int, str]]) -> str:
    """Many nodes as hostranges.who words them (`130 nodes gpu[0001-0128,0131] (node ranks 1-128,131)`)."""
    return name_nodes(sorted(xs), {x: _host(x, links, names) for x in xs if _host(x, links, names)})


def _slow_cells(links: Mapping) -> set:
    return links_slow_cells(dict(links))


def matrix_table(links: Mapping, names: Optional[Mapping[int, str]] = None) -> Table:
    """Rows send, columns receive: cell (a, b) is a -> b in GB/s. Slow cells, slow and dead nodes are marked."""
    matrix = links.get("matrix_gbps") if isinstance(links.get("matrix_gbps"), list) else []
    n = len(matrix)
    slow = _slow_cells(links)
    slow_nodes, dead = set(_ints(links.get("slow_nodes"))), set(_ints(links.get("dead")))
    t = Table(header_style="bold", box=None, pad_edge=False)
    t.add_column("from \\ to", no_wrap=True)
    for j in range(n):
        t.add_column(Text(str(j), style=SLOW_NODE if j in slow_nodes else DEAD if j in dead else ""),
                     justify="right")
    for i, row in enumerate(matrix):
        style = SLOW_NODE if i in slow_nodes else DEAD if i in dead else "bold"
        host = _host(i, links, names)
        head = Text(f"{i} {host}".rstrip(), style=style)
        if i in dead:
            head.append(" dead", style=DEAD)
        cells: list = [head]
        for j in range(n):
            v = row[j] if isinstance(row, list) and j < len(row) else None
            if i == j:
                cells.append(Text("·", style="dim"))
            elif isinstance(v, (int, float)):
                txt = f"{v:.2f}" if v < 100 else f"{v:.0f}"
                cells.append(Text(txt, style=SLOW if (i, j) in slow else ""))
            else:
                cells.append(Text("dead" if i in dead or j in dead else "-", style=DEAD if i in dead or j in dead
                                  else "dim"))
        t.add_row(*cells)
    return t


def _gbps(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, (int, float)) else "-"


def pairs_table(links: Mapping, names: Optional[Mapping[int, str]] = None) -> Group:
    """The measured pairs, one row each (a -> b and back in GB/s), for runs too large for the matrix. Past
    PAIRS_SHOWN only the pairs worth reading (slow, re-tested, touching a slow or dead node) get a row; a line
    summarises the others."""
    matrix = links.get("matrix_gbps") if isinstance(links.get("matrix_gbps"), list) else []
    slow = _slow_cells(links)
    marked = set(_ints(links.get("slow_nodes"))) | set(_ints(links.get("dead")))

    def cell(a: int, b: int) -> Any:
        row = matrix[a]
        return row[b] if isinstance(row, list) and b < len(row) else None

    measured, worth = links_pairs(dict(links))
    shown = measured if len(measured) <= PAIRS_SHOWN else worth
    t = Table(header_style="bold", box=None, pad_edge=False)
    for col, just in (("pair", "left"), ("a -> b", "right"), ("b -> a", "right")):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for a, b in shown:
        t.add_row(Text(f"{_label(a, links, names)} <-> {_label(b, links, names)}",
                       style=SLOW if set((a, b)) & marked else ""),
                  Text(_gbps(cell(a, b)), style=SLOW if (a, b) in slow else ""),
                  Text(_gbps(cell(b, a)), style=SLOW if (b, a) in slow else ""))
    listed = set(shown)
    rest = [v for a, b in measured if (a, b) not in listed for v in (cell(a, b), cell(b, a))
            if isinstance(v, (int, float))]
    note = Text()
    if rest:
        note.append(f"{len(measured) - len(shown):,} other pairs measured: {min(rest):.2f}-{max(rest):.2f} GB/s, "
                    f"median {statistics.median(rest):.2f}", style="dim")
    return Group(t, note) if rest else Group(t)


def findings(links: Mapping, names: Optional[Mapping[int, str]] = None) -> Text:
    """The named slow nodes, slow links, dead nodes and failed pairs, one per line."""
    t = Text()
    ref = links.get("reference_gbps", links.get("median_gbps"))
    thr = links.get("threshold_gbps")
    dead, slow_nodes = _ints(links.get("dead")), _ints(links.get("slow_nodes"))
    if len(dead) > NAMED_NODES:  # thousands of nodes read as host ranges and a count, one line
        t.append("dead ", style=DEAD)
        t.append(f"{_many(dead, links, names)} stopped answering; their pairs were not measured\n")
        dead = []
    for x in dead:
        t.append("dead ", style=DEAD)
        t.append(f"{_label(x, links, names)} stopped answering; its pairs were not measured\n")
    if len(slow_nodes) > NAMED_NODES:
        t.append("slow nodes ", style=SLOW_NODE)
        t.append(f"{_many(slow_nodes, links, names)}: most of their links are below {format_gbps(thr)}\n")
        slow_nodes = []
    for x in slow_nodes:
        t.append("slow node ", style=SLOW_NODE)
        t.append(f"{_label(x, links, names)}: most of its links are below {format_gbps(thr)}\n")
    for s in links.get("slow") or []:
        if not isinstance(s, dict):
            continue
        t.append("slow link ", style=SLOW)
        t.append(f"{_label(s.get('a'), links, names)} <-> {_label(s.get('b'), links, names)}: "
                 f"{format_gbps(s.get('gbps'))}")
        if s.get("ambiguous"):
            t.append(" (can't tell which endpoint)", style="yellow")
        t.append("\n")
    by_error: dict = {}  # thousands of failed pairs at scale: one line per distinct error, a few pairs named
    for e in links.get("errors") or []:
        if isinstance(e, dict):
            by_error.setdefault(" ".join(str(e.get("error", "?")).split()), []).append(f"{e.get('a')}-{e.get('b')}")
    for text, pairs in by_error.items():
        t.append("failed pair " if len(pairs) == 1 else f"{len(pairs):,} failed pairs ", style=SLOW)
        more = f" and {len(pairs) - NAMED_NODES:,} more" if len(pairs) > NAMED_NODES else ""
        t.append(f"{', '.join(pairs[:NAMED_NODES])}{more}: {text}\n")
    if not t.plain and not isinstance(ref, (int, float)):
        t.append("nothing measured", style="yellow")  # one rank, or no pair finished: not a clean bill of health
    elif not t.plain:
        t.append("no slow node or link", style="green")
        if isinstance(ref, (int, float)):
            t.append(f" (typical {format_gbps(ref)}, threshold {format_gbps(thr)})", style="dim")
    elif isinstance(ref, (int, float)):
        t.append(f"typical link {format_gbps(ref)}, slow below {format_gbps(thr)}", style="dim")
    t.rstrip()
    return t


def render_links(links: Optional[Mapping], names: Optional[Mapping[int, str]] = None) -> list:
    """Renderables for the terminal: the matrix, then the findings. `names` (node -> hostname) overrides the
    section's own `hosts`."""
    if not links:
        return []
    n = len(links.get("matrix_gbps") or [])
    head = Text("Links", style="bold")
    head.append("  GB/s" + (", row sends to column" if n <= MATRIX_MAX_NODES else ""), style="dim")
    size, iters = links.get("size"), links.get("iters")
    if isinstance(size, int):
        head.append(f"; {format_bytes(size)}" + (f" x {iters}" if isinstance(iters, int) else ""), style="dim")
    if isinstance(links.get("wall_s"), (int, float)):
        head.append(f"; {links['wall_s']:.1f} s", style="dim")
    how = links_schedule(dict(links))
    if how:
        head.append("\n" + how, style="dim")
    if links.get("one_host"):
        head.append(f"\nevery rank ran on {links['one_host']}: these are loopback transfers between ranks of one host, "
                    "not a network link (run one rank per node across nodes to measure links)")
    table = matrix_table(links, names) if n <= MATRIX_MAX_NODES else pairs_table(links, names)
    parts = [head, table, findings(links, names)]
    b = bounds_text(links, names)
    if b.plain:
        parts.append(b)
    return [Group(*parts)]


NODES_NAMED_MAX = 8  # nodes whose bound is listed by name; the rest are counted


def bounds_text(links: Mapping, names: Optional[Mapping[int, str]] = None) -> Text:
    """What each node's links can carry (the bound of its pairs: the slower end) and the efficiency span."""
    t = Text()
    nb = links.get("node_bounds")
    if not isinstance(nb, dict) or not nb:
        return t
    t.append("bounds ", style="bold")
    groups = bound_groups(nb)  # one entry per distinct bound (the slowest first), its nodes as ranges past a few
    for b, by, members in groups[:NODES_NAMED_MAX]:
        ranks = [m for m in members if isinstance(m, int)]
        who = ", ".join(_label(m, links, names) for m in ranks) if len(ranks) <= 1 or links.get("unit") not in (
            None, "node") else _many(ranks, links, names)
        who = ", ".join([who] * bool(ranks) + [m for m in members if isinstance(m, str)])
        t.append(f"{who}: {bound_gbps_text(b)}" + (f" ({by})" if by else "") + "; ")
    if len(groups) > NODES_NAMED_MAX:
        t.append(f"+{sum(len(g[2]) for g in groups[NODES_NAMED_MAX:])} more nodes with other bounds; ", style="dim")
    effs, wrong = efficiency_span(links)
    if effs:
        t.append(words.efficiency_span_text(efficiency_text(min(effs)), efficiency_text(max(effs))), style="dim")
    if wrong:
        t.append(f"; {words.count(len(wrong), 'direction')} beat their bound, which is wrong: "
                 + wrong_bound_text(wrong[0], lambda x: _label(x, links, names) if isinstance(x, int) else "?"),
                 style="bold yellow")
    t.rstrip()
    return t
