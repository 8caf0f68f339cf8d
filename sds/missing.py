"""The missing-message tracker: what we lack, what waits for it, and when it is lost.

Spec "Receive Message" and "Periodic Incoming Buffer Sweep". A content message
whose causal history names ids we do not hold waits in the incoming buffer
(:class:`Waiting`) until each is delivered, vouched for by the application's
storage (``mark_dependencies_met``) or declared lost after ``lost_timeout_ms`` of
connected time (recovery time: :meth:`MissingTracker.recovery_ms`). Every id we
lack (:class:`Missing`) counts against the budget of the member whose message
first named it (``Config.max_missing_per_sender``), and its SDS-R request is filed
with :class:`sds.requests.RepairRequests`.

Owned by :class:`sds.channel.Channel`, which delivers what this part releases
(:meth:`MissingTracker.release`, :meth:`MissingTracker.delivered`) and declares lost
what it reports (:meth:`MissingTracker.due_lost`, :meth:`MissingTracker.cap_victims`):
delivery and loss touch the log, the requests and the naming, which are not this
part's. Reads the log's entries and the senders heard; events go to the
channel's list.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sds import sds_pb2
from sds.config import Config
from sds.estimates import ChannelEstimates
from sds.events import DropReason, Event, MessageDropped, MessageLost, MessagesMissing
from sds.log import LogEntry
from sds.message import HistoryEntry
from sds.requests import ASKED, RepairRequests, history_entry
from sds.tuning import MAX_ID_LENGTH

__all__ = ["Missing", "MissingTracker", "Waiting", "usable_ids"]


@dataclass(slots=True)
class Waiting:
    """A received content message waiting for its causal dependencies."""

    message_id: str
    sender_id: str
    lamport: int
    content: bytes
    history_ids: tuple[str, ...]
    retrieval_hint: bytes | None
    data: bytes
    received_ms: int
    unmet: int
    lost_before: int = 0
    #: another sender named it (so delivered it): its missing dependencies are
    #: given up sooner (MissingTracker.vouch)
    vouched: bool = False


@dataclass(slots=True)
class Missing:
    """An id someone's causal history named that we do not have."""

    entry: HistoryEntry
    #: when it was noticed, in recovery time (``MissingTracker.recovery_ms``), not wall time
    noticed_ms: int
    waiting: set[str]
    #: the sender whose message first named it (its ``max_missing_per_sender`` budget)
    by: str = ""
    #: when a line of a member heard from last named it (our clock; its holder is live)
    named_ms: int | None = None


def usable_ids(history_ids: list[str]) -> tuple[str, ...]:
    """The ids of a causal history that can name a message: an empty id or one over
    ``MAX_ID_LENGTH`` is never waited for nor asked for, and not kept as a dependency."""
    if all(0 < len(m) <= MAX_ID_LENGTH for m in history_ids):
        return tuple(history_ids)
    return tuple(m for m in history_ids if 0 < len(m) <= MAX_ID_LENGTH)


