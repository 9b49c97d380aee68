"""The environment variables that steer NCCL, Gloo and torch.distributed; secret-looking values are never kept."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_", "MASTER_", "UCX_", "FI_")
NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "TORCH_CPP_LOG_LEVEL",
         # the CUDA settings that slow or instrument a job (checks/local.py: env.cuda; DCGM's "Environment Variables")
         "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH", "NSIGHT_CUDA_DEBUGGER",
         "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_COREDUMP_FILE", "CUDA_AUTO_BOOST",
         "CUDA_PROFILE", "COMPUTE_PROFILE", "OPENCL_PROFILE", "PYTORCH_NO_CUDA_MEMORY_CACHING")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH")
# Real settings that merely contain a secret word: NCCL_IB_PKEY is the InfiniBand partition key index.
SAFE_NAMES = frozenset({"NCCL_IB_PKEY"})


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return upper not in SAFE_NAMES and any(w in upper for w in SECRET_WORDS)


def collect(environ: Optional[Mapping[str, str]] = None) -> dict:
    env = os.environ if environ is None else environ
    vars_: dict = {}
    redacted = []
    for name in sorted(env):
        if not (name.startswith(PREFIXES) or name in NAMES):
            continue
        if looks_secret(name):
            redacted.append(name)
        else:
            vars_[name] = env[name]
    return {"vars": vars_, "redacted": redacted}
