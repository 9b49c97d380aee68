"""Installed Python distributions, hashed per node so that differing environments are found without shipping lists."""

from __future__ import annotations

import hashlib
import re
from importlib import metadata


def normalize(name: str) -> str:
    """PEP 503 normalisation: Foo_Bar, foo.bar and foo-bar are the same project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def collect() -> dict:
    """{"hash", "count", "items"}: name+version only, never file contents, so it stays fast."""
    items: dict = {}
    for dist in metadata.distributions():
        try:
            name, version = dist.metadata["Name"], dist.version
        except Exception:  # a broken .dist-info must not hide the others
            continue
        if not name or version is None:
            continue
        # first on sys.path wins, as it does for import
        items.setdefault(normalize(name), str(version))
    items = dict(sorted(items.items()))
    h = hashlib.sha256("\n".join(f"{n}=={v}" for n, v in items.items()).encode())
    return {"hash": "sha256:" + h.hexdigest(), "count": len(items), "items": items}
