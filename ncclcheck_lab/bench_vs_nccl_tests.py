"""ncclcheck bench beside nccl-tests on the same GPUs, the same libnccl, sizes, ops and iterations (issue 35).

    python scripts/bench_vs_nccl_tests.py --nccl-tests-src ~/src/nccl-tests [--nccl-home DIR] [--sizes 1M-1G]
        [--ops all_reduce,all_gather] [--iters 50] [--warmup 5] [--gencode "-gencode=arch=compute_90,code=sm_90"]

Builds nccl-tests from the source tree given (nothing is downloaded) against the libnccl torch loads (or
--nccl-home), with MPI off, one process driving every local GPU (-g N). Then per op, twice: ncclcheck
`--timing graph` (the fabric figure) against nccl-tests `-G L` (the iterations captured as a CUDA graph, launched L
times), and ncclcheck `--timing eager` against nccl-tests' default loop. Prints per size the ratio ncclcheck /
nccl-tests of the time and of busbw, and last `ops=N sizes=M worst_ratio=R eager_worst_ratio=E noop_rows=K`:
- worst_ratio, the gate (issue 35: <= 1.10): the largest time ratio of the fabric figure (above 1 ncclcheck reads
  slower), over the rows that move data;
- eager_worst_ratio: the same of the eager rows, reported, not gated: torch's dispatch of one call (~15-25 us on an
  H100 host) against a C loop's, the eager overhead a training step pays; each row's is in ncclcheck's JSON
  (eager_overhead_us);
- noop_rows: rows whose call moves nothing (one rank's in-place all_reduce or broadcast, in both tools): a time
  ratio between two empty calls (0.1 us against 0.03 us) is no fabric figure, so they are listed, not in R.
L (--graph-launches, default 20) is not 1 because nccl-tests times its graph's first launch, upload to the device
included, over only the iterations of one launch (-G 1 read 3.7 us for a 1.5 us copy on an H100), while ncclcheck
replays its graph once untimed first: launched 20 times, nccl-tests' one upload is spread as thin as ncclcheck's.
An op torch has in one (in-place) form only (all_reduce, broadcast, reduce) is compared with nccl-tests' in-place
column, every other with its out-of-place one. Needs nvcc, make and a CUDA GPU; without them it says which is
missing and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

# ncclcheck's op -> nccl-tests' binary (src/*.cu in NVIDIA/nccl-tests).
BINARIES = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf", "reduce_scatter": "reduce_scatter_perf",
            "broadcast": "broadcast_perf", "reduce": "reduce_perf", "all_to_all": "alltoall_perf",
            "sendrecv": "sendrecv_perf"}
# ncclcheck's dtype -> nccl-tests' -d name.
NCCL_TESTS_DTYPE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "int32": "int32",
                    "float64": "double", "int8": "int8"}
# ncclcheck --timing: the fabric figure (the gate) against nccl-tests -G, the eager one against its default loop.
GRAPH, EAGER = "graph", "eager"


class Missing(Exception):
    """Something the comparison needs is not on this machine: the one line the user sees, exit 2."""


# ---------------------------------------------------------------------------------------------------------------
# nccl-tests' stdout (pure)


@dataclass(frozen=True)
class Figure:
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Optional[int]  # None where nccl-tests printed N/A (no check)


@dataclass(frozen=True)
class Row:
    bytes: int
    count: int
    type: str
    out_of_place: Figure
    in_place: Figure


def _figure(tokens: list[str]) -> Figure:
    time, algbw, busbw, wrong = tokens
    return Figure(float(time), float(algbw), float(busbw), int(wrong) if re.fullmatch(r"-?\d+", wrong) else None)


def parse_table(text: str) -> list[Row]:
    """The rows of one nccl-tests run's table (common.cu prints, after a '#' header naming the leading columns:
    size count type [redop] [root] | time algbw busbw #wrong | time algbw busbw #wrong). Lines that are not rows
    (the header, `#` comments, what MPI or NCCL print in between) are skipped; so are trailing extra columns."""
    lead = 5  # size count type redop root: nccl-tests >= 2.10; older tables lack redop and/or root
    rows = []
    for line in text.splitlines():
        words = line.split()
        if line.lstrip().startswith("#"):
            if "size" in words and "time" in words:  # the column header: how many columns come before the figures
                lead = words.index("time") - 1
            continue
        if len(words) < lead + 8 or not (words[0].isdigit() and words[1].isdigit()):
            continue
        try:
            oop, ip = _figure(words[lead:lead + 4]), _figure(words[lead + 4:lead + 8])
        except ValueError:
            continue
        rows.append(Row(int(words[0]), int(words[1]), words[2], oop, ip))
    return rows


# ---------------------------------------------------------------------------------------------------------------
# the comparison (pure)


@dataclass(frozen=True)
class Comparison:
    mode: str
    op: str
    bytes: int
    ours_us: float
    theirs_us: float
    ours_busbw: Optional[float]  # None where the row moved no data (no bandwidth to compare)
    theirs_busbw: float

    @property
    def time_ratio(self) -> float:
        return self.ours_us / self.theirs_us if self.theirs_us > 0 else math.inf

    @property
    def no_op(self) -> bool:
        """The call moved nothing (ncclcheck's row says moves_data false): no fabric time to compare."""
        return self.ours_busbw is None

    @property
    def busbw_ratio(self) -> Optional[float]:
        if self.ours_busbw is None or self.theirs_busbw <= 0:
            return None
        return self.ours_busbw / self.theirs_busbw


def compare(mode: str, op: str, ours: list[dict], theirs: list[Row]) -> list[Comparison]:
    """ncclcheck's report rows (JSON) against nccl-tests' rows of the same op, matched by size in bytes. A row of a
    single-form op (torch's all_reduce, broadcast, reduce are in place) meets nccl-tests' in-place column."""
    by_size = {r.bytes: r for r in theirs}
    out = []
    for row in ours:
        if row.get("op") != op or row.get("bytes") not in by_size:
            continue
        them = by_size[row["bytes"]]
        fig = them.in_place if (row.get("in_place") or row.get("in_place_call")) else them.out_of_place
        busbw = None if row.get("moves_data") is False else float(row["busbw_gbps"])
        out.append(Comparison(mode, op, row["bytes"], float(row["time_us"]), fig.time_us, busbw, fig.busbw_gbps))
    return out


def worst_ratio(comparisons: list[Comparison], mode: str = GRAPH) -> float:
    """The largest time ratio ncclcheck / nccl-tests of one mode's rows that move data (slower time is lower busbw:
    one figure covers both); nan when there is none."""
    return max((c.time_ratio for c in comparisons if c.mode == mode and not c.no_op), default=math.nan)


def summary_line(comparisons: list[Comparison]) -> str:
    ops = {c.op for c in comparisons}
    sizes = {c.bytes for c in comparisons}
    return (f"ops={len(ops)} sizes={len(sizes)} worst_ratio={worst_ratio(comparisons):.3f} "
            f"eager_worst_ratio={worst_ratio(comparisons, EAGER):.3f} noop_rows={sum(c.no_op for c in comparisons)}")


def table_lines(comparisons: list[Comparison]) -> list[str]:
    def r(x: Optional[float]) -> str:
        return "-" if x is None else f"{x:.3f}"

    out = [f"{'mode':<6} {'op':<14} {'bytes':>11} {'ours_us':>10} {'nccl_us':>10} {'time_x':>7} "
           f"{'ours_bus':>9} {'nccl_bus':>9} {'busbw_x':>7}"]
    for c in comparisons:
        time_x = "no-op" if c.no_op else r(c.time_ratio)
        out.append(f"{c.mode:<6} {c.op:<14} {c.bytes:>11} {c.ours_us:>10.2f} {c.theirs_us:>10.2f} "
                   f"{time_x:>7} {r(c.ours_busbw):>9} {c.theirs_busbw:>9.2f} {r(c.busbw_ratio):>7}")
    return out


def size_flags(sizes: list[int]) -> list[list[str]]:
    """nccl-tests' -b/-e/-f for the sizes: one run when they double (or grow by one integer factor), else one run
    per size."""
    sizes = sorted(sizes)
    if len(sizes) > 1:
        f = sizes[1] // sizes[0]
        if f >= 2 and all(b == a * f for a, b in zip(sizes, sizes[1:])):
            return [["-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", str(f)]]
    return [["-b", str(s), "-e", str(s)] for s in sizes]


# ---------------------------------------------------------------------------------------------------------------
# this machine: prerequisites, the build, the runs


def _libnccl_torch_loads() -> str:
    """The path of the libnccl this process mapped after torch initialised NCCL."""
    import torch

    torch.cuda.nccl.version()
    with open("/proc/self/maps") as f:
        paths = {ln.split()[-1] for ln in f if "libnccl.so" in ln}
    if not paths:
        raise Missing("torch loaded no libnccl (is it built with NCCL?); give --nccl-home")
    return sorted(paths)[0]


def prerequisites(args) -> tuple[str, int, str]:
    """(nvcc, GPU count, NCCL home) or Missing naming what is not there."""
    src = os.path.expanduser(args.nccl_tests_src)
    if not os.path.isfile(os.path.join(src, "src", "Makefile")):
        raise Missing(f"--nccl-tests-src {args.nccl_tests_src}: not an nccl-tests source tree (no src/Makefile)")
    if not shutil.which("make"):
        raise Missing("make is not on PATH")
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = shutil.which("nvcc") or (os.path.join(cuda_home, "bin", "nvcc")
                                    if os.path.isfile(os.path.join(cuda_home, "bin", "nvcc")) else None)
    if not nvcc:
        raise Missing(f"nvcc is not on PATH nor in {cuda_home}/bin: install the CUDA toolkit or set CUDA_HOME")
    try:
        import torch
    except ImportError:
        raise Missing("torch is not installed") from None
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        raise Missing("no CUDA GPU is visible to torch")
    home = args.nccl_home or os.path.dirname(os.path.dirname(os.path.realpath(_libnccl_torch_loads())))
    if not os.path.isfile(os.path.join(home, "include", "nccl.h")):
        raise Missing(f"NCCL home {home}: no include/nccl.h (pip's nvidia-nccl ships it; else give --nccl-home)")
    return nvcc, torch.cuda.device_count(), home


def _link_home(home: str, work: str) -> tuple[str, str]:
    """(an NCCL_HOME whose lib has the unversioned libnccl.so the link needs, the real lib dir for the run): pip's
    nvidia-nccl ships libnccl.so.2 only."""
    libs = [n for n in sorted(os.listdir(os.path.join(home, "lib"))) if n.startswith("libnccl.so")]
    if not libs:
        raise Missing(f"NCCL home {home}: no lib/libnccl.so*")
    real_lib = os.path.dirname(os.path.realpath(os.path.join(home, "lib", libs[0])))
    shim = os.path.join(work, "nccl_home")
    os.makedirs(os.path.join(shim, "lib"), exist_ok=True)
    if not os.path.exists(os.path.join(shim, "include")):
        os.symlink(os.path.join(home, "include"), os.path.join(shim, "include"))
    so = next(os.path.join(real_lib, n) for n in sorted(os.listdir(real_lib)) if n.startswith("libnccl.so"))
    for name in ("libnccl.so", "libnccl.so.2"):
        if not os.path.exists(os.path.join(shim, "lib", name)):
            os.symlink(so, os.path.join(shim, "lib", name))
    return shim, real_lib


def build(args, nvcc: str, home: str, work: str) -> tuple[str, str]:
    """(the build directory of nccl-tests' binaries, the lib dir to run them with)."""
    import torch

    shim, real_lib = _link_home(home, work)
    gencode = args.gencode
    if not gencode:
        major, minor = torch.cuda.get_device_capability(0)
        gencode = f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"
    out = os.path.join(work, "build")
    cuda_home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    cmd = ["make", "-C", os.path.join(os.path.expanduser(args.nccl_tests_src), "src"), "-j", str(os.cpu_count() or 4),
           "MPI=0", f"CUDA_HOME={cuda_home}", f"NCCL_HOME={shim}", f"NVCC_GENCODE={gencode}", f"BUILDDIR={out}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise Missing(f"nccl-tests did not build ({' '.join(cmd[:3])} ...): {tail[0]}")
    return out, real_lib


def run_nccl_tests(build_dir: str, lib: str, op: str, args, ngpus: int, extra: tuple) -> list[Row]:
    env = dict(os.environ, LD_LIBRARY_PATH=f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    rows: list[Row] = []
    for flags in size_flags(args.sizes):
        cmd = [os.path.join(build_dir, BINARIES[op]), *flags, "-g", str(ngpus), "-n", str(args.iters),
               "-w", str(args.warmup), "-d", NCCL_TESTS_DTYPE[args.dtype], *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        print(f"# {' '.join(cmd)}: exit {p.returncode}", file=sys.stderr)
        rows += parse_table(p.stdout)
    return rows


def run_ncclcheck(op: str, timing: str, args, ngpus: int, work: str) -> list[dict]:
    path = os.path.join(work, f"ncclcheck-{op}-{timing}.json")
    cmd = [sys.executable, "-m", "ncclcheck", "bench", "--backend", "nccl", "--nproc-per-node", str(ngpus),
           "--sizes", ",".join(str(s) for s in args.sizes), "--ops", op, "--dtype", args.dtype,
           "--iters", str(args.iters), "--warmup", str(args.warmup), "--timing", timing, "--json", path, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(f"# ncclcheck bench --ops {op} --timing {timing}: exit {p.returncode}", file=sys.stderr)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return json.load(f).get("bench") or []


def main(argv=None) -> int:
    from ncclcheck.bench.ops import DTYPES, parse_ops
    from ncclcheck.errors import UsageError
    from ncclcheck.units import parse_sizes

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nccl-tests-src", required=True, metavar="DIR", help="an nccl-tests source tree (git clone)")
    p.add_argument("--nccl-home", metavar="DIR", help="NCCL to build against (default: the libnccl torch loads)")
    p.add_argument("--sizes", default="1M-1G", help="ncclcheck's sizes grammar (default 1M-1G)")
    p.add_argument("--ops", default="all_reduce,all_gather", help="comma list (default all_reduce,all_gather)")
    p.add_argument("--dtype", default="float32", choices=list(DTYPES))
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--graph-launches", type=int, default=20, metavar="L",
                   help="nccl-tests -G L: launches of its captured graph (default 20; 1 times its upload)")
    p.add_argument("--gencode", help="nvcc -gencode flags (default: this GPU's compute capability)")
    p.add_argument("--work", help="where to build and keep the JSON reports (default: a temporary directory)")
    args = p.parse_args(argv)
    try:
        args.sizes = parse_sizes(args.sizes)
        args.ops = parse_ops(args.ops)
        if args.graph_launches < 1:
            raise UsageError("--graph-launches must be at least 1")
        nvcc, ngpus, home = prerequisites(args)
        work = args.work or tempfile.mkdtemp(prefix="bench_vs_nccl_tests.")
        build_dir, lib = build(args, nvcc, home, work)
    except (Missing, UsageError) as exc:
        print(f"bench_vs_nccl_tests: {exc}", file=sys.stderr)
        return 2
    comparisons: list[Comparison] = []
    for timing, extra in ((GRAPH, ("-G", str(args.graph_launches))), (EAGER, ())):
        for op in args.ops:
            theirs = run_nccl_tests(build_dir, lib, op, args, ngpus, extra)
            comparisons += compare(timing, op, run_ncclcheck(op, timing, args, ngpus, work), theirs)
    print(f"{ngpus} GPU(s), NCCL from {home}, iters {args.iters}, warmup {args.warmup}, nccl-tests -G "
          f"{args.graph_launches}; ratios are ncclcheck / nccl-tests; rows marked no-op moved nothing")
    for line in table_lines(comparisons):
        print(line)
    print(summary_line(comparisons))
    return 0 if comparisons else 1


if __name__ == "__main__":
    sys.exit(main())
