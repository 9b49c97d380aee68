"""Check registry: a plain ordered dict of id -> function. Order is dependency order: the first failure is the root
cause a user should fix first (the master is unreachable before anything about interfaces matters)."""

from __future__ import annotations

import logging

from ..model import CheckResult, skipped
from . import local

log = logging.getLogger(__name__)

LOCAL_CHECKS = {
    "rendezvous.master_reachable": local.check_master_reachable,
    "host.hostname_resolves": local.check_hostname_resolves,
    "net.socket_ifname": local.check_socket_ifname,
    "net.interfaces": local.check_interfaces,
    "ib.devices": local.check_ib_devices,
    "gpu.count": local.check_gpu_count,
    "host.shm": local.check_shm,
    "host.memlock": local.check_memlock,
    "env.nccl": local.check_env_nccl,
    "paths.exist": local.check_paths_exist,
}


def run_local_checks(inp: local.LocalInput) -> list:
    """Every node-local check on one node's facts. A check that raises is a bug: it becomes a skip naming the bug."""
    out: list = []
    for cid, fn in LOCAL_CHECKS.items():
        try:
            res = fn(inp)
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
            log.exception("check %s crashed", cid)
            res = skipped(cid, f"internal error in this check ({type(exc).__name__}: {exc}); see the log",
                          node=inp.node_rank)
        out.extend(res if isinstance(res, list) else [res])
    return out


__all__ = ["LOCAL_CHECKS", "run_local_checks", "CheckResult"]
