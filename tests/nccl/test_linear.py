"""Patterns on a job's text are linear in the line and mean what they meant (nccl/linear.py, issue 45 item 1).

No `.*` inside a failure pattern (the regex that took 6.9 s on one 32 KiB line had one), every Then matches as the
regex it stands for, the rewritten classes still match what they did on 214d3a0 and the parser patterns match as
they did (the old patterns are kept as the reference), and classify's prefilter never hides a class a line
matches. Timings live in scripts/pattern_fuzz.py (tests/scripts/test_pattern_fuzz.py runs it small)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclcheck.nccl import debuglog, failures
from ncclcheck.nccl.linear import MAX_LINE_CHARS, Either, Then, _parse, _sre, leading, necessary
from ncclcheck_lab.pattern_fuzz import BEFORE, BEFORE_PARSER, pieces

FAST = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def _alternatives(pattern) -> list:
    return list(pattern.alternatives) if isinstance(pattern, Either) else [pattern]


def _regexes(pattern) -> list:
    out = []
    for alt in _alternatives(pattern):
        out += [alt.first, alt.then] if isinstance(alt, Then) else [alt]
    return out


def _any_star(items) -> bool:
    """Does the parsed regex hold an unbounded repeat of `.` (`.*`, `.+`, `.*?`)?"""
    for op, av in items:
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            lo, hi, sub = av
            if hi == _sre.MAXREPEAT and any(o is _sre.ANY for o, _ in sub):
                return True
            if _any_star(sub):
                return True
        elif op is _sre.SUBPATTERN and _any_star(av[-1]):
            return True
        elif op is _sre.BRANCH and any(_any_star(b) for b in av[1]):
            return True
    return False


def test_no_failure_pattern_holds_a_dot_star():
    """`.*` between two parts tries the rest of the line from every place the first part matches: Then(A, B)."""
    for name, pattern in [("ROUTINE", failures.ROUTINE), *((c.id, c.pattern) for c in failures.TABLE)]:
        for rx in _regexes(pattern):
            assert not _any_star(_parse.parse(rx.pattern, rx.flags)), f"{name}: {rx.pattern}"


def test_every_class_has_literals_to_prefilter_and_to_start_with():
    """A class with no literal would run on every line; one whose match may start anywhere would keep the log reader
    from reading an NCCL INFO message alone. A class h1 adds must keep both (say which line it needs, and how it
    starts)."""
    for c in failures.TABLE:
        assert necessary(c.pattern), c.id
        assert leading(c.pattern), c.id
    assert failures.LEADING and all(not re.search(r"\d", lit) for lit in failures.LITERALS + failures.LEADING)


def _lines(pattern):
    runs, chars = pieces(pattern)
    unit = st.sampled_from(runs + chars + [" ", "x", ":", "0", "\n", "K", "\u212a", "\u017f", "\u0130"])
    return st.lists(unit, max_size=24).map("".join)


def _all_lines():
    return st.one_of(*[_lines(c.pattern) for c in failures.TABLE], _lines(failures.ROUTINE))


# lines a row gave to a row that says them more exactly: ENOSPC with no shared memory on the line names no filesystem
# (issue 61, round 3 of the public threads: a full disk read as /dev/shm)
HANDED_ON = {"shm_exhausted": ("no_space",)}


@FAST
@given(_all_lines())
def test_each_rewritten_class_still_matches_what_it_did(line):
    """A row may learn new wording (issue 61: the programs' other versions); it never loses a line it matched on
    214d3a0, where its linear rewrite began."""
    for c in failures.TABLE:
        old = BEFORE.get(c.id)
        if old and re.search(old, line, re.IGNORECASE):
            assert c.pattern.search(line) or any(failures.BY_ID[k].pattern.search(line)
                                                 for k in HANDED_ON.get(c.id, ())), (c.id, line)
    if re.search(BEFORE["ROUTINE"], line, re.IGNORECASE):
        assert failures.ROUTINE.search(line), line


@FAST
@given(_all_lines())
def test_every_then_matches_as_its_regex(line):
    for p in (failures.ROUTINE, debuglog._INIT_COMPLETE, *(c.pattern for c in failures.TABLE)):
        for alt in _alternatives(p):
            if isinstance(alt, Then):
                assert bool(alt.search(line)) == bool(re.search(alt.pattern, line, alt.first.flags)), (alt.pattern,
                                                                                                        line)


@FAST
@given(_all_lines(), st.integers(0, 3))
def test_the_prefilter_never_hides_a_class(line, pad):
    """classify (a class tried only on a line holding its literals, case folded) names what trying ROUTINE and then
    every class on the cut line names: Unicode that folds onto ASCII (the Kelvin sign, the long s) included."""
    line = " " * pad + line
    cut = line[:MAX_LINE_CHARS]
    assert failures.classify(line) is failures.classify_every_row(cut)


def _parser_lines():
    words = ["Channel ", "00/0", " : ", "1[1]", " -> ", "2[0]", " [send]", " via ", "NET/IB/0", "P2P/IPC",
             "[0]eth0:10.0.0.1<0>", "[1]", "ib0", ":", "fe80::1%ib0", "<0>", " coll channels", "64", "NCCL_", "X",
             " set by environment to ", "eth0", "rank 3 nranks 16 ", "Init COMPLETE", " ", "x"]
    return st.lists(st.sampled_from(words), max_size=20).map("".join)


@FAST
@given(_parser_lines())
def test_the_parsers_bounded_patterns_read_real_shapes_as_before(line):
    """The parser's runs are bounded and start once per run; on NCCL's own shapes they read what they did."""
    for name, old in BEFORE_PARSER.items():
        mod, attr = name.split(".")
        if mod != "debuglog":
            continue
        new = getattr(debuglog, attr)
        if attr == "_ENV":
            m = re.search(old, line)
            assert debuglog.env_of(line) == (m.groups() if m else None), line
        elif attr == "_INIT_COMPLETE":
            m = re.search(old, line, re.IGNORECASE)
            assert bool(new.search(line)) == bool(m), line
            if m:
                assert debuglog._INIT_HEAD.search(line).group(2) == m.group(2)
        elif attr == "_IF_ITEM":
            assert new.findall(line) == re.findall(old, line), line
        else:
            m = re.search(old, line)
            got = new.search(line)
            assert (got.groups() if got else None) == (m.groups() if m else None), (attr, line)
