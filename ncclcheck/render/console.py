"""Rich terminal view of a Report: returns renderables, never prints, computes no verdicts.

Failing checks come first with their fix; recommendations are a plain `export` block (no box characters) so it
can be copied into a shell as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, TextIO

from rich.console import Console, Group
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..envnames import assignment
from ..hostranges import rank_ranges
from ..model import Report, Status, clean_text
from ..units import format_bytes, format_mbps_link
from .common import (
    FOLDED_SKIPS,
    checks_phrase,
    code_text,
    display_checks,
    hostnames,
    name_nodes,
    not_measured,
    on_first_screen,
    one_line,
    passes_by_kind,
    skips_by_reason,
    trust_text,
)
from .words import FOLDED_NOTE, STATUS_WORD, count, status_mark, world_phrase

STYLE = {Status.FAIL: "bold red", Status.WARN: "yellow", Status.PASS: "green", Status.SKIP: "dim"}
MARK = {s: status_mark(s) for s in Status}  # words.py's words, quiet ones in lower case
_ORDER = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 3}


def use_color(is_tty: bool, env: Mapping[str, str], launcher: str = "ncclcheck") -> bool:
    """Styles only on a terminal. NO_COLOR (any value) turns them off and FORCE_COLOR on (no-color.org,
    force-color.org); TERM=dumb is no terminal. Open MPI hands its ranks a pseudo-terminal even when mpirun's own
    output is a pipe or a file, so under mpirun only FORCE_COLOR turns styles on."""
    if (env.get("NO_COLOR") or "") != "":
        return False
    if (env.get("FORCE_COLOR") or "") != "":
        return True
    if (env.get("TERM") or "") == "dumb" or launcher == "mpi":
        return False
    return is_tty


PIPE_WIDTH = 160  # columns off a terminal (COLUMNS wins): rich's 80 wrapped host lists and table rows in job logs


class _TrimmedLines:
    """A text stream that drops the spaces rich pads table rows with, so lines in a pipe or a file end in text
    (grep, diff and `tail -f` of a job log see what a reader sees)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        if lines:
            self.stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self.stream.write(self._partial)
            self._partial = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


