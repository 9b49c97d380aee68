"""A group stalled inside a collective with every rank answering watch: which pair of its hosts cannot connect?

Every rank entered the collective, none finished it, all still answer: the stall is between them (a link cut between
two hosts, a NIC, a peer's GPU), and the flight recorders cannot say which. So watch asks one responder per host of
the group to connect (TCP, the kernel's handshake: a busy responder still completes it) to the other hosts'
responders, every host at once, one bound for all (Budget.live_reach_s), and reads the matrix: the pairs that do not
connect while both ends answer watch are the link; a host that reaches none of the others (and none reaches) is its
link; every pair connecting is said too (not a cut link: a NIC's or GPU's stall, or the transport's). A responder
connects only to the addresses of ranks of its own job registered in the job's store (wire.record_problem,
wire.foreign), never to one a request names; where those records are not signed with the job's token it reports
only whether each rank's own responder answered there (verify_one), never how a port behaved.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from ..preflight.probe import classify
from ..rendezvous.budget import Budget

THREADS = 16  # connects in flight at once from one responder (wire.MAX_REACH targets at most)
THREAD_NAME = "ncclcheck-live-reach"  # a responder's own threads never appear in the stacks it sends


def connect_one(addr: str, port: int, end: float, budget: Budget) -> dict:
    """{"ok", "kind", "ms"}: one TCP connect, bounded by `end`."""
    t0 = budget.now()
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(budget.left(end))
            s.connect((addr, port))
        return {"ok": True, "kind": "ok", "ms": round(budget.since(t0) * 1e3, 2)}
    except OSError as exc:
        return {"ok": False, "kind": classify(exc), "ms": round(budget.since(t0) * 1e3, 2)}


def connect_all(targets: dict, end: float, budget: Budget) -> dict:
    """{rank: connect_one(...)} for {rank: (addr, port)}, all at once, every connect bounded by `end`."""
    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=min(THREADS, len(targets)), thread_name_prefix=THREAD_NAME) as ex:
        futs = {r: ex.submit(connect_one, a, p, end, budget) for r, (a, p) in targets.items()}
        return {r: f.result() for r, f in futs.items()}


def verify_one(addr: str, port: int, rank: int, job: str, run: str, end: float, budget: Budget) -> dict:
    """{"ok", "kind"}: whether rank `rank`'s own responder (this job, this run) answered its hello at addr:port
    within `end`. Nothing else is said (not refused from open from silent, no time): the address came from a record
    anyone could have written, so what happened there must tell its writer nothing."""
    from . import wire

    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(budget.left(end))
            s.connect((addr, port))
            hello = wire.loads(wire.recv_frame(s, wire.MAX_HELLO, end, budget))
        ok = isinstance(hello, dict) and hello.get("v") == wire.VERSION and hello.get("rank") == rank \
            and hello.get("job") == job and hello.get("run") == run
    except (OSError, ValueError):
        ok = False
    return {"ok": ok, "kind": "ok" if ok else "unreached"}


def verify_all(targets: dict, job: str, run: str, end: float, budget: Budget) -> dict:
    """{rank: verify_one(...)} for {rank: (addr, port)}, all at once, bounded by `end`."""
    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=min(THREADS, len(targets)), thread_name_prefix=THREAD_NAME) as ex:
        futs = {r: ex.submit(verify_one, a, p, r, job, run, end, budget) for r, (a, p) in targets.items()}
        return {r: f.result() for r, f in futs.items()}


def pairs_to_ask(hosts: dict) -> dict:
    """{rank: [ranks it should connect to]} for {host: its probing rank}: every other host while they fit in one
    request (wire.MAX_REACH), else the two hosts on either side of it in the ring of hosts (what a ring algorithm's
    neighbours are): bounded work per responder at any scale."""
    from .wire import MAX_REACH

    order = [hosts[h] for h in sorted(hosts)]
    n = len(order)
    if n - 1 <= MAX_REACH:
        return {r: [x for x in order if x != r] for r in order}
    return {r: sorted({order[(i + d) % n] for d in (-2, -1, 1, 2)}) for i, r in enumerate(order)}


def cut_links(matrix: dict, host_of: dict) -> dict:
    """What the matrix {from_rank: {to_rank: connect_one's dict}} says, by host: {"failed": [[a, b, kind], ...]
    (a could not connect to b), "hosts": [a host that connected to none and none to it], "pairs": [[a, b]] (the
    failing pairs, each once, a host's own links left out when the host is named), "asked": responders that
    answered, "links": host pairs tried}."""
    failed = []
    tried: dict = {}
    for src, row in matrix.items():
        for dst, res in (row or {}).items():
            a, b = host_of.get(src), host_of.get(dst)
            if a is None or b is None:
                continue
            tried.setdefault(a, set()).add(b)
            tried.setdefault(b, set()).add(a)
            if not res.get("ok"):
                failed.append([a, b, res.get("kind") or "error"])
    bad: dict = {}
    for a, b, _ in failed:
        bad.setdefault(a, set()).add(b)
        bad.setdefault(b, set()).add(a)
    cut_off = sorted(h for h, peers in bad.items() if len(tried.get(h, ())) > 1 and peers == tried[h])
    pairs = sorted({tuple(sorted((a, b))) for a, b, _ in failed if a not in cut_off and b not in cut_off})
    links = len({tuple(sorted((a, b))) for a, peers in tried.items() for b in peers})
    return {"failed": sorted(failed), "hosts": cut_off, "pairs": [list(p) for p in pairs], "asked": len(matrix),
            "links": links}


def said(found: dict, n_hosts: int) -> Optional[str]:
    """One sentence of what cut_links found, None when nothing was asked."""
    if not found["asked"]:
        return None
    if found["hosts"]:
        one = len(found["hosts"]) == 1
        return (f"no connect between host{'' if one else 's'} {', '.join(found['hosts'])} and the group's other "
                f"hosts succeeded (TCP), while {'it answers' if one else 'they answer'} watch: "
                f"{'its link' if one else 'their links'} to them cut")
    if found["pairs"]:
        shown = "; ".join(f"{a} <-> {b}" for a, b in found["pairs"][:4])
        more = f" and {len(found['pairs']) - 4} more" if len(found["pairs"]) > 4 else ""
        dirs = {(a, b): k for a, b, k in found["failed"]}
        a, b = found["pairs"][0]
        how = ", ".join(f"{x} -> {y}: {dirs[(x, y)]}" for x, y in ((a, b), (b, a)) if (x, y) in dirs)
        rest = found["links"] - len(found["pairs"])
        return (f"the link between {shown}{more} does not connect (TCP; {how}) while both ends answer watch"
                + (f"; the other {rest} pair{'s' if rest != 1 else ''} of its {n_hosts} hosts connect" if rest > 0
                   else ""))
    return (f"every pair of its {n_hosts} hosts connects (TCP): not a cut link, a stall inside the transport, a "
            "NIC or a peer's GPU")
