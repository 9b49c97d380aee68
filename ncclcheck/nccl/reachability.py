"""The reachability matrix, as pure functions of what the mesh probe published: which node reached which node on
which interface, which addresses are shared by several nodes (a docker0 with the same address everywhere), and which
interfaces every node can use. Up to FULL_MESH_MAX nodes every node probes every other; above it each node probes a
seeded sample (`probe_targets`: ring neighbours plus k random peers), so the probe and the report stay O(n). The
socket I/O that produces the attempts lives in preflight/probe.py."""

from __future__ import annotations

import random
from typing import Optional

FULL_MESH_MAX = 32  # above this many nodes the mesh is sampled
SAMPLE_PEERS = 12  # random peers per node in a sampled mesh, besides the two ring neighbours
MAX_ERRORS = 50  # failed pairs listed per interface in a sampled mesh (the count is always exact)
# A probe whose connection the peer's kernel accepted but whose reply came too late (preflight/probe.py writes the
# prefix): the network path works, the peer was busy. Such a pair counts as reached, and the node is named as loaded.
LATE = "late"
NO_ANSWER = "no_answer"
DEADLINE = "timeout"  # the prober's own bound passed before the attempt ended (preflight/probe.py MESH_DEADLINE)


def timed_out(rec: dict) -> bool:
    """A failed probe that ran out of time (its connect unanswered, a reply late, or the prober's own bound passed):
    what a busy host's probe also does. A refused or unroutable connect is definite, whatever the load."""
    return not rec.get("ok") and str(rec.get("error") or "").startswith((NO_ANSWER, LATE, DEADLINE))


def sampled(n: int, full_max: int = FULL_MESH_MAX) -> bool:
    return n > full_max


def probe_targets(n: int, i: int, k: int = SAMPLE_PEERS, seed: int = 0, full_max: int = FULL_MESH_MAX) -> list[int]:
    """The node indices node index i probes: every other node up to full_max nodes, else a bounded sample.

    The sample is the two ring neighbours (so the probe graph is connected whatever the seed) plus k peers drawn
    with a generator seeded by (seed, i): every node computes anyone's targets without talking to anyone, and each
    node is probed by about k + 2 peers on average.
    """
    if n < 2:
        return []
    if not sampled(n, full_max):
        return [j for j in range(n) if j != i]
    ring = {(i + 1) % n, (i - 1) % n}
    rng = random.Random(f"{seed}/{n}/{i}")
    others = [j for j in rng.sample(range(n), min(n, k + 3)) if j != i and j not in ring][:k]
    return sorted(ring | set(others))


def candidate_addresses(interfaces: object, include_loopback: bool = False) -> dict[str, list[str]]:
    """{iface: [IPv4 addresses]} of every up interface in the facts' `interfaces` list (docs/facts.md).

    Docker and other virtual interfaces are kept on purpose: probing them is how we show they are unusable.
    """
    out: dict[str, list[str]] = {}
    if not isinstance(interfaces, list):
        return out
    for itf in interfaces:
        if not isinstance(itf, dict) or not itf.get("up", True):
            continue
        name = itf.get("name")
        if not name or ((itf.get("kind") == "loopback" or name == "lo") and not include_loopback):
            continue
        # Interfaces are filtered by kind, not by address: the loopback *interface* is skipped on a multi-node
        # run, which is also what lets tests stand 127.0.0.2/127.0.0.3 in for other hosts' NICs.
        addrs = [a["address"] for a in itf.get("ipv4") or [] if isinstance(a, dict) and a.get("address")]
        if addrs:
            out[name] = addrs
    return out


def duplicate_addresses(endpoints_by_rank: dict[int, dict], same_host: Optional[list] = None) -> dict[str, list[int]]:
    """{addr: [node ranks]} for every address published by more than one host (docker0 172.17.0.1 everywhere).

    Nodes of one group of `same_host` (host_groups: one network stack, proven) publishing the same address are one
    host's one address, not a duplicate: which of them answers is chosen by the port, as on any host."""
    host = {r: i for i, group in enumerate(same_host or []) for r in group}
    owners: dict[str, set] = {}
    for rank, eps in endpoints_by_rank.items():
        for _iface, pairs in (eps or {}).items():
            for addr, _port in pairs:
                owners.setdefault(addr, set()).add(rank)
    return {a: sorted(r) for a, r in owners.items()
            if len(r) > 1 and len({host.get(x, ("alone", x)) for x in r}) > 1}


