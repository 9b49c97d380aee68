"""Launcher detection and the Slurm host list grammar."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclcheck.agent.launchers import (
    detect_launcher,
    detect_placement,
    expand_nodelist,
    parse_tasks_per_node,
    slurm_default_port,
)
from ncclcheck.config import WorldConfig
from ncclcheck.errors import UsageError


@pytest.mark.parametrize(
    "text,hosts",
    [
        ("gpu01", ["gpu01"]),
        ("gpu[01-04,07]", ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]),
        ("a[1-2],b3", ["a1", "a2", "b3"]),
        ("n[001-003]-ib", ["n001-ib", "n002-ib", "n003-ib"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("r[1-2]-n[01-02]", ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]),
        ("login,gpu[1,3],cpu[2-3].cluster", ["login", "gpu1", "gpu3", "cpu2.cluster", "cpu3.cluster"]),
        ("", []),
    ],
)
def test_expand_nodelist(text, hosts):
    assert expand_nodelist(text) == hosts


@pytest.mark.parametrize("bad", ["gpu[01-04", "gpu01-04]", "gpu[04-01]", "gpu[a-b]", "gpu[]", "a,,b", "x[1-[2]]"])
def test_expand_nodelist_rejects_malformed(bad):
    with pytest.raises(ValueError):
        expand_nodelist(bad)


_LAST_NUM = re.compile(r"^(.*?)(\d+)(\D*)$")


def compress_nodelist(hosts: list[str]) -> str:
    """Test helper: the inverse of expand_nodelist for lists of plain host names (order kept, runs of adjacent
    numbers merged)."""
    groups: list[tuple[str, str, list[list[str]]]] = []  # (prefix, suffix, [[first, last], ...])
    for h in hosts:
        m = _LAST_NUM.match(h)
        if not m:
            groups.append((h, "", []))
            continue
        prefix, digits, suffix = m.groups()
        if groups and groups[-1][2] and groups[-1][0] == prefix and groups[-1][1] == suffix:
            runs = groups[-1][2]
            first, last = runs[-1]
            if int(digits) == int(last) + 1 and f"{int(digits):0{len(first)}d}" == digits:
                runs[-1][1] = digits
            else:
                runs.append([digits, digits])
        else:
            groups.append((prefix, suffix, [[digits, digits]]))
    out = []
    for prefix, suffix, runs in groups:
        if not runs:
            out.append(prefix)
        elif len(runs) == 1 and runs[0][0] == runs[0][1]:
            out.append(prefix + runs[0][0] + suffix)
        else:
            body = ",".join(a if a == b else f"{a}-{b}" for a, b in runs)
            out.append(f"{prefix}[{body}]{suffix}")
    return ",".join(out)


def test_compress_nodelist_merges_runs():
    assert compress_nodelist(["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]) == "gpu[01-03,07],cpu1"
    assert compress_nodelist(["n8", "n9", "n10"]) == "n[8-10]"
    assert compress_nodelist(["n1-ib", "n2-ib"]) == "n[1-2]-ib"
    assert compress_nodelist(["login"]) == "login"


_host = st.text(alphabet="abcxyz019-.", min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(_host, min_size=0, max_size=12))
def test_nodelist_round_trip(hosts):
    assert expand_nodelist(compress_nodelist(hosts)) == hosts


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab"), st.integers(0, 500), st.integers(0, 40), st.integers(1, 4))
def test_expanded_range_is_padded_like_slurm(prefix, lo, span, width):
    lo_s = f"{lo:0{width}d}"
    hosts = expand_nodelist(f"{prefix or 'h'}[{lo_s}-{lo + span}]")
    assert len(hosts) == span + 1
    assert hosts[0] == f"{prefix or 'h'}{lo_s}"


def test_tasks_per_node():
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert parse_tasks_per_node("8") == [8]
    with pytest.raises(ValueError):
        parse_tasks_per_node("two")


def test_slurm_default_port_is_derived_from_job_id():
    assert slurm_default_port("123456") == 15000 + 3456
    assert slurm_default_port(None) == 29500


TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
            "MASTER_ADDR": "node0", "MASTER_PORT": "29501"}


def test_torchrun_placement():
    p = detect_placement(TORCHRUN)
    assert (p.launcher, p.rank, p.world_size, p.local_rank, p.local_world_size) == ("torchrun", 5, 8, 1, 4)
    assert (p.node_rank, p.nnodes, p.master_addr, p.master_port) == (1, 2, "node0", 29501)
    assert p.worker_mode and not p.node_leader


def test_torchrun_wins_over_slurm_when_srun_runs_torchrun():
    env = dict(TORCHRUN, SLURM_PROCID="1", SLURM_STEP_ID="0", SLURM_NTASKS="2")
    assert detect_launcher(env) == "torchrun"


SLURM = {"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "16", "SLURM_LOCALID": "1",
         "SLURM_NODEID": "2", "SLURM_NNODES": "4", "SLURM_STEP_ID": "0", "SLURM_STEP_TASKS_PER_NODE": "4(x4)",
         "SLURM_JOB_NODELIST": "gpu[07-09,12]", "SLURM_JOB_ID": "4242"}


def test_slurm_placement_master_is_first_host_and_port_from_job_id():
    p = detect_placement(SLURM)
    assert (p.launcher, p.rank, p.world_size, p.local_rank, p.local_world_size) == ("slurm", 9, 16, 1, 4)
    assert (p.node_rank, p.nnodes, p.master_addr, p.master_port) == (2, 4, "gpu07", 15000 + 4242)


def test_slurm_master_port_from_env_wins():
    assert detect_placement(dict(SLURM, MASTER_PORT="29999")).master_port == 29999


def test_slurm_batch_script_without_srun_is_launcher_mode():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "gpu[1-2]"}
    assert detect_placement(env).launcher == "ncclcheck"


MPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
       "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}


def test_mpi_placement():
    p = detect_placement(dict(MPI, MASTER_ADDR="h0"))
    assert (p.launcher, p.rank, p.world_size, p.local_rank, p.node_rank, p.nnodes) == ("mpi", 3, 4, 1, 1, 2)
    assert (p.master_addr, p.master_port) == ("h0", 29500)


def test_mpi_without_master_addr_is_a_usage_error_that_says_what_to_do():
    with pytest.raises(UsageError, match="-x MASTER_ADDR"):
        detect_placement(MPI)


def test_launcher_mode_from_world_config():
    w = WorldConfig(nnodes=3, node_rank=2, nproc_per_node=4, master_addr="10.0.0.1", master_port=29500)
    p = detect_placement({}, w)
    assert (p.launcher, p.rank, p.world_size, p.node_rank, p.nnodes, p.local_world_size) == ("ncclcheck", 2, 3, 2, 3, 4)
    assert not p.worker_mode and p.node_leader


def test_inconsistent_launcher_variables_are_usage_errors():
    with pytest.raises(UsageError):
        detect_placement(dict(TORCHRUN, RANK="8"))
    with pytest.raises(UsageError):
        detect_placement(dict(TORCHRUN, RANK="x"))
    with pytest.raises(UsageError):
        detect_placement({"NCCLCHECK_LAUNCHER": "pbs"})
