"""The one table of failure messages NCCL, Gloo and torch.distributed print, each class with its usual cause and fix.

`cause` says whether a message names a cause (fix it first) or a consequence of something that happened elsewhere
(a peer died, a rank never came): `diagnose` names the earliest cause as the root cause and lists consequences after
it. Messages and their meanings: NCCL-FACTS.md "After a failure" (NCCL's docs and issue threads, gloo's source).
Pure: a line in, a classification out.

Every pattern here runs on what a job printed, so each runs in time linear in the line (nccl/linear.py): no `.*` inside
a regex (`Then(A, B)` is A and later B on the same line), and `classify` cuts the line at MAX_LINE_CHARS and runs a
pattern only on a line holding its literals (the prefilter: most lines of a log meet no pattern at all).

NCCL's own texts are its WARN format strings (NVIDIA/nccl, cited per class; v2.28.9 is what torch 2.11-2.13 wheels
ship, master is 2.30); a line NCCL printed as a WARN that no class names is still a cause (`nccl_warn`, last): a job
that printed an NCCL WARN is never "nothing wrong". ROUTINE lines are what torch and its store print while working
normally; they never become a cause, whatever words they share with a real failure.

Some lines only report a failure said better elsewhere: torch's wrapper of an NCCL error ("NCCL error in: ...,
invalid usage (run with NCCL_DEBUG=WARN for details)", is_wrapper) stands for the NCCL WARN of the same rank that
says what happened (NCCL's own line, or the "Last error:" text torch prints under it); it is a cause only where no
such line exists. A class whose message names the ranks involved (names_ranks: "rank 0 and rank 1 both on CUDA
device 60") is one fault of those ranks, not one per rank that printed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .linear import MAX_LINE_CHARS, Either, Prefilter, Then, fold, leading


@dataclass(frozen=True)
class FailureClass:
    id: str
    pattern: object  # a compiled regex, a Then or an Either: anything with .search(line) (nccl/linear.py)
    cause: bool  # True: a cause to fix; False: a consequence of a failure elsewhere
    what: str  # one line a person reads
    fix: str
    names_ranks: Optional[re.Pattern] = None  # the ranks the message names as involved (each group one rank number)


def _rx(text: str) -> re.Pattern:
    return re.compile(text, re.IGNORECASE)


# Lines that are routine, not failures: checked before TABLE, so they never become a cause.
# - c10d's TCPStore client polls its socket with a short timeout and logs each poll that returned nothing
#   (torch/csrc/distributed/c10d/socket.cpp, SocketImpl::waitForInput: "[c10d] waitForInput: poll for socket {}
#   returned 0, likely a timeout" then "waitForInput: socket {} timed out after {}ms"); a wait that really failed
#   raises DistStoreError / "Socket Timeout" / "wait timeout after", which TABLE reads. ncclcheck's guard waits on its
#   store in 1 s polls, so every guarded job prints the pair (seen: "timed out after 999ms").
# - torch's deprecation notice for an old variable name ("Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is
#   deprecated; use TORCH_FR_BUFFER_SIZE instead").
ROUTINE = Either(Then(r"\bwaitForInput: poll for socket ", r" returned 0, likely a timeout"),
                 Then(r"\bwaitForInput: socket ", r" timed out after \d+\s*ms"),
                 _rx(r"Environment variable \w+ is deprecated; use \w+ instead"))

# Order matters only where two patterns could match one line: the more specific first.
TABLE: tuple = (
    # src/plugin/net.cc (ncclNetInit, v2.28.9 l.379): no network plugin initialised: NCCL_NET names a network this
    # host lacks (NCCL_NET=IB without an active HCA), or the external plugin library failed to load or init
    FailureClass("net_plugin", _rx(r"Failed to initialize any NET plugin"), True,
                 "NCCL could not initialise any network plugin (NCCL_NET names a network this host does not have, "
                 "such as NCCL_NET=IB without an active InfiniBand/RoCE port, or the plugin library failed)",
                 "unset NCCL_NET (NCCL then picks IB when a port is ACTIVE, else sockets) or repair the IB stack: "
                 "`ncclcheck preflight` lists the HCAs and their port states; check NCCL_NET_PLUGIN / "
                 "libnccl-net.so when a plugin is meant to load"),
    # src/transport/net_ib.cc (v2.28.9 l.715; master net_ib/init.cc l.307-360): an HCA that cannot be opened or
    # queried, or no IP interface for its out-of-band channel
    FailureClass("ib_device", _rx(r"NET/IB\s*:\s*(?:Unable to (?:open|query) (?:device|port_num)|"
                                  r"No IP interface found)"), True,
                 "NCCL could not open or query an InfiniBand/RoCE device (driver, permissions, or a device that "
                 "vanished)",
                 "check the HCA on that host (/sys/class/infiniband, `ibv_devinfo`, dmesg for mlx5 errors, "
                 "/dev/infiniband permissions in a container); pin NCCL_IB_HCA to the ports `ncclcheck preflight` "
                 "finds ACTIVE"),
    # src/init.cc (v2.28.9 l.896; master l.1043) "Mismatched NCCL version detected : rank %d version %d rank %d
    # version %d"; src/ras/ras.cc "NCCL version mismatch with remote peer %s"
    FailureClass("version_mismatch", _rx(r"Mismatched NCCL version detected|NCCL version mismatch with remote peer"),
                 True, "the ranks run different NCCL versions",
                 "install the same torch/NCCL build on every node (`ncclcheck preflight` compares versions across "
                 "nodes: versions.consistent)",
                 _rx(r"detected : rank (\d{1,7}) version \d{1,9} rank (\d{1,7}) version")),
    FailureClass("no_socket_interface", _rx(r"Bootstrap\s*:\s*no socket interface found|"
                                            r"NET/Socket\s*:\s*no (?:usable )?interface found|"
                                            r"no socket interface found"), True,
                 "NCCL found no usable socket interface (NCCL_SOCKET_IFNAME matches nothing on this host)",
                 "set NCCL_SOCKET_IFNAME to an interface that is up on every node (`ncclcheck recommend --format env`"
                 " names it); `ip -br addr` shows the names"),
    # src/init.cc (v2.28.9 l.904, removed in 2.30) "Duplicate GPU detected : rank %d and rank %d both on CUDA
    # device %lx"
    FailureClass("duplicate_gpu", _rx(r"Duplicate GPU detected"), True,
                 "two ranks use the same GPU",
                 "select each rank's GPU by its LOCAL_RANK: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) "
                 "before init_process_group (not a fixed device such as set_device(0)), or give each rank its own "
                 "CUDA_VISIBLE_DEVICES; check --nproc-per-node against the GPUs of the node",
                 _rx(r"Duplicate GPU detected : rank (\d{1,7}) and rank (\d{1,7})")),
    FailureClass("ib_completion_error", Either(Then(r"NET/IB\s*:\s*Got completion ", r"error"),
                                               _rx(r"IBV_WC_RETRY_EXC_ERR|transport retry counter exceeded"),
                                               Then(r"NET/IB", r"\bstatus\s*(?:=\s*)?12\b")), True,
                 "InfiniBand/RoCE transport retries exceeded (a link, routing or a lossy fabric)",
                 "check the named HCA's port counters (perfquery, ethtool -S), cables and switch port; on RoCE "
                 "check PFC/ECN and NCCL_IB_GID_INDEX; `ncclcheck links` finds the slow or failing pair"),
    # src/include/checks.h / cudawrap.h "Cuda failure '%s'" and "Cuda failure %d '%s'" (NCCL's CUDA calls), NCCL's
    # ncclUnhandledCudaError text, torch's "CUDA error: ..." (a kernel fault such as a device-side assert surfaces on
    # the stream the collective runs on)
    FailureClass("cuda_error", _rx(r"Cuda failure (?:\d+ )?'|\bCUDA error: |unhandled cuda error|"
                                   r"device-side assert triggered"), True,
                 "a CUDA error on the rank's own GPU (a kernel fault, out of memory, or a GPU in a bad state)",
                 "read the first CUDA error of that rank: rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel; on "
                 "its host `nvidia-smi -q` and `dmesg -T | grep -i xid` for a GPU fault; drain the node if Xid 48/"
                 "79/94 appear"),
    FailureClass("unhandled_system_error", _rx(r"unhandled system error"), True,
                 "a system call NCCL made failed (shared memory, memlock, or a device)",
                 "read the NCCL WARN lines just before it (NCCL_DEBUG=INFO): /dev/shm too small (docker "
                 "--shm-size=1g or more), systemd RemoveIPC=no, `ulimit -l unlimited` for ibv_create_qp/ibv_reg_mr"),
    # /dev/shm, shm_open, shm<anything>: each holds "shm", whose first match ends first (Then's condition)
    FailureClass("shm_exhausted", Either(Then(r"shm|posix_fallocate", r"No space left|failed|Cannot allocate"),
                                         _rx(r"No space left on device")), True,
                 "/dev/shm is too small or full (NCCL's SHM transport)",
                 "give the container a larger /dev/shm (docker --shm-size=1g or more; Kubernetes: an emptyDir of "
                 "medium Memory at /dev/shm); `ncclcheck preflight` checks it (host.shm)"),
    FailureClass("memlock", Either(Then(r"ibv_(?:create_qp|reg_mr|create_cq)", r"failed|Cannot allocate memory"),
                                   _rx(r"RLIMIT_MEMLOCK|memlock")), True,
                 "RDMA memory registration failed (the memlock limit is too low)",
                 "raise the memlock limit to unlimited (`ulimit -l unlimited`, docker --ulimit memlock=-1, "
                 "Slurm PropagateResourceLimits); `ncclcheck preflight` checks it (host.memlock)"),
    FailureClass("collective_mismatch", _rx(r"Received data size doesn't match expected size|"
                                            r"collective mismatch|Detected mismatch between collectives"), True,
                 "ranks called different collectives, or the same one with different sizes",
                 "make every rank of the group call the same collectives in the same order with the same shapes "
                 "(a rank-dependent branch, an uneven last batch, a skipped step); TORCH_DISTRIBUTED_DEBUG=DETAIL "
                 "checks each call"),
    FailureClass("connection_refused", _rx(r"Connection refused"), True,
                 "a connection was refused: nothing listened at the address (wrong address or port, a firewall, "
                 "or the peer had not started or had died)",
                 "check MASTER_ADDR/MASTER_PORT and the firewall between the nodes (`ncclcheck preflight` probes "
                 "them); if the peer died, its own log says why"),
    FailureClass("no_route", _rx(r"No route to host|Network is unreachable|"
                                  r"Connect to \S+ failed\s*:\s*Connection timed out"), True,
                 "a peer's address cannot be reached from this host (a firewall dropping packets, or NCCL using an "
                 "interface whose network does not reach the peer)",
                 "pin NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the interface every node routes over "
                 "(`ncclcheck recommend`); `ncclcheck preflight` probes every pair on every interface "
                 "(net.peer_reachability)"),
    # TCPStore's failures as torch raises them (never the routine waitForInput poll above)
    FailureClass("init_timeout", Either(_rx(r"Socket Timeout|DistStoreError|wait timeout after \d+\s*ms|"
                                            r"client socket has timed out after"),
                                        Then(r"Timed out (?:after|waiting) ", r"clients|workers|store|rendezvous|join"),
                                        Then(r"bootstrap", r"time(?:d)? ?out")), True,
                 "the ranks did not all join in time (a rank never started, or could not reach the others)",
                 "find the rank that never joined (launcher output, `ncclcheck preflight` on the same nodes); check "
                 "the master address, port and firewall"),
    FailureClass("watchdog_timeout", _rx(r"Watchdog caught collective operation timeout|"
                                         r"Timeout at NCCL work: \d+|WorkNCCL\(SeqNum=\d+"), False,
                 "NCCL's watchdog timed out in a collective (a hang: a rank did not enter it, or a link stalled)",
                 "the flight-recorder dumps say which rank did not enter the collective (`ncclcheck diagnose` with "
                 "the dumps); `ncclcheck recommend --postmortem DIR` arms the next run"),
    FailureClass("gloo_timeout", _rx(r"Timed out waiting \d+\s*ms for (?:recv|send) operation"), False,
                 "a gloo collective timed out waiting for a peer (a hang: a rank did not enter it)",
                 "the flight-recorder dumps say which rank did not enter the collective"),
    FailureClass("peer_closed", Either(_rx(r"Connection closed by (?:remote )?peer|Connection reset by peer|"
                                           r"remote process exited or there was a network error"),
                                       Then(r"socketProgress", r"closed")),
                 False,
                 "a peer closed the connection (it died or was stopped)",
                 "look at the peer that died first: its exit signal in the launcher's failure table, its own log"),
    # Slurm's own words for a step it ended (slurmstepd's format strings, Slurm 22.05 as installed here):
    # "*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***" (also PREEMPTION, NODE FAILURE, JOB REQUEUE; none: scancel)
    FailureClass("scheduler_cancelled", _rx(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+"), True,
                 "the scheduler ended the job (its time limit, a preemption, a node failure, a requeue or scancel: the "
                 "line says which)",
                 "a time limit: raise --time or checkpoint more often; a preemption or requeue: run in a partition or "
                 "QOS that is not preempted; a node failure: `sinfo -R` names the node, drain it"),
    # the cgroup OOM handler, as slurmstepd reports it ("Detected %lu oom-kill event(s) in %ps. Some of your processes
    # may have been killed by the cgroup out-of-memory handler.") and the kernel ("Out of memory: Killed process")
    FailureClass("oom_killed", _rx(r"Detected \d+ oom-kill event|Out of memory: Killed process|"
                                   r"Memory cgroup out of memory"), True,
                 "the out-of-memory killer killed a process (host memory of the job or its cgroup, not GPU memory)",
                 "give the job more host memory (--mem, the container's limit) or use less: fewer data-loader workers, "
                 "smaller pinned buffers; `dmesg -T | grep -i oom` on the host names the process"),
    # the launcher itself was told to stop (torch/distributed/elastic: the agent's "Received %s death signal,
    # shutting down workers" and the SignalException its handler raises, "Process %d got signal: %d"): a scheduler's
    # time limit, scancel or an operator ended the job; what made them end it (a hang) is the cause. Its stop reaches
    # a rank's children too (torchrun signals each worker's process group): torch's DataLoader then raises "DataLoader
    # worker (pid(s) N) is killed by signal: Terminated." in the rank, the launcher's stop, not the rank's own failure
    FailureClass("launcher_stopped", _rx(r"Received \d{1,3} death signal, shutting down workers|"
                                         r"SignalException: Process \d{1,10} got signal: \d{1,3}|"
                                         r"is killed by signal: Terminated"), False,
                 "the launcher was told to stop (a signal from the scheduler, scancel or an operator) and stopped "
                 "its workers",
                 "find what happened before: a hang (the flight recorder, NCCL's watchdog lines) or a time limit "
                 "(the scheduler's log names who sent the signal)"),
    # any other WARN NCCL printed (src/debug.cc: "host:pid:tid [dev] file:line NCCL WARN msg"): a cause whose words
    # no class above knows; the line itself is what the report shows
    FailureClass("nccl_warn", _rx(r"\bNCCL WARN\b"), True, "NCCL warned",
                 "read the WARN line and the NCCL INFO lines before it (NCCL_DEBUG=INFO "
                 "NCCL_DEBUG_SUBSYS=INIT,NET); `ncclcheck preflight` checks the interfaces, HCAs and limits NCCL "
                 "needs"),
)
# A Python exception that ended a process, when no class above names its message (postmortem/analyze.py finds the
# line that ends a traceback): the process failed, and its own words are the best-supported cause there is.
EXCEPTION = FailureClass("exception", _rx(r"$^"), True, "raised an exception",
                         "read the exception and the traceback above it in that rank's output")
# ncclcheck's guard raised PreflightFailed in the job (its preflight failed): the job never trained, and the guard's
# first failing check is why (its report's other lines are ncclcheck's own, never read as the job's causes)
GUARD_FAILED = FailureClass("guard_failed", _rx(r"$^"), True, "ncclcheck's guard stopped the job before training",
                            "fix what the guard's first failing check names (its fix line; the full report is on "
                            "global rank 0's stderr), then relaunch")
BY_ID = {c.id: c for c in (*TABLE, EXCEPTION, GUARD_FAILED)}
# torch's wrapper of an NCCL error (C10D_NCCL_CHECK: "NCCL error in: <file>:<line>, <ncclGetErrorString>, NCCL version
# <v>"; NCCL's own string for most results ends "(run with NCCL_DEBUG=INFO for details)"): it says that NCCL failed,
# NCCL's WARN says why
_WRAPPER = re.compile(r"\bNCCL error in: |\(run with NCCL_DEBUG=\w{1,16} for details\)", re.IGNORECASE)
# torch prints NCCL's last WARN under its wrapper (ncclGetLastError): "Last error:" alone, the text on the next line
LAST_ERROR = re.compile(r"^\s*Last error:\s*$")
_SEQ = re.compile(r"SeqNum=(\d+)|Timeout at NCCL work: (\d+)", re.IGNORECASE)
_OPTYPE = re.compile(r"OpType=(\w+)")


_ROUTINE = Prefilter([ROUTINE])
_TABLE = Prefilter([c.pattern for c in TABLE])
# Every literal some class (or ROUTINE) needs: a line holding none of them is classified None without a pattern run
LITERALS = tuple(sorted(set(_TABLE.literals)))
# What a match of any class (or ROUTINE) starts with: None when some class may start otherwise (then no line is
# classified by a part of it alone)
_LEADS = [leading(p) for p in (ROUTINE, *(c.pattern for c in TABLE))]
LEADING = None if any(x is None for x in _LEADS) else tuple(sorted(frozenset().union(*_LEADS)))


def classify(line: str) -> Optional[FailureClass]:
    """The failure class of one log line, or None (also for a ROUTINE line). The line is cut at MAX_LINE_CHARS;
    only the classes whose literals it holds are tried."""
    line = line[:MAX_LINE_CHARS]
    low = fold(line)
    found = _TABLE.candidates(line, low)
    if not found or (_ROUTINE.candidates(line, low) and ROUTINE.search(line)):
        return None
    for i in found:
        if TABLE[i].pattern.search(line):
            return TABLE[i]
    return None


def is_wrapper(line: str) -> bool:
    """torch's wrapper text of an NCCL error: a consequence of the NCCL line that says what happened."""
    return _WRAPPER.search(line) is not None


def ranks_named(cls: FailureClass, line: str) -> list:
    """The ranks a message names as involved, sorted ([] when the class names none or the line does not)."""
    m = cls.names_ranks.search(line) if cls.names_ranks is not None else None
    return sorted({int(g) for g in m.groups()}) if m else []


def seq_of(line: str) -> Optional[int]:
    """The collective sequence number a watchdog line names (SeqNum=N / Timeout at NCCL work: N)."""
    m = _SEQ.search(line[:MAX_LINE_CHARS])
    return int(m.group(1) or m.group(2)) if m else None


_WARN_TEXT = re.compile(r"NCCL WARN\s*(.*)")


def warn_text(line: str) -> str:
    """What an NCCL WARN line says, without its header."""
    m = _WARN_TEXT.search(line[:MAX_LINE_CHARS])
    return m.group(1).strip()[:300] if m else line.strip()[:300]


def optype_of(line: str) -> Optional[str]:
    m = _OPTYPE.search(line[:MAX_LINE_CHARS])
    return m.group(1).lower() if m else None
