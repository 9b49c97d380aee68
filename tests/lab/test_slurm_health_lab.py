"""ncclcheck as operators run it in Slurm, on a real slurmctld + one slurmd per lab host, with docs/slurm.md's
slurm.conf lines (HealthCheckProgram, HealthCheckNodeState=ANY,CYCLE, Prolog with PrologFlags=Alloc and
PrologEpilogTimeout; scripts/netlab_launchers.docs_slurm_lines reads them from the docs):

- healthy nodes: the health check runs on each and drains none;
- a wrong MTU, or the NCCL interface down: that node drained with an `ncclcheck:` reason by the configured health
  check, within its time limit; healthy again: resumed;
- a node drained by an admin with another reason: untouched, failing or healthy;
- a prolog failure: the job is requeued and the node's reason names the cause;
- a sweep over 4 nodes with one host's link shaped slow: exactly that node drained.

slurmd runs HealthCheckProgram when it starts (before it registers) and every HealthCheckInterval (300 s, longer
than a test): the tests restart a host's slurmd to have Slurm run the check there.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from ncclcheck_lab.netlab import launchers as nlx
from ncclcheck_lab.netlab.harness import REPO_ROOT, Lab

pytestmark = pytest.mark.lab

PY = sys.executable
FLAGS = "--ifname =eth0,eth1 --mtu 1500 --timeout 20"  # the lab's expectations: both NICs up, MTU 1500
SLURM_KILL_S = 60  # Slurm kills a HealthCheckProgram after this


def need() -> None:
    missing = [t for t in ("srun", "sbatch", "scontrol", "slurmctld", "slurmd", "munged") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (.ci/run installs them: apt-get install slurm-wlm munge)")


def write_script(path: Path, body: str) -> str:
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


def slurm_with_health(lab: Lab) -> dict:
    """Slurm on the lab with the docs' lines; the two scripts run this checkout's ncclcheck as the docs' do, and
    note each run (node, exit code, seconds) in runs.log."""
    d = nlx.slurm_dir(lab.state)
    d.mkdir(parents=True, exist_ok=True)
    env = (f"export SLURM_CONF={d / 'slurm.conf'} PYTHONPATH={REPO_ROOT} NCCLCHECK_LOG_DIR={d / 'ncclcheck-logs'} "
           "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    run = (f"t0=$(date +%s.%N); {PY} -m ncclcheck health --drain {FLAGS} --json {d}/$KIND-$SLURMD_NODENAME.json "
           f">>{d}/$KIND.out 2>&1; rc=$?; echo \"$SLURMD_NODENAME $rc $t0 $(date +%s.%N)\" >>{d}/$KIND-runs.log; "
           "exit $rc\n")
    health = write_script(d / "ncclcheck-health", f"#!/bin/sh\n{env} KIND=health\n{run}")
    prolog = write_script(d / "ncclcheck-prolog", f"#!/bin/sh\n{env} KIND=prolog\n{run}")
    lines = nlx.docs_slurm_lines(health, prolog)
    out = nlx.slurm_up(lab.state, extra_conf=tuple(lines), timeout=60)
    assert lines[0] in (d / "slurm.conf").read_text()
    return out


def runs(lab: Lab, kind: str = "health") -> list:
    """(node, rc, started, ended) of every health/prolog run so far."""
    log = nlx.slurm_dir(lab.state) / f"{kind}-runs.log"
    if not log.exists():
        return []
    return [(n, int(rc), float(a), float(b)) for n, rc, a, b in (ln.split() for ln in log.read_text().splitlines())]


def node(lab: Lab, env: dict, name: str) -> dict:
    out = lab.exec("h1", ["scontrol", "show", "node", name], env=env).stdout
    state = re.search(r"State=(\S+)", out).group(1)
    m = re.search(r"^\s*Reason=(.*?)(?: \[[^\]]*@[^\]]*\])?\s*$", out, re.M)
    return {"state": state, "reason": m.group(1) if m else None}


def wait_for(what, pred, timeout: float = 90.0, explain=lambda: ""):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout:g} s; {explain()}")


def rerun_health(lab: Lab, env: dict, host: str) -> tuple:
    """Restart host's slurmd and wait for the health run it makes; returns that run."""
    before = len([r for r in runs(lab) if r[0] == host])
    nlx.restart_slurmd(lab.state, host)
    got = wait_for(f"a health run on {host}", lambda: [r for r in runs(lab) if r[0] == host][before:],
                   explain=lambda: (nlx.slurm_dir(lab.state) / "health.out").read_text()[-3000:])
    return got[0]


