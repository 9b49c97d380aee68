"""`nvidia-smi -q` read whole, and per GPU where the whole answer did not come: an answer cut at its cap
(facts/smi.py Q_OUTPUT_BYTES: a node listing thousands of processes) or one that ends before the count it announces
("Attached GPUs : 8" and fewer GPUs printed) holds nothing about the GPUs after its end. Those GPUs are asked again
one at a time (`nvidia-smi -q -i <PCI bus id>`, nvidia-smi(1): "-i, --id=ID  Display data for a single specified GPU
... the GPU's PCI bus ID (as domain:bus:device.function in hex)"), each answer under the same cap.

A GPU no answer reached is `unread`, never missing: a GPU on the PCI bus is missing (facts/gpuhealth.py `absent`)
only when a complete answer leaves it out, and `nvidia-smi -q -i <its bus id>` answering "not found" (exit 6,
nvidia-smi(1) RETURN VALUE: "A query to find an object was unsuccessful") is such an answer. A whole `-q` that did
not answer in its bound is unread for every GPU the driver holds: that the driver is wedged is host.sources' finding.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from . import pcitree, smi, smiq
from .nvml import normal_bus_id
from .util import Unanswered, current, first_line

Runner = Callable[[Sequence[str], float], Any]
NOT_FOUND_RC = 6  # nvidia-smi(1) RETURN VALUE 6: "A query to find an object was unsuccessful"
ASKERS = 4  # per-GPU questions asked at once: each is 0.1-1 s; 16 GPUs one by one would cost a Slurm check 16 s
MAX_ASKED = smiq.MAX_GPUS


def _cut(text: Any) -> int:
    return int(getattr(text, "cut", 0) or 0)


def _text(text: Any) -> str:
    return text if isinstance(text, str) else bytes(text or b"").decode("utf-8", "replace")


def _unread(bus: Optional[str], cause: str, argv: Sequence[str], error: Optional[str] = None,
            index: Optional[int] = None) -> dict:
    """A GPU no answer reached: why (`cut`: the answer passed its cap; `short`: it ended before this GPU;
    `unanswered`: not within its bound; `failed`: the tool failed without saying the GPU is not there)."""
    return {"index": index, "bus_id": bus, "cause": cause, "read": " ".join(argv),
            "limit_bytes": smi.limit_of(argv) if cause == "cut" else None, "error": error}


def _driver_holds() -> list:
    """The GPUs on the PCI bus bound to the nvidia driver (the ones a cut answer can have hidden); a GPU with no
    driver or another driver bound is not the driver's to list, cut or not."""
    return [b for b in pcitree.nvidia_gpu_bus_ids() if pcitree.driver_of(b) == "nvidia"]


def _ask_one(run: Runner, ident: str, timeout_s: float) -> tuple:
    """(parsed answer or None, unread entry or None) of `nvidia-smi -q -i ident`."""
    argv = ["nvidia-smi", "-q", "-i", ident]
    bus = normal_bus_id(ident)
    index = int(ident) if ident.isdigit() else None
    try:
        text = run(argv, timeout_s)
    except Unanswered as e:
        return None, _unread(bus, "unanswered", argv, first_line(str(e)), index)
    except Exception as e:  # noqa: BLE001 - run_cmd's CommandFailed keeps what was printed
        out = getattr(e, "stdout", None)
        if out and _cut(out) == 0:
            return smiq.parse(_text(out)), None  # a GPU without a handle: its "Unable to determine" line
        if getattr(e, "returncode", None) == NOT_FOUND_RC:
            return {"gpus": [], "unreachable": []}, None  # a complete answer: the driver does not list it
        return None, _unread(bus, "failed", argv, first_line(str(e)), index)
    parsed = smiq.parse(_text(text))
    if _cut(text) or parsed["lines_cut"]:
        return None, _unread(bus, "cut", argv, None, index)
    return parsed, None


def _blocks_complete(parsed: dict, cut: bool) -> dict:
    """The answer without its last GPU when the answer was cut: that block ends where the cut fell."""
    if cut and parsed["gpus"]:
        parsed["gpus"] = parsed["gpus"][:-1]
    return parsed


