"""NVLink as `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` print it: the nvidia-smi path's reading of what
facts/links.py reads through NVML (nvlink_gpu, nvlink_errors), for nodes where the NVML bindings cannot load.

Two pure parsers and readers that take an injected runner (`run(argv, timeout_s) -> str`, as facts/gpuhealth.py's
Runner). The shapes each driver prints, and the threads they were seen in, are listed in
tests/data/hwnodes/FORMATS.md; tests/facts/test_smilink.py replays them.

Speeds: nvidia-smi prints NVML's per-link speed (NVML_FI_DEV_NVLINK_GET_SPEED, MB/s) divided by 1000 in "GB/s"
("25.781 GB/s" on V100 is NVML's 25781, "25 GB/s" on A100 its 25000, "26.562 GB/s" on H100 its 26562), so a speed
is read back as MB/s by multiplying by 1000 (decimal, not 1024) and rounding: the figure NVML gives for the link.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Callable, Optional

from .links import MAX_ITEMS
from .nvml import normal_bus_id

Runner = Callable[[Sequence[str], float], str]

STATUS_ARGV = ("nvidia-smi", "nvlink", "-s")
ERRORS_ARGV = ("nvidia-smi", "nvlink", "-e")
MAX_GPUS = 64
MAX_LINKS = MAX_ITEMS  # per GPU: 18 is the most a GPU has (H100, B200); more is not an answer a GPU gives
MAX_BYTES = 4 << 20  # `-e` on 64 GPUs of 18 links with Blackwell's ~40 counters a link is under 2 MiB
MAX_LINES = 200_000
MAX_LINE = 512
MAX_NAME = 96  # as NVML's names are cut (facts/nvml.text)
# The unit after a speed -> MB/s per unit (NVML's unit). nvidia-smi prints GB/s; MB/s is read should one print it.
SPEED_UNITS = {"gb/s": 1000, "mb/s": 1}

# The GPU's state as nvidia-smi says it (each GPU of parse_status carries one):
LINKS = "links"  # link lines printed; each link up (a speed) or not (<inactive>, or an error in place of a speed)
NO_NVLINK = "no_nvlink"  # "Not Supported", "Device does not have or support Nvlink", or a header with no link line
ALL_INACTIVE = "all_inactive"  # "NVML: Unable to retrieve NVLink information as all links are inActive"
ERROR = "error"  # an NVML error in place of the links or of a link (Unknown Error, GPU requires reset, GPU is lost)

# `nvidia-smi nvlink -e` labels (lower case) -> counter keys. replay, recovery, crc_flit and crc_data are NVML's
# data-link counters as facts/links.NVLINK_COUNTERS names them; "CRC Errors" is the one CRC count pre-Blackwell
# drivers print (flit and data together), kept as "crc". Blackwell (R570+) prints none of these but counters of its
# own, kept under their own keys.
ERROR_LABELS = {
    "replay errors": "replay", "recovery errors": "recovery", "crc errors": "crc",
    "crc flit errors": "crc_flit", "crc data errors": "crc_data",
    "malformed packet errors": "malformed_packet", "buffer overrun errors": "buffer_overrun", "rx errors": "rx",
    "rx remote errors": "rx_remote", "rx general errors": "rx_general",
    "local link integrity errors": "local_link_integrity", "tx discards": "tx_discards",
    "link recovery successful events": "recovery_successful", "link recovery failed events": "recovery_failed",
    "total link recovery events": "recovery_total", "effective errors": "effective", "symbol errors": "symbol",
}
BASE_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")  # always in a link's counters (None: not printed)

_HEADER = re.compile(r"^\s*GPU (\d{1,5}):\s?(.*)$")
_UUID = re.compile(r"\(UUID:\s*([^()]{0,120})\)")
_UUID_OK = re.compile(r"^(?:GPU|MIG)-[0-9A-Za-z-]{1,80}$")
_LINK = re.compile(r"^\s*Link (\d{1,5})\s*:\s*(.*?)\s*$")
_SPEED = re.compile(r"^(\d{1,6}(?:\.\d{1,6})?)\s?([A-Za-z]B/s)$")
_COUNT = re.compile(r"^\d{1,20}$")
_HANDLE = re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*([0-9A-Fa-f]{0,8}:?[0-9A-Fa-f]{1,2}:"
                     r"[0-9A-Fa-f]{1,2}(?:\.[0-7])?)\s*:?\s*(.*)$")


def _lines(text: str) -> list:
    """The output's lines, bounded in bytes, count and length (a hostile or broken tool cannot make us slow)."""
    return [line[:MAX_LINE] for line in (text or "")[:MAX_BYTES].splitlines()[:MAX_LINES]]


