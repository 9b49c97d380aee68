"""Fixtures for the renderer tests: the example reports and a report full of hostile strings from 'other machines'."""

from __future__ import annotations

import json
import pathlib

import pytest

from ncclcheck.model import BenchRow, CheckResult, NodeInfo, Recommendation, Report, Status, WorldInfo

HERE = pathlib.Path(__file__).parent
EXAMPLES = sorted((HERE / "examples").glob("*.json"))
EXAMPLE_IDS = [p.stem for p in EXAMPLES]

HOSTILE = "<script>alert('x')</script> | `rm -rf /` $(reboot) & \"q\" \x1b[31m\x00"


def load_example(name: str) -> Report:
    return Report.from_json(json.loads((HERE / "examples" / f"{name}.json").read_text()))


@pytest.fixture(params=EXAMPLE_IDS)
def example(request) -> tuple[str, Report]:
    return request.param, load_example(request.param)


@pytest.fixture
def hostile_report() -> Report:
    """Every string a peer controls carries markup, shell and control characters."""
    return Report(
        command="preflight",
        version="0.1.0",
        started="2025-11-20T00:00:00+00:00",
        duration_s=1.0,
        world=WorldInfo(nnodes=2, world_size=2, backend="gloo", master="h1:29500", launcher="ncclcheck"),
        nodes=[
            NodeInfo(0, "h1", {"host": {"hostname": "h1", "os": HOSTILE}, "env": {"vars": {"NCCL_X": HOSTILE}},
                               "storage": {"dirs": [{"path": HOSTILE, "exists": True,
                                                     "mount": {"fs_type": HOSTILE, "source": HOSTILE},
                                                     "space": {"free_bytes": 1, "free_inodes": HOSTILE}}]}}),
            NodeInfo(1, "<img src=x onerror=alert(1)>", {"interfaces": [{"name": HOSTILE, "kind": "physical"}]}),
        ],
        checks=[
            CheckResult("net.socket_ifname", Status.FAIL, HOSTILE, detail=HOSTILE, fix=HOSTILE, node=1,
                        evidence={"value": HOSTILE}),
            CheckResult("host.shm", Status.WARN, "shm | small", fix="--shm-size=1g", node=0),
            CheckResult("time.clock_skew", Status.SKIP, "no peers"),
        ],
        recommendations=[
            Recommendation("NCCL_SOCKET_IFNAME", "$(touch /tmp/ncclcheck-pwned)'\"`", HOSTILE),
            Recommendation("GLOO_SOCKET_IFNAME", "eth0; touch /tmp/ncclcheck-pwned", HOSTILE, node=1),
            Recommendation("BAD NAME;touch /tmp/ncclcheck-pwned", "x", "a name that is not a variable"),
        ],
        bench=[BenchRow("all_reduce", 1 << 20, 262144, "float32", False, 10.0, 100.0, 187.5, 0, [10.0])],
        links={"size": 1 << 20, "matrix_gbps": [[None, 1.0], [1.0, None]], "slow": [{"a": 0, "b": 1, "gbps": 1.0}],
               "slow_nodes": [1]},
    )
