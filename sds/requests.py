"""SDS-R requests: what we ask for, when, and within whose budget.

A dependency that someone's causal history named and we lack is asked for at its
``T_req`` (PROTOCOL.md "SDS-R"; the window stretched by the channel's size, the
first request of a large channel capped: ``Config.repair_first_request_capped``),
then again with a spread that grows with the time it has been missing. Up to
``repair_requests_per_message`` due requests ride on our next content message,
``repair_requests_per_sync`` on a sync (at most one such batch per
``repair_sync_interval_ms``). An id declared lost stays wanted: asked for again
with a doubling backoff until it arrives (nobody waits for it meanwhile).

Both buffers are capped; each request is filed under the member whose message
first named the id, and at the cap the namer costing the most gives one up, so
that identities naming invented ids (issue 26) cannot crowd out an honest
member's requests. A namer's cost counts its ids still missing too: the missing
tracker's counts (``missing_by``), read here.

Owned by :class:`sds.channel.Channel`; the missing tracker
(:class:`sds.missing.MissingTracker`) files requests for what it notes missing and
the answers part postpones ours when it hears another's. Reads the estimates
(:class:`sds.estimates.ChannelEstimates`) and, of each missing id, when it was
noticed and last named. Nothing here calls out.
"""

from __future__ import annotations

import functools
import heapq
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

from sds import sds_pb2
from sds.config import Config
from sds.estimates import ChannelEstimates
from sds.events import Event, MessagesMissing
from sds.message import HistoryEntry
from sds.repair import OutgoingRepairBuffer, t_req
from sds.tuning import (
    FIRST_REQUEST_CAP_WINDOWS,
    FIRST_REQUEST_MIN_LACKING,
    FIRST_REQUEST_SPACING,
)

__all__ = ["ASKED", "RepairRequests"]

#: RepairRequests.take asks first for the due ids of this many cheapest namers...
CHEAP_NAMERS = 32
#: ... looking at this many of their ids at most.
CHEAP_SCAN = 256

#: Whose ``max_missing_per_sender`` budget the ids learned only from others' repair
#: requests count against (Config.repair_note_asked): one for all requesters.
ASKED = "\x00asked"


class _MissingSince(Protocol):
    """What requests read of a missing id (:class:`sds.missing.Missing`)."""

    @property
    def noticed_ms(self) -> int: ...

    @property
    def named_ms(self) -> int | None: ...


def history_entry(mid: str, h: sds_pb2.HistoryEntry) -> HistoryEntry:
    """Received protobuf history entry ``h`` as a :class:`~sds.message.HistoryEntry`
    under id ``mid`` (its ``message_id`` as the caller holds it: one string for
    every channel that keeps it, ``sys.intern``)."""
    return HistoryEntry(
        mid,
        h.retrieval_hint if h.HasField("retrieval_hint") else None,
        h.sender_id if h.HasField("sender_id") else None,
    )


