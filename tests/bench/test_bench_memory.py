"""--sizes the ranks cannot allocate are a usage error before any rank starts (issue 13)."""

from __future__ import annotations

import pytest

from ncclcheck.bench.memory import check_fits, largest_need
from ncclcheck.config import BenchConfig
from ncclcheck.errors import UsageError

G = 1 << 30


def test_largest_need_counts_send_recv_and_check_buffers():
    cfg = BenchConfig(sizes=(1 << 20, 64 << 20), ops=("all_reduce", "all_gather"))
    op, size, need = largest_need(cfg, 2)
    # all_reduce: 64M in + 64M out; all_gather at 64M on 2 ranks: 32M in + 64M out
    assert (op, size) == ("all_reduce", 64 << 20) and need == 2 * (64 << 20)
    _, _, gather = largest_need(BenchConfig(sizes=(64 << 20,), ops=("all_gather",)), 2)
    assert gather == 32 * (1 << 20) + 64 * (1 << 20)
    _, _, checked = largest_need(BenchConfig(sizes=(64 << 20,), ops=("all_reduce",), check=True), 2)
    assert checked == 3 * (64 << 20)


def test_host_memory_bound_names_op_size_and_memory():
    cfg = BenchConfig(sizes=(1 << 40,), ops=("all_reduce",))
    with pytest.raises(UsageError, match=r"all_reduce at .* needs 2 TiB per rank x 2 local ranks.*available"):
        check_fits(cfg, 2, 2, 64 * G, None)
    check_fits(BenchConfig(sizes=(1 << 30,), ops=("all_reduce",)), 2, 2, 64 * G, None)  # 4 GiB of 64: fits


def test_device_memory_bound_on_gpus():
    cfg = BenchConfig(sizes=(40 * G,), ops=("all_reduce",))
    with pytest.raises(UsageError, match="more than a GPU here can hold"):
        check_fits(cfg, 8, 8, 2048 * G, 80 * G)
    check_fits(BenchConfig(sizes=(8 * G,), ops=("all_reduce",)), 8, 8, 1 * G, 80 * G)  # host memory is not the bound


def _gpus(monkeypatch, n: int) -> None:
    import ncclcheck.agent.runner as runner

    monkeypatch.setattr(runner, "gpu_count", lambda: n)


def _world(backend: str, nproc: int):
    from ncclcheck.agent.launchers import Placement
    from ncclcheck.config import WorldConfig

    return WorldConfig(backend=backend, nproc_per_node=nproc), Placement(0, 1, 0, nproc, 0, 1, None, None)


def test_nccl_ranks_sharing_a_gpu_are_refused_before_any_rank_starts(monkeypatch):
    from ncclcheck.steps.world import check_gpus as _check_gpus

    _gpus(monkeypatch, 1)
    with pytest.raises(UsageError, match=r"2 ranks on this host needs 2 GPUs and it has 1: .*Duplicate GPU"):
        _check_gpus(*_world("nccl", 2))
    _check_gpus(*_world("nccl", 1))  # one rank per GPU
    _check_gpus(*_world("auto", 2))  # auto falls back to gloo
    _gpus(monkeypatch, 0)
    with pytest.raises(UsageError, match="sees no CUDA device"):
        _check_gpus(*_world("nccl", 1))