def _clean(s: str, limit: int) -> Optional[str]:
    s = "".join(c for c in s if c.isprintable()).strip()[:limit]
    return s or None


def _is_error_text(s: str) -> bool:
    """A value in brackets ("[Unknown Error]", "[GPU requires reset]", "[N/A]") is nvidia-smi's way of saying the
    driver did not answer."""
    return s.startswith("[") and s.endswith("]")


def _message_state(text: str) -> Optional[str]:
    """What a line that is neither a header nor a link says about the GPU above it; None for anything else (a
    future driver's extra line is not read as a fault)."""
    low = text.lower()
    if "all links are inactive" in low:
        return ALL_INACTIVE
    if "not supported" in low or "does not have or support nvlink" in low:
        return NO_NVLINK
    if any(w in low for w in ("unable", "error", "requires reset", "is lost", "failed")):
        return ERROR
    return None


def speed_mbytes_per_s(value: str) -> Optional[int]:
    """A link speed as nvidia-smi prints it ("26.562 GB/s", "25 GB/s") -> MB/s, NVML's unit (26562, 25000); None
    when `value` is not a speed (<inactive>, an error)."""
    m = _SPEED.match(value.strip())
    if not m or m.group(2).lower() not in SPEED_UNITS:
        return None
    try:
        mb = (Decimal(m.group(1)) * SPEED_UNITS[m.group(2).lower()]).to_integral_value(ROUND_HALF_UP)
    except InvalidOperation:
        return None
    return int(mb) if mb > 0 else None


def _header(m: re.Match) -> dict:
    """A "GPU N: <name> (UUID: GPU-...)" line (some drivers print no UUID part; some print a verdict after it)."""
    rest = m.group(2)
    u = _UUID.search(rest)
    if u:
        name_text, uuid_text, tail = rest[:u.start()], u.group(1).strip(), rest[u.end():]
    else:
        name_text, nvml, tail = rest.partition("NVML:")
        uuid_text, tail = "", nvml + tail
    name = _clean(name_text, MAX_NAME)
    g: dict[str, Any] = {"index": int(m.group(1)), "name": None if name and _is_error_text(name) else name,
                         "uuid": uuid_text if _UUID_OK.match(uuid_text) else None,
                         "link_count": None, "links": [], "state": None, "reason": None}
    bad = [x for x in (name or "", uuid_text) if _is_error_text(x)]
    if bad:
        _say(g, ERROR, f"nvidia-smi prints {bad[0]} for this GPU")
    if tail.strip():
        state = _message_state(tail)
        if state:
            _say(g, state, _clean(tail, 160) or "")
    return g


_RANK = {None: 0, NO_NVLINK: 1, ALL_INACTIVE: 2, ERROR: 3}


def _say(g: dict, state: str, reason: str) -> None:
    """Keep the gravest thing said of a GPU (an error over all-inactive over no NVLink) and its words."""
    if _RANK[state] > _RANK[g["state"]]:
        g["state"], g["reason"] = state, reason


def _handle_error(line: str) -> Optional[dict]:
    """nvidia-smi's "Unable to determine the device handle for GPU 0000:9a:00.0: Unknown Error": a GPU the driver
    lost, with no index, named by its bus id."""
    m = _HANDLE.search(line)
    if not m:
        return None
    return {"index": None, "bus_id": normal_bus_id(m.group(1)), "name": None, "uuid": None, "link_count": None,
            "links": [], "state": ERROR, "reason": _clean(line.strip(), 160)}


def _finish(g: dict) -> dict:
    links = g["links"]
    if g.get("_overflow"):
        g["state"], g["reason"] = ERROR, f"more than {MAX_LINKS} links printed: not an answer a GPU gives"
    elif links:  # the links printed are the evidence: a stray "not supported" beside them does not hide them
        g["link_count"] = len(links)
        errs = [x for x in links if "error" in x]
        if errs and g["state"] != ERROR:
            g["state"], g["reason"] = ERROR, f"link {errs[0]['link']}: {errs[0]['error']}"
        elif g["state"] != ERROR:
            g["state"], g["reason"] = LINKS, None
    elif g["state"] is None:
        g["state"], g["reason"] = NO_NVLINK, "nvidia-smi prints no link for this GPU"
    if g["state"] == NO_NVLINK and not links:
        g["link_count"] = 0
    g.pop("_overflow", None)
    g.pop("_seen", None)
    return g


