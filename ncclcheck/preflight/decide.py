"""preflight's decisions, pure: who joined (the world verdict and its check), how the verdict ties to the master
probe, how the mesh is told at scale, and the recommendations from every node's facts and the mesh."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Any, Optional

from .. import hostranges
from ..config import format_endpoint
from ..model import CheckResult, Recommendation, Status, failed, passed, warned
from ..nccl import reachability
from ..recommend import NodeView, recommend_local
from ..recommend.mesh import MeshView, merge_recommendations, recommend_mesh

log = logging.getLogger(__name__)


def master_result(results: list) -> Optional[CheckResult]:
    for r in results:
        if r.id == "rendezvous.master_reachable":
            return r
    return None


def _reference(counts: Counter, expected_nnodes: int) -> int:
    """The reference --nnodes: the majority's (ties: node 0's, it hosts the rendezvous)."""
    if not counts:
        return expected_nnodes
    top = max(counts.values())
    leaders = [n for n, c in counts.items() if c == top]
    return expected_nnodes if expected_nnodes in leaders else min(leaders)


class JoinTally:
    """decide()'s `complete`, kept up to date as join records arrive, O(1) per record: node 0 asking decide() (O(n))
    after every arrival was O(n^2) at 8,192 nodes (issue 27). The final verdict is still decide()'s."""

    def __init__(self, expected_nnodes: int) -> None:
        self.expected, self.counts, self.ranks = expected_nnodes, Counter(), set()
        self._full: Optional[tuple] = None  # (reference, ranks seen) when `complete` last looked at every rank

    def add(self, join: dict) -> None:
        if isinstance(join.get("nnodes"), int):
            self.counts[join["nnodes"]] += 1
        self.ranks.add(join.get("node_rank"))

    @property
    def complete(self) -> bool:
        """Every rank of the reference --nnodes joined (as decide()'s `complete`)."""
        ref = _reference(self.counts, self.expected)
        if len(self.ranks) < ref:
            return False  # fewer distinct ranks than the world has: cannot be complete (the usual case, O(1))
        key = (ref, len(self.ranks))
        if self._full is None or self._full[0] != key:
            self._full = (key, all(r in self.ranks for r in range(ref)))
        return self._full[1]


def decide(joins: list, expected_nnodes: int, final: bool) -> dict:
    """Pure: the world verdict from join records. `complete` when every rank of the reference --nnodes joined.

    The reference --nnodes is the majority's (ties: node 0's, it hosts the rendezvous). Ranks outside it, duplicate
    ranks (each named by hostname) and nodes started with a different --nnodes make the world fail to form.
    """
    counts = Counter(j.get("nnodes") for j in joins if isinstance(j.get("nnodes"), int))
    ref = _reference(counts, expected_nnodes)
    by_rank: dict = {}
    for j in joins:
        by_rank.setdefault(j.get("node_rank"), []).append(j)
    present = sorted(r for r in by_rank if isinstance(r, int) and 0 <= r < ref)
    missing = [r for r in range(ref) if r not in by_rank]
    dups = {r: [f"{j.get('hostname')} (pid {j.get('pid')})" for j in js] for r, js in by_rank.items() if len(js) > 1}
    out_of_range = sorted(r for r in by_rank if not (isinstance(r, int) and 0 <= r < ref))
    mismatch = [{"node_rank": j.get("node_rank"), "hostname": j.get("hostname"), "nnodes": j.get("nnodes")}
                for j in joins if j.get("nnodes") != ref]
    complete = not missing
    ok = complete and not dups and not out_of_range and not mismatch
    members = [by_rank[r][0] for r in present]
    return {
        "ok": ok, "complete": complete, "final": final, "nnodes": ref, "missing": missing,
        "duplicates": {str(r): h for r, h in dups.items()}, "out_of_range": out_of_range, "nnodes_mismatch": mismatch,
        "members": [{"node_rank": m["node_rank"], "uuid": m["uuid"], "hostname": m.get("hostname"),
                     "key": m.get("_key")} for m in members],
        "joined": [{"node_rank": j.get("node_rank"), "hostname": j.get("hostname"), "nnodes": j.get("nnodes"),
                    "pid": j.get("pid")} for j in joins],
    }


FLOOD_FIX = ("Find who runs the named address (ss -tnp on it) and keep it off MASTER_PORT (a firewall rule that "
             "admits only the job's nodes); see docs/trust.md")


def master_port_floods(rejected: Any) -> list:
    """What node 0's store front named (rendezvous.serve): "master port: ..." lines of the store's rejected list."""
    tag = "master port: "
    return [r[len(tag):] for r in rejected or [] if isinstance(r, str) and r.startswith(tag)]


