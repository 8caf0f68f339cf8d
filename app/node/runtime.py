"""The node runtime: one participant driving the SDS core over a transport and storage.

aioquic-style, on ONE asyncio loop. The core (:class:`sds.Participant`) is
sans-I/O; the node feeds it from three sources and does all the I/O:

* API calls (:meth:`Node.post`/:meth:`Node.send`, :meth:`Node.join`, ...);
* envelopes from the :class:`~app.node.transport.Transport`;
* ONE timer, ``loop.call_later`` re-armed at ``participant.get_timer()`` after
  every round of core calls (paused while the transport is disconnected: then
  nothing could be sent anyway, and resend attempts and lost-timeouts are not
  burnt; on reconnect the due work runs at once).

Every input goes through one worker task that takes whatever is queued (up to
``max_round`` items) and runs a *round*:

1. typed lines are numbered here (their outbox ``local_id``) and handed to
   the core like every other input; the outbox entry, already carrying the
   message id, is recorded with the message in step 4's commit
   (``Batch.record_typed``): one fsync per round of typed lines;
2. each input is handed to the core (``send``, ``receive``, ``handle_timer``),
   and after EVERY core call the node drains the core's events and datagrams:
   messages (with their envelopes), own-state changes, event-log rows and
   outbox transitions (``record_sent``) go into ONE :class:`storage.Batch`;
   sync datagrams are sealed with our identity; ``resend`` datagrams reuse the
   identical stored envelope (stable retrieval hint) and ``repair`` datagrams
   the ORIGINAL envelope of that message (its author signed it);
3. follow-ups that need storage: ``MessagesMissing`` -> ``has_ids`` ->
   ``mark_dependencies_met``; ``RepairDataNeeded`` and envelopes not in memory
   -> ``get_envelopes``;
4. the batch is committed in one awaited call (fsynced when it holds an outbox
   entry or transition), then typed lines' futures resolve (with their
   ``local_id``), events are published to subscribers (a typed line's
   ``own``/``queued`` first), then envelopes are handed to the transport (own
   new messages first), and own messages that left are marked ``sent``;
5. the timer is re-armed.

Durability (see also :mod:`storage.batch` and :mod:`app.node.state_reconcile`):

* a typed line is durable (fsynced, in the outbox with its message, envelope
  and message id) before its future resolves and before its envelope is
  handed to the transport; a line that could not be produced at once is
  durable as pending and produced at start (``pending_outgoing``), exactly
  once; a ``kill -9`` before the commit loses only a line never reported
  accepted, and nothing of it left the process;
* a produced message is recorded (message + envelope + outbox entry) in
  the same transaction as everything else of its round, before its envelope
  is handed to the transport;
* the core's exported state is saved at most every ``state_save_interval_ms``
  (adaptively longer when exporting is slow: it is O(log window)), and at
  shutdown. After ``kill -9`` it may be older than the message log; at start
  :func:`~app.node.state_reconcile.reconcile_state` rebuilds the window, clock and
  outgoing buffer from storage;
* on every (re)connection the node republishes the envelopes of every own
  message still unacknowledged (those recorded but never published after a
  crash, and those typed while disconnected) instead of waiting for the
  resend period; when nobody has been heard in the channel lately (a start, an
  empty channel) only those never published: the others go with the core's
  resends, which back off while nobody is heard and come at once when someone
  is (``sds.backoff``).

Receiving: an envelope is opened (topic -> channel, AEAD, signature, sender
id); rejections are counted by reason and reported as
:class:`~app.node.events.Rejected`. An envelope seen before (a replay guard of
envelope hashes) is a counted duplicate (``duplicate_envelopes``), not a
rejection. The SDS bytes then go to that channel's core with the envelope hash
as retrieval hint (the SDS ``channel_id`` must match the channel of the topic);
the core checks each content message's id against its author, timestamp and
content (``sds.ids``: ``rejected`` ``unverifiable_id`` otherwise) and reports a
second, different message under a held id as a :class:`~app.node.events.Conflict`.

Usage (the UI builds on this)::

    node = await Node.open(data_dir, transport, name="alice")
    node.subscribe(on_event)             # or: async for ev in node.events(): ...
    await node.start()
    await node.join("general", passphrase)          # key derivation runs in a thread
    local_id = await node.send("general", "hello")  # durable when it returns
    node.peers("general"); await node.retry(); await node.leave("general")
    await node.close()                                # state saved, store closed
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sds
from app import AppError
from app.chat.content import decode_content
from app.chat.file_quota import (
    DEFAULT_CHANNEL_FILE_BYTES,
    DEFAULT_FILE_QUOTA_BYTES,
    LEDGER_FILE,
    FileQuota,
)
from app.chat.lines import encode_content, split_typed
from app.chat.log_line import LogLine, log_line
from app.chat.redaction import Deletions, is_tombstone
from app.members import secrets_file as members_file
from app.members.channel import MembersChannel
from app.members.cut import MessageRefused
from app.members.direct import (
    direct_name,
    encode_direct_invite,
    open_direct,
    prefer,
    seal_direct,
)
from app.members.events import MemberInfo, encode_add, is_control
from app.members.group_keys import GroupKeys, repair_horizon_ms
from app.members.invite import (
    DEFAULT_TTL_MS,
    Invite,
    JoinAccepted,
    JoinError,
    JoinRefused,
    check_not_expired,
    decode_invite,
    encode_invite,
    history_page,
    make_invite,
    make_join_accepted,
    make_join_refused,
    make_join_request,
    open_join_answer,
    open_join_request,
    request_digest,
)
from app.members.invites import InviteBook, unwrap, wrap
from app.members.verified import Verified
from app.node.carrying import IDS_REMEMBERED, Carrier
from app.node.clock_guard import (
    ClockEstimate,
    ClockHold,
    Correction,
    LamportMemory,
    VoteRequests,
    describe_offset,
    implausible_time,
    sent_ahead,
)
from app.node.db_pages import page_size_for
from app.node.disk_guard import PROBE_S, DiskFullLineError, DiskGuard, is_disk_full, log_form
from app.node.ephemeral_guard import MAX_EPHEMERAL_BYTES, EphemeralGuard
from app.node.events import (
    CatchUp,
    ChannelJoined,
    ChannelLeft,
    ClockSkew,
    Closed,
    Conflict,
    ConnectionChanged,
    Delivered,
    DiskFull,
    Ephemeral,
    Info,
    InviteMade,
    Lost,
    MembersEvent,
    Missing,
    NodeError,
    NodeEvent,
    OwnMessage,
    PeerInfo,
    PeerSeen,
    Ready,
    Rejected,
)
from app.node.late_arrivals import LateArrivals
from app.node.members_glue import drain_notices, mark_outside_cut, refused_event
from app.node.state_reconcile import reconcile_state
from app.node.transport import Transport, TransportStatus
from app.node.unheard import WAITING_REASONS, UnheardLines, heard_since, nobody_heard
from net.channel_key import (
    DEFAULT_KDF,
    ChannelKey,
    KdfParams,
    check_channel_name,
    derive_channel_key,
)
from net.envelope import (
    EnvelopeError,
    Opened,
    OversizedEnvelope,
    ReplayGuard,
    envelope_hash,
    open_envelope,
    open_for_topic,
    seal,
)
from net.identity import Identity, IdentityFileError
from net.store_sync import CatchUpProgress, StoreSync
from sds.message import parse_pb
from sds.tuning import RESEND_BACKOFF_MAX_MS
from storage import (
    DB_FILENAME,
    LOCK_FILENAME,
    Batch,
    CorruptDatabaseError,
    Cursor,
    MissingHistoryError,
    OwnState,
    StorageError,
    Store,
    StoredMessage,
)
from storage import Identity as StoredIdentity
from storage.schema import DEFAULT_RECENT_WINDOW

__all__ = [
    "ChannelInfo",
    "IdentityMismatchError",
    "Node",
    "NodeClosedError",
    "NodeOptions",
    "PassphraseMismatchError",
    "wall_ms",
]

logger = logging.getLogger("sdschat.node")

T = TypeVar("T")

DEFAULT_STATE_SAVE_MS = 2000
"""Default least interval between two saves of the exported core state.

The saved state only shortens the reconciliation at start
(:mod:`app.node.state_reconcile` rebuilds the window, clock and outgoing buffer
from the message log, which every round commits), so saving it more often
buys little: at 200 ms a node at 25 msg/s spent about a fifth of its CPU
exporting, encoding and writing its state (``bench/e2e_latency.py``).
"""

STATE_SAVE_COST_FACTOR = 100
"""The state-save interval is at least this many times the last export's duration.

Exporting is O(log window) (4.5 ms at 1,500 entries, 40 ms at 10,000) and
blocks the round that carries it; the saved state only shortens the
reconciliation at start (:mod:`app.node.state_reconcile` rebuilds the rest from
storage), so it need not be fresher than that."""

IDENTITY_FILE = "identity.pem"
"""Name of the identity key file inside a data directory."""


def wall_ms() -> int:
    """Wall-clock milliseconds (the core's ``now_ms``; also seeds Lamport clocks)."""
    return time.time_ns() // 1_000_000


class NodeClosedError(AppError, RuntimeError):
    """The node is closing or closed."""


class PassphraseMismatchError(AppError, ValueError):
    """The channel was joined in this data directory with another passphrase (other topic)."""


class IdentityMismatchError(AppError, RuntimeError):
    """The identity key file does not match the identity this database belongs to."""


@dataclass(frozen=True)
class NodeOptions:
    """Tunables of a :class:`Node` (protocol timings live in ``config``).

    Attributes:
        config: the SDS protocol configuration (``sds.Config.fast()`` for demos).
        state_save_interval_ms: least time between two saves of the exported
            core state (it is also saved at shutdown). The interval grows to
            ``STATE_SAVE_COST_FACTOR`` (100) times the last export's duration when
            exporting is slow, so exports take at most ~1% of the node's time.
        max_round: inputs handled per round (one storage commit per round).
        max_queued_envelopes: received envelopes waiting for the worker; beyond
            it the transport is made to wait (backpressure).
        envelope_cache: recent envelopes kept in memory for resends/repairs.
        waiting_envelope_cache: envelopes of received messages still waiting for
            dependencies (stored with the message when it is delivered; one evicted
            here is stored without its envelope and cannot be served for repair).
        publish_rate, publish_burst: token bucket for publishing (the relay
            disconnects clients that exceed its rate: 200 frames/s by default).
        republish_cap: at most this many unacknowledged own messages (the most
            recent) are republished per channel on each (re)connection.
        kdf: Argon2id parameters of channel keys (``TEST_KDF`` in unit tests only).
        clock: wall-clock milliseconds (injectable for tests).
        rng: randomness for the core (sync jitter, ids).
        store_url: a store peer (``sdschat store``) to catch up from and to fetch
            missing dependencies from (:mod:`net.store_sync`); see :meth:`Node.use_store`.
        recent_window: how many of each channel's newest messages keep their
            envelope and causal history in storage (repair answers, export);
            older ones keep a compact row (:class:`storage.batch.RecentWindow`).
        new_history: start a new, empty history when the database is missing but
            the identity key file is there (``--new-history``); refused otherwise.
        inline_commit_messages: a round's batch of at most this many messages
            (and no exported core state) is committed on the loop's thread
            (:meth:`storage.Store.commit_batch_now`) instead of aiosqlite's: the
            two thread switches cost more latency than the small commit; larger
            rounds (a catch-up) overlap their commit with the next round. 0: never.
        nobody_heard_ms: after the first join of a passphrase channel, how long to wait
            for anyone to be heard before saying so (a mistyped passphrase makes a
            different, empty channel).
        file_quota_bytes: file segment bytes kept per sender and channel (across restarts);
            beyond it (and for files above the 16 MiB limit) segments are stored as
            empty placeholders (:mod:`app.chat.file_quota`).
        file_channel_bytes: file segment bytes held per public or passphrase channel, all
            senders together; beyond it the biggest holder's oldest file is emptied
            (:mod:`app.chat.file_quota`). Members channels are not capped (only admitted
            members send; each has the per-sender quota).
    """

    config: sds.Config = field(default_factory=sds.Config)
    state_save_interval_ms: int = DEFAULT_STATE_SAVE_MS
    max_round: int = 256
    max_queued_envelopes: int = 4096
    envelope_cache: int = 512
    waiting_envelope_cache: int = 1024
    publish_rate: float = 160.0
    publish_burst: int = 320
    republish_cap: int = 512
    kdf: KdfParams = DEFAULT_KDF
    clock: Callable[[], int] = wall_ms
    rng: random.Random | None = None
    store_url: str | None = None
    recent_window: int = DEFAULT_RECENT_WINDOW
    new_history: bool = False
    inline_commit_messages: int = 8
    nobody_heard_ms: int = 8000
    file_quota_bytes: int = DEFAULT_FILE_QUOTA_BYTES
    file_channel_bytes: int = DEFAULT_CHANNEL_FILE_BYTES


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """A joined channel."""

    name: str
    key: ChannelKey
    public: bool
    topic: bytes


# ----------------------------------------------------------------- worker inputs


@dataclass(slots=True)
class _Send:
    channel: str
    content: bytes
    text: str
    kind: str
    future: asyncio.Future[int]
    local_id: int | None = None


@dataclass(slots=True)
class _Pending:
    channel: str
    content: bytes
    local_id: int


@dataclass(slots=True)
class _Envelope:
    data: bytes


@dataclass(slots=True)
class _Barrier:
    """Resolved once the round holding it has committed (the worker does not wait)."""

    future: asyncio.Future[None]


@dataclass(slots=True)
class _Tick:
    pass


@dataclass(slots=True)
class _SaveState:
    pass


@dataclass(slots=True)
class _Call:
    fn: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _Stop:
    pass


_Item = _Send | _Pending | _Envelope | _Tick | _SaveState | _Call | _Barrier | _Stop


class _Inbox:
    """FIFO of worker inputs; received envelopes are bounded (their producer waits)."""

    def __init__(self, max_envelopes: int) -> None:
        self._items: deque[_Item] = deque()
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._envelopes = 0
        self._max = max_envelopes

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: _Item) -> None:
        self._items.append(item)
        self._wake.set()

    def put_front(self, items: Sequence[_Item]) -> None:
        self._items.extendleft(reversed(items))
        self._wake.set()

    def requeue_envelopes(self, envelopes: Sequence[bytes]) -> None:
        """Envelopes to receive again first (a members channel's held messages)."""
        self._envelopes += len(envelopes)
        self.put_front([_Envelope(e) for e in envelopes])
    def put_envelope_now(self, item: _Envelope) -> None:
        """An envelope the node itself gives back (held ones): counted, never waits."""
        self._envelopes += 1
        self.put(item)

    async def put_envelope(self, item: _Envelope) -> None:
        while self._envelopes >= self._max:  # bounded: woken when the worker takes some
            self._space.clear()
            await self._space.wait()
        self._envelopes += 1
        self.put(item)

    async def take(self, limit: int) -> list[_Item]:
        while not self._items:  # bounded: woken by put
            self._wake.clear()
            await self._wake.wait()
        out: list[_Item] = []
        while self._items and len(out) < limit:
            item = self._items.popleft()
            if isinstance(item, _Envelope):
                self._envelopes -= 1
            out.append(item)
        if self._envelopes < self._max:
            self._space.set()
        return out


