"""Issue 54's fabric faults across a 4-node lab: each namespace host gets its own fake sysfs tree (NCCLCHECK_SYSFS_ROOT
in its environment; its class/net is the namespace's own), a GPU node with 4 GPUs and 4 ACTIVE InfiniBand HCAs.
Node 2's tree has no GPUDirect RDMA (no peer-memory module, the proprietary NVIDIA module: no DMA-BUF either), node 3's
HCAs run other firmware. `preflight` must name exactly those two nodes: gdr.support fails on node 2 (and across nodes,
node 2 alone), ib.firmware warns naming node 3 alone, every node exits 1 (node 0's verdict) and nothing else is
found on any node (docs/hardware.md)."""

from __future__ import annotations

import os
import resource

import pytest

from ncclcheck_lab.netlab.harness import Lab
from tests.fakesys import FakeSys, gpu_node

pytestmark = pytest.mark.lab

PORT = 29500
TIMEOUT = 30
SLACK = 10
FAULTS = {2: {"peermem": None, "flavor": "proprietary"}, 3: {"fw_ver": "28.41.1000"}}


def _trees(lab_: Lab) -> dict:
    env = {}
    for rank, host in enumerate(lab_.hosts):
        fs = FakeSys(lab_.tmp / f"tree-{host}")
        gpu_node(fs, netdevs=False, **FAULTS.get(rank, {}))
        os.symlink("/sys/class/net", fs.sysfs / "class" / "net")  # the namespace's own interfaces
        env[host] = {"NCCLCHECK_SYSFS_ROOT": str(fs.sysfs)}
    return env


@pytest.fixture
def memlock_unlimited():
    """RDMA ports make host.memlock demand an unlimited locked-memory limit: give the lab hosts one, as a cluster's
    limits.conf does, so the only findings are the staged ones. Yields False where this machine's hard limit cannot
    be raised (a container without CAP_SYS_RESOURCE): host.memlock then fails on every node alike, the machine's own
    finding, not a staged one."""
    old = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        yield False
        return
    yield True
    resource.setrlimit(resource.RLIMIT_MEMLOCK, old)


def test_node_without_gdr_and_node_on_other_firmware_are_named(lab, memlock_unlimited):
    lab4 = lab(4)
    host_env = _trees(lab4)
    args = {h: ["preflight", "--nnodes", "4", "--node-rank", str(r), "--master-addr", lab4.ip("h1"),
                "--master-port", str(PORT), "--timeout", str(TIMEOUT)] for r, h in enumerate(lab4.hosts)}
    runs = lab4.ncclcheck(args, deadline=TIMEOUT + 3 * SLACK, host_env=host_env)
    said = "\n".join(f"--- {h} rc={r.rc}\n{r.stdout[-2500:]}\n{r.stderr[-1500:]}" for h, r in runs.items())
    assert all(r.report is not None for r in runs.values()), said
    assert [runs[h].rc for h in lab4.hosts] == [1, 1, 1, 1], said
    checks = runs["h1"].report["checks"]  # node 0 holds every node's results
    found = sorted((c["id"], -1 if c["node"] is None else c["node"], c["status"]) for c in checks
                   if c["status"] in ("fail", "warn"))
    machine = [] if memlock_unlimited else [("host.memlock", n, "fail") for n in range(4)]
    assert found == sorted([("gdr.support", -1, "fail"), ("gdr.support", 2, "fail"), ("ib.firmware", -1, "warn"),
                            *machine]), said
    by = {(c["id"], c["node"]): c for c in checks}
    gdr = by[("gdr.support", None)]
    assert gdr["summary"].startswith("no GPUDirect RDMA on node 2 (h3) while node 0 (h1), node 1 (h2), node 3 (h4) "
                                     "have it"), gdr
    assert gdr["evidence"]["without"] == [2] and gdr["evidence"]["action"] == "isolate the node"
    assert "proprietary" in by[("gdr.support", 2)]["summary"]
    assert all(by[("gdr.support", n)]["status"] == "pass" for n in (0, 1, 3))
    fw = by[("ib.firmware", None)]
    assert fw["summary"] == ("HCA firmware (MT4129) 28.39.1002 on most nodes but 28.41.1000 on node 3 (h4); "
                             "action: monitor"), fw
    assert fw["evidence"]["odd_nodes"] == {"fw_ver MT4129": [3]}
    for n in (0, 1, 3):
        assert by[("pci.affinity", n)]["status"] == "pass" and by[("ib.counters", n)]["status"] == "pass"
    # every node reads node 0's cross-node verdict (with the other nodes' exceptions aggregated beside it)
    for h in lab4.hosts[1:]:
        theirs = {(c["id"], c["summary"]) for c in runs[h].report["checks"] if c["node"] is None}
        assert {("gdr.support", gdr["summary"]), ("ib.firmware", fw["summary"])} <= theirs, (h, theirs)
