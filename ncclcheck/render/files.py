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
    """Raise UsageError (one line) when `path` cannot be written: missing directory, a directory, no permission, or
    a path write_atomic refuses (refusal())."""
    if not path or not str(path).strip():
        raise UsageError("output path is empty")
    path = os.path.abspath(os.path.expanduser(str(path)))
    parent = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a directory")
    why = refusal(path)
    if why:
        raise UsageError(f"cannot write {path}: {why}")
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


_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def refusal(path: str, st: Optional[os.stat_result] = None) -> Optional[str]:
    """Why ncclcheck will not put a report at `path`, or None. `st` is the path's lstat when the caller has it.

    A FIFO, socket or device is never replaced and never opened: opening a FIFO for writing blocks until someone
    reads it, and a report is a regular file (`--json -` is the way to a pipe). A path owned by another user in a
    sticky directory (/tmp) is someone else's to keep: the kernel's fs.protected_regular refuses `tee` there too,
    and a file planted for root's report (made readable to its planter, or watched by them) must not receive it."""
    if st is None:
        try:
            st = os.lstat(path)
        except OSError:
            return None
    for test, what in _SPECIAL:
        if test(st.st_mode):
            return f"it is {what}, not a regular file (a report is never written into one)"
    if stat.S_ISLNK(st.st_mode):
        # A link to a pipe, a terminal or a device is a way to one (/dev/stdout -> /proc/self/fd/1): replacing it
        # would remove that link for everyone (root writing `--json /dev/stdout` would delete /dev/stdout), and
        # following it would write into the device: neither. `-` writes a report to stdout.
        try:
            target = os.stat(path)
        except OSError:
            target = None
        for test, what in _SPECIAL if target is not None else ():
            if test(target.st_mode):
                return (f"it is a symbolic link to {what} ({os.readlink(path)}), not a file a report can replace "
                        "(`-` writes it to stdout)")
    if st.st_uid != os.geteuid():
        parent = os.path.dirname(path) or "."
        try:
            sticky = bool(os.stat(parent).st_mode & stat.S_ISVTX)
        except OSError:
            sticky = False
        if sticky:
            return (f"it belongs to {_user(st.st_uid)} and {parent} is a sticky directory (another user's file "
                    "there is theirs: remove it or write elsewhere)")
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def write_atomic(path: str, data: Union[str, bytes]) -> Optional[str]:
    """Write data to path through a temp file in the same directory and a rename; returns a one-line note when the
    path was a symbolic link, else None. Raises UsageError when refusal() refuses the path.

    The file gets the mode `tee` or a shell's `>` would give a new one: 0666 less the umask (and the directory's
    default ACL), whatever an existing file had, so `umask 022` shares a report and `umask 077` keeps it private;
    root never inherits the mode of a file someone planted. The kernel applies the umask as the temp file is
    created (O_CREAT 0666), as it does for tee: no umask() call, which would race other threads. A path that is a
    symbolic link is never followed, for its mode or for writing: the link itself is replaced by the new file and
    the note says so."""
    path = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(path) or "."
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    why = refusal(path, st)
    if why:
        raise UsageError(f"cannot write {path}: {why}")
    target = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
    fd, tmp = _create_temp(parent, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            # text is cleaned where it enters (clean.clean_text); a character no UTF-8 can hold that got past it
            # anyway (a lone surrogate) is written as "?", never an exception that loses the report
            f.write(data.encode("utf-8", "replace") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        # a rename never opens what it replaces: a FIFO planted after refusal() looked is unlinked, not written to
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if target is None:
        return None
    # the link's target was planted by someone else: no escape sequence of theirs reaches a terminal
    return clean_text(f"{path} was a symbolic link (to {target[:200]}): replaced it with a new file (mode "
                      f"{mode:04o}), not written through it").replace("\n", " ")


def _create_temp(parent: str, name: str) -> tuple[int, str]:
    """A new file beside the report, created O_EXCL|O_NOFOLLOW with mode 0666 for the kernel to apply the umask to
    (tempfile.mkstemp creates 0600, and a chmod after it would need the umask read)."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(parent, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {name} in {parent}")


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
            note = write_atomic(path, text)
        except OSError as err:
            raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
        if note and on_note is not None:
            on_note(note)
        written.append(os.path.abspath(os.path.expanduser(path)))
    return written
