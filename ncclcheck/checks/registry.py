"""The one check registry and the one runner: every check's id, scope (local: one node's facts; cross: every node's
facts and the mesh probe), the fact groups it reads, and its function.

Order is dependency order: the first failure is the root cause a user should fix first (the master is unreachable
before anything about interfaces matters). A check that raises is a bug in that check: it becomes a skip naming the
bug, and never hides the others. A check whose fact groups were not collected at all (not merely "unavailable",
which checks explain themselves) is skipped here, so no check runs on data that is not there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from ..model import CheckResult, skipped
from . import cross, local, postmortem, storage

log = logging.getLogger(__name__)

LOCAL, CROSS, POSTMORTEM = "local", "cross", "postmortem"


@dataclass(frozen=True)
class CheckSpec:
    id: str
    scope: str  # LOCAL | CROSS | POSTMORTEM (a failed job's remains: postmortem.PostmortemInput)
    needs: tuple  # fact groups (docs/facts.md) the check reads; () = none beyond the run's own data
    fn: Callable[[Any], Any]  # LocalInput | CrossInput -> CheckResult | [CheckResult]


REGISTRY: tuple = (
    CheckSpec("rendezvous.master_reachable", LOCAL, (), local.check_master_reachable),
    CheckSpec("host.hostname_resolves", LOCAL, ("host",), local.check_hostname_resolves),
    CheckSpec("net.socket_ifname", LOCAL, ("interfaces", "env"), local.check_socket_ifname),
    CheckSpec("net.interfaces", LOCAL, ("interfaces",), local.check_interfaces),
    CheckSpec("ib.devices", LOCAL, ("rdma",), local.check_ib_devices),
    CheckSpec("gpu.count", LOCAL, ("gpu",), local.check_gpu_count),
    CheckSpec("host.shm", LOCAL, ("host",), local.check_shm),
    CheckSpec("host.memlock", LOCAL, ("host",), local.check_memlock),
    CheckSpec("host.nofile", LOCAL, (), local.check_nofile),
    CheckSpec("env.nccl", LOCAL, ("env",), local.check_env_nccl),
    CheckSpec("paths.exist", LOCAL, ("paths",), local.check_paths_exist),
    CheckSpec("versions.consistent", CROSS, ("versions",), cross.check_versions),
    CheckSpec("packages.consistent", CROSS, ("packages",), cross.check_packages),
    CheckSpec("code.consistent", CROSS, ("code",), cross.check_code),
    CheckSpec("paths.consistent", CROSS, ("paths",), cross.check_paths),
    CheckSpec(storage.WRITABLE, CROSS, ("storage",), storage.check_writable),
    CheckSpec(storage.SPACE, CROSS, ("storage",), storage.check_space),
    CheckSpec(storage.SHARED, CROSS, ("storage",), storage.check_shared),
    CheckSpec(storage.THROUGHPUT, CROSS, ("storage",), storage.check_throughput),
    CheckSpec("net.peer_reachability", CROSS, ("interfaces",), cross.check_peer_reachability),
    CheckSpec("net.mtu_consistent", CROSS, ("interfaces",), cross.check_mtu),
    CheckSpec("ib.devices", CROSS, ("rdma",), cross.check_ib),
    CheckSpec("gpu.count", CROSS, ("gpu",), cross.check_gpu_count),
    CheckSpec("env.nccl", CROSS, ("env",), cross.check_env),
    CheckSpec("time.clock_skew", CROSS, (), cross.check_clock_skew),
    # diagnose: the verdict first (the report's root cause), then the findings it was drawn from
    CheckSpec("postmortem.root_cause", POSTMORTEM, (), postmortem.check_root_cause),
    CheckSpec("postmortem.collectives", POSTMORTEM, (), postmortem.check_collectives),
    CheckSpec("postmortem.mismatch", POSTMORTEM, (), postmortem.check_mismatch),
    CheckSpec("postmortem.ranks", POSTMORTEM, (), postmortem.check_ranks),
    CheckSpec("postmortem.nccl_warnings", POSTMORTEM, (), postmortem.check_nccl_warnings),
    CheckSpec("postmortem.transport", POSTMORTEM, (), postmortem.check_transport),
    CheckSpec("postmortem.inputs", POSTMORTEM, (), postmortem.check_inputs),
)


def specs(scope: str, prefix: str = "") -> list:
    return [s for s in REGISTRY if s.scope == scope and s.id.startswith(prefix)]


def _missing(spec: CheckSpec, inp: Any) -> list:
    if spec.scope == LOCAL:
        return [g for g in spec.needs if g not in inp.facts]
    return [g for g in spec.needs if not any(g in (f or {}) for _, _, f in inp.nodes)]


def run_checks(scope: str, inp: Any, prefix: str = "") -> list:
    """Every check of one scope (whose id starts with prefix) on one input (a LocalInput or a CrossInput), in
    registry order."""
    node = getattr(inp, "node_rank", None) if scope == LOCAL else None
    out: list[CheckResult] = []
    for spec in specs(scope, prefix):
        missing = _missing(spec, inp)
        if missing:
            out.append(skipped(spec.id, f"not collected: {', '.join(missing)}", node=node))
            continue
        try:
            res = spec.fn(inp)
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
            log.exception("check %s crashed", spec.id)
            res = skipped(spec.id, f"internal error in this check ({type(exc).__name__}: {exc}); see the log",
                          node=node)
        out.extend(res if isinstance(res, list) else [res])
    return out
