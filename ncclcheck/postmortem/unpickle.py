"""Loading torch's pickled flight-recorder dumps without letting them run code: an Unpickler that admits only plain
containers and scalars. A dump can come from any rank of a job (or anyone who can write the directory), and a pickle
that names a class can execute anything when loaded, so every global is refused, as is persistent-id resolution.

Plain data can still hurt: a tuple nested 10^6 deep kills the C unpickler with SIGSEGV when it is hashed (a dict key,
or later), 200 MB of memo references become gigabytes of pointers, a LONG4 integer of 8 KB cannot be printed. So the
opcode stream is scanned first, linearly and without building anything: nesting depth (MAX_DEPTH), objects and
references made (MAX_OBJECTS), integer size (MAX_INT_BYTES); only a pickle within those bounds is loaded."""

from __future__ import annotations

import io
import os
import pickle
import struct
import threading
from itertools import chain, compress
from typing import Optional

MAX_DUMP_BYTES = 64 << 20  # a 20,000-entry dump with 20-frame stacks is ~10 MB; larger is not a dump
MAX_DEPTH = 64  # a dump is ~6 levels deep (dict > entries > entry > frames > frame > str)
MAX_OBJECTS = 12_000_000  # objects and memo references made while loading (a 2,000-entry dump with stacks: ~500k)
MAX_INT_BYTES = 16  # torch's ids and sizes are int64 (LONG1 of 9 bytes at most)


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


# Each opcode's class for scan(), in a 256-entry table (list indexing is the fastest dispatch Python has), and the
# size of its fixed argument (_FIXED) or of its length prefix (_LEN1/_LEN4/_LEN8).
(_BINGET, _BAD, _CODE, _LEAF, _LEN1, _LEN4, _LEN8, _LONG1, _LONG4, _TEXT, _INTNL, _EMPTY, _ADD1, _ADD2, _ADDMARK,
 _BUILD, _TUPLE, _TUPLE1, _TUPLE2, _TUPLE3, _MARK, _POP, _POPMARK, _DUP, _PUT, _PUTNL, _MEMOIZE, _GET, _GETNL,
 _STOP) = range(30)
_CLASS = [_BAD] * 256
_FIXED = [0] * 256
for _codes, _cls, _n in (
        (b"c\x93Rbio\x81\x92PQ\x82\x83\x84\x97\x98", _CODE, 0),
        (b"N\x88\x89)", _LEAF, 0), (b"K", _LEAF, 1), (b"M", _LEAF, 2), (b"J", _LEAF, 4), (b"G", _LEAF, 8),
        (b"\x80", _BUILD, 1), (b"\x95", _BUILD, 8),  # PROTO, FRAME: skipped (_BUILD with no stack effect below)
        (b"UC\x8c", _LEN1, 0), (b"TBX", _LEN4, 0), (b"\x8e\x96\x8d", _LEN8, 0), (b"\x8a", _LONG1, 0),
        (b"\x8b", _LONG4, 0), (b"SVF", _TEXT, 0), (b"IL", _INTNL, 0), (b"]}\x8f", _EMPTY, 0), (b"a", _ADD1, 0),
        (b"s", _ADD2, 0), (b"eu\x90", _ADDMARK, 0), (b"ld", _TUPLE, 0), (b"t\x91", _TUPLE, 0),
        (b"\x85", _TUPLE1, 0), (b"\x86", _TUPLE2, 0), (b"\x87", _TUPLE3, 0), (b"(", _MARK, 0), (b"0", _POP, 0),
        (b"1", _POPMARK, 0), (b"2", _DUP, 0), (b"q", _PUT, 1), (b"r", _PUT, 4), (b"p", _PUTNL, 0),
        (b"\x94", _MEMOIZE, 0), (b"h", _BINGET, 1), (b"j", _GET, 4), (b"g", _GETNL, 0), (b".", _STOP, 0)):
    for _c in _codes:
        _CLASS[_c], _FIXED[_c] = _cls, _n


