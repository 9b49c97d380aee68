"""`ncclcheck sweep`: inside a Slurm allocation, links' disjoint-pair rounds with suspects re-tested against nodes
that passed (links' scale mode), then one verdict per node; only nodes proven bad are drained."""
