"""A skewed wall clock (issue 26 §3): tell the person, correct the node's time, hold what
comes from a clock ahead, flag send times that cannot be true.

SDS Lamport timestamps start at wall-clock milliseconds, and the core refuses a message
more than ``max_clock_skew_ms`` (10 min) ahead of its own clock (``CLOCK_AHEAD``: one
message far in the future would otherwise move every clock there for good). A member
whose clock ran 1 hour ahead had every message dropped by the others; one 1 day behind
received nothing; neither was told. Now:

* **The person is told** (:class:`~app.node.events.ClockSkew`, in headless a ``clock``
  event; the TUI shows its text). :class:`ClockEstimate` compares the Lamport time of the
  freshest sync message of each member heard in the last :data:`WINDOW_MS` with our wall
  clock: when a majority of them (at least :data:`MIN_VOTERS`, 2) agree that our clock
  is more than ``max_clock_skew_ms`` off, and with each other within half of it, the
  offset is their median. With one other member heard nobody can tell whose clock is
  wrong: the event says so (``state="differs"``) and nothing is corrected.
* **The node corrects its time**: from then on the core's ``now`` is the wall clock plus
  that offset (so a clock 1 day behind takes the others' messages again and its own carry
  their time); a clock found ahead also brings the core's Lamport clock back (as a restart
  with a right clock does). The correction follows later evidence (back to 0 when the
  system clock is fixed).
* **Messages from a clock ahead are held**, not lost (:class:`ClockHold`): an envelope
  the core refused as ``CLOCK_AHEAD`` is kept (bounded per sender and in all) and given
  to the core again once its time is within the bound, or at once after a correction.
* **Lines already stamped by a clock ahead are named** (:func:`sent_ahead`): when the
  correction takes our time back, own messages not yet acknowledged whose time is
  still more than the bound ahead are held by every member until their clocks reach it
  (their time is part of their id: they cannot be stamped again); a ``ClockSkew`` with
  ``state="sent_ahead"`` says how many and for about how long.
* **Implausible send times are flagged** (:func:`implausible_time`): a Lamport time before
  2020, or not after a message it names in its causal history (a backdated message),
  gives the ``Delivered`` event an ``implausible_time`` reason.

* **Votes are asked for** (:class:`VoteRequests`): under sync suppression a quiet
  channel has one member syncing, so a member whose clock is off would hear one clock
  and could not be corrected. A sync whose time is more than ``max_clock_skew_ms`` off
  ours makes our next due sync go out even if suppression would skip it
  (``sds.Channel.ask_sync``), on its usual timer; hearing :data:`MIN_VOTERS` members
  whose clocks agree with ours withdraws the request (they voted already: the same
  suppression, for votes). So the member with the odd clock syncs once, everyone
  else answers with at most one sync, and a request is renewed at most every
  :data:`VOTE_RENEW_MS`.

Limits: the estimate trusts the majority of members heard; someone holding most of the
identities of a small channel can move it (as they could outvote any member). In a
channel of two, a skewed clock is reported to both and its messages are held, not
corrected. Old sync
messages replayed by a store peer count as votes for "ahead" only while no fresher one of
that member is heard.
"""

from __future__ import annotations

import heapq
import statistics
from collections import OrderedDict
from dataclasses import dataclass

__all__ = [
    "PLAUSIBLE_MIN_MS",
    "WINDOW_MS",
    "ClockEstimate",
    "ClockHold",
    "Correction",
    "VoteRequests",
    "describe_offset",
    "implausible_time",
    "sent_ahead",
]

WINDOW_MS = 10 * 60_000
"""Members heard within this long vote on the clock."""

MAX_VOTERS = 256
"""Members whose freshest sync is remembered (least recently heard forgotten first)."""

PLAUSIBLE_MIN_MS = 1_577_836_800_000
"""2020-01-01 UTC in ms: a Lamport time before it is no wall-clock time sdschat wrote."""

HOLD_PER_SENDER = 256
HOLD_TOTAL = 4096
"""Envelopes held for a clock ahead, per sender and in all (oldest given up first)."""

