"""A short text as a terminal QR code (``segno``), drawn with half blocks: what
``/verify`` shows beside a safety number and ``/link`` and ``sdschat link`` beside a
link code. Pure: text in, lines out."""

from __future__ import annotations

import segno

__all__ = ["qr_lines"]

_HALF = {(True, True): "█", (True, False): "▀", (False, True): "▄", (False, False): " "}


def qr_lines(data: str, *, border: int = 2) -> list[str]:
    """``data`` as a QR code (error correction M) drawn with half blocks: two modules per
    terminal row, dark modules as ink (shown black on white, with a quiet zone of
    ``border`` modules, so a phone scans it whatever the terminal's theme)."""
    qr = segno.make(data, error="m", micro=False)
    rows = [[bool(m) for m in row] for row in qr.matrix_iter(scale=1, border=border)]
    if len(rows) % 2:
        rows.append([False] * len(rows[0]))
    return ["".join(_HALF[(top, bottom)] for top, bottom in zip(a, b, strict=True))
            for a, b in zip(rows[::2], rows[1::2], strict=True)]  # fmt: skip
