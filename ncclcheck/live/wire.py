"""The live protocol between an armed rank's responder and `ncclcheck watch`: frames, requests, authentication.

One TCP connection carries one request. The responder speaks first: a hello frame with a fresh random challenge
and whether it requires the job's key. The watcher sends one request frame; the responder sends one reply frame and
closes. A frame is a 4-byte big-endian length and that many bytes of JSON. With a job key (NCCLCHECK_TOKEN, docs/
trust.md) the request and the reply are sealed with the store's own HMAC (rendezvous/store.py's Guard.seal/open,
the scheme every signed store value uses), over a key that names the challenge: a captured request answers no
other connection, and a reply is believed only from a responder that knows the key. Nothing in a request is ever
executed or used as a path: it names one of KINDS, nothing else; a "reach" request also names up to MAX_REACH rank
numbers, whose addresses the responder reads from the job's store itself (never from the request: a request that
could name an address would make every armed rank a port scanner for whoever can reach it).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import struct
from typing import Any, Optional

from ..rendezvous.budget import Budget
from ..rendezvous.store import Guard

VERSION = "ncclcheck-live/1"
KINDS = ("progress", "stacks", "flight", "all", "reach", "clock", "blob", "rate")  # what a watcher may ask (the
# last three: live/pace.py, a slow job's clocks and probe); anything else is refused
MAX_REACH = 64  # ranks one "reach" request may name: a responder connects to at most this many others
MAX_REQUEST = 4096  # bytes of one request frame: a request is a few dozen bytes of JSON
MAX_HELLO = 4096  # bytes of the responder's hello
MAX_REPLY = 64 << 20  # bytes of one reply: a flight recorder of 20,000 entries and every thread's stack fit
HEADER = struct.Struct("!I")
CHALLENGE_CHARS = 32
PREFIX = "ncclcheck/live/"  # the job store's keys: PREFIX + "world", PREFIX + "rank/<r>"


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
    return None


def reach_ranks(req: Any) -> Optional[list]:
    """The ranks a "reach" request names, or None when it names them badly (not a list of at most MAX_REACH
    distinct non-negative ints)."""
    ranks = req.get("ranks") if isinstance(req, dict) else None
    if not isinstance(ranks, list) or not 0 < len(ranks) <= MAX_REACH \
            or not all(type(r) is int and 0 <= r < 1 << 24 for r in ranks) or len(set(ranks)) != len(ranks):
        return None
    return ranks


class WireError(ValueError):
    """A frame that is not one this side accepts (too large, cut short, not JSON); the message is one line."""


def request_key(challenge: str) -> str:
    return f"{PREFIX}request/{challenge}"


def reply_key(challenge: str) -> str:
    return f"{PREFIX}reply/{challenge}"


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(HEADER.pack(len(data)) + data)


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


def recv_frame(sock: socket.socket, limit: int, end: float, budget: Budget) -> bytes:
    """One frame's bytes, at most `limit` of them (a larger announced length is refused before it is read)."""
    (n,) = HEADER.unpack(_recv_exact(sock, HEADER.size, end, budget))
    if n > limit:
        raise WireError(f"a frame of {n:,} bytes, over the {limit:,}-byte limit")
    return _recv_exact(sock, n, end, budget)


def loads(data: bytes) -> Any:
    """JSON only: NaN/Infinity and deep nesting refused (what arrives may be hostile)."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise WireError("not JSON") from None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


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