def make_console(stream: TextIO, env: Mapping[str, str], launcher: str = "ncclcheck",
                 width: Optional[int] = None) -> Console:
    """The Console the CLI prints through: no ANSI codes at all unless use_color() says so; off a terminal, lines
    without trailing spaces, PIPE_WIDTH wide (or $COLUMNS)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    color = use_color(tty, env, launcher)
    if not tty:
        stream = _TrimmedLines(stream)
        if width is None:
            width = pipe_width(env)
    return _TextConsole(file=stream, force_terminal=color, no_color=not color, highlight=False, width=width,
                        force_interactive=color and tty)


def pipe_width(env: Mapping[str, str]) -> int:
    """The columns of output off a terminal: $COLUMNS, else PIPE_WIDTH."""
    cols = (env.get("COLUMNS") or "").strip()
    return int(cols) if cols.isdigit() and int(cols) > 0 else PIPE_WIDTH


class _TextConsole(Console):
    """A Console whose text segments never carry control characters: styles and live-display controls are rich's
    own (styled or control segments), but the text in them comes from reports, other nodes and files, and rich
    itself strips only BEL, BS, CR and form feeds from it, not ESC (a window-title escape in a hostname went
    through to the terminal)."""

    def _render_buffer(self, buffer):  # rich's one exit to the file: every print passes here
        return super()._render_buffer(seg if seg.control else Segment(clean_text(seg.text), seg.style)
                                      for seg in buffer)


def header(report: Report) -> Text:
    w = report.world
    # Short names, at most 4, of every node of the run the report knows (hostnames(): a links run's other nodes
    # too): the header stays one line (the nodes' full names are in the checks and the JSON).
    hosts = [h for _, h in sorted(hostnames(report).items())]
    # A run whose other nodes' names it never gathered (a multi-node bench) counts them rather than look complete.
    more = max(len(hosts), w.nnodes if isinstance(w.nnodes, int) else 0) - len(hosts[:4])
    who = ", ".join(h.split(".")[0] for h in hosts[:4]) + (f" +{more:,} more" if more > 0 and hosts else "")
    t = Text(no_wrap=True, overflow="ellipsis")  # one line however many hosts and however narrow the terminal
    t.append(f"ncclcheck {report.command} ", style="bold")
    t.append(world_phrase(w))
    if w.master:
        t.append(f", master {w.master}")
    if report.trust:
        t.append(f", trust: {report.trust.get('level')}")
    if who:
        t.append(f" [{who}]", style="dim")
    return t


def checks_table(report: Report, show_passed: bool = True) -> Table:
    """The checks, failures first. show_passed False (the first screen): failures and warnings each a row, then the
    passes as one row counted by kind and the skips one row per reason (common.skips_by_reason); True (--verbose):
    every row."""
    table = Table(show_header=True, header_style="bold", expand=False, box=None, pad_edge=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("node", justify="right", no_wrap=True)
    table.add_column("result")
    rows = sorted(enumerate(display_checks(report, ordered=False)), key=lambda ic: (_ORDER[ic[1].status], ic[0]))
    root = report.root_cause()
    for _, c in rows:
        if not show_passed and not on_first_screen(c):
            continue
        node = "all" if c.node is None else str(c.node)
        result = Text(c.summary)
        for more in c.more:  # every finding of the check, not its first alone (a slow rank and a slow link)
            result.append("\n  + ")
            result.append(more)
        if c.status in (Status.FAIL, Status.WARN) and c.fix and c is not root:  # the verdict above says its fix
            result.append("\n  fix: ", style="bold")
            result.append(c.fix)
        table.add_row(Text(MARK[c.status], style=STYLE[c.status]), c.id, node, result)
    if not show_passed:
        _folded_rows(table, report)
    return table


def _folded_rows(table: Table, report: Report) -> None:
    """The passes as one row ('25 results: rendezvous 3, host 8, ...'), the skips one row per reason; the counts are
    every node's results, as the verdict counts them."""
    kinds = passes_by_kind(report)
    if kinds:
        table.add_row(Text(MARK[Status.PASS], style=STYLE[Status.PASS]), count(sum(n for _, n in kinds), "result"),
                      "", ", ".join(f"{k} {n:,}" for k, n in kinds))
    folds = skips_by_reason(report)
    for f in folds[:FOLDED_SKIPS]:
        table.add_row(Text(MARK[Status.SKIP], style=STYLE[Status.SKIP]), checks_phrase(f.ids),
                      rank_ranges(f.nodes) if f.nodes else "all", f.reason)
    if len(folds) > FOLDED_SKIPS:
        left = folds[FOLDED_SKIPS:]
        table.add_row(Text(MARK[Status.SKIP], style=STYLE[Status.SKIP]),
                      count(sum(f.results for f in left), "more result"), "", count(len(left), "other reason"))


def folded_note(report: Report) -> Optional[Text]:
    """The line under a first-screen table that folded passes or skips: where every row is."""
    if not any(c.status in (Status.PASS, Status.SKIP) for c in report.checks):
        return None
    return Text(FOLDED_NOTE, style="dim")


# The block a person copies into a shell: `export` lines only, each on one line however long (a line rich wrapped
# was two commands, or a comment whose second half was code: `syntax error near unexpected token ')'`), and no
# comments (an interactive zsh reads a pasted `# ...` as a command unless interactive_comments is set). Why each
# setting is there follows it, as prose.
RECOMMENDED_HEAD = "Recommended environment (export lines to paste into bash or zsh; why: below)"
WHY_HEAD = "why:"


