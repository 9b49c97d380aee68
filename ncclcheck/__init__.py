"""ncclcheck: can these nodes train together, and if not, which node, which interface, which setting is wrong?

The Python API (the CLI is a thin layer over it): one function per command, taking the command's flags as
keyword arguments, returning a ncclcheck.model.Report.

    import ncclcheck
    report = ncclcheck.run_preflight()                      # or run_preflight(nnodes=2, master_addr="h0")
    print(report.status, report.exit_code)
    text = report.to_json()                                 # JSON text; report.to_dict() gives the dict
    bench = ncclcheck.run_bench(sizes="1M-8M", ops="all_reduce")

    ncclcheck.guard()                            # first line of a training script: raises ncclcheck.PreflightFailed
    ncclcheck.arm("/shared/pm")                  # or only this: every rank leaves its evidence there when it fails

Importing ncclcheck is cheap: torch is imported only by the functions that need it.
"""

from __future__ import annotations

from .commands import COMMANDS as _COMMANDS
from .version import __version__

_API = tuple(c.api_name for c in _COMMANDS)  # one run_<name> per row of the commands table (commands.py)
__all__ = ["__version__", *_API, "guard", "PreflightFailed", "arm"]


def __getattr__(name: str):
    # Lazy so that `import ncclcheck` (and `ncclcheck --help`) never pays for the api's imports.
    if name in _API:
        from . import api

        return getattr(api, name)
    if name in ("guard", "PreflightFailed"):
        # ncclcheck/training/: `ncclcheck.guard` is the function, so the package cannot be named guard.
        from .training import PreflightFailed, guard

        return {"guard": guard, "PreflightFailed": PreflightFailed}[name]
    if name == "arm":
        from .training.arm import arm

        return arm
    raise AttributeError(name)
