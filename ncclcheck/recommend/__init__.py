"""Recommendations: rules that map observed facts to environment settings, each with its reason.

Rules are small functions `(view) -> list[Recommendation]` in RULES, applied in order. Node-local rules live in
`local.py`; cluster-wide ones (from the full-mesh reachability matrix) in `mesh.py`.
"""

from __future__ import annotations

from .local import NodeView, recommend_local

__all__ = ["NodeView", "recommend_local"]
