"""Resends when nobody listens: they back off, exponentially and capped, until a peer shows.

Spec "Periodic Outgoing Buffer Sweep" resends every unacknowledged own message every
``resend_unacknowledged_ms``, ``max_resend_attempts`` times. In a channel where
nobody else is there, every one of those resends is wasted: a bot that piped 5,000
lines into an empty channel resent each of them ten times (45,000 resends in five
minutes; issue 41 item 8), and nothing it resent could be acknowledged.

:class:`ResendBackoff` owns the state that tells the two cases apart and what to do
in the second. It is *quiet* when no other participant has been heard (any message
of another sender: content, sync, ephemeral, a carried copy) for a whole resend
period. While quiet, a resend sweep sends at most :data:`~sds.tuning.QUIET_RESENDS`
of the messages due (oldest deadline first, each resent counting one attempt; the
others wait, spending none), and the next sweep comes after a period that doubles
each time: ``resend_unacknowledged_ms x 2, x 4, ...``, at most
``Config.resend_backoff_max_ms``. The first sign of a peer ends it: the next sweeps
are normal again, and what waited (and what a quiet sweep resent, due only after a
backoff period) is spread over one resend period in the order it was sent
(:meth:`sds.outgoing.OutgoingBuffer.spread_overdue`) rather than sent in one burst.

The wire is untouched (what is resent is the same bytes, only less often), and so is
a channel where someone is heard: every acknowledgement comes in a message of a peer,
so a channel whose messages are acknowledged is never quiet.

``Config.resend_backoff_max_ms = None`` turns it off (the spec's and js-waku's
behaviour; :class:`sds.Config`'s default, so that the core's behaviour does not
change under an application that has not chosen it). sdschat's node turns it on
(:data:`sds.tuning.RESEND_BACKOFF_MAX_MS`).

Owned by :class:`sds.channel.Channel`, which tells it of every peer heard
(:meth:`ResendBackoff.heard`); :class:`sds.outgoing.OutgoingBuffer` asks it how many
resends a sweep may send (:meth:`ResendBackoff.sweep`) and when the next may run
(:attr:`ResendBackoff.next_ms`). Saved with the channel's state when it is on (the
optional key ``resend_backoff``, :mod:`sds.state`).
"""

from __future__ import annotations

from sds.config import Config
from sds.tuning import QUIET_RESENDS

__all__ = ["ResendBackoff"]


class ResendBackoff:
    """Whether resends back off now, and until when (see the module docstring)."""

    __slots__ = ("config", "heard_ms", "level", "next_ms")

    def __init__(self, config: Config, now_ms: int) -> None:
        self.config = config
        #: the last sign of a peer (the channel's start until one is heard)
        self.heard_ms = now_ms
        #: quiet sweeps since the last sign of a peer (0: not backing off)
        self.level = 0
        #: while backing off, the earliest time of the next resend sweep
        self.next_ms: int | None = None

    def quiet(self, now_ms: int) -> bool:
        """Whether nobody has been heard for a whole resend period (and the backoff is on)."""
        cfg = self.config
        return (
            cfg.resend_backoff_max_ms is not None
            and now_ms - self.heard_ms >= cfg.resend_unacknowledged_ms
        )

    def sweep(self, now_ms: int) -> int | None:
        """A resend sweep is due at ``now_ms``: how many resends it may send (``None``:
        all those due, nobody is quiet; ``0``: none yet, the backoff holds them). A quiet
        sweep that sends moves the next one a doubled period later."""
        if not self.quiet(now_ms):
            return None
        if self.next_ms is not None and now_ms < self.next_ms:
            return 0
        cfg = self.config
        cap = cfg.resend_backoff_max_ms
        assert cap is not None  # quiet() checked it
        self.level += 1
        # 2 ** level periods, capped (the shift is bounded: at most 62 doublings)
        period = min(cap, cfg.resend_unacknowledged_ms << min(self.level, 62))
        self.next_ms = now_ms + max(period, cfg.resend_unacknowledged_ms)
        return QUIET_RESENDS

    def heard(self, now_ms: int) -> bool:
        """A peer was heard at ``now_ms``; whether that ended a backoff (the caller then
        spreads what waited)."""
        if now_ms > self.heard_ms:
            self.heard_ms = now_ms
        if not self.level:
            return False
        self.level = 0
        self.next_ms = None
        return True

    def export(self) -> list[int] | None:
        """The saved form, ``[level, next sweep or 0, last sign of a peer]`` (``None``
        with the backoff off: nothing is saved, and the state is what it always was).
        The last sign of a peer is kept too: a node restarted in a channel where nobody
        was heard still backs off at once, rather than resending everything due."""
        if self.config.resend_backoff_max_ms is None:
            return None
        return [self.level, self.next_ms or 0, self.heard_ms]

    def restore(self, level: int, next_ms: int, heard_ms: int) -> None:
        """Read :meth:`export`'s form (``next_ms`` clamped by the restore, ``heard_ms``
        no later than the restart)."""
        self.level = max(0, level)
        self.next_ms = next_ms if self.level and next_ms else None
        self.heard_ms = heard_ms
