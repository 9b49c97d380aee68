"""README.md and every docs/*.md render as a user reads them on GitHub: rendered with a CommonMark parser
(markdown-it-py, with GitHub's tables), no table row falls outside its table, every relative link and anchor
leads somewhere, and no page narrates how the project changed (the git log keeps that)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from markdown_it import MarkdownIt


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """The pages name hosts outside the lab (their links): no test of this file may look a name up or connect
    anywhere; any lookup or connect raises."""
    import socket

    def no_network(*a, **k):
        raise AssertionError(f"the docs check reached for the network: {a[:2]}")

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo",
                 "create_connection"):
        monkeypatch.setattr(socket, name, no_network)
    for name in ("connect", "connect_ex", "sendto", "sendmsg"):  # a datagram (a DNS query by hand) too
        monkeypatch.setattr(socket.socket, name, no_network)

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# The words of a page that tells how it used to be instead of what is true. The one list: a page in the present
# tense never needs them. (?i) where the case does not matter; each pattern matches within one line.
NARRATION = (
    r"(?i)\bbefore this\b",
    r"(?i)(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bbeing )(?<!\bwas )(?<!\bwere )\bused to\b",
    r"(?i)\bno longer\b",
    r"(?i)\bnow\b[^.;:]*\binstead\b",
    r"(?i)\b(is|are) now\b|\b(it|they|this|that|which|ncclcheck|diagnose|watch|bench|the \w+) now (?!on\b)[a-z]+s\b",
    r"(?i)\bon this tree\b",
    r"(?i)(^|[.;:(] *)before, ",
    r"(?i)\bany ?more\b(?! than)",
    r"(?i)\b(previously|formerly|until now|from now on)\b",
    r"(?i)\b(was|were|has been|have been) (fixed|changed|rewritten|replaced|removed|renamed)\b",
    r"(?i)\bthe old (code|wording|behaviour|behavior|output|line)\b",
    r"(?i)\bthis (round|change|fix|commit|branch)\b",
)
# A project log's marks: stop and issue numbers, commit ids, dates, earlier runs. docs/gpu.md is the dated record of
# what ran on which card, so it alone keeps dates and commits.
HISTORY = (r"\b[Ss]top \d+\b", r"\b[Ii]ssues? \d+\b", r"\bon [0-9a-f]{7,40}\b", r"\b20\d\d-\d\d-\d\d\b",
           r"\b[Ee]arlier (runs|tables)\b", r"\bmain \(?[0-9a-f]{7}\b", r"\bNOT HELD\b")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _prose_lines(tokens) -> set:
    """Line numbers (0-based) inside fenced or indented code: never prose, never a table."""
    out: set = set()
    for t in tokens:
        if t.type in ("fence", "code_block") and t.map:
            out.update(range(*t.map))
    return out


def _inline_text(token) -> str:
    return "".join(c.content for c in (token.children or []) if c.type in ("text", "code_inline", "html_inline"))


def slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to
    hyphens."""
    text = text.strip().lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(tokens) -> set:
    """Every heading's anchor on a page; a repeated heading gets -1, -2, ... as GitHub numbers them."""
    seen: dict = {}
    out = set()
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            base = slug(_inline_text(tokens[i + 1]))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def _links(tokens):
    for t in tokens:
        if t.type == "inline":
            for c in t.children or []:
                if c.type == "link_open":
                    yield t.map[0] + 1 if t.map else 0, c.attrs.get("href", "")


def stray_table_rows(text: str) -> list:
    """Lines that start with `|` but that the parser did not make part of a table (e.g. rows without a header,
    or glued to the paragraph or list item above them)."""
    tokens = _parser().parse(text)
    in_table: set = set()
    for t in tokens:
        if t.type == "table_open" and t.map:
            in_table.update(range(*t.map))
    code = _prose_lines(tokens)
    return [n + 1 for n, line in enumerate(text.splitlines())
            if line.lstrip().startswith("|") and n not in in_table and n not in code]


def dead_links(page: Path, text: str) -> list:
    tokens = _parser().parse(text)
    out = []
    for line, href in _links(tokens):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):  # http:, https:, mailto: never fetched (no network)
            continue
        path, _, frag = href.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            out.append(f"{line}: {href} (no such file)")
            continue
        if frag and target.suffix == ".md":
            known = anchors(tokens if not path else _parser().parse(target.read_text(encoding="utf-8")))
            if frag not in known:
                out.append(f"{line}: {href} (no heading with that anchor in {target.name})")
    return out


