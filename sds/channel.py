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

The channel owns the state machine: the Lamport clock, the bloom filter of what
it received, what a received message goes through (:meth:`Channel.receive_parsed`:
screened, admitted, heard, then taken as a copy, a sync or content), delivery in
causal order, declaring ids lost, and building the messages it sends. Every other
piece of state belongs to a part it creates and calls down into; no part imports
the channel (each part's module says what it owns and what it reads):

* :mod:`sds.log` - the log window (:class:`~sds.log.ChannelLog`);
* :mod:`sds.outgoing` - own messages until acknowledged, their resends;
* :mod:`sds.backoff` - resends backing off while nobody is heard;
* :mod:`sds.missing` - what we lack, what waits for it, lost timeouts, budgets;
* :mod:`sds.requests` - SDS-R requests and the lost ids still wanted;
* :mod:`sds.answers` - SDS-R answers and the copies on the wire;
* :mod:`sds.naming` - which ids our messages name, and naming what peers lack;
* :mod:`sds.carrying` - what a content message carries (Config.carry_copies);
* :mod:`sds.syncing` - when the periodic sync goes out;
* :mod:`sds.estimates` - the channel's size and loss as we see them;
* :mod:`sds.state` - the saved state's format (export and restore);
* :mod:`sds.tuning` - limits and tuning constants.

Section numbers in comments refer to the SDS spec (``seeds/sds-spec.txt``):
"Send Message", "Receive Message", "Deliver Message", "Resolve Conflicts",
"Review ACK Status", "Periodic Incoming/Outgoing Buffer Sweep", "Periodic Sync
Message", "Ephemeral Messages", and PROTOCOL.md's "SDS-R".

Complexity: receiving a message costs ``O(h + o)`` for ``h`` causal-history
entries and ``o`` unacknowledged own messages, plus ``O(log n)`` for the log
insert; nothing is proportional to the history size ``n``.
"""

from __future__ import annotations

import operator
import random
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from sds import sds_pb2
from sds.answers import RepairAnswers
from sds.backoff import ResendBackoff
from sds.bloom import RollingBloomFilter, positions_in
from sds.carrying import Carrying
from sds.config import Config
from sds.datagram import Datagram
from sds.estimates import ChannelEstimates
from sds.events import (
    DropReason,
    EphemeralReceived,
    Event,
    MessageConflict,
    MessageDelivered,
    MessageDropped,
    MessageSent,
    RepairRequested,
    RepairRequestReceived,
    RepairSent,
    SyncReceived,
    SyncSent,
)
from sds.ids import ID_NONCE_BYTES, id_form, message_id_for
from sds.log import ChannelLog, entry_pb, fragment
from sds.message import DecodeError, HistoryEntry, SharedMessage, parse_pb
from sds.missing import Missing, MissingTracker, Waiting, usable_ids
from sds.naming import Naming
from sds.outgoing import Outgoing, OutgoingBuffer, OwnState
from sds.repair import IncomingRepairBuffer, OutgoingRepairBuffer, t_req
from sds.requests import ASKED, RepairRequests
from sds.state import STATE_VERSION, ChannelParts, ChannelState
from sds.state import export as export_parts
from sds.state import load as load_parts
from sds.syncing import SyncSchedule
from sds.tuning import (
    CARRY_MAX_BYTES,
    CARRY_MAX_IDS,
    MAX_ID_LENGTH,
    MAX_LAMPORT,
    SYNC_FLOOR_AT_SCALE,
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
    "carry_trace",
]

#: ``h.message_id`` of a protobuf ``HistoryEntry`` (mapped over a history at C speed).
_MESSAGE_ID = operator.attrgetter("message_id")

#: Debug switch: when set, every :meth:`Channel.to_carry` call hands it one dict of
#: its decision (``k`` from the loss estimate and the participants, the estimate, and
#: for each recent message looked at: carried, or why not: older than the base
#: window, enough copies on the wire as far as we know, too big). ``None``: nothing is
#: traced (the default). bench/real_vs_sim.py ``--carry-trace`` sets it in the sim and
#: in every real node (bench/carry_trace.py).
carry_trace: Callable[[dict[str, Any]], None] | None = None


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
        self._config = cfg = config if config is not None else Config()
        self._rng = rng = rng if rng is not None else random.Random(0)
        #: Longest causal history accepted (a channel with a longer own one accepts that).
        self._max_history = max(cfg.max_history_received, cfg.causal_history_size)
        #: Lamport clock, milliseconds (PROTOCOL.md "Lamport clock").
        self.lamport = now_ms
        #: ``now_ms`` of the last receive, timer or connection change (not of a send)
        self._last_now = now_ms
        self._filter = RollingBloomFilter(cfg.bloom_capacity, cfg.bloom_error_rate)
        params = self._filter.params
        self._events: list[Event] = []
        self._datagrams: list[Datagram] = []
        events, datagrams = self._events, self._datagrams

        # The parts, each below the ones that read it (no part imports this module).
        self._log = log = ChannelLog(cfg)
        self._estimates = est = ChannelEstimates(cfg, sender_id, rng)
        self._backoff = ResendBackoff(cfg, now_ms)
        self._outgoing = OutgoingBuffer(channel_id, cfg, params, events, datagrams,
                                        self._backoff)  # fmt: skip
        # the ids missing and how many each namer has missing: the tracker's, which
        # fills them; the requests read them (a namer's cost at a cap, the spacing of
        # retries), so they are made here, before either
        missing: dict[str, Missing] = {}
        missing_by: dict[str, int] = {}
        self._requests = req = RepairRequests(
            channel_id, sender_id, cfg, now_ms, est, missing, missing_by, events
        )
        self._tracker = trk = MissingTracker(
            channel_id, cfg, log.entries, est, req, missing, missing_by, events
        )
        self._naming = naming = Naming(sender_id, cfg, log, est, params)
        self._answers = ans = RepairAnswers(
            channel_id, sender_id, cfg, log.entries, est, req, naming, events, datagrams
        )
        self._carrying = Carrying(channel_id, sender_id, cfg, log.entries, est, ans)
        self._sync = SyncSchedule(cfg, rng, log, est, naming, now_ms)
        self._parts = ChannelParts(
            channel_id, sender_id, log, self._filter, self._outgoing, trk, req, ans,
            est, naming, self._sync, events, self._backoff,
        )
        # The containers the receive and delivery paths test on every message, held
        # here too (the parts own and fill them; they are never replaced).
        self._entries = log.entries
        self._incoming = trk.incoming
        self._missing = trk.missing
        self._met_elsewhere = trk.met_elsewhere
        self._unnamed = naming.unnamed
        self._rename = naming.rename

    @property
    def config(self) -> Config:
        """The channel's configuration.

        Replacing it applies its timings, switches and per-call sizes from the next
        call on, in every part; what was sized at construction stays: the bloom
        filter, the repair buffers' caps, the acknowledgement threshold, the longest
        causal history accepted and the senders remembered for the SDS-R windows.
        """
        return self._config

    @config.setter
    def config(self, config: Config) -> None:
        self._config = config
        for part in (self._log, self._estimates, self._outgoing, self._requests,
                     self._tracker, self._naming, self._answers, self._carrying, self._sync,
                     self._backoff):  # fmt: skip
            part.config = config

    # ------------------------------------------------------------------ draining

    # (the parts append to these two lists: drained by copy, never replaced)

    def events(self) -> list[Event]:
        """Drain the events produced since the last call (oldest first)."""
        events = self._events
        if not events:
            return []
        out = events[:]
        events.clear()
        return out

    def datagrams_to_send(self) -> list[Datagram]:
        """Drain what the core wants broadcast: resends, sync messages, repair responses."""
        datagrams = self._datagrams
        if not datagrams:
            return []
        out = datagrams[:]
        datagrams.clear()
        return out

    # ---------------------------------------------------------------- inspection

    @property
    def ack_threshold(self) -> int:
        """Distinct bloom-filter hits that acknowledge an own message."""
        return self._outgoing.ack_threshold

    def log_ids(self) -> list[str]:
        """Ids in the core's log window, in log order (lamport, message_id)."""
        return self._log.ids()

    @property
    def log_size(self) -> int:
        """Messages ever entered in the log (window plus evicted)."""
        return self._log.evicted + len(self._log.keys)

    def has_message(self, message_id: str) -> bool:
        """Whether ``message_id`` is in the core's log window."""
        return message_id in self._entries

    def outgoing_ids(self) -> list[str]:
        """Own messages not yet acknowledged."""
        return list(self._outgoing.messages)

    @property
    def resend_backoff(self) -> int:
        """How many quiet resend sweeps ran since a peer was last heard (0: the resends
        do not back off; :mod:`sds.backoff`)."""
        return self._backoff.level

    def outgoing_state(self, message_id: str) -> str | None:
        """``OwnState`` of an own message still in the outgoing buffer, else ``None``."""
        out = self._outgoing.messages.get(message_id)
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
        trk, req, ans, out = self._tracker, self._requests, self._answers, self._outgoing
        return {
            "log_window": len(self._log.keys),
            "log_total": self.log_size,
            "outgoing": len(out.messages),
            "incoming": len(trk.incoming),
            "missing": len(trk.missing),
            "lost_known": len(trk.lost),
            "met_elsewhere": len(trk.met_elsewhere),
            "repair_requests": len(req.out),
            "lost_asked_again": len(req.lost_wanted),
            "lost_asked_again_max_per_sender": max(map(len, req.lost_of.values()), default=0),
            "repair_responses": len(ans.due),
            "repair_cache": len(ans.cache),
            "missing_max_per_sender": max(trk.missing_by.values(), default=0),
            "resend_heap": len(out.heap),
            "lost_heap": len(trk.lost_heap),
            "bloom_items": self._filter.count,
            "syncs_suppressed": self._sync.suppressed,
            "syncs_deferred": self._sync.deferred,
            "repair_answers_expired": ans.expired,
            "repair_answer_copies": len(ans.copies),
            "carried_sent": self._carrying.sent,
            "carried_received_new": self._carrying.new,
            "carried_received_duplicate": self._carrying.duplicates,
        }

    def active_participants(self, now_ms: int) -> int:
        """Participants heard from in the last three sync intervals, ourselves included,
        as far as the SDS-R windows count them
        (:meth:`sds.estimates.ChannelEstimates.active_participants`)."""
        return self._estimates.active_participants(now_ms)

    def sync_interval(self, now_ms: int) -> int:
        """The sync interval now: ``sync_interval_ms``, stretched by the participants
        heard beyond ``Config.sync_interval_participants`` (up to
        ``sync_interval_limit_ms``; :meth:`sds.estimates.ChannelEstimates.sync_interval`)."""
        return self._estimates.sync_interval(now_ms)

    @property
    def connected(self) -> bool:
        """Whether recovery runs (:meth:`set_connected`); true unless told otherwise."""
        return self._tracker.paused_at is None

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
        if len(content) > self._config.max_content_bytes:
            raise ValueError(
                f"content is {len(content)} bytes; the limit is {self._config.max_content_bytes}"
            )
        lamport = self._tick(now_ms)
        nonce = self._rng.getrandbits(8 * ID_NONCE_BYTES).to_bytes(ID_NONCE_BYTES, "big")
        # unique per message even for identical content, verifiable on receipt (sds.ids)
        message_id = message_id_for(self.channel_id, self.sender_id, lamport, content, nonce)
        requests = self._requests.take(
            now_ms, self._tracker.recovery_ms(now_ms), self._last_now
        )
        history_ids, data = self._build(message_id, lamport, content, requests)
        if requests:
            self._events.append(
                RepairRequested(self.channel_id, tuple(e.message_id for e in requests), message_id)
            )

        positions = positions_in(message_id, self._filter.params)
        self._outgoing.add(
            Outgoing(
                message_id,
                data if self._config.keep_outgoing_bytes else b"",
                lamport,
                positions,
                OwnState.UNACKNOWLEDGED,
                set(),
                0,
                now_ms + self._config.resend_unacknowledged_ms,
            )
        )
        self._filter.add_with_positions(message_id, positions)
        self._sync.first_entry(now_ms)
        position = self._log.insert(message_id, lamport, self.sender_id, None, self._last_now)
        self._answers.cache_for_repair(message_id, data)
        self._events.append(
            MessageSent(
                self.channel_id, message_id, lamport, content, data, history_ids, position
            )
        )
        self._sync.after_send(now_ms)
        self._carrying.just_sent = message_id
        return data

    def to_carry(self, now_ms: int) -> list[tuple[str, bytes]]:
        """What the content message just returned by :meth:`send` carries
        (Config.carry_copies): ``(message id, SDS bytes)`` of recent messages, for the
        transport to attach to that message's envelope; receivers give each to
        :meth:`receive` with ``carried=True``. Calling it counts them as copies on the
        wire (call it once per :meth:`send`).

        Only at scale (``participants x loss`` at least
        :data:`~sds.tuning.FIRST_REQUEST_MIN_LACKING`, the first-request spread's test:
        channels of 10 and 100 carry nothing): a message that entered our log within the
        base window (``repair_t_max_ms``), at most :data:`~sds.tuning.CARRY_MAX_BYTES`,
        whose copies on the wire as far as we know (the first, carried ones, answers)
        are fewer than ``1 + k``, ``k`` the fewest copies after which the members
        expected to lack it, ``participants x loss ** (k + 1)``, are below
        :data:`~sds.tuning.CARRY_WHEN_LACKING`, at most ``carry_copies``; the newest
        first, at most :data:`~sds.tuning.CARRY_MAX_IDS`.
        """
        return self._carrying.to_carry(now_ms, carry_trace)

    def send_ephemeral(self, content: bytes, now_ms: int) -> bytes:
        """Wrap ``content`` in an ephemeral message (spec "Ephemeral Messages").

        No Lamport timestamp, causal history or filter; not buffered, not logged,
        never resent. The caller broadcasts the returned bytes.
        """
        if not isinstance(content, bytes | bytearray) or not content:
            raise ValueError("content must be non-empty bytes")
        content = bytes(content)
        if len(content) > self._config.max_content_bytes:
            raise ValueError(
                f"content is {len(content)} bytes; the limit is {self._config.max_content_bytes}"
            )
        nonce = self._rng.getrandbits(8 * ID_NONCE_BYTES).to_bytes(ID_NONCE_BYTES, "big")
        message_id = message_id_for(self.channel_id, self.sender_id, -1, content, nonce)
        pb = sds_pb2.SdsMessage(
            sender_id=self.sender_id,
            message_id=message_id,
            channel_id=self.channel_id,
            content=content,
        )
        return pb.SerializeToString()

    def set_retrieval_hint(self, message_id: str, hint: bytes) -> None:
        """Attach a retrieval hint (e.g. the envelope hash) to a logged message.

        Call it right after sending an own message, once the transport knows the
        hint; later causal histories that name the message will carry it.
        """
        self._log.set_hint(message_id, hint)

    def ask_sync(self, wanted: bool = True) -> None:
        """Send our next due sync even if sync suppression would skip it (``False``:
        no longer needed). The timer is not moved. For an application that needs this
        participant's sync heard: a member whose wall clock is off learns the others'
        time from their syncs, and a quiet channel under suppression has one member
        syncing (app/node/clock_guard.py). It goes out even with an empty log (a member whose
        clock is a day behind has accepted nothing yet: its time is what it says)."""
        self._sync.asked = wanted

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
            pb.repair_request.append(entry_pb(entry))
        entries = self._entries
        ids = []
        fragments = []
        for mid in self._naming.history_ids(self._last_now, floor, content is not None):
            le = entries[mid]
            frag = le.fragment
            if frag is None:
                frag = fragment(mid, le)
            ids.append(mid)
            fragments.append(frag)
        return tuple(ids), pb.SerializeToString() + b"".join(fragments)

    # ------------------------------------------------------------------- receive

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

        The phases, in order: :meth:`_screen` (what is dropped at once, ephemeral
        messages), :meth:`_admit` (carried copies, the sender's budget, and what
        hearing the message tells us); then a copy of a message we hold goes to
        :meth:`_take_copy`; any other has its repair requests answered
        (:meth:`_on_repair_requests`), its acknowledgements reviewed and its filter
        checked for what it lacks, and is taken as a sync (:meth:`_take_sync`) or as
        content (:meth:`_take_content`).
        """
        # a SharedMessage reads as the SdsMessage it was made from
        pb = cast(sds_pb2.SdsMessage, parsed)
        screened = self._screen(parsed, pb, now_ms, id_content, carried)
        if screened is None:
            return
        message_id, sender_id, content, history, history_ids = screened
        is_content = bool(content)
        duplicate = is_content and self.holds(message_id)
        if not self._admit(message_id, sender_id, history_ids, is_content, duplicate,
                           carried, now_ms):
            return
        if duplicate:
            self._take_copy(pb, message_id, sender_id, content, history_ids, now_ms)
            return
        if self._config.repair_enabled and len(pb.repair_request) and not carried:
            self._on_repair_requests(pb, sender_id, now_ms)
        self._outgoing.review_acks(pb, history_ids, sender_id)
        if not carried and self._naming.name_lacking(pb, sender_id, now_ms):
            self._sync.rename_soon(now_ms)
        if is_content:
            self._take_content(pb, data, message_id, sender_id, content, history,
                               history_ids, now_ms, retrieval_hint, carried)
        else:
            self._take_sync(pb, message_id, sender_id, history, history_ids, now_ms)

    def _screen(
        self,
        parsed: sds_pb2.SdsMessage | SharedMessage,
        pb: sds_pb2.SdsMessage,
        now_ms: int,
        id_content: bytes | None,
        carried: bool,
    ) -> tuple[str, str, bytes, Sequence[sds_pb2.HistoryEntry], list[str]] | None:
        """Receive, phase 1: drop what is malformed, foreign, too large, too far ahead,
        unverifiable or our own echo; deliver an ephemeral message at once. Returns the
        message's interned ids, content, causal history and its ids, or ``None``."""
        message_id = pb.message_id
        sender_id = pb.sender_id
        if pb.channel_id != self.channel_id:
            self._drop(message_id, sender_id, DropReason.WRONG_CHANNEL, pb.channel_id)
            return None
        if not message_id or not sender_id:
            self._drop(message_id or None, sender_id or None, DropReason.MISSING_ID)
            return None
        if len(message_id) > MAX_ID_LENGTH or len(sender_id) > MAX_ID_LENGTH:
            self._drop(
                None if len(message_id) > MAX_ID_LENGTH else message_id,
                None if len(sender_id) > MAX_ID_LENGTH else sender_id,
                DropReason.ID_TOO_LONG,
                f"message_id {len(message_id)}, sender_id {len(sender_id)} characters",
            )
            return None
        # One string per id for every channel that keeps it: protobuf makes a new str
        # at each access, and a simulated broadcast (one parse, N receivers) would
        # otherwise store N copies in the logs (and the senders in the heard list):
        # ~170 bytes per message held per participant.
        message_id = sys.intern(message_id)
        sender_id = sys.intern(sender_id)
        has_lamport = pb.HasField("lamport_timestamp")
        content = pb.content
        if not has_lamport and not content:
            self._drop(message_id, sender_id, DropReason.INVALID_KIND)
            return None
        if len(content) > self._config.max_content_bytes:
            self._drop(message_id, sender_id, DropReason.OVERSIZED, f"{len(content)} bytes")
            return None
        if sender_id == self.sender_id and not carried:
            # Spec: SHOULD ignore own messages. (A carried copy of one is a copy on
            # the wire all the same: counted in _admit, never delivered.)
            self._drop(message_id, sender_id, DropReason.OWN_ECHO)
            return None
        if self._backoff.heard(now_ms):  # a peer: resends no longer back off (sds.backoff)
            self._outgoing.spread_overdue(now_ms)
        if not has_lamport:
            # Spec "Ephemeral Messages": delivered at once, never logged or buffered.
            self._events.append(EphemeralReceived(self.channel_id, message_id, sender_id, content))
            return None
        if pb.lamport_timestamp > MAX_LAMPORT:
            self._drop(
                message_id, sender_id, DropReason.LAMPORT_OUT_OF_RANGE, str(pb.lamport_timestamp)
            )
            return None
        cfg = self._config
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
            return None
        if (
            content
            and cfg.verify_message_ids
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
            return None
        history = pb.causal_history
        if len(history) > self._max_history:
            self._drop(
                message_id,
                sender_id,
                DropReason.HISTORY_TOO_LONG,
                f"{len(history)} causal history entries; at most {self._max_history}",
            )
            return None
        if len(pb.repair_request) > cfg.max_repair_requests_received:
            self._drop(
                message_id,
                sender_id,
                DropReason.TOO_MANY_REPAIR_REQUESTS,
                f"{len(pb.repair_request)} repair requests; at most "
                f"{cfg.max_repair_requests_received}",
            )
            return None
        history_ids = (
            parsed.history_ids if type(parsed) is SharedMessage
            else list(map(_MESSAGE_ID, history))
        )
        return message_id, sender_id, content, history, history_ids

    def _admit(
        self,
        message_id: str,
        sender_id: str,
        history_ids: list[str],
        is_content: bool,
        duplicate: bool,
        carried: bool,
        now_ms: int,
    ) -> bool:
        """Receive, phase 2: a carried copy of what we hold is counted and goes no
        further, as does a carried sync or echo; a message naming more unknown ids than
        its sender's budget allows is refused (``False``: stop here). Then what hearing
        the message tells us, copy or not: its sender takes part, it names ids for the
        channel, and a copy of a content message is on the wire (it cancels our request
        and pending answer for it)."""
        if carried:
            if not is_content:
                self._drop(message_id, sender_id, DropReason.INVALID_KIND, "carried sync")
                return False
            if sender_id == self.sender_id and not duplicate:
                self._drop(message_id, sender_id, DropReason.OWN_ECHO)
                return False
            if duplicate:
                # the common case (all but ~loss of the members): a copy on the wire,
                # counted apart, no event (Config.carry_copies)
                self._carried_copy(message_id, now_ms)
                return False
        known = all(map(self._entries.__contains__, history_ids))
        if (
            not duplicate
            and not known
            and not self._tracker.within_budget(sender_id, message_id, history_ids)
        ):
            self._drop(
                message_id,
                sender_id,
                DropReason.SENDER_BUDGET,
                f"{self._tracker.missing_by.get(sender_id, 0)} ids first named by this "
                f"sender are still missing; at most {self._config.max_missing_per_sender}",
            )
            self._refuse(message_id, sender_id, now_ms)
            return False
        cfg = self._config
        if known:
            # A participant counts (the SDS-R windows, the sync interval) once a message
            # of it names only what we hold (ChannelEstimates.hear).
            self._estimates.hear(sender_id, now_ms)
        self._sync.heard_since_sent = True
        if cfg.sync_suppression and (self._unnamed or self._rename):
            self._naming.strike(history_ids, sender_id, now_ms, not is_content)
        if is_content and cfg.repair_enabled:
            # SDS-R: seeing m arrive cancels our request for it and our pending answer
            # (_cancel_repair, inline: every content message passes here).
            requests = self._requests
            requests.unrequest(message_id)
            self._answers.due.remove(message_id)
            requests.unwant_lost(message_id)
            if carried:
                # at least the first and this copy were on the wire
                self._carrying.new += 1
                self._answers.note_copy_on_wire(message_id, now_ms)
                self._answers.count_wire_copy(message_id)
        return True

    def _take_copy(
        self,
        pb: sds_pb2.SdsMessage,
        message_id: str,
        sender_id: str,
        content: bytes,
        history_ids: list[str],
        now_ms: int,
    ) -> None:
        """Receive, a copy of a content message we hold (a resend, an answer, or
        js-waku's same id for the same text): it still acknowledges what it names
        (spec "Review ACK Status" is for every received message); a different
        author, text or timestamp is a conflict; the copy is on the wire."""
        self._outgoing.review_acks(pb, history_ids, sender_id)
        self._check_conflict(message_id, sender_id, pb.lamport_timestamp, content)
        # note_copy, without the cancels _admit ran (run again, they found nothing):
        # the copy on the wire is noted once
        if self._config.repair_enabled:
            self._answers.note_copy_on_wire(message_id, now_ms)
            if message_id in self._entries or message_id in self._incoming:
                self._answers.count_wire_copy(message_id)
        if self._naming.rename_copy(message_id, sender_id, now_ms):
            self._sync.rename_soon(now_ms)
        self._drop(message_id, sender_id, DropReason.DUPLICATE)

    def _take_sync(
        self,
        pb: sds_pb2.SdsMessage,
        message_id: str,
        sender_id: str,
        history: Sequence[sds_pb2.HistoryEntry],
        history_ids: list[str],
        now_ms: int,
    ) -> None:
        """Receive, a sync (spec "Periodic Sync Message"): its history tells us what
        we lack; never persisted."""
        if not all(map(self._entries.__contains__, history_ids)):
            self._tracker.note(message_id, sender_id, history, history_ids, now_ms, False)
        self._cap_missing(now_ms)
        self._events.append(
            SyncReceived(self.channel_id, message_id, sender_id, pb.lamport_timestamp)
        )

    def _take_content(
        self,
        pb: sds_pb2.SdsMessage,
        data: bytes,
        message_id: str,
        sender_id: str,
        content: bytes,
        history: Sequence[sds_pb2.HistoryEntry],
        history_ids: list[str],
        now_ms: int,
        retrieval_hint: bytes | None,
        carried: bool,
    ) -> None:
        """Receive, a new content message: into our filter, the loss estimate and the
        repair cache; delivered, or buffered until what it names arrives; our sync
        drawn sooner to acknowledge it."""
        # Spec "Receive Message": a content message's id enters our bloom filter.
        self._filter.add(message_id)
        # the channel's loss as we see it (Config.repair_answer_copies): a carried line
        # was missed directly: without it, lines carried to us were never asked for and
        # the estimate (and carrying with it) would starve
        repaired = self._requests.repaired(message_id)
        self._estimates.note_line(carried or repaired)
        sync = self._sync
        sync.content_heard_ms = now_ms
        sync.first_entry(now_ms)
        self._answers.cache_for_repair(message_id, data)
        missing = 0 if all(map(self._entries.__contains__, history_ids)) else self._tracker.note(
            message_id, sender_id, history, history_ids, now_ms, True
        )
        waiting = Waiting(
            message_id,
            sender_id,
            pb.lamport_timestamp,
            content,
            usable_ids(history_ids),
            retrieval_hint,
            data,
            now_ms,
            missing,
        )
        if missing:
            self._tracker.buffer(waiting, now_ms)
            self._cap_missing(now_ms)
        else:
            self._deliver(waiting)
        # Acknowledge content soon: shorten the sync backoff.
        sync.after_content(now_ms)

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

    # ------------------------------------------------------------- copies

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
        if self._config.repair_enabled and (
            message_id in self._entries or message_id in self._incoming
        ):
            self._cancel_repair(message_id)
            self._answers.note_copy_on_wire(message_id, now_ms)
            self._answers.count_wire_copy(message_id)
        if self._naming.rename_copy(message_id, sender_id, now_ms):
            self._sync.rename_soon(now_ms)

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
        self._carrying.duplicates += 1
        if self._config.repair_enabled:
            self._cancel_repair(message_id)
            self._answers.note_copy_on_wire(message_id, now_ms)
            if message_id in self._entries or message_id in self._incoming:
                self._answers.count_wire_copy(message_id)

    def _cancel_repair(self, message_id: str) -> None:
        """``message_id`` is on the wire: our request for it and our pending answer go."""
        requests = self._requests
        requests.unrequest(message_id)
        self._answers.due.remove(message_id)
        requests.unwant_lost(message_id)

    # ------------------------------------------------------------------- SDS-R

    def _on_repair_requests(self, pb: sds_pb2.SdsMessage, requester: str, now_ms: int) -> None:
        """A received message's repair requests: answers scheduled, ours postponed
        (:meth:`sds.answers.RepairAnswers.hear_requests`), and the ids asked for that we
        lack too noted missing (Config.repair_note_asked)."""
        asked, scheduled, unheld, follow = self._answers.hear_requests(pb, requester, now_ms)
        if unheld and self._config.repair_note_asked:
            self._note_asked(pb.message_id, requester, unheld, now_ms, follow)
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
        one ``max_missing_per_sender`` budget shared by every requester
        (:data:`~sds.requests.ASKED`): honest members relay the ids that others'
        histories invent (issue 26's identities naming ids nobody has), and counted
        against the requesters' own budgets those ids crowded out the honest ids they
        name (a test of 30 such identities: lines lost)."""
        ids = [r.message_id for r in unheld]
        tracker = self._tracker
        if not tracker.within_budget(ASKED, carrier_id, ids):
            return
        if tracker.note(carrier_id, requester, unheld, ids, now_ms, False, ASKED):
            self._cap_missing(now_ms)
            out = self._requests.out
            for mid in ids:  # asked for already: ours is a follow-up
                out.reschedule(mid, now_ms + t_req(self.sender_id, mid, 0, *follow))

    def supply_repair_data(self, message_id: str, data: bytes, now_ms: int) -> None:
        """Answer a :class:`~sds.events.RepairDataNeeded`: rebroadcast the stored bytes."""
        original = ""
        le = self._entries.get(message_id)
        if le is not None:
            original = le.sender_id
        self._datagrams.append(Datagram(bytes(data), "repair", message_id))
        self._events.append(RepairSent(self.channel_id, message_id, original))

    # --------------------------------------------------------- dependencies

    def mark_dependencies_met(self, ids: Iterable[str], now_ms: int) -> None:
        """Tell the core these ids are in the application's log (storage beyond the window).

        Messages waiting only for them are delivered now. Call it in answer to
        :class:`~sds.events.MessagesMissing` for the ids your storage holds.
        """
        tracker = self._tracker
        requests = self._requests
        for mid in ids:
            if mid in self._entries:
                continue
            tracker.vouch_for(mid)
            requests.unrequest(mid)
            requests.unwant_lost(mid)
            self._resolve(mid, lost=False)

    def set_connected(self, connected: bool, now_ms: int) -> None:
        """Tell the core whether recovery can run (the transport is connected).

        Lost timeouts count only connected time: while disconnected (and, across
        :meth:`export_state`/:meth:`restore` with ``now_ms``, while the program
        was not running) no dependency is declared lost; the count resumes where
        it stopped. Calling it twice with the same value changes nothing.
        """
        self._last_now = now_ms
        if connected:
            if self._tracker.resume(now_ms):
                self._requests.ask_lost_again(now_ms)
        else:
            self._tracker.pause(now_ms)

    def _resolve(self, mid: str, lost: bool) -> None:
        """``mid`` became available (or was declared lost): release its waiters."""
        tracker = self._tracker
        for w in tracker.release(mid, lost):
            if tracker.unbuffer(w.message_id) is not None:
                self._deliver(w)

    def _deliver(self, w: Waiting) -> None:
        """Spec "Deliver Message" (and whatever was waiting for it, iteratively)."""
        entries = self._entries
        log = self._log
        tracker = self._tracker
        naming = self._naming
        events = self._events
        names = self._config.causal_history_floor is not None
        stack = [w]
        while stack:
            w = stack.pop()
            mid = w.message_id
            if mid in entries:
                continue
            if w.lamport > self.lamport:
                self.lamport = w.lamport
            position = log.insert(mid, w.lamport, w.sender_id, w.retrieval_hint, self._last_now)
            if names and w.sender_id != self.sender_id:
                naming.note_logged(mid)
            if w.lost_before:
                log.withhold(mid)
            was_lost, info = tracker.delivered(mid)
            if was_lost:
                self._requests.unwant_lost(mid)
            events.append(
                MessageDelivered(
                    self.channel_id,
                    mid,
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
            if info is None:
                continue
            if (
                info.by != w.sender_id
                and self._config.sync_suppression
                and mid not in self._incoming
            ):
                naming.named_by_others(mid)
            stack.extend(tracker.released_by(info))

    def _declare_lost(self, mid: str, now_ms: int) -> None:
        """``mid`` is lost for ordering: what waits for it is released; it stays wanted
        (asked for again with a backoff) unless it arrived and waits itself, or its
        sender's budget refused it."""
        self._tracker.mark_lost(mid)
        requests = self._requests
        requests.unrequest(mid)
        info = self._missing.get(mid)
        if info is not None and mid not in self._incoming and not requests.refusing(mid):
            requests.want_lost(info.entry, now_ms, info.by)  # still wanted: asked again, backoff
        self._resolve(mid, lost=True)

    def _refuse(self, mid: str, sender_id: str, now_ms: int) -> None:
        """Message ``mid``, which others named, arrived and was refused for its sender's
        budget: while that sender still has ids missing we would refuse it again, so it
        is not asked for (a flood's real messages, named by the honest members that took
        them, would otherwise fill the wanted lost ids and push out honest lines, never
        to be asked for again). Declared lost if missing: nothing waits for it."""
        requests = self._requests
        if not (mid in self._missing or mid in requests.lost_wanted or mid in requests.out):
            return
        requests.refuse(mid, sender_id)
        if mid in self._missing:
            self._declare_lost(mid, now_ms)

    def _cap_missing(self, now_ms: int) -> None:
        """``Config.max_missing``: beyond it the longest-missing ids are declared lost
        (:meth:`sds.missing.MissingTracker.cap_victims`). Call only once the message
        being received is buffered or delivered."""
        if len(self._missing) <= self._config.max_missing:
            return
        for mid in self._tracker.cap_victims():
            self._declare_lost(mid, now_ms)

    # -------------------------------------------------------------------- timers

    def get_timer(self) -> int | None:
        """The earliest deadline at which :meth:`handle_timer` has work, or ``None``."""
        # the minimum kept as it goes (no list: it runs after every delivery)
        best = self._outgoing.next_due()
        tracker = self._tracker
        t = tracker.next_due()
        if t is not None and (best is None or t < best):
            best = t
        t = tracker.next_sweep_ms
        if t is not None and (best is None or t < best):
            best = t
        if self._config.repair_enabled:
            t = self._answers.due.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
            # due requests go out in syncs at most every repair_sync_interval_ms
            t = self._requests.next_due()
            if t is not None and (best is None or t < best):
                best = t
        sync = self._sync
        if (self._log.keys or sync.asked) and (best is None or sync.next_ms < best):
            best = sync.next_ms
        return best

    def handle_timer(self, now_ms: int) -> None:
        """Run everything due by ``now_ms``: resends, repair responses, lost
        timeouts, the incoming sweep, repair requests and the periodic sync.

        Then drain ``datagrams_to_send()`` and ``events()`` and re-arm the timer.
        """
        self._last_now = now_ms
        self._outgoing.run_resends(now_ms)
        self._answers.run_due(now_ms)
        for mid in self._tracker.due_lost(now_ms):
            self._declare_lost(mid, now_ms)
        tracker = self._tracker
        if tracker.next_sweep_ms is not None and tracker.next_sweep_ms <= now_ms:
            tracker.sweep(now_ms)
        requests = self._requests
        repair_due = now_ms >= requests.next_sync_ms and requests.due(now_ms)
        sync = self._sync
        if repair_due or ((self._log.keys or sync.asked) and sync.next_ms <= now_ms):
            self._send_sync(now_ms)

    def _send_sync(self, now_ms: int) -> None:
        """Spec "Periodic Sync Message" (also the carrier of due SDS-R requests)."""
        cfg = self._config
        sync = self._sync
        sync.next_ms = now_ms + sync.delay(1.0, now_ms)
        requests = self._requests.take(
            now_ms, self._tracker.recovery_ms(now_ms), self._last_now,
            cfg.repair_requests_per_sync,
        )
        if requests:  # the channel's repair budget: one such batch per interval
            self._requests.next_sync_ms = now_ms + cfg.repair_sync_interval_ms
        if not sync.decide(now_ms, bool(requests)):
            return
        lamport = self._tick(now_ms)
        message_id = f"{self._rng.getrandbits(256):064x}"
        # At scale a sync names only what is still to name (and the newest entry):
        # the newest entries are named by every content message already, and syncs
        # are few (sync suppression).
        per = cfg.sync_interval_participants
        floor = None
        if per is not None and self._estimates.participants(now_ms) > per:
            floor = SYNC_FLOOR_AT_SCALE
        _, data = self._build(message_id, lamport, None, requests, floor)
        self._datagrams.append(Datagram(data, "sync", message_id))
        req_ids = tuple(e.message_id for e in requests)
        self._events.append(SyncSent(self.channel_id, message_id, lamport, req_ids))
        if requests:
            self._events.append(RepairRequested(self.channel_id, req_ids, message_id))
        if self._missing:
            # Repairs pending: sync sooner so requests and answers flow.
            sync.next_ms = now_ms + sync.delay(0.5, now_ms)

    # ------------------------------------------------------------- persistence

    def export_state(self) -> ChannelState:
        """Snapshot everything the core holds, for storage to persist (:mod:`sds.state`).

        The repair cache (recent wire bytes) is left out: after a restore the core
        asks for old bytes with :class:`~sds.events.RepairDataNeeded`.
        """
        return export_parts(self._parts, self._config, self.lamport, self._last_now)

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
        ch = cls(d["channel_id"], d["sender_id"], config, int(d["lamport"]), rng)
        ch.lamport, ch._last_now = load_parts(
            d, ch._parts, ch._config, ch.lamport, ch._last_now, now_ms
        )
        # Anything that became deliverable (e.g. state saved mid-way) goes now.
        tracker = ch._tracker
        for w in [w for w in tracker.incoming.values() if w.unmet <= 0]:
            tracker.unbuffer(w.message_id)
            ch._deliver(w)
        return ch

    # ------------------------------------------- views for tests and benchmarks
    # (read-only windows onto the parts' state, under the names they had when this
    # class held it; the parts own the data)

    @property
    def _repair_out(self) -> OutgoingRepairBuffer:
        return self._requests.out

    @property
    def _repair_in(self) -> IncomingRepairBuffer:
        return self._answers.due

    @property
    def _lost_wanted(self) -> OutgoingRepairBuffer:
        return self._requests.lost_wanted

    @property
    def _lost_attempts(self) -> dict[str, int]:
        return self._requests.lost_attempts

    @property
    def _out_by(self) -> dict[str, str]:
        return self._requests.out_by

    @property
    def _repair_cache(self) -> OrderedDict[str, bytes]:
        return self._answers.cache

    @property
    def _wire_copies(self) -> OrderedDict[str, int]:
        return self._answers.wire_copies

    @property
    def _heard(self) -> OrderedDict[str, int]:
        return self._estimates.heard

    @property
    def _lack_checked(self) -> OrderedDict[str, tuple[int, int]]:
        return self._naming.lack_checked

    @property
    def _loss_mean(self) -> float:
        return self._estimates.loss_mean

    def _repair_window(self, now_ms: int) -> tuple[int, int]:
        return self._estimates.repair_window(now_ms)

    def _participants(self, now_ms: int) -> int:
        return self._estimates.participants(now_ms)

    def _to_name(self, now_ms: int) -> bool:
        return self._naming.to_name(now_ms)
