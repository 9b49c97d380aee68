"""What to suspect, and how to test it, when a job failed and its text does not say why (the middle verdict of
`diagnose`: "the job failed; the cause is not in this text"). Each kind of evidence a text can hold without a cause (a
watchdog timeout, a peer gone, a rank's exit code, an NCCL warning no row knows, torch's wrapper without NCCL's line,
a stop from outside) points at suspects in the order an expert tests them; each suspect says the command that tells.

The orders follow NCCL's troubleshooting guide (docs/troubleshooting.html: "Networking issues", "PCI Access Control
Services", "GPU Direct") and the maintainers' answers on hangs with no error (NVIDIA/nccl#1324: NCCL itself cannot name
the hanging rank; the flight recorder or a stack of each rank can). Pure data and one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Suspect:
    id: str
    what: str  # the suspect, as a person reads it
    test: str  # how to tell: a command to run, a variable to set and rerun with


SKIPPED = Suspect("rank_skipped", "a rank never entered the collective the others wait in (a rank-dependent branch, an "
                  "exception it caught, a data loader that ran out first)",
                  "arm the next run so the flight recorder names that rank: `ncclcheck recommend --postmortem DIR "
                  "--format env`; on a live hang, `ncclcheck watch` (or `py-spy dump --pid` of each rank)")
NETWORK = Suspect("network", "the network between the nodes (NCCL on an interface that does not route to the peers, a "
                  "firewall on the ephemeral ports NCCL uses after rendezvous, a link that is down)",
                  "`ncclcheck preflight` on the same nodes probes every pair on every interface; rerun with "
                  "NCCL_SOCKET_IFNAME set to the interface every node routes over, and with NCCL_IB_DISABLE=1 to take "
                  "InfiniBand/RoCE out")
P2P = Suspect("p2p", "GPU peer-to-peer inside a node (PCIe ACS on the switches, the IOMMU, a VM without P2P)",
              "rerun with NCCL_P2P_DISABLE=1: if it then runs, disable ACS on the PCIe switches (`lspci -vvv | grep "
              "ACSCtl`) and put the IOMMU in passthrough (iommu=pt)")
GPU = Suspect("gpu", "a GPU that stopped (an Xid, a kernel that never ends)",
              "on each host `dmesg -T | grep -i xid` and `nvidia-smi` (a GPU at 100 % with no progress); "
              "`ncclcheck health`")
PEER_DIED = Suspect("peer_died", "another rank died first (its own error, the out-of-memory killer, a crash); this "
                    "rank only saw its connection close",
                    "find the first rank that ended: the launcher's failure table (its \"first observed failure\"), "
                    "each rank's own output (torchrun --redirects 3 --log-dir DIR keeps them apart), `dmesg -T | grep "
                    "-i -e oom -e killed` on its host")
OWN_OUTPUT = Suspect("own_output", "the rank's own error, printed where this text does not reach (another rank's "
                     "output, a part cut off)",
                     "read that rank's whole output: torchrun --redirects 3 --log-dir DIR (or srun --output=%t.out) "
                     "keeps each rank's apart; its last lines name the error")
NCCL_DETAIL = Suspect("nccl_detail", "what NCCL was doing when it warned (its INFO lines say which transport, "
                      "interface and peer)",
                      "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE=/tmp/nccl.%h.%p and read "
                      "the lines before the WARN, or pass those files to `ncclcheck diagnose`")
NCCL_SILENT = Suspect("nccl_silent", "NCCL's own line, which says why it failed, was not printed (torch reports only "
                      "NCCL's result)",
                      "rerun with NCCL_DEBUG=WARN (torch then prints NCCL's reason under \"Last error:\") and "
                      "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p; `ncclcheck recommend --postmortem DIR --format env` sets both")
STOPPED = Suspect("stopped_hung", "the job was stopped from outside while it made no progress (a hang after NCCL's "
                  "init with no error of its own)",
                  "rerun it armed (`ncclcheck recommend --postmortem DIR --format env`) and run `ncclcheck watch` "
                  "while it hangs: it names the rank and the collective")

SCHEDULER = Suspect("scheduler", "the scheduler or an operator stopped it: a time limit, a preemption, scancel, a "
                    "kill or kubectl delete", "`sacct -j JOB -o JobID,State,ExitCode,Elapsed,Timelimit` (TIMEOUT, "
                    "PREEMPTED, CANCELLED by whom), `kubectl describe pod` for a pod's events")

NCCL_VERSION_BUG = Suspect("nccl_bug", "a bug of this NCCL version at that size, op or algorithm",
                           "rerun the same size with a newer NCCL, and with NCCL_ALGO=Ring or NCCL_PROTO=Simple: the "
                           "setting that makes it right names the algorithm at fault")

# evidence (a failure class, or an end the launcher reported) -> its suspects, most likely first
BUILD = Suspect("build", "NCCL, the program and the CUDA driver built for different CUDA versions (a libnccl for "
                "another CUDA, an old driver)",
                "`nvidia-smi` (the driver's CUDA), `python -c 'import torch; print(torch.version.cuda, "
                "torch.cuda.nccl.version())'`, `ldconfig -p | grep nccl` on each node; NCCL_DEBUG=WARN names the CUDA "
                "call that failed")
HUNG = Suspect("hung_init", "a hang with no error after NCCL's init: GPU peer-to-peer through PCIe ACS or an IOMMU "
               "(the most common), then the network",
               "rerun with NCCL_P2P_DISABLE=1: if it runs, disable ACS on the PCIe switches and boot with iommu=pt "
               "(or intel_iommu=off); then NCCL_IB_DISABLE=1 / NCCL_SOCKET_IFNAME=<iface> for the network; "
               "`ncclcheck preflight` and `ncclcheck health` check both")
SYSCALL = Suspect("syscall", "a system call NCCL needs failed: /dev/shm too small (a container's 64 MiB), systemd "
                  "RemoveIPC deleting shared memory, the memlock limit for RDMA, a socket to a peer that went away",
                  "`df -h /dev/shm` and `ulimit -l` in the job's environment (`ncclcheck preflight` checks both: "
                  "host.shm, host.memlock); rerun with NCCL_DEBUG=WARN to see the failing call")
TEARDOWN = Suspect("teardown", "a crash while the process exited (a thread still running at exit), after its work or "
                   "after its own sys.exit",
                   "read the rank's last lines: if its work had finished the results stand; call "
                   "dist.destroy_process_group() before the script ends, and update torch")
OWN_GPU = Suspect("own_gpu", "the rank's own GPU work queued before the collective never finished (a kernel that "
                  "never ends, a GPU fault), or its peers, whose lines are not here, never came",
                  "`nvidia-smi` on its host (its GPU at 100 % with no progress) and `dmesg -T | grep -i xid`; "
                  "`py-spy dump --native --pid` of the rank; the other ranks' output, if the job had more")

CUT = Suspect("cut_short", "the text was cut before the job's end (a paste, an excerpt, a log still being written): "
              "nothing may be wrong", "read the rest of the output, or the launcher's exit status (`echo $?`, "
              "`sacct -j JOB -o JobID,State,ExitCode`): a job that ended well says so at its end")
JOIN = Suspect("join", "a rank or node never joined (never started, a wrong MASTER_ADDR or port, a firewall on the "
               "master port): the others wait for it", "`ncclcheck preflight` with the same world flags names the node "
               "that does not join and why; `ss -tlnp` on the master shows its port")
EXIT_HANG = Suspect("exit_hang", "a hang at exit: a rank still inside a collective or destroy_process_group while its "
                    "peers left", "`py-spy dump --pid` of the process that does not exit; call "
                    "dist.barrier() then dist.destroy_process_group() on every rank before the script ends")

# a cause named from one line that several situations print (the whole paste is that line): what else it may be
OOM_HOST = Suspect("oom_host", "the host's out-of-memory killer (the job's, or its container's or cgroup's, memory)",
                   "`dmesg -T | grep -i -e oom -e 'killed process'` on that host; `sacct -j JOB -o JobID,MaxRSS,State`")
TIME_KILL = Suspect("time_kill", "a time limit or a preemption that ended in SIGKILL, or an operator's kill -9 / a pod "
                    "eviction", "`sacct -j JOB -o JobID,State,Elapsed,Timelimit` (TIMEOUT, PREEMPTED), `kubectl "
                    "describe pod` (Evicted, OOMKilled)")
NOT_LISTENING = Suspect("not_listening", "the peer was not listening yet, or any more (it starts later than this rank, "
                        "or it had already died)", "start rank 0 (the master) first, or raise the rendezvous timeout; "
                        "the peer's own output says whether it was up; `ss -tlnp` on its host shows its port")
CODE_BUG = Suspect("code_bug", "a bug in a kernel of the job's own code or of a library (an index out of range, a "
                   "tensor on the wrong device)", "rerun with CUDA_LAUNCH_BLOCKING=1 (the traceback then names the "
                   "kernel) or under compute-sanitizer")
ONE_LINE = {
    "killed": (OOM_HOST, TIME_KILL),
    "connection_refused": (NOT_LISTENING, JOIN, NETWORK),
    "no_route": (NETWORK, NOT_LISTENING),
    "init_timeout": (JOIN, NETWORK),
    "cuda_fault": (CODE_BUG, GPU),
}

BY_EVIDENCE = {
    # no line shows a failure and none the job's end: where the text stops says what to suspect (nccl/endings.py)
    "stopped_launched": (JOIN, CUT),
    "stopped_rendezvous": (JOIN, NETWORK, CUT),
    "stopped_nccl_init": (NETWORK, JOIN, HUNG, CUT),
    "stopped_init_complete": (HUNG, NETWORK, SKIPPED, CUT),
    "stopped_steps": (SKIPPED, GPU, NETWORK, CUT),
    "stopped_teardown": (EXIT_HANG, CUT),
    "stalled_all": (NETWORK, P2P, GPU),
    "stalled_one": (OWN_GPU, SKIPPED, NETWORK),
    "watchdog_timeout": (SKIPPED, NETWORK, P2P, GPU),
    "gloo_timeout": (SKIPPED, NETWORK),
    "watchdog_stuck": (GPU, P2P, NETWORK),
    "peer_closed": (PEER_DIED, NETWORK),
    "comm_aborted": (PEER_DIED, SKIPPED),
    "proxy_failed": (PEER_DIED, NETWORK),
    "ib_flush": (PEER_DIED, NETWORK),
    "rank_failed": (OWN_OUTPUT, PEER_DIED),
    "exited": (OWN_OUTPUT, PEER_DIED),
    "died": (PEER_DIED, OWN_OUTPUT),
    "nccl_warn": (NCCL_DETAIL, NETWORK, P2P),
    # a WARN placed by the NCCL source file it was printed in (nccl/subsystems.py): that subsystem's suspects
    "nccl_warn_shm": (SYSCALL, NCCL_DETAIL),
    "nccl_warn_topology": (P2P, NCCL_DETAIL),
    "nccl_warn_ib": (NETWORK, PEER_DIED, NCCL_DETAIL),
    "nccl_warn_socket": (NETWORK, PEER_DIED, NCCL_DETAIL),
    "nccl_warn_net": (NETWORK, NCCL_DETAIL),
    "nccl_warn_p2p": (P2P, NCCL_DETAIL),
    "nccl_warn_cuda": (BUILD, GPU, NCCL_DETAIL),
    "nccl_warn_ras": (PEER_DIED, OWN_OUTPUT),
    "nccl_error": (NCCL_SILENT, NETWORK, P2P),
    "nccl_error_return": (NCCL_SILENT, NETWORK, P2P),
    "nccl_cuda_error": (NCCL_SILENT, BUILD, GPU),
    "unhandled_system_error": (NCCL_SILENT, SYSCALL, NETWORK),
    "worker_died": (PEER_DIED, OWN_OUTPUT),
    "shutdown_crash": (TEARDOWN, OWN_OUTPUT),
    "no_progress": (HUNG, NETWORK, GPU),
    "launcher_stopped": (STOPPED, SKIPPED, NETWORK, P2P),
    "wrong_results": (NCCL_VERSION_BUG, GPU),
    "stopped_from_outside": (SCHEDULER, STOPPED, SKIPPED),
    "interrupted": (STOPPED, SKIPPED, NETWORK, P2P),
}
MAX_SUSPECTS = 4


def suspects(kinds: list, table: Optional[dict] = None) -> list:
    """The suspects of the evidence kinds seen (in the order the evidence is ranked), each once, at most
    MAX_SUSPECTS; a generic pair when no kind is known."""
    out: list = []
    for k in kinds:
        for s in (BY_EVIDENCE if table is None else table).get(k, ()):
            if s not in out:
                out.append(s)
    return (out or [OWN_OUTPUT, NCCL_SILENT])[:MAX_SUSPECTS]
