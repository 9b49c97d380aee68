"""The --shared-dir step of preflight: prove that each directory is ONE filesystem every node shares and can write.

    shared = exchange(store, rank, world_size, dirs, deadline_s, budget, need_bytes)   # every node leader, once

Node 0 writes a per-run nonce file into each directory (write-then-COMPLETE: create, fsync, rename) and publishes
the plan (a random tag naming every file of this run, the nonce, its directories) in the store. Every node then
writes its own marker the same way, proves it can create/fsync/rename/read/delete a probe file, reads node 0's
nonce (retrying, with a growing pause, up to `deadline_s`: NFS attribute caches may hide a new file for seconds;
how long it took is reported), measures a small bounded write/read figure, and publishes its report. Node 0 reads
every report and looks for every node's marker (retrying for the nodes that saw its nonce; one look for the others,
which already showed they see another filesystem), then publishes `done`.

Who removes what, so that nothing is left even when a node dies mid-check: every name of a run is derived from the
tag and a node rank, so node 0 can remove all of them without listing the directory. Each node removes its own
probe and throughput files at once, and its marker after node 0's `done` (on a filesystem node 0 cannot see, only
the node itself can). Node 0 removes the nonce and every node's names (a dead node's included) once it has looked.
A node that loses node 0 (the store went away, or `done` never came) removes the nonce and every name it can see.

Node 0 returns every node's report (validated: what a peer publishes may be hostile), the others their own; the
judgement is checks/storage.py's. The store is used through set/get_now/add only.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any, Optional

from ..checks import CROSS, CrossInput, run_checks
from ..facts import storage as fs
from ..model import CheckResult
from ..rendezvous.budget import Budget

PREFIX = ".ncclcheck-"
THROUGHPUT_BYTES = 8 << 20  # "a few MiB": enough to leave the page cache's first burst, small enough for seconds
THROUGHPUT_MIN_BYTES = 256 << 10  # below this a figure says more about latency than throughput: not measured
THROUGHPUT_FREE_SHARE = 8  # the probe never takes more than 1/8 of the free space (a nearly full disk stays usable)
MAX_DIRS = 64  # a plan or report with more directories than this is not ours
MAX_TEXT = 300  # characters of a path or error kept from a peer's report
_TAG = re.compile(r"^[0-9a-f]{12}$")
_NONCE = re.compile(r"^[0-9a-f]{32}$")


def names(tag: str, rank: int) -> list:
    """The files node `rank` may create in a directory during run `tag` (each also as NAME.tmp)."""
    base = f"{PREFIX}{tag}-node{rank}"
    return [base, f"{base}-probe", f"{base}-tput"]


def nonce_name(tag: str) -> str:
    return f"{PREFIX}{tag}-nonce"


def _path(d: str, name: str) -> str:
    return f"{d.rstrip('/')}/{name}" if d != "/" else f"/{name}"


class _Pause:
    """A growing pause between looks (fixed bounds from the Budget), never past the deadline."""

    def __init__(self, budget: Budget, end: float) -> None:
        self.s, self.max_s, self.end = budget.shared_poll_s, budget.shared_poll_max_s, end
        self.growth = budget.shared_poll_growth

    def sleep(self) -> bool:
        """Sleep once; False when the deadline has passed (no more looks)."""
        left = self.end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(self.s, left))
        self.s = min(self.max_s, self.s * self.growth)
        return True


def exchange(store: Any, rank: int, world_size: int, dirs: tuple, deadline_s: float,
             budget: Optional[Budget] = None, need_bytes: Optional[int] = None) -> dict:
    """This node's part of the step (see the module). Node 0 returns {"tag", "dirs", "nodes": {rank: report|None},
    "markers": [{rank: after_us|None}] per dir, "cleanup": [errors per dir]}; the others {"tag", "nodes": {rank:
    own report}}. Raises what the store raises when it is lost, after removing what this node can."""
    budget = budget or Budget()
    dirs = tuple(str(d) for d in dirs)[:MAX_DIRS]
    if rank == 0:
        return _lead(store, world_size, dirs, deadline_s, budget)
    return _follow(store, rank, world_size, dirs, deadline_s, budget)


# ---------------------------------------------------------------------------------------------------------------
# One node's own part: marker, probe, nonce, throughput


def _own_part(rank: int, dirs: list, tag: str, nonce: str, deadline_s: float, budget: Budget) -> dict:
    marker_body = f"{tag} {rank}\n".encode()
    per: list = []
    for d in dirs:
        per.append({"path": d[:MAX_TEXT], "marker": fs.write_complete(d, names(tag, rank)[0], marker_body)})
    # Every node looks for the nonce; the wait is one bound for all directories together.
    start, end = time.monotonic(), time.monotonic() + deadline_s
    want = nonce.encode()
    # A directory that is not there (ENOENT, ENOTDIR) cannot show the nonce: no wait for it.
    pending = {i for i in range(len(dirs)) if per[i]["marker"].get("errno") not in ("ENOENT", "ENOTDIR")}
    looks = 0
    pause = _Pause(budget, end)
    while True:
        looks += 1
        for i in sorted(pending):
            if (fs.read_small(_path(dirs[i], nonce_name(tag))) or b"").strip() == want:
                per[i].update(nonce_seen=True, nonce_after_us=int(budget.since(start) * 1e6), looks=looks)
                pending.discard(i)
        if not pending or not pause.sleep():
            break
    for i in range(len(dirs)):
        per[i].setdefault("nonce_seen", False)
        per[i].setdefault("nonce_after_us", None)
        per[i].setdefault("looks", looks if i in pending else 0)
    for i, d in enumerate(dirs):
        per[i]["probe"] = _probe(d, names(tag, rank)[1])
        per[i]["throughput"] = _throughput(d, names(tag, rank)[2], budget)
    return {"node_rank": rank, "dirs": per}


def _probe(d: str, name: str) -> dict:
    """create, write, fsync, rename, read back, delete: the checkpoint pattern end to end, as this node's user."""
    body = b"ncclcheck write probe\n"
    res = fs.write_complete(d, name, body)
    if not res["ok"]:
        return res
    p = _path(d, name)
    if fs.read_small(p) != body:
        fs.remove(p)
        return dict(res, ok=False, step="read back", error="the file just written reads back differently")
    err = fs.remove(p)
    if err is not None:
        return dict(res, ok=False, step="delete", error=err)
    return res


