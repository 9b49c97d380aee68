"""One report per job on a filesystem every node shares (issue 24, item 1): 3 lab hosts given the same --json path,
as the README's "same flags except --node-rank" does. The lab's scratch directory is on the root filesystem that
every namespace sees, so it is shared here exactly as an NFS home is on a cluster.

Before the fix the last node to finish overwrote node 0's full report (3 nodes' checks) with its own partial one.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from ncclcheck_lab.netlab.harness import HostRun, Lab
from tests.lab.test_launchers_lab import torchrun_argv

pytestmark = pytest.mark.lab

PORT = 29500
OK_TIMEOUT = 60
DEADLINE = 240
ENV = {"COLUMNS": "200"}


def explain(runs: dict[str, HostRun]) -> str:
    return "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
                     for h, r in runs.items())


def assert_node0_full_report(path, runs: dict[str, HostRun], launcher: str) -> None:
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    doc = json.loads(path.read_text())
    assert doc["world"]["launcher"] == launcher and doc["world"]["nnodes"] == 3, doc["world"]
    # node 0's report holds every node's results and every node's facts; a node's own report holds only its own
    assert {c["node"] for c in doc["checks"]} == {None, 0, 1, 2}, [c["node"] for c in doc["checks"]]
    assert sorted(n["node_rank"] for n in doc["nodes"]) == [0, 1, 2]
    assert sorted(p.name for p in path.parent.glob("*.json")) == [path.name]  # nobody wrote anything else
    # the other nodes say, in their one line, that node 0 writes it
    for h in ("h2", "h3"):
        lines = [x for x in runs[h].stdout.splitlines() if x.startswith("ncclcheck preflight: node")]
        assert len(lines) == 1 and f"node 0 writes {path}" in lines[0], explain(runs)
        assert "JSON in" not in lines[0], lines[0]



def _preflight_on_every_host(lab3: Lab, path, *extra: str) -> dict:
    """The README's "same flags on every node except --node-rank", all writing --json to one shared path."""
    return {h: [sys.executable, "-m", "ncclcheck", "preflight", "--nnodes", "3", "--node-rank", str(i),
                "--master-addr", lab3.ip("h1"), "--master-port", str(PORT), "--timeout", str(OK_TIMEOUT),
                "--json", str(path), *extra] for i, h in enumerate(lab3.hosts)}

def test_launcher_mode_three_hosts_one_shared_json_path(lab):
    lab3: Lab = lab(3)
    shared = lab3.tmp / "shared"
    shared.mkdir()
    path = shared / "run.json"
    cmds = _preflight_on_every_host(lab3, path)
    runs = lab3.run_all(cmds, deadline=DEADLINE, cwd=lab3.tmp, env=ENV)
    assert_node0_full_report(path, runs, "ncclcheck")


@pytest.mark.long  # CI: the same shared path under ncclcheck's own launcher below, and torchrun's one report in
# test_launchers_lab
def test_torchrun_three_hosts_one_shared_json_path(lab):
    lab3: Lab = lab(3)
    shared = lab3.tmp / "shared"
    shared.mkdir()
    path = shared / "tr.json"
    cmds = {h: torchrun_argv(lab3, i, ["preflight", "--timeout", str(OK_TIMEOUT), "--json", str(path)])
            for i, h in enumerate(lab3.hosts)}
    runs = lab3.run_all(cmds, deadline=DEADLINE, cwd=lab3.tmp, env=ENV)
    assert_node0_full_report(path, runs, "torchrun")


def test_print_all_writes_every_node_its_own_beside_node_0s(lab):
    lab3: Lab = lab(3)
    shared = lab3.tmp / "shared"
    shared.mkdir()
    path = shared / "run.json"
    cmds = _preflight_on_every_host(lab3, path, "--print-all")
    runs = lab3.run_all(cmds, deadline=DEADLINE, cwd=lab3.tmp, env=ENV)
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    assert {c["node"] for c in json.loads(path.read_text())["checks"]} == {None, 0, 1, 2}
    for n in (1, 2):
        own = json.loads((shared / f"run.node{n}.json").read_text())
        assert {c["node"] for c in own["checks"]} == {None, n}
    assert len(re.findall(r"ncclcheck preflight \d nodes?,", "".join(r.stdout for r in runs.values()))) == 3