@dataclass(slots=True)
class _Receiving:
    """The envelope whose SDS bytes the core is processing right now."""

    hash: bytes
    envelope: bytes
    sds_bytes: bytes
    consumed: bool = False  # delivered at once: its envelope went with the message
    settled: bool = False  # sync, ephemeral or dropped: nothing will wait for it


@dataclass(slots=True)
class _Round:
    """What one round produced, to commit and then publish."""

    batch: Batch = field(default_factory=Batch)
    events: list[NodeEvent] = field(default_factory=list)
    delivered: list[tuple[str, str, Delivered]] = field(default_factory=list)
    own_new: list[tuple[str, str, bytes]] = field(default_factory=list)
    publish: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    need_envelope: list[tuple[str, str, str]] = field(default_factory=list)
    missing: dict[str, set[str]] = field(default_factory=dict)
    repair_needed: dict[str, set[str]] = field(default_factory=dict)
    local_id: int | None = None
    typed_at: int | None = None  # the line being produced is new: recorded in one step
    typed: list[_Send] = field(default_factory=list)  # futures resolved after the commit
    current: _Receiving | None = None  # the envelope being received
    core_called: bool = False
    received: list[bytes] = field(default_factory=list)  # envelope hashes taken in
    # members channels' read marks at this round's state save: their keys go once it
    # is committed (GroupKeys.read_marks / forget_read)
    read_marks: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)


#: Drops that do not discard the message being received (a bad filter is only
#: ignored for acks; a buffer eviction concerns an older waiting message).
_NOT_FATAL_DROPS = frozenset(
    {
        sds.DropReason.BAD_FILTER,
        sds.DropReason.SATURATED_FILTER,
        sds.DropReason.INCOMING_BUFFER_FULL,
    }
)

#: Stored messages read at join to seed the late-arrival rule (the TUI's first page).
_SEED_PAGE = 200


def _coalesce_lost(events: list[NodeEvent]) -> list[NodeEvent]:
    """One :class:`Lost` per channel per round, at the place of its first one, listing
    every id given up in the round (the core reports them one by one)."""
    firsts: dict[str, int] = {}
    ids: dict[str, list[str]] = {}
    waiting: dict[str, dict[str, None]] = {}
    out: list[NodeEvent] = []
    for ev in events:
        if not isinstance(ev, Lost):
            out.append(ev)
            continue
        if ev.channel not in firsts:
            firsts[ev.channel] = len(out)
            out.append(ev)
            ids[ev.channel] = []
            waiting[ev.channel] = {}
        ids[ev.channel].extend(ev.message_ids or (ev.message_id,))
        waiting[ev.channel].update(dict.fromkeys(ev.waiting))
    for ch, at in firsts.items():
        first = out[at]
        assert isinstance(first, Lost)
        if len(ids[ch]) > 1:
            out[at] = Lost(ch, first.message_id, tuple(waiting[ch]), tuple(ids[ch]), first.ts)
    return out


#: Drops of a message the core will accept later (our clock caught up, the
#: sender's missing ids resolved): the envelope's resend is not a replay.
_REFUSED_FOR_NOW = frozenset({sds.DropReason.CLOCK_AHEAD, sds.DropReason.SENDER_BUDGET})

#: Own states only move forward; an acknowledgement that comes after the core gave
#: up on a message (failed) still says it arrived.
_RANK = {
    OwnState.QUEUED: 0,
    OwnState.SENT: 1,
    OwnState.POSSIBLY_ACKNOWLEDGED: 2,
    OwnState.FAILED: 3,
    OwnState.ACKNOWLEDGED: 4,
}


@dataclass(slots=True)
class _Peer:
    name: str | None = None
    channels: set[str] = field(default_factory=set)
    last_seen_ms: int = 0
    messages: int = 0


