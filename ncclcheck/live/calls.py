"""What a rank's main thread is calling in torch.distributed while it blocks there: the innermost c10d frame's own
arguments (the op; a send's or recv's peer as a global rank; the tensor's shape and dtype; the group's name,
description and ranks), read from that frame by the responder. gloo's flight recorder records no send or recv, so
this is how `ncclcheck watch` names a pipeline stage waiting for a peer (postmortem/p2p.py reads it).

Read only, never raises: a frame's locals are looked at, nothing is called but torch's own group lookups.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

C10D = "torch/distributed/distributed_c10d.py"
P2P_PEER = {"send": ("dst", "group_dst"), "isend": ("dst", "group_dst"), "recv": ("src", "group_src"),
            "irecv": ("src", "group_src")}
COLLECTIVES = frozenset(("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
                         "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather",
                         "scatter", "barrier", "monitored_barrier", "all_gather_object", "broadcast_object_list",
                         "batch_isend_irecv", "send_object_list", "recv_object_list"))
MAX_DEPTH = 64  # frames looked at, innermost first
MAX_RANKS = 4096  # of a group, listed


def c10d_call(frame: Any) -> Optional[dict]:
    """{"op", "peer", "size", "dtype", "group": {"name", "desc", "ranks"}} of the innermost torch.distributed call
    on this stack, or None."""
    try:
        f, depth = frame, 0
        while f is not None and depth < MAX_DEPTH:
            code = f.f_code
            if code.co_filename.replace("\\", "/").endswith(C10D) and (code.co_name in P2P_PEER or
                                                                       code.co_name in COLLECTIVES):
                return _describe(code.co_name, dict(f.f_locals))
            f, depth = f.f_back, depth + 1
    except Exception:  # noqa: BLE001 - a frame that cannot be read is no answer, never the responder's failure
        return None
    return None


def _describe(op: str, loc: dict) -> dict:
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    group = loc.get("group")
    if group is None and c10d is not None:
        try:
            group = c10d._get_default_group()
        except Exception:  # noqa: BLE001 - not initialised: no group to name
            group = None
    out: dict = {"op": op, "peer": None, "size": None, "dtype": None, "group": _group(c10d, group)}
    if op in P2P_PEER:
        glob, local = (loc.get(k) for k in P2P_PEER[op])
        if type(glob) is int:
            out["peer"] = glob
        elif type(local) is int and group is not None and c10d is not None:
            try:
                out["peer"] = int(c10d.get_global_rank(group, local))
            except Exception:  # noqa: BLE001
                pass
    t = loc.get("tensor")
    shape = getattr(t, "shape", None)
    if shape is not None:
        out["size"] = [int(n) for n in list(shape)[:8]]
        out["dtype"] = str(getattr(t, "dtype", "")).replace("torch.", "")[:20] or None
    return out


def _group(c10d: Any, group: Any) -> Optional[dict]:
    if group is None or c10d is None:
        return None
    out: dict = {"name": None, "desc": None, "ranks": None}
    for key, attr in (("name", "group_name"), ("desc", "group_desc")):
        try:
            v = getattr(group, attr)
            out[key] = str(v)[:64] if v is not None else None
        except Exception:  # noqa: BLE001
            pass
    try:
        out["ranks"] = [int(r) for r in c10d.get_process_group_ranks(group)[:MAX_RANKS]]
    except Exception:  # noqa: BLE001
        pass
    return out
