"""The node's part for members channels: :class:`MembersGlue`.

The members machine (:class:`~app.members.channel.MembersChannel`, app/members/) is
sans-I/O: control messages in, the roster, the keys and its decisions out (notices,
cuts made complete, key shares due, held messages released). This part owns the
node's members channels and everything around them that touches the node: the
outer key envelopes of a channel are sealed with (:meth:`MembersGlue.seal_key`), the
inner layer opened before the core sees a message (:meth:`MembersGlue.content`),
control messages applied as they are delivered or sent (:meth:`MembersGlue.on_control`),
the members files written (:meth:`MembersGlue.save`), invites made and redeemed (the
handshake on an invite topic, :meth:`MembersGlue.invite_frame`), direct conversations
offered and accepted, members removed. The functions at the top turn a members
channel's decisions into node events and event-log rows.

It owns: the members channels by name (``channels``), the ones whose keys or records
moved since they were saved (``dirty``: the runtime sends their due controls and saves
them in the same round, :meth:`controls_due`), the open invites (``invites.json``),
the verified members, the join requests waiting for ``/approve``, the invite topics
subscribed, the redemptions under way and the tasks it started.

What it asks of its node, given at construction (it never imports the runtime): the
node's public ``join``, ``leave``, ``forget``, ``post_content`` and ``send_ephemeral``
(it makes and joins channels as a person would), ``publish`` (an envelope on the
wire), ``requeue`` (held envelopes to receive again first) and ``check_open``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

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
from app.members.invites import InviteBook, wrap
from app.members.verified import Verified
from app.node.errors import NodeClosedError
from app.node.events import Info, InviteMade, MembersEvent, NodeError
from app.node.round import Round, reject
from net.channel_key import ChannelKey, check_channel_name
from storage import StorageError
from storage.events import event_row

if TYPE_CHECKING:
    from app.node.context import NodeContext
    from app.node.envelope_memory import EnvelopeMemory
    from app.node.settings import ChannelInfo
    from net.envelope import Opened
    from storage import Store

__all__ = ["MembersGlue", "drain_notices", "mark_outside_cut", "refusals", "refused_event"]


def drain_notices(mc: MembersChannel) -> list[MembersEvent]:
    """The members events for what ``mc`` noticed since the last call."""
    out = [MembersEvent(mc.channel, n.what, n.text, n.data) for n in mc.notices]
    mc.notices.clear()
    return out


def refusals(mc: MembersChannel, removal: bytes, member_id: str,
             stored: Iterable[str]) -> list[MessageRefused]:  # fmt: skip
    """``member_id``'s stored messages (ids) that its removal's cut leaves out."""
    return [MessageRefused(mc.channel, mid, member_id, "outside_cut", removal.hex())
            for mid in mc.outside_cuts(member_id, stored)]  # fmt: skip


def refused_event(mc: MembersChannel, member_id: str,
                  refused: list[MessageRefused]) -> MembersEvent:  # fmt: skip
    """The members event telling that lines already shown are refused now."""
    m = mc.roster.member(member_id)
    who = m.name if m is not None else member_id[:8]
    n = len(refused)
    text = (f"#{mc.channel}: {n} message{'' if n == 1 else 's'} of {who} ({member_id[:8]}) "
            "refused: sent outside what its removal accepted")  # fmt: skip
    return MembersEvent(mc.channel, "refused", text, {
        "sender": member_id, "ids": [r.message_id for r in refused],
        "removal": refused[0].removal if refused else "", "reason": "outside_cut"})


async def mark_outside_cut(store: Store, mc: MembersChannel, removal: bytes, member_id: str,
                           now_ms: int) -> MembersEvent | None:  # fmt: skip
    """A removal's cut is complete: log a ``MessageRefused`` row for each of the removed
    member's stored messages it leaves out (``sdschat history`` marks them); the members
    event to show, if any."""
    refused = refusals(mc, removal, member_id, await store.sender_ids(mc.channel, member_id))
    if not refused:
        return None
    await store.append_events([event_row(r, now_ms) for r in refused])
    return refused_event(mc, member_id, refused)


class _Join(Protocol):
    def __call__(self, channel: str, *, key: ChannelKey | None = None) -> Awaitable[ChannelInfo]:
        ...


class MembersGlue:
    """The node's members channels and what it does with them (see the module)."""

    def __init__(
        self,
        ctx: NodeContext,
        memory: EnvelopeMemory,
        *,
        join: _Join,
        leave: Callable[[str], Awaitable[bool]],
        forget: Callable[[str], Awaitable[int]],
        post_content: Callable[[str, bytes], Awaitable[int]],
        send_ephemeral: Callable[[str, bytes], Coroutine[Any, Any, bool]],
        publish: Callable[[bytes], Coroutine[Any, Any, bool]],
        requeue: Callable[[Sequence[bytes]], None],
        check_open: Callable[[], None],
    ) -> None:
        self._ctx = ctx
        self.store = ctx.store
        self.identity = ctx.identity
        self.sender_id = ctx.identity.sender_id
        self.transport = ctx.transport
        self.counters = ctx.counters
        self._emit = ctx.emit
        self._now = ctx.now
        self._channels = ctx.channels  # joined ones (all kinds)
        self._seen = memory.seen
        self._join = join
        self._leave = leave
        self._forget = forget
        self._post = post_content
        self._send_ephemeral = send_ephemeral
        self._publish = publish
        self._requeue = requeue
        self._check_open = check_open
        self.channels: dict[str, MembersChannel] = {}
        """Members channels by name (app/members): keys, member list, gate."""
        self.dirty: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()  # invite answers under way
        self._invites: InviteBook | None = None  # opened with the store (open invites)
        self._verified: Verified | None = None
        self._join_requests: dict[str, tuple[bytes, Invite, Any]] = {}  # awaiting /approve
        self._approved: set[str] = set()
        self.invite_topics: set[bytes] = set()  # subscribed for invites (ours or ours to redeem)
        self._invite_waiters: dict[bytes, tuple[Invite, GroupKeys, bytes,
                                                asyncio.Future[JoinAccepted | JoinRefused]]] = {}

    def get(self, channel: str) -> MembersChannel | None:
        """The members channel ``channel`` (``None`` for another kind)."""
        return self.channels.get(channel)

    def __contains__(self, channel: object) -> bool:
        return channel in self.channels

    def __bool__(self) -> bool:
        return bool(self.channels)

    async def load(self, channel: str) -> ChannelKey | None:
        """The sending key of members channel ``channel``, its state loaded from the data
        directory if it is not here yet; None for another kind of channel."""
        if channel not in self.channels:
            mc = await asyncio.to_thread(members_file.load, self.store.data_dir, channel)
            if mc is not None:  # a members channel: its keys are in the data directory
                mc.signer = self.identity
                self.channels[channel] = mc
                self.dirty.add(channel)  # a genesis may be due (an upgrade)
        mc = self.channels.get(channel)
        return None if mc is None else mc.sending_key()

    def forget(self, channel: str) -> None:
        """``channel`` is forgotten: its members state and file go."""
        self.channels.pop(channel, None)
        members_file.members_file(self.store.data_dir, channel).unlink(missing_ok=True)

    # ------------------------------------------------------------------ in a round

    def take_dirty(self) -> set[str]:
        """The channels that moved since the last call (``dirty`` starts anew)."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def controls_due(self, dirty: Iterable[str], now: int) -> Iterator[tuple[str, bytes]]:
        """``(channel, control)`` to send now for the ``dirty`` channels joined: the
        rekeys due (key shares go lazily, before our next message) and the shares owed
        for lines already sent. Lazy: each channel's are worked out when reached."""
        for channel in dirty:
            mc = self.channels.get(channel)
            if mc is None or channel not in self._channels:
                continue
            for control in mc.due_controls(now, shares=False):  # shares: lazily
                yield channel, control
            for control in mc.owed_shares():  # owed for lines already sent: at once
                yield channel, control

    def save_dirty(self, dirty: Iterable[str]) -> None:
        """Save the ``dirty`` channels' control messages (before the round's commit)."""
        for channel in dirty:
            mc = self.channels.get(channel)
            if mc is not None:
                self.save(mc, state=False)

    def at_state_save(self, now: int, out: Round) -> None:
        """A round that saves the cores' state: reload the invites another process
        wrote, let what was read go (forward secrecy), rotate share keys, save what
        moved, and send our membership digest to compare."""
        if self.channels and self._invite_book().reload():  # `sdschat invite` wrote
            for channel in self.channels:
                self._spawn(self.subscribe_invites(channel))
        horizon = repair_horizon_ms(self._ctx.options.config)
        for mc in self.channels.values():  # forward secrecy: forget what was read
            if mc.advance(now, horizon):  # a share-key rotation due: sent in this round
                self.dirty.add(mc.channel)
            out.read_marks[mc.channel] = mc.group_keys.read_marks()  # cut once committed
            if mc.group_keys.changes != mc.saved_changes or mc.unsaved:
                self.save(mc)
            digest = mc.digest_due(now)  # our membership state, to compare
            if digest is not None and mc.channel in self._channels:
                self._spawn(self._send_ephemeral(mc.channel, digest))

    def refused_at_delivery(self, mc: MembersChannel, sender_id: str, mid: str,
                            out: Round) -> None:  # fmt: skip
        """A delivered line of a removed member that its removal's cut leaves out:
        stored, and marked refused (an event-log row and a members event)."""
        why = mc.refused_at_delivery(sender_id, mid)
        if why:
            mark = MessageRefused(mc.channel, mid, sender_id, why, "")
            out.batch.add_event(mark, self._now())  # stored and marked refused
            out.events.append(refused_event(mc, sender_id, [mark]))

    def seal_key(self, channel: str) -> ChannelKey:
        """The key envelopes of ``channel`` are sealed with now (a members channel's
        current epoch key, else the channel key)."""
        mc = self.channels.get(channel)
        return self._channels[channel].key if mc is None else mc.sending_key()

    def content(
        self, mc: MembersChannel, opened: Opened, data: bytes, out: Round
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
        self._notices(mc)
        if got.quiet:
            return False
        if got.retry:  # welcome later (a rate limit, a cut still coming): forget its bytes
            self._seen.forget(opened.envelope_hash)
        if got.hold:  # its sender's key share has not arrived: open it again then
            self._seen.forget(opened.envelope_hash)
            if not ephemeral and mc.hold(pb.sender_id, mc.session_of(pb.content), data):
                self.counters["members_held"] += 1
            return False
        if got.content is None:
            if got.reason == "already_read":
                self.counters["duplicate_envelopes"] += 1
            else:
                reject(self.counters, out, got.reason, mc.channel, pb.message_id)
            return False
        if not ephemeral and is_control(got.content):  # a key share opens held lines now
            released = mc.early_share(pb.sender_id, pb.lamport_timestamp, pb.message_id,
                                      got.content, self._now())  # fmt: skip
            if released:
                self._requeue(released)
        pb.content = got.content
        return True

    def on_control(self, mc: MembersChannel, author: str, lamport: int, mid: str,
                    content: bytes, env: bytes | None) -> None:  # fmt: skip
        """A control message delivered (or sent by us): the member list and keys move."""
        was_member = mc.roster.is_member(self.sender_id)
        change, released = mc.on_control(author, lamport, mid, content, env, self._now())
        if released:
            self._requeue(released)
        self.dirty.add(mc.channel)
        for out in change.refused:
            self.counters[f"members_rejected_{out.reason}"] += 1
        self._notices(mc)
        for mid in change.added | change.renamed:  # a new name like a verified member's
            member = mc.roster.member(mid)
            twin = None if member is None or member.person else self.verified.impersonated(
                mid, member.name)  # (a device: its person's root certified it)  # fmt: skip
            if member is not None and twin is not None:
                self._emit(MembersEvent(mc.channel, "key_changed",
                    f"WARNING: a new member calls itself {member.name!r} with another key "
                    f"({mid[:8]}) than the {member.name} you verified ({twin[:8]}): an "
                    "impostor, or a new device; check with them before you trust it",
                    {"member": mid, "verified": twin, "name": member.name}))  # fmt: skip
        if change:
            self._emit(MembersEvent(mc.channel, "changed", "the member list changed", {
                "added": sorted(change.added), "removed": sorted(change.removed),
                "rekeyed": sorted(change.share_keys_changed),
                "renamed": sorted(change.renamed), "members": len(mc.roster)}))
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

    def _notices(self, mc: MembersChannel) -> None:
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

    def forget_read(self, marks: dict[str, dict[tuple[str, str], int]]) -> None:
        """What was read up to ``marks`` is stored now: its Megolm keys leave the
        members file (forward secrecy, app/members/group_keys.py)."""
        for channel, m in marks.items():
            mc = self.channels.get(channel)
            if mc is not None and mc.group_keys.forget_read(m):
                self.save(mc)

    def save(self, mc: MembersChannel, *, state: bool = True) -> None:
        """Append a members channel's new records, and write its state (``state``, or
        when key material moved); on a full disk (or another OS error) keep it dirty
        for the next round: its control messages stay in the core's log."""
        try:
            members_file.save(self.store.data_dir, mc, state=state)
        except OSError as exc:
            self.counters["members_save_failed"] += 1
            self.dirty.add(mc.channel)
            if self.counters["members_save_failed"] == 1:
                self._emit(NodeError(f"#{mc.channel}: its keys could not be saved ({exc}); "
                                     "retrying"))  # fmt: skip

    def members_channel(self, channel: str) -> MembersChannel | None:
        """The members-channel state of ``channel`` (``None`` for another kind)."""
        return self.channels.get(channel)

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
        mc, create = MembersChannel.create(channel, self._ctx.name, self.identity)
        members_file.save(data_dir, mc)
        self.channels[channel] = mc
        info = await self._join(channel, key=mc.sending_key())
        await self._post(channel, create)
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

    async def subscribe_invites(self, channel: str) -> None:
        topics = [t for t in self._invite_book().topics(self._now(), channel)
                  if t not in self.invite_topics]  # fmt: skip
        if topics:
            self.invite_topics.update(topics)
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
        mc = self.channels.get(channel)
        if mc is None:
            raise KeyError(f"#{channel} is not a members channel (create one with /create)")
        if not mc.roster.is_admin(self.sender_id):
            raise ValueError(f"only an admin of #{channel} can invite")
        invite = make_invite(channel, mc.channel_id, tuple(relays), now_ms=self._now(),
                             ttl_ms=ttl_ms)  # fmt: skip
        self._invite_book().add(invite, approve=approve)
        await self.subscribe_invites(channel)
        code = encode_invite(invite)
        self._emit(InviteMade(channel, code, invite.expires_ms))
        return code

    def invite_frame(self, topic: bytes, box: bytes, now: int) -> None:
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
        mc = self.channels.get(entry.invite.channel)
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
        mc = self.channels.get(invite.channel)
        if mc is None or self._ctx.closing:
            return
        try:
            if not mc.roster.is_member(request.sender_id):
                if mc.roster.invite_used(invite.invite_id):
                    refusal = make_join_refused(invite, request, self.identity, "used",
                                                self._now())  # fmt: skip
                    await self._publish(wrap(topic, refusal))
                    return
                clash = mc.roster.confusable_with(request.name, request.sender_id)
                if clash:  # a look-alike of a member's name is no name to admit (app/names.py)
                    refusal = make_join_refused(invite, request, self.identity, "name_taken",
                                                self._now())  # fmt: skip
                    await self._publish(wrap(topic, refusal))
                    self.counters["invite_refused_name_taken"] += 1
                    self._emit(MembersEvent(invite.channel, "rejected",
                        f"a newcomer ({request.sender_id[:8]}) asked to join as "
                        f"{request.name!r}, which looks like "
                        f"{mc.roster.label_of(clash[0].member_id)}'s name: refused (the code "
                        "still works for another name)",
                        {"member": request.sender_id, "name": request.name,
                         "like": clash[0].member_id, "reason": "name_taken"}))  # fmt: skip
                    return
                member = MemberInfo(request.identity_key, request.x25519_key, request.name)
                await self._post(invite.channel,
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
        self.invite_topics.add(invite.topic)
        await self.transport.subscribe([invite.topic])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s

        async def ask(history_from: int) -> JoinAccepted | JoinRefused | None:
            request = make_join_request(invite, self.identity, keys.share_key, self._ctx.name,
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
            self.invite_topics.discard(invite.topic)
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
        self.channels[channel] = mc
        info = await self._join(channel, key=mc.sending_key())
        self._emit(MembersEvent(channel, "joined", f"joined members channel #{channel}",
                                {"admin": answer.admin_sender_id,
                                 "members": len(mc.roster)}))  # fmt: skip
        return info

    async def open_direct(self, via: str, member_id: str) -> ChannelInfo:
        """The direct conversation with ``member_id``, a member of members channel
        ``via``: joined if it exists here, else made (a members channel of two) and
        offered to them in ``via`` (app/members/direct.py).

        Raises:
            KeyError: ``via`` is not a members channel here.
            ValueError: ``member_id`` is not a member of ``via``, or is us.
        """
        self._check_open()
        mc = self.channels.get(via)
        if mc is None:
            raise KeyError(f"#{via} is not a members channel (direct messages go to its members)")
        peer = mc.roster.member(member_id)
        if peer is None or member_id == self.sender_id:
            raise ValueError(f"{member_id[:12]} is not another member of #{via}")
        name = direct_name(self.sender_id, member_id)
        if name in self._channels:
            return self._channels[name]
        if members_file.members_file(self.store.data_dir, name).exists():
            return await self._join(name)
        dm, create = MembersChannel.create(name, self._ctx.name, self.identity)
        self.save(dm)
        self.channels[name] = dm
        info = await self._join(name, key=dm.sending_key())
        await self._post(name, create)
        await self._post(name, encode_add(peer.info, role="admin"))
        controls = dm.membership_records()
        sealed = seal_direct(peer.info.share_key, name, dm.channel_id, dm.epoch_keys, controls)
        await self._post(via, encode_direct_invite(member_id, sealed))
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
        existing = self.channels.get(name)
        if existing is None:
            existing = await asyncio.to_thread(members_file.load, self.store.data_dir, name)
        if existing is not None:
            if prefer(existing.channel_id, offer.channel_id) == existing.channel_id:
                return  # the same conversation, or ours wins: they switch to ours
            with contextlib.suppress(ValueError, KeyError):
                await self._leave(name)
                await self._forget(name)
        via_mc = self.channels.get(via)
        if via_mc is None or self._ctx.closing:
            return
        secret = via_mc.group_keys.share_secret  # the same X25519 key as in ``via``
        keys = GroupKeys(offer.channel_id, self.sender_id, share_secret=secret)
        dm = MembersChannel(name, offer.channel_id, self.sender_id, offer.epoch_keys, keys,
                            signer=self.identity)  # fmt: skip
        dm.import_history(offer.records, self._now())
        if not (dm.roster.is_admin(inviter) and dm.roster.is_member(self.sender_id)):
            self.counters["direct_refused_history"] += 1
            return
        self.save(dm)
        self.channels[name] = dm
        try:
            await self._join(name, key=dm.sending_key())
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
            ValueError: not an admin (nor unlinking a device of our own person), or no
                such member.
        """
        mc = self.channels.get(channel)
        if mc is None:
            raise KeyError(f"#{channel} is not a members channel")
        target = mc.roster.member(member_id)
        own_device = (target is not None and bool(target.person)
                      and mc.roster.same_person(member_id, self.sender_id))  # fmt: skip
        if member_id != self.sender_id and not own_device and not mc.roster.is_admin(
                self.sender_id):  # fmt: skip
            raise ValueError(f"only an admin of #{channel} can remove members")
        if target is None:
            raise ValueError(f"{member_id[:12]} is not a member of #{channel}")
        held = await self.store.sender_ids(channel, member_id)  # the removal's cut
        for device in mc.roster.devices_of(member_id):  # they leave with it, cut alike
            held = [*held, *await self.store.sender_ids(channel, device.member_id)]
        for content in mc.remove(member_id, held):  # its parts first, in a large channel
            await self._post(channel, content)
