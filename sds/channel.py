"""One SDS channel: the protocol state machine, sans-I/O.

A :class:`Channel` is driven by three sources, aioquic-style:

* the application's calls: :meth:`Channel.send`, :meth:`Channel.send_ephemeral`,
  :meth:`Channel.mark_dependencies_met`, :meth:`Channel.set_retrieval_hint`;
* bytes from the network: :meth:`Channel.receive`;
* time: :meth:`Channel.handle_timer` at the deadline :meth:`Channel.get_timer` gave.

After **every** call the caller must:

1. broadcast what :meth:`Channel.datagrams_to_send` returns;
2. handle what :meth:`Channel.events` returns (persist, show, and act on
   :class:`~sds.events.MessagesMissing` and :class:`~sds.events.RepairDataNeeded`);
3. re-arm its single timer at :meth:`Channel.get_timer`.

Nothing here reads a clock, does I/O or uses global randomness: time comes in as
``now_ms`` (wall-clock milliseconds, which also seed the Lamport clock) and
randomness from the ``random.Random`` given at construction.

Section numbers in comments refer to the SDS spec (``seeds/sds-spec.txt``):
"Send Message", "Receive Message", "Deliver Message", "Resolve Conflicts",
"Review ACK Status", "Periodic Incoming/Outgoing Buffer Sweep", "Periodic Sync
Message", "Ephemeral Messages", and PROTOCOL.md's "SDS-R".

Complexity: receiving a message costs ``O(h + o)`` for ``h`` causal-history
entries and ``o`` unacknowledged own messages, plus ``O(log n)`` for the log
insert; nothing is proportional to the history size ``n``.
"""

from __future__ import annotations

import heapq
import operator
import random
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sortedcontainers import SortedList

from sds import sds_pb2
from sds.bloom import RollingBloomFilter, contains_positions, positions_in, positions_mask
from sds.census import ParticipantCensus, salt_for
from sds.config import Config
from sds.datagram import Datagram
from sds.events import (
    DropReason,
    EphemeralReceived,
    Event,
    MessageAcknowledged,
    MessageConflict,
    MessageDelivered,
    MessageDropped,
    MessageLost,
    MessagePossiblyAcknowledged,
    MessageResent,
    MessageSendFailed,
    MessageSent,
    MessagesMissing,
    RepairDataNeeded,
    RepairRequested,
    RepairRequestReceived,
    RepairSent,
    SyncReceived,
    SyncSent,
)
from sds.ids import ID_NONCE_BYTES, id_form, message_id_for
from sds.message import DecodeError, HistoryEntry, SharedMessage, parse_pb
from sds.repair import (
    IncomingRepairBuffer,
    OutgoingRepairBuffer,
    in_response_group,
    t_req,
    t_resp,
)
from sds.state import STATE_VERSION, ChannelState
from sds.tuning import (
    CARRY_MAX_BYTES,
    CARRY_MAX_IDS,
    CARRY_SCAN,
    CARRY_WHEN_LACKING,
    COPY_WHEN_LACKING,
    FAILED_KEPT,
    FIRST_REQUEST_CAP_WINDOWS,
    FIRST_REQUEST_MIN_LACKING,
    FIRST_REQUEST_SPACING,
    HEARD_KEPT,
    LOSS_MEAN_LINES,
    MAX_ID_LENGTH,
    MAX_LAMPORT,
    PARTICIPANTS_PER_RESPONSE_GROUP,
    SYNC_FLOOR_AT_SCALE,
    TAIL_ONE_NAMING_LOSS,
)

__all__ = [
    "CARRY_MAX_BYTES",
    "CARRY_MAX_IDS",
    "MAX_ID_LENGTH",
    "MAX_LAMPORT",
    "STATE_VERSION",
    "Channel",
    "ChannelState",
    "Datagram",
    "OwnState",
]

#: ``h.message_id`` of a protobuf ``HistoryEntry`` (mapped over a history at C speed).
_MESSAGE_ID = operator.attrgetter("message_id")


class OwnState:
    """States of an own message in the outgoing buffer (spec: "Participant state")."""

    UNACKNOWLEDGED = "unacknowledged"
    POSSIBLY_ACKNOWLEDGED = "possibly_acknowledged"


@dataclass(slots=True)
class _LogEntry:
    lamport: int
    sender_id: str
    retrieval_hint: bytes | None
    #: Serialised ``SdsMessage(causal_history=[this entry])``; concatenating such
    #: fragments after a serialised message appends history entries (protobuf
    #: merge semantics), which makes building a 200-entry message cheap.
    fragment: bytes | None = None
    #: Bloom-filter bit positions of the id (computed when first needed).
    positions: tuple[tuple[int, int], ...] | None = None
    #: When it entered our log (our clock; 0 for entries restored from a saved state).
    logged_ms: int = 0
    #: Delivered with dependencies declared lost: not named in our causal histories
    #: (:meth:`Channel._withhold`).
    withheld: bool = False


@dataclass(slots=True)
class _Outgoing:
    message_id: str
    data: bytes
    lamport: int
    positions: tuple[tuple[int, int], ...]
    state: str
    hits: set[str]
    attempts: int
    next_resend_ms: int
    #: ``positions`` as one integer (:func:`~sds.bloom.positions_mask`; 0 until the
    #: first acknowledgement check): one AND per received filter.
    mask: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True)
class _Waiting:
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
    #: given up sooner (Channel._vouch)
    vouched: bool = False


@dataclass(slots=True)
class _Missing:
    """An id someone's causal history named that we do not have."""

    entry: HistoryEntry
    #: when it was noticed, in recovery time (``Channel._recovery_ms``), not wall time
    noticed_ms: int
    waiting: set[str]
    #: the sender whose message first named it (its ``max_missing_per_sender`` budget)
    by: str = ""
    #: when a line of a member heard from last named it (our clock; its holder is live)
    named_ms: int | None = None


#: Whose ``max_missing_per_sender`` budget the ids learned only from others' repair
#: requests count against (Config.repair_note_asked): one for all requesters.
ASKED = "\x00asked"

#: Debug switch: when set, every :meth:`Channel.to_carry` call hands it one dict of
#: its decision (``k`` from the loss estimate and the participants, the estimate, and
#: for each recent message looked at: carried, or why not: older than the base
#: window, enough copies on the wire as far as we know, too big). ``None``: nothing is
#: traced (the default). bench/real_vs_sim.py ``--carry-trace`` sets it in the sim and
#: in every real node (bench/carry_trace.py).
carry_trace: Callable[[dict[str, Any]], None] | None = None


