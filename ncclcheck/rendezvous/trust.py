"""Whom a node believes: the run's signing key and nonce, however the job got them (docs/trust.md).

Levels, the first one this node can use (every node of a job decides alike, from its own configuration, never from
what it reads in the store, so a stranger cannot talk a node down to a weaker level):
- `token`: NCCLCHECK_TOKEN / --token-file / NCCLCHECK_TOKEN_FILE / a mounted Kubernetes Secret (config.read_token);
- `munge`: inside a Slurm job with munge installed: node 0 makes a random per-run key and publishes it in a MUNGE
  credential that only the job's user can decode (`munge -u UID`); a member decodes it (`unmunge`), checks that the
  job's user made it for this master port, and signs with it;
- `shared-file`: with --shared-dir: node 0 writes the per-run key into a 0600 file in the first shared directory and
  publishes its name; a member reads it there (owner and mode checked, no symlink);
- `none`: no key: values are not signed (what holds without a key is in docs/trust.md).

With any key, node 0 also makes a per-run nonce (the run) and every signed value carries it (rendezvous/store.py), so
records replayed from another run signed with the same key are refused and named. A member learns the run from a
signed answer to its own fresh challenge (`trust/hello` -> `trust/seal/<challenge>`), so a replayed answer, or a
whole replayed set of records, never matches. Node 0's Sealer thread answers challenges until the run ends.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from ..facts import munge
from ..model import TRUST_LEVELS
from .budget import Budget
from .journal import Journal
from .store import PRERUN, RUN_CHARS, JsonStore

log = logging.getLogger(__name__)

HELLO = PRERUN.rstrip("/")  # journal of members' challenges: trust/hello/count, trust/hello/<i>
SEAL = "trust/seal/{}"  # node 0's signed answer to challenge {}: {"run", "challenge", "port"}
OFFER = "trust/offer"  # node 0, unsigned: {"level": "munge", "cred"} or {"level": "shared-file", "name"}
LEVELS = TRUST_LEVELS  # the report's `trust.level` values, written once in model.py
# NCCLCHECK_TRUST: "auto" (munge under Slurm where munged runs), "shared-file" (also a per-run file in --shared-dir:
# opt-in, because a --shared-dir that is not shared, the very fault the storage checks name, failed the whole world
# in the trust step first), "none" (a token only)
MODES = ("auto", "shared-file", "none")
FILE_PREFIX = ".ncclcheck-trust-"
MAX_FILE = 4096
PAYLOAD_TAG = "ncclcheck-trust/1"


class TrustError(RuntimeError):
    """This node cannot establish the run's trust; the message is one line and says why."""


@dataclass
class Trust:
    """The level this process ran at, how its key came, and (at the end) the records it ignored."""

    level: str = "none"
    source: str = ""

    def to_json(self, ignored: Optional[list] = None) -> dict:
        d: dict = {"level": self.level, "source": self.source}
        if ignored:
            d["ignored"] = list(ignored)
        return d


def choose(token: bool, mode: str, slurm: bool, munge_ok: bool, shared_dir: Optional[str]) -> str:
    """The level this node expects (pure: the same inputs on every node give the same level)."""
    if token:
        return "token"
    if mode == "none":
        return "none"
    if slurm and munge_ok:
        return "munge"
    if shared_dir and mode == "shared-file":
        return "shared-file"
    return "none"


def _hex(v: Any, n: int) -> bool:
    return isinstance(v, str) and len(v) == n and re.fullmatch(r"[0-9a-f]+", v) is not None


def _payload(raw: bytes, port: int, what: str) -> bytes:
    """The key in a munge or shared-file payload, checked: JSON, tagged, for this master port."""
    try:
        d = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise TrustError(f"{what} does not hold ncclcheck's per-run key") from None
    if not isinstance(d, dict) or d.get("v") != PAYLOAD_TAG or not _hex(d.get("key"), 64):
        raise TrustError(f"{what} does not hold ncclcheck's per-run key")
    if d.get("port") != port:
        raise TrustError(f"{what} was made for master port {d.get('port')!r}, not this run's {port}")
    return bytes.fromhex(d["key"])


def _new_payload(key: bytes, port: int) -> bytes:
    return json.dumps({"v": PAYLOAD_TAG, "key": key.hex(), "port": port}).encode()


# ---------------------------------------------------------------------------------------------------------------
# Node 0