class RepairRequests:
    """Our pending SDS-R requests and the lost ids still wanted."""

    def __init__(
        self,
        channel_id: str,
        sender_id: str,
        config: Config,
        now_ms: int,
        estimates: ChannelEstimates,
        missing: Mapping[str, _MissingSince],
        missing_by: Mapping[str, int],
        events: list[Event],
    ) -> None:
        self.channel_id = channel_id
        self.sender_id = sender_id
        self.config = config
        self._estimates = estimates
        self._missing = missing
        self._missing_by = missing_by
        self._events = events
        self.out = OutgoingRepairBuffer(config.repair_buffer_size)
        #: Who named each requested id, and each namer's requests (oldest first):
        #: at the cap the namer with the most gives one up (make_room_for).
        self.out_by: dict[str, str] = {}
        self.out_of: dict[str, OrderedDict[str, None]] = {}
        #: Ids declared lost, still wanted: asked for again with a doubling backoff
        #: (retry count in lost_attempts) until they arrive; nobody waits for them.
        self.lost_wanted = OutgoingRepairBuffer(config.repair_buffer_size)
        self.lost_attempts: dict[str, int] = {}
        #: Who first named each wanted lost id, and each namer's ids (oldest first):
        #: when the buffer is full the namer with the most gives up its oldest, so
        #: one member's invented ids cannot push out the others' real ones.
        self.lost_by: dict[str, str] = {}
        self.lost_of: dict[str, OrderedDict[str, None]] = {}
        #: Wanted messages refused for their sender's budget (id -> sender), newest
        #: last: not asked for while that sender has ids missing (refuse).
        self.refused: OrderedDict[str, str] = OrderedDict()
        #: Ids we miss that an SDS-R request asked for (ours or one heard): when one
        #: arrives, SDS-R repaired it (not a store fetch). Bounded: the oldest go first.
        self.sdsr_asked: OrderedDict[str, int] = OrderedDict()
        #: Earliest time of the next sync sent only because repair requests are due.
        self.next_sync_ms = now_ms

    # ------------------------------------------------------------ requests

    def ask_for_missing(self, entry: HistoryEntry, by: str, now_ms: int) -> None:
        """The SDS-R request of a newly missing id, which ``by`` named: at its
        ``T_req``, capped in a stretched window; at the cap only at the expense of a
        namer costing more."""
        cfg = self.config
        mid = entry.message_id
        lo, hi = self._estimates.repair_window(now_ms)
        out = self.out
        if len(out) >= out.max_size:
            if by == ASKED:
                return  # never at another's expense (make_room_for)
            if not self.make_room_for(by):
                return  # still missing: the sweep and the lost timeout cover it
        due = t_req(self.sender_id, mid, now_ms, lo, hi)
        if cfg.repair_first_request_capped and hi > cfg.repair_t_max_ms:
            # the stretched window spreads the lacking members' first requests so
            # that one asks early and the others hear it: spread over the members
            # expected to lack the id, not over the whole channel; one that heard
            # neither that request nor a copy asks after a few base windows, not
            # up to 120 s later (Config.repair_first_request_capped)
            due = min(due, now_ms + self.first_request_delay(mid, now_ms, lo, hi))
        self.request(entry, due, by)

    def first_request_delay(self, mid: str, now_ms: int, lo: int, hi: int) -> int:
        """Config.repair_first_request_capped: the latest delay of our first request
        for ``mid`` in a stretched window ``[lo, hi)``. The members lacking an id are
        about ``participants x loss`` (the loss as we see it); their first requests
        are drawn over ``FIRST_REQUEST_SPACING x repair_t_min_ms`` each (at least the
        base window, at most the stretched one), so the first of them comes within
        about one spacing and the others still hear it before theirs is due. The
        stretched window spreads them over the whole channel's share of 120 s: at
        1,000 members and 10% loss ~100 draws over 119 s, the first ~1.2 s after
        the notice and, in 1 line in 40, more than 4.4 s (sdschat sim: the lines
        whose first request came 9-11 s after the notice set the delivery p99, the
        later lines of the ~100 members lacking them held back behind them). Spread
        over at least :data:`~sds.tuning.FIRST_REQUEST_MIN_LACKING` members: a few
        lacking members' requests 0.5 s apart crossed each other and their answers.
        And at the latest four base windows plus one draw of the base window.

        Where lines are carried (Config.carry_copies) a member that missed a line and
        its ``k`` carried copies is one of ``participants x loss ** (k + 1)`` (below
        :data:`~sds.tuning.CARRY_WHEN_LACKING`): alone, most likely; it draws over the
        base window, as a follow-up (drawn over ``T_min`` plus 50 s at 1,000 members
        and 10% loss, such lone members asked 7 s after the notice at the median, 25 s
        at p90, and the later lines they held back set the delivery p99)."""
        cfg = self.config
        est = self._estimates
        base = cfg.repair_t_max_ms
        delay = FIRST_REQUEST_CAP_WINDOWS * base + t_req(self.sender_id, mid, 0, lo, base)
        lacking = est.participants(now_ms) * est.loss_mean
        if lacking:
            k = est.carry_k(now_ms)
            spread = lacking * est.loss_mean ** k if k else max(
                lacking, FIRST_REQUEST_MIN_LACKING)
            span = lo + int(spread * cfg.repair_t_min_ms * FIRST_REQUEST_SPACING)
            span = min(hi, max(base, span))
            delay = min(delay, t_req(self.sender_id, mid, 0, lo, span))
        return delay

    def request(self, entry: HistoryEntry, due: int, by: str) -> None:
        """Ask for ``entry`` at ``due`` (SDS-R); ``by`` named it (there is room)."""
        if self.out.add(entry, due):
            self.file(entry.message_id, by)

    def unrequest(self, mid: str) -> bool:
        """Cancel the SDS-R request for ``mid``; whether there was one."""
        if not self.out.remove(mid):
            return False
        self.unfile(mid)
        return True

    def file(self, mid: str, by: str) -> None:
        """Count the request for ``mid`` as ``by``'s (``out_by``, ``out_of``)."""
        self.out_by[mid] = by
        self.out_of.setdefault(by, OrderedDict())[mid] = None

    def unfile(self, mid: str) -> None:
        """Undo :meth:`file` for ``mid``."""
        by = self.out_by.pop(mid, None)
        if by is not None:
            ids = self.out_of[by]
            del ids[mid]
            if not ids:
                del self.out_of[by]

    def refile(self, mid: str, by: str) -> None:
        """The request for ``mid`` (if any) is ``by``'s now."""
        old = self.out_by.get(mid)
        if old is not None and old != by:
            self.unfile(mid)
            self.file(mid, by)

    def make_room_for(self, by: str) -> bool:
        """The repair requests are at their cap: the namer with the most requests (if
        more than ``by``) gives up its oldest (the id stays missing; the sweep and the
        lost timeout still cover it); whether room was made. Requests for the ids a
        member with many identities invents then cannot crowd out an honest member's
        (per-sender budgets, issue 26): each namer keeps its share of the cap. (Picking
        the namer with the most ids *missing* left the cap full whenever that one held
        no request, and the new request then pushed out the latest-due one, an honest
        line's as often as not.)"""
        of = self.out_of
        if by != ASKED and of.get(ASKED):
            # ids known only from others' requests (Config.repair_note_asked) give way
            # first: those requesters ask for them already
            return self.unrequest(next(iter(of[ASKED])))
        top = max(of, key=lambda b: self.namer_cost(of, b), default=None)
        if top is None or top == by or self.namer_cost(of, top) <= self.namer_cost(of, by):
            return False
        return self.unrequest(next(iter(of[top])))

    def namer_cost(self, held: dict[str, OrderedDict[str, None]], by: str) -> int:
        """What namer ``by`` costs us at a cap: its entries in ``held`` (requests, or
        wanted lost ids) plus the ids it named that are still missing."""
        ids = held.get(by)
        return (len(ids) if ids is not None else 0) + self._missing_by.get(by, 0)

    # ---------------------------------------------------------- lost, wanted

    def want_lost(
        self, entry: HistoryEntry, now_ms: int, by: str, due: int | None = None, attempts: int = 0
    ) -> None:
        """Keep asking for lost ``entry`` (first at its ``T_req``, then with backoff);
        ``by`` first named it."""
        cfg = self.config
        if not cfg.repair_enabled:
            return
        mid = entry.message_id
        wanted = self.lost_wanted
        if mid in wanted:
            return
        if len(wanted) >= wanted.max_size:
            of = self.lost_of
            top = max(of, key=lambda b: self.namer_cost(of, b))
            self.unwant_lost(next(iter(of[top])))
        if due is None:
            lo, hi = self._estimates.repair_window(now_ms)
            due = t_req(self.sender_id, mid, now_ms, lo, hi)
        wanted.add(entry, due)
        self.lost_attempts[mid] = attempts
        self.lost_by[mid] = by
        self.lost_of.setdefault(by, OrderedDict())[mid] = None

    def unwant_lost(self, mid: str) -> None:
        if self.lost_wanted.remove(mid):
            self.lost_attempts.pop(mid, None)
            by = self.lost_by.pop(mid, None)
            if by is not None:
                ids = self.lost_of.get(by)
                if ids is not None:
                    ids.pop(mid, None)
                    if not ids:
                        del self.lost_of[by]

    def lost_retry_ms(self, mid: str, last_now: int) -> int:
        """Backoff of a lost id's next request: ``repair_t_max_ms`` doubling per
        attempt up to ``lost_retry_max_ms``, spread by the same hash as ``T_req``
        (the window as at ``last_now``, the channel's last call)."""
        cfg = self.config
        attempt = self.lost_attempts.get(mid, 0) + 1
        self.lost_attempts[mid] = attempt
        hi = self._estimates.repair_window(last_now)[1]
        base = min(hi << min(attempt - 1, 40), cfg.lost_retry_max_ms)
        spread = t_req(self.sender_id, mid, 0, 0, max(1, base // 4))
        return max(1, base + spread)

    def want_again(
        self,
        ids: set[str],
        history: Sequence[sds_pb2.HistoryEntry],
        history_ids: list[str],
        now_ms: int,
        sender_id: str,
    ) -> None:
        """Lost ids that a new message names again: whoever sent it holds them (or
        knows of them), so the gap may have healed. Ask for them soon (the backoff
        starts over); they stay lost for ordering (nobody waits), and one that
        arrives is delivered late (``was_lost``)."""
        cfg = self.config
        if not cfg.repair_enabled:
            return
        wanted = self.lost_wanted
        for i, mid in enumerate(history_ids):
            if mid not in ids or mid in self.out or self.refusing(mid):
                continue
            if mid in wanted and self.lost_attempts.get(mid, 0) == 0:
                continue  # already asked for at the first spacing
            entry = history_entry(mid, history[i])
            by = self.lost_by.get(mid, sender_id)
            self.unwant_lost(mid)
            self.want_lost(entry, now_ms, by)

    def ask_lost_again(self, now_ms: int) -> None:
        """Back online (reconnected, or restarted): ids declared lost and still wanted
        are asked for again at a first request's delay, their backoff started over.
        The requests made while away (or before a restart) may never have left."""
        if not self.config.repair_enabled or not self.lost_wanted:
            return
        lo, hi = self._estimates.repair_window(now_ms)
        for e, _, _ in self.lost_wanted.entries():
            mid = e.message_id
            self.lost_wanted.reschedule(mid, t_req(self.sender_id, mid, now_ms, lo, hi))
            self.lost_attempts[mid] = 0

    # ------------------------------------------------------------- refused

    def refuse(self, mid: str, sender_id: str) -> None:
        """Message ``mid`` arrived and was refused for ``sender_id``'s budget: not asked
        for while that sender still has ids missing (:meth:`refusing`)."""
        refused = self.refused
        refused[mid] = sender_id
        refused.move_to_end(mid)
        while len(refused) > self.config.log_window:
            refused.popitem(last=False)
        self.unrequest(mid)
        self.unwant_lost(mid)

    def refusing(self, mid: str) -> bool:
        """Whether ``mid`` was refused for its sender's budget, still spent (:meth:`refuse`)."""
        sender = self.refused.get(mid)
        return sender is not None and self._missing_by.get(sender, 0) > 0

    # ----------------------------------------------------------- what is due

    def note_sdsr_asked(self, message_id: str) -> None:
        asked = self.sdsr_asked
        asked[message_id] = 1
        asked.move_to_end(message_id)
        if len(asked) > self.config.repair_buffer_size:
            asked.popitem(last=False)

    def repaired(self, message_id: str) -> bool:
        """Content message ``message_id`` arrived: whether it was missing and an SDS-R
        request (ours or one heard) had asked for it (SDS-R repaired it, not a store
        fetch: the loss estimate)."""
        return bool(self.sdsr_asked.pop(message_id, 0) and message_id in self._missing)

    def take(
        self, now_ms: int, rec: int, last_now: int, limit: int | None = None
    ) -> list[HistoryEntry]:
        """Up to ``limit`` (a content message's ``repair_requests_per_message``) due
        SDS-R requests: missing ids first, then lost ids still wanted (those also
        reminded to the application, for its store). ``rec``: the recovery time now
        (:meth:`sds.missing.MissingTracker.recovery_ms`); ``last_now``: the time of
        the channel's last call (the lost ids' backoff)."""
        if not self.config.repair_enabled:
            return []
        cfg = self.config
        if limit is None:
            limit = cfg.repair_requests_per_message

        lo, hi = self._estimates.repair_window(now_ms)
        # our request's answer reaches us unless lost: asked again within the base
        # window (Config.repair_follow_up_base_window)
        slo, shi = (cfg.repair_t_min_ms, cfg.repair_t_max_ms) if (
            cfg.repair_follow_up_base_window) else (lo, hi)
        missing = self._missing

        def retry(mid: str) -> int:
            # The same spread as the first request, and at least half the time the
            # id has been missing (so an id nobody holds is asked for ever more
            # rarely: 1-5 s, then ~every 1.5x the age), capped at four times the
            # current T_max (20 s at the base window): a streak of answers lost on a
            # lossy link must not leave a causal chain blocked for minutes.
            spread = t_req(self.sender_id, mid, 0, slo, shi)
            info = missing.get(mid)
            if info is not None and info.named_ms is not None and now_ms - info.named_ms <= shi:
                # a member heard from named it in a line just now: it holds it, so
                # the id is not one nobody has, and we ask again as at first (at 30%
                # loss a line lost six times in a row held 19 later ones ~50 s while
                # our requests backed off)
                return spread
            age = 0 if info is None else max(0, rec - info.noticed_ms)
            return max(spread, min(age // 2, 4 * hi, cfg.repair_t_max_limit_ms))

        # The due ids of the cheapest namers first, then earliest-due first: an
        # identity naming thousands of ids nobody has cannot hold every due slot.
        out = self.out.take_ids(self._cheapest_namers_due(now_ms, limit), now_ms, retry)
        if len(out) < limit:
            out.extend(self.out.take_due(now_ms, limit - len(out), retry))
        for e in out:
            self.note_sdsr_asked(e.message_id)
        if len(out) < limit and self.lost_wanted:
            def lost_retry(mid: str) -> int:
                return self.lost_retry_ms(mid, last_now)

            again = self.lost_wanted.take_due(now_ms, limit - len(out), lost_retry)
            if again:
                out.extend(again)
                self._events.append(
                    MessagesMissing(self.channel_id, "", "", tuple(again), False)
                )
        return out

    def _cheapest_namers_due(self, now_ms: int, limit: int) -> list[str]:
        """Up to ``limit`` due requests of the namers that cost us least (namer_cost:
        their requests and the ids they named still missing), cheapest first, among the
        :data:`CHEAP_NAMERS` cheapest (not ASKED: ids known only from others' requests)
        and at most :data:`CHEAP_SCAN` of their ids. Earliest-due first alone, a member
        naming thousands of ids nobody has held every due slot of our messages and
        syncs, and an honest member's missing line was asked for seconds later (the
        hostile soak's flood: bench/sim_flood.py). An honest namer under loss costs a
        few ids; a flood's identities cost hundreds each and come last, in take_due."""
        of = self.out_of
        if len(of) < 2 or not self.config.repair_cheapest_namers_first:
            return []  # one namer: earliest-due first is its order too
        cost = functools.partial(self.namer_cost, of)
        namers = heapq.nsmallest(CHEAP_NAMERS, (b for b in of if b != ASKED), key=cost)
        out = self.out
        found: list[tuple[int, int, str]] = []
        scanned = 0
        for by in namers:
            c = cost(by)
            for mid in of[by]:
                scanned += 1
                if scanned > CHEAP_SCAN:
                    break
                due = out.due_at(mid)
                if due is not None and due <= now_ms:
                    found.append((c, due, mid))
            if scanned > CHEAP_SCAN or len(found) >= limit:
                break
        found.sort()
        return [mid for _, _, mid in found[:limit]]

    def due(self, now_ms: int) -> bool:
        """Whether a request is due (a sync carries it)."""
        return self.config.repair_enabled and (
            self.out.has_due(now_ms) or self.lost_wanted.has_due(now_ms)
        )

    def next_due(self) -> int | None:
        """When a sync is next due for our requests: the earliest request, but no
        sooner than :attr:`next_sync_ms` (one batch per ``repair_sync_interval_ms``)."""
        best: int | None = None
        t = self.out.next_deadline()
        if t is not None:
            best = max(t, self.next_sync_ms)
        t = self.lost_wanted.next_deadline()
        if t is not None:
            t = max(t, self.next_sync_ms)
            if best is None or t < best:
                best = t
        return best