def test_health_check_drains_with_its_reason_resumes_its_own_and_leaves_an_admins_drain(lab):
    need()
    lab3 = lab(3, "second-nic")
    env = slurm_with_health(lab3)
    # healthy: the health check ran on every node at slurmd's start, passed, and drained nothing
    wait_for("a health run on every node", lambda: {r[0] for r in runs(lab3)} == set(lab3.hosts))
    assert all(rc == 0 for _, rc, _, _ in runs(lab3)), runs(lab3)
    assert [node(lab3, env, h)["state"] for h in lab3.hosts] == ["IDLE"] * 3

    # a wrong MTU on h2: drained by the configured check, with ncclcheck's reason, well within Slurm's limit
    lab3.set_mtu("h2", 1400)
    run = rerun_health(lab3, env, "h2")
    assert run[1] == 1 and run[3] - run[2] < SLURM_KILL_S, run
    st = wait_for("h2 drained", lambda: (s := node(lab3, env, "h2"))["state"].endswith("DRAIN") and s)
    assert st["reason"] == "ncclcheck: health.nccl_interface: eth0 MTU 1400, expected 1500", st
    doc = json.loads((nlx.slurm_dir(lab3.state) / "health-h2.json").read_text())
    assert doc["command"] == "health" and doc["slurm"]["node"] == "h2" and doc["duration_s"] < 5, doc["duration_s"]
    walls = [round(b - a, 2) for _, _, a, b in runs(lab3)]
    print(f"health runs under slurmd: wall {walls} s; h2's failing run (with the drain) {doc['duration_s']} s "
          "inside ncclcheck")  # the README's figures (pytest -s)

    # healthy again: resumed, because the reason is ncclcheck's
    lab3.set_mtu("h2", 1500)
    assert rerun_health(lab3, env, "h2")[1] == 0
    st = wait_for("h2 resumed", lambda: (s := node(lab3, env, "h2"))["state"] == "IDLE" and s)
    assert st["reason"] is None, st

    # an admin's drain: left alone by a healthy run (not resumed) and by a failing one (reason kept)
    admin = "admin: reseat the cable, ticket 4711"
    lab3.exec("h1", ["scontrol", "update", "NodeName=h3", "State=DRAIN", f"Reason={admin}"], env=env, check=True)
    assert rerun_health(lab3, env, "h3")[1] == 0
    assert node(lab3, env, "h3") == {"state": "IDLE+DRAIN", "reason": admin}
    lab3.exec("h3", ["ip", "link", "set", "eth1", "down"], check=True)
    assert rerun_health(lab3, env, "h3")[1] == 1
    assert node(lab3, env, "h3") == {"state": "IDLE+DRAIN", "reason": admin}

    # the NCCL interface down on a node nobody drained: drained, naming the interface
    lab3.exec("h1", ["ip", "link", "set", "eth1", "down"], check=True)
    assert rerun_health(lab3, env, "h1")[1] == 1
    st = wait_for("h1 drained", lambda: (s := node(lab3, env, "h1"))["state"].endswith("DRAIN") and s)
    assert st["reason"].startswith("ncclcheck: health.nccl_interface: eth1 is down"), st


def test_prolog_failure_requeues_the_job_and_the_reason_names_the_cause(lab):
    need()
    lab2 = lab(2, "second-nic")
    env = slurm_with_health(lab2)
    wait_for("a health run on every node", lambda: {r[0] for r in runs(lab2)} == set(lab2.hosts))
    lab2.exec("h2", ["ip", "link", "set", "eth1", "down"], check=True)
    sub = lab2.exec("h1", ["sbatch", "--parsable", "-w", "h2", "--wrap", "true"], env=env, check=True, cwd=lab2.tmp)
    job = sub.stdout.strip().split(";")[0]
    wait_for("the prolog's run on h2", lambda: any(r[0] == "h2" for r in runs(lab2, "prolog")),
             explain=lambda: lab2.exec("h1", ["scontrol", "show", "job", job], env=env).stdout)
    assert [r[1] for r in runs(lab2, "prolog")] == [1]

    def requeued():
        # the job passes through COMPLETING (reason already launch_failed_requeued_held) before it is PENDING:
        # only PENDING is what an operator sees once slurmctld is done with it
        text = lab2.exec("h1", ["scontrol", "show", "job", job], env=env).stdout
        return "JobState=PENDING" in text and "held" in text.lower() and text

    text = wait_for("the job requeued and held", requeued,
                    explain=lambda: lab2.exec("h1", ["scontrol", "show", "job", job], env=env).stdout)
    st = node(lab2, env, "h2")
    print(re.search(r"JobState=.*", text).group(0), st)  # what the docs say an operator sees (pytest -s)
    assert "DRAIN" in st["state"] and st["reason"].startswith("ncclcheck: health.nccl_interface: eth1 is down"), st


