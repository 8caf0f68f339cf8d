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

Receiving is :mod:`app.node.receiving`'s (the steps are listed there): an envelope
is opened for its topic, checked (AEAD, signature, sender id, replay guard, a
members channel's gate), and its SDS bytes go to that channel's core with the
envelope hash as retrieval hint.

The parts (each an object with its own state, created here and called down into;
none imports this module; :class:`~app.node.context.NodeContext` is what they share):

* :class:`~app.node.receiving.Receiver`: received envelopes into the cores (and the
  clock estimate their syncs feed);
* :class:`~app.node.effects.Effects`: the core's events into the round (storage rows,
  node events, envelopes to publish), storage follow-ups, copies and conflicts; the
  peers heard, the late-arrival rule, the ephemeral guard, the file quota;
* :class:`~app.node.publishing.Publisher`: envelopes onto the transport after the
  commit, paced; republishing on (re)connection; ``/retry``;
* :class:`~app.node.joining.Joiner`: join (restore + reconcile), leave, forget;
* :class:`~app.node.members_glue.MembersGlue`: members channels, invites, direct
  messages;
* :class:`~app.node.own_messages.OwnMessages` and
  :class:`~app.node.envelope_memory.EnvelopeMemory`: the state of own messages on
  their way, and the envelopes (and hashes) kept in memory.

This module keeps the lifecycle (:meth:`Node.open`, :meth:`Node.start`,
:meth:`Node.close`), the public API, the worker loop and its rounds (:mod:`app.node.inbox`,
:mod:`app.node.round`), the core calls that make own messages, and the timers
(protocol timer, state save, clock hold, full-disk probe).

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
from pathlib import Path
from typing import Any, TypeVar

