"""When we sync: the periodic sync's deadline, suppression and deferral.

Spec "Periodic Sync Message": a participant with a log sends a sync (its causal
history and filter, no content, never stored) every ``sync_interval`` or so, drawn
at random; a content message of ours carries the same acknowledgements and pushes
it back, one received from others brings it closer (js-waku: 0.5x). The interval
stretches with the channel's size (``Config.sync_interval_participants``). With
``Config.sync_suppression`` a sync is skipped when others spoke since our last
message and named all we would name; with ``Config.sync_defer_naming`` one that
would only name ids waits while content flows at scale.

Owned by :class:`sds.channel.Channel`, which builds and sends the sync when
:meth:`SyncSchedule.decide` says so. Reads the estimates, the naming part and the
log; the only randomness is the ``random.Random`` given.
"""

from __future__ import annotations

import random

from sds.config import Config
from sds.estimates import ChannelEstimates
from sds.log import ChannelLog
from sds.naming import Naming

__all__ = ["SyncSchedule"]


class SyncSchedule:
    """The next sync's deadline and what decides whether it goes out."""

    def __init__(
        self,
        config: Config,
        rng: random.Random,
        log: ChannelLog,
        estimates: ChannelEstimates,
        naming: Naming,
        now_ms: int,
    ) -> None:
        self.config = config
        self._rng = rng
        self._keys = log.keys
        self._estimates = estimates
        self._naming = naming
        #: Sync suppression (Config.sync_suppression): another participant was heard
        #: since our last message; syncs skipped so far (stats).
        self.heard_since_sent = False
        self.suppressed = 0
        #: When we last heard a new content message from someone else
        #: (Config.sync_defer_naming; not persisted: after a restore nothing waits
        #: until content is heard again); syncs that waited for the channel to quiet.
        self.content_heard_ms: int | None = None
        self.deferred = 0
        #: The application asked for our next due sync even if it would be suppressed
        #: (:meth:`sds.channel.Channel.ask_sync`); not persisted.
        self.asked = False
        self.next_ms = now_ms + self.delay(1.0, now_ms)

    def delay(self, factor: float, now_ms: int) -> int:
        """A random wait of up to ``factor`` sync intervals."""
        return int(self._rng.random() * self._estimates.sync_interval(now_ms) * factor)

    def after_send(self, now_ms: int) -> None:
        """Our content message carries our acks: the periodic sync can wait."""
        self.next_ms = now_ms + self.delay(1.0, now_ms)
        self.heard_since_sent = False

    def after_content(self, now_ms: int) -> None:
        """A content message from someone else was taken: acknowledge it soon (the
        sync backoff shortened, js-waku: 0.5x)."""
        cfg = self.config
        interval = self._estimates.sync_interval(now_ms)
        if cfg.sync_suppression and interval > cfg.sync_interval_ms:
            # Larger than sync_interval_participants: one draw per wait, a timer
            # already within half an interval stays. Drawn again for every message
            # received, the timers of a busy channel crept towards now (the least of
            # k draws), and its members synced k times as often, most of them before
            # the first sync could suppress them.
            half = interval // 2
            if self.next_ms > now_ms + half:
                self.next_ms = now_ms + int(self._rng.random() * half)
        else:
            self.next_ms = min(self.next_ms, now_ms + self.delay(0.5, now_ms))

    def rename_soon(self, now_ms: int) -> None:
        """Ids to name again were noted: bring our sync forward, within half the base
        interval. (In a channel larger than ``Config.sync_interval_participants`` the
        naming part noted them with probability ``that / participants`` only: about
        that many members do it, whatever the channel's size; every member hears the
        same copy or checks the same lacking filter, and the first sync naming the
        ids makes the others strike them. The others name them at their next sync,
        which is not suppressed while they have ids to name.)"""
        delay = int(self._rng.random() * self.config.sync_interval_ms * 0.5)
        self.next_ms = min(self.next_ms, now_ms + delay)

    def first_entry(self, now_ms: int) -> None:
        """Our log is about to get its first entry: a sync deadline that passed while
        there was nothing to sync (``Channel.get_timer`` leaves it out then) is drawn
        again, as a new channel's is. Kept, it fired at once: every member that joined
        more than a sync interval before the first line synced on hearing it
        (bench/real_vs_sim.py, 40 real nodes: 21 syncs in the second after the first
        line, against 3 in the sim, whose members join as the lines start)."""
        if not self._keys and not self.asked and self.next_ms < now_ms:
            self.next_ms = now_ms + self.delay(1.0, now_ms)

    def decide(self, now_ms: int, requests: bool) -> bool:
        """The sync deadline came (the next one already drawn): whether this sync goes
        out (``requests``: repair requests are due, and it carries them)."""
        cfg = self.config
        if not self._keys and not requests and not self.asked:
            return False  # nothing to say (js-waku aborts such a sync too); asked for: its time
        if (
            not requests
            and self.heard_since_sent
            and not self.asked
            and cfg.sync_suppression
            and cfg.causal_history_floor is not None
            and not self._naming.rename
            and not self._naming.to_name(now_ms)
        ):
            # Suppressed: others spoke since our last message and named everything we
            # would name beyond the newest entries they name too.
            self.suppressed += 1
            return False
        if not requests and not self.asked and self._naming_waits(now_ms):
            # Only ids to name, and content flows: the next content message names the
            # newest ones for the channel (Config.sync_defer_naming). Drawn again as on
            # a content message, so that once the channel quiets the first of the
            # members' timers names what is left and suppresses the others.
            self.deferred += 1
            self.next_ms = now_ms + self.delay(0.5, now_ms)
            return False
        self.heard_since_sent = False
        self.asked = False
        return True

    def _naming_waits(self, now_ms: int) -> bool:
        """Config.sync_defer_naming: a sync that would only name ids waits (at scale,
        while we heard new content in the last half base interval; with ids nobody
        named, only in the last ``Config.sync_tail_quiet_ms``)."""
        cfg = self.config
        heard = self.content_heard_ms
        if (
            not cfg.sync_defer_naming
            or not cfg.sync_suppression
            or cfg.causal_history_floor is None
            or heard is None
        ):
            return False
        quiet = now_ms - heard
        if quiet >= cfg.sync_interval_ms // 2:
            return False
        tail = cfg.sync_tail_quiet_ms
        if tail is not None and quiet >= tail and self._naming.to_name(now_ms):
            # the last line of a burst: no later line will name it (its author waits
            # for the acknowledgement), and ours names it for the channel
            return False
        return self._estimates.at_scale(now_ms)