def host_groups(ranks: list[int], endpoints_by_rank: dict[int, dict], attempts_by_rank: dict[int, list[dict]],
                claimed: dict[int, str]) -> list[list[int]]:
    """The nodes that share one network stack (one host, or containers sharing the host's network), as sorted
    groups of two or more node ranks, largest first.

    Two nodes are put together only when both are true: they claim the same network identity (facts.host's
    network_identity key: boot id and network namespace), and one of them reached the other, with the other's id
    in the reply, on an address the prober itself published (a connect to an address local to the prober never
    leaves its network stack, so the listener that answered lives in it). The claim alone proves nothing (it is
    read from the network); the probe alone cannot tell one host from a simulated one whose addresses are all
    loopback. Groups join transitively."""
    parent = {r: r for r in ranks}

    def root(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    own = {r: {a for pairs in (eps or {}).values() for a, _p in pairs} for r, eps in endpoints_by_rank.items()}
    for src, attempts in attempts_by_rank.items():
        key = claimed.get(src)
        if src not in parent or not key:
            continue
        for a in attempts:
            dst = a.get("peer")
            if (dst in parent and dst != src and claimed.get(dst) == key and a.get("ok")
                    and a.get("reached") == dst and a.get("addr") in own.get(src, ())):
                parent[root(src)] = root(dst)
    groups: dict[int, list[int]] = {}
    for r in ranks:
        groups.setdefault(root(r), []).append(r)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), g))


def one_host(ranks: list[int], same_host: Optional[list]) -> bool:
    """Does every node of the world share one network stack (host_groups)?"""
    return len(ranks) > 1 and bool(same_host) and sorted(same_host[0]) == sorted(ranks)


