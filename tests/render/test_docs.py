"""The troubleshooting table covers every stable check id, so a user who meets one in a report finds it there."""

from __future__ import annotations

import pathlib
import re

from ncclcheck.checks.registry import POSTMORTEM, REGISTRY

DOCS = pathlib.Path(__file__).parents[2] / "docs"

# DESIGN.md's Checks table plus the ids of the GPU, bench and links jobs.
CHECK_IDS = [
    "rendezvous.master_reachable", "rendezvous.world", "host.hostname_resolves", "host.shm", "host.memlock",
    "host.nofile",
    "net.interfaces", "net.socket_ifname", "net.peer_reachability", "net.mtu_consistent", "ib.devices", "gpu.count",
    "versions.consistent", "packages.consistent", "code.consistent", "paths.consistent", "time.clock_skew", "env.nccl",
    "nccl.transport", "bench.correctness", "bench.min_busbw", "bench.baseline", "links.slow",
    "baseline.drift", "links.baseline", "nccl.ras",
    "paths.exist", "bench.coverage", "links.min_gbps",
    "health.gpus", "health.nccl_interface", "health.ib_ports", "health.timeout", "slurm.drain",  # docs/slurm.md
    "bench.efficiency", "bench.min_efficiency", "links.efficiency", "links.min_efficiency",  # docs/bounds.md
    "storage.shared", "storage.writable", "storage.space", "storage.throughput",
] + [s.id for s in REGISTRY if s.scope == POSTMORTEM]  # diagnose's checks, from the one registry


def test_troubleshooting_has_a_row_per_check_id():
    text = (DOCS / "troubleshooting.md").read_text()
    rows = re.findall(r"^\| `([a-z_.]+)` \|(.*)\|$", text, re.M)
    ids = [r[0] for r in rows]
    assert sorted(ids) == sorted(CHECK_IDS)
    for _id, rest in rows:
        assert len([c for c in rest.split(" | ") if c.strip()]) == 3, _id  # symptom, cause, fix all filled


def test_deploy_uses_the_documented_flags():
    text = (DOCS / "deploy.md").read_text()
    for flag in ("--nnodes", "--node-rank", "--nproc-per-node", "--master-addr", "--master-port", "--timeout",
                 "--json", "--junit", "--env-out", "--min-busbw", "--sizes 64M-1G", "JOB_COMPLETION_INDEX"):
        assert flag in text, flag
