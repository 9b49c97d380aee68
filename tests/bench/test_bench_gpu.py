"""The NCCL paths (CUDA events, device buffers, the NCCL debug log) on real GPUs. Skipped without CUDA."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with torch CUDA"),
]


def _nranks() -> int:
    return max(1, min(2, torch.cuda.device_count()))


def test_nccl_sweep_is_exact_and_timed_with_cuda_events():
    from ncclcheck.bench.collectives import bench_config_to_payload
    from ncclcheck.bench.ops import OPS
    from ncclcheck.config import BenchConfig
    from tests.dist_harness import run_job

    n = _nranks()
    cfg = BenchConfig(sizes=(1 << 16, 1 << 22), ops=tuple(OPS), dtype="bfloat16", iters=5, warmup=2,
                      in_place=True, check=True)
    res = run_job("ncclcheck.bench.collectives.bench_job", bench_config_to_payload(cfg), nranks=n,
                  backend="nccl", timeout=300)
    out = res[0]["result"]
    assert out["backend"] == "nccl" and out["device"] == "cuda:0"
    assert out["rows"], out["skipped"]
    for r in out["rows"]:
        assert r["wrong"] == 0, r
        assert r["time_us"] > 0
        st = r["iter_stats"]  # one CUDA event per iteration
        assert st["iters"] == 5 and st["min_us"] <= st["p50_us"] <= st["p99_us"] <= st["max_us"]


def test_nccl_debug_log_is_written_and_parsed(tmp_path):
    from ncclcheck.steps.nccl_debug import nccl_debug_env
    from tests.dist_harness import run_job

    n = _nranks()
    res = run_job("ncclcheck.steps.nccl_debug.nccl_debug_job", {}, nranks=n, backend="nccl", timeout=300,
                  env=nccl_debug_env(str(tmp_path)), log_dir=str(tmp_path))
    parsed = res[0]["result"]["parsed"]
    assert parsed is not None, res[0]["result"]["note"]
    assert parsed["version"] and parsed["bootstrap"]


def test_nccl_capture_dumps_topology_and_graph_per_host(tmp_path):
    from ncclcheck.facts import hostname
    from ncclcheck.steps.nccl_debug import captures_section, nccl_debug_env
    from tests.dist_harness import run_job

    n = _nranks()
    # NCCL reads the dump variables once, at init: they go into the ranks' environment, as bench --nccl-capture does
    env = nccl_debug_env(str(tmp_path), hostname().split(".")[0], dump_rank=0)
    res = run_job("ncclcheck.steps.nccl_debug.nccl_debug_job", {"log_dir": str(tmp_path)}, nranks=n,
                  backend="nccl", timeout=300, env=env, log_dir=str(tmp_path))
    sec = captures_section([r["result"] for r in res])
    (host,) = sec
    assert sec[host]["debug"] and sec[host].get("topo"), (sec, res[0]["result"]["note"])
    assert "<system" in open(sec[host]["topo"]).read()


def test_nccl_rows_are_graph_timed_and_the_eager_figure_is_beside_them():
    """Issue 35: on a GPU the row's time is a CUDA-graph replay (the fabric figure) and the eager torch calls are
    kept beside it; at a small size the graph figure is below the eager one (torch's dispatch is not in it)."""
    from ncclcheck.bench.collectives import bench_config_to_payload
    from ncclcheck.config import BenchConfig
    from tests.dist_harness import run_job

    n = _nranks()
    cfg = BenchConfig(sizes=(1 << 16, 1 << 26), ops=("all_reduce", "all_gather"), iters=20, warmup=5,
                      timing="graph")
    res = run_job("ncclcheck.bench.collectives.bench_job", bench_config_to_payload(cfg), nranks=n,
                  backend="nccl", timeout=300)
    out = res[0]["result"]
    assert out["timing"]["no_graph"] == [] and not out["skipped"], out
    for r in out["rows"]:
        assert r["timing"] == "graph" and r["time_us"] > 0 and r["eager_time_us"] > 0, r
    small = [r for r in out["rows"] if r["bytes"] <= 1 << 16]
    assert all(r["time_us"] < r["eager_time_us"] for r in small), small