def test_sweep_over_4_nodes_drains_exactly_the_slow_one(lab):
    need()
    lab4 = lab(4, "slow-link h3 100mbit")
    env = nlx.slurm_up(lab4.state, timeout=60)
    # --relative 0.2: h3's links measure ~0.01 GB/s against ~2.4 for the others, 200x below. The lab's links are
    # veths, whose speed is the CPU's: with the suite's other lane busy on the same two cores, one healthy direction
    # (h4 -> h1) read 1.00 GB/s twice, under the default 0.5 x typical, and h1 and h4 were left suspect. This test
    # is about which node is drained; how CPU load reads as a link is the accuracy corpus's (scripts/bench_accuracy.py).
    argv = ["srun", "-N", "4", "--ntasks-per-node=1", PY, "-m", "ncclcheck", "sweep", "--drain", "--size", "2M",
            "--iters", "3", "--relative", "0.2", "--timeout", "60", "--json", "sweep.json", "--good-out", "good",
            "--bad-out", "bad"]
    done = lab4.exec("h1", argv, env={**env, "COLUMNS": "300"}, cwd=lab4.tmp, timeout=300)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr  # a bad node: exit 1
    assert re.search(r"^h3 \| ERROR: ncclcheck: links\.slow: measured [0-9.]+ GB/s", out, re.M), out
    for h in ("h1", "h2", "h4"):
        assert f"{h} | Healthy" in out, out
    assert (lab4.tmp / "good").read_text() == "h[1-2,4]\n" and (lab4.tmp / "bad").read_text() == "h3\n"
    drained = {h: node(lab4, env, h) for h in lab4.hosts}
    assert "DRAIN" in drained["h3"]["state"] and drained["h3"]["reason"].startswith("ncclcheck: links.slow:"), drained
    assert all("DRAIN" not in drained[h]["state"] for h in ("h1", "h2", "h4")), drained
    doc = json.loads((lab4.tmp / "sweep.json").read_text())
    assert doc["command"] == "sweep" and doc["links"]["mode"] == "scale" and len(doc["links"]["rounds"]) <= 4
    print(out)  # the docs' example output comes from here (pytest -s)


@pytest.mark.long  # CI keeps test_sweep_over_4_nodes_drains_exactly_the_slow_one, the same slow node drained
def test_sweep_measures_a_node_100x_slower_slow_and_never_calls_it_healthy(lab):
    """Issue 32: 3 nodes, one sending ~100x slower than the others (a tbf on its egress: the direction into it is
    fast). sweep measured nothing from it ("Timed out waiting 3000ms for recv operation" under --timeout 60: the
    fast direction's tightened bound was applied to the slow one), printed it Healthy and put it in the good list.
    Now each direction's first transfer is bounded by --timeout and its expected time: it is measured slow."""
    need()
    # 24 MiB at 50 Mb/s is 4 s a transfer: longer than the 3 s a fast direction tightened the old bound to
    lab3 = lab(3, "slow-link h3 50mbit egress")
    env = nlx.slurm_up(lab3.state, timeout=60)
    argv = ["srun", "-N", "3", "--ntasks-per-node=1", PY, "-m", "ncclcheck", "sweep", "--drain", "--size", "24M",
            "--iters", "2", "--timeout", "60", "--json", "sweep.json", "--good-out", "good", "--bad-out", "bad"]
    t0 = time.monotonic()
    done = lab3.exec("h1", argv, env={**env, "COLUMNS": "300"}, cwd=lab3.tmp, timeout=400)
    wall = time.monotonic() - t0
    out = done.stdout
    assert "h3 | Healthy" not in out and "h3" not in (lab3.tmp / "good").read_text(), out
    doc = json.loads((lab3.tmp / "sweep.json").read_text())
    m = doc["links"]["matrix_gbps"]
    assert m[2][0] is not None and m[2][1] is not None, json.dumps(doc["links"])  # measured, not timed out
    assert not [c for c in doc["checks"] if c["id"] == "links.pair_error"], out
    assert max(m[2][0], m[2][1]) < 0.1 * min(m[0][1], m[1][0]), m  # and measured slow
    assert re.search(r"^h3 \| ERROR: ncclcheck: links\.slow: measured [0-9.]+ GB/s", out, re.M), out
    assert done.returncode == 1 and (lab3.tmp / "bad").read_text() == "h3\n", out + done.stderr
    assert "DRAIN" in node(lab3, env, "h3")["state"]
    print(f"sweep wall {wall:.1f} s; matrix {json.dumps(m)}; efficiency {json.dumps(doc['links'].get('efficiency'))}")
    print(out)
