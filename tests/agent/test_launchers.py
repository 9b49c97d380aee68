"""Every launcher's world from its own variables (fake environments), the one precedence rule, and %j/%n/%h/%r."""

from __future__ import annotations

import pytest

from ncclcheck.agent.launchers import detect_placement, job_id
from ncclcheck.config import build_world, parse_endpoint
from ncclcheck.errors import UsageError


def place(env: dict, **flags: str):
    """detect_placement as the CLI calls it: the flags' world built from the same environment first."""
    return detect_placement(env, build_world(**flags, env=env))


# torchrun 2.x, static rendezvous, node 2 of 3 with 2 ranks per node (what the agent exports to each worker).
TORCHRUN_STATIC = {"RANK": "5", "WORLD_SIZE": "6", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "2",
                   "GROUP_WORLD_SIZE": "3", "ROLE_RANK": "5", "ROLE_WORLD_SIZE": "6", "ROLE_NAME": "default",
                   "MASTER_ADDR": "198.18.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
                   "TORCHELASTIC_USE_AGENT_STORE": "False"}


def test_torchrun_static_reads_group_world_size():
    p = place(TORCHRUN_STATIC)
    assert (p.launcher, p.rank, p.world_size, p.node_rank, p.nnodes) == ("torchrun", 5, 6, 2, 3)
    assert (p.local_rank, p.local_world_size, p.master_addr, p.master_port) == (1, 2, "198.18.0.1", 29500)
    assert p.worker_mode and p.hosts_store == (p.rank == 0)  # agent store off: global rank 0 hosts it
    assert not p.hosts_store


def test_torchrun_static_node_rank_in_env_is_not_checked_against_a_default_nnodes():
    # The issue's bug: GROUP_RANK=1 was read as --node-rank and compared with --nnodes' default of 1.
    env = dict(TORCHRUN_STATIC, RANK="2", LOCAL_RANK="0", GROUP_RANK="1", NODE_RANK="1")
    assert place(env).node_rank == 1


def test_torchrun_c10d_node_rank_from_the_rendezvous_and_the_agent_store():
    env = dict(TORCHRUN_STATIC, GROUP_RANK="0", RANK="0", LOCAL_RANK="0", TORCHELASTIC_RUN_ID="job7",
               TORCHELASTIC_USE_AGENT_STORE="True", MASTER_ADDR="h1", MASTER_PORT="41234")
    p = place(env)
    assert (p.node_rank, p.rank, p.master_addr, p.master_port, p.job_id) == (0, 0, "h1", 41234, "job7")
    # rank 0 must not host a second store where torchrun's agent already hosts one
    assert p.agent_store and not p.hosts_store and p.decider
    assert p.prefix == "ncclcheck/job7/"


def test_heterogeneous_local_world_size():
    # node 0 runs 3 ranks, node 1 runs 1: WORLD_SIZE=4 is not nnodes * LOCAL_WORLD_SIZE on either node
    n1 = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "1",
          "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "h1", "MASTER_PORT": "29500"}
    p = place(n1)
    assert (p.node_rank, p.nnodes, p.local_world_size, p.node_leader) == (1, 2, 1, True)
    n0 = dict(n1, RANK="2", LOCAL_RANK="2", LOCAL_WORLD_SIZE="3", GROUP_RANK="0")
    assert (place(n0).node_rank, place(n0).local_world_size) == (0, 3)


def test_fabric_run_is_torchrun_marked_by_lightning():
    p = place(dict(TORCHRUN_STATIC, LT_CLI_USED="1", LT_ACCELERATOR="cpu", LT_DEVICES="2"))
    assert (p.launcher, p.nnodes, p.world_size) == ("fabric", 3, 6) and p.worker_mode


@pytest.mark.parametrize("flags, names", [
    ({"nnodes": "2"}, ["--nnodes 2", "GROUP_WORLD_SIZE=3"]),
    ({"node_rank": "0"}, ["--node-rank 0", "GROUP_RANK=2"]),
    ({"nproc_per_node": "4"}, ["--nproc-per-node 4", "LOCAL_WORLD_SIZE=2"]),
    ({"master_port": "29501"}, ["--master-port 29501", "MASTER_PORT=29500"]),
])
def test_a_flag_contradicting_the_launcher_is_a_usage_error_naming_both(flags, names):
    with pytest.raises(UsageError) as e:
        place(TORCHRUN_STATIC, **flags)
    assert all(n in str(e.value) for n in names), str(e.value)


