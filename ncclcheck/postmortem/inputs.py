"""Reading what a failed job left: PATH arguments (files, directories, globs) expanded, each file recognised by its
content (never trusted by its name): flight-recorder dumps (pickle through the plain-data unpickler, or JSON),
torchelastic error files, `ncclras -f json` output, an ncclcheck report, and text logs (NCCL_DEBUG lines, a
launcher's combined output with rank prefixes, torchrun's failure table). Anything else is listed as not recognised.

Each file is opened once and read once, in order: a file reached under two names (hard links, a symbolic link, named
twice) is read under the first and listed under the others. A text log streams through postmortem/logscan.py (bounded
memory whatever its size); a document (a dump, a report) is read whole up to its bound.

What a file says, and its name, is cleaned here, where it enters (clean.clean_doc, clean_log_text, clean_name): no
control character, bidirectional override or lone surrogate goes further, so no writer of the report meets one (a
"\ud800" in a dump's host name made every output exit 3; a newline in a log's name forged a console line).
"""

from __future__ import annotations

import glob
import json
import os
import time
from dataclasses import dataclass, field
from typing import Optional

from ..checks.nccl_ras_text import looks_like_ras_text, ras_text_header
from ..clean import clean_doc, clean_log_text, clean_name
from ..errors import UsageError
from ..infile import NotRegular, open_regular
from . import flight, launcher, phase, slow, stacks
from .bound import clip
from .logscan import LogScan, Room
from .unpickle import MAX_DUMP_BYTES, RefusedPickle, is_pickle, loads_plain, walk_problem

MAX_FILES = 200_000  # a directory walk stops here (a 16k-rank job leaves a few files per rank)
# Of a log, up to 1 GiB is read: a larger one, its first 64 MiB (NCCL's init lines: which process is which rank)
# and its last (1 GiB - 64 MiB), the failure being at the end; the middle is skipped and the report says so.
MAX_TEXT_BYTES = 1 << 30
HEAD_BYTES = 64 << 20
# ... and within a time: past its head, a log whose rest would not be read by READ_SECONDS after the reading of the
# inputs began (at the rate this file was read so far) has more of its middle skipped, so that what is left fits; at
# least its last MIN_TAIL_BYTES are read whatever the time (the failure is at the end). A text of lines that are all
# different reads at ~20 k lines/s: 1 GiB of them would take minutes.
READ_SECONDS = 40.0
MIN_TAIL_BYTES = 16 << 20
MAX_JSON_BYTES = 64 << 20  # a JSON dump, error file or report larger than this is not one
MAX_STACKS_BYTES = 8 << 20  # an armed rank's stacks file (faulthandler: 100 threads x 100 frames) is far below
MAX_TOTAL_BYTES = 4 << 30  # read in all; the files past it are listed as not read (name the job's own directory)
CHUNK = 1 << 20  # bytes read at a time


@dataclass
class Inputs:
    dumps: dict = field(default_factory=dict)  # rank -> flight.RankDump
    logs: list = field(default_factory=list)  # [LogScan]: each text log, read once (postmortem/logscan.py)
    failures: list = field(default_factory=list)  # torchrun failure-table records
    error_files: list = field(default_factory=list)  # [{path, rank, message, timestamp}]
    ras: list = field(default_factory=list)  # [(path, text)]
    reports: list = field(default_factory=list)  # [(path, dict)] ncclcheck reports found among the inputs
    stacks: dict = field(default_factory=dict)  # rank -> stacks.parse() of an armed rank's stacks file
    read: list = field(default_factory=list)  # [{path, kind, note}] every file looked at, for the report
    refused: list = field(default_factory=list)  # [{path, why}] files that could not be read as what they claim
    # what a live rank said of itself (`ncclcheck watch`, or its --dump read back): rank -> {host, local_rank}, and
    # rank -> where its main thread was (flight.where_of); rank -> why a registered rank did not answer
    hosts: dict = field(default_factory=dict)
    where: dict = field(default_factory=dict)
    unanswered: dict = field(default_factory=dict)
    observer: Optional[str] = None  # the host `ncclcheck watch` asked from (a cut link is seen from one side)
    launchers: dict = field(default_factory=dict)  # path -> the launcher whose own output it is (launcher.own_line)
    clocks: dict = field(default_factory=dict)  # rank -> its host's clock offset watch measured (postmortem/slow.py)
    phases: dict = field(default_factory=dict)  # rank -> its progress as watch sampled it (postmortem/phase.py)
    sampling: list = field(default_factory=list)  # what each rank watch asked to sample answered (refusals, trims)
    stale: dict = field(default_factory=dict)  # rank -> seconds its recorder's reply was old (its responder past its
    # CPU share served the last one built): its newest collectives are not in it, so the slow rule does not judge it

    def recognised(self) -> int:
        return sum(1 for r in self.read if r["kind"] != "unrecognised")


