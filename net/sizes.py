"""Sizes as operators type them on the command line: ``1G``, ``500M``, ``64k``, ``0``.

One parser for every flag that takes a size (the store's ``--max-bytes``, the relay
cluster's backlog limits); stdlib only, so any module of ``net`` may import it.
"""

from __future__ import annotations

import re

__all__ = ["parse_size"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """``"1G"``, ``"500M"``, ``"64k"``, ``"1GiB"`` (powers of 1024) or plain bytes -> bytes.

    Raises:
        ValueError: anything else.
    """
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (examples: 1G, 500M, 64k, 0)")
    unit = (m.group(2) or "").lower()[:1]
    return int(float(m.group(1)) * _SIZE_UNITS[unit])
