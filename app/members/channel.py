"""One members channel as the node drives it: keys, gate, encryption, control messages.

A members channel has two layers of keys (the argument is in docs/security.md):

* the **outer key** of the current *epoch* seals every envelope (the ordinary
  envelope of net/envelope.py, ChaCha20-Poly1305 + the sender's Ed25519
  signature). The routing topic is fixed for the channel's life (derived from
  its 32-byte channel id), so relays and store peers see one topic. Every
  ``remove`` (and ``rekey``) starts a new epoch whose key is sealed to each
  remaining member inside the event: from then on a removed member cannot open
  the envelopes at all, not even the SDS metadata (ids, Lamport times, causal
  histories, bloom filters).
* the **content** of every ordinary message is encrypted with the sender's
  Megolm session (:mod:`app.members.group_keys`), shared with each current
  member and rotated on removal; received sessions are advanced past what was
  read (forward secrecy).

Control messages (membership events and key shares) carry their content in the
clear inside the outer layer: a newcomer folds the whole member list from them.

The node calls, in this order:

* :meth:`MembersChannel.admit` with the signer of every opened envelope (the gate:
  identities that were never members are dropped before the SDS core);
* :meth:`incoming_content` with the content of every received message before the
  core sees it (plaintext, or hold until the sender's key share arrives, or a
  marker for a message from before we joined);
* :meth:`on_control` with every delivered or sent control message;
* :meth:`outgoing_content` with every content it is about to send;
* :meth:`due_controls` after every round, to post the key shares and rekeys due.

Pure apart from key generation; persistence in :mod:`app.members.secrets_file`.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass, field

from nacl.public import PublicKey, SealedBox

from app.members import members_pb2 as pb
from app.members.events import (
    MemberInfo,
    channel_id_for,
    decode_control,
    decode_encrypted,
    encode_create,
    encode_encrypted,
    encode_epoch_keys,
    encode_rekey,
    encode_remove,
    is_control,
)
from app.members.group_keys import GroupKeys, RotationPolicy
from app.members.roster import EPOCH_NONCE_BYTES, MEMBERSHIP_BODIES, Change, Position, Roster
from net.channel_key import KEY_BYTES, TOPIC_BYTES, ChannelKey

__all__ = [
    "BEFORE_JOINED",
    "EPOCH_CHUNK",
    "HELD_PER_CHANNEL",
    "HELD_PER_SENDER",
    "SHARE_CHUNK",
    "Incoming",
    "MembersChannel",
    "members_topic",
]

BEFORE_JOINED = b"\xffSE\x00"
"""Content the node hands the SDS core for a message this member cannot read
because it was sent before the member was added (the core still delivers it in
causal order, so nothing waits for it; the UI counts such messages once)."""

HELD_PER_SENDER = 256
"""Messages held per sender while its key share has not arrived."""

HELD_PER_CHANNEL = 2048
"""Messages held per channel while their senders' key shares have not arrived."""

SHARE_CHUNK = 100
"""Recipients per key-share message (about 510 bytes each: 51 KB, under the SDS
content limit of 64 KiB, ``sds.Config.max_content_bytes``)."""

SENT_SESSIONS = 4
"""Our outbound sessions whose messages' positions are kept (for owed key shares,
:meth:`MembersChannel.owed_shares`): the newest few; a member added concurrently
with a line of an older session than these cannot be owed its key (it gets the
marker for a message from before it joined)."""

EPOCH_CHUNK = 300
"""Recipients per message of a removal's or rekey's sealed epoch keys (about 155
bytes each: 47 KB, under the 64 KiB content limit); a larger channel's keys go
in EpochKeys parts sent before the event (:meth:`MembersChannel.remove`)."""

_TOPIC_DOMAIN = b"sdschat-members-topic-v1"