def world_check(verdict: dict, elapsed_s: float, timeout_s: float) -> CheckResult:
    """rendezvous.world from a verdict: names missing ranks, duplicate ranks and --nnodes disagreements."""
    cid = "rendezvous.world"
    n = verdict.get("nnodes")
    ev = {k: verdict.get(k) for k in ("nnodes", "missing", "duplicates", "out_of_range", "nnodes_mismatch",
                                      "joined")}
    floods = master_port_floods(verdict.get("rejected"))
    if floods:
        ev["master_port"] = floods
    if verdict.get("ok"):
        members = verdict.get("members") or []
        hosts = hostranges.who((m["node_rank"], str(m.get("hostname") or "?")) for m in members
                               if isinstance(m, dict) and isinstance(m.get("node_rank"), int))
        summary = f"all {n:,} node ranks joined in {elapsed_s:.1f} s" + (f": {hosts}" if hosts else "")
        if floods:  # the world formed despite it; who attacked the master port is still worth a look
            return warned(cid, f"{summary}; {floods[0]}", evidence=ev, fix=FLOOD_FIX)
        return passed(cid, summary, evidence=ev)
    problems, fixes = list(floods[:1]), [FLOOD_FIX] if floods else []
    if verdict.get("missing"):
        miss = hostranges.rank_ranges(verdict["missing"])
        problems.append(f"node rank(s) {miss} never joined within {timeout_s:g} s")
        fixes.append(f"start ncclcheck with --node-rank {miss} on the missing node(s), or check why they cannot "
                     "reach MASTER_ADDR:MASTER_PORT (their own reports say)")
    for r, hosts in (verdict.get("duplicates") or {}).items():
        problems.append(f"node rank {r} claimed by {len(hosts)} nodes: {', '.join(hosts)}")
        fixes.append("give every node a distinct --node-rank (0..N-1)")
    if verdict.get("out_of_range"):
        problems.append(f"node rank(s) {hostranges.rank_ranges(verdict['out_of_range'])} are outside 0..{n - 1}")
    for m in verdict.get("nnodes_mismatch") or []:
        problems.append(f"node {m['node_rank']} ({m['hostname']}) was started with --nnodes {m['nnodes']}, "
                        f"the others with {n}")
    if verdict.get("nnodes_mismatch"):
        fixes.append(f"start every node with the same --nnodes ({n})")
    return failed(cid, "; ".join(problems) or "the world did not form", evidence=ev,
                  fix="; ".join(fixes) or "see the other nodes' reports")


def master_failed(m: CheckResult, addr: str, port: int) -> CheckResult:
    """rendezvous.world when this node's master probe failed: the probe's own finding, not a second probe."""
    ev = m.evidence or {}
    return failed("rendezvous.world", f"could not join: master {format_endpoint(addr, port)} "
                  f"{ev.get('kind') or 'unreachable'} after {ev.get('attempts', '?')} attempts in "
                  f"{float(ev.get('elapsed_s') or 0):.1f} s", evidence=ev,
                  fix="See rendezvous.master_reachable: start node 0 first, check MASTER_ADDR/MASTER_PORT and the "
                      "firewall between the nodes.")


def port_taken(port: int, error: Optional[str], who: Optional[str], bind: dict, host: str,
               told: Optional[dict] = None) -> CheckResult:
    """rendezvous.world on a node 0 that cannot bind MASTER_PORT. When ncclcheck's own store front holds it, another
    node rank 0 on this host hosts the rendezvous already: this node is its duplicate, and the fix is its rank.
    `told`: preflight/second_master.Look's JSON, once this node told that node 0 (so its world fails too)."""
    held = f" (held by {who})" if who else ""
    ev = dict(bind, holder=who)
    if who and "ncclcheck" in who and "front.py" in who:
        ev["duplicate_of_rank0"] = True
        said = ""
        if told is not None:
            ev["master"] = told
            said = ("; this node told it, so its world fails naming this node too" if told.get("told") else
                    f"; this node could not tell it ({told.get('error') or told.get('status')})")
        return failed("rendezvous.world", f"this node ({host}) is a duplicate of node rank 0: another ncclcheck node "
                      f"rank 0 on this host already hosts the rendezvous on port {port}{held}{said}", evidence=ev,
                      fix=f"Give this node ({host}) its own --node-rank (0..N-1; only node 0 keeps 0).")
    return failed("rendezvous.world", f"node 0 cannot host the rendezvous on port {port}: {error}{held}", evidence=ev,
                  fix=f"Free the port (ss -ltnp 'sport = :{port}') or choose another --master-port on every node.")


