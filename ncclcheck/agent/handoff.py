"""What an agent hands a local rank it spawns: the job as a "module:qualname" reference and the rest as JSON.

    data = Handoff.of(job_fn, payload).for_rank(spec)   # parent: bytes for the child's stdin (HandoffError if not)
    spec, job_fn, payload = decode(data)                # child: validated, the job resolved by import

Never pickle (a pickle runs code when loaded; the project reads pickles only through postmortem/unpickle.py). A job is
named by where it is defined and imported in the child attribute by attribute, so only a function importable at module
level can be a job: a lambda, a closure or a function of `__main__` (a script, a heredoc, the REPL: the child's
`__main__` is its own) is refused in the parent with one line, before any rank starts. The description is bounded
(MAX_BYTES) and every field is type-checked on read: a wrong byte is a refused rank, never a traceback or a hang.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import re
import sys
import types
from typing import Any, Callable, Optional

from ..rendezvous.budget import Budget

# A rank's whole description (the parent's sys.path, the spec, the job's payload) is a few KiB; a bench payload with
# every size of a sweep is under 4 KiB. Far above anything real, far below what would hurt a node's memory.
MAX_BYTES = 8 << 20
MAX_REF = 512  # characters of a "module:qualname" reference
MAX_PATH_ENTRIES = 4096  # sys.path entries
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"{_IDENT}(?:\.{_IDENT})*")
FORMAT = "ncclcheck-rank/1"

# The spec a rank needs, field -> accepted types (the parent's agent/runner.py _spawn_ranks builds it).
_STR, _INT, _OPT_STR = (str,), (int,), (str, type(None))
SPEC_FIELDS: dict = {
    "host": _STR, "port": _INT, "prefix": _STR, "rank": _INT, "world_size": _INT, "local_rank": _INT,
    "local_world_size": _INT, "node_rank": _INT, "nnodes": _INT, "backend": _STR, "log_path": _OPT_STR,
    "log_dir": _OPT_STR, "progress": (bool,), "env": (dict,), "token": (bytes, type(None)), "budget": (Budget,),
}


class HandoffError(ValueError):
    """A job or a rank's description that cannot be handed over (parent) or is not one (child): one line."""


def job_ref(job_fn: Callable) -> str:
    """The "module:qualname" reference a spawned rank imports job_fn by; HandoffError when it would not find the same
    function there (a lambda, a closure, a function of __main__, a name rebound since)."""
    mod, qual = getattr(job_fn, "__module__", None), getattr(job_fn, "__qualname__", None)
    ref = f"{mod}:{qual}"
    why = None
    if not isinstance(job_fn, types.FunctionType) or not isinstance(mod, str) or not isinstance(qual, str):
        why = "not a plain function"
    elif mod == "__main__":
        why = "defined in __main__ (a script, a heredoc or the REPL), which a spawned rank does not import"
    elif not _valid_ref(mod, qual):
        why = "not reachable by name from its module (a lambda or a nested function)"
    else:
        try:
            if resolve(ref) is not job_fn:
                why = "its module's attribute of that name is another object"
        except HandoffError as exc:
            why = str(exc)
    if why:
        raise HandoffError(f"job {ref!s:.{MAX_REF}} cannot run in a spawned rank: {why}; "
                           "pass a function defined at the top level of an importable module")
    return ref


def _valid_ref(mod: str, qual: str) -> bool:
    return len(mod) + len(qual) < MAX_REF and bool(_DOTTED.fullmatch(mod)) and bool(_DOTTED.fullmatch(qual))


