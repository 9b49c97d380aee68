"""NCCL's own failure messages: its WARN format strings (NVIDIA/nccl, src/; the file of each is cited, v2.28.9 is what
torch 2.11-2.13 wheels ship, master 2.30; older wording is matched beside the newer), each a row of the failure table
(nccl/failclass.py says what a row is). Routine NCCL lines (printed where an optional part is absent, or before a retry
that succeeds) are listed last: never a failure.

Patterns run on a job's text: linear in the line (nccl/linear.py), each starting with a literal (the log reader reads
an NCCL INFO message alone when its header holds none of those starts).
"""

from __future__ import annotations

from .failclass import CAUSE, CONSEQUENCE, GENERIC, SPECIFIC, cause, consequence, num, rx
from .linear import Either, Then

_PREFLIGHT_NET = "`ncclcheck preflight` checks the interfaces, HCAs and limits NCCL needs"

ROWS = (
    cause("net_plugin", rx(r"Failed to initialize any NET plugin|Error: network \w{1,32} not found|"
                           r"NCCL_NET set by environment to \w{1,32} but no such network|"
                           r"Could not find NET with name"),
          "NCCL could not initialise any network plugin (NCCL_NET names a network this host does not have, such as "
          "NCCL_NET=IB without an active InfiniBand/RoCE port, or the plugin library failed)",
          "unset NCCL_NET (NCCL then picks IB when a port is ACTIVE, else sockets) or repair the IB stack: "
          "`ncclcheck preflight` lists the HCAs and their port states; check NCCL_NET_PLUGIN / libnccl-net.so when a "
          "plugin is meant to load", source="src/plugin/net.cc ncclNetInit; init.cc (<2.19)"),
    # graph/topo.cc (xml.cc before 2.x): "Could not find real path of %s" for a GPU's /sys/class/pci_bus path
    # (ncclSystemError: init stops); the IB plugin's own "Could not find real path of %s (%s)" is only a warning
    cause("sysfs_pci_path", rx(r"Could not find real path of /sys/class/pci_bus/"),
          "NCCL could not find the GPU's PCI device in sysfs (/sys/class/pci_bus): a VM, WSL2 or a container that "
          "does not show the host's PCI tree, so NCCL cannot build its topology",
          "run where /sys shows the GPU's PCI device (`ls -l /sys/class/pci_bus/`, `lspci | grep -i nvidia`); in a "
          "container, mount the host's /sys; under WSL2 or a VM without the PCI tree, NCCL's topology detection cannot "
          "work (give NCCL_TOPO_FILE a topology, or run on the host)", source="src/graph/topo.cc getPciPath"),
    # graph/topo.h ncclTopoIdToIndex: "Could not find %s with id %lx": the topology NCCL built lacks a device a later
    # step asked for (NCCL 2.25/2.26 with some NICs, fixed later; or a topology file that does not match the machine)
    cause("nccl_topology_device", rx(r"Could not find (?:NET|GPU|NIC|CPU|PCI|NVS) with id "),
          "NCCL's topology of this machine lacks a device a later step of its init asked for (an NCCL bug of some "
          "versions, or a topology file or net plugin that does not match the machine)",
          "update NCCL (the container's, or pip's nvidia-nccl-cu12); unset NCCL_TOPO_FILE, or check the net plugin "
          "(NCCL_NET_PLUGIN) matches this NCCL", source="src/graph/topo.h ncclTopoIdToIndex"),
    cause("ib_device", rx(r"NET/IB\w{0,8}\s*:\s*(?:Unable to (?:open|query) (?:device|port_num)|"
                          r"No IP interface found)|ibv_open_device failed|Call to ibv_open_device failed"),
          "NCCL could not open or query an InfiniBand/RoCE device (driver, permissions, or a device that vanished)",
          "check the HCA on that host (/sys/class/infiniband, `ibv_devinfo`, dmesg for mlx5 errors, /dev/infiniband "
          "permissions in a container); pin NCCL_IB_HCA to the ports `ncclcheck preflight` finds ACTIVE",
          source="src/transport/net_ib.cc ncclIbInit"),
    cause("version_mismatch", rx(r"Mismatched NCCL version detected|NCCL version mismatch with remote peer"),
          "the ranks run different NCCL versions",
          "install the same torch/NCCL build on every node (`ncclcheck preflight` compares versions across nodes: "
          "versions.consistent)", source="src/init.cc; src/ras/ras.cc",
          names_ranks=rx(r"detected : rank (\d{1,7}) version \d{1,9} rank (\d{1,7}) version")),
    # 2.27 prints a setting that matches no interface as an address of no family ("connecting to address  with
    # family 59936 is neither AF_INET(2) nor AF_INET6(10)"); with NCCL_COMM_ID, none in the root's subnet
    # a socket of the interface's family the host cannot make (an IPv6 address inside a container without IPv6):
    # "Socket creation failed : Address family not supported by protocol" (include/socket.h, 2.x)
    cause("socket_family", Then(r"Socket creation failed", r"Address family not supported"),
          "NCCL could not open a socket of the family of the interface it chose (an IPv6 address on a host or "
          "container without IPv6)",
          "pin NCCL_SOCKET_IFNAME to an interface with an IPv4 address every node shares (or NCCL_SOCKET_FAMILY="
          "AF_INET); `ncclcheck recommend --format env` names one", level=SPECIFIC, source="src/include/socket.h"),
    cause("no_socket_interface", rx(r"Bootstrap\s*:\s*no socket interface found|"
                                    r"NET/Socket\s*:\s*no (?:usable )?interface found|no socket interface found|"
                                    r"No usable listening interface found|is neither AF_INET\(|"
                                    r"No interface found in the same subnet as remote address|"
                                    r"Net : Unsupported address family type|unsupported IP family"),
          "NCCL found no usable socket interface (NCCL_SOCKET_IFNAME matches nothing on this host)",
          "set NCCL_SOCKET_IFNAME to an interface that is up on every node (`ncclcheck recommend --format env` names "
          "it); `ip -br addr` shows the names", source="src/bootstrap.cc; src/misc/socket.cc"),
    # 2.30 replaced it: "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 ..."
    cause("duplicate_gpu", rx(r"Duplicate GPU detected|Multiple Ranks are using the same GPU"),
          "two ranks use the same GPU",
          "select each rank's GPU by its LOCAL_RANK: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before "
          "init_process_group (not a fixed device such as set_device(0)), or give each rank its own "
          "CUDA_VISIBLE_DEVICES; check --nproc-per-node against the GPUs of the node",
          source="src/init.cc",
          names_ranks=rx(r"Duplicate GPU detected : rank (\d{1,7}) and rank (\d{1,7})")),
    # net_ib.cc's completion error, older "Got completion with error %d, opcode %d, len %d, vendor err %d", newer "Got
    # completion from peer %s with status=%d opcode=%d len=%d vendor err %d" (and "with error %d" in 2.12-2.18); the
    # plugins' copies print NET/IBext, NET/IBP. The status is ibv_wc_status: 12 retry exceeded, 13 RNR retry exceeded
    # (the link or the fabric lost packets), 4 local protection / 10 remote access / 11 remote operation (a buffer
    # registration: GPUDirect RDMA, the peer-memory module), 5 flushed (the queue pair was already in error: another
    # completion or a dead peer came first)
    consequence("ib_flush", Either(Then(r"NET/IB\w{0,8}\s*:\s*Got completion", r"(?:error|status=)\s*5\b"),
                                   rx(r"IBV_WC_WR_FLUSH_ERR|WR flushed")),
                "an InfiniBand/RoCE work request was flushed (status 5): its queue pair had already failed, an "
                "earlier completion error or a peer that died comes first",
                "find the first completion error or the peer that died (its own log); status 5 only follows one",
                level=SPECIFIC, source="src/transport/net_ib.cc"),
    cause("ib_registration", Either(Then(r"NET/IB\w{0,8}\s*:\s*Got completion", r"(?:error|status=)\s*(?:4|10|11)\b"),
                                    rx(r"IBV_WC_(?:LOC_PROT|REM_ACCESS|REM_OP)_ERR")),
          "an InfiniBand/RoCE transfer failed on its memory registration (status 4 local protection, 10 remote "
          "access): GPUDirect RDMA to GPU memory is broken on that path (nvidia-peermem / dma-buf, PCIe ACS, IOMMU)",
          "check GPUDirect RDMA on both hosts: `lsmod | grep nvidia_peermem` (or dma-buf support), ACS off on the "
          "PCIe switches between GPU and NIC, the IOMMU in passthrough; confirm with NCCL_NET_GDR_LEVEL=LOC (no "
          "GPUDirect): if that runs, GDR is the fault; `ncclcheck health` checks GPUDirect RDMA",
          level=SPECIFIC, source="src/transport/net_ib.cc"),
    cause("ib_completion_error", Either(Then(r"NET/IB\w{0,8}\s*:\s*Got completion ", r"error"),
                                        rx(r"IBV_WC_RETRY_EXC_ERR|IBV_WC_RNR_RETRY_EXC_ERR|"
                                           r"transport retry counter exceeded"),
                                        Then(r"NET/IB", r"\bstatus\s*(?:=\s*)?1[23]\b")),
          "InfiniBand/RoCE transport retries exceeded (a link, routing or a lossy fabric)",
          "check the named HCA's port counters (perfquery, ethtool -S), cables and switch port; on RoCE check PFC/ECN "
          "and NCCL_IB_GID_INDEX; `ncclcheck links` finds the slow or failing pair",
          source="src/transport/net_ib.cc"),
    # ibv_modify_qp to RTR/RTS fails when the GID or the path does not exist: a RoCE GID index without an address of
    # that family, an MTU the peer's port does not take, a peer in another subnet
    cause("ib_gid", Either(Then(r"ibv_modify_qp", r"fail"),
                           Then(r"NCCL_IB_GID_INDEX", r"invalid|not found|out of range"),
                           rx(r"NET/IB\w{0,8}\s*:\s*(?:No valid GID|GID index \d{1,4} .{0,40}not (?:found|valid))")),
          "an InfiniBand/RoCE queue pair could not be connected (ibv_modify_qp failed): on RoCE a GID index that is "
          "not RoCE v2 with an IPv4 address, or an MTU the two ports do not share",
          "on RoCE with NCCL < 2.21 set NCCL_IB_GID_INDEX to the RoCE v2 IPv4 GID (`show_gids`; often 3); leave it "
          "unset on NCCL >= 2.21; align the MTU of both ports; `ncclcheck preflight` reads the GID tables (ib.devices)",
          source="src/misc/ibvwrap.cc wrap_ibv_modify_qp"),
    # a dma-buf registration the kernel, the driver or the NIC cannot do (kernel < 5.12, an old driver, a NIC
    # without it): NCCL 2.13+ tries it first for GPU memory
    cause("dmabuf", Then(r"ibv_reg_dmabuf_mr", r"fail"),
          "registering GPU memory with the NIC through dma-buf failed (kernel, driver or NIC without dma-buf support)",
          "set NCCL_DMABUF_ENABLE=0 (NCCL then uses nvidia-peermem for GPUDirect RDMA) or update the kernel (>= 5.12), "
          "the NVIDIA driver (open kernel modules) and the NIC's driver", level=SPECIFIC,
          source="src/misc/ibvwrap.cc wrap_ibv_reg_dmabuf_mr"),
    # ibv_reg_mr failing "Bad address" is GPU memory the NIC cannot map (no peer-memory module): not the memlock limit
    cause("gdr", Either(Then(r"ibv_reg_mr", r"Bad address|EFAULT"),
                        rx(r"GPU Direct RDMA .{0,20}not (?:supported|available)|nv_peer_mem .{0,20}not loaded")),
          "registering GPU memory with the NIC failed (GPUDirect RDMA: the NIC cannot map GPU memory)",
          "load nvidia-peermem (`modprobe nvidia_peermem`) or use dma-buf (NCCL_DMABUF_ENABLE=1 on kernel >= 5.12); or "
          "run without GPUDirect (NCCL_NET_GDR_LEVEL=LOC) to confirm; `ncclcheck health` checks GPUDirect RDMA",
          level=SPECIFIC, source="src/misc/ibvwrap.cc wrap_ibv_reg_mr"),
    cause("memlock", Either(Then(r"ibv_(?:create_qp|reg_mr|create_cq|reg_mr_iova2)", r"failed|Cannot allocate memory"),
                            rx(r"RLIMIT_MEMLOCK|memlock")),
          "RDMA memory registration failed (the memlock limit is too low)",
          "raise the memlock limit to unlimited (`ulimit -l unlimited`, docker --ulimit memlock=-1, Slurm "
          "PropagateResourceLimits); `ncclcheck preflight` checks it (host.memlock)", source="src/misc/ibvwrap.cc"),
    # shared memory: NCCL 2.12+ "Error while creating shared memory segment %s (size %ld)", older "Error: failed to
    # extend %s to %ld bytes", shm_open / posix_fallocate / mmap failures; /dev/shm, shm_open: each holds "shm",
    # whose first match ends first (Then's condition)
    cause("shm_exhausted", Either(rx(r"Error while creating shared memory segment|"
                                     r"unable to allocate shared memory|insufficient shared memory|"
                                     r"failed to extend /dev/shm"),
                                  Then(r"shm|posix_fallocate", r"No space left|failed|Cannot allocate")),
          "/dev/shm is too small or full (NCCL's SHM transport, or the DataLoader's worker buffers)",
          "give the container a larger /dev/shm (docker --shm-size=1g or more, or --ipc=host; Kubernetes: an emptyDir "
          "of medium Memory at /dev/shm); with systemd, RemoveIPC=no; `ncclcheck preflight` checks it (host.shm)",
          source="src/misc/shmutils.cc"),
    # shm_open of a new segment refused (NCCL <= 2.11 include/shm.h "Call to shm_open failed : %s"): /dev/shm is not
    # writable by the job's user (its mode, a read-only mount), not full; NVIDIA/nccl#328, pytorch#37004
    cause("shm_permission", Then(r"shm_open|/dev/shm", r"Permission denied|EACCES"),
          "NCCL may not create its shared-memory segment: /dev/shm is not writable by the job's user (its mode or "
          "owner, a read-only mount)",
          "make /dev/shm writable (`ls -ld /dev/shm` should show drwxrwxrwt; `chmod 1777 /dev/shm`), or give the "
          "container its own (--ipc=host, --shm-size); NCCL_SHM_DISABLE=1 confirms", level=SPECIFIC,
          source="src/include/shm.h (NCCL <= 2.11), src/misc/shmutils.cc"),
    # a segment a local peer made that this rank cannot open ("Error while attaching to shared memory segment %s
    # (size %ld), error: No such file or directory (2)"): the ranks of one node do not share /dev/shm (another container
    # or IPC namespace), or systemd's RemoveIPC deleted it
    cause("shm_not_shared", Then(r"attaching to shared memory segment", r"No such file|Permission denied|failed"),
          "a rank could not open the shared-memory segment a rank of the same node made: the ranks of that node do "
          "not share /dev/shm (separate containers or IPC namespaces), or the segment was removed (systemd RemoveIPC)",
          "run the ranks of a node in one container or pod (or give them --ipc=host / a shared /dev/shm); set "
          "RemoveIPC=no in logind.conf; to confirm, NCCL_SHM_DISABLE=1 makes NCCL avoid shared memory",
          level=SPECIFIC, source="src/misc/shmutils.cc"),
    # the HCA's own async events ("NET/IB : Got async event : %s", "%s:%d Got async event : %s", "async fatal event on
    # QP (%p): %s", "Got async error event: %s"): a port that went down, a fatal error of the device
    cause("ib_async_event", rx(r"NET/IB\w{0,8}\s*:\s*(?:\S{1,64} )?(?:Got (?:async|non-fatal async) (?:error )?event|"
                               r"async fatal event)"),
          "an InfiniBand/RoCE device reported an error event (a port that went down, a fatal error of the HCA, a QP "
          "put in error: on RoCE often an MTU or GID the two ends do not share)",
          "check that HCA's port (`ibstat`, the link's error counters, dmesg for mlx5), its cable and switch port; "
          "on RoCE align the MTU of both ends; `ncclcheck health` reads the ports' counters",
          source="src/transport/net_ib.cc"),
    # a connection of another kind than expected reached NCCL's socket ("socketFinalizeAccept: wrong type %d != %d",
    # 2.16-2.26): the two ends do not agree on the transport (IB usable on one node only, other NCCL builds), or
    # another job reached this one's port
    cause("transport_mismatch", rx(r"socketFinalizeAccept: wrong type"),
          "a connection of another kind than expected reached NCCL's socket: the nodes do not agree on the transport "
          "(InfiniBand usable on one node and not the other, different NCCL builds), or another job's process reached "
          "this one's port",
          "check InfiniBand on every node (`ncclcheck preflight` compares the active ports across nodes) and the "
          "NCCL version; NCCL_IB_DISABLE=1 on every node confirms it is the IB side", source="src/misc/socket.cc"),
    # bootstrap.cc / socket.cc "Message truncated : received %d bytes instead of %d": a bootstrap message of another
    # size than expected: two jobs or two NCCL builds meeting at one address (a stale process, NCCL_COMM_ID shared,
    # different NCCL versions on the ranks)
    cause("bootstrap_truncated", rx(r"Message truncated\s*:\s*received \d{1,12}(?:,\d{1,12})? bytes instead of|"
                                    r"Bootstrap Root\s*:\s*mismatch in rank count|has already checked in"),
          "NCCL's bootstrap received a message of another size than it expected: the ranks do not run the same NCCL "
          "(a different version on one node), or another job's process met this one at the same address",
          "run the same torch/NCCL build on every node (`ncclcheck preflight` compares versions across nodes); make "
          "sure no stale process of an earlier job is still running there, and that each job has its own "
          "MASTER_PORT / NCCL_COMM_ID", source="src/bootstrap.cc; src/misc/socket.cc"),
    # NVLS (NVLink SHARP, NCCL 2.17+ on NVSwitch systems): its setup fails when the fabric manager or the driver
    # cannot give multicast memory (transport/nvls.cc's CUDA calls: "invalid argument", "operation not supported")
    cause("nvls", Either(Then(r"transport/nvls\.cc", r"fail|error|WARN"),
                         rx(r"NVLS .{0,40}(?:failed|error)|Failed to bind NVLink SHARP")),
          "NCCL's NVLink SHARP (NVLS) setup failed: the fabric manager or the driver could not give multicast memory",
          "set NCCL_NVLS_ENABLE=0 to run without NVLS; then check the fabric manager (`systemctl status "
          "nvidia-fabricmanager`, `nvidia-smi -q` Fabric state) and reset the GPUs or reboot the node",
          level=SPECIFIC, source="src/transport/nvls.cc"),
    cause("p2p_unsupported", rx(r"peer access is not supported between these two devices|"
                                r"peer mapping resources exhausted|failed to open CUDA IPC handle|"
                                r"failed to peer with device"),
          "GPU peer-to-peer access is not available between two GPUs of a rank's node (a VM or a PCIe topology "
          "without P2P, ACS, the IOMMU), or its mappings ran out",
          "run with NCCL_P2P_DISABLE=1 to confirm (NCCL then copies through host memory); on bare metal disable ACS "
          "on the PCIe switches and put the IOMMU in passthrough; in a VM, P2P needs the hypervisor's support",
          level=SPECIFIC, source="src/transport/p2p.cc"),
    cause("mnnvl", rx(r"MNNVL .{0,40}(?:not working|not supported)|IMEX channel"),
          "multi-node NVLink (MNNVL) is present but does not work: the IMEX service or its channels are not set up",
          "check the IMEX configuration (`nvidia-imex-ctl -N`, /dev/nvidia-caps-imex-channels in the container); set "
          "NCCL_MNNVL_ENABLE=0 to run without it", source="src/transport/nvls.cc; src/init.cc"),
    cause("nccl_config", rx(r"no algorithm/protocol available|Invalid NCCL_COMM_ID|"
                            r"Invalid value .{0,64} for NCCL_|NCCL_\w{1,40} .{0,30}is invalid"),
          "an NCCL setting leaves NCCL nothing it can use (NCCL_ALGO / NCCL_PROTO excluding every algorithm for a "
          "collective, an invalid NCCL_COMM_ID or value)",
          "unset the debugging switches (NCCL_ALGO, NCCL_PROTO) and fix the value the line names; `ncclcheck "
          "preflight` lists the NCCL_ variables each node has (env.nccl)", source="src/enqueue.cc; src/misc/param.cc"),
    # EAGAIN's words alone ("Resource temporarily unavailable") are any non-blocking call's: NCCL's service thread
    # prints them at a clean teardown ("[Service thread] Accept failed Resource temporarily unavailable"); only a
    # thread or process that could not be made is this class
    cause("thread_limit", Either(rx(r"pthread_create failed|Thread creation failed|can't start new thread|"
                                    r"fork: retry: Resource temporarily unavailable"),
                                 Then(r"pthread_create|\bclone\b", r"Resource temporarily unavailable")),
          "a process could not start a thread (the per-user process limit or the container's pids limit)",
          "raise `ulimit -u` and the container's or cgroup's pids.max (Kubernetes pod pid limit, Slurm's)",
          level=SPECIFIC, source="src/misc/socket.cc; src/proxy.cc SYSCHECK(pthread_create)"),
    cause("host_memory", rx(r"Failed to malloc \d{1,20} bytes|malloc\(size=\d{1,20}\) returned null|"
                            r"Failed to allocate memory for"),
          "a host memory allocation failed (the host or the container is out of memory)",
          "give the job more host memory (the container's limit, --mem) or use less (fewer data-loader workers, "
          "smaller pinned buffers)", source="src/include/alloc.h"),
    cause("nvml", rx(r"nvml\w{1,60}\(\) failed|Failed to open libnvidia-ml"),
          "NCCL could not query the GPU through NVML (a driver and NVML of different versions, a GPU that does not "
          "answer, or a container without the NVML library)",
          "run `nvidia-smi` on that host (a driver/library mismatch or a GPU in a bad state shows there); in a "
          "container, the NVIDIA runtime must mount libnvidia-ml", source="src/misc/nvmlwrap.cc"),
    cause("nccl_usage", rx(r"allocated on device \d{1,4} mismatchs with NCCL device|Invalid rank requested|"
                           r"rank \d{1,7} exceeds ndev|argument is NULL|invalid (?:reduction operation|data type|"
                           r"type)\b|has already been destroyed"),
          "the program called NCCL wrongly (a tensor on another GPU than its communicator's, a rank or a type NCCL "
          "does not accept, a communicator used after it was destroyed)",
          "put each rank's tensors on its own device (torch.cuda.set_device(LOCAL_RANK) before the first CUDA call, "
          "tensors on torch.cuda.current_device()); read the line's argument name", source="src/enqueue.cc"),
    cause("efa_ofi", Either(Then(r"NET/OFI", r"fail|error|unable|couldn't|could not|not supported"),
                            rx(r"fi_getinfo (?:failed|returned)|OFI (?:call|request) .{0,60}failed|"
                               r"aws-ofi-nccl .{0,40}(?:failed|error)")),
          "the AWS OFI / libfabric network plugin (EFA) failed",
          "check the EFA setup on that host: `fi_info -p efa` lists the devices, the aws-ofi-nccl plugin matches the "
          "NCCL version, FI_PROVIDER=efa and FI_EFA_USE_DEVICE_RDMA=1 on p4d/p5, the security group allows all "
          "traffic between the nodes", source="aws-ofi-nccl src/nccl_ofi_net.c"),
    # torch's DataLoader passes tensors between processes as file descriptors: past the limit its receive gets none
    # ("received 0 items of ancdata", torch/multiprocessing/reductions.py)
    cause("too_many_files", rx(r"Too many open files|\bEMFILE\b|received " + num("0") + r" items of ancdata"),
          "a process ran out of file descriptors (NCCL's sockets on a large job, or the DataLoader's tensors passed "
          "between processes as descriptors)",
          "raise the open-files limit (`ulimit -n 1048576`; Slurm PropagateResourceLimits, the container's "
          "--ulimit nofile); for the DataLoader, torch.multiprocessing.set_sharing_strategy('file_system')",
          level=SPECIFIC),
    # ECONNABORTED from NCCL's connect ("Software caused connection abort") is its error path's own artefact
    # (NVIDIA/nccl#1515): the connection failed, and why is not in the line
    consequence("peer_closed", Either(rx(r"Connection closed by (?:remote )?peer|Connection reset by peer|"
                                         r"remote process exited or there was a network error|"
                                         r"ncclRemoteError|Broken pipe|Software caused connection abort"),
                                      Then(r"socketProgress", r"closed")),
                "a peer closed the connection (it died or was stopped)",
                "look at the peer that died first: its exit signal in the launcher's failure table, its own log",
                source="src/misc/socket.cc; src/transport/net_socket.cc"),
    consequence("proxy_failed", rx(r"\[Proxy Service \d{1,7}\] Failed to execute operation|"
                                   r"proxy(?:State)?Progress.{0,40}failed|Proxy Call to rank \d{1,7} failed|"
                                   r"Socket recv failed while polling for opId|\[Service thread\] Accept failed"),
                "NCCL's proxy thread failed an operation for another rank (a symptom of a failure of that rank or "
                "of the network between them)",
                "find the first failure of the rank it names, or the transport error before it", source="src/proxy.cc"),
    consequence("comm_aborted", rx(r"NCCL communicator was aborted|ncclCommAbort|communicator .{0,40}aborted"),
                "an NCCL communicator was aborted (torch aborts it after a failure: a consequence)",
                "find what failed before the abort: the first WARN or the first rank that failed",
                source="torch ProcessGroupNCCL; src/init.cc"),
    # any other WARN NCCL printed (src/debug.cc: "host:pid:tid [dev] file:line NCCL WARN msg"; the header of old
    # versions without the word NCCL is read as this one, failures.classify): its words are quoted, never named the
    # cause: an unknown warning is far more often a symptom of a failure said elsewhere than a cause of its own
    consequence("nccl_warn", rx(r"\bNCCL WARN\b"),
                "an NCCL warning ncclcheck does not know (likely a symptom of the failure, not its cause)",
                "read the WARN line and the NCCL INFO lines before it (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET); "
                + _PREFLIGHT_NET, level=GENERIC),
)

# NCCL lines a healthy job prints where an optional part is absent (no InfiniBand, no external plugin, a NIC without
# a speed) or before a retry: never a failure (NVIDIA/nccl#1217, #855: users read them as the cause of a hang).
ROUTINE = (
    rx(r"Failed to open libibverbs\.so|Failed to open libmlx|libibverbs\.so\S{0,8} (?:not found|cannot open)"),
    rx(r"NET/Plugin\s*:\s*(?:Plugin load (?:returned|\(\S{1,64}\) returned)|No plugin found|Could not find|"
       r"Failed to find ncclNetPlugin|Loaded net plugin)|Could not find: libnccl-\w{1,16}\.so|"
       r"Could not get speed from /sys/class/net|dlvsym failed on|Unable to load libnccl-net"),
    rx(r"Failed to initialize NET plugin IB|NET/IB\s*:\s*No device found"),
    CONNECT_RETRY := Then(r"Call to connect returned ", r"retrying"),
    Then(r"socketPollConnect", r"retrying"),
)

__all__ = ["ROWS", "ROUTINE", "CONNECT_RETRY", "CAUSE", "CONSEQUENCE"]
