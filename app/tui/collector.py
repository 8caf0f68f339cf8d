"""When the cyclic garbage collector may run in the app (it stalls everything while it does).

A full collection walks every tracked object: after boot that is the node, its
protocol state and the app (100-300 ms on a slow machine); while 200 messages/s
arrive, the rows, lines and caches made since then are enough for ~100 ms
passes every few seconds, and a key pressed meanwhile waits. So:

* :meth:`Collector.tick` (every half second) moves what survived so far out of
  the collector's sight (``gc.freeze``): automatic passes then only look at what
  was made since, a few milliseconds. Frozen objects are still freed by their
  reference counts when they are dropped (rows, lines, envelopes: no cycles).
* What the frozen set can not give back are objects that die in reference
  cycles after they were frozen (widgets of closed dialogs and notifications).
  For those, about once a minute, when nothing was typed for a moment, the
  whole heap is collected once (``gc.unfreeze``, ``gc.collect``, ``gc.freeze``);
  after ten minutes of non-stop typing it happens anyway.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

__all__ = ["Collector"]

RECLAIM_EVERY = 60.0
"""Seconds between two full collections of the whole heap (when idle)."""
RECLAIM_IDLE = 2.0
"""A full collection waits until nothing was typed for this long..."""
RECLAIM_LATEST = 600.0
"""...but no longer than this after the previous one."""


class Collector:
    """Freezes the heap's survivors on each tick; a full collection now and then when idle."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._reclaimed_at = clock()
        self._typed_at = float("-inf")
        self.reclaims = 0

    def typed(self) -> None:
        """A key changed the input (a full collection waits for a pause)."""
        self._typed_at = self._clock()

    def tick(self) -> None:
        now = self._clock()
        since = now - self._reclaimed_at
        idle = now - self._typed_at >= RECLAIM_IDLE
        if since >= RECLAIM_LATEST or (since >= RECLAIM_EVERY and idle):
            self._reclaimed_at = now
            self.reclaims += 1
            gc.unfreeze()
            gc.collect()
        gc.freeze()
