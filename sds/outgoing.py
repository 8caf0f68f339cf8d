"""The outgoing buffer: our own messages until they are acknowledged, and their resends.

Spec "Review ACK Status" and "Periodic Outgoing Buffer Sweep". An own content
message stays here until a received causal history names it or enough distinct
peers' bloom filters hold it (``Config.ack_threshold``, derived from the filter's
false-positive rate); meanwhile it is resent every ``resend_unacknowledged_ms``
(``resend_possibly_acknowledged_ms`` once a filter held it), at most
``max_resend_attempts`` times, then given up (``MessageSendFailed``). Given-up
messages are remembered (:data:`~sds.tuning.FAILED_KEPT`) so that a late
acknowledgement still says they arrived.

While nobody is heard, the resends back off (:mod:`sds.backoff`, whose
:class:`~sds.backoff.ResendBackoff` the channel creates and hands over): a sweep
sends a few of the due messages and leaves the others due, and the next sweep is
held back (:meth:`OutgoingBuffer.next_due`); when a peer is heard again, what
waited is spread over one resend period (:meth:`OutgoingBuffer.spread_overdue`).

Owned by :class:`sds.channel.Channel`, which adds what it sends, hands it every
received message (:meth:`OutgoingBuffer.review_acks`) and runs the resends at the
deadline :meth:`OutgoingBuffer.next_due` gives. Events and datagrams go to the
channel's lists; nothing here calls out.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from sds import sds_pb2
from sds.backoff import ResendBackoff
from sds.bloom import BloomParams, positions_in, positions_mask
from sds.config import Config
from sds.datagram import Datagram
from sds.events import (
    DropReason,
    Event,
    MessageAcknowledged,
    MessageDropped,
    MessagePossiblyAcknowledged,
    MessageResent,
    MessageSendFailed,
)
from sds.tuning import FAILED_KEPT

__all__ = ["Outgoing", "OutgoingBuffer", "OwnState"]


class OwnState:
    """States of an own message in the outgoing buffer (spec: "Participant state")."""

    UNACKNOWLEDGED: Final = "unacknowledged"
    POSSIBLY_ACKNOWLEDGED: Final = "possibly_acknowledged"


@dataclass(slots=True)
class Outgoing:
    message_id: str
    data: bytes
    lamport: int
    #: its bloom positions (:func:`~sds.bloom.positions_in`), or ``()`` until the first
    #: acknowledgement check needs them (a restored buffer: 5,000 pending lines held
    #: 4 MB of them)
    positions: tuple[tuple[int, int], ...]
    state: str
    hits: set[str]
    attempts: int
    next_resend_ms: int
    #: ``positions`` as one integer (:func:`~sds.bloom.positions_mask`; 0 until the
    #: first acknowledgement check): one AND per received filter.
    mask: int = field(default=0, compare=False, repr=False)


class OutgoingBuffer:
    """Own unacknowledged messages (oldest first), with a resend heap."""

    def __init__(
        self,
        channel_id: str,
        config: Config,
        params: BloomParams,
        events: list[Event],
        datagrams: list[Datagram],
        backoff: ResendBackoff,
    ) -> None:
        self.channel_id = channel_id
        self.config = config
        self._events = events
        self._datagrams = datagrams
        self.backoff = backoff
        self.ack_threshold = config.ack_threshold
        self.messages: dict[str, Outgoing] = {}
        #: Own messages given up (MessageSendFailed), newest last, so that an ack that
        #: comes after all still says they arrived (saved with the state; FAILED_KEPT).
        self.failed: OrderedDict[str, None] = OrderedDict()
        #: (next resend, id); stale entries (acknowledged, rescheduled) are skipped
        self.heap: list[tuple[int, str]] = []
        self._params = params
        self._filter_nbytes = params.nbytes
        self._filter_m = params.m
        # The ack threshold assumes each wrong hit has probability bloom_error_rate at
        # most. Our rolling filter never passes it; a peer's filter that never rolls
        # (js-waku) fills up and says "yes" to anything. A filter with more bits set
        # than fill ** k <= ack_certainty ** (1 / threshold) allows is not evidence.
        per_hit = config.ack_certainty ** (1.0 / self.ack_threshold)
        self._max_filter_bits = int(params.m * per_hit ** (1.0 / params.k))

    def add(self, out: Outgoing) -> None:
        """Buffer a message just sent; at the cap the oldest is given up."""
        messages = self.messages
        while len(messages) >= self.config.outgoing_buffer_cap:
            old_id = next(iter(messages))
            old = messages.pop(old_id)
            self.remember_failed(old_id)
            self._events.append(
                MessageSendFailed(self.channel_id, old_id, "buffer_full", old.attempts)
            )
        messages[out.message_id] = out
        self.push_resend(out)

    def push_resend(self, out: Outgoing) -> None:
        """Schedule ``out``'s next resend; stale heap entries are compacted here too, so
        the heap stays bounded even when no timer runs between many sends."""
        heapq.heappush(self.heap, (out.next_resend_ms, out.message_id))
        if len(self.heap) > 4 * len(self.messages) + 64:
            self.heap = [(o.next_resend_ms, m) for m, o in self.messages.items()]
            heapq.heapify(self.heap)

    def next_due(self) -> int | None:
        """When the next resend is due; while the resends back off, not before the next
        sweep (:mod:`sds.backoff`)."""
        due = self._head()
        if due is None:
            return None
        held = self.backoff.next_ms
        return due if held is None or held < due else held

    def _head(self) -> int | None:
        """The earliest resend deadline (stale heads, acknowledged or rescheduled, are
        no work and are dropped: a restored channel has none)."""
        heap = self.heap
        messages = self.messages
        while heap:
            due, mid = heap[0]
            out = messages.get(mid)
            if out is not None and out.next_resend_ms == due:
                return due
            heapq.heappop(heap)
        return None

    def run_resends(self, now_ms: int) -> None:
        """Spec "Periodic Outgoing Buffer Sweep" (backing off while nobody is heard:
        :mod:`sds.backoff`)."""
        heap = self.heap
        cfg = self.config
        messages = self.messages
        head = self._head()
        if head is None or head > now_ms:
            return
        left = self.backoff.sweep(now_ms)  # None: every due message
        if left == 0:
            return
        period_quiet = None
        if left is not None:  # quiet: those resent come back after the backoff's period
            held = self.backoff.next_ms
            period_quiet = None if held is None else held - now_ms
        while heap and heap[0][0] <= now_ms:
            if left is not None and left <= 0:
                break  # the rest stay due: the next quiet sweep, or a peer heard
            due, mid = heapq.heappop(heap)
            out = messages.get(mid)
            if out is None or out.next_resend_ms != due:
                continue
            if out.attempts >= cfg.max_resend_attempts:
                del messages[mid]
                self.remember_failed(mid)
                self._events.append(
                    MessageSendFailed(self.channel_id, mid, "resends_exhausted", out.attempts)
                )
                continue
            out.attempts += 1
            possibly = out.state == OwnState.POSSIBLY_ACKNOWLEDGED
            period = (
                cfg.resend_possibly_acknowledged_ms if possibly else cfg.resend_unacknowledged_ms
            )
            if period_quiet is not None and period_quiet > period:
                period = period_quiet
            if left is not None:
                left -= 1
            out.next_resend_ms = now_ms + period
            heapq.heappush(heap, (out.next_resend_ms, mid))
            self._datagrams.append(Datagram(out.data, "resend", mid))
            self._events.append(MessageResent(self.channel_id, mid, out.attempts, possibly))
        if len(heap) > 4 * len(messages) + 64:
            self.heap = [(o.next_resend_ms, m) for m, o in messages.items()]
            heapq.heapify(self.heap)

    def spread_overdue(self, now_ms: int) -> None:
        """A peer was heard after the resends backed off: what waited (due by now) and
        what a quiet sweep resent (due only after a backoff period) is rescheduled
        over the next resend period, in the order it was sent (what a message names
        arrives first: the newcomer delivers each as it comes), instead of going in one
        burst or hours late. O(n log n), once per quiet spell."""
        span = self.config.resend_unacknowledged_ms
        overdue = sorted(
            (o.lamport, mid) for mid, o in self.messages.items()
            if not now_ms < o.next_resend_ms <= now_ms + span
        )
        if not overdue:
            return
        n = len(overdue)
        messages = self.messages
        for i, (_, mid) in enumerate(overdue):
            out = messages[mid]
            out.next_resend_ms = now_ms + span * i // n
            heapq.heappush(self.heap, (out.next_resend_ms, mid))
        if len(self.heap) > 4 * len(messages) + 64:
            self.heap = [(o.next_resend_ms, m) for m, o in messages.items()]
            heapq.heapify(self.heap)

    def remember_failed(self, mid: str) -> None:
        failed = self.failed
        failed[mid] = None
        while len(failed) > FAILED_KEPT:
            failed.popitem(last=False)

    def review_acks(
        self, pb: sds_pb2.SdsMessage, history_ids: list[str], sender_id: str
    ) -> None:
        """Spec "Review ACK Status", for every received content or sync message."""
        outgoing = self.messages
        has_bloom = pb.HasField("bloom_filter")
        if has_bloom and len(pb.bloom_filter) != self._filter_nbytes:
            # Counted whatever we have outstanding; ignored for acks.
            self._bad_filter(pb, sender_id)
            has_bloom = False
        failed = self.failed
        if failed:  # given up on, yet named: it arrived after all
            for mid in history_ids:
                if mid in failed:
                    del failed[mid]
                    self._events.append(
                        MessageAcknowledged(self.channel_id, mid, True, sender_id)
                    )
        if not outgoing:
            return
        for mid in history_ids:
            if mid in outgoing:
                del outgoing[mid]
                self._events.append(MessageAcknowledged(self.channel_id, mid, True, sender_id))
        if not has_bloom or not outgoing:
            return
        bloom = pb.bloom_filter
        bits = int.from_bytes(bloom, "little")
        threshold = self.ack_threshold
        acked = []
        trusted: bool | None = None  # worked out at the first hit (28 us for 18 KB)
        for out in outgoing.values():
            # a node that falls behind holds tens to hundreds outstanding, tested against
            # every filter it receives: one integer AND each (all k bits at once: 86 ns
            # against 221 ns for two bits inline and the rest byte by byte)
            mask = out.mask
            if not mask:
                mask = out.mask = positions_mask(
                    out.positions or positions_in(out.message_id, self._params))
                out.positions = ()  # the mask says it all from now on
            if bits & mask != mask or sender_id in out.hits:
                continue
            if trusted is None:
                trusted = self._filter_is_evidence(pb, sender_id, bits)
            if not trusted:
                return
            out.hits.add(sender_id)
            hits = len(out.hits)
            if hits >= threshold:
                acked.append(out.message_id)
            else:
                self._events.append(
                    MessagePossiblyAcknowledged(
                        self.channel_id, out.message_id, hits, threshold, sender_id
                    )
                )
                if out.state != OwnState.POSSIBLY_ACKNOWLEDGED:
                    out.state = OwnState.POSSIBLY_ACKNOWLEDGED
                    # Spec "Periodic Outgoing Buffer Sweep": the longer period counts
                    # from the last send, not after one more unacknowledged period.
                    cfg = self.config
                    later = (
                        out.next_resend_ms
                        - cfg.resend_unacknowledged_ms
                        + cfg.resend_possibly_acknowledged_ms
                    )
                    if later > out.next_resend_ms:
                        out.next_resend_ms = later
                        self.push_resend(out)
        for mid in acked:
            del outgoing[mid]
            self._events.append(MessageAcknowledged(self.channel_id, mid, False, sender_id))

    def _filter_is_evidence(self, pb: sds_pb2.SdsMessage, sender_id: str, bits: int) -> bool:
        """Whether the filter's fill keeps a wrong hit within the design rate; if not,
        it is reported (``DropReason.SATURATED_FILTER``) and ignored for acks.
        ``bits``: the filter's bytes as an integer."""
        set_bits = bits.bit_count()
        if set_bits <= self._max_filter_bits:
            return True
        self._events.append(MessageDropped(
            self.channel_id,
            pb.message_id,
            sender_id,
            DropReason.SATURATED_FILTER,
            f"bloom filter with {set_bits} of {self._filter_m} bits set (at most "
            f"{self._max_filter_bits} for its hits to count): ignored for acknowledgements",
        ))
        return False

    def _bad_filter(self, pb: sds_pb2.SdsMessage, sender_id: str) -> None:
        self._events.append(MessageDropped(
            self.channel_id,
            pb.message_id,
            sender_id,
            DropReason.BAD_FILTER,
            f"bloom filter of {len(pb.bloom_filter)} bytes, ours is {self._filter_nbytes}: "
            "ignored for acknowledgements",
        ))
