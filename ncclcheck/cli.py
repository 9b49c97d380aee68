"""Command line: argv -> Config (built once), run the API, render, exit. The only module that exits.

Exit codes (docs/contracts.md): 0 passed (warnings allowed), 1 a check failed / a gate missed / no world, 2 usage error,
3 internal error (a bug: the log's path is printed), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM, handled like
Ctrl-C: the partial report is written). Importing this module must not import torch:
`ncclcheck --help` and usage errors stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, Optional

from .clean import clean_name
from .commands import command
from .errors import (
    EXIT_FAIL,  # noqa: F401 - the exit codes' names, importable from here as before
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,  # noqa: F401
    EXIT_TERMINATED,
    EXIT_USAGE,
    Terminated,
    UsageError,
    interruption,
)
from .options import build_parser, command_in, config_from_args, placement_of

if TYPE_CHECKING:
    from .config import Config

# `ncclcheck --help` imports only argparse, the commands table and this module: logging, tempfile, dataclasses and
# config.py are imported by the functions that run a command (each ~5 ms on this path; docs/contracts.md's target).


LOG_KEEP = 20  # runs whose logs are kept in the log directory


def log_dir(env=None) -> str:
    """$NCCLCHECK_LOG_DIR, else $XDG_STATE_HOME/ncclcheck, else ~/.local/state/ncclcheck: one predictable place."""
    env = os.environ if env is None else env
    if env.get("NCCLCHECK_LOG_DIR"):
        return env["NCCLCHECK_LOG_DIR"]
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "ncclcheck")


def log_host() -> str:
    """This host's short name as it goes into log file names (ncclcheck-<host>-<stamp>-<pid>.log): with a home
    shared by the nodes, each host keeps its own last LOG_KEEP runs and a log says where it was written."""
    from .facts import hostname

    short = hostname().split(".")[0] or "host"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in short)


def _this_hosts_log(name: str, host: str) -> bool:
    """A run log of this host, or one named before logs were named by host (ncclcheck-<YYYYMMDD>-...)."""
    if not (name.startswith("ncclcheck-") and name.endswith(".log")):
        return False
    rest = name[len("ncclcheck-"):]
    return rest.startswith(host + "-") or (rest[:8].isdigit() and rest[8:9] == "-")


def _prune_logs(directory: str, keep: int = LOG_KEEP, host: str = "") -> None:
    """Keep this host's newest `keep` runs' logs (a run: ncclcheck-<host>-<stamp>-<pid>.log and its .d side
    directory); other hosts' logs in a shared directory are theirs to prune."""
    import shutil

    try:
        runs = sorted((n[:-4] for n in os.listdir(directory) if _this_hosts_log(n, host)),
                      key=lambda n: os.path.getmtime(os.path.join(directory, n + ".log")))
    except OSError:
        return
    for name in runs[:-keep] if len(runs) > keep else []:
        if _in_flight(directory, name):
            continue
        with contextlib.suppress(OSError):
            os.remove(os.path.join(directory, name + ".log"))
        shutil.rmtree(os.path.join(directory, name + ".d"), ignore_errors=True)


def _in_flight(directory: str, name: str) -> bool:
    """Is this run still going (its process is alive and its log changed within a day)? Many ncclcheck processes
    share one log directory when nodes share a home or a host runs several (a lab of 16 namespace hosts): pruning
    by count alone deleted the side files of runs still writing them, which then failed."""
    pid = name.rsplit("-", 1)[-1]
    try:
        if not pid.isdigit() or int(pid) <= 1 or time.time() - os.path.getmtime(
                os.path.join(directory, name + ".log")) > 86400:
            return False
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except (OSError, OverflowError):
        return False
    return True


