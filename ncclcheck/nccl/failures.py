"""The one table of failure messages NCCL, Gloo, torch.distributed, CUDA, the launchers and the schedulers print,
each class with its usual cause and fix: the rows of failures_nccl.py, failures_torch.py and failures_jobs.py (each
built from its program's own format strings, cited there), read as one table. nccl/failclass.py says what a row is.

`cause` says whether a message names a cause (fix it first) or a consequence of something that happened elsewhere
(a peer died, a rank never came, NCCL warned in words no row knows): `diagnose` names the earliest cause as the root
cause and lists consequences after it; with none, "the job failed, the cause is not in this text" quotes them. ROUTINE
lines are what healthy jobs print (a store poll, a plugin not found, a retry): never a failure, whatever words they
share with one. Pure: a line in, a classification out.

Every pattern here runs on what a job printed, so each runs in time linear in the line (nccl/linear.py): no `.*` inside
a regex (`Then(A, B)` is A and later B on the same line), and `classify` cuts the line at MAX_LINE_CHARS and runs a
pattern only on a line holding its literals (the prefilter: most lines of a log meet no pattern at all). Where two rows
could match one line, the lower level wins (failclass.py): the line's own words first, then its family, then generic.

Some lines only report a failure said better elsewhere: torch's wrapper of an NCCL error ("NCCL error in: ...,
invalid usage (run with NCCL_DEBUG=WARN for details)", is_wrapper) stands for the NCCL WARN of the same rank that
says what happened (NCCL's own line, or the "Last error:" text torch prints under it); where its words name a cause
(unhandled system error, a CUDA error) it is one only where no such line exists. A class whose message names the ranks
involved (names_ranks: "rank 0 and rank 1 both on CUDA device 60") is one fault of those ranks, not one per rank that
printed it.
"""

from __future__ import annotations

import re
from typing import Optional

from . import failures_jobs, failures_nccl, failures_torch, subsystems
from .failclass import CONSEQUENCE, GENERIC, FailureClass, cause, rx
from .linear import MAX_LINE_CHARS, Either, Prefilter, Then, fold, leading, start_of

__all__ = ["FailureClass", "Either", "Then", "classify", "TABLE", "ROUTINE", "BY_ID"]

_PROGRAMS = (failures_nccl, failures_torch, failures_jobs)
# Lines that are routine, not failures: checked before TABLE, so they never become a cause.
ROUTINE = Either(*(p for m in _PROGRAMS for p in m.ROUTINE))
CONNECT_RETRY = failures_nccl.CONNECT_RETRY  # NCCL's retried connect: routine, but a text may end inside them

# NCCL's result for a system call that failed (ncclSystemError: "unhandled system error"), as torch's wrapper and
# nccl-tests report it: which call, and why, is NCCL's WARN (/dev/shm, memlock, a socket, systemd RemoveIPC)
_SYSTEM_ERROR = FailureClass("unhandled_system_error", rx(r"unhandled system error"), False,
                             "NCCL reported that a system call failed (its result: 'unhandled system error'); its own "
                             "WARN line, which names the call, is not in this text",
                             "rerun with NCCL_DEBUG=WARN (or INFO) to see which call failed",
                             level=CONSEQUENCE, source="NCCL ncclGetErrorString(ncclSystemError)")

# One table, the lower level first (the order of the programs' rows within a level): `classify` names the first row
# that matches, which is the one the levels choose.
TABLE: tuple = tuple(sorted((*failures_nccl.ROWS, *failures_torch.ROWS, _SYSTEM_ERROR, *failures_jobs.ROWS),
                            key=lambda c: c.level))
# A Python exception that ended a process, when no class above names its message (postmortem/analyze.py finds the
# line that ends a traceback): the process failed, and its own words are the best-supported cause there is.
EXCEPTION = FailureClass("exception", rx(r"$^"), True, "raised an exception",
                         "read the exception and the traceback above it in that rank's output")
# ncclcheck's guard raised PreflightFailed in the job (its preflight failed): the job never trained, and the guard's
# first failing check is why (its report's other lines are ncclcheck's own, never read as the job's causes)
GUARD_FAILED = FailureClass("guard_failed", rx(r"$^"), True, "ncclcheck's guard stopped the job before training",
                            "fix what the guard's first failing check names (its fix line; the full report is on "
                            "global rank 0's stderr), then relaunch")
