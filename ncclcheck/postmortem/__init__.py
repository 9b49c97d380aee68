"""`ncclcheck diagnose`: read what a failed or hung job left (flight-recorder dumps, NCCL logs, the launcher's output
and error files, ncclras JSON, a preflight report) and name the rank, host, collective and cause."""
