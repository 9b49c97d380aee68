"""The live protocol between an armed rank's responder and `ncclcheck watch`: frames, requests, records, authentication.

One TCP connection carries one request at a time. The responder speaks first: a hello frame with a fresh random
challenge, how it authenticates (`auth`: "token", "munge" or "none"), and the job and run it belongs to. The watcher
sends one request frame; the responder sends one reply frame and closes, or, when the request it accepted says
`"keep": true`, greets again with a new challenge and waits idle for the next request within Budget.live_keep_s (the
first idle connection a new one's admission evicts): watch's second look and its re-asks reuse the first look's
connections. A responder that does not know `keep` closes, and the watcher connects again at once. A frame is a
4-byte big-endian length and that many
bytes of JSON; a request that says `"pack": "gzip"` takes its reply gzipped where that is smaller (the flight
recorder's JSON shrinks ~20x: a look does not fill the slow link it is there to find, issue 65), the sealed bytes
packed whole, and the asker inflates them within what it asked for before the seal is checked. With a job key
(NCCLCHECK_TOKEN, docs/trust.md) the request and the reply are sealed with the store's own HMAC
(rendezvous/store.py's Guard.seal/open, the scheme every signed store value uses), over a key that names the
challenge: a captured request answers no other connection, and a reply is believed only from a responder that
knows the key. Under munge (a Slurm job without a token) the watcher's request carries a MUNGE credential that only
the job's user can decode, holding the watcher's own session key, and the request and the reply are sealed with that
key (live/auth.py). Nothing in a request is ever executed or used as a path: it names one of KINDS, nothing else; a
"reach" request also names up to MAX_REACH rank numbers, whose addresses the responder reads from the job's store
itself (never from the request: a request that could name an address would make every armed rank a port scanner for
whoever can reach it).

Every record, request and reply carries the job's id (the launcher's) and the run's nonce (made once per job attempt
by the first responder to register, in PREFIX + "world"): a record or a request of another job or run is refused and
named, so records copied from one job's store into another's never point its watch at the first job's ranks.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import struct
import zlib
from typing import Any, Optional

from ..clean import load_json
from ..postmortem.stacks import from_record
from ..rendezvous.budget import Budget
from ..rendezvous.store import Guard

VERSION = "ncclcheck-live/2"
# What a watcher may ask, and which of the responder's workers does it: "answer" (this process's own data, built
# at once) or "reach" (connects to other ranks, up to Budget.live_reach_s). Anything else is refused and named. A
# new kind is a row here and a branch in Responder.work.
# "clock", "phase", "blob" and "rate" are a slow job's (live/pace.py): rate downloads a blob from other ranks, as reach
# connects; phase samples the rank's own progress for a few seconds (a worker of its own: the others stay free).
KINDS = {"progress": "answer", "stacks": "answer", "flight": "answer", "all": "answer", "reach": "reach",
         "clock": "answer", "phase": "phase", "blob": "answer", "rate": "reach"}
# The kinds that make a responder connect somewhere (reach, rate) or send something large (blob): one guard for all
# of them, live/peers.py (ranks of this job only, signed records where the level signs them, a hello-only answer at
# the bound's end otherwise, a blob only to a rank of this job), each charged to the responder's Spend (loop.py).
GUARDED = ("reach", "rate", "blob")
# The kinds the responder's connection loop answers itself, the moment it read the request (no worker's queue
# between: a clock read after one is later than the request by that queue's wait, on the shared 2-core machine of
# scripts/bench_live.py a round trip of 6 ms at the median); a reply as cheap as a hello, within the loop's CPU share.
AT_ONCE = ("clock",)
MAX_REACH = 64  # ranks one "reach" request may name: a responder connects to at most this many others
MAX_REQUEST = 4096  # bytes of one request frame: a request is a few dozen bytes of JSON (and a munge credential)
MAX_HELLO = 4096  # bytes of the responder's hello
MAX_REPLY = 64 << 20  # bytes of one reply: a flight recorder of 20,000 entries and every thread's stack fit
# The least a watcher may ask for: a reply trimmed to less says little (its progress, its groups, each group's newest
# entry and a few more still fit). A look shares its memory among the ranks: at 4,096 ranks the share is ~12 KiB,
# and a floor above it (16 KiB, 1,024 values) made honest replies overflow the look (issue 56).
MIN_REPLY = 4 << 10
MIN_ITEMS = 256  # ... and in JSON values
HEADER = struct.Struct("!I")
CHALLENGE_CHARS = 32
RUN_CHARS = 32
MAX_LINE = 200  # characters of a source line or a name in a reply
MAX_JOB = 128  # characters of a job id (agent/launchers.job_id: the launcher's, sanitised)
PREFIX = "ncclcheck/live/"  # the job store's keys: PREFIX + "world", PREFIX + "rank/<r>"
WORLD_KEY = PREFIX + "world"
AUTH = ("token", "munge", "none")  # how a responder authenticates requests (its hello says which)
PACK = "gzip"  # a request's "pack": the asker takes its reply gzipped (an older responder ignores it and sends JSON)
PACK_MIN = 4 << 10  # bytes: a reply shorter than this goes as it is (a progress or a clock reply: nothing to gain)
PACK_LEVEL = 1  # zlib's fastest: 954 KB of a lab rank's recorder in 2.6 ms of CPU, 21x smaller (level 6: 28x, 6.6 ms)
GZIP_MAGIC = b"\x1f\x8b"  # what a packed reply starts with; JSON and a sealed value (store.SIGNED) never do
NEVER_PACKED = ("blob", "clock")  # a blob's bytes are what a rate probe measures; a clock's reply is a few dozen


def rank_key(r: int) -> str:
    return f"{PREFIX}rank/{r}"


def end_key(r: int) -> str:
    """Where rank r leaves its word on how it ended (raised, sys.exit, told to stop): the stacks file's header, for a
    watch that finds the rank gone (training/arm.py writes it beside the file; watch reads it beside the records)."""
    return f"{PREFIX}end/{r}"


# A counter each rank raises once its end record is written: a watch that finds none (or 0) reads no end key (at 4,096
# ranks, finding thousands of absent keys absent costs ~2 store requests a rank: 0.35 s). Anything else (a stranger's
# value, a number no world reaches) reads every end key; a stranger who sets it to 0 hides the ends from watch, as
# one who deletes the keys does.
ENDS_KEY = PREFIX + "ends"


def end_problem(r: int, v: Any) -> Optional[str]:
    """Why the store's end record of rank r is not one (None when it is): this protocol's version, rank, job and
    run, and the stacks file's fields (postmortem/stacks.from_record checks each)."""
    if not isinstance(v, dict) or v.get("v") != VERSION or v.get("rank") != r:
        return "not a live rank's end record"
    if not isinstance(v.get("job"), str) or len(v["job"]) > MAX_JOB or not _hex(v.get("run"), RUN_CHARS):
        return "it names no job and run"
    if from_record(r, v, "") is None:
        return "its fields are not a stacks file's (a reason, short texts)"
    return None


