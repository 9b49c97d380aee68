"""Real flight-recorder dumps mutated (bytes flipped, runs repeated, truncated, hostile opcodes and JSON spliced in)
and diagnosed in-process: prints each distinct exception that escapes (type, file:line, an example), then the counts.

    python3 scripts/diagnose_fuzz.py SEED N      # e.g. 1 1500; a crash of the interpreter itself shows as its exit

tests/postmortem/test_hostile_inputs.py runs 120 of these in the fast tier; this sweeps more.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import random
import shutil
import tempfile
import traceback
from typing import Optional

from ncclcheck.errors import UsageError
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck.render.console import render_report

ROOT = pathlib.Path(__file__).resolve().parents[1]

FIX = ROOT / "tests" / "postmortem" / "fixtures"

SEEDS = [(FIX / d / n).read_bytes() for d in ("kill", "skip_wrapped", "size") for n in sorted(os.listdir(FIX / d))
         if n.startswith("nccl_trace")]
INSERTS = [b"\x85", b"\x85" * 100, b"h\x00", b"r\xff\xff\xff\x00", b"(", b"\x8a\xff", b"]", b"}", b"t", b"e",
           b"[" * 100, b"1e999", b"NaN", b"\x00", b"\x8b\x00\x00\x01\x00", b"s", b"u", b"\x94", b"2", b"0", b"1",
           b"-1", b"99999999999999999999999", b'"ranks": "[1,2,3]"', b'"collective_seq_id": 1e300', b"{}", b"[]"]


def mutate(rng: random.Random) -> bytes:
    data = bytearray(rng.choice(SEEDS))
    for _ in range(rng.randint(1, 6)):
        at, how = rng.randrange(len(data)), rng.randrange(4)
        if how == 0:
            data[at] = rng.randrange(256)
        elif how == 1:
            data[at:at] = rng.choice(INSERTS)
        elif how == 2:
            del data[at:]
            data = data or bytearray(b"\x80")
        else:
            n = rng.randint(1, 16)
            data[at:at] = data[at:at + n] * rng.randint(2, 50)
    return bytes(data)


def fuzz(seed: int, count: int) -> int:
    """Diagnose `count` mutated dumps; returns how many let an exception escape."""
    rng = random.Random(seed)
    errs: collections.Counter = collections.Counter()
    tmp = tempfile.mkdtemp()
    for i in range(count):
        data = mutate(rng)
        d = os.path.join(tmp, f"c{i}")
        os.mkdir(d)
        with open(os.path.join(d, "nccl_trace_rank_0" + (".json" if data[:1] == b"{" else "")), "wb") as f:
            f.write(data)
        shutil.copy(FIX / "kill" / "nccl_trace_rank_1", d)
        try:
            rep = diagnose([d])
            rep.to_json()
            list(render_report(rep))
        except UsageError:
            pass
        except Exception as exc:  # noqa: BLE001 - the point is to see every one
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            key = (type(exc).__name__, tb.filename.rsplit("/", 1)[-1], tb.lineno)
            if key not in errs:
                print(key, str(exc)[:200], flush=True)
            errs[key] += 1
        shutil.rmtree(d)
    shutil.rmtree(tmp)
    print(dict(errs) or "no exception escaped")
    print(f"dumps={count} escaped={sum(errs.values())}")
    return sum(errs.values())


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seed", type=int)
    ap.add_argument("n", type=int, help="how many mutated dumps")
    a = ap.parse_args(argv)
    return 1 if fuzz(a.seed, a.n) else 0


if __name__ == "__main__":
    main()
