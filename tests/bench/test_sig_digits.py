"""The JSON keeps >= 6 significant digits for every measured figure; only renderers round (issue 13)."""

from __future__ import annotations

import json

from ncclcheck.bench.collectives import _build_row
from ncclcheck.bench.ops import bandwidths, coll_counts
from ncclcheck.model import sig


def test_sig_keeps_six_significant_digits():
    assert sig(0.000412345678) == 0.000412346
    assert sig(123456789.0) == 123457000.0
    assert sig(0.0) == 0.0 and sig(None) is None


def test_small_message_bandwidth_survives_the_json():
    counts = coll_counts("all_reduce", 1024, "float32", 2)
    t_us = 2497.3  # 1 KiB on gloo: ~0.00041 GB/s, which round(x, 4) turned into 0.0004 (2 % off)
    row = _build_row("all_reduce", "float32", False, counts, [[t_us, 1.0, 0.5, 1.7e9, 0.0]] * 2, False, 2)
    doc = json.loads(json.dumps(row.to_json()))
    algbw, busbw = bandwidths("all_reduce", counts.bytes, t_us, 2)
    assert doc["algbw_gbps"] > 0 and abs(doc["algbw_gbps"] - algbw) / algbw < 1e-5
    assert abs(doc["busbw_gbps"] - busbw) / busbw < 1e-5
    assert doc["time_us"] == t_us