def scan(data: bytes) -> None:
    """Walk the opcode stream once, building nothing: ValueError (naming the bound) when the pickle would nest deeper
    than MAX_DEPTH, make more than MAX_OBJECTS objects and references, or hold an integer over MAX_INT_BYTES;
    RefusedPickle when it names a class, a function, an extension or a persistent id. Linear in the bytes."""
    stack: list = []  # the nesting depth of each stack item (0: a scalar)
    marks: list = []
    memo: dict = {}
    made = 0
    pos, end = 0, len(data)
    klass, fixed, u4, u8 = _CLASS, _FIXED, struct.Struct("<I").unpack_from, struct.Struct("<Q").unpack_from
    push = stack.append
    try:
        while pos < end:
            op = data[pos]
            k = klass[op]
            pos += 1
            if k == _BINGET:  # half of a torch dump's opcodes
                push(memo[data[pos]])
                pos += 1
                made += 1
                if made > MAX_OBJECTS:
                    raise ValueError(f"more than {MAX_OBJECTS} objects and references (a dump holds far fewer)")
            elif k == _LEN1:
                pos += 1 + data[pos]
                push(0)
                made += 1
                if made > MAX_OBJECTS:
                    raise ValueError(f"more than {MAX_OBJECTS} objects and references (a dump holds far fewer)")
            elif k == _MEMOIZE:
                memo[len(memo)] = stack[-1]
            elif k == _LEAF:
                pos += fixed[op]
                push(0)
                made += 1
                if made > MAX_OBJECTS:
                    raise ValueError(f"more than {MAX_OBJECTS} objects and references (a dump holds far fewer)")
            elif k == _PUT:
                i = data[pos] if fixed[op] == 1 else u4(data, pos)[0]
                if i > made + 1:  # the C unpickler sizes its memo to the index: 2^30 was 8 GB
                    raise ValueError(f"memo index {i} with {made} objects made (a pickler numbers them in order)")
                memo[i] = stack[-1]
                pos += fixed[op]
            elif k == _GET:
                push(memo[data[pos] if fixed[op] == 1 else u4(data, pos)[0]])
                pos += fixed[op]
                made += 1
                if made > MAX_OBJECTS:
                    raise ValueError(f"more than {MAX_OBJECTS} objects and references (a dump holds far fewer)")
            elif k == _MARK:
                marks.append(len(stack))
                made += 1
                if made > MAX_OBJECTS:
                    raise ValueError(f"more than {MAX_OBJECTS} objects and references (a dump holds far fewer)")
            elif k == _EMPTY:
                push(1)
                made += 1
                if made > MAX_OBJECTS:
                    raise ValueError(f"more than {MAX_OBJECTS} objects and references (a dump holds far fewer)")
            elif k == _ADDMARK or k == _TUPLE or k == _POPMARK:
                at = marks.pop()
                depth = 1 + max(stack[at:], default=0)
                del stack[at:]
                if k == _ADDMARK:
                    if depth > stack[-1]:
                        stack[-1] = depth
                elif k == _TUPLE:
                    push(depth)
                if depth > MAX_DEPTH:
                    raise ValueError(f"nested more than {MAX_DEPTH} levels deep (a dump is about 6)")
            elif k == _ADD1 or k == _ADD2:
                depth = 1 + (stack.pop() if k == _ADD1 else max(stack.pop(), stack.pop()))
                if depth > stack[-1]:
                    stack[-1] = depth
                if depth > MAX_DEPTH:
                    raise ValueError(f"nested more than {MAX_DEPTH} levels deep (a dump is about 6)")
            elif k == _TUPLE1 or k == _TUPLE2 or k == _TUPLE3:
                n = k - _TUPLE1 + 1
                depth = 1 + max(stack[-n:])
                if len(stack) < n:
                    raise IndexError
                del stack[-n:]
                push(depth)
                made += 1
                if depth > MAX_DEPTH:
                    raise ValueError(f"nested more than {MAX_DEPTH} levels deep (a dump is about 6)")
            elif k == _LEN4 or k == _LEN8:
                pos += (4 + u4(data, pos)[0]) if k == _LEN4 else (8 + u8(data, pos)[0])
                push(0)
                made += 1
            elif k == _LONG1 or k == _LONG4:
                n = data[pos] if k == _LONG1 else u4(data, pos)[0]
                if n > MAX_INT_BYTES:
                    raise ValueError(f"an integer of {n} bytes (the bound is {MAX_INT_BYTES}: torch's are int64)")
                pos += (1 if k == _LONG1 else 4) + n
                push(0)
                made += 1
            elif k == _TEXT or k == _INTNL or k == _PUTNL or k == _GETNL:
                nl = data.find(b"\n", pos, end if k == _TEXT else min(end, pos + 2 * MAX_INT_BYTES + 2))
                if nl < 0:
                    raise ValueError("a text argument with no end, or an integer of more than "
                                     f"{2 * MAX_INT_BYTES} digits")
                if k == _PUTNL:
                    i = int(data[pos:nl])
                    if i > made + 1:
                        raise ValueError(f"memo index {i} with {made} objects made (a pickler numbers them in order)")
                    memo[i] = stack[-1]
                elif k == _GETNL:
                    push(memo[int(data[pos:nl])])
                    made += 1
                else:
                    push(0)
                    made += 1
                pos = nl + 1
            elif k == _POP:
                stack.pop()
            elif k == _DUP:
                push(stack[-1])
            elif k == _BUILD:
                pos += fixed[op]
            elif k == _STOP:
                return
            elif k == _CODE:
                # a global, a call or an extension: the restricted unpickler refuses it there, naming what it asked
                # for, having built only what was scanned up to here
                return
            else:
                raise ValueError(f"byte {op:#x} at offset {pos - 1} is not a pickle opcode")
    except (IndexError, KeyError, struct.error):
        raise ValueError("not a readable pickle (its opcodes do not add up)") from None
    raise ValueError("not a readable pickle (it ends inside an argument or has no STOP)")


