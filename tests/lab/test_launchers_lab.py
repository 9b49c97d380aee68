"""ncclcheck in the training script's seat, under the real launchers, on 3 lab hosts with 2 ranks each.

torchrun (static and c10d rendezvous), `fabric run`, mpirun (rsh agent into the hosts' namespaces) and srun (a real
slurmctld + one slurmd per host). Each healthy run: the world forms with 3 nodes, 6 ranks and the launcher's name,
every process exits 0 and the merged output holds exactly one full report. Each launcher has one failing scenario
that exits non-zero everywhere and names the cause. The commands are docs/deploy.md's.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Optional

import pytest

from ncclcheck_lab.netlab import launchers as nlx
from ncclcheck_lab.netlab.harness import REPO_ROOT, HostRun, Lab, code_drift, nl

pytestmark = pytest.mark.lab

PY = sys.executable
PORT = 29500
OK_TIMEOUT = 60  # --timeout of healthy runs: 6 ranks importing torch on a 2-core machine are slow
FAIL_TIMEOUT = 10
DEADLINE = 240  # the harness kills whatever still runs after this
MAIN = str(REPO_ROOT / "ncclcheck" / "__main__.py")  # `fabric run` takes a script path, not -m
ENV = {"COLUMNS": "200"}  # no wrapped lines to match across
HEADER = re.compile(r"ncclcheck (\w+) (\d+) nodes?, (\d+) ranks?, launched by (\w+)")


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (.ci/run installs them: apt-get install slurm-wlm munge "
                    "openmpi-bin; pip install lightning)")


def merged(runs: dict[str, HostRun]) -> str:
    return "".join(r.stdout for r in runs.values())


def explain(runs: dict[str, HostRun]) -> str:
    return "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s timed_out={r.timed_out}\n{r.stdout[-3000:]}\n"
                     f"{r.stderr[-3000:]}" for h, r in runs.items())


def assert_one_report(runs: dict[str, HostRun], launcher: str, command: str = "preflight") -> None:
    out = merged(runs)
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    assert HEADER.findall(out) == [(command, "3", "6", launcher)], explain(runs)
    # the other two nodes say one line each, pointing at rank 0's console; the other ranks say nothing
    assert len(re.findall(r"full report on global rank 0's console", out)) == 2, explain(runs)
    assert "\x1b[" not in out, "ANSI codes on a pipe"


def assert_reports(paths: list[Path], launcher: str) -> None:
    assert paths, "no JSON report written"
    for p in paths:
        w = json.loads(p.read_text())["world"]
        assert (w["nnodes"], w["world_size"], w["launcher"]) == (3, 6, launcher), (p, w)


def torchrun_argv(lab: Lab, node: int, args: list[str], c10d: bool = False) -> list[str]:
    world = (["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{lab.ip('h1')}:{PORT}", "--rdzv-id", "lab11"] if c10d
             else ["--node-rank", str(node), "--master-addr", lab.ip("h1"), "--master-port", str(PORT)])
    return [PY, "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2", *world,
            "-m", "ncclcheck", *args]


def fabric_argv(lab: Lab, node: int, args: list[str]) -> list[str]:
    return ["fabric", "run", "--accelerator", "cpu", "--devices", "2", "--num-nodes", "3", "--node-rank", str(node),
            "--main-address", lab.ip("h1"), "--main-port", str(PORT), MAIN, *args]


def per_node(lab: Lab, make, args: list[str], extra: Optional[dict] = None) -> dict[str, HostRun]:
    cmds = {h: make(lab, i, [*args, *((extra or {}).get(h, []))]) for i, h in enumerate(lab.hosts)}
    return lab.run_all(cmds, deadline=DEADLINE, cwd=lab.tmp, env=ENV)


def assert_code_drift_named(runs: dict[str, HostRun]) -> None:
    assert all(r.rc == 1 for r in runs.values()), explain(runs)
    out = merged(runs)
    assert HEADER.findall(out)[0][0] == "preflight", explain(runs)
    assert re.search(r"FAIL\s+code\.consistent .*h3", out), explain(runs)


@pytest.mark.parametrize("launcher, make", [
    # CI: one report under torchrun in test_guard_lab (a guarded job) and below (links), a code drift named in
    # test_preflight_lab; c10d and fabric run: test_guard_lab runs each in CI (a guarded job under c10d meets a
    # fault, one under fabric run trains); all three here in scripts/long_tests.py
    pytest.param("torchrun", lambda lab, i, a: torchrun_argv(lab, i, a), marks=pytest.mark.long),
    pytest.param("torchrun", lambda lab, i, a: torchrun_argv(lab, i, a, c10d=True), marks=pytest.mark.long),
    pytest.param("fabric", fabric_argv, marks=pytest.mark.long),
], ids=["torchrun-static", "torchrun-c10d", "fabric-run"])
def test_torchrun_family_one_report_then_code_drift_fails_everywhere(lab, launcher, make):
    if launcher == "fabric":
        need("fabric")
    lab3 = lab(3)
    runs = per_node(lab3, make, ["preflight", "--timeout", str(OK_TIMEOUT), "--json", str(lab3.tmp / "pf-%h.json")])
    assert_one_report(runs, launcher)
    assert_reports(sorted(lab3.tmp.glob("pf-h*.json")), launcher)
    runs = per_node(lab3, make, ["preflight", "--timeout", str(OK_TIMEOUT)], extra=code_drift(lab3))
    assert_code_drift_named(runs)


# CI runs mpirun and srun in test_guard_lab (a guarded job trains under each and meets a master fault: the same
# worker-mode world and one report as the CLI's); these two, a minute of 2 jobs each, run in scripts/long_tests.py
@pytest.mark.long
def test_mpirun_one_report_then_blocked_master_port_fails_everywhere(lab):
    need("mpirun")
    lab3 = lab(3)
    env = {"MASTER_ADDR": lab3.ip("h1"), "MASTER_PORT": str(PORT), "PYTHONPATH": str(REPO_ROOT), **ENV}
    argv = nlx.mpirun_argv(lab3.state, 2, [PY, "-m", "ncclcheck", "preflight", "--timeout", str(OK_TIMEOUT),
                                           "--json", str(lab3.tmp / "pf-%n.json")], env)
    runs = lab3.run_all({"h1": argv}, deadline=DEADLINE, cwd=lab3.tmp)
    assert_one_report({"h1": runs["h1"]}, "mpi")
    assert_reports(sorted(lab3.tmp.glob("pf-*.json")), "mpi")

    lab3.block_port("h1", PORT)
    # mpirun kills the job at the first non-zero exit; to see every rank's code and line, let them all finish and
    # have each print its own exit code.
    rank_cmd = f"{PY} -m ncclcheck preflight --timeout {FAIL_TIMEOUT}; echo rank=$OMPI_COMM_WORLD_RANK rc=$?"
    argv = nlx.mpirun_argv(lab3.state, 2, ["/bin/sh", "-c", rank_cmd], env)
    argv[1:1] = ["--mca", "orte_abort_on_non_zero_status", "0"]
    runs = lab3.run_all({"h1": argv}, deadline=DEADLINE, cwd=lab3.tmp)
    out = runs["h1"].stdout
    assert sorted(re.findall(r"rank=(\d) rc=(\d+)", out)) == [(str(r), "1") for r in range(6)], explain(runs)
    assert len(re.findall(r"node [12] \(h[23]\) rank \d: FAIL, exit 1", out)) == 2, explain(runs)
    assert f"cannot reach master {lab3.ip('h1')}:{PORT}" in out and "never joined" in out, explain(runs)


@pytest.mark.long
def test_srun_one_report_json_per_job_then_blocked_master_port_fails_everywhere(lab):
    """Also issue 36: with no token, munge signs the run (`trust: munge`) and a stranger's forged pass is ignored."""
    need("srun", "slurmctld", "slurmd", "munged")
    lab3 = lab(3)
    env = {**nlx.slurm_up(lab3.state), **ENV}
    srun = ["srun", "-N", "3", "--ntasks-per-node=2", PY, "-m", "ncclcheck", "preflight"]
    run = lab3.exec("h1", [*srun, "--timeout", str(OK_TIMEOUT), "--json", "pf-%j.json"], env=env, cwd=lab3.tmp,
                    timeout=DEADLINE)
    runs = {"h1": HostRun("h1", srun, run.returncode, run.stdout, run.stderr, 0.0, False)}
    assert_one_report(runs, "slurm")
    written = sorted(p.name for p in lab3.tmp.glob("pf-*.json"))
    assert len(written) == 1 and re.fullmatch(r"pf-\d+\.json", written[0]), written
    assert_reports([lab3.tmp / written[0]], "slurm")
    doc = json.loads((lab3.tmp / written[0]).read_text())
    master = [c for c in doc["checks"] if c["id"] == "rendezvous.master_reachable"]
    assert master and all(c["status"] == "pass" for c in master), master  # tested, not skipped
    assert doc["trust"]["level"] == "munge", doc.get("trust")  # no token configured: munge's per-run key

    # Issue 36: a stranger on h2 (no token, no munge key of the job's) writes a forged pass as soon as node 0's store
    # is up: every rank ignores it and names it, node 0 the forged join record, the others the forged verdict.
    stranger = lab3.spawn("h2", [PY, "-m", "tests.lab.stranger", "pass", lab3.ip("h1"), str(PORT), "--canary",
                                 str(lab3.tmp / "canary"), "--job-id", "squeue", "--hold", "60"],
                          env={**env, "PYTHONPATH": str(REPO_ROOT)}, cwd=str(REPO_ROOT))
    run = lab3.exec("h1", [*srun, "--timeout", str(OK_TIMEOUT), "--master-port", str(PORT), "--json",
                           "forged-%r.json"], env=env, cwd=lab3.tmp, timeout=DEADLINE)
    stranger.kill()
    said = stranger.communicate(timeout=10)
    runs = {"h1": HostRun("h1", srun, run.returncode, run.stdout, run.stderr, 0.0, False)}
    assert run.returncode == 0 and "forged verdict ok" in said[0], (explain(runs), said)
    for rank in range(6):
        t = json.loads((lab3.tmp / f"forged-{rank}.json").read_text())["trust"]
        seen = " ".join(t.get("ignored", []))
        want = "join/" if rank == 0 else "world/verdict: not signed"
        assert t["level"] == "munge" and want in seen and "not signed" in seen, (rank, t, said)

    lab3.block_port("h1", PORT)
    run = lab3.exec("h1", [*srun, "--timeout", str(FAIL_TIMEOUT), "--master-port", str(PORT)], env=env,
                    cwd=lab3.tmp, timeout=DEADLINE)
    runs = {"h1": HostRun("h1", srun, run.returncode, run.stdout, run.stderr, 0.0, False)}
    assert run.returncode != 0, explain(runs)
    assert len(re.findall(r"node [12] \(h[23]\) rank \d: FAIL, exit 1", run.stdout)) == 2, explain(runs)
    assert f"cannot reach master h1:{PORT}" in run.stdout and "never joined" in run.stdout, explain(runs)