def paste_line(text: str, indent: str = "  ") -> Text:
    """A line for a shell (an `export`, a command): never wrapped, never cut at the terminal's width (the CLI prints
    with crop=False, print_parts()); a terminal too narrow shows it folded and copies it whole. Print it inside a
    Group: Console.print joins the Texts it is handed directly into a new Text, which wraps. Its spaces are kept
    (one_line() would collapse two inside a quoted value and change it); a newline or tab becomes a space."""
    return Text(indent + clean_text(text).replace("\n", " ").replace("\t", " "), no_wrap=True, overflow="ignore")


def recommendations_block(report: Report) -> Group:
    """The heading, the cluster-wide `export` lines, each group of nodes given the same per-node values under a
    heading naming them, then why each is set. A setting that cannot be written (envfile.not_written) is named in
    the why part and never exported."""
    from .envfile import export_line, not_written

    parts: list = [Text(RECOMMENDED_HEAD, style="bold")]
    why = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
    why.add_column("name", overflow="fold", style="bold")
    why.add_column("why", overflow="fold")

    def add(recs: list, where: str = "") -> None:
        for r in recs:
            skip = not_written(r.name, r.value)
            if skip is None:
                parts.append(paste_line(export_line(r.name, r.value)))
            label = one_line(r.name if isinstance(r.name, str) and skip is None else repr(r.name))[:80]
            why.add_row(label + (f" ({where})" if where else ""),
                        f"not written: {skip}" if skip else one_line(r.reason))

    add([r for r in report.recommendations if r.node is None])
    by_node: dict = {}
    for r in report.recommendations:
        if r.node is not None:
            by_node.setdefault(r.node, []).append(r)
    same: dict = {}  # nodes given the same settings share one block: at scale a block per node would be thousands
    for node in sorted(by_node):
        same.setdefault(tuple((r.name, r.value, r.reason) for r in by_node[node]), []).append(node)
    hosts = hostnames(report)
    for nodes in sorted(same.values(), key=lambda ns: ns[0]):
        who = name_nodes(nodes, {k: one_line(v) for k, v in hosts.items() if k in set(nodes)}) or "node ?"
        parts.append(Text(f"{who} only (paste there):", style="bold"))
        add(by_node[nodes[0]], name_nodes(nodes, {}))  # the hostnames are in the heading above
    if why.row_count:
        parts += [Text(WHY_HEAD, style="bold"), Padding(why, (0, 0, 0, 2))]
    return Group(*parts)


def print_parts(term: Console, parts: list) -> None:
    """Print render_report()'s parts: uncropped, so that paste_line()s wider than the terminal stay whole (every
    other part is laid out within the width already)."""
    for part in parts:
        term.print(part, crop=False)


def verdict(report: Report) -> Text:
    st = report.status
    t = Text()
    t.append(STATUS_WORD[st], style=STYLE[st])
    counts = {s: sum(1 for c in report.checks if c.status is s) for s in Status}
    t.append(f"  {counts[Status.PASS]} passed, {counts[Status.WARN]} warnings, {counts[Status.FAIL]} failed, "
             f"{counts[Status.SKIP]} skipped in {report.duration_s:.1f}s")
    if report.partial:
        t.append("  (partial: the run was cut short)", style="yellow")
    root = report.root_cause()
    if root is not None:
        where = "" if root.node is None else f" on node {root.node}"
        t.append(f"\nroot cause{where}: ", style="bold red")
        t.append(f"[{root.id}] {root.summary}")
        if root.fix:
            t.append("\nfix: ", style="bold")
            t.append(root.fix)
    if report.trust and (report.trust.get("ignored") or report.trust.get("warning")):
        t.append(f"\n{trust_text(report)}", style="yellow")
    if report.log_path and st is Status.FAIL:
        t.append(f"\nlog: {report.log_path}", style="dim")
    return t


def one_line_verdict(report: Report, notes: tuple = ()) -> Text:
    """The whole report of a healthy run as one line (the guard's, in a training job's log): the header, the
    verdict's counts and `notes` (what the guard set), joined by '; '."""
    t = header(report)
    t.no_wrap, t.overflow = False, "fold"
    counts = {s: sum(1 for c in report.checks if c.status is s) for s in Status}
    t.append(": ")
    t.append(STATUS_WORD[report.status], style=STYLE[report.status])
    t.append(f" ({counts[Status.PASS]} passed, {counts[Status.WARN]} warnings, {counts[Status.SKIP]} skipped in "
             f"{report.duration_s:.1f}s)")
    for note in notes:
        t.append(f"; {one_line(note)}")
    return t