# A connection to a peer that failed at a loopback address, in a job that spans hosts: the peers advertise 127.x,
# which on another host is that host itself. Their hostname resolves to loopback (Debian and Ubuntu map it to
# 127.0.1.1 in /etc/hosts), and gloo, c10d and NCCL's bootstrap bind to what the hostname resolves to. Read from a
# connection failure's own words and the hosts the evidence shows (postmortem/analyze.py), never from a pattern alone:
# on one host, a refusal at 127.0.0.1 is a peer that is not there.
LOOPBACK = cause("loopback_address", rx(r"$^"),
                 "a rank connected to a peer at a loopback address: the hostname resolves to 127.0.0.1 / 127.0.1.1, "
                 "so each rank advertised an address only its own host can reach (across hosts nothing listens there)",
                 "make the hostname resolve to a routable address on every node (/etc/hosts or DNS: `getent hosts "
                 "$(hostname)` must not print 127.x), or pin GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME to the "
                 "interface the nodes share (`ncclcheck recommend --format env`)")
# nccl-tests started (its header) and printed no result and no end: it hung, or was stopped, before its first
# collective finished; read from its output's shape (postmortem/logscan.py), no line says it
NO_PROGRESS = FailureClass("no_progress", rx(r"$^"), False,
                           "nccl-tests started and printed no result and no end: it hung (or was stopped) before its "
                           "first collective finished, with no error of its own",
                           "see the suspects: a hang with no error after init is most often GPU peer-to-peer (ACS, the "
                           "IOMMU)")
# NCCL's trace of an error going up its calls ("misc/socket.cc:567 -> 2", nccl/debuglog.py reads it among NCCL's
# facts): a rank whose lines show no failure of their own but this failed inside NCCL, which printed no WARN here
NCCL_ERROR_RETURN = FailureClass("nccl_error_return", rx(r"$^"), False,
                                 "NCCL returned an error (its trace 'file:line -> code' as the error went up its "
                                 "calls); the WARN that says why is not in this text",
                                 "the trace's first file names the part that failed (misc/socket.cc, bootstrap.cc: a "
                                 "connection between ranks; transport/: a transport; misc/shmutils.cc: /dev/shm); "
                                 "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET for the WARN line before it",
                                 level=CONSEQUENCE, source="src/include/checks.h NCCLCHECK")
# A rank that ended without error (exit code 0) while its peers still ran collectives: the ranks ran different numbers
# of steps (uneven data shards, a rank-dependent return or break). Its exit prints nothing; what shows it is a
# survivor's closed connection to a peer on its own host while the launcher that watches every rank of that host
# lists no other failure (postmortem/precedence.py)
EARLY_EXIT = cause("early_exit", rx(r"$^"),
                   "a rank ended without error (exit code 0) while its peers still ran collectives: the ranks ran "
                   "different numbers of steps or collectives (uneven data shards, a rank-dependent return or break)",
                   "make every rank run the same collectives to the end: the same number of batches on each rank "
                   "(DistributedSampler(drop_last=True), or torch.distributed.algorithms.Join for uneven inputs), no "
                   "return, break or sys.exit(0) on one rank before the last collective")
LOOPBACK_FROM = ("connection_refused", "no_route", "init_timeout", "peer_closed")
_LOOPBACK_ADDRESS = re.compile(r"(?<![\w.])127\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w.])|(?<![\w.])localhost(?![\w.])")
# 127.0.1.1 is no address a job picks: Debian's and Ubuntu's /etc/hosts give it to the host's own name, so a peer at
# 127.0.1.1 is a peer whose hostname resolved there, whether or not the text shows the job's other hosts
_HOSTNAME_LOOPBACK = re.compile(r"(?<![\w.])127\.0\.1\.1(?![\w.])")
# classes read from more than one line's pattern (an exception's end, the guard's report, loopback across hosts, a
# program that stopped showing progress, a peer that ended cleanly)
# read from what NCCL listed on each host (postmortem/inventory.py), beside a failure to connect
VIRTUAL_INTERFACE = cause("virtual_interface", rx(r"$^"),
                          "NCCL bootstrapped or sent over a container bridge or virtual interface (docker0, br-*, "
                          "veth*) whose address the other hosts cannot reach",
                          "set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the host's real interface on every node, "
                          "e.g. =eth0 or ^docker,br-,veth,lo to exclude the bridges; `ncclcheck recommend --format "
                          "env` names the interface every node reaches", source="NCCL's 'NET/Socket : Using' and "
                          "'Bootstrap : Using' lines")
READ_ELSEWHERE = (EXCEPTION, GUARD_FAILED, LOOPBACK, NO_PROGRESS, NCCL_ERROR_RETURN, EARLY_EXIT, VIRTUAL_INTERFACE,
                  *subsystems.PLACED)
