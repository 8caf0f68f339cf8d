"""How fast a member's membership events are taken: a token bucket per author.

Membership events and their parts arriving over SDS (not our own, not a members
file, not a join answer) pass :meth:`EventLimits.admit` before the SDS core sees
them. One refused is not remembered (the node forgets its envelope in the replay
guard), so the author's resends, repairs and the store bring it again once its
bucket has refilled: a flood costs its author time, and changes nothing that an
honest member would not take later. Admins add and remove members in bursts
(a script adding 150 members); a member only ever posts its own share key, name
and leave, every few days.

Pure: ``now_ms`` comes from the caller.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

__all__ = ["ADMIN_LIMIT", "MEMBER_LIMIT", "EventLimits", "Limit"]


@dataclass(frozen=True, slots=True)
class Limit:
    burst: float
    per_second: float


ADMIN_LIMIT: Final = Limit(burst=16384, per_second=256.0)
"""An admin's events: 16,384 at once (a channel of 10,000 filled by a script), 256 a
second after that."""

MEMBER_LIMIT: Final = Limit(burst=8, per_second=1 / 60)
"""Anyone else's: 8 at once, one a minute after that."""

MAX_TRACKED: Final = 4096


class EventLimits:
    """Token buckets per author (the least recently heard forgotten past 4,096)."""

    def __init__(self, admin: Limit = ADMIN_LIMIT, member: Limit = MEMBER_LIMIT) -> None:
        self.admin = admin
        self.member = member
        self._buckets: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def admit(self, author_id: str, is_admin: bool, now_ms: int) -> bool:
        """Whether one more event of ``author_id`` is taken now."""
        limit = self.admin if is_admin else self.member
        tokens, stamp = self._buckets.pop(author_id, (limit.burst, now_ms))
        tokens = min(limit.burst, tokens + max(0, now_ms - stamp) / 1000 * limit.per_second)
        ok = tokens >= 1.0
        self._buckets[author_id] = (tokens - 1.0 if ok else tokens, now_ms)
        while len(self._buckets) > MAX_TRACKED:
            self._buckets.popitem(last=False)
        return ok
