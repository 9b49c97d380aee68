"""Patterns that run on untrusted text in time linear in its length: the line bound every pattern runs under, `Then`
(the `A.*B` of a regex without its backtracking), and the literals a pattern cannot match without (a prefilter a line
passes through before any pattern runs on it).

Why: Python's `re` backtracks. `A.*B` searched on a line holding A many times and no B tries every A and scans the
rest of the line from each: a line of `shm ` repeated 32,768 times took 6.9 s for one pattern (issue 45). Every
pattern on a log line, a launcher's output or a file's text is therefore either free of `.*` and of unbounded runs
that can restart at every position, or written as `Then(A, B)`, and sees at most MAX_LINE_CHARS characters of a line.
scripts/pattern_fuzz.py measures every one on long and adversarial lines (seconds per MiB, docs/trust.md).
Pure: strings in, matches out.
"""

from __future__ import annotations

import re
from typing import Optional

try:  # Python 3.11+
    from re import _constants as _sre
    from re import _parser as _parse
except ImportError:  # 3.9, 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _parse  # type: ignore[no-redef]

# A line is cut here before any pattern sees it. NCCL cuts its own lines at 1,024 characters (src/debug.cc's buffer);
# torch's longest one-line messages (the watchdog's WorkNCCL(...) description) are a few hundred; the longest real
# lines (a ring's rank list: "Channel 00/32 : 0 1 2 ... 16383") carry nothing a verdict reads.
MAX_LINE_CHARS = 4096


class Then:
    """`first` and, later on the same line, `then`: what the regex `first.*then` matches, in one pass.

    The regex tries `.*` from every place `first` matches and scans the rest of the line from each (quadratic in the
    line); here the first match of `first` on a line is the only one tried, which gives the same answer when the
    leftmost match of `first` also ends first (literal alternatives none of which contains another, or a literal
    followed by classes that stop at the next literal). tests/nccl/test_linear.py holds each use to its regex."""

    def __init__(self, first: str, then: str, flags: int = re.IGNORECASE):
        self.first = re.compile(first, flags)
        self.then = re.compile(then, flags)
        self.pattern = f"(?:{first}).*(?:{then})"  # the regex it stands for (tests compare the two)

    def search(self, text: str, pos: int = 0) -> Optional[re.Match]:
        while pos <= len(text):
            m = self.first.search(text, pos)
            if m is None:
                return None
            end = text.find("\n", m.end())
            end = len(text) if end < 0 else end
            hit = self.then.search(text, m.end(), end)
            if hit is not None:
                return hit
            pos = end + 1  # no later `first` on this line ends earlier: the next line
        return None


class Either:
    """The first of several patterns (regexes or Then) that matches: a regex's `|` over alternatives each of which is
    linear on its own. Only whether one matches is used (classify); the leftmost match is returned."""

    def __init__(self, *alternatives):
        self.alternatives = alternatives
        self.pattern = "|".join(f"(?:{a.pattern})" for a in alternatives)

    def search(self, text: str, pos: int = 0) -> Optional[re.Match]:
        hits = [m for m in (a.search(text, pos) for a in self.alternatives) if m is not None]
        return min(hits, key=lambda m: m.start()) if hits else None


def start_of(pattern, text: str) -> Optional[int]:
    """Where the whole match of `pattern` (a regex, a Then or an Either) starts in text, or None: a Then's match is
    its `then` part, its whole one starts where its `first` did."""
    if isinstance(pattern, Then):
        return pattern.first.search(text).start() if pattern.search(text) is not None else None
    if isinstance(pattern, Either):
        got = [k for k in (start_of(a, text) for a in pattern.alternatives) if k is not None]
        return min(got) if got else None
    m = pattern.search(text)
    return m.start() if m else None


def fold(line: str) -> Optional[str]:
    """The line as the prefilter compares it (lower case), or None when it is not ASCII: case-insensitive matching
    folds some non-ASCII characters onto ASCII letters (the Kelvin sign onto k), so such a line skips the
    prefilter and meets every pattern."""
    return line.lower() if line.isascii() else None


# ---------------------------------------------------------------------------------------------------------------
# necessary literals: a set of strings one of which every match contains (lower case), read from the parsed pattern


def requirements(pattern) -> list:
    """What every match of `pattern` contains: a list of sets of strings (lower case), one string of EACH set in every
    match ([] when nothing is known). A regex is read from its parse; a Then needs both its parts'; an Either one of
    its alternatives' (the union of each one's best set)."""
    if isinstance(pattern, Then):
        return requirements(pattern.first) + requirements(pattern.then)
    if isinstance(pattern, Either):
        bests = [_best(requirements(a)) for a in pattern.alternatives]
        return [] if any(b is None for b in bests) else [frozenset().union(*bests)]
    return _seq(_parse.parse(pattern.pattern, pattern.flags))


