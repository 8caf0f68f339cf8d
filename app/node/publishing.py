"""Envelopes onto the transport: :class:`Publisher` (and its pacing, :class:`Pacer`).

A round's envelopes are published only after its transaction committed (nothing is
broadcast before it is durable): own new messages first, then what the core asked to
send (syncs, resends, repair answers); an own message whose envelope left becomes
``sent`` (:meth:`OwnMessages.mark_sent <app.node.own_messages.OwnMessages.mark_sent>`).
"sent" is advisory: it rides in the next round's transaction (or the next state save,
which the node arms: ``on_carried``) instead of a commit of its own, which would hold
up the next round; lost in a crash, it only means the envelope is republished at the
next start (peers drop the copy).

On every (re)connection, and when a channel with unacknowledged own messages is
joined, the envelopes of every own message still unacknowledged are published again
(:meth:`Publisher.republish`: those recorded but never published after a crash, and
those typed while disconnected) instead of waiting for the resend period (in a
channel where nobody was heard lately, a start or an empty channel, only those never
published: the others go with the core's resends, which back off while nobody is
heard and come at once when someone is, :mod:`sds.backoff`);
:meth:`Publisher.retry` publishes failed ones again (``/retry``), the identical bytes.

A token bucket (:class:`Pacer`) keeps publishing under the relay's rate (it
disconnects clients that exceed it): publishing waits instead. A store peer that
archives only with write proofs is offered our new envelopes (:mod:`net.store_sync`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.node.events import NodeEvent
from app.node.round import Round
from storage import Batch, OwnState

if TYPE_CHECKING:
    from app.node.context import NodeContext
    from app.node.envelope_memory import EnvelopeMemory
    from app.node.members_glue import MembersGlue
    from app.node.own_messages import OwnMessages

__all__ = ["Pacer", "Publisher"]

logger = logging.getLogger("sdschat.node")


class Pacer:
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


class Publisher:
    """What leaves, when, and at what pace (see the module)."""

    def __init__(
        self,
        ctx: NodeContext,
        own: OwnMessages,
        memory: EnvelopeMemory,
        members: MembersGlue,
        *,
        on_carried: Callable[[], None],
        nobody_heard: Callable[[str], bool],
    ) -> None:
        self._ctx = ctx
        self.options = ctx.options
        self.store = ctx.store
        self.transport = ctx.transport
        self.counters = ctx.counters
        self._participant = ctx.participant
        self._channels = ctx.channels
        self._emit = ctx.emit
        self._own = own
        self._envelopes = memory.recent
        self._members = members
        self._on_carried = on_carried
        self._nobody_heard = nobody_heard
        self._pacer = Pacer(self.options.publish_rate, self.options.publish_burst)

    async def publish(self, envelope: bytes) -> bool:
        """Hand one envelope to the transport (paced); whether it left."""
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

    async def publish_round(self, out: Round) -> None:
        """A committed round's envelopes: own new messages first (offered to the store
        peer too), then the core's datagrams; own ones that left are ``sent``."""
        envelopes: list[tuple[str, str | None, bytes]] = list(out.own_new)
        envelopes.extend(out.publish)
        if not envelopes:
            return
        store_sync = self._ctx.store_sync
        if store_sync is not None:  # a store that archives only with write proofs
            for ch, _mid, env in out.own_new:
                key = self._channels[ch].key
                mc = self._members.get(ch)  # a members channel: its epoch keys when sent
                keys = key.key if mc is None else lambda mc=mc: mc.epoch_keys
                store_sync.offer(keys, key.topic, env)
        sent_events: list[NodeEvent] = []
        for ch, mid, env in envelopes:
            if await self.publish(env) and mid is not None:
                self._own.mark_sent(ch, mid, sent_events)
        if self._own.carried:
            # "sent" is advisory: it rides in the next round's transaction (or the
            # next state save, armed here) instead of a commit of its own, which
            # would hold up the next round. Lost in a crash, it only means the
            # envelope is republished at the next start (peers drop the copy).
            self._on_carried()
        for ev in sent_events:
            self._emit(ev)

    async def republish(self) -> None:
        """Publish the envelope of every own message still unacknowledged (the newest
        ``republish_cap`` per channel) again; their ``sent`` states committed at once.
        In a channel where nobody was heard lately, only those that never left: the
        others go with the core's resends (backing off while nobody is heard, at once
        when someone is: :mod:`sds.backoff`)."""
        sent_events: list[NodeEvent] = []
        for ch in list(self._channels):
            ids = self._participant.channel(ch).outgoing_ids()
            if self._nobody_heard(ch):  # a start, a bot in an empty channel
                state = self._own.state
                ids = [m for m in ids if state.get((ch, m)) is OwnState.QUEUED]
            ids = ids[-self.options.republish_cap :]
            missing = [m for m in ids if (ch, m) not in self._envelopes]
            stored = await self.store.get_envelopes(ch, missing) if missing else {}
            for mid in ids:
                env = self._envelopes.get((ch, mid)) or stored.get(mid)
                if env is None:
                    continue
                if not self.transport.connected:
                    return
                if await self.publish(env):
                    self.counters["republished"] += 1
                    self._own.mark_sent(ch, mid, sent_events)
        if self._own.carried:
            batch = Batch()
            self._own.add_carried(batch)
            await self.store.commit_batch(batch)
        for ev in sent_events:
            self._emit(ev)

    async def retry(self, channel: str | None = None) -> int:
        """Publish again the identical envelopes of the own messages that failed (in
        this run, or the newest 1,000 per channel of earlier runs) and were not
        acknowledged since; how many."""
        again = self._own.take_failed(channel)
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
                await self.publish(env)
        self.counters["retried"] += count
        return count
