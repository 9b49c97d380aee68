"""Bounds with real traffic: hosts shaped with tbf at known rates; the report's bound is the shaper's rate, efficiency
is computed against it, the host shaped lowest is named as what bounds the job, and an unshaped veth is reported at
the kernel's 10 Gb/s with a note that the figure is virtual.

Node rank i runs on host h(i+1); the shaping is the links lab tests' (tbf on the host's eth0 and towards it).
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

TIMEOUT = 90
FAST, SLOW = "1gbit", "200mbit"  # bytes per second: 125e6 and 25e6


def gbps(rate: str) -> float:
    """A tc rate as the report's GB/s (1e9 bytes per second)."""
    n = float(rate.rstrip("mgbit"))
    return n * (1e9 if rate.endswith("gbit") else 1e6) / 8 / 1e9


def world(lab_, cmd: list, i: int) -> list:
    return [*cmd, "--nnodes", str(len(lab_.hosts)), "--node-rank", str(i), "--master-addr", lab_.ip("h1"),
            "--master-port", "29500", "--nproc-per-node", "1", "--timeout", str(TIMEOUT)]


def run(lab_, cmd: list) -> dict:
    runs = lab_.ncclcheck({h: world(lab_, cmd, i) for i, h in enumerate(lab_.hosts)}, deadline=TIMEOUT + 60)
    for h, r in runs.items():
        assert r.report is not None, f"{h}: no report (rc {r.rc})\n{r.stderr[-3000:]}"
    return runs["h1"].report


def links_section(lab_) -> tuple:
    rep = run(lab_, ["links", "--size", "4M", "--iters", "3"])
    return rep, rep["links"]


def assert_never_above_bound(sec: dict) -> None:
    """Every measured direction: efficiency = GB/s / bound and never above 1 + noise (issue 32), or, when the figure
    beat the bound, no efficiency and the bound named wrong, or no bound at all (two virtual sides: issue 44)."""
    m, b, e = sec["matrix_gbps"], sec["bound_gbps"], sec["efficiency"]
    for a in range(len(m)):
        for c in range(len(m)):
            if a != c and m[a][c] is not None:
                if e[a][c] is None:
                    assert sec["bound_trusted"][a][c] is False or b[a][c] is None, (a, c, json.dumps(sec))
                else:
                    assert e[a][c] == pytest.approx(m[a][c] / b[a][c], rel=1e-4) and e[a][c] <= 1.05, (a, c, sec)


def test_links_bound_is_each_directions_sender_shaper_and_the_slow_host_is_named(lab):
    # tbf on each host's egress (what the host's own tc shows): a -> b is bounded by a's shaper, whatever b's is
    lab3 = lab(3, scenario=[("slow-link", "h1", FAST, "egress"), ("slow-link", "h2", FAST, "egress"),
                            ("slow-link", "h3", SLOW, "egress")])
    rep, sec = links_section(lab3)
    b, m, e, by = sec["bound_gbps"], sec["matrix_gbps"], sec["efficiency"], sec["bound_by"]
    for x in (0, 1):
        assert b[x][2] == b[x][1 - x] == pytest.approx(gbps(FAST)), json.dumps(sec)
        assert b[2][x] == pytest.approx(gbps(SLOW)) and by[2][x] == "node 2 eth0: tbf (sender)", by
    for a in range(3):
        for c in range(3):
            if a != c:
                # real traffic through a token bucket: never much above its rate, and not far below it
                assert e[a][c] == pytest.approx(m[a][c] / b[a][c], rel=1e-4) and 0.5 < e[a][c] <= 1.05, (a, c, sec)
    assert sec["wrong_bounds"] == []
    [chk] = [c for c in rep["checks"] if c["id"] == "links.efficiency"]
    assert chk["status"] == "pass", chk


@pytest.mark.long  # per-direction bounds: test_links_bound_is_each_directions_sender_shaper... in CI
def test_links_a_slow_sender_on_node_0_and_an_ingress_limit_are_bounded_per_direction(lab):
    """Issue 32's neighbours on one lab: the 100 Mb/s egress shaper on node 0 instead of node 2 (pairs INTO it read
    95%-381% of a bound that was its egress), then a host whose ingress is limited (ifb + tbf on the host)."""
    lab3 = lab(3, scenario=[("slow-link", "h1", "100mbit", "egress"), ("slow-link", "h2", FAST, "egress"),
                            ("slow-link", "h3", FAST, "egress")])
    _, sec = links_section(lab3)
    b, by = sec["bound_gbps"], sec["bound_by"]
    for x in (1, 2):
        assert b[0][x] == pytest.approx(gbps("100mbit")) and by[0][x].startswith("node 0 eth0: tbf"), by
        assert b[x][0] == pytest.approx(gbps(FAST)), json.dumps(sec)  # into node 0: the sender's 1 Gb/s
    assert_never_above_bound(sec)
    assert sec["wrong_bounds"] == [], sec["wrong_bounds"]
    print("egress on node 0:", json.dumps({k: sec[k] for k in ("matrix_gbps", "efficiency")}))
    # h3 (node 2) limits what it receives to 100 Mb/s; h1 and h2 send at up to 1 Gb/s
    lab3.scenario("healthy")
    for h in ("h1", "h2"):
        lab3.slow_link(h, FAST, "egress")
    lab3.slow_link("h3", "100mbit", "ingress")
    _, sec = links_section(lab3)
    b, e, by = sec["bound_gbps"], sec["efficiency"], sec["bound_by"]
    for x in (0, 1):
        assert b[x][2] == pytest.approx(gbps("100mbit")), json.dumps(sec)
        assert by[x][2] == "node 2 eth0: ingress via ifb0: tbf (receiver)", by
        assert 0.5 < e[x][2] <= 1.05, json.dumps(sec)
    assert_never_above_bound(sec)
    print("ingress on node 2:", json.dumps({k: sec[k] for k in ("matrix_gbps", "efficiency", "wrong_bounds")}))


