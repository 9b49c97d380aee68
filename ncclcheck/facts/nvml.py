"""The one door to NVML (nvidia-ml-py's `pynvml`, imported lazily, never required): load it, hold one session, and
ask it questions that degrade to a stated reason instead of raising. facts/links.py (NVLink, for bounds) and
facts/gpuhealth.py (a GPU's health) both ask through here.

Every answer is (value, None) or (None, why): NVML_ERROR_NOT_SUPPORTED on a GPU that lacks a feature is an answer
("not supported"), not an error, and a binding too old to know a call says so. Constants are looked up by name
(getattr) so an older binding that lacks one skips that question rather than failing the import.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

# What a read that gave no value means, whichever source asked (nvidia-smi prints the same errors in brackets):
# NOT_SUPPORTED is an answer (this GPU or driver lacks the feature: a skip that says so); the others are the GPU's
# own state and never a pass: it must be reset (RESET_REQUIRED), it has left the bus (GPU_LOST), or it answers
# nothing sensible (UNKNOWN_ERROR, nvidia-smi's "ERR!").
NOT_SUPPORTED = "not supported"
RESET_REQUIRED, GPU_LOST, UNKNOWN_ERROR = "requires reset", "GPU is lost", "unknown error"
FAULT_STATES = (RESET_REQUIRED, GPU_LOST, UNKNOWN_ERROR)
# nvmlReturn_t codes (nvml.h) -> the state; looked up by value so an old binding without the names still reads them
_STATE_OF_CODE = {3: NOT_SUPPORTED, 15: GPU_LOST, 16: RESET_REQUIRED, 999: UNKNOWN_ERROR}
# nvmlFieldValue_t.valueType -> the union member holding the value (nvml.h's nvmlValueType_t)
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}


def import_nvml() -> Any:
    import pynvml  # nvidia-ml-py, NVIDIA's binding: a dependency, it loads libnvidia-ml only here

    return pynvml


def load(nvml: Any = None, importer: Optional[Callable[[], Any]] = None) -> tuple:
    """(the module, None) or (None, why it cannot be used): not installed, or NVML will not initialise (no driver,
    a driver/library mismatch). The caller shuts it down with `close`."""
    try:
        nv = nvml if nvml is not None else (importer or import_nvml)()
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    from .util import Unanswered, call_bounded

    try:
        call_bounded("NVML", nv.nvmlInit)  # a wedged driver blocks nvmlInit: named, never waited on (issue 63)
    except Unanswered as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...
        return None, f"NVML: {e}"
    return nv, None


def close(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001,S110 - nothing to do about a failed shutdown
        pass


def state_of_error(e: Exception) -> Optional[str]:
    """The read state an NVMLError stands for (NOT_SUPPORTED, RESET_REQUIRED, GPU_LOST, UNKNOWN_ERROR), else None."""
    code = getattr(e, "value", None)
    if isinstance(code, int) and code in _STATE_OF_CODE:
        return _STATE_OF_CODE[code]
    return NOT_SUPPORTED if "Not Supported" in str(e) else None


def ask(nv: Any, call: str, *args: Any) -> tuple:
    """(answer, None) or (None, why): `call` is the binding's function name; a binding without it says so."""
    fn = getattr(nv, call, None)
    if fn is None:
        return None, f"{call}: not in this nvidia-ml-py"
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - every NVMLError is an answer about this GPU
        return None, state_of_error(e) or f"{type(e).__name__}: {e}"[:160]


def ask_first(nv: Any, calls: tuple, *args: Any) -> tuple:
    """The first of several spellings of one question that the binding has (a call renamed across releases)."""
    why = None
    for call in calls:
        if getattr(nv, call, None) is None:
            continue
        return ask(nv, call, *args)
    return None, why or f"{' / '.join(calls)}: not in this nvidia-ml-py"


def const(nv: Any, name: str) -> Optional[int]:
    v = getattr(nv, name, None)
    return v if isinstance(v, int) else None


def field(nv: Any, handle: Any, field_id: Optional[int], scope: Optional[int] = None) -> Optional[int]:
    """One field value (nvmlDeviceGetFieldValues), or None when NVML has no answer for it."""
    return field_read(nv, handle, field_id, scope)[0]


def field_read(nv: Any, handle: Any, field_id: Optional[int], scope: Optional[int] = None) -> tuple:
    """(value, None) or (None, why) for one field, `why` a read state where the field's return code is one."""
    if field_id is None:
        return None, "field not in this nvidia-ml-py"
    try:
        vals = nv.nvmlDeviceGetFieldValues(handle, [field_id if scope is None else (field_id, scope)])
    except Exception as e:  # noqa: BLE001 - an old driver without the field
        return None, state_of_error(e) or f"{type(e).__name__}: {e}"[:160]
    v = vals[0]
    ret = getattr(v, "nvmlReturn", 1)
    if ret != getattr(nv, "NVML_SUCCESS", 0):
        return None, _STATE_OF_CODE.get(ret, f"NVML error {ret}")
    member = _VALUE_MEMBER.get(getattr(v, "valueType", 1), "uiVal")
    raw = getattr(v.value, member, None)
    return (int(raw), None) if isinstance(raw, (int, float)) else (None, "no value")


def text(v: Any, limit: int = 96) -> Optional[str]:
    """A string NVML returned (bytes in older bindings), cut to `limit`; None for nothing."""
    if v is None:
        return None
    s = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return s.strip()[:limit] or None


def bus_id(raw: Any) -> Optional[str]:
    """NVML's "00000000:3B:00.0" as sysfs and the kernel spell it: "0000:3b:00.0"."""
    return normal_bus_id(text(raw, 32))


def normal_bus_id(s: Optional[str]) -> Optional[str]:
    """Any spelling of a PCI address (NVML's 8-digit domain, upper case, the kernel log's "0000:3b:00" without a
    function) as "0000:3b:00.0"; None when it is not one."""
    if not s:
        return None
    s = s.strip().lower()
    parts = s.split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) != 3:
        return None
    dom, bus, devfn = parts
    if "." not in devfn:
        devfn += ".0"
    dev, _, fn = devfn.partition(".")
    try:
        return f"{int(dom, 16) & 0xffff:04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{int(fn, 16):x}"
    except ValueError:
        return None


__all__ = ["FAULT_STATES", "GPU_LOST", "NOT_SUPPORTED", "RESET_REQUIRED", "UNKNOWN_ERROR", "ask", "ask_first",
           "bus_id", "close", "const", "field", "field_read", "import_nvml", "load", "normal_bus_id", "state_of_error",
           "text"]
