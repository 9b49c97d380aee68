"""A real browser opens the HTML report offline and draws a page that is not blank (skipped without chromium).

Set NCCLCHECK_SCREENSHOT_DIR to keep the screenshots for a look.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib

import pytest

from ncclcheck.render.html import render_html

from .conftest import load_example

BROWSERS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "chromium",
            "chromium-browser", "google-chrome")


def _browser():
    for b in BROWSERS:
        path = b if os.path.isabs(b) and os.access(b, os.X_OK) else shutil.which(b)
        if path:
            return path
    return None


def _png_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG into raw rows (filters undone): enough to measure variance."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = ihdr
    assert depth == 8 and colour in (2, 6) and interlace == 0, ihdr
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bench-gate-fail", "links-slow-node", "preflight-fail-3node"])
def test_browser_renders_a_page(tmp_path, name):
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium/google-chrome installed (apt-get install -y chromium)")
    page = tmp_path / f"{name}.html"
    page.write_text(render_html(load_example(name)), encoding="utf-8")
    keep = os.environ.get("NCCLCHECK_SCREENSHOT_DIR")
    png = os.path.join(keep, f"{name}.png") if keep else str(tmp_path / f"{name}.png")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1280,2000",
           page.as_uri()]
    try:
        subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish within 90 s")
    assert os.path.exists(png), "no screenshot written"
    data = open(png, "rb").read()
    width, height, rows = _png_rows(data)
    assert (width, height) == (1280, 2000)
    # Not blank: sample rows across the page and require many distinct colours and real spread.
    sample = b"".join(rows[y] for y in range(0, height, 40))
    distinct = len(set(sample[i:i + 3] for i in range(0, len(sample), 3)))
    mean = sum(sample) / len(sample)
    variance = sum((v - mean) ** 2 for v in sample[::7]) / len(sample[::7])
    assert distinct > 50 and variance > 100, (distinct, variance)


def test_images_are_data_uris_that_decode():
    import base64
    import re

    pytest.importorskip("matplotlib")
    text = render_html(load_example("bench-gate-fail"))
    srcs = re.findall(r'<img[^>]*\ssrc="([^"]*)"', text)
    assert srcs
    for src in srcs:
        head, _, payload = src.partition(",")
        assert head.startswith("data:image/") and head.endswith(";base64")
        assert base64.b64decode(payload, validate=True)