def _private_dir(directory: str, own: bool) -> None:
    """Make the log directory 0700: logs hold node facts, environment values and torch's messages. A directory of
    our own (the default one) that an older version left 0755 is tightened; one named by NCCLCHECK_LOG_DIR that
    already exists is the user's to set."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if own:
        st = os.stat(directory)
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(directory, 0o700)


def _private_file_handler(path: str):
    """A log file handler whose file is created 0600 (logging's own FileHandler creates it with the umask's mode,
    usually 0644), on the first record only (delay)."""
    import logging

    class PrivateFileHandler(logging.FileHandler):
        def _open(self):
            fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            return open(fd, self.mode, encoding=self.encoding, errors=self.errors)

    return PrivateFileHandler(path, encoding="utf-8", delay=True)


def _setup_logging() -> str:
    """Everything detailed (tracebacks, torch's native noise) goes to this run's log file, not the console.

    The file is created on the first record only (delay=True) and removed at exit when nothing was written, so
    a clean run leaves nothing behind; the last LOG_KEEP runs are kept."""
    import logging
    import tempfile

    directory = log_dir()
    try:
        _private_dir(directory, own=not os.environ.get("NCCLCHECK_LOG_DIR"))
    except OSError:
        directory = tempfile.gettempdir()
    host = log_host()
    _prune_logs(directory, LOG_KEEP - 1, host)
    path = os.path.join(directory, f"ncclcheck-{host}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    handler = _private_file_handler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if os.environ.get("NCCLCHECK_DEBUG") else logging.WARNING)
    return path


# torch's native lines that every healthy run may print (c10d, when the hostname does not resolve as it expects):
# they alone are not "something to log", so a clean run leaves no log and its report points at none.
TORCH_NOISE = ("The hostname of the client socket cannot be retrieved",)
_NOISE_SCAN_BYTES = 1 << 16  # a log longer than this holds more than noise


def has_content(path: Optional[str]) -> bool:
    """Does the log hold anything besides torch's routine noise (so that printing its path points the user at
    details)?"""
    try:
        size = os.path.getsize(path) if path else 0
        if size == 0:
            return False
        if size > _NOISE_SCAN_BYTES:
            return True
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return False
    return any(not any(n in ln for n in TORCH_NOISE) for ln in lines)


def _finish_logging(path: str) -> None:
    """Remove this run's log (and side directory) when nothing was written to them."""
    import logging

    for h in list(logging.getLogger().handlers):
        if getattr(h, "baseFilename", None) == os.path.abspath(path):
            h.close()
            logging.getLogger().removeHandler(h)
    side = path[:-4] + ".d"
    if os.path.isdir(side):
        for name in os.listdir(side):
            f = os.path.join(side, name)
            if os.path.isfile(f) and not has_content(f):
                with contextlib.suppress(OSError):
                    os.remove(f)
        with contextlib.suppress(OSError):
            os.rmdir(side)
    if os.path.exists(path) and not has_content(path) and not os.path.isdir(side):
        with contextlib.suppress(OSError):
            os.remove(path)


def _run(config: Config, observer=None, placement=None):
    """The command's runner from the commands table (the same call the Python API makes); `placement` is the
    launcher's world the CLI read once (config_from_args)."""
    from . import api

    return api.run_command(config, observer, placement)


class Seat(NamedTuple):
    """What this process prints and writes. One report per job: global rank 0 (node 0's agent in launcher mode)
    prints the full report; every other node's leader prints one line; other ranks print nothing."""

    full: bool  # the full report (or, with --quiet, the verdict)
    line: bool  # one line: node, verdict, where the full report is
    writes: bool  # --json/--html/... files (node leaders; every rank when a path has %r)
    launcher: str = "ncclcheck"
    rank: int = 0
    node_rank: int = 0


def seat_of(config: Config, placement, per_rank_paths: bool = False, per_node_paths: bool = False) -> Seat:
    """writes: the default rule of render.files.own_path (global rank 0 writes a path shared by every node; %n/%h
    paths or --print-all add the other nodes' first ranks, %r paths every rank); each file is decided by it."""
    out = config.output
    if placement is None or not command(config.command).world:
        leader = placement is None or placement.node_leader
        return Seat(full=leader, line=False, writes=leader or per_rank_paths,
                    launcher=placement.launcher if placement else "ncclcheck")
    full = placement.rank == 0 or out.print_all
    if config.command == "recommend" and config.recommend_format != "text":
        full = placement.node_leader or out.print_all  # per-node data on stdout (`> nccl.env` on every node)
    writes = placement.rank == 0 or per_rank_paths or (placement.node_leader and (per_node_paths or out.print_all))
    return Seat(full=full, line=not full and placement.node_leader and not out.quiet, writes=writes,
                launcher=placement.launcher, rank=placement.rank, node_rank=placement.node_rank)