def _heard_kept(cfg: Config) -> int:
    """Senders a channel remembers for its SDS-R window (see :data:`HEARD_KEPT`)."""
    per = cfg.repair_window_participants
    if per is None:
        return 0
    rounds = -(-cfg.repair_t_max_limit_ms // cfg.repair_t_max_ms)  # ceil
    return min(HEARD_KEPT, per * max(1, rounds))


def _message_id(channel_id: str, sender_id: str, lamport: int, nonce: bytes, content: bytes) -> str:
    """Unique per message even for identical content, verifiable on receipt (``sds.ids``)."""
    return message_id_for(channel_id, sender_id, lamport, content, nonce)


def _usable_ids(history_ids: list[str]) -> tuple[str, ...]:
    """The ids of a causal history that can name a message: an empty id or one over
    ``MAX_ID_LENGTH`` is never waited for nor asked for, and not kept as a dependency."""
    if all(0 < len(m) <= MAX_ID_LENGTH for m in history_ids):
        return tuple(history_ids)
    return tuple(m for m in history_ids if 0 < len(m) <= MAX_ID_LENGTH)


def _entry_pb(entry: HistoryEntry) -> sds_pb2.HistoryEntry:
    pb = sds_pb2.HistoryEntry(message_id=entry.message_id)
    if entry.retrieval_hint is not None:
        pb.retrieval_hint = entry.retrieval_hint
    if entry.sender_id is not None:
        pb.sender_id = entry.sender_id
    return pb


class Channel:
    """The SDS protocol for one channel of one participant.

    ``Channel(channel_id, sender_id, config, now_ms, rng)`` starts with an empty
    log and a Lamport clock at ``now_ms``. Use :meth:`export_state` and
    :meth:`restore` to persist and resume.
    """

    def __init__(
        self,
        channel_id: str,
        sender_id: str,
        config: Config | None = None,
        now_ms: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        if not channel_id:
            raise ValueError("channel_id must be non-empty")
        if not sender_id:
            raise ValueError("sender_id must be non-empty")
        self.channel_id = channel_id
        self.sender_id = sender_id
        self.config = config if config is not None else Config()
        self._rng = rng if rng is not None else random.Random(0)
        cfg = self.config
        self._ack_threshold = cfg.ack_threshold
        #: Longest causal history accepted (a channel with a longer own one accepts that).
        self._max_history = max(cfg.max_history_received, cfg.causal_history_size)

        #: Lamport clock, milliseconds (PROTOCOL.md "Lamport clock").
        self.lamport = now_ms
        self._filter = RollingBloomFilter(cfg.bloom_capacity, cfg.bloom_error_rate)
        self._filter_nbytes = self._filter.params.nbytes
        # The ack threshold assumes each wrong hit has probability bloom_error_rate at
        # most. Our rolling filter never passes it; a peer's filter that never rolls
        # (js-waku) fills up and says "yes" to anything. A filter with more bits set
        # than fill ** k <= ack_certainty ** (1 / threshold) allows is not evidence.
        params = self._filter.params
        per_hit = cfg.ack_certainty ** (1.0 / self._ack_threshold)
        self._max_filter_bits = int(params.m * per_hit ** (1.0 / params.k))

        # Local log window, ordered by (lamport, message_id) ("Resolve Conflicts").
        self._log: SortedList = SortedList()
        self._entries: dict[str, _LogEntry] = {}
        #: Smallest ``logged_ms`` of any entry ever logged (never grows): while
        #: nothing logged is older than the settling time, no bloom filter is checked
        #: for what its sender lacks (:meth:`_name_what_they_lack`).
        self._earliest_logged_ms = MAX_LAMPORT
        self._evicted = 0
        # Ids the application vouched for (storage beyond the window) or declared lost.
        self._met_elsewhere: OrderedDict[str, None] = OrderedDict()
        self._lost: OrderedDict[str, None] = OrderedDict()

        # Outgoing buffer of own unacknowledged messages, with a resend heap.
        self._outgoing: dict[str, _Outgoing] = {}
        #: Own messages given up (MessageSendFailed), newest last, so that an ack that
        #: comes after all still says they arrived (saved with the state; FAILED_KEPT).
        self._failed: OrderedDict[str, None] = OrderedDict()
        self._resend_heap: list[tuple[int, str]] = []

        # Incoming buffer: messages waiting for dependencies, and what they wait for.
        self._incoming: OrderedDict[str, _Waiting] = OrderedDict()
        self._missing: dict[str, _Missing] = {}
        self._lost_heap: list[tuple[int, str]] = []
        self._next_sweep_ms: int | None = None

        #: Missing ids outstanding per sender that first named them (max_missing_per_sender).
        self._missing_by: dict[str, int] = {}
        #: The same ids per sender, oldest first: when the channel-wide caps (missing
        #: ids, repair requests) are reached, the sender with the most gives way.
        self._missing_of: dict[str, OrderedDict[str, None]] = {}
        #: Recovery time: lost timeouts count only time during which recovery could
        #: run (set_connected). recovery = now - _paused_total, frozen while paused.
        self._paused_total = 0
        self._paused_at: int | None = None
        self._last_now = now_ms

        # SDS-R.
        self._repair_out = OutgoingRepairBuffer(cfg.repair_buffer_size)
        #: Who named each requested id, and each namer's requests (oldest first):
        #: at the cap the namer with the most gives one up (_make_room_for).
        self._out_by: dict[str, str] = {}
        self._out_of: dict[str, OrderedDict[str, None]] = {}
        #: Ids declared lost, still wanted: asked for again with a doubling backoff
        #: (retry count in _lost_attempts) until they arrive; nobody waits for them.
        self._lost_wanted = OutgoingRepairBuffer(cfg.repair_buffer_size)
        self._lost_attempts: dict[str, int] = {}
        #: Who first named each wanted lost id, and each namer's ids (oldest first):
        #: when the buffer is full the namer with the most gives up its oldest, so
        #: one member's invented ids cannot push out the others' real ones.
        self._lost_by: dict[str, str] = {}
        self._lost_of: dict[str, OrderedDict[str, None]] = {}
        #: Wanted messages refused for their sender's budget (id -> sender), newest
        #: last: not asked for while that sender has ids missing (_refuse).
        self._refused: OrderedDict[str, str] = OrderedDict()
        self._repair_in = IncomingRepairBuffer(cfg.repair_buffer_size)
        self._repair_cache: OrderedDict[str, bytes] = OrderedDict()
        #: Repair responses per requester in the current window: (window start, count).
        self._responses_by: dict[str, tuple[int, int]] = {}
        #: Content ids -> when a copy of them was last on the wire as far as we know
        #: (a copy of one we held arrived, or we rebroadcast it): requests for them arriving
        #: within ``repair_t_min_ms / 2`` of it are not answered (see
        #: :meth:`_on_repair_requests`). Bounded: the oldest are forgotten first.
        self._copy_seen: OrderedDict[str, int] = OrderedDict()
        #: Content ids we hold and will answer -> (when a request for them was last
        #: heard, the gap to the request before it when the same requester sent both,
        #: or -1, that requester): a pending answer due after a silence is dropped
        #: (Config.repair_answer_expiry). Kept while an answer is pending (holders
        #: outside the response group keep none); bounded, the oldest forgotten first.
        self._answer_asked: OrderedDict[str, tuple[int, int, str]] = OrderedDict()
        self._answers_expired = 0
        #: Content ids -> copies of our current answer sent so far (another is due:
        #: Config.repair_answer_copies). Bounded: the oldest are forgotten first.
        self._answer_copies: OrderedDict[str, int] = OrderedDict()
        #: Content ids -> copies of them on the wire as far as we know, when more than
        #: the first (duplicates received, our answers): the members still lacking
        #: one are about ``participants x loss ** copies``. Bounded like _copy_seen.
        self._wire_copies: OrderedDict[str, int] = OrderedDict()
        #: Running mean of the share of delivered lines that we had noted missing
        #: (they reached us only through repair): the channel's loss as we see it.
        self._loss_mean = 0.0
        self._loss_lines = 0  # lines in it so far (up to LOSS_MEAN_LINES)
        #: Ids we miss that an SDS-R request asked for (ours or one heard): when one
        #: arrives, SDS-R repaired it (not a store fetch). Bounded like _copy_seen.
        self._sdsr_asked: OrderedDict[str, int] = OrderedDict()
        #: Config.carry_copies: the id of our newest content message (not carried by
        #: itself) and what was carried: copies we attached, carried copies received
        #: that were new to us, and carried copies of what we held already.
        self._just_sent = ""
        self._carried_sent = 0
        self._carried_new = 0
        self._carried_duplicates = 0
        #: Earliest time of the next sync sent only because repair requests are due.
        self._next_repair_sync_ms = now_ms
        #: Adaptive causal history (causal_history_floor): ids logged from others
        #: that none of our messages named yet, in arrival order, each with ``None``,
        #: or when a sync of another member named it the first time (at scale, while
        #: we see loss, an id a sync names stays ours to name until a second sync
        #: names it or ``Config.sync_tail_quiet_ms`` passes: :meth:`_strike_named`).
        self._unnamed: OrderedDict[str, int | None] = OrderedDict()
        #: Ids to name again (a peer's filter lacks them, or a resend said our naming
        #: was lost): named first, before the unnamed ones, oldest first.
        self._rename: OrderedDict[str, None] = OrderedDict()
        #: Log entries delivered past lost ids (:meth:`_withhold`).
        self._withheld = 0
        #: Ids named again (by us, or by others while we meant to) -> when: a peer's
        #: filter that still lacks one within ``sync_interval_ms`` does not get it named
        #: again (it lost that naming, or asks for it already; with suppression, only
        #: while the base interval lasts). Bounded like _rename.
        self._renamed_at: OrderedDict[str, int] = OrderedDict()
        #: sender id -> (when its bloom filter was last checked for what it lacks, the
        #: arrival time up to which our entries were checked against it then).
        self._lack_checked: OrderedDict[str, tuple[int, int]] = OrderedDict()
        #: sender id -> when we last heard it (oldest first): the participants that
        #: size the SDS-R windows (Config.repair_window_participants).
        self._heard: OrderedDict[str, int] = OrderedDict()
        self._heard_kept = _heard_kept(cfg)
        #: Senders heard (sampled count) that stretch the sync interval
        #: (Config.sync_interval_participants).
        self._census = ParticipantCensus(salt_for(sender_id))
        self._participants_at = (-1, 0)  # (now_ms, count) of the last _participants
        #: Sync suppression (Config.sync_suppression): another participant was heard
        #: since our last message; syncs skipped so far (stats).
        self._heard_since_sent = False
        self._syncs_suppressed = 0
        #: When we last heard a new content message from someone else
        #: (Config.sync_defer_naming; not persisted: after a restore nothing waits
        #: until content is heard again); syncs that waited for the channel to quiet.
        self._content_heard_ms: int | None = None
        self._syncs_deferred = 0
        #: The application asked for our next due sync even if it would be suppressed
        #: (:meth:`ask_sync`); not persisted.
        self._sync_asked = False

        # Sync scheduling.
        self._next_sync_ms = now_ms + self._sync_delay(1.0, now_ms)

        self._events: list[Event] = []
        self._datagrams: list[Datagram] = []

    # ------------------------------------------------------------------ draining

    def events(self) -> list[Event]:
        """Drain the events produced since the last call (oldest first)."""
        out, self._events = self._events, []
        return out

    def datagrams_to_send(self) -> list[Datagram]:
        """Drain what the core wants broadcast: resends, sync messages, repair responses."""
        out, self._datagrams = self._datagrams, []
        return out

    # ---------------------------------------------------------------- inspection

    @property
    def ack_threshold(self) -> int:
        """Distinct bloom-filter hits that acknowledge an own message."""
        return self._ack_threshold

    def log_ids(self) -> list[str]:
        """Ids in the core's log window, in log order (lamport, message_id)."""
        return [mid for _, mid in self._log]

    @property
    def log_size(self) -> int:
        """Messages ever entered in the log (window plus evicted)."""
        return self._evicted + len(self._log)

    def has_message(self, message_id: str) -> bool:
        """Whether ``message_id`` is in the core's log window."""
        return message_id in self._entries

    def outgoing_ids(self) -> list[str]:
        """Own messages not yet acknowledged."""
        return list(self._outgoing)

    def outgoing_state(self, message_id: str) -> str | None:
        """``OwnState`` of an own message still in the outgoing buffer, else ``None``."""
        out = self._outgoing.get(message_id)
        return out.state if out is not None else None

    def incoming_ids(self) -> list[str]:
        """Messages waiting in the incoming buffer for dependencies."""
        return list(self._incoming)

    def missing_ids(self) -> list[str]:
        """Dependencies currently missing: never received. A dependency that arrived
        and itself waits in the incoming buffer is not missing (:meth:`incoming_ids`)."""
        incoming = self._incoming
        return [m for m in self._missing if m not in incoming]

    def bloom_filter_bytes(self) -> bytes:
        """The filter we would send now."""
        return self._filter.to_bytes()

    def stats(self) -> dict[str, int]:
        """Sizes of every buffer (all bounded by ``Config``)."""
        return {
            "log_window": len(self._log),
            "log_total": self.log_size,
            "outgoing": len(self._outgoing),
            "incoming": len(self._incoming),
            "missing": len(self._missing),
            "lost_known": len(self._lost),
            "met_elsewhere": len(self._met_elsewhere),
            "repair_requests": len(self._repair_out),
            "lost_asked_again": len(self._lost_wanted),
            "lost_asked_again_max_per_sender": max(map(len, self._lost_of.values()), default=0),
            "repair_responses": len(self._repair_in),
            "repair_cache": len(self._repair_cache),
            "missing_max_per_sender": max(self._missing_by.values(), default=0),
            "resend_heap": len(self._resend_heap),
            "lost_heap": len(self._lost_heap),
            "bloom_items": self._filter.count,
            "syncs_suppressed": self._syncs_suppressed,
            "syncs_deferred": self._syncs_deferred,
            "repair_answers_expired": self._answers_expired,
            "repair_answer_copies": len(self._answer_copies),
            "carried_sent": self._carried_sent,
            "carried_received_new": self._carried_new,
            "carried_received_duplicate": self._carried_duplicates,
        }

    # ---------------------------------------------------------------------- send

    def send(self, content: bytes, now_ms: int) -> bytes:
        """Wrap ``content`` in a new content message and return its wire bytes.

        Spec "Send Message": the Lamport clock advances to
        ``max(now_ms, lamport + 1)``; the last ``causal_history_size`` log entries
        and the current bloom filter are attached, plus up to 3 due SDS-R repair
        requests. The message enters our own log and the outgoing buffer, whose
        sweep resends it until it is acknowledged.

        The caller must broadcast the returned bytes, then drain ``events()``
        (a :class:`~sds.events.MessageSent` carries the id). Raises
        ``ValueError`` for empty or oversized content.
        """
        if not isinstance(content, bytes | bytearray) or not content:
            raise ValueError("content must be non-empty bytes")
        content = bytes(content)
        if len(content) > self.config.max_content_bytes:
            raise ValueError(
                f"content is {len(content)} bytes; the limit is {self.config.max_content_bytes}"
            )
        lamport = self._tick(now_ms)
        nonce = self._rng.getrandbits(8 * ID_NONCE_BYTES).to_bytes(ID_NONCE_BYTES, "big")
        message_id = _message_id(self.channel_id, self.sender_id, lamport, nonce, content)
        requests = self._take_repair_requests(now_ms)
        history_ids, data = self._build(message_id, lamport, content, requests)
        if requests:
            self._events.append(
                RepairRequested(self.channel_id, tuple(e.message_id for e in requests), message_id)
            )

        positions = positions_in(message_id, self._filter.params)
        self._add_outgoing(
            _Outgoing(
                message_id,
                data,
                lamport,
                positions,
                OwnState.UNACKNOWLEDGED,
                set(),
                0,
                now_ms + self.config.resend_unacknowledged_ms,
            ),
            now_ms,
        )
        self._filter.add_with_positions(message_id, positions)
        self._sync_deadline_for_first_entry(now_ms)
        position = self._insert_log(message_id, lamport, self.sender_id, None)
        self._cache_for_repair(message_id, data)
        self._events.append(
            MessageSent(
                self.channel_id, message_id, lamport, content, data, history_ids, position
            )
        )
        # Our content message carries our acks: the periodic sync can wait.
        self._next_sync_ms = now_ms + self._sync_delay(1.0, now_ms)
        self._heard_since_sent = False
        self._just_sent = message_id
        return data

    def to_carry(self, now_ms: int) -> list[tuple[str, bytes]]:
        """What the content message just returned by :meth:`send` carries
        (Config.carry_copies): ``(message id, SDS bytes)`` of recent messages, for the
        transport to attach to that message's envelope; receivers give each to
        :meth:`receive` with ``carried=True``. Calling it counts them as copies on the
        wire (call it once per :meth:`send`).

        Only at scale (``participants x loss`` at least
        :data:`FIRST_REQUEST_MIN_LACKING`, the first-request spread's test: channels of
        10 and 100 carry nothing): a message that entered our log within the base
        window (``repair_t_max_ms``), at most :data:`CARRY_MAX_BYTES`, whose copies on
        the wire as far as we know (the first, carried ones, answers) are fewer than
        ``1 + k``, ``k`` the fewest copies after which the members expected to lack it,
        ``participants x loss ** (k + 1)``, are below :data:`CARRY_WHEN_LACKING`, at
        most ``carry_copies``; the newest first, at most :data:`CARRY_MAX_IDS`.
        """
        cfg = self.config
        k = self._carry_k(now_ms)
        trace = carry_trace
        if not k:
            if trace is not None:
                self._trace_carry(trace, now_ms, k, [])
            return []
        since = now_ms - cfg.repair_t_max_ms
        entries = self._entries
        copies = self._wire_copies
        cache = self._repair_cache
        out: list[tuple[str, bytes]] = []
        seen: list[tuple[str, str, int, int]] | None = [] if trace is not None else None
        for scanned, mid in enumerate(reversed(cache)):
            if scanned >= CARRY_SCAN:
                break
            le = entries.get(mid)
            if le is None or mid == self._just_sent:
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
            self._note_copy_on_wire(mid, now_ms)
            self._count_wire_copy(mid)
        self._carried_sent += len(out)
        if trace is not None:
            self._trace_carry(trace, now_ms, k, seen or [])
        return out

    def _trace_carry(
        self,
        trace: Callable[[dict[str, Any]], None],
        now_ms: int,
        k: int,
        seen: list[tuple[str, str, int, int]],
    ) -> None:
        """One :meth:`to_carry` decision for :data:`carry_trace` (a debug switch)."""
        trace({
            "channel": self.channel_id,
            "sender": self.sender_id,
            "message": self._just_sent,
            "now_ms": now_ms,
            "k": k,
            "loss": round(self._loss_mean, 4),
            "loss_lines": self._loss_lines,
            "participants": self._participants(now_ms),
            "at_scale": self._at_scale(now_ms),
            "base_window_ms": self.config.repair_t_max_ms,
            # (id, decision, ms since it entered our log, its copies on the wire as we know)
            "candidates": [list(c) for c in seen],
        })

    def send_ephemeral(self, content: bytes, now_ms: int) -> bytes:
        """Wrap ``content`` in an ephemeral message (spec "Ephemeral Messages").

        No Lamport timestamp, causal history or filter; not buffered, not logged,
        never resent. The caller broadcasts the returned bytes.
        """
        if not isinstance(content, bytes | bytearray) or not content:
            raise ValueError("content must be non-empty bytes")
        content = bytes(content)
        if len(content) > self.config.max_content_bytes:
            raise ValueError(
                f"content is {len(content)} bytes; the limit is {self.config.max_content_bytes}"
            )
        nonce = self._rng.getrandbits(8 * ID_NONCE_BYTES).to_bytes(ID_NONCE_BYTES, "big")
        message_id = _message_id(self.channel_id, self.sender_id, -1, nonce, content)
        pb = sds_pb2.SdsMessage(
            sender_id=self.sender_id,
            message_id=message_id,
            channel_id=self.channel_id,
            content=content,
        )
        return pb.SerializeToString()

    def _tick(self, now_ms: int) -> int:
        # Saturate at the uint64 wire limit: one peer's timestamp of 2**64 - 1 must not
        # make every later send (and sync) fail to encode.
        self.lamport = min(max(now_ms, self.lamport + 1), MAX_LAMPORT)
        return self.lamport

    def _build(
        self,
        message_id: str,
        lamport: int,
        content: bytes | None,
        requests: list[HistoryEntry],
        floor: int | None = None,
    ) -> tuple[tuple[str, ...], bytes]:
        """Serialise a content or sync message; return (history ids, bytes).

        The causal history is appended as pre-serialised one-entry fragments
        (protobuf merges concatenated messages, appending repeated fields), so a
        200-entry history costs a join instead of 200 protobuf objects.
        """
        pb = sds_pb2.SdsMessage(
            sender_id=self.sender_id,
            message_id=message_id,
            channel_id=self.channel_id,
            lamport_timestamp=lamport,
            bloom_filter=self._filter.to_bytes(),
        )
        if content is not None:
            pb.content = content
        for entry in requests:
            pb.repair_request.append(_entry_pb(entry))
        entries = self._entries
        ids = []
        fragments = []
        for mid in self._history_ids(floor, content is not None):
            le = entries[mid]
            frag = le.fragment
            if frag is None:
                frag = self._fragment(mid, le)
            ids.append(mid)
            fragments.append(frag)
        return tuple(ids), pb.SerializeToString() + b"".join(fragments)

    def _history_ids(self, floor_override: int | None = None, content: bool = False) -> list[str]:
        """The causal history to send (Config.causal_history_floor).

        Fixed: the newest ``causal_history_size`` log entries. Adaptive: the newest
        ``causal_history_floor`` log entries, then the ids to name again (a peer's
        filter lacks them: :meth:`_name_what_they_lack`, :meth:`note_copy`), then the
        ids logged from others that none of our messages named yet, latest arrival
        first, up to ``causal_history_size`` in all. The ids to name again go first:
        behind a burst of newly arrived ids (a returning peer's republished messages)
        they would otherwise wait for a dozen messages. Every id we deliver is so named by at least
        one of our messages (content or sync), even one delivered long after it
        was sent (a released dependency, a slow link): others notice a gap, the
        sender gets its acknowledgement, however busy the channel. A ``content``
        message leaves out the ids delivered past lost ones (:meth:`_withhold`): they
        wait for a sync.
        """
        cfg = self.config
        floor = cfg.causal_history_floor
        log = self._log
        entries = self._entries
        skip = content and self._withheld > 0
        if floor is None:
            n = cfg.causal_history_size
            if not n:
                return []
            if skip:
                return [mid for _, mid in log.islice(-n) if not entries[mid].withheld]
            return [mid for _, mid in log.islice(-n)]
        if floor_override is not None:
            floor = min(floor, floor_override)
        floor = min(floor, cfg.causal_history_size)
        top = [mid for _, mid in log.islice(-floor)] if floor else []
        if skip:
            top = [mid for mid in top if not entries[mid].withheld]
        unnamed = self._unnamed
        rename = self._rename
        for mid in top:
            unnamed.pop(mid, None)
            rename.pop(mid, None)
        room = cfg.causal_history_size - len(top)
        extra: list[str] = []
        kept: list[str] = []  # withheld from this content message: left for a sync
        while rename and len(extra) < room:
            mid, _ = rename.popitem(last=False)
            le = entries.get(mid)
            if le is None:
                continue
            if skip and le.withheld:
                kept.append(mid)
                continue
            unnamed.pop(mid, None)
            extra.append(mid)
            self._note_renamed(mid)
        for mid in reversed(kept):
            rename[mid] = None
            rename.move_to_end(mid, last=False)
        kept = []
        while unnamed and len(extra) < room:
            mid, _ = unnamed.popitem(last=True)
            le = entries.get(mid)
            if le is None:
                continue
            if skip and le.withheld:
                kept.append(mid)
                continue
            extra.append(mid)
        for mid in reversed(kept):
            unnamed[mid] = None
        return top + extra

    @staticmethod
    def _fragment(message_id: str, le: _LogEntry) -> bytes:
        pb = sds_pb2.SdsMessage()
        entry = HistoryEntry(message_id, le.retrieval_hint, le.sender_id)
        pb.causal_history.append(_entry_pb(entry))
        le.fragment = pb.SerializeToString()
        return le.fragment

    def set_retrieval_hint(self, message_id: str, hint: bytes) -> None:
        """Attach a retrieval hint (e.g. the envelope hash) to a logged message.

        Call it right after sending an own message, once the transport knows the
        hint; later causal histories that name the message will carry it.
        """
        le = self._entries.get(message_id)
        if le is not None:
            le.retrieval_hint = bytes(hint)
            le.fragment = None

    # ------------------------------------------------------------------- receive

    def note_copy(self, message_id: str, sender_id: str, now_ms: int) -> None:
        """A copy of a content message we delivered arrived again (its author resends it).

        :meth:`receive` calls it for every duplicate; an application that drops
        byte-identical copies before the core (a replay guard) calls it instead. With
        the adaptive history (``causal_history_floor``) each delivered id is named once;
        a resend says that message of ours was lost (a sync into a failing relay, a
        lossy link), so the id is named again in our next message, sent soon. With one
        peer, bloom hits (one distinct sender) never reach the acknowledgement
        threshold, and the author's message would otherwise stay unacknowledged.

        SDS-R: the copy is a copy on the wire, as for :meth:`receive`: it cancels our
        pending answer for the message and starts the quiet period in which requests
        that crossed it are not answered. A real node's replay guard drops the
        byte-identical repair answers of other holders before the core: without this,
        every holder scheduled to answer answered (bench/real_vs_sim.py, 8 nodes:
        19 rebroadcasts for 3 ids asked, against 5 in the sim of the same run).
        """
        if self.config.repair_enabled and (
            message_id in self._entries or message_id in self._incoming
        ):
            self._unrequest(message_id)
            self._repair_in.remove(message_id)
            self._unwant_lost(message_id)
            self._note_copy_on_wire(message_id, now_ms)
            self._count_wire_copy(message_id)
        self._rename_copy(message_id, sender_id, now_ms)

    def _rename_copy(self, message_id: str, sender_id: str, now_ms: int) -> None:
        """:meth:`note_copy`'s adaptive-history part: the copy's id named again, soon."""
        if (
            sender_id == self.sender_id
            or self.config.causal_history_floor is None
            or message_id not in self._entries
        ):
            return
        cfg = self.config
        if cfg.sync_rename_sparingly and self._at_scale(now_ms):
            # at scale the copy is a repair answer every member heard (Config.
            # sync_rename_sparingly): a holder's late answer made ~1 sync each after the
            # lines stopped (sdschat sim, 1,000 members); but its author's resend says
            # the namings missed it (Config.sync_tail_quiet_ms)
            if self._resent(message_id, now_ms) and self._one_of_few(now_ms):
                self._note_rename(message_id)
                self._rename_soon(now_ms, chosen=True)
            return
        if self._renamed_lately(message_id, now_ms) or not self._one_of_few(now_ms):
            # without: a few members name it again (for the author, if it was a
            # resend), not all
            return
        self._note_rename(message_id)
        self._rename_soon(now_ms, chosen=True)

    def _resent(self, message_id: str, now_ms: int) -> bool:
        """Config.sync_tail_quiet_ms: whether a copy of ``message_id`` (which we hold) is
        its author's resend of the last line of a burst, not a repair answer: it is still
        the newest entry of our log (no later line named it), it comes a resend period
        (``resend_unacknowledged_ms``, less ``repair_t_min_ms`` for the latency) or more
        after the line reached us, and no request for it, nor a naming of it, was heard
        for ``repair_t_min_ms + repair_t_max_ms`` (a requester still lacking it asks
        again within that time; answers due after it are dropped,
        Config.repair_answer_expiry). Its author lacks the acknowledgement: the syncs
        that named the line (the last of a burst) missed it, and without this only a
        member that had missed them too named it again, at its next sync (33 and 197 s
        in 2 of 50 runs of sdschat sim, 1,000 members, 10% loss)."""
        cfg = self.config
        le = self._entries.get(message_id)
        if cfg.sync_tail_quiet_ms is None or le is None or self._log[-1][1] != message_id:
            return False  # a later line names it (the newest ids of its author's log)
        if now_ms - le.logged_ms < cfg.resend_unacknowledged_ms - cfg.repair_t_min_ms:
            return False
        t = self._renamed_at.get(message_id)
        return t is None or now_ms - t >= cfg.repair_t_min_ms + cfg.repair_t_max_ms

    def _name_what_they_lack(self, pb: sds_pb2.SdsMessage, sender_id: str, now_ms: int) -> None:
        """Adaptive history: ids a peer's bloom filter lacks are named again, soon.

        Each delivered id is named once; a peer that was offline then (restarted,
        partitioned) would otherwise hear of only the newest ``causal_history_floor``
        ids and never ask for the rest. Its filter says what it holds; naming what it
        lacks lets it notice the gap and ask (SDS-R). Two sets of our entries are
        checked against the filter:

        * the newest ``causal_history_size`` log entries;
        * every entry that entered our log since this peer's filter was last checked
          (not its own messages), oldest arrival last, at most ``bloom_capacity // 2``
          of them. Each entry is so checked once against each peer we keep hearing,
          early, while the peer's rolling filter still holds it if the peer has it.
          For a peer back after an absence these are the entries logged while it was
          away, wherever their Lamport timestamps put them in the log: a burst of
          older messages republished on its return cannot hide them from the check.

        Entries logged in the last sixteenth of ``sync_interval_ms`` are left out:
        they may still be on their way to it, and naming them again would only make
        messages longer on slow links (without this the CI profile study measured ack
        p99 1.42x the waku profile's; 1.25x is the bound). At most once per sender every
        quarter ``sync_interval_ms``, so the check (a few bit tests per id) stays off a
        busy channel's per-message path. A filter of another size says nothing here.
        The last 1,024 senders heard are remembered; one forgotten counts as new (its
        first check covers the newest entries only).
        """
        cfg = self.config
        if (
            cfg.causal_history_floor is None
            or sender_id == self.sender_id
            or not pb.HasField("bloom_filter")
            or len(pb.bloom_filter) != self._filter_nbytes
        ):
            return
        settled = now_ms - cfg.sync_interval_ms // 16  # newer ones may still be on the way
        if settled < self._earliest_logged_ms:
            # Nothing we logged is settled yet: the check below would skip every entry.
            # (sdschat sim scales the sync interval with N²: a whole run stays here,
            # and the loop over the newest entries of every received message took 23%
            # of its CPU at 2,000 participants, the per-sender times ~100 bytes each.)
            return
        checked = self._lack_checked
        last = checked.get(sender_id)
        if last is not None and now_ms - last[0] < cfg.sync_interval_ms // 4:
            return
        if not self._one_of_few(now_ms):
            # every member hears the same filter: about sync_interval_participants of
            # them check it, whatever the channel's size
            return
        checked[sender_id] = (now_ms, settled)
        checked.move_to_end(sender_id)
        while len(checked) > 1_024:  # peers recently heard from
            checked.popitem(last=False)
        entries = self._entries
        # the settled ones of the newest log entries, then (newest arrival first) what
        # arrived since this peer's last check: not its own, at most bloom_capacity // 2
        # (each id tested once: the two sets mostly overlap on a busy channel)
        candidates: dict[str, _LogEntry] = {}
        for _, mid in self._log.islice(-cfg.causal_history_size):
            le = entries[mid]
            if le.logged_ms <= settled:
                candidates[mid] = le
        if last is not None:
            since = last[1]
            budget = max(cfg.bloom_capacity // 2, cfg.causal_history_size)
            for mid in reversed(entries):
                le = entries[mid]
                if le.logged_ms <= since or budget <= 0:
                    break
                if le.logged_ms <= settled and le.sender_id != sender_id:
                    candidates.setdefault(mid, le)
                    budget -= 1
        bloom = pb.bloom_filter
        params = self._filter.params
        lacking = False
        # what it asks for it knows it lacks: naming it again tells it nothing
        asked = {r.message_id for r in pb.repair_request} if len(pb.repair_request) else ()
        renamed = self._renamed_at
        if cfg.sync_rename_sparingly and self._at_scale(now_ms):
            self._name_lacked_runs(candidates, bloom, asked, now_ms)
            return
        for mid, le in candidates.items():
            if mid in asked:
                continue
            if renamed and self._renamed_lately(mid, now_ms):
                continue
            pos = le.positions
            if pos is None:
                pos = le.positions = positions_in(mid, params)
            if not contains_positions(bloom, pos):
                self._note_rename(mid)
                lacking = True
        if lacking:
            self._rename_soon(now_ms, chosen=True)

    def _name_lacked_runs(
        self,
        candidates: dict[str, _LogEntry],
        bloom: bytes,
        asked: set[str] | tuple[()],
        now_ms: int,
    ) -> None:
        """Config.sync_rename_sparingly: of the entries a filter lacks, name again only runs
        of at least ``causal_history_floor`` that are consecutive in our log. Every
        message names the newest ``causal_history_floor`` entries: a peer that lacks
        fewer in a row, and holds the one after them, heard them named by it (it lost
        the messages, knows, and is repairing them); a peer back from an absence lacks
        everything logged while it was away. (sdschat sim, 1,000 members, 5% loss: 118
        of the 129 syncs of the quiet minute after the lines named one such id again,
        a peer's repair in progress.)"""
        params = self._filter.params
        floor = max(1, self.config.causal_history_floor or 1)
        ordered = sorted(candidates.items(), key=lambda kv: (kv[1].lamport, kv[0]))
        runs: list[list[str]] = [[]]
        for mid, le in ordered:
            pos = le.positions
            if pos is None:
                pos = le.positions = positions_in(mid, params)
            if not contains_positions(bloom, pos):
                runs[-1].append(mid)
            elif runs[-1]:
                runs.append([])
        named = False
        for run in runs:
            if len(run) < floor:
                continue
            for mid in run:
                if mid not in asked and not self._renamed_lately(mid, now_ms):
                    self._note_rename(mid)
                    named = True
        if named:
            self._rename_soon(now_ms, chosen=True)

    def _renamed_lately(self, message_id: str, now_ms: int) -> bool:
        t = self._renamed_at.get(message_id)
        return t is not None and now_ms - t < self.config.sync_interval_ms

    def _one_of_few(self, now_ms: int) -> bool:
        """True with probability ``sync_interval_participants / participants`` (always
        in a channel that small, or with a fixed interval)."""
        per = self.config.sync_interval_participants
        if per is None:
            return True
        n = self._participants(now_ms)
        return n <= per or self._rng.random() * n < per

    def _rename_soon(self, now_ms: int, chosen: bool = False) -> None:
        """Ids to name again were noted: bring our sync forward (within half the base
        interval), but in a channel larger than ``Config.sync_interval_participants``
        only with probability ``that / participants``: about that many members do it,
        whatever the channel's size (every member hears the same copy or checks the
        same lacking filter; the first sync naming the ids makes the others strike
        them). The others name them at their next sync, which is not suppressed
        while they have ids to name."""
        if not chosen and not self._one_of_few(now_ms):
            return
        delay = int(self._rng.random() * self.config.sync_interval_ms * 0.5)
        self._next_sync_ms = min(self._next_sync_ms, now_ms + delay)

    def _strike_named(
        self, history_ids: list[str], sender_id: str, sync_ms: int | None = None
    ) -> None:
        """Sync suppression: ids a message we heard names are named for the channel
        (their author has its acknowledgement, those who lack them hear of them), so we
        no longer have to name them (Config.sync_suppression). An author naming its own
        messages acknowledges nothing: those stay ours to name.

        ``sync_ms``: the message is a sync heard at that time. At scale, while we see
        loss (Config.sync_tail_quiet_ms), an id nobody named before it stays ours to
        name until a second sync names it or ``sync_tail_quiet_ms`` passes: a content
        message's ids are named again by the next lines (``causal_history_floor``), but
        the last line of a burst is named by syncs alone, and one sync missed by its
        author (``loss`` of the time) left it unacknowledged until a member that had
        missed that sync too synced (33 s and more in 2 of 20 runs of sdschat sim,
        1,000 members, 10% loss)."""
        unnamed = self._unnamed
        rename = self._rename
        entries = self._entries
        hold = sync_ms is not None and unnamed and self._second_naming(sync_ms)
        for mid in history_ids:
            le = entries.get(mid)
            if le is None or le.sender_id == sender_id:
                continue
            if hold and mid in unnamed and unnamed[mid] is None:
                unnamed[mid] = sync_ms  # named once: one more sync names it
            else:
                unnamed.pop(mid, None)
            if rename and mid in rename:
                del rename[mid]
                self._note_renamed(mid)

    def _second_naming(self, now_ms: int) -> bool:
        """Whether an id a sync names stays ours to name until a second sync names it
        (:meth:`_strike_named`): at scale, with Config.sync_tail_quiet_ms, while more
        than :data:`TAIL_ONE_NAMING_LOSS` of the lines reach us only by repair."""
        return (
            self.config.sync_tail_quiet_ms is not None
            and self._loss_mean > TAIL_ONE_NAMING_LOSS
            and self._at_scale(now_ms)
        )

    def _to_name(self, now_ms: int) -> bool:
        """Whether ids are still ours to name (Config.sync_suppression): one nobody
        named, or one a sync named once less than ``sync_tail_quiet_ms`` ago (those
        older are forgotten here)."""
        unnamed = self._unnamed
        if not unnamed:
            return False
        hold = self.config.sync_tail_quiet_ms or 0
        done = []
        found = False
        for mid, first in unnamed.items():
            if first is None or now_ms - first < hold:
                found = True
                break
            done.append(mid)
        for mid in done:
            del unnamed[mid]
        return found

    def _note_renamed(self, message_id: str) -> None:
        if not self.config.sync_suppression:
            return
        at = self._renamed_at
        now = self._last_now
        at[message_id] = now
        at.move_to_end(message_id)
        # only the hold-off still running is needed (oldest first): a 10,000-member
        # channel hears a request for every id it holds
        horizon = now - self.config.sync_interval_ms
        while at:
            oldest = next(iter(at))
            if at[oldest] > horizon and len(at) <= self.config.log_window:
                break
            del at[oldest]

    def _note_rename(self, message_id: str) -> None:
        """Name ``message_id`` again in our next messages (before the unnamed ids)."""
        rename = self._rename
        if message_id not in rename:
            rename[message_id] = None
            if len(rename) > self.config.log_window:
                rename.popitem(last=False)

    def note_carried(self, message_id: str, now_ms: int) -> None:
        """A carried copy of a message we hold, recognised by the application without
        handing over its bytes (the same envelope it stored): as :meth:`receive` with
        ``carried=True`` of a message held already. Ignored for an id we do not hold."""
        if self.holds(message_id):
            self._carried_copy(message_id, now_ms)

    def holds(self, message_id: str) -> bool:
        """Whether a copy of ``message_id`` would be a duplicate here: in the log
        window, waiting in the incoming buffer, or held by the application."""
        return (
            message_id in self._entries
            or message_id in self._incoming
            or message_id in self._met_elsewhere
        )

    def _carried_copy(self, message_id: str, now_ms: int) -> None:
        """One more copy on the wire of ``message_id``, which we hold, carried."""
        self._carried_duplicates += 1
        if self.config.repair_enabled:
            self._unrequest(message_id)
            self._repair_in.remove(message_id)
            self._unwant_lost(message_id)
            self._note_copy_on_wire(message_id, now_ms)
            if message_id in self._entries or message_id in self._incoming:
                self._count_wire_copy(message_id)

    def _carry_k(self, now_ms: int) -> int:
        """Copies of a line carried after its first (Config.carry_copies; 0: none)."""
        cfg = self.config
        loss = self._loss_mean
        if cfg.carry_copies <= 0 or not cfg.repair_enabled or not loss:
            return 0
        if not self._at_scale(now_ms):
            return 0
        n = self._participants(now_ms)
        if n * loss < FIRST_REQUEST_MIN_LACKING:
            return 0
        k = 1
        while k < cfg.carry_copies and n * loss ** (k + 1) >= CARRY_WHEN_LACKING:
            k += 1
        return k

    def receive(
        self,
        data: bytes,
        now_ms: int,
        retrieval_hint: bytes | None = None,
        carried: bool = False,
    ) -> None:
        """Process wire bytes from a peer (spec "Receive Message").

        Never raises for bad input: malformed or unwanted messages become a
        :class:`~sds.events.MessageDropped` event. ``retrieval_hint`` is how this
        message can be fetched again (e.g. its envelope hash); it is attached to
        the message's entry in later causal histories.

        ``carried``: the bytes rode on another member's content message
        (:meth:`to_carry`; give them before that message). A carried copy is a copy
        on the wire (it cancels our request and pending answer for it, and counts
        for the copies of answers); new to us, it is delivered as any message and
        counts as a line we missed directly (the loss estimate); held already, it is
        counted (``stats()["carried_received_duplicate"]``) and nothing else: no
        event. Its repair requests and bloom filter are its author's of seconds ago:
        not acted on.
        """
        try:
            pb = parse_pb(data)
        except DecodeError as exc:
            self._drop(None, None, DropReason.MALFORMED, exc.detail)
            return
        self.receive_parsed(pb, bytes(data), now_ms, retrieval_hint, carried=carried)

    def receive_parsed(
        self,
        parsed: sds_pb2.SdsMessage | SharedMessage,
        data: bytes,
        now_ms: int,
        retrieval_hint: bytes | None = None,
        id_content: bytes | None = None,
        carried: bool = False,
    ) -> None:
        """As :meth:`receive`, for a message the caller already parsed (``Participant`` does).

        ``id_content``: the content the message id was made over, when the caller
        replaced ``pb.content`` before handing it over (an application that encrypts
        content inside SDS and decrypts it first; the id covers the ciphertext).

        ``parsed`` may be a :class:`~sds.message.SharedMessage`: one parse shared by
        many receivers (the simulator's broadcasts), read the same way.
        """
        # a SharedMessage reads as the SdsMessage it was made from
        pb = cast(sds_pb2.SdsMessage, parsed)
        message_id = pb.message_id
        sender_id = pb.sender_id
        if pb.channel_id != self.channel_id:
            self._drop(message_id, sender_id, DropReason.WRONG_CHANNEL, pb.channel_id)
            return
        if not message_id or not sender_id:
            self._drop(message_id or None, sender_id or None, DropReason.MISSING_ID)
            return
        if len(message_id) > MAX_ID_LENGTH or len(sender_id) > MAX_ID_LENGTH:
            self._drop(
                None if len(message_id) > MAX_ID_LENGTH else message_id,
                None if len(sender_id) > MAX_ID_LENGTH else sender_id,
                DropReason.ID_TOO_LONG,
                f"message_id {len(message_id)}, sender_id {len(sender_id)} characters",
            )
            return
        # One string per id for every channel that keeps it: protobuf makes a new str
        # at each access, and a simulated broadcast (one parse, N receivers) would
        # otherwise store N copies in the logs (and the senders in _heard): ~170
        # bytes per message held per participant.
        message_id = sys.intern(message_id)
        sender_id = sys.intern(sender_id)
        has_lamport = pb.HasField("lamport_timestamp")
        content = pb.content
        if not has_lamport and not content:
            self._drop(message_id, sender_id, DropReason.INVALID_KIND)
            return
        if len(content) > self.config.max_content_bytes:
            self._drop(message_id, sender_id, DropReason.OVERSIZED, f"{len(content)} bytes")
            return
        if sender_id == self.sender_id and not carried:
            # Spec: SHOULD ignore own messages. (A carried copy of one is a copy on
            # the wire all the same: counted below, never delivered.)
            self._drop(message_id, sender_id, DropReason.OWN_ECHO)
            return
        if not has_lamport:
            # Spec "Ephemeral Messages": delivered at once, never logged or buffered.
            self._events.append(EphemeralReceived(self.channel_id, message_id, sender_id, content))
            return
        if pb.lamport_timestamp > MAX_LAMPORT:
            self._drop(
                message_id, sender_id, DropReason.LAMPORT_OUT_OF_RANGE, str(pb.lamport_timestamp)
            )
            return
        cfg = self.config
        self._last_now = now_ms
        if pb.lamport_timestamp > now_ms + cfg.max_clock_skew_ms:
            # Adopting it would move our clock (and the order of every later message)
            # there: refused, never adopted. An honest author's resends come back.
            self._drop(
                message_id,
                sender_id,
                DropReason.CLOCK_AHEAD,
                f"lamport {pb.lamport_timestamp} is {pb.lamport_timestamp - now_ms} ms ahead "
                f"of our clock; at most {cfg.max_clock_skew_ms} ms is accepted",
            )
            return

        is_content = bool(content)
        if (
            is_content
            and self.config.verify_message_ids
            and (
                parsed.id_form() if type(parsed) is SharedMessage and id_content is None
                else id_form(message_id, pb.channel_id, sender_id, pb.lamport_timestamp,
                             content if id_content is None else id_content)
            )
            is None
        ):
            # Before anything else uses the id (repair cancels, dedup): a copied id
            # over other text or another author must not displace the genuine one.
            self._drop(message_id, sender_id, DropReason.UNVERIFIABLE_ID)
            return

        history = pb.causal_history
        if len(history) > self._max_history:
            self._drop(
                message_id,
                sender_id,
                DropReason.HISTORY_TOO_LONG,
                f"{len(history)} causal history entries; at most {self._max_history}",
            )
            return
        if len(pb.repair_request) > cfg.max_repair_requests_received:
            self._drop(
                message_id,
                sender_id,
                DropReason.TOO_MANY_REPAIR_REQUESTS,
                f"{len(pb.repair_request)} repair requests; at most "
                f"{cfg.max_repair_requests_received}",
            )
            return
        history_ids = (
            parsed.history_ids if type(parsed) is SharedMessage
            else list(map(_MESSAGE_ID, history))
        )

        duplicate = is_content and self.holds(message_id)
        if carried:
            if not is_content:
                self._drop(message_id, sender_id, DropReason.INVALID_KIND, "carried sync")
                return
            if sender_id == self.sender_id and not duplicate:
                self._drop(message_id, sender_id, DropReason.OWN_ECHO)
                return
            if duplicate:
                # the common case (all but ~loss of the members): a copy on the wire,
                # counted apart, no event (Config.carry_copies)
                self._carried_copy(message_id, now_ms)
                return
        if not duplicate and not self._within_budget(sender_id, message_id, history_ids):
            self._drop(
                message_id,
                sender_id,
                DropReason.SENDER_BUDGET,
                f"{self._missing_by.get(sender_id, 0)} ids first named by this sender are "
                f"still missing; at most {cfg.max_missing_per_sender}",
            )
            self._refuse(message_id, sender_id, now_ms)
            return
        if all(map(self._entries.__contains__, history_ids)):
            # A participant counts (the SDS-R windows, the sync interval) once a message
            # of it names only what we hold: identities naming invented ids (issue 26,
            # a member with many keys) would otherwise stretch every honest member's
            # repair and sync timings by their number.
            self._note_heard(sender_id, now_ms)
            if cfg.sync_interval_participants is not None:
                self._census.hear(sender_id, now_ms)
                self._participants_at = (-1, 0)
        self._heard_since_sent = True
        if cfg.sync_suppression and (self._unnamed or self._rename):
            self._strike_named(history_ids, sender_id, None if is_content else now_ms)
        if is_content and self.config.repair_enabled:
            # SDS-R: seeing m arrive cancels our request for it and our pending answer.
            self._unrequest(message_id)
            self._repair_in.remove(message_id)
            self._unwant_lost(message_id)
            if carried:
                # at least the first and this copy were on the wire
                self._carried_new += 1
                self._note_copy_on_wire(message_id, now_ms)
                self._count_wire_copy(message_id)
        if duplicate:
            # Spec "Review ACK Status" is for every received message: a copy (a resend,
            # or js-waku's same id for the same text) still acknowledges what it names.
            self._review_acks(pb, history_ids, sender_id)
            self._check_conflict(message_id, sender_id, pb.lamport_timestamp, content)
            # note_copy, without the cancels just run above (run again, they found
            # nothing): the copy on the wire is noted once
            if self.config.repair_enabled:
                self._note_copy_on_wire(message_id, now_ms)
                if message_id in self._entries or message_id in self._incoming:
                    self._count_wire_copy(message_id)
            self._rename_copy(message_id, sender_id, now_ms)
            self._drop(message_id, sender_id, DropReason.DUPLICATE)
            return

        if self.config.repair_enabled and len(pb.repair_request) and not carried:
            self._on_repair_requests(pb, sender_id, now_ms)

        self._review_acks(pb, history_ids, sender_id)

        lamport = pb.lamport_timestamp
        if not carried:
            self._name_what_they_lack(pb, sender_id, now_ms)
        if not is_content:
            # Spec "Periodic Sync Message": process history and filter, never persist.
            self._note_missing(message_id, sender_id, history, history_ids, now_ms, False)
            self._cap_missing(now_ms)
            self._events.append(SyncReceived(self.channel_id, message_id, sender_id, lamport))
            return

        # Spec "Receive Message": a content message's id enters our bloom filter.
        self._filter.add(message_id)
        # the channel's loss as we see it (Config.repair_answer_copies)
        self._loss_lines = lines = min(self._loss_lines + 1, LOSS_MEAN_LINES)
        # a carried line was missed directly: without it, lines carried to us were
        # never asked for and the estimate (and carrying with it) would starve
        asked = self._sdsr_asked.pop(message_id, 0)
        repaired = carried or bool(asked and message_id in self._missing)
        self._loss_mean += (repaired - self._loss_mean) / lines
        self._content_heard_ms = now_ms
        self._sync_deadline_for_first_entry(now_ms)
        self._cache_for_repair(message_id, data)
        missing = self._note_missing(message_id, sender_id, history, history_ids, now_ms, True)
        waiting = _Waiting(
            message_id,
            sender_id,
            lamport,
            content,
            _usable_ids(history_ids),
            retrieval_hint,
            data,
            now_ms,
            missing,
        )
        if missing:
            self._buffer_incoming(waiting, now_ms)
            self._cap_missing(now_ms)
        else:
            self._deliver(waiting)
        # Acknowledge content soon: shorten the sync backoff (js-waku: 0.5x).
        interval = self.sync_interval(now_ms)
        if cfg.sync_suppression and interval > cfg.sync_interval_ms:
            # Larger than sync_interval_participants: one draw per wait, a timer
            # already within half an interval stays. Drawn again for every message
            # received, the timers of a busy channel crept towards now (the least of
            # k draws), and its members synced k times as often, most of them before
            # the first sync could suppress them.
            half = interval // 2
            if self._next_sync_ms > now_ms + half:
                self._next_sync_ms = now_ms + int(self._rng.random() * half)
        else:
            self._next_sync_ms = min(self._next_sync_ms, now_ms + self._sync_delay(0.5, now_ms))

    def _check_conflict(
        self, message_id: str, sender_id: str, lamport: int, content: bytes
    ) -> None:
        """A second message under an id we hold, with another author, content or timestamp.

        The first one stays (it may already be shown, acknowledged, stored); the
        second is reported as a :class:`MessageConflict`, never silently dropped.
        An id the application holds beyond the window is its to compare.
        """
        le = self._entries.get(message_id)
        if le is not None:
            kept_sender = le.sender_id
            if kept_sender != sender_id:
                reason = "author"
            else:
                reason = "timestamp" if le.lamport != lamport else ""
        else:
            w = self._incoming.get(message_id)
            if w is None:
                return
            kept_sender = w.sender_id
            if kept_sender != sender_id:
                reason = "author"
            elif w.content != content:
                reason = "content"
            else:
                reason = "timestamp" if w.lamport != lamport else ""
        if reason:
            self._events.append(
                MessageConflict(self.channel_id, message_id, kept_sender, sender_id, reason)
            )

    def _drop(
        self,
        message_id: str | None,
        sender_id: str | None,
        reason: DropReason,
        detail: str = "",
        retrieval_hint: bytes | None = None,
    ) -> None:
        self._events.append(
            MessageDropped(self.channel_id, message_id, sender_id, reason, detail, retrieval_hint)
        )

    # -------------------------------------------------------------- ack review

    def _review_acks(
        self, pb: sds_pb2.SdsMessage, history_ids: list[str], sender_id: str
    ) -> None:
        """Spec "Review ACK Status"."""
        outgoing = self._outgoing
        has_bloom = pb.HasField("bloom_filter")
        if has_bloom and len(pb.bloom_filter) != self._filter_nbytes:
            # Counted whatever we have outstanding; ignored for acks.
            self._bad_filter(pb, sender_id)
            has_bloom = False
        failed = self._failed
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
        threshold = self._ack_threshold
        acked = []
        trusted: bool | None = None  # worked out at the first hit (28 us for 18 KB)
        for out in outgoing.values():
            # a node that falls behind holds tens to hundreds outstanding, tested against
            # every filter it receives: one integer AND each (all k bits at once: 86 ns
            # against 221 ns for two bits inline and the rest byte by byte)
            mask = out.mask
            if not mask:
                mask = out.mask = positions_mask(out.positions)
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
                        self._push_resend(out)
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
        self._drop(
            pb.message_id,
            sender_id,
            DropReason.SATURATED_FILTER,
            f"bloom filter with {set_bits} of {self._filter.params.m} bits set (at most "
            f"{self._max_filter_bits} for its hits to count): ignored for acknowledgements",
        )
        return False

    def _bad_filter(self, pb: sds_pb2.SdsMessage, sender_id: str) -> None:
        self._drop(
            pb.message_id,
            sender_id,
            DropReason.BAD_FILTER,
            f"bloom filter of {len(pb.bloom_filter)} bytes, ours is {self._filter_nbytes}: "
            "ignored for acknowledgements",
        )

    # --------------------------------------------------------- dependencies

    def _is_available(self, mid: str) -> bool:
        return mid in self._entries or mid in self._met_elsewhere or mid in self._lost

    def _note_missing(
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
        met = self._met_elsewhere
        lost = self._lost
        absent_ids = set(history_ids).difference(entries)
        if absent_ids and lost:
            again = absent_ids.intersection(lost)
            if again:  # counted against ``by`` (ASKED for a request's ids), as below
                self._want_again(again, history, history_ids, now_ms,
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
        rec = self._recovery_ms(now_ms)
        missing_entries = []
        new_any = False
        unmet = 0
        seen: set[str] = set()
        for i in absent:
            mid = history_ids[i]
            if mid in seen or mid == carrier_id:
                continue
            seen.add(mid)
            h = history[i]
            entry = HistoryEntry(
                mid,
                h.retrieval_hint if h.HasField("retrieval_hint") else None,
                h.sender_id if h.HasField("sender_id") else None,
            )
            buffered = mid in self._incoming
            info = self._missing.get(mid)
            if info is None:
                info = _Missing(entry, rec, set(), sender_id if by is None else by)
                self._add_missing(info)
                if not buffered:
                    new_any = True
                    self._schedule_missing(info, now_ms)
                elif cfg.lost_timeout_ms:
                    # arrived and waiting: no repair, but a lost timer all the same, to
                    # break a cycle of messages that name each other (_run_lost)
                    self._push_lost(rec + cfg.lost_timeout_ms, mid)
            else:
                if waits and sender_id in self._heard:
                    info.named_ms = now_ms  # (Channel._take_repair_requests's retry)
                if info.entry.retrieval_hint is None and entry.retrieval_hint is not None:
                    info.entry = entry
                if info.by == ASKED and by is None:
                    # first heard of in a request, now named by a history: its sender's
                    # (the shared budget of ids asked for gives way first under a flood)
                    self._move_missing(info, sender_id)
            if waits:
                info.waiting.add(carrier_id)
            unmet += 1
            if not buffered:
                missing_entries.append(entry)
            elif self._incoming[mid].sender_id != sender_id:
                self._vouch(mid, now_ms)
        if missing_entries:
            if self._next_sweep_ms is None:
                self._next_sweep_ms = now_ms + cfg.sweep_interval_ms
            self._events.append(
                MessagesMissing(
                    self.channel_id, carrier_id, sender_id, tuple(missing_entries), new_any
                )
            )
        return unmet

    def _vouch(self, mid: str, now_ms: int) -> None:
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
        latest = self._recovery_ms(now_ms) + hold - timeout  # noticed_ms of the new deadline
        incoming, missing, missing_by = self._incoming, self._missing, self._missing_by
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
                    self._push_lost(latest + timeout, dep)
                else:
                    settled = False  # looked at again when named again
            w.vouched = settled

    def _within_budget(self, sender_id: str, carrier_id: str, history_ids: list[str]) -> bool:
        """Whether the unknown ids this message names keep ``sender_id`` within
        ``Config.max_missing_per_sender`` (ids already missing, arrived, lost or
        vouched for cost nothing)."""
        entries = self._entries
        if all(map(entries.__contains__, history_ids)):
            return True
        budget = self.config.max_missing_per_sender - self._missing_by.get(sender_id, 0)
        if len(history_ids) <= budget:
            return True
        new = 0
        for mid in set(history_ids):
            if (
                mid in entries
                or mid in self._missing
                or mid in self._incoming
                or mid in self._met_elsewhere
                or mid in self._lost
                or mid == carrier_id
                or not 0 < len(mid) <= MAX_ID_LENGTH
            ):
                continue
            new += 1
            if new > budget:
                return False
        return True

    def _add_missing(self, info: _Missing) -> None:
        self._missing[info.entry.message_id] = info
        self._count_missing(info)

    def _move_missing(self, info: _Missing, by: str) -> None:
        """Count a missing id against ``by``'s budget instead of its first namer's
        (its request too, if there is one)."""
        self._uncount_missing(info)
        info.by = by
        self._count_missing(info)
        mid = info.entry.message_id
        old = self._out_by.get(mid)
        if old is not None and old != by:
            self._unfile_request(mid)
            self._file_request(mid, by)

    def _pop_missing(self, mid: str) -> _Missing | None:
        info = self._missing.pop(mid, None)
        if info is not None:
            self._uncount_missing(info)
        return info

    def _count_missing(self, info: _Missing) -> None:
        """Count ``info`` against its namer's budget (``_missing_by``, ``_missing_of``)."""
        by = self._missing_by
        by[info.by] = by.get(info.by, 0) + 1
        self._missing_of.setdefault(info.by, OrderedDict())[info.entry.message_id] = None

    def _uncount_missing(self, info: _Missing) -> None:
        """Undo :meth:`_count_missing` for ``info`` (its namer as it stands)."""
        by = self._missing_by
        left = by.get(info.by, 1) - 1
        if left > 0:
            by[info.by] = left
        else:
            by.pop(info.by, None)
        of = self._missing_of.get(info.by)
        if of is not None:
            of.pop(info.entry.message_id, None)
            if not of:
                del self._missing_of[info.by]

    def _want_again(
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
        wanted = self._lost_wanted
        for i, mid in enumerate(history_ids):
            if mid not in ids or mid in self._repair_out or self._refusing(mid):
                continue
            if mid in wanted and self._lost_attempts.get(mid, 0) == 0:
                continue  # already asked for at the first spacing
            h = history[i]
            entry = HistoryEntry(
                mid,
                h.retrieval_hint if h.HasField("retrieval_hint") else None,
                h.sender_id if h.HasField("sender_id") else None,
            )
            by = self._lost_by.get(mid, sender_id)
            self._unwant_lost(mid)
            self._want_lost(entry, now_ms, by)

    def _refuse(self, mid: str, sender_id: str, now_ms: int) -> None:
        """Message ``mid``, which others named, arrived and was refused for its sender's
        budget: while that sender still has ids missing we would refuse it again, so it
        is not asked for (a flood's real messages, named by the honest members that took
        them, would otherwise fill the wanted lost ids and push out honest lines, never
        to be asked for again). Declared lost if missing: nothing waits for it."""
        if not (mid in self._missing or mid in self._lost_wanted or mid in self._repair_out):
            return
        refused = self._refused
        refused[mid] = sender_id
        refused.move_to_end(mid)
        while len(refused) > self.config.log_window:
            refused.popitem(last=False)
        self._unrequest(mid)
        self._unwant_lost(mid)
        if mid in self._missing:
            self._declare_lost(mid, now_ms)

    def _refusing(self, mid: str) -> bool:
        """Whether ``mid`` was refused for its sender's budget, still spent (:meth:`_refuse`)."""
        sender = self._refused.get(mid)
        return sender is not None and self._missing_by.get(sender, 0) > 0

    def _want_lost(
        self, entry: HistoryEntry, now_ms: int, by: str, due: int | None = None, attempts: int = 0
    ) -> None:
        """Keep asking for lost ``entry`` (first at its ``T_req``, then with backoff);
        ``by`` first named it."""
        cfg = self.config
        if not cfg.repair_enabled:
            return
        mid = entry.message_id
        wanted = self._lost_wanted
        if mid in wanted:
            return
        if len(wanted) >= wanted.max_size:
            of = self._lost_of
            top = max(of, key=lambda b: self._namer_cost(of, b))
            self._unwant_lost(next(iter(of[top])))
        if due is None:
            lo, hi = self._repair_window(now_ms)
            due = t_req(self.sender_id, mid, now_ms, lo, hi)
        wanted.add(entry, due)
        self._lost_attempts[mid] = attempts
        self._lost_by[mid] = by
        self._lost_of.setdefault(by, OrderedDict())[mid] = None

    def _unwant_lost(self, mid: str) -> None:
        if self._lost_wanted.remove(mid):
            self._lost_attempts.pop(mid, None)
            by = self._lost_by.pop(mid, None)
            if by is not None:
                ids = self._lost_of.get(by)
                if ids is not None:
                    ids.pop(mid, None)
                    if not ids:
                        del self._lost_of[by]

    def _lost_retry_ms(self, mid: str) -> int:
        """Backoff of a lost id's next request: ``repair_t_max_ms`` doubling per
        attempt up to ``lost_retry_max_ms``, spread by the same hash as ``T_req``."""
        cfg = self.config
        attempt = self._lost_attempts.get(mid, 0) + 1
        self._lost_attempts[mid] = attempt
        hi = self._repair_window(self._last_now)[1]
        base = min(hi << min(attempt - 1, 40), cfg.lost_retry_max_ms)
        spread = t_req(self.sender_id, mid, 0, 0, max(1, base // 4))
        return max(1, base + spread)

    def _note_heard(self, sender_id: str, now_ms: int) -> None:
        kept = self._heard_kept
        if not kept:
            return
        heard = self._heard
        heard[sender_id] = now_ms
        heard.move_to_end(sender_id)
        while len(heard) > kept:
            heard.popitem(last=False)

    def active_participants(self, now_ms: int) -> int:
        """Participants heard from in the last three sync intervals, ourselves included
        (every online participant sends at least a sync per interval), counted as far
        as the SDS-R windows need: up to the number that stretches ``repair_t_max_ms``
        to its limit, and only ourselves with fixed windows
        (``repair_window_participants`` None)."""
        horizon = now_ms - 3 * self.config.sync_interval_ms
        heard = self._heard
        while heard:  # oldest first: drop those not heard since the horizon
            oldest = next(iter(heard))
            if heard[oldest] >= horizon:
                break
            del heard[oldest]
        return len(heard) + (0 if self.sender_id in heard else 1)

    def _repair_window(self, now_ms: int) -> tuple[int, int]:
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

    def _recovery_ms(self, now_ms: int) -> int:
        """Recovery time at wall time ``now_ms``: only connected time counts."""
        if self._paused_at is not None:
            return self._paused_at - self._paused_total
        return now_ms - self._paused_total

    def ask_sync(self, wanted: bool = True) -> None:
        """Send our next due sync even if sync suppression would skip it (``False``:
        no longer needed). The timer is not moved. For an application that needs this
        participant's sync heard: a member whose wall clock is off learns the others'
        time from their syncs, and a quiet channel under suppression has one member
        syncing (app/node/clock_guard.py). It goes out even with an empty log (a member whose
        clock is a day behind has accepted nothing yet: its time is what it says)."""
        self._sync_asked = wanted

    def set_connected(self, connected: bool, now_ms: int) -> None:
        """Tell the core whether recovery can run (the transport is connected).

        Lost timeouts count only connected time: while disconnected (and, across
        :meth:`export_state`/:meth:`restore` with ``now_ms``, while the program
        was not running) no dependency is declared lost; the count resumes where
        it stopped. Calling it twice with the same value changes nothing.
        """
        self._last_now = now_ms
        if connected:
            if self._paused_at is not None:
                self._paused_total += max(0, now_ms - self._paused_at)
                self._paused_at = None
                self._ask_lost_again(now_ms)
        elif self._paused_at is None:
            self._paused_at = now_ms

    def _ask_lost_again(self, now_ms: int) -> None:
        """Back online (reconnected, or restarted): ids declared lost and still wanted
        are asked for again at a first request's delay, their backoff started over.
        The requests made while away (or before a restart) may never have left."""
        if not self.config.repair_enabled or not self._lost_wanted:
            return
        lo, hi = self._repair_window(now_ms)
        for e, _, _ in self._lost_wanted.entries():
            mid = e.message_id
            self._lost_wanted.reschedule(mid, t_req(self.sender_id, mid, now_ms, lo, hi))
            self._lost_attempts[mid] = 0

    @property
    def connected(self) -> bool:
        """Whether recovery runs (:meth:`set_connected`); true unless told otherwise."""
        return self._paused_at is None

    def _schedule_missing(self, info: _Missing, now_ms: int) -> None:
        """Start the lost timeout and the SDS-R request of a newly missing id."""
        cfg = self.config
        mid = info.entry.message_id
        info.noticed_ms = rec = self._recovery_ms(now_ms)
        if cfg.lost_timeout_ms:
            self._push_lost(rec + cfg.lost_timeout_ms, mid)
        if cfg.repair_enabled:
            lo, hi = self._repair_window(now_ms)
            out = self._repair_out
            if len(out) >= out.max_size:
                if info.by == ASKED:
                    return  # never at another's expense (_make_room_for)
                if not self._make_room_for(info.by):
                    return  # still missing: the sweep and the lost timeout cover it
            due = t_req(self.sender_id, mid, now_ms, lo, hi)
            if cfg.repair_first_request_capped and hi > cfg.repair_t_max_ms:
                # the stretched window spreads the lacking members' first requests so
                # that one asks early and the others hear it: spread over the members
                # expected to lack the id, not over the whole channel; one that heard
                # neither that request nor a copy asks after a few base windows, not
                # up to 120 s later (Config.repair_first_request_capped)
                due = min(due, now_ms + self._first_request_delay(mid, now_ms, lo, hi))
            self._request(info.entry, due, info.by)

    def _first_request_delay(self, mid: str, now_ms: int, lo: int, hi: int) -> int:
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
        over at least :data:`FIRST_REQUEST_MIN_LACKING` members: a few lacking
        members' requests 0.5 s apart crossed each other and their answers. And at
        the latest four base windows plus one draw of the base window.

        Where lines are carried (Config.carry_copies) a member that missed a line and
        its ``k`` carried copies is one of ``participants x loss ** (k + 1)`` (below
        :data:`CARRY_WHEN_LACKING`): alone, most likely; it draws over the base window, as a
        follow-up (drawn over ``T_min`` plus 50 s at 1,000 members and 10% loss, such
        lone members asked 7 s after the notice at the median, 25 s at p90, and
        the later lines they held back set the delivery p99)."""
        cfg = self.config
        base = cfg.repair_t_max_ms
        delay = FIRST_REQUEST_CAP_WINDOWS * base + t_req(self.sender_id, mid, 0, lo, base)
        lacking = self._participants(now_ms) * self._loss_mean
        if lacking:
            k = self._carry_k(now_ms)
            spread = lacking * self._loss_mean ** k if k else max(
                lacking, FIRST_REQUEST_MIN_LACKING)
            span = lo + int(spread * cfg.repair_t_min_ms * FIRST_REQUEST_SPACING)
            span = min(hi, max(base, span))
            delay = min(delay, t_req(self.sender_id, mid, 0, lo, span))
        return delay

    def _request(self, entry: HistoryEntry, due: int, by: str) -> None:
        """Ask for ``entry`` at ``due`` (SDS-R); ``by`` named it (there is room)."""
        if self._repair_out.add(entry, due):
            self._file_request(entry.message_id, by)

    def _unrequest(self, mid: str) -> bool:
        """Cancel the SDS-R request for ``mid``; whether there was one."""
        if not self._repair_out.remove(mid):
            return False
        self._unfile_request(mid)
        return True

    def _file_request(self, mid: str, by: str) -> None:
        """Count the request for ``mid`` as ``by``'s (``_out_by``, ``_out_of``)."""
        self._out_by[mid] = by
        self._out_of.setdefault(by, OrderedDict())[mid] = None

    def _unfile_request(self, mid: str) -> None:
        """Undo :meth:`_file_request` for ``mid``."""
        by = self._out_by.pop(mid, None)
        if by is not None:
            ids = self._out_of[by]
            del ids[mid]
            if not ids:
                del self._out_of[by]

    def _make_room_for(self, by: str) -> bool:
        """The repair requests are at their cap: the namer with the most requests (if
        more than ``by``) gives up its oldest (the id stays missing; the sweep and the
        lost timeout still cover it); whether room was made. Requests for the ids a
        member with many identities invents then cannot crowd out an honest member's
        (per-sender budgets, issue 26): each namer keeps its share of the cap. (Picking
        the namer with the most ids *missing* left the cap full whenever that one held
        no request, and the new request then pushed out the latest-due one, an honest
        line's as often as not.)"""
        of = self._out_of
        if by != ASKED and of.get(ASKED):
            # ids known only from others' requests (Config.repair_note_asked) give way
            # first: those requesters ask for them already
            return self._unrequest(next(iter(of[ASKED])))
        top = max(of, key=lambda b: self._namer_cost(of, b), default=None)
        if top is None or top == by or self._namer_cost(of, top) <= self._namer_cost(of, by):
            return False
        return self._unrequest(next(iter(of[top])))

    def _namer_cost(self, held: dict[str, OrderedDict[str, None]], by: str) -> int:
        """What namer ``by`` costs us at a cap: its entries in ``held`` (requests, or
        wanted lost ids) plus the ids it named that are still missing."""
        ids = held.get(by)
        return (len(ids) if ids is not None else 0) + self._missing_by.get(by, 0)

    def _push_lost(self, due: int, mid: str) -> None:
        """Push a lost deadline ``due`` in recovery time."""
        heapq.heappush(self._lost_heap, (due, mid))
        if len(self._lost_heap) > 4 * len(self._missing) + 64:  # stale entries
            timeout = self.config.lost_timeout_ms
            self._lost_heap = [(i.noticed_ms + timeout, m) for m, i in self._missing.items()]
            heapq.heapify(self._lost_heap)

    def _buffer_incoming(self, waiting: _Waiting, now_ms: int) -> None:
        cap = self.config.incoming_buffer_cap
        while len(self._incoming) >= cap:
            old_id, old = self._incoming.popitem(last=False)
            for mid in old.history_ids:
                info = self._missing.get(mid)
                if info is not None:
                    info.waiting.discard(old_id)
            self._drop(old_id, old.sender_id, DropReason.INCOMING_BUFFER_FULL,
                       retrieval_hint=old.retrieval_hint)
            evicted = self._missing.get(old_id)
            if evicted is not None:
                # Others wait for it: it is missing again, from now on.
                self._schedule_missing(evicted, now_ms)
        self._incoming[waiting.message_id] = waiting

    def mark_dependencies_met(self, ids: Iterable[str], now_ms: int) -> None:
        """Tell the core these ids are in the application's log (storage beyond the window).

        Messages waiting only for them are delivered now. Call it in answer to
        :class:`~sds.events.MessagesMissing` for the ids your storage holds.
        """
        cap = self.config.log_window
        for mid in ids:
            if mid in self._entries:
                continue
            self._met_elsewhere[mid] = None
            self._met_elsewhere.move_to_end(mid)
            while len(self._met_elsewhere) > cap:
                self._met_elsewhere.popitem(last=False)
            self._unrequest(mid)
            self._unwant_lost(mid)
            self._resolve(mid, lost=False)

    def _resolve(self, mid: str, lost: bool) -> None:
        """``mid`` became available (or was declared lost): release its waiters."""
        info = self._pop_missing(mid)
        if info is None:
            return
        if lost:
            self._events.append(
                MessageLost(self.channel_id, mid, tuple(sorted(info.waiting)))
            )
        ready = []
        for wid in info.waiting:
            w = self._incoming.get(wid)
            if w is None:
                continue
            w.unmet -= 1
            if lost:
                w.lost_before += 1
            if w.unmet <= 0:
                ready.append(w)
        # Deliver in log order so that causally unrelated releases are stable.
        ready.sort(key=lambda w: (w.lamport, w.message_id))
        for w in ready:
            if self._incoming.pop(w.message_id, None) is not None:
                self._deliver(w)

    def _deliver(self, w: _Waiting) -> None:
        """Spec "Deliver Message" (and whatever was waiting for it, iteratively)."""
        stack = [w]
        while stack:
            w = stack.pop()
            if w.message_id in self._entries:
                continue
            if w.lamport > self.lamport:
                self.lamport = w.lamport
            position = self._insert_log(w.message_id, w.lamport, w.sender_id, w.retrieval_hint)
            if w.lost_before:
                self._withhold(w.message_id)
            was_lost = w.message_id in self._lost
            if was_lost:
                del self._lost[w.message_id]
                self._unwant_lost(w.message_id)
            self._met_elsewhere.pop(w.message_id, None)
            self._events.append(
                MessageDelivered(
                    self.channel_id,
                    w.message_id,
                    w.sender_id,
                    w.lamport,
                    w.content,
                    position,
                    w.history_ids,
                    w.retrieval_hint,
                    w.data,
                    w.lost_before,
                    was_lost,
                )
            )
            info = self._pop_missing(w.message_id)
            if info is None:
                continue
            if (
                info.by != w.sender_id
                and self.config.sync_suppression
                and w.message_id in self._unnamed
                and info.entry.message_id not in self._incoming
            ):
                # We knew of it because another participant named it: the channel has
                # heard it named and its author has that acknowledgement. Naming it
                # again cost one sync per late receiver (sdschat sim, 1,000
                # participants: ~100 per repaired message, before suppression).
                del self._unnamed[w.message_id]
            ready = []
            for wid in info.waiting:
                nxt = self._incoming.get(wid)
                if nxt is None:
                    continue
                nxt.unmet -= 1
                if nxt.unmet <= 0:
                    ready.append(nxt)
            ready.sort(key=lambda x: (x.lamport, x.message_id), reverse=True)
            for nxt in ready:
                if self._incoming.pop(nxt.message_id, None) is not None:
                    stack.append(nxt)

    def _withhold(self, message_id: str) -> None:
        """Logged ``message_id`` was delivered with dependencies declared lost: our
        content messages do not name it, our syncs do. A member that lacks it and
        reads it in a line waits for it, and it waits for what nobody could supply:
        the messages of identities naming invented ids (issue 26), taken once those
        ids were declared lost, held up honest lines for rounds of repair. A sync
        makes nobody wait (a member that lacks what it names asks for it, and so
        the channel still converges), and the sender still gets its acknowledgement
        from our bloom filter."""
        le = self._entries.get(message_id)
        if le is not None and not le.withheld:
            le.withheld = True
            self._withheld += 1

    def _insert_log(
        self, message_id: str, lamport: int, sender_id: str, hint: bytes | None
    ) -> int:
        key = (lamport, message_id)
        self._log.add(key)
        self._entries[message_id] = _LogEntry(lamport, sender_id, hint, logged_ms=self._last_now)
        if self._last_now < self._earliest_logged_ms:
            self._earliest_logged_ms = self._last_now
        if sender_id != self.sender_id and self.config.causal_history_floor is not None:
            unnamed = self._unnamed
            unnamed[message_id] = None
            if len(unnamed) > self.config.log_window:
                unnamed.popitem(last=False)
        position: int = self._evicted + self._log.bisect_left(key)
        while len(self._log) > self.config.log_window:
            _, old = self._log.pop(0)
            if self._entries.pop(old).withheld:
                self._withheld -= 1
            self._evicted += 1
        return position

    def _cache_for_repair(self, message_id: str, data: bytes) -> None:
        cache = self._repair_cache
        cache[message_id] = data
        while len(cache) > self.config.repair_cache_size:
            cache.popitem(last=False)

    # ------------------------------------------------------------------- SDS-R

    def _on_repair_requests(self, pb: sds_pb2.SdsMessage, requester: str, now_ms: int) -> None:
        cfg = self.config
        asked = []
        scheduled = []
        budget = self._response_budget(requester, now_ms)
        lo, hi = self._repair_window(now_ms)
        # Config.repair_follow_up_base_window: the answer to this request reaches all
        # but the lossy few of those who lack the id; they ask again within the base
        # window, not the stretched one (up to 120 s a round at 1,000 participants:
        # the stragglers of sdschat sim).
        follow = (cfg.repair_t_min_ms, cfg.repair_t_max_ms) if (
            cfg.repair_follow_up_base_window) else (lo, hi)
        quiet_ms = cfg.repair_t_min_ms // 2
        unheld: list[sds_pb2.HistoryEntry] = []
        for req in pb.repair_request:
            mid = req.message_id
            if not mid:
                continue
            asked.append(mid)
            # Someone else asked for it: ours would be redundant now, so it waits
            # one more retry period (js-waku drops it, and the gap stays open if
            # that other request or its answer is lost).
            later = now_ms + t_req(self.sender_id, mid, 0, *follow)
            if cfg.repair_follow_up_base_window:
                self._repair_out.reschedule(mid, later)  # sooner, if ours was far off
            else:
                self._repair_out.postpone(mid, later)
            self._lost_wanted.postpone(mid, later)
            le = self._entries.get(mid)
            if le is None and mid not in self._repair_cache:
                unheld.append(req)
                self._note_sdsr_asked(mid)
                continue
            # a request names the id too: its answer, a copy every member hears, needs
            # no naming again (note_copy), nor does the requester's filter (it knows)
            self._note_renamed(mid)
            if cfg.repair_answer_expiry and mid in self._repair_in:
                self._note_answer_asked(mid, requester, now_ms)  # still asked for
            if budget <= 0:
                continue  # this requester had its share of rebroadcasts for now
            seen = self._copy_seen.get(mid)
            if seen is not None and now_ms - seen < quiet_ms:
                # A copy of m was on the wire moments ago (an answer to someone else's
                # request, or a resend): this request crossed it, and its sender has it
                # now unless that copy was lost to it, in which case it asks again no
                # sooner than repair_t_min_ms later, outside this window. Answering
                # anyway made every request of a burst cost one more broadcast to the
                # whole channel (sdschat sim, 1,000 participants, 5% loss: 8.5
                # rebroadcasts per repaired message, up to 75).
                continue
            original = req.sender_id if req.HasField("sender_id") else (le.sender_id if le else "")
            if not original:
                continue
            if not in_response_group(self.sender_id, original, mid, cfg.repair_response_groups):
                continue
            due = t_resp(self.sender_id, original, mid, now_ms, hi)
            if self._repair_in.add(HistoryEntry(mid, None, original), due):
                self._answer_copies.pop(mid, None)  # a new answer: its first copy
                if cfg.repair_answer_expiry:
                    self._note_answer_asked(mid, requester, now_ms)
                scheduled.append(mid)
                budget -= 1
        if unheld and cfg.repair_note_asked:
            self._note_asked(pb.message_id, requester, unheld, now_ms, follow)
        if scheduled:
            start, used = self._responses_by.get(requester, (now_ms, 0))
            self._responses_by[requester] = (start, used + len(scheduled))
        if asked:
            self._events.append(
                RepairRequestReceived(self.channel_id, requester, tuple(asked), tuple(scheduled))
            )

    def _note_asked(
        self,
        carrier_id: str,
        requester: str,
        unheld: list[sds_pb2.HistoryEntry],
        now_ms: int,
        follow: tuple[int, int],
    ) -> None:
        """Config.repair_note_asked: ids someone asked for that we do not hold are
        missing for us too (the request names them, as a causal history would): noted,
        reported (``MessagesMissing``) and asked for in turn if no answer comes. Within
        one ``max_missing_per_sender`` budget shared by every requester (:data:`ASKED`):
        honest members relay the ids that others' histories invent (issue 26's
        identities naming ids nobody has), and counted against the requesters' own
        budgets those ids crowded out the honest ids they name (a test of 30 such
        identities: lines lost)."""
        ids = [r.message_id for r in unheld]
        if not self._within_budget(ASKED, carrier_id, ids):
            return
        if self._note_missing(carrier_id, requester, unheld, ids, now_ms, False, ASKED):
            self._cap_missing(now_ms)
            for mid in ids:  # asked for already: ours is a follow-up
                self._repair_out.reschedule(mid, now_ms + t_req(self.sender_id, mid, 0, *follow))

    def _note_answer_asked(self, message_id: str, requester: str, now_ms: int) -> None:
        """A request for ``message_id`` (which we hold) was heard now: the silence
        after it times our pending answer (Config.repair_answer_expiry)."""
        asked = self._answer_asked
        before = asked.pop(message_id, None)
        gap = -1
        if before is not None and before[2] == requester:
            gap = now_ms - before[0]
        asked[message_id] = (now_ms, gap, requester)
        if len(asked) > 2 * self.config.repair_buffer_size:
            asked.popitem(last=False)

    def _answer_expired(self, message_id: str, now_ms: int) -> bool:
        """Config.repair_answer_expiry: whether our answer for ``message_id``, due now,
        follows a silence in which a requester still lacking it would have asked
        again (only where the response window is stretched: its spread exceeds the
        base window, so late holders answer long after the first answer)."""
        cfg = self.config
        asked = self._answer_asked.pop(message_id, None)
        if not cfg.repair_answer_expiry or asked is None:
            return False
        last, gap, _ = asked
        silence = max(cfg.repair_t_min_ms + cfg.repair_t_max_ms, 2 * gap)
        if now_ms - last <= silence:
            return False
        _, hi = self._repair_window(now_ms)
        return hi > cfg.repair_t_max_ms

    def _note_copy_on_wire(self, message_id: str, now_ms: int) -> None:
        """A copy of content message ``message_id`` we hold was just broadcast (one
        reached us again, or we rebroadcast it): requests for it are not answered for
        ``repair_t_min_ms / 2``."""
        seen = self._copy_seen
        seen[message_id] = now_ms
        seen.move_to_end(message_id)
        # only the quiet period counts: older entries go (oldest first; at 10,000
        # members ~200 lines held by every member, each with an entry, were ~200 MB)
        quiet_ms = self.config.repair_t_min_ms // 2
        while seen:
            oldest = next(iter(seen))
            if now_ms - seen[oldest] < quiet_ms and len(seen) <= self.config.repair_buffer_size:
                break
            del seen[oldest]

    def _response_budget(self, requester: str, now_ms: int) -> int:
        """Rebroadcasts ``requester`` may still cause in its current window of
        ``repair_response_window_ms`` (``Config.repair_responses_per_sender``)."""
        cfg = self.config
        window = cfg.repair_response_window_ms
        by = self._responses_by
        got = by.get(requester)
        if got is None or now_ms - got[0] >= window:
            if len(by) >= 1_024:  # forget finished windows (bounded by requesters)
                for r in [r for r, (t0, _) in by.items() if now_ms - t0 >= window]:
                    del by[r]
                if len(by) >= 1_024:
                    by.pop(next(iter(by)))
            by[requester] = got = (now_ms, 0)
        return cfg.repair_responses_per_sender - got[1]

    def _take_repair_requests(self, now_ms: int, limit: int | None = None) -> list[HistoryEntry]:
        """Up to ``limit`` (a content message's ``repair_requests_per_message``) due
        SDS-R requests: missing ids first, then lost ids still wanted (those also
        reminded to the application, for its store)."""
        if not self.config.repair_enabled:
            return []
        cfg = self.config
        if limit is None:
            limit = cfg.repair_requests_per_message

        lo, hi = self._repair_window(now_ms)
        rec = self._recovery_ms(now_ms)
        # our request's answer reaches us unless lost: asked again within the base
        # window (Config.repair_follow_up_base_window)
        slo, shi = (cfg.repair_t_min_ms, cfg.repair_t_max_ms) if (
            cfg.repair_follow_up_base_window) else (lo, hi)

        def retry(mid: str) -> int:
            # The same spread as the first request, and at least half the time the
            # id has been missing (so an id nobody holds is asked for ever more
            # rarely: 1-5 s, then ~every 1.5x the age), capped at four times the
            # current T_max (20 s at the base window): a streak of answers lost on a
            # lossy link must not leave a causal chain blocked for minutes.
            spread = t_req(self.sender_id, mid, 0, slo, shi)
            info = self._missing.get(mid)
            if info is not None and info.named_ms is not None and now_ms - info.named_ms <= shi:
                # a member heard from named it in a line just now: it holds it, so
                # the id is not one nobody has, and we ask again as at first (at 30%
                # loss a line lost six times in a row held 19 later ones ~50 s while
                # our requests backed off)
                return spread
            age = 0 if info is None else max(0, rec - info.noticed_ms)
            return max(spread, min(age // 2, 4 * hi, cfg.repair_t_max_limit_ms))

        out = self._repair_out.take_due(now_ms, limit, retry)
        for e in out:
            self._note_sdsr_asked(e.message_id)
        if len(out) < limit and self._lost_wanted:
            again = self._lost_wanted.take_due(now_ms, limit - len(out), self._lost_retry_ms)
            if again:
                out.extend(again)
                self._events.append(
                    MessagesMissing(self.channel_id, "", "", tuple(again), False)
                )
        return out

    def _repair_due(self, now_ms: int) -> bool:
        return self.config.repair_enabled and (
            self._repair_out.has_due(now_ms) or self._lost_wanted.has_due(now_ms)
        )

    def supply_repair_data(self, message_id: str, data: bytes, now_ms: int) -> None:
        """Answer a :class:`~sds.events.RepairDataNeeded`: rebroadcast the stored bytes."""
        original = ""
        le = self._entries.get(message_id)
        if le is not None:
            original = le.sender_id
        self._datagrams.append(Datagram(bytes(data), "repair", message_id))
        self._events.append(RepairSent(self.channel_id, message_id, original))

    # -------------------------------------------------------------------- timers

    def _sync_delay(self, factor: float, now_ms: int) -> int:
        return int(self._rng.random() * self.sync_interval(now_ms) * factor)

    def sync_interval(self, now_ms: int) -> int:
        """The sync interval now: ``sync_interval_ms``, stretched by the participants
        heard beyond ``Config.sync_interval_participants`` (up to
        ``sync_interval_limit_ms``). The participants are those heard in the last
        ``sync_interval_limit_ms`` (ourselves included; a sampled count beyond 64,
        ``sds.census``), but at least what the configured response groups stand for
        (as for the SDS-R windows, :meth:`_repair_window`)."""
        cfg = self.config
        base = cfg.sync_interval_ms
        per = cfg.sync_interval_participants
        limit = cfg.sync_interval_limit_ms
        if per is None or base >= limit:
            return base
        n = self._participants(now_ms)
        if n <= per:
            return base
        return min(limit, base * n // per)

    def _participants(self, now_ms: int) -> int:
        """Participants for the sync interval (:meth:`sync_interval`); worked out once
        per ``now_ms`` (a receive asks up to three times)."""
        cached = self._participants_at
        if cached[0] == now_ms:
            return cached[1]
        cfg = self.config
        n = max(
            self._census.count(now_ms - cfg.sync_interval_limit_ms) + 1,
            PARTICIPANTS_PER_RESPONSE_GROUP * (cfg.repair_response_groups - 1),
        )
        self._participants_at = (now_ms, n)
        return n

    def get_timer(self) -> int | None:
        """The earliest deadline at which :meth:`handle_timer` has work, or ``None``."""
        # the minimum kept as it goes (no list: it runs after every delivery)
        best: int | None = None
        t: int | None
        heap = self._resend_heap
        if heap:
            # stale heads (acknowledged, or resent on a new deadline) are no work, as
            # for the lost heap below: a restored channel has none
            outgoing = self._outgoing
            while heap:
                due, mid = heap[0]
                out = outgoing.get(mid)
                if out is not None and out.next_resend_ms == due:
                    best = due
                    break
                heapq.heappop(heap)
        heap = self._lost_heap
        if heap and self._paused_at is None:
            # stale heads (resolved, or moved to a new deadline) are no work: a restored
            # channel rebuilds the heap without them and must wake at the same times
            while heap and not self._lost_due_live(*heap[0]):
                heapq.heappop(heap)
            if heap:  # recovery time -> wall time (no lost timeout runs while paused)
                t = heap[0][0] + self._paused_total
                if best is None or t < best:
                    best = t
        t = self._next_sweep_ms
        if t is not None and (best is None or t < best):
            best = t
        if self.config.repair_enabled:
            t = self._repair_in.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
            # due requests go out in syncs at most every repair_sync_interval_ms
            t = self._repair_out.next_deadline()
            if t is not None:
                t = max(t, self._next_repair_sync_ms)
                if best is None or t < best:
                    best = t
            t = self._lost_wanted.next_deadline()
            if t is not None:
                t = max(t, self._next_repair_sync_ms)
                if best is None or t < best:
                    best = t
        if (self._log or self._sync_asked) and (best is None or self._next_sync_ms < best):
            best = self._next_sync_ms
        return best

    def handle_timer(self, now_ms: int) -> None:
        """Run everything due by ``now_ms``: resends, repair responses, lost
        timeouts, the incoming sweep, repair requests and the periodic sync.

        Then drain ``datagrams_to_send()`` and ``events()`` and re-arm the timer.
        """
        self._last_now = now_ms
        self._run_resends(now_ms)
        self._run_repair_responses(now_ms)
        self._run_lost(now_ms)
        if self._next_sweep_ms is not None and self._next_sweep_ms <= now_ms:
            self._run_sweep(now_ms)
        repair_due = now_ms >= self._next_repair_sync_ms and self._repair_due(now_ms)
        if repair_due or ((self._log or self._sync_asked) and self._next_sync_ms <= now_ms):
            self._send_sync(now_ms)

    def _add_outgoing(self, out: _Outgoing, now_ms: int) -> None:
        while len(self._outgoing) >= self.config.outgoing_buffer_cap:
            old_id = next(iter(self._outgoing))
            old = self._outgoing.pop(old_id)
            self._remember_failed(old_id)
            self._events.append(
                MessageSendFailed(self.channel_id, old_id, "buffer_full", old.attempts)
            )
        self._outgoing[out.message_id] = out
        self._push_resend(out)

    def _push_resend(self, out: _Outgoing) -> None:
        """Schedule ``out``'s next resend; stale heap entries are compacted here too, so
        the heap stays bounded even when no timer runs between many sends."""
        heapq.heappush(self._resend_heap, (out.next_resend_ms, out.message_id))
        if len(self._resend_heap) > 4 * len(self._outgoing) + 64:
            self._resend_heap = [(o.next_resend_ms, m) for m, o in self._outgoing.items()]
            heapq.heapify(self._resend_heap)

    def _run_resends(self, now_ms: int) -> None:
        """Spec "Periodic Outgoing Buffer Sweep"."""
        heap = self._resend_heap
        cfg = self.config
        while heap and heap[0][0] <= now_ms:
            due, mid = heapq.heappop(heap)
            out = self._outgoing.get(mid)
            if out is None or out.next_resend_ms != due:
                continue
            if out.attempts >= cfg.max_resend_attempts:
                del self._outgoing[mid]
                self._remember_failed(mid)
                self._events.append(
                    MessageSendFailed(self.channel_id, mid, "resends_exhausted", out.attempts)
                )
                continue
            out.attempts += 1
            possibly = out.state == OwnState.POSSIBLY_ACKNOWLEDGED
            period = (
                cfg.resend_possibly_acknowledged_ms if possibly else cfg.resend_unacknowledged_ms
            )
            out.next_resend_ms = now_ms + period
            heapq.heappush(heap, (out.next_resend_ms, mid))
            self._datagrams.append(Datagram(out.data, "resend", mid))
            self._events.append(MessageResent(self.channel_id, mid, out.attempts, possibly))
        if len(heap) > 4 * len(self._outgoing) + 64:
            self._resend_heap = [(o.next_resend_ms, m) for m, o in self._outgoing.items()]
            heapq.heapify(self._resend_heap)

    def _remember_failed(self, mid: str) -> None:
        failed = self._failed
        failed[mid] = None
        while len(failed) > FAILED_KEPT:
            failed.popitem(last=False)

    def _run_repair_responses(self, now_ms: int) -> None:
        if not self.config.repair_enabled:
            return
        for entry in self._repair_in.take_due(now_ms):
            mid = entry.message_id
            if self._answer_expired(mid, now_ms):
                # nobody asked again: a copy reached the requesters, and we missed it
                self._answers_expired += 1
                continue
            # (noted before the bytes are at hand: the same whether they come from
            # the cache or from storage through RepairDataNeeded)
            self._note_copy_on_wire(mid, now_ms)
            data = self._repair_cache.get(mid)
            if data is None:
                self._events.append(RepairDataNeeded(self.channel_id, mid))
                continue
            self._datagrams.append(Datagram(data, "repair", mid))
            self._events.append(RepairSent(self.channel_id, mid, entry.sender_id or ""))
            self._count_wire_copy(mid)
            self._copy_again(entry, now_ms)

    def _copy_wanted(self, mid: str, copies: int, on_wire: int, now_ms: int) -> bool:
        """Whether one more copy of ``mid`` (``copies`` of ours sent, at least
        ``on_wire`` on the wire) is due: fewer than ``repair_answer_copies``, at scale,
        and someone more likely than not still lacks it."""
        cfg = self.config
        if copies >= cfg.repair_answer_copies or not self._loss_mean:
            return False
        if not self._at_scale(now_ms):
            return False
        on_wire = max(on_wire, self._wire_copies.get(mid, 1))
        return self._participants(now_ms) * self._loss_mean ** on_wire >= COPY_WHEN_LACKING

    def _note_sdsr_asked(self, message_id: str) -> None:
        asked = self._sdsr_asked
        asked[message_id] = 1
        asked.move_to_end(message_id)
        if len(asked) > self.config.repair_buffer_size:
            asked.popitem(last=False)

    def _count_wire_copy(self, message_id: str) -> None:
        """One more copy of ``message_id`` (which we hold) was on the wire."""
        copies = self._wire_copies
        copies[message_id] = copies.pop(message_id, 1) + 1
        if len(copies) > self.config.repair_buffer_size:
            copies.popitem(last=False)

    def _copy_again(self, entry: HistoryEntry, now_ms: int) -> None:
        """Config.repair_answer_copies: after a copy of our answer, another goes out
        ``repair_t_min_ms / 2`` later (cancelled by any copy seen meanwhile) while
        someone more likely than not still lacks the line."""
        cfg = self.config
        mid = entry.message_id
        copies = self._answer_copies.pop(mid, 0) + 1
        if not self._copy_wanted(mid, copies, copies + 1, now_ms):
            return
        if self._repair_in.add(entry, now_ms + max(1, cfg.repair_t_min_ms // 2)):
            copied = self._answer_copies
            copied[mid] = copies
            if len(copied) > cfg.repair_buffer_size:
                copied.popitem(last=False)

    def _run_lost(self, now_ms: int) -> None:
        """Spec "Periodic Incoming Buffer Sweep": dependencies missing too long are lost."""
        if self._paused_at is not None:
            return  # recovery cannot run: the lost timeout does not count
        heap = self._lost_heap
        timeout = self.config.lost_timeout_ms
        rec = self._recovery_ms(now_ms)
        while heap and heap[0][0] <= rec:
            due, mid = heapq.heappop(heap)
            if not self._lost_due_live(due, mid):
                continue
            info = self._missing[mid]
            if mid in self._incoming and not self._in_cycle(mid):
                # it arrived and waits for something still missing, whose own timer
                # decides; look again one lost timeout later (a cycle may form behind it)
                info.noticed_ms = rec
                heapq.heappush(heap, (rec + timeout, mid))
                continue
            self._declare_lost(mid, now_ms)
        if len(heap) > 4 * len(self._missing) + 64:
            self._lost_heap = [
                (i.noticed_ms + timeout, m) for m, i in self._missing.items()
            ]
            heapq.heapify(self._lost_heap)

    def _lost_due_live(self, due: int, mid: str) -> bool:
        """Whether lost deadline ``due`` of ``mid`` still stands (the id is missing and
        this is its deadline, not one it was moved from)."""
        info = self._missing.get(mid)
        return info is not None and info.noticed_ms + self.config.lost_timeout_ms == due

    def _in_cycle(self, mid: str) -> bool:
        """Whether buffered ``mid`` waits, through buffered messages only, for nothing
        that is missing: messages naming each other (only a faulty or hostile peer
        writes that), which no arrival can ever release. Past the lost timeout such an
        id is declared lost for ordering: its waiters are delivered, then it follows
        them (reported lost, then delivered: shown as recovered)."""
        incoming = self._incoming
        seen = {mid}
        stack = [mid]
        while stack:  # bounded by the incoming buffer
            w = incoming.get(stack.pop())
            if w is None:
                continue
            for dep in w.history_ids:
                if dep in seen or self._is_available(dep):
                    continue
                if dep not in incoming:
                    return False  # something truly missing: its own timer decides
                seen.add(dep)
                stack.append(dep)
        return True

    def _declare_lost(self, mid: str, now_ms: int) -> None:
        self._lost[mid] = None
        while len(self._lost) > self.config.log_window:
            self._lost.popitem(last=False)
        self._unrequest(mid)
        info = self._missing.get(mid)
        if info is not None and mid not in self._incoming and not self._refusing(mid):
            self._want_lost(info.entry, now_ms, info.by)  # still wanted: asked again, backoff
        self._resolve(mid, lost=True)

    def _cap_missing(self, now_ms: int) -> None:
        """``Config.max_missing``: beyond it the longest-missing ids are declared lost.

        Ids that arrived and only wait themselves are skipped (they are not lost).
        Call only once the message being received is buffered or delivered.
        """
        excess = len(self._missing) - self.config.max_missing
        if excess <= 0:
            return
        # from the senders that named the most, oldest first, one at a time from
        # whoever names the most at that point (levelled: an honest member's few
        # missing ids are not declared lost while anyone names more). A single pass
        # that took one id from each of 100 identities naming ~50 each went on to
        # the honest member naming 14 (tests/sds/test_sender_budgets.py).
        # Among equals a member heard from (its messages name what we hold) gives way
        # last: with 100 identities at the level of an honest member's 10 ids, a tie
        # took hers.
        incoming = self._incoming
        heard = self._heard
        heap = [(-c, b in heard, b) for b, c in self._missing_by.items()]
        heapq.heapify(heap)
        pending: dict[str, Iterator[str]] = {}
        victims: list[str] = []
        while heap and len(victims) < excess:
            neg, live, by = heapq.heappop(heap)
            ids = pending.get(by)
            if ids is None:
                ids = pending[by] = iter(self._missing_of.get(by, ()))
            for mid in ids:
                if mid not in incoming:  # one that arrived and waits is not lost
                    victims.append(mid)
                    if neg < -1:
                        heapq.heappush(heap, (neg + 1, live, by))
                    break
        for mid in victims:
            self._declare_lost(mid, now_ms)

    def _run_sweep(self, now_ms: int) -> None:
        """Remind the application of what is still missing (to fetch it from storage/store)."""
        if not self._missing:
            self._next_sweep_ms = None
            return
        self._next_sweep_ms = now_ms + self.config.sweep_interval_ms
        missing = tuple(i.entry for m, i in self._missing.items() if m not in self._incoming)
        if missing:  # only arrived-and-waiting ids: nothing to fetch, nothing to say
            self._events.append(MessagesMissing(self.channel_id, "", "", missing, False))

    def _send_sync(self, now_ms: int) -> None:
        """Spec "Periodic Sync Message" (also the carrier of due SDS-R requests)."""
        self._next_sync_ms = now_ms + self._sync_delay(1.0, now_ms)
        requests = self._take_repair_requests(now_ms, self.config.repair_requests_per_sync)
        if requests:  # the channel's repair budget: one such batch per interval
            self._next_repair_sync_ms = now_ms + self.config.repair_sync_interval_ms
        if not self._log and not requests and not self._sync_asked:
            return  # nothing to say (js-waku aborts such a sync too); asked for: its time
        if (
            not requests
            and self._heard_since_sent
            and not self._sync_asked
            and self.config.sync_suppression
            and self.config.causal_history_floor is not None
            and not self._rename
            and not self._to_name(now_ms)
        ):
            # Suppressed: others spoke since our last message and named everything we
            # would name beyond the newest entries they name too.
            self._syncs_suppressed += 1
            return
        if not requests and not self._sync_asked and self._naming_waits(now_ms):
            # Only ids to name, and content flows: the next content message names the
            # newest ones for the channel (Config.sync_defer_naming). Drawn again as on
            # a content message, so that once the channel quiets the first of the
            # members' timers names what is left and suppresses the others.
            self._syncs_deferred += 1
            self._next_sync_ms = now_ms + self._sync_delay(0.5, now_ms)
            return
        self._heard_since_sent = False
        self._sync_asked = False
        lamport = self._tick(now_ms)
        message_id = f"{self._rng.getrandbits(256):064x}"
        # At scale a sync names only what is still to name (and the newest entry):
        # the newest entries are named by every content message already, and syncs
        # are few (sync suppression).
        per = self.config.sync_interval_participants
        floor = None
        if per is not None and self._participants(now_ms) > per:
            floor = SYNC_FLOOR_AT_SCALE
        _, data = self._build(message_id, lamport, None, requests, floor)
        self._datagrams.append(Datagram(data, "sync", message_id))
        req_ids = tuple(e.message_id for e in requests)
        self._events.append(SyncSent(self.channel_id, message_id, lamport, req_ids))
        if requests:
            self._events.append(RepairRequested(self.channel_id, req_ids, message_id))
        if self._missing:
            # Repairs pending: sync sooner so requests and answers flow.
            self._next_sync_ms = now_ms + self._sync_delay(0.5, now_ms)

    def _sync_deadline_for_first_entry(self, now_ms: int) -> None:
        """Our log is about to get its first entry: a sync deadline that passed while
        there was nothing to sync (:meth:`get_timer` leaves it out then) is drawn again,
        as a new channel's is. Kept, it fired at once: every member that joined more
        than a sync interval before the first line synced on hearing it
        (bench/real_vs_sim.py, 40 real nodes: 21 syncs in the second after the first
        line, against 3 in the sim, whose members join as the lines start)."""
        if not self._log and not self._sync_asked and self._next_sync_ms < now_ms:
            self._next_sync_ms = now_ms + self._sync_delay(1.0, now_ms)

    def _naming_waits(self, now_ms: int) -> bool:
        """Config.sync_defer_naming: a sync that would only name ids waits (at scale,
        while we heard new content in the last half base interval; with ids nobody
        named, only in the last ``Config.sync_tail_quiet_ms``)."""
        cfg = self.config
        heard = self._content_heard_ms
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
        if tail is not None and quiet >= tail and self._to_name(now_ms):
            # the last line of a burst: no later line will name it (its author waits
            # for the acknowledgement), and ours names it for the channel
            return False
        return self._at_scale(now_ms)

    def _at_scale(self, now_ms: int) -> bool:
        """More participants heard than ``Config.sync_interval_participants`` (never
        with a fixed interval)."""
        per = self.config.sync_interval_participants
        return per is not None and self._participants(now_ms) > per

    # ------------------------------------------------------------- persistence

    def export_state(self) -> ChannelState:
        """Snapshot everything the core holds, for storage to persist.

        The repair cache (recent wire bytes) is left out: after a restore the core
        asks for old bytes with :class:`~sds.events.RepairDataNeeded`.
        """
        def hx(b: bytes | None) -> str | None:
            return None if b is None else b.hex()

        def entry(e: HistoryEntry) -> list[str | None]:
            return [e.message_id, hx(e.retrieval_hint), e.sender_id]

        return ChannelState(
            {
                "version": STATE_VERSION,
                "channel_id": self.channel_id,
                "sender_id": self.sender_id,
                "lamport": self.lamport,
                "evicted": self._evicted,
                "log": [
                    [le.lamport, mid, le.sender_id, hx(le.retrieval_hint)]
                    + ([1] if le.withheld else [])
                    for mid, le in ((mid, self._entries[mid]) for _, mid in self._log)
                ],
                "bloom": self._filter.items(),
                "met_elsewhere": list(self._met_elsewhere),
                "lost": list(self._lost),
                "outgoing": [
                    [o.message_id, o.data.hex(), o.lamport, o.state, sorted(o.hits), o.attempts,
                     o.next_resend_ms]
                    for o in self._outgoing.values()
                ],
                "incoming": [
                    [w.data.hex(), hx(w.retrieval_hint), w.received_ms, w.lost_before]
                    for w in self._incoming.values()
                ],
                "missing": [
                    [entry(i.entry), i.noticed_ms, i.by, i.named_ms]
                    for i in self._missing.values()
                ],
                "repair_out": [
                    [entry(e), due, req, self._out_by.get(e.message_id, ASKED)]
                    for e, due, req in self._repair_out.entries()
                ],
                "repair_in": [[entry(e), due, req] for e, due, req in self._repair_in.entries()],
                "lost_wanted": [
                    [entry(e), due, self._lost_attempts.get(e.message_id, 0),
                     self._lost_by.get(e.message_id, "")]
                    for e, due, _ in self._lost_wanted.entries()
                ],
                "failed": list(self._failed),
                # copies seen on the wire whose quiet period still runs (optional key)
                "copy_seen": [
                    [m, t] for m, t in self._copy_seen.items()
                    if self._last_now - t < self.config.repair_t_min_ms // 2
                ],
                # sync suppression (optional keys): heard since our last message, and
                # the ids named again whose hold-off still runs
                "heard_since_sent": self._heard_since_sent,
                # participants heard (optional keys): the SDS-R windows and the sync
                # interval count them; a restored channel counts on from there
                "heard": [[s, t] for s, t in self._heard.items()],
                "census": self._census.export(),
                "unnamed": list(self._unnamed),
                "rename": list(self._rename),
                "renamed_at": [
                    [m, t] for m, t in self._renamed_at.items()
                    if self._last_now - t < self.config.sync_interval_ms
                ],
                "next_sync_ms": self._next_sync_ms,
                "next_repair_sync_ms": self._next_repair_sync_ms,
                "next_sweep_ms": self._next_sweep_ms,
                # recovery time (lost timeouts) where it stood at the last call
                "recovery_ms": self._recovery_ms(self._last_now),
                "paused_total_ms": self._paused_total,
                "paused": self._paused_at is not None,
            }
        )

    @classmethod
    def restore(
        cls,
        state: ChannelState,
        config: Config | None = None,
        rng: random.Random | None = None,
        now_ms: int | None = None,
    ) -> Channel:
        """Rebuild a channel from :meth:`export_state` (possibly after a restart).

        With ``now_ms`` (the time of the restart), the time the program was not
        running does not count towards lost timeouts (they resume where they
        stopped), and a clock more than ``Config.max_clock_skew_ms`` ahead of
        ``now_ms`` (pinned by a message from the future) is brought back to
        ``now_ms``; buffered messages that far ahead are dropped
        (``DropReason.CLOCK_AHEAD``). A deadline further ahead of ``now_ms`` than the
        longest wait of its kind was set by a clock that has since gone back (fixed
        between runs, or corrected by the application): it runs at ``now_ms``. Raises
        ``ValueError`` for a state of another format version or one that does not parse.
        """
        d = state.data
        if d.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported channel state version {d.get('version')!r}")
        try:
            return cls._restore(d, config, rng, now_ms)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"corrupt channel state: {exc}") from None

    @classmethod
    def _restore(
        cls,
        d: dict[str, Any],
        config: Config | None,
        rng: random.Random | None,
        now_ms: int | None,
    ) -> Channel:
        def bx(s: str | None) -> bytes | None:
            return None if s is None else bytes.fromhex(s)

        def entry(e: list[Any]) -> HistoryEntry:
            return HistoryEntry(e[0], bx(e[1]), e[2])

        ch = cls(d["channel_id"], d["sender_id"], config, int(d["lamport"]), rng)
        skew = ch.config.max_clock_skew_ms
        cfg = ch.config

        def due(t: int, longest: int) -> int:
            """A deadline set by a clock that has since gone back (fixed between runs, or
            corrected by the application) lies further ahead than any wait the core sets:
            it runs at ``now_ms`` instead of hours late."""
            if now_ms is not None and t > now_ms + longest:
                return now_ms
            return t

        def seen(t: Any) -> int:
            """A time something was seen, in the future by the same clock: ``now_ms``."""
            return int(t) if now_ms is None else min(int(t), now_ms)
        if now_ms is not None:
            ch._last_now = now_ms
            if ch.lamport > now_ms + skew:  # pinned in the future: recovered
                ch.lamport = now_ms
            ch._next_repair_sync_ms = now_ms
        recovery = d.get("recovery_ms")  # absent in states saved before it existed
        if recovery is not None:
            ch._paused_total = (
                now_ms - int(recovery) if now_ms is not None else int(d["paused_total_ms"])
            )
            if now_ms is None:
                ch._last_now = int(recovery) + ch._paused_total
            if d.get("paused"):
                ch._paused_at = ch._last_now
        ch._evicted = int(d["evicted"])
        for row in d["log"]:
            lamport, mid, sender, hint = row[:4]
            ch._log.add((int(lamport), mid))
            le = ch._entries[mid] = _LogEntry(
                int(lamport), sender, bx(hint), withheld=len(row) > 4 and bool(row[4])
            )
            ch._withheld += le.withheld
        if d["log"]:
            ch._earliest_logged_ms = 0  # restored entries' logged_ms (unknown: settled)
        for item in d["bloom"]:
            ch._filter.add(item)
        ch._met_elsewhere.update((m, None) for m in d["met_elsewhere"])
        ch._lost.update((m, None) for m in d["lost"])
        params = ch._filter.params
        for mid, data, lamport, st, hits, attempts, next_resend in d["outgoing"]:
            ch._outgoing[mid] = _Outgoing(
                mid, bytes.fromhex(data), int(lamport), positions_in(mid, params), st,
                set(hits), int(attempts),
                due(int(next_resend), cfg.resend_possibly_acknowledged_ms),
            )
            heapq.heappush(ch._resend_heap, (ch._outgoing[mid].next_resend_ms, mid))
        for row in d["missing"]:
            info = _Missing(entry(row[0]), int(row[1]), set(), str(row[2]) if len(row) > 2 else "")
            if len(row) > 3 and row[3] is not None:  # optional: named by a live member
                info.named_ms = seen(row[3])
            ch._add_missing(info)
            if ch.config.lost_timeout_ms:
                heapq.heappush(ch._lost_heap, (info.noticed_ms + ch.config.lost_timeout_ms,
                                               info.entry.message_id))
        for data_hex, hint, received_ms, lost_before in d["incoming"]:
            data = bytes.fromhex(data_hex)
            pb = parse_pb(data)
            if now_ms is not None and pb.lamport_timestamp > now_ms + skew:
                ch._drop(pb.message_id, pb.sender_id, DropReason.CLOCK_AHEAD,
                         f"buffered with lamport {pb.lamport_timestamp}: dropped at restore")
                continue
            history_ids = _usable_ids([h.message_id for h in pb.causal_history])
            w = _Waiting(pb.message_id, pb.sender_id, pb.lamport_timestamp, pb.content,
                         history_ids, bx(hint), data, int(received_ms), 0, int(lost_before))
            ch._incoming[w.message_id] = w
            ch._cache_for_repair(w.message_id, data)
        for w in ch._incoming.values():
            for mid in set(w.history_ids):
                if mid == w.message_id or ch._is_available(mid):
                    continue
                known = ch._missing.get(mid)
                if known is None:  # waits for another buffered message
                    rec = ch._recovery_ms(ch._last_now)
                    known = _Missing(HistoryEntry(mid), rec, set(), w.sender_id)
                    ch._add_missing(known)
                    if ch.config.lost_timeout_ms:  # breaks a cycle (_run_lost)
                        ch._push_lost(rec + ch.config.lost_timeout_ms, mid)
                known.waiting.add(w.message_id)
                w.unmet += 1
        repair_longest = max(cfg.repair_t_max_ms, cfg.repair_t_max_limit_ms)
        for row in d["repair_out"]:
            ent = entry(row[0])
            ch._repair_out.restore(ent, due(int(row[1]), repair_longest), bool(row[2]))
            known = ch._missing.get(ent.message_id)
            fallback = known.by if known is not None else ASKED  # saved before it was kept
            ch._file_request(ent.message_id, str(row[3]) if len(row) > 3 else fallback)
        for e, at, req in d["repair_in"]:
            ch._repair_in.restore(entry(e), due(int(at), repair_longest), bool(req))
        if "lost_wanted" in d:
            for row in d["lost_wanted"]:
                if ch._is_available(row[0][0]) and row[0][0] not in ch._lost:
                    continue  # it arrived meanwhile (storage put it in the log)
                by = str(row[3]) if len(row) > 3 else ""
                at = due(int(row[1]), max(cfg.lost_retry_max_ms, repair_longest))
                ch._want_lost(entry(row[0]), 0, by, at, int(row[2]))
        elif ch.config.repair_enabled:
            # a state saved before lost ids stayed wanted: want the most recent ones
            restart = now_ms if now_ms is not None else ch.lamport
            for m in list(ch._lost)[-ch.config.repair_buffer_size :]:
                ch._want_lost(HistoryEntry(m), restart, "")
        ch._failed.update((m, None) for m in d.get("failed", ()))  # likewise
        ch._copy_seen.update((str(m), seen(t)) for m, t in d.get("copy_seen", ()))
        ch._heard_since_sent = bool(d.get("heard_since_sent", False))
        for s, t in d.get("heard", ())[-ch._heard_kept :] if ch._heard_kept else ():
            ch._heard[str(s)] = seen(t)
        ch._census.restore(d.get("census"), seen)
        ch._unnamed.update((str(m), None) for m in d.get("unnamed", ()))
        ch._rename.update((str(m), None) for m in d.get("rename", ()))
        ch._renamed_at.update((str(m), seen(t)) for m, t in d.get("renamed_at", ()))
        ch._next_sync_ms = due(
            int(d["next_sync_ms"]), max(cfg.sync_interval_ms, cfg.sync_interval_limit_ms)
        )
        ch._next_repair_sync_ms = due(
            int(d.get("next_repair_sync_ms", ch._next_repair_sync_ms)), cfg.repair_sync_interval_ms
        )
        nsw = d["next_sweep_ms"]
        ch._next_sweep_ms = None if nsw is None else due(int(nsw), cfg.sweep_interval_ms)
        # Anything that became deliverable (e.g. state saved mid-way) goes now.
        for w in [w for w in ch._incoming.values() if w.unmet <= 0]:
            ch._incoming.pop(w.message_id, None)
            ch._deliver(w)
        return ch
