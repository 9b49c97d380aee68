"""Reading a file a user named or another machine wrote: every one opened the way diagnose opens its inputs and read
within a stated bound (issue 55: `preflight --nccl-ras FILE` and `--nccl-debug FILE` read whole files, and one
500 MB line cost 1 GB while the run passed).

- `open_regular`: a regular file only, opened without blocking (a FIFO would wait for a writer forever) and, for a
  file found by walking a directory, without following a link; NotRegular (an OSError) otherwise.
- `read_doc`: a document read whole (a saved report, a baseline, ncclras output): at most `limit` bytes, a larger
  file a UsageError naming the file and the bound, never a partial document read as if it were whole.
- `Lines`: a text read line by line (a saved NCCL_DEBUG capture): decoded as UTF-8 (undecodable bytes replaced),
  cleaned (clean.clean_log_text), each line cut at `line_chars` with a mark saying how much, at most `max_bytes`
  read; what was cut or left unread is counted (`cut`, `unread`), for the caller to say. Memory: one chunk and one
  line, whatever the file holds.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Iterator
from typing import Optional

from .clean import clean_log_text, clean_name
from .errors import UsageError

MAX_DOC_BYTES = 64 << 20  # a document (a saved report, a baseline, ncclras output) larger than this is not one:
# the largest report ncclcheck writes is a few MiB (postmortem/bound.py), `ncclras -f json` of 16,384 ranks ~20 MiB
CHUNK = 1 << 20  # bytes read at a time


class NotRegular(OSError):
    """The path is not a regular file (a FIFO, a device, a socket, a link found inside a directory)."""


def open_regular(path: str, named: bool = True) -> int:
    """A descriptor on a regular file, opened without blocking and, unless `named` (given by the user rather than
    found in a directory), without following a symbolic link; NotRegular otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if named else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not named:
            raise NotRegular("a symbolic link inside the directory (not followed)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise NotRegular(f"{kind}, not a regular file")
    return fd


def _opened(path: str, what: str) -> int:
    try:
        return open_regular(path)
    except NotRegular as exc:
        raise UsageError(f"{what}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{what}: cannot read it ({exc.strerror or exc})") from None


def read_doc(path: str, what: str, limit: int = MAX_DOC_BYTES) -> bytes:
    """The bytes of the document at `path`, at most `limit` of them; UsageError (one line, naming `what`, e.g.
    "--baseline run.json") when it cannot be read or is larger."""
    what = clean_name(what)
    with os.fdopen(_opened(path, what), "rb") as f:
        # its size first (nothing read when it is over), then at most limit + 1 bytes (a file still growing)
        over = os.fstat(f.fileno()).st_size > limit
        data = b"" if over else f.read(limit + 1)
    if over or len(data) > limit:
        raise UsageError(f"{what}: larger than {limit >> 20} MiB, more than any such file holds: not read")
    return data


class Lines:
    """The lines of a text file, read within bounds (see the module's docstring): iterate once."""

    def __init__(self, path: str, what: str, max_bytes: int, line_chars: int) -> None:
        self.what = clean_name(what)
        self.max_bytes, self.line_chars = max_bytes, line_chars
        self.read = 0  # bytes read
        self.cut = 0  # lines cut at line_chars
        self._fd: Optional[int] = _opened(path, self.what)
        self.size = os.fstat(self._fd).st_size

    @property
    def unread(self) -> int:
        """Bytes of the file past max_bytes, not read."""
        return max(0, self.size - self.read)

    def __iter__(self) -> Iterator[str]:
        assert self._fd is not None, "Lines is read once"
        fd, self._fd = self._fd, None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        carry, over = "", 0
        with os.fdopen(fd, "rb") as f:
            while self.read < self.max_bytes:
                chunk = f.read(min(CHUNK, self.max_bytes - self.read))
                if not chunk:
                    break
                self.read += len(chunk)
                lines = (carry + clean_log_text(decoder.decode(chunk))).split("\n")
                carry = lines.pop()
                for line in lines:
                    yield self._whole(line, over)
                    over = 0
                if len(carry) > self.line_chars:  # one line longer than a chunk: its start kept, the rest counted
                    over += len(carry) - self.line_chars
                    carry = carry[:self.line_chars]
        carry += clean_log_text(decoder.decode(b"", True))
        if carry or over:
            yield self._whole(carry, over)

    def _whole(self, line: str, over: int) -> str:
        if over or len(line) > self.line_chars:
            self.cut += 1
            more = over + max(0, len(line) - self.line_chars)
            return f"{line[:self.line_chars]} ... [cut: {more:,} more characters]"
        return line

    def said(self) -> str:
        """What was not read as it is, one phrase ("" when the whole file was read and no line cut)."""
        parts = []
        if self.unread:
            parts.append(f"its first {self.max_bytes >> 20} MiB read, {self.unread:,} bytes after them not")
        if self.cut:
            parts.append(f"{self.cut:,} line(s) longer than {self.line_chars:,} characters cut")
        return f"{self.what}: {'; '.join(parts)}" if parts else ""
