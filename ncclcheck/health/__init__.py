"""`ncclcheck health`: node-local checks fit for Slurm's HealthCheckProgram and Prolog (seconds, no torch), and
draining through scontrol with a reason ncclcheck owns (drain.py: the prefix rule; scontrol.py: the one place that
runs scontrol)."""
