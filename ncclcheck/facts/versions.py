"""Versions that must match across nodes: python, torch (from metadata, no import), CUDA, NCCL, driver, ncclcheck."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Optional


def dist_version(name: str) -> Optional[str]:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def collect(gpu: Optional[dict] = None, tool_version: Optional[str] = None) -> dict:
    """gpu: the gpu group's facts, when collected (CUDA/NCCL/driver are only known there); tool_version: this
    ncclcheck's version, handed down by the api (facts never import the package root, which sits above them)."""

    g = gpu if isinstance(gpu, dict) and "unavailable" not in gpu else {}
    return {
        "python": platform.python_version(),
        "torch": dist_version("torch"),
        "cuda": g.get("cuda"),
        "nccl": g.get("nccl"),
        "driver": g.get("driver"),
        "ncclcheck": tool_version or dist_version("ncclcheck"),
        "platform": platform.platform(),
    }
