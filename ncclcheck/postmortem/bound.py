"""Bounds on what diagnose copies from its inputs into the report. Every input may be hostile: one 200,000-character
line, or one table row naming rank 999,999, must not become a report hundreds of MiB long. Texts are cut with a
visible mark (never silently), rank lists are cut with their full count beside them."""

from __future__ import annotations

MAX_ITEM_CHARS = 2000  # one text copied from an input (a line, a message, a field): more is cut, with a mark
MAX_FIELD_CHARS = 255  # a launcher table's short field (host, time)
MAX_LISTED_RANKS = 4096  # ranks listed in one cause or table of the report; the count of all of them is kept
MAX_REPORT_ROWS = 4096  # rows of a per-rank table (ranks, the launcher's failures) kept in the report
CUT = "[cut"  # how every cut starts


def clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    """`text` up to `limit` characters, and what was cut said at the end: "... [cut: N more characters]". A text cut
    before (the log reader cuts each line at MAX_LINE_CHARS) keeps its count: N is what the input had."""
    if len(text) <= limit:
        return text
    body, before = _earlier_cut(text)
    if len(body) <= limit:
        return text
    return f"{body[:limit]} ... {CUT}: {len(body) - limit + before:,} more characters]"


def _earlier_cut(text: str) -> tuple:
    """(the text without the mark of an earlier cut at its end, the characters that cut said it removed)."""
    if text.endswith(_TAIL):
        at = text.rfind(f" ... {CUT}: ")
        n = text[at + len(CUT) + 7:-len(_TAIL)].replace(",", "") if at >= 0 else ""
        if n.isdigit():
            return text[:at], int(n)
    return text, 0


_TAIL = " more characters]"


def clip_all(obj, limit: int = MAX_ITEM_CHARS):
    """`obj` (plain JSON: dicts, lists, scalars) with every string in it, keys too, clipped to `limit`."""
    if isinstance(obj, str):
        return clip(obj, limit)
    if isinstance(obj, dict):
        return {clip(k, limit) if isinstance(k, str) else k: clip_all(v, limit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clip_all(v, limit) for v in obj]
    return obj
