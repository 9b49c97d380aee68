"""A fake of the few torch.cuda calls bench's graph path makes (bench/timing.CudaApi), so that path runs on CPU.

The fake graph counts the calls made while it captures and its replay advances a fake clock by `per_call_us` for
each of them; fake events read that clock. Real capture records the calls without running them; here they run (a
gloo world's ranks must all make the same calls), which changes nothing the tests look at. `fail_on_ranks` makes
capture raise on those ranks at its end, after the calls, as CUDA reports an unsupported capture at
cudaStreamEndCapture."""

from __future__ import annotations

from contextlib import contextmanager

from ncclcheck.bench.timing import CudaApi


class Clock:
    def __init__(self) -> None:
        self.us = 0.0
        self.replays = 0
        self.captured: list[int] = []  # calls per capture, in order
        self.syncs = 0


class _Event:
    def __init__(self, clock: Clock) -> None:
        self.clock, self.at = clock, None

    def record(self, stream=None) -> None:
        self.at = self.clock.us

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: _Event) -> float:  # ms, as torch.cuda.Event's
        return (other.at - self.at) / 1000.0


class _Graph:
    def __init__(self, clock: Clock, per_call_us: float) -> None:
        self.clock, self.per_call_us, self.calls = clock, per_call_us, 0

    def replay(self) -> None:
        self.clock.replays += 1
        self.clock.us += self.calls * self.per_call_us


def fake_api(per_call_us: float = 2.5, fail_on_ranks=(), rank: int = 0, clock: Clock | None = None,
             counter=None) -> tuple[CudaApi, Clock]:
    """(the API, its clock). `counter()` returns how many calls have been made so far (the runner's count), which
    is how the fake graph learns how many calls it captured."""
    clock = clock or Clock()

    @contextmanager
    def capture(graph, stream):
        before = counter() if counter else 0
        yield
        graph.calls = (counter() - before) if counter else 0
        clock.captured.append(graph.calls)
        if rank in fail_on_ranks:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore lines")

    def sync() -> None:
        clock.syncs += 1

    api = CudaApi(new_graph=lambda: _Graph(clock, per_call_us), new_stream=object, capture=capture,
                  new_event=lambda: _Event(clock), current_stream=object, synchronize=sync)
    return api, clock
