"""What one row of the failure table is (nccl/failures.py assembles the rows of failures_nccl.py, failures_torch.py and
failures_jobs.py): a class of message a program prints when a job fails, the pattern that finds it in a line, and what
it means for the user.

Each row says its role:
- a CAUSE says what is wrong (fix it first): "Duplicate GPU detected", "Unable to find address for: ib0";
- a CONSEQUENCE shows that the job failed but points elsewhere (a peer closed its socket, NCCL's watchdog timed out,
  torch's wrapper "NCCL error in: ...", an NCCL warning no row knows): never the root cause where a cause is found;
  without one, the job "failed, the cause is not in this text" and the consequences are what it quotes;
- ROUTINE lines are printed by healthy jobs (a plugin not found, a store poll, a retry that later succeeds): never a
  failure, whatever words they share with one.

`level` orders rows that could match one line: a row that reads the line's own words (the CUDA error string, the file
that failed) comes before the row of its family ("Cuda failure 'out of memory'" is an out-of-memory, not a GPU fault),
and a generic row (any NCCL WARN) comes last. Pure data.

A number a row needs is written with `num` (a lookahead and `\\d`), never as literal digits: the log reader remembers
what an NCCL INFO message may match per message with its digits read as 0, so no literal the prefilter reads may hold
one (tests/nccl/test_linear.py); the regex parser folds a group of one literal back into the run, a lookahead it
keeps apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# levels: the lowest level whose row matches a line classifies it
SPECIFIC = 0  # reads the line's own words within a family (the CUDA error string, the transport file)
CAUSE = 1  # a class of cause
CONSEQUENCE = 2  # a failure reported from elsewhere
GENERIC = 3  # any line of a kind (any NCCL WARN, any "NCCL error in:") that no row above knows


@dataclass(frozen=True)
class FailureClass:
    id: str
    pattern: object  # a compiled regex, a Then or an Either: anything with .search(line) (nccl/linear.py)
    cause: bool  # True: a cause to fix; False: a consequence (or a symptom) of a failure said elsewhere
    what: str  # one line a person reads
    fix: str
    names_ranks: Optional[re.Pattern] = None  # the ranks the message names as involved (each group one rank number)
    level: int = CAUSE
    source: str = ""  # where the program prints it (the source file of its format string), for a reader of the table
    about: Optional[re.Pattern] = None  # the ranks the message is about (not among its printers: "Rank 2 failed to ..")
    # lines of the class that say something narrower than `what`, each with its own words ((pattern, what), first
    # match wins): a line is described as what it is wherever it is quoted; the class (and every verdict read from
    # it) stays the row's
    variants: tuple = ()


def num(digits: str) -> str:
    """The regex of exactly this number, written so that no literal of the row holds a digit: num("9") matches the 9
    of "exitcode: -9)" and not of "-91"."""
    return rf"(?={digits}(?!\d))\d{{{len(digits)}}}"


def rx(text: str) -> re.Pattern:
    return re.compile(text, re.IGNORECASE)


def cause(id: str, pattern, what: str, fix: str, level: int = CAUSE, source: str = "",
          names_ranks: Optional[re.Pattern] = None, about: Optional[re.Pattern] = None) -> FailureClass:
    return FailureClass(id, pattern, True, what, fix, names_ranks, level, source, about)


def consequence(id: str, pattern, what: str, fix: str, level: int = CONSEQUENCE, source: str = "",
                variants: tuple = ()) -> FailureClass:
    return FailureClass(id, pattern, False, what, fix, None, level, source, variants=variants)


def what_of(cls: FailureClass, line: str) -> str:
    """What this line of the class says, in a person's words: its variant's when one matches, else the class's."""
    return next((what for pattern, what in cls.variants if pattern.search(line)), cls.what)