def test_bench_under_mpirun_prints_one_report(lab):
    need("mpirun")
    lab3 = lab(3)
    env = {"MASTER_ADDR": lab3.ip("h1"), "MASTER_PORT": str(PORT), "PYTHONPATH": str(REPO_ROOT), **ENV}
    argv = nlx.mpirun_argv(lab3.state, 2, [PY, "-m", "ncclcheck", "bench", "--sizes", "64K", "--ops", "all_reduce",
                                           "--iters", "3", "--warmup", "1", "--timeout", str(OK_TIMEOUT)], env)
    runs = lab3.run_all({"h1": argv}, deadline=DEADLINE, cwd=lab3.tmp)
    assert_one_report(runs, "mpi", command="bench")


def test_slurm_bring_up_leaves_nothing_after_down(lab):
    need("srun", "slurmctld", "slurmd", "munged")
    lab2 = lab(2)
    env = nlx.slurm_up(lab2.state)
    got = lab2.exec("h1", ["srun", "-N", "2", "hostname"], env=env, timeout=30)
    assert got.returncode == 0 and sorted(got.stdout.split()) == ["h1", "h2"], got.stderr
    lab2.down()
    assert not nl.leftovers(lab2.name)


def test_torchrun_heterogeneous_nodes(lab):
    """torchrun lets nodes run different numbers of ranks (LOCAL_WORLD_SIZE 2, 1, 1): the world is 3 nodes, 4 ranks."""
    lab3 = lab(3)
    cmds = {}
    for i, h in enumerate(lab3.hosts):
        argv = torchrun_argv(lab3, i, ["preflight", "--timeout", str(OK_TIMEOUT), "--json",
                                       str(lab3.tmp / "pf-%h.json")])
        argv[argv.index("--nproc-per-node") + 1] = "2" if h == "h1" else "1"
        cmds[h] = argv
    runs = lab3.run_all(cmds, deadline=DEADLINE, cwd=lab3.tmp, env=ENV)
    out = merged(runs)
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    assert HEADER.findall(out) == [("preflight", "3", "4", "torchrun")], explain(runs)
    for p in sorted(lab3.tmp.glob("pf-h*.json")):
        w = json.loads(p.read_text())["world"]
        assert (w["nnodes"], w["world_size"]) == (3, 4), (p, w)


