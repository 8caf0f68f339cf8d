"""What one member knows of its channel: how many take part, and how much is lost.

The SDS-R windows (``Config.repair_window_participants``), the sync interval
(``Config.sync_interval_participants``), the copies of answers and carried copies
(``Config.repair_answer_copies``, ``Config.carry_copies``) and the spread of first
requests (``Config.repair_first_request_capped``) all follow from two estimates
kept here:

* the participants: the senders heard (each remembered with when, as far as the
  SDS-R windows need them) and a sampled count of them (``sds.census``) for the
  sync interval, but at least what the configured response groups stand for;
* the loss: a running mean of the share of delivered lines that reached us only
  through repair (or carried), over about the last :data:`~sds.tuning.LOSS_MEAN_LINES`.

Owned by :class:`sds.channel.Channel`, which reports what it hears
(:meth:`ChannelEstimates.hear`, :meth:`ChannelEstimates.note_line`); its other parts
read the estimates. The only randomness is the ``random.Random`` given
(:meth:`ChannelEstimates.one_of_few`).
"""

from __future__ import annotations

import random
from collections import OrderedDict

from sds.census import ParticipantCensus, salt_for
from sds.config import Config
from sds.tuning import (
    CARRY_WHEN_LACKING,
    FIRST_REQUEST_MIN_LACKING,
    HEARD_KEPT,
    LOSS_MEAN_LINES,
    PARTICIPANTS_PER_RESPONSE_GROUP,
)

__all__ = ["ChannelEstimates", "heard_kept"]


