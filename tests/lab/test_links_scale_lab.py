"""`ncclcheck links` on 16 namespace hosts, one process each, with the default --rounds (auto -> scale from 16).

The scalable mode (links/schedule.py) measures one seeded random matching, re-tests the members of slow pairs
against two nodes that passed, and re-measures a slow pair whose members both passed: at most 4 rounds whatever n.
These tests run it end to end through the real CLI, the way tests/lab/test_links_lab.py runs the full mode on 4.

Every host is shaped (tbf) so a pair is network-bound, not bound by the 2 CPU cores all 16 namespaces share; the
fault is a 10x slower host or path. Node rank i runs on host h(i+1).

Wall time on the 2-core lab VM, shared with other sessions' labs (load average 5-11), three runs of this file on
2026-11-22: 158 s, 155 s, 156 s for the three tests (lab setup + 16 CLI processes + teardown each); the links rounds
themselves take 0.4-9 s, the rest is 16 Python/torch start-ups and world formation on 2 cores.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from ncclcheck_lab.netlab.harness import REPO_ROOT
from tests.lab.test_links_lab import links_of, slow_checks, world

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.long]  # 16 hosts: scripts/long_tests.py

N = 16
RATE_OK = "1gbit"
RATE_SLOW = "100mbit"
SIZE = "4M"
ITERS = "3"
# One bound for the whole CLI run (world formation of 16 processes on 2 cores + <= 4 rounds).
TIMEOUT = 180
DEADLINE = TIMEOUT + 60


def cluster16(*extra) -> list:
    return [("slow-link", f"h{i + 1}", RATE_OK) for i in range(N)] + list(extra)


def run16(lab_) -> dict:
    args = {h: [*world(lab_, i), "--timeout", str(TIMEOUT), "--size", SIZE, "--iters", ITERS]
            for i, h in enumerate(lab_.hosts)}
    # Each host its own log directory: 16 processes here (and other sessions' labs) share this machine's home.
    logs = {h: {"NCCLCHECK_LOG_DIR": str(lab_.tmp / f"logs-{h}")} for h in lab_.hosts}
    runs = lab_.ncclcheck(args, deadline=DEADLINE, host_env=logs)
    for h, r in runs.items():
        assert r.report is not None, f"{h}: no report (rc {r.rc}, timed out {r.timed_out})\n{r.stderr[-3000:]}"
    return runs


def _why(sec: dict) -> str:
    return json.dumps({k: sec.get(k) for k in ("mode", "rounds", "slow", "slow_nodes", "slow_cells", "dead",
                                                "errors", "reference_gbps", "matrix_gbps")})


def _scale_mode(runs, sec: dict) -> None:
    """The report says it ran the scalable mode, which rounds it ran, and no more than 4; so does the console."""
    assert sec["mode"] == "scale", _why(sec)
    assert 1 <= len(sec["rounds"]) <= 4, _why(sec)
    first = sec["rounds"][0]
    assert sorted(x for p in first for x in p) == list(range(N)), _why(sec)  # round 1: a perfect matching
    for rd in sec["rounds"]:
        flat = [x for p in rd for x in p]
        assert len(flat) == len(set(flat)), _why(sec)  # every round is disjoint pairs
    schema = json.loads((REPO_ROOT / "ncclcheck/schema/report-1.schema.json").read_text())
    for r in runs.values():
        jsonschema.validate(r.report, schema)
    print(f"mode {sec['mode']}, rounds {sec['rounds']}, links wall {sec.get('wall_s')} s, reference "
          f"{sec.get('reference_gbps')} GB/s, slow nodes {sec['slow_nodes']}, slow links {sec['slow']}")
    console = " ".join(runs["h1"].stdout.split())
    k = len(sec["rounds"])
    assert f"Scale mode: {k} round{'s' if k > 1 else ''} of disjoint pairs" in console, runs["h1"].stdout[-3000:]


def test_slow_host_among_16_is_named_in_at_most_4_rounds(lab):
    """h7 (node 6) is shaped to 100 Mbit/s, the other 15 hosts to 1 Gbit/s: node 6 and only it is named.

    Wall time on the 2-core lab VM: 57-61 s (3 rounds: the pairing, then node 6 and its partner against two good
    nodes each)."""
    lab16 = lab(N, scenario=cluster16(("slow-link", "h7", RATE_SLOW)))
    runs = run16(lab16)
    sec = links_of(runs)
    _scale_mode(runs, sec)
    assert sec["slow_nodes"] == [6], _why(sec)
    assert sec["slow"] == [], _why(sec)
    assert sec["dead"] == [] and sec["errors"] == [], _why(sec)
    # round 1 found a slow pair, so node 6 was re-tested against good partners
    assert len(sec["rounds"]) >= 2, _why(sec)
    [c] = slow_checks(runs["h1"].report)
    assert c["node"] == 6 and "(h7)" in c["summary"]
    assert {r.rc for r in runs.values()} == {1}, {h: r.rc for h, r in runs.items()}
    assert all(r.report["exit_code"] == 1 for r in runs.values())


def test_slow_path_among_16_is_named_and_no_node(lab):
    """Only h7 -> its round-1 partner is shaped (htb + u32 match ip dst): the link is named, neither node.

    The scalable mode measures one pairing (8 of the 120 links at 16 nodes) and re-tests only around slow pairs, so
    it can find a slow path only between partners of that pairing: the test shapes the path the seeded pairing
    (seed 0, what the CLI uses) measures. Wall time on the 2-core lab VM: 45-53 s (4 rounds)."""
    from ncclcheck.links.schedule import scale_first_round

    a, b = next(p for p in scale_first_round(N, 0)[0] if 6 in p)
    lab16 = lab(N, scenario=cluster16(("slow-pair", f"h{a + 1}", f"h{b + 1}", RATE_SLOW)))
    runs = run16(lab16)
    sec = links_of(runs)
    _scale_mode(runs, sec)
    assert sec["slow_nodes"] == [], _why(sec)
    assert [(s["a"], s["b"]) for s in sec["slow"]] == [(a, b)], _why(sec)
    s = sec["slow"][0]
    assert s["gbps_ab"] < s["gbps_ba"] and not s["ambiguous"], _why(sec)  # only a -> b is shaped
    # pairing, two re-test rounds (both members pass), then the pair itself confirmed slow
    assert len(sec["rounds"]) == 4 and sec["rounds"][-1] == [[a, b]], _why(sec)
    [c] = slow_checks(runs["h1"].report)
    assert c.get("node") is None and f"link {a}-{b}" in c["summary"]
    assert {r.rc for r in runs.values()} == {1}, {h: r.rc for h, r in runs.items()}


def test_healthy_16_hosts_flag_nothing(lab):
    """16 hosts at 1 Gbit/s: nothing flagged, exit 0 everywhere, in one round (nothing to re-test).

    Wall time on the 2-core lab VM: 40-50 s (1 round)."""
    lab16 = lab(N, scenario=cluster16())
    runs = run16(lab16)
    sec = links_of(runs)
    _scale_mode(runs, sec)
    assert sec["slow"] == [] and sec["slow_nodes"] == [] and sec["dead"] == [], _why(sec)
    assert all(r.rc == 0 for r in runs.values()), {h: (r.rc, r.stderr[-1000:]) for h, r in runs.items()}