def own_outputs(config: Config, placement, templates: dict) -> tuple[Config, Optional[str]]:
    """(config with only the output paths this process writes, the --save-baseline path it writes or None).

    The baseline is taken out of the API's hands so that the CLI writes it like every other file: once per job,
    and refused for a failed run unless --force (_emit)."""
    import dataclasses

    from .render.files import own_path, per_rank
    from .render.formats import FORMATS

    if placement is None or command(config.command).node_local:
        leader = placement is None or placement.node_leader

        def mine(flag: str, path: Optional[str]) -> Optional[str]:
            return path if leader or per_rank(templates.get(flag)) else None
    else:
        def mine(flag: str, path: Optional[str]) -> Optional[str]:
            if flag in FORMATS and FORMATS[flag].node_local:
                return path if placement.node_leader or per_rank(templates.get(flag)) else None
            return own_path(path, templates.get(flag), rank=placement.rank, node_rank=placement.node_rank,
                            node_leader=placement.node_leader, every_node=config.output.print_all)

    files = {name: mine(name, path) for name, path in config.output.files.items()}
    output = dataclasses.replace(config.output, files={name: path for name, path in files.items() if path})
    changes: dict = {"output": output}
    save = None
    if config.bench is not None and config.bench.save_baseline:
        save = mine("save_baseline", config.bench.save_baseline)
        changes["bench"] = dataclasses.replace(config.bench, save_baseline=None)
    if config.baseline is not None and config.baseline.save:
        save = mine("save_baseline", config.baseline.save)
        changes["baseline"] = dataclasses.replace(config.baseline, save=None)
    return dataclasses.replace(config, **changes), save


def _observer(config: Config, seat: Seat):
    """Progress and each measured row on the console that prints the full report: a live bar on a terminal, plain
    flushed lines on a pipe or in a file (render/progress.py). Every node's leader says on stderr what it waits for
    while it waits (rendezvous/waits.py): the other nodes and a `--json -` run through an observer of those lines
    alone. --quiet: none of it."""
    if not command(config.command).progress or config.output.quiet or not (seat.full or seat.line):
        return None
    from .render.progress import WaitLines, make_observer

    if not seat.full or "-" in config.output.files.values():
        return WaitLines(sys.stderr, command=config.command)
    return make_observer(sys.stdout, os.environ, seat.launcher, waits=sys.stderr, command=config.command)


def _one_line(config: Config, report, seat: Seat, given: tuple = ()) -> str:
    """The line a non-zero node prints: who it is, its verdict and exit code, where the full report is; `given`:
    the files asked for that node 0 writes and this process does not. Node 0's console and files are named only
    when node 0's word reached this process (Report.node_0_reported): a wrong master address leaves no node 0 that
    ran, and this line is then all the report there is."""
    from .facts import hostname

    me = next((n.hostname for n in report.nodes if n.node_rank == seat.node_rank), None) or hostname()
    first = next((n.hostname for n in report.nodes if n.node_rank == 0), None)
    where = ("full report on global rank 0's console" + (f" (node 0, {first})" if first else " (node 0)")
             if report.node_0_reported else "this line is the whole report: no word from node 0 reached this node")
    text = (f"ncclcheck {report.command}: node {seat.node_rank} ({me}) rank {seat.rank}: {report.status.value.upper()}"
            f", exit {report.exit_code}; {where}")
    if config.output.json_path and config.output.json_path != "-":
        text += f"; JSON in {config.output.json_path}"
    if given:  # one report per job: say where it is and how to get this node's own
        files = ", ".join(given)
        text += (f"; {f'node 0 writes {files}' if report.node_0_reported else f'{files} not written: node 0 writes it'}"
                 " (this node writes its own with %n or %h in the path, or with --print-all)")
    root = report.root_cause() if report.status.value == "fail" else None
    if root is not None:  # a world that did not form has no shared report: say here what went wrong from this side
        text += f"; root cause{'' if root.node is None else f' on node {root.node}'}: [{root.id}] {root.summary}"
    from .render.common import one_line

    return one_line(text)  # hostnames and summaries came from other nodes: one line, whatever they hold


def _save_baseline(path: Optional[str], force: bool, report) -> None:
    """--save-baseline: a later run is judged against this file, so a FAILED run is refused unless --force."""
    if not path:
        return
    if report.status.value == "fail" and not force:
        _say(f"ncclcheck: --save-baseline {path}: not saved: this run FAILED (a baseline is what later runs are "
             "judged against); --force saves it anyway")
        return
    from .render.files import write_atomic

    note = write_atomic(path, report.to_json())
    if note:
        _say(f"ncclcheck: --save-baseline: {note}")


def _not_mine(asked: Config, mine: Config) -> tuple:
    """The output files asked for that another process (node 0) writes, for this node's one line."""
    return tuple(path for name, path in asked.output.files.items() if path != "-" and name not in mine.output.files)


