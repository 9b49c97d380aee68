"""The preflight protocol's store keys, written once: cluster.py reads and writes them, and the hostile-peer lab
test (tests/lab/test_hostile_lab.py) forges them, so a renamed key is renamed for both. All live under the run's
prefix (agent.roles.run_prefix); `{}` is a node rank or a join index."""

from __future__ import annotations

HOST = "host"  # node 0's identity, set right after it starts the store
JOIN_COUNT = "join/count"  # counter: each node leader's add() gives its join index i
JOIN = "join/{}"  # join record i: node_rank, nnodes, hostname, pid, uuid, launcher, facts, checks
VERDICT = "world/verdict"  # node 0: who joined, whether the world formed
VERDICT_READ = "world/verdict_read"  # counter: members that read the verdict
MESH_EP = "mesh/ep/{}"  # a node's probe endpoints
MESH_DIR = "mesh/dir"  # node 0: every node's endpoints, packed (full mesh)
MESH_ROW = "mesh/row/{}"  # a node's probe results, packed
MESH_ROWS = "mesh/rows"  # counter: rows published
RESULT = "world/result"  # node 0: cross-node checks, aggregated local exceptions, recommendations
FINAL = "world/final"  # node 0: the exit code every process agrees on
FINAL_ACK = "world/final_ack"  # counter: members that read the final exit code
