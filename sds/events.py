"""Events the SDS core reports. Drain them with ``Channel.events()`` after every call.

All events are frozen, slotted dataclasses carrying ``channel_id``. The
application persists them (the event log), updates its UI from them and, for a
few, must act:

* :class:`MessagesMissing` - look the ids up in long-term storage and call
  ``mark_dependencies_met`` for those found; fetch the others (store peer by
  ``retrieval_hint``) and feed them to ``receive``.
* :class:`RepairDataNeeded` - a repair response is due for a message the core
  no longer holds the bytes of: call ``supply_repair_data`` with its stored bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sds.message import HistoryEntry

__all__ = [
    "DropReason",
    "EphemeralReceived",
    "Event",
    "MessageAcknowledged",
    "MessageConflict",
    "MessageDelivered",
    "MessageDropped",
    "MessageLost",
    "MessagePossiblyAcknowledged",
    "MessageResent",
    "MessageSendFailed",
    "MessageSent",
    "MessagesMissing",
    "RepairDataNeeded",
    "RepairRequestReceived",
    "RepairRequested",
    "RepairSent",
    "SyncReceived",
    "SyncSent",
]


class DropReason(enum.StrEnum):
    """Why a received message was not processed (or not fully)."""

    MALFORMED = "malformed"  #: not a protobuf SdsMessage
    INVALID_KIND = "invalid_kind"  #: neither lamport nor content set
    MISSING_ID = "missing_id"  #: empty message_id or sender_id
    OVERSIZED = "oversized"  #: content larger than Config.max_content_bytes
    WRONG_CHANNEL = "wrong_channel"  #: channel_id is not this channel's
    UNKNOWN_CHANNEL = "unknown_channel"  #: Participant has no such channel
    OWN_ECHO = "own_echo"  #: our own message came back
    DUPLICATE = "duplicate"  #: already delivered or already waiting
    BAD_FILTER = "bad_filter"  #: bloom filter of another size: ignored for acks (message kept)
    #: bloom filter too full for its hits to be evidence (a peer that never rolls its
    #: filter): ignored for acks (message kept)
    SATURATED_FILTER = "saturated_filter"
    INCOMING_BUFFER_FULL = "incoming_buffer_full"  #: evicted while waiting for dependencies
    LAMPORT_OUT_OF_RANGE = "lamport_out_of_range"  #: lamport above MAX_LAMPORT (2**62)
    ID_TOO_LONG = "id_too_long"  #: an id over MAX_ID_LENGTH (256) characters
    #: a content message whose id is neither its sdschat id nor its js-waku id
    #: (``sds.ids``; only with ``Config.verify_message_ids``)
    UNVERIFIABLE_ID = "unverifiable_id"
    #: lamport more than Config.max_clock_skew_ms ahead of our wall clock (never adopted)
    CLOCK_AHEAD = "clock_ahead"
    HISTORY_TOO_LONG = "history_too_long"  #: causal history over Config.max_history_received
    #: more repair requests than Config.max_repair_requests_received
    TOO_MANY_REPAIR_REQUESTS = "too_many_repair_requests"
    #: the sender already has Config.max_missing_per_sender unknown ids outstanding
    SENDER_BUDGET = "sender_budget"


@dataclass(frozen=True, slots=True)
class MessageSent:
    """We broadcast a new content message. It is now in the outgoing buffer.

    The application should persist ``data`` (for resends after a restart and for
    repair), wrap it, send it, then call ``set_retrieval_hint`` if it has one.
    """

    channel_id: str
    message_id: str
    lamport: int
    content: bytes
    data: bytes
    causal_history: tuple[str, ...]
    position: int


@dataclass(frozen=True, slots=True)
class MessageResent:
    """An unacknowledged own message went out again (attempt 1 is the first resend)."""

    channel_id: str
    message_id: str
    attempt: int
    possibly_acknowledged: bool


@dataclass(frozen=True, slots=True)
class MessageDelivered:
    """A content message entered the local log, exactly once.

    ``position`` is the number of messages the core knows to precede it in the
    log order ``(lamport, message_id)`` - exact while the message sorts inside
    the core's window (the normal case), a lower bound otherwise.
    ``missing_before`` counts dependencies declared lost before it was delivered
    (0 for an ordinary delivery). ``was_lost`` is true when this message itself
    had been reported lost (:class:`MessageLost`) and arrived afterwards: the
    application marks it as recovered.
    """

    channel_id: str
    message_id: str
    sender_id: str
    lamport: int
    content: bytes
    position: int
    causal_history: tuple[str, ...]
    retrieval_hint: bytes | None
    data: bytes
    missing_before: int = 0
    was_lost: bool = False


@dataclass(frozen=True, slots=True)
class MessageAcknowledged:
    """An own message is acknowledged and left the outgoing buffer.

    ``by_causal_history`` is false when the ack came from enough distinct
    bloom-filter hits.
    """

    channel_id: str
    message_id: str
    by_causal_history: bool
    by_sender: str | None


@dataclass(frozen=True, slots=True)
class MessagePossiblyAcknowledged:
    """An own message is in ``hits`` distinct participants' bloom filters (below threshold)."""

    channel_id: str
    message_id: str
    hits: int
    threshold: int
    by_sender: str