def read(run: Runner, timeout_s: float, reasons: list) -> dict:
    """{"driver", "gpus", "unreachable", "unread", "asked_per_gpu"}: every GPU `nvidia-smi -q` lists, asked per GPU
    where the whole answer was cut or ended short; `failed` (the reason) where nothing was printed."""
    argv = ["nvidia-smi", "-q"]
    try:
        text: Any = run(argv, timeout_s)
    except Unanswered as e:
        why = first_line(str(e))
        reasons.append(f"nvidia-smi -q: {why}")
        holds = _driver_holds()
        return {"gpus": [], "unreachable": [], "driver": None, "failed": why[:200], "asked_per_gpu": [],
                "unread": [_unread(b, "unanswered", argv, why) for b in holds]}
    except Exception as e:  # noqa: BLE001 - run_cmd's CommandFailed keeps stdout
        text = getattr(e, "stdout", None)
        if not text:
            reasons.append(f"nvidia-smi -q: {e}")
            return {"gpus": [], "unreachable": [], "driver": None, "failed": str(e)[:200], "unread": [],
                    "asked_per_gpu": []}
        reasons.append(f"nvidia-smi -q: {str(e)[:200]}")
    parsed = smiq.parse(_text(text))
    cut = _cut(text) > 0 or parsed["lines_cut"]
    parsed = _blocks_complete(parsed, cut)
    parsed["unread"], parsed["asked_per_gpu"] = [], []
    attached = parsed.get("attached")
    seen = len(parsed["gpus"]) + len(parsed["unreachable"])
    short = isinstance(attached, int) and seen < attached
    if not (cut or short):
        return parsed
    known = {g.get("bus_id") for g in parsed["gpus"]} | {u.get("bus_id") for u in parsed["unreachable"]}
    holds = _driver_holds()
    if holds:
        idents = [b for b in holds if b not in known]
    else:  # no PCI tree to read (a container without /sys): the rest of the driver's count, by index
        idents = [str(k) for k in range(seen, attached)] if isinstance(attached, int) else []
    idents = idents[:MAX_ASKED]
    reasons.append(f"nvidia-smi -q {'passed its cap' if cut else 'ended before the GPUs it counts'}: "
                   f"asked per GPU ({len(idents)})")
    parsed["asked_per_gpu"] = idents
    ctx_run = [contextvars.copy_context() for _ in idents]  # each question in the collection's bound
    with ThreadPoolExecutor(max_workers=max(1, min(ASKERS, len(idents))),
                            thread_name_prefix="ncclcheck-smi-per-gpu") as pool:
        answers = list(pool.map(lambda k: ctx_run[k].run(_ask_one, run, idents[k], timeout_s), range(len(idents))))
    for got, unread in answers:
        if unread is not None:
            parsed["unread"].append(unread)
            continue
        parsed["gpus"] += [g for g in got["gpus"] if g.get("bus_id") not in known]
        parsed["unreachable"] += [u for u in got["unreachable"] if u.get("bus_id") not in known]
        known |= {g.get("bus_id") for g in got["gpus"]} | {u.get("bus_id") for u in got["unreachable"]}
    _renumber(parsed)
    if cut and not parsed["unread"]:
        # every GPU the cut hid was read on its own: the cut cost a second reading, not a fact (host.sources warns
        # only for a cut that left something unread)
        current().forget_cut("nvidia-smi")
    return parsed


def _renumber(parsed: dict) -> None:
    """NVML's index (PCI bus order among the GPUs the driver counts) over what each answer gave, the GPUs no answer
    reached included (the driver counts them)."""
    buses = {g.get("bus_id") for g in parsed["gpus"]} | {u.get("bus_id") for u in parsed["unreachable"]} | {
        u.get("bus_id") for u in parsed["unread"]}
    order = sorted(b for b in buses if b)
    for x in parsed["gpus"] + parsed["unreachable"] + parsed["unread"]:
        if x.get("bus_id") in order:
            x["index"] = order.index(x["bus_id"])
    parsed["gpus"].sort(key=lambda g: (g.get("index") is None, g.get("index") or 0))


__all__ = ["NOT_FOUND_RC", "read"]
