# ncclcheck recommended environment: source this file before launching training.
# From `ncclcheck bench` 0.1.0, started 2025-11-20T22:02:41+00:00.
# No settings recommended: the defaults suit this cluster.
