"""Test processes forked from one server that imported torch once, instead of new Pythons that each import it.

A new Python importing torch costs about 1.5 s of CPU here (three times that on CI's machine), and the multi-process
tests start dozens of them. multiprocessing's forkserver imports PRELOAD once per test process; each child is a fork
of it. Nothing of torch runs in the server before it forks (no process group, no thread pool), and each child sets
its own environment before torch.distributed initialises, as a new process would.

    p = start_main("tests.world_node", ["--nnodes", "2", ...], env, cwd, tmp_path / "n0")   # like subprocess.Popen
    out, err = p.communicate(timeout=40); p.returncode

Only for code that is not what a test measures about start-up: a test of what a fresh process imports (torch kept
out of `--help`), or of a launcher, starts a real one.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import subprocess
import sys
import traceback
from pathlib import Path

PRELOAD = ["torch", "torch.distributed", "ncclcheck.agent.context", "ncclcheck.rendezvous.budget",
           "ncclcheck.preflight.cluster"]


def context():
    """The forkserver context (its server starts at the first child and serves every later one)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _main(module: str, argv: list, env: dict, cwd: str, out: str, err: str) -> None:
    """In the child: stdio to the files, the environment and directory given, then module.main() as __main__ would
    run it; its exit code (SystemExit's, 1 for an exception) is the process's."""
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        f = os.open(path, flags, 0o600)
        os.dup2(f, fd)
        os.close(f)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = [module, *argv]
    code = 0
    try:
        importlib.import_module(module).main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends a process: its traceback, exit 1
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


class Forked:
    """The part of subprocess.Popen the tests use: communicate(timeout) -> (stdout, stderr), kill(), returncode."""

    def __init__(self, module: str, argv: list, env: dict, cwd: str, base: Path) -> None:
        self.out, self.err = f"{base}.out", f"{base}.err"
        self.args = [module, *map(str, argv)]
        self._p = context().Process(target=_main, args=(module, self.args[1:], env, cwd, self.out, self.err),
                                    daemon=True)
        self._p.start()

    @property
    def returncode(self):
        return self._p.exitcode

    def poll(self):
        return self._p.exitcode

    def kill(self) -> None:
        if self._p.is_alive():
            self._p.kill()
        self._p.join(5)

    def communicate(self, timeout: float) -> tuple[str, str]:
        self._p.join(timeout)
        if self._p.is_alive():
            raise subprocess.TimeoutExpired(self.args, timeout)
        return Path(self.out).read_text(errors="replace"), Path(self.err).read_text(errors="replace")


def start_main(module: str, argv: list, env: dict, cwd: str, base: Path) -> Forked:
    """module.main() with argv in a forked child; its stdout and stderr go to base.out and base.err."""
    return Forked(module, argv, env, cwd, base)
