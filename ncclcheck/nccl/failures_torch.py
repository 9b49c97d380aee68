"""torch.distributed's, gloo's and CUDA's failure messages as rows of the failure table (nccl/failclass.py), from their
own source: ProcessGroupNCCL's watchdog and wrapper (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, NCCLUtils),
c10d's store and sockets (TCPStore*.cpp, socket.cpp), elastic's rendezvous, gloo's transport (gloo/transport/tcp/),
the CUDA runtime's error strings (cudaGetErrorString, as NCCL's "Cuda failure '%s'" and torch's "CUDA error: %s" quote
them), torch's allocator and DataLoader. Routine lines torch prints in healthy jobs are listed last.

A CUDA error is read by its string first (level SPECIFIC): out of memory, a driver older than the runtime, a device
assert, an invalid ordinal, a fabric not ready are each their own cause; the rest of the family is a fault of the GPU.
"""

from __future__ import annotations

from .failclass import CONSEQUENCE, GENERIC, SPECIFIC, cause, consequence, num, rx
from .linear import Either, Then

# NCCL's "Cuda failure '%s'" / "Cuda failure %d '%s'", nccl-tests' "Cuda failure common.cu:892 '%s'", torch's
# (no run of word characters after "cudaError": a Then's first part must end where its leftmost match ends)
_CUDA = r"(?:Cuda failure (?:\d{1,4} |[\w./-]{1,64}:\d{1,6} )?'|CUDA error: |cudaError|CUDA driver error: )"

# An IPv4 address no host has: multicast (224-239), reserved and broadcast (240-255; a netmask such as 255.255.0.0
# given as the master's address lands here), plain or IPv4-mapped ("[::ffff:255.255.0.0]"). 0.0.0.0 is not among them:
# Linux connects it to the host itself, which works on one node.
NO_HOST = r"(?:::ffff:)?2(?:2[4-9]|[3-5]\d)\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\d.])"

