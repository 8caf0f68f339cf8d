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
  resend period.

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
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sds
from app.chat.content import decode_content
from app.chat.file_quota import (
    LEDGER_FILE,
    FileQuota,
)
from app.chat.lines import encode_content, split_typed
from app.chat.log_line import LogLine, log_line
from app.chat.redaction import is_tombstone, redact_deleted
from app.members.channel import MembersChannel
from app.members.events import is_control
from app.members.invite import (
    DEFAULT_TTL_MS,
)
from app.members.invites import unwrap
from app.members.verified import Verified
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
from app.node.context import NodeContext
from app.node.db_pages import page_size_for
from app.node.disk_guard import PROBE_S, DiskFullLineError, DiskGuard, is_disk_full, log_form
from app.node.envelope_memory import EnvelopeMemory
from app.node.ephemeral_guard import MAX_EPHEMERAL_BYTES, EphemeralGuard
from app.node.errors import IdentityMismatchError, NodeClosedError, PassphraseMismatchError
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
    Lost,
    Missing,
    NodeError,
    NodeEvent,
    OwnMessage,
    PeerInfo,
    PeerSeen,
    Ready,
    Rejected,
)
from app.node.inbox import (
    Barrier,
    Call,
    EnvelopeIn,
    Inbox,
    Item,
    Pending,
    SaveState,
    Send,
    Stop,
    Tick,
    release_barriers,
)
from app.node.late_arrivals import LateArrivals
from app.node.members_glue import MembersGlue
from app.node.own_messages import OwnMessages
from app.node.round import Receiving, Round, coalesce_lost
from app.node.settings import (
    DEFAULT_STATE_SAVE_MS,
    IDENTITY_FILE,
    STATE_SAVE_COST_FACTOR,
    ChannelInfo,
    NodeOptions,
    wall_ms,
)
from app.node.state_reconcile import reconcile_state
from app.node.transport import Transport, TransportStatus
from app.node.unheard import UnheardLines, nobody_heard
from net.channel_key import (
    ChannelKey,
    check_channel_name,
    derive_channel_key,
)
from net.envelope import (
    EnvelopeError,
    OversizedEnvelope,
    envelope_hash,
    open_envelope,
    open_for_topic,
    seal,
)
from net.identity import Identity, IdentityFileError
from net.store_sync import CatchUpProgress, StoreSync
from sds.message import parse_pb
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

__all__ = [
    "DEFAULT_STATE_SAVE_MS",
    "IDENTITY_FILE",
    "ChannelInfo",
    "IdentityMismatchError",
    "Node",
    "NodeClosedError",
    "NodeOptions",
    "PassphraseMismatchError",
    "peer_lines",
    "wall_ms",
]

logger = logging.getLogger("sdschat.node")

T = TypeVar("T")

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