def render_report(report: Report, verbose: bool = True, rows_shown: bool = False,
                  folded_hint: bool = True) -> list:
    """Everything for the terminal, in order: the answer first (verdict, root cause and fix, what to set, what
    failed or warned), then the passes and skips folded (verbose: every row), then bench's and links' own sections.
    rows_shown: the bench rows were printed as they were measured (render/progress.py), so not again here.
    folded_hint: say under the table that --verbose shows every row (a caller without that flag says False)."""
    out: list = [header(report), verdict(report)]
    if report.recommendations:
        out.append(recommendations_block(report))
    table = checks_table(report, show_passed=verbose)
    if table.row_count:  # a header over no rows read as if the checks were lost
        out.append(table)
        note = folded_note(report) if folded_hint and not verbose else None
        if note is not None:
            out.append(note)
    missing = not_measured(report)
    if missing:
        t = Text("Not measured:", style="bold yellow")
        for line in missing:
            t.append("\n  " + line, style="yellow")
        out.append(t)
    from .slurm import slurm_lines

    # Commands (scontrol ...) and hostlists (sbatch -w ...) are copied into shells: one line each, never wrapped.
    slurm = [paste_line(line.strip(), indent="  " if line.startswith(" ") else "") for line in slurm_lines(report)]
    if slurm:
        out.append(Group(*slurm))
    if report.bench is not None:
        from .bench import bench_tables, summary_block

        if not rows_shown:
            out.append(bench_tables(report.bench))
        if report.extra.get("bench_summary"):
            # The gates' verdicts are rows of the checks table above: each check is printed once (issue 24).
            out.append(summary_block(report.extra["bench_summary"], (), report.extra.get("bench_stopped")))
    if report.links is not None:
        from .links import render_links

        out.extend(render_links(report.links, {n.node_rank: n.hostname for n in report.nodes}))
    return out


def _speed(mbps: object) -> str:
    """A link speed, or 'unknown' where sysfs gives none (virtual and loopback interfaces): '?' read as a fault."""
    text = format_mbps_link(mbps)
    return "unknown" if text == "?" else text


def _yn(v: object, yes: str = "on", no: str = "off") -> str:
    return "?" if v is None else (yes if v else no)