def build_matrix(
    ranks: list[int],
    endpoints_by_rank: dict[int, dict],
    attempts_by_rank: dict[int, list[dict]],
    planned: int | None = None,
    same_host: Optional[list] = None,
) -> dict[str, dict]:
    """Per-interface reachability between nodes, as the report shows it.

    {iface: {"matrix": [[True|False|None]], "errors": {"0->1": "..."}, "duplicates": {addr: [ranks]},
             "nodes": [ranks having it], "usable": [bool per node], "cannot_reach": [ranks], "pairs_tested": T}}.
    matrix[i][j] is whether node ranks[i] reached node ranks[j] on the interface named iface on node j (None: j has
    no such interface, i == j, or the pair was not sampled). An address published by several nodes is unusable
    whatever the connect did: which node answers depends on who connects. A sampled mesh (more than FULL_MESH_MAX
    nodes) has no dense matrix: "sampled" is true and "errors" lists at most MAX_ERRORS failed pairs
    ("errors_total" counts them all). "cut_links" ([[rank, rank]], at most MAX_ERRORS; "cut_links_total") is there
    when every failed pair is a dead link between two nodes that both reached, and were reached by, others.
    `planned` is how many pairs each node probes; a node that reported nothing fails its planned pairs, and is listed
    in "unreported" when another node reached it (alive; its own outbound paths unknown, not proven dead). A node
    not usable although no reported probe failed against it is listed in "unmeasured".
    `same_host` (host_groups) are the nodes whose shared addresses are one host's, not duplicates.
    """
    n = len(ranks)
    idx = {r: i for i, r in enumerate(ranks)}
    is_sampled = sampled(n)
    dups = duplicate_addresses(endpoints_by_rank, same_host)
    dup_texts: dict[str, str] = {}
    ifaces = sorted({i for eps in endpoints_by_rank.values() for i in (eps or {})})
    addrs_of = {i: {p[0] for eps in endpoints_by_rank.values() for p in (eps or {}).get(i, [])} for i in ifaces}
    out: dict[str, dict] = {}
    for iface in ifaces:
        have = [r for r in ranks if (endpoints_by_rank.get(r) or {}).get(iface)]
        have_set = set(have)  # asked once per attempt: a list here made the matrix O(n^2) (issue 27, 8,192 nodes)
        have_idx = {idx[r] for r in have}
        pairs: dict[tuple[int, int], bool] = {}
        errors: dict[str, str] = {}
        late: dict[int, str] = {}  # node -> one accepted-but-late probe of it
        unreported: list[int] = []
        recorded_bad: set[tuple[int, int]] = set()  # failed pairs a prober's own row reported (not "never reported")
        for src in ranks:
            if src in attempts_by_rank:
                continue
            targets = probe_targets(n, idx[src]) if planned is None else probe_targets(n, idx[src], planned)
            targets = [t for t in targets if t in have_idx]
            if targets:
                errors[f"{src}->*"] = f"node {src} did not report its probe results"
                unreported.append(src)
                for t in targets:
                    pairs[(idx[src], t)] = False
        for src, attempts in attempts_by_rank.items():
            if src not in idx:
                continue
            by_dst: dict[int, list[dict]] = {}
            for a in attempts:
                if a.get("iface") == iface and a.get("peer") in idx and a.get("peer") in have_set:
                    by_dst.setdefault(a["peer"], []).append(a)
            for dst, recs in by_dst.items():
                good, why = _judge(recs, src, dst, dups, dup_texts)
                if good and why and all(w.split(": ", 1)[-1].startswith(LATE) for w in why):
                    late.setdefault(dst, f"{src}->{dst}: {why[0]}")
                    why = []
                pairs[(idx[src], idx[dst])] = good
                if not good:
                    recorded_bad.add((idx[src], idx[dst]))
                if not good and why:
                    errors[f"{src}->{dst}"] = "; ".join(why)
        if not is_sampled:
            for s_ in range(n):
                for d in have_idx:
                    if s_ != d:
                        pairs.setdefault((s_, d), False)
        iface_dups = {a: r for a, r in dups.items() if a in addrs_of[iface]}
        usable, stuck = _usable(pairs, n, have_idx, bool(iface_dups))
        entry: dict = {"errors": errors, "duplicates": iface_dups, "nodes": have, "usable": usable,
                       "cannot_reach": [ranks[i] for i in sorted(stuck)], "pairs_tested": len(pairs)}
        cut = _cut_links(pairs, n, bool(iface_dups))
        if cut:
            entry["cut_links"] = [[ranks[a], ranks[b]] for a, b in cut[:MAX_ERRORS]]
            entry["cut_links_total"] = len(cut)
        if late:
            entry["late"] = dict(sorted(late.items())[:MAX_ERRORS])
            entry["late_nodes"] = sorted(late)
        # Their pairs count as failed, but nothing of theirs was measured: the ones another node reached (alive and
        # listening) are listed, so the checks can tell "unmeasured" from "cut off".
        reached_idx = {d for (s_, d), ok in pairs.items() if ok and s_ != d} if unreported else set()  # one pass
        heard = [r for r in unreported if idx[r] in reached_idx]
        if heard:
            entry["unreported"] = heard
        # Not usable, yet no reported probe failed against it: every failed pair of the node is one whose prober
        # never reported (its own row, or the rows of every peer that probes it, missed node 0's bound: 195 of
        # 16,384 simulated nodes on 2 cores). Nothing shows it cut off: unmeasured, not unreachable. A failure its
        # own row reports accuses it; one reported by a prober that reached none of its targets (stuck) does not.
        accused = {s_ for s_, _ in recorded_bad} | {d for s_, d in recorded_bad if s_ not in stuck}
        unmeasured = [ranks[j] for j in sorted(have_idx) if not usable[j] and j not in accused]
        if unmeasured and not iface_dups and n >= 2:
            entry["unmeasured"] = unmeasured
        if is_sampled:
            entry.update(sampled=True, errors=dict(sorted(errors.items())[:MAX_ERRORS]), errors_total=len(errors))
        else:
            m: list[list] = [[None] * n for _ in ranks]
            for (s_, d), ok in pairs.items():
                m[s_][d] = ok
            entry["matrix"] = m
        out[iface] = entry
    return out


def _dup_text(addr: str, ranks: list[int]) -> str:
    on = ",".join(str(r) for r in ranks[:8]) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    return f"{addr}: same address on nodes {on}"


