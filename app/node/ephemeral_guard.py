"""Limits on received SDS ephemeral messages (typing indicators): a size cap and a
per-sender rate (issue 26 §8).

Ephemeral messages are never stored, acknowledged or resent, and each one becomes an
``ephemeral`` event (a JSON line in headless mode, a redraw in the TUI). Unlimited, one
member sending 3,000 of 60 KB made a headless node write 368 MiB of JSON. The node
now passes on at most :data:`EPHEMERAL_BURST` per sender and channel at once, refilled
at :data:`EPHEMERAL_RATE` per second, each at most :data:`MAX_EPHEMERAL_BYTES`; the
rest are dropped and counted (``ephemeral_dropped_size``, ``ephemeral_dropped_rate``).
The TUI sends one typing notice (~60 bytes) every 3 s at most, far inside both.

Never stored means none of them is written: the node keeps no event-log row of a
received ephemeral message (the core's ``EphemeralReceived``), and one changes no
protocol state to save. Before, a member's flood at the relay's rate (200/s) added
a row each: +5 MB of database in 15 s (issue 41 item 14).
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = [
    "EPHEMERAL_BURST",
    "EPHEMERAL_RATE",
    "MAX_EPHEMERAL_BYTES",
    "EphemeralGuard",
]

MAX_EPHEMERAL_BYTES = 1024
"""Largest ephemeral content sent or passed on (a typing notice is ~60 bytes)."""

EPHEMERAL_RATE = 1.0
"""Ephemeral messages per second passed on per sender and channel (refill rate)."""

EPHEMERAL_BURST = 5
"""Ephemeral messages passed on at once per sender and channel (bucket size)."""

MAX_TRACKED = 4096
"""Senders tracked (least recently heard forgotten first): memory stays bounded whatever
the number of identities; a forgotten sender starts again with a full bucket."""


class EphemeralGuard:
    """Token buckets per ``(channel, sender)``; :meth:`admit` says whether to pass one on."""

    def __init__(
        self,
        *,
        max_bytes: int = MAX_EPHEMERAL_BYTES,
        rate: float = EPHEMERAL_RATE,
        burst: int = EPHEMERAL_BURST,
        max_tracked: int = MAX_TRACKED,
    ) -> None:
        self.max_bytes = max_bytes
        self.rate = rate
        self.burst = float(burst)
        self.max_tracked = max_tracked
        self._buckets: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()

    def admit(self, channel: str, sender_id: str, size: int, now_ms: int) -> str | None:
        """``None`` to pass the message on, else why it is dropped: ``"size"`` or ``"rate"``."""
        if size > self.max_bytes:
            return "size"
        key = (channel, sender_id)
        tokens, stamp = self._buckets.pop(key, (self.burst, now_ms))
        tokens = min(self.burst, tokens + max(0, now_ms - stamp) * self.rate / 1000.0)
        ok = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if ok else tokens, now_ms)
        while len(self._buckets) > self.max_tracked:
            self._buckets.popitem(last=False)
        return None if ok else "rate"
