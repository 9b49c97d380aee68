"""Writing the rendered reports to the paths given on the command line (every format of render/formats.py).

The CLI calls check_writable() on every output path BEFORE running, so a typo in a path is a usage error (exit 2) in
a second instead of a lost report after a long bench. write_outputs() writes each file atomically (temp file in the
same directory, then rename), so a CI step never reads half a report.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from typing import Optional, Union

from ..errors import UsageError
from ..model import Report, clean_text


def expand_path(template: str, fields: Mapping[str, object]) -> str:
    """Expand %j (job id), %n (node rank), %h (hostname), %r (global rank) and %% in an output path, like
    NCCL_DEBUG_FILE's %h/%p. Other %x sequences stay as they are."""
    out, i = [], 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):
            key = template[i + 1]
            if key == "%":
                out.append("%")
                i += 2
                continue
            if key in fields:
                out.append(_path_part(str(fields[key])))
                i += 2
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _path_part(value: str) -> str:
    """A hostname or job id as one file-name part: a path separator, '..' or a NUL from it never escapes the
    directory the user named (a host called 'x/../../etc' became a path outside it)."""
    part = value.replace("/", "_").replace("\\", "_").replace("\0", "_")
    return "_" * len(part) if part in (".", "..") else part.replace("..", "__")


def per_rank(template: Optional[str]) -> bool:
    """Does this path name one file per rank (%r), so every rank of a node writes its own?"""
    return bool(template) and "%r" in template.replace("%%", "")


def distinct_per_node(template: Optional[str]) -> bool:
    """Does this path name a different file on every node (%n, %h or %r), so no node can overwrite another's?"""
    bare = (template or "").replace("%%", "")
    return any(k in bare for k in ("%n", "%h", "%r"))


def node_copy_path(path: str, node_rank: int) -> str:
    """Where node N's own report goes under --print-all when the path is the same on every node: `run.json` ->
    `run.node1.json`, beside the job's report and never over it."""
    head, name = os.path.split(path)
    stem, dot, ext = name.rpartition(".")
    name = f"{stem}.node{node_rank}.{ext}" if dot and stem else f"{name}.node{node_rank}"
    return os.path.join(head, name)


def own_path(path: Optional[str], template: Optional[str], *, rank: int, node_rank: int, node_leader: bool,
             every_node: bool = False) -> Optional[str]:
    """The path this process writes one output file to, or None when another process writes it.

    One report per job (issue 24): a path that is the same on every node (no %n/%h/%r) holds the job's report and
    only global rank 0 writes it, so on a filesystem the nodes share the last node to finish no longer overwrites
    node 0's full report with its own partial one. A path with %n or %h is written by each node's first rank, one
    with %r by every rank. `every_node` (--print-all, the console's "every node its own report") makes the other
    nodes write theirs too, at node_copy_path() when the path is shared."""
    if not path or path == "-":
        return path
    template = template or path
    if per_rank(template):
        return path
    if distinct_per_node(template):
        return path if node_leader else None
    if rank == 0:
        return path
    if every_node and node_leader:
        return node_copy_path(path, node_rank)
    return None


def check_writable(path: str) -> None:
    """Raise UsageError (one line) when `path` cannot be written: missing directory, a directory, no permission."""
    if not path or not str(path).strip():
        raise UsageError("output path is empty")
    path = os.path.abspath(os.path.expanduser(str(path)))
    parent = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a directory")
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {path}: directory {parent} does not exist")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied")
    # Creating the temp file is what write_outputs will need: probe exactly that (root ignores mode bits, so
    # os.access alone would say yes on a read-only mount).
    try:
        fd, probe = tempfile.mkstemp(prefix=".ncclcheck-probe-", dir=parent)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
    os.close(fd)
    os.unlink(probe)


# Never set on a file ncclcheck creates, whatever mode the old file had: group/world write (anyone could append to
# an env file before root sources it) and setuid/setgid/sticky (a report is not a program).
_NEVER = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def write_atomic(path: str, data: Union[str, bytes], private: bool = True) -> Optional[str]:
    """Write data to path through a temp file in the same directory and a rename; returns a one-line note when the
    path was a symbolic link (or not a regular file), else None.

    An existing regular file keeps its read bits (a report someone made 0644 for a dashboard stays readable), never
    its group/world write or setuid bits. A path that is a symbolic link is never followed for its mode (a planted
    `nccl.env -> /dev/null` would give 0666, a link to a setuid binary 04755): the link itself is replaced by the new
    file and the note says so. A new file is 0600 when `private` (reports carry node facts and environment values:
    JSON, HTML, Markdown, JUnit, env files), else 0644 less the umask (Prometheus' textfile collector reads its files
    as another user)."""
    path = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(path) or "."
    fresh = 0o600 if private else 0o644 & ~_umask()
    note = None
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is None:
        mode = fresh
    elif stat.S_ISREG(st.st_mode):
        mode = stat.S_IMODE(st.st_mode) & ~_NEVER
    else:
        mode = fresh
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            what = f"a symbolic link (to {target[:200]})"
        else:
            what = "not a regular file"
        # the link's target was planted by someone else: no escape sequence of theirs reaches a terminal
        note = clean_text(f"{path} was {what}: replaced it with a new file (mode {mode:04o}), not written "
                          "through it").replace("\n", " ")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            # text is cleaned where it enters (clean.clean_text); a character no UTF-8 can hold that got past it
            # anyway (a lone surrogate) is written as "?", never an exception that loses the report
            f.write(data.encode("utf-8", "replace") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return note


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_outputs(report: Report, on_note: Optional[Callable[[str], None]] = None, **paths: Optional[str]) -> list[str]:
    """Render and write each requested file, keyed by format name (render/formats.py: json=, html=, markdown=,
    junit=, env_out=, prometheus=); returns the absolute paths written, in argument order. `on_note` hears each
    path that was a symbolic link and was replaced (write_atomic), so the console can say so.

    Raises UsageError when a path cannot be written (the CLI should have called check_writable first).
    """
    from .formats import FORMATS

    unknown = [k for k in paths if k not in FORMATS]
    if unknown:
        raise TypeError(f"write_outputs: unknown format {', '.join(unknown)} (known: {', '.join(FORMATS)})")
    written: list[str] = []
    for kind, path in paths.items():
        if not path:
            continue
        text = FORMATS[kind].render(report)
        try:
            note = write_atomic(path, text, private=FORMATS[kind].private)
        except OSError as err:
            raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
        if note and on_note is not None:
            on_note(note)
        written.append(os.path.abspath(os.path.expanduser(path)))
    return written