#: Drops of a message the core will accept later (our clock caught up, the
#: sender's missing ids resolved): the envelope's resend is not a replay.
_REFUSED_FOR_NOW = frozenset({sds.DropReason.CLOCK_AHEAD, sds.DropReason.SENDER_BUDGET})

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
        self.counters: Counter[str] = Counter()
        """Counters: ``received``, ``delivered``, ``published``, ``rejected_<reason>``,
        ``dropped_<reason>`` (core drops), ``internal_errors``..."""
        self._clock = self.options.clock
        rng = self.options.rng if self.options.rng is not None else random.Random()
        config = self.options.config
        if not config.verify_message_ids:  # envelopes bind sender_id to a key: check ids
            config = config.with_changes(verify_message_ids=True)
        self._participant = sds.Participant(self.sender_id, config, rng)
        self._ctx = ctx = NodeContext(
            self.options, store, identity, transport, self._participant, self.counters,
            self._emit, self._now, name=name,
        )  # fmt: skip
        self._channels = ctx.channels  # joined channels, by name and by topic
        self._by_topic = ctx.by_topic
        self._own = OwnMessages()  # own messages on their way (app/node/own_messages.py)
        self._memory = memory = EnvelopeMemory(self.options.envelope_cache,
                                               self.options.waiting_envelope_cache)  # fmt: skip
        self._members = members = MembersGlue(  # app/node/members_glue.py
            ctx, memory, join=self.join, leave=self.leave, forget=self.forget,
            post_content=self.post_content, send_ephemeral=self.send_ephemeral,
            publish=self._publish, requeue=self._requeue, check_open=self._check_open,
        )  # fmt: skip
        self._late = LateArrivals(self.sender_id)  # the ↺ recovered rule
        self._ephemeral = EphemeralGuard()  # size cap and per-sender rate (received)
        self._files = FileQuota(  # app/chat/file_quota.py
            self.options.file_quota_bytes, store.data_dir / LEDGER_FILE,
            channel_bytes=self.options.file_channel_bytes, store=store, counters=self.counters,
            capped=lambda ch: ch not in members,  # members channels: admitted senders
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
        self._peers: dict[str, _Peer] = {}
        self._listeners: list[Callable[[NodeEvent], None]] = []
        self._queues: list[asyncio.Queue[NodeEvent | None]] = []
        self._inbox: Inbox | None = None
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
        self._started = False
        self._closed = False
        self._pacer = _Pacer(self.options.publish_rate, self.options.publish_burst)
        self._next_local_id = 0
        """Outbox id of the next typed line (numbered here: see ``_send_typed``)."""

    # ------------------------------------------------------------------ shared values

    @property
    def name(self) -> str:
        """The display name our next messages carry (:meth:`set_name` stores it)."""
        return self._ctx.name

    @name.setter
    def name(self, name: str) -> None:
        self._ctx.name = name

    @property
    def store_sync(self) -> StoreSync | None:
        """The store peer in use (:meth:`use_store`), if any."""
        return self._ctx.store_sync

    @store_sync.setter
    def store_sync(self, sync: StoreSync | None) -> None:
        self._ctx.store_sync = sync

    @property
    def _connected(self) -> bool:
        return self._ctx.connected

    @_connected.setter
    def _connected(self, connected: bool) -> None:
        self._ctx.connected = connected

    @property
    def _closing(self) -> bool:
        return self._ctx.closing

    @_closing.setter
    def _closing(self, closing: bool) -> None:
        self._ctx.closing = closing

    # the parts' state under the names tests and benchmarks inspect
    @property
    def _envelopes(self) -> dict[tuple[str, str], bytes]:
        return self._memory.recent

    @property
    def _waiting_envelopes(self) -> dict[tuple[str, bytes], bytes]:
        return self._memory.waiting

    @property
    def _carry_states(self) -> list[tuple[str, str, OwnState]]:
        return self._own.carried

    @property
    def _failed(self) -> list[tuple[str, str, bytes]]:
        return self._own.failed

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
        self._inbox = Inbox(self.options.max_queued_envelopes)
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
            self._inbox.put(Barrier(future))
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
                self._inbox.put(Stop())
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
                    self._members.forget_read({ch: mc.group_keys.read_marks()  # all stored now
                                               for ch, mc in self._members.channels.items()})
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
        if key is None:  # a members channel: its keys are in the data directory
            key = await self._members.load(channel)
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
            await self._members.subscribe_invites(channel)
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
        self._inbox.put(Send(channel, content, text, kind, future))
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
        self._inbox.put(Send(channel, content, summary.text, summary.kind, future))
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
                self._inbox.put(Pending(channel, content, local_id))
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
        again = self._own.take_failed(channel)
        by_channel: dict[str, list[str]] = {}
        for ch, mid, _content in again:
            if ch in self._channels:
                by_channel.setdefault(ch, []).append(mid)
        count = 0
        for ch, mids in by_channel.items():
            cached = {m: self._memory.recent.get((ch, m)) for m in mids}
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
        sealed = seal(data, self.identity, self._members.seal_key(channel))
        return await self._publish(sealed)

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

    # ------------------------------------------------------------------ members channels
    # (app/node/members_glue.py: the part that owns them; these are its public entry points)

    def members_channel(self, channel: str) -> MembersChannel | None:
        """The members-channel state of ``channel`` (``None`` for another kind)."""
        return self._members.get(channel)

    @property
    def verified(self) -> Verified:
        """The members this person verified by safety number (app/members/verified.py)."""
        return self._members.verified

    async def create_channel(self, channel: str) -> ChannelInfo:
        """Create members channel ``channel`` with us as its first admin, and join it
        (:meth:`MembersGlue.create_channel <app.node.members_glue.MembersGlue.create_channel>`)."""
        return await self._members.create_channel(channel)

    async def make_invite(
        self, channel: str, relays: Sequence[str] = (), ttl_ms: int = DEFAULT_TTL_MS,
        *, approve: bool = False,
    ) -> str:
        """A one-line invite code to members channel ``channel`` (admins only;
        :meth:`MembersGlue.make_invite <app.node.members_glue.MembersGlue.make_invite>`)."""
        return await self._members.make_invite(channel, relays, ttl_ms, approve=approve)

    def pending_joins(self, channel: str) -> list[tuple[str, str]]:
        """``(sender id, name)`` of the join requests waiting for an admin here."""
        return self._members.pending_joins(channel)

    async def decide_join(self, channel: str, sender_id: str, *, approve: bool) -> str:
        """Let a waiting newcomer in (or refuse it); returns its name
        (:meth:`MembersGlue.decide_join <app.node.members_glue.MembersGlue.decide_join>`)."""
        return await self._members.decide_join(channel, sender_id, approve=approve)

    async def join_by_invite(self, code: str, *, timeout_s: float = 300.0,
                             resend_s: float = 2.0) -> ChannelInfo:  # fmt: skip
        """Redeem an invite code: ask the inviting admin's node, then join the channel
        (:meth:`MembersGlue.join_by_invite <app.node.members_glue.MembersGlue.join_by_invite>`)."""
        return await self._members.join_by_invite(code, timeout_s=timeout_s, resend_s=resend_s)

    async def open_direct(self, via: str, member_id: str) -> ChannelInfo:
        """The direct conversation with ``member_id``, a member of members channel ``via``
        (:meth:`MembersGlue.open_direct <app.node.members_glue.MembersGlue.open_direct>`)."""
        return await self._members.open_direct(via, member_id)

    async def remove_member(self, channel: str, member_id: str) -> None:
        """Remove a member (admin), with new outer keys for the others
        (:meth:`MembersGlue.remove_member <app.node.members_glue.MembersGlue.remove_member>`)."""
        await self._members.remove_member(channel, member_id)

    # ------------------------------------------------------------------ asked by the parts

    def _requeue(self, envelopes: Sequence[bytes]) -> None:
        """Envelopes a members channel held, to receive again first."""
        assert self._inbox is not None
        self._inbox.requeue_envelopes(envelopes)

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
        self._inbox.put(Call(fn, future))
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
        await self._inbox.put_envelope(EnvelopeIn(bytes(data)))

    def _on_status(self, status: TransportStatus) -> None:
        was = self._connected
        self._connected = status.connected
        if was != self._connected:  # lost timeouts count only connected time
            self._participant.set_connected(self._connected, self._now())
        self._emit(ConnectionChanged(status.state, status.reason, status.retry_in, status.attempt))
        if self._connected and not was and self._inbox is not None and not self._closing:
            loop = asyncio.get_running_loop()
            self._inbox.put(Call(self._republish_outgoing, loop.create_future()))
            self._inbox.put(Tick())
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
            self._inbox.put(Tick())

    def _arm_state_save(self) -> None:
        if not self._state_dirty or self._save_timer is not None or self._closed:
            return
        due = self._last_state_save + self._state_interval
        delay = max(0.0, (due - self._now()) / 1000.0)

        def fire() -> None:
            self._save_timer = None
            if self._inbox is not None:
                self._inbox.put(SaveState())

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
        while True:  # ends at Stop
            items = await inbox.take(self.options.max_round)
            normal: list[Item] = []
            for item in items:
                if isinstance(item, Stop):
                    if normal:
                        await self._safe_round(normal)
                    await self._finish_tail()
                    return
                if isinstance(item, Call):
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

    async def _safe_round(self, items: list[Item]) -> None:
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
        which run between rounds (a ``Call``: every earlier round is committed)."""
        await self._finish_tail()
        out = await self._round([])
        await self._finish_round(out, [])
        # A joined (or restored) channel has deadlines of its own: syncs, due SDS-R
        # requests, resends. Without this, a node restarted into a silent channel
        # waited for someone else's envelope before running any of them.
        self._rearm()

    def _round_failed(self, exc: Exception, items: Sequence[Item]) -> None:
        self._internal_error(exc)
        for item in items:
            if isinstance(item, Send) and not item.future.done():
                item.future.set_exception(exc)
        release_barriers(items)

    async def _finish_tail(self) -> None:
        """Wait for the previous round's commit, events and publishing."""
        tail, self._tail = self._tail, None
        if tail is not None:
            await tail

    async def _finish_round(self, out: Round, items: Sequence[Item]) -> None:
        try:
            try:
                await self._commit(out)
            except Exception as exc:
                if not is_disk_full(exc):
                    raise
                self._disk_round_failed(out, items, exc)
                return
            self._members.forget_read(out.read_marks)
            await self._redact_deleted(out.events)
            for it in out.typed:  # durable now (fsynced), nothing of it published yet
                if not it.future.done() and it.local_id is not None:
                    it.future.set_result(it.local_id)
            for ev in coalesce_lost(out.events):
                self._emit(ev)
            release_barriers(items)
            await self._publish_round(out)
        except Exception as exc:
            self._round_failed(exc, items)

    async def _redact_deleted(self, events: Sequence[NodeEvent]) -> None:
        """Deletions delivered or sent this round: their targets' text leaves the disk
        (app/chat/redaction.py)."""
        for ev in events:
            if isinstance(ev, Delivered) and ev.kind == "delete":
                ch, sender, text = ev.channel, ev.sender_id, ev.text
            elif isinstance(ev, OwnMessage) and ev.state == "logged" and ev.kind == "delete":
                ch, sender, text = ev.channel, self.sender_id, ev.text or ""
            else:
                continue
            try:
                self.counters["redacted"] += await redact_deleted(
                    self.store, ch, sender, split_typed(text)[0]
                )
            except StorageError as exc:  # the deletion stands; its text stays on disk
                self._emit(NodeError(f"could not erase a deleted message's text: {exc}"))

    async def _round(self, items: Sequence[Item]) -> Round:
        """The core calls of one round; returns it with its batch ready to commit."""
        out = Round()
        save_requested = False
        now = self._now()
        for item in items:
            if isinstance(item, EnvelopeIn):
                try:
                    self._receive(item.data, now, out)
                except Exception as exc:  # a bug met by one envelope: keep the others
                    out.current = None
                    self.counters["receive_errors"] += 1
                    self._internal_error(exc)
            elif isinstance(item, Send):
                self._send_typed(item, now, out)
            elif isinstance(item, Pending):
                self._core_send(item.channel, item.content, item.local_id, now, out)
            elif isinstance(item, Tick):
                self._tick_queued = False
                if self._connected:
                    self._participant.handle_timer(now)
                    out.core_called = True
                    self._drain(now, out)
            elif isinstance(item, SaveState):
                save_requested = True
        self._drain(now, out)
        await self._follow_ups(now, out)
        if self._members.dirty:
            self._members_round(now, out)
            await self._follow_ups(now, out)
        if out.core_called:
            self._state_dirty = True
        self._complete_batch(out, now, force_state=save_requested)
        return out

    def _send_typed(self, it: Send, now: int, out: Round) -> None:
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
        self, channel: str, content: bytes, local_id: int, now: int, out: Round
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

    def _reject(self, reason: str, channel: str | None, detail: str, out: Round) -> None:
        key = f"rejected_{reason}"
        self.counters[key] += 1
        out.events.append(Rejected(reason, channel, detail, self.counters[key]))

    def _receive(
        self, data: bytes, now: int, out: Round, carried_on: bytes | None = None
    ) -> None:
        """One envelope, as delivered, or carried by an envelope of topic ``carried_on``."""
        if carried_on is None:
            self.counters["received"] += 1
        channel: str | None = None
        if self._members.invite_topics and carried_on is None:
            framed = unwrap(data)
            if framed is not None and framed[0] in self._members.invite_topics:
                self._members.invite_frame(framed[0], framed[1], now)
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
        if not self._memory.seen.check_and_remember(opened.envelope_hash):
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
            if not self._members.content(members, opened, data, out):
                return
        core = self._participant.channel(channel)
        # a carried copy (under a hash of its own: without what it carried) of a line
        # we hold: the core checks its id and counts a copy on the wire, nothing waits
        held = carried_on is not None and pb0 is not None and core.holds(pb0.message_id)
        if held:
            self.counters["carried_duplicates"] += 1
        current = out.current = Receiving(opened.envelope_hash, data, opened.sds_bytes)
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
        out.core_called = True
        self._drain(now, out)
        out.current = None
        if not current.consumed and not current.settled and not held:
            # A content message that waits for dependencies (whether or not the core
            # reported them missing: it may wait only for other waiting messages).
            # Keep its envelope, by hash (its retrieval hint), for its delivery.
            self._memory.wait(channel, current.hash, data)

    def _seen(
        self, channel: str, sender_id: str, name: str | None, now: int, out: Round, content: bool
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

    def _wait_for_listeners(self, ev: sds.MessageSendFailed, now: int, out: Round) -> bool:
        """A message given up on while nobody else was heard in its channel: keep it
        as sent, to publish again when someone is (app/node/unheard.py); whether it was."""
        ch, mid = ev.channel_id, ev.message_id
        cfg = self.options.config
        # its resends, and a sync period before them (a member's periodic sync says it is there)
        since = now - cfg.resend_unacknowledged_ms * (ev.attempts + 1) - cfg.sync_interval_ms
        heard = ((sid, p.channels, p.last_seen_ms) for sid, p in self._peers.items())
        if ev.reason != "resends_exhausted" or not nobody_heard(heard, self.sender_id, ch, since):
            return False
        self._unheard.hold(ch, mid)
        self._own.typed.pop((ch, mid), None)
        self.counters["waiting_for_listeners"] += 1
        out.events.append(
            OwnMessage(ch, "waiting", self._own.local_ids.get((ch, mid)), mid,
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

    def _send_control(self, channel: str, content: bytes, now: int, out: Round) -> None:
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

    def _members_round(self, now: int, out: Round) -> None:
        """After a round that moved a members channel: send the rekeys due (key shares
        go before our next message), and save the channel's keys and control
        messages (before the commit)."""
        members = self._members
        for _ in range(3):  # sending may apply our own control messages: settle
            dirty = members.take_dirty()
            for channel, control in members.controls_due(dirty, now):
                self._send_control(channel, control, now, out)
            members.save_dirty(dirty)
            if not members.dirty:
                return

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
        self._members.forget(channel)
        self._emit(Info(f"forgot #{channel} ({n} messages); your identity is unchanged",
                        {"channel": channel, "messages": n}))  # fmt: skip
        return n

    def _seal_carrying(self, channel: str, sds_bytes: bytes, now: int) -> bytes:
        """Our new message's envelope, with the envelopes the core wants carried
        along (app/node/carrying.py); without them if they would not fit."""
        key = self._members.seal_key(channel)
        picks = self._participant.channel(channel).to_carry(now)
        carried: list[bytes] = []
        if picks:
            self.counters["carried_wanted"] += len(picks)
            mc = self._members.get(channel)
            keys = [self._channels[channel].key] if mc is None else mc.opening_keys()
            carried = self._memory.carrier.attach(channel, picks, self._memory.recent, keys)
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
                         out: Round) -> None:  # fmt: skip
        """Envelopes carried by one we opened, each as if it had arrived alone; one we
        hold already is told to the core as a copy on the wire, without opening it."""
        for env in envelopes:
            self.counters["carried_received"] += 1
            digest = envelope_hash(env)
            named = self._memory.carrier.named(digest) if digest in self._memory.seen else None
            if named is not None and named[0] == self._by_topic.get(topic):
                self.counters["carried_duplicates"] += 1
                self._participant.channel(named[0]).note_carried(named[1], now)
                out.core_called = True
                continue
            self._receive(env, now, out, carried_on=topic)  # opened, and refused if need be

    def _drain(self, now: int, out: Round) -> None:
        """After every core call: events into the batch and the UI list, datagrams queued."""
        wall = self._now()
        for ev in self._participant.events():
            out.batch.add_event(log_form(ev), wall)  # reminders by count: app/node/disk_guard.py
            self._handle_event(ev, now, out)
        for channel, dg in self._participant.datagrams_to_send():
            info = self._channels.get(channel)
            if info is None:
                continue
            if dg.kind == "sync":
                sync = seal(dg.data, self.identity, self._members.seal_key(channel))
                out.publish.append((channel, None, sync))
                self.counters["sync_sent"] += 1
                continue
            self.counters[f"{dg.kind}_datagrams"] += 1
            env = self._memory.recent.get((channel, dg.message_id))
            if env is not None:
                out.publish.append((channel, dg.message_id, env))
            else:
                out.need_envelope.append((channel, dg.message_id, dg.kind))

    def _handle_event(self, ev: sds.Event, now: int, out: Round) -> None:
        ch = ev.channel_id
        if isinstance(ev, sds.MessageSent):
            self._on_sent(ev, now, out)
        elif isinstance(ev, sds.MessageDelivered):
            self._on_delivered(ev, now, out)
        elif isinstance(ev, sds.MessageAcknowledged):
            if self._unheard:
                self._unheard.acknowledged(ch, ev.message_id)
            self._own.acknowledged_after_failing(ch, ev.message_id)  # nothing left to retry
            if self._own.set(ch, ev.message_id, OwnState.ACKNOWLEDGED, out.batch):
                out.events.append(
                    OwnMessage(
                        ch,
                        "acknowledged",
                        self._own.local_ids.pop((ch, ev.message_id), None),
                        ev.message_id,
                        detail={"by": ev.by_sender, "causal": ev.by_causal_history},
                    )
                )
            self.counters["acknowledged"] += 1
        elif isinstance(ev, sds.MessagePossiblyAcknowledged):
            if self._own.set(ch, ev.message_id, OwnState.POSSIBLY_ACKNOWLEDGED, out.batch):
                out.events.append(
                    OwnMessage(
                        ch,
                        "possibly_acknowledged",
                        self._own.local_ids.get((ch, ev.message_id)),
                        ev.message_id,
                        detail={"hits": ev.hits, "threshold": ev.threshold, "by": ev.by_sender},
                    )
                )
        elif isinstance(ev, sds.MessageSendFailed) and self._wait_for_listeners(ev, now, out):
            pass  # nobody was there to hear it: it waits (app/node/unheard.py)
        elif isinstance(ev, sds.MessageSendFailed):
            text = self._own.text.get((ch, ev.message_id))
            if self._own.set(ch, ev.message_id, OwnState.FAILED, out.batch):
                out.events.append(
                    OwnMessage(
                        ch,
                        "failed",
                        self._own.local_ids.pop((ch, ev.message_id), None),
                        ev.message_id,
                        text=None if text is None else text[0],
                        detail={"reason": ev.reason, "attempts": ev.attempts},
                    )
                )
            typed = self._own.typed.pop((ch, ev.message_id), None)
            if typed is not None:
                self._own.failed.append((ch, ev.message_id, typed))
            elif text is not None:
                content = encode_content(text[0], self.name, text[1])
                self._own.failed.append((ch, ev.message_id, content))
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
                self._memory.seen.forget(ev.retrieval_hint)
            if out.current is not None and ev.reason not in _NOT_FATAL_DROPS:
                out.current.settled = True
                if ev.reason in _REFUSED_FOR_NOW:  # its resend is welcome later
                    self._memory.seen.forget(out.current.hash)
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

    def _waiting_preview(self, ch: str, mid: str, out: Round) -> dict[str, Any]:
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

    def _on_sent(self, ev: sds.MessageSent, now: int, out: Round) -> None:
        ch, mid = ev.channel_id, ev.message_id
        env = self._seal_carrying(ch, ev.data, now)
        digest = envelope_hash(env)
        self._memory.carrier.remember(digest, ch, mid)
        plain = ev.content
        mc = self._members.get(ch)
        if mc is not None:
            if is_control(plain):
                self._members.on_control(mc, self.sender_id, ev.lamport, mid, plain, env)
            else:
                plain = mc.own_plaintext(plain, (ev.lamport, mid))
        self._participant.channel(ch).set_retrieval_hint(mid, digest)
        self._memory.seen.remember(digest)
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
        elif local_id is not None:
            out.batch.record_sent(local_id, msg)
        else:
            out.batch.insert_message(msg)
        self._memory.remember(ch, mid, env)
        self._lamports.remember(ch, mid, ev.lamport)
        content = decode_content(plain)
        self._own.logged(ch, mid, local_id, plain, content.text, content.kind)
        out.own_new.append((ch, mid, env))
        out.events.append(
            OwnMessage(
                ch, "logged", local_id, mid, ev.lamport, ev.position, content.text, content.kind
            )
        )
        self.counters["sent"] += 1

    def _on_delivered(self, ev: sds.MessageDelivered, now: int, out: Round) -> None:
        ch, mid = ev.channel_id, ev.message_id
        env: bytes | None = None
        hint = ev.retrieval_hint
        cur = out.current
        if cur is not None and hint == cur.hash:
            env = cur.envelope
            cur.consumed = True
        elif hint is not None:
            env = self._memory.waiting.pop((ch, hint), None)
        kept, refused = self._files.check(ch, ev.sender_id, ev.content)
        if refused is not None:  # a file's bytes not kept (app/chat/file_quota.py)
            self.counters["file_refused_too_large" if refused == "too_large"
                          else "file_segments_refused"] += 1  # fmt: skip
            env = None  # not kept either: we do not serve what we refused
        if env is not None:
            self._memory.remember(ch, mid, env)
        if hint is not None:
            self._memory.carrier.remember(hint, ch, mid)
        mc = self._members.get(ch)
        if mc is not None and is_control(ev.content):
            self._members.on_control(mc, ev.sender_id, ev.lamport, mid, ev.content, env)
        elif mc is not None:  # a removed member's line its removal's cut leaves out
            self._members.refused_at_delivery(mc, ev.sender_id, mid, out)
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

    async def _follow_ups(self, now: int, out: Round) -> None:
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
                        self._memory.remember(ch, mid, env)
                        out.publish.append((ch, mid, env))
            if not progressed:
                return

    def _complete_batch(self, out: Round, now: int, *, force_state: bool) -> None:
        """Add carried own states and (when due) the exported core states to the batch."""
        batch = out.batch
        self._own.add_carried(batch)
        if self._state_dirty and (
            force_state or now - self._last_state_save >= self._state_interval
        ):
            self._add_states(batch)
            self._members.at_state_save(now, out)  # keys read, rotations, digests

    def _commits_inline(self, batch: Batch) -> bool:
        """Whether ``batch`` is committed on the loop's thread (``inline_commit_messages``)."""
        return (
            len(batch.messages) <= self.options.inline_commit_messages
            and not batch.core_states
            and self.store.idle
        )

    async def _commit(self, out: Round) -> None:
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

    async def _settle_copies(self, copies: list[Delivered], out: Round) -> None:
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

    async def _save_all_states(self, *, durable: bool) -> None:
        batch = Batch(durable=durable)
        self._own.add_carried(batch)
        self._add_states(batch)
        if len(batch):
            await self.store.commit_batch(batch)

    async def _publish_round(self, out: Round) -> None:
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
                self._own.mark_sent(ch, mid, sent_events)
        if self._own.carried:
            # "sent" is advisory: it rides in the next round's transaction (or the
            # next state save, armed here) instead of a commit of its own, which
            # would hold up the next round. Lost in a crash, it only means the
            # envelope is republished at the next start (peers drop the copy).
            self._state_dirty = True
            self._arm_state_save()
        for ev in sent_events:
            self._emit(ev)

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
            ids = self._participant.channel(ch).outgoing_ids()[-self.options.republish_cap :]
            missing = [m for m in ids if (ch, m) not in self._memory.recent]
            stored = await self.store.get_envelopes(ch, missing) if missing else {}
            for mid in ids:
                env = self._memory.recent.get((ch, mid)) or stored.get(mid)
                if env is None:
                    continue
                if not self.transport.connected:
                    return
                if await self._publish(env):
                    self.counters["republished"] += 1
                    self._own.mark_sent(ch, mid, sent_events)
        if self._own.carried:
            batch = Batch()
            self._own.add_carried(batch)
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
            self._own.learn(name, await self.store.get_messages(name, out_ids))
        # Own messages that failed in an earlier run: /retry can still send them again
        # (newest 1,000; the core keeps the same ids for a late acknowledgement).
        self._own.learn_failed(name, reversed(await self.store.own_failed(name)))
        self._state_dirty = True
        await self.transport.subscribe([key.topic])
        self._emit(ChannelJoined(name, key.is_public, key.topic.hex(), report.stored))
        if self.store_sync is not None:
            self.store_sync.catch_up_soon(name, key.topic)
        pending = await self.store.pending_outgoing(name)
        assert self._inbox is not None
        if pending:
            self._inbox.put_front([Pending(p.channel, p.content, p.local_id) for p in pending])
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
        self._inbox.put(Call(self._apply_clock_offset, loop.create_future()))

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

    def _hold_clock_ahead(self, sender_id: str, cur: Receiving) -> None:
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
                self._inbox.put_envelope_now(EnvelopeIn(env))
            self._arm_hold()

        self._hold_timer = asyncio.get_running_loop().call_later(delay, release)

    # ------------------------------------------------------------------ full disk

    def _disk_round_failed(self, out: Round, items: Sequence[Item], exc: Exception) -> None:
        """A round that could not be stored for a full disk (:mod:`app.node.disk_guard`): its
        lines are refused, its envelopes forgotten (taken again later), nothing published."""
        if self._disk.mark_full():
            free = self._disk.free_bytes()
            self._emit(DiskFull("full", free, f"disk full: {exc}"))
        for h in out.received:
            self._memory.seen.forget(h)
        self._refuse_while_full(items)

    def _refuse_while_full(self, items: Sequence[Item]) -> None:
        for item in items:
            if isinstance(item, Send) and not item.future.done():
                self._disk.refused_lines += 1
                self.counters["lines_refused_disk_full"] += 1
                item.future.set_exception(
                    DiskFullLineError("disk full: the line was not stored and not sent")
                )
                self._emit(NodeError(f"disk full: line not stored, not sent: {item.text[:60]!r}"))
            elif isinstance(item, EnvelopeIn):
                self._disk.dropped_envelopes += 1
                self.counters["dropped_disk_full"] += 1
            elif isinstance(item, Tick):
                self._tick_queued = False
        release_barriers(items)
        if self._disk_probe is None and not self._closed:
            def probe() -> None:
                self._disk_probe = None
                if self._inbox is not None and not self._tick_queued:
                    self._tick_queued = True
                    self._inbox.put(Tick())

            self._disk_probe = asyncio.get_running_loop().call_later(PROBE_S, probe)

    async def _recover_disk(self) -> bool:
        """Free space again: rebuild every channel's core from storage (what the failed
        rounds took in is forgotten); True if the node writes again."""
        if not self._disk.room():
            return False
        self._memory.clear()  # own envelopes of refused lines must never leave
        self._own.carried = []
        for name, info in list(self._channels.items()):
            if name in self._participant.channels:
                self._participant.leave(name)
            self._own.forget_states(name)
            await self._restore_core(info.key)
            out_ids = self._participant.channel(name).outgoing_ids()
            if out_ids:
                self._own.learn(name, await self.store.get_messages(name, out_ids), text=False)
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
        self._own.forget_states(channel)
        self._emit(ChannelLeft(channel))
        return True


def _text_of(content: bytes) -> tuple[str | None, str, str]:
    c = decode_content(content)
    return c.name, c.kind, c.text


def peer_lines(peers: Iterable[PeerInfo], now_ms: int) -> list[str]:
    """Human-readable lines for ``/who``."""
    lines = []
    for p in peers:
        ago = max(0, now_ms - p.last_seen_ms) / 1000.0
        lines.append(
            f"{p.name or '?'} ({p.sender_id[:8]}) seen {ago:.0f}s ago, {p.messages} messages"
        )
    return lines
