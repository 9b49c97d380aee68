"""The saved report's JSON Schema (report-1.schema.json, published) and the one validator every reader of a saved
report goes through: `ncclcheck report`, and each `--baseline` (preflight, health, bench, links, sweep).

A small validator for the keywords the schema uses (type, required, properties, additionalProperties, items, enum,
const, minimum, minLength, pattern, $ref to #/$defs): jsonschema is a test dependency, not a runtime one. Returns the
first problem as one line naming where it is, e.g. "checks[0].status: 'ok' is not one of pass, warn, fail, skip".
The schema types the facts a reader of a saved run uses (versions, variables, interfaces, RDMA ports, GPUs,
packages, counters), so a report that passes is safe for every reader (issue 63).
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Optional

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "report-1.schema.json")

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


@functools.lru_cache(maxsize=1)
def _schema() -> str:
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return f.read()


def load() -> dict:
    """The schema, a fresh dict each call (callers may keep or change theirs)."""
    return json.loads(_schema())


def _is(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def _where(path: str) -> str:
    return path or "the document"


def _check(value: Any, schema: dict, root: dict, path: str) -> Optional[str]:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _check(value, root.get("$defs", {}).get(name, {}), root, path)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is(value, t) for t in types):
            got = "array" if isinstance(value, list) else "object" if isinstance(value, dict) else type(value).__name__
            return f"{_where(path)}: expected {' or '.join(types)}, got {got}"
    if "const" in schema and value != schema["const"]:
        return f"{_where(path)}: expected {schema['const']!r}, got {value!r:.80}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{_where(path)}: {value!r:.80} is not one of {', '.join(map(str, schema['enum']))}"
    if _is(value, "number") and "minimum" in schema and value < schema["minimum"]:
        return f"{_where(path)}: {value!r} is below the minimum {schema['minimum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{_where(path)}: shorter than {schema['minLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{_where(path)}: {value!r:.80} does not match {schema['pattern']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{_where(path)}: missing required field {key!r}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            sub = f"{path}.{key}" if path else key
            if key in props:
                err = _check(v, props[key], root, sub)
            elif extra is False:
                err = f"{sub}: unexpected field"
            elif isinstance(extra, dict):
                err = _check(v, extra, root, sub)
            else:
                err = None
            if err:
                return err
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            err = _check(v, schema["items"], root, f"{path}[{i}]")
            if err:
                return err
    return None


def problem(doc: Any, schema: Optional[dict] = None) -> Optional[str]:
    """None when doc is a valid ncclcheck report; else the first problem, one line."""
    schema = schema or load()
    return _check(doc, schema, schema, "")


__all__ = ["SCHEMA_PATH", "load", "problem"]