def gpu_health_tables(gh: object) -> list:
    """`env`: the gpu_health facts as read (docs/hardware.md says how each is judged): a row per GPU, then the node's
    NVSwitches, nouveau and the kernel log's window."""
    if not isinstance(gh, dict) or not (gh.get("gpus") or gh.get("pcie")):
        why = gh.get("unavailable") or gh.get("reason") if isinstance(gh, dict) else None
        return [Text(f"GPU health: {why}", style="dim")] if why else []
    pcie = {p.get("bus_id"): p for p in gh.get("pcie") or [] if isinstance(p, dict)}
    nvl = {x.get("bus_id"): x for x in (gh.get("nvlink") or {}).get("gpus") or [] if isinstance(x, dict)}
    t = Table(box=None, header_style="bold", title="GPU health", title_justify="left")
    for col in ("gpu", "bus id", "vbios", "persist", "mig", "ecc unc", "row remap", "clocks", "pcie", "nvlink",
                "fabric", "procs"):
        t.add_column(col)
    for g in gh.get("gpus") or []:
        bus = g.get("bus_id")
        p = pcie.get(bus) or {}
        rr = g.get("remapped_rows") if isinstance(g.get("remapped_rows"), dict) else None
        ecc = (g.get("ecc_uncorrected_volatile") or {}).get("total")
        link = nvl.get(bus) or {}
        fab = g.get("fabric") if isinstance(g.get("fabric"), dict) else {}
        mig = g.get("mig") if isinstance(g.get("mig"), dict) else None
        t.add_row(str(g.get("index")), str(bus), str(g.get("vbios") or "?"), _yn(g.get("persistence")),
                  "n/a" if mig is None else _yn(mig.get("current")), "?" if ecc is None else str(ecc),
                  "?" if rr is None else ("FAILED" if rr.get("failure") else "pending" if rr.get("pending")
                                          else f"{rr.get('correctable')}/{rr.get('uncorrectable')}"),
                  "?" if g.get("clock_event_reasons") is None else f"{g['clock_event_reasons']:#x}",
                  f"{p.get('gts')} GT/s x{p.get('width')} (max {p.get('max_gts')} x{p.get('max_width')})" if p else "?",
                  f"{link.get('up')}/{link.get('link_count')}" if link.get("link_count") else "none",
                  str(fab.get("state") or "n/a"), str(len(g["processes"])) if isinstance(g.get("processes"), list)
                  else "?")
    kl = gh.get("kernel_log") or {}
    events = kl.get("events") or []
    lines = [f"source {gh.get('source') or 'none'}" + (f" ({gh['reason']})" if gh.get("reason") else ""),
             f"NVSwitches {len(gh.get('nvswitches') or [])}, nouveau {_yn(gh.get('nouveau'), 'loaded', 'not loaded')}",
             *[f"GPU {u.get('index')} ({u.get('bus_id') or 'bus id unknown'}): counted by the driver, no handle "
               f"({u.get('state')})" for u in gh.get("unreachable") or [] if isinstance(u, dict)],
             *[f"GPU at {a.get('bus_id')}: on the PCI bus, not listed by the driver "
               f"({'driver ' + a['driver'] if a.get('driver') else 'no driver bound'})"
               for a in gh.get("absent") or [] if isinstance(a, dict)],
             *[f"GPU {g.get('index')} ({g.get('bus_id')}): reads answer "
               + ", ".join(sorted({str(v) for v in g['errors'].values()}))[:120]
               for g in gh.get("gpus") or [] if isinstance(g, dict) and isinstance(g.get("errors"), dict)
               and g["errors"]],
             ("kernel log: " + (f"{kl.get('source')}, {len(events)} kernel-log event(s) since "
                                f"{kl.get('covers_from_s') or 0:.0f} s after boot" if kl.get("readable")
                                else f"not readable: {kl.get('reason')}"))]
    return [t, Text("\n".join(lines), style="dim")]