class _Pacer:
    """Token bucket for publishing (waits instead of exceeding the relay's rate)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.capacity = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    async def take(self) -> None:
        for _ in range(1_000):  # bounded; each pass sleeps until a token is due
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return
            await asyncio.sleep((1.0 - self.tokens) / self.rate)


class Node:
    """One sdschat participant: identity, store, SDS core, channels and a transport.

    Build it with :meth:`open` (or the constructor with an open store), subscribe
    to its events, :meth:`start` it, :meth:`join` channels, :meth:`send` lines,
    and :meth:`close` it. All methods must be called from the loop it runs on.
    """

    def __init__(
        self,
        store: Store,
        identity: Identity,
        transport: Transport,
        *,
        name: str,
        options: NodeOptions | None = None,
    ) -> None:
        self.options = options if options is not None else NodeOptions()
        self.store = store
        self.identity = identity
        self.sender_id = identity.sender_id
        self.transport = transport
        self.name = name
        self.counters: Counter[str] = Counter()
        """Counters: ``received``, ``delivered``, ``published``, ``rejected_<reason>``,
        ``dropped_<reason>`` (core drops), ``internal_errors``..."""
        self._clock = self.options.clock
        rng = self.options.rng if self.options.rng is not None else random.Random()
        config = self.options.config
        if not config.verify_message_ids:  # envelopes bind sender_id to a key: check ids
            config = config.with_changes(verify_message_ids=True)
        if config.resend_backoff_max_ms is None:  # nobody heard: resends back off (sds.backoff)
            config = config.with_changes(resend_backoff_max_ms=max(
                RESEND_BACKOFF_MAX_MS, config.resend_unacknowledged_ms))  # fmt: skip
        self._participant = sds.Participant(self.sender_id, config, rng)
        self._channels: dict[str, ChannelInfo] = {}
        self._by_topic: dict[bytes, str] = {}
        self._replay = ReplayGuard()
        self._carrier = Carrier(IDS_REMEMBERED)  # app/node/carrying.py
        self._envelopes: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._waiting_envelopes: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self._own_state: dict[tuple[str, str], OwnState] = {}
        self._local_ids: dict[tuple[str, str], int] = {}
        self._own_text: dict[tuple[str, str], tuple[str, str]] = {}
        # typed content (app.chat.content) of own unacknowledged messages: resent as is
        self._own_typed: dict[tuple[str, str], bytes] = {}
        self._failed: list[tuple[str, str, bytes]] = []
        self._late = LateArrivals(self.sender_id)  # the ↺ recovered rule
        self._ephemeral = EphemeralGuard()  # size cap and per-sender rate (received)
        self._files = FileQuota(  # app/chat/file_quota.py
            self.options.file_quota_bytes, store.data_dir / LEDGER_FILE,
            channel_bytes=self.options.file_channel_bytes, store=store, counters=self.counters,
            capped=lambda ch: ch not in self._members,  # members channels: admitted senders
        )
        self._disk = DiskGuard(store.data_dir)  # a full disk: app/node/disk_guard.py
        self._disk_probe: asyncio.TimerHandle | None = None
        # a skewed wall clock: app/node/clock_guard.py
        self._clock_est = ClockEstimate(self.options.config.max_clock_skew_ms)
        #: The correction the cores run on (``_now``): the estimate's, once the cores
        #: have been moved to it (``_apply_clock_offset``), never before.
        self._offset_ms = 0
        self._clock_hold = ClockHold()
        self._clock_votes = VoteRequests(self.options.config.max_clock_skew_ms)
        self._hold_timer: asyncio.TimerHandle | None = None
        self._lamports = LamportMemory()
        self._unheard = UnheardLines()  # own lines nobody was there to hear (app/node/unheard.py)
        self._deletions = Deletions()  # deletions this run, for what comes after them
        self._carry_states: list[tuple[str, str, OwnState]] = []
        self._peers: dict[str, _Peer] = {}
        self._listeners: list[Callable[[NodeEvent], None]] = []
        self._queues: list[asyncio.Queue[NodeEvent | None]] = []
        self._inbox: _Inbox | None = None
        self._worker: asyncio.Task[None] | None = None
        self._tail: asyncio.Task[None] | None = None
        """The previous round's commit-emit-publish, running while the next round is
        worked out (see :meth:`_safe_round`)."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._tick_queued = False
        self._save_timer: asyncio.TimerHandle | None = None
        self._state_dirty = False
        self._last_state_save = 0
        self._state_interval = self.options.state_save_interval_ms
        self._connected = False
        self._started = False
        self._closing = False
        self._closed = False
        self._pacer = _Pacer(self.options.publish_rate, self.options.publish_burst)
        self._next_local_id = 0
        """Outbox id of the next typed line (numbered here: see ``_send_typed``)."""
        self.store_sync: StoreSync | None = None
        """The store peer in use (:meth:`use_store`), if any."""
        self._members: dict[str, MembersChannel] = {}
        """Members channels by name (app/members): keys, member list, gate."""
        self._members_dirty: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()  # invite answers under way
        self._invites: InviteBook | None = None  # opened with the store (open invites)
        self._verified: Verified | None = None
        self._join_requests: dict[str, tuple[bytes, Invite, Any]] = {}  # awaiting /approve
        self._approved: set[str] = set()
        self._invite_topics: set[bytes] = set()  # subscribed for invites (ours or ours to redeem)
        self._invite_waiters: dict[bytes, tuple[Invite, GroupKeys, bytes,
                                                asyncio.Future[JoinAccepted | JoinRefused]]] = {}

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        data_dir: str | Path,
        transport: Transport,
        *,
        name: str | None = None,
        options: NodeOptions | None = None,
    ) -> Node:
        """Open ``data_dir`` (store + identity key file, created if missing).

        ``name`` is the display name (default: the stored one, else
        ``anon-<sender id prefix>``).

        Raises:
            storage.DataDirLockedError, storage.NewerSchemaError,
            storage.CorruptDatabaseError: from :meth:`storage.Store.open`.
            storage.MissingHistoryError: no database beside an existing key file.
            net.identity.IdentityFileError: an unusable key file.
            IdentityMismatchError: the key file is not this database's identity.

        Nothing is created or written when it raises: an empty database file beside
        an existing key file, a missing one (unless ``options.new_history``), and a
        missing key file beside a database that has an identity, are refused as
        they are.
        """
        directory = Path(data_dir)
        key_file, db_file = directory / IDENTITY_FILE, directory / DB_FILENAME
        opts = options if options is not None else NodeOptions()
        used = key_file.exists() and (directory / LOCK_FILENAME).exists()
        if used and not db_file.exists() and not opts.new_history:
            # identity.pem alone may be a key the person put there for a first start;
            # with the lock file beside it, sdschat ran here and kept a history
            raise MissingHistoryError(
                db_file,
                f"the database is missing, but {IDENTITY_FILE} beside it shows this "
                "directory was used: restore the file, or start a new, empty history "
                "with --new-history (peers and a store peer still hold the channel)",
            )
        if key_file.exists() and db_file.is_file() and db_file.stat().st_size == 0:
            # the key file is written after the schema: this file held a history once
            raise CorruptDatabaseError(
                db_file,
                f"the file is empty, but {IDENTITY_FILE} beside it shows this directory "
                "was used: its history was lost; move the file away to start a new one",
            )
        store = await Store.open(directory, recent_window=opts.recent_window,
                                 page_size=page_size_for(opts.config))  # fmt: skip
        try:
            stored = await store.load_identity()
            if stored is not None and not key_file.exists():
                raise IdentityFileError(
                    f"{key_file} is missing, but this data directory's messages belong to "
                    f"{stored.sender_id}; restore the key file or use another --data-dir "
                    "(a new key would be a different participant)"
                )
            identity = await asyncio.to_thread(Identity.load_or_create, key_file)
            if stored is not None and stored.sender_id != identity.sender_id:
                raise IdentityMismatchError(
                    f"{key_file} holds identity {identity.sender_id}, but "
                    f"this data directory's messages belong to {stored.sender_id}; restore "
                    "the original key file or use another --data-dir"
                )
            if name:
                display = name
            elif stored is not None:
                display = stored.display_name
            else:
                display = f"anon-{identity.sender_id[:6]}"
            record = StoredIdentity(display, identity.sender_id, identity.public_key, IDENTITY_FILE)
            if record != stored:  # an unchanged identity is not written again
                await store.save_identity(record)
            next_local_id = await store.next_local_id()
        except BaseException:
            await store.close()
            raise
        node = cls(store, identity, transport, name=display, options=options)
        node._next_local_id = next_local_id
        return node

    async def start(self) -> None:
        """Start the worker and the transport (joined channels are subscribed first)."""
        if self._started:
            raise RuntimeError("node already started")
        self._started = True
        if not self._next_local_id:  # constructed without open()
            self._next_local_id = await self.store.next_local_id()
        self._inbox = _Inbox(self.options.max_queued_envelopes)
        self._worker = asyncio.create_task(self._run(), name="sdschat-node")
        self.transport.start(self._on_envelope, self._on_status)
        self._emit(Ready(self.sender_id, self.name, str(self.store.data_dir)))
        if self.options.store_url is not None:
            self.use_store(self.options.store_url)

    def use_store(self, url: str) -> None:
        """Use the store peer at ``url``: catch every joined channel up now, on every
        (re)connection and join, and fetch missing dependencies from it by hint.

        A second call with another URL replaces the first store.
        """
        self._check_open()
        if self.store_sync is not None:
            if self.store_sync.url == url:
                return
            old = self.store_sync
            asyncio.get_running_loop().create_task(old.close())
        self.store_sync = StoreSync(
            url,
            deliver=self._on_envelope,
            progress=self._on_catch_up,
            barrier=self._committed,
            data_dir=self.store.data_dir,
        )
        self.store_sync.start()
        self.store_sync.set_connected(self._connected)
        for info in self._channels.values():
            self.store_sync.catch_up_soon(info.name, info.topic)
        self._emit(Info(f"using the store peer at {url}", {"store": url}))

    def _committed(self) -> asyncio.Future[None]:
        """Resolves once every input queued before this call has been worked out and
        committed, and its events emitted. Unlike ``_call_in_worker`` it does not make
        the worker wait for the commit: it is a marker in the next round."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._inbox is None:
            future.set_result(None)
        else:
            self._inbox.put(_Barrier(future))
        return future

    def _on_catch_up(self, p: CatchUpProgress) -> None:
        self._emit(CatchUp(p.channel, p.state, p.done, p.total, p.store, p.text, p.detail))

    async def close(self, timeout: float = 10.0) -> None:
        """Finish queued work, disconnect, save every channel's state, close the store.

        Each step is bounded by ``timeout`` seconds (a stuck worker is cancelled);
        the store is closed in any case.
        """
        if self._closed or self._closing:
            return
        self._closing = True
        try:
            worker = self._worker
            if worker is not None and not worker.done():
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(timeout):
                        await self._call_in_worker(self._noop)  # everything queued is done
            self._cancel_timers()
            if self.store_sync is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(timeout):
                        await self.store_sync.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(timeout):
                    await self.transport.close()
            if worker is not None and self._inbox is not None:
                self._inbox.put(_Stop())
                try:
                    async with asyncio.timeout(timeout):
                        await asyncio.shield(worker)
                except TimeoutError:
                    worker.cancel()
                    self._emit(NodeError("the node's worker did not stop in time; cancelled"))
                except Exception:
                    pass
                if not worker.done():
                    worker.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await worker
            self._cancel_timers()
            if not self._disk.full:  # else the core holds what was never stored
                try:
                    async with asyncio.timeout(timeout):
                        await self._save_all_states(durable=True)
                    self._forget_read({ch: mc.group_keys.read_marks()  # all stored now
                                       for ch, mc in self._members.items()})  # fmt: skip
                except Exception as exc:
                    if not is_disk_full(exc):
                        raise
                    self._emit(NodeError("disk full: protocol state not saved (rebuilt "
                                         "from the stored log at the next start)"))
        finally:
            self._closed = True
            self._files.stop()  # evictions, the ledger (app/chat/file_quota.py)
            self._emit(Closed(dict(self.counters)))
            for q in self._queues:
                q.put_nowait(None)
            await self.store.close()

    async def __aenter__(self) -> Node:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has completed."""
        return self._closed

    # ------------------------------------------------------------------ events API

    def subscribe(self, callback: Callable[[NodeEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` (on the loop, must not block) for every event.

        Returns a function that unsubscribes.
        """
        self._listeners.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(callback)

        return unsubscribe

    async def events(self) -> AsyncIterator[NodeEvent]:
        """Every event from now on, until the node closes (an unbounded queue per caller)."""
        queue: asyncio.Queue[NodeEvent | None] = asyncio.Queue()
        self._queues.append(queue)
        try:
            while True:  # ends when close() enqueues None
                ev = await queue.get()
                if ev is None:
                    return
                yield ev
        finally:
            with contextlib.suppress(ValueError):
                self._queues.remove(queue)

    def _emit(self, event: NodeEvent) -> None:
        for cb in tuple(self._listeners):
            try:
                cb(event)
            except Exception:
                logger.exception("node event listener failed")
        for q in self._queues:
            q.put_nowait(event)

    # ------------------------------------------------------------------ public API

    @property
    def connected(self) -> bool:
        """Whether the transport is connected."""
        return self._connected

    @property
    def channels(self) -> dict[str, ChannelInfo]:
        """Joined channels by name (a copy)."""
        return dict(self._channels)

    def core(self, channel: str) -> sds.Channel:
        """The SDS core of ``channel`` (read-only use: inspection, stats)."""
        return self._participant.channel(channel)

    def peers(self, channel: str | None = None) -> list[PeerInfo]:
        """Participants heard from (in ``channel``, or in any), most recently seen first."""
        out = [
            PeerInfo(sid, p.name, tuple(sorted(p.channels)), p.last_seen_ms, p.messages)
            for sid, p in self._peers.items()
            if channel is None or channel in p.channels
        ]
        out.sort(key=lambda p: -p.last_seen_ms)
        return out

    async def join(
        self,
        channel: str,
        passphrase: str | bytes | None = None,
        *,
        key: ChannelKey | None = None,
    ) -> ChannelInfo:
        """Join ``channel`` (no passphrase: a PUBLIC channel anyone can read) or resume it.

        The key is derived (Argon2id, in a thread) unless ``key`` is given. The
        channel's saved core state is restored and reconciled with storage,
        its topic subscribed, and typed lines left in its outbox are sent.

        Raises:
            PassphraseMismatchError: this data directory joined ``channel`` with
                another passphrase before.
            ValueError: a channel name a person may not use
                (:func:`net.channel_key.check_channel_name`).
        """
        self._check_open()
        check_channel_name(channel)
        if key is None and channel not in self._members:
            mc = await asyncio.to_thread(members_file.load, self.store.data_dir, channel)
            if mc is not None:  # a members channel: its keys are in the data directory
                mc.signer = self.identity
                self._members[channel] = mc
                self._members_dirty.add(channel)  # a genesis may be due (an upgrade)
        if key is None and channel in self._members:
            key = self._members[channel].sending_key()
        if key is None:
            key = await asyncio.to_thread(
                derive_channel_key, channel, passphrase, params=self.options.kdf
            )
        if key.channel != channel:
            raise ValueError("key belongs to another channel")
        chosen = key

        async def do_join() -> ChannelInfo:
            return await self._join(chosen)

        info: ChannelInfo = await self._call_in_worker(do_join)
        if channel in self._members:
            await self._subscribe_invites(channel)
        return info

    async def leave(self, channel: str) -> bool:
        """Leave ``channel`` (its history stays); False if it was not joined."""
        self._check_open()

        async def do_leave() -> bool:
            return await self._leave(channel)

        left: bool = await self._call_in_worker(do_leave)
        return left

    def post(self, channel: str, text: str, kind: str = "msg") -> asyncio.Future[int]:
        """Queue a typed line for ``channel``; the future resolves with its outbox ``local_id``.

        The future resolves once the line is durable (fsynced), before it is
        sent. Lines are sent in the order they were posted.

        Raises:
            KeyError: ``channel`` is not joined.
            ValueError: empty text, unknown kind, or content above the limit.
            NodeClosedError: the node is closing.
        """
        self._check_open()
        if channel not in self._channels:
            raise KeyError(f"channel {channel!r} is not joined")
        content = encode_content(text, self.name, kind)
        limit = self.options.config.max_content_bytes
        if len(content) > limit:
            raise ValueError(f"message is {len(content)} bytes encoded; the limit is {limit}")
        assert self._inbox is not None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._inbox.put(_Send(channel, content, text, kind, future))
        return future

    def post_content(self, channel: str, content: bytes) -> asyncio.Future[int]:
        """Queue ready-made content bytes (typed content, :mod:`app.chat.content` and
        :mod:`app.chat.files`) for ``channel``, as :meth:`post` does for a typed line.

        Raises:
            KeyError: ``channel`` is not joined.
            ValueError: empty content or content above the limit.
            NodeClosedError: the node is closing.
        """
        self._check_open()
        if channel not in self._channels:
            raise KeyError(f"channel {channel!r} is not joined")
        limit = self.options.config.max_content_bytes
        if not content or len(content) > limit:
            raise ValueError(f"content is {len(content)} bytes; it must be 1..{limit}")
        summary = decode_content(content)
        assert self._inbox is not None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._inbox.put(_Send(channel, content, summary.text, summary.kind, future))
        return future

    async def post_contents(self, channel: str, contents: Sequence[bytes]) -> list[int]:
        """Queue several typed contents (a file's manifest and segments) durably in ONE
        fsynced commit before any of them is made or sent; their ``local_id`` s.

        A sender killed mid-send then finishes at its next start (the outbox holds every
        part as pending: ``pending_outgoing``), instead of leaving receivers with part of
        a file for ever (issue 26 §12).

        Raises:
            KeyError: ``channel`` is not joined.
            ValueError: an empty part or one above the limit.
            NodeClosedError: the node is closing.
        """
        self._check_open()
        if channel not in self._channels:
            raise KeyError(f"channel {channel!r} is not joined")
        limit = self.options.config.max_content_bytes
        parts = [bytes(c) for c in contents]
        for c in parts:
            if not c or len(c) > limit:
                raise ValueError(f"content is {len(c)} bytes; it must be 1..{limit}")

        async def enqueue() -> list[int]:
            if self._disk.full:
                raise DiskFullLineError("disk full: nothing was stored or sent")
            first = self._next_local_id
            ids = list(range(first, first + len(parts)))
            batch = Batch(durable=True)
            now = self._now()
            for local_id, content in zip(ids, parts, strict=True):
                batch.enqueue_numbered(local_id, channel, content, now)
            await self.store.commit_batch(batch, now_ms=now)
            self._next_local_id = first + len(parts)
            assert self._inbox is not None
            for local_id, content in zip(ids, parts, strict=True):
                self._inbox.put(_Pending(channel, content, local_id))
            return ids

        return await self._call_in_worker(enqueue)

    async def send(self, channel: str, text: str, kind: str = "msg") -> int:
        """:meth:`post` and wait until the line is durable; returns its ``local_id``."""
        return await self.post(channel, text, kind)

    async def retry(self, channel: str | None = None) -> int:
        """Publish again the identical envelopes of the own messages that failed (in
        this run, or the newest 1,000 per channel of earlier runs) and were not
        acknowledged since; how many. The same bytes, so the same message id: a member
        who had one after all drops the copy (a retry never shows a line twice)."""
        self._check_open()
        again = [f for f in self._failed if channel is None or f[0] == channel]
        self._failed = [f for f in self._failed if f not in again]
        by_channel: dict[str, list[str]] = {}
        for ch, mid, _content in again:
            if ch in self._channels:
                by_channel.setdefault(ch, []).append(mid)
        count = 0
        for ch, mids in by_channel.items():
            cached = {m: self._envelopes.get((ch, m)) for m in mids}
            stored = await self.store.get_envelopes(ch, [m for m, e in cached.items() if e is None])
            for mid in mids:
                env = cached[mid] or stored.get(mid)
                if env is None:
                    self.counters["retry_without_envelope"] += 1
                    continue
                count += 1
                await self._publish(env)
        self.counters["retried"] += count
        return count

    async def send_ephemeral(self, channel: str, content: bytes) -> bool:
        """Broadcast an SDS ephemeral message (typing indicators): not logged, never resent.

        Receivers get an :class:`~app.node.events.Ephemeral` event. Returns whether
        it left (False while disconnected: nothing is queued).

        Raises:
            KeyError: ``channel`` is not joined.
            ValueError: empty content, or above MAX_EPHEMERAL_BYTES (1 KiB).
            NodeClosedError: the node is closing.
        """
        self._check_open()
        info = self._channels.get(channel)
        if info is None:
            raise KeyError(f"channel {channel!r} is not joined")
        if len(content) > MAX_EPHEMERAL_BYTES:
            raise ValueError(
                f"ephemeral content is {len(content)} bytes; the limit is {MAX_EPHEMERAL_BYTES}"
            )
        if not self.transport.connected:
            return False
        now = self._now()  # (members channels: under the outer layer only)
        data = self._participant.channel(channel).send_ephemeral(content, now)
        self.counters["ephemeral_sent"] += 1
        return await self._publish(seal(data, self.identity, self._seal_key(channel)))

    async def set_name(self, name: str) -> None:
        """Change the display name carried by our next messages (stored)."""
        self._check_open()
        self.name = name
        await self.store.save_identity(
            StoredIdentity(name, self.sender_id, self.identity.public_key, IDENTITY_FILE)
        )

    async def page(
        self, channel: str, *, before: Cursor | None = None, limit: int = 50
    ) -> list[LogLine]:
        """A page of ``channel``'s stored log in SDS order (newest ``limit`` by default).

        ``LogLine.position`` is relative to the page (use cursors to scroll).
        """
        entries = await self.store.page(channel, before=before, limit=limit)
        return [log_line(e, i) for i, e in enumerate(entries)]

    def stats(self) -> dict[str, Any]:
        """Counters plus each channel's core buffer sizes."""
        out: dict[str, Any] = {
            "counters": dict(self.counters),
            "channels": {n: self._participant.channel(n).stats() for n in self._channels},
            "connected": self._connected,
        }
        if self.store_sync is not None:
            out["store"] = {"url": self.store_sync.url, **self.store_sync.counters}
        return out

    # ------------------------------------------------------------------ plumbing

    def _check_open(self) -> None:
        if self._closing or self._closed:
            raise NodeClosedError("the node is closing")
        if self._inbox is None:
            raise RuntimeError("call start() first")

    async def _noop(self) -> None:
        return None

    async def _call_in_worker(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` inside the worker, between rounds (serialised with the core)."""
        assert self._inbox is not None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inbox.put(_Call(fn, future))
        result: T = await future
        return result

    def now_ms(self) -> int:
        """The node's wall clock in milliseconds (what ``last_seen_ms`` is measured in)."""
        return self._clock()

    def _now(self) -> int:
        return self._clock() + self._offset_ms  # corrected: app/node/clock_guard.py

    async def _on_envelope(self, data: bytes) -> None:
        if self._inbox is None or self._closed:
            return
        await self._inbox.put_envelope(_Envelope(bytes(data)))

    def _on_status(self, status: TransportStatus) -> None:
        was = self._connected
        self._connected = status.connected
        if was != self._connected:  # lost timeouts count only connected time
            self._participant.set_connected(self._connected, self._now())
        self._emit(ConnectionChanged(status.state, status.reason, status.retry_in, status.attempt))
        if self._connected and not was and self._inbox is not None and not self._closing:
            loop = asyncio.get_running_loop()
            self._inbox.put(_Call(self._republish_outgoing, loop.create_future()))
            self._inbox.put(_Tick())
            if self.store_sync is not None:  # what was missed while away
                for info in self._channels.values():
                    self.store_sync.catch_up_soon(info.name, info.topic)
        if self.store_sync is not None and not self._closing:
            self.store_sync.set_connected(self._connected)
        self._rearm()

    # ------------------------------------------------------------------ timers

    def _cancel_timers(self) -> None:
        for handle in (self._timer, self._save_timer, self._disk_probe, self._hold_timer):
            if handle is not None:
                handle.cancel()
        self._timer = self._save_timer = self._disk_probe = self._hold_timer = None
        self._timer_at = None

    def _rearm(self) -> None:
        """Re-arm the ONE protocol timer at ``participant.get_timer()``."""
        if self._closed or self._inbox is None:
            return
        deadline = self._participant.get_timer() if self._connected else None
        if deadline == self._timer_at and (deadline is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is None:
            return
        delay = max(0.0, (deadline - self._now()) / 1000.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if self._inbox is not None and not self._tick_queued:
            self._tick_queued = True
            self._inbox.put(_Tick())

    def _arm_state_save(self) -> None:
        if not self._state_dirty or self._save_timer is not None or self._closed:
            return
        due = self._last_state_save + self._state_interval
        delay = max(0.0, (due - self._now()) / 1000.0)

        def fire() -> None:
            self._save_timer = None
            if self._inbox is not None:
                self._inbox.put(_SaveState())

        self._save_timer = asyncio.get_running_loop().call_later(delay, fire)

    # ------------------------------------------------------------------ worker

    async def _run(self) -> None:
        try:
            await self._run_rounds()
        finally:
            tail = self._tail
            if tail is not None and not tail.done():  # cancelled (a crash, a stuck close)
                tail.cancel()

    async def _run_rounds(self) -> None:
        assert self._inbox is not None
        inbox = self._inbox
        while True:  # ends at _Stop
            items = await inbox.take(self.options.max_round)
            normal: list[_Item] = []
            for item in items:
                if isinstance(item, _Stop):
                    if normal:
                        await self._safe_round(normal)
                    await self._finish_tail()
                    return
                if isinstance(item, _Call):
                    if normal:
                        await self._safe_round(normal)
                        normal = []
                    await self._finish_tail()  # a call sees every earlier round committed
                    try:
                        item.future.set_result(await item.fn())
                    except Exception as exc:
                        if not item.future.done():
                            item.future.set_exception(exc)
                        else:
                            self._internal_error(exc)
                    continue
                normal.append(item)
            if normal:
                await self._safe_round(normal)

    def _internal_error(self, exc: BaseException) -> None:
        self.counters["internal_errors"] += 1
        logger.error("node round failed", exc_info=exc)
        self._emit(NodeError(f"internal error: {type(exc).__name__}: {exc}"))

    async def _safe_round(self, items: list[_Item]) -> None:
        """Work out one round, then hand its commit to SQLite's thread and return.

        A round is: the core calls for its items (in memory), then ONE storage
        transaction, then its events and its envelopes. The transaction runs in
        aiosqlite's thread (SQLite releases the GIL) while the next round's
        envelopes are opened and fed to the core here, so the two overlap on two
        cores. Guarantees are unchanged: a round's events are emitted and its
        envelopes published only after its own transaction committed (nothing is
        broadcast before it is durable), rounds finish in order, at most one
        commit is in flight, and the batch (including the exported core state) is
        fully built before the next round touches the core. A small round
        (``_commits_inline``) commits on the loop's thread and finishes here.
        """
        try:
            if self._disk.full:  # nothing is stored: refuse until there is room again
                await self._finish_tail()
                if not await self._recover_disk():
                    self._refuse_while_full(items)
                    return
            out = await self._round(items)
            await self._finish_tail()
            if self._disk.full:  # the previous round was not stored: nor is this one
                self._disk_round_failed(out, items, DiskFullLineError("previous round"))
                return
            if self._commits_inline(out.batch):
                # committed on this thread (see _commit): no task and no extra pass
                # of the loop between the round and its events (each pass of a busy
                # loop runs other work first)
                await self._finish_round(out, items)
                return
            self._tail = asyncio.create_task(self._finish_round(out, items), name="sdschat-commit")
            await asyncio.sleep(0)  # let it hand the transaction to SQLite's thread now
        except Exception as exc:
            self._round_failed(exc, items)
        finally:
            self._rearm()
            self._arm_state_save()

    async def _round_now(self) -> None:
        """A round with no items (the core's pending events, carried own states, a state
        save), committed, emitted and published before returning: for join and leave,
        which run between rounds (a ``_Call``: every earlier round is committed)."""
        await self._finish_tail()
        out = await self._round([])
        await self._finish_round(out, [])
        # A joined (or restored) channel has deadlines of its own: syncs, due SDS-R
        # requests, resends. Without this, a node restarted into a silent channel
        # waited for someone else's envelope before running any of them.
        self._rearm()

    def _round_failed(self, exc: Exception, items: Sequence[_Item]) -> None:
        self._internal_error(exc)
        for item in items:
            if isinstance(item, _Send) and not item.future.done():
                item.future.set_exception(exc)
        _release_barriers(items)

    async def _finish_tail(self) -> None:
        """Wait for the previous round's commit, events and publishing."""
        tail, self._tail = self._tail, None
        if tail is not None:
            await tail

    async def _finish_round(self, out: _Round, items: Sequence[_Item]) -> None:
        try:
            try:
                await self._commit(out)
            except Exception as exc:
                if not is_disk_full(exc):
                    raise
                self._disk_round_failed(out, items, exc)
                return
            self._forget_read(out.read_marks)
            await self._redact_deleted(out.events)
            for it in out.typed:  # durable now (fsynced), nothing of it published yet
                if not it.future.done() and it.local_id is not None:
                    it.future.set_result(it.local_id)
            for ev in _coalesce_lost(out.events):
                self._emit(ev)
            _release_barriers(items)
            await self._publish_round(out)
        except Exception as exc:
            self._round_failed(exc, items)

    async def _redact_deleted(self, events: Sequence[NodeEvent]) -> None:
        """Deletions delivered or sent this round: their targets' text leaves the disk
        (app/chat/redaction.py)."""
        deletions = self._deletions
        for ev in events:
            late = None
            if isinstance(ev, Delivered) and ev.kind == "delete":
                ch, sender, text = ev.channel, ev.sender_id, ev.text
            elif isinstance(ev, OwnMessage) and ev.state == "logged" and ev.kind == "delete":
                ch, sender, text = ev.channel, self.sender_id, ev.text or ""
            elif isinstance(ev, Delivered) and deletions and (late := deletions.pending(
                    ev.channel, ev.message_id, ev.sender_id, ev.kind, ev.text)):  # fmt: skip
                ch, sender = ev.channel, ev.sender_id  # it came after its deletion
            else:
                continue
            try:
                self.counters["redacted"] += (
                    await deletions.stored(self.store, ch, sender, late) if late
                    else await deletions.deleted(self.store, ch, sender, split_typed(text)[0])
                )
            except StorageError as exc:  # the deletion stands; its text stays on disk
                self._emit(NodeError(f"could not erase a deleted message's text: {exc}"))

    async def _round(self, items: Sequence[_Item]) -> _Round:
        """The core calls of one round; returns it with its batch ready to commit."""
        out = _Round()
        save_requested = False
        now = self._now()
        for item in items:
            if isinstance(item, _Envelope):
                try:
                    self._receive(item.data, now, out)
                except Exception as exc:  # a bug met by one envelope: keep the others
                    out.current = None
                    self.counters["receive_errors"] += 1
                    self._internal_error(exc)
            elif isinstance(item, _Send):
                self._send_typed(item, now, out)
            elif isinstance(item, _Pending):
                self._core_send(item.channel, item.content, item.local_id, now, out)
            elif isinstance(item, _Tick):
                self._tick_queued = False
                if self._connected:
                    self._participant.handle_timer(now)
                    out.core_called = True
                    self._drain(now, out)
            elif isinstance(item, _SaveState):
                save_requested = True
        self._drain(now, out)
        await self._follow_ups(now, out)
        if self._members_dirty:
            self._members_round(now, out)
            await self._follow_ups(now, out)
        if out.core_called:
            self._state_dirty = True
        self._complete_batch(out, now, force_state=save_requested)
        return out

    def _send_typed(self, it: _Send, now: int, out: _Round) -> None:
        """A typed line: numbered here, produced by the core, and recorded together with
        its message in the round's ONE fsynced commit (``Batch.record_typed``); its
        future and its ``queued`` event follow that commit, its envelope after them.
        A line that cannot be produced now stays pending in the outbox (same commit)."""
        local_id = self._next_local_id
        self._next_local_id += 1
        it.local_id = local_id
        out.typed.append(it)
        out.events.append(
            OwnMessage(it.channel, "queued", local_id=local_id, text=it.text, kind=it.kind)
        )
        out.typed_at = now
        try:
            self._core_send(it.channel, it.content, local_id, now, out)
        finally:
            if out.typed_at is not None:  # no message was made of it: pending
                out.batch.enqueue_numbered(local_id, it.channel, it.content, now)
            out.typed_at = None

    # ------------------------------------------------------------------ core calls

    def _core_send(
        self, channel: str, content: bytes, local_id: int, now: int, out: _Round
    ) -> None:
        if channel not in self._channels:
            self._emit(NodeError(f"line {local_id} is for channel {channel!r}, not joined"))
            return
        mc = self._members.get(channel)
        if mc is not None:  # key shares due go first, then the line, encrypted
            *due, content = mc.outgoing(content, now)
            for control in due:
                self._send_control(channel, control, now, out)
        out.local_id = local_id
        try:
            self._participant.channel(channel).send(content, now)
        except ValueError as exc:
            out.local_id = None
            self._emit(NodeError(f"line {local_id} cannot be sent: {exc}"))
            return
        out.core_called = True
        self._drain(now, out)
        out.local_id = None

    def _reject(self, reason: str, channel: str | None, detail: str, out: _Round) -> None:
        key = f"rejected_{reason}"
        self.counters[key] += 1
        out.events.append(Rejected(reason, channel, detail, self.counters[key]))

    def _receive(
        self, data: bytes, now: int, out: _Round, carried_on: bytes | None = None
    ) -> None:
        """One envelope, as delivered, or carried by an envelope of topic ``carried_on``."""
        if carried_on is None:
            self.counters["received"] += 1
        channel: str | None = None
        if self._invite_topics and carried_on is None:
            framed = unwrap(data)
            if framed is not None and framed[0] in self._invite_topics:
                self._invite_frame(framed[0], framed[1], now)
                return

        def key_for_topic(topic: bytes) -> ChannelKey | list[ChannelKey] | None:
            nonlocal channel  # a refusal after the topic matched names the channel
            if carried_on is not None and topic != carried_on:
                return None  # carried into another channel: refused as its topic
            channel = self._by_topic.get(topic)
            if channel is None:
                return None
            mc = self._members.get(channel)
            return self._channels[channel].key if mc is None else mc.opening_keys()

        try:
            opened = open_for_topic(data, key_for_topic)
        except EnvelopeError as exc:
            reason = exc.reason if carried_on is None else f"carried_{exc.reason}"
            self._reject(reason, channel, exc.detail, out)
            return
        members = self._members.get(channel) if channel is not None else None
        if members is not None:
            why = members.admit(opened.sender_id, opened.sds_message)
            if why:  # before the replay guard: a member added later resends these bytes
                self._reject(why, channel, opened.sender_id, out)
                return
        if not self._replay.check_and_remember(opened.envelope_hash):
            # The same bytes again (a restarted sender republishing, a relay or store
            # redelivering): verified and harmless, a counted duplicate, not a rejection.
            pb = opened.sds_message
            if carried_on is not None:
                self.counters["carried_duplicates"] += 1
                if channel is not None and pb is not None and pb.message_id:
                    self._participant.channel(channel).note_carried(pb.message_id, now)
                    out.core_called = True
                return
            self.counters["duplicate_envelopes"] += 1
            if channel is not None and pb is not None and pb.content and pb.message_id:
                # an author's resend: it lacks our acknowledgement, name it again soon
                self._participant.channel(channel).note_copy(pb.message_id, pb.sender_id, now)
                out.core_called = True
            return
        assert channel is not None  # opened: its topic named a joined channel
        out.received.append(opened.envelope_hash)  # forgotten if the round is not stored
        if opened.carried and carried_on is None:
            # older lines first: the carrier's own line names them in its history
            self._receive_carried(opened.carried, opened.topic, now, out)
            out.current = None
        pb0 = opened.sds_message
        if pb0 is not None and not pb0.content and pb0.HasField("lamport_timestamp"):
            # a sync: its time is its author's clock now (app/node/clock_guard.py)
            fix = self._clock_est.observe(pb0.sender_id, pb0.lamport_timestamp, self._clock())
            if fix is not None:
                self._clock_corrected(fix)
                now = self._now()
            vote = self._clock_votes.on_sync(channel, pb0.sender_id,
                                             pb0.lamport_timestamp - now, now)  # fmt: skip
            if vote is not None:
                self._participant.channel(channel).ask_sync(vote)
        id_content = None  # a members channel's ciphertext: what the message id covers
        if members is not None:
            id_content = opened.sds_message.content if opened.sds_message is not None else None
            if not self._members_content(members, opened, data, out):
                return
        core = self._participant.channel(channel)
        # a carried copy (under a hash of its own: without what it carried) of a line
        # we hold: the core checks its id and counts a copy on the wire, nothing waits
        held = carried_on is not None and pb0 is not None and core.holds(pb0.message_id)
        if held:
            self.counters["carried_duplicates"] += 1
        current = out.current = _Receiving(opened.envelope_hash, data, opened.sds_bytes)
        carried = carried_on is not None
        if opened.sds_message is not None:  # decoded once, by open_envelope
            if id_content is None:
                core.receive_parsed(opened.sds_message, opened.sds_bytes, now,
                                    opened.envelope_hash, carried=carried)  # fmt: skip
            else:  # a members channel: the content was decrypted, the id covers the ciphertext
                core.receive_parsed(opened.sds_message, opened.sds_bytes, now,
                                    opened.envelope_hash, id_content=id_content,
                                    carried=carried)  # fmt: skip
        else:
            core.receive(opened.sds_bytes, now, opened.envelope_hash, carried=carried)
        if pb0 is None or pb0.HasField("lamport_timestamp") or not pb0.content:
            out.core_called = True  # an ephemeral message changes no state to save
        self._drain(now, out)
        out.current = None
        if not current.consumed and not current.settled and not held:
            # A content message that waits for dependencies (whether or not the core
            # reported them missing: it may wait only for other waiting messages).
            # Keep its envelope, by hash (its retrieval hint), for its delivery.
            cache = self._waiting_envelopes
            cache[(channel, current.hash)] = data
            while len(cache) > self.options.waiting_envelope_cache:
                cache.popitem(last=False)

    def _seen(
        self, channel: str, sender_id: str, name: str | None, now: int, out: _Round, content: bool
    ) -> None:
        peer = self._peers.get(sender_id)
        first = peer is None or channel not in peer.channels
        if peer is None:
            peer = self._peers[sender_id] = _Peer()
        renamed = name is not None and name != peer.name
        peer.channels.add(channel)
        peer.last_seen_ms = now
        if content:
            peer.messages += 1
        if name is not None:
            peer.name = name
        if first or renamed:
            out.events.append(PeerSeen(channel, sender_id, peer.name, first))
        if self._unheard and sender_id != self.sender_id:  # someone is back: the same bytes
            out.need_envelope.extend((channel, m, "unheard") for m in self._unheard.heard(channel))

    def _wait_for_listeners(self, ev: sds.MessageSendFailed, now: int, out: _Round) -> bool:
        """A message given up on while nobody else was heard in its channel: keep it
        as sent, to publish again when someone is (app/node/unheard.py); whether it was."""
        ch, mid = ev.channel_id, ev.message_id
        since = heard_since(self.options.config, ev.attempts, now)
        heard = ((sid, p.channels, p.last_seen_ms) for sid, p in self._peers.items())
        if ev.reason not in WAITING_REASONS or not nobody_heard(heard, self.sender_id, ch, since):
            return False
        self._unheard.hold(ch, mid)
        self._own_typed.pop((ch, mid), None)
        self.counters["waiting_for_listeners"] += 1
        out.events.append(
            OwnMessage(ch, "waiting", self._local_ids.get((ch, mid)), mid,
                       detail={"reason": "nobody_heard", "attempts": ev.attempts})
        )  # fmt: skip
        return True

    # ------------------------------------------------------------------ members channels

    def _nobody_heard(self, channel: str, topic: bytes) -> None:
        """The first join of a passphrase channel heard nobody: say so plainly."""
        info = self._channels.get(channel)
        if self._closing or info is None or info.topic != topic:
            return
        self.counters["nobody_heard_checks"] += 1
        if any(channel in p.channels for p in self._peers.values()):
            return
        self._emit(Info(
            f"nobody has been heard in #{channel} with this passphrase yet; if others are "
            "there, check the passphrase with them (a typo makes another, empty channel; "
            f"/leave {channel} and /forget {channel} to try again)",
            {"channel": channel, "nobody_heard": True}))

    def _seal_key(self, channel: str) -> ChannelKey:
        """The key envelopes of ``channel`` are sealed with now (a members channel's
        current epoch key, else the channel key)."""
        mc = self._members.get(channel)
        return self._channels[channel].key if mc is None else mc.sending_key()

    def _members_content(
        self, mc: MembersChannel, opened: Opened, data: bytes, out: _Round
    ) -> bool:
        """Decrypt a members channel's content before the core sees it; False when the
        message does not go to the core now (held for its key share, or refused)."""
        pb = opened.sds_message
        assert pb is not None  # open_for_topic decodes it
        if not pb.content:
            return True  # a sync message: only the outer layer
        ephemeral = not pb.HasField("lamport_timestamp")
        got = mc.incoming_content(pb.sender_id, pb.lamport_timestamp, pb.message_id,
                                  pb.content, ephemeral=ephemeral, now_ms=self._now())  # fmt: skip
        self._members_notices(mc)
        if got.quiet:
            return False
        if got.retry:  # welcome later (a rate limit, a cut still coming): forget its bytes
            self._replay.forget(opened.envelope_hash)
        if got.hold:  # its sender's key share has not arrived: open it again then
            self._replay.forget(opened.envelope_hash)
            if not ephemeral and mc.hold(pb.sender_id, mc.session_of(pb.content), data):
                self.counters["members_held"] += 1
            return False
        if got.content is None:
            if got.reason == "already_read":
                self.counters["duplicate_envelopes"] += 1
            else:
                self._reject(got.reason, mc.channel, pb.message_id, out)
            return False
        if not ephemeral and is_control(got.content):  # a key share opens held lines now
            released = mc.early_share(pb.sender_id, pb.lamport_timestamp, pb.message_id,
                                      got.content, self._now())  # fmt: skip
            if released:
                assert self._inbox is not None
                self._inbox.requeue_envelopes(released)
        pb.content = got.content
        return True

    def _on_control(self, mc: MembersChannel, author: str, lamport: int, mid: str,
                    content: bytes, env: bytes | None) -> None:  # fmt: skip
        """A control message delivered (or sent by us): the member list and keys move."""
        was_member = mc.roster.is_member(self.sender_id)
        change, released = mc.on_control(author, lamport, mid, content, env, self._now())
        if released:
            assert self._inbox is not None
            self._inbox.requeue_envelopes(released)
        self._members_dirty.add(mc.channel)
        for out in change.refused:
            self.counters[f"members_rejected_{out.reason}"] += 1
        self._members_notices(mc)
        for mid in change.added:
            member = mc.roster.member(mid)
            twin = None if member is None else self.verified.impersonated(mid, member.name)
            if member is not None and twin is not None:
                self._emit(MembersEvent(mc.channel, "key_changed",
                    f"WARNING: a new member calls itself {member.name!r} with another key "
                    f"({mid[:8]}) than the {member.name} you verified ({twin[:8]}): an "
                    "impostor, or a new device; check with them before you trust it",
                    {"member": mid, "verified": twin, "name": member.name}))  # fmt: skip
        if change:
            self._emit(MembersEvent(mc.channel, "changed", "the member list changed", {
                "added": sorted(change.added), "removed": sorted(change.removed),
                "rekeyed": sorted(change.share_keys_changed), "members": len(mc.roster)}))
        while mc.direct_offers:  # a direct invite to us (MembersChannel.on_control)
            inviter, sealed = mc.direct_offers.pop(0)
            plain = mc.group_keys.open_sealed(sealed)
            if plain is None:
                self.counters["direct_undecryptable"] += 1
            else:
                self._spawn(self._accept_direct(mc.channel, inviter, plain))
        if was_member and not mc.roster.is_member(self.sender_id):
            self._emit(MembersEvent(mc.channel, "removed_me",
                                    f"you were removed from #{mc.channel}"))  # fmt: skip

    def _members_notices(self, mc: MembersChannel) -> None:
        """Emit what a members channel noticed; mark what a completed cut refuses."""
        for event in drain_notices(mc):
            self._emit(event)
        while mc.cuts_done:
            removal, member_id = mc.cuts_done.pop(0)
            self._spawn(self._refuse_outside_cut(mc, removal, member_id))

    async def _refuse_outside_cut(self, mc: MembersChannel, removal: bytes, member_id: str) -> None:
        """A removal's cut is complete: mark what it leaves out (app/node/members_glue.py)."""
        with contextlib.suppress(NodeClosedError, StorageError):
            event = await mark_outside_cut(self.store, mc, removal, member_id, self._now())
            if event is not None:
                self._emit(event)

    def _send_control(self, channel: str, content: bytes, now: int, out: _Round) -> None:
        """Send a control message of ours inside a round (before the line being made)."""
        local_id, typed_at = out.local_id, out.typed_at
        out.local_id = out.typed_at = None
        try:
            self._participant.channel(channel).send(content, now)
            out.core_called = True
            self._drain(now, out)
        except ValueError as exc:
            self._emit(NodeError(f"{channel}: a control message could not be sent: {exc}"))
        finally:
            out.local_id, out.typed_at = local_id, typed_at

    def _members_round(self, now: int, out: _Round) -> None:
        """After a round that moved a members channel: send the rekeys due (key shares
        go before our next message), and save the channel's keys and control
        messages (before the commit)."""
        for _ in range(3):  # sending may apply our own control messages: settle
            dirty, self._members_dirty = self._members_dirty, set()
            for channel in dirty:
                mc = self._members.get(channel)
                if mc is None or channel not in self._channels:
                    continue
                for control in mc.due_controls(now, shares=False):  # shares: lazily
                    self._send_control(channel, control, now, out)
                for control in mc.owed_shares():  # owed for lines already sent: at once
                    self._send_control(channel, control, now, out)
            for channel in dirty:
                mc = self._members.get(channel)
                if mc is not None:
                    self._save_members(mc, state=False)
            if not self._members_dirty:
                return

    def _forget_read(self, marks: dict[str, dict[tuple[str, str], int]]) -> None:
        """What was read up to ``marks`` is stored now: its Megolm keys leave the
        members file (forward secrecy, app/members/group_keys.py)."""
        for channel, m in marks.items():
            mc = self._members.get(channel)
            if mc is not None and mc.group_keys.forget_read(m):
                self._save_members(mc)

    def _save_members(self, mc: MembersChannel, *, state: bool = True) -> None:
        """Append a members channel's new records, and write its state (``state``, or
        when key material moved); on a full disk (or another OS error) keep it dirty
        for the next round: its control messages stay in the core's log."""
        try:
            members_file.save(self.store.data_dir, mc, state=state)
        except OSError as exc:
            self.counters["members_save_failed"] += 1
            self._members_dirty.add(mc.channel)
            if self.counters["members_save_failed"] == 1:
                self._emit(NodeError(f"#{mc.channel}: its keys could not be saved ({exc}); "
                                     "retrying"))  # fmt: skip

    def members_channel(self, channel: str) -> MembersChannel | None:
        """The members-channel state of ``channel`` (``None`` for another kind)."""
        return self._members.get(channel)

    async def create_channel(self, channel: str) -> ChannelInfo:
        """Create members channel ``channel`` with us as its first admin, and join it.

        Raises:
            ValueError: a channel of that name is joined or known here already, or
                the name is not one a person may use.
        """
        self._check_open()
        check_channel_name(channel)
        data_dir = self.store.data_dir
        if channel in self._channels or await self.store.get_channel(channel) is not None:
            raise ValueError(f"#{channel} exists in this data directory already; "
                             "pick another name (or /forget it first)")  # fmt: skip
        if members_file.members_file(data_dir, channel).exists():
            raise ValueError(f"#{channel} is a members channel here already")
        mc, create = MembersChannel.create(channel, self.name, self.identity)
        members_file.save(data_dir, mc)
        self._members[channel] = mc
        info = await self.join(channel, key=mc.sending_key())
        await self.post_content(channel, create)
        self._emit(MembersEvent(channel, "created", f"created members channel #{channel}",
                                {"channel_id": mc.channel_id.hex()}))  # fmt: skip
        return info

    @property
    def verified(self) -> Verified:
        """The members this person verified by safety number (app/members/verified.py)."""
        if self._verified is None:
            self._verified = Verified(self.store.data_dir)
        return self._verified

    def _invite_book(self) -> InviteBook:
        if self._invites is None:
            self._invites = InviteBook(self.store.data_dir)
        return self._invites

    async def _subscribe_invites(self, channel: str) -> None:
        topics = [t for t in self._invite_book().topics(self._now(), channel)
                  if t not in self._invite_topics]  # fmt: skip
        if topics:
            self._invite_topics.update(topics)
            await self.transport.subscribe(topics)

    async def make_invite(
        self, channel: str, relays: Sequence[str] = (), ttl_ms: int = DEFAULT_TTL_MS,
        *, approve: bool = False,
    ) -> str:
        """A one-line invite code to members channel ``channel`` (admins only); this
        node answers its join request while it is open (with ``approve``, once an
        admin here says ``/approve``: a ``join_request`` event asks).

        Raises:
            KeyError: not a members channel here.
            ValueError: not an admin; a bad relay URL or lifetime.
        """
        self._check_open()
        mc = self._members.get(channel)
        if mc is None:
            raise KeyError(f"#{channel} is not a members channel (create one with /create)")
        if not mc.roster.is_admin(self.sender_id):
            raise ValueError(f"only an admin of #{channel} can invite")
        invite = make_invite(channel, mc.channel_id, tuple(relays), now_ms=self._now(),
                             ttl_ms=ttl_ms)  # fmt: skip
        self._invite_book().add(invite, approve=approve)
        await self._subscribe_invites(channel)
        code = encode_invite(invite)
        self._emit(InviteMade(channel, code, invite.expires_ms))
        return code

    def _invite_frame(self, topic: bytes, box: bytes, now: int) -> None:
        """A handshake message on an invite topic: a request (we made the invite) or
        an answer (we are redeeming it)."""
        waiter = self._invite_waiters.get(topic)
        if waiter is not None:
            invite, keys, digest, future = waiter
            try:
                answer = open_join_answer(invite, box, keys.share_secret,
                                          self.identity.public_key, digest)  # fmt: skip
            except JoinError as exc:  # our own request echoed, another newcomer's answer
                self.counters[f"invite_ignored_{exc.reason}"] += 1
                return
            if not future.done():
                future.set_result(answer)
            return
        entry = self._invite_book().get(topic)
        if entry is None:
            return
        try:
            request = open_join_request(entry.invite, box, now)
        except JoinError as exc:
            self.counters[f"invite_rejected_{exc.reason}"] += 1
            if exc.reason == "expired" and exc.request is not None:
                refusal = make_join_refused(entry.invite, exc.request, self.identity,
                                            "expired", now)  # fmt: skip
                self._spawn(self._publish(wrap(topic, refusal)))
            return
        if entry.used_by and entry.used_by != request.sender_id:
            refusal = make_join_refused(entry.invite, request, self.identity, "used", now)
            self.counters["invite_refused_used"] += 1
            self._spawn(self._publish(wrap(topic, refusal)))
            return
        mc = self._members.get(entry.invite.channel)
        known = mc is not None and mc.roster.is_member(request.sender_id)
        if entry.approve and not known and request.sender_id not in self._approved:
            fresh = request.sender_id not in self._join_requests
            self._join_requests[request.sender_id] = (topic, entry.invite, request)
            if fresh:
                self._emit(MembersEvent(entry.invite.channel, "join_request",
                    f"{request.name} ({request.sender_id[:8]}) asks to join "
                    f"#{entry.invite.channel}: /approve {request.name} or /deny {request.name}",
                    {"member": request.sender_id, "name": request.name}))  # fmt: skip
            return
        self._spawn(self._admit(topic, entry.invite, request))

    def pending_joins(self, channel: str) -> list[tuple[str, str]]:
        """``(sender id, name)`` of the join requests waiting for an admin here."""
        return [(sid, req.name) for sid, (_t, inv, req) in self._join_requests.items()
                if inv.channel == channel]  # fmt: skip

    async def decide_join(self, channel: str, sender_id: str, *, approve: bool) -> str:
        """Let a waiting newcomer in (or refuse it); returns its name.

        Raises:
            ValueError: no such request waits.
        """
        pending = self._join_requests.get(sender_id)
        if pending is None or pending[1].channel != channel:
            raise ValueError(f"no join request from {sender_id[:12]} waits in #{channel}")
        topic, invite, request = self._join_requests.pop(sender_id)
        if approve:
            self._approved.add(sender_id)
            await self._admit(topic, invite, request)
        else:
            refusal = make_join_refused(invite, request, self.identity, "refused", self._now())
            self._invite_book().mark_used(topic, "refused:" + sender_id)
            await self._publish(wrap(topic, refusal))
        return str(request.name)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _admit(self, topic: bytes, invite: Invite, request: Any) -> None:
        """Add the newcomer of a valid join request, then answer with the keys."""
        mc = self._members.get(invite.channel)
        if mc is None or self._closing:
            return
        try:
            if not mc.roster.is_member(request.sender_id):
                if mc.roster.invite_used(invite.invite_id):
                    refusal = make_join_refused(invite, request, self.identity, "used",
                                                self._now())  # fmt: skip
                    await self._publish(wrap(topic, refusal))
                    return
                member = MemberInfo(request.identity_key, request.x25519_key, request.name)
                await self.post_content(invite.channel,
                                        encode_add(member, invite_id=invite.invite_id))  # fmt: skip
            self._invite_book().mark_used(topic, request.sender_id)
            controls = mc.membership_records()  # in parts of ~150 KiB, asked in turn
            page = history_page(controls, request.history_from)
            current = mc.sending_key().key
            answer = make_join_accepted(
                invite, request, self.identity, current, self._now(),
                epoch_keys=[k for k in mc.epoch_keys if k != current], controls=page,
                history_from=request.history_from, history_total=len(controls))  # fmt: skip
            await self._publish(wrap(topic, answer))
            text = f"{request.name} joined #{invite.channel} by invite"
            data = {"member": request.sender_id, "name": request.name}
            self._emit(MembersEvent(invite.channel, "admitted", text, data))
        except (NodeClosedError, KeyError):
            return
        except ValueError as exc:
            self._emit(NodeError(f"could not admit {request.name}: {exc}"))

    async def join_by_invite(self, code: str, *, timeout_s: float = 300.0,
                             resend_s: float = 2.0) -> ChannelInfo:  # fmt: skip
        """Redeem an invite code: ask the inviting admin's node, then join the channel.

        Raises:
            ValueError: a bad or expired code (``InviteError``), a refusal, no answer
                within ``timeout_s``, a channel of that name here already, or an answer
                whose history does not make its sender an admin.
        """
        self._check_open()
        invite = check_not_expired(decode_invite(code), self._now())
        channel = invite.channel
        if channel in self._channels or await self.store.get_channel(channel) is not None:
            raise ValueError(f"#{channel} exists in this data directory already")
        keys = GroupKeys(invite.channel_id, self.sender_id)
        self._emit(Info(f"asking an admin of #{channel} to let you in (up to "
                        f"{timeout_s:.0f} s; their node must be online)",
                        {"channel": channel, "invite": "asking"}))  # fmt: skip
        self._invite_topics.add(invite.topic)
        await self.transport.subscribe([invite.topic])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s

        async def ask(history_from: int) -> JoinAccepted | JoinRefused | None:
            request = make_join_request(invite, self.identity, keys.share_key, self.name,
                                        self._now(), history_from=history_from)  # fmt: skip
            future: asyncio.Future[JoinAccepted | JoinRefused] = loop.create_future()
            self._invite_waiters[invite.topic] = (invite, keys, request_digest(request), future)
            while not future.done() and loop.time() < deadline:  # bounded by timeout_s
                await self._publish(wrap(invite.topic, request))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(future),
                                           min(resend_s, max(0.0, deadline - loop.time())))
            return future.result() if future.done() else None

        history: list[bytes] = []
        try:
            answer = await ask(0)
            # a long control history comes in parts: ask for the rest (bounded: every
            # part brings at least one event, and the deadline holds)
            part = answer
            while isinstance(part, JoinAccepted):
                history.extend(part.controls)
                nxt = part.history_next
                if nxt is None:
                    break
                part = await ask(nxt)
                if not isinstance(part, JoinAccepted):
                    answer = part  # no answer in time (None), or refused now
                elif part.history_from != nxt:
                    raise ValueError(f"the answer to the invite to #{channel} sent another "
                                     "part of the history than asked; not joined")  # fmt: skip
        finally:
            self._invite_waiters.pop(invite.topic, None)
            self._invite_topics.discard(invite.topic)
            await self.transport.unsubscribe([invite.topic])
        if answer is None:
            raise ValueError(f"no admin of #{channel} answered within {timeout_s:.0f} s "
                             "(an admin's node must be online to let you in)")  # fmt: skip
        if isinstance(answer, JoinRefused):
            raise ValueError(f"the invite to #{channel} was refused: {answer.message}")
        mc = MembersChannel(channel, invite.channel_id, self.sender_id,
                            [*answer.epoch_keys, answer.channel_key], keys,
                            signer=self.identity)  # fmt: skip
        mc.import_history(history, self._now())
        mc.set_current(answer.channel_key)
        if not (mc.roster.is_admin(answer.admin_sender_id)
                and mc.roster.is_member(self.sender_id)):  # fmt: skip
            raise ValueError(f"the answer to the invite to #{channel} does not show its "
                             "sender as an admin who added you; not joined")  # fmt: skip
        members_file.save(self.store.data_dir, mc)
        self._members[channel] = mc
        info = await self.join(channel, key=mc.sending_key())
        self._emit(MembersEvent(channel, "joined", f"joined members channel #{channel}",
                                {"admin": answer.admin_sender_id,
                                 "members": len(mc.roster)}))  # fmt: skip
        return info

    async def forget(self, channel: str) -> int:
        """Forget channel ``channel`` (left before): its history, keys and passphrase
        binding go; the identity stays, so the same name can be joined anew. Returns
        the number of messages deleted.

        Raises:
            ValueError: it is joined (leave it first) or unknown here.
        """
        self._check_open()
        if channel in self._channels:
            raise ValueError(f"#{channel} is joined: /leave it first")
        n = await self.store.forget_channel(channel)
        self._members.pop(channel, None)
        members_file.members_file(self.store.data_dir, channel).unlink(missing_ok=True)
        self._emit(Info(f"forgot #{channel} ({n} messages); your identity is unchanged",
                        {"channel": channel, "messages": n}))  # fmt: skip
        return n

    async def open_direct(self, via: str, member_id: str) -> ChannelInfo:
        """The direct conversation with ``member_id``, a member of members channel
        ``via``: joined if it exists here, else made (a members channel of two) and
        offered to them in ``via`` (app/members/direct.py).

        Raises:
            KeyError: ``via`` is not a members channel here.
            ValueError: ``member_id`` is not a member of ``via``, or is us.
        """
        self._check_open()
        mc = self._members.get(via)
        if mc is None:
            raise KeyError(f"#{via} is not a members channel (direct messages go to its members)")
        peer = mc.roster.member(member_id)
        if peer is None or member_id == self.sender_id:
            raise ValueError(f"{member_id[:12]} is not another member of #{via}")
        name = direct_name(self.sender_id, member_id)
        if name in self._channels:
            return self._channels[name]
        if members_file.members_file(self.store.data_dir, name).exists():
            return await self.join(name)
        dm, create = MembersChannel.create(name, self.name, self.identity)
        self._save_members(dm)
        self._members[name] = dm
        info = await self.join(name, key=dm.sending_key())
        await self.post_content(name, create)
        await self.post_content(name, encode_add(peer.info, role="admin"))
        controls = dm.membership_records()
        sealed = seal_direct(peer.info.share_key, name, dm.channel_id, dm.epoch_keys, controls)
        await self.post_content(via, encode_direct_invite(member_id, sealed))
        self._emit(MembersEvent(name, "direct", f"direct conversation with {peer.name}",
                                {"peer": member_id, "name": peer.name, "via": via}))  # fmt: skip
        return info

    async def _accept_direct(self, via: str, inviter: str, plain: bytes) -> None:
        """A member offered us a direct conversation: check it and join it."""
        offer = open_direct(plain, inviter, self.sender_id)
        if isinstance(offer, str):
            self.counters[f"direct_refused_{offer}"] += 1
            return
        name = offer.channel
        existing = self._members.get(name)
        if existing is None:
            existing = await asyncio.to_thread(members_file.load, self.store.data_dir, name)
        if existing is not None:
            if prefer(existing.channel_id, offer.channel_id) == existing.channel_id:
                return  # the same conversation, or ours wins: they switch to ours
            with contextlib.suppress(ValueError, KeyError):
                await self.leave(name)
                await self.forget(name)
        via_mc = self._members.get(via)
        if via_mc is None or self._closing:
            return
        secret = via_mc.group_keys.share_secret  # the same X25519 key as in ``via``
        keys = GroupKeys(offer.channel_id, self.sender_id, share_secret=secret)
        dm = MembersChannel(name, offer.channel_id, self.sender_id, offer.epoch_keys, keys,
                            signer=self.identity)  # fmt: skip
        dm.import_history(offer.records, self._now())
        if not (dm.roster.is_admin(inviter) and dm.roster.is_member(self.sender_id)):
            self.counters["direct_refused_history"] += 1
            return
        self._save_members(dm)
        self._members[name] = dm
        try:
            await self.join(name, key=dm.sending_key())
        except (ValueError, NodeClosedError) as exc:
            self._emit(NodeError(f"a direct conversation could not be joined: {exc}"))
            return
        peer = via_mc.roster.member(inviter)
        who = peer.name if peer is not None else inviter[:8]
        self._emit(MembersEvent(name, "direct", f"{who} opened a direct conversation with you",
                                {"peer": inviter, "name": who, "via": via}))  # fmt: skip

    async def remove_member(self, channel: str, member_id: str) -> None:
        """Remove a member (admin), with new outer keys for the others.

        Raises:
            KeyError: not a members channel here.
            ValueError: not an admin, or no such member.
        """
        mc = self._members.get(channel)
        if mc is None:
            raise KeyError(f"#{channel} is not a members channel")
        if member_id != self.sender_id and not mc.roster.is_admin(self.sender_id):
            raise ValueError(f"only an admin of #{channel} can remove members")
        if not mc.roster.is_member(member_id):
            raise ValueError(f"{member_id[:12]} is not a member of #{channel}")
        held = await self.store.sender_ids(channel, member_id)  # the removal's cut
        for content in mc.remove(member_id, held):  # its parts first, in a large channel
            await self.post_content(channel, content)

    def _seal_carrying(self, channel: str, sds_bytes: bytes, now: int) -> bytes:
        """Our new message's envelope, with the envelopes the core wants carried
        along (app/node/carrying.py); without them if they would not fit."""
        key = self._seal_key(channel)
        picks = self._participant.channel(channel).to_carry(now)
        carried: list[bytes] = []
        if picks:
            self.counters["carried_wanted"] += len(picks)
            mc = self._members.get(channel)
            keys = [self._channels[channel].key] if mc is None else mc.opening_keys()
            carried = self._carrier.attach(channel, picks, self._envelopes, keys)
        if carried:
            try:
                env = seal(sds_bytes, self.identity, key, carried)
            except OversizedEnvelope:
                self.counters["carried_too_big"] += 1
            else:
                self.counters["carried_sent"] += len(carried)
                return env
        return seal(sds_bytes, self.identity, key)

    def _receive_carried(self, envelopes: Sequence[bytes], topic: bytes, now: int,
                         out: _Round) -> None:  # fmt: skip
        """Envelopes carried by one we opened, each as if it had arrived alone; one we
        hold already is told to the core as a copy on the wire, without opening it."""
        for env in envelopes:
            self.counters["carried_received"] += 1
            digest = envelope_hash(env)
            named = self._carrier.named(digest) if digest in self._replay else None
            if named is not None and named[0] == self._by_topic.get(topic):
                self.counters["carried_duplicates"] += 1
                self._participant.channel(named[0]).note_carried(named[1], now)
                out.core_called = True
                continue
            self._receive(env, now, out, carried_on=topic)  # opened, and refused if need be

    def _remember_envelope(self, channel: str, message_id: str, envelope: bytes) -> None:
        cache = self._envelopes
        cache[(channel, message_id)] = envelope
        cache.move_to_end((channel, message_id))
        while len(cache) > self.options.envelope_cache:
            cache.popitem(last=False)

    def _set_own(self, channel: str, mid: str, state: OwnState, out: _Round | None) -> bool:
        """Record an own-message state if it moves forward; True if it changed."""
        key = (channel, mid)
        current = self._own_state.get(key)
        if current is not None and _RANK[state] <= _RANK[current]:
            return False
        if state in (OwnState.ACKNOWLEDGED, OwnState.FAILED):
            self._own_state.pop(key, None)
            self._own_text.pop(key, None)
            if state is OwnState.ACKNOWLEDGED:
                self._own_typed.pop(key, None)
        else:
            self._own_state[key] = state
        if out is not None:
            out.batch.set_own_state(channel, [mid], state)
        else:
            self._carry_states.append((channel, mid, state))
        return True

    def _drain(self, now: int, out: _Round) -> None:
        """After every core call: events into the batch and the UI list, datagrams queued."""
        wall = self._now()
        for ev in self._participant.events():
            if type(ev) is not sds.EphemeralReceived:  # never stored: ephemeral_guard.py
                out.batch.add_event(log_form(ev), wall)  # reminders by count: disk_guard.py
            self._handle_event(ev, now, out)
        for channel, dg in self._participant.datagrams_to_send():
            info = self._channels.get(channel)
            if info is None:
                continue
            if dg.kind == "sync":
                sync = seal(dg.data, self.identity, self._seal_key(channel))
                out.publish.append((channel, None, sync))
                self.counters["sync_sent"] += 1
                continue
            self.counters[f"{dg.kind}_datagrams"] += 1
            env = self._envelopes.get((channel, dg.message_id))
            if env is not None:
                out.publish.append((channel, dg.message_id, env))
            else:
                out.need_envelope.append((channel, dg.message_id, dg.kind))

    def _handle_event(self, ev: sds.Event, now: int, out: _Round) -> None:
        ch = ev.channel_id
        if isinstance(ev, sds.MessageSent):
            self._on_sent(ev, now, out)
        elif isinstance(ev, sds.MessageDelivered):
            self._on_delivered(ev, now, out)
        elif isinstance(ev, sds.MessageAcknowledged):
            if self._unheard:
                self._unheard.acknowledged(ch, ev.message_id)
            if self._failed:  # acknowledged after all: nothing left to retry
                self._failed = [f for f in self._failed if f[0] != ch or f[1] != ev.message_id]
            if self._set_own(ch, ev.message_id, OwnState.ACKNOWLEDGED, out):
                out.events.append(
                    OwnMessage(
                        ch,
                        "acknowledged",
                        self._local_ids.pop((ch, ev.message_id), None),
                        ev.message_id,
                        detail={"by": ev.by_sender, "causal": ev.by_causal_history},
                    )
                )
            self.counters["acknowledged"] += 1
        elif isinstance(ev, sds.MessagePossiblyAcknowledged):
            if self._set_own(ch, ev.message_id, OwnState.POSSIBLY_ACKNOWLEDGED, out):
                out.events.append(
                    OwnMessage(
                        ch,
                        "possibly_acknowledged",
                        self._local_ids.get((ch, ev.message_id)),
                        ev.message_id,
                        detail={"hits": ev.hits, "threshold": ev.threshold, "by": ev.by_sender},
                    )
                )
        elif isinstance(ev, sds.MessageSendFailed) and self._wait_for_listeners(ev, now, out):
            pass  # nobody was there to hear it: it waits (app/node/unheard.py)
        elif isinstance(ev, sds.MessageSendFailed):
            text = self._own_text.get((ch, ev.message_id))
            if self._set_own(ch, ev.message_id, OwnState.FAILED, out):
                out.events.append(
                    OwnMessage(
                        ch,
                        "failed",
                        self._local_ids.pop((ch, ev.message_id), None),
                        ev.message_id,
                        text=None if text is None else text[0],
                        detail={"reason": ev.reason, "attempts": ev.attempts},
                    )
                )
            typed = self._own_typed.pop((ch, ev.message_id), None)
            if typed is not None:
                self._failed.append((ch, ev.message_id, typed))
            elif text is not None:
                content = encode_content(text[0], self.name, text[1])
                self._failed.append((ch, ev.message_id, content))
            self.counters["failed"] += 1
        elif isinstance(ev, sds.MessagesMissing):
            ids = tuple(e.message_id for e in ev.missing)
            if self.store_sync is not None:
                self.store_sync.note_missing(ch, ev.missing)
            self._late.named_missing(ch, ids)
            if ids:
                out.missing.setdefault(ch, set()).update(ids)
                preview = self._waiting_preview(ch, ev.message_id, out)
                if preview:
                    preview["recovered"] = self._late.arrived_waiting(
                        ch, ev.message_id, ev.sender_id, preview["lamport"]
                    )
                out.events.append(
                    Missing(ch, ev.message_id, ev.sender_id, ids, ev.first, **preview)
                )
        elif isinstance(ev, sds.MessageLost):
            self._late.named_missing(ch, (ev.message_id,))
            out.events.append(Lost(ch, ev.message_id, ev.waiting, (ev.message_id,)))
            self.counters["lost"] += 1
        elif isinstance(ev, sds.SyncReceived):
            if out.current is not None:
                out.current.settled = True
            self._seen(ch, ev.sender_id, None, now, out, content=False)
        elif isinstance(ev, sds.EphemeralReceived):
            if out.current is not None:
                out.current.settled = True
            self._seen(ch, ev.sender_id, None, now, out, content=False)
            refused = self._ephemeral.admit(ch, ev.sender_id, len(ev.content), now)
            if refused is None:
                out.events.append(Ephemeral(ch, ev.sender_id, ev.content))
            else:
                self.counters[f"ephemeral_dropped_{refused}"] += 1
        elif isinstance(ev, sds.MessageDropped):
            self.counters[f"dropped_{ev.reason.value}"] += 1
            if ev.reason is sds.DropReason.UNVERIFIABLE_ID:
                self._reject(
                    ev.reason.value, ch, f"message {(ev.message_id or '')[:12]} from "
                    f"{(ev.sender_id or '')[:12]}: id does not match its content", out
                )
            if ev.reason is sds.DropReason.INCOMING_BUFFER_FULL and ev.retrieval_hint:
                # a message received earlier was pushed out: it is missing again, and
                # its repair answer is the same envelope (its hash is the hint)
                self._replay.forget(ev.retrieval_hint)
            if out.current is not None and ev.reason not in _NOT_FATAL_DROPS:
                out.current.settled = True
                if ev.reason in _REFUSED_FOR_NOW:  # its resend is welcome later
                    self._replay.forget(out.current.hash)
                if ev.reason is sds.DropReason.CLOCK_AHEAD:  # held, not lost
                    self._hold_clock_ahead(ev.sender_id or "", out.current)
        elif isinstance(ev, sds.MessageConflict):
            self._conflict(ch, ev.message_id, ev.kept_sender_id, ev.other_sender_id, ev.reason,
                           out.events)  # fmt: skip
        elif isinstance(ev, sds.RepairDataNeeded):
            out.repair_needed.setdefault(ch, set()).add(ev.message_id)
        elif isinstance(ev, sds.MessageResent):
            self.counters["resent"] += 1
        elif isinstance(ev, sds.RepairSent):
            self.counters["repair_sent"] += 1
        elif isinstance(ev, sds.RepairRequested):
            self.counters["repair_requested"] += len(ev.message_ids)

    def _waiting_preview(self, ch: str, mid: str, out: _Round) -> dict[str, Any]:
        """The just-received content message ``mid`` that waits: its text, for the UI (TUI).

        Only while its envelope is the one being received (``out.current``); a
        sync message or a reminder gives ``{}``. Never raises.
        """
        info = self._channels.get(ch)
        if not mid or out.current is None or info is None:
            return {}
        try:
            pb = parse_pb(out.current.sds_bytes)
        except Exception:
            return {}
        if pb.message_id != mid or not pb.content:
            return {}
        content = decode_content(pb.content)
        return {
            "lamport": pb.lamport_timestamp,
            "name": content.name,
            "kind": content.kind,
            "text": content.text,
        }

    def _on_sent(self, ev: sds.MessageSent, now: int, out: _Round) -> None:
        ch, mid = ev.channel_id, ev.message_id
        env = self._seal_carrying(ch, ev.data, now)
        digest = envelope_hash(env)
        self._carrier.remember(digest, ch, mid)
        plain = ev.content
        mc = self._members.get(ch)
        if mc is not None:
            if is_control(plain):
                self._on_control(mc, self.sender_id, ev.lamport, mid, plain, env)
            else:
                plain = mc.own_plaintext(plain, (ev.lamport, mid))
        self._participant.channel(ch).set_retrieval_hint(mid, digest)
        self._replay.remember(digest)
        msg = StoredMessage(
            channel=ch,
            message_id=mid,
            sender_id=self.sender_id,
            lamport=ev.lamport,
            content=plain,
            causal_history=ev.causal_history,
            retrieval_hint=digest,
            envelope=env,
            state=OwnState.QUEUED,
            delivered_at=self._now(),
        )
        local_id = out.local_id
        if local_id is not None and out.typed_at is not None:
            out.batch.record_typed(local_id, msg, out.typed_at)
            out.typed_at = None
            self._local_ids[(ch, mid)] = local_id
        elif local_id is not None:
            out.batch.record_sent(local_id, msg)
            self._local_ids[(ch, mid)] = local_id
        else:
            out.batch.insert_message(msg)
        self._remember_envelope(ch, mid, env)
        self._lamports.remember(ch, mid, ev.lamport)
        self._own_state[(ch, mid)] = OwnState.QUEUED
        content = decode_content(plain)
        self._own_text[(ch, mid)] = (content.text, content.kind)
        if _is_typed(plain):
            self._own_typed[(ch, mid)] = plain
        out.own_new.append((ch, mid, env))
        out.events.append(
            OwnMessage(
                ch, "logged", local_id, mid, ev.lamport, ev.position, content.text, content.kind
            )
        )
        self.counters["sent"] += 1

    def _on_delivered(self, ev: sds.MessageDelivered, now: int, out: _Round) -> None:
        ch, mid = ev.channel_id, ev.message_id
        env: bytes | None = None
        hint = ev.retrieval_hint
        cur = out.current
        if cur is not None and hint == cur.hash:
            env = cur.envelope
            cur.consumed = True
        elif hint is not None:
            env = self._waiting_envelopes.pop((ch, hint), None)
        kept, refused = self._files.check(ch, ev.sender_id, ev.content)
        if refused is not None:  # a file's bytes not kept (app/chat/file_quota.py)
            self.counters["file_refused_too_large" if refused == "too_large"
                          else "file_segments_refused"] += 1  # fmt: skip
            env = None  # not kept either: we do not serve what we refused
        if env is not None:
            self._remember_envelope(ch, mid, env)
        if hint is not None:
            self._carrier.remember(hint, ch, mid)
        mc = self._members.get(ch)
        if mc is not None and is_control(ev.content):
            self._on_control(mc, ev.sender_id, ev.lamport, mid, ev.content, env)
        elif mc is not None and (why := mc.refused_at_delivery(ev.sender_id, mid)):
            mark = MessageRefused(ch, mid, ev.sender_id, why, "")
            out.batch.add_event(mark, self._now())  # stored and marked refused
            out.events.append(refused_event(mc, ev.sender_id, [mark]))
        late = self._late.delivered(ch, mid, ev.sender_id, ev.lamport, ev.was_lost)
        out.batch.insert_message(
            StoredMessage(
                channel=ch,
                message_id=mid,
                sender_id=ev.sender_id,
                lamport=ev.lamport,
                content=kept,
                causal_history=ev.causal_history,
                retrieval_hint=ev.retrieval_hint,
                envelope=env,
                delivered_at=self._now(),
                was_lost=ev.was_lost,
                recovered=late,  # stored: marked after a restart as it is now
                missing_before=ev.missing_before,
            )
        )
        content = decode_content(kept)
        self._seen(ch, ev.sender_id, content.name, now, out, content=True)
        odd = implausible_time(ev.lamport, self._lamports.newest_of(ch, ev.causal_history))
        self._lamports.remember(ch, mid, ev.lamport)
        delivered = Delivered(
            ch,
            mid,
            ev.sender_id,
            content.name,
            content.kind,
            content.text,
            ev.lamport,
            ev.position,
            ev.missing_before,
            ev.was_lost,
            recovered=late,
            implausible_time=odd,
        )
        out.delivered.append((ch, mid, delivered))
        out.events.append(delivered)

    async def _follow_ups(self, now: int, out: _Round) -> None:
        """Storage look-ups the core asked for (bounded: a few passes)."""
        for _ in range(4):
            progressed = False
            if out.missing:
                missing, out.missing = out.missing, {}
                for ch, ids in missing.items():
                    if ch not in self._channels:
                        continue
                    found = await self.store.has_ids(ch, ids)
                    if self.store_sync is not None:  # not in SQLite: ask the store
                        self.store_sync.request(ch, ids - found)
                    if found:
                        self.counters["dependencies_from_storage"] += len(found)
                        self._participant.channel(ch).mark_dependencies_met(found, now)
                        out.core_called = True
                        progressed = True
                self._drain(now, out)
            if out.repair_needed:
                needed, out.repair_needed = out.repair_needed, {}
                for ch, mids in needed.items():
                    for mid in mids:
                        out.need_envelope.append((ch, mid, "repair"))
            if out.need_envelope:
                wanted, out.need_envelope = out.need_envelope, []
                by_channel: dict[str, list[tuple[str, str]]] = {}
                for ch, mid, kind in wanted:
                    by_channel.setdefault(ch, []).append((mid, kind))
                for ch, pairs in by_channel.items():
                    envs = await self.store.get_envelopes(ch, [m for m, _ in pairs])
                    for mid, kind in pairs:
                        env = envs.get(mid)
                        if env is None:
                            self.counters[f"{kind}_without_envelope"] += 1
                            continue
                        self._remember_envelope(ch, mid, env)
                        out.publish.append((ch, mid, env))
            if not progressed:
                return

    def _complete_batch(self, out: _Round, now: int, *, force_state: bool) -> None:
        """Add carried own states and (when due) the exported core states to the batch."""
        batch = out.batch
        self._add_carried(batch)
        if self._state_dirty and (
            force_state or now - self._last_state_save >= self._state_interval
        ):
            self._add_states(batch)
            if self._members and self._invite_book().reload():  # `sdschat invite` wrote
                for channel in self._members:
                    self._spawn(self._subscribe_invites(channel))
            horizon = repair_horizon_ms(self.options.config)
            for mc in self._members.values():  # forward secrecy: forget what was read
                if mc.advance(now, horizon):  # a share-key rotation due: sent in this round
                    self._members_dirty.add(mc.channel)
                out.read_marks[mc.channel] = mc.group_keys.read_marks()  # cut once committed
                if mc.group_keys.changes != mc.saved_changes or mc.unsaved:
                    self._save_members(mc)
                digest = mc.digest_due(now)  # our membership state, to compare
                if digest is not None and mc.channel in self._channels:
                    self._spawn(self.send_ephemeral(mc.channel, digest))

    def _commits_inline(self, batch: Batch) -> bool:
        """Whether ``batch`` is committed on the loop's thread (``inline_commit_messages``)."""
        return (
            len(batch.messages) <= self.options.inline_commit_messages
            and not batch.core_states
            and self.store.idle
        )

    async def _commit(self, out: _Round) -> None:
        batch = out.batch
        if not len(batch):
            return
        result = None
        if self._commits_inline(batch):
            try:
                result = self.store.commit_batch_now(batch, now_ms=self._now())
            except Exception as exc:  # failed: retried below, as before
                if is_disk_full(exc):
                    raise
        for attempt in range(0 if result is not None else 3):
            try:
                result = await self.store.commit_batch(batch, now_ms=self._now())
                break
            except Exception as exc:
                if is_disk_full(exc):  # retrying at once does not help: app.node.disk_guard
                    raise
                if attempt == 2:
                    self._emit(NodeError(f"storage commit failed: {exc}"))
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))
        assert result is not None
        if out.delivered:
            fresh = set(result.new_messages)
            copies = [d for ch, mid, d in out.delivered if (ch, mid) not in fresh]
            if copies:
                await self._settle_copies(copies, out)
            self.counters["delivered"] += len(out.delivered) - len(copies)

    async def _settle_copies(self, copies: list[Delivered], out: _Round) -> None:
        """Messages the core delivered that our log already holds (from before its window).

        Not shown again. A copy with the stored author and content (a restarted
        sender republishing, a store catch-up) is a counted duplicate
        (``duplicate_messages``); one that differs is a :class:`Conflict` (the
        stored message stays), recorded in the event log too.
        """
        gone = {(d.channel, d.message_id) for d in copies}
        out.events = [
            ev
            for ev in out.events
            if not (isinstance(ev, Delivered) and (ev.channel, ev.message_id) in gone)
        ]
        by_channel: dict[str, list[Delivered]] = {}
        for d in copies:
            by_channel.setdefault(d.channel, []).append(d)
        found: list[sds.MessageConflict] = []
        for ch, ds in by_channel.items():
            stored = await self.store.get_messages(ch, [d.message_id for d in ds])
            for d in ds:
                kept = stored.get(d.message_id)
                if kept is not None and kept.sender_id != d.sender_id:
                    reason = "author"
                elif kept is not None and is_tombstone(kept.content):
                    self.counters["duplicate_messages"] += 1  # deleted here since: no dispute
                    continue
                elif kept is not None and _text_of(kept.content) != (d.name, d.kind, d.text):
                    reason = "content"
                elif kept is not None and kept.lamport != d.lamport:
                    reason = "timestamp"
                else:
                    self.counters["duplicate_messages"] += 1
                    continue
                assert kept is not None
                found.append(sds.MessageConflict(ch, d.message_id, kept.sender_id, d.sender_id,
                                                 reason))  # fmt: skip
                self._conflict(ch, d.message_id, kept.sender_id, d.sender_id, reason, out.events)
        if found:
            batch = Batch()
            batch.add_events(found, self._now())
            await self.store.commit_batch(batch)

    def _conflict(
        self, ch: str, mid: str, kept: str, other: str, reason: str, events: list[NodeEvent]
    ) -> None:
        self.counters["conflicts"] += 1
        events.append(Conflict(ch, mid, kept, other, reason, self.counters["conflicts"]))

    def _add_states(self, batch: Batch) -> None:
        started = time.perf_counter()
        for name in self._channels:
            if name not in self._participant.channels:  # being left (see _leave)
                continue
            batch.set_core_state(name, self._participant.channel(name).export_state().to_bytes())
        spent_ms = (time.perf_counter() - started) * 1000.0
        self._state_interval = max(
            self.options.state_save_interval_ms, int(STATE_SAVE_COST_FACTOR * spent_ms)
        )
        self._last_state_save = self._now()
        self._state_dirty = False
        self.counters["state_saves"] += 1

    def _add_carried(self, batch: Batch) -> None:
        """Put the carried own states that are still current into ``batch``.

        A carried "sent" may be committed a round or more after it happened; if
        the message moved on meanwhile (possibly acknowledged, or acknowledged
        and dropped from ``_own_state``), that later state is already in a
        batch and the stale one must not overwrite it.
        """
        for ch, mid, state in self._carry_states:
            if self._own_state.get((ch, mid)) is state:
                batch.set_own_state(ch, [mid], state)
        self._carry_states = []

    async def _save_all_states(self, *, durable: bool) -> None:
        batch = Batch(durable=durable)
        self._add_carried(batch)
        self._add_states(batch)
        if len(batch):
            await self.store.commit_batch(batch)

    async def _publish_round(self, out: _Round) -> None:
        envelopes: list[tuple[str, str | None, bytes]] = list(out.own_new)
        envelopes.extend(out.publish)
        if not envelopes:
            return
        if self.store_sync is not None:  # a store that archives only with write proofs
            for ch, _mid, env in out.own_new:
                key = self._channels[ch].key
                mc = self._members.get(ch)  # a members channel: its epoch keys when sent
                keys = key.key if mc is None else lambda mc=mc: mc.epoch_keys
                self.store_sync.offer(keys, key.topic, env)
        sent_events: list[NodeEvent] = []
        for ch, mid, env in envelopes:
            if await self._publish(env) and mid is not None:
                self._mark_sent(ch, mid, sent_events)
        if self._carry_states:
            # "sent" is advisory: it rides in the next round's transaction (or the
            # next state save, armed here) instead of a commit of its own, which
            # would hold up the next round. Lost in a crash, it only means the
            # envelope is republished at the next start (peers drop the copy).
            self._state_dirty = True
            self._arm_state_save()
        for ev in sent_events:
            self._emit(ev)

    def _mark_sent(self, ch: str, mid: str, events: list[NodeEvent]) -> None:
        if self._own_state.get((ch, mid)) is OwnState.QUEUED and self._set_own(
            ch, mid, OwnState.SENT, None
        ):
            events.append(OwnMessage(ch, "sent", self._local_ids.get((ch, mid)), mid))

    async def _publish(self, envelope: bytes) -> bool:
        if not self.transport.connected:
            self.counters["publish_skipped_offline"] += 1
            return False
        await self._pacer.take()
        try:
            ok = await self.transport.publish(envelope)
        except Exception as exc:
            logger.warning("publish failed: %s", exc)
            ok = False
        self.counters["published" if ok else "publish_failed"] += 1
        return ok

    async def _republish_outgoing(self) -> None:
        """On (re)connection: publish every unacknowledged own message's envelope again."""
        try:
            await self._republish()
        except Exception as exc:
            self._internal_error(exc)

    async def _republish(self) -> None:
        sent_events: list[NodeEvent] = []
        for ch in list(self._channels):
            ids = self._participant.channel(ch).outgoing_ids()
            if nobody_heard(((sid, p.channels, p.last_seen_ms) for sid, p in self._peers.items()),
                            self.sender_id, ch, heard_since(self.options.config, 0, self._now())):
                # nobody to hear them again (a start, a bot in an empty channel): only what
                # never left; the rest goes with the resends, at once when a peer is heard
                ids = [m for m in ids if self._own_state.get((ch, m)) is OwnState.QUEUED]
            ids = ids[-self.options.republish_cap :]
            missing = [m for m in ids if (ch, m) not in self._envelopes]
            stored = await self.store.get_envelopes(ch, missing) if missing else {}
            for mid in ids:
                env = self._envelopes.get((ch, mid)) or stored.get(mid)
                if env is None:
                    continue
                if not self.transport.connected:
                    return
                if await self._publish(env):
                    self.counters["republished"] += 1
                    self._mark_sent(ch, mid, sent_events)
        if self._carry_states:
            batch = Batch()
            self._add_carried(batch)
            await self.store.commit_batch(batch)
        for ev in sent_events:
            self._emit(ev)

    # ------------------------------------------------------------------ join/leave

    def _open_own(self, key: ChannelKey) -> Callable[[bytes], bytes | None]:
        mc = self._members.get(key.channel)

        def open_own(envelope: bytes) -> bytes | None:
            try:
                if mc is not None:  # any epoch's key
                    return open_for_topic(envelope, lambda _t: mc.opening_keys()).sds_bytes
                return open_envelope(envelope, key).sds_bytes
            except EnvelopeError:
                return None

        return open_own

    async def _join(self, key: ChannelKey) -> ChannelInfo:
        name = key.channel
        existing = self._channels.get(name)
        if existing is not None:
            if existing.topic != key.topic:
                raise PassphraseMismatchError(
                    f"channel {name!r} is already joined with another passphrase"
                )
            return existing
        stored = await self.store.get_channel(name)
        if stored is not None and stored.topic != key.topic:
            raise PassphraseMismatchError(
                f"this data directory joined {name!r} with a different passphrase "
                "(its key and topic differ); use the original passphrase, or /forget "
                f"{name} (its history here goes, your identity stays), or another "
                "--data-dir for a different channel of the same name"
            )
        await self.store.join_channel(name, key.topic, is_public=key.is_public)
        if stored is None and not key.is_public and name not in self._members:
            asyncio.get_running_loop().call_later(
                self.options.nobody_heard_ms / 1000, self._nobody_heard, name, key.topic)
        report = await self._restore_core(key)
        for note in report.notes:
            self._emit(Info(f"{name}: {note}"))
        if report.rebuilt or report.changed:
            what = (
                "no saved core state: rebuilt from the stored log" if report.rebuilt
                else "saved core state was older than the log; reconciled"
            )
            self._emit(
                Info(
                    f"{name}: {what}",
                    {
                        "log_added": report.log_added,
                        "outgoing_added": report.outgoing_added,
                        "outgoing_removed": report.outgoing_removed,
                        "incoming_removed": report.incoming_removed,
                    },
                )
            )
        # the newest stored lines: an older message of their authors coming now is late
        newest = await self.store.page(name, limit=_SEED_PAGE)
        self._late.seed(name, ((e.sender_id, e.lamport) for e in newest))
        info = ChannelInfo(name, key, key.is_public, key.topic)
        self._channels[name] = info
        self._by_topic[key.topic] = name
        # Own messages still unacknowledged: learn their stored states (queued or sent).
        out_ids = self._participant.channel(name).outgoing_ids()
        if out_ids:
            msgs = await self.store.get_messages(name, out_ids)
            for mid, msg in msgs.items():
                if msg.state is not None:
                    self._own_state[(name, mid)] = msg.state
                    c = decode_content(msg.content)
                    self._own_text[(name, mid)] = (c.text, c.kind if c.kind != "raw" else "msg")
                    if _is_typed(msg.content):
                        self._own_typed[(name, mid)] = msg.content
        # Own messages that failed in an earlier run: /retry can still send them again
        # (newest 1,000; the core keeps the same ids for a late acknowledgement).
        for mid, content in reversed(await self.store.own_failed(name)):
            self._failed.append((name, mid, content))
        self._state_dirty = True
        await self.transport.subscribe([key.topic])
        self._emit(ChannelJoined(name, key.is_public, key.topic.hex(), report.stored))
        if self.store_sync is not None:
            self.store_sync.catch_up_soon(name, key.topic)
        pending = await self.store.pending_outgoing(name)
        assert self._inbox is not None
        if pending:
            self._inbox.put_front([_Pending(p.channel, p.content, p.local_id) for p in pending])
        if self._connected and out_ids:
            await self._republish()
        await self._round_now()  # events of the restore (deliverable waiters), first save
        return info

    async def _restore_core(self, key: ChannelKey) -> Any:
        """Join ``key``'s channel in the core from its saved state reconciled with the
        stored log (at join, and after a full disk: :mod:`app.node.disk_guard`)."""
        name = key.channel
        now = self._now()
        state: sds.ChannelState | None = None
        raw = await self.store.load_core_state(name)
        if raw is not None:
            try:
                state = sds.ChannelState.from_bytes(raw)
            except ValueError as exc:
                self._emit(NodeError(f"saved core state of {name!r} unreadable ({exc}); rebuilt"))
        config = self.options.config
        state, report = await reconcile_state(
            self.store,
            name,
            state,
            sender_id=self.sender_id,
            config=config,
            now_ms=now,
            open_own=self._open_own(key),
        )
        try:
            self._participant.join(name, now, state)
        except ValueError as exc:
            self._emit(NodeError(f"saved core state of {name!r} unusable ({exc}); rebuilt"))
            state, report = await reconcile_state(
                self.store,
                name,
                None,
                sender_id=self.sender_id,
                config=config,
                now_ms=now,
                open_own=self._open_own(key),
            )
            self._participant.join(name, now, state)
        self._participant.channel(name).set_connected(self._connected, now)
        return report

    # ------------------------------------------------------------------ skewed clock

    def _clock_corrected(self, fix: Correction) -> None:
        """The members heard agree our wall clock is off (app/node/clock_guard.py): tell the
        person; the node runs on the corrected time from now on."""
        if not fix.applied:
            self._emit(ClockSkew(
                "differs", fix.offset_ms, fix.voters, fix.heard,
                f"your clock is {describe_offset(fix.offset_ms)} the only other member "
                "heard: one of the two clocks is wrong; check your system clock "
                "(messages from a clock ahead are held until they are within 10 min)",
            ))
            return
        if fix.offset_ms == 0:
            state = "ok"
            text = ("your clock agrees with the others' again: sdschat uses it as it is "
                    f"({fix.voters} of {fix.heard} members heard agree)")
        else:
            state = "behind" if fix.offset_ms > 0 else "ahead"
            text = (f"your clock is {describe_offset(fix.offset_ms)} the others' "
                    f"({fix.voters} of {fix.heard} members heard agree): sdschat uses "
                    "their time for your messages; fix your system clock")
        self.counters["clock_corrections"] += 1
        self._emit(ClockSkew(state, fix.offset_ms, fix.voters, fix.heard, text))
        if self._inbox is None:
            self._offset_ms = fix.offset_ms
            return
        loop = asyncio.get_running_loop()
        self._inbox.put(_Call(self._apply_clock_offset, loop.create_future()))

    async def _apply_clock_offset(self) -> None:
        """Move every core to the corrected time at once, as a restart with that clock
        would: each state is exported at the old time and restored at the new one, so a
        clock that went back brings the Lamport clock back too (our next messages are not
        refused), and the time that lost timeouts count (``sds.Channel.set_connected``)
        goes on where it stood. Calling a core with the new time first made that count
        jump with the correction: an hour back, and every id noticed missing before it
        was declared lost an hour late, its waiting lines held (the soak's n1)."""
        if self._offset_ms == self._clock_est.offset_ms:
            return
        states = {
            name: self._participant.channel(name).export_state()
            for name in list(self._channels) if name in self._participant.channels
        }
        self._offset_ms = self._clock_est.offset_ms
        now = self._now()
        for name, state in states.items():
            self._participant.leave(name)
            self._participant.join(name, now, state)
            self._participant.channel(name).set_connected(self._connected, now)
        self._state_dirty = True
        self._arm_hold(at_once=True)
        told = sent_ahead([int(row[2]) for st in states.values() for row in st.data["outgoing"]],
                          now, self.options.config.max_clock_skew_ms)  # fmt: skip
        if told is not None:  # lines stamped by the clock ahead: held by everyone
            self._emit(ClockSkew("sent_ahead", self._offset_ms, 0, 0, told))

    def _hold_clock_ahead(self, sender_id: str, cur: _Receiving) -> None:
        try:
            pb = parse_pb(cur.sds_bytes)
        except Exception:
            return
        if not pb.content:  # a sync: the next one says the same
            return
        self._clock_hold.hold(sender_id, pb.lamport_timestamp, cur.envelope)
        self.counters["held_clock_ahead"] += 1
        self._arm_hold()

    def _arm_hold(self, *, at_once: bool = False) -> None:
        """Give held envelopes back to the core when their time is within bound."""
        if self._closed or self._inbox is None:
            return
        due = self._clock_hold.next_due(self.options.config.max_clock_skew_ms)
        if due is None:
            return
        if self._hold_timer is not None:
            if not at_once:
                return
            self._hold_timer.cancel()
        delay = 0.0 if at_once else max(0.0, (due - self._now()) / 1000.0)

        def release() -> None:
            self._hold_timer = None
            if self._inbox is None or self._closed:
                return
            for env in self._clock_hold.due(self._now(), self.options.config.max_clock_skew_ms):
                self._inbox.put_envelope_now(_Envelope(env))
            self._arm_hold()

        self._hold_timer = asyncio.get_running_loop().call_later(delay, release)

    # ------------------------------------------------------------------ full disk

    def _disk_round_failed(self, out: _Round, items: Sequence[_Item], exc: Exception) -> None:
        """A round that could not be stored for a full disk (:mod:`app.node.disk_guard`): its
        lines are refused, its envelopes forgotten (taken again later), nothing published."""
        if self._disk.mark_full():
            free = self._disk.free_bytes()
            self._emit(DiskFull("full", free, f"disk full: {exc}"))
        for h in out.received:
            self._replay.forget(h)
        self._refuse_while_full(items)

    def _refuse_while_full(self, items: Sequence[_Item]) -> None:
        for item in items:
            if isinstance(item, _Send) and not item.future.done():
                self._disk.refused_lines += 1
                self.counters["lines_refused_disk_full"] += 1
                item.future.set_exception(
                    DiskFullLineError("disk full: the line was not stored and not sent")
                )
                self._emit(NodeError(f"disk full: line not stored, not sent: {item.text[:60]!r}"))
            elif isinstance(item, _Envelope):
                self._disk.dropped_envelopes += 1
                self.counters["dropped_disk_full"] += 1
            elif isinstance(item, _Tick):
                self._tick_queued = False
        _release_barriers(items)
        if self._disk_probe is None and not self._closed:
            def probe() -> None:
                self._disk_probe = None
                if self._inbox is not None and not self._tick_queued:
                    self._tick_queued = True
                    self._inbox.put(_Tick())

            self._disk_probe = asyncio.get_running_loop().call_later(PROBE_S, probe)

    async def _recover_disk(self) -> bool:
        """Free space again: rebuild every channel's core from storage (what the failed
        rounds took in is forgotten); True if the node writes again."""
        if not self._disk.room():
            return False
        self._envelopes.clear()  # own envelopes of refused lines must never leave
        self._waiting_envelopes.clear()
        self._carry_states = []
        for name, info in list(self._channels.items()):
            if name in self._participant.channels:
                self._participant.leave(name)
            self._own_state = {k: v for k, v in self._own_state.items() if k[0] != name}
            await self._restore_core(info.key)
            out_ids = self._participant.channel(name).outgoing_ids()
            if out_ids:
                for mid, msg in (await self.store.get_messages(name, out_ids)).items():
                    if msg.state is not None:
                        self._own_state[(name, mid)] = msg.state
        self._disk.full = False
        self._state_dirty = True
        free = self._disk.free_bytes()
        self._emit(DiskFull("ok", free, "space freed; state rebuilt from storage"))
        if self.store_sync is not None:
            for info in self._channels.values():
                self.store_sync.catch_up_soon(info.name, info.topic)
        return True

    async def _leave(self, channel: str) -> bool:
        info = self._channels.get(channel)
        if info is None:
            return False
        await self._round_now()
        batch = Batch(durable=True)
        batch.set_core_state(channel, self._participant.channel(channel).export_state().to_bytes())
        await self.store.commit_batch(batch)
        self._by_topic.pop(info.topic, None)  # its envelopes are not opened any more
        self._participant.leave(channel)
        await self._round_now()  # events the channel still had
        del self._channels[channel]
        self._late.forget(channel)
        await self.store.leave_channel(channel)
        await self.transport.unsubscribe([info.topic])
        for key in [k for k in self._own_state if k[0] == channel]:
            del self._own_state[key]
        self._emit(ChannelLeft(channel))
        return True


def _text_of(content: bytes) -> tuple[str | None, str, str]:
    c = decode_content(content)
    return c.name, c.kind, c.text


def _is_typed(content: bytes) -> bool:
    """Typed content (``app/chat/content.py``: starts with 0xFF): resent byte for byte."""
    return content[:1] == b"\xff"


def _release_barriers(items: Iterable[_Item]) -> None:
    for item in items:
        if isinstance(item, _Barrier) and not item.future.done():
            item.future.set_result(None)


def peer_lines(peers: Iterable[PeerInfo], now_ms: int) -> list[str]:
    """Human-readable lines for ``/who``."""
    lines = []
    for p in peers:
        ago = max(0, now_ms - p.last_seen_ms) / 1000.0
        lines.append(
            f"{p.name or '?'} ({p.sender_id[:8]}) seen {ago:.0f}s ago, {p.messages} messages"
        )
    return lines
