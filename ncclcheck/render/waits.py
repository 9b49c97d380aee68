"""The words for what a process waits for (rendezvous/waits.py's events): one plain line each, naming the node, what
it waits for, what it has seen so far and how long it will wait.

    ncclcheck preflight: node 1 (vm): master 127.0.0.1:29599 refused the connection (4 tries); retrying until 60 s
    ncclcheck preflight: node 0 (vm): waiting for node 1 of 2 to join (joined: node 0 (vm)); until 60 s
"""

from __future__ import annotations

from typing import Any

from .. import hostranges
from .common import one_line


def _n(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def _endpoint(e: dict) -> str:
    addr, port = e.get("addr"), e.get("port")
    addr = f"[{addr}]" if isinstance(addr, str) and ":" in addr else addr
    return f"{addr}:{port}" if port is not None else str(addr)


def _master(e: dict) -> str:
    ep, tries, status = _endpoint(e), _n(e.get("tries")), e.get("status")
    said = f" ({tries} tries)" if tries > 1 else ""
    if status == "refused":
        return f"master {ep} refused the connection{said}: nothing listens on that port yet; retrying"
    if status == "timeout":
        return f"master {ep} does not answer{said}: its connects time out (a firewall dropping them, or a wrong " \
               "address); retrying"
    if status == "unresolvable":
        give_up = e.get("give_up_s")
        until = f" for {give_up:g} s" if isinstance(give_up, (int, float)) else ""
        return f"master name {e.get('addr')} does not resolve{said}: looking it up again{until}, then giving up"
    if status == "no_route":
        return f"no route to master {ep}{said}; retrying"
    if status:
        return f"master {ep}: {e.get('error') or status}{said}; retrying"
    return f"connecting to master {ep}"


def _join(e: dict) -> str:
    nnodes, joined, missing = _n(e.get("nnodes")), _n(e.get("joined")), e.get("missing") or []
    missing_n = _n(e.get("missing_n")) or len(missing)
    ranks = hostranges.rank_ranges(r for r in missing if isinstance(r, int))
    more = ", ..." if missing_n > len(missing) else ""
    if missing_n == 1 and ranks:
        want = f"node {ranks} of {nnodes:,} to join"
    else:
        want = f"{missing_n:,} of {nnodes:,} nodes to join" + (f" (node ranks {ranks}{more})" if ranks else "")
    hosts = [(r, str(h)) for r, h in e.get("hosts") or [] if isinstance(r, int)]
    named = hostranges.who(hosts)
    seen = f"joined: {named}" if named and len(hosts) == joined else f"{joined:,} joined" + (
        f", among them {named}" if named else "")
    return f"waiting for {want} ({seen})"


def _text(e: dict) -> str:
    what = e.get("wait")
    if what == "master":
        return _master(e)
    if what == "store":
        return f"connecting to node 0's rendezvous store at {_endpoint(e)}"
    if what == "join":
        return _join(e)
    if what == "verdict":
        return (f"joined the rendezvous at {_endpoint(e)}; waiting for node 0 to say who joined (it waits for every "
                "node until its --timeout)")
    if what == "mesh":
        if e.get("decider"):
            return f"waiting for the mesh endpoints of {_n(e.get('nodes')):,} nodes"
        return "waiting for node 0's list of the nodes' mesh endpoints"
    if what == "rows":
        return f"waiting for the nodes' mesh probes ({_n(e.get('done')):,} of {_n(e.get('nodes')):,} in)"
    if what == "result":
        return "waiting for node 0's cross-node checks (it collects every node's mesh probe first)"
    if what == "final":
        if e.get("decider"):
            return f"waiting for {_n(e.get('members')):,} processes to read the agreed exit code"
        return "waiting for node 0's agreed exit code"
    if what == "readers":
        return "keeping the rendezvous up until the nodes that joined have read why the world did not form"
    return f"waiting ({what})"


def wait_line(event: dict) -> str:
    """One line for one event: `ncclcheck COMMAND: node N (host): what; until B s (W s so far)`; "still" when
    nothing changed since the last line of the same wait."""
    who = "ncclcheck" + (f" {event['command']}" if event.get("command") else "")
    if isinstance(event.get("node_rank"), int):
        who += f": node {event['node_rank']}" + (f" ({event['host']})" if event.get("host") else "")
    text = _text(event)
    if event.get("again") and not event.get("changed"):
        text = "still " + text if text.startswith("waiting") else text + " (no change)"
    bound, waited = event.get("bound_s"), event.get("waited_s")
    if isinstance(bound, (int, float)) and isinstance(waited, (int, float)) and not text.endswith("giving up"):
        text += (" " if text.endswith("retrying") else "; ") + f"until {bound:.0f} s ({_seconds(waited)} so far)"
    return one_line(f"{who}: {text}")  # hostnames came from other nodes: one line, whatever they hold
