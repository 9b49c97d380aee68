"""Fidelity of ncclcheck's bench: its busbw vs a bare torch.distributed timing loop, same sizes and iterations,
interleaved in ONE run (alternating which goes first), repeated, medians compared. Target: ratio >= 0.97.

    python scripts/bench_fidelity.py [--sizes 16M,32M,64M] [--ops all_reduce,all_gather] [--iters 10]
                                     [--warmup 3] [--repeats 5] [--nranks 2] [--backend gloo|nccl]

Spawns its own local world (loopback, free port) with torch.multiprocessing; both measurements use the
slowest rank's per-iteration time, which is ncclcheck's definition. With --backend nccl each rank takes GPU
(rank % device count) and the bare loop is timed the way nccl-tests times it: one CUDA event pair around the
`iters` calls on the current stream. With one rank busbw is 0 by definition (nccl-tests' factor (n-1)/n), so the
ratio compares algbw. Prints figures; it never fails on them. Last line: pairs=K/K (every op x size timed by both,
every repeat, each bandwidth above 0); exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time


def _bare(dist, torch, op: str, size: int, iters: int, warmup: int, rank: int, n: int, device: str = "cpu") -> float:
    """The loop a user would write: buffers, warm-up, barrier, a timer around `iters` calls (perf_counter on the
    CPU, a CUDA event pair on the GPU). Returns the slowest rank's per-iteration time in us."""
    kw = {"dtype": torch.float32, "device": device}
    if op == "all_reduce":
        t = torch.zeros(size // 4, **kw)
        call = lambda: dist.all_reduce(t)  # noqa: E731
    else:
        per = (size // 4) // n // 4 * 4  # the same count rule as nccl-tests (16-byte chunks)
        inp = torch.zeros(per, **kw)
        out = torch.zeros(per * n, **kw)
        ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        call = lambda: ag(out, inp)  # noqa: E731
    for _ in range(warmup):
        call()
    dist.barrier()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        us = start.elapsed_time(end) * 1e3 / iters
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        us = (time.perf_counter() - t0) * 1e6 / iters
    mine = torch.tensor([us], dtype=torch.float64, device=device)
    alls = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(n)]
    dist.all_gather(alls, mine)
    return max(float(x) for x in alls)


def _rank(rank: int, n: int, port: int, args, q) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    from ncclcheck.agent.context import WorkerContext
    from ncclcheck.bench.collectives import run_sweep
    from ncclcheck.bench.ops import bandwidths, coll_counts
    from ncclcheck.config import BenchConfig

    device = "cpu"
    if args.backend == "nccl":
        device = f"cuda:{rank % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    ctx = WorkerContext(rank=rank, world_size=n, local_rank=rank, local_world_size=n, backend=args.backend,
                        device=device)
    metric = "busbw_gbps" if n > 1 else "algbw_gbps"  # busbw is 0 for one rank, as in nccl-tests
    results = []  # (op, size, impl, bandwidth)
    for rep in range(args.repeats):
        for op in args.ops:
            for size in args.sizes:
                order = ("ncclcheck", "bare") if rep % 2 == 0 else ("bare", "ncclcheck")
                for impl in order:
                    if impl == "ncclcheck":
                        cfg = BenchConfig(sizes=(size,), ops=(op,), iters=args.iters, warmup=args.warmup)
                        out = run_sweep(ctx, cfg)
                        bw = out["rows"][0][metric] if rank == 0 else None
                    else:
                        t = _bare(dist, torch, op, size, args.iters, args.warmup, rank, n, device)
                        bw = bandwidths(op, coll_counts(op, size, "float32", n).bytes, t, n)[1 if n > 1 else 0]
                    if rank == 0:
                        results.append((op, size, impl, bw))
    dist.destroy_process_group()
    if rank == 0:
        q.put(results)


def main(argv=None) -> int:
    from ncclcheck.bench.ops import parse_ops
    from ncclcheck.units import format_size_short, parse_sizes

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="16M,32M,64M")
    p.add_argument("--ops", default="all_reduce,all_gather")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    args = p.parse_args(argv)
    args.sizes = parse_sizes(args.sizes)
    args.ops = parse_ops(args.ops)

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mctx = mp.get_context("spawn")
    q = mctx.Queue()
    t0 = time.time()
    procs = [mctx.Process(target=_rank, args=(r, args.nranks, port, args, q)) for r in range(args.nranks)]
    for pr in procs:
        pr.start()
    results = q.get(timeout=3600)
    for pr in procs:
        pr.join()
    by: dict = {}
    for op, size, impl, bw in results:
        by.setdefault((op, size), {}).setdefault(impl, []).append(bw)
    metric = "busbw" if args.nranks > 1 else "algbw (busbw is 0 for one rank)"
    print(f"{args.backend}, {args.nranks} local ranks, iters {args.iters}, warmup {args.warmup}, "
          f"repeats {args.repeats} (medians of {metric}, GB/s; slowest-rank time in both)")
    print(f"{'op':<12} {'size':>6} {'ncclcheck':>10} {'bare':>10} {'ratio':>7}")
    ratios = []
    for (op, size), d in by.items():
        a, b = statistics.median(d["ncclcheck"]), statistics.median(d["bare"])
        ratio = a / b if b else float("nan")
        ratios.append(ratio)
        print(f"{op:<12} {format_size_short(size):>6} {a:>10.3f} {b:>10.3f} {ratio:>7.3f}")
    print(f"median ratio {statistics.median(ratios):.3f}, min {min(ratios):.3f} (target >= 0.97); "
          f"took {time.time() - t0:.0f} s")
    # the correctness field: every op x size timed --repeats times by both, each a bandwidth above 0
    whole = sum(1 for d in by.values() if all(len(d.get(impl, [])) == args.repeats and all(b > 0 for b in d[impl])
                                              for impl in ("ncclcheck", "bare")))
    want = len(args.ops) * len(args.sizes)
    print(f"pairs={whole}/{want}")
    return 0 if whole == want else 1


if __name__ == "__main__":
    sys.exit(main())