def heard_kept(cfg: Config) -> int:
    """Senders a channel remembers for its SDS-R window (see :data:`~sds.tuning.HEARD_KEPT`)."""
    per = cfg.repair_window_participants
    if per is None:
        return 0
    rounds = -(-cfg.repair_t_max_limit_ms // cfg.repair_t_max_ms)  # ceil
    return min(HEARD_KEPT, per * max(1, rounds))


class ChannelEstimates:
    """The channel's size and loss as ``sender_id`` sees them."""

    def __init__(self, config: Config, sender_id: str, rng: random.Random) -> None:
        self.config = config
        self.sender_id = sender_id
        self._rng = rng
        #: sender id -> when we last heard it (oldest first): the participants that
        #: size the SDS-R windows (Config.repair_window_participants).
        self.heard: OrderedDict[str, int] = OrderedDict()
        self.heard_kept = heard_kept(config)
        #: Senders heard (sampled count) that stretch the sync interval
        #: (Config.sync_interval_participants).
        self.census = ParticipantCensus(salt_for(sender_id))
        self.participants_at = (-1, 0)  # (now_ms, count) of the last participants()
        #: Running mean of the share of delivered lines that we had noted missing
        #: (they reached us only through repair): the channel's loss as we see it.
        self.loss_mean = 0.0
        self.loss_lines = 0  # lines in it so far (up to LOSS_MEAN_LINES)

    def hear(self, sender_id: str, now_ms: int) -> None:
        """A message of ``sender_id`` named only what we hold: it counts as a participant
        (the SDS-R windows, the sync interval). Identities naming invented ids (issue 26,
        a member with many keys) would otherwise stretch every honest member's repair
        and sync timings by their number."""
        kept = self.heard_kept
        if kept:
            heard = self.heard
            heard[sender_id] = now_ms
            heard.move_to_end(sender_id)
            while len(heard) > kept:
                heard.popitem(last=False)
        if self.config.sync_interval_participants is not None:
            self.census.hear(sender_id, now_ms)
            self.participants_at = (-1, 0)

    def note_line(self, repaired: bool) -> None:
        """A content message was delivered; ``repaired``: it reached us only through
        repair or carried (we had missed it directly)."""
        self.loss_lines = lines = min(self.loss_lines + 1, LOSS_MEAN_LINES)
        self.loss_mean += (repaired - self.loss_mean) / lines

    def active_participants(self, now_ms: int) -> int:
        """Participants heard from in the last three sync intervals, ourselves included
        (every online participant sends at least a sync per interval), counted as far
        as the SDS-R windows need: up to the number that stretches ``repair_t_max_ms``
        to its limit, and only ourselves with fixed windows
        (``repair_window_participants`` None)."""
        horizon = now_ms - 3 * self.config.sync_interval_ms
        heard = self.heard
        while heard:  # oldest first: drop those not heard since the horizon
            oldest = next(iter(heard))
            if heard[oldest] >= horizon:
                break
            del heard[oldest]
        return len(heard) + (0 if self.sender_id in heard else 1)

    def repair_window(self, now_ms: int) -> tuple[int, int]:
        """SDS-R ``(T_min, T_max)`` for this channel now: ``repair_t_max_ms`` stretched
        by participants beyond ``repair_window_participants`` (up to the limit).

        The participants are those heard from, but at least what the configured
        response groups stand for (``PARTICIPANTS_PER_RESPONSE_GROUP`` per group
        beyond the first: ``participants / 128 + 1`` groups is the recommendation).
        Before we have heard the channel (its first seconds, or after a restart) a
        group of ~128 holders would otherwise spread its answers over the base
        ``T_max`` and answer within one latency of each other: sdschat sim, 1,000
        participants, 5% loss: 25 of the 48 rebroadcasts of the first 10 s came
        within 150 ms of another copy of the same message.
        """
        cfg = self.config
        lo, hi = cfg.repair_t_min_ms, cfg.repair_t_max_ms
        per = cfg.repair_window_participants
        if per is None:
            return lo, hi
        n = max(
            self.active_participants(now_ms),
            PARTICIPANTS_PER_RESPONSE_GROUP * (cfg.repair_response_groups - 1),
        )
        if n <= per:
            return lo, hi
        return lo, max(hi, min(cfg.repair_t_max_limit_ms, hi * n // per))

    def sync_interval(self, now_ms: int) -> int:
        """The sync interval now: ``sync_interval_ms``, stretched by the participants
        heard beyond ``Config.sync_interval_participants`` (up to
        ``sync_interval_limit_ms``). The participants are those heard in the last
        ``sync_interval_limit_ms`` (ourselves included; a sampled count beyond 64,
        ``sds.census``), but at least what the configured response groups stand for
        (as for the SDS-R windows, :meth:`repair_window`)."""
        cfg = self.config
        base = cfg.sync_interval_ms
        per = cfg.sync_interval_participants
        limit = cfg.sync_interval_limit_ms
        if per is None or base >= limit:
            return base
        n = self.participants(now_ms)
        if n <= per:
            return base
        return min(limit, base * n // per)

    def participants(self, now_ms: int) -> int:
        """Participants for the sync interval (:meth:`sync_interval`); worked out once
        per ``now_ms`` (a receive asks up to three times)."""
        cached = self.participants_at
        if cached[0] == now_ms:
            return cached[1]
        cfg = self.config
        n = max(
            self.census.count(now_ms - cfg.sync_interval_limit_ms) + 1,
            PARTICIPANTS_PER_RESPONSE_GROUP * (cfg.repair_response_groups - 1),
        )
        self.participants_at = (now_ms, n)
        return n

    def at_scale(self, now_ms: int) -> bool:
        """More participants heard than ``Config.sync_interval_participants`` (never
        with a fixed interval)."""
        per = self.config.sync_interval_participants
        return per is not None and self.participants(now_ms) > per

    def one_of_few(self, now_ms: int) -> bool:
        """True with probability ``sync_interval_participants / participants`` (always
        in a channel that small, or with a fixed interval)."""
        per = self.config.sync_interval_participants
        if per is None:
            return True
        n = self.participants(now_ms)
        return n <= per or self._rng.random() * n < per

    def carry_k(self, now_ms: int) -> int:
        """Copies of a line carried after its first (Config.carry_copies; 0: none):
        only at scale, and where the members expected to lack a line,
        ``participants x loss``, are at least
        :data:`~sds.tuning.FIRST_REQUEST_MIN_LACKING`; then the fewest ``k`` after
        which ``participants x loss ** (k + 1)`` are below
        :data:`~sds.tuning.CARRY_WHEN_LACKING`, at most ``carry_copies``."""
        cfg = self.config
        loss = self.loss_mean
        if cfg.carry_copies <= 0 or not cfg.repair_enabled or not loss:
            return 0
        if not self.at_scale(now_ms):
            return 0
        n = self.participants(now_ms)
        if n * loss < FIRST_REQUEST_MIN_LACKING:
            return 0
        k = 1
        while k < cfg.carry_copies and n * loss ** (k + 1) >= CARRY_WHEN_LACKING:
            k += 1
        return k
