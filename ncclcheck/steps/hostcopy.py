"""`preflight --gpu`: host-to-device and device-to-host copy bandwidth per GPU, measured with torch from pinned host
memory and timed with CUDA events, judged against the PCIe bound of each GPU's link (checks/gpu.py: gpu.host_copy).
Seconds, not minutes: one 256 MiB buffer per direction, a few copies. Without a usable CUDA the check is skipped
with the reason; the copies are a timing seam (`copier`) so the verdict is tested without a GPU."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..checks.gpu import check_host_copy
from ..model import CheckResult

COPY_BYTES = 256 << 20  # large enough that a copy's launch cost is noise (~5 ms at 50 GB/s), small enough for seconds
COPY_ITERS = 8
WARMUP = 2

# copier(torch, device index, "h2d" | "d2h", bytes, iters) -> seconds for `iters` copies
Copier = Callable[[Any, int, str, int, int], float]


def cuda_copier(torch: Any, index: int, direction: str, nbytes: int, iters: int) -> float:
    """The real copies: pinned host buffer <-> device buffer on the device's stream, timed by CUDA events."""
    dev = torch.device("cuda", index)
    with torch.cuda.device(dev):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        src, dst = (host, gpu) if direction == "h2d" else (gpu, host)
        for _ in range(WARMUP):
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(dev)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        del host, gpu
    return ms / 1000.0


def _bus_id(torch: Any, i: int) -> Optional[str]:
    p = torch.cuda.get_device_properties(i)
    bus = getattr(p, "pci_bus_id", None)
    if not isinstance(bus, int):
        return None
    return f"{getattr(p, 'pci_domain_id', 0):04x}:{bus:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"


def measure(torch: Any, copier: Copier = cuda_copier, nbytes: int = COPY_BYTES, iters: int = COPY_ITERS) -> list:
    """[{"index", "bus_id", "h2d_gbps", "d2h_gbps", "bytes", "iters"}] for every GPU torch sees."""
    out = []
    for i in range(int(torch.cuda.device_count())):
        row: dict = {"index": i, "bus_id": _bus_id(torch, i), "bytes": nbytes, "iters": iters}
        for direction in ("h2d", "d2h"):
            secs = copier(torch, i, direction, nbytes, iters)
            row[f"{direction}_gbps"] = nbytes * iters / secs / 1e9 if secs > 0 else None
        out.append(row)
    return out


def host_copy_check(facts: dict, node: int, load_torch: Callable[[], Any],
                    copier: Copier = cuda_copier) -> CheckResult:
    """gpu.host_copy on this node: measured, or skipped saying why it could not be (no torch, no CUDA, no GPU)."""
    try:
        torch = load_torch()
    except Exception as e:  # noqa: BLE001 - torch missing or broken: nothing to measure with
        return check_host_copy([], facts, node, skip=f"torch unusable: {e}")
    if getattr(torch.version, "cuda", None) is None:
        return check_host_copy([], facts, node, skip="torch is a CPU build (torch.version.cuda is None)")
    if not torch.cuda.is_available() or not torch.cuda.device_count():
        return check_host_copy([], facts, node, skip="no CUDA device available to torch")
    try:
        measured = measure(torch, copier)
    except Exception as e:  # noqa: BLE001 - a CUDA error is this node's answer, said in one line
        return check_host_copy([], facts, node, skip=f"the copies failed: {type(e).__name__}: {e}"[:300])
    return check_host_copy(measured, facts, node)


__all__ = ["COPY_BYTES", "COPY_ITERS", "cuda_copier", "host_copy_check", "measure"]
