"""One fake node for the multi-process world tests: fake facts whose eth0 is 127.0.0.<rank+1> and whose docker0 is
127.0.0.9 on every node, then world.run_cluster_preflight; writes the outcome as JSON to --out."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.config import Config, StorageConfig, WorldConfig
from ncclcheck.facts import storage
from ncclcheck.model import passed
from ncclcheck.preflight.cluster import run_cluster_preflight
from ncclcheck.rendezvous.budget import Budget
from tests.fakefacts import facts, iface


class _Recorder:
    """An Observer that keeps its calls (the preflight's progress) for the test to read."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def start(self, total: int, label: str) -> None:
        self.calls.append(["start", total, label])

    def advance(self, label: str = "") -> None:
        self.calls.append(["advance", label])

    def stop(self) -> None:
        self.calls.append(["stop"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnodes", type=int)
    ap.add_argument("--node-rank", type=int)
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--hostname")
    ap.add_argument("--out")
    ap.add_argument("--torch", default="2.13.0")
    ap.add_argument("--code", default="sha256:c")
    ap.add_argument("--no-eth1", action="store_true")
    ap.add_argument("--shared-dir", action="append", default=[])
    # one of --local-size ranks of this node, as srun/mpirun start them (worker mode: every rank reads the verdict)
    ap.add_argument("--local-rank", type=int, default=0)
    ap.add_argument("--local-size", type=int, default=1)
    a = ap.parse_args()
    r = a.node_rank
    ifs = [iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4=f"127.0.0.{r + 1}", speed=10000),
           iface("docker0", "docker", "127.0.0.9")]
    f = facts(interfaces=ifs, versions={"torch": a.torch}, code={"hash": a.code},
              host={"hostname": a.hostname or f"host{r}"})
    world = WorldConfig(nnodes=a.nnodes, node_rank=r, master_addr=a.addr, master_port=a.port, timeout_s=a.timeout)
    cfg = Config(command="preflight", world=world, storage=StorageConfig(dirs=tuple(a.shared_dir)))
    if a.shared_dir:
        f["storage"] = storage.collect(a.shared_dir)
    placement = detect_placement({}, world)
    if a.local_size > 1:
        placement = dataclasses.replace(placement, launcher="mpi", local_rank=a.local_rank,
                                        local_world_size=a.local_size, rank=r * a.local_size + a.local_rank,
                                        world_size=a.nnodes * a.local_size)
    local = [passed("host.shm", "fine", node=r)]
    progress: list = []
    observer = _Recorder(progress)
    out = run_cluster_preflight(cfg, placement, f, local, Budget.of(cfg), observer=observer)
    worst = max((c.status.rank for c in out.checks), default=0)
    code = out.agree_exit_code(1 if worst == 3 else 0)
    with open(a.out, "w") as fh:
        json.dump({"formed": out.formed, "exit_code": code, "world": out.world.to_json(),
                   "nodes": [n.node_rank for n in out.nodes], "hosts": [n.hostname for n in out.nodes],
                   "facts": {str(n.node_rank): n.facts for n in out.nodes},
                   "checks": [c.to_json() for c in out.checks],
                   "recommendations": [x.to_json() for x in out.recommendations], "progress": progress}, fh)
    sys.exit(code)


if __name__ == "__main__":
    main()
