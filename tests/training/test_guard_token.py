"""ncclcheck.guard() with a job token (NCCLCHECK_TOKEN) in the store torchrun's agent hosts
(TORCHELASTIC_USE_AGENT_STORE=True): nobody ncclcheck started hosts that store, so global rank 0 signs the job's host
record and the other ranks accept the store once they read it. A real c10d TCPStore, hosted by this test process as
torchrun's agent hosts it, stands in for the agent's store; two ranks of one node run guard() in real processes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ncclcheck_lab.loopstore import loopback_store
from tests.conftest import REPO, cli_env, free_port

pytestmark = pytest.mark.slow  # real processes importing ncclcheck's preflight

CODE = ("import json, ncclcheck, sys\n"
        "try:\n"
        "    r = ncclcheck.guard(timeout=float(sys.argv[1]), quiet=True)\n"
        "    print('GUARD ' + json.dumps({'status': r.status.value, 'code': r.exit_code}))\n"
        "except ncclcheck.PreflightFailed as e:\n"
        "    print('GUARD ' + json.dumps({'failed': str(e)}))\n")


def _agent_store():
    """A TCPStore server on a free loopback port, as torchrun's agent keeps one for its workers."""

    port = free_port()
    return loopback_store(port), port


# A rank that refuses the store waits the guard's whole bound for a record it can verify, so that test keeps it short.
# One that passes never waits it out, but rank 1 waits for rank 0 to import torch and sign: under a parallel suite
# (two lanes on two cores) that took more than 10 s once, so a passing test gives it room.
REFUSE_T, PASS_T = 10, 60


def _ranks(port: int, tokens: list, timeout: float) -> list:
    procs = []
    for rank, token in enumerate(tokens):
        env = cli_env({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                       "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True",
                       "TORCHELASTIC_RUN_ID": "tokenjob", "NCCLCHECK_TOKEN": token})
        procs.append(subprocess.Popen([sys.executable, "-c", CODE, str(timeout)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE,
                                      text=True, env=env, cwd=REPO))
    out = []
    for p in procs:
        o, e = p.communicate(timeout=120)
        lines = [ln for ln in o.splitlines() if ln.startswith("GUARD ")]
        assert p.returncode == 0 and lines, (p.returncode, o, e[-3000:])
        out.append(json.loads(lines[-1][len("GUARD "):]))
    return out


def test_token_under_the_agent_store_rank_zero_signs_and_every_rank_passes():
    store, port = _agent_store()
    got = _ranks(port, ["s3cret-job-token", "s3cret-job-token"], PASS_T)
    assert all("failed" not in g and g["code"] == 0 for g in got), got
    # the host record is in the agent's store, under the guard's own prefix, signed (not the bare JSON)
    raw = store.get("ncclcheck/tokenjob-guard0/host")
    assert raw.startswith(b"ncclcheck-hmac2:") and b'"uuid"' in raw, raw


@pytest.mark.long  # waits out the guard's bound; CI: tests/rendezvous/test_hostile_records.py's another-token node
def test_token_under_the_agent_store_a_rank_with_another_token_refuses_the_store():
    """The record still means something: a rank whose token differs cannot verify rank 0's record and fails, naming
    the store as not this job's."""
    _store, port = _agent_store()
    got = _ranks(port, ["s3cret-job-token", "another-token"], REFUSE_T)
    assert "failed" in got[1] and "not this job's" in got[1]["failed"], got