def test_links_under_torchrun_prints_one_report(lab):
    lab3 = lab(3)
    runs = per_node(lab3, lambda lab_, i, a: torchrun_argv(lab_, i, a),
                    # a loaded 2-core machine measures noisy rates: only a link 50x slower than typical is "slow" here
                    ["links", "--size", "4M", "--iters", "3", "--relative", "0.02", "--timeout", str(OK_TIMEOUT)])
    assert_one_report(runs, "torchrun", command="links")


# CI: the PyTorchJob pod (no world flag at all); the Indexed Job's variables in tests/agent/test_launchers.py and
# its lab run in scripts/long_tests.py
@pytest.mark.parametrize("launcher", [pytest.param("kubernetes", marks=pytest.mark.long), "pytorchjob"])
def test_kubernetes_pods_as_node_agents(lab, launcher):
    """What an Indexed Job (JOB_COMPLETION_INDEX) or a PyTorchJob (PET_*) gives each pod, one pod per lab host; the
    pod's ncclcheck spawns its 2 ranks itself. The Indexed Job pod passes --nnodes and the master (the Job does not
    say them); the PyTorchJob pod passes no world flag at all."""
    lab3 = lab(3)
    if launcher == "kubernetes":
        args = ["preflight", "--nnodes", "3", "--nproc-per-node", "2", "--master-addr", "h1", "--master-port",
                str(PORT), "--timeout", str(OK_TIMEOUT)]
        host_env = {h: {"JOB_COMPLETION_INDEX": str(i)} for i, h in enumerate(lab3.hosts)}
    else:
        args = ["preflight", "--timeout", str(OK_TIMEOUT)]
        host_env = {h: {"PET_NNODES": "3", "PET_NODE_RANK": str(i), "PET_MASTER_ADDR": "h1",
                        "PET_MASTER_PORT": str(PORT), "PET_NPROC_PER_NODE": "2"} for i, h in enumerate(lab3.hosts)}
    runs = lab3.ncclcheck({h: args for h in lab3.hosts}, deadline=DEADLINE, env=ENV, host_env=host_env)
    assert_one_report(runs, launcher)
    for run in runs.values():  # every pod writes its own JSON, the same world
        w = run.report["world"]
        assert (w["nnodes"], w["world_size"], w["launcher"]) == (3, 6, launcher), w
