"""Steps the command pipelines share (preflight/pipeline.py, bench/pipeline.py, links/pipeline.py): where this
process sits and the world a command runs in, this node's facts, the master probe, the refusals before any rank
starts, the run's side directory, and NCCL's debug capture."""
