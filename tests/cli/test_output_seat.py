"""One report per job: who prints what, output path templates, and when ANSI styles are allowed."""

from __future__ import annotations

import io

import pytest

from ncclcheck.agent.launchers import Placement
from ncclcheck.cli import seat_of
from ncclcheck.config import Config, OutputConfig
from ncclcheck.render.console import make_console, use_color
from ncclcheck.render.files import expand_path, per_rank


def _p(rank: int, local_rank: int, node: int, launcher: str = "slurm") -> Placement:
    return Placement(rank, 6, local_rank, 2, node, 3, "h1", 29500, launcher, "77")


@pytest.mark.parametrize("rank, local, node, full, line", [
    (0, 0, 0, True, False),   # global rank 0: the full report
    (1, 1, 0, False, False),  # another rank of node 0: silent
    (2, 0, 1, False, True),   # node 1's leader: one line
    (3, 1, 1, False, False),
])
def test_one_full_report_per_job(rank, local, node, full, line):
    s = seat_of(Config("preflight"), _p(rank, local, node))
    assert (s.full, s.line, s.writes) == (full, line, rank == 0)  # a path shared by every node: rank 0's file


def test_quiet_silences_the_other_nodes_and_print_all_prints_everywhere():
    quiet = Config("bench", output=OutputConfig(quiet=True))
    assert not seat_of(quiet, _p(2, 0, 1)).line and seat_of(quiet, _p(0, 0, 0)).full
    loud = Config("links", output=OutputConfig(print_all=True))
    assert all(seat_of(loud, _p(r, r % 2, r // 2)).full for r in range(6))


def test_launcher_mode_node_agents():
    node0 = Placement(0, 3, 0, 2, 0, 3, "h1", 29500, "ncclcheck")
    node2 = Placement(2, 3, 0, 2, 2, 3, "h1", 29500, "ncclcheck")
    assert seat_of(Config("preflight"), node0).full and seat_of(Config("preflight"), node2).line


def test_per_rank_paths_make_every_rank_write():
    assert seat_of(Config("preflight"), _p(3, 1, 1), per_rank_paths=True).writes
    assert per_rank("pf-%r.json") and not per_rank("pf-%%r.json") and not per_rank("pf-%j.json")


def test_expand_path():
    fields = {"j": "77", "n": 1, "h": "h2", "r": 3}
    assert expand_path("pf-%j.json", fields) == "pf-77.json"
    assert expand_path("/o/%h/n%n-r%r-%j.json", fields) == "/o/h2/n1-r3-77.json"
    assert expand_path("100%%-%x-%", fields) == "100%-%x-%"


@pytest.mark.parametrize("tty, env, launcher, want", [
    (True, {}, "ncclcheck", True),
    (False, {}, "ncclcheck", False),
    (True, {"NO_COLOR": "1"}, "ncclcheck", False),
    (False, {"FORCE_COLOR": "1"}, "ncclcheck", True),
    (True, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, "ncclcheck", False),
    (True, {"TERM": "dumb"}, "torchrun", False),
    (True, {}, "mpi", False),  # Open MPI's pseudo-terminal is not the user's terminal
    (True, {"FORCE_COLOR": "1"}, "mpi", True),
])
def test_use_color(tty, env, launcher, want):
    assert use_color(tty, env, launcher) is want


def test_no_ansi_codes_on_a_pipe_even_for_styled_text():
    buf = io.StringIO()
    make_console(buf, {}).print("[bold red]FAIL[/] x")
    assert buf.getvalue() == "FAIL x\n"
    forced = io.StringIO()
    make_console(forced, {"FORCE_COLOR": "1"}).print("[bold red]FAIL[/] x")
    assert "\x1b[" in forced.getvalue()


def test_recommend_env_is_per_node_data_printed_by_every_node_leader():
    cfg = Config("recommend", recommend_format="env")
    assert seat_of(cfg, _p(2, 0, 1)).full and not seat_of(cfg, _p(3, 1, 1)).full


def test_every_node_leader_says_what_it_waits_for_on_stderr_and_quiet_says_nothing(monkeypatch):
    """Issue 53, item 3: node 1..N and a `--json -` rank 0 get an observer of wait lines alone (stderr); rank 0
    printing the report gets its progress display with the wait lines beside it; --quiet and non-leaders: none."""
    import sys

    from ncclcheck.cli import _observer
    from ncclcheck.render.progress import LineObserver, WaitLines
    from ncclcheck.training import _waits_observer

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # a pipe: no live display
    cfg = Config("preflight")
    node1 = _observer(cfg, seat_of(cfg, _p(2, 0, 1)))
    assert isinstance(node1, WaitLines) and node1.stream is err
    rank0 = _observer(cfg, seat_of(cfg, _p(0, 0, 0)))
    assert isinstance(rank0, LineObserver) and rank0.waits is not None and rank0.waits.stream is err
    stdout_json = Config("preflight", output=OutputConfig(files={"json": "-"}))
    assert isinstance(_observer(stdout_json, seat_of(stdout_json, _p(0, 0, 0))), WaitLines)
    quiet = Config("preflight", output=OutputConfig(quiet=True))
    assert _observer(quiet, seat_of(quiet, _p(2, 0, 1))) is None and _observer(quiet, seat_of(quiet, _p(0, 0, 0))) \
        is None
    assert _observer(cfg, seat_of(cfg, _p(3, 1, 1))) is None  # a node's other ranks: its leader speaks for it
    assert _observer(Config("env"), seat_of(Config("env"), None)) is None  # no wait for another node there
    # guard(): each node's leader, plain lines on stderr; quiet=True and the other ranks: nothing
    assert isinstance(_waits_observer(_p(2, 0, 1), quiet=False), WaitLines)
    assert _waits_observer(_p(2, 0, 1), quiet=True) is None and _waits_observer(_p(3, 1, 1), quiet=False) is None
