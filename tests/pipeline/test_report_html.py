"""The HTML report renders in a real browser: headless Chromium takes a screenshot of
report.html and the charts' colours are on it, and the sections that explain why
(participants, timeline, conditions, duplicates) are in it.

The charts are inline SVG (no script, no network). The screenshot is decoded here
(PNG: zlib and the five scanline filters of the PNG specification) and the pixels
of the bar charts' and the convergence curve's colours are counted. Chromium is
installed by the Makefile's ``tools`` target (``apt-get install chromium``); the
test is skipped, saying so, only where it is absent.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from pipeline_helpers import report, simulate

from app.sim.simulation import PartitionSpec
from pipeline.html_report import _COLORS
from tests.procs import T

#: the timeline's colour of a participant logging events
LANE = "#9ae6b4"

CHROMIUM = next((p for p in (shutil.which(n) for n in (
    "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")) if p), None)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = bpp = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def colour_counts(rows: list[bytes], bpp: int, colours: list[str]) -> dict[str, int]:
    want = {bytes.fromhex(c[1:]): c for c in colours}
    counts = dict.fromkeys(colours, 0)
    for line in rows:
        for i in range(0, len(line), bpp):
            hit = want.get(line[i:i + 3])
            if hit:
                counts[hit] += 1
    return counts


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make tools installs "
                    "it: apt-get install chromium); the rendered report cannot be checked")
def test_the_report_renders_with_its_charts_in_chromium(spark: Any, tmp_path: Path) -> None:
    run = simulate(tmp_path, "part", participants=4, messages=12, seed=3,
                   partitions=[PartitionSpec(0, None, ((0, 1), (2, 3)))])
    report(spark, [run], tmp_path / "report")
    page = tmp_path / "report" / "report.html"
    shot = tmp_path / "shot.png"
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'prof'}",
         # nothing leaves the machine: no background services, no name resolution,
         # and any request would go to a closed port on 127.0.0.1
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-domain-reliability", "--no-default-browser-check", "--dns-prefetch-disable",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
         "--window-size=1000,3600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=T(120),
    )
    assert shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    width, height, rows = png_pixels(data)
    assert (width, height) == (1000, 3600)
    bpp = len(rows[0]) // width
    counts = colour_counts(rows, bpp, [_COLORS[0], _COLORS[2], LANE])
    # bars (the first colour) and the convergence curve (the third) were drawn
    assert counts[_COLORS[0]] > 500, counts
    assert counts[_COLORS[2]] > 50, counts
    # and the timeline's participant lanes
    assert counts[LANE] > 500, counts
    html = page.read_text()
    for section in ("<h3>Participants</h3>", "<h3>Timeline</h3>", "<h3>Conditions of the run</h3>",
                    "<h3>Duplicate deliveries</h3>", "<dt>missing since</dt>",
                    "<h3>What happened to each participant</h3>"):
        assert section in html
    assert "partition from 0.0 s, never healed: {p000, p001} | {p002, p003}" in html
    # and text: most of the page is not one colour
    assert len({line for line in rows}) > 100