BY_ID = {c.id: c for c in (*TABLE, *READ_ELSEWHERE)}


def loopback_peer(line: str) -> bool:
    """Does a connection failure's line name a loopback address as the other end?"""
    return _LOOPBACK_ADDRESS.search(line[:MAX_LINE_CHARS]) is not None


def hostname_loopback(line: str) -> bool:
    """Does it name 127.0.1.1, the address only a hostname mapped in /etc/hosts has?"""
    return _HOSTNAME_LOOPBACK.search(line[:MAX_LINE_CHARS]) is not None
# torch's wrapper of an NCCL error (C10D_NCCL_CHECK: "NCCL error in: <file>:<line>, <ncclGetErrorString>, NCCL version
# <v>"; NCCL's own string for most results ends "(run with NCCL_DEBUG=INFO for details)"): it says that NCCL failed,
# NCCL's WARN says why
_WRAPPER = re.compile(r"\bNCCL error in: |\(run with NCCL_DEBUG=\w{1,16} for details\)", re.IGNORECASE)
# the classes of a report of an NCCL error by its result alone (torch's "NCCL error in: ...", NCCL's own "unhandled
# system error"): wrappers, as _WRAPPER's lines are, of the WARN that says why
WRAPPER_CLASSES = ("nccl_error", "unhandled_system_error", "nccl_cuda_error")
# torch prints NCCL's last WARN under its wrapper (ncclGetLastError): "Last error:" alone, the text on the next line;
# behind whatever prefix a collector put before it ("2024-05-02 11:22:33 job-host | Last error:")
LAST_ERROR = re.compile(r"(?:^|[\s|\]>:])\s{0,8}Last error:\s*$")
_SEQ = re.compile(r"SeqNum=(\d+)|Timeout at NCCL work: (\d+)", re.IGNORECASE)
# the rank torch's c10d lines state inside the message: "[Rank 3]" (torch <= 2.1), "[PG 0 Rank 3]", "[PG 0 (default_pg)
# Rank 3]", "[PG ID 0 PG GUID 0(default_pg) Rank 3]" (2.4+); a launcher's prefix, where there is one, says it first
_SAID_RANK = re.compile(r"\[(?:PG [^\]\n]{0,120} )?Rank (\d{1,7})\]")
_OPTYPE = re.compile(r"OpType=(\w+)")


_ROUTINE = Prefilter([ROUTINE])
_TABLE = Prefilter([c.pattern for c in TABLE])
# Every literal some class (or ROUTINE) needs: a line holding none of them is classified None without a pattern run
LITERALS = tuple(sorted(set(_TABLE.literals)))
# What a match of any class (or ROUTINE) starts with: None when some class may start otherwise (then no line is
# classified by a part of it alone)
_LEADS = [leading(p) for p in (ROUTINE, *(c.pattern for c in TABLE))]
LEADING = None if any(x is None for x in _LEADS) else tuple(sorted(frozenset().union(*_LEADS)))


# NCCL before 2.3 wrote "host:pid:tid [dev] file.cu:line WARN msg", without the word NCCL: read as the later header
_OLD_WARN = re.compile(r"^((?:\[[^\]\n]{0,64}\] ?)?[\w.-]{1,255}:\d{1,10}:\d{1,10} \[-?\d{1,4}\] "
                       r"[^\s:]{1,200}:\d{1,6} )WARN ")


def as_nccl_warn(line: str) -> str:
    """The line with an old NCCL header's bare WARN read as "NCCL WARN" (other lines as they are)."""
    if " WARN " not in line or "NCCL WARN" in line:
        return line
    return _OLD_WARN.sub(r"\1NCCL WARN ", line, count=1)


# Classes whose words a rank's own text often holds (a data sample, a model's generated text, a forum post a script
# prints): their message counts only where a program's message starts (after the launcher's prefix: nothing but a
# program's own lead before it, message_starts), never in the middle of what a rank printed
AT_A_MESSAGE_START = ("cuda_oom", "cuda_fault", "device_assert")
# what a program puts before such a message: NCCL's header and its WARN/INFO word (cut at the last one), the words of
# NCCL's and torch's own formats; then each whitespace-separated word must be a program's lead (below)
_LEAD_PHRASES = re.compile(r"Cuda failure(?: [\w./-]{1,200}:\d{1,6}| -?\d{1,6})? '|"
                           r"(?i:cuda (?:runtime |driver )?error)(?: \(-?\d{1,6}\))?\s?: |what\(\):\s|"
                           r"terminate called after throwing an instance of '[^'\n]{0,200}'|"
                           r"Exception raised from |\bfailed with ")
