"""How fast diagnose reads a large NCCL_DEBUG=INFO log and a training job's whole output, and in how much memory
(issue 45, item 7; issue 75).

Writes a job's logs, one file per node (its 8 processes' NCCL lines interleaved, as on a node's stderr), made of the
lines NCCL 2.28.9 printed on an H100 (the captures in /work/shared/nccl-h100, copied below) for every process of a
job of many ranks (headers, ranks, addresses varied), plus the connection lines NCCL prints between ranks (their
format from tests/data/nccl/nccl.node-a.511, real lines of an issue thread). In the middle of the job, three
processes print the real WARN lines of those captures (a duplicate GPU, no socket interface, no network plugin); eight
hard links to the first node's file sit beside it. Then `ncclcheck diagnose DIR --json` runs in a child pinned to
two CPUs, and its time, throughput and peak RSS are printed with the correctness fields:

    python3 scripts/bench_logs.py [--mib 1024] [--training-mib 1024] [--cpus 2] [--keep DIR]

    planted_named=3/3   each planted WARN is a cause, on the rank and host that printed it (both ranks of the
                        duplicate GPU line)
    root_planted=1      the root cause is one of them
    world=N/N           every process's rank read (its init line): the world's size
    hosts=K/K           each rank the report lists (at most 4,096) tied to the host that wrote its lines
    transports=N/N      NCCL's transports read for every rank
    links_once=8/8      the hard links were listed as the same file, read once
    exit=1             diagnose's exit code (a cause named)

Target (issue 45): 1 GiB in < 60 s on 2 cores with RSS < 500 MB.

Then (--training-mib, 1024 by default; 0: none) a 16-rank training job's own output, as its launcher collects it:
NCCL's init lines, the loop's prints (step, loss, timings, an eval and a checkpoint line now and then, a warning), and
rank 5's InfiniBand completion error and torch's exception for it at the end, the others' watchdog timeouts after it.
diagnose reads it pinned as above, and `grep -E 'NCCL WARN|Error'` (what a user runs first) reads the same file pinned
alike, the better of two runs; printed: diagnose's MiB/s, grep's, their ratio, and

    failure_named=1    the root cause is rank 5's ib_completion_error on node00000
    world=16/16        every rank read
    exit=1

Target (issue 75): 1/10 of grep's speed or better, the failure named.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from . import peak_rss

# The INFO lines one process printed (nccl.vm.1430.log, NCCL 2.28.9 on an H100), its header cut off; {ip} {rank}
# {nranks} {comm} {dev} stand where that process's own values were.
PREAMBLE = (
    "ENV/Plugin: Could not find: libnccl-env.so", "NCCL_SOCKET_IFNAME set to =eth0", "cudaDriverVersion 13000",
    "NCCL version 2.28.9+cuda13.0", "NET/Plugin: Could not find: libnccl-net.so",
    "dlvsym failed on mlx5dv_get_data_direct_sysfs_path - /lib/x86_64-linux-gnu/libmlx5.so: undefined symbol: "
    "mlx5dv_get_data_direct_sysfs_path, version MLX5_1.25 version MLX5_1.25",
    "dlvsym failed on mlx5dv_reg_dmabuf_mr - /lib/x86_64-linux-gnu/libmlx5.so: undefined symbol: "
    "mlx5dv_reg_dmabuf_mr, version MLX5_1.25 version MLX5_1.25",
    "NET/IB : No device found.", "NET/IB : Using [RO]; OOB eth0:{ip}<0>", "Failed to initialize NET plugin IB",
    "NET/Socket : Using [0]eth0:{ip}<0>", "Initialized NET plugin Socket",
    "Could not get speed from /sys/class/net/eth0/speed. Defaulting to 10 Gbps.", "Assigned NET plugin Socket to comm",
    "Using network Socket",
)
COMM_START = (
    "ncclCommInitRankConfig comm {comm} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {bus} commId "
    "{cid} - Init START", "RAS client listening socket at 127.0.0.1<28028>",
    "Could not get speed from /sys/class/net/eth0/speed. Defaulting to 10 Gbps.",
    "Topology detection: network path (name = eth0) /sys/devices/pci0000:00/0000:00:03.0/virtio2 is not a PCI device "
    "(virtio). Attaching to first CPU", "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'",
    "ncclTopoGetCpuAffinity: Affinity for GPU {dev} is empty, ignoring. (GPU affinity =  ; CPU affinity = 0-15).",
    "comm {comm} rank {rank} nRanks {nranks} nNodes {nnodes} localRanks 8 localRank {dev} MNNVL 0",
)
COMM_END = (
    "P2P Chunksize set to 524288", "PROFILER/Plugin: Could not find: libnccl-profiler.so",
    "Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1", "[Proxy Service] Device {dev} CPU core 2",
    "[Proxy Service UDS] Device {dev} CPU core 6", "TUNER/Plugin: Could not find: libnccl-tuner.so",
    "Connected all rings",
    "64 coll channels, 64 collnet channels, 0 nvls channels, 64 p2p channels, 64 p2p channels per peer",
    "CC Off, workFifoBytes 1048576",
    "ncclCommInitRankConfig comm {comm} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {bus} commId "
    "{cid} - Init COMPLETE",
    "Init timings - ncclCommInitRankConfig: rank {rank} nranks {nranks} total 0.31 (kernels 0.29, alloc 0.00, "
    "bootstrap 0.00, allgathers 0.00, topo 0.00, graphs 0.00, connections 0.01, rest 0.00)",
)
# The WARN lines the captures hold (dupgpu, badif, ibforced), their timestamp and header as NCCL wrote them
WARNS = (
    ("duplicate_gpu", "init.cc:904 NCCL WARN Duplicate GPU detected : rank {rank} and rank {other} both on CUDA "
                      "device 60"),
    ("no_socket_interface", "bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found"),
    ("net_plugin", "plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin"),
)
CHANNELS = 64
COMMS = 4  # the world and three subgroups (tensor, pipeline, data parallel): each inits its own communicator


@functools.cache
def _ring(channel: int, nranks: int) -> str:
    """A ring as NCCL's dumpLine prints it: each rank " %*d" wide enough for the largest, the line cut at 128."""
    width = len(str(nranks - 1))
    text = "".join(f" {(channel * 8 + k) % nranks:{width}d}" for k in range(min(nranks, 128)))
    return text[:128 - len("Channel 00/64 :") - 1]


