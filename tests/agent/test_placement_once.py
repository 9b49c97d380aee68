"""The launcher's world is read once per process into one Placement, and everything asks it (issue 20): who hosts
the store, who decides, the run's key prefix and the master endpoint come from that one value."""

from __future__ import annotations

import json
import os

from ncclcheck.agent import hostlist, launchers
from ncclcheck.agent.launchers import detect_placement


def test_one_placement_answers_the_roles():
    env = {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
           "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "198.18.0.1", "MASTER_PORT": "29400",
           "TORCHELASTIC_RUN_ID": "j42"}
    p = detect_placement(env)
    assert (p.hosts_store, p.decider, p.prefix, p.master) == (True, True, "ncclcheck/j42/", "198.18.0.1:29400")
    p = detect_placement(dict(env, TORCHELASTIC_USE_AGENT_STORE="True"))
    assert p.agent_store and not p.hosts_store and p.decider  # torchrun's agent already hosts the store
    p = detect_placement(dict(env, RANK="3", LOCAL_RANK="1", GROUP_RANK="1"))
    assert not p.hosts_store and not p.decider and p.node_rank == 1


def test_launcher_mode_node_0_hosts_and_decides():
    w = launchers.build_world(nnodes="2", node_rank="1", master_addr="h0:29511", env={})
    p = detect_placement({}, w)
    assert (p.hosts_store, p.decider, p.master, p.prefix) == (False, False, "h0:29511", "ncclcheck/preflight/")


def test_the_slurm_grammar_is_its_own_module():
    assert hostlist.expand_nodelist("gpu[08-10],cpu1") == ["gpu08", "gpu09", "gpu10", "cpu1"]
    assert launchers.expand_nodelist is hostlist.expand_nodelist


def test_a_cli_run_reads_the_launchers_world_once(monkeypatch, tmp_path):
    from ncclcheck import cli

    calls = []
    real = launchers.detect_placement

    def counted(env, world=None):
        calls.append(1)
        return real(env, world)

    monkeypatch.setattr(launchers, "detect_placement", counted)
    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path))
    for k in [k for k in os.environ if k.startswith(("MASTER_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_",
                                                     "OMPI_", "NCCLCHECK_NNODES", "NCCLCHECK_NODE_RANK"))]:
        monkeypatch.delenv(k)
    out = tmp_path / "r.json"
    code = cli.main(["preflight", "--json", str(out), "--quiet"])
    assert code in (0, 1) and json.loads(out.read_text())["command"] == "preflight"
    assert len(calls) == 1


def test_an_unreadable_token_file_is_a_usage_error(tmp_path):
    from tests.conftest import run_cli

    r = run_cli("preflight", "--token-file", str(tmp_path / "nope"))
    assert r.returncode == 2 and "--token-file" in r.stderr and "Traceback" not in r.stderr


def test_the_token_comes_from_the_file_or_the_environment(tmp_path):
    f = tmp_path / "tok"
    f.write_text("  s3cret\n")
    assert launchers.build_world(env={}, token_file=str(f)).token == b"s3cret"
    assert launchers.build_world(env={"NCCLCHECK_TOKEN": "abc"}).token == b"abc"
    assert launchers.build_world(env={}).token is None
    assert "s3cret" not in repr(launchers.build_world(env={}, token_file=str(f)))
