"""`ncclcheck links` on namespace hosts over real TCP: a tbf-limited host, a limited pair, healthy, a killed host.

Node rank i runs on host h(i+1). Every host is shaped to 1 Gbit/s so pairs are network-bound (unshaped veth on a
small shared VM is CPU-bound and varies 3x between transfers); the fault is a 10x slower host or path.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]



def _missing() -> str:
    if importlib.util.find_spec("ncclcheck_lab.netlab.harness") is None:
        return "ncclcheck_lab/netlab/harness.py (the netlab lab) is not here yet"
    if not hasattr(importlib.import_module("ncclcheck.api"), "run_links"):
        return "ncclcheck links is not wired yet (api.run_links)"
    return ""


if _missing():
    pytest.skip(_missing(), allow_module_level=True)

SIZE = "4M"
RATE = "100mbit"
TIMEOUT = 60


def cluster(n: int, *extra) -> list:
    return [("slow-link", f"h{i + 1}", "1gbit") for i in range(n)] + list(extra)


def world(lab_, i: int) -> list[str]:
    return ["links", "--nnodes", str(len(lab_.hosts)), "--node-rank", str(i), "--master-addr", lab_.ip("h1"),
            "--master-port", "29500", "--nproc-per-node", "1", "--timeout", str(TIMEOUT), "--size", SIZE,
            "--iters", "3"]


def run_links(lab_, deadline: float = 120):
    runs = lab_.ncclcheck({h: world(lab_, i) for i, h in enumerate(lab_.hosts)}, deadline=deadline)
    for h, r in runs.items():
        assert r.report is not None, f"{h}: no report (rc {r.rc})\n{r.stderr[-3000:]}"
    return runs


def links_of(runs) -> dict:
    sec = runs["h1"].report["links"]
    # every node writes the same aggregated verdict
    assert all(r.report.get("links") == sec for r in runs.values())
    return sec


def slow_checks(report) -> list:
    return [c for c in report["checks"] if c["id"] == "links.slow" and c["status"] == "fail"]


@pytest.mark.long  # the same fault as test_links_job_lab's; CI names a tbf-limited host in the half-rate case below
def test_tbf_limited_host_is_named_and_no_other(lab):
    lab4 = lab(4, scenario=cluster(4, ("slow-link", "h3", RATE)))
    runs = run_links(lab4)
    sec = links_of(runs)
    assert sec["slow_nodes"] == [2], json.dumps(sec["matrix_gbps"])
    assert sec["slow"] == []
    [c] = slow_checks(runs["h1"].report)
    assert c["node"] == 2 and "h3" in c["summary"]
    assert all(r.rc == 1 for r in runs.values())


def test_half_rate_host_is_named_slow_and_fails_the_run(lab):
    """Issue 44 item 3: h3 at 500 Mbit/s among hosts at 1 Gbit/s, its links at half the others' (0.06 vs 0.12 GB/s)
    and the healthy ones within 1.01x of each other, at their shapers: named, with its rates, exit 1."""
    lab4 = lab(4, scenario=cluster(4, ("slow-link", "h3", "500mbit")))
    runs = run_links(lab4)
    sec = links_of(runs)
    assert sec["slow_nodes"] == [2] and sec["slow"] == [], json.dumps(sec["matrix_gbps"])
    [c] = slow_checks(runs["h1"].report)
    assert c["node"] == 2 and "h3" in c["summary"] and "GB/s" in c["summary"], c
    assert all(r.rc == 1 for r in runs.values())


def test_one_limited_path_names_the_link_not_a_node(lab):
    lab4 = lab(4, scenario=cluster(4, ("slow-pair", "h2", "h4", RATE)))
    sec = links_of(run_links(lab4))
    assert sec["slow_nodes"] == [], json.dumps(sec["matrix_gbps"])
    assert [(s["a"], s["b"]) for s in sec["slow"]] == [(1, 3)]
    # only h2 -> h4 is shaped: the report says which direction
    s = sec["slow"][0]
    assert s["gbps_ab"] < s["gbps_ba"]


@pytest.mark.long  # CI keeps healthy unshaped hosts under --strict (test_bounds_lab) beside the half-rate host here
def test_healthy_four_hosts_flag_nothing(lab):
    lab4 = lab(4, scenario=cluster(4))
    runs = run_links(lab4)
    sec = links_of(runs)
    m = sec["matrix_gbps"]
    assert all((m[a][b] is None) == (a == b) for a in range(4) for b in range(4))
    assert sec["slow"] == [] and sec["slow_nodes"] == [] and sec["dead"] == []
    assert all(r.rc == 0 for r in runs.values()), {h: r.stderr[-2000:] for h, r in runs.items()}


def _tx_bytes(lab_, host: str) -> int:
    out = lab_.exec(host, ["cat", "/sys/class/net/eth0/statistics/tx_bytes"], timeout=5)
    return int(out.stdout.strip() or 0)


@pytest.mark.long  # test_links_job_lab's killed host stays in CI: scripts/long_tests.py
def test_host_killed_during_the_run_is_named_and_the_others_finish_in_time(lab):
    lab4 = lab(4, scenario=cluster(4))
    # big enough that the run lasts well past the moment h3 is killed
    args = {h: [*world(lab4, i), "--size", "16M", "--iters", "6"] for i, h in enumerate(lab4.hosts)}
    paths = {h: str(lab4.tmp / f"links-{h}.json") for h in lab4.hosts}
    procs = {h: lab4.spawn(h, [sys.executable, "-m", "ncclcheck", *a, "--json", str(lab4.tmp / "links-%h.json")],
                           cwd=str(lab4.tmp),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for h, a in args.items()}
    # Kill h3 once it is moving bulk data: the world has formed and the links rounds are under way.
    base = _tx_bytes(lab4, "h3")
    end = time.monotonic() + 90
    while _tx_bytes(lab4, "h3") - base < 40 << 20:
        assert time.monotonic() < end, "h3 never started sending bulk data"
        assert procs["h3"].poll() is None, "h3 exited before it was killed"
        time.sleep(0.1)
    os.killpg(procs["h3"].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    for h in ("h1", "h2", "h4"):
        try:
            procs[h].wait(timeout=TIMEOUT + 30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{h} still running {time.monotonic() - killed_at:.0f} s after h3 was killed")
    waited = time.monotonic() - killed_at
    for h in ("h1", "h2", "h4"):
        rep = json.loads(open(paths[h]).read())
        assert rep["exit_code"] == 1 and procs[h].returncode == 1
        dead = [c for c in rep["checks"] if c["id"] == "links.dead" and c["status"] == "fail"]
        assert [c["node"] for c in dead] == [2], rep["checks"]
        assert rep["links"]["dead"] == [2]
    assert waited < TIMEOUT  # heartbeats and the 20x rule, not the --timeout, caught it
    print(f"survivors exited {waited:.1f} s after h3 was killed")


@pytest.mark.long  # five 4-host runs (~1 min); the 2-host unshaped case runs in CI (test_bounds_lab)
def test_strict_on_four_unshaped_veth_hosts_passes_five_runs_of_five(lab):
    """Issue 44's done-when: veth reports a speed that is no line rate (10 Gb/s, carried ~2 GB/s here), so it sets no
    bound; the hosts are compared with each other only, and a healthy lab exits 0 under --strict every time."""
    lab4 = lab(4)
    codes = []
    for _ in range(5):
        runs = lab4.ncclcheck({h: [*world(lab4, i), "--strict"] for i, h in enumerate(lab4.hosts)}, deadline=120)
        codes.append(runs["h1"].rc)
        rep = runs["h1"].report
        assert rep is not None, runs["h1"].stderr[-3000:]
        bad = [(c["id"], c["summary"]) for c in rep["checks"] if c["status"] in ("fail", "warn")]
        assert runs["h1"].rc == 0 and not bad, (codes, bad)
    print(f"FIGURE links --strict on 4 unshaped veth hosts: exit codes {codes}")
