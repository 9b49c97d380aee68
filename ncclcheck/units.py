"""Sizes grammar ("1M-1G:4", "1K,64K,1M") and human formatting of bytes, times and bandwidths.

Inside ncclcheck everything is bytes and microseconds; this module is where strings become numbers (parsing user
input) and numbers become strings (rendering). Suffixes are binary like nccl-tests' -b/-e flags: 1K = 1024 bytes.
"""

from __future__ import annotations

import math
import re

from .errors import UsageError


def is_decimal(text: str) -> bool:
    """ASCII digits only: str.isdigit() also accepts '¹' and other characters that int() rejects."""
    return text.isascii() and text.isdigit()

_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([BKMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
# A sweep longer than this is surely a typo (1B-1T doubling is 41 sizes); refuse instead of running for hours.
MAX_SIZES = 64


def parse_size(text: str) -> int:
    """'64M' -> 67108864. Accepts B K M G T (binary), optional 'iB'/'B' tail, and plain byte counts."""
    m = _SIZE_RE.match(text or "")
    if not m:
        raise UsageError(f"bad size {text!r}: expected a number with an optional B/K/M/G suffix, like 64M")
    number, suffix = m.groups()
    value = float(number) * _SUFFIX[suffix.upper()]
    if not math.isfinite(value) or value != int(value):
        raise UsageError(f"bad size {text!r}: not a whole number of bytes")
    if value <= 0:
        raise UsageError(f"bad size {text!r}: must be greater than zero")
    if value > (1 << 50):
        raise UsageError(f"bad size {text!r}: larger than 1 PiB")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    """Sizes grammar: '1M-1G' (doubling, both ends), '1M-1G:4' (factor 4), '1K,64K,1M', '8M'; parts combine by ','.

    Returns sorted unique byte counts. Any malformed input raises UsageError naming the bad part.
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty --sizes: expected e.g. 1M-1G, 1M-1G:4 or 1K,64K,1M")
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise UsageError(f"bad --sizes {text!r}: empty item between commas")
        factor = 2
        if ":" in part:
            rng, _, fac = part.partition(":")
            if not is_decimal(fac.strip()) or int(fac) < 2:
                raise UsageError(f"bad --sizes item {part!r}: the factor after ':' must be an integer >= 2")
            factor = int(fac)
            part = rng
            if "-" not in part:
                raise UsageError(f"bad --sizes item {part!r}:{fac}: a factor needs a range like 1M-1G:{fac}")
        if part.startswith("-"):
            raise UsageError(f"bad --sizes item {part!r}: sizes cannot be negative")
        if "-" in part:
            lo_s, _, hi_s = part.partition("-")
            lo, hi = parse_size(lo_s), parse_size(hi_s)
            if lo > hi:
                raise UsageError(f"bad --sizes range {part!r}: start is larger than end")
            size = lo
            while size <= hi:
                out.add(size)
                if len(out) > MAX_SIZES:
                    raise UsageError(f"--sizes {text!r} gives more than {MAX_SIZES} sizes")
                size *= factor
            out.add(hi)  # both ends included even when the factor overshoots, as the grammar promises
        else:
            out.add(parse_size(part))
        if len(out) > MAX_SIZES:
            raise UsageError(f"--sizes {text!r} gives more than {MAX_SIZES} sizes")
    return sorted(out)


def describe_sizes(sizes) -> str:
    """The sizes grammar for a list of sizes (parse_sizes' inverse): '1M-64M' for a doubling run, '1M-1G:4' for
    another factor, else '1K,64K,1M'. Help texts show defaults with it."""
    s = sorted(set(int(x) for x in sizes))
    if len(s) > 2 and s[1] % s[0] == 0:
        f = s[1] // s[0]
        if f >= 2 and all(b == a * f for a, b in zip(s, s[1:])):
            rng = f"{format_size_short(s[0])}-{format_size_short(s[-1])}"
            return rng if f == 2 else f"{rng}:{f}"
    return ",".join(format_size_short(x) for x in s)


def count_noun(n: int, word: str, plural: str = "") -> str:
    """'1 row', '2 rows' (plural: the plural form when it is not word + 's')."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def format_bytes(n: float) -> str:
    """67108864 -> '64 MiB'. Exact binary multiples print without decimals; '?' for what is not a number (a saved
    report's field may hold anything)."""
    if not isinstance(n, (int, float)) or isinstance(n, bool) or not math.isfinite(n):
        return "?"
    n = float(n)
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def format_size_short(n: int) -> str:
    """67108864 -> '64M' (the grammar's own spelling, for tables and flags)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return f"{n}B" if n < 1024 else f"{n}"


def format_us(us: float) -> str:
    """Microseconds for humans: 12.3 us, 4.56 ms, 7.89 s."""
    if us is None or not math.isfinite(us):
        return "-"
    if us < 1000:
        return f"{us:.1f} us"
    if us < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1_000_000:.2f} s"


def format_duration(seconds: float) -> str:
    """A window for humans: 0.52 s, 42 s, 12 min, 3.2 h, 2.5 days."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def format_gbps(gbps: float) -> str:
    if gbps is None or not math.isfinite(gbps):
        return "-"
    return f"{gbps:.2f} GB/s" if gbps < 100 else f"{gbps:.1f} GB/s"


def format_mbps_link(speed_mbps) -> str:
    """NIC speed from sysfs (Mb/s) as people say it: 100000 -> '100 Gb/s'."""
    if not isinstance(speed_mbps, (int, float)) or isinstance(speed_mbps, bool) or not speed_mbps > 0:
        return "?"
    if speed_mbps >= 1000:
        v = speed_mbps / 1000
        return f"{v:.0f} Gb/s" if v == int(v) else f"{v:.1f} Gb/s"
    return f"{speed_mbps} Mb/s"
