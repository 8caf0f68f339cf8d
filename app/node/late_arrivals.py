"""Which messages arrived late: the one rule behind the ``↺ recovered`` mark.

A message of another member arrived *late* when, as it arrived here,

* something had named it missing: a later message's causal history, a sync message
  or a reminder (the core's ``MessagesMissing``), or the core had declared it lost
  (``MessageLost``; ``MessageDelivered.was_lost``); or
* a newer message of its author had already arrived here, although nothing had named
  the gap yet (the end of a burst, filled in by a resend, an SDS-R repair, a sync or
  the store).

A message that waits for its dependencies is judged when it arrives (a UI shows it
then: ``Missing.recovered``), and is late at its delivery too if it was named missing
while it waited. Own messages are never late.

The node decides it (:class:`LateArrivals`), passes it on with the delivery
(``Delivered.recovered``) and stores it with the message (``messages.recovered``), so
a UI marks a message the same when it comes and when its log is read back after a
restart. What the rule remembers is bounded: the newest :data:`MAX_REPORTED` ids named
missing and messages waiting per channel, each author's newest Lamport timestamp. A
restarted node starts from the newest stored page (:meth:`LateArrivals.seed`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_REPORTED", "LateArrivals"]

#: Ids named missing (and waiting messages judged) remembered per channel, oldest
#: forgotten first.
MAX_REPORTED = 10_000


@dataclass
class _Channel:
    reported: OrderedDict[str, None] = field(default_factory=OrderedDict)
    """Ids named missing (or declared lost) that have not been delivered."""
    latest: dict[str, int] = field(default_factory=dict)
    """sender id -> the highest Lamport timestamp of theirs that arrived here."""
    waiting: OrderedDict[str, bool] = field(default_factory=OrderedDict)
    """Messages that arrived and wait for dependencies -> judged late as they arrived."""


def _bound(d: OrderedDict[str, Any]) -> None:
    while len(d) > MAX_REPORTED:
        d.popitem(last=False)


class LateArrivals:
    """The rule of the module docstring, per channel, for the node of ``own_sender_id``."""

    def __init__(self, own_sender_id: str) -> None:
        self.own = own_sender_id
        self._channels: dict[str, _Channel] = {}

    def _ch(self, channel: str) -> _Channel:
        ch = self._channels.get(channel)
        if ch is None:
            ch = self._channels[channel] = _Channel()
        return ch

    def forget(self, channel: str) -> None:
        """The channel was left."""
        self._channels.pop(channel, None)

    def seed(self, channel: str, authors: Iterable[tuple[str, int]]) -> None:
        """Stored messages ``(sender id, lamport)`` (the newest page of the log, at join):
        an older message of one of their authors that comes now is late."""
        latest = self._ch(channel).latest
        for sender, lamport in authors:
            if sender != self.own and lamport > latest.get(sender, -1):
                latest[sender] = lamport

    def named_missing(self, channel: str, ids: Iterable[str]) -> None:
        """``MessagesMissing`` or ``MessageLost`` named ``ids``."""
        reported = self._ch(channel).reported
        for mid in ids:
            reported[mid] = None
            reported.move_to_end(mid)
        _bound(reported)

    def arrived_waiting(self, channel: str, message_id: str, sender_id: str, lamport: int) -> bool:
        """A content message arrived and waits for dependencies: is it late (its first
        arrival is judged; a copy of it gets the same answer)?"""
        if sender_id == self.own:
            return False
        ch = self._ch(channel)
        late = ch.waiting.get(message_id)
        if late is None:
            late = message_id in ch.reported or lamport < ch.latest.get(sender_id, -1)
            ch.waiting[message_id] = late
            _bound(ch.waiting)
        if lamport > ch.latest.get(sender_id, -1):
            ch.latest[sender_id] = lamport
        return late

    def delivered(
        self, channel: str, message_id: str, sender_id: str, lamport: int, was_lost: bool
    ) -> bool:
        """A message entered the log: did it arrive late?"""
        ch = self._ch(channel)
        named = message_id in ch.reported
        if named:
            del ch.reported[message_id]
        judged = ch.waiting.pop(message_id, None)
        if sender_id == self.own:
            return False
        older = judged is None and lamport < ch.latest.get(sender_id, -1)
        if lamport > ch.latest.get(sender_id, -1):
            ch.latest[sender_id] = lamport
        return was_lost or named or bool(judged) or older