def test_ncclcheck_variables_count_as_the_users_and_flags_that_agree_are_fine():
    with pytest.raises(UsageError, match="NCCLCHECK_NNODES.*GROUP_WORLD_SIZE=3"):
        place(dict(TORCHRUN_STATIC, NCCLCHECK_NNODES="4"))
    assert place(TORCHRUN_STATIC, nnodes="3", node_rank="2", nproc_per_node="2").rank == 5


SLURM_3x2 = {"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_STEP_NUM_TASKS": "6", "SLURM_LOCALID": "1",
             "SLURM_NODEID": "1", "SLURM_NNODES": "3", "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_ID": "0",
             "SLURM_STEP_TASKS_PER_NODE": "2(x3)", "SLURM_STEP_NODELIST": "h[1-3]", "SLURM_JOB_NODELIST": "h[1-3]",
             "SLURM_JOB_ID": "77"}


def test_slurm_world_and_a_master_flag_filling_what_slurm_leaves_open():
    p = place(SLURM_3x2)
    assert (p.launcher, p.rank, p.world_size, p.node_rank, p.nnodes, p.local_world_size) == ("slurm", 3, 6, 1, 3, 2)
    assert (p.master_addr, p.master_port, p.job_id) == ("h1", 15077, "77")
    # the master is only derived under srun: a flag chooses it without contradiction (rule 3)
    assert place(SLURM_3x2, master_addr="10.1.1.1", master_port="29600").master_addr == "10.1.1.1"
    with pytest.raises(UsageError, match="--nnodes 2.*SLURM_STEP_NUM_NODES=3"):
        place(SLURM_3x2, nnodes="2")


def test_a_script_that_copies_slurm_or_mpi_ranks_into_rank_is_still_under_srun_or_mpirun():
    """A common recipe sets RANK/WORLD_SIZE/LOCAL_RANK from SLURM_* (or OMPI_*) before init_process_group. That is
    not torchrun, whose agent exports its own variables beside them: read as torchrun without LOCAL_WORLD_SIZE, every
    rank was a node (the guard under srun waited for 6 nodes of 3 hosts, issue 45's munge lab case)."""
    copied = {"RANK": "3", "WORLD_SIZE": "6", "LOCAL_RANK": "1"}
    p = place({**SLURM_3x2, **copied})
    assert (p.launcher, p.rank, p.node_rank, p.nnodes, p.local_world_size) == ("slurm", 3, 1, 3, 2)
    p = place({**OMPI, **copied, "RANK": "4", "LOCAL_RANK": "0"}, master_addr="h1")
    assert (p.launcher, p.node_rank, p.nnodes) == ("mpi", 2, 3)
    # torchrun under srun is still torchrun: its agent's own variables say so
    assert place({**SLURM_3x2, **TORCHRUN_STATIC}).launcher == "torchrun"
    # and RANK/WORLD_SIZE/LOCAL_RANK alone, outside any launcher, are read as torchrun's as before
    assert place({**copied, "LOCAL_RANK": "0"}, master_addr="h1").launcher == "torchrun"


def test_slurm_heterogeneous_tasks_per_node():
    env = dict(SLURM_3x2, SLURM_STEP_TASKS_PER_NODE="2,1(x2)", SLURM_PROCID="3", SLURM_NODEID="2",
               SLURM_LOCALID="0", SLURM_STEP_NUM_TASKS="4")
    assert place(env).local_world_size == 1


OMPI = {"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_ess_base_jobid": "3938254849"}


def test_open_mpi_world_with_the_master_from_a_flag_or_mpirun_x():
    p = place(OMPI, master_addr="h1")
    assert (p.launcher, p.node_rank, p.nnodes, p.node_leader, p.master_port) == ("mpi", 2, 3, True, 29500)
    assert place(dict(OMPI, MASTER_ADDR="h1", MASTER_PORT="29555")).master_port == 29555
    assert p.job_id == "3938254849"


def test_open_mpi_uneven_mapping_is_a_usage_error():
    with pytest.raises(UsageError, match="ppr"):
        place(dict(OMPI, OMPI_COMM_WORLD_LOCAL_SIZE="4"), master_addr="h1")


