"""Issue 77, item 2: words made from what just happened, not from a template, each through the CLI: watch's fix for a
rank whose kind it could not tell, a node's pointer to a full report no node wrote, an interrupted bench, and
consequence rows that name only other ranks' lines."""

from __future__ import annotations

import json

import pytest

from ncclcheck_lab.loopstore import loopback_store
from tests.conftest import free_port, run_cli


@pytest.mark.slow
def test_watch_fix_for_an_untold_rank_says_why_this_look_could_not_tell_and_never_to_run_watch(monkeypatch, tmp_path):
    """A gloo job of one collective a step (DDP with one bucket), rank 5 computing half a step longer: watch names
    rank 5 and cannot tell compute from communication (its lateness falls after its work either way, and gloo records
    no collective's own time). Its fix says so and what would tell (NCCL with TORCH_NCCL_ENABLE_TIMING=1, py-spy on
    that rank), never "run `ncclcheck watch`", which is what just ran, nor a longer look, which would not help."""

    from ncclcheck_lab import livesim, slowsim

    # every step's collective the same one: the simulated job's two bucket sizes made one
    monkeypatch.setattr(slowsim, "_SIZES", ([[1024]], [[1024]]))
    port = free_port()
    store = loopback_store(port)
    job = slowsim.Job(world=6, per_host=2, step_us=40_000, colls=1, slow={5: (0, 0.5)}, jitter=0.02, steps=400)
    ranks = livesim.start(livesim.laid(job, 40), list(range(job.world)), port)
    try:
        assert all(r.registered.wait(30) for r in ranks)
        p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", "10",
                    "--json", str(tmp_path / "w.json"), timeout=120)
    finally:
        for r in ranks:
            r.close()
        del store
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    doc = json.loads((tmp_path / "w.json").read_text())
    slow = next(c for c in doc["checks"] if c["id"] == "live.slow")
    f = slow["evidence"]["named"][0]
    assert (f["rank"], f["kind"], f["untold"], f["backend"]) == (5, "untold", "no pattern", "gloo"), f
    fix = slow["fix"]
    assert "`ncclcheck watch`" not in fix and "watch --follow" not in fix, fix
    assert "this look saw one collective a step" in fix and "gloo records no collective's own time" in fix, fix
    assert "NCCL with TORCH_NCCL_ENABLE_TIMING=1" in fix and "`py-spy dump --pid PID` on rank 5 (host h3)" in fix, fix
    console = " ".join(p.stdout.split())  # the console's fix line says the same, wrapped
    assert "fix: tell whether rank 5 (host h3) computes or communicates late: this look saw one collective" in console


@pytest.mark.parametrize("command", ["preflight", "bench"])
def test_a_node_that_never_reached_node_0_says_its_line_is_the_whole_report(command, tmp_path):
    """A wrong master address: nothing listens there, no node 0 ever ran, so node 1's line must not send the user to
    "global rank 0's console" nor say that node 0 writes the JSON asked for."""
    out = tmp_path / "pf.json"
    p = run_cli(command, "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
                str(free_port()), "--timeout", "2", "--json", str(out), timeout=120)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    line = next(ln for ln in (p.stdout + p.stderr).splitlines() if f"ncclcheck {command}: node 1 (" in ln
                and "exit 1" in ln)
    assert "this line is the whole report: no word from node 0 reached this node" in line, line
    assert "rank 0's console" not in line and f"{out} not written: node 0 writes it" in line, line
    assert "root cause on node 1: [rendezvous.master_reachable]" in line, line
    assert not out.exists()