def narration(text: str, patterns=NARRATION) -> list:
    """Each paragraph, list item, heading or table cell matched whole (a phrase may wrap), code spans kept, fenced
    code left out; reported by its first line."""
    out = []
    for t in _parser().parse(text):
        if t.type == "inline":
            prose = " ".join(t.content.split())
            hits = [m.group(0) for p in patterns for m in [re.search(p, prose)] if m]
            if hits:
                out.append(f"{t.map[0] + 1 if t.map else '?'}: {hits} in: {prose[:160]}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_table_row_is_in_a_table(page):
    assert stray_table_rows(page.read_text(encoding="utf-8")) == [], page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_leads_somewhere(page):
    assert dead_links(page, page.read_text(encoding="utf-8")) == [], page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_says_what_is_true_now(page):
    text = page.read_text(encoding="utf-8")
    found = narration(text) + ([] if page.name == "gpu.md" else narration(text, HISTORY))
    assert found == [], f"{page.name}:\n" + "\n".join(found)


def test_the_checks_catch_what_they_exist_for(tmp_path):
    """Each check fails on the mistake it names, and passes its corrected form. A link with a scheme (here to
    loopback) is skipped by its scheme, never fetched; nothing in this file resolves or connects (_no_network)."""
    glued = "- a bullet\n| `a.b` | fail | words |\n| `a.c` | warn | more |\n"
    assert stray_table_rows(glued) == [2, 3]
    assert stray_table_rows("text\n\n| id | what |\n|---|---|\n| `a.b` | words |\n") == []
    assert stray_table_rows("```\n| not a row, code |\n```\n") == []

    (tmp_path / "b.md").write_text("# A heading: with `code`, and more\n## A heading: with `code`, and more\n")
    page = tmp_path / "a.md"
    page.write_text("x")
    good = ("[1](b.md) [2](b.md#a-heading-with-code-and-more) [3](b.md#a-heading-with-code-and-more-1) "
            "[4](#here) [5](https://127.0.0.1/x.md)\n\n## Here\n")
    assert dead_links(page, good) == []
    bad = "[1](c.md) [2](b.md#a-heading) [3](#nowhere)\n"
    assert [d.split(" ")[1] for d in dead_links(page, bad)] == ["c.md", "b.md#a-heading", "#nowhere"]

    said = ("Before this run it printed X.", "They used to read Y.", "It no longer hangs.", "It now names Z instead.",
            "On this tree it works.", "Before, watch named rank 0.", "The report now says so.", "It is now fast.")
    assert len(narration("\n\n".join(said))) == len(said)
    assert narration("The key is used to sign values.\nBefore the join, each node probes.\nIt names Z instead.\n"
                     "A link that was fine last week is slow now.\n\n```\nbefore this\n```\n") == []


def test_nothing_here_can_resolve_or_reach_a_host():
    """The guard itself (_no_network): a lookup, either way, a connect and a datagram each raise. Every target is
    loopback, asked numerically where the call allows it, so that were the guard to fail, nothing would leave the
    machine or reach its resolver: a closed loopback port refuses, "localhost" is /etc/hosts'."""
    import socket

    loop = ("127.0.0.1", _closed_port())
    numeric = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
    for call in (lambda: socket.getaddrinfo("localhost", loop[1]), lambda: socket.gethostbyname("localhost"),
                 lambda: socket.gethostbyaddr(loop[0]), lambda: socket.getnameinfo(loop, numeric),
                 lambda: socket.create_connection(loop, timeout=0.1)):
        with pytest.raises(AssertionError, match="reached for the network"):
            call()
    for kind, call in ((socket.SOCK_STREAM, lambda s: s.connect(loop)),
                       (socket.SOCK_DGRAM, lambda s: s.sendto(b"x", loop))):
        with socket.socket(socket.AF_INET, kind) as s, pytest.raises(AssertionError, match="reached for the"):
            call(s)


def _closed_port() -> int:
    """A loopback TCP port nothing listens on (bound, then closed: the kernel does not hand it out again at once)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The pages whose opening is not an example, and why: the rest open with the task and an example that runs
# (ncclcheck_lab/readme_examples.py's openings: the shell and Python blocks above a page's first `## ` heading)
NO_OPENING = {"gpu.md": "the record of what ran on a lent GPU, each step with its command (scripts/gpu_record.sh)",
              "development.md": "its first block is the test suite itself (its commands are each a test tier)"}


def test_every_docs_page_opens_with_an_example():
    from ncclcheck_lab import readme_examples as rx

    pages = dict(rx.openings())
    assert set(NO_OPENING) <= set(pages)
    missing = [name for name, found in pages.items() if not found and name not in NO_OPENING]
    assert not missing, f"these pages open with no example above their first '## ' heading: {missing}"
    # an opening that cannot run here says why (needs root and a lab: tests/lab runs it instead)
    assert all(e.skip is None or len(e.skip) > 20 for found in pages.values() for e in found)
    assert sum(1 for found in pages.values() for e in found if e.skip is None) >= 12


@pytest.mark.slow  # every page's opening, run as pasted in one directory: ~70 s (a slow job watched, two-node worlds)
def test_every_docs_pages_opening_runs_as_pasted():
    import subprocess
    import sys

    from tests.conftest import cli_env

    p = subprocess.run([sys.executable, str(REPO / "scripts" / "readme_examples.py"), "--openings"],
                       capture_output=True, text=True, env=cli_env(), timeout=900)
    assert p.returncode == 0 and ", 0 failed," in p.stdout, p.stdout[-6000:] + p.stderr[-2000:]
    assert "ok    docs/live.md:" in p.stdout and "ok    docs/trust.md:" in p.stdout, p.stdout[-3000:]
