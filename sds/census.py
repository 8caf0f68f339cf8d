"""How many participants a channel has: a bounded, sampled count of the senders heard.

The sync interval grows with the channel (``Config.sync_interval_participants``), so
the core needs the number of participants at any size (10,000 and more) in bounded
memory. :class:`ParticipantCensus` keeps only the senders whose id hashes into a
sample of rate ``2 ** -level`` (CRC-32 of the id: deterministic across processes,
unlike ``hash()``), raising the level whenever more than :data:`SAMPLE_KEPT`
are kept, and counts ``kept x 2 ** level`` senders heard within a horizon. The
relative error is about ``1 / sqrt(SAMPLE_KEPT)`` (~12 %) once sampling starts;
below ``SAMPLE_KEPT`` senders the count is exact.

Each member samples with a ``salt`` of its own (the CRC-32 of its own id, XORed into
the ids' hashes): every member hears the same senders, and with one sample for all
the whole channel's estimate was one draw, too high or too low for every member at
once. 100 real nodes of one run kept 34 of 76 senders at the first level (an estimate
of 68) where the sims of the same shape kept 40 and 47 (80 and 94); carrying, which
starts at ``participants x loss`` >= 15, engaged in 16 of 120 real lines against 55
and 58 in the sims (bench/real_vs_sim.py --carry-trace, docs/sim.md). Salted, members
err both ways and the channel's behaviour follows the true count on average.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache

__all__ = ["SAMPLE_KEPT", "ParticipantCensus", "salt_for"]

#: Senders kept at most (each ~100 bytes: 10,000 simulated participants keep 6 MB).
SAMPLE_KEPT = 64


@lru_cache(maxsize=65_536)
def _sample_hash(sender_id: str) -> int:
    """CRC-32 of the id (cached: every channel of a process hears the same senders)."""
    return zlib.crc32(sender_id.encode())


def salt_for(member_id: str) -> int:
    """The sampling salt of the member ``member_id`` (see the module's docstring)."""
    return zlib.crc32(member_id.encode())


class ParticipantCensus:
    """Distinct senders heard within a horizon, estimated from a hash sample
    (``salt``: this member's own, :func:`salt_for`)."""

    __slots__ = ("_heard", "_level", "_mask", "_salt")

    def __init__(self, salt: int = 0) -> None:
        #: XORed into every id's hash: which senders this census samples
        self._salt = salt
        #: sampled sender -> last heard (oldest first)
        self._heard: OrderedDict[str, int] = OrderedDict()
        self._level = 0
        self._mask = 0

    def hear(self, sender_id: str, now_ms: int) -> None:
        """``sender_id`` sent something at ``now_ms``."""
        heard = self._heard
        if sender_id not in heard and self._mask and (
            (_sample_hash(sender_id) ^ self._salt) & self._mask
        ):
            return
        heard[sender_id] = now_ms
        heard.move_to_end(sender_id)
        if len(heard) > SAMPLE_KEPT:
            self._level += 1
            self._mask = (1 << self._level) - 1
            mask = self._mask
            salt = self._salt
            for s in [s for s in heard if (_sample_hash(s) ^ salt) & mask]:
                del heard[s]

    def count(self, since_ms: int) -> int:
        """Senders heard at or after ``since_ms`` (estimated beyond :data:`SAMPLE_KEPT`);
        those heard before are forgotten."""
        heard = self._heard
        while heard:
            oldest = next(iter(heard))
            if heard[oldest] >= since_ms:
                break
            del heard[oldest]
        return len(heard) << self._level

    def export(self) -> list[object]:
        """``[level, [[sender, last heard], ...]]`` (oldest first), for a saved state."""
        return [self._level, [[s, t] for s, t in self._heard.items()]]

    def restore(self, data: object, seen: Callable[[object], int]) -> None:
        """Back to what :meth:`export` gave; ``seen`` maps each saved time (a restored
        clock may be behind it). A malformed value leaves the census empty."""
        if not isinstance(data, list) or len(data) != 2:
            return
        level, rows = data
        if not isinstance(level, int) or not 0 <= level <= 32 or not isinstance(rows, list):
            return
        heard: OrderedDict[str, int] = OrderedDict()
        for row in rows[-SAMPLE_KEPT:]:
            if isinstance(row, list) and len(row) == 2 and isinstance(row[0], str):
                heard[row[0]] = seen(row[1])
        self._level = level
        self._mask = (1 << level) - 1
        self._heard = heard