def expand(paths: list[str]) -> list[str]:
    """Files named by PATH arguments, sorted and unique; UsageError for a PATH that names nothing. A path that is not
    a directory is kept as named (a FIFO or a device too: _read refuses it, by name); a glob is expanded once."""
    files: list[str] = []
    for p in paths:
        hits = [p] if os.path.lexists(p) else sorted(glob.glob(p, recursive=True))
        if not hits:
            raise UsageError(f"{clean_name(p)}: no such file or directory")
        for hit in hits:
            if os.path.isdir(hit):
                for root, dirs, names in os.walk(hit):
                    dirs.sort()
                    files.extend(os.path.join(root, n) for n in sorted(names))
                    if len(files) > MAX_FILES:
                        raise UsageError(f"{clean_name(hit)}: more than {MAX_FILES} files; name the job's directory")
            else:
                files.append(hit)
    return list(dict.fromkeys(files))


def _open(path: str, named: bool) -> int:
    """A descriptor on a regular file (infile.open_regular: without blocking; a file found by walking a directory
    without following a link); NotRegular otherwise."""
    return open_regular(path, named)


BINARY_SAMPLE = 1 << 16  # bytes of a file's start (its NULs left out) that say whether it is text
_NOT_TEXT = bytes(c for c in range(32) if c not in b"\t\n\r\x0b\x0c\x1b")  # ESC: a colour code is text


def _binary(head: bytes) -> bool:
    """Is most of the file's start something other than text? NUL runs are gaps, not a verdict: logrotate's
    copytruncate leaves a hole of NULs at a log's start, and a rank may print one; a start of NULs alone says nothing
    (read as text: the NULs are dropped). Binary when, NULs left out, a tenth of its first BINARY_SAMPLE bytes are
    control bytes or bytes UTF-8 cannot decode (random bytes: about half)."""
    body = head[:BINARY_SAMPLE * 4].replace(b"\x00", b"")[:BINARY_SAMPLE]
    if not body:
        return False
    odd = len(body) - len(body.translate(None, _NOT_TEXT))
    odd += body.decode("utf-8", "replace").count("\ufffd") - body.count("\ufffd".encode())
    return odd * 10 > len(body)


def reread_lines(path: str, max_bytes: int = HEAD_BYTES, holding: str = ""):
    """The lines of a log read before, again, from its start and at most max_bytes of it (a cause that needs more
    of its host's lines than the one reading kept: postmortem/context.py); nothing when it is gone or not a file.
    With `holding`, only lines that may hold it: a chunk without it is passed over unsplit."""
    import codecs

    try:
        fd = _open(path, True)
    except (OSError, NotRegular):
        return
    decoder, carry, got = codecs.getincrementaldecoder("utf-8")("replace"), "", 0
    with os.fdopen(fd, "rb") as f:
        while got < max_bytes:
            chunk = f.read(min(CHUNK, max_bytes - got))
            if not chunk:
                break
            got += len(chunk)
            text = carry + clean_log_text(decoder.decode(chunk))
            if holding and holding not in text:
                carry = text[text.rfind("\n") + 1:][:CHUNK]
                continue
            lines = text.split("\n")
            carry = lines.pop()[:CHUNK]
            yield from lines
    if carry:
        yield carry