def _throughput(d: str, name: str, budget: Budget) -> dict:
    free = (fs.space(d) or {}).get("free_bytes")
    nbytes = THROUGHPUT_BYTES if not isinstance(free, int) else min(THROUGHPUT_BYTES, free // THROUGHPUT_FREE_SHARE)
    if nbytes < THROUGHPUT_MIN_BYTES:
        return {"bytes": 0, "write_us": None, "read_us": None, "cache_dropped": False,
                "skipped": f"too little free space to measure without filling it ({free} bytes free)"}
    return fs.throughput(d, name, nbytes, time.monotonic() + budget.shared_io_s)


# ---------------------------------------------------------------------------------------------------------------
# Node 0


def _lead(store: Any, world_size: int, dirs: tuple, deadline_s: float, budget: Budget) -> dict:
    tag, nonce = secrets.token_hex(6), secrets.token_hex(16)
    written = [fs.write_complete(d, nonce_name(tag), f"{nonce}\n".encode()) for d in dirs]
    out: dict = {"tag": tag, "dirs": list(dirs), "nonce_written": written, "nodes": {}, "markers": [],
                 "cleanup": []}
    try:
        store.set("plan", {"tag": tag, "nonce": nonce, "dirs": list(dirs)})
        own = _own_part(0, list(dirs), tag, nonce, deadline_s, budget)
        nodes: dict = {0: own}
        markers: list = [{0: _seen_after(own, i)} for i in range(len(dirs))]
        start = time.monotonic()
        # Others got the plan about when we did: their nonce wait, their writes in every directory, a grace.
        end = start + deadline_s + budget.shared_io_s * max(1, len(dirs)) + budget.shared_grace_s
        pause = _Pause(budget, end)
        while True:
            if store.add("reports", 0) > len(nodes) - 1:
                for r in range(1, world_size):
                    if r not in nodes and (v := store.get_now(f"node/{r}")) is not None:
                        nodes[r] = clean_report(v, r, len(dirs))
            _look_for_markers(dirs, tag, nodes, markers, world_size, start)
            if (len(nodes) >= world_size and not _worth_waiting(nodes, markers, start, deadline_s)) \
                    or not pause.sleep():
                break
        out["nodes"] = {r: nodes.get(r) for r in range(world_size)}
        out["markers"] = markers
        store.set("done", {"tag": tag})
    finally:
        out["cleanup"] = [fs.remove_all(d, [nonce_name(tag)] + [n for r in range(world_size) for n in names(tag, r)])
                          for d in dirs]
    return out


def _seen_after(report: dict, i: int) -> Optional[int]:
    return 0 if report["dirs"][i]["marker"].get("ok") else None


def _look_for_markers(dirs: tuple, tag: str, nodes: dict, markers: list, world_size: int, start: float) -> None:
    """One look for each marker not yet seen whose node may still make it visible."""
    for i, d in enumerate(dirs):
        for r in range(1, world_size):
            if markers[i].get(r) is not None:
                continue
            rep = nodes.get(r)
            if rep is not None and not _marker_expected(rep, i) and r in markers[i]:
                continue  # it wrote none, or it sees another filesystem: one look was enough
            body = fs.read_small(_path(d, names(tag, r)[0]))
            markers[i][r] = int(Budget.since(start) * 1e6) if body == f"{tag} {r}\n".encode() else None


def _marker_expected(rep: dict, i: int) -> bool:
    d = rep["dirs"][i] if i < len(rep["dirs"]) else {}
    return bool((d.get("marker") or {}).get("ok")) and bool(d.get("nonce_seen"))


def _worth_waiting(nodes: dict, markers: list, start: float, deadline_s: float) -> bool:
    """A marker still unseen from a node that saw our nonce (the same filesystem): its file will show up once the
    attribute cache expires, so keep looking within the bound."""
    if time.monotonic() - start >= deadline_s:
        return False
    return any(markers[i].get(r) is None and _marker_expected(rep, i)
               for r, rep in nodes.items() if r != 0 and rep is not None for i in range(len(markers)))


# ---------------------------------------------------------------------------------------------------------------
# Every other node


def _follow(store: Any, rank: int, world_size: int, dirs: tuple, deadline_s: float, budget: Budget) -> dict:
    plan = None
    pause = _Pause(budget, time.monotonic() + deadline_s + budget.shared_grace_s)
    while (plan := clean_plan(store.get_now("plan"))) is None and pause.sleep():
        pass
    if plan is None:
        return {"tag": None, "nodes": {rank: None}, "error": "node 0 published no --shared-dir plan in time"}
    tag, n0dirs = plan["tag"], plan["dirs"]
    # The same directory by position; a node given fewer --shared-dir flags than node 0 checks node 0's path.
    mine = [dirs[i] if i < len(dirs) else n0dirs[i] for i in range(len(n0dirs))]
    lost = True
    try:
        own = _own_part(rank, mine, tag, plan["nonce"], deadline_s, budget)
        store.set(f"node/{rank}", own)
        store.add("reports", 1)
        # Node 0 looks for our marker within deadline_s after the last report, then publishes `done`; one grace
        # more than node 0's own bound, so that a live node 0 is not taken for a dead one.
        pause = _Pause(budget, budget.deadline(budget.shared_follower_s(deadline_s, len(mine))))
        while store.get_now("done") is None and pause.sleep():
            pass
        lost = store.get_now("done") is None
        return {"tag": tag, "nodes": {rank: own}, "node0_done": not lost}
    finally:
        for d in mine:
            # Node 0 removed what it could see; ours on a filesystem it cannot see, and everything if it is gone.
            fs.remove_all(d, names(tag, rank) + ([nonce_name(tag)] + [n for r in range(world_size)
                                                                      for n in names(tag, r)] if lost else []))


# ---------------------------------------------------------------------------------------------------------------
# What a peer published, checked (trust model: type- and size-checked, nothing executed)


def clean_plan(v: object) -> Optional[dict]:
    if not isinstance(v, dict):
        return None
    tag, nonce, dirs = v.get("tag"), v.get("nonce"), v.get("dirs")
    if not (isinstance(tag, str) and _TAG.match(tag) and isinstance(nonce, str) and _NONCE.match(nonce)):
        return None
    if not isinstance(dirs, list) or len(dirs) > MAX_DIRS or not all(isinstance(d, str) and d for d in dirs):
        return None
    return {"tag": tag, "nonce": nonce, "dirs": [d[:4096] for d in dirs]}


def _text(v: object) -> Optional[str]:
    return v[:MAX_TEXT] if isinstance(v, str) else None


def _int(v: object) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62 else None


def _op(v: object) -> dict:
    v = v if isinstance(v, dict) else {}
    return {"ok": v.get("ok") is True, "step": _text(v.get("step")), "error": _text(v.get("error")),
            "errno": _text(v.get("errno")), "elapsed_us": _int(v.get("elapsed_us"))}


def clean_report(v: object, rank: int, ndirs: int) -> Optional[dict]:
    """A peer's report with only the expected keys, each of the expected type; None when it is not a report."""
    if not isinstance(v, dict) or not isinstance(v.get("dirs"), list):
        return None
    out = []
    for d in v["dirs"][:ndirs]:
        d = d if isinstance(d, dict) else {}
        t = d.get("throughput") if isinstance(d.get("throughput"), dict) else {}
        out.append({"path": _text(d.get("path")), "marker": _op(d.get("marker")), "probe": _op(d.get("probe")),
                    "nonce_seen": d.get("nonce_seen") is True, "nonce_after_us": _int(d.get("nonce_after_us")),
                    "looks": _int(d.get("looks")),
                    "throughput": {"bytes": _int(t.get("bytes")) or 0, "write_us": _int(t.get("write_us")),
                                   "read_us": _int(t.get("read_us")), "cache_dropped": t.get("cache_dropped") is True,
                                   "error": _text(t.get("error")), "skipped": _text(t.get("skipped"))}})
    return {"node_rank": rank, "dirs": out}


# ---------------------------------------------------------------------------------------------------------------
# One node, no world: the same step against a store in memory


class LocalStore:
    """The store of a one-node run: the set/get_now/add the step uses, in this process's memory."""

    def __init__(self) -> None:
        self.values: dict = {}

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def get_now(self, key: str) -> Any:
        return self.values.get(key)

    def add(self, key: str, n: int) -> int:
        self.values[key] = int(self.values.get(key) or 0) + n
        return self.values[key]


def standalone_checks(facts: dict, node_rank: int, hostname: str, dirs: tuple, budget: Budget) -> list:
    """The storage checks of a one-node run: writable, space, throughput (storage.shared is a skip: proving a
    filesystem shared needs a second node)."""
    if not dirs:
        return []
    out = exchange(LocalStore(), 0, 1, dirs, budget.shared_dir_s, budget)
    res: list[CheckResult] = run_checks(CROSS, CrossInput([(node_rank, hostname, facts)], shared=out), "storage.")
    return res
