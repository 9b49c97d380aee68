"""The preflight protocol's store keys, written once: cluster.py reads and writes them, and the hostile-peer lab
test (tests/lab/test_hostile_lab.py) forges them, so a renamed key is renamed for both. All live under the run's
prefix (rendezvous.roles.run_prefix); `{}` is a node rank or a join index."""

from __future__ import annotations

HOST = "host"  # node 0's identity, set right after it starts the store (under torchrun's agent store: by global rank 0)
REF = "world/ref"  # the decider: digests of its own facts groups and checks (joinref.py), before any join is read
JOIN = "join"  # the join journal (rendezvous/journal.py): counter JOIN/count, records JOIN/<i> from 1
JOIN_COUNT = JOIN + "/count"  # counter: each node leader's append gives its join index i
JOIN_RECORD = JOIN + "/{}"  # join record i: node_rank, nnodes, hostname, pid, uuid, launcher, facts, checks
VERDICT = "world/verdict"  # node 0: who joined, whether the world formed (acks: VERDICT/acks, VERDICT/ack/<i>)
READERS = "world/readers"  # a counter: every process that connected to the store and will read the verdict
MESH_EP = "mesh/ep/{}"  # a node's probe endpoints
MESH_DIR = "mesh/dir"  # node 0: every node's endpoints, packed (full mesh)
MESH_ROW = "mesh/row/{}"  # a node's probe results, packed
RESULT = "world/result"  # node 0: cross-node checks, aggregated local exceptions, recommendations
FINAL = "world/final"  # node 0: the exit code every process agrees on (rendezvous/agree.py; acks as for VERDICT)
LIFELINE = "world/lifeline"  # node 0 (srun, mpirun, env://): the port of its Lifeline (preflight/probe.py)
SHARED = "shared/"  # the --shared-dir step's scope (preflight/shared_dirs.py)
