"""The reachability matrix, as pure functions of what the mesh probe published: which node reached which node on
which interface, which addresses are shared by several nodes (a docker0 with the same address everywhere), and which
interfaces every node can use. The socket I/O that produces the attempts lives in preflight/probe.py."""

from __future__ import annotations


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


def duplicate_addresses(endpoints_by_rank: dict[int, dict]) -> dict[str, list[int]]:
    """{addr: [node ranks]} for every address published by more than one node (docker0 172.17.0.1 everywhere)."""
    owners: dict[str, set] = {}
    for rank, eps in endpoints_by_rank.items():
        for _iface, pairs in (eps or {}).items():
            for addr, _port in pairs:
                owners.setdefault(addr, set()).add(rank)
    return {a: sorted(r) for a, r in owners.items() if len(r) > 1}


def build_matrix(
    ranks: list[int],
    endpoints_by_rank: dict[int, dict],
    attempts_by_rank: dict[int, list[dict]],
) -> dict[str, dict]:
    """Per-interface reachability between nodes, as the report shows it.

    {iface: {"matrix": [[True|False|None]], "errors": {"0->1": "..."}, "duplicates": {addr: [ranks]},
             "nodes": [ranks having it]}}. matrix[i][j] is whether node ranks[i] reached node ranks[j] on the
    interface named iface on node j (None: j has no such interface, or i == j). An address published by several
    nodes is unusable whatever the connect did: which node answers depends on who connects.
    """
    idx = {r: i for i, r in enumerate(ranks)}
    dups = duplicate_addresses(endpoints_by_rank)
    ifaces = sorted({i for eps in endpoints_by_rank.values() for i in (eps or {})})
    out: dict[str, dict] = {}
    for iface in ifaces:
        have = [r for r in ranks if (endpoints_by_rank.get(r) or {}).get(iface)]
        m: list[list] = [[None] * len(ranks) for _ in ranks]
        errors: dict[str, str] = {}
        for src in ranks:
            for dst in have:
                if src != dst:
                    m[idx[src]][idx[dst]] = False
        for src in ranks:
            if src not in attempts_by_rank and any(d != src for d in have):
                errors[f"{src}->*"] = f"node {src} did not report its probe results"
        for src, attempts in attempts_by_rank.items():
            if src not in idx:
                continue
            by_dst: dict[int, list[dict]] = {}
            for a in attempts:
                if a.get("iface") == iface and a.get("peer") in idx:
                    by_dst.setdefault(a["peer"], []).append(a)
            for dst, recs in by_dst.items():
                good, why = False, []
                for a in recs:
                    if a["addr"] in dups:
                        on = ",".join(str(r) for r in dups[a["addr"]])
                        why.append(f"{a['addr']}: same address on nodes {on}")
                    elif not a.get("ok"):
                        why.append(f"{a['addr']}:{a['port']}: {a.get('error')}")
                    elif a.get("reached") != dst or (a.get("expected_id") and a.get("reached_id") != a["expected_id"]):
                        who = "itself" if a.get("reached") == src else f"node {a.get('reached')}"
                        why.append(f"{a['addr']}:{a['port']}: answered by {who}, not node {dst}")
                    else:
                        good = True
                m[idx[src]][idx[dst]] = good
                if not good and why:
                    errors[f"{src}->{dst}"] = "; ".join(why)
        iface_dups = {a: r for a, r in dups.items()
                      if any(a == p[0] for eps in endpoints_by_rank.values() for p in (eps or {}).get(iface, []))}
        out[iface] = {"matrix": m, "errors": errors, "duplicates": iface_dups, "nodes": have}
    return out


def usable_everywhere(entry: dict, ranks: list[int]) -> bool:
    """Every ordered pair of nodes reached each other on this interface (and every node has it)."""
    m = entry.get("matrix") or []
    n = len(ranks)
    if n < 2 or len(entry.get("nodes") or []) != n or entry.get("duplicates"):
        return False
    return all(m[i][j] is True for i in range(n) for j in range(n) if i != j)


def column_reached(entry: dict, j: int, n: int) -> bool:
    """Every other node reached node index j on this interface (what NCCL needs of the address j advertises)."""
    m = entry.get("matrix") or []
    if entry.get("duplicates"):
        return False  # which node answers a shared address depends on who connects
    return n >= 2 and all(m[i][j] is True for i in range(n) if i != j)


def reachable_by_node(mesh: dict, ranks: list[int]) -> dict[int, list[str]]:
    """{node rank: [its interface names that every other node reached]} — per-node usable interfaces."""
    n = len(ranks)
    out: dict[int, list[str]] = {r: [] for r in ranks}
    for iface, entry in sorted((mesh or {}).items()):
        for j, r in enumerate(ranks):
            if column_reached(entry, j, n):
                out[r].append(iface)
    return out
