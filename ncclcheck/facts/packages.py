"""Installed Python distributions, hashed per node so that differing environments are found without shipping lists."""

from __future__ import annotations

import hashlib
import re
from importlib import metadata


def normalize(name: str) -> str:
    """PEP 503 normalisation: Foo_Bar, foo.bar and foo-bar are the same project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def name_version(text: str) -> tuple:
    """(Name, Version) from a METADATA / PKG-INFO text: its first header of each, read up to the blank line that ends
    the headers. `Distribution.metadata` parses the whole file (a long description included) with the email
    package: 0.75 s of a 1.4 s standalone preflight for 287 distributions, against milliseconds this way."""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key == "name" and name is None:
            name = value.strip()
        elif sep and key == "version" and version is None:
            version = value.strip()
        if name is not None and version is not None:
            break
    return name, version


def collect() -> dict:
    """{"hash", "count", "items"}: name+version only, never file contents, so it stays fast."""
    items: dict = {}
    for dist in metadata.distributions():
        try:
            name, version = name_version(dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "")
        except Exception:  # a broken .dist-info must not hide the others
            continue
        if not name or version is None:
            continue
        # first on sys.path wins, as it does for import
        items.setdefault(normalize(name), str(version))
    items = dict(sorted(items.items()))
    h = hashlib.sha256("\n".join(f"{n}=={v}" for n, v in items.items()).encode())
    return {"hash": "sha256:" + h.hexdigest(), "count": len(items), "items": items}