_LEAD_WORD = re.compile(r"[\w.()<>/@\[\]'\":-]{1,160}:|[\d:.,TZ+/-]{1,40}|['\"]|(?:ERROR|WARNING|WARN|INFO|CRITICAL|"
                        r"FATAL|DEBUG|E|W|I|F)\]?")


def message_starts(before: str) -> bool:
    """Can a program's own message start after `before` (a line's text before a match, its launcher prefix off)? Its
    words are a program's lead: names and tags ending in a colon ("RuntimeError:", "torch.OutOfMemoryError:",
    "NVRM:", a host's label), time stamps and levels, bracketed fields ("[E1128 10:00:00.123 ProcessGroupNCCL.cpp:12]"),
    NCCL's header; a word of prose ("sample", "said") is a rank's own text. Linear: a split and one bounded match a
    word."""
    for mark in ("NCCL WARN ", "NCCL INFO "):
        k = before.rfind(mark)
        if k >= 0:
            before = before[k + len(mark):]
    words = _LEAD_PHRASES.sub(" ", before).split()
    depth = 0
    for w in words:
        if depth or w.startswith(("[", "(")):  # a bracketed field, whatever its words
            depth += w.count("[") + w.count("(") - w.count("]") - w.count(")")
            depth = max(depth, 0)
            continue
        if not _LEAD_WORD.fullmatch(w):
            return False
    return True


def classify(line: str) -> Optional[FailureClass]:
    """The failure class of one log line, or None (also for a ROUTINE line). The line is cut at MAX_LINE_CHARS;
    only the classes whose literals it holds are tried."""
    whole = as_nccl_warn(line[:MAX_LINE_CHARS])
    line = subsystems.without_location(whole)  # a row reads NCCL's message, never the file it was printed in
    low = fold(line)
    found = _TABLE.candidates(line, low)
    if not found or (_ROUTINE.candidates(line, low) and ROUTINE.search(line)):
        return None
    if line is not whole and (owner := subsystems.place(whole, BY_ID, owned=True)) is not None:
        return owner
    for i in found:
        if TABLE[i].pattern.search(line):
            if TABLE[i].id in AT_A_MESSAGE_START and not message_starts(line[:start_of(TABLE[i].pattern, line)]):
                continue  # the words inside what a rank printed, not a program's message
            if TABLE[i].level == GENERIC and TABLE[i].id == "nccl_warn":  # no row knows it: where it was printed
                return subsystems.place(whole, BY_ID) or TABLE[i]
            return TABLE[i]
    return None


def classify_every_row(line: str) -> Optional[FailureClass]:
    """What classify must name, without its prefilter: ROUTINE, then every row in order on the cut line (a row whose
    words a rank's own text holds only where a program's message starts). Tests and scripts/pattern_fuzz.py hold
    classify to it."""
    cut = line[:MAX_LINE_CHARS]
    if ROUTINE.search(cut):
        return None
    return next((c for c in TABLE if c.pattern.search(cut) and (
        c.id not in AT_A_MESSAGE_START or message_starts(cut[:start_of(c.pattern, cut)]))), None)


def is_wrapper(line: str) -> bool:
    """torch's wrapper text of an NCCL error: a consequence of the NCCL line that says what happened."""
    return _WRAPPER.search(line) is not None


def ranks_named(cls: FailureClass, line: str) -> list:
    """The ranks a message names as involved, sorted ([] when the class names none or the line does not)."""
    m = cls.names_ranks.search(line) if cls.names_ranks is not None else None
    return sorted({int(g) for g in m.groups() if g is not None}) if m else []


def said_rank(line: str) -> Optional[int]:
    """The rank a torch c10d line states of itself inside its message ("[PG 0 Rank 3] ..."), or None."""
    m = _SAID_RANK.search(line[:MAX_LINE_CHARS]) if "Rank " in line else None
    return int(m.group(1)) if m else None


# TCPStore's count of who joined ("Timed out after %d seconds waiting for clients. %d/%d clients joined.", "workers"
# before 2.3): one joined is the store's host (rank 0) alone
_JOINED = re.compile(r"\b(\d{1,7})/(\d{1,7}) (?:clients|workers) joined")
MAX_MISSING_NAMED = 64


# the other end a closed or failed connection names: NCCL's "Connection closed by remote peer %s<%d>", gloo's
# "Connection closed by peer [%s]:%d" / "Read error [%s]:%d" / "remote=[%s]:%d"
_PEER = re.compile(r"(?:closed by (?:remote )?peer|Read error|remote=)\s{0,4}\[?([\w.:%-]{1,255}?)\]?"
                   r"(?:<\d{1,5}>|:\d{1,5}\b)")


