"""The Slurm compressed host list grammar (`gpu[01-04,07]`, `a[1-2],b3`, `n[001-003]-ib`, `r[1-2]-n[01-02]`),
expanded in order as Slurm does: the master of an srun job is the first host of SLURM_JOB_NODELIST."""

from __future__ import annotations


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append("".join(cur))
    return parts


def _expand_range_list(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"empty range in host list {whole!r}")
        if "-" in item:
            lo_s, _, hi_s = item.partition("-")
            if not (lo_s.isdigit() and hi_s.isdigit()):
                raise ValueError(f"bad range {item!r} in host list {whole!r}")
            lo, hi = int(lo_s), int(hi_s)
            if hi < lo:
                raise ValueError(f"descending range {item!r} in host list {whole!r}")
            if hi - lo > 100000:
                raise ValueError(f"range {item!r} in host list {whole!r} is implausibly large")
            width = len(lo_s)  # Slurm pads to the width of the lower bound: [08-10] -> 08 09 10, [8-10] -> 8 9 10
            out.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
        else:
            if not item.isdigit():
                raise ValueError(f"bad number {item!r} in host list {whole!r}")
            out.append(item)
    return out


def _expand_one(pattern: str, whole: str) -> list[str]:
    """Cartesian expansion of every bracket group in one host pattern: r[1-2]-n[1-2] -> r1-n1 r1-n2 r2-n1 r2-n2."""
    start = pattern.find("[")
    if start < 0:
        if "]" in pattern:
            raise ValueError(f"unbalanced ']' in host list {whole!r}")
        return [pattern]
    end = pattern.find("]", start)
    if end < 0:
        raise ValueError(f"unbalanced '[' in host list {whole!r}")
    prefix, body, rest = pattern[:start], pattern[start + 1 : end], pattern[end + 1 :]
    if "[" in body:
        raise ValueError(f"nested brackets in host list {whole!r}")
    tails = _expand_one(rest, whole)
    return [prefix + n + t for n in _expand_range_list(body, whole) for t in tails]


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm host list ('gpu[01-04,07],cpu1') into host names, in order. Raises ValueError when malformed."""
    text = (text or "").strip()
    if not text:
        return []
    hosts: list[str] = []
    for part in _split_top(text):
        part = part.strip()
        if not part:
            raise ValueError(f"empty host in host list {text!r}")
        hosts.extend(_expand_one(part, text))
    return hosts