@pytest.mark.long  # bench's bound through a shaper: links' (two tests above) is CI's
def test_bench_bound_is_the_slowest_hosts_shaper(lab):
    lab3 = lab(3, scenario=[("slow-link", "h1", FAST), ("slow-link", "h2", FAST), ("slow-link", "h3", SLOW)])
    rep = run(lab3, ["bench", "--sizes", "2M-8M:4", "--ops", "all_reduce,all_gather", "--iters", "3", "--warmup", "1",
                     "--min-efficiency", "0.5"])
    assert rep["exit_code"] == 0, json.dumps(rep["checks"], indent=1)
    for r in rep["bench"]:
        assert r["bound_gbps"] == pytest.approx(gbps(SLOW)), r
        assert r["bound_by"].startswith("node 2 eth0: tbf"), r
        assert r["efficiency"] == pytest.approx(r["busbw_gbps"] / r["bound_gbps"], rel=1e-4)
    effs = [c for c in rep["checks"] if c["id"] == "bench.efficiency"]
    assert {c["evidence"]["op"] for c in effs} == {"all_reduce", "all_gather"}
    assert all(c["status"] == "pass" and "node 2" in c["summary"] for c in effs), effs
    [gate] = [c for c in rep["checks"] if c["id"] == "bench.min_efficiency"]
    assert gate["status"] == "pass", gate
    for e in rep["bench_summary"]["per_op"]:
        assert e["bound_gbps"] == pytest.approx(gbps(SLOW)) and e["efficiency"] > 0.5, e


def test_unshaped_veth_gives_no_bound_and_says_why(lab):
    # issue 44: the veth's "10 Gb/s" is the kernel's fixed figure; the lab's veths carried 1.9 GB/s against it, and
    # every healthy run warned "bound is wrong" (so failed --strict). No bound: said why, not judged, exit 0 strict.
    lab2 = lab(2)
    rep = run(lab2, ["links", "--size", "4M", "--iters", "3", "--strict"])
    sec = rep["links"]
    assert sec["bound_gbps"][0][1] is None, json.dumps(sec)
    assert "veth/virtual" in sec["bound_by"][0][1] and "unknown" in sec["bound_by"][0][1]
    [chk] = [c for c in rep["checks"] if c["id"] == "links.efficiency"]
    assert chk["status"] == "skip" and "bound unknown" in chk["summary"], chk
    assert "not a line rate" in chk["detail"]
    assert not sec["wrong_bounds"] and rep["exit_code"] == 0, [(c["id"], c["status"], c["summary"]) for c in
                                                              rep["checks"] if c["status"] not in ("pass", "skip")]


@pytest.mark.long  # the gate on a far-below pair: links' bound test below is CI's
def test_a_pair_far_below_its_bound_is_named_and_the_gate_fails(lab):
    # Every host's link is 1 Gb/s (htb default class 1:10 where a pair class exists); h2 -> h3 alone is held to
    # 50 Mb/s by an htb class behind a u32 filter. The bound of that pair is still 1 Gb/s (the default class: a
    # per-destination class is not attributed), so its efficiency is ~5 % and is called out.
    lab3 = lab(3, scenario=[("slow-link", "h1", FAST), ("slow-link", "h2", FAST), ("slow-link", "h3", FAST),
                            ("slow-pair", "h2", "h3", "50mbit")])
    rep = run(lab3, ["links", "--size", "4M", "--iters", "3", "--min-efficiency", "0.5"])
    sec = rep["links"]
    assert sec["bound_gbps"][1][2] == pytest.approx(gbps(FAST)), json.dumps(sec)
    # what sets the bound, named without its rate (the rate is bound_gbps, rendered once in the figures' unit)
    assert sec["bound_by"][1][2] == "node 1 eth0: htb class 1:10 (sender)", sec["bound_by"]
    assert sec["efficiency"][1][2] < 0.1 < 0.5 < sec["efficiency"][2][1]
    [chk] = [c for c in rep["checks"] if c["id"] == "links.efficiency"]
    assert chk["status"] == "warn" and "node 1 (h2) -> node 2 (h3)" in chk["summary"], chk
    [gate] = [c for c in rep["checks"] if c["id"] == "links.min_efficiency"]
    assert gate["status"] == "fail" and gate["summary"].startswith("1 -> 2: efficiency"), gate
    assert rep["exit_code"] == 1
