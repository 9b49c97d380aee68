"""`ncclras` without `-f json` (every client before NCCL 2.28.7, and the default form after): its text report read
into the summary nccl_ras.parse_ras_json gives, so one verdict (nccl_ras.ras_check) serves both forms.

The text is what NCCL's client writes (src/ras/client_support.cc): a header ("NCCL version 2.28.9 compiled with CUDA
13.0"), the job summary, the communicators table ("Group  Comms ... Status  Errors", one row per group of alike
communicators), then two sections, "Errors" and "Warnings", each a list of entries: a line at the margin naming what
("DEAD", "INCOMPLETE", "TIMEOUT", or "#<group>-<comm> (<hash>) INCOMPLETE|ERROR|MISMATCH") and indented lines saying
who ("  Rank 6 reported remote process exited or there was a network error -- GPU 2 managed by process 4711 on node
gpu7", "  Process 4711 on node gpu7 managing GPU 2", "  3 ranks reported ..."). A real report of a healthy-looking
job is tests/data/nccl/ras-text-running-ok.txt (a lent H100, docs/gpu.md).

Pure, and bounded: at most MAX_LINES lines are read, MAX_REFS ranks kept per kind, every kept text clipped and
stripped of control characters (the report is a file a user hands over: hostile until read).
"""

from __future__ import annotations

import re
from typing import Optional

MAX_LINES = 200_000
MAX_REFS = 1000
MAX_TEXT = 200

_VERSION = re.compile(r"^NCCL version (\S+) compiled with CUDA")  # the client's first line (not NCCL's init banner)
_TABLE_HEAD = re.compile(r"^Group\s+Comms\s+Nodes\s+Ranks\s+Ranks\s+Ranks\s+Status\s+Errors\s*$")
_TABLE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")
_ENTRY = re.compile(r"^(?:#(\d+)-(\d+) \(([0-9a-fA-F]+)\) )?(DEAD|INCOMPLETE|TIMEOUT|ERROR|MISMATCH)\s*$")
# "  Rank 6[ <what>] -- GPU 2 managed by process 4711 on node gpu7" | "... -- [process information not found]"
_RANK = re.compile(r"^\s+Rank (\d+)(?: (.*?))? -- (?:GPU (\S+) managed by process (\d+) on node (\S+)|\[process "
                   r"information not found\])\s*$")
_PROCESS = re.compile(r"^\s+Process (\d+) on node (\S+) managing GPUs? (.+?)\s*$")
_REPORTED = re.compile(r"^\s+(\d+) ranks reported (.+?)\s*$")
_TIMEOUTS = re.compile(r"Encountered (\d+) communication timeout")
_LAUNCHED = re.compile(r"^has launched up to operation (\d+)$")


def _clip(s: str) -> str:
    return "".join(ch for ch in s if ch.isprintable())[:MAX_TEXT]


def ras_text_header(head: bytes) -> bool:
    """Whether a file's first bytes open an ncclras text report (its first line)."""
    return bool(_VERSION.match(head.lstrip()[:200].split(b"\n", 1)[0].decode("utf-8", errors="replace")))


def looks_like_ras_text(text: str) -> bool:
    """Whether `text` is an ncclras text report (its header and the Errors section's heading), not another log."""
    first = (text or "").lstrip()[:200].split("\n", 1)[0]
    return bool(_VERSION.match(first)) and "\nErrors\n======" in (text or "")


def _ref(m: re.Match) -> dict:
    rank, _what, gpu, pid, host = m.groups()
    return {"rank": int(rank), "host": _clip(host) if host else None, "pid": int(pid) if pid else None,
            "cuda_dev": _clip(gpu) if gpu else None}


def _process_ref(m: re.Match) -> dict:
    pid, host, gpus = m.groups()
    return {"rank": None, "host": _clip(host), "pid": int(pid), "cuda_dev": _clip(gpus)}


def _entries(lines: list[str]) -> list[tuple[re.Match, list[str]]]:
    """(the entry's heading, its indented lines) of one section, in order."""
    out: list[tuple[re.Match, list[str]]] = []
    for ln in lines:
        m = _ENTRY.match(ln)
        if m:
            out.append((m, []))
        elif out and ln.startswith(" "):
            out[-1][1].append(ln)
    return out