LAMPORTS_KEPT = 8192
"""Recent messages whose Lamport time is remembered (for :func:`implausible_time`)."""


MIN_VOTERS = 2
"""Members who must agree before our clock is corrected. With one other member heard,
nobody can tell whose clock is wrong: both are told, neither is corrected (correcting
both ways at once would make each adopt the other's error)."""

VOTE_RENEW_MS = 60_000
"""A request for our sync as a clock vote is renewed at most this often per channel."""


@dataclass(frozen=True, slots=True)
class Correction:
    """A new clock offset: ``offset_ms`` added to the wall clock; ``voters`` agreed.
    ``applied`` False: a warning only (fewer than :data:`MIN_VOTERS` members heard)."""

    offset_ms: int
    previous_ms: int
    voters: int
    heard: int
    applied: bool = True


def describe_offset(offset_ms: int) -> str:
    """``"1 h 0 min ahead of"`` style wording of our clock against the others'."""
    ms = abs(offset_ms)
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes = rest // 60_000
    parts = []
    if days:
        parts.append(f"{days} d")
    if hours or days:
        parts.append(f"{hours} h")
    parts.append(f"{minutes} min")
    # offset > 0: we add time, so our clock is behind theirs
    return " ".join(parts) + (" behind" if offset_ms > 0 else " ahead of")


def sent_ahead(lamports: list[int], now_ms: int, max_skew_ms: int) -> str | None:
    """What to tell the person when our clock was found ahead: ``lamports`` are the
    times of our own messages not yet acknowledged; those more than ``max_skew_ms``
    ahead of the corrected ``now_ms`` are refused by every member (held until their
    clocks are within bound of it) and cannot be stamped again (the time is part of
    the message id). ``None`` when there are none."""
    ahead = [t for t in lamports if t > now_ms + max_skew_ms]
    if not ahead:
        return None
    wait = describe_offset(now_ms + max_skew_ms - max(ahead)).removesuffix(" ahead of")
    return (f"{len(ahead)} line(s) you sent before the correction carry your clock's "
            f"time: the others hold them for about {wait}, until their clocks reach it")


