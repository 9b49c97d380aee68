"""Writing the rendered reports to the paths given on the command line (every format of render/formats.py).

The CLI calls check_writable() on every output path BEFORE running, so a typo in a path is a usage error (exit 2) in
a second instead of a lost report after a long bench. write_outputs() writes each file atomically (temp file in the
same directory, then rename), so a CI step never reads half a report.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Optional, Union

from ..errors import UsageError
from ..model import Report


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
                out.append(str(fields[key]))
                i += 2
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def per_rank(template: Optional[str]) -> bool:
    """Does this path name one file per rank (%r), so every rank of a node writes its own?"""
    return bool(template) and "%r" in template.replace("%%", "")


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


def write_atomic(path: str, data: Union[str, bytes]) -> None:
    """Write data to path through a temp file in the same directory and a rename."""
    path = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_outputs(report: Report, **paths: Optional[str]) -> list[str]:
    """Render and write each requested file, keyed by format name (render/formats.py: json=, html=, markdown=,
    junit=, env_out=, prometheus=); returns the absolute paths written, in argument order.

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
            write_atomic(path, text)
        except OSError as err:
            raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
        written.append(os.path.abspath(os.path.expanduser(path)))
    return written