import sds
from app.chat.authors import authored
from app.chat.file_quota import FileQuota
from app.chat.lines import encode_content
from app.chat.log_line import LogLine, log_line
from app.members.channel import MembersChannel
from app.members.device_copy import check_home
from app.members.invite import DEFAULT_TTL_MS
from app.members.verified import Verified
from app.node.clock_guard import ClockHold, Correction, describe_offset, sent_ahead
from app.node.context import NodeContext
from app.node.db_pages import page_size_for
from app.node.device_glue import DeviceGlue
from app.node.device_members import DeviceMembers
from app.node.disk_guard import PROBE_S, DiskFullLineError, DiskGuard, is_disk_full
from app.node.effects import Effects
from app.node.envelope_memory import EnvelopeMemory
from app.node.ephemeral_guard import MAX_EPHEMERAL_BYTES
from app.node.errors import IdentityMismatchError, NodeClosedError, PassphraseMismatchError
from app.node.events import (
    CatchUp,
    ClockSkew,
    Closed,
    ConnectionChanged,
    DiskFull,
    Info,
    NodeError,
    NodeEvent,
    OwnMessage,
    PeerInfo,
    Ready,
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
from app.node.joining import Joiner
from app.node.members_glue import MembersGlue
from app.node.own_messages import OwnMessages
from app.node.publishing import Publisher
from app.node.receiving import Receiver
from app.node.round import Receiving, Round, coalesce_lost
from app.node.settings import (
    DEFAULT_STATE_SAVE_MS,
    IDENTITY_FILE,
    STATE_SAVE_COST_FACTOR,
    ChannelInfo,
    NodeOptions,
    core_config,
    wall_ms,
)
from app.node.transport import Transport, TransportStatus
from net.channel_key import ChannelKey, check_channel_name, derive_channel_key
from net.envelope import seal
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
    Store,
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
        config = core_config(self.options.config)  # ids checked, resends back off
        self._participant = sds.Participant(self.sender_id, config, rng)
        #: The correction the cores run on (``_now``): the estimate's, once the cores
        #: have been moved to it (``_apply_clock_offset``), never before.
        self._offset_ms = 0
        self._ctx = ctx = NodeContext(
            self.options, store, identity, transport, self._participant, self.counters,
            self._emit, self._now, name=name,
        )  # fmt: skip
        self._channels = ctx.channels  # written by the joiner only
        # the parts (module docstring): each owns its state; none imports this module
        self._own = own = OwnMessages()
        self._memory = memory = EnvelopeMemory(self.options.envelope_cache,
                                               self.options.waiting_envelope_cache)  # fmt: skip
        self._members = members = MembersGlue(
            ctx, memory, join=self.join, leave=self.leave, forget=self.forget,
            post_content=self.post_content, send_ephemeral=self.send_ephemeral,
            publish=self._publish, requeue=self._requeue, check_open=self._check_open,
        )  # fmt: skip
        self._effects = effects = Effects(ctx, own, memory, members,
                                          on_clock_ahead=self._hold_clock_ahead)  # fmt: skip
        self.devices = devices = DeviceGlue(ctx, post_content=self.post_content,
                                            is_members=lambda ch: ch in members)  # fmt: skip
        """Device logs of public and passphrase channels (app/node/device_glue.py)."""
        effects.authors.devices = devices.book
        effects.on_device_log = devices.delivered
        self._device_members = device_members = DeviceMembers(
            ctx, members.channels, own_log=devices.own_log, post=self.post_content,
            remove=members.remove_member)  # fmt: skip
        """Our devices as members of our members channels (app/node/device_members.py)."""
        devices.on_own_log = device_members.reconcile
        self._receiver = Receiver(ctx, memory, members, effects,
                                  on_clock_fix=self._clock_corrected)  # fmt: skip
        self._publisher = publisher = Publisher(
            ctx, own, memory, members, on_carried=self._carried_states,
            nobody_heard=effects.nobody_heard_lately,
        )  # fmt: skip
        self._joiner = Joiner(ctx, own, effects, members, publisher, round_now=self._round_now,
                              mark_dirty=self._mark_state_dirty,
                              queue_pending=self._queue_pending)  # fmt: skip
        self._disk = DiskGuard(store.data_dir)  # a full disk: app/node/disk_guard.py
        self._disk_probe: asyncio.TimerHandle | None = None
        self._clock_hold = ClockHold()  # messages from a clock ahead: app/node/clock_guard.py
        self._hold_timer: asyncio.TimerHandle | None = None
        self._listeners: list[Callable[[NodeEvent], None]] = [self.devices.on_event,
                                                              device_members.on_event]
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

    @property
    def _files(self) -> FileQuota:
        return self._effects.files

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
            app.members.device_copy.DataDirCopiedError: the directory is a copy of
                another (``sdschat --moved`` when the original is gone for good).

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
            # a copied data dir is refused before anything is sent (app/members/device_copy.py)
            await asyncio.to_thread(check_home, directory, identity.sender_id)
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
        await self.devices.start()  # before anything arrives: the labels read it
        self._worker = asyncio.create_task(self._run(), name="sdschat-node")
        self.transport.start(self._on_envelope, self._on_status)
        self._emit(Ready(self.sender_id, self.name, str(self.store.data_dir)))
        if self.options.store_url is not None:
            self.use_store(self.options.store_url)

    def use_store(self, url: str | Sequence[str]) -> None:
        """Use the store peer at ``url`` (or the first of several that answers: they fail
        over, :mod:`net.store_sync`): catch every joined channel up now, on every
        (re)connection and join, and fetch missing dependencies from it by hint.

        A second call with other URLs replaces the first store.
        """
        self._check_open()
        urls = (url,) if isinstance(url, str) else tuple(url)
        if self.store_sync is not None:
            if self.store_sync.urls == urls:
                return
            old = self.store_sync
            asyncio.get_running_loop().create_task(old.close())
        self.store_sync = StoreSync(
            urls,
            deliver=self._on_envelope,
            progress=self._on_catch_up,
            barrier=self._committed,
            data_dir=self.store.data_dir,
        )
        self.store_sync.start()
        self.store_sync.set_connected(self._connected)
        for info in self._channels.values():
            self.store_sync.catch_up_soon(info.name, info.topic)
        self._emit(Info(f"using the store peer at {', '.join(urls)}", {"store": urls[0]}))

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
            self._effects.files.stop()  # evictions, the ledger (app/chat/file_quota.py)
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
        return self._effects.peer_infos(channel)

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
            return await self._joiner.join(chosen)

        info: ChannelInfo = await self._call_in_worker(do_join)
        if channel in self._members:
            await self._members.subscribe_invites(channel)
        return info

    async def leave(self, channel: str) -> bool:
        """Leave ``channel`` (its history stays); False if it was not joined."""
        self._check_open()

        async def do_leave() -> bool:
            return await self._joiner.leave(channel)

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
        mc = self._members.get(channel)  # a membership event names people by the roster
        summary = authored(content, self.sender_id, mc.roster if mc is not None else None)
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
        return await self._publisher.retry(channel)

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
        return await self._publisher.publish(sealed)

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

    async def forget(self, channel: str) -> int:
        """Forget channel ``channel`` (left before): its history, keys and passphrase
        binding go; the identity stays, so the same name can be joined anew. Returns
        the number of messages deleted.

        Raises:
            ValueError: it is joined (leave it first) or unknown here.
        """
        self._check_open()
        return await self._joiner.forget(channel)

    # ------------------------------------------------------------------ asked by the parts

    async def _publish(self, envelope: bytes) -> bool:
        return await self._publisher.publish(envelope)

    def _requeue(self, envelopes: Sequence[bytes]) -> None:
        """Envelopes a members channel held, to receive again first."""
        assert self._inbox is not None
        self._inbox.requeue_envelopes(envelopes)

    def _queue_pending(self, items: Sequence[Pending]) -> None:
        """Outbox lines of a channel joined, produced before what is queued."""
        assert self._inbox is not None
        self._inbox.put_front(items)

    def _mark_state_dirty(self) -> None:
        self._state_dirty = True

    def _carried_states(self) -> None:
        """Own states wait to be stored: in the next round, or the next state save."""
        self._state_dirty = True
        self._arm_state_save()

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
            await self._effects.redact_deleted(out.events)
            for it in out.typed:  # durable now (fsynced), nothing of it published yet
                if not it.future.done() and it.local_id is not None:
                    it.future.set_result(it.local_id)
            for ev in coalesce_lost(out.events):
                self._emit(ev)
            release_barriers(items)
            await self._publisher.publish_round(out)
        except Exception as exc:
            self._round_failed(exc, items)

    async def _round(self, items: Sequence[Item]) -> Round:
        """The core calls of one round; returns it with its batch ready to commit."""
        out = Round()
        save_requested = False
        now = self._now()
        for item in items:
            if isinstance(item, EnvelopeIn):
                try:
                    self._receiver.receive(item.data, now, out)
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
                    self._effects.drain(now, out)
            elif isinstance(item, SaveState):
                save_requested = True
        self._effects.drain(now, out)
        await self._effects.follow_ups(now, out)
        if self._members.dirty:
            self._members_round(now, out)
            await self._effects.follow_ups(now, out)
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
        self._effects.drain(now, out)
        out.local_id = None

    def _send_control(self, channel: str, content: bytes, now: int, out: Round) -> None:
        """Send a control message of ours inside a round (before the line being made)."""
        local_id, typed_at = out.local_id, out.typed_at
        out.local_id = out.typed_at = None
        try:
            self._participant.channel(channel).send(content, now)
            out.core_called = True
            self._effects.drain(now, out)
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

    def _complete_batch(self, out: Round, now: int, *, force_state: bool) -> None:
        """Add carried own states and (when due) the exported core states to the batch."""
        batch = out.batch
        self._own.add_carried(batch)
        if self._state_dirty and (
            force_state or now - self._last_state_save >= self._state_interval
        ):
            self._add_states(batch)
            self._members.at_state_save(now, out)  # keys read, rotations, digests

    # ------------------------------------------------------------------ commit and state saves

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
                await self._effects.settle_copies(copies, out)
            self.counters["delivered"] += len(out.delivered) - len(copies)

    def _add_states(self, batch: Batch) -> None:
        started = time.perf_counter()
        for name in self._channels:
            if name not in self._participant.channels:  # being left (see Joiner.leave)
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

    async def _republish_outgoing(self) -> None:
        """On (re)connection: publish every unacknowledged own message's envelope again."""
        try:
            await self._publisher.republish()
        except Exception as exc:
            self._internal_error(exc)

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
        if self._offset_ms == self._receiver.clock_est.offset_ms:
            return
        states = {
            name: self._participant.channel(name).export_state()
            for name in list(self._channels) if name in self._participant.channels
        }
        self._offset_ms = self._receiver.clock_est.offset_ms
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
            await self._joiner.restore_core(info.key)
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


def peer_lines(peers: Iterable[PeerInfo], now_ms: int) -> list[str]:
    """Human-readable lines for ``/who``."""
    lines = []
    for p in peers:
        ago = max(0, now_ms - p.last_seen_ms) / 1000.0
        devices = f"; devices: {', '.join(p.devices)}" if p.devices else ""
        lines.append(
            f"{p.name or '?'} ({p.sender_id[:8]}) seen {ago:.0f}s ago, {p.messages} messages"
            + devices
        )
    return lines