def members_topic(channel_id: bytes) -> bytes:
    """The routing topic of a members channel: fixed for its life, whatever the epoch."""
    return hashlib.sha256(_TOPIC_DOMAIN + channel_id).digest()[:TOPIC_BYTES]


@dataclass(frozen=True, slots=True)
class Incoming:
    """What to hand the core for a received content: ``content``, or hold it, or drop it."""

    content: bytes | None = None
    hold: bool = False
    reason: str = ""


@dataclass(slots=True)
class _Held:
    envelopes: OrderedDict[bytes, None] = field(default_factory=OrderedDict)


class MembersChannel:
    """The members-channel state of one channel at one member (see the module docstring).

    Args:
        channel: the channel's name.
        channel_id: its 32-byte id.
        own: this member (identity key, current share key, display name).
        epoch_keys: the outer keys known so far, oldest first (at least one).
        group_keys: this member's Megolm state for the channel.
    """

    def __init__(
        self,
        channel: str,
        channel_id: bytes,
        own_id: str,
        epoch_keys: list[bytes],
        group_keys: GroupKeys,
        *,
        pickle_key: bytes | None = None,
    ) -> None:
        if not epoch_keys or any(len(k) != KEY_BYTES for k in epoch_keys):
            raise ValueError("a members channel needs at least one 32-byte outer key")
        self.channel = channel
        self.channel_id = channel_id
        self.own_id = own_id
        self.pickle_key = pickle_key or os.urandom(32)
        """Encrypts the Megolm pickles in the members file (app/members/secrets_file.py)."""
        self.topic = members_topic(channel_id)
        self.roster = Roster(channel_id)
        self.group_keys = group_keys
        self._epoch_keys: list[bytes] = list(epoch_keys)
        self._epochs_opened: set[Position] = set()
        self._current = epoch_keys[-1]
        # control messages as delivered: message id -> (author, lamport, content, envelope)
        self.controls: dict[str, tuple[str, int, bytes, bytes | None]] = {}
        self._replayed: set[str] = set()  # those of them a restart replays (saved_controls)
        self.direct_offers: list[tuple[str, bytes]] = []
        """Direct invites to us delivered and not taken yet: (author, sealed box)."""
        self._held: dict[tuple[str, str], _Held] = {}
        self._held_count = 0
        self._own_plain: OrderedDict[bytes, bytes] = OrderedDict()
        self._own_index: dict[bytes, tuple[str, int]] = {}
        # our messages per outbound session: (position, Megolm index), the newest 256
        self._sent: dict[str, list[tuple[Position, int]]] = {}
        # who got each of our sessions from us (a share's recipients), to owe nobody twice
        self._session_shared: dict[str, set[str]] = {}
        self.counters: dict[str, int] = {}
        self._rekey_due = False
        self.saved_changes = -1  # group_keys.changes when last saved (secrets_file)

    @classmethod
    def create(cls, channel: str, own: MemberInfo, own_id: str,
               policy: RotationPolicy | None = None) -> tuple[MembersChannel, bytes]:  # fmt: skip
        """A new members channel with ``own`` as its first admin; returns it and the
        control content of its ``create`` event (post it first)."""
        nonce = os.urandom(32)
        channel_id = channel_id_for(own.identity_key, nonce)
        keys = GroupKeys(channel_id, own_id, policy)
        own = MemberInfo(own.identity_key, keys.share_key, own.name)
        _, create = encode_create(channel, own, nonce)
        mc = cls(channel, channel_id, own_id, [os.urandom(KEY_BYTES)], keys)
        return mc, create

    def _count(self, reason: str) -> None:
        self.counters[reason] = self.counters.get(reason, 0) + 1

    # -- keys the envelope layer uses ------------------------------------------

    @property
    def epoch_keys(self) -> list[bytes]:
        """Every outer key known, oldest first (the invite gives a newcomer these)."""
        return list(self._epoch_keys)

    def sending_key(self) -> ChannelKey:
        """The outer key envelopes are sealed with now (the current epoch's)."""
        return ChannelKey(self.channel, self._current, self.topic, is_public=False)

    def opening_keys(self) -> list[ChannelKey]:
        """Every outer key to try when opening, the current one first."""
        keys = [self._current] + [k for k in reversed(self._epoch_keys) if k != self._current]
        return [ChannelKey(self.channel, k, self.topic, is_public=False) for k in keys]

    # -- the gate ----------------------------------------------------------------

    def admit(self, signer_id: str) -> str:
        """``""`` to let an envelope signed by ``signer_id`` through, else the reason.

        Before the member list has its create (a newcomer still folding it), every
        signer holding the outer key is let through: only members and former
        members hold it.
        """
        if not self.roster.created or self.roster.ever_member(signer_id):
            return ""
        self._count("not_a_member")
        return "not_a_member"

    # -- receiving -------------------------------------------------------------------

    def incoming_content(self, sender_id: str, lamport: int, message_id: str,
                         content: bytes, *, ephemeral: bool = False) -> Incoming:  # fmt: skip
        """Decide what the core gets for a received content message (see :class:`Incoming`).

        ``ephemeral``: an SDS ephemeral message (no Lamport time: a typing indicator);
        its sender must be a member now. Ephemeral content travels under the outer
        layer only (it would otherwise use up Megolm indexes and force rotations).
        """
        if ephemeral:
            if is_control(content) or not self.roster.is_member(sender_id):
                self._count("not_a_member")
                return Incoming(reason="not_a_member")
            return Incoming(content)
        if is_control(content) or not content:
            return Incoming(content)
        framed = decode_encrypted(content)
        if framed is None:
            self._count("not_encrypted")
            return Incoming(reason="not_encrypted")
        position = (lamport, message_id)
        if self.roster.created and sender_id != self.own_id and not self.roster.was_member_at(
                sender_id, position):  # fmt: skip
            self._count("not_a_member")
            return Incoming(reason="not_a_member")
        session_id, megolm = framed
        out = self.group_keys.decrypt(sender_id, session_id, megolm)
        if not isinstance(out, str):
            return Incoming(out.plaintext)
        if out == "already_read":
            return Incoming(reason="already_read")
        if out == "before_share" or (out == "unknown_session" and self._before_us(position)):
            self._count("before_joined")
            return Incoming(BEFORE_JOINED)
        if out == "unknown_session":
            return Incoming(hold=True)
        self._count(out)
        return Incoming(reason=out)

    def _before_us(self, position: Position) -> bool:
        me = self.roster.member(self.own_id)
        return me is not None and position < me.since

    def hold(self, sender_id: str, session_id: str, envelope: bytes) -> bool:
        """Keep an envelope until ``sender_id``'s session arrives; False if full."""
        held = self._held.setdefault((sender_id, session_id), _Held())
        if envelope in held.envelopes:
            return True
        per_sender = sum(len(h.envelopes) for (s, _), h in self._held.items() if s == sender_id)
        if per_sender >= HELD_PER_SENDER or self._held_count >= HELD_PER_CHANNEL:
            self._count("hold_full")
            return False
        held.envelopes[envelope] = None
        self._held_count += 1
        return True

    def session_of(self, content: bytes) -> str:
        """The Megolm session id of an encrypted content ("" for any other)."""
        framed = decode_encrypted(content)
        return framed[0] if framed else ""

    @property
    def held(self) -> int:
        return self._held_count

    def _release(self, sender_id: str, session_id: str) -> list[bytes]:
        held = self._held.pop((sender_id, session_id), None)
        if held is None:
            return []
        self._held_count -= len(held.envelopes)
        return list(held.envelopes)

    # -- control messages ------------------------------------------------------------

    def on_control(self, author_id: str, lamport: int, message_id: str, content: bytes,
                   envelope: bytes | None, now_ms: int) -> tuple[Change, list[bytes]]:  # fmt: skip
        """Apply a delivered (or own sent) control message.

        Returns how the member list changed and the held envelopes that can now be
        opened (feed them to the node again).
        """
        if message_id in self.controls:
            return Change(), []
        self.controls[message_id] = (author_id, lamport, content, envelope)
        change = self.roster.add_event(author_id, lamport, message_id, content)
        if author_id == self.own_id:
            self.note_shared(content)
        released: list[bytes] = []
        msg = decode_control(content)
        if isinstance(msg, pb.Control) and msg.WhichOneof("body") in _REPLAYED:
            self._replayed.add(message_id)
        if (isinstance(msg, pb.Control) and msg.WhichOneof("body") == "direct_invite"
                and author_id != self.own_id
                and msg.direct_invite.recipient_id == self.own_id):  # fmt: skip
            self.direct_offers.append((author_id, bytes(msg.direct_invite.sealed)))
        if isinstance(msg, pb.Control) and msg.WhichOneof("body") == "key_share":
            position = (lamport, message_id)
            member = author_id == self.own_id or self.roster.was_member_at(author_id, position)
            result = self.group_keys.receive_share(author_id, msg.key_share, now_ms,
                                                   author_is_member=member)  # fmt: skip
            if result.accepted:
                released = self._release(author_id, result.session_id)
            elif result.reason != "not_for_us":
                self._count(f"share_{result.reason}")
        self._open_epochs()
        if change.removed:
            self.group_keys.on_members_removed()
        return change, released

    def early_share(self, author_id: str, lamport: int, message_id: str, content: bytes,
                    now_ms: int) -> list[bytes]:  # fmt: skip
        """Take a key share as it arrives, before the core delivers it; returns the held
        envelopes it releases (feed them to the node again).

        A key share must not wait for causal delivery: an owed share (a member added
        while its author's lines were in flight) comes *after* those lines in its
        author's log, so its causal history names them, while they are held here
        until their key arrives: waiting for delivery would wait until the core gave
        them up as lost. Importing a session early is safe (a signed envelope under
        the outer key, from an author who was a member at the share's position; the
        share is applied again by :meth:`on_control` on delivery, which changes
        nothing: a share never lowers a session's read mark).
        Membership events still take effect only on delivery.
        """
        if message_id in self.controls:
            return []
        msg = decode_control(content)
        if not isinstance(msg, pb.Control) or msg.WhichOneof("body") != "key_share":
            return []
        if not self.roster.was_member_at(author_id, (lamport, message_id)):
            return []  # not known as a member yet: on delivery, as any control
        result = self.group_keys.receive_share(author_id, msg.key_share, now_ms,
                                               author_is_member=True)  # fmt: skip
        return self._release(author_id, result.session_id) if result.accepted else []

    def advance(self, now_ms: int, repair_horizon_ms: int | None = None) -> bool:
        """Forward secrecy for the keys (:meth:`GroupKeys.advance`, old share keys
        waiting on the other current members; ``repair_horizon_ms`` from the node's
        SDS configuration); True when a control message is due (a share-key
        rotation: the node then runs :meth:`due_controls`)."""
        others = [mid for mid in self.roster.members if mid != self.own_id]
        self.group_keys.advance(now_ms, others, repair_horizon_ms)
        return self.roster.is_member(self.own_id) and self.group_keys.share_rotation_due(now_ms)

    def control_envelopes(self) -> list[bytes]:
        """The control messages' envelopes, in channel order (what a newcomer folds)."""
        ordered = sorted(self.controls.items(), key=lambda kv: (kv[1][1], kv[0]))
        return [env for _, (_, _, _, env) in ordered if env is not None]

    def saved_controls(self) -> list[tuple[str, tuple[str, int, bytes, bytes | None]]]:
        """The control messages a restart replays (:meth:`replay_control`): the
        membership events and epoch-key parts. Key shares and direct invites are
        not kept (their effect is in the saved Megolm state; a copy delivered again
        is applied again, harmlessly), so the members file stays small."""
        return [(mid, entry) for mid, entry in self.controls.items() if mid in self._replayed]

    def membership_envelopes(self) -> list[bytes]:
        """The membership events' envelopes, in channel order: what a newcomer folds
        the member list from (key shares, epoch-key parts and direct invites are
        sealed to others and left out)."""
        ordered = sorted(self.controls.items(), key=lambda kv: (kv[1][1], kv[0]))
        out = []
        for _, (_, _, content, env) in ordered:
            msg = decode_control(content)
            if env is not None and isinstance(msg, pb.Control) and (
                    msg.WhichOneof("body") in MEMBERSHIP_BODIES):  # fmt: skip
                out.append(env)
        return out

    def replay_control(self, author_id: str, lamport: int, message_id: str, content: bytes,
                       envelope: bytes | None) -> None:  # fmt: skip
        """Apply a control message saved earlier (at a restart): the member list and
        the epochs, not its key share (the saved Megolm state already has it)."""
        if message_id in self.controls:
            return
        self.controls[message_id] = (author_id, lamport, content, envelope)
        msg = decode_control(content)  # a file of an earlier version kept key shares too
        if isinstance(msg, pb.Control) and msg.WhichOneof("body") in _REPLAYED:
            self._replayed.add(message_id)
        self.roster.add_event(author_id, lamport, message_id, content)
        self._open_epochs()

    def sent_state(self) -> dict[str, object]:
        """What :meth:`owed_shares` needs across a restart (saved in the members file)."""
        return {
            "sent": {sid: [[pos[0], pos[1], i] for pos, i in v] for sid, v in self._sent.items()},
            "shared": {sid: sorted(v) for sid, v in self._session_shared.items()},
        }

    def restore_sent_state(self, doc: dict[str, object]) -> None:
        sent = doc.get("sent", {})
        shared = doc.get("shared", {})
        assert isinstance(sent, dict) and isinstance(shared, dict)
        self._sent = {sid: [((int(a), str(b)), int(i)) for a, b, i in v] for sid, v in sent.items()}
        self._session_shared = {sid: set(v) for sid, v in shared.items()}

    def set_current(self, key: bytes) -> None:
        """Make ``key`` (one of :attr:`epoch_keys`) the sending key."""
        if key not in self._epoch_keys:
            raise ValueError("not a known outer key")
        self._current = key

    def _open_epochs(self) -> None:
        current = self._current
        for position in self.roster.epoch_positions():
            if position in self._epochs_opened:
                continue
            box = self.roster.epoch_boxes(position).get(self.own_id)
            if box is None and self._before_us(position):
                self._epochs_opened.add(position)  # its key came with our invite
                continue
            if box is None and not self.roster.epoch_complete(position):
                continue  # our key may be in a part still to come
            if box is None:
                if self.roster.is_member(self.own_id):
                    self._count("epoch_without_our_key")
                    self._rekey_due = True
                continue
            key = self._open_epoch_box(box)
            if key is None:
                self._count("epoch_undecryptable")
                self._rekey_due = True
                continue
            self._epochs_opened.add(position)
            if key not in self._epoch_keys:
                self._epoch_keys.append(key)
            current = key
        self._current = current

    def _open_epoch_box(self, box: bytes) -> bytes | None:
        data = self.group_keys.open_sealed(box)
        if data is None:
            return None
        plain = pb.EpochKey()
        try:
            plain.ParseFromString(data)
        except Exception:
            return None
        if bytes(plain.channel_id) != self.channel_id or len(plain.key) != KEY_BYTES:
            return None
        return bytes(plain.key)

    # -- sending ---------------------------------------------------------------------

    def outgoing(self, content: bytes, now_ms: int) -> list[bytes]:
        """The contents to give the core, in order, for ``content`` typed here: the
        control messages due first (a key share of our session for members that lack
        it, so that it precedes the first message they need it for), then
        :meth:`outgoing_content`."""
        if is_control(content):
            return [content]
        return [*self.due_controls(now_ms), self.outgoing_content(content, now_ms)]

    def outgoing_content(self, content: bytes, now_ms: int) -> bytes:
        """The content to give the core for ``content`` typed here: control content as
        it is, anything else Megolm-encrypted with our current session (share it
        first: :meth:`outgoing`)."""
        if is_control(content):
            return content
        index = self.group_keys.next_index(now_ms)
        session_id, megolm = self.group_keys.encrypt(content, now_ms)
        framed = encode_encrypted(session_id, megolm)
        self._own_plain[framed] = content
        self._own_index[framed] = (session_id, index)
        while len(self._own_plain) > 1024:
            old, _ = self._own_plain.popitem(last=False)
            self._own_index.pop(old, None)
        return framed

    def own_plaintext(self, framed: bytes, position: Position | None = None) -> bytes:
        """The plaintext of content :meth:`outgoing_content` encrypted (or ``framed``);
        ``position``: where the core put the message (kept to share the session
        from there with a member added concurrently)."""
        where = self._own_index.pop(framed, None)
        if where is not None and position is not None:
            sent = self._sent.setdefault(where[0], [])
            sent.append((position, where[1]))
            del sent[:-256]
            while len(self._sent) > SENT_SESSIONS:  # the oldest session's debts lapse
                oldest = next(iter(self._sent))
                del self._sent[oldest]
                self._session_shared.pop(oldest, None)
        plain = self._own_plain.pop(framed, None)
        if plain is not None:
            return plain
        out = self.incoming_content(self.own_id, 0, "", framed)
        return out.content if out.content is not None else framed

    def due_controls(self, now_ms: int, *, shares: bool = True) -> list[bytes]:
        """Control contents to post now: (admins) a rekey when a member has no key of
        the current epoch, and with ``shares`` our session's key share for members
        that lack it (at most :data:`SHARE_CHUNK` recipients per message).

        The node posts rekeys at once and key shares lazily, just before our next
        message (:meth:`outgoing`): in a large channel most members are silent, and
        a removal then costs each of them nothing until they speak.
        """
        out: list[bytes] = []
        if not self.roster.is_member(self.own_id):
            return out
        if self._rekey_due and self.roster.is_admin(self.own_id):
            out.extend(self.rekey())
            self._rekey_due = False
        if self.group_keys.share_rotation_due(now_ms):  # a new share key, every 7 days
            out.append(self.group_keys.rotate_share_key(now_ms))
        if not shares:
            return out
        members = {mid: m.info.share_key for mid, m in self.roster.members.items()}
        recipients = self.group_keys.unshared(members, now_ms)
        if not recipients:
            return out
        # each from the first of our messages after its add (sent before we knew of it)
        sent = self._sent.get(self.group_keys.outbound_session_id(now_ms), [])
        by_index: dict[int | None, dict[str, bytes]] = {}
        for mid, key in recipients.items():
            member = self.roster.member(mid)
            first = None if member is None else _first_after(sent, member.since)
            by_index.setdefault(first, {})[mid] = key
        for first, group in by_index.items():
            ids = sorted(group)
            for start in range(0, len(ids), SHARE_CHUNK):
                chunk = {mid: group[mid] for mid in ids[start : start + SHARE_CHUNK]}
                share = self.group_keys.key_share(chunk, now_ms, from_index=first)
                if share is not None:
                    out.append(share)
        return out

    def owed_shares(self) -> list[bytes]:
        """Key shares owed now: members added while our messages were in flight (they
        came after the add in channel order, but we had not heard of it yet) get the
        session those messages used, from the first of them. Posted at once, not
        lazily: nothing else would ever give them those messages' key."""
        out: list[bytes] = []
        if not self.roster.is_member(self.own_id):
            return out
        for session_id, sent in self._sent.items():
            done = self._session_shared.setdefault(session_id, set())
            owed: dict[int, dict[str, bytes]] = {}
            for mid, member in self.roster.members.items():
                if mid == self.own_id or mid in done:
                    continue
                first = _first_after(sent, member.since)
                if first is not None:
                    owed.setdefault(first, {})[mid] = member.info.share_key
            for first, group in owed.items():
                share = self.group_keys.share_session(session_id, group, first)
                if share is not None:
                    out.append(share)
                done.update(group)
        return out

    def note_shared(self, content: bytes) -> None:
        """Remember who a key share of ours went to (sent through the core)."""
        msg = decode_control(content)
        if isinstance(msg, pb.Control) and msg.WhichOneof("body") == "key_share":
            done = self._session_shared.setdefault(msg.key_share.session_id, set())
            done.update(k.recipient_id for k in msg.key_share.keys)

    def _seal_epoch(self, members: dict[str, bytes]) -> tuple[bytes, dict[str, bytes]]:
        key = os.urandom(KEY_BYTES)
        plain = pb.EpochKey(channel_id=self.channel_id, key=key).SerializeToString()
        boxes = {mid: SealedBox(PublicKey(share)).encrypt(plain)
                 for mid, share in members.items()}  # fmt: skip
        return key, boxes

    def remove(self, member_id: str) -> list[bytes]:
        """The control contents removing ``member_id`` with the next epoch's key, to
        post in order: one ``remove`` in a channel of up to :data:`EPOCH_CHUNK`
        remaining members, else the keys of the others first in ``epoch_keys``
        parts (sealed, like the remove, with the current outer key), then the
        ``remove`` naming them."""
        remaining = {mid: m.info.share_key for mid, m in self.roster.members.items()
                     if mid != member_id}  # fmt: skip
        _, boxes = self._seal_epoch(remaining)
        parts, rest, nonce = _split_epoch(boxes)
        return [*parts, encode_remove(member_id, rest, epoch_nonce=nonce,
                                      epoch_parts=len(parts))]  # fmt: skip

    def rekey(self) -> list[bytes]:
        """The control contents starting a new epoch for the current members (in
        parts as :meth:`remove`)."""
        members = {mid: m.info.share_key for mid, m in self.roster.members.items()}
        _, boxes = self._seal_epoch(members)
        parts, rest, nonce = _split_epoch(boxes)
        return [*parts, encode_rekey(rest, epoch_nonce=nonce, epoch_parts=len(parts))]

    def stats(self) -> dict[str, object]:
        return {
            "members": len(self.roster),
            "epochs": len(self._epoch_keys),
            "held": self._held_count,
            "rejected_events": dict(self.roster.rejections),
            **self.group_keys.stats(),
            **self.counters,
        }


_REPLAYED = MEMBERSHIP_BODIES | {"epoch_keys"}


def _split_epoch(boxes: dict[str, bytes]) -> tuple[list[bytes], dict[str, bytes], bytes]:
    """``(EpochKeys parts, the keys left for the event itself, nonce)`` for ``boxes``:
    no parts (and no nonce) when they fit in one message."""
    ids = sorted(boxes)
    if len(ids) <= EPOCH_CHUNK:
        return [], boxes, b""
    nonce = os.urandom(EPOCH_NONCE_BYTES)
    chunks = [ids[i : i + EPOCH_CHUNK] for i in range(0, len(ids), EPOCH_CHUNK)]
    parts = [encode_epoch_keys(nonce, {mid: boxes[mid] for mid in chunk})
             for chunk in chunks[:-1]]  # fmt: skip
    return parts, {mid: boxes[mid] for mid in chunks[-1]}, nonce


def _first_after(sent: list[tuple[Position, int]], since: Position) -> int | None:
    """The Megolm index of our first message placed after ``since`` (a member's add)."""
    return next((index for pos, index in sent if pos > since), None)
