"""Rejected envelopes on a headless node's stdout: a few at once, then one line per window.

Anyone who knows a relay's address can send it garbage (a wrong key, a bad
signature, bytes that are no envelope); the node refuses each before its core and
reports a ``rejected`` event. Written one JSON line each, an outsider's flood made
a headless node's stdout (and the script reading it) carry one line per garbage
envelope (issue 41 item 14). :class:`RejectedLines` passes on the first
:data:`SHOWN_PER_WINDOW` of each reason in a window of :data:`WINDOW_S` seconds as
they come, counts the rest, and at the end of the window writes one ``rejected``
line for them: the last one's fields, ``count`` (the node's running total for the
reason, as always) and ``suppressed`` (how many were not written). Nothing is lost
from the counts: ``/stats`` has them all (``rejected_REASON``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.node.events import Rejected

__all__ = ["SHOWN_PER_WINDOW", "WINDOW_S", "RejectedLines"]

WINDOW_S = 10.0
"""Length of a window, seconds."""

SHOWN_PER_WINDOW = 3
"""Rejections of one reason written as they come in a window; the rest are summed."""


@dataclass(slots=True)
class _Window:
    started: float
    shown: int = 0
    suppressed: int = 0
    last: Rejected | None = None


class RejectedLines:
    """Decides which ``rejected`` events are written (see the module docstring).

    ``write(event, suppressed)`` writes one; :meth:`offer` takes each event, and the
    summary of a window is written by a timer on the running loop (or by
    :meth:`flush`, at the end)."""

    def __init__(
        self,
        write: Callable[[Rejected, int], None],
        *,
        window_s: float = WINDOW_S,
        shown: int = SHOWN_PER_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self.window_s = window_s
        self.shown = shown
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self._timer: asyncio.TimerHandle | None = None

    def offer(self, ev: Rejected) -> None:
        now = self._clock()
        w = self._windows.get(ev.reason)
        if w is None or now - w.started >= self.window_s:
            if w is not None:
                self._summarise(ev.reason, w)
            w = self._windows[ev.reason] = _Window(now)
        if w.shown < self.shown:
            w.shown += 1
            self._write(ev, 0)
            return
        w.suppressed += 1
        w.last = ev
        self._arm(w.started + self.window_s - now)

    def flush(self) -> None:
        """Write what the open windows held back (at the end of the run)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for reason, w in list(self._windows.items()):
            self._summarise(reason, w)
        self._windows.clear()

    def _summarise(self, reason: str, w: _Window) -> None:
        if w.suppressed and w.last is not None:
            self._write(w.last, w.suppressed)
        w.suppressed = 0
        w.last = None

    def _arm(self, delay: float) -> None:
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a caller outside one): flush() writes them
            return
        self._timer = loop.call_later(max(0.0, delay), self._due)

    def _due(self) -> None:
        self._timer = None
        now = self._clock()
        for reason, w in list(self._windows.items()):
            if now - w.started >= self.window_s:
                self._summarise(reason, w)
                del self._windows[reason]
        left = [w.started + self.window_s - now for w in self._windows.values() if w.suppressed]
        if left:
            self._arm(min(left))
