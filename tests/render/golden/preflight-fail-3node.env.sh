# ncclcheck recommended environment: source this file before launching training.
# From `ncclcheck preflight` 0.1.0, started 2025-11-20T21:25:13+00:00.

# eth0 is running and reachable from every node; exact form so docker0 and eth0.* cannot be chosen
export NCCL_SOCKET_IFNAME='=eth0'
# same interface as NCCL, exact name for Gloo
export GLOO_SOCKET_IFNAME=eth0
