"""One node's facts read from a fake tree by the real readers, as preflight and health collect them (the groups the
fabric checks read), for the checks' tests."""

from __future__ import annotations

from typing import Optional

from ncclcheck.facts import counters, gdr, pcitree, rdma
from ncclcheck.model import NodeInfo


def node_facts(env: Optional[dict] = None, hostname: str = "n0", between=None) -> dict:
    """`between()` runs between the two counter reads (a fault staged while the run reads the rest)."""
    first = counters.snapshot()
    if between is not None:
        between()
    return {"host": {"hostname": hostname}, "rdma": rdma.collect(), "gdr": gdr.collect(), "pci": pcitree.collect(),
            "gpu": {"count": 0, "source": "none", "devices": []}, "env": {"vars": dict(env or {})},
            "counters": counters.window(first, 0.0)}


def nodes(*facts: dict) -> list:
    return [(i, f["host"]["hostname"], f) for i, f in enumerate(facts)]


def node_infos(*facts: dict) -> list:
    return [NodeInfo(i, f["host"]["hostname"], f) for i, f in enumerate(facts)]