class Session:
    """Node 0's side for the run: the Sealer thread answering challenges, and the shared file to remove at the end.
    A member's session holds nothing. `close()` is idempotent and bounded."""

    def __init__(self, trust: Trust) -> None:
        self.trust = trust
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._file: Optional[str] = None
        self._budget: Optional[Budget] = None
        self._store: Optional[JsonStore] = None

    def start_sealer(self, st: JsonStore, port: int, cap: int, budget: Budget) -> None:
        self._budget, self._store = budget, st
        end = budget.deadline(budget.sealer_s)
        self._thread = threading.Thread(target=self._seal, args=(st, port, cap, end, budget), daemon=True,
                                        name="ncclcheck-sealer")
        self._thread.start()

    def _seal(self, st: JsonStore, port: int, cap: int, end: float, b: Budget) -> None:
        journal = Journal(st, HELLO, cap, _hello_record)
        run = st.guard.run
        try:
            while not self._stop.is_set() and not b.passed(end):
                for _, h in journal.read_since():
                    if h.get("stop"):
                        return
                    if h["port"] != port:
                        st.guard.reject(HELLO, f"a challenge for master port {h['port']}, not this run's {port}")
                        continue
                    st.set(SEAL.format(h["challenge"]), {"run": run, "challenge": h["challenge"], "port": port})
                if not journal.wait_next(min(end, b.deadline(b.wait_slice_s)), b) and journal.done >= cap:
                    return  # the counter reached its cap: nothing more can honestly arrive
        except Exception as exc:  # noqa: BLE001 - the store going away at the end ends the thread, nothing else
            if not self._stop.is_set():
                log.warning("the challenge answerer stopped: %s", exc)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._budget is not None:
            # Wake it from its blocking wait for the next challenge (node 0's own signed record, so no stranger can
            # stop it); it drops its store reference, which node 0 must release before the job's own store binds
            # the port (agree_exit_code's Lifeline).
            if self._thread.is_alive() and self._store is not None:
                try:
                    Journal(self._store, HELLO, 0).append({"stop": True})
                except Exception:  # noqa: BLE001 - the store already went: the thread's wait ends with it
                    pass
            self._thread.join(self._budget.thread_join_s)
            self._thread = None
        self._store = None
        if self._file:
            try:
                os.unlink(self._file)
            except OSError:
                pass
            self._file = None


def _hello_record(v: Any) -> Optional[str]:
    if v == {"stop": True}:  # node 0's own, at the end of the run
        return None
    if not isinstance(v, dict) or not _hex(v.get("challenge"), RUN_CHARS) or type(v.get("port")) is not int:
        return "not a challenge"
    return None