def peer_of(line: str) -> Optional[str]:
    """The peer a connection failure's line names, or None."""
    m = _PEER.search(line[:MAX_LINE_CHARS])
    return m.group(1) if m else None


# srun's "Node failure on %s" names the node Slurm lost; slurmstepd's "*** STEP ... CANCELLED AT ... DUE TO NODE
# FAILURE ..." is printed on the nodes that survived it: it names only where the step was cancelled
_LOST_NODE = re.compile(r"Node failure on ([\w.-]{1,64})")
_CANCELLED_FOR_A_NODE = re.compile(r"CANCELLED AT \S{1,40} DUE TO NODE FAILURE")


def lost_node(line: str) -> Optional[str]:
    """The node srun says Slurm lost, or None."""
    m = _LOST_NODE.search(line[:MAX_LINE_CHARS])
    return m.group(1) if m else None


def cancelled_for_a_node(line: str) -> bool:
    """slurmstepd's cancel of a step because a node of the job failed (a consequence where srun names the node)."""
    return _CANCELLED_FOR_A_NODE.search(line[:MAX_LINE_CHARS]) is not None


def ranks_about(cls: FailureClass, line: str) -> list:
    """The ranks a message is about (torch's monitored barrier naming who never came), sorted ([] when none)."""
    if cls.about is None:
        return []
    return sorted({int(m.group(1)) for m in cls.about.finditer(line[:MAX_LINE_CHARS])})


def store_joined(line: str) -> Optional[tuple]:
    """(joined, expected) of a store's timeout line ("7/8 clients joined"), or None."""
    m = _JOINED.search(line[:MAX_LINE_CHARS])
    return (int(m.group(1)), int(m.group(2))) if m else None


def store_missing(line: str, silent: Optional[set] = None) -> list:
    """The ranks a store's timeout shows never came: 1..N-1 when only its host joined; else the ranks of 0..N-1 that
    printed no line of their own (`silent`), when exactly as many as did not join ([] when it cannot tell)."""
    got = store_joined(line)
    if not got or not 1 <= got[0] < got[1] <= MAX_MISSING_NAMED + 1:
        return []
    if got[0] == 1:
        return list(range(1, got[1]))
    quiet = sorted(r for r in (silent or ()) if r < got[1])
    return quiet if len(quiet) == got[1] - got[0] else []


def seq_of(line: str) -> Optional[int]:
    """The collective sequence number a watchdog line names (SeqNum=N / Timeout at NCCL work: N)."""
    m = _SEQ.search(line[:MAX_LINE_CHARS])
    return int(m.group(1) or m.group(2)) if m else None


_WARN_TEXT = re.compile(r"NCCL WARN\s*(.*)")


def warn_text(line: str) -> str:
    """What an NCCL WARN line says, without its header."""
    m = _WARN_TEXT.search(as_nccl_warn(line[:MAX_LINE_CHARS]))
    return m.group(1).strip()[:300] if m else line.strip()[:300]


# what stands before a message's own words: torch's c10 log header ("[E ProcessGroupNCCL.cpp:828] ", "[rank0]:[E1123
# 07:32:03.371 1234 ProcessGroupNCCL.cpp:1575] "), glog's ("E1123 07:32:03.340000 1069 torch/.../api.py:986] "),
# Python logging's ("ERROR:torch.distributed.elastic.multiprocessing.api:"); each part bounded (a hostile line)
_HEADERS = re.compile(r"^(?:\[rank\d{1,7}\]:)?(?:\[[IWEF]\d{0,4}[^\]\n]{0,160}\] ?|"
                      r"[IWEF]\d{4} [\d:.]{8,20} {1,4}\d{1,10} [^\s\]]{1,300}\] ?|"
                      r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]{1,200}:)")
TELLING_CHARS = 300


def telling(line: str) -> str:
    """The words of a line that say what happened, to quote in a verdict: an NCCL WARN's text, else the line without
    the log header before it, at most TELLING_CHARS (from the message's start: the address, the path, the error
    string that tell are in its first words)."""
    if "NCCL WARN" in as_nccl_warn(line):
        return warn_text(line)
    return _HEADERS.sub("", line[:MAX_LINE_CHARS].strip(), count=1)[:TELLING_CHARS]


def optype_of(line: str) -> Optional[str]:
    m = _OPTYPE.search(line[:MAX_LINE_CHARS])
    return m.group(1).lower() if m else None