def _emit(config: Config, report, log_path: str, seat: Optional[Seat] = None, given: tuple = (),
          rows_shown: bool = False) -> None:
    import dataclasses

    from .render import console as view
    from .render.formats import FORMATS

    seat = seat or Seat(full=report.prints, line=False, writes=report.prints)
    if not report.log_path and has_content(log_path):  # printed only when it holds the details referred to
        report = dataclasses.replace(report, log_path=log_path)
    out = config.output
    # The paths in config.output are this process's own (own_outputs): write each one given.
    to_stdout = {name for name, path in out.files.items() if path == "-"}
    if seat.full:
        for name in to_stdout:  # the machine-readable report is the whole of stdout (the console goes to stderr)
            sys.stdout.write(FORMATS[name].render(report))
            sys.stdout.flush()
    from .render.files import write_outputs

    write_outputs(report, on_note=lambda note: print(f"ncclcheck: {note}", file=sys.stderr),
                  **{name: path for name, path in out.files.items() if name not in to_stdout})
    if out.format == "labels" and seat.full:
        from .render.labels import render_labels

        sys.stdout.write(render_labels(report))
        return  # stdout is the script; nothing else may be mixed into it
    machine_stdout = bool(to_stdout) or (config.command == "recommend" and config.recommend_format != "text")
    term = view.make_console(sys.stderr if machine_stdout else sys.stdout, os.environ, seat.launcher)
    if not seat.full:
        if seat.line:
            term.print(_one_line(config, report, seat, given), markup=False, highlight=False, soft_wrap=True)
        return
    if config.command == "recommend" and config.recommend_format in ("env", "json"):
        if config.recommend_format == "env":
            from .render.envfile import render_envfile

            sys.stdout.write(render_envfile(report))
        else:
            import json

            sys.stdout.write(json.dumps([r.to_json() for r in report.recommendations], indent=2) + "\n")
        from .render.common import one_line

        bad = [c for c in report.checks if c.status.value in ("fail", "warn")]
        for c in bad:
            # one line each, however long: wrapped, its second half was no comment in a pasted block
            term.print(one_line(f"# {c.status.value}: [{c.id}] {c.summary}" + (f" -- fix: {c.fix}" if c.fix else "")),
                       markup=False, highlight=False, soft_wrap=True)
        return
    if config.command == "env":
        for part in view.render_env(report):
            term.print(part)
        return
    written = [path for name, path in out.files.items() if name != "json" and path != "-"]
    if out.quiet or (config.command == "report" and written):
        # `report RUN.json --html F` renders a saved run into files: the verdict says what is in them, not the
        # whole text report again (issue 24)
        term.print(view.verdict(report))
        if not out.quiet:
            term.print(f"wrote {', '.join(written)}", markup=False, highlight=False, soft_wrap=True)
        return
    view.print_parts(term, view.render_report(report, verbose=out.verbose, rows_shown=rows_shown))


@contextlib.contextmanager
def _native_stderr_to(log_path: str) -> Iterator[None]:
    """torch's C++ code (c10d, gloo, NCCL) writes to fd 2 whenever it likes ("[c10d] The hostname of the client
    socket cannot be retrieved..."): point fd 2 at the run's log for the whole run, in every mode (spawned ranks
    inherit it), while Python's sys.stderr keeps writing to the console through a duplicate of the old fd 2."""
    import logging

    try:
        saved = os.dup(2)
        target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        yield
        return
    old_stderr = sys.stderr
    console = None
    try:
        sys.stderr.flush()
    except (AttributeError, ValueError, OSError):
        pass
    if old_stderr is sys.__stderr__ and old_stderr is not None:
        console = os.fdopen(os.dup(saved), "w", buffering=1, encoding=getattr(old_stderr, "encoding", None) or
                            "utf-8", errors="backslashreplace")
        sys.stderr = console
    os.dup2(target, 2)
    os.close(target)
    logging.captureWarnings(True)  # torch's Python warnings belong in the log too
    try:
        yield
    finally:
        logging.captureWarnings(False)
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        if console is not None:
            sys.stderr = old_stderr
            console.close()


def _say(line: str) -> None:
    """A line on stderr before any report exists (usage error, interrupted): once per node, not once per rank."""
    from .agent.launchers import speaks_for_node

    if speaks_for_node(os.environ):
        print(line, file=sys.stderr)


def _value_flags(parser: argparse.ArgumentParser) -> set:
    """Every option string, of every subcommand, that takes a value."""
    out: set = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _value_flags(sub)
        elif action.option_strings and action.nargs != 0:
            out.update(action.option_strings)
    return out


