"""scripts/bench_vs_nccl_tests.py: nccl-tests' printed tables (real ones, tests/data/nccl_tests/README.md says
where each was published) read into rows, ncclcheck's rows set against them, and the script's refusal on a machine
without nvcc or a GPU."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nccl_tests"
SCRIPT = ROOT / "scripts" / "bench_vs_nccl_tests.py"
from ncclcheck_lab import bench_vs_nccl_tests as vs  # noqa: E402 - the code behind SCRIPT


def _table(name: str):
    return vs.parse_table((DATA / name).read_text())


def test_a_current_table_reads_both_placements_of_every_row():
    rows = _table("all_reduce_2.20.0_gb10_2ranks.txt")
    assert [r.bytes for r in rows] == [8192, 16384, 32768, 65536]
    first = rows[0]
    assert (first.count, first.type) == (2048, "float")
    assert first.out_of_place == vs.Figure(35.15, 0.23, 0.23, 0)
    assert first.in_place == vs.Figure(30.33, 0.27, 0.27, 0)


def test_large_sizes_and_integer_times_read_exactly():
    [row] = _table("all_gather_2.17.6_gb10_2ranks.txt")
    assert row.bytes == 17179869184 and row.count == 2147483648
    assert row.out_of_place.time_us == 453650 and row.in_place.busbw_gbps == 20.95


def test_size_zero_rows_are_rows_and_the_header_lines_are_not():
    rows = _table("reduce_scatter_8ranks_zero_sizes.txt")
    assert [r.bytes for r in rows] == [0] * 5 + [128, 256]
    assert rows[5].out_of_place.time_us == 32.31 and rows[5].in_place.time_us == 25.35


def test_an_older_table_without_redop_and_with_na_reads_by_its_own_header_and_skips_nccl_lines():
    [row] = _table("broadcast_2021_no_redop_na.txt")
    assert row.bytes == 8 and row.out_of_place.time_us == 45.82 and row.in_place.time_us == 38.17
    assert row.out_of_place.wrong is None  # N/A: nccl-tests ran with -c 0


def test_single_form_ops_meet_the_in_place_column_and_others_the_out_of_place_one():
    theirs = _table("all_reduce_2.20.0_gb10_2ranks.txt")
    ours = [{"op": "all_reduce", "bytes": 8192, "time_us": 36.5, "busbw_gbps": 0.2, "in_place": False,
             "in_place_call": True},
            {"op": "all_reduce", "bytes": 16384, "time_us": 31.67, "busbw_gbps": 0.52, "in_place": False},
            {"op": "all_reduce", "bytes": 999, "time_us": 1.0, "busbw_gbps": 1.0, "in_place": False}]
    c = vs.compare("eager", "all_reduce", ours, theirs)
    assert [x.bytes for x in c] == [8192, 16384]  # a size nccl-tests did not run is not compared
    assert c[0].theirs_us == 30.33 and c[0].time_ratio == pytest.approx(36.5 / 30.33)
    assert c[1].theirs_us == 31.67 and c[1].time_ratio == 1.0 and c[1].busbw_ratio == 1.0


def test_the_last_line_gates_the_fabric_rows_that_move_data_and_lists_the_rest():
    theirs = _table("all_reduce_2.20.0_gb10_2ranks.txt")
    noop = [{"op": "all_reduce", "bytes": b, "time_us": t, "busbw_gbps": 0.0, "moves_data": False,
             "in_place_call": True} for b, t in ((8192, 30.33), (32768, 2 * 37.44))]
    moved = [{"op": "all_reduce", "bytes": b, "time_us": t, "busbw_gbps": 1.0, "in_place_call": True}
             for b, t in ((8192, 1.5 * 30.33), (32768, 37.44))]
    c = vs.compare("graph", "all_reduce", noop, theirs)
    assert [x.busbw_ratio for x in c] == [None, None] and all(x.no_op for x in c)
    # two empty calls: no fabric time to gate on, listed as no-op rows
    assert vs.summary_line(c) == "ops=1 sizes=2 worst_ratio=nan eager_worst_ratio=nan noop_rows=2"
    assert all("no-op" in line for line in vs.table_lines(c)[1:])
    assert any(" - " in line or line.rstrip().endswith("-") for line in vs.table_lines(c)[1:])
    # the eager rows (torch's dispatch against a C loop) are reported beside the gate, never in it
    eager = [dict(moved[0], time_us=4 * 30.33)]
    c = vs.compare("graph", "all_reduce", moved, theirs) + vs.compare("eager", "all_reduce", eager, theirs)
    assert vs.summary_line(c) == "ops=1 sizes=2 worst_ratio=1.500 eager_worst_ratio=4.000 noop_rows=0"
    assert math.isnan(vs.worst_ratio([]))


@pytest.mark.parametrize("sizes, flags", [
    ([1 << 20, 1 << 21, 1 << 22], [["-b", "1048576", "-e", "4194304", "-f", "2"]]),
    ([1 << 20, 1 << 22, 1 << 24], [["-b", "1048576", "-e", "16777216", "-f", "4"]]),
    ([1024, 65536, 1 << 20, 3 << 20], [["-b", str(s), "-e", str(s)] for s in (1024, 65536, 1 << 20, 3 << 20)]),
    ([8 << 20], [["-b", str(8 << 20), "-e", str(8 << 20)]]),
])
def test_sizes_become_one_nccl_tests_sweep_when_they_grow_by_one_factor(sizes, flags):
    assert vs.size_flags(sizes) == flags


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def test_without_a_source_tree_it_says_so_in_one_line_and_exits_2(tmp_path):
    p = _run("--nccl-tests-src", str(tmp_path))
    assert p.returncode == 2 and "not an nccl-tests source tree" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not p.stdout


def test_without_nvcc_or_a_gpu_it_names_what_is_missing_and_exits_2(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Makefile").write_text("all:\n")
    p = _run("--nccl-tests-src", str(tmp_path))
    if p.returncode != 2:
        pytest.skip("this machine has nvcc and a GPU: the comparison ran")
    assert len(p.stderr.strip().splitlines()) == 1
    assert any(w in p.stderr for w in ("nvcc", "no CUDA GPU", "make is not on PATH")), p.stderr


@pytest.mark.parametrize("flags", [("--sizes", "1M-"), ("--graph-launches", "0")])
def test_bad_flags_are_a_one_line_error_exit_2(tmp_path, flags):
    p = _run("--nccl-tests-src", str(tmp_path), *flags)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