def tie_to_master(wcheck: CheckResult, results: list, elsewhere: Optional[dict] = None,
                  host: Optional[str] = None) -> CheckResult:
    """On node 0: ranks that never joined while MASTER_ADDR is not an address of this host are most likely the
    same fault (the others were sent elsewhere): say so in the verdict, with the fix.

    When no other node joined at all, the other ranks are not blamed (they may well have started, and joined a node 0
    at MASTER_ADDR): this node is most likely a second node rank 0, hosting a world nobody joined. `elsewhere` is
    probe.probe_master's JSON for MASTER_ADDR:MASTER_PORT, tried from here once the join window ended: something
    answering there makes it near certain (pf-duplicate-rank-0)."""
    m = master_result(results)
    ev = (m.evidence or {}) if m is not None else {}
    if wcheck.status is not Status.FAIL or not (wcheck.evidence or {}).get("missing") or ev.get("mode") != "bind":
        return wcheck
    if ev.get("local") is not False and ev.get("local") is not None:
        return wcheck
    why = "does not resolve here" if ev.get("local") is None else "is not an address of this host"
    wev = dict(wcheck.evidence or {}, master=ev)
    joined = wev.get("joined") or []
    if len(joined) <= 1:  # only this node: the others went elsewhere, whatever ranks they were started with
        me = host or (joined[0].get("hostname") if joined and isinstance(joined[0], dict) else None) or "this host"
        addr, port = ev.get("addr"), ev.get("port")
        summary = (f"no other node joined: this node ({me}) started as node rank 0 and hosted a rendezvous that "
                   f"nobody joined, while MASTER_ADDR {addr} {why}")
        if elsewhere is not None:
            wev["master_elsewhere"] = elsewhere
        if elsewhere and elsewhere.get("ok"):
            summary += (f"; {format_endpoint(str(addr), int(port or 0))} answers from here: another node rank 0 "
                        f"hosts the rendezvous there, and this node ({me}) is a duplicate of node rank 0")
        else:
            summary += ", so the other nodes were sent elsewhere (a second node rank 0 there, or a wrong MASTER_ADDR)"
        return failed(wcheck.id, summary, detail=wcheck.detail, evidence=wev,
                      fix=f"Give this node ({me}) its own --node-rank (0..N-1; only node 0 keeps 0), or set "
                          f"MASTER_ADDR to an address of node 0 on every node")
    return failed(wcheck.id, f"{wcheck.summary}; MASTER_ADDR {ev.get('addr')} {why}, so the other nodes were "
                  "sent elsewhere", detail=wcheck.detail, evidence=wev,
                  fix=f"Set MASTER_ADDR to an address of node 0 (this host) on every node, then {wcheck.fix}")


def mesh_note(c: CheckResult, matrix: dict, n: int, hosts: dict) -> CheckResult:
    """net.peer_reachability as the user needs it at scale: whether the mesh was sampled and how many pairs were
    tested, and which nodes reached none of the peers they probed (the check names them as unreachable)."""
    if c.id != "net.peer_reachability" or not matrix:
        return c
    stuck = sorted({r for e in matrix.values() if not e.get("duplicates") for r in e.get("cannot_reach") or []})
    summary, detail, ev = c.summary, c.detail, dict(c.evidence)
    if reachability.sampled(n):
        tested = max((e.get("pairs_tested") or 0) for e in matrix.values())
        summary += (f" (sampled mesh: {tested:,} of {n * (n - 1):,} node pairs tested per interface, ring neighbours "
                    f"+ {reachability.SAMPLE_PEERS} random peers per node)")
        ev.update(sampled=True, pairs_tested=tested)
    if stuck:
        named = ", ".join(f"node {r} ({hosts.get(r, '?')})" for r in stuck[:8])
        detail = (f"{named} reached none of the peers it probed, which other nodes reached: its outgoing "
                  f"connections fail (firewall, routing or a dead NIC on that node). " + detail).strip()
        ev["cannot_reach"] = stuck
    return replace(c, summary=summary, detail=detail, evidence=ev)


def recommendations(nodes: list, matrix: dict, same_host: Optional[list] = None) -> list:
    one = reachability.one_host([r for r, _, _ in nodes], same_host)
    mesh_recs = recommend_mesh(MeshView(nodes, matrix, one_host=one))
    per_node: dict[int, list[Recommendation]] = {}
    for r, _, f in nodes:
        try:
            per_node[r] = recommend_local(NodeView(f, node=None, multi_node=True))
        except Exception:  # noqa: BLE001 - a broken local rule must not hide the cluster's advice
            log.exception("local recommendation rules failed on node %s's facts", r)
            per_node[r] = []
    ifname = {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}
    # The matrix decides the socket interface; when it could not (nothing usable everywhere) say nothing rather
    # than repeat a per-node guess that the probe just showed does not connect the nodes.
    return merge_recommendations(mesh_recs, per_node, names_from_mesh=ifname)