def resolve(ref: Any) -> Callable:
    """The function a "module:qualname" reference names: the module imported, the qualname walked attribute by
    attribute; HandoffError unless it ends on a plain function defined under that very name."""
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise HandoffError("the job is not a 'module:qualname' reference")
    mod, qual = ref.split(":")
    if not _valid_ref(mod, qual) or mod == "__main__":
        raise HandoffError(f"the job reference {ref[:MAX_REF]!r} is not a dotted module name and qualname")
    try:
        obj: Any = importlib.import_module(mod)
    except Exception as exc:  # noqa: BLE001 - any import failure is this reference's refusal, in one line
        raise HandoffError(f"the job's module {mod!r} cannot be imported: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise HandoffError(f"the job {ref!r} does not exist ({part!r} not found)")
    if not isinstance(obj, types.FunctionType) or obj.__module__ != mod or obj.__qualname__ != qual:
        raise HandoffError(f"the job {ref!r} is not a function defined under that name")
    return obj


def _budget_fields() -> tuple:
    return tuple(f.name for f in dataclasses.fields(Budget))


def _to_json(spec: dict) -> dict:
    out = {}
    for name, types_ in SPEC_FIELDS.items():
        v = spec.get(name)
        if not isinstance(v, types_) or (types_ is _INT and isinstance(v, bool)):
            raise HandoffError(f"spec field {name!r} is {type(v).__name__}, not {'/'.join(t.__name__ for t in types_)}")
        if name == "budget":
            v = {f: getattr(v, f) for f in _budget_fields()}
        elif name == "token":
            v = None if v is None else v.hex()
        out[name] = v
    return out


class Handoff:
    """The part of every local rank's description that is the same for all of them, validated once."""

    def __init__(self, ref: str, payload: Any, path: list) -> None:
        self.ref, self.payload, self.path = ref, payload, path

    @classmethod
    def of(cls, job_fn: Callable, payload: Any) -> Handoff:
        """HandoffError (one line) for a job that a spawned rank could not import, or a payload that is not JSON."""
        ref = job_ref(job_fn)
        try:
            json.dumps(payload, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise HandoffError(f"the payload of job {ref} is not JSON: {exc}") from None
        return cls(ref, payload, [p for p in sys.path if isinstance(p, str)])

    def for_rank(self, spec: dict) -> bytes:
        data = json.dumps({"format": FORMAT, "path": self.path, "job": self.ref, "spec": _to_json(spec),
                           "payload": self.payload}, allow_nan=False, separators=(",", ":")).encode()
        if len(data) > MAX_BYTES:
            raise HandoffError(f"the description of job {self.ref} is {len(data)} bytes, over the {MAX_BYTES} a "
                               "rank accepts")
        return data


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _spec_from_json(d: Any) -> dict:
    if not isinstance(d, dict) or set(d) != set(SPEC_FIELDS):
        raise HandoffError("the rank's spec does not have exactly the expected fields")
    spec = dict(d)
    for name, types_ in SPEC_FIELDS.items():
        v = d[name]
        if name == "budget":
            if not isinstance(v, dict) or set(v) != set(_budget_fields()) or not all(map(_number, v.values())):
                raise HandoffError("the rank's budget is not the Budget's fields, each a finite number")
            spec[name] = Budget(**{k: float(x) for k, x in v.items()})
        elif name == "token":
            if v is not None and (not isinstance(v, str) or not re.fullmatch(r"(?:[0-9a-f]{2})+", v)):
                raise HandoffError("the rank's token is not hex")
            spec[name] = None if v is None else bytes.fromhex(v)
        elif name == "env":
            if not all(isinstance(k, str) and isinstance(x, str) and "\0" not in k + x for k, x in v.items()):
                raise HandoffError("the rank's environment is not names and values (strings)")
        elif not isinstance(v, types_) or (types_ is _INT and isinstance(v, bool)):
            raise HandoffError(f"the rank's spec field {name!r} is {type(v).__name__}")
    return spec


def read_path(data: bytes) -> Optional[list]:
    """The parent's sys.path from a description (None when there is none fit to use): the child sets it before it
    imports the job's module, which may live beside the caller's script (tests/, a project's own package)."""
    try:
        p = json.loads(data).get("path")
    except (ValueError, AttributeError, RecursionError):
        return None
    if isinstance(p, list) and len(p) <= MAX_PATH_ENTRIES and all(isinstance(x, str) and "\0" not in x for x in p):
        return p
    return None


def decode(data: bytes) -> tuple:
    """(spec, job_fn, payload) from what the parent wrote; HandoffError (one line) for anything else."""
    if len(data) > MAX_BYTES:
        raise HandoffError(f"the rank's description is over {MAX_BYTES} bytes")
    try:
        d = json.loads(data)
    except (ValueError, RecursionError):
        raise HandoffError("the rank's description is not JSON") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT or set(d) != {"format", "path", "job", "spec", "payload"}:
        raise HandoffError(f"the rank's description is not a {FORMAT} document")
    if read_path(data) is None:
        raise HandoffError("the rank's sys.path is not a list of strings")
    spec = _spec_from_json(d["spec"])
    return spec, resolve(d["job"]), d["payload"]
