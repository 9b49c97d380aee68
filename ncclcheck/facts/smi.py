"""nvidia-smi asked once per collection, every question at once: each call costs 0.1-1 s (the slow end on a node
without persistence mode, where the driver initialises the GPUs for every client), and the collectors ask five
(facts/gpu.py's device list and topology, facts/gpuhealth.py's -q and nvlink -s, facts/counters.py's first nvlink
-e). `prefetch` starts them together at the start of a collection; `run` hands a collector the answer started for
it (once: the counters' last read of nvlink -e is a new call) or asks nvidia-smi itself; `clear` drops what no
collector took. Nothing is started where no NVIDIA GPU is on the PCI bus or nvidia-smi is not installed, and the
health questions only where NVML cannot answer them.
"""

from __future__ import annotations

import contextvars
import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from . import nvml as nv_
from .pcitree import nvidia_gpu_bus_ids
from .util import Unanswered, run_cmd

TIMEOUT_S = 5.0  # as each collector's own nvidia-smi call (gpu.py, gpuhealth.py): 0.1-1 s on a healthy node
DEVICES = ("nvidia-smi", "--query-gpu=index,name,memory.total,uuid,pci.bus_id", "--format=csv,noheader,nounits")
TOPOLOGY = ("nvidia-smi", "topo", "-m")
# Of one nvidia-smi answer. util.OUTPUT_BYTES (16 MiB, sized for kernel logs) let the five calls asked at once hold a
# few copies of 16 MiB each while a broken nvidia-smi printed without end (issue 63's tool-output attack: +262 MiB).
OUTPUT_BYTES = 2 << 20
# Of `nvidia-smi -q` (and `-q -i ID`), sized for the largest real node with its Processes blocks full:
# - a GPU's block with no process is 13.9 KB (B200, R580: tests/data/hwnodes/b200-hgx-r580-healthy, 111,112 B for 8;
#   H200, R580: 14.1 KB in docs/gpu-record/2026-11-27-h200/smi_queries.log), so 16 KiB a GPU;
# - each process listed adds six lines (GPU instance ID, Compute instance ID, Process ID, Type, Name, Used GPU
#   Memory: tests/data/hwnodes/titanv-workstation-r560-healthy), 61 B each in R580's 55-column layout plus the name:
#   512 B a process;
# - 16 GPUs (HGX-2 / DGX-2) with 256 processes listed on each: 16 x (16 KiB + 256 x 512 B) = 2.25 MiB.
# An answer past it (more processes than that: GPUs time-sliced between hundreds of pods) is asked again per GPU
# (facts/smiread.py), each GPU's answer under the same cap (~8,000 processes on one GPU).
Q_OUTPUT_BYTES = 4 << 20
HEALTH = (("nvidia-smi", "-q"), ("nvidia-smi", "nvlink", "-s"), ("nvidia-smi", "nvlink", "-e"))
_started: dict = {}
_lock = threading.Lock()


def prefetch() -> None:
    """Start this collection's nvidia-smi questions (a no-op without a GPU on the bus or without nvidia-smi)."""
    if not nvidia_gpu_bus_ids() or shutil.which("nvidia-smi") is None:
        return
    asks = [DEVICES, TOPOLOGY]
    nv, _why = nv_.load()
    if nv is None:
        asks += list(HEALTH)
    else:
        nv_.close(nv)
    pool = ThreadPoolExecutor(max_workers=len(asks), thread_name_prefix="ncclcheck-smi")
    with _lock:
        for argv in asks:  # in the collection's context: its bound, and a tool that did not answer asked no more
            _started[tuple(argv)] = pool.submit(contextvars.copy_context().run, run_cmd, list(argv), TIMEOUT_S,
                                                limit=limit_of(argv))
    pool.shutdown(wait=False)


def limit_of(argv: Sequence[str]) -> int:
    """The cap on nvidia-smi's answer to argv: -q's own (every GPU's every section), else OUTPUT_BYTES."""
    return Q_OUTPUT_BYTES if list(argv[1:2]) == ["-q"] else OUTPUT_BYTES


def run(argv: Sequence[str], timeout_s: float) -> Any:
    """nvidia-smi's answer to argv: the one prefetched for it, else asked now (run_cmd's contract either way)."""
    with _lock:
        fut: Future = _started.pop(tuple(argv), None)
    if fut is None:
        return run_cmd(argv, timeout_s, limit=limit_of(argv))
    try:
        return fut.result(timeout=timeout_s)
    except FutureTimeout:
        raise Unanswered(f"{argv[0]} did not answer in {timeout_s:g} s") from None


def clear() -> None:
    """Forget what was started and not taken (its threads end with their commands' own bounds)."""
    with _lock:
        _started.clear()


__all__ = ["OUTPUT_BYTES", "Q_OUTPUT_BYTES", "clear", "limit_of", "prefetch", "run"]