def parse_status(text: str) -> list:
    """`nvidia-smi nvlink -s` -> one dict per GPU, in the order printed: {"index": int (None for a GPU nvidia-smi
    could not open, then named by "bus_id"), "name", "uuid" (None where not printed), "link_count" (the links
    printed; 0: no NVLink; None: not known, as when every link is inactive or an error stands in their place),
    "links": [{"link", "up", "speed_mbytes_per_s"}] as facts/links.nvlink_gpu gives them from NVML (a link whose
    value is an error also carries "error": the words), "state" (LINKS, NO_NVLINK, ALL_INACTIVE, ERROR) and
    "reason" (what nvidia-smi said, for any state but LINKS)}.

    A link is up only on positive evidence, a speed: <inactive>, an error or any other word is not up. At most
    MAX_GPUS GPUs and MAX_LINKS links a GPU are read; a GPU printing more links is an ERROR."""
    gpus: list = []
    seen: set = set()
    g: Optional[dict] = None
    for line in _lines(text):
        if not line.strip():
            continue
        h = _HEADER.match(line)
        if h:
            g = None
            if len(gpus) < MAX_GPUS and int(h.group(1)) not in seen:
                seen.add(int(h.group(1)))
                g = _header(h)
                g["_seen"] = set()
                gpus.append(g)
            continue
        lost = _handle_error(line)
        if lost is not None:  # a GPU-level line (stderr may interleave it): the GPU above keeps its next lines
            if len(gpus) < MAX_GPUS:
                gpus.append(lost)
            continue
        if g is None:
            continue
        m = _LINK.match(line)
        if m:
            link, value = int(m.group(1)), m.group(2)
            if link in g["_seen"]:
                continue
            if len(g["links"]) >= MAX_LINKS:
                g["_overflow"] = True
                continue
            g["_seen"].add(link)
            speed = speed_mbytes_per_s(value)
            item: dict[str, Any] = {"link": link, "up": speed is not None, "speed_mbytes_per_s": speed}
            if speed is None and value.lower() != "<inactive>":
                item["error"] = _clean(value, 80) or "no value"
            g["links"].append(item)
            continue
        state = _message_state(line)
        if state:
            _say(g, state, _clean(line, 160) or "")
    return [_finish(x) if "_seen" in x else x for x in gpus]


def _count(value: str) -> Optional[int]:
    v = value.strip()
    return int(v) if _COUNT.match(v) else None


def _parse_errors(text: str) -> tuple:
    """(counters as parse_errors gives them, {gpu index: what nvidia-smi said in place of its counters})."""
    out: dict = {}
    said: dict = {}
    gpu: Optional[int] = None
    for line in _lines(text):
        if not line.strip():
            continue
        h = _HEADER.match(line)
        if h:
            idx = int(h.group(1))
            gpu = idx if idx not in out and len(out) < MAX_GPUS else None
            if gpu is not None:
                out[gpu] = {}
            continue
        if gpu is None:
            continue
        m = _LINK.match(line)
        if not m:
            if _message_state(line) is not None and gpu not in said:
                said[gpu] = _clean(line, 160)
            continue
        link = int(m.group(1))
        links = out[gpu]
        if link not in links:
            if len(links) >= MAX_LINKS:
                continue
            links[link] = dict.fromkeys(BASE_COUNTERS)
        for piece in m.group(2).split(", "):
            label, sep, value = piece.rpartition(":")
            key = ERROR_LABELS.get(" ".join(label.lower().split())) if sep else None
            if key is not None:
                links[link][key] = _count(value)
    return out, said


def parse_errors(text: str) -> dict:
    """`nvidia-smi nvlink -e` -> {gpu index: {link: counters}}, each link's counters cumulative since the driver
    loaded: "replay", "recovery", "crc_flit", "crc_data" always (None where the driver prints no such line, or
    prints N/A or an error for it: never 0), "crc" where the driver prints one "CRC Errors" count, and Blackwell's
    own counters where it prints them (ERROR_LABELS: "recovery_failed", "symbol", ...). FEC histogram buckets, BER
    figures and traffic counts are not errors and are not kept. Bounded as parse_status."""
    return _parse_errors(text)[0]


