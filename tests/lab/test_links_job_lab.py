"""links_job over real kernel TCP between namespace hosts, driven without the CLI (tests/lab/links_driver.py).

Every host is shaped to 1 Gbit/s so that a pair is network-bound: unshaped veth on a small shared VM is bound by the
CPU all namespaces share and varies 3x from transfer to transfer, which is noise, not a slow link. The fault is
then a 10x slower host (tbf) or path (htb + u32 match ip dst). Node rank i runs on host h(i+1).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PAYLOAD = {"size": 4 << 20, "iters": 3}
TIMEOUT = 10.0


def cluster(n: int, *extra) -> list:
    return [("slow-link", f"h{i + 1}", "1gbit") for i in range(n)] + list(extra)


def commands(lab_, payload: dict) -> dict:
    n = len(lab_.hosts)
    return {h: [sys.executable, "-m", "tests.lab.links_driver", "--rank", str(i), "--nnodes", str(n),
                "--master", f"{lab_.ip('h1')}:29511", "--payload", json.dumps(payload), "--timeout", str(TIMEOUT),
                "--out", str(lab_.tmp / f"{h}.json")]
            for i, h in enumerate(lab_.hosts)}


def run(lab_, payload=PAYLOAD) -> dict:
    runs = lab_.run_all(commands(lab_, payload), deadline=120, env={"GLOO_SOCKET_IFNAME": "eth0"})
    assert all(r.rc == 0 for r in runs.values()), {h: r.stderr[-2000:] for h, r in runs.items()}
    out = {h: json.loads((lab_.tmp / f"{h}.json").read_text()) for h in lab_.hosts}
    assert all(o["links"] == out["h1"]["links"] for o in out.values())  # one verdict everywhere
    return out["h1"]


@pytest.mark.long  # CI: the CLI's half-rate host in test_links_lab (tbf), the same rule through links
def test_tbf_limited_host_is_named_and_no_other(lab):
    res = run(lab(4, scenario=cluster(4, ("slow-link", "h3", "100mbit"))))
    sec = res["links"]
    assert sec["slow_nodes"] == [2] and sec["slow"] == [], sec["matrix_gbps"]
    [c] = [c for c in res["checks"] if c["status"] == "fail"]
    assert c["id"] == "links.slow" and c["node"] == 2 and "(h3)" in c["summary"]
    # rates as configured: ~120 MB/s links, ~12 MB/s from and to h3
    assert 0.09 < sec["reference_gbps"] < 0.13
    assert all(v < 0.015 for v in sec["matrix_gbps"][2] if v is not None)


@pytest.mark.long  # CI: test_links_lab's limited path through the CLI, tests/links' slow path between two nodes
def test_one_limited_path_names_the_link_and_no_node(lab):
    res = run(lab(4, scenario=cluster(4, ("slow-pair", "h2", "h4", "100mbit"))))
    sec = res["links"]
    assert sec["slow_nodes"] == [] and [(s["a"], s["b"]) for s in sec["slow"]] == [(1, 3)], sec["matrix_gbps"]
    assert sec["slow"][0]["gbps_ab"] < 0.015 < sec["slow"][0]["gbps_ba"]  # only h2 -> h4 is shaped


def test_healthy_cluster_flags_nothing(lab):
    res = run(lab(4, scenario=cluster(4)))
    sec = res["links"]
    assert sec["slow"] == [] and sec["slow_nodes"] == [] and sec["dead"] == []
    # every link is shaped (cluster(4)), so links.efficiency judges each pair against its shaper's rate
    assert {c["id"]: c["status"] for c in res["checks"]} == {"links.slow": "pass", "links.efficiency": "pass"}


def _tx_bytes(lab_, host: str) -> int:
    return int(lab_.exec(host, ["cat", "/sys/class/net/eth0/statistics/tx_bytes"], timeout=5).stdout.strip() or 0)


@pytest.mark.long  # CI: tests/links/test_links_job.py's killed node (real ranks on loopback, the same heartbeat)
def test_host_killed_mid_run_is_named_and_the_others_finish_in_time(lab):
    lab4 = lab(4, scenario=cluster(4))
    payload = {"size": 16 << 20, "iters": 6}  # ~1 s per transfer: the run lasts well past the kill
    env = {"GLOO_SOCKET_IFNAME": "eth0"}
    procs = {h: lab4.spawn(h, argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for h, argv in commands(lab4, payload).items()}
    base, end = _tx_bytes(lab4, "h3"), time.monotonic() + 60
    while _tx_bytes(lab4, "h3") - base < 40 << 20:  # h3 is moving bulk data: the rounds are under way
        assert time.monotonic() < end and procs["h3"].poll() is None, "h3 never started its transfers"
        time.sleep(0.05)
    os.killpg(procs["h3"].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    for h in ("h1", "h2", "h4"):
        procs[h].wait(timeout=4 * TIMEOUT + 30)
    waited = time.monotonic() - killed_at
    res = json.loads((lab4.tmp / "h1.json").read_text())
    assert res["links"]["dead"] == [2]
    assert [c["node"] for c in res["checks"] if c["id"] == "links.dead"] == [2]
    for h in ("h2", "h4"):
        assert json.loads((lab4.tmp / f"{h}.json").read_text())["links"] == res["links"]
    # the survivors' remaining rounds ran without h3; they did not wait a full timeout per round
    assert waited < 4 * TIMEOUT + 30
    print(f"survivors finished {waited:.1f} s after the kill")