def _judge(recs: list[dict], src: int, dst: int, dups: dict, texts: dict) -> tuple[bool, list[str]]:
    """Did src reach dst on one of the addresses it tried? (and why not, per address)."""
    good, why = False, []
    for a in recs:
        if a["addr"] in dups:
            if a["addr"] not in texts:
                texts[a["addr"]] = _dup_text(a["addr"], dups[a["addr"]])
            why.append(texts[a["addr"]])
        elif not a.get("ok"):
            why.append(f"{a['addr']}:{a.get('port')}: {a.get('error')}")
            good = good or str(a.get("error") or "").startswith(LATE)  # accepted: the path works, the peer was busy
        elif a.get("reached") != dst or (a.get("expected_id") and
                                         not str(a.get("reached_id") or "").startswith(str(a["expected_id"]))):
            who = "itself" if a.get("reached") == src else f"node {a.get('reached')}"
            why.append(f"{a['addr']}:{a.get('port')}: answered by {who}, not node {dst}")
        else:
            good = True
    return good, why


def _usable(pairs: dict, n: int, have: set, dup: bool) -> tuple[list[bool], set]:
    """(usable per node index, indices that reached none of their targets although others reached those targets).

    A node whose every probe failed while its targets answered others is the broken one: its failures are not held
    against the nodes it probed (one bad node must not strand the cluster). A node is usable on the interface when
    it has it, is not such a node, was reached by at least one other prober, and no other prober failed to reach it.
    """
    targets: list[list[int]] = [[] for _ in range(n)]
    out_ok, in_ok = [0] * n, [0] * n
    for (s, d), ok in pairs.items():
        targets[s].append(d)
        if ok:
            out_ok[s] += 1
            in_ok[d] += 1
    # s's targets answered someone else (s itself reached none of them, so any success came from another node).
    stuck = {s for s in range(n) if targets[s] and not out_ok[s] and any(in_ok[d] for d in targets[s])}
    usable = [False] * n
    if dup or n < 2:
        return usable, stuck
    reached = [False] * n
    bad = [False] * n
    for (s, d), ok in pairs.items():
        if s in stuck:
            continue
        if ok:
            reached[d] = True
        else:
            bad[d] = True
    for j in have:
        usable[j] = j not in stuck and reached[j] and not bad[j]
    return usable, stuck


def _cut_links(pairs: dict, n: int, dup: bool) -> list[tuple[int, int]]:
    """The failed pairs as dead links, when that is all they are: each failed pair (either direction) joins two
    nodes that both reached some other node and were reached by some other node, so the path between those two is
    what drops TCP, not either node. Empty when any failure is not such a link (a node cut off, a firewall, a silent
    node, a duplicated address): the node-level verdict stands then. Index pairs (low, high), sorted."""
    if dup:
        return []
    out_ok, in_ok = [0] * n, [0] * n
    failed = set()
    for (s, d), ok in pairs.items():
        if ok:
            out_ok[s] += 1
            in_ok[d] += 1
        else:
            failed.add((min(s, d), max(s, d)))
    if not all(out_ok[x] and in_ok[x] for link in failed for x in link):
        return []
    return sorted(failed)


def node_usable(entry: dict, n: int) -> list[bool]:
    """Per node index: is this interface usable on that node (from "usable", or derived from a dense matrix)."""
    u = entry.get("usable")
    if isinstance(u, list) and len(u) == n:
        return [bool(x) for x in u]
    m = entry.get("matrix") or []
    pairs = {(i, j): v for i, row in enumerate(m) for j, v in enumerate(row or []) if v is not None and i != j}
    have = {j for j in range(n) if any(m[i][j] is not None for i in range(len(m)) if i != j)}
    return _usable(pairs, n, have, bool(entry.get("duplicates")))[0]


def usable_everywhere(entry: dict, ranks: list[int]) -> bool:
    """Every node has this interface and every tested pair of nodes reached each other on it."""
    n = len(ranks)
    if n < 2 or len(entry.get("nodes") or []) != n or entry.get("duplicates"):
        return False
    return all(node_usable(entry, n))


def reachable_by_node(mesh: dict, ranks: list[int]) -> dict[int, list[str]]:
    """{node rank: [its interface names that every other node reached]} — per-node usable interfaces."""
    n = len(ranks)
    out: dict[int, list[str]] = {r: [] for r in ranks}
    for iface, entry in sorted((mesh or {}).items()):
        u = node_usable(entry, n) if not entry.get("duplicates") else [False] * n
        for j, r in enumerate(ranks):
            if u[j]:
                out[r].append(iface)
    return out