def _hex(v: Any, n: int) -> bool:
    return isinstance(v, str) and len(v) == n and re.fullmatch(r"[0-9a-f]+", v) is not None


def world_problem(v: Any) -> Optional[str]:
    """Why PREFIX + "world" is not a live job's world record (None when it is one)."""
    if not isinstance(v, dict) or type(v.get("world_size")) is not int or not 0 < v["world_size"] <= 1 << 24:
        return "not a world size"
    if type(v.get("attempt")) is not int or not isinstance(v.get("job"), str) or len(v["job"]) > MAX_JOB \
            or not _hex(v.get("run"), RUN_CHARS):
        return "not a live job's world record (job, run, attempt)"
    return None


def record_problem(r: int, v: Any) -> Optional[str]:
    """Why the store's record of rank r is not a live rank's (None when it is one): what watch and a responder
    asked to reach rank r both check before connecting anywhere."""
    if not isinstance(v, dict) or v.get("v") != VERSION or v.get("rank") != r:
        return "not a live rank's record"
    try:
        ipaddress.ip_address(v.get("addr"))
    except ValueError:
        return "its address is not an IP address"
    if type(v.get("port")) is not int or not 0 < v["port"] < 65536 or type(v.get("attempt")) is not int:
        return "its port or attempt is not a number"
    if not isinstance(v.get("host"), str) or len(v["host"]) > 255:
        return "its host is not a name"
    if not isinstance(v.get("job"), str) or len(v["job"]) > MAX_JOB or not _hex(v.get("run"), RUN_CHARS) \
            or type(v.get("world_size")) is not int:
        return "it names no job and run"
    return None


def foreign(v: dict, job: str, run: str, what: str = "record") -> Optional[str]:
    """Why a checked record (or reply, or request) belongs to another job or run than (job, run), None when it is
    this one's: the words watch and the responders name it with."""
    if v.get("job") != job:
        return f"its {what} is another job's (job {str(v.get('job'))[:40]!r}, run {str(v.get('run'))[:8]}; this job " \
               f"is {job!r}, run {run[:8]})"
    if v.get("run") != run:
        return f"its {what} is another run's (run {str(v.get('run'))[:8]}; this job's run is {run[:8]})"
    return None


def reach_ranks(req: Any) -> Optional[list]:
    """The ranks a "reach" request names, or None when it names them badly (not a list of at most MAX_REACH
    distinct non-negative ints)."""
    ranks = req.get("ranks") if isinstance(req, dict) else None
    if not isinstance(ranks, list) or not 0 < len(ranks) <= MAX_REACH \
            or not all(type(r) is int and 0 <= r < 1 << 24 for r in ranks) or len(set(ranks)) != len(ranks):
        return None
    return ranks


