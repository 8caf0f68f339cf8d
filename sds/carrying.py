"""Carrying (Config.carry_copies): a content message carries the last few lines.

At scale, a member that missed a line gets it with the next ones without asking:
the sender of each content message attaches the SDS bytes of recent messages it
holds (:meth:`Carrying.to_carry`), each until enough copies of it were on the wire
that the members expected to lack it, ``participants x loss ** copies``, are below
:data:`~sds.tuning.CARRY_WHEN_LACKING`. Receivers give the carried bytes to
``Channel.receive`` with ``carried=True``; the counts of what was carried, and of
carried copies that were new or already held, are kept here.

Owned by :class:`sds.channel.Channel`, whose ``to_carry`` and ``note_carried`` are
the public entry points. Reads the log, the estimates and the answers part's cache
and copy counts (a carried copy is a copy on the wire).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sds.answers import RepairAnswers
from sds.config import Config
from sds.estimates import ChannelEstimates
from sds.log import LogEntry
from sds.tuning import CARRY_MAX_BYTES, CARRY_MAX_IDS, CARRY_SCAN

__all__ = ["Carrying"]


class Carrying:
    """Our newest content message, and the counts of carried copies."""

    def __init__(
        self,
        channel_id: str,
        sender_id: str,
        config: Config,
        entries: dict[str, LogEntry],
        estimates: ChannelEstimates,
        answers: RepairAnswers,
    ) -> None:
        self.channel_id = channel_id
        self.sender_id = sender_id
        self.config = config
        self._entries = entries
        self._estimates = estimates
        self._answers = answers
        #: the id of our newest content message (not carried by itself)
        self.just_sent = ""
        #: copies we attached, carried copies received that were new to us, and
        #: carried copies of what we held already
        self.sent = 0
        self.new = 0
        self.duplicates = 0

    def to_carry(
        self, now_ms: int, trace: Callable[[dict[str, Any]], None] | None
    ) -> list[tuple[str, bytes]]:
        """What our newest content message carries: ``(id, SDS bytes)`` of recent
        messages, newest first (see :meth:`sds.channel.Channel.to_carry`); they count
        as copies on the wire. ``trace``: the debug switch
        (:data:`sds.channel.carry_trace`), handed this decision."""
        cfg = self.config
        k = self._estimates.carry_k(now_ms)
        if not k:
            if trace is not None:
                self._trace(trace, now_ms, k, [])
            return []
        since = now_ms - cfg.repair_t_max_ms
        entries = self._entries
        answers = self._answers
        copies = answers.wire_copies
        cache = answers.cache
        out: list[tuple[str, bytes]] = []
        seen: list[tuple[str, str, int, int]] | None = [] if trace is not None else None
        for scanned, mid in enumerate(reversed(cache)):
            if scanned >= CARRY_SCAN:
                break
            le = entries.get(mid)
            if le is None or mid == self.just_sent:
                continue  # waiting for a dependency, or the message itself
            if le.logged_ms < since:
                if seen is not None:
                    seen.append((mid, "older_than_base_window", now_ms - le.logged_ms,
                                 copies.get(mid, 1)))
                break  # the cache is in arrival order: older ones follow
            data = cache[mid]
            if len(data) > CARRY_MAX_BYTES or copies.get(mid, 1) >= 1 + k:
                if seen is not None:
                    why = "too_big" if len(data) > CARRY_MAX_BYTES else "enough_copies"
                    seen.append((mid, why, now_ms - le.logged_ms, copies.get(mid, 1)))
                continue
            out.append((mid, data))
            if seen is not None:
                seen.append((mid, "carried", now_ms - le.logged_ms, copies.get(mid, 1)))
            if len(out) >= CARRY_MAX_IDS:
                break
        for mid, _ in out:
            answers.note_copy_on_wire(mid, now_ms)
            answers.count_wire_copy(mid)
        self.sent += len(out)
        if trace is not None:
            self._trace(trace, now_ms, k, seen or [])
        return out

    def _trace(
        self,
        trace: Callable[[dict[str, Any]], None],
        now_ms: int,
        k: int,
        seen: list[tuple[str, str, int, int]],
    ) -> None:
        """One :meth:`to_carry` decision for the debug switch."""
        est = self._estimates
        trace({
            "channel": self.channel_id,
            "sender": self.sender_id,
            "message": self.just_sent,
            "now_ms": now_ms,
            "k": k,
            "loss": round(est.loss_mean, 4),
            "loss_lines": est.loss_lines,
            "participants": est.participants(now_ms),
            "at_scale": est.at_scale(now_ms),
            "base_window_ms": self.config.repair_t_max_ms,
            # (id, decision, ms since it entered our log, its copies on the wire as we know)
            "candidates": [list(c) for c in seen],
        })
