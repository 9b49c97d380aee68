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


# The versions only an imported torch can tell (the CUDA and NCCL it was built with): a reader that never imports it
# (health) does not know them.
TORCH_ONLY = ("cuda", "nccl")


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


# The flight recorder's variables were renamed (TORCH_NCCL_TRACE_BUFFER_SIZE -> TORCH_FR_BUFFER_SIZE,
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE -> TORCH_FR_DUMP_TEMP_FILE); torch 2.13 still reads the old names but prints a
# deprecation warning for each on every rank. Which names a torch reads is in its binary: the getenv names are
# string constants of libtorch_cpu (2.13: c10d's FlightRecorder) or libtorch_cuda (older: ProcessGroupNCCL).
FR_NAMES = {"buffer": (b"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"),
            "dump": (b"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")}
_FR_LIBS = ("libtorch_cpu.so", "libtorch_cuda.so")


def flight_recorder_names() -> Optional[dict]:
    """{"buffer": name, "dump": name} the installed torch reads (the current name where its libraries hold it, the
    old one otherwise); None when no torch is installed here (then nobody knows: set both). Reads torch's files,
    never imports it (a few hundred MB mapped, found with memchr-speed search: ~0.3 s warm)."""
    import importlib.util
    import mmap
    import os

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    libdir = os.path.join(os.path.dirname(spec.origin), "lib")
    found = {k: False for k in FR_NAMES}
    seen_lib = False
    for name in _FR_LIBS:
        path = os.path.join(libdir, name)
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                seen_lib = True
                for key, (new, _) in FR_NAMES.items():
                    found[key] = found[key] or m.find(new + b"\0") >= 0
        except (OSError, ValueError):
            continue
    if not seen_lib:
        return None
    return {k: new.decode() if found[k] else old for k, (new, old) in FR_NAMES.items()}