PYTORCHJOB = {"PET_NNODES": "3", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456",
              "PET_NPROC_PER_NODE": "2", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3",
              "RANK": "1"}


def test_pytorchjob_pod_is_a_node_agent():
    p = place(PYTORCHJOB)
    assert (p.launcher, p.worker_mode, p.node_rank, p.nnodes, p.local_world_size) == ("pytorchjob", False, 1, 3, 2)
    assert (p.master_addr, p.master_port) == ("job-master-0", 23456)
    with pytest.raises(UsageError, match="elastic"):
        place(dict(PYTORCHJOB, PET_NNODES="1:4"))


def test_kubernetes_indexed_job_index_is_the_node_rank():
    env = {"JOB_COMPLETION_INDEX": "2"}
    p = place(env, nnodes="3", master_addr="ncclcheck-0.ncclcheck")
    assert (p.launcher, p.node_rank, p.nnodes, p.master_port) == ("kubernetes", 2, 3, 29500)
    with pytest.raises(UsageError, match="JOB_COMPLETION_INDEX=2.*--nnodes 2"):
        place(env, nnodes="2", master_addr="x")
    with pytest.raises(UsageError, match="--node-rank 1.*JOB_COMPLETION_INDEX=2"):
        place(env, nnodes="3", node_rank="1", master_addr="x")


def test_node_rank_from_the_environment_alone_is_no_error_until_a_world_needs_it():
    build_world(env={"NODE_RANK": "1"})  # `NODE_RANK=1 ncclcheck env` must work
    with pytest.raises(UsageError, match="NODE_RANK=1.*--nnodes 1"):
        place({"NODE_RANK": "1"})


def test_job_id_order_and_sanitising():
    assert job_id({"SLURM_JOB_ID": "12", "TORCHELASTIC_RUN_ID": "x"}) == "12"
    assert job_id({"TORCHELASTIC_RUN_ID": "none"}) == "nojob"
    assert job_id({"NCCLCHECK_RUN_ID": "a/b c"}) == "a_b_c"


@pytest.mark.parametrize("text, want", [("h1", ("h1", None)), ("h1:29500", ("h1", 29500)),
                                        ("[fe80::1]:29500", ("fe80::1", 29500)), ("fe80::1", ("fe80::1", None))])
def test_parse_endpoint(text, want):
    assert parse_endpoint(text, "--x") == want


@pytest.mark.parametrize("bad", ["h1:0", "h1:x", "[fe80::1", "a b:1"])
def test_parse_endpoint_rejects(bad):
    with pytest.raises(UsageError):
        parse_endpoint(bad, "--x")


def test_api_world_is_the_placements_in_every_mode():
    from ncclcheck.config import Config
    from ncclcheck.steps.world import world_of as _world_of

    env = {"JOB_COMPLETION_INDEX": "2"}
    w = build_world(nnodes="3", master_addr="train-0.train", env=env)
    world = _world_of(Config("preflight", world=w), detect_placement(env, w))
    # the index is the node rank, and the default port is filled in where the flags gave none
    assert (world.node_rank, world.nnodes, world.master_port) == (2, 3, 29500)
    world = _world_of(Config("bench", world=build_world(env=TORCHRUN_STATIC)), place(TORCHRUN_STATIC))
    assert (world.node_rank, world.nnodes, world.nproc_per_node, world.master_addr) == (2, 3, 2, "198.18.0.1")


def test_master_addr_takes_host_port_like_an_rdzv_endpoint():
    from ncclcheck.cli import build_parser, config_from_args

    def world(*argv):
        return config_from_args(build_parser().parse_args(["preflight", *argv]), env={}).world

    w = world("--master-addr", "198.18.0.1:29501")
    assert (w.master_addr, w.master_port, w.origin["master_port"]) == ("198.18.0.1", 29501, "--master-addr")
    w = world("--master-addr", "[fe80::1]:29501", "--master-port", "29501")
    assert (w.master_addr, w.master_port) == ("fe80::1", 29501)
    with pytest.raises(UsageError, match="--master-addr names port 29501 but --master-port is 29500"):
        world("--master-addr", "198.18.0.1:29501", "--master-port", "29500")