def necessary(pattern) -> Optional[frozenset]:
    """The one set of strings (lower case) that ordinary text holds least often, one of which every match of `pattern`
    contains; None when there is none (a pattern that can match without any literal)."""
    return _best(requirements(pattern))


def _best(sets: list) -> Optional[frozenset]:
    """The set whose shortest string is longest (fewest strings on a tie): the one ordinary text holds least often."""
    return max(sets, key=lambda s: (min(map(len, s)), -len(s))) if sets else None


def _seq(items) -> list:
    """A sequence: each run of literals is one requirement (zero-width assertions do not break a run), each complex
    item adds its own; all of them are in every match."""
    out, run = [], []
    for op, av in items:
        if op is _sre.LITERAL:
            run.append(chr(av).lower())
            continue
        if op is _sre.AT:
            continue
        if run:
            out.append(frozenset(["".join(run)]))
            run = []
        out.extend(_node(op, av))
    if run:
        out.append(frozenset(["".join(run)]))
    return out


def _node(op, av) -> list:
    if op is _sre.SUBPATTERN:
        return _seq(av[-1])
    if op is _sre.BRANCH:
        bests = [_best(_seq(b)) for b in av[1]]
        return [] if any(b is None for b in bests) else [frozenset().union(*bests)]
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) or op is getattr(_sre, "POSSESSIVE_REPEAT", None):
        return _seq(av[2]) if av[0] >= 1 else []
    if op is getattr(_sre, "ATOMIC_GROUP", None):
        return _seq(av)
    if op is _sre.IN and all(o is _sre.LITERAL for o, _ in av):  # [Ss]: each of its characters
        return [frozenset(chr(c).lower() for _, c in av)]
    return []


def leading(pattern) -> Optional[frozenset]:
    """The literals (lower case) a match of `pattern` starts with, one per alternative, or None when some alternative
    starts otherwise. A line whose start holds none of them cannot hold a match that begins before it: the log reader
    classifies an NCCL INFO line by its message alone when its header holds none."""
    if isinstance(pattern, Then):
        return leading(pattern.first)
    if isinstance(pattern, Either):
        parts = [leading(a) for a in pattern.alternatives]
        return None if any(p is None for p in parts) else frozenset().union(*parts)
    return _leading(list(_parse.parse(pattern.pattern, pattern.flags)))


def _leading(items: list) -> Optional[frozenset]:
    run = []
    for op, av in items:
        if op is _sre.AT and not run:  # \b or ^ before the first literal
            continue
        if op is _sre.LITERAL:
            run.append(chr(av).lower())
            continue
        if not run and op is _sre.BRANCH:
            parts = [_leading(list(b)) for b in av[1]]
            return None if any(p is None for p in parts) else frozenset().union(*parts)
        if not run and op is _sre.SUBPATTERN:
            return _leading(list(av[-1]))
        break
    return frozenset(["".join(run)]) if run else None


class Prefilter:
    """Which of several patterns a line can match: a pattern runs only on a line that holds a string of each of its
    requirements (a pattern with none always runs). `literals` are the best set of each pattern: a line holding none
    of them matches no pattern (how the log reader passes over an NCCL INFO line at the cost of a dict lookup)."""

    def __init__(self, patterns):
        self.patterns = list(patterns)
        self.needs = [requirements(p) for p in self.patterns]
        self.always = not all(self.needs)
        self.literals = tuple(sorted({lit for n in self.needs if n for lit in _best(n)}))
        self.rx = literal_rx(self.literals)
        self._by_literal: dict = {}  # literal of a best set -> the patterns it may let through
        for i, need in enumerate(self.needs):
            for lit in _best(need) if need else ():
                self._by_literal.setdefault(lit, set()).add(i)
        self._free = {i for i, need in enumerate(self.needs) if not need}

    def candidates(self, line: str, low: Optional[str] = "") -> list:
        """Indices of the patterns that can match `line` (`low`: fold(line), when the caller has it), in order."""
        low = fold(line) if low == "" else low
        if low is None:
            return list(range(len(self.patterns)))
        if not self.always and not self.rx.search(low):
            return []
        maybe = set(self._free)
        for lit in self.literals:
            if lit in low:
                maybe |= self._by_literal[lit]
        return [i for i in sorted(maybe) if all(any(s in low for s in one) for one in self.needs[i])]


def literal_rx(literals) -> re.Pattern:
    """One regex finding any of `literals` in folded text: a literal alternation searched in one pass is ten times
    faster here than a test per literal (and matches nothing when there are none)."""
    return re.compile("|".join(re.escape(lit) for lit in sorted(literals, key=len, reverse=True)) or r"(?!)")
