"""Cleaning text that came from outside (another node, a file, a peer's reply) where it enters, once (issue 55): no
control character, bidirectional override or lone surrogate goes further, so no writer (the console, a shell file,
HTML, JSON, Prometheus, Markdown, JUnit) ever meets one, and none has to clean or can fail on what it writes.

Where each applies: `clean_text` to a string (Report/CheckResult/Recommendation from JSON, model.py), `clean_tree` to
a JSON value nested at most MAX_DEPTH deep, `clean_doc` to a loaded document (a flight-recorder dump: built anew only
when dirty), `clean_json` to one loaded from JSON text (the text says when no walk is needed), `load_json` to JSON
text itself (a store record, a responder's reply), `clean_log_text` to a text before it is split into lines (a log, a
saved capture), `clean_name` to a file's name as a report shows it (one line).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Characters that steer a terminal or hide text instead of being text: C0 controls except tab and newline (CR, BS,
# BEL, ESC...), DEL, C1 controls (U+0080-U+009F: CSI and OSC have one-character forms there), and the bidirectional
# overrides that make text read differently from what it is. Another node's hostname, a saved report's summary or a
# store record may carry them; a window-title escape in a hostname must never reach a terminal or a shell file.
# Invisible characters go too: zero-width ones (U+200B-U+200D, U+2060, U+FEFF) and the Arabic letter mark (U+061C)
# hide or split a word in a quoted line, as the overrides reorder it.
_INVISIBLE = "\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_CONTROL_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f" + _INVISIBLE
_CONTROLS = re.compile(f"[{_CONTROL_CHARS}]")
# A lone surrogate (U+D800-U+DFFF) is valid JSON ("\ud800") and what Python makes of a file name's undecodable bytes
# (surrogateescape), but no UTF-8 writer can encode it: one in a dump's host name made every output of diagnose exit
# 3 (issue 55). It becomes U+FFFD, the replacement character: something was there, and it is said.
_SURROGATES = re.compile("[\ud800-\udfff]")
_DIRTY = re.compile(f"[{_CONTROL_CHARS}\ud800-\udfff]")
# The same, but keeping every character Python's str.splitlines() ends a line at (CR, VT, FF, FS, GS, RS, NEL): a log
# is cleaned before it is split into lines, so its lines are the ones its writer made.
_DIRTY_INLINE = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f" + _INVISIBLE + "\ud800-\udfff]")
_INLINE_RUNS = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f" + _INVISIBLE + "]+")
# The ASCII characters each cleaning drops: a text that is all ASCII (the usual case, a log of gigabytes) is checked by
# looking for each of them (a memchr each, no copy: ~0.25 ms a MiB; the regular expression takes ~4 ms)
_ASCII_DIRT = "".join(chr(c) for c in (*range(0x09), *range(0x0b, 0x20), 0x7f))  # clean_text's
_ASCII_LOG_DIRT = "".join(c for c in _ASCII_DIRT if c not in "\x0b\x0c\r\x1c\x1d\x1e")  # clean_log_text's
_NAME_DIRT = re.compile("[\x00-\x1f\x7f-\x9f" + _INVISIBLE + "\u2028\u2029\ud800-\udfff]")
# JSON text cannot hold a raw control character inside a string (json.loads refuses one): a loaded string gets one
# only from an escape (\b \f \r \uXXXX; \n and \t are kept anyway), a raw DEL or a raw non-ASCII character. So an
# ASCII text with none of them loads to a clean document (a JSON dumper escapes non-ASCII by default, so the usual
# reply is such a text): a search of the text, not a walk of the document, which was the largest share of watch's
# CPU at 4,096 ranks (~0.3 ms a reply). Searched for as substrings: a regular expression of the same alternatives tries
# each of the text's positions (~6 ns a character: 23 us of a 3.9 KB reply, a quarter of its json.loads).
_JSON_ESCAPES = ("\\u", "\\r", "\\b", "\\f")
MAX_DEPTH = 64  # nesting a report or a store record may have; facts are a few levels deep, 64 is far beyond them


def clean_text(text: str) -> str:
    """text without control characters (newline and tab kept) and with every lone surrogate made U+FFFD: applied
    to every string that came from another node or from a file, at ingestion (Report/CheckResult/Recommendation
    from JSON, store records via clean_tree, a failed job's files via clean_doc), so no writer meets one."""
    if _DIRTY.search(text) is None:
        return text
    return _CONTROLS.sub("", _SURROGATES.sub("\ufffd", text))


def clean_log_text(text: str) -> str:
    """clean_text for a text not yet split into lines: the characters that end a line (CR, VT, FF, NEL...) are
    kept, so splitting it afterwards gives the lines its writer made, each clean."""
    if not _dirty(text, _ASCII_LOG_DIRT, _DIRTY_INLINE):
        return text
    # runs at a time: a log may hold a hole of a gigabyte of NULs (logrotate's copytruncate)
    return _SURROGATES.sub("\ufffd", _INLINE_RUNS.sub("", text))


def _dirty(text: str, ascii_dirt: str, rx: re.Pattern) -> bool:
    """Does text hold a character its cleaning drops? An ASCII text by a search for each such character, another
    by the regular expression."""
    if text.isascii():
        return any(c in text for c in ascii_dirt)
    return rx.search(text) is not None


def clean_name(name: str) -> str:
    """A file name as a report shows it: one line, every control character (newline and tab too), line separator,
    bidirectional override or undecodable byte shown as '?', as `ls` shows them. A file's name is chosen by whoever
    made the file: 'x.log\\n    FAIL ...' must not make a console line of its own."""
    return _NAME_DIRT.sub("?", name)


def clean_doc(value: Any) -> Any:
    """A loaded document (dicts, lists, tuples of str, numbers, bytes...) with clean_text applied to every string,
    keys included, built anew only when one needs it: its strings are gathered level by level and searched once
    (C speed: a clean dump of 2,000 entries costs one join and one search), and only a dirty document is rebuilt.
    The caller bounds its size first (postmortem/unpickle.walk_problem); a dirty one nested deeper than MAX_DEPTH
    is a ValueError."""
    strings: list = []
    level = [value]
    while level:
        nxt: list = []
        for v in level:
            t = type(v)
            if t is str:
                strings.append(v)
            elif t is dict:
                strings.extend(k for k in v if type(k) is str)
                nxt.extend(v.values())
            elif t in (list, tuple, set, frozenset):
                nxt.extend(v)
        level = nxt
    if not _dirty("".join(strings), _ASCII_DIRT, _DIRTY):
        return value
    return _cleaned(value)


def clean_json(value: Any, text: str) -> Any:
    """clean_doc(value), where value is what json.loads (strict, the default) made of `text`: when the text says no
    string in it can be dirty, the value as it is, unwalked."""
    if text.isascii() and "\x7f" not in text and ("\\" not in text or not any(x in text for x in _JSON_ESCAPES)):
        return value
    return clean_doc(value)


def load_json(text: str) -> Any:
    """The JSON document in `text` (another node's store record, a responder's reply), every string in it clean:
    NaN and Infinity refused (not JSON: never fed to a plot or a comparison) with ValueError, as json.loads' own
    errors; RecursionError where it nests past the C parser's depth."""
    return clean_json(json.loads(text, parse_constant=_no_constant), text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _cleaned(value: Any, depth: int = 0) -> Any:
    """clean_doc's rebuild, MAX_DEPTH levels at most (ValueError past them: never the C stack's limit)."""
    t = type(value)
    if t is str:
        return clean_text(value)
    if t not in (dict, list, tuple, set, frozenset):
        return value
    if depth >= MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if t is dict:
        return {clean_text(k) if type(k) is str else k: _cleaned(x, depth + 1) for k, x in value.items()}
    return t(_cleaned(x, depth + 1) for x in value)


def clean_tree(value: Any) -> Any:
    """A JSON value (dict/list/str/number) with clean_text applied to every string in it, keys included. Raises
    ValueError naming the path when it is nested deeper than MAX_DEPTH (iterative: never a RecursionError)."""
    root: list = [value]
    stack: list = [(root, 0, value, 0, "")]  # (container, key, value, depth, path)
    while stack:
        parent, key, v, depth, path = stack.pop()
        if isinstance(v, str):
            parent[key] = clean_text(v)
        elif isinstance(v, (dict, list)):
            if depth >= MAX_DEPTH:
                raise ValueError(f"{path or 'the document'}: nested more than {MAX_DEPTH} levels deep")
            if isinstance(v, dict):
                new: Any = {}
                for k, x in v.items():
                    ck = clean_text(k) if isinstance(k, str) else k
                    new[ck] = x
                    stack.append((new, ck, x, depth + 1, f"{path}.{ck}" if path else str(ck)))
            else:
                new = list(v)
                stack.extend((new, i, x, depth + 1, f"{path}[{i}]") for i, x in enumerate(v))
            parent[key] = new
    return root[0]
