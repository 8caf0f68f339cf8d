"""Running a long-lived sdschat process's event loop: uvloop where it is installed.

``sdschat join --headless``, ``sdschat relay`` and ``sdschat store`` spend a
large part of each message in the event loop itself (waking up, socket
reads and writes, callbacks from SQLite's thread). uvloop (libuv) does that
work in C: on the e2e latency benchmark it cuts a node's CPU per message
(``bench/e2e_latency.py``, figures in the README). It is a drop-in asyncio
loop, so nothing else changes; where it is missing (Windows) the standard
loop runs. ``SDSCHAT_EVENT_LOOP=asyncio`` forces the standard loop (for side
by side measurements and for ruling the loop out when debugging).

The TUI keeps Textual's own loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

try:
    import uvloop
except ImportError:  # pragma: no cover - not installable on Windows
    uvloop = None  # type: ignore[assignment]

__all__ = ["EVENT_LOOP_ENV", "loop_name", "run"]

T = TypeVar("T")

EVENT_LOOP_ENV = "SDSCHAT_EVENT_LOOP"
"""Environment variable: ``asyncio`` forces the standard loop, anything else is the default."""


def loop_name() -> str:
    """``"uvloop"`` or ``"asyncio"``: the loop :func:`run` will use."""
    if uvloop is None or os.environ.get(EVENT_LOOP_ENV, "").strip().lower() == "asyncio":
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new loop (see the module docstring); like asyncio.run."""
    if loop_name() == "uvloop":
        return uvloop.run(main)
    return asyncio.run(main)