def reply_limit(req: dict) -> tuple[int, int]:
    """(bytes, JSON values) the asker takes in one reply: its `max_bytes` (within MIN_REPLY..MAX_REPLY) and its
    `max_items` (at least MIN_ITEMS)."""
    n, k = req.get("max_bytes"), req.get("max_items")
    return (MAX_REPLY if type(n) is not int else max(MIN_REPLY, min(MAX_REPLY, n)),
            MAX_REPLY if type(k) is not int else max(MIN_ITEMS, k))


def count_items(data: bytes) -> int:
    """An upper bound on the JSON values in data, from its raw bytes (no object built): every value but the first
    follows a comma or opens a container; a comma or a bracket inside a string only raises the count."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


class WireError(ValueError):
    """A frame that is not one this side accepts (too large, cut short, not JSON); the message is one line."""


def request_key(challenge: str) -> str:
    return f"{PREFIX}request/{challenge}"


def reply_key(challenge: str) -> str:
    return f"{PREFIX}reply/{challenge}"


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(HEADER.pack(len(data)) + data)


def frame(data: bytes) -> bytes:
    return HEADER.pack(len(data)) + data


def _recv_exact(sock: socket.socket, n: int, end: float, budget: Budget) -> bytes:
    chunks, got = [], 0
    while got < n:
        if budget.passed(end):
            raise TimeoutError("no complete frame within the bound")
        sock.settimeout(budget.left(end))
        try:
            part = sock.recv(min(n - got, 1 << 20))
        except TimeoutError:  # socket.timeout: said as the bound, like the check above
            raise TimeoutError("no complete frame within the bound") from None
        if not part:
            raise WireError(f"the connection closed after {got} of {n} bytes")
        chunks.append(part)
        got += len(part)
    return b"".join(chunks)


def recv_header(sock: socket.socket, limit: int, end: float, budget: Budget) -> int:
    """A frame's announced length, refused (WireError) when over `limit`, before any of its bytes is read."""
    (n,) = HEADER.unpack(_recv_exact(sock, HEADER.size, end, budget))
    if n > limit:
        raise WireError(f"a frame of {n:,} bytes, over the {limit:,}-byte limit")
    return n


def recv_frame(sock: socket.socket, limit: int, end: float, budget: Budget) -> bytes:
    """One frame's bytes, at most `limit` of them (a larger announced length is refused before it is read)."""
    return _recv_exact(sock, recv_header(sock, limit, end, budget), end, budget)


def recv_body(sock: socket.socket, n: int, end: float, budget: Budget) -> bytes:
    return _recv_exact(sock, n, end, budget)


def wants_packed(req: Any, kind: str) -> bool:
    """Does this request take its reply gzipped (live/responder.py packs it where it is smaller)?"""
    return isinstance(req, dict) and req.get("pack") == PACK and kind not in NEVER_PACKED


def pack(data: Any) -> Optional[bytes]:
    """A reply's bytes (bytes, or a tuple of parts sent one after another) gzipped, None when that is not smaller or
    the reply is under PACK_MIN."""
    parts = data if isinstance(data, tuple) else (data,)
    size = sum(len(p) for p in parts)
    if size < PACK_MIN:
        return None
    z = zlib.compressobj(PACK_LEVEL, zlib.DEFLATED, 31)
    out = b"".join(z.compress(p) for p in parts) + z.flush()
    return out if len(out) < size else None


def unpack(data: bytes, limit: int) -> bytes:
    """A reply as it was before pack(): gzipped ones inflated to at most `limit` bytes (WireError past it: a small
    hostile frame that inflates to gigabytes is refused at the asker's own bound), anything else as it came."""
    if not data.startswith(GZIP_MAGIC):
        return data
    z = zlib.decompressobj(31)
    try:
        out = z.decompress(data, limit + 1)
    except zlib.error:
        raise WireError("not gzip") from None
    if len(out) > limit:
        raise WireError(f"a packed reply of over {limit:,} bytes inflated")
    if not z.eof or z.unused_data or z.unconsumed_tail:
        raise WireError("a packed reply cut short or with bytes after its end")
    return out


def loads(data: bytes) -> Any:
    """JSON only: NaN/Infinity and deep nesting refused (what arrives may be hostile); every string cleaned where it
    enters (clean.load_json: no control character, bidirectional override or lone surrogate reaches a report)."""
    try:
        return load_json(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise WireError("not JSON") from None


def seal(guard: Guard, key: str, doc: Any) -> bytes:
    """The JSON of doc, signed with the job's key when there is one (Guard.seal; unsigned without a key)."""
    return guard.seal(key, json.dumps(doc, separators=(",", ":"), default=str).encode())


def open_sealed(guard: Guard, key: str, data: bytes) -> tuple[Optional[Any], str]:
    """(the document, "") or (None, why): with a key, only a value signed with it for this key is believed."""
    text, why = guard.open(key, data)
    if text is None:
        return None, why
    try:
        return loads(text), ""
    except WireError as exc:
        return None, str(exc)
