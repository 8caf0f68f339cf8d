"""The node's receive path: an envelope in, its SDS bytes to the right core: :class:`Receiver`.

In order, for every envelope the worker takes (:meth:`Receiver.receive`):

1. a frame on an invite topic goes to the members glue (the invite handshake);
2. the envelope is opened for its topic (:func:`net.envelope.open_for_topic`: topic ->
   joined channel, AEAD, signature, sender id); a failure is counted by reason and
   reported as :class:`~app.node.events.Rejected` (``carried_<reason>`` for one
   carried by another envelope);
3. a members channel's gate admits the sender (before the replay guard: a member
   added later resends these bytes);
4. an envelope seen before (the replay guard of envelope hashes) is a counted
   duplicate (``duplicate_envelopes``), not a rejection; the core still hears of the
   copy (an author's resend lacks our acknowledgement; a carried copy counts as one
   more copy on the wire);
5. envelopes it carries are received first, each as if it had arrived alone (older
   lines first: the carrier's own line names them in its history);
6. a sync message's Lamport time is its author's clock now: the clock guard observes
   it (:mod:`app.node.clock_guard`: a correction, a vote request);
7. a members channel's inner layer is opened (:meth:`MembersGlue.content
   <app.node.members_glue.MembersGlue.content>`: held for a key share, or refused);
8. the SDS message goes to the channel's core with the envelope hash as retrieval
   hint (the core checks its id against author, timestamp and content), and the core
   is drained (:meth:`Effects.drain <app.node.effects.Effects.drain>`);
9. a content message signed with our key, sent since we started, that neither the core
   nor storage holds was sent by another process holding our key (a copied data dir):
   reported once as :class:`~app.node.events.DeviceCopied` (:mod:`app.members.device_copy`);
10. a content message that waits for dependencies keeps its envelope aside, by hash,
   for its delivery (:class:`~app.node.envelope_memory.EnvelopeMemory`).

It owns the clock estimate fed by the syncs it receives (``clock_est``) and the vote
requests they trigger (``clock_votes``); a correction goes back to the node
(``on_clock_fix``), which moves every core to the corrected time between rounds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from app.members.device_copy import EchoWatch
from app.members.invites import unwrap
from app.node.clock_guard import ClockEstimate, Correction, VoteRequests
from app.node.events import DeviceCopied
from app.node.round import Receiving, Round, reject
from net.channel_key import ChannelKey
from net.envelope import EnvelopeError, Opened, envelope_hash, open_for_topic

if TYPE_CHECKING:
    from app.node.context import NodeContext
    from app.node.effects import Effects
    from app.node.envelope_memory import EnvelopeMemory
    from app.node.members_glue import MembersGlue

__all__ = ["Receiver"]


class Receiver:
    """Received envelopes into the cores (see the module for the steps)."""

    def __init__(
        self,
        ctx: NodeContext,
        memory: EnvelopeMemory,
        members: MembersGlue,
        effects: Effects,
        *,
        on_clock_fix: Callable[[Correction], None],
    ) -> None:
        self.counters = ctx.counters
        self._participant = ctx.participant
        self._channels = ctx.channels
        self._by_topic = ctx.by_topic
        self._now = ctx.now
        self._wall = ctx.options.clock  # the uncorrected clock: what the estimate corrects
        self._memory = memory
        self._replay = memory.seen
        self._carrier = memory.carrier
        self._members = members
        self._effects = effects
        self._on_clock_fix = on_clock_fix
        max_skew = ctx.options.config.max_clock_skew_ms
        self.clock_est = ClockEstimate(max_skew)
        """How far our wall clock is from the members heard (their syncs' times)."""
        self.clock_votes = VoteRequests(max_skew)
        self.copies = EchoWatch()
        """Lines signed with our key that this data dir did not send (a copy of it)."""
        self._since = ctx.now()  # our lines from before this run may be a history we lost
        self._store = ctx.store
        self._emit = ctx.emit
        self._tasks: set[asyncio.Task[None]] = set()

    def receive(
        self, data: bytes, now: int, out: Round, carried_on: bytes | None = None
    ) -> None:
        """One envelope, as delivered, or carried by an envelope of topic ``carried_on``."""
        if carried_on is None:
            self.counters["received"] += 1
        channel: str | None = None
        members_glue = self._members
        if members_glue.invite_topics and carried_on is None:
            framed = unwrap(data)
            if framed is not None and framed[0] in members_glue.invite_topics:
                members_glue.invite_frame(framed[0], framed[1], now)
                return

        def key_for_topic(topic: bytes) -> ChannelKey | list[ChannelKey] | None:
            nonlocal channel  # a refusal after the topic matched names the channel
            if carried_on is not None and topic != carried_on:
                return None  # carried into another channel: refused as its topic
            channel = self._by_topic.get(topic)
            if channel is None:
                return None
            mc = members_glue.get(channel)
            return self._channels[channel].key if mc is None else mc.opening_keys()

        try:
            opened = open_for_topic(data, key_for_topic)
        except EnvelopeError as exc:
            reason = exc.reason if carried_on is None else f"carried_{exc.reason}"
            reject(self.counters, out, reason, channel, exc.detail)
            return
        members = members_glue.get(channel) if channel is not None else None
        if members is not None:
            why = members.admit(opened.sender_id, opened.sds_message)
            if why:  # before the replay guard: a member added later resends these bytes
                reject(self.counters, out, why, channel, opened.sender_id)
                return
        if not self._replay.check_and_remember(opened.envelope_hash):
            self._duplicate(opened, channel, carried_on, now, out)
            return
        assert channel is not None  # opened: its topic named a joined channel
        out.received.append(opened.envelope_hash)  # forgotten if the round is not stored
        if opened.carried and carried_on is None:
            # older lines first: the carrier's own line names them in its history
            self._receive_carried(opened.carried, opened.topic, now, out)
            out.current = None
        pb0 = opened.sds_message
        if pb0 is not None and not pb0.content and pb0.HasField("lamport_timestamp"):
            now = self._observe_sync(channel, pb0.sender_id, pb0.lamport_timestamp, now)
        id_content = None  # a members channel's ciphertext: what the message id covers
        if members is not None:
            id_content = opened.sds_message.content if opened.sds_message is not None else None
            if not members_glue.content(members, opened, data, out):
                return
        core = self._participant.channel(channel)
        # a carried copy (under a hash of its own: without what it carried) of a line
        # we hold: the core checks its id and counts a copy on the wire, nothing waits
        held = carried_on is not None and pb0 is not None and core.holds(pb0.message_id)
        if held:
            self.counters["carried_duplicates"] += 1
        if (pb0 is not None and pb0.sender_id == core.sender_id and pb0.content and not held
                and pb0.lamport_timestamp >= self._since and not core.holds(pb0.message_id)):
            self._own_key_elsewhere(channel, pb0.message_id)  # fmt: skip
        current = out.current = Receiving(opened.envelope_hash, data, opened.sds_bytes)
        if id_content is not None and opened.sds_message is not None:
            current.plain = opened.sds_message.content  # what a waiting preview shows
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
        self._effects.drain(now, out)
        out.current = None
        if not current.consumed and not current.settled and not held:
            # A content message that waits for dependencies (whether or not the core
            # reported them missing: it may wait only for other waiting messages).
            # Keep its envelope, by hash (its retrieval hint), for its delivery.
            self._memory.wait(channel, current.hash, data)

    def _own_key_elsewhere(self, channel: str, message_id: str) -> None:
        """A line signed with our key, sent since we started, that the core does not
        hold: a copy of this data dir runs elsewhere, unless storage holds it (our own
        lines are stored before they leave): app/members/device_copy.py."""
        if not self.copies.suspect(channel, message_id):
            return

        async def confirm() -> None:
            stored = await self._store.has_ids(channel, [message_id])
            found = self.copies.confirm(channel, message_id, message_id in stored)
            if found is not None:
                self.counters["device_copies"] += 1
                self._emit(DeviceCopied(found.channel, found.message_id, found.text))

        task = asyncio.get_running_loop().create_task(confirm())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _duplicate(self, opened: Opened, channel: str | None, carried_on: bytes | None,
                   now: int, out: Round) -> None:  # fmt: skip
        """The same bytes again (a restarted sender republishing, a relay or store
        redelivering): verified and harmless, a counted duplicate, not a rejection."""
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

    def _observe_sync(self, channel: str, sender_id: str, lamport: int, now: int) -> int:
        """A sync: its time is its author's clock now (app/node/clock_guard.py); the
        time to go on with (corrected if the estimate moved)."""
        fix = self.clock_est.observe(sender_id, lamport, self._wall())
        if fix is not None:
            self._on_clock_fix(fix)
            now = self._now()
        vote = self.clock_votes.on_sync(channel, sender_id, lamport - now, now)
        if vote is not None:
            self._participant.channel(channel).ask_sync(vote)
        return now

    def _receive_carried(self, envelopes: Sequence[bytes], topic: bytes, now: int,
                         out: Round) -> None:  # fmt: skip
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
            self.receive(env, now, out, carried_on=topic)  # opened, and refused if need be
