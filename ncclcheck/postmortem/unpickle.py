"""Loading torch's pickled flight-recorder dumps without letting them run code: an Unpickler that admits only plain
containers and scalars. A dump can come from any rank of a job (or anyone who can write the directory), and a pickle
that names a class can execute anything when loaded, so every global is refused, as is persistent-id resolution."""

from __future__ import annotations

import io
import pickle

MAX_DUMP_BYTES = 256 << 20  # a 20,000-entry dump with stacks is a few MB; larger is not a dump


class RefusedPickle(ValueError):
    """The pickle asked for a class or function: it is not a plain flight-recorder dump."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        raise RefusedPickle(f"it references {module}.{name} (a flight-recorder dump holds only plain data)")

    def persistent_load(self, pid):  # noqa: D401 - pickle API
        raise RefusedPickle("it uses persistent ids (a flight-recorder dump does not)")


def is_pickle(head: bytes) -> bool:
    """Does this look like a pickle (protocol 2+ starts with PROTO)?"""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def loads_plain(data: bytes):
    """dicts, lists, tuples, str, bytes, numbers, bools and None from `data`; RefusedPickle for anything else,
    ValueError when it is not a pickle at all."""
    if len(data) > MAX_DUMP_BYTES:
        raise ValueError(f"{len(data)} bytes is larger than any flight-recorder dump")
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except RefusedPickle:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            MemoryError, RecursionError, UnicodeDecodeError, OverflowError) as exc:
        raise ValueError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None