def offer(st: JsonStore, level: str, port: int, cap: int, budget: Budget, shared_dir: Optional[str] = None,
          token_source: str = "") -> Session:
    """Node 0: make the run (and, for munge and shared-file, the per-run key), publish what members need, and
    answer their challenges. Raises TrustError when the level's key cannot be handed out."""
    g = st.guard
    session = Session(Trust(level))
    if level == "none":
        return session
    if level == "token":
        session.trust.source = token_source
    else:
        key = secrets.token_bytes(32)
        if level == "munge":
            sock = munge.socket_path(os.environ)
            try:
                cred = munge.encode(_new_payload(key, port), munge.my_uid(), budget.munge_ttl_s, budget.munge_s, sock)
            except munge.MungeError as e:
                raise TrustError(f"node 0 could not make the run's munge credential: {e}") from None
            st.set(OFFER, {"level": "munge", "cred": cred})  # unsigned: it is its own proof
            session.trust.source = f"a munge credential from uid {munge.my_uid()}"
        elif level == "shared-file":
            assert shared_dir is not None
            name = FILE_PREFIX + secrets.token_hex(8)
            path = os.path.join(shared_dir, name)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(_new_payload(key, port))
            except OSError as exc:
                raise TrustError(f"node 0 could not write the run's key into {shared_dir}: "
                                 f"{exc.strerror or exc}") from None
            session._file = path
            st.set(OFFER, {"level": "shared-file", "name": name})
            session.trust.source = f"a 0600 file in {shared_dir}"
        g.token = key
    g.run = secrets.token_hex(RUN_CHARS // 2)
    session.start_sealer(st, port, cap, budget)
    return session


# ---------------------------------------------------------------------------------------------------------------
# Every other process


def _offer_record(level: str):
    def check(v: Any) -> Optional[str]:
        if not isinstance(v, dict) or not isinstance(v.get("level"), str):
            return "not a trust offer"
        if v["level"] != level:
            return f"a trust offer at level {v['level'][:20]!r}, where this node expects {level}"
        want = "cred" if level == "munge" else "name"
        if not isinstance(v.get(want), str) or len(v[want]) > munge.MAX_CRED:
            return f"a {level} offer without its {want}"
        if level == "shared-file" and not re.fullmatch(re.escape(FILE_PREFIX) + r"[0-9a-f]{16}", v["name"]):
            return "a shared-file offer whose name is not ncclcheck's"
        return None
    return check


def _read_key_file(path: str, port: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise FileNotFoundError(exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        s = os.fstat(f.fileno())
        if not stat.S_ISREG(s.st_mode):
            raise TrustError(f"{path} is not a regular file")
        if s.st_uid != munge.my_uid() or s.st_mode & 0o077:
            raise TrustError(f"{path} is not this user's private file (uid {s.st_uid}, mode "
                             f"{oct(stat.S_IMODE(s.st_mode))})")
        raw = f.read(MAX_FILE + 1)
    if len(raw) > MAX_FILE:
        raise TrustError(f"{path} is larger than a key file")
    return _payload(raw, port, path)


def accept(st: JsonStore, level: str, port: int, cap: int, deadline: float, budget: Budget,
           shared_dir: Optional[str] = None, token_source: str = "") -> Session:
    """A member: take the run's key as its level says, then learn the run from node 0's answer to a fresh
    challenge. Raises TrustError (one line) when it cannot: the world is then not one this node may believe."""
    session = Session(Trust(level))
    if level == "none":
        return session
    if level == "token":
        session.trust.source = token_source
    else:
        v = st.wait_get(OFFER, deadline, budget, _offer_record(level))
        if v is None:
            why = st.rejected[-1] if st.rejected and st.rejected[-1].startswith(OFFER) else "none published"
            raise TrustError(f"node 0 offered no {level} key this node can use ({why})")
        if level == "munge":
            try:
                d = munge.decode(v["cred"], budget.munge_s, munge.socket_path(os.environ))
            except munge.MungeError as e:
                raise TrustError(f"node 0's munge credential does not decode here: {e}") from None
            if d.uid != munge.my_uid():
                raise TrustError(f"node 0's munge credential was made by uid {d.uid}, not by this job's user "
                                 f"({munge.my_uid()})")
            st.guard.token = _payload(d.payload, port, "node 0's munge credential")
            session.trust.source = f"a munge credential from uid {d.uid}"
        else:
            assert shared_dir is not None
            path = os.path.join(shared_dir, v["name"])
            pause = budget.shared_poll_s
            while True:  # a shared file system may show another client's new file late (NFS attribute caches)
                try:
                    st.guard.token = _read_key_file(path, port)
                    break
                except FileNotFoundError as exc:
                    if budget.passed(deadline):
                        raise TrustError(f"node 0's key file {path} never appeared here ({exc}): is {shared_dir} "
                                         "shared by every node?") from None
                time.sleep(min(pause, budget.remaining(deadline)))
                pause = budget.next_retry(pause, budget.shared_poll_max_s)
            session.trust.source = f"a 0600 file in {shared_dir}"
    handshake(st, port, cap, deadline, budget)
    return session


def wait_believed(st: JsonStore, key: str, deadline: float, budget: Budget, check=None) -> Any:
    """wait_get that keeps waiting past a value it ignored (unsigned, a replay, malformed): node 0 writes each record
    once, so a forgery written before it is overwritten by the real one, which this node then reads. None at the
    deadline. A stranger who rewrites the key faster than this looks can still make the run fail, never pass."""
    while True:
        v = st.wait_get(key, deadline, budget, check)
        if v is not None or budget.passed(deadline) or not st.has(key):
            return v
        time.sleep(min(budget.journal_pending_s, budget.remaining(deadline)))


def _seal_record(challenge: str, port: int):
    def check(v: Any) -> Optional[str]:
        if not isinstance(v, dict) or not _hex(v.get("run"), RUN_CHARS) or v.get("challenge") != challenge \
                or v.get("port") != port:
            return "not node 0's answer to this node's challenge"
        return None
    return check


def handshake(st: JsonStore, port: int, cap: int, deadline: float, budget: Budget) -> str:
    """Ask node 0 for the run with a fresh challenge; the signed answer sets this process's run (guard.run)."""
    challenge = secrets.token_hex(RUN_CHARS // 2)
    Journal(st, HELLO, cap).append({"challenge": challenge, "port": port})
    key = SEAL.format(challenge)
    v = wait_believed(st, key, deadline, budget, _seal_record(challenge, port))
    if v is None:
        bad = [r for r in st.rejected if r.startswith(key)]
        raise TrustError("node 0 never answered this node's challenge with the job's key"
                         + (f" ({bad[-1].split(': ', 1)[1]})" if bad else ""))
    st.guard.run = v["run"]
    return v["run"]
