"""What the core's events do at the node: :class:`Effects`.

After EVERY call into the SDS core the node drains it (:meth:`Effects.drain`): each
core event becomes rows of the round's ONE storage batch (the event log, messages
with their envelopes, own-message states) and node events for the UI
(:mod:`app.node.events`), emitted once the batch is committed; each datagram to
send becomes an envelope to publish after the commit: a sync is sealed now with our
identity, a ``resend`` reuses the identical stored envelope (a stable retrieval
hint) and a ``repair`` the ORIGINAL envelope of that message (its author signed it).
What needs storage follows before the commit (:meth:`Effects.follow_ups`: ids named
missing that our log holds, envelopes not in memory), and after it the copies of
messages our log held already (:meth:`Effects.settle_copies`: a duplicate, or a
:class:`~app.node.events.Conflict`) and the erasure of deleted lines' text
(:meth:`Effects.redact_deleted`).

It owns what only these effects read and write: the participants heard from (``peers``,
:meth:`Effects.peer_infos`), the late-arrival rule (``late``,
:mod:`app.node.late_arrivals`), the received-ephemeral guard (``ephemeral``), the
Lamport times of recent messages (``lamports``, for ``implausible_time``), own lines
nobody was there to hear (``unheard``) and the file quota (``files``,
:mod:`app.chat.file_quota`). Own-message states are :class:`~app.node.own_messages.OwnMessages`',
envelopes :class:`~app.node.envelope_memory.EnvelopeMemory`'s; members channels'
control messages go to :class:`~app.node.members_glue.MembersGlue`. A message refused
for a clock ahead goes back to the node (``on_clock_ahead``: it holds the envelope and
arms the timer that gives it back).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import sds
from app.chat.authors import Authors, authored
from app.chat.content import decode_content
from app.chat.file_quota import LEDGER_FILE, FileQuota
from app.chat.lines import encode_content, split_typed
from app.chat.redaction import Deletions, is_tombstone
from app.members.device_copy import TwinWatch
from app.members.device_labels import is_device_log
from app.members.events import is_control
from app.node.clock_guard import LamportMemory, implausible_time
from app.node.device_glue import by_person
from app.node.disk_guard import log_form
from app.node.ephemeral_guard import EphemeralGuard
from app.node.events import (
    Conflict,
    Delivered,
    DeviceTwins,
    Ephemeral,
    Lost,
    Missing,
    NodeError,
    NodeEvent,
    OwnMessage,
    PeerInfo,
    PeerSeen,
)
from app.node.late_arrivals import LateArrivals
from app.node.round import Receiving, Round, reject
from app.node.unheard import WAITING_REASONS, UnheardLines, heard_since, nobody_heard
from net.envelope import OversizedEnvelope, envelope_hash, seal
from sds.message import parse_pb
from storage import Batch, OwnState, StorageError, StoredMessage

if TYPE_CHECKING:
    from app.node.context import NodeContext
    from app.node.envelope_memory import EnvelopeMemory
    from app.node.members_glue import MembersGlue
    from app.node.own_messages import OwnMessages

__all__ = ["Effects", "Peer"]

#: Drops that do not discard the message being received (a bad filter is only
#: ignored for acks; a buffer eviction concerns an older waiting message).
_NOT_FATAL_DROPS = frozenset(
    {
        sds.DropReason.BAD_FILTER,
        sds.DropReason.SATURATED_FILTER,
        sds.DropReason.INCOMING_BUFFER_FULL,
    }
)

#: Drops of a message the core will accept later (our clock caught up, the
#: sender's missing ids resolved): the envelope's resend is not a replay.
_REFUSED_FOR_NOW = frozenset({sds.DropReason.CLOCK_AHEAD, sds.DropReason.SENDER_BUDGET})


@dataclass(slots=True)
class Peer:
    """A participant heard from."""

    name: str | None = None
    channels: set[str] = field(default_factory=set)
    last_seen_ms: int = 0
    messages: int = 0


def _text_of(content: bytes) -> tuple[str | None, str, str]:
    c = decode_content(content)
    return c.name, c.kind, c.text


class Effects:
    """Core events into the round (storage rows, node events, envelopes); see the module."""

    def __init__(
        self,
        ctx: NodeContext,
        own: OwnMessages,
        memory: EnvelopeMemory,
        members: MembersGlue,
        *,
        on_clock_ahead: Callable[[str, Receiving], None],
    ) -> None:
        self._ctx = ctx
        self.options = ctx.options
        self.store = ctx.store
        self.identity = ctx.identity
        self.sender_id = ctx.identity.sender_id
        self.counters = ctx.counters
        self._participant = ctx.participant
        self._channels = ctx.channels
        self._emit = ctx.emit
        self._now = ctx.now
        self._own = own
        self._memory = memory
        self._envelopes = memory.recent
        self._waiting_envelopes = memory.waiting
        self._replay = memory.seen
        self._carrier = memory.carrier
        self._members = members
        self._on_clock_ahead = on_clock_ahead
        self.peers: dict[str, Peer] = {}
        self.late = LateArrivals(self.sender_id)  # the ↺ recovered rule
        self.authors = Authors()
        """Who wrote what, as the events label it (app/chat/authors.py)."""
        self.on_device_log: Callable[[str, str, bytes], None] | None = None
        """A device-log content delivered outside members channels (its channel, sender,
        bytes): app/node/device_glue.py folds it before the line is labelled."""
        self.ephemeral = EphemeralGuard()  # size cap and per-sender rate (received)
        self.lamports = LamportMemory()  # app/node/clock_guard.py
        self.twins = TwinWatch()  # two processes signing as one sender: device_copy.py
        self.unheard = UnheardLines()  # own lines nobody was there to hear (app/node/unheard.py)
        self.deletions = Deletions()  # deletions this run, for what comes after them
        self.files = FileQuota(  # app/chat/file_quota.py
            self.options.file_quota_bytes, self.store.data_dir / LEDGER_FILE,
            channel_bytes=self.options.file_channel_bytes, store=self.store,
            counters=self.counters,
            capped=lambda ch: ch not in members,  # members channels: admitted senders
        )
        counted = {sds.MessageResent: "resent", sds.RepairSent: "repair_sent"}
        self._handlers: dict[type, Callable[[Any, int, Round], None]] = {
            sds.MessageSent: self._on_sent,
            sds.MessageDelivered: self._on_delivered,
            sds.MessageAcknowledged: self._on_acknowledged,
            sds.MessagePossiblyAcknowledged: self._on_possibly_acknowledged,
            sds.MessageSendFailed: self._on_send_failed,
            sds.MessagesMissing: self._on_missing,
            sds.MessageLost: self._on_lost,
            sds.SyncReceived: self._on_sync,
            sds.EphemeralReceived: self._on_ephemeral,
            sds.MessageDropped: self._on_dropped,
            sds.MessageConflict: self._on_conflict,
            sds.RepairDataNeeded: self._on_repair_needed,
            sds.RepairRequested: self._on_repair_requested,
            **{kind: self._counter(name) for kind, name in counted.items()},
        }

    def _counter(self, name: str) -> Callable[[Any, int, Round], None]:
        def count(_ev: Any, _now: int, _out: Round) -> None:
            self.counters[name] += 1

        return count

    # ------------------------------------------------------------------ peers

    def peer_infos(self, channel: str | None = None) -> list[PeerInfo]:
        """Participants heard from (in ``channel``, or in any), most recently seen first."""
        out = [
            PeerInfo(sid, p.name, tuple(sorted(p.channels)), p.last_seen_ms, p.messages)
            for sid, p in self.peers.items()
            if channel is None or channel in p.channels
        ]
        if self.authors.devices is not None and (channel is None or channel not in self._members):
            out = by_person(out, self.authors.devices)  # one person, its devices
        out.sort(key=lambda p: -p.last_seen_ms)
        return out

    def nobody_heard_since(self, channel: str, since_ms: int) -> bool:
        """Whether no other participant was heard in ``channel`` since ``since_ms``."""
        heard = ((sid, p.channels, p.last_seen_ms) for sid, p in self.peers.items())
        return nobody_heard(heard, self.sender_id, channel, since_ms)

    def nobody_heard_lately(self, channel: str) -> bool:
        """Whether no other participant was heard in ``channel`` for a resend period
        and a sync period (app/node/unheard.py): nobody to hear a resend now."""
        return self.nobody_heard_since(channel, heard_since(self.options.config, 0, self._now()))

    def anyone_heard(self, channel: str) -> bool:
        """Whether anyone has been heard in ``channel``."""
        return any(channel in p.channels for p in self.peers.values())

    def _seen(
        self, channel: str, sender_id: str, name: str | None, now: int, out: Round, content: bool
    ) -> None:
        peer = self.peers.get(sender_id)
        first = peer is None or channel not in peer.channels
        if peer is None:
            peer = self.peers[sender_id] = Peer()
        renamed = name is not None and name != peer.name
        peer.channels.add(channel)
        peer.last_seen_ms = now
        if content:
            peer.messages += 1
        if name is not None:
            peer.name = name
        if first or renamed:
            out.events.append(PeerSeen(channel, sender_id, peer.name, first))
        if self.unheard and sender_id != self.sender_id:  # someone is back: the same bytes
            out.need_envelope.extend((channel, m, "unheard") for m in self.unheard.heard(channel))

    # ------------------------------------------------------------------ draining the core

    def drain(self, now: int, out: Round) -> None:
        """After every core call: events into the batch and the UI list, datagrams queued."""
        wall = self._now()
        handlers = self._handlers
        for ev in self._participant.events():
            if type(ev) is not sds.EphemeralReceived:  # never stored: ephemeral_guard.py
                out.batch.add_event(log_form(ev), wall)  # reminders by count: disk_guard.py
            handler = handlers.get(type(ev))
            if handler is not None:
                handler(ev, now, out)
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
            env = self._envelopes.get((channel, dg.message_id))
            if env is not None:
                out.publish.append((channel, dg.message_id, env))
            else:
                out.need_envelope.append((channel, dg.message_id, dg.kind))

    def _on_acknowledged(self, ev: sds.MessageAcknowledged, now: int, out: Round) -> None:
        ch = ev.channel_id
        if self.unheard:
            self.unheard.acknowledged(ch, ev.message_id)
        own = self._own
        own.acknowledged_after_failing(ch, ev.message_id)  # nothing left to retry
        if own.set(ch, ev.message_id, OwnState.ACKNOWLEDGED, out.batch):
            out.events.append(
                OwnMessage(
                    ch,
                    "acknowledged",
                    own.local_ids.pop((ch, ev.message_id), None),
                    ev.message_id,
                    detail={"by": ev.by_sender, "causal": ev.by_causal_history},
                )
            )
        self.counters["acknowledged"] += 1

    def _on_possibly_acknowledged(self, ev: sds.MessagePossiblyAcknowledged, now: int,
                                  out: Round) -> None:  # fmt: skip
        ch = ev.channel_id
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

    def _on_send_failed(self, ev: sds.MessageSendFailed, now: int, out: Round) -> None:
        if self._wait_for_listeners(ev, now, out):
            return  # nobody was there to hear it: it waits (app/node/unheard.py)
        ch = ev.channel_id
        own = self._own
        text = own.text.get((ch, ev.message_id))
        if own.set(ch, ev.message_id, OwnState.FAILED, out.batch):
            out.events.append(
                OwnMessage(
                    ch,
                    "failed",
                    own.local_ids.pop((ch, ev.message_id), None),
                    ev.message_id,
                    text=None if text is None else text[0],
                    detail={"reason": ev.reason, "attempts": ev.attempts},
                )
            )
        typed = own.typed.pop((ch, ev.message_id), None)
        if typed is not None:
            own.failed.append((ch, ev.message_id, typed))
        elif text is not None:
            content = encode_content(text[0], self._ctx.name, text[1])
            own.failed.append((ch, ev.message_id, content))
        self.counters["failed"] += 1

    def _wait_for_listeners(self, ev: sds.MessageSendFailed, now: int, out: Round) -> bool:
        """A message given up on while nobody else was heard in its channel: keep it
        as sent, to publish again when someone is (app/node/unheard.py); whether it was."""
        ch, mid = ev.channel_id, ev.message_id
        core = self._participant.channel(ch)  # its config has the backoff (settings.core_config)
        since = heard_since(core.config, ev.attempts, now, core.resend_backoff)
        if ev.reason not in WAITING_REASONS or not self.nobody_heard_since(ch, since):
            return False
        self.unheard.hold(ch, mid)
        self._own.typed.pop((ch, mid), None)
        self.counters["waiting_for_listeners"] += 1
        out.events.append(
            OwnMessage(ch, "waiting", self._own.local_ids.get((ch, mid)), mid,
                       detail={"reason": "nobody_heard", "attempts": ev.attempts})
        )  # fmt: skip
        return True

    def _on_missing(self, ev: sds.MessagesMissing, now: int, out: Round) -> None:
        ch = ev.channel_id
        ids = tuple(e.message_id for e in ev.missing)
        if self._ctx.store_sync is not None:
            self._ctx.store_sync.note_missing(ch, ev.missing)
        self.late.named_missing(ch, ids)
        if ids:
            out.missing.setdefault(ch, set()).update(ids)
            preview = self._waiting_preview(ch, ev.message_id, out)
            if preview:
                preview["recovered"] = self.late.arrived_waiting(
                    ch, ev.message_id, ev.sender_id, preview["lamport"]
                ) and not (self._members.get(ch) is not None
                           and preview["kind"] in ("member", "keys"))
            out.events.append(
                Missing(ch, ev.message_id, ev.sender_id, ids, ev.first, **preview)
            )

    def _on_lost(self, ev: sds.MessageLost, now: int, out: Round) -> None:
        ch = ev.channel_id
        self.late.named_missing(ch, (ev.message_id,))
        out.events.append(Lost(ch, ev.message_id, ev.waiting, (ev.message_id,)))
        self.counters["lost"] += 1

    def _on_sync(self, ev: sds.SyncReceived, now: int, out: Round) -> None:
        if out.current is not None:
            out.current.settled = True
        self._seen(ev.channel_id, ev.sender_id, None, now, out, content=False)

    def _on_ephemeral(self, ev: sds.EphemeralReceived, now: int, out: Round) -> None:
        ch = ev.channel_id
        if out.current is not None:
            out.current.settled = True
        self._seen(ch, ev.sender_id, None, now, out, content=False)
        refused = self.ephemeral.admit(ch, ev.sender_id, len(ev.content), now)
        if refused is None:
            out.events.append(Ephemeral(ch, ev.sender_id, ev.content))
        else:
            self.counters[f"ephemeral_dropped_{refused}"] += 1

    def _on_dropped(self, ev: sds.MessageDropped, now: int, out: Round) -> None:
        ch = ev.channel_id
        self.counters[f"dropped_{ev.reason.value}"] += 1
        if ev.reason is sds.DropReason.UNVERIFIABLE_ID:
            reject(
                self.counters, out, ev.reason.value, ch, f"message {(ev.message_id or '')[:12]} "
                f"from {(ev.sender_id or '')[:12]}: id does not match its content"
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
                self._on_clock_ahead(ev.sender_id or "", out.current)

    def _on_conflict(self, ev: sds.MessageConflict, now: int, out: Round) -> None:
        self._conflict(ev.channel_id, ev.message_id, ev.kept_sender_id, ev.other_sender_id,
                       ev.reason, out.events)  # fmt: skip

    def _on_repair_needed(self, ev: sds.RepairDataNeeded, now: int, out: Round) -> None:
        out.repair_needed.setdefault(ev.channel_id, set()).add(ev.message_id)

    def _on_repair_requested(self, ev: sds.RepairRequested, now: int, out: Round) -> None:
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
        mc = self._members.get(ch)  # a members channel: the roster's name (app/chat/authors.py)
        # a members channel's: the decrypted content, not the ciphertext on the wire
        plain = out.current.plain if out.current.plain is not None else pb.content
        content = authored(plain, pb.sender_id, mc.roster if mc is not None else None)
        return {
            "lamport": pb.lamport_timestamp,
            "name": content.name,
            "kind": content.kind,
            "text": content.text,
        }

    # ------------------------------------------------------------------ own and delivered

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

    def _on_sent(self, ev: sds.MessageSent, now: int, out: Round) -> None:
        ch, mid = ev.channel_id, ev.message_id
        env = self._seal_carrying(ch, ev.data, now)
        digest = envelope_hash(env)
        self._carrier.remember(digest, ch, mid)
        plain = ev.content
        mc = self._members.get(ch)
        if mc is not None:
            if is_control(plain):
                self._members.on_control(mc, self.sender_id, ev.lamport, mid, plain, env)
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
        elif local_id is not None:
            out.batch.record_sent(local_id, msg)
        else:
            out.batch.insert_message(msg)
        self._memory.remember(ch, mid, env)
        self.lamports.remember(ch, mid, ev.lamport)
        # a membership event of ours names people by the roster ("removed dave"), as the
        # others' screens and the log read it (issue 41 §4)
        content = authored(plain, self.sender_id, mc.roster if mc is not None else None)
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
            env = self._waiting_envelopes.pop((ch, hint), None)
        kept, refused = self.files.check(ch, ev.sender_id, ev.content)
        if refused is not None:  # a file's bytes not kept (app/chat/file_quota.py)
            self.counters["file_refused_too_large" if refused == "too_large"
                          else "file_segments_refused"] += 1  # fmt: skip
            env = None  # not kept either: we do not serve what we refused
        if env is not None:
            self._memory.remember(ch, mid, env)
        if hint is not None:
            self._carrier.remember(hint, ch, mid)
        mc = self._members.get(ch)
        if mc is not None and is_control(ev.content):
            self._members.on_control(mc, ev.sender_id, ev.lamport, mid, ev.content, env)
        elif mc is not None:  # a removed member's line its removal's cut leaves out
            self._members.refused_at_delivery(mc, ev.sender_id, mid, out)
        late = self.late.delivered(ch, mid, ev.sender_id, ev.lamport, ev.was_lost)
        if mc is not None and is_control(ev.content):  # membership housekeeping is never
            late = False  # "late": the chain orders it (a newcomer holds it from its invite)
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
        roster = mc.roster if mc is not None else None  # the roster's names (app/chat/authors.py)
        if mc is None and self.on_device_log is not None and is_device_log(kept):
            self.on_device_log(ch, ev.sender_id, kept)  # app/node/device_glue.py
        content = authored(kept, ev.sender_id, roster)
        speaker = self.authors.devices.speaker(ev.sender_id) if (
            roster is None and self.authors.devices is not None) else None  # fmt: skip
        if roster is None:
            self.authors.note(ch, ev.sender_id, content.name)
            content = replace(content, name=self.authors.name(ev.sender_id, content.name))
        self._seen(ch, ev.sender_id, content.name, now, out, content=True)
        odd = implausible_time(ev.lamport, self.lamports.newest_of(ch, ev.causal_history))
        start = self.lamports.history_start(ch, ev.causal_history)
        twins = self.twins.delivered(ch, ev.sender_id, mid, ev.lamport, ev.causal_history, start)
        if twins is not None:  # two processes sign as this sender (app/members/device_copy.py)
            self.counters["device_twins"] += 1
            out.events.append(DeviceTwins(ch, ev.sender_id, content.name or "",
                                          twins.text(content.name or "")))  # fmt: skip
        self.lamports.remember(ch, mid, ev.lamport)
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
            label=self.authors.label(ch, ev.sender_id, content.name, roster) + (
                f" · {speaker.device}" if speaker is not None and speaker.own else ""),
            person=speaker.person if speaker is not None else "",
            device=speaker.device if speaker is not None else "",
            own_device=speaker is not None and speaker.own,
        )  # fmt: skip
        out.delivered.append((ch, mid, delivered))
        out.events.append(delivered)

    # ------------------------------------------------------------------ storage around the commit

    async def follow_ups(self, now: int, out: Round) -> None:
        """Storage look-ups the core asked for (bounded: a few passes)."""
        for _ in range(4):
            progressed = False
            if out.missing:
                missing, out.missing = out.missing, {}
                for ch, ids in missing.items():
                    if ch not in self._channels:
                        continue
                    found = await self.store.has_ids(ch, ids)
                    if self._ctx.store_sync is not None:  # not in SQLite: ask the store
                        self._ctx.store_sync.request(ch, ids - found)
                    if found:
                        self.counters["dependencies_from_storage"] += len(found)
                        self._participant.channel(ch).mark_dependencies_met(found, now)
                        out.core_called = True
                        progressed = True
                self.drain(now, out)
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

    async def settle_copies(self, copies: list[Delivered], out: Round) -> None:
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

    async def redact_deleted(self, events: Sequence[NodeEvent]) -> None:
        """Deletions delivered or sent this round: their targets' text leaves the disk
        (app/chat/redaction.py)."""
        deletions = self.deletions
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
