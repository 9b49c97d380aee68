# ncclcheck recommended environment: source this file before launching training.
# From `ncclcheck preflight` 0.1.0, started 2025-11-20T21:20:00+00:00.

# the 8 active InfiniBand ports on every node, exact names so mlx5_1 cannot match mlx5_10
export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'

# Settings that differ per node, chosen by the node rank from the first of
# NCCLCHECK_NODE_RANK, NODE_RANK, GROUP_RANK, SLURM_NODEID, JOB_COMPLETION_INDEX, PET_NODE_RANK that is set, or else by hostname.
_ncclcheck_node="${NCCLCHECK_NODE_RANK:-${NODE_RANK:-${GROUP_RANK:-${SLURM_NODEID:-${JOB_COMPLETION_INDEX:-${PET_NODE_RANK:-}}}}}}"
if [ -z "$_ncclcheck_node" ]; then
  case "$(hostname -s 2>/dev/null || hostname)" in
    gpu-a01) _ncclcheck_node=0 ;;
    gpu-a02) _ncclcheck_node=1 ;;
  esac
fi
case "$_ncclcheck_node" in
  0)
    # fastest interface reachable from every node (200 Gb/s, MTU 9000); its name differs per node
    export NCCL_SOCKET_IFNAME='=ens1f0np0'
    # same interface as NCCL, exact name for Gloo
    export GLOO_SOCKET_IFNAME=ens1f0np0
    ;;
  1)
    # fastest interface reachable from every node (200 Gb/s, MTU 9000); its name differs per node
    export NCCL_SOCKET_IFNAME='=enp65s0f0np0'
    # same interface as NCCL, exact name for Gloo
    export GLOO_SOCKET_IFNAME=enp65s0f0np0
    ;;
  *)
    echo "ncclcheck env: unknown node rank (set NCCLCHECK_NODE_RANK): per-node settings not applied" >&2
    ;;
esac
unset _ncclcheck_node
