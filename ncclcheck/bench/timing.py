"""How a bench row's time is taken: the --timing modes (one table, from which the CLI's choices and help come), and
the CUDA-graph replay that gives the fabric figure, written against a small CUDA API so that tests run it on CPU.

Two figures, both honest (issue 35). The eager figure is what a training step's torch calls cost: one Python call
per collective, back to back, timed by one CUDA event pair (nccl-tests' default loop, plus torch's dispatch). The
graph figure is what NCCL and the fabric cost: the timed calls captured once into a CUDA graph and replayed, timed by
one event pair around the replay, as nccl-tests times its `-G` runs. Below ~32 MiB on an H100 the eager figure is
the ~30 us CPU cost of a torch call, not the fabric; above, both agree. busbw, efficiency and the gates use the
graph figure where it exists; the eager figure stays on the row beside it.

No torch at import time. CUDA graphs exist only for NCCL on a GPU: on gloo (CPU) the timing is today's eager loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable, Optional

# --timing: mode -> what it means (the CLI's choices and help, in this order; config.BenchConfig holds the default).
TIMINGS: dict[str, str] = {
    "auto": "graph where the backend allows it (NCCL on a GPU), else eager, saying why once",
    "graph": "the timed calls captured in a CUDA graph and replayed (nccl-tests -G): the fabric figure; "
             "refused where graphs cannot run",
    "eager": "one torch call at a time, as a training step makes them (torch's dispatch included)",
}
# What a row's `timing` field says its time_us is.
GRAPH, EAGER = "graph", "eager"


def graph_unavailable(backend: str, device: str) -> Optional[str]:
    """Why this world cannot time a CUDA graph, or None when it can (before trying: capture may still fail)."""
    if backend != "nccl" or not str(device).startswith("cuda"):
        return f"CUDA graphs need NCCL on a GPU; this run used {backend} on {str(device).split(':')[0]}"
    return None


def refusal(timing: str, backend: str, device: str) -> Optional[str]:
    """The usage error for --timing graph on a world that cannot run graphs, else None."""
    why = graph_unavailable(backend, device) if timing == GRAPH else None
    return f"--timing graph: {why}; use --timing auto or eager" if why else None


class CaptureFailed(RuntimeError):
    """The calls could not be captured into a CUDA graph (the backend refused, or capture raised)."""


@dataclass(frozen=True)
class CudaApi:
    """The torch.cuda calls the graph path makes, and nothing else: tests pass fakes, so the path runs on CPU."""

    new_graph: Callable[[], Any]  # torch.cuda.CUDAGraph()
    new_stream: Callable[[], Any]  # torch.cuda.Stream(): capture happens on a side stream, as torch requires
    capture: Callable[[Any, Any], AbstractContextManager]  # (graph, stream) -> torch.cuda.graph(graph, stream=...)
    new_event: Callable[[], Any]  # torch.cuda.Event(enable_timing=True)
    current_stream: Callable[[], Any]
    synchronize: Callable[[], None]


def torch_cuda_api() -> CudaApi:
    """The real API. Capture is thread_local: NCCL's watchdog thread queries events of the eager calls while we
    capture, and under the default ("global") mode any such call from another thread invalidates the capture."""
    import torch

    return CudaApi(
        new_graph=torch.cuda.CUDAGraph,
        new_stream=torch.cuda.Stream,
        capture=lambda g, s: torch.cuda.graph(g, stream=s, capture_error_mode="thread_local"),
        new_event=lambda: torch.cuda.Event(enable_timing=True),
        current_stream=torch.cuda.current_stream,
        synchronize=torch.cuda.synchronize,
    )


def capture(calls: Sequence[Callable[[], None]], iters: int, api: CudaApi) -> Any:
    """`iters` back-to-back calls, taking `calls` in turn (one per buffer copy), captured into one graph (nothing
    runs yet). Raises CaptureFailed with the reason."""
    api.synchronize()  # the eager calls before must be done: a capture may not wait on work from outside it
    try:
        graph, stream = api.new_graph(), api.new_stream()
        with api.capture(graph, stream):
            for i in range(iters):
                calls[i % len(calls)]()
    except Exception as exc:  # noqa: BLE001 - whatever capture raises, the row falls back to (or refuses) graphs
        text = str(exc).strip().splitlines()
        raise CaptureFailed(f"{type(exc).__name__}: {text[0] if text else ''}"[:300]) from exc
    return graph


def replay_us(graph: Any, iters: int, api: CudaApi, align: Callable[[], None]) -> float:
    """Per-call time of one replay of a graph of `iters` calls: one event pair around it on the current stream.

    One replay first, untimed, so the graph's upload to the device is not in the figure; `align` (a barrier)
    starts every rank's timed replay together, as the eager loop's barrier does."""
    graph.replay()
    api.synchronize()
    align()
    stream = api.current_stream()
    first, last = api.new_event(), api.new_event()
    first.record(stream)
    graph.replay()
    last.record(stream)
    last.synchronize()
    return first.elapsed_time(last) * 1000.0 / iters


__all__ = ["TIMINGS", "GRAPH", "EAGER", "CudaApi", "CaptureFailed", "capture", "graph_unavailable",
           "refusal", "replay_us", "torch_cuda_api"]
