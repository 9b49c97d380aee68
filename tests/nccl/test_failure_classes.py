# ruff: noqa: E501  (each line stays one line, as the program prints it)
"""Every class of the failure table on lines in its program's own format (issue 61): NCCL's WARN format strings of
the version named (NVIDIA/nccl src/, with its header of that version), torch's and gloo's messages, CUDA's error
strings, the launchers' and schedulers' reports. Each line is classified as its class and role; the routine lines
healthy jobs print are never a failure; every class of the table has a line here."""

from __future__ import annotations

import pytest

from ncclcheck.nccl import failures

H = "gpu-node-07:41207:41388 [3]"  # NCCL's header: host:pid:tid [cudaDev]
CASES = {
    # NCCL (src/ of the versions named)
    "address_in_use": [f"{H} misc/socket.cc:431 NCCL WARN Call to bind failed : Address already in use",  # 2.4-2.22
                       "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."],
    "bootstrap_truncated": [f"{H} bootstrap.cc:94 NCCL WARN Message truncated : received 1024 bytes instead of 256",
                            f"[2025-02-03 10:00:00] {H} bootstrap.cc:302 NCCL WARN Bootstrap Root : mismatch in rank count from procs 8 : 16"],
    "collective_mismatch": [f"{H} transport/net_socket.cc:570 NCCL WARN NET/Socket : peer 198.18.0.2<43566> message truncated : receiving 1048576 bytes instead of 65536. If you believe your socket network is in healthy state, there may be a mismatch in collective sizes",
                            f"{H} transport/net_ib.cc:1047 NCCL WARN NET/IB : req 1/1 tag 7 peer 198.18.0.2<40145> collective mismatch error, local size 4194304 remote size 2097152",
                            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 8000 vs 4000 Received data size doesn't match expected size",
                            "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=3, OpType=ALLGATHER)."],
    "comm_aborted": ["[rank3]:[E1120 10:11:02.123456789 ProcessGroupNCCL.cpp:1180] NCCL communicator was aborted on rank 3."],
    "connection_refused": [f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 198.18.0.9<45321> failed : Connection refused",
                           f"{H} misc/socket.cc:640 NCCL WARN socketPollConnect: connect to 198.18.0.9<45321> returned Connection refused, exceeded error retry count after 35 attempts"],
    "cuda_arch": ["RuntimeError: CUDA error: no kernel image is available for execution on the device"],
    "cuda_driver": [f"{H} init.cc:1640 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
                    "RuntimeError: The NVIDIA driver on your system is too old (found version 11040)."],
    "cuda_fault": [f"{H} enqueue.cc:1556 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
                   "RuntimeError: CUDA error: uncorrectable ECC error encountered"],
    "cuda_oom": [f"{H} include/alloc.h:125 NCCL WARN Cuda failure 'out of memory'",
                 f"{H} include/alloc.h:131 NCCL WARN Failed to CUDA calloc 10485760 bytes",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.02 GiB is free.",
                 "Cuda failure common.cu:892 'out of memory'"],  # nccl-tests' own report
    "dataloader_worker": ["RuntimeError: Caught RuntimeError in DataLoader worker process 0."],
    "tcpstore_no_libuv": ["RuntimeError: use_libuv was requested but PyTorch was build without libuv support"],
    "native_abort": ["free(): corrupted unsorted chunks", "double free or corruption (out)",
                     "[gpu-07:186363] Signal: Aborted (6)", "malloc(): corrupted top size"],
    "backend_unavailable": ["RuntimeError: Distributed package doesn't have NCCL built in",
                            "RuntimeError: Distributed package doesn't have MPI built in. MPI is only included if you build PyTorch from source on a host that has MPI installed."],
    "ddp_unused_parameters": ["RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss."],
    "device_assert": ["RuntimeError: CUDA error: device-side assert triggered",
                      "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:111: operator(): block: [0,0,0], thread: [0,0,0] Assertion `index < sizes[i]` failed."],
    "dmabuf": [f"{H} misc/ibvwrap.cc:226 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported"],
    "duplicate_gpu": [f"{H} init.cc:904 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000",
                      f"[2025-11-02 10:00:00] {H} init.cc:1012 (ncclCommInitRankFunc) NCCL WARN Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration."],
    "efa_ofi": [f"{H} nccl_net_ofi_rdma_init:7012 NCCL WARN NET/OFI Unable to find a protocol that worked.  Failing initialization.",
                f"{H} nccl_net_ofi_create_plugin:1123 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available"],
    "fabric_not_ready": ["RuntimeError: CUDA error: system not yet initialized"],
    "gdr": [f"{H} misc/ibvwrap.cc:205 NCCL WARN Call to ibv_reg_mr failed with error Bad address"],
    "gloo_no_interface": ["RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: ib0"],
    "gloo_timeout": ["RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete"],
    "gpu_busy": ["RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"],
    "host_memory": [f"{H} include/alloc.h:39 NCCL WARN Failed to malloc 1073741824 bytes"],
    "ib_async_event": [f"{H} transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : port error",
                       f"{H} transport/net_ib/common.cc:92 NCCL WARN NET/IB : mlx5_2:1 async fatal event on QP (0x55d0c8a0): local work queue catastrophic error"],
    "ib_completion_error": [f"{H} transport/net_ib.cc:837 NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",  # 2.4-2.9
                            f"{H} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 198.18.0.5<51121> with error 12, opcode 32753, len 0, vendor err 129",  # 2.10-2.17
                            f"{H} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 198.18.0.5<57888> with status=12 opcode=1 len=0 vendor err 129 (Send)",  # 2.20-2.21
                            f"[2025-09-01 10:00:00] {H} transport/net_ib/p2p.cc:412 NCCL WARN NET/IB: Got completion from peer 198.18.0.5<57888> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129 req_type=Send hca mlx5_1"],  # 2.28
    "ib_device": [f"{H} transport/net_ib.cc:173 NCCL WARN NET/IB : Unable to open device mlx5_2"],
    "ib_flush": [f"{H} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 198.18.0.5<57888> with status=5 opcode=1 len=0 vendor err 249 (Recv)"],
    "ib_gid": [f"{H} misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument errno 22",
               f"[2025-07-01 10:00:00] {H} misc/ibvwrap.cc:310 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR"],
    "ib_registration": [f"{H} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 198.18.0.5<51121> with error 4, opcode 32564, len 32564, vendor err 81 (Send)"],
    "init_timeout": ["torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.",
                     "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to (node-a, 29500).",
                     "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"],
    "interrupted": ["KeyboardInterrupt"],
    "invalid_device": [f"{H} init.cc:1170 NCCL WARN Cuda failure 'invalid device ordinal'",
                       "RuntimeError: CUDA error: invalid device ordinal"],
    "killed": ["torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 24517) of binary: /usr/bin/python3",
               "[2024-05-02 10:00:00,000] [INFO] [launch.py:319:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', '--local_rank=7'] exits with return code = -9",
               "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with <Signals.SIGKILL: 9>.",
               "RuntimeError: DataLoader worker (pid 31337) is killed by signal: Killed."],
    "launcher_stopped": ["W1123 10:11:17.436000 11237 torch/distributed/elastic/agent/server/api.py:727] Sending process 11301 closing signal SIGTERM",
                         "0: slurmstepd: error: *** STEP 48213.0 ON gpu-node-01 CANCELLED AT 2024-06-05T18:22:09 ***"],
    # the signal torchrun's agent itself got says who stopped the job: a closed terminal, a scheduler or an operator
    "stopped_from_outside": ["W1123 10:11:17.436000 11237 torch/distributed/elastic/agent/server/api.py:739] Received 15 death signal, shutting down workers",
                             "torch.distributed.elastic.multiprocessing.api.SignalException: Process 11237 got signal: 15"],
    "hangup": ["torch.distributed.elastic.multiprocessing.api.SignalException: Process 11237 got signal: 1",
               "W1123 10:11:17.436000 11237 torch/distributed/elastic/agent/server/api.py:739] Received Signals.SIGHUP death signal, shutting down workers"],
    "memlock": [f"{H} misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory",
                f"{H} misc/ibvwrap.cc:215 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"],
    "mnnvl": [f"{H} init.cc:580 NCCL WARN MNNVL (cliqueSize 18) is available but not working on this system. Check the IMEX configuration (nvidia-imex-ctl -N). Set NCCL_MNNVL_ENABLE=0 to disable MNNVL."],
    "name_not_resolved": ["socket.gaierror: [Errno -2] Name or service not known",
                          "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (node-z, 29500). The client socket has failed to connect to node-z:29500 (errno: -3 - Temporary failure in name resolution)."],
    "nccl_config": [f"{H} enqueue.cc:1480 NCCL WARN Error : no algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to Tree."],
    "nccl_cuda_error": ["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"],
    "nccl_error": ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, internal error - please report this issue to the NCCL developers, NCCL version 2.20.5",
                   "gpu-node-03: Test NCCL failure common.cu:1012 'internal error - please report this issue to the NCCL developers / '"],
    "nccl_usage": [f"{H} enqueue.cc:1925 NCCL WARN AllReduce : sendbuff allocated on device 1 mismatchs with NCCL device 0"],
    "nccl_warn": [f"{H} collectives.cc:12 NCCL WARN Something no row and no subsystem knows"],
    # a WARN no row knows is placed by the NCCL source file it was printed in (nccl/subsystems.py)
    "nccl_warn_topology": [f"{H} graph/search.cc:1132 NCCL WARN Could not find a path for pattern 4, falling back to simple order"],
    "wrong_results": ["# Out of bounds values : 2 FAILED", " Out of bounds values : 16 FAILED"],
    "sysfs_pci_path": [f"{H} graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:01/../../0000:01:00.0"],
    "nccl_topology_device": [f"{H} graph/topo.h:230 NCCL WARN Could not find NET with id 0",
                             "graph/topo.h:230 NCCL WARN Could not find GPU with id 1b000"],  # a paste without its header
    "topology_xml": [f"{H} graph/xml.h:85 NCCL WARN Attribute arch of node cpu not found"],
    "nccl_warn_socket": [f"{H} bootstrap.cc:120 NCCL WARN Bootstrap state unexpected for peer 4"],
    "net_plugin": [f"[2025-01-10 10:00:00] {H} plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin",
                   f"{H} init.cc:1130 NCCL WARN Error: network IB not found."],
    "never_entered": ["RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier in 30000 ms"],
    "no_route": [f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 198.18.0.9<45321> failed : No route to host",
                 f"{H} include/socket.h:390 NCCL WARN Connect to 198.18.0.9<34567> failed : Connection timed out",  # 2.4-2.9
                 "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] Connect timeout [none]"],
    "no_socket_interface": [f"{H} bootstrap.cc:64 NCCL WARN Bootstrap : no socket interface found",
                            f"{H} misc/socket.cc:47 NCCL WARN ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)"],  # 2.27
    "node_failure": ["srun: error: Node failure on gpu-node-03"],
    "nvls": [f"[2025-04-06 22:31:56] {H} transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
             f"[2026-01-02 10:00:00] {H} transport/nvls.cc:620 (nvlsBindMem) NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of size 1073741824 : CUDA error 801 'operation not supported'."],
    "nvml": [f"{H} misc/nvmlwrap.cc:181 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Unknown Error"],
    "no_host_address": ["[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:255.255.0.0]:29500 (errno: 110 - Connection timed out).",
                        "[W1126 21:59:22.967358162 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host 255.255.255.0:29500 - retrying (try=0, timeout=20000ms, delay=13111ms): The client socket has timed out after 20000ms",
                        f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 239.1.2.3<45321> failed : Network is unreachable"],
    "no_space": ["OSError: [Errno 28] No space left on device",
                 "RuntimeError: [enforce fail at inline_container.cc:783] . PytorchStreamWriter failed writing file data/12: file write failed, errno 28 (No space left on device)"],
    "oom_killed": ["slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
                   "slurmstepd: error: Detected 1 oom_kill event in StepId=48213.0. Some of the step tasks have been OOM Killed.",
                   "Apr  2 10:21:54 gpu-node-02 kernel: Out of memory: Killed process 51232 (python) total-vm:183261180kB, anon-rss:126101412kB",
                   "(raylet) node_manager.cc:3007: 3 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 0a1b2c, IP: 198.18.0.7) over the last time period.",
                   "Message:          The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi. Container trainer was using 61Gi, which exceeds its request of 0."],
    "p2p_unsupported": [f"{H} transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
                        f"{H} transport/p2p.cc:191 NCCL WARN failed to open CUDA IPC handle : 201 invalid device context"],
    "peer_closed": [f"{H} misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-node-08<50412>",
                    f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 198.18.0.9<47527> failed : Software caused connection abort",
                    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [198.18.0.2]:23456"],
    "proxy_failed": [f"{H} proxy.cc:1452 NCCL WARN [Proxy Service 3] Failed to execute operation Connect from rank 3, retcode 3",
                     # EAGAIN's words at teardown: NCCL's service thread, not a thread limit
                     f"{H} misc/socket.cc:730 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"],
    "rank_failed": ["ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4100) of binary: /usr/bin/python3",
                    "ray.train.base_trainer.TrainingFailedError: The Ray Train run failed."],
    "scheduler_cancelled": ["slurmstepd: error: *** STEP 4242.0 ON node07 CANCELLED AT 2026-11-23T10:00:00 DUE TO TIME LIMIT ***",
                            "slurmstepd: error: *** JOB 4242 ON node07 CANCELLED AT 2026-11-23T10:00:00 ***"],
    "segfault": ["Segmentation fault (core dumped)", "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) local_rank: 2 (pid: 812) of binary: /usr/bin/python3"],
    "shm_exhausted": [f"{H} misc/shmutils.cc:85 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-AbC (size 9637888)",  # 2.12-2.15
                      f"{H} misc/shmutils.cc:59 NCCL WARN Error: failed to extend /dev/shm/nccl-AbC to 9637888 bytes, error: No space left on device (28)",  # 2.22+
                      f"{H} include/shm.h:48 NCCL WARN Call to posix_fallocate failed : No space left on device",  # 2.4-2.11
                      "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."],
    "shm_permission": [f"{H} include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied"],  # 2.4-2.11
    "shm_not_shared": [f"{H} misc/shmutils.cc:85 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-AbC (size 9637888), error: No such file or directory (2)",
                       # placed by its file: shmutils' open of a segment that is not there
                       f"{H} misc/shmutils.cc:93 NCCL WARN Call to open failed : No such file or directory"],
    "shutdown_crash": ["terminate called without an active exception"],
    "socket_family": [f"{H} include/socket.h:311 NCCL WARN Socket creation failed : Address family not supported by protocol"],
    "thread_limit": [f"{H} proxy.cc:1590 NCCL WARN Call to pthread_create failed: Resource temporarily unavailable"],
    "too_many_files": [f"{H} misc/socket.cc:590 NCCL WARN [Service thread] Accept failed Too many open files",
                       "RuntimeError: received 0 items of ancdata"],
    "transport_mismatch": [f"{H} misc/socket.cc:436 NCCL WARN socketFinalizeAccept: wrong type 3 != 4"],
    "unhandled_system_error": ["torch.distributed.DistBackendError: NCCL error in: ../init.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"],
    "version_mismatch": [f"{H} init.cc:896 NCCL WARN Mismatched NCCL version detected : rank 4 version 22304 rank 0 version 22602"],
    "watchdog_stuck": ["[rank0]:[E1120 10:11:02.123456789 ProcessGroupNCCL.cpp:1484] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives."],
    "watchdog_timeout": ["[E ProcessGroupNCCL.cpp:828] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800123 milliseconds before timing out.",  # 2.0
                         "[rank3]:[E1120 10:01:02.123456789 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog at work sequence id: 1204 PG status: last enqueued work: 1206, last completed work: 1203"],  # 2.6+
    "worker_died": ["(raylet, ip=198.18.24.32) A worker died or was killed while executing a task by an unexpected system error. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."],
}
ROUTINE = [  # printed by healthy jobs: never a failure
    f"{H} misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",  # WARN in 2.4-2.10
    f"{H} NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory",
    f"{H} NCCL INFO Could not get speed from /sys/class/net/eth0/speed. Defaulting to 10 Gbps.",
    "[W1126 21:53:15.022226729 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved. err=-3",
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 111 - Connection refused).",
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [198.18.0.1]:29500 (errno: 111 - Connection refused).",
    "[W1008 23:40:22.836678340 socket.cpp:767] [c10d] The client socket has failed to connect to [::ffff:198.18.0.1]:29500 (errno: 110 - Connection timed out).",
    "[I1126 21:57:05.377244552 socket.cpp:931] [c10d - trace] The server socket on [::1]:5251 is not yet listening (errno: 111 - Connection refused), will retry.",
    "[W1126 21:59:22.967358162 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host h1:29500 - retrying (try=0, timeout=20000ms, delay=13111ms): The client socket has timed out after 20000ms",
    "[W socket.cpp:436] [c10d] The server socket cannot be initialized on [::]:29500 (errno: 97 - Address family not supported by protocol).",
    "Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE instead",
    "[rank0]:[W1123 07:33:20.000000000 ProcessGroupNCCL.cpp:1496] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.",
]


@pytest.mark.parametrize("cls, line", [(c, ln) for c, lines in CASES.items() for ln in lines])
def test_each_line_is_read_as_its_class(cls, line):
    got = failures.classify(line)
    assert got is not None and got.id == cls, (got and got.id, line)
    assert got.cause is failures.BY_ID[cls].cause and got.what and got.fix


@pytest.mark.parametrize("line", ROUTINE)
def test_what_healthy_jobs_print_is_never_a_failure(line):
    assert failures.classify(line) is None


def test_every_class_of_the_table_has_its_line():
    assert {c.id for c in failures.TABLE} <= set(CASES), sorted({c.id for c in failures.TABLE} - set(CASES))