def nvlink_summary(g: dict) -> dict:
    """One GPU's NVLink as a verdict needs it, from either source's per-GPU dict (facts/links.nvlink_gpu's or
    parse_status'): the link count, how many links are up, which are down, the up links' speed. The same rule as
    facts/gpuhealth._nvlink_summary (test_smilink holds them equal), which this module may not import: gpuhealth
    reading NVLink through this module would make an import cycle."""
    ls = g.get("links") or []
    speeds = sorted({x.get("speed_mbytes_per_s") for x in ls if x.get("up")} - {None})
    return {"index": g.get("index"), "bus_id": normal_bus_id(g.get("bus_id")), "name": g.get("name"),
            "link_count": g.get("link_count"), "up": sum(1 for x in ls if x.get("up")),
            "down": [x["link"] for x in ls if not x.get("up")], "speed_mbytes_per_s": speeds[0] if speeds else None}


def _summary(g: dict) -> dict:
    """nvlink_summary with the UUID (nvidia-smi prints no bus id: the caller maps by index or UUID) and what
    nvidia-smi said of the GPU (state, reason)."""
    return {**nvlink_summary(g), "uuid": g.get("uuid"), "state": g.get("state"), "reason": g.get("reason")}


def _ask(run: Runner, argv: Sequence[str], timeout_s: float) -> tuple:
    """(output, None) or (None, why): the tool's failure in its own words, never an exception."""
    if timeout_s <= 0:
        return None, f"`{' '.join(argv)}` not asked: no time left"
    try:
        return run(list(argv), timeout_s), None
    except Exception as e:  # noqa: BLE001 - RuntimeError from run_cmd; a test's runner may raise anything
        return None, f"`{' '.join(argv)}` failed: {str(e)[:200] or type(e).__name__}"


def read_status(run: Runner, timeout_s: float) -> dict:
    """{"gpus": [one _summary a GPU]} from `nvidia-smi nvlink -s`, or {"unavailable": why}. An empty answer (exit 0,
    nothing printed: no GPU of the node has NVLink, as on A10/L4/L40S nodes) is {"gpus": [], "reason": ...}; an
    answer with no GPU header in it is unavailable, never an empty pass."""
    out, why = _ask(run, STATUS_ARGV, timeout_s)
    if out is None:
        return {"unavailable": why}
    if not out.strip():
        return {"gpus": [], "reason": "`nvidia-smi nvlink -s` printed nothing: no GPU here has NVLink"}
    gpus = parse_status(out)
    if not gpus:
        first = next((x.strip() for x in _lines(out) if x.strip()), "")
        return {"unavailable": f"`nvidia-smi nvlink -s` printed no GPU: {_clean(first, 120)!r}"}
    return {"gpus": [_summary(g) for g in gpus]}


def read_errors(run: Runner, timeout_s: float) -> dict:
    """{"links": parse_errors' {gpu index: {link: counters}}, "said": {gpu index: words}} from `nvidia-smi nvlink
    -e` (said: what nvidia-smi printed in place of a GPU's counters), or {"unavailable": why}. Read at both ends of
    the counter window; an answer with no GPU header in it is unavailable."""
    out, why = _ask(run, ERRORS_ARGV, timeout_s)
    if out is None:
        return {"unavailable": why}
    links, said = _parse_errors(out)
    if not links and out.strip():
        first = next((x.strip() for x in _lines(out) if x.strip()), "")
        return {"unavailable": f"`nvidia-smi nvlink -e` printed no GPU: {_clean(first, 120)!r}"}
    return {"links": links, "said": said}


def read(run: Runner, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> dict:
    """NVLink through nvidia-smi within `timeout_s` in all: read_status's {"gpus": [...]} (or {"unavailable"}) with
    read_errors' answer under "errors" (its own {"unavailable"} where `-e` fails or no time is left). `-e` is not
    asked where `-s` failed or found no GPU."""
    t0 = clock()
    status = read_status(run, timeout_s)
    if "unavailable" in status or not status["gpus"]:
        return status
    return {**status, "errors": read_errors(run, timeout_s - (clock() - t0))}


__all__ = ["ALL_INACTIVE", "ERROR", "ERRORS_ARGV", "ERROR_LABELS", "LINKS", "MAX_GPUS", "MAX_LINKS", "NO_NVLINK",
           "STATUS_ARGV", "nvlink_summary", "parse_errors", "parse_status", "read", "read_errors", "read_status",
           "speed_mbytes_per_s"]
