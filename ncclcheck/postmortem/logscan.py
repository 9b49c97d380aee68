"""One text log read in one pass with bounded memory: what postmortem/analyze.py's `_logs` needs of it, and nothing
else kept. A log is whatever a job printed (a 16,384-rank job's NCCL_DEBUG=INFO output is gigabytes), so:

- the bytes stream through in chunks; a line is cut at MAX_LINE_CHARS (with a mark saying how much) before anything
  reads it;
- an NCCL INFO line ("host:pid:tid [dev] NCCL INFO msg") costs two dict lookups: what its header says is remembered
  per header, what its message says per message. A message holding none of the literals any pattern needs
  (nccl/failures.py's classes, the NCCL_DEBUG parser's lines, the launchers' tables) is passed over; one that the
  parser reads ("Channel .. via ..", "NCCL version") is fed to its process's state; one that states a rank is read
  once per process. A message is read alone only when its header cannot hold the start of any match (no literal any
  pattern starts with): then the line and the message match the same patterns;
- every other line goes the full way, as analyze.py read a whole text before: ncclcheck's own output blanked, the
  launcher's rank prefix split off, NCCL's header read, the line classified.

What is kept, per source (a launcher prefix's rank, an NCCL process's host and pid, or neither): the first line and
header, NCCL's facts (nccl/debuglog.py's mergeable state), and the lines `_logs` reads (a classified line, a line
ending a traceback with the line that opened it, the lines after a PreflightFailed line), at most KEEP_PER_KEY per
source and class. At the end, sources become ranks as split_by_rank made them (an unprefixed NCCL process is the rank
its init line states), so `_logs` sees per rank, in file order, every line it would have acted on. Two things are
followed within a source rather than within a rank, where one rank's lines come from two sources: a traceback (its
exception line ends it when the same source printed both: Python prints them together), and the lines after a
PreflightFailed line (the next FOLLOW_LINES of the file, and the next two of its source).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Optional

from ..clean import clean_log_text
from ..nccl import endings, failures
from ..nccl.debuglog import (
    PARSE_LITERALS,
    RANK_LITERALS,
    VIA_LITERALS,
    NcclDebugState,
    nccl_header,
    rank_of_line,
    split_prefix,
    via_of,
)
from ..nccl.failclass import GENERIC
from ..nccl.linear import MAX_LINE_CHARS, fold, literal_rx
from ..nccl.prefixes import peel_host, peel_spans
from ..render import words
from . import launcher, stacks
from .bound import clip

KEEP_PER_KEY = 16  # lines kept per source and class: `_logs` names the first of each (class, rank)
FOLLOW_LINES = 16  # lines kept after a PreflightFailed line (the guard's first failing check is the next one)
TABLE_FOLLOW = 4  # lines kept after mpirun's "The first process to do so was:" (its name and code follow)
TABLE_TRACEBACK = 200  # lines kept after torchrun's table's "traceback :" (a rank's traceback from its error file)
KNOWN_LINES = 20_000  # an NCCL line among the first of these, or a rank prefix among the last, makes a text a log
MAX_MEMO = 1 << 16  # headers and messages remembered; past it the memo starts again
MAX_KEPT_CHARS = 64 << 20  # characters of kept lines, all logs together
MAX_SOURCES = 1 << 17  # sources, all logs together (a 16,384-rank job has 16,384 NCCL processes)
MAX_HEAD = 200  # characters before " NCCL INFO " in a line the fast way reads

# ncclcheck's own console report inside a job's output (the guard prints it on rank 0): from its header line to its
# summary line. Its rows quote what it found ("No route to host" in a probe's detail): never a cause of the job's.
_OWN_HEAD = re.compile(words.HEADER_LINE)
_OWN_END = re.compile(r"^(?:PASS|WARN|FAIL|ERROR)\s+\d+ passed, \d+ warnings?, \d+ failed")
# the guard's one-line report (render/console.one_line_verdict): its header and its verdict on one line, a whole
# report: the lines after it are the job's (read as a report's start, it hid the job's tracebacks that followed)
_OWN_ONE = re.compile(r": (?:PASS|WARN|FAIL|ERROR) \(\d+ passed, \d+ warnings?, \d+ skipped in ")
_OWN_LINE = re.compile(r"^ncclcheck[ .:]")
_OWN_TAIL = re.compile(r"^(?:root cause on node \d+:|root cause: |fix: )")
_OWN_TABLE = re.compile(r"^status\s{2,}check\s")  # render/console.py's table header
# a row ("FAIL    postmortem.root_cause  all  ..."), a row's continuation or a section's line (indented), an empty line,
# a section's title
_OWN_ROW = re.compile(r"^(?:(?:pass|warn|fail|skip|error|info|PASS|WARN|FAIL|ERROR)\s{2,}\S|\s|$|"
                      r"Recommended environment|why:)")
OWN_BLOCK_LINES = 5000  # a report longer than this is not one report: stop skipping
# a Python traceback: its first line, and the exception line that ends it (analyze.py's _exceptions reads them)
TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Interrupt))(?::|$)")

# a row of nccl-tests' table: size, count, type, redop, root, then the figures
_TESTS_ROW = re.compile(r"^\s{0,16}\d{1,14}\s{1,16}\d{1,14}\s{1,16}[a-z][a-z0-9_]{1,15}\s{1,16}\w{1,8}\s{1,16}-?\d")
# a line a terminal or a web page wraps is at least this long; a line that starts a record of its own (an NCCL header,
# a traceback, a frame, a launcher's table) is never the rest of one
WRAP_MIN = 60
_STARTS_ITS_OWN = re.compile(r"[\w.-]{1,255}:\d{1,10}:\d{1,10} \[\d|\s*(?:Traceback|File \"|frame #|During handling)|"
                             r"[=-]{3}|\s*\[\d{1,7}\]:|[A-Za-z_][\w.]{0,200}(?:Error|Exception|Warning)\b|"
                             r"\[[IWEF]\d{0,4}[ \]]|[IWEF]\d{4} |\S{1,40}: (?:error|warning)|"
                             # Python logging's default format ("WARNING:torch.distributed.elastic...:message")
                             r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]{1,200}:")


def wraps(rest: str, raw: str, cls) -> bool:
    """Could this line (`rest`: without its prefix) be the first part of a line a terminal or a web page wrapped? Long,
    no class of its own, not a Python exception's line (its message's own next lines are read by postmortem/analyze.py),
    not an NCCL INFO line (read the fast way, and holding no cause), not ending a sentence."""
    return ((cls is None or cls.level >= GENERIC) and rest and len(raw) >= WRAP_MIN and SEP not in raw
            and not _ends_sentence(raw) and not RAISED.match(rest))


def _ends_sentence(raw: str) -> bool:
    return raw.rstrip().endswith((".", ":", ")"))


def unwrapped(first: tuple, raw: str, alone) -> tuple:
    """(rank, line, class) of the line after a wrap's first part (`first`: its rank and text): when it carries no prefix
    and starts no record of its own and the two read as one (cut mid-word, or at a space) name a class, that line;
    else this line as it is (`alone`: its own class). A line with a class of its own that starts as a sentence does
    (a capital, at the margin: a progress bar's next redraw) is its own line, not the rest of the one before."""
    if alone is not None and alone.level < GENERIC and raw[:1].isupper():
        return None, raw, alone
    if raw.strip() and not _STARTS_ITS_OWN.match(raw):
        prank, text = first
        for joined in (f"{text} {raw.lstrip()}", text + raw):
            cls = failures.classify(joined)
            if cls is not None and cls.level < GENERIC:
                return prank, joined, cls
    return None, raw, alone


def goes_on(raw: str, before: int) -> bool:
    """Does this part of a wrapped line look cut, so the next line may be its rest? Long, and not ending a sentence or
    as wide as the part before it (`before`: its length; a fixed-width cut may fall after any character, "198.18.")."""
    return len(raw) >= WRAP_MIN and (not _ends_sentence(raw) or len(raw) + 2 >= before)


def continues(raw: str) -> bool:
    """Can this line be the rest of a wrapped line (no record of its own starts here, no exception's line)?"""
    return bool(raw.strip()) and not _STARTS_ITS_OWN.match(raw) and not RAISED.match(raw.strip())


# the lines a wrap that was read as one may go on over (a fixed-width terminal or collector cut a long message into
# several): the rest is appended to the line kept for it
WRAP_MAX_LINES = 8
SEP = " NCCL INFO "
_FAST_HEAD = re.compile(r"([\w.-]+):(\d+):(\d+) \[(\d+)\]")  # nccl_header's fields, no timestamp
_MPI_FIRST = "The first process to do so was:"
_TABLE_MARKS = ("Failures:", "exitcode", launcher.ROOT_CAUSE, "srun: error:", _MPI_FIRST, *launcher.MPI_MARKS,
                *launcher.STOP_MARKS)
# a message holding one of these goes the full way (lower case): a launcher's table, the guard's failure
_STRICT = ("preflightfailed", *(m.lower() for m in _TABLE_MARKS))
# a message whose failure class is read from it alone needs a header without what any match starts with
_BY_MESSAGE = failures.LEADING is not None
# a header holding one of these goes the full way: the start of a match, or a literal something needs
_HEAD_LITERALS = tuple(sorted({*failures.LITERALS, *(failures.LEADING or ()), *PARSE_LITERALS, *RANK_LITERALS,
                               *VIA_LITERALS, *_STRICT}))
# a literal that starts inside " NCCL INFO " and ends in the message: the message starts with its rest
_SPANS = tuple(lit[k:] for lit in _HEAD_LITERALS for k in range(1, len(lit)) if SEP.lower().endswith(lit[:k]))
# the fast way is exact only when no literal holds the whole separator or sits inside it (none does: tests)
FAST = not any(SEP.lower().strip() in lit or lit in SEP.lower() for lit in _HEAD_LITERALS)
# a line holding none of these is read only for where it starts: no class, parser or table reads it, and (with no
# ":" and not starting like a launcher prefix or a table rule) it is not a traceback's, ncclcheck's or a table's
# where a rank says it will connect: a name resolution failing after it names no host, this line does (torchelastic's
# etcd rendezvous: "Rank %d will conenct to TCPStore server at %s:%d", its own spelling; c10d's "connect to [%s]:%d")
_TARGET = re.compile(r"\b(?:connect|conenct)(?:ing)? to (?:the )?(?:TCPStore server at |host |server at |master at )?"
                     r"\[?([A-Za-z][\w.-]{0,252})\]?:(\d{1,5})\b", re.IGNORECASE)
_PLAIN = literal_rx({*_HEAD_LITERALS, "nccl", "traceback", "error", "exception", "failed", "interrupt", "conenct to",
                     *launcher.OWN_LITERALS, *launcher.STATES_WORLD, launcher.STATES_RAY})
# a line holding one of these may show where the job got to (nccl/endings.py): read for that, never classified; a
# training step's words (_STEP_RX) only until its source's first step
_SIGNS_RX, _OTHER_SIGNS_RX, _STEP_RX = (literal_rx(x) for x in (endings.LITERALS, endings.OTHER_LITERALS,
                                                                  endings.STEP_LITERALS))
# a line starting so may carry a prefix naming a rank or a host (Ray's and SkyPilot's "(... ip=198.18.0.2) " hold no
# colon)
_PREFIX_STARTS = "[(0123456789 \t\r\x0b\x0c\x1c\x1d\x1e\x1f"
_HEAD_RX, _ANY, _STRICT_RX, _TABLE_RX, _RANK_RX, _PARSE_RX, _VIA_RX = (literal_rx(x) for x in (
    _HEAD_LITERALS, set(_HEAD_LITERALS) - set(VIA_LITERALS), _STRICT, failures.LITERALS, RANK_LITERALS,
    PARSE_LITERALS, VIA_LITERALS))
# What a message says: (go the full way, states a rank, feeds the parser, (channel, via) or None); QUIET: nothing
QUIET = (False, False, False, None)
SLOW = (True, False, False, None)


_ZEROS = bytes.maketrans(b"0123456789", b"0000000000")


def _without_digits(literals) -> set:
    """Of each literal, its longest run without a digit: a line holding the literal holds that run whatever digits
    it has ("out of bounds values : 0 ok": "out of bounds values : ")."""
    return {max(re.split(r"\d+", lit), key=len) for lit in literals}


# A line's shape is the line with its digits read as 0; every pattern the full way reads a plain line with (its
# prefixes, a table row, a traceback's start, a program's shape) reads a digit as any digit, and every literal
# below holds none (tests/postmortem/test_logscan.py), so a line's shape decides what the full way does with it, but
# for the values its digits spell (a rank, a host name)
_SHAPE_SIGNS_RX = literal_rx(_without_digits(endings.OTHER_LITERALS))
_DIGIT_FREE = not any(c.isdigit() for lit in (*_HEAD_LITERALS, *endings.STEP_LITERALS, *launcher.OWN_LITERALS,
                                              *launcher.STATES_WORLD, launcher.STATES_RAY) for c in lit)


_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines ends a line at, but for "\n"
# A shape's translation that also reads as NUL each ASCII byte that makes a read go the way of text: what clean_log_text
# drops and what str.splitlines ends a line at, but for "\n"
_SHAPE_OR_STOP = bytes(0 if c in (*range(0x09), *range(0x0b, 0x20), 0x7f) else 0x30 if 0x30 <= c <= 0x39 else c
                       for c in range(256))


def _shapes(text: str, count: int) -> list:
    """Each line's shape (its bytes, every digit read as 0), in the order text.splitlines() gives the lines: split
    at "\n" where no other line end is in the text (a digit is no line end, and UTF-8 holds no "\n" inside a
    character), else as str.splitlines splits."""
    data = text.encode("utf-8", "surrogatepass").translate(_ZEROS)
    if any(c in text for c in _BREAKS):
        return data.decode("utf-8", "surrogatepass").splitlines()
    shapes = data.split(b"\n")
    if len(shapes) > count:  # the empty piece after a last "\n"
        shapes.pop()
    return shapes


class _Template:
    """What the full way does with every line of one shape (the line with its digits read as 0) that holds nothing
    any pattern reads: it names its source (the rank and host its prefix spells, at these spans) and nothing else.
    Lines of a training loop ("[rank3]:[2026-11-28 10:00:01,123] step 1234 | loss 2.3456") are nearly all such: a
    whole job's log is read at a dict lookup per line, each shape once the full way."""
    __slots__ = ("rank", "host", "pos", "step", "wraps", "ray", "text", "program", "state")

    def __init__(self, rank, host, pos: int, step: bool, wraps: bool, ray: bool, text: bool, program: bool,
                 state: bool):
        self.rank, self.host, self.pos = rank, host, pos  # spans of the rank's digits and the host's name, the rest
        self.step = step  # holds a training step's words: read the full way until its source's first step
        self.wraps = wraps  # long and not ending a sentence: the next line may be its rest (a wrap's first part)
        self.ray = ray  # starts with a Ray worker's prefix: its rank is Ray's table's, read the full way
        self.text = text  # holds more than white space
        self.program = program  # in a program's own shape (endings.from_a_program): the log is a program's
        self.state = state  # the full way gives its source NCCL's parser state (empty: its words hold nothing)


RETRIES_AT_END = 3  # NCCL's connect retries a text must end inside to stop there (one or two are routine)
RETRY_GAP = 2  # lines of other ranks (or blank) a run of retries may have between two of its lines
RUN_KEY = 16  # characters of a line's start its run key keeps as they are ("[rank12345]:", "[1,1234]<stderr>:")
MIN_RUN = 64  # a chunk of fewer lines is read one line at a time
_RUN_HEAD = itemgetter(slice(RUN_KEY))  # a line's run key's start (a map of it is faster than a comprehension)
RUN_WINDOW = 1024  # lines of a chunk whose runs are looked up at once
BYTES_MIN = 1 << 14  # characters of a read from which its whole lines are split as bytes


class _Run:
    """A line's start and shape seen as a prefixed line that holds nothing to read: its source, its rank or None,
    whether it may be a wrap's first part, where its rest starts."""
    __slots__ = ("src", "rank", "ranked", "text", "wraps", "pos", "program")

    def __init__(self, src, rank: Optional[int], t: _Template):
        self.src, self.rank, self.ranked, self.text, self.wraps, self.pos = (src, rank, rank is not None, t.text,
                                                                              t.wraps, t.pos)
        self.program = t.program


def _template(raw: str):
    """The line's _Template, or False when the full way may do more with a line of its shape (a pattern's literal in
    the rank's words, an end or phase sign, the start of a traceback, a table row, ncclcheck's own line, an NCCL
    header, nccl-tests' output, a line too long or not ASCII). A literal in the prefix alone ("rank" of "[rank3]:")
    makes the full way feed the rank's words to NCCL's parser, which finds nothing in them: `state` says so."""
    if len(raw) > MAX_LINE_CHARS or not raw.isascii():
        return False
    rank, host, pos = peel_spans(raw)
    rest = raw[pos:]
    low, rlow = raw.lower(), rest.lower()
    if _PLAIN.search(rlow) or _SHAPE_SIGNS_RX.search(rlow):
        return False
    state = bool(rest) and _PLAIN.search(low) is not None
    if state and (rank is None or "nccl" in low or any(m in raw for m in _TABLE_MARKS)
                  or launcher.world_stated(rest) or failures.classify(rest) is not None):
        return False
    if (rest.startswith("#") or _line_start_matters(rest) or launcher.record_line(rest) or nccl_header(rest)
            or failures.LAST_ERROR.search(rest)):
        return False
    return _Template(rank, host, pos, bool(_STEP_RX.search(rlow)), wraps(rest, raw, None),
                     rank is None and launcher.ray_pid(raw) is not None, bool(raw.strip()),
                     endings.from_a_program(rest), state)


def _shape(msg: str) -> tuple:
    """(go the full way, a failure class may match, states a rank, feeds the parser more than a transport, a
    transport line): the same for every message that differs only in its digits (no literal holds a digit, no
    pattern a digit of its own but ib_completion_error's status 12, which `table` leaves to classify)."""
    low = fold(msg)
    if low is None or low.startswith(_SPANS):
        return True, False, False, False, False
    if not _ANY.search(low):  # at most a transport ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read")
        return False, False, False, False, bool(_VIA_RX.search(low) and via_of(msg))
    table = _TABLE_RX.search(low) is not None
    if _STRICT_RX.search(low) or (table and not _BY_MESSAGE):
        return True, False, False, False, False
    rank = _RANK_RX.search(low) is not None and rank_of_line(msg) is not None
    feed, via = (_parse_effect(msg) if _PARSE_RX.search(low) else
                 (False, via_of(msg)) if _VIA_RX.search(low) else (False, None))
    return False, table, rank, feed, bool(via)


def _parse_effect(msg: str) -> tuple:
    """(does the parser read more than a transport from it, (channel, via) or None)."""
    st = NcclDebugState()
    st.feed(msg)
    more = bool(st.version or st.bootstrap or st.sock or st.ib or st.ib_oob or st.ib_no_device or st.network
                or st.coll_channels is not None or st.env or st.warnings or st.nranks or st.destroyed
                or st.error_return)
    return more, (via_of(msg) if st.via and not more else None)


def _line_start_matters(rest: str) -> bool:
    """Could a line starting so be ncclcheck's own, a traceback's, or a row of a launcher's table?"""
    return bool(_OWN_LINE.match(rest) or _OWN_HEAD.match(rest) or _OWN_END.match(rest) or _OWN_TAIL.match(rest)
                or TRACEBACK.match(rest) or RAISED.match(rest) or launcher.is_table_row(rest))


def _never_own(line: str) -> bool:
    """A line no report of ncclcheck's holds: an NCCL line, a traceback's start or an exception's line (a rank's own
    failure after text that looked like a report)."""
    return bool(nccl_header(line) or "NCCL WARN" in line or TRACEBACK.match(line) or RAISED.match(line))


class OwnOutput:
    """ncclcheck's own lines, found one line at a time: its console reports and its one-line messages ("ncclcheck.guard
    armed ..."). A report is its header line, then its table's header ("status  check ..."), then rows, their indented
    continuations and its sections ("Recommended environment", "why:"), the rest of a long line a terminal wrapped, to
    its summary line and the "root cause:" / "fix:" lines after it, all from one source (one launcher prefix). A header
    not followed by the table's, or a line of its source in no shape a report prints (an NCCL line, a traceback, an
    exception), ends the block there: a rank printing a report's first line (a copy of
    an earlier report) hides nothing, and no other rank's line is ever skipped."""

    def __init__(self) -> None:
        self.inside, self.tail, self.src, self.fresh, self.wide = 0, False, None, False, False

    @property
    def idle(self) -> bool:
        return self.inside == 0 and not self.tail

    def own(self, raw: str) -> bool:
        prank, rest = split_prefix(raw)
        line = rest.lstrip()
        if self.tail:  # the report's closing "root cause on node N: ..." / "fix: ..." lines
            if prank == self.src and _OWN_TAIL.match(line):
                return True
            self.tail = False
        if self.inside == 0 and _OWN_HEAD.match(line):
            if _OWN_ONE.search(line):
                return True
            self.inside, self.src, self.fresh = OWN_BLOCK_LINES, prank, True
            return True
        if self.inside > 0 and prank == self.src:
            fresh, self.fresh = self.fresh, False
            wide, self.wide = self.wide, len(rest) >= WRAP_MIN
            if _OWN_END.match(line):
                self.inside, self.tail = 0, True
                return True
            if (_OWN_TABLE.match(line) if fresh else
                    (_OWN_ROW.match(rest) or (wide and not _never_own(line)))):  # a row, or a wrapped one's rest
                self.inside -= 1
                return True
            self.inside = 0  # not a report's line: the block was no report, this line is the job's
        return bool(_OWN_LINE.match(line)) and "PreflightFailed" not in line


def strip_own_output(text: str) -> str:
    """The text with ncclcheck's own lines blanked (line numbers kept). What the job printed stays."""
    own = OwnOutput()
    return "\n".join("" if own.own(raw) else raw for raw in text.splitlines())


@dataclass
class Room:
    """What all the logs of one diagnose may keep together (a hostile directory is many files)."""
    chars: int = MAX_KEPT_CHARS
    sources: int = MAX_SOURCES


class _Source:
    __slots__ = ("key", "first", "header", "nccl", "state", "tb", "frame", "counts", "follow", "host", "phase",
                 "target")

    def __init__(self, key, first: int):
        self.key = key  # ("p", rank) a launcher prefix's, ("h", host, pid) an NCCL process's, None neither's
        self.first = first  # its first line's number
        self.header: Optional[tuple] = None  # (line number, {host, local_rank}) of its first NCCL header
        self.nccl = False  # a line of it holds "NCCL"
        self.state: Optional[NcclDebugState] = None
        self.tb: Optional[tuple] = None  # (line number, line) of the traceback it is inside, if any
        self.frame: Optional[tuple] = None  # (line number, line) of that traceback's innermost frame of the job's own
        self.counts: dict = {}  # class -> lines kept
        self.follow = 0  # its next lines to keep (after a PreflightFailed line)
        self.host: Optional[str] = None  # the first host its lines' prefixes named (pdsh, a pod, Ray's ip)
        self.phase = endings.LAUNCHED  # the latest phase its lines show (nccl/endings.py)
        self.target: Optional[tuple] = None  # (line number, "host:port") of the last address it said it connects to


class _Head:
    __slots__ = ("src", "prefixed", "process")

    def __init__(self, src: _Source, prefixed: bool, process: tuple):
        self.src, self.prefixed, self.process = src, prefixed, process  # process: (host, pid)


@dataclass
class RankPart:
    """What `_logs` reads of one rank of one log: its kept lines (launcher prefix removed) in file order with their
    line numbers, NCCL's facts from all its lines (None: no line of it holds "NCCL") and its first NCCL header."""
    lines: list = field(default_factory=list)
    index: list = field(default_factory=list)
    hosts: list = field(default_factory=list)  # per kept line, the host its prefix named (pdsh, a pod, Ray ip), or None
    host: Optional[str] = None  # the first host any of its lines' prefixes named
    nccl: Optional[dict] = None
    head: Optional[dict] = None
    phase: int = 0  # the latest phase its lines show (nccl/endings.py PHASE_NAMES)
    target: Optional[tuple] = None  # (line number, "host:port") of the last address its lines said they connect to


_OVER = ("x",)  # the source of lines past MAX_SOURCES: no rank


def _phase_of(src: _Source) -> int:
    """The latest phase a source's lines show: its signs, and NCCL's own lines (any: init; Init COMPLETE: done)."""
    st = src.state
    nccl = (endings.TEARDOWN if st is not None and st.destroyed else
            endings.INIT_COMPLETE if st is not None and st.nranks else endings.NCCL_INIT if src.nccl else 0)
    return max(src.phase, nccl)


class LogScan:
    """One text log, fed its bytes in order (feed, then close); then `ranks()`, `failures()`, `known`."""

    def __init__(self, path: str, room: Optional[Room] = None, source: Optional[str] = None):
        self.path = path  # its name as the report shows it (clean.clean_name)
        self.source = path if source is None else source  # its name on disk: read again from there (context.py)
        self.room = room or Room()
        self.lines = 0  # lines read
        self.cut = 0  # lines cut at MAX_LINE_CHARS
        self.dropped = 0  # lines that mattered but were not kept (KEEP_PER_KEY, the room)
        self.nccl_seen = False  # an NCCL line among the first KNOWN_LINES
        self.has_text = False
        self.skipped = 0  # bytes of the middle of a file past MAX_TEXT_BYTES, or past the reading's time, not read
        self.timed = False  # some of them for the time (inputs.READ_SECONDS)
        self._last_known = 0  # the last line with a rank prefix
        self.program_seen = False  # a line from torch, NCCL, gloo, CUDA, a launcher or a scheduler (endings.PROGRAM)
        self.ended: Optional[tuple] = None  # (line number, sign id, line) of the first line showing the job ended well
        # (first line number, last, count, line) of the last run of NCCL's connect retries ("Call to connect returned
        # Connection refused, retrying"): routine where the text goes on, the stop where it ends inside them
        self.retries: Optional[tuple] = None
        self.steps_at = 0  # the last line of a training step with no source (a loop's own print)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._carry, self._over, self._cr, self._drop_partial = "", 0, False, False
        self._own = OwnOutput()
        self._sources: dict = {}
        self._pid_rank: dict = {}
        self._kept: list = []  # (line number, source key, line)
        self._table: list = []  # the lines a launcher's failure table is read from
        self._table_follow = 0
        self._follow = 0
        self._heads: dict = {}
        self._msgs: dict = {}
        self._shapes: dict = {}
        self._calm = FAST  # nothing pending (own report, followers): an NCCL INFO line may go the fast way
        self._none = False  # a line of no source was read the full way (the source None is known)
        self._failures: Optional[list] = None
        self.launcher: Optional[str] = None  # the launcher whose own output this is (launcher.own_line)
        self.worlds: list = []  # the job sizes launch commands pasted in it state (launcher.world_stated)
        self.ray: dict = {}  # pid -> (rank, ip) of Ray Train's worker table (its lines' prefixes name the pid)
        self._wrap: Optional[tuple] = None  # (rank, line) of the last long line no class knew: a wrap's first part
        self._cont: Optional[tuple] = None  # (line number, index in _kept, lines so far) of a wrap read as one
        self._width = 0  # the length of the last line read the full way
        self.tests_header: Optional[str] = None  # nccl-tests' first header line, when it ran ("# nThread ...")
        self.tests_rows = self.tests_end = False  # ... a result row of its table, its closing "Avg bus bandwidth"
        self._templates: dict = {}  # a line's shape (its digits read as 0) -> its _Template, or False
        self._templates_on = True  # off: every line the full way (tests hold the two ways to the same reading)
        self._fast: dict = {}  # (a line's first RUN_KEY bytes, its shape) -> _Run
        self._open: set = set()  # sources that had a traceback open or lines to follow (some may no longer)
        self._fast_none = False  # a _Run of no source's

    # -- bytes to lines ---------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        if (self._templates_on and _DIGIT_FREE and not self._drop_partial and not self._cr and len(data) >= BYTES_MIN
                and data.isascii() and not self._decoder.getstate()[0]):
            # ASCII with nothing cleaning drops and no line end but "\n" (the usual read of a large log): its whole
            # lines go to _bytes_run as they are, without the decode, clean and encode of _text, their shapes made
            # by the translation that finds such a byte (one pass, where a search for each took as long again)
            shaped = data.translate(_SHAPE_OR_STOP)
            first, last = data.find(b"\n"), data.rfind(b"\n")
            if 0 <= first < last and b"\0" not in shaped:
                self._text_lines(data[:first + 1].decode("ascii"))
                self._bytes_run(data[first + 1:last + 1], shaped[first + 1:last + 1])
                self._cr = False
                if last + 1 < len(data):
                    self._text_lines(data[last + 1:].decode("ascii"))
                return
        self._text(clean_log_text(self._decoder.decode(data)))

    def gap(self, skipped: int) -> None:
        """`skipped` bytes were not read here (the middle of a file past MAX_TEXT_BYTES): the line before ends,
        the partial line after is dropped."""
        self._text(clean_log_text(self._decoder.decode(b"", True)) + "\n")
        self._decoder.reset()
        self.skipped += skipped
        self._drop_partial = True

    def close(self) -> None:
        self._text(clean_log_text(self._decoder.decode(b"", True)))
        if (self._carry or self._over) and not self._drop_partial:
            self._run([self._first(self._carry)], [None])
        self._carry, self._over = "", 0
        self._heads, self._msgs, self._shapes = {}, {}, {}

    def _first(self, line: str) -> str:
        """The line that completes the carried one, cut with the count of all it had."""
        if self._over:
            line = f"{line[:MAX_LINE_CHARS]} ... [cut: {len(line) - MAX_LINE_CHARS + self._over:,} more characters]"
            self._over = 0
        return line

    def _text(self, text: str) -> None:
        if self._cr and text.startswith("\n"):  # "\r\n" split across two reads is one line end
            text = text[1:]
        if not text:
            return
        if (self._templates_on and _DIGIT_FREE and not self._drop_partial and len(text) >= BYTES_MIN
                and not any(c in text for c in _BREAKS)):
            first, last = text.find("\n"), text.rfind("\n")
            if 0 <= first < last:  # the carried line's end, the whole lines as bytes, the next line's start
                self._text_lines(text[:first + 1])
                self._bytes_run(text[first + 1:last + 1].encode("utf-8", "surrogatepass"))
                self._cr, text = False, text[last + 1:]
                if not text:
                    return
        self._text_lines(text)

    def _bytes_run(self, data: bytes, shaped: Optional[bytes] = None) -> None:
        """Whole lines (UTF-8, each ending in "\n", no other line end; `shaped`: their shapes, when made): _run's
        reading, split as bytes (faster than str.splitlines) and decoded only where a line is read one at a time or
        ends a run."""
        lines = data.split(b"\n")
        lines.pop()
        shapes = (data.translate(_ZEROS) if shaped is None else shaped).split(b"\n")
        shapes.pop()
        self._run(lines, shapes, list(map(_RUN_HEAD, lines)))

    def _text_lines(self, text: str) -> None:
        self._cr = text.endswith("\r")
        lines = text.splitlines()
        # each line's shape, its digits read as 0 (one pass over the chunk; a digit is no line end, so the two split
        # alike): the first line, completing the carried one, has none
        shapes = _shapes(text, len(lines)) if _DIGIT_FREE and len(lines) > 1 else [None] * len(lines)
        shapes[0] = None
        partial = text[-1] not in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
        lines[0] = self._carry + lines[0]
        carry = lines.pop() if partial else ""
        if partial:
            shapes.pop()
        if lines:
            lines[0] = self._first(lines[0])
            if self._drop_partial:
                lines, shapes, self._drop_partial = lines[1:], shapes[1:], False
        if len(carry) > MAX_LINE_CHARS:  # one line longer than a chunk: keep its start, count the rest
            self._over += len(carry) - MAX_LINE_CHARS - 1
            carry = carry[:MAX_LINE_CHARS + 1]
        self._carry = carry
        if lines:
            self._run(lines, shapes)

    # -- lines ------------------------------------------------------------------------------------------------

    def _run(self, lines: list, shapes: list, heads: Optional[list] = None) -> None:
        """A chunk's lines (str, or bytes with their `heads`): each run of lines whose start and shape were seen before
        as a prefixed line that holds nothing to read (_Run) at once, while nothing is pending; every other line one
        at a time (_lines)."""
        raw_bytes = heads is not None
        if len(lines) < MIN_RUN or not self._templates_on or shapes[-1] is None:
            self._lines([raw.decode("utf-8", "surrogatepass") for raw in lines] if raw_bytes else lines, shapes)
            return
        if heads is None:
            heads = [raw[:RUN_KEY].encode("utf-8", "surrogatepass") for raw in lines]
        # a window at a time: the runs a window's lines teach (a step's width grew: every rank's lines have new
        # shapes) are read as runs in the next, not one line at a time to the chunk's end
        end = len(lines)
        for a in range(0, end, RUN_WINDOW):
            b = min(end, a + RUN_WINDOW)
            self._window(lines[a:b], shapes[a:b], list(zip(heads[a:b], shapes[a:b])), raw_bytes)

    def _window(self, lines: list, shapes: list, keys: list, raw_bytes: bool) -> None:
        fast = self._fast
        flags = self._flags(keys, 0)
        i, end = 0, len(lines)
        while i < end:
            if flags[i] and self._calm_but_wrap and self.tests_header is None:
                try:
                    j = flags.index(False, i)
                except ValueError:
                    j = end
                self._passed(lines, keys, i, j, fast)
                i = j
                continue
            try:  # the lines up to the next of a _Run, one at a time
                j = flags.index(True, i + 1)
            except ValueError:
                j = end
            opened = len(self._open)
            self._lines([raw.decode("utf-8", "surrogatepass") for raw in lines[i:j]] if raw_bytes else lines[i:j],
                        shapes[i:j])
            if len(self._open) != opened:  # a traceback opened: its source's lines are read one at a time
                flags[j:] = self._flags(keys, j)
            i = j

    def _flags(self, keys: list, start: int) -> list:
        """Which of keys[start:] name a _Run whose source has no traceback open and no line to follow."""
        fast = self._fast
        self._open = {src for src in self._open if src.tb or src.follow}
        flags = list(map(fast.__contains__, keys[start:] if start else keys))
        if self._open:
            hot = {k for k in set(keys[start:]) if k in fast and fast[k].src in self._open}
            flags = [f and k not in hot for f, k in zip(flags, keys[start:])]
        return flags

    def _passed(self, lines: list, keys: list, i: int, j: int, fast: dict) -> None:
        """lines[i:j], each of a _Run: what the full way does with them, at once (what a line sets once, only until
        it is set; the last prefixed line with a rank, from the end)."""
        first = self.lines
        last = fast[keys[j - 1]]
        self.lines = first + (j - i)
        at = next((k for k in range(j - 1, i - 1, -1) if fast[keys[k]].ranked), None)
        if at is not None:
            self._last_known = first + (at - i) + 1
        if not self.has_text:
            self.has_text = any(fast[k].text for k in keys[i:j])
        if not self.program_seen:
            self.program_seen = self.nccl_seen or any(fast[k].ranked or fast[k].program for k in keys[i:j])
        if not self._none and self._fast_none:
            self._none = any(fast[k].src.key is None for k in keys[i:j])
        raw = lines[j - 1]
        raw = raw.decode("utf-8", "surrogatepass") if isinstance(raw, bytes) else raw
        self._width = len(raw)
        self._wrap = (self.lines, last.rank, raw[last.pos:]) if last.wraps else None
        self._calm = FAST and self._wrap is None

    def _lines(self, lines: list, shapes: list) -> None:
        """Each line: the fast way when it is an NCCL INFO line whose header and message were seen before, or a line
        of a shape that holds nothing to read (_Template) while nothing is pending."""
        heads, msgs, n, stated, templates = self._heads, self._msgs, self.lines, self._pid_rank, self._templates
        for raw, shape in zip(lines, shapes):
            n += 1
            if shape is not None and self._calm_but_wrap and raw.find(SEP, 0, MAX_HEAD) < 0:  # NCCL's: below
                t = templates.get(shape)
                if t is None:
                    t = _template(raw)
                    if len(templates) >= MAX_MEMO:
                        templates.clear()
                    templates[shape] = t
                if t and self._plain_line(t, raw, n, shape):
                    continue
            if not raw and self._none and self._calm:  # an empty line, once a line of no source was read: nothing new
                continue
            if (self._none and self._calm and raw and ":" not in raw and raw[0] not in _PREFIX_STARTS
                    and len(raw) <= MAX_LINE_CHARS and raw.isascii() and not raw.startswith(("===", "---"))
                    and not _PLAIN.search(low := raw.lower()) and not _SIGNS_RX.search(low)):
                self.has_text = True  # a plain line of no rank, read before: what it says is nothing to read
                continue
            if self._calm:
                j = raw.find(SEP, 0, MAX_HEAD)
                if j > 0 and len(raw) <= MAX_LINE_CHARS:
                    h = heads.get(raw[:j])
                    if h is None:
                        h = self._head(raw[:j], n)
                    if h and not h.src.follow:
                        msg = raw[j + 11:]
                        m = msgs.get(msg)
                        if m is None:
                            m = self._msg(msg)
                        if m is QUIET:
                            if h.prefixed:
                                self._last_known = n
                            continue
                        if not (m[0] or (m[1] and h.process not in stated)):
                            if h.prefixed:
                                self._last_known = n
                            if m[2]:
                                self._state(h.src).feed(msg, n)
                            elif m[3]:
                                self._state(h.src).add_via(m[3][0], m[3][1], n)
                            continue
            self.lines = n
            self._slow(raw, n)
        self.lines = n

    def _plain_line(self, t: _Template, raw: str, n: int, shape: str) -> bool:
        """What the full way does with a line of a shape that holds nothing to read, done here; False when this line
        needs the full way after all (a pending wrap its unprefixed line may complete, an open traceback of its
        source, a step before its source's first, a Ray prefix, no program's line seen yet, nccl-tests' output)."""
        if (self._wrap is not None and not t.pos) or (t.ray and self.ray) or self.tests_header is not None:
            return False
        prank = int(raw[t.rank[0]:t.rank[1]]) if t.rank else None
        src = self._sources.get(("p", prank) if prank is not None else None)
        if src is None:
            return False  # a source's first line goes the full way (it makes the source)
        if src.tb or src.follow or (t.step and src.phase < endings.STEPS and not (src.key is None and self.steps_at)):
            return False
        if src.host is None and t.host:
            src.host = raw[t.host[0]:t.host[1]]
        if t.state and src.state is None:
            src.state = NcclDebugState()
        if prank is not None:
            self._last_known = n
        if not self.program_seen and (self.nccl_seen or prank is not None or t.program):
            self.program_seen = True
        if t.text:
            self.has_text = True
        self._none = self._none or src.key is None
        self._width = len(raw)
        self._wrap = (n, prank, raw[t.pos:]) if t.wraps else None
        self._calm = FAST and self._wrap is None
        # a prefixed line whose start spells its rank, whose source has its host (and its first step: phases only
        # go up), of no Ray worker: every line of its start and shape does the same; read so in a run (_passed)
        if (t.pos and (t.rank is None or t.rank[1] <= RUN_KEY) and (t.host is None or src.host is not None)
                and not t.ray):  # a step's words: its source is past them
            if len(self._fast) >= MAX_MEMO:
                self._fast.clear()
            self._fast[(raw[:RUN_KEY].encode(), shape)] = _Run(src, prank, t)  # an ASCII line: as many bytes
            self._fast_none = self._fast_none or src.key is None
        return True

    @property
    def _calm_but_wrap(self) -> bool:
        """Nothing pending but, perhaps, a wrap's first part (its line's rest read as one with it)."""
        return (not self._follow and not self._table_follow and self._own.idle and self._cont is None
                and self._templates_on)

    def _head(self, head: str, n: int):
        """What a header says, remembered: its source, or False when its line must go the full way."""
        info = False
        prank, phost, rest = peel_host(head)
        m = _FAST_HEAD.fullmatch(rest) if head.isascii() else None
        # the rank's words are read without its prefix: a literal there ("rank" of "[rank3]:") is no match's start;
        # with no rank in it, a prefix may be a launcher's own line, which the full way reads whole
        read = rest if prank is not None and not any(k in head for k in _TABLE_MARKS) else head
        if m and not _line_start_matters(rest) and not _HEAD_RX.search((read + SEP).lower()):
            src = self._source(("p", prank) if prank is not None else ("h", m.group(1), int(m.group(2))), n)
            self._saw_header(src, n, m.group(1), int(m.group(4)))
            src.nccl = self.has_text = True
            src.host = src.host or phost
            self.nccl_seen = self.nccl_seen or n <= KNOWN_LINES
            info = _Head(src, prank is not None, (m.group(1), int(m.group(2))))
        if len(self._heads) >= MAX_MEMO:
            self._heads.clear()
        self._heads[head] = info
        return info

    def _msg(self, msg: str):
        """What an NCCL INFO message says (read alone: its header holds nothing a match starts with), remembered. Its
        shape (which patterns could touch it) is remembered per message with every digit read as 0: most messages
        of a large log differ from another only in numbers (ranks, channels, addresses)."""
        key = msg.encode("utf-8", "replace").translate(_ZEROS)
        shape = self._shapes.get(key)
        if shape is None:
            shape = _shape(msg)
            if len(self._shapes) >= MAX_MEMO:
                self._shapes.clear()
            self._shapes[key] = shape
        slow, table, rank, feed, via = shape
        if slow or (table and failures.classify(msg)) or ("retrying" in msg and failures.CONNECT_RETRY.search(msg)):
            out = SLOW  # a connect retry too: where the text ends inside them, they are its stop (ends_retrying)
        else:
            via = via_of(msg) if via else None
            out = (False, rank, feed, via) if rank or feed or via else QUIET
        if len(self._msgs) >= MAX_MEMO:
            self._msgs.clear()
        self._msgs[msg] = out
        return out

    def _source(self, key, n: int) -> _Source:
        src = self._sources.get(key)
        if src is None:
            if self.room.sources <= 0:  # past the bound: its lines have no rank
                key = _OVER
                src = self._sources.get(key)
                if src is not None:
                    return src
            else:
                self.room.sources -= 1
            src = self._sources[key] = _Source(key, n)
        return src

    def _state(self, src: _Source) -> NcclDebugState:
        if src.state is None:
            src.state = NcclDebugState()
        return src.state

    @staticmethod
    def _saw_header(src: _Source, n: int, host: str, dev: int) -> None:
        if src.header is None:
            src.header = (n, {"host": host, "local_rank": dev})

    def _slow(self, raw: str, n: int) -> None:
        """One line the full way: what analyze.py did to every line of a text."""
        if len(raw) > MAX_LINE_CHARS:
            raw = clip(raw, MAX_LINE_CHARS)
            self.cut += 1
        if not self.has_text and raw.strip():
            self.has_text = True
        cont, self._cont = self._cont, None
        if cont is not None and cont[0] == n - 1 and continues(raw) and peel_host(raw)[2] is raw:
            _, i, k = cont  # the rest of a wrapped line read as one: appended to the line kept for it
            m, key, line, host = self._kept[i]
            # a rest never takes away the class its line had ("... Exit code: 137" and the next record's "137 | ...")
            had = failures.classify(line)
            if self.room.chars >= len(raw) and (had is None or failures.classify(line + raw) is had):
                self.room.chars -= len(raw)
                self._kept[i] = (m, key, line + raw, host)
                if goes_on(raw, self._width) and k + 1 < WRAP_MAX_LINES:
                    self._cont = (n, i, k + 1)
                self._width = len(raw)
                self._calm = False
                return
        low = fold(raw)
        plain = low is not None and not _PLAIN.search(low)  # no literal anything reads: only where it starts matters
        prank, phost, rest = peel_host(raw)
        if self.ray and prank is None and (pid := launcher.ray_pid(raw)) in self.ray:
            prank, phost = self.ray[pid]
        elif launcher.STATES_RAY in raw and len(self.ray) < MAX_SOURCES and (w := launcher.ray_worker(raw)):
            self.ray[w[0]] = (w[1], w[2])
        if self.launcher is None and prank is None and not plain:
            self.launcher = launcher.own_line(raw)
        if not plain and len(self.worlds) < 16 and (w := launcher.world_stated(rest)):
            self.worlds.append(w)
        if rest.startswith("#") or self.tests_header is not None:
            self._nccl_tests(rest)
        if not plain and n <= KNOWN_LINES and (" NCCL " in raw or "NCCL WARN" in raw or "NCCL INFO" in raw):
            self.nccl_seen = True
        # without a prefix, rest is the raw line; a launcher's record line is read by launcher.py, not classified
        cls = None if plain or launcher.record_line(rest) else failures.classify(rest)
        if cls is None and "retrying" in rest and failures.CONNECT_RETRY.search(rest):
            r = self.retries
            self.retries = ((r[0], n, r[2] + 1, r[3]) if r is not None and r[1] >= n - RETRY_GAP else
                            (n, n, 1, clip(rest.strip(), 400)))
        if prank is not None:
            self._last_known = n
        # a failure row is a program's own message (torch's "The server socket has failed to listen ...")
        # a launcher's rank prefix ("[rank3]:", "[default0]:") is that launcher's own shape
        if not self.program_seen and (self.nccl_seen or cls is not None or prank is not None
                                      or endings.from_a_program(rest)):
            self.program_seen = True
        self._table_line(raw, rest, plain)
        if (not plain or not self._own.idle) and self._own.own(raw):  # idle, only a line naming ncclcheck is its own
            prank, rest, cls = None, "", None
        wrap, self._wrap = self._wrap, None  # a wrapped line read as one (never ncclcheck's own lines)
        joined = False
        if wrap is not None and wrap[0] == n - 1 and rest is raw:
            prank, rest, cls = unwrapped(wrap[1:], raw, cls)
            joined = rest is not raw
            plain = plain and not joined  # the two read as one hold what this part alone does not
        elif wraps(rest, raw, cls):
            self._wrap = (n, prank, rest)
        head = nccl_header(rest)
        if head is not None:
            stated = rank_of_line(rest)
            if stated is not None:
                self._pid_rank.setdefault((head["host"], head["pid"]), stated if prank is None else prank)
        src = self._source(("p", prank) if prank is not None else ("h", head["host"], head["pid"]) if head else None,
                           n)
        if head is not None:
            self._saw_header(src, n, head["host"], head["cuda_dev"])
        src.host = src.host or phost
        if "NCCL" in rest:
            src.nccl = True
        if ("onnect" in rest or "onenct" in rest) and (m := _TARGET.search(rest)) is not None:
            src.target = (n, f"{m.group(1)}:{m.group(2)}")
        if rest and not plain:
            self._state(src).feed(rest, n)
        if rest:
            steps = src.phase < endings.STEPS and not (src.key is None and self.steps_at)
            rlow = low if rest is raw else fold(rest)  # the rank's words, its prefix ("[rank3]:") taken off
            if ((rlow is None or _OTHER_SIGNS_RX.search(rlow) or (steps and _STEP_RX.search(rlow)))
                    and (sign := endings.sign(rest, steps)) is not None):
                self._signed(src, sign, rest, n)
        if not plain or self._follow or src.follow or src.tb:  # a plain line opens and ends no traceback
            self._keep_if_read(src, cls, rest, n, phost)
        if joined and goes_on(raw, self._width) and self._kept and self._kept[-1][0] == n:
            self._cont = (n, len(self._kept) - 1, 1)  # its second part looks cut too: the next line may go on
        self._width = len(raw)  # what the next line's wrap is measured against
        self._none = self._none or src.key is None
        self._calm = (FAST and not self._follow and not self._table_follow and self._own.idle and self._wrap is None
                      and self._cont is None)

    def _signed(self, src: _Source, sign, rest: str, n: int) -> None:
        """A line that shows where the job got to: its source's phase, and the job's end."""
        if sign.id == endings.RANK_ONLY and (src.key is None or src.key[0] != "p"):
            return  # a bare "Done!" of no rank's prefix: any step's word
        src.phase = max(src.phase, sign.phase)
        if sign.phase == endings.STEPS and src.key is None:
            self.steps_at = n
        if sign.end and self.ended is None:
            self.ended = (n, sign.id, clip(rest.strip(), 400))

    def _nccl_tests(self, rest: str) -> None:
        """nccl-tests' progress: its header, a row of its table, its closing line (its output's own shape)."""
        if self.tests_header is None:
            if rest.startswith("# nThread "):
                self.tests_header = clip(rest.strip(), 200)
        elif not self.tests_rows and _TESTS_ROW.match(rest):
            self.tests_rows = True
        elif rest.startswith(("# Avg bus bandwidth", "# Out of bounds values")):
            self.tests_end = True

    @property
    def tests_stalled(self) -> Optional[str]:
        """nccl-tests' header line when it started and printed neither a result nor its end (it hung or was stopped
        before its first collective finished), else None."""
        return self.tests_header if self.tests_header and not self.tests_rows and not self.tests_end else None

    def _keep_if_read(self, src: _Source, cls, rest: str, n: int, host: Optional[str] = None) -> None:
        """Keep the line when `_logs` reads it: classified, ending a traceback (with the line that opened it), a
        PreflightFailed line and the lines after it."""
        follower = self._follow > 0 or src.follow > 0
        self._follow, src.follow = max(0, self._follow - 1), max(0, src.follow - 1)
        what = cls.id if cls is not None else None
        opened = None
        if TRACEBACK.match(rest):
            src.tb, src.frame = src.tb or (n, rest), None
            self._open.add(src)
        elif src.tb and (f := stacks.TB_FRAME_LINE.match(rest)) and not stacks.is_library(f.group(1)):
            src.frame = (n, rest)  # outermost first: the last one before the exception is the innermost
        elif RAISED.match(rest):  # it ends a traceback, or stands alone (an excerpt pasted without its header)
            opened, src.tb = src.tb, None
            what = what or "raised"
        if "PreflightFailed" in rest:
            what = what or "guard"
        if failures.LAST_ERROR.search(rest):  # torch's wrapper: NCCL's own words for it come on the next line
            what = what or "last_error"
            self._follow = max(self._follow, 1)
        if what is None and not follower:
            return
        if what is not None:
            count = src.counts.get(what, 0)
            if count >= KEEP_PER_KEY and not follower:
                self.dropped += 1
                return
            src.counts[what] = count + 1
        if "PreflightFailed" in rest:
            self._follow, src.follow = FOLLOW_LINES, 2
            self._open.add(src)
        if opened is not None:
            self._add(opened[0], src.key, opened[1])
            if src.frame is not None:  # the line the rank raised at: the verdict names it
                self._add(src.frame[0], src.key, src.frame[1])
        src.frame = None if opened is not None else src.frame
        self._add(n, src.key, rest, host)

    def _add(self, n: int, key, line: str, host: Optional[str] = None) -> None:
        if self.room.chars < len(line):
            self.dropped += 1
            return
        self.room.chars -= len(line)
        self._kept.append((n, key, line, host))

    def _table_line(self, raw: str, rest: str, plain: bool) -> None:
        """Keep the lines a launcher's failure table, srun's or mpirun's report is read from (raw: with prefix)."""
        if self._table_follow > 0:
            self._table_follow -= 1
        elif not (launcher.is_table_row(rest) or (not plain and any(m in raw for m in _TABLE_MARKS))):
            return
        if _MPI_FIRST in raw:
            self._table_follow = TABLE_FOLLOW
        elif rest.lstrip().startswith("traceback") and launcher.is_table_row(rest):
            self._table_follow = TABLE_TRACEBACK  # a failed rank's own traceback (its error file) follows
        if self.room.chars < len(raw):
            self.dropped += 1
            return
        self.room.chars -= len(raw)
        self._table.append(raw)

    # -- what was read ----------------------------------------------------------------------------------------

    @property
    def known(self) -> bool:
        """An NCCL line among the first KNOWN_LINES, a launcher's table, or a rank prefix or a failure among the
        last KNOWN_LINES lines: a log (else plain output)."""
        return (self.nccl_seen or self.program_seen or bool(self.failures()) or self.launcher is not None
                or (self._last_known > 0 and self._last_known > self.lines - KNOWN_LINES))

    def failures(self) -> list:
        """The launcher's failure records in this output (torchrun's table, srun's and mpirun's reports)."""
        if self._failures is None:
            text = "\n".join(self._table)
            self._failures = launcher.parse_launcher_failures(text) if launcher.is_failure_table(text) else []
        return self._failures

    def _rank(self, key) -> Optional[int]:
        if key is None or key[0] == "x":
            return None
        return key[1] if key[0] == "p" else self._pid_rank.get((key[1], key[2]))

    def ranks(self) -> dict:
        """rank (None: no rank) -> RankPart, in the order each rank's first line came."""
        first: dict = {}
        srcs: dict = {}
        for key, src in self._sources.items():
            r = self._rank(key)
            first[r] = min(first.get(r, src.first), src.first)
            srcs.setdefault(r, []).append(src)
        parts = {r: RankPart() for r in sorted(first, key=first.get)}
        seen: set = set()
        for n, key, line, host in sorted(self._kept, key=lambda k: k[0]):
            if n not in seen:
                seen.add(n)
                part = parts[self._rank(key)]
                part.lines.append(line)
                part.index.append(n)
                part.hosts.append(host)
        for r, group in srcs.items():
            part = parts[r]
            if any(s.nccl for s in group):
                part.nccl = NcclDebugState.result([s.state for s in group if s.state is not None])
            part.host = next((s.host for s in sorted(group, key=lambda s: s.first) if s.host), None)
            part.phase = max(_phase_of(s) for s in group)
            part.target = max((s.target for s in group if s.target is not None), default=None)
            heads = [s.header for s in group if s.header is not None]
            if heads:
                part.head = dict(min(heads, key=lambda h: h[0])[1])
        return parts

    def nccl_by_host(self) -> dict:
        """host -> NCCL's facts from that host's own lines (each NCCL process apart, not merged by rank: two hosts
        whose ranks are unknown still say what each chose)."""
        out: dict = {}
        for src in self._sources.values():
            host = src.header[1]["host"] if src.header else src.host
            if src.state is not None and host is not None:
                out.setdefault(host, []).append(src.state)
        return {h: NcclDebugState.result(states) for h, states in out.items()}

    @property
    def end(self) -> Optional[tuple]:
        """(line number, sign id, line) of the first line that shows the job ended well, or None."""
        return self.ended

    @property
    def ends_retrying(self) -> Optional[tuple]:
        """(count, line) when the text ends inside a run of NCCL's connect retries (at least RETRIES_AT_END of them, the
        text's last line one) and shows no end: the stop is at that connect (any line after may be its success)."""
        r = self.retries
        if r is None or r[2] < RETRIES_AT_END or r[1] != self.lines or self.ended is not None:
            return None
        return r[2], r[3]

    def note(self) -> str:
        """What the reading bounded, said in the report ("" when nothing)."""
        bits = []
        if self.cut:
            bits.append(f"{self.cut:,} line(s) cut at {MAX_LINE_CHARS:,} characters")
        if self.dropped:
            bits.append(f"{self.dropped:,} repeated line(s) not kept")
        if self.skipped:
            bits.append(f"the middle {self.skipped:,} bytes not read" + (" (the time to read logs was spent)"
                                                                          if self.timed else ""))
        return "; ".join(bits)