@dataclass(frozen=True, slots=True)
class MessageSendFailed:
    """An own message left the outgoing buffer unacknowledged.

    ``reason`` is ``"resends_exhausted"`` or ``"buffer_full"``. The application
    may offer a retry (send the content again: a new message).
    """

    channel_id: str
    message_id: str
    reason: str
    attempts: int


@dataclass(frozen=True, slots=True)
class MessagesMissing:
    """``message_id`` (from ``sender_id``) waits for dependencies we do not have.

    ``missing`` are the entries as the waiting message named them, with their
    retrieval hints. Reported when first noticed and again on every sweep while
    still missing (``first`` tells which).
    """

    channel_id: str
    message_id: str
    sender_id: str
    missing: tuple[HistoryEntry, ...]
    first: bool


@dataclass(frozen=True, slots=True)
class MessageLost:
    """A dependency could not be obtained within ``Config.lost_timeout_ms``.

    Reported once per lost id. The messages that waited for it are delivered
    anyway (with ``MessageDelivered.missing_before`` > 0). The id stays wanted:
    it is asked for again (SDS-R, ``MessagesMissing`` reminders) with a backoff up
    to ``Config.lost_retry_max_ms``; if it arrives it is delivered with
    ``MessageDelivered.was_lost``. The timeout counts only time during which
    recovery could run (see ``Channel.set_connected``).
    """

    channel_id: str
    message_id: str
    waiting: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SyncSent:
    """We broadcast a sync message (not stored, not acknowledged)."""

    channel_id: str
    message_id: str
    lamport: int
    repair_requests: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SyncReceived:
    """A sync message from someone else was processed (acks, dependencies, repairs)."""

    channel_id: str
    message_id: str
    sender_id: str
    lamport: int


@dataclass(frozen=True, slots=True)
class EphemeralReceived:
    """An ephemeral message (typing indicator...): not logged, not acknowledged."""

    channel_id: str
    message_id: str
    sender_id: str
    content: bytes


@dataclass(frozen=True, slots=True)
class MessageDropped:
    """A received message was discarded, or part of it ignored (``BAD_FILTER``)."""

    channel_id: str
    message_id: str | None
    sender_id: str | None
    reason: DropReason
    detail: str = ""
    #: the dropped message's retrieval hint as it was received (set for
    #: ``INCOMING_BUFFER_FULL``: a message received earlier goes, and an application
    #: that refuses replays of what it received must take its bytes again)
    retrieval_hint: bytes | None = None


@dataclass(frozen=True, slots=True)
class MessageConflict:
    """A second content message arrived under an id we hold, and it differs.

    ``reason`` is ``"author"`` (another ``sender_id``: js-waku ids are
    ``sha256(content)``, so two authors of one text share an id), ``"content"``
    or ``"timestamp"`` (one author's text under one js-waku id at two Lamport
    timestamps: participants may order it differently). The message we hold
    (from ``kept_sender_id``) stays; the other one (from ``other_sender_id``) is
    dropped as a duplicate, and this event says so: the application shows the
    message as disputed.
    """

    channel_id: str
    message_id: str
    kept_sender_id: str
    other_sender_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class RepairRequested:
    """We asked peers (SDS-R) to rebroadcast these ids, on carrier ``carrier_id``."""

    channel_id: str
    message_ids: tuple[str, ...]
    carrier_id: str


@dataclass(frozen=True, slots=True)
class RepairRequestReceived:
    """``sender_id`` asked for these ids; ``scheduled`` are the ones we will answer."""

    channel_id: str
    sender_id: str
    message_ids: tuple[str, ...]
    scheduled: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RepairSent:
    """We rebroadcast someone's (or our own) message in answer to a repair request."""

    channel_id: str
    message_id: str
    original_sender: str


@dataclass(frozen=True, slots=True)
class RepairDataNeeded:
    """A repair response is due but the core no longer holds the message bytes.

    Call ``supply_repair_data(message_id, data, now_ms)`` with the stored bytes.
    """

    channel_id: str
    message_id: str


Event = (
    MessageSent
    | MessageResent
    | MessageDelivered
    | MessageAcknowledged
    | MessagePossiblyAcknowledged
    | MessageSendFailed
    | MessagesMissing
    | MessageLost
    | SyncSent
    | SyncReceived
    | EphemeralReceived
    | MessageDropped
    | MessageConflict
    | RepairRequested
    | RepairRequestReceived
    | RepairSent
    | RepairDataNeeded
)
