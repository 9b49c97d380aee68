"""The Python API the CLI is a thin layer over: one function per row of the commands table (commands.py),
`run_<name>`, each taking either a Config or the command's own flags as keyword arguments (`run_preflight(nnodes=2)`,
`run_bench(sizes="1M", ops="all_reduce")`), and returning the command's Report. Each makes one call into the
command's runner; nothing here prints or exits. The functions are made from the table, so a command cannot exist in
the CLI and be missing here (tests/test_commands.py)."""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from .commands import COMMANDS, Command, command
from .config import Config
from .model import Report

# A library logs; the application decides where it goes. Without this, Python-API users would see "No handlers"
# tracebacks of our warnings on stderr (the CLI installs its own file handler on the root logger). Set here, where
# every run_<name> enters, not in the package's __init__: `ncclcheck --help` would pay for importing logging.
logging.getLogger("ncclcheck").addHandler(logging.NullHandler())


def _config(name: str, config: Optional[Config], options: dict, api_name: str) -> Config:
    """The Config given, or the one the command's flags (as keyword arguments) make, exactly as the CLI makes it."""
    if config is not None:
        if options:
            raise TypeError(f"{api_name}() takes a Config or keyword arguments, not both")
        return config
    from .options import api_config

    return api_config(name, options, api_name)


def runner(name: str) -> Callable[..., Report]:
    """The command's runner, imported now (the table names it as "module:function")."""
    module, function = command(name).runner.split(":")
    # __import__, not importlib.import_module: the import statement's own machinery, which `python -X importtime`
    # reports (tests read it to prove which modules a command imports)
    return getattr(__import__(module, fromlist=[function]), function)


def run_command(config: Config, observer: Any = None, placement: Any = None) -> Report:
    """Run the command the Config is for (the CLI's one dispatch): `placement` is the launcher's world the caller
    read once; `observer` gets progress (commands that report none ignore it)."""
    row = command(config.command)
    return runner(row.name)(config, observer=observer if row.progress else None, placement=placement)


def _function(row: Command) -> Callable[..., Report]:
    def run(config: Optional[Config] = None, observer: Any = None, placement: Any = None,
            **options: Any) -> Report:
        return run_command(_config(row.name, config, options, row.api_name), observer, placement)

    run.__name__ = run.__qualname__ = row.api_name
    run.__module__ = __name__
    run.__doc__ = (f"`ncclcheck {row.name}`: {row.help}.\n\n{row.description + chr(10) * 2 if row.description else ''}"
                   f"Keyword arguments are `ncclcheck {row.name}`'s flags (hyphens become underscores; same "
                   "defaults, same checks: a bad value raises ncclcheck.errors.UsageError), or pass a Config. "
                   "Returns the run's Report.")
    return run


def interrupted_report(config: Config, placement: Any = None, by: str = "Ctrl-C", clock: Any = None) -> Report:
    """The report of a run of a world-forming command (preflight, bench, links, sweep) that Ctrl-C or SIGTERM cut
    short before its world formed: failed, partial, nothing measured. `clock` is the command's start (steps.world
    Clock); by default, now."""
    from .steps.world import Clock
    from .steps.world import interrupted_report as build

    return build(config, config.command, clock or Clock(), by, placement)


for _row in COMMANDS:
    globals()[_row.api_name] = _function(_row)

__all__ = sorted(row.api_name for row in COMMANDS)