def _section(lines: list[str], title: str) -> list[str]:
    """The lines of the section `title` (its heading, then a row of '=' under it), up to the next such heading."""
    for i in range(len(lines) - 1):
        if lines[i].strip() == title and set(lines[i + 1].strip()) == {"="}:
            body = []
            for j in range(i + 2, len(lines)):
                if j + 1 < len(lines) and lines[j].strip() and set(lines[j + 1].strip()) == {"="}:
                    break
                body.append(lines[j])
            return body
    return []


def _comm(key: str, comms: dict) -> dict:
    return comms.setdefault(key, {"hash": key, "size": None, "ranks_count": None, "dead": [], "unresponsive": [],
                                  "errors": [], "lagging": []})


def _add(rows: list, item: dict) -> None:
    if len(rows) < MAX_REFS:
        rows.append(item)


def parse_ras_text(text: str) -> dict:
    """nccl_ras.parse_ras_json's summary from the text form. Raises ValueError when the text is not that report."""
    if not looks_like_ras_text(text):
        raise ValueError("not an ncclras report (no 'NCCL version' header and 'Errors' section)")
    lines = text.lstrip().splitlines()[:MAX_LINES]
    version: Optional[str] = _VERSION.match(lines[0].strip()).group(1)  # type: ignore[union-attr]
    comms: dict = {}
    in_table = False
    for ln in lines:
        if _TABLE_HEAD.match(ln.strip()):
            in_table = True
            continue
        if in_table:
            m = _TABLE_ROW.match(ln)
            if m:  # one group of alike communicators: one summary entry, as the JSON form has one per communicator
                c = _comm(f"group {m.group(1)}", comms)
                c["size"], c["ranks_count"] = int(m.group(5)), int(m.group(6))
                if m.group(7) == "ABORT":  # the group's communicators were aborted: an error with no rank to name
                    _add(c["errors"], {"rank": None, "host": None, "pid": None, "cuda_dev": None,
                                       "said": f"communicator group {m.group(1)} status ABORT"})
            elif ln.strip() and not ln.strip().startswith("#"):
                in_table = False
    timeouts = 0
    job = _comm("job", comms)
    for heading, body in _entries(_section(lines, "Errors")) + _entries(_section(lines, "Warnings")):
        group, index, _hash, kind = heading.groups()
        c = _comm(f"group {group}", comms) if group is not None else job
        said = None
        for ln in body:
            if kind == "TIMEOUT":
                t = _TIMEOUTS.search(ln)
                timeouts += int(t.group(1)) if t else 0
                continue
            rep = _REPORTED.match(ln)
            if rep:  # "  3 ranks reported <error>": the rank lines after it reported that
                said = _clip(rep.group(2))
                continue
            m, p = _RANK.match(ln), _PROCESS.match(ln)
            if not (m or p):
                continue
            ref = _ref(m) if m else _process_ref(p)  # type: ignore[arg-type]
            what = _clip(m.group(2)) if m and m.group(2) else None
            if kind == "DEAD":
                _add(c["dead"], ref)
            elif kind == "INCOMPLETE":
                _add(c["unresponsive"], ref)
            elif kind == "ERROR":
                err = (what[len("reported "):] if what and what.startswith("reported ") else what) or said
                _add(c["errors"], {**ref, "said": f"reported {err}" if err else "an error"})
            elif kind == "MISMATCH":
                launched = _LAUNCHED.match(what or "")
                _add(c["lagging"], {**ref, "said": what or "out of step with its communicator",
                                    "count": int(launched.group(1)) if launched else None})
    parsed = [c for c in comms.values() if c["hash"] != "job" or any(c[k] for k in ("dead", "unresponsive",
                                                                                      "errors", "lagging"))]
    return {"version": version, "timestamp": None, "communicators": parsed, "timeouts": timeouts, "form": "text"}


__all__ = ["looks_like_ras_text", "parse_ras_text", "ras_text_header"]
