"""Joining, restoring, leaving and forgetting a channel: :class:`Joiner`.

A join (:meth:`Joiner.join`, run by the worker between rounds) checks the channel's
passphrase binding in this data directory, restores its core from the saved state
reconciled with the stored log (:meth:`Joiner.restore_core`,
:mod:`app.node.state_reconcile`), seeds the late-arrival rule with the newest stored
page, learns the stored states of own messages still unacknowledged and the failed
ones ``/retry`` may send, subscribes the topic, asks the store peer to catch the
channel up, queues the lines left pending in the outbox, republishes what is
unacknowledged, and runs a round for the restore's events and the first state save.
A leave saves the core's state, stops opening the channel's envelopes, runs a round
for the events the channel still had, and keeps the history; a forget deletes the
history (the identity stays). After a full disk every core is rebuilt the same way
(:meth:`Joiner.restore_core`).

This part is the one writer of the joined-channel table (``ctx.channels``,
``ctx.by_topic``). What it asks of its node, given at construction: ``round_now`` (a
round with no items, committed, emitted and published), ``mark_dirty`` (the cores'
state is to be saved), ``queue_pending`` (outbox lines to produce first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import sds
from app.node.errors import PassphraseMismatchError
from app.node.events import ChannelJoined, ChannelLeft, Info, NodeError
from app.node.heap_trim import release_freed
from app.node.inbox import Pending
from app.node.settings import ChannelInfo
from app.node.state_reconcile import ReconcileReport, reconcile_state
from net.channel_key import ChannelKey
from net.envelope import EnvelopeError, open_envelope, open_for_topic
from storage import Batch

if TYPE_CHECKING:
    from app.node.context import NodeContext
    from app.node.effects import Effects
    from app.node.members_glue import MembersGlue
    from app.node.own_messages import OwnMessages
    from app.node.publishing import Publisher

__all__ = ["SEED_PAGE", "Joiner"]

#: Stored messages read at join to seed the late-arrival rule (the TUI's first page).
SEED_PAGE = 200


class Joiner:
    """Channels in and out of the node (see the module)."""

    def __init__(
        self,
        ctx: NodeContext,
        own: OwnMessages,
        effects: Effects,
        members: MembersGlue,
        publisher: Publisher,
        *,
        round_now: Callable[[], Awaitable[None]],
        mark_dirty: Callable[[], None],
        queue_pending: Callable[[Sequence[Pending]], None],
    ) -> None:
        self._ctx = ctx
        self.options = ctx.options
        self.store = ctx.store
        self.transport = ctx.transport
        self.counters = ctx.counters
        self.sender_id = ctx.identity.sender_id
        self._participant = ctx.participant
        self._channels = ctx.channels
        self._by_topic = ctx.by_topic
        self._emit = ctx.emit
        self._now = ctx.now
        self._own = own
        self._effects = effects
        self._members = members
        self._publisher = publisher
        self._round_now = round_now
        self._mark_dirty = mark_dirty
        self._queue_pending = queue_pending

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

    def _nobody_heard(self, channel: str, topic: bytes) -> None:
        """The first join of a passphrase channel heard nobody: say so plainly."""
        info = self._channels.get(channel)
        if self._ctx.closing or info is None or info.topic != topic:
            return
        self.counters["nobody_heard_checks"] += 1
        if self._effects.anyone_heard(channel):
            return
        self._emit(Info(
            f"nobody has been heard in #{channel} with this passphrase yet; if others are "
            "there, check the passphrase with them (a typo makes another, empty channel; "
            f"/leave {channel} and /forget {channel} to try again)",
            {"channel": channel, "nobody_heard": True}))

    async def join(self, key: ChannelKey) -> ChannelInfo:
        """Join ``key``'s channel (or return it, joined already with this key)."""
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
        report = await self.restore_core(key)
        # Back after a restart (or a /join again): our next sync goes out even where sync
        # suppression would skip it (its restored state says others spoke since our last
        # message): its bloom filter shows what we missed, and the others name it again.
        # Else a quiet channel never told us (issue 41 §3; tests/tui/test_tui_log_matches_
        # history.py).
        self._participant.channel(name).ask_sync()
        self._report_restore(name, report)
        # the newest stored lines: an older message of their authors coming now is late
        newest = await self.store.page(name, limit=SEED_PAGE)
        self._effects.late.seed(name, ((e.sender_id, e.lamport) for e in newest))
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
        self._mark_dirty()
        await self.transport.subscribe([key.topic])
        self._emit(ChannelJoined(name, key.is_public, key.topic.hex(), report.stored))
        store_sync = self._ctx.store_sync
        if store_sync is not None:
            store_sync.catch_up_soon(name, key.topic)
        pending = await self.store.pending_outgoing(name)
        if pending:
            self._queue_pending([Pending(p.channel, p.content, p.local_id) for p in pending])
        if self._ctx.connected and out_ids:
            await self._publisher.republish()
        await self._round_now()  # events of the restore (deliverable waiters), first save
        if out_ids or report.stored:  # the restore's transient state and rows are freed
            release_freed()
        return info

    def _report_restore(self, name: str, report: ReconcileReport) -> None:
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

    async def restore_core(self, key: ChannelKey) -> ReconcileReport:
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
        self._participant.channel(name).set_connected(self._ctx.connected, now)
        return report

    async def leave(self, channel: str) -> bool:
        """Leave ``channel`` (its history stays); False if it was not joined."""
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
        self._effects.late.forget(channel)
        await self.store.leave_channel(channel)
        await self.transport.unsubscribe([info.topic])
        self._own.forget_states(channel)
        self._emit(ChannelLeft(channel))
        return True

    async def forget(self, channel: str) -> int:
        """Forget ``channel`` (not joined): its history, keys and passphrase binding go;
        the number of messages deleted.

        Raises:
            ValueError: it is joined.
        """
        if channel in self._channels:
            raise ValueError(f"#{channel} is joined: /leave it first")
        n = await self.store.forget_channel(channel)
        self._members.forget(channel)
        self._emit(Info(f"forgot #{channel} ({n} messages); your identity is unchanged",
                        {"channel": channel, "messages": n}))  # fmt: skip
        return n