def render_env(report: Report) -> list:
    """`ncclcheck env`: this node's facts as compact tables."""
    out: list = [header(report)]
    for node in report.nodes:
        f = node.facts
        host = f.get("host") or {}
        t = Table(title=f"node {node.node_rank}: {node.hostname}", box=None, show_header=False, title_justify="left")
        t.add_column("what", style="bold")
        t.add_column("value")
        v = f.get("versions") or {}
        t.add_row("versions", ", ".join(f"{k} {val}" for k, val in v.items() if val and k != "unavailable"))
        g = f.get("gpu") or {}
        t.add_row("gpus", f"{g.get('count', '?')} " + ", ".join(d.get("name", "?") for d in g.get("devices") or [])
                  if "unavailable" not in g else f"unavailable: {g['unavailable']}")
        if isinstance(host.get("shm"), dict) and "total_bytes" in host["shm"]:
            t.add_row("/dev/shm", format_bytes(host["shm"]["total_bytes"]))
        ml = host.get("memlock") or {}
        if isinstance(ml, dict) and "soft" in ml:
            t.add_row("memlock", "unlimited" if ml["soft"] is None else format_bytes(ml["soft"]))
        if host.get("port_range"):
            t.add_row("ephemeral ports", "-".join(str(x) for x in host["port_range"]))
        t.add_row("hostname", f"{host.get('hostname')} -> {', '.join(host.get('resolves_to') or []) or '?'}")
        route = f.get("route")
        if isinstance(route, dict) and route.get("interface"):
            t.add_row("route to master", f"{route.get('target')} via {route['interface']} from {route.get('source')}")
        code = f.get("code") or {}
        if code.get("hash"):
            t.add_row("code", code_text(code))
        out.append(t)
        ifs = f.get("interfaces")
        if isinstance(ifs, list):
            it = Table(box=None, header_style="bold")
            for col in ("interface", "kind", "state", "mtu", "speed", "addresses"):
                it.add_column(col)
            for i in ifs:
                state = "running" if i.get("running") else ("up" if i.get("up") else "down")
                addrs = [a["address"] for a in (i.get("ipv4") or []) + (i.get("ipv6") or [])]
                it.add_row(i["name"], str(i.get("kind")), state, str(i.get("mtu") or "?"),
                           _speed(i.get("speed_mbps")), ", ".join(addrs))
            out.append(it)
        out += gpu_health_tables(f.get("gpu_health"))
        rdma = f.get("rdma") or {}
        devs = rdma.get("devices") or []
        if devs:
            rt = Table(box=None, header_style="bold")
            for col in ("hca:port", "state", "phys", "rate", "link layer", "RoCE v2 GID", "fw", "board", "PCI",
                        "NUMA", "errors since driver load"):
                rt.add_column(col)
            counters = ((f.get("counters") or {}).get("last") or {}).get("ports") or {}
            for d in devs:
                pci = d.get("pci") or {}
                for p in d.get("ports") or []:
                    c = counters.get(f"{d['name']}/{p.get('port')}") or {}
                    errs = {**(c.get("counters") or {}), **(c.get("hw_counters") or {})}
                    rt.add_row(f"{d['name']}:{p.get('port')}", str(p.get("state")), str(p.get("phys_state")),
                               str(p.get("rate")), str(p.get("link_layer")), str(p.get("roce_v2_gid_index")),
                               str(d.get("fw_ver") or "?"), str(d.get("board_id") or "?"),
                               str(pci.get("bus_id") or "?"), str(d.get("numa_node") if d.get("numa_node") is not None
                                                                 else "?"),
                               ", ".join(f"{k} {v:,}" for k, v in errs.items() if v) or "none")
            out.append(rt)
            if "mlx5_core_version" in rdma:
                out.append(Text(f"mlx5_core (OFED): {rdma.get('mlx5_core_version') or 'inbox (no module version)'}",
                                style="dim"))
        gdr = f.get("gdr") or {}
        if isinstance(gdr.get("peer_memory"), dict):
            present = [n for n, x in gdr["peer_memory"].items() if isinstance(x, dict) and x.get("present")]
            mod = gdr.get("nvidia_module") or {}
            flavor = ("not loaded" if not mod.get("loaded") else "taint ?" if mod.get("taint") is None
                      else f"taint {mod.get('taint') or '(none)'}")
            module = "not loaded" if not mod.get("loaded") else f"{mod.get('version') or 'version ?'} {flavor}"
            out.append(Text(f"GPUDirect RDMA: peer memory {', '.join(present) or 'none'}; NVIDIA module "
                            f"{module}; kernel {gdr.get('kernel') or '?'} (not readable "
                            f"without CUDA: {'; '.join(gdr.get('not_read') or []) or '-'})", style="dim"))
        gpus = (f.get("pci") or {}).get("gpus") or []
        if gpus:
            gt = Table(box=None, header_style="bold")
            for col in ("GPU bus id", "root complex", "PCI path", "NUMA"):
                gt.add_column(col)
            for g in gpus:
                numa = (g.get("numa") or [None])[-1]
                gt.add_row(str(g.get("bus_id")), str(g.get("root") or "?"),
                           " > ".join(g.get("path") or []) or str(g.get("unavailable") or "?"),
                           "?" if numa is None else str(numa))
            out.append(gt)
        env = (f.get("env") or {}).get("vars") or {}
        if env:
            out.append(Text("environment: " + " ".join(assignment(k, v) for k, v in sorted(env.items())), style="dim"))
    return out