@pytest.mark.slow
def test_a_node_that_read_node_0s_verdict_points_at_node_0s_console(tmp_path):
    """Node 2 of 3 never starts: node 0 decides that the world did not form and prints why; node 1 read that verdict,
    so its line sends the user to node 0's console, where the full report is."""
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    port = str(free_port())
    world = ("--nnodes", "3", "--master-addr", "127.0.0.1", "--master-port", port, "--timeout", "8")
    node0 = subprocess.Popen([sys.executable, "-m", "ncclcheck", "preflight", *world, "--node-rank", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(), cwd=REPO)
    try:
        p = run_cli("preflight", *world, "--node-rank", "1", timeout=120)
    finally:
        shown, _ = node0.communicate(timeout=120)
    assert node0.returncode == 1 and "node rank(s) 2 never joined" in shown, shown[-3000:]
    line = next(ln for ln in (p.stdout + p.stderr).splitlines() if "ncclcheck preflight: node 1 (" in ln
                and "exit 1" in ln)
    assert "full report on global rank 0's console (node 0" in line and "whole report" not in line, line


def _readme_job_log() -> str:
    """The job.log the README pastes for `ncclcheck diagnose job.log`, as the README holds it."""
    import re

    from tests.conftest import REPO

    with open(f"{REPO}/README.md", encoding="utf-8") as fh:
        readme = fh.read()
    return re.search(r"cat > job\.log <<'EOF'\n(.*?)\nEOF\n", readme, flags=re.S).group(1) + "\n"


def test_the_readme_job_logs_consequence_rows_name_only_other_ranks_each_line_as_what_it_is(tmp_path):
    """The README's job.log: rank 2 never entered all_reduce #1204; ranks 0, 1, 3 timed out in it; rank 2 received a
    dump signal. The consequence row lists ranks 0, 1 and 3 (never rank 2 as a consequence of itself), and rank 2's
    line, said with the root cause, is a dump signal, not a timeout it did not have."""
    (tmp_path / "job.log").write_text(_readme_job_log())
    p = run_cli("diagnose", str(tmp_path / "job.log"), "--json", "-", timeout=60)
    assert p.returncode == 1, p.stderr[-2000:]
    checks = {c["id"]: c for c in json.loads(p.stdout)["checks"]}
    root = checks["postmortem.root_cause"]
    assert root["summary"].startswith("rank 2 never entered all_reduce #1204 of default_pg"), root
    warn = checks["postmortem.nccl_warnings"]
    assert warn["status"] == "warn" and warn["summary"].endswith("; and 2 more consequence(s) of it"), warn
    said = warn["findings"]
    assert [s.split(":", 1)[0] for s in said] == ["rank 0", "rank 1", "rank 3"], said
    assert all("NCCL's watchdog timed out" in s and "because rank 2 never entered" in s for s in said), said
    assert "rank 2:" not in warn["detail"], warn["detail"]
    own = next(ln for ln in root["detail"].splitlines() if ln.startswith("rank 2:"))
    assert own.startswith("rank 2: received a dump signal: another rank's watchdog timed out"), own
    assert "NCCL's watchdog timed out in a collective" not in own, own
    assert not [c for c in checks.values() if "nothing but the root cause" in c["summary"]]


def test_a_row_whose_only_finding_is_the_root_cause_passes_saying_so_and_is_folded():
    """The README's fail.py remains (rank 1 raised): postmortem.collectives holds only rank 1's own "never entered"
    line, the root cause said again; it passes saying nothing else was found, and the console folds it."""
    import os

    from tests.conftest import REPO

    case = os.path.join(REPO, "tests", "postmortem", "fixtures", "raised_unretired")
    files = [os.path.join(case, f) for f in sorted(os.listdir(case)) if not f.endswith(".md")]
    p = run_cli("diagnose", *files, "--json", "-", timeout=60)
    assert p.returncode == 1, p.stderr[-2000:]
    coll = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "postmortem.collectives")
    assert coll["status"] == "pass", coll
    assert coll["summary"] == ("nothing besides the root cause (postmortem.root_cause) and 1 line(s) of its own "
                               "rank(s), said with it"), coll
    shown = run_cli("diagnose", *files, timeout=60).stdout
    assert "postmortem.collectives" not in shown and "nothing but the root cause" not in shown, shown