def _json(text: str):
    """The JSON document in `text`, or None: NaN/Infinity, deep nesting (the C parser's recursion) and integers too
    long to print (Python's own digit limit) are not what any of these files hold."""
    try:
        doc = json.loads(text, parse_constant=_no_constant)
        return None if walk_problem(doc) else clean_doc(doc)
    except (ValueError, RecursionError):
        return None


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _add_dump(out: Inputs, path: str, doc: dict, form: str) -> None:
    rank = flight.rank_from_name(path)
    if rank is not None and rank >= flight.MAX_WORLD:
        out.refused.append({"path": path, "why": f"a flight-recorder dump for rank {rank}, past any job's "
                                                 f"{flight.MAX_WORLD} ranks"})
        return
    if rank is None:
        out.refused.append({"path": path, "why": "a flight-recorder dump whose file name ends in no rank number "
                                                 "(torch names them <prefix><rank>)"})
        return
    if rank in out.dumps and out.dumps[rank].form == "pickle" and form == "json":
        out.read.append({"path": path, "kind": "flight_recorder", "note": f"rank {rank}: its pickle was read"})
        return
    try:
        out.dumps[rank] = flight.normalise(doc, rank, path, form)
        live = flight.live_self(doc, rank)
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:  # hostile, not a traceback
        out.refused.append({"path": path, "why": f"a flight-recorder dump that cannot be read ({type(exc).__name__})"})
        return
    clock = slow.clock_of(doc, rank)
    if clock:
        out.clocks[rank] = clock
    sampled = phase.of_doc(doc, rank, flight.LIVE_KEY)
    if sampled:
        out.phases[rank] = sampled
    if live:
        out.hosts[rank] = live["who"]
        if live["where"]:
            out.where[rank] = live["where"]
    out.read.append({"path": path, "kind": "flight_recorder", "note": f"rank {rank} ({form})"})


def _add_stacks(out: Inputs, path: str, text: str) -> None:
    got = stacks.parse(clean_log_text(text), path)
    if got is None or got["rank"] >= flight.MAX_WORLD:
        out.refused.append({"path": path, "why": "a stacks file whose header names no rank"})
        return
    out.stacks[got["rank"]] = got
    out.read.append({"path": path, "kind": "stacks", "note": f"rank {got['rank']}: {clip(got['reason'], 80)}"})


def _classify_json(out: Inputs, path: str, doc) -> bool:
    if flight.is_dump(doc):
        _add_dump(out, path, doc, "json")
    elif isinstance(doc, dict) and doc.get("schema") == flight.UNANSWERED_SCHEMA and isinstance(doc.get("ranks"), dict):
        # `ncclcheck watch --dump`: the registered ranks that did not answer it, and why
        for r, why in list(doc["ranks"].items())[:flight.MAX_UNANSWERED]:
            if isinstance(r, str) and r.isdigit() and int(r) < flight.MAX_WORLD and isinstance(why, str):
                out.unanswered[int(r)] = clip(why, 200)
                who = doc.get("hosts", {}).get(r) if isinstance(doc.get("hosts"), dict) else None
                if isinstance(who, dict) and isinstance(who.get("host"), str):
                    local = who.get("local_rank")
                    out.hosts[int(r)] = {"host": clip(who["host"], 200),
                                         "local_rank": local if type(local) is int and local >= 0 else None}
        ends = doc.get(flight.ENDS_KEY)
        for r, v in list(ends.items())[:flight.MAX_UNANSWERED] if isinstance(ends, dict) else ():
            said = stacks.from_record(int(r), v, f"{path} (rank {r}'s word in the job's store)") \
                if isinstance(r, str) and r.isdigit() and int(r) < flight.MAX_WORLD else None
            if said is not None:
                out.stacks[int(r)] = said
        if isinstance(doc.get("observer"), str):
            out.observer = clip(doc["observer"], 200)
        out.read.append({"path": path, "kind": "flight_recorder", "note": f"{len(out.unanswered)} rank(s) that did "
                                                                          "not answer ncclcheck watch"})
    elif isinstance(doc, dict) and isinstance(doc.get("communicators"), list):
        out.ras.append((path, json.dumps(doc)))  # doc was cleaned when read (_json)
        out.read.append({"path": path, "kind": "ncclras", "note": ""})
    elif isinstance(doc, dict) and doc.get("schema") == "ncclcheck.report/1":
        out.reports.append((path, doc))
        out.read.append({"path": path, "kind": "ncclcheck_report", "note": clip(str(doc.get("command")), 20)})
    elif launcher.is_error_file(doc):
        rec = launcher.error_file_record(doc)
        out.error_files.append({"path": path, "rank": flight.rank_from_name(path), **rec})
        out.read.append({"path": path, "kind": "error_file", "note": ""})
    else:
        return False
    return True


NOT_A_JOB_LOG = "not a job's log: no line of torch, NCCL, gloo, CUDA, a launcher or a scheduler"