def walk_problem(value, limit: int = MAX_DEPTH, most: int = MAX_OBJECTS) -> Optional[str]:
    """Why this loaded value is not plain bounded data (nested deeper than `limit`, more than `most` items, dict keys
    included), or None. Level by level, every step an iterator of builtins (C speed: a 2,000-entry dump with stacks
    takes about as long as its load), never a RecursionError."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = seen = 0
    while level:
        depth += 1
        if depth > limit:
            return f"nested more than {limit} levels deep (a dump is about 6)"
        seen += sum(map(len, level))  # before the children are gathered: a list of 10^8 stops here
        if seen > most:
            return f"more than {most} objects (a dump holds far fewer)"
        types = list(map(type, level))
        dicts = list(compress(level, map(_IS_DICT, types)))
        children = list(chain(chain.from_iterable(dicts), chain.from_iterable(map(dict.values, dicts)),
                              chain.from_iterable(compress(level, map(_IS_OTHER, types)))))
        level = list(compress(children, map(_IS_CONTAINER, map(type, children))))
    return None


_CONTAINERS = frozenset((dict, list, tuple, set, frozenset))
_IS_CONTAINER = _CONTAINERS.__contains__
_IS_DICT = frozenset((dict,)).__contains__
_IS_OTHER = frozenset((list, tuple, set, frozenset)).__contains__
_TUPLE_OPS = (b"\x85", b"\x86", b"\x87", b"t", b"\x91")  # TUPLE1-3, TUPLE, FROZENSET: what hashing recurses into
FAST_TUPLE_OPS = 1_000_000  # a tuple that deep hashes in ~64 MB of C stack ...
LOADER_STACK = 256 << 20  # ... so the C unpickler runs in a thread with this much (reserved, touched only if used)


def loads_plain(data: bytes):
    """dicts, lists, tuples, str, bytes, numbers, bools and None from `data`; RefusedPickle for anything else,
    ValueError when it is not a pickle at all or exceeds a bound.

    Fast path (C speed), when the bytes hold at most FAST_TUPLE_OPS tuple opcodes: no tuple can nest deeper than
    that, so the C unpickler runs in a thread whose stack holds that much hashing, under an address-space bound
    (load_memory(): a memo index of 2^30 or a flood of memo references is a MemoryError, not gigabytes), and the
    result is walked for depth and size. Otherwise (or where the address space cannot be bounded) scan() checks the
    opcode stream first, in Python: ~8x slower, always safe."""
    if len(data) > MAX_DUMP_BYTES:
        raise ValueError(f"{len(data)} bytes is larger than any flight-recorder dump (the bound is "
                         f"{MAX_DUMP_BYTES >> 20} MiB)")
    if sum(data.count(c) for c in _TUPLE_OPS) <= FAST_TUPLE_OPS:
        box: list = []
        _in_big_stack(lambda: box.append(_bounded(lambda: _load(data), load_memory(len(data)))))
        if box and box[0] is not _NO_BOUND:
            kind, value = box[0]
            if kind == "error":
                raise value
            problem = walk_problem(value)
            if problem:
                raise ValueError(problem)
            return value
    scan(data)
    try:
        return _load(data)
    except MemoryError:
        raise ValueError("not a readable pickle (MemoryError)") from None


def load_memory(nbytes: int) -> int:
    """The address space one pickle may add while it loads: a real dump needs ~10x its size."""
    return (256 << 20) + 16 * nbytes


_NO_BOUND = object()


def _in_big_stack(fn) -> None:
    old = threading.stack_size()
    try:
        threading.stack_size(LOADER_STACK)
        t = threading.Thread(target=fn, name="ncclcheck-unpickle", daemon=True)
        t.start()
    finally:
        threading.stack_size(old)
    t.join()


def _bounded(fn, extra: int):
    """("ok", value) or ("error", exc) of fn() under RLIMIT_AS = what the process maps now + extra; _NO_BOUND where
    the limit cannot be read or set (then scan() decides, in Python)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = mapped + extra
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        return _NO_BOUND
    try:
        return ("ok", fn())
    except (ValueError, MemoryError) as exc:
        return ("error", exc if isinstance(exc, ValueError) else
                ValueError(f"it needs more than {extra >> 20} MiB of memory to load (a real dump needs about 10 "
                           "times its size)"))
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _load(data: bytes):
    """The C unpickler, restricted to plain data; its errors as ValueError (MemoryError passes: _bounded names it)."""
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except RefusedPickle:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            RecursionError, UnicodeDecodeError, OverflowError) as exc:
        raise ValueError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None
