"""One report per job on a shared filesystem (issue 24): which process writes which output file, and what the other
nodes say about it."""

from __future__ import annotations

import pytest

from ncclcheck.agent.launchers import Placement
from ncclcheck.cli import _not_mine, _one_line, own_outputs, seat_of
from ncclcheck.config import BenchConfig, Config, OutputConfig
from ncclcheck.model import NodeInfo, Report
from ncclcheck.render.files import node_copy_path, own_path


def _p(rank: int, local_rank: int, node: int) -> Placement:
    return Placement(rank, 6, local_rank, 2, node, 3, "h1", 29500, "torchrun", "77")


@pytest.mark.parametrize("template, rank, local, node, every, want", [
    ("run.json", 0, 0, 0, False, "run.json"),      # node 0 writes the job's report
    ("run.json", 2, 0, 1, False, None),            # node 1 would overwrite it on a shared filesystem
    ("run.json", 3, 1, 1, False, None),
    ("run.json", 2, 0, 1, True, "run.node1.json"),  # --print-all: its own, beside node 0's, never over it
    ("run.json", 3, 1, 1, True, None),             # --print-all is per node, not per rank
    ("run-%n.json", 2, 0, 1, False, "X"),          # distinct per node: every node's first rank writes
    ("out/%h/r.json", 2, 0, 1, False, "X"),
    ("run-%n.json", 3, 1, 1, False, None),
    ("run-%r.json", 3, 1, 1, False, "X"),          # distinct per rank: every rank writes
    ("run-%%n.json", 2, 0, 1, False, None),        # a literal %n is not distinct
    ("run-%j.json", 2, 0, 1, False, None),         # the job id is the same on every node
])
def test_who_writes_a_path(template, rank, local, node, every, want):
    path = "X" if "%" in template else template  # X: the expanded path, whatever it is
    got = own_path(path, template, rank=rank, node_rank=node, node_leader=local == 0, every_node=every)
    assert got == want


def test_node_copy_path_keeps_the_directory_and_the_extension():
    assert node_copy_path("/shared/pf.html", 2) == "/shared/pf.node2.html"
    assert node_copy_path("report", 1) == "report.node1"
    assert node_copy_path(".hidden", 1) == ".hidden.node1"


def test_own_outputs_per_file_and_the_baseline():
    cfg = Config("bench", output=OutputConfig(files={"json": "run.json", "html": "n1.html", "junit": "j.xml"}),
                 bench=BenchConfig(save_baseline="base.json"))
    node1 = _p(2, 0, 1)
    mine, save = own_outputs(cfg, node1, {"html": "n%n.html"})
    files = mine.output.files
    assert (mine.output.json_path, files.get("html"), files.get("junit"), save) == (None, "n1.html", None, None)
    assert mine.bench.save_baseline is None  # the CLI writes it, not the API
    assert _not_mine(cfg, mine) == ("run.json", "j.xml")
    zero, save0 = own_outputs(cfg, _p(0, 0, 0), {})
    assert (zero.output.json_path, save0) == ("run.json", "base.json") and zero.bench.save_baseline is None
    assert seat_of(mine, node1).line and not seat_of(mine, node1).writes


def test_the_other_nodes_say_in_one_line_that_node_0_writes_the_file():
    cfg = Config("preflight", output=OutputConfig(files={"json": "run.json"}))
    node1 = _p(2, 0, 1)
    mine, _ = own_outputs(cfg, node1, {})
    report = Report("preflight", "0", "", nodes=[NodeInfo(1, "h2")], node_0_reported=True)  # node 0 ran and said so
    line = _one_line(mine, report, seat_of(mine, node1), _not_mine(cfg, mine))
    assert "\n" not in line and "JSON in" not in line
    assert "node 0 writes run.json" in line and "%n" in line and "--print-all" in line


def test_files_read_on_their_own_node_are_written_by_every_node():
    # A pod sources its own nccl.env and node_exporter reads a local directory: these stay per node.
    cfg = Config("preflight",
                 output=OutputConfig(files={"json": "pf.json", "env_out": "nccl.env", "prometheus": "n.prom"}))
    mine, _ = own_outputs(cfg, _p(2, 0, 1), {})
    assert (mine.output.json_path, mine.output.files.get("env_out"), mine.output.files.get("prometheus")) == (
        None, "nccl.env", "n.prom")
    assert own_outputs(cfg, _p(3, 1, 1), {})[0].output.files.get("env_out") is None