def _add_log(out: Inputs, scan: LogScan) -> None:
    """A text read: a log when it holds a line of torch, NCCL, gloo, CUDA, a launcher or a scheduler in that
    program's own shape (nccl/endings.PROGRAM), a launcher's table or a rank prefix; any other text (an installer's
    log, another program's error) is not a job's log, and neither is nothing but white space."""
    table = scan.failures()
    out.failures.extend(dict(r, source=scan.path) for r in table)
    if scan.launcher:  # torchrun's output without its table (the agent itself was stopped)
        out.launchers[scan.path] = scan.launcher
    if scan.known:
        out.logs.append(scan)
        kind = "launcher_output" if table or scan.launcher else "nccl_log" if scan.nccl_seen else "log"
        said = f"{len(table)} failed rank(s) in its table" if table else ""
    elif scan.has_text:  # a pip log, a Java heap error: no line of the programs a job's log is made of
        kind, said = "unrecognised", NOT_A_JOB_LOG
    else:
        kind, said = "unrecognised", ""
    out.read.append({"path": scan.path, "kind": kind, "note": "; ".join(x for x in (said, scan.note()) if x)})


def _stream_log(out: Inputs, path: str, f, data: bytes, size: int, room: Room, source: str,
                deadline: Optional[float] = None) -> int:
    """A text log through LogScan, `data` (its start, already read) first; the bytes read. `path` is its name as
    the report shows it, `source` the name it is read again under (postmortem/context.py). Past HEAD_BYTES, the
    middle is skipped where the file is larger than MAX_TEXT_BYTES, or where its rest would not be read by
    `deadline` (time.monotonic()) at the rate it was read so far."""
    scan = LogScan(path, room, source)
    began = time.monotonic()
    scan.feed(data)
    got = len(data)
    skip_at = HEAD_BYTES if size > MAX_TEXT_BYTES else None
    while got < MAX_TEXT_BYTES:  # a file still growing stops here too
        if skip_at is not None and got >= skip_at:
            tail = size - (MAX_TEXT_BYTES - got)
            if tail > f.tell():
                scan.gap(tail - f.tell())
                f.seek(tail)
            skip_at = None
        elif deadline is not None and got >= HEAD_BYTES:
            _skip_for_time(scan, f, size, got, time.monotonic() - began, deadline)
        chunk = f.read(min(CHUNK, MAX_TEXT_BYTES - got))
        if not chunk:
            break
        scan.feed(chunk)
        got += len(chunk)
    scan.close()
    _add_log(out, scan)
    return got


def _skip_for_time(scan: LogScan, f, size: int, got: int, took: float, deadline: float) -> None:
    """The rest of a log that would not be read by the deadline, at the rate of its `got` bytes in `took` s: the
    start of it skipped, leaving what fits (at least MIN_TAIL_BYTES)."""
    left = size - f.tell()
    if left <= MIN_TAIL_BYTES:
        return
    spare = deadline - time.monotonic()
    if took <= 0 or got <= 0:
        return  # no rate measured yet
    can = max(MIN_TAIL_BYTES, min(left, int(got / took * spare))) if spare > 0 else MIN_TAIL_BYTES
    if can < left:
        scan.timed = True
        scan.gap(left - can)
        f.seek(size - can)


def _add_pickle(out: Inputs, path: str, data: bytes) -> None:
    try:
        doc = clean_doc(loads_plain(data))
    except RefusedPickle as exc:
        out.refused.append({"path": path, "why": f"a pickle refused unread: {exc}"})
        return
    except ValueError as exc:
        out.refused.append({"path": path, "why": f"a pickle refused: {exc}"})
        return
    if flight.is_dump(doc):
        _add_dump(out, path, doc, "pickle")
    else:
        out.refused.append({"path": path, "why": "a pickle that is not a flight-recorder dump"})


def _json_lines(data: bytes) -> bool:
    """Does the text start with a whole JSON document on its first line (a log of JSON lines, not one document)?"""
    first, nl, _ = data.partition(b"\n")
    return bool(nl) and _json(first.decode("utf-8", errors="replace")) is not None