class MissingTracker:
    """The incoming buffer, the ids missing, lost and vouched for, and recovery time."""

    def __init__(
        self,
        channel_id: str,
        config: Config,
        entries: dict[str, LogEntry],
        estimates: ChannelEstimates,
        requests: RepairRequests,
        missing: dict[str, Missing],
        missing_by: dict[str, int],
        events: list[Event],
    ) -> None:
        self.channel_id = channel_id
        self.config = config
        self._entries = entries
        self._heard = estimates.heard
        self._requests = requests
        self._events = events
        #: messages waiting for dependencies (oldest first)
        self.incoming: OrderedDict[str, Waiting] = OrderedDict()
        #: what they wait for, and what others named: never received
        self.missing = missing
        #: (lost deadline in recovery time, id); stale entries are skipped
        self.lost_heap: list[tuple[int, str]] = []
        self.next_sweep_ms: int | None = None
        #: Missing ids outstanding per sender that first named them (max_missing_per_sender).
        self.missing_by = missing_by
        #: The same ids per sender, oldest first: when the channel-wide caps (missing
        #: ids, repair requests) are reached, the sender with the most gives way.
        self.missing_of: dict[str, OrderedDict[str, None]] = {}
        # Ids the application vouched for (storage beyond the window) or declared lost.
        self.met_elsewhere: OrderedDict[str, None] = OrderedDict()
        self.lost: OrderedDict[str, None] = OrderedDict()
        #: Recovery time: lost timeouts count only time during which recovery could
        #: run (set_connected). recovery = now - paused_total, frozen while paused.
        self.paused_total = 0
        self.paused_at: int | None = None

    # ------------------------------------------------------- recovery time

    def recovery_ms(self, now_ms: int) -> int:
        """Recovery time at wall time ``now_ms``: only connected time counts."""
        if self.paused_at is not None:
            return self.paused_at - self.paused_total
        return now_ms - self.paused_total

    def pause(self, now_ms: int) -> None:
        """Recovery cannot run (disconnected) from ``now_ms``."""
        if self.paused_at is None:
            self.paused_at = now_ms

    def resume(self, now_ms: int) -> bool:
        """Recovery runs again from ``now_ms``; whether it was paused."""
        if self.paused_at is None:
            return False
        self.paused_total += max(0, now_ms - self.paused_at)
        self.paused_at = None
        return True

    # ------------------------------------------------------------- queries

    def is_available(self, mid: str) -> bool:
        return mid in self._entries or mid in self.met_elsewhere or mid in self.lost

    def within_budget(self, sender_id: str, carrier_id: str, history_ids: list[str]) -> bool:
        """Whether the unknown ids this message names keep ``sender_id`` within
        ``Config.max_missing_per_sender`` (ids already missing, arrived, lost or
        vouched for cost nothing)."""
        entries = self._entries
        if all(map(entries.__contains__, history_ids)):
            return True
        budget = self.config.max_missing_per_sender - self.missing_by.get(sender_id, 0)
        if len(history_ids) <= budget:
            return True
        new = 0
        for mid in set(history_ids):
            if (
                mid in entries
                or mid in self.missing
                or mid in self.incoming
                or mid in self.met_elsewhere
                or mid in self.lost
                or mid == carrier_id
                or not 0 < len(mid) <= MAX_ID_LENGTH
            ):
                continue
            new += 1
            if new > budget:
                return False
        return True

    # ------------------------------------------------------------- noting

    def note(
        self,
        carrier_id: str,
        sender_id: str,
        history: Sequence[sds_pb2.HistoryEntry],
        history_ids: list[str],
        now_ms: int,
        waits: bool,
        by: str | None = None,
    ) -> int:
        """Record the unmet dependencies of message ``carrier_id``; return how many.

        ``by``: whose ``max_missing_per_sender`` budget new ids count against
        (``sender_id``'s unless given).

        With ``waits`` (a content message about to be buffered) the message is
        registered as waiting for each of them. A dependency that already arrived
        but itself waits in the incoming buffer counts as unmet (causal order)
        but is not reported missing, requested or timed out.
        """
        entries = self._entries
        # The common case (every dependency already in the log): one C-level
        # pass, no set built.
        if all(map(entries.__contains__, history_ids)):
            return 0
        met = self.met_elsewhere
        lost = self.lost
        absent_ids = set(history_ids).difference(entries)
        if absent_ids and lost:
            # over the absent ids, never over ``lost``: set.intersection of an OrderedDict
            # walks the whole OrderedDict (up to log_window ids declared lost, 11 ms a
            # message under the soak's flood of invented ids)
            again = {m for m in absent_ids if m in lost}
            if again:  # counted against ``by`` (ASKED for a request's ids), as below
                self._requests.want_again(again, history, history_ids, now_ms,
                                          sender_id if by is None else by)
        if absent_ids:
            # an empty id or one over MAX_ID_LENGTH names no message that can arrive
            # (they are dropped): not waited for, not asked for (checked here, on the
            # rare path)
            absent_ids = {
                m for m in absent_ids
                if m not in met and m not in lost and 0 < len(m) <= MAX_ID_LENGTH
            }
        if not absent_ids:
            return 0
        absent = [i for i, mid in enumerate(history_ids) if mid in absent_ids]
        cfg = self.config
        rec = self.recovery_ms(now_ms)
        missing_entries = []
        new_any = False
        unmet = 0
        seen: set[str] = set()
        for i in absent:
            mid = history_ids[i]
            if mid in seen or mid == carrier_id:
                continue
            seen.add(mid)
            entry = history_entry(mid, history[i])
            buffered = mid in self.incoming
            info = self.missing.get(mid)
            if info is None:
                info = Missing(entry, rec, set(), sender_id if by is None else by)
                self.add(info)
                if not buffered:
                    new_any = True
                    self.schedule(info, now_ms)
                elif cfg.lost_timeout_ms:
                    # arrived and waiting: no repair, but a lost timer all the same, to
                    # break a cycle of messages that name each other (due_lost)
                    self.push_lost(rec + cfg.lost_timeout_ms, mid)
            else:
                if waits and sender_id in self._heard:
                    info.named_ms = now_ms  # (RepairRequests.take's retry)
                if info.entry.retrieval_hint is None and entry.retrieval_hint is not None:
                    info.entry = entry
                if info.by == ASKED and by is None:
                    # first heard of in a request, now named by a history: its sender's
                    # (the shared budget of ids asked for gives way first under a flood)
                    self.move(info, sender_id)
            if waits:
                info.waiting.add(carrier_id)
            unmet += 1
            if not buffered:
                missing_entries.append(entry)
            elif self.incoming[mid].sender_id != sender_id:
                self.vouch(mid, now_ms)
        if missing_entries:
            if self.next_sweep_ms is None:
                self.next_sweep_ms = now_ms + cfg.sweep_interval_ms
            self._events.append(
                MessagesMissing(
                    self.channel_id, carrier_id, sender_id, tuple(missing_entries), new_any
                )
            )
        return unmet

    def vouch(self, mid: str, now_ms: int) -> None:
        """Buffered message ``mid`` is named by another sender, who therefore delivered
        it: what ``mid`` still waits for, that sender either held or declared lost. Its
        missing dependencies (through buffered messages) are declared lost at most
        ``3 * repair_t_max_ms`` from now when they look invented: the message waiting
        for them already had one declared lost, or their first namer holds half its
        ``max_missing_per_sender`` budget or more (an identity naming ids nobody has).
        That is three rounds of SDS-R for a holder to answer, instead of the full
        lost timeout; they stay wanted and, if they come, are delivered late
        (``was_lost``). Without it an honest member's lines that name a message of
        such an identity were held for the whole lost timeout (5 minutes by default)
        behind ids that nobody has (issue 26). Ids an honest member named keep the
        lost timeout: under plain loss a few rounds are not enough (the hostile soak's
        quiet phase: 30 lines declared lost against 0-2)."""
        cfg = self.config
        timeout = cfg.lost_timeout_ms
        hold = 3 * cfg.repair_t_max_ms
        if not timeout or hold >= timeout or not cfg.repair_enabled:
            return  # (without SDS-R nobody is asked: the lost timeout is all there is)
        latest = self.recovery_ms(now_ms) + hold - timeout  # noticed_ms of the new deadline
        incoming, missing, missing_by = self.incoming, self.missing, self.missing_by
        spent = cfg.max_missing_per_sender
        stack, seen = [mid], {mid}
        while stack:  # bounded by the incoming buffer and its histories
            w = incoming.get(stack.pop())
            if w is None or w.vouched:
                continue
            gave_up = w.lost_before > 0  # some of what it waits for was declared lost
            settled = True
            for dep in w.history_ids:
                if dep in seen:
                    continue
                seen.add(dep)
                if dep in incoming:
                    stack.append(dep)
                    continue
                info = missing.get(dep)
                if info is None or info.noticed_ms <= latest:
                    continue
                if gave_up or 2 * missing_by.get(info.by, 0) >= spent:
                    info.noticed_ms = latest
                    self.push_lost(latest + timeout, dep)
                else:
                    settled = False  # looked at again when named again
            w.vouched = settled

    def add(self, info: Missing) -> None:
        self.missing[info.entry.message_id] = info
        self._count(info)

    def move(self, info: Missing, by: str) -> None:
        """Count a missing id against ``by``'s budget instead of its first namer's
        (its request too, if there is one)."""
        self._uncount(info)
        info.by = by
        self._count(info)
        self._requests.refile(info.entry.message_id, by)

    def pop(self, mid: str) -> Missing | None:
        info = self.missing.pop(mid, None)
        if info is not None:
            self._uncount(info)
        return info

    def _count(self, info: Missing) -> None:
        """Count ``info`` against its namer's budget (``missing_by``, ``missing_of``)."""
        by = self.missing_by
        by[info.by] = by.get(info.by, 0) + 1
        self.missing_of.setdefault(info.by, OrderedDict())[info.entry.message_id] = None

    def _uncount(self, info: Missing) -> None:
        """Undo :meth:`_count` for ``info`` (its namer as it stands)."""
        by = self.missing_by
        left = by.get(info.by, 1) - 1
        if left > 0:
            by[info.by] = left
        else:
            by.pop(info.by, None)
        of = self.missing_of.get(info.by)
        if of is not None:
            of.pop(info.entry.message_id, None)
            if not of:
                del self.missing_of[info.by]

    def schedule(self, info: Missing, now_ms: int) -> None:
        """Start the lost timeout and the SDS-R request of a newly missing id."""
        cfg = self.config
        mid = info.entry.message_id
        info.noticed_ms = rec = self.recovery_ms(now_ms)
        if cfg.lost_timeout_ms:
            self.push_lost(rec + cfg.lost_timeout_ms, mid)
        if cfg.repair_enabled:
            self._requests.ask_for_missing(info.entry, info.by, now_ms)

    def push_lost(self, due: int, mid: str) -> None:
        """Push a lost deadline ``due`` in recovery time."""
        heapq.heappush(self.lost_heap, (due, mid))
        if len(self.lost_heap) > 4 * len(self.missing) + 64:  # stale entries
            timeout = self.config.lost_timeout_ms
            self.lost_heap = [(i.noticed_ms + timeout, m) for m, i in self.missing.items()]
            heapq.heapify(self.lost_heap)

    # ---------------------------------------------------- the incoming buffer

    def buffer(self, waiting: Waiting, now_ms: int) -> None:
        """Put a message that waits for dependencies in the incoming buffer; at the cap
        the oldest waiting message goes (``INCOMING_BUFFER_FULL``)."""
        cap = self.config.incoming_buffer_cap
        incoming = self.incoming
        while len(incoming) >= cap:
            old_id, old = incoming.popitem(last=False)
            for mid in old.history_ids:
                info = self.missing.get(mid)
                if info is not None:
                    info.waiting.discard(old_id)
            self._events.append(MessageDropped(
                self.channel_id, old_id, old.sender_id, DropReason.INCOMING_BUFFER_FULL,
                retrieval_hint=old.retrieval_hint,
            ))
            evicted = self.missing.get(old_id)
            if evicted is not None:
                # Others wait for it: it is missing again, from now on.
                self.schedule(evicted, now_ms)
        incoming[waiting.message_id] = waiting

    def unbuffer(self, mid: str) -> Waiting | None:
        """Take ``mid`` out of the incoming buffer (to deliver it)."""
        return self.incoming.pop(mid, None)

    def release(self, mid: str, lost: bool) -> list[Waiting]:
        """``mid`` became available (or was declared lost): what waited only for it,
        in log order (still buffered: the owner takes each out as it delivers it)."""
        info = self.pop(mid)
        if info is None:
            return []
        if lost:
            self._events.append(
                MessageLost(self.channel_id, mid, tuple(sorted(info.waiting)))
            )
        ready = []
        incoming = self.incoming
        for wid in info.waiting:
            w = incoming.get(wid)
            if w is None:
                continue
            w.unmet -= 1
            if lost:
                w.lost_before += 1
            if w.unmet <= 0:
                ready.append(w)
        # Deliver in log order so that causally unrelated releases are stable.
        ready.sort(key=lambda w: (w.lamport, w.message_id))
        return ready

    def delivered(self, mid: str) -> tuple[bool, Missing | None]:
        """``mid`` was delivered: whether it had been declared lost, and what was
        noted missing of it (what waited for it) if anything."""
        was_lost = mid in self.lost
        if was_lost:
            del self.lost[mid]
        self.met_elsewhere.pop(mid, None)
        info = self.missing.pop(mid, None)  # (pop, inline: once per delivery)
        if info is not None:
            self._uncount(info)
        return was_lost, info

    def released_by(self, info: Missing) -> list[Waiting]:
        """The messages that waited only for ``info``'s id (delivered), taken out of the
        incoming buffer, latest in log order first (the delivery stack's order)."""
        incoming = self.incoming
        ready = []
        for wid in info.waiting:
            nxt = incoming.get(wid)
            if nxt is None:
                continue
            nxt.unmet -= 1
            if nxt.unmet <= 0:
                ready.append(nxt)
        ready.sort(key=lambda x: (x.lamport, x.message_id), reverse=True)
        return [nxt for nxt in ready if incoming.pop(nxt.message_id, None) is not None]

    def vouch_for(self, mid: str) -> None:
        """The application holds ``mid`` (beyond the window): it counts as available."""
        met = self.met_elsewhere
        met[mid] = None
        met.move_to_end(mid)
        while len(met) > self.config.log_window:
            met.popitem(last=False)

    def mark_lost(self, mid: str) -> None:
        """``mid`` is lost for ordering (bounded: the oldest are forgotten)."""
        lost = self.lost
        lost[mid] = None
        while len(lost) > self.config.log_window:
            lost.popitem(last=False)

    # ----------------------------------------------------------- deadlines

    def due_lost(self, now_ms: int) -> Iterator[str]:
        """Spec "Periodic Incoming Buffer Sweep": each id missing past its lost timeout,
        one at a time (the owner declares it lost before the next is looked at)."""
        if self.paused_at is not None:
            return  # recovery cannot run: the lost timeout does not count
        heap = self.lost_heap
        timeout = self.config.lost_timeout_ms
        rec = self.recovery_ms(now_ms)
        while heap and heap[0][0] <= rec:
            due, mid = heapq.heappop(heap)
            if not self.lost_due_live(due, mid):
                continue
            info = self.missing[mid]
            if mid in self.incoming and not self.in_cycle(mid):
                # it arrived and waits for something still missing, whose own timer
                # decides; look again one lost timeout later (a cycle may form behind it)
                info.noticed_ms = rec
                heapq.heappush(heap, (rec + timeout, mid))
                continue
            yield mid
        if len(heap) > 4 * len(self.missing) + 64:
            self.lost_heap = [
                (i.noticed_ms + timeout, m) for m, i in self.missing.items()
            ]
            heapq.heapify(self.lost_heap)

    def lost_due_live(self, due: int, mid: str) -> bool:
        """Whether lost deadline ``due`` of ``mid`` still stands (the id is missing and
        this is its deadline, not one it was moved from)."""
        info = self.missing.get(mid)
        return info is not None and info.noticed_ms + self.config.lost_timeout_ms == due

    def in_cycle(self, mid: str) -> bool:
        """Whether buffered ``mid`` waits, through buffered messages only, for nothing
        that is missing: messages naming each other (only a faulty or hostile peer
        writes that), which no arrival can ever release. Past the lost timeout such an
        id is declared lost for ordering: its waiters are delivered, then it follows
        them (reported lost, then delivered: shown as recovered)."""
        incoming = self.incoming
        seen = {mid}
        stack = [mid]
        while stack:  # bounded by the incoming buffer
            w = incoming.get(stack.pop())
            if w is None:
                continue
            for dep in w.history_ids:
                if dep in seen or self.is_available(dep):
                    continue
                if dep not in incoming:
                    return False  # something truly missing: its own timer decides
                seen.add(dep)
                stack.append(dep)
        return True

    def cap_victims(self) -> list[str]:
        """``Config.max_missing``: the ids beyond it to declare lost, longest missing
        first. Ids that arrived and only wait themselves are skipped (they are not
        lost)."""
        excess = len(self.missing) - self.config.max_missing
        if excess <= 0:
            return []
        # from the senders that named the most, oldest first, one at a time from
        # whoever names the most at that point (levelled: an honest member's few
        # missing ids are not declared lost while anyone names more). A single pass
        # that took one id from each of 100 identities naming ~50 each went on to
        # the honest member naming 14 (tests/sds/test_sender_budgets.py).
        # Among equals a member heard from (its messages name what we hold) gives way
        # last: with 100 identities at the level of an honest member's 10 ids, a tie
        # took hers.
        incoming = self.incoming
        heard = self._heard
        heap = [(-c, b in heard, b) for b, c in self.missing_by.items()]
        heapq.heapify(heap)
        pending: dict[str, Iterator[str]] = {}
        victims: list[str] = []
        while heap and len(victims) < excess:
            neg, live, by = heapq.heappop(heap)
            ids = pending.get(by)
            if ids is None:
                ids = pending[by] = iter(self.missing_of.get(by, ()))
            for mid in ids:
                if mid not in incoming:  # one that arrived and waits is not lost
                    victims.append(mid)
                    if neg < -1:
                        heapq.heappush(heap, (neg + 1, live, by))
                    break
        return victims

    def sweep(self, now_ms: int) -> None:
        """Remind the application of what is still missing (to fetch it from storage/store)."""
        if not self.missing:
            self.next_sweep_ms = None
            return
        self.next_sweep_ms = now_ms + self.config.sweep_interval_ms
        incoming = self.incoming
        missing = tuple(i.entry for m, i in self.missing.items() if m not in incoming)
        if missing:  # only arrived-and-waiting ids: nothing to fetch, nothing to say
            self._events.append(MessagesMissing(self.channel_id, "", "", missing, False))

    def next_due(self) -> int | None:
        """The next lost deadline in wall time (none while paused); stale heads
        (resolved, or moved to a new deadline) are no work and are dropped: a restored
        channel rebuilds the heap without them and must wake at the same times."""
        heap = self.lost_heap
        if not heap or self.paused_at is not None:
            return None
        while heap and not self.lost_due_live(*heap[0]):
            heapq.heappop(heap)
        if heap:  # recovery time -> wall time (no lost timeout runs while paused)
            return heap[0][0] + self.paused_total
        return None