def join_dash_values(parser: argparse.ArgumentParser, argv: list) -> list:
    """`--sizes -1M` -> `--sizes=-1M`: argparse takes a value that starts with '-' and a digit or '.' for an option
    and answers a bare "expected one argument"; joined, the flag's own check names what is wrong with the value
    ("sizes cannot be negative"), as `--sizes=-1M` already did."""
    flags, out, i = _value_flags(parser), [], 0
    while i < len(argv):
        a = argv[i]
        if a in flags and i + 1 < len(argv) and len(argv[i + 1]) > 1 and argv[i + 1][0] == "-" \
                and (argv[i + 1][1].isdigit() or argv[i + 1][1] == "."):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread, so it takes Ctrl-C's path: partial report,
    then exit 143. A second SIGTERM while that report is written is ignored (Slurm sends one, then SIGKILL after
    KillWait). Only in the main thread, where Python delivers signals; the previous handler is restored after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Optional[list] = None) -> int:
    with _sigterm_as_interrupt():
        try:
            return _main_argv(argv)
        except KeyboardInterrupt as exc:  # before any report existed (parsing flags, setting up the log)
            _say("ncclcheck: " + _interrupted_word(exc))
            return _interrupt_code(exc)


def _interrupt_code(exc: BaseException) -> int:
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def _interrupted_word(exc: BaseException) -> str:
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


def _main_argv(argv: Optional[list]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Text is cleaned where it enters (clean.clean_text); should a character no encoding holds (a lone surrogate)
    # get past that anyway, the console prints "?" for it rather than losing the report to an exception.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError, OSError):  # not a text stream of its own (a test's capture)
            pass
    parser = build_parser(command_in(argv))  # only the named command's flags: --help alone builds none
    try:
        args = parser.parse_args(join_dash_values(parser, argv))
        if not args.command:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        config = config_from_args(args)
    except UsageError as exc:
        _say(f"ncclcheck: error: {clean_name(str(exc))}")  # one line, whatever a file's name holds
        return EXIT_USAGE
    log_path = _setup_logging()
    with _native_stderr_to(log_path):
        return _run_and_emit(args, config, log_path)


def _run_and_emit(args: argparse.Namespace, config: Config, log_path: str) -> int:
    try:
        return _main(args, config, log_path)
    finally:
        _finish_logging(log_path)


def _main(args: argparse.Namespace, config: Config, log_path: str) -> int:
    import dataclasses
    import logging

    from .render.files import per_rank
    from .steps.world import Clock

    clock = Clock()
    try:
        placement = getattr(args, "_placement", None) or placement_of(config.command, config.world, os.environ)
        templates = getattr(args, "_templates", {})
        asked = config
        config, save = own_outputs(config, placement, templates)
        seat = seat_of(config, placement, any(per_rank(t) for t in templates.values()))
        observer = _observer(config, seat)
        try:
            report = _run(config, observer, placement)
        except KeyboardInterrupt as exc:
            # Before the command's own pipeline had a report (a rank importing torch or joining the store when
            # torchrun forwarded scancel's SIGTERM): the partial report is written all the same.
            if not command(config.command).world:
                raise
            from . import api

            report = api.interrupted_report(config, placement, interruption(exc), clock)
        finally:
            if observer is not None:
                observer.stop()  # a bar left running would garble the report (or the error) printed next
        if report.interrupted:  # the partial report is written; its exit code and ours say what cut it short
            report = dataclasses.replace(report, interrupt_code=EXIT_TERMINATED if report.interrupted_by == "SIGTERM"
                             else EXIT_INTERRUPTED)
        _emit(config, report, log_path, seat, _not_mine(asked, config), getattr(observer, "streamed", 0) > 0)
        _save_baseline(save, bool(getattr(args, "force", False)), report)
        if report.interrupted:
            _say("ncclcheck: " + ("terminated (SIGTERM)" if report.interrupted_by == "SIGTERM" else "interrupted"))
        return report.exit_code
    except UsageError as exc:
        _say(f"ncclcheck: error: {clean_name(str(exc))}")  # one line, whatever a file's name holds
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        _say("ncclcheck: " + _interrupted_word(exc))
        return _interrupt_code(exc)
    except Exception as exc:  # noqa: BLE001 - the one place that turns a bug into exit 3 with the log's path
        logging.getLogger("ncclcheck").exception("internal error")
        print(f"ncclcheck: internal error: {type(exc).__name__}: {exc} -- this is a bug; details in {log_path}",
              file=sys.stderr)
        return EXIT_INTERNAL