def _read_one(out: Inputs, path: str, f, size: int, room: Room, source: str,
              deadline: Optional[float] = None) -> int:
    """One open file recognised and read; the bytes read. A pickle whole (up to MAX_DUMP_BYTES + 1, so a larger one
    is named), a stacks file up to MAX_STACKS_BYTES, a JSON document up to MAX_JSON_BYTES, a log streamed. `path`:
    its name as the report shows it (clean_name); `source`: its name on disk."""
    head = f.read(CHUNK)
    if not head:
        _empty(out, path)
        return 0
    if is_pickle(head[:2]):
        data = head + f.read(max(0, MAX_DUMP_BYTES + 1 - len(head)))
        _add_pickle(out, path, data)
        return len(data)
    if head.startswith(stacks.HEADER.encode()):
        data = head + f.read(max(0, MAX_STACKS_BYTES - len(head)))
        _add_stacks(out, path, data.decode("utf-8", errors="replace"))
        return len(data)
    if head.lstrip()[:1] == b"{":
        data = head + f.read(max(0, MAX_JSON_BYTES + 1 - len(head)))
        if len(data) > MAX_JSON_BYTES and not _json_lines(data):
            out.refused.append({"path": path, "why": f"JSON larger than {MAX_JSON_BYTES >> 20} MiB"})
            return len(data)
        doc = _json(data.decode("utf-8", errors="replace")) if len(data) <= MAX_JSON_BYTES else None
        if doc is not None and _classify_json(out, path, doc):
            return len(data)
        head = data  # not one of those documents: a log that starts with "{"
    if _binary(head):
        out.read.append({"path": path, "kind": "unrecognised", "note": "binary"})
        return len(head)
    if ras_text_header(head):  # ncclras's text report: read whole (bounded like a JSON document), not as a log
        data = head + f.read(max(0, MAX_JSON_BYTES - len(head)))
        text = clean_log_text(data.decode("utf-8", errors="replace"))
        if looks_like_ras_text(text):
            out.ras.append((path, text))
            out.read.append({"path": path, "kind": "ncclras", "note": "text report"})
            return len(data)
        head = data
    return _stream_log(out, path, f, head, size, room, source, deadline)


def read_inputs(paths: list[str]) -> Inputs:
    """Every file under `paths`, recognised and parsed. Unreadable or hostile files are listed, never fatal."""
    out = Inputs()
    named = {os.path.normpath(p) for p in paths}
    total = 0
    seen: dict = {}  # (device, inode) -> the name it was read under
    room = Room()  # what all the logs may keep together
    deadline = time.monotonic() + READ_SECONDS
    for source in expand(paths):
        path = clean_name(source)  # the name every line of the report shows; the file is opened by its own
        if total > MAX_TOTAL_BYTES:
            out.refused.append({"path": path, "why": f"not read: {MAX_TOTAL_BYTES >> 30} GiB were read already "
                                                     "(name the job's own directory)"})
            continue
        try:
            fd = _open(source, os.path.normpath(source) in named)
        except NotRegular as exc:
            out.refused.append({"path": path, "why": str(exc)})
            continue
        except OSError as exc:
            out.refused.append({"path": path, "why": f"cannot read it ({exc.strerror or exc})"})
            continue
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            first = seen.setdefault((st.st_dev, st.st_ino), path)
            if first != path:
                _same_file(out, path, first)
                continue
            try:
                total += _read_one(out, path, f, st.st_size, room, source, deadline)
            except OSError as exc:
                out.refused.append({"path": path, "why": f"cannot read it ({exc.strerror or exc})"})
    return out


def _same_file(out: Inputs, path: str, first: str) -> None:
    """A file already read under another name: listed as what it was, not read again."""
    was = next((r for r in reversed(out.read) if r["path"] == first), None)
    if was is None:
        out.refused.append({"path": path, "why": f"the same file as {first}, refused there"})
    else:
        out.read.append({"path": path, "kind": was["kind"], "note": f"the same file as {first}: read once"})


def _empty(out: Inputs, path: str) -> None:
    """A zero-byte file: where torch writes a dump (a name ending in a rank), a rank killed while dumping (issue
    32), not "no dumps"; anything else empty is named as such."""
    rank = flight.rank_from_name(path)
    name = os.path.basename(path)
    if rank is not None and rank < flight.MAX_WORLD and not name.startswith("error"):
        out.refused.append({"path": path, "why": f"rank {rank}'s dump is empty: killed while dumping?",
                            "empty_dump": rank})
    else:
        out.refused.append({"path": path, "why": "empty (0 bytes)"})


def load_preflight(path: Optional[str]) -> Optional[dict]:
    """--preflight RUN.json: a saved ncclcheck report (UsageError when it is not one)."""
    if not path:
        return None
    from ..model import load_saved_report

    return load_saved_report(path, f"--preflight {path}")
