"""Preflight on 16 real hosts (namespaces, one process each): everyone exits 0, and node 0's interface byte counters
show per-node traffic close to a 4-host run's (O(n) bytes at node 0, not O(n^2): before the compact protocol this
ratio was 6.6x). Slow but bounded.

Issue 12 asks for 1.3x; measured 1.15-1.25x in eleven runs (14.9-16.2 KB -> 18.5-18.8 KB per node; by category:
`python3 scripts/lab_bytes.py --hosts 4,16 --by-key`). It was 1.36-1.41x (15.0 KB -> 21.2 KB) while every node read
each peer's endpoints by key (two key names and a JSON record a peer) and wrote a timing for every peer; now node 0
publishes one packed endpoint directory and a healthy row is runs of peer ranks. About 1.25x is the floor of any
protocol whose cost per non-zero node is flat: node 0's own exchange with its store runs over loopback, so eth0 carries
(n-1)/n of a per-node cost, 3/4 at 4 hosts and 15/16 at 16. Above it: ARP (each pair of hosts in the full mesh
resolves once, a broadcast that reaches node 0) and noise: while other work loads this 2-core machine, 16 processes
start slowly and node 0 hosts its store seconds after the others probe it, each refused probe ~130 B (1.29-1.35x
in three runs so; two of them counted 12-15 refused connects a node instead of 3-4)."""

from __future__ import annotations

import pytest

from tests.lab.test_preflight_lab import explain, run_all_ranks

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.long]  # 16 hosts: scripts/long_tests.py

TIMEOUT = 120  # 16 processes importing torch on a 2-core machine join slowly; --timeout only bounds the waits
MAX_RATIO = 1.3


def _counters(lab_, host: str = "h1") -> int:
    out = lab_.exec(host, ["cat", "/sys/class/net/eth0/statistics/rx_bytes", "/sys/class/net/eth0/statistics/tx_bytes"],
                    check=True).stdout.split()
    return sum(int(x) for x in out)


def _bytes_per_node(lab_) -> tuple[float, dict]:
    before = _counters(lab_)
    runs = run_all_ranks(lab_, TIMEOUT, deadline=TIMEOUT * 3)
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    return (_counters(lab_) - before) / len(lab_.hosts), runs


def test_sixteen_hosts_pass_with_flat_bytes_per_node_at_node0(lab):
    per4, _ = _bytes_per_node(lab(4))
    per16, runs = _bytes_per_node(lab(16))
    print(f"node 0 eth0 bytes per node: 4 hosts {per4:,.0f}, 16 hosts {per16:,.0f}, ratio {per16 / per4:.2f}")
    assert per16 <= MAX_RATIO * per4, (per4, per16)
    world = next(c for c in runs["h1"].report["checks"] if c["id"] == "rendezvous.world")
    assert world["status"] == "pass" and "16 node ranks" in world["summary"]