class ClockEstimate:
    """Votes of the members heard on how far our wall clock is off (module docstring)."""

    def __init__(self, max_skew_ms: int) -> None:
        self.max_skew_ms = max_skew_ms
        self.offset_ms = 0
        self._warned = False
        self._votes: OrderedDict[str, tuple[int, int]] = OrderedDict()  # sender -> (d, at)

    def observe(self, sender_id: str, lamport: int, wall_ms: int) -> Correction | None:
        """A fresh sync message of ``sender_id`` stamped ``lamport`` arrived at our
        ``wall_ms``; a :class:`Correction` when the offset to apply changes."""
        d = lamport - wall_ms
        old = self._votes.pop(sender_id, None)
        if old is not None and old[0] > d and wall_ms - old[1] < WINDOW_MS:
            d = old[0]  # keep the freshest (a replayed old sync says less)
        self._votes[sender_id] = (d, wall_ms)
        while len(self._votes) > MAX_VOTERS:
            self._votes.popitem(last=False)
        return self._decide(wall_ms)

    def _decide(self, wall_ms: int) -> Correction | None:
        recent = [d for d, at in self._votes.values() if wall_ms - at <= WINDOW_MS]
        if not recent:
            return None
        median = int(statistics.median(recent))
        agree = sum(1 for d in recent if abs(d - median) <= self.max_skew_ms // 2)
        if agree * 2 <= len(recent) and len(recent) > 1:
            return None  # no majority: leave the offset as it is
        # within what honest clocks differ by: no correction
        target = 0 if abs(median) <= self.max_skew_ms else median
        if target == self.offset_ms:
            return None
        if target and len(recent) < MIN_VOTERS:
            if self._warned:
                return None
            self._warned = True  # told once; corrected only when more members agree
            return Correction(target, self.offset_ms, agree, len(recent), applied=False)
        if target and self.offset_ms and abs(target - self.offset_ms) <= self.max_skew_ms // 2:
            return None  # the same correction, measured again
        previous, self.offset_ms = self.offset_ms, target
        return Correction(target, previous, agree, len(recent))


class ClockHold:
    """Envelopes the core refused as ``CLOCK_AHEAD``, until their time is within bound."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str, bytes]] = []  # (lamport, seq, sender, envelope)
        self._per_sender: dict[str, int] = {}
        self._held: set[bytes] = set()  # envelopes held (their resends are not held twice)
        self._seq = 0
        self.given_up = 0

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, sender_id: str, lamport: int, envelope: bytes) -> None:
        if envelope in self._held:
            return
        if self._per_sender.get(sender_id, 0) >= HOLD_PER_SENDER or len(self._heap) >= HOLD_TOTAL:
            self.given_up += 1  # its author's resends, repair or the store bring it back
            return
        self._held.add(envelope)
        self._seq += 1
        heapq.heappush(self._heap, (lamport, self._seq, sender_id, envelope))
        self._per_sender[sender_id] = self._per_sender.get(sender_id, 0) + 1

    def next_due(self, max_skew_ms: int) -> int | None:
        """Our (corrected) time at which the earliest held envelope is within bound."""
        return self._heap[0][0] - max_skew_ms if self._heap else None

    def due(self, now_ms: int, max_skew_ms: int) -> list[bytes]:
        """Held envelopes whose time is now within bound (removed)."""
        out: list[bytes] = []
        while self._heap and self._heap[0][0] <= now_ms + max_skew_ms:
            _l, _s, sender, env = heapq.heappop(self._heap)
            left = self._per_sender.get(sender, 1) - 1
            if left:
                self._per_sender[sender] = left
            else:
                self._per_sender.pop(sender, None)
            self._held.discard(env)
            out.append(env)
        return out


class LamportMemory:
    """Lamport times of recent messages per channel (bounded), to spot backdating."""

    def __init__(self, size: int = LAMPORTS_KEPT) -> None:
        self.size = size
        self._seen: OrderedDict[tuple[str, str], int] = OrderedDict()

    def remember(self, channel: str, message_id: str, lamport: int) -> None:
        self._seen[(channel, message_id)] = lamport
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)

    def newest_of(self, channel: str, ids: tuple[str, ...] | list[str]) -> int | None:
        found = [self._seen[(channel, m)] for m in ids if (channel, m) in self._seen]
        return max(found) if found else None

    def history_start(self, channel: str, ids: tuple[str, ...] | list[str]) -> int | None:
        """The Lamport time of a causal history's first entry when its first two are
        known and in log order (where the newest log entries start), else ``None``."""
        if len(ids) < 2:
            return None
        first, second = self._seen.get((channel, ids[0])), self._seen.get((channel, ids[1]))
        if first is None or second is None or (first, ids[0]) >= (second, ids[1]):
            return None
        return first


def implausible_time(lamport: int, newest_dependency: int | None) -> str | None:
    """Why a message's send time cannot be true, or ``None``."""
    if lamport < PLAUSIBLE_MIN_MS:
        return "before 2020"
    if newest_dependency is not None and lamport <= newest_dependency:
        return "not after a message it names (backdated)"
    return None


class VoteRequests:
    """Whether a channel's next sync should go out as a clock vote (module docstring)."""

    def __init__(self, max_skew_ms: int) -> None:
        self.max_skew_ms = max_skew_ms
        self._open: dict[str, tuple[int, set[str]]] = {}  # channel -> (asked at, agreeing)

    def on_sync(self, channel: str, sender_id: str, offset_ms: int, now_ms: int) -> bool | None:
        """A sync of ``sender_id`` in ``channel``, its time ``offset_ms`` from our
        (corrected) clock. ``True``: ask the core for our next sync; ``False``: withdraw
        the request; ``None``: no change."""
        asked = self._open.get(channel)
        if abs(offset_ms) > self.max_skew_ms:
            if asked is not None and now_ms - asked[0] < VOTE_RENEW_MS:
                return None
            self._open[channel] = (now_ms, set())
            return True
        if asked is None:
            return None
        asked[1].add(sender_id)
        if len(asked[1]) < MIN_VOTERS:
            return None
        del self._open[channel]
        return False
