"""ib.firmware (cross-node): HCA firmware (fw_ver) per HCA model, the board (board_id) per model, and the mlx5 driver
stack (mlx5_core's module version: MLNX_OFED / DOCA-OFED, absent from the inbox driver) the same on every node; the
odd node named by cross.compare, as versions.consistent names an odd driver. Another firmware or OFED on one node is
a known source of hangs and of bandwidth that differs by node (NVIDIA's release notes fix RDMA and adaptive-routing
bugs in both); it is a warning, fixed at the next maintenance: nothing stops a job today.
"""

from __future__ import annotations

from ..model import CheckResult, passed, skipped, warned
from . import actions
from .cross import CrossInput, _single, compare

CID = "ib.firmware"
INBOX = "inbox (no module version)"


def _model(dev: dict) -> str:
    return str(dev.get("hca_type") or dev.get("board_id") or "HCA")


def _by_model(rdma: dict) -> dict:
    """{model: [device dicts]} of one node's RDMA devices."""
    out: dict = {}
    for d in (rdma or {}).get("devices") or []:
        if isinstance(d, dict) and d.get("name"):
            out.setdefault(_model(d), []).append(d)
    return out


def _joined(values) -> str:
    vals = sorted({str(v) for v in values if v})
    return ", ".join(vals) if vals else "?"


def check_firmware(inp: CrossInput) -> CheckResult:
    """ib.firmware: HCA firmware per model, board id per model and the mlx5 driver stack (OFED) the same on every
    node; the odd node named."""
    if (s := _single(inp, CID)) is not None:
        return s
    rd = {r: g for r, g in inp.group("rdma").items() if isinstance(g, dict) and g.get("devices")}
    if len(rd) < 2:
        return skipped(CID, "fewer than two nodes with RDMA devices")
    models = {r: _by_model(g) for r, g in rd.items()}
    items = []
    for model in sorted({m for per in models.values() for m in per}):
        have = {r: per[model] for r, per in models.items() if model in per}
        if len(have) < 2:
            continue
        items.append((f"HCA firmware ({model})", f"fw_ver {model}",
                      {r: _joined(d.get("fw_ver") for d in devs) for r, devs in have.items()}))
        items.append((f"HCA board ({model})", f"board_id {model}",
                      {r: _joined(d.get("board_id") for d in devs) for r, devs in have.items()}))
    mlx5 = {r: g.get("mlx5_core_version") or INBOX for r, g in rd.items()
            if any(str(d.get("name", "")).startswith("mlx5") for d in g.get("devices") or [])}
    if len(mlx5) >= 2:
        items.append(("mlx5_core (OFED)", "mlx5_core_version", mlx5))
    if not items:
        return skipped(CID, "no HCA model on two nodes to compare")
    diffs, evidence, odd = compare(inp, items)
    if not diffs:
        fw = "; ".join(f"{label.split('(', 1)[1].rstrip(')')} {next(iter(v.values()))}" for label, key, v in items
                       if key.startswith("fw_ver"))
        stack = f", mlx5_core {next(iter(mlx5.values()))}" if len(mlx5) >= 2 else ""
        return passed(CID, f"same HCA firmware on {len(rd)} nodes ({fw}{stack})", evidence=evidence)
    evidence["odd_nodes"] = odd
    evidence[actions.KEY] = actions.MONITOR
    return warned(CID, "; ".join(diffs) + f"; {actions.said(actions.MONITOR)}", evidence=evidence,
                  detail="A node on other HCA firmware or another OFED can behave differently under the same job "
                         "(RDMA and adaptive-routing fixes ship in both): when only some nodes hang or run slow, "
                         "this is the first difference to remove.",
                  fix="Bring the odd node(s) to the fleet's firmware (`mlxfwmanager --query`, then `mlxfwmanager -u` "
                      "or the vendor's bundle, and a reboot or `mlxfwreset`) and the same MLNX_OFED/DOCA-OFED "
                      "(`ofed_info -s`) at the next drain.")
