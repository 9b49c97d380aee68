# ncclcheck recommended environment: source this file before launching training.
# From `ncclcheck links` 0.1.0, started 2025-11-20T22:15:09+00:00.
# No settings recommended: the defaults suit this cluster.