ROWS = (
    cause("cuda_oom", Either(rx(r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|cudaErrorMemoryAllocation|"
                                r"Failed to CUDA calloc|cudaMalloc failed|CUBLAS_STATUS_ALLOC_FAILED"),
                             Then(_CUDA, r"out of memory")),
          "the GPU ran out of memory on that rank",
          "lower that rank's memory: a smaller batch or sequence, activation checkpointing, sharding (FSDP/ZeRO); "
          "check for another process on the same GPU (`nvidia-smi`), and that each rank uses its own GPU "
          "(LOCAL_RANK); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps fragmentation", level=SPECIFIC,
          source="c10/cuda/CUDACachingAllocator.cpp; NCCL's CUDA calls"),
    cause("cuda_driver", Either(rx(r"CUDA driver version is insufficient for CUDA runtime version|"
                                   r"forward compatibility was attempted on non supported HW|"
                                   r"system has unsupported display driver / cuda driver combination|"
                                   r"cudaErrorInsufficientDriver|The NVIDIA driver on your system is too old|"
                                   r"API call is not supported in the installed CUDA driver"),
                                Then(_CUDA, r"driver version is insufficient")),
          "the NVIDIA driver is older than the CUDA runtime the job was built with (or the two do not match)",
          "install a driver that supports the job's CUDA version (`nvidia-smi` shows the driver's highest CUDA), or "
          "use a torch/CUDA build the driver supports; in a container, the host's driver is the one that counts",
          level=SPECIFIC, source="CUDA runtime error strings (cudaErrorInsufficientDriver, 35)"),
    cause("device_assert", rx(r"device-side assert triggered|Assertion `[^`]{0,200}` failed|cudaErrorAssert"),
          "a device-side assert fired in a kernel of that rank (an index out of range, a label out of bounds: a bug "
          "of the job's code or data, not of the GPU)",
          "rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel and the line; check the labels or indices the assert "
          "names against their range", level=SPECIFIC, source="CUDA runtime (cudaErrorAssert, 710)"),
    cause("invalid_device", Either(rx(r"invalid device ordinal|cudaErrorInvalidDevice\b"),
                                   Then(_CUDA, r"invalid device ordinal")),
          "a rank asked for a GPU that does not exist on its node (more ranks than GPUs, or a device index past "
          "CUDA_VISIBLE_DEVICES)",
          "match --nproc-per-node to the GPUs of each node (`nvidia-smi -L`), select the device by LOCAL_RANK, and "
          "check CUDA_VISIBLE_DEVICES", level=SPECIFIC, source="CUDA runtime (cudaErrorInvalidDevice, 101)"),
    cause("fabric_not_ready", rx(r"system not yet initialized|cudaErrorSystemNotReady|CUDA error " + num("802")),
          "the GPUs' NVSwitch fabric was not ready (CUDA error 802: the fabric manager is not running or has not "
          "finished on an NVSwitch node)",
          "start and check the fabric manager (`systemctl status nvidia-fabricmanager`, `nvidia-smi -q` Fabric "
          "state: Completed), then relaunch; `ncclcheck health` checks it", level=SPECIFIC,
          source="CUDA runtime (cudaErrorSystemNotReady, 802)"),
    cause("gpu_busy", rx(r"CUDA-capable device\(s\) is/are busy or unavailable|cudaErrorDevicesUnavailable"),
          "the GPU was busy or unavailable to that rank (exclusive-process compute mode with another process on it, "
          "or a GPU in a bad state)",
          "check `nvidia-smi` on that host for other processes and the compute mode; a GPU in a bad state needs a "
          "reset", level=SPECIFIC, source="CUDA runtime (cudaErrorDevicesUnavailable, 46)"),
    cause("cuda_arch", rx(r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice"),
          "the job's CUDA code was not built for this GPU's architecture",
          "install a torch (and extensions) built for this GPU's compute capability (`torch.cuda.get_arch_list()` "
          "against `nvidia-smi --query-gpu=compute_cap --format=csv`)", level=SPECIFIC,
          source="CUDA runtime (cudaErrorNoKernelImageForDevice, 209)"),
    cause("cuda_fault", Either(rx(r"an illegal memory access was encountered|unspecified launch failure|"
                                  r"uncorrectable ECC error encountered|GPU has fallen off the bus|"
                                  r"an illegal instruction was encountered|misaligned address|"
                                  r"cudaErrorIllegalAddress|cudaErrorLaunchFailure|cudaErrorECCUncorrectable|"
                                  r"device-side error|CUDA error: unknown error|"
                                  r"\bXid\b.{0,20}\b(?:48|63|64|74|79|92|94|95)\b"),
                               Then(_CUDA, r"'")),
          "a CUDA error on the rank's own GPU (a kernel fault, an ECC error, or a GPU in a bad state)",
          "read the error string: an illegal access is usually a bug of a kernel (rerun with CUDA_LAUNCH_BLOCKING=1 to "
          "name it); an ECC error, Xid 48/79/94 or a GPU fallen off the bus is the hardware: `nvidia-smi -q`, "
          "`dmesg -T | grep -i xid` on its host, and drain the node (`ncclcheck health`)",
          source="CUDA runtime error strings; NCCL's CUDACHECK"),
    # c10d's own failures (never the routine poll and retry warnings, ROUTINE below)
    cause("address_in_use", rx(r"Address already in use|errno: " + num("98") + r"|EADDRINUSE"),
          "the master port was already taken on the master's host (another job, or a process of an earlier run "
          "still alive)",
          "pick a free MASTER_PORT (or `--rdzv-endpoint host:0`), or stop what holds the port (`ss -ltnp | grep "
          "PORT` on that host)", level=SPECIFIC, source="torch/csrc/distributed/c10d/socket.cpp"),
    cause("name_not_resolved", rx(r"Name or service not known|Temporary failure in name resolution|"
                                  r"nodename nor servname provided|No address associated with hostname|"
                                  r"gaierror|getaddrinfo (?:failed|error)|failed to resolve|Unknown host|"
                                  r"Could not resolve host"),
          "a host name could not be resolved (a wrong MASTER_ADDR, or a node whose name DNS or /etc/hosts does not "
          "know)",
          "give an address or a name every node resolves (`getent hosts NAME` on each node); with torchrun's c10d "
          "rendezvous the master's `hostname --fqdn` must resolve on the others", level=SPECIFIC,
          source="torch/csrc/distributed/c10d/socket.cpp; Python socket.gaierror"),
    # gloo's device.cc: "Unable to find address for: %s" (GLOO_SOCKET_IFNAME names no interface with an address here,
    # or holds NCCL's "^" / prefix syntax, which gloo does not read)
    cause("gloo_no_interface", rx(r"Unable to find (?:address|interface) for:? \S{0,64}|"
                                  r"GLOO_SOCKET_IFNAME .{0,40}(?:not found|does not exist)"),
          "gloo was told to use a network interface that does not exist here (GLOO_SOCKET_IFNAME takes exact names, "
          "not NCCL's ^ or prefix forms)",
          "set GLOO_SOCKET_IFNAME to the exact name of an interface that is up on every node (`ip -br addr`; "
          "`ncclcheck recommend --format env` names it), or unset it", level=SPECIFIC,
          source="gloo/transport/tcp/device.cc"),
    cause("collective_mismatch", rx(r"Received data size doesn't match expected size|collective mismatch|"
                                    r"Mismatched collective detected|"
                                    r"message truncated\s*:\s*receiving \d{1,12} bytes|"
                                    r"Detected mismatch between collectives|DDP expects same model across all ranks|"
                                    r"ranks? \d{1,7} .{0,40}different (?:collective|op)"),
          "ranks called different collectives, or the same one with different sizes",
          "make every rank of the group call the same collectives in the same order with the same shapes (a "
          "rank-dependent branch, an uneven last batch, a skipped step); TORCH_DISTRIBUTED_DEBUG=DETAIL checks each "
          "call", source="gloo/transport/tcp/pair.cc; torch c10d ProcessGroupWrapper",
          # ProcessGroupWrapper: "Rank %d is running collective: %s, but Rank %d is running collective: %s"
          # NCCL 2.4-2.6 init.cc: "Mismatched collective detected, please check your collective calls at and around
          # rank %d"
          names_ranks=rx(r"Rank (\d{1,7}) is running collective: [^\n]{0,3000}?Rank (\d{1,7}) is running|"
                         r"at and around rank (\d{1,7})")),
    # torch's monitored barrier names who never came ("Rank %d failed to pass monitoredBarrier in %d ms")
    cause("never_entered", rx(r"failed to pass monitoredBarrier|Ranks? [\d, ]{1,200} failed to pass"),
          "a rank never reached the barrier the others waited in (torch's monitored barrier names it)",
          "find why that rank stopped before the barrier (its own log: a rank-dependent branch, an exception caught, a "
          "data loader that ran out first); on a live hang `py-spy dump --pid` of it shows where it is",
          about=rx(r"Ranks? ([\d]{1,7}) failed to pass"), source="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp"),
    # the DataLoader re-raising a worker's error ("Caught %s in DataLoader worker process %d."): the worker's own
    # error is the traceback it quotes below
    consequence("dataloader_worker", rx(r"Caught \w{1,64} in DataLoader worker process"),
                "the DataLoader re-raised an error of one of its workers (the worker's own error follows it)",
                "read the worker's error in the \"Original Traceback\" below this line", level=SPECIFIC,
                source="torch/utils/data/_utils/worker.py"),
    # init_process_group's backend check (distributed_c10d.py: "Distributed package doesn't have NCCL built in", and
    # MPI, Gloo, UCC, XCCL): torch's Windows and macOS wheels and the CPU-only ones have no NCCL
    cause("backend_unavailable", rx(r"Distributed package doesn't have \w{2,8} built in"),
          "this build of torch has no such distributed backend (NCCL is not in torch's Windows, macOS or CPU-only "
          "builds; MPI only in builds from source against an MPI)",
          "use backend=\"gloo\" where NCCL is not built in, or install a CUDA build of torch on Linux (`python -c "
          "\"import torch.distributed as d; print(d.is_nccl_available())\"` says which you have)", level=SPECIFIC,
          source="torch/distributed/distributed_c10d.py"),
    # TCPStore's constructor (torch/csrc/distributed/c10d/TCPStore.cpp, torch 2.4+ asks for libuv by default):
    # TORCH_CHECK(..., "use_libuv was requested but PyTorch was build without libuv support"): Windows wheels lack it
    cause("tcpstore_no_libuv", rx(r"use_libuv was requested but PyTorch was build without libuv"),
          "the rendezvous store asked for its libuv backend, which this build of torch lacks (torch's Windows wheels "
          "are built without libuv; torch 2.4+ asks for it by default)",
          "set USE_LIBUV=0 in the environment of the launcher and every rank (or add ?use_libuv=0 to an init URL "
          "of tcp://), so TCPStore uses its socket backend", level=SPECIFIC,
          source="torch/csrc/distributed/c10d/TCPStore.cpp"),
    cause("ddp_unused_parameters", rx(r"Expected to have finished reduction in the prior iteration|"
                                      r"find_unused_parameters=True"),
          "DDP found parameters that received no gradient in a step (a part of the model the forward pass skipped)",
          "pass find_unused_parameters=True to DistributedDataParallel, or make every rank use every parameter each "
          "step (TORCH_DISTRIBUTED_DEBUG=INFO names the parameters)", source="torch/csrc/distributed/c10d/reducer.cpp"),
    # TCPStore's failures as torch raises them, elastic's rendezvous, NCCL's bootstrap timing out
    cause("init_timeout", Either(rx(r"Socket Timeout|DistStoreError|wait timeout after \d{1,12}\s*ms|"
                                    r"client socket has timed out after|RendezvousTimeoutError|"
                                    r"Timed out initializing process group|store based barrier"),
                                 Then(r"Timed out (?:after|waiting) ", r"clients|workers|store|rendezvous|join"),
                                 Then(r"bootstrap", r"time(?:d)? ?out")),
          "the ranks did not all join in time (a rank never started, or could not reach the others)",
          "find the rank that never joined (launcher output, `ncclcheck preflight` on the same nodes); check the "
          "master address, port and firewall", source="c10d TCPStore.cpp, socket.cpp; elastic rendezvous"),
    # a connect to an address no host can have, which c10d retries until its timeout: the address given is wrong
    cause("no_host_address", rx(r"(?:connect to \[|connect/validate to host |Connect to )" + NO_HOST),
          "a rank tried to reach the master (or a peer) at an address no host has (a netmask, a broadcast, multicast "
          "or reserved address): the address it was given is wrong",
          "set MASTER_ADDR (torchrun --master-addr, --rdzv-endpoint) to an address of the master node the others "
          "reach (`hostname -I` on it); `ncclcheck preflight` checks that every node reaches it", level=SPECIFIC,
          source="torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp; NCCL src/misc/socket.cc"),
    cause("connection_refused", rx(r"Connection refused|errno: " + num("111") + r"|ECONNREFUSED"),
          "a connection was refused: nothing listened at the address (wrong address or port, a firewall, or the peer "
          "had not started or had died)",
          "check MASTER_ADDR/MASTER_PORT and the firewall between the nodes (`ncclcheck preflight` probes them); if "
          "the peer died, its own log says why", source="c10d socket.cpp; NCCL src/misc/socket.cc; gloo"),
    cause("no_route", rx(r"No route to host|Network is unreachable|errno: " + num("113") + r"|"
                         r"Connect to \S{1,128} (?:failed\s*:|returned)\s*Connection timed out|"
                         r"connect failed\s*:\s*Connection timed out|"
                         r"connect\(\) .{0,80}(?:timed out|Connection timed out)|Connect timeout \["),
          "a peer's address cannot be reached from this host (a firewall dropping packets, or NCCL using an "
          "interface whose network does not reach the peer)",
          "pin NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the interface every node routes over (`ncclcheck recommend`); "
          "`ncclcheck preflight` probes every pair on every interface (net.peer_reachability)",
          source="NCCL src/misc/socket.cc; c10d socket.cpp"),
    # the watchdog's lines over torch 1.13-2.15: where a rank stands ("Timeout at NCCL work: %d, last enqueued ..."
    # 2.3-2.5, "Exception (either an error or timeout) detected by watchdog at work: %d, ..." 2.4-2.5, " failure
    # detected by watchdog at work sequence id: %d PG status: ..." 2.6+), the dump signals, the teardown
    consequence("watchdog_timeout", rx(r"Watchdog caught collective operation timeout|Timeout at NCCL work: \d|"
                                       r"WorkNCCL\(SeqNum=\d|Some NCCL operations have failed or timed out|"
                                       r"To avoid data inconsistency, we are taking the entire process down|"
                                       r"Exception raised from ncclCommWatchdog|Heartbeat monitor timed out|"
                                       r"Received a (?:global )?(?:timeout|dump signal)|"
                                       r"detected by watchdog at work|"
                                       r"watchdog thread terminated with exception|"
                                       r"Terminating the process after attempting to dump debug info|"
                                       r"Timeout waiting for the (?:first|last) collective"),
                "NCCL's watchdog timed out in a collective (a hang: a rank did not enter it, called another one, or "
                "it stalled inside)",
                "the flight-recorder dumps say which rank did not enter the collective or called another one "
                "(`ncclcheck diagnose` with the dumps); `ncclcheck recommend --postmortem DIR` arms the next run",
                source="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
                # ProcessGroupNCCL's "Received a dump signal due to a collective timeout from rank %d and we will try
                # our best to dump the debug info" (and "a global timeout from another rank"): this rank was told to
                # dump by another rank's watchdog, it did not time out itself
                variants=((rx(r"Received a (?:global )?(?:timeout|dump signal)"),
                           "received a dump signal: another rank's watchdog timed out and asked every rank for its "
                           "flight recorder (not a timeout of this rank's own)"),)),
    # the watchdog's own thread stuck in a CUDA or NCCL call (ProcessGroupNCCL: "watchdog got stuck for %d seconds
    # without making progress in monitoring enqueued collectives"): a call that does not return, usually the GPU's
    consequence("watchdog_stuck", rx(r"watchdog got stuck for \d{1,9} seconds|"
                                     r"Watchdog thread .{0,20}stuck"),
                "torch's watchdog thread itself was stuck in a CUDA or NCCL call (it did not return: usually the GPU "
                "or its driver, sometimes an NCCL call blocked on a peer)",
                "look at that host's GPUs: `nvidia-smi` (a GPU that does not answer), `dmesg -T | grep -i xid`; a "
                "`py-spy dump --native --pid` of the rank shows the call it is stuck in", level=SPECIFIC,
                source="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    # Python's own stop: the user (or a wrapper script) pressed Ctrl-C, most often on a job that made no progress
    consequence("interrupted", rx(r"KeyboardInterrupt"),
                "the job was interrupted by hand (Ctrl-C), most often because it made no progress",
                "if it hung: rerun it armed (`ncclcheck recommend --postmortem DIR --format env`) and run `ncclcheck "
                "watch` while it hangs", level=SPECIFIC, source="Python"),
    consequence("gloo_timeout", rx(r"Timed out waiting \d{1,12}\s*ms for (?:recv|send) operation"),
                "a gloo collective timed out waiting for a peer (a hang: a rank did not enter it or called another "
                "one)",
                "the flight-recorder dumps say which rank did not enter the collective or called another one "
                "(`ncclcheck diagnose` with the dumps); `ncclcheck recommend --postmortem DIR` arms the next run",
                source="gloo/transport"),
    # NCCL's result for a CUDA call that failed (ncclUnhandledCudaError: "unhandled cuda error"), as torch's wrapper or
    # nccl-tests report it: which call and which CUDA error is NCCL's own WARN ("Cuda failure '%s'")
    consequence("nccl_cuda_error", rx(r"unhandled cuda error|ncclUnhandledCudaError"),
                "NCCL reported a CUDA error; its own WARN line, which names the CUDA call and the error, is not in "
                "this text", "rerun with NCCL_DEBUG=WARN to see NCCL's 'Cuda failure' line",
                source="NCCL ncclGetErrorString(ncclUnhandledCudaError)"),
    # torch's wrapper of an NCCL error whose result no row above knows ("NCCL error in: <file>:<line>, <result>, NCCL
    # version <v>"; the result strings: ncclGetErrorString): it says NCCL failed, NCCL's WARN (absent here) says why
    # ... and nccl-tests' own reports of a call that failed ("Test NCCL failure common.cu:1012 '%s'", "NCCL failure
    # common.cu:874 '%s'", "Test failure common.cu:891"); other wrappers name the call and its result string (Horovod's
    # "ncclCommInitRank failed: invalid usage")
    consequence("nccl_error", Either(rx(r"\bNCCL error in: |ncclInternalError|ncclInvalidUsage|ncclInvalidArgument|"
                                        r"ncclSystemError|DistBackendError|"
                                        r"NCCL failure [\w./-]{1,64}:\d{1,6} '|Test (?:NCCL |CUDA )?failure [\w./-]"),
                                     Then(r"NCCL error", r"internal error|invalid usage|invalid argument"),
                                     # its start is the result's (a match starting at "nccl" would start inside
                                     # NCCL's own header); "invalid usage" is NCCL's string alone
                                     rx(r"invalid usage(?<= failed: invalid usage)")),
                "NCCL returned an error (its caller's report of it: torch's, Horovod's, nccl-tests'; NCCL's own WARN "
                "line, which says why, is not in this text)",
                "rerun with NCCL_DEBUG=WARN (or INFO) and NCCL_DEBUG_FILE=/tmp/nccl.%h.%p to keep NCCL's own line; "
                "`ncclcheck recommend --postmortem DIR --format env` sets it", level=GENERIC,
                source="torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK"),
)

# nccl-tests' own check of the results (common.cu: "# Out of bounds values : %d %s", FAILED when some were wrong): the
# collective returned wrong data; the line does not say why (an NCCL bug at that size or version, or corruption)
ROWS = ROWS + (
    consequence("wrong_results", rx(r"Out of bounds values : [1-9]\d{0,18} FAILED"),
                "nccl-tests found wrong values in a collective's results (its own check): the text does not say why",
                "rerun that size with a newer NCCL (a bug at a size or an algorithm is fixed by a release: try "
                "NCCL_ALGO=Ring / NCCL_PROTO=Simple to find which); then `ncclcheck health` for GPU memory (ECC, "
                "row remapping) and NVLink/PCIe errors on each host", source="nccl-tests src/common.cu"),
)

# What torch prints in healthy jobs that holds a failure's words: never a failure.
# - c10d's TCPStore client polls its socket with a short timeout and logs each poll that returned nothing
#   (socket.cpp, SocketImpl::waitForInput); a wait that really failed raises DistStoreError / "Socket Timeout" /
#   "wait timeout after", which the rows read. ncclcheck's guard waits on its store in 1 s polls.
# - socket.cpp's retries while the master is not up yet ("[W socket.cpp] [c10d] The client socket has failed to
#   connect to [host]:port (errno: 111 - Connection refused)."), and the IPv6 try on a host without it (errno 97).
# - deprecation notices ("Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE
#   instead"), the teardown notices of a process group not destroyed.
ROUTINE = (
    Then(r"\bwaitForInput: poll for socket ", r" returned 0, likely a timeout"),
    Then(r"\bwaitForInput: socket ", r" timed out after \d+\s*ms"),
    rx(r"Environment variable \w+ is deprecated; use \w+ instead|is deprecated(?:, |; )please use"),
    Then(r"\[W socket\.cpp", r"client socket has failed to connect to \[(?!" + NO_HOST + ")"),
    Then(r"socket\.cpp:\d{1,6}\] \[c10d\] The client socket has failed to connect to \[(?!" + NO_HOST + ")",
         r"errno"),
    rx(r"errno: " + num("97") + r" - Address family not supported by protocol"),
    # c10d's reverse lookup of a peer's address, a warning in healthy multi-host runs
    rx(r"hostname of the client socket cannot be retrieved"),
    # the store client's connect attempts it retries (socket.cpp's log line, TCPStore's "retrying (try=%d"): a worker
    # that started before its master; the failure, when the last try fails, is the exception raised after it
    rx(r"socket\.cpp:\d{1,6}\] \[c10d(?: - trace)?\] The (?:client socket has timed out|server socket on)|"
       r"is not yet listening"),
    Then(r"failed to connect/validate to host (?!" + NO_HOST + ")", r"- retrying \(try="),
    rx(r"process group has NOT been destroyed before|destroy_process_group\(\) was not called|"
       r"barrier\(\): using the device under current context|Guessing device ID based on global rank|"
       r"Setting OMP_NUM_THREADS environment variable"),
)

__all__ = ["ROWS", "ROUTINE", "CONSEQUENCE", "GENERIC"]
