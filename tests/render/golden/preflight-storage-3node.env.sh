# ncclcheck recommended environment: source this file before launching training.
# From `ncclcheck preflight` 0.1.0, started 2026-11-23T01:05:05+00:00.

# eth0 connects every pair of the 3 nodes in the full-mesh probe (10 Gb/s)
export NCCL_SOCKET_IFNAME=eth0
# same interface as NCCL (eth0); Gloo takes exact names
export GLOO_SOCKET_IFNAME=eth0