def _process(rank: int, nranks: int, host: str, pid: int, rng: random.Random) -> list:
    """The NCCL INFO lines of one process (its header on each), in the order NCCL prints them."""
    dev, node = rank % 8, rank // 8
    ip = f"10.{node >> 8 & 255}.{node & 255}.{10 + dev}"
    main, proxy = f"{host}:{pid}:{pid} [{dev}] NCCL INFO ", f"{host}:{pid}:{pid + 21} [{dev}] NCCL INFO "
    out = [main + t.format(ip=ip) for t in PREAMBLE]
    nnodes = max(1, nranks // 8)
    for _ in range(COMMS):
        v = dict(comm=f"0x{rng.getrandbits(32):x}", rank=rank, nranks=nranks, dev=dev, bus=f"{0x18 + dev:x}000",
                 cid=f"0x{rng.getrandbits(64):x}", nnodes=nnodes)
        out += [main + t.format(**v) for t in COMM_START]
        # every rank prints its communicator's rings, the same lines (src/graph/rings.cc dumpLine: 128 characters)
        out += [f"{main}Channel {ch:02d}/{CHANNELS} :{_ring(ch, nranks)}" for ch in range(CHANNELS)]
        out.append(f"{main}Trees " + " ".join(f"[{ch}] {(rank + 8) % nranks}/-1/-1->{rank}->{(rank - 8) % nranks}"
                                               for ch in range(16)))
        nxt, peer = node * 8 + (dev + 1) % 8, (rank + 8) % nranks
        for ch in range(0, CHANNELS, 4):  # the intra-node ring step and the inter-node send/receive
            out.append(f"{proxy}Channel {ch:02d}/0 : {rank}[{dev}] -> {nxt}[{(dev + 1) % 8}] via P2P/IPC/read")
            out.append(f"{proxy}Channel {ch:02d}/0 : {rank}[{dev}] -> {peer}[{dev}] [send] via NET/Socket/0")
            out.append(f"{proxy}Channel {ch:02d}/0 : {(rank - 8) % nranks}[{dev}] -> {rank}[{dev}] [receive] via "
                       f"NET/Socket/0")
        out += [(proxy if "Proxy" in t else main) + t.format(**v) for t in COMM_END]
    return out


def write_job(root: str, mib: int, seed: int = 1) -> dict:
    """The job's logs under root/logs (one file per node): about `mib` MiB. Returns what was planted."""
    rng = random.Random(seed)
    logs = os.path.join(root, "logs")
    os.makedirs(logs)
    per_node = len("".join(line + "\n" for r in range(8) for line in _process(r, 1 << 14, "node00000", 10000, rng)))
    nnodes = max(2, (mib << 20) // per_node)
    nranks = nnodes * 8
    mid = nnodes // 2
    planted = []
    written = lines = 0
    for node in range(nnodes):
        host = f"node{node:05d}"
        procs = [_process(node * 8 + d, nranks, host, 10000 + node * 8 + d, rng) for d in range(8)]
        if node == mid:  # three processes of the middle node print the captures' WARN lines, mid-way through
            for k, (cls, warn) in enumerate(WARNS):
                d = 2 * k + 1
                rank = node * 8 + d
                pid = 10000 + rank
                line = f"[2026-11-23 07:32:{10 + k}] {host}:{pid}:{pid} [{d}] " + warn.format(rank=rank, other=rank + 1)
                procs[d].insert(len(procs[d]) // 2, line)
                # a duplicate GPU names both ranks of its line (neither alone is the one at fault)
                planted.append({"class": cls, "ranks": [rank, rank + 1] if cls == "duplicate_gpu" else [rank],
                                "host": host})
        with open(os.path.join(logs, f"{host}.log"), "w") as f:
            at = [0] * 8
            while any(at[d] < len(procs[d]) for d in range(8)):  # the 8 processes' writes interleaved in runs
                d = rng.randrange(8)
                n = rng.randint(1, 8)
                chunk = procs[d][at[d]:at[d] + n]
                at[d] += n
                if chunk:
                    text = "\n".join(chunk) + "\n"
                    f.write(text)
                    written += len(text)
                    lines += len(chunk)
    first = os.path.join(logs, "node00000.log")
    for i in range(8):
        os.link(first, os.path.join(logs, f"link{i}.log"))
    return {"dir": logs, "bytes": written, "lines": lines, "nodes": nnodes, "ranks": nranks, "planted": planted,
            "links": 8}


# A training job's own output, as its launcher collects it (torch's "[rankN]:" prefix on every line a rank prints):
# NCCL's init lines, then the loop's prints, then a failure at the end. Its words vary as a job's do (numbers, file
# names, a warning now and then); the failure is the real line of an InfiniBand completion error (NCCL's
# src/transport/net_ib.cc format) on rank 5 and torch's exception for it, the others' watchdog timeouts after it.
TRAIN_RANKS = 16
_TRAIN = (
    "[{ts}] [INFO] [trainer.py:412] step {s} | loss {loss:.4f} | lr {lr:.3e} | tokens/s {tps} | grad_norm {g:.3f} | "
    "mem {mem:.1f} GiB",
    "[{ts}] [INFO] [trainer.py:430] step {s} | data {d:.1f} ms | fwd {f:.1f} ms | bwd {b:.1f} ms | opt {o:.1f} ms",
)
_EVERY = (
    (50, "[{ts}] [INFO] [eval.py:88] eval at step {s}: val_loss {loss:.4f} ppl {ppl:.2f} on shard val-{shard:05d}.bin"),
    (200, "[{ts}] [INFO] [checkpoint.py:57] saving checkpoint to /ckpt/run-{run}/step_{s:07d}/model_{r:02d}.pt"),
    (333, "/opt/venv/lib/python3.11/site-packages/torch/optim/lr_scheduler.py:143: UserWarning: Detected call of "
          "`lr_scheduler.step()` before `optimizer.step()`."),
)
_END = (
    (5, "{host}:{pid}:{tid} [5] NCCL WARN NET/IB : Got completion from peer 10.0.0.13<43122> with status=12 opcode=0 "
        "len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.15 remoteGids::ffff:10.0.0.13 hca mlx5_0"),
    (5, "Traceback (most recent call last):"),
    (5, '  File "/work/train.py", line 212, in <module>'),
    (5, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "remote process exited or there was a network error, NCCL version 2.21.5"),
)


def write_training(root: str, mib: int, seed: int = 2) -> dict:
    """One file, root/train/job.log: a 16-rank job's output, about `mib` MiB, failing at its end on rank 5."""
    rng = random.Random(seed)
    logs = os.path.join(root, "train")
    os.makedirs(logs)
    path = os.path.join(logs, "job.log")
    written = lines = 0
    with open(path, "w") as f:
        head = []
        for r in range(TRAIN_RANKS):
            head += [f"[rank{r}]:{line}" for line in _process(r, TRAIN_RANKS, f"node{r // 8:05d}", 20000 + r, rng)]
        text = "\n".join(head) + "\n"
        f.write(text)
        written, lines = len(text), len(head)
        s, run = 0, rng.getrandbits(32)
        while written < mib << 20:
            s += 1
            ts = f"2026-11-28 {10 + s // 3600 % 12:02d}:{s // 60 % 60:02d}:{s % 60:02d},{rng.randrange(1000):03d}"
            batch = []
            for r in range(TRAIN_RANKS):
                v = dict(ts=ts, s=s, r=r, run=run, loss=rng.uniform(1.5, 3), lr=3e-4 * rng.random(),
                         tps=rng.randrange(80_000, 120_000), g=rng.random() * 2, mem=rng.uniform(40, 70),
                         d=rng.uniform(1, 9), f=rng.uniform(50, 90), b=rng.uniform(100, 180), o=rng.uniform(5, 20),
                         ppl=rng.uniform(5, 20), shard=rng.randrange(4096))
                batch += [f"[rank{r}]:" + t.format(**v) for t in _TRAIN]
                batch += [f"[rank{r}]:" + t.format(**v) for every, t in _EVERY if s % every == 0 and r % 8 == 0]
            text = "\n".join(batch) + "\n"
            f.write(text)
            written += len(text)
            lines += len(batch)
        end = [f"[rank{r}]:" + t.format(host="node00000", pid=20000 + r, tid=20000 + r + 21) for r, t in _END]
        end += [f"[rank{r}]:[{ts}] [E] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={s}, "
                f"OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 "
                f"milliseconds before timing out." for r in range(TRAIN_RANKS) if r != 5]
        text = "\n".join(end) + "\n"
        f.write(text)
    return {"dir": logs, "path": path, "bytes": written + len(text), "lines": lines + len(end),
            "ranks": TRAIN_RANKS, "planted": [{"class": "ib_completion_error", "ranks": [5], "host": "node00000"}]}


def grep_speed(path: str, cpus: int) -> float:
    """grep -E 'NCCL WARN|Error' over the file (what a user runs first), pinned alike: MiB/s, the best of two."""
    best = None
    for _ in range(2):
        t0 = time.monotonic()
        subprocess.run(["grep", "-E", "-c", "NCCL WARN|Error", path], stdout=subprocess.DEVNULL, preexec_fn=_pin(cpus),
                       check=False)
        took = time.monotonic() - t0
        best = took if best is None else min(best, took)
    return os.path.getsize(path) / (1 << 20) / max(best, 1e-6)


def check_training(job: dict, got: dict) -> dict:
    pm = got["report"]["postmortem"]
    root = next((c for c in pm["causes"] if c["cause"]), None)
    named = int(bool(root and root["kind"] == "ib_completion_error" and root["ranks"] == [5]
                     and "node00000" in root["text"]))
    return {"failure_named": named, "world": (pm["world_size"], job["ranks"]), "exit": got["exit"]}


def ok_training(fields: dict) -> bool:
    return fields["failure_named"] == 1 and fields["world"][0] == fields["world"][1] and fields["exit"] == 1


def line_training(job: dict, got: dict, fields: dict, grep: float, cpus: int) -> str:
    mib = job["bytes"] / (1 << 20)
    rate = mib / got["seconds"]
    words = " ".join(f"{k}={v[0]}/{v[1]}" if isinstance(v, tuple) else f"{k}={v}" for k, v in fields.items())
    return (f"bench_logs: {mib:,.0f} MiB of a training job's output ({job['lines'] / 1e6:.1f} M lines, "
            f"{job['ranks']} ranks): {got['seconds']:.1f} s ({rate:.1f} MiB/s) on {cpus} CPUs, grep {grep:,.0f} MiB/s, "
            f"ratio 1/{grep / rate:.1f} of grep's speed, peak RSS {got['rss'] / 1e6:,.0f} MB; {words}")


def _pin(cpus: int):
    def pin() -> None:
        have = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, have[:cpus])
    return pin


def measure(job: dict, cpus: int, timeout: float) -> dict:
    """diagnose on the job's logs in a child pinned to `cpus` CPUs: seconds, peak RSS, the report."""
    out = os.path.join(os.path.dirname(job["dir"]), "report.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    # its own peak, not this process's high-water mark that exec would hand it (peak_rss says why)
    p, rss = peak_rss.run([sys.executable, "-m", "ncclcheck", "diagnose", job["dir"], "--json", out, "--quiet"],
                          out + ".rss", timeout=timeout, env=env, preexec_fn=_pin(cpus), capture_output=True,
                          text=True)
    seconds = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    rss = rss or 0
    with open(out) as f:
        report = json.load(f)
    return {"seconds": seconds, "cpu": cpu, "rss": rss, "exit": p.returncode, "report": report,
            "stderr": p.stderr[-2000:]}


def check(job: dict, got: dict) -> dict:
    """The correctness fields: what the report must say of the job that was written."""
    pm = got["report"]["postmortem"]
    causes = pm["causes"]
    named = [p for p in job["planted"]
             if any(c["kind"] == p["class"] and c["ranks"] == p["ranks"] and c["cause"] and p["host"] in c["text"]
                    for c in causes)]
    root = next((c for c in causes if c["cause"]), None)
    root_planted = any(root and root["kind"] == p["class"] and root["ranks"] == p["ranks"] for p in job["planted"])
    listed = pm["ranks"]  # the report lists at most MAX_REPORT_ROWS of them
    hosts_ok = sum(1 for r in listed if r["host"] == f"node{r['rank'] // 8:05d}")
    transports = sum(1 for row in pm["transport"]["ranks"].values() if row["transports"].get("NET/Socket"))
    once = sum(1 for i in pm["inputs"] if "read once" in i.get("note", ""))
    return {"planted_named": (len(named), len(job["planted"])), "root_planted": int(root_planted),
            "world": (pm["world_size"], job["ranks"]), "hosts": (hosts_ok, len(listed)),
            "transports": (transports, job["ranks"]),
            "links_once": (once, job["links"]), "exit": got["exit"]}


def ok(fields: dict) -> bool:
    return (all(a == b for a, b in (fields[k] for k in ("planted_named", "world", "hosts", "transports",
                                                          "links_once")))
            and fields["hosts"][1] > 0 and fields["root_planted"] == 1 and fields["exit"] == 1)


def line(job: dict, got: dict, fields: dict, cpus: int) -> str:
    mib = job["bytes"] / (1 << 20)
    figures = (f"bench_logs: {mib:,.0f} MiB of NCCL INFO logs ({job['lines'] / 1e6:.1f} M lines, {job['nodes']:,} "
               f"files, {job['ranks']:,} ranks): {got['seconds']:.1f} s ({mib / got['seconds']:.1f} MiB/s, "
               f"{job['lines'] / got['seconds'] / 1e3:,.0f} k lines/s) on {cpus} CPUs ({got['cpu']:.1f} s of CPU), "
               f"peak RSS {got['rss'] / 1e6:,.0f} MB")
    words = " ".join(f"{k}={v[0]}/{v[1]}" if isinstance(v, tuple) else f"{k}={v}" for k, v in fields.items())
    return f"{figures}; {words}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="size of the logs written (MiB)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs diagnose is pinned to")
    ap.add_argument("--timeout", type=float, default=600, help="seconds diagnose may take before it counts as hung")
    ap.add_argument("--keep", metavar="DIR", help="write the logs here and keep them")
    ap.add_argument("--training-mib", type=int, default=1024,
                    help="size of the training job's output written beside them (MiB; 0: none)")
    args = ap.parse_args(argv)
    root = args.keep or tempfile.mkdtemp(prefix="bench_logs.")
    try:
        good = True
        if args.mib:
            job = write_job(os.path.join(root, "job"), args.mib)
            got = measure(job, args.cpus, args.timeout)
            fields = check(job, got)
            print(line(job, got, fields, args.cpus), flush=True)
            if not ok(fields):
                print(got["stderr"], file=sys.stderr)
            good = ok(fields)
        if args.training_mib:
            job = write_training(os.path.join(root, "job"), args.training_mib)
            got = measure(job, args.cpus, args.timeout)
            fields = check_training(job, got)
            print(line_training(job, got, fields, grep_speed(job["path"], args.cpus), args.cpus), flush=True)
            if not ok_training(fields):
                print(got["stderr"], file=sys.stderr)
            good = good and ok_training(fields)
        return 0 if good else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
