"""How the live plane authenticates (docs/trust.md, "Live requests"): the job's token, a MUNGE credential of the job's
user, or nothing, decided on each side from its own configuration (never from what a peer says, so a stranger cannot
talk watch down to believing unsealed replies).

- `token` (NCCLCHECK_TOKEN, its file, a mounted Secret): requests, replies and the store's records are sealed with it.
- `munge` (inside a Slurm job where munged runs, no token): watch makes a random session key and one credential that
  only its own uid may decode (`munge -u UID`), holding the key and the job's master port; every request carries
  the credential and is sealed with the key, every reply too. A responder decodes a credential once (`unmunge`, as
  work: rate-limited like any other), checks it was made by its own uid for its own master port, and keeps the key
  for the next requests. Records in the store are not signed at this level: a stranger can overwrite one (watch
  then names that rank as answering with garbage or not answering), never answer in a rank's name.
- `none`: nothing is sealed.
"""

from __future__ import annotations

import collections
import json
import os
import re
import secrets
import time
from collections.abc import Mapping
from typing import Optional

from ..facts import munge
from ..rendezvous.budget import Budget
from ..rendezvous.store import Guard
from . import wire

PAYLOAD_TAG = "ncclcheck-live-session/1"
CACHE = 16  # credentials a responder remembers (a watcher makes one per run): decoded keys and refusals alike
DECODES = 4  # new credentials a responder decodes at once; then one per Budget.live_munge_every_s


class Busy(Exception):
    """Too many new credentials at once: the asker is told to ask again (watch does, within its bound)."""


def choose(token: Optional[bytes], env: Mapping[str, str]) -> str:
    """This side's level: a token, else munge inside a Slurm job where munged runs (NCCLCHECK_TRUST=none turns
    munge off), else none. Watch and the responders of one job decide alike from alike configurations."""
    if token:
        return "token"
    if (env.get("NCCLCHECK_TRUST") or "auto").strip() == "none":
        return "none"
    if munge.in_slurm_job(env) and munge.available() and munge.running(env):
        return "munge"
    return "none"


class Session:
    """watch's side: how its requests are sealed and its replies opened, at its level."""

    def __init__(self, level: str, token: Optional[bytes], master_port: int, budget: Budget,
                 env: Optional[Mapping[str, str]] = None) -> None:
        self.level, self.port, self.budget = level, master_port, budget
        self.env = os.environ if env is None else env
        self._key = secrets.token_bytes(32) if level == "munge" else None
        self.guard = Guard(token=token if level == "token" else self._key)
        self._cred: Optional[str] = None
        self._made = 0.0

    def cred(self) -> str:
        """The credential holding this session's key, made again once half its time to live has passed (--follow
        may watch for hours); MungeError when munged does not make one."""
        assert self._key is not None
        ttl = self.budget.live_munge_ttl_s
        if self._cred is None or not self.budget.within(self._made, ttl / 2):
            payload = json.dumps({"v": PAYLOAD_TAG, "key": self._key.hex(), "port": self.port}).encode()
            self._cred = munge.encode(payload, munge.my_uid(), int(ttl), self.budget.munge_s,
                                      munge.socket_path(self.env))
            self._made = time.monotonic()
        return self._cred

    def request(self, challenge: str, doc: dict) -> bytes:
        if self.level == "munge":
            doc = {**doc, "cred": self.cred()}
        return wire.seal(self.guard, wire.request_key(challenge), doc)

    def open_reply(self, challenge: str, data: bytes, limit: int = wire.MAX_REPLY) -> tuple[Optional[object], str]:
        """(the reply, "") or (None, why): inflated within `limit` bytes when it came packed, then opened."""
        try:
            data = wire.unpack(data, limit)
        except wire.WireError as exc:
            return None, str(exc)
        return wire.open_sealed(self.guard, wire.reply_key(challenge), data)


class Keys:
    """A responder's side at level munge: credential -> the watcher's session key (or why it was refused), each
    credential decoded once."""

    def __init__(self, master_port: int, budget: Budget, env: Optional[Mapping[str, str]] = None) -> None:
        self.port, self.budget = master_port, budget
        self.sock = munge.socket_path(os.environ if env is None else env)
        self._seen: collections.OrderedDict = collections.OrderedDict()  # cred -> (key or None, why)
        self._tokens, self._filled = float(DECODES), time.monotonic()

    @staticmethod
    def of(data: bytes) -> tuple[Optional[str], str]:
        """The credential a sealed request carries, read before its seal is checked (the seal needs its key), or
        why there is none."""
        parts = data.split(b":", 3)
        if len(parts) != 4 or not data.startswith(b"ncclcheck-hmac2:"):
            return None, "not sealed (this rank answers only requests with a munge credential of the job's user)"
        try:
            doc = json.loads(parts[3].decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None, "not JSON"
        cred = doc.get("cred") if isinstance(doc, dict) else None
        if not isinstance(cred, str) or len(cred) > munge.MAX_CRED or not re.fullmatch(r"MUNGE:[A-Za-z0-9+/=]+:",
                                                                                        cred):
            return None, "no munge credential (this rank answers only requests with one of the job's user)"
        return cred, ""

    def known(self, cred: str) -> Optional[tuple[Optional[bytes], str]]:
        """(key, "") or (None, why) for a credential decoded before, None for a new one."""
        return self._seen.get(cred)

    def decode(self, cred: str) -> tuple[Optional[bytes], str]:
        """unmunge it (bounded by Budget.munge_s): made by this process's uid, for this job's master port. At most
        DECODES new credentials per Budget.live_munge_every_s x DECODES (an unmunge is a process: a stranger's flood
        of made-up credentials must not fork one per request); past it, Busy."""
        got = self._seen.get(cred)
        if got is not None:
            return got
        now = time.monotonic()
        self._tokens = min(DECODES, self._tokens + (now - self._filled) / self.budget.live_munge_every_s)
        self._filled = now
        if self._tokens < 1:
            raise Busy("busy: too many new munge credentials at once; ask again in a moment")
        self._tokens -= 1
        try:
            d = munge.decode(cred, self.budget.munge_s, self.sock)
            if d.uid != munge.my_uid():
                raise munge.MungeError(f"a credential of uid {d.uid}, not of this job's user ({munge.my_uid()})")
            p = json.loads(d.payload.decode("utf-8"))
            if not isinstance(p, dict) or p.get("v") != PAYLOAD_TAG or not isinstance(p.get("key"), str) \
                    or not re.fullmatch(r"[0-9a-f]{64}", p["key"]):
                raise munge.MungeError("a credential that holds no watch session key")
            if p.get("port") != self.port:
                raise munge.MungeError(f"a credential made for master port {p.get('port')!r}, not this job's "
                                       f"{self.port}")
            got = (bytes.fromhex(p["key"]), "")
        except (munge.MungeError, ValueError, UnicodeDecodeError) as exc:
            got = (None, f"its munge credential: {str(exc)[:160]}")
        self._seen[cred] = got
        while len(self._seen) > CACHE:
            self._seen.popitem(last=False)
        return got
