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
from collections.abc import Iterable
from dataclasses import dataclass, field

from nacl.public import PublicKey, SealedBox

from app.members import members_pb2 as pb
from app.members.chain import decode_chained, sign_chained
from app.members.cut import make_cut
from app.members.digest import DigestWatch, Divergence
from app.members.events import (
    CONTROL_MAGIC,
    BadControl,
    MemberInfo,
    channel_id_for,
    decode_control,
    decode_encrypted,
    encode_encrypted,
    encode_epoch_keys,
    encode_rekey,
    encode_remove,
    encrypted_span,
    is_control,
)
from app.members.group_keys import GroupKeys, RotationPolicy
from app.members.limits import EventLimits
from app.members.roster import (
    EPOCH_NONCE_BYTES,
    LEGACY_BODIES,
    MEMBERSHIP_BODIES,
    Change,
    EpochId,
    Position,
    Roster,
)
from app.members.upgrade import genesis_contents
from net.channel_key import KEY_BYTES, TOPIC_BYTES, ChannelKey
from net.identity import Identity

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
    """What to hand the core for a received content: ``content``, or hold it, or drop it.

    A drop with ``retry`` may be taken later (a rate limit, a cut whose parts have not
    come): the node forgets its envelope so that a resend or repair brings it again.
    A ``quiet`` drop is no refusal (a digest, taken here)."""

    content: bytes | None = None
    hold: bool = False
    reason: str = ""
    retry: bool = False
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class Notice:
    """Something to tell the people of the channel (the node emits it as a members event)."""

    what: str
    text: str
    data: dict[str, object]


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
        signer: Identity | None = None,
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
        self.signer = signer
        """Signs our chained membership events (our identity)."""
        self._epoch_keys: list[bytes] = list(epoch_keys)
        self._epoch_key_of: dict[EpochId, bytes] = {}
        self._epochs_opened: set[EpochId] = set()
        self._current = epoch_keys[-1]
        self._seen: set[str] = set()  # control message ids taken
        # the membership records a restart replays: message id -> (author, lamport,
        # content, envelope: kept for unchained events only, a newcomer checks those)
        self.records: dict[str, tuple[str, int, bytes, bytes | None]] = {}
        self.unsaved: list[str] = []
        """Ids of :attr:`records` not in the members file yet (secrets_file appends them)."""
        self.notices: list[Notice] = []
        """What to tell the people of the channel (the node drains it)."""
        self.cuts_done: list[tuple[bytes, str]] = []
        """Removals whose cut became complete: (removal hash, removed member); the node
        marks that member's stored messages outside it as refused."""
        self.limits = EventLimits()
        self._spans_seen: OrderedDict[str, bytes] = OrderedDict()  # message id -> span
        self.digests = DigestWatch()
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
        self.saved_digest = b""  # sha256 of the state file last written (secrets_file)
        self.keys_moved = True
        """Key material changed since the state file was written (a share imported, an
        epoch opened, a share key replaced): written before the round's commit."""

    @classmethod
    def create(cls, channel: str, name: str, signer: Identity,
               policy: RotationPolicy | None = None) -> tuple[MembersChannel, bytes]:  # fmt: skip
        """A new members channel with ``signer`` (called ``name``) as its first admin;
        returns it and the control content of its ``create`` event, the root of its
        chain (post it first)."""
        nonce = os.urandom(32)
        own_id = signer.sender_id
        channel_id = channel_id_for(signer.public_key, nonce)
        keys = GroupKeys(channel_id, own_id, policy)
        own = MemberInfo(signer.public_key, keys.share_key, name)
        mc = cls(channel, channel_id, own_id, [os.urandom(KEY_BYTES)], keys, signer=signer)
        create = pb.Create(channel=channel, channel_id=channel_id, nonce=nonce,
                           creator=pb.Member(identity_key=own.identity_key,
                                             share_key=own.share_key, name=name))  # fmt: skip
        return mc, mc.sign(pb.Chained(create=create), parents=())

    def sign(self, body: pb.Chained, parents: tuple[bytes, ...] | None = None) -> bytes:
        """The control content of a chained event (``body``'s oneof set) signed by us,
        naming our chain's heads (or ``parents``)."""
        if self.signer is None:
            raise ValueError("this members channel has no signing identity")
        heads = self.roster.heads if parents is None else list(parents)
        return sign_chained(self.signer, self.channel_id, heads, body)

    def _finalize(self, content: bytes) -> bytes:
        """Our control content as it goes out: an unchained membership event becomes a
        chained one naming our heads now (once the chain has its root), and key shares,
        epoch-key parts and direct invites name our span."""
        msg = decode_control(content)
        if isinstance(msg, BadControl):
            return content
        body = msg.WhichOneof("body")
        if not self.roster.chained:
            return content
        if body in LEGACY_BODIES and body != "create" and self.signer is not None:
            chained = pb.Chained()
            getattr(chained, body).CopyFrom(getattr(msg, body))
            return self.sign(chained)
        if body in ("key_share", "epoch_keys", "direct_invite"):
            msg.span = self.roster.span_of(self.own_id)
            return CONTROL_MAGIC + msg.SerializeToString()
        return content

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

    def admit(self, signer_id: str, message: object = None) -> str:
        """``""`` to let an envelope signed by ``signer_id`` through, else the reason.

        Before the member list has its create (a newcomer still folding it), every
        signer holding the outer key is let through: only members and former
        members hold it. ``message``: the envelope's SDS message; a sync message
        (no content) of someone who is not a member now is refused once the chain has
        its root (it would only name ids and acknowledge in the channel's name).
        """
        if not self.roster.created or self.roster.ever_member(signer_id):
            content = getattr(message, "content", b"x")
            if (content or not self.roster.chained or self.roster.is_member(signer_id)
                    or signer_id == self.own_id):  # fmt: skip
                return ""
        self._count("not_a_member")
        return "not_a_member"

    # -- receiving -------------------------------------------------------------------

    def incoming_content(self, sender_id: str, lamport: int, message_id: str,
                         content: bytes, *, ephemeral: bool = False,
                         now_ms: int = 0) -> Incoming:  # fmt: skip
        """Decide what the core gets for a received content message (see :class:`Incoming`).

        ``ephemeral``: an SDS ephemeral message (no Lamport time: a typing indicator,
        a state digest); its sender must be a member now. Ephemeral content travels
        under the outer layer only (it would otherwise use up Megolm indexes and force
        rotations).

        Once the chain has its root, a message of a member who was removed is taken
        only if its id is in that removal's cut (:meth:`Roster.judge`), whatever its
        Lamport time, epoch or key; a membership event of a member who is not one now
        only if it is known already (anything else it signs now is outside its cut).
        """
        if ephemeral:
            if not self.roster.is_member(sender_id):
                self._count("not_a_member")
                return Incoming(reason="not_a_member")
            if is_control(content):
                return self._ephemeral_control(sender_id, content, now_ms)
            return Incoming(content)
        if is_control(content):
            return self._gate_control(sender_id, message_id, content, now_ms)
        if not content:
            return Incoming(content)
        framed = decode_encrypted(content)
        if framed is None:
            self._count("not_encrypted")
            return Incoming(reason="not_encrypted")
        position = (lamport, message_id)
        if sender_id != self.own_id:
            span = encrypted_span(content)
            why = self._judge(sender_id, position, span)
            if why is not None:
                return why
            self._spans_seen[message_id] = span
            while len(self._spans_seen) > 4096:
                self._spans_seen.popitem(last=False)
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

    def _judge(self, sender_id: str, position: Position, span: bytes) -> Incoming | None:
        """``None`` when a message (not a chained event) of ``sender_id`` is taken."""
        if not self.roster.created:
            return None
        if not self.roster.chained:  # before the upgrade: the Lamport rule
            if self.roster.was_member_at(sender_id, position):
                return None
            self._count("not_a_member")
            return Incoming(reason="not_a_member")
        reason, retry = self.roster.judge(sender_id, position[1], span)
        if not reason:
            return None
        self._count(reason)
        return Incoming(reason=reason, retry=retry)

    def _gate_control(self, sender_id: str, message_id: str, content: bytes,
                      now_ms: int) -> Incoming:  # fmt: skip
        """The gate of a received control message (before the core)."""
        if sender_id == self.own_id:
            return Incoming(content)
        msg = decode_control(content)
        if isinstance(msg, BadControl) or not self.roster.chained:
            return Incoming(content)  # the roster counts what it cannot read
        body = msg.WhichOneof("body")
        if body in LEGACY_BODIES:
            self._count("unchained")
            self._notice_refused(sender_id, body, "", "unchained", b"")
            return Incoming(reason="unchained")
        if body == "signed":
            ev = decode_chained(msg, content, self.channel_id, sender_id)
            if isinstance(ev, BadControl):
                return Incoming(content)
            if self.roster.chain.knows(ev.hash) or ev.hash in self.roster.part_events:
                return Incoming(content)  # a copy: the core and the roster drop it
            if not self.roster.is_member(sender_id):
                self._count("outside_cut")
                self._notice_refused(sender_id, ev.body, ev.target, "outside_cut", ev.hash)
                return Incoming(reason="outside_cut")
            if not self.limits.admit(sender_id, self.roster.is_admin(sender_id), now_ms):
                self._count("rate_limited")
                return Incoming(reason="rate_limited", retry=True)
            return Incoming(content)
        why = self._judge(sender_id, (0, message_id), bytes(msg.span))
        if why is not None:
            return why
        if body == "epoch_keys" and not self.limits.admit(
                sender_id, self.roster.is_admin(sender_id), now_ms):  # fmt: skip
            self._count("rate_limited")
            return Incoming(reason="rate_limited", retry=True)
        return Incoming(content)

    def _ephemeral_control(self, sender_id: str, content: bytes, now_ms: int) -> Incoming:
        msg = decode_control(content)
        if isinstance(msg, pb.Control) and msg.WhichOneof("body") == "digest":
            found = self.digests.observe(self.roster, sender_id, msg.digest, now_ms)
            if found is not None:
                self._notice_divergence(found)
            return Incoming(reason="digest", quiet=True)
        self._count("not_a_member")
        return Incoming(reason="not_a_member")

    def _notice_refused(self, author: str, body: str, target: str, reason: str,
                        event: bytes) -> None:  # fmt: skip
        who = self._name(author)
        about = f" {self._name(target)}" if target and target != author else ""
        self.notices.append(Notice("rejected", (
            f"membership event refused: {who} tried {body}{about} ({reason})"),
            {"author": author, "body": body, "target": target, "reason": reason,
             "event": event.hex()}))  # fmt: skip

    def _notice_divergence(self, found: Divergence) -> None:
        events = [h.hex() for h in found.events]
        what = {"we_lack": f"{self._name(found.peer)} holds membership events we do not",
                "peer_lacks": f"{self._name(found.peer)} lacks membership events we hold",
                "other_state": f"{self._name(found.peer)} resolves the same membership "
                               "events to another state"}[found.side]  # fmt: skip
        self.notices.append(Notice("diverged", (
            f"#{self.channel}: {what}, not converged: {', '.join(e[:12] for e in events)}"),
            {"peer": found.peer, "side": found.side, "events": events}))  # fmt: skip

    def _name(self, member_id: str) -> str:
        m = self.roster.member(member_id)
        if m is None:
            return member_id[:8]
        return f"{m.name} ({member_id[:8]})"

    def outside_cuts(self, member_id: str, message_ids: Iterable[str]) -> list[str]:
        """Those of ``member_id``'s messages (stored here: shown already) that no cut of
        its removals accepts, now that it is not a member (a member added again is
        judged message by message as they come: :meth:`_judge`)."""
        if not self.roster.chained or self.roster.is_member(member_id):
            return []
        spans = self.roster.chain.state.spans.get(member_id, [])
        cuts = [self.roster.cut_of(s.end) for s in spans if s.end is not None]
        if any(c is None or not c.complete for c in cuts):
            return []  # judged once every cut is complete
        return [mid for mid in message_ids
                if not any(c is not None and c.accepts(mid) for c in cuts)]  # fmt: skip

    def refused_at_delivery(self, sender_id: str, message_id: str) -> str:
        """Why a message the core delivers now is refused ("" when it is not): it passed
        the gate before its sender's removal was known, and the removal's cut leaves it
        out."""
        if sender_id == self.own_id or not self.roster.chained:
            return ""
        span = self._spans_seen.get(message_id, b"")
        reason, retry = self.roster.judge(sender_id, message_id, span)
        return "" if retry else reason

    def digest_due(self, now_ms: int) -> bytes | None:
        """Our state digest's ephemeral content when it is due (send it as an SDS
        ephemeral message), else ``None``."""
        if not self.roster.is_member(self.own_id):
            return None
        return self.digests.due(self.roster, now_ms)

    def _before_us(self, position: EpochId) -> bool:
        """Whether a message or epoch comes before our add (its key came with our invite)."""
        me = self.roster.member(self.own_id)
        if me is None:
            return False
        if isinstance(position, bytes):  # an epoch event of the chain
            return position in self.roster.chain.closure([me.admitted_by]) if (
                me.admitted_by) else False  # fmt: skip
        return position < me.since

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
        opened (feed them to the node again). Refusals and cuts made complete are
        left in :attr:`notices` and :attr:`cuts_done`.
        """
        if message_id in self._seen:
            return Change(), []
        self._seen.add(message_id)
        change = self._take(author_id, lamport, message_id, content, envelope, trusted=False)
        if author_id == self.own_id:
            self.note_shared(content)
        released: list[bytes] = []
        msg = decode_control(content)
        if (isinstance(msg, pb.Control) and msg.WhichOneof("body") == "direct_invite"
                and author_id != self.own_id
                and msg.direct_invite.recipient_id == self.own_id):  # fmt: skip
            self.direct_offers.append((author_id, bytes(msg.direct_invite.sealed)))
        if isinstance(msg, pb.Control) and msg.WhichOneof("body") == "key_share":
            member = author_id == self.own_id or self._judge(
                author_id, (lamport, message_id), bytes(msg.span)) is None  # fmt: skip
            result = self.group_keys.receive_share(author_id, msg.key_share, now_ms,
                                                   author_is_member=member)  # fmt: skip
            if result.accepted:
                self.keys_moved = True
                released = self._release(author_id, result.session_id)
            elif result.reason != "not_for_us":
                self._count(f"share_{result.reason}")
        return change, released

    def _take(self, author_id: str, lamport: int, message_id: str, content: bytes,
              envelope: bytes | None, *, trusted: bool) -> Change:  # fmt: skip
        """A control message into the roster; keeps the membership records."""
        change = self.roster.add_event(author_id, lamport, message_id, content,
                                       trusted=trusted)  # fmt: skip
        msg = decode_control(content)
        replayed = isinstance(msg, pb.Control) and msg.WhichOneof("body") in _REPLAYED
        if replayed and message_id not in self.records:
            legacy = isinstance(msg, pb.Control) and msg.WhichOneof("body") in LEGACY_BODIES
            self.records[message_id] = (author_id, lamport, content,
                                        envelope if legacy else None)  # fmt: skip
            self.unsaved.append(message_id)
        for out in change.refused:
            self._notice_refused(out.author_id, out.body, out.target_id, out.reason, out.event)
        self.cuts_done.extend((h, held.member_id) for h, held in change.cuts)
        self._open_epochs()
        if change.removed:
            self.group_keys.on_members_removed()
        return change

    def early_share(self, author_id: str, lamport: int, message_id: str, content: bytes,
                    now_ms: int) -> list[bytes]:  # fmt: skip
        """Take a key share as it arrives, before the core delivers it; returns the held
        envelopes it releases (feed them to the node again).

        A key share must not wait for causal delivery: an owed share (a member added
        while its author's lines were in flight) comes *after* those lines in its
        author's log, so its causal history names them, while they are held here
        until their key arrives: waiting for delivery would wait until the core gave
        them up as lost. Importing a session early is safe: it is a signed envelope
        under the outer key, and it passed the same judgment as any message of its
        author (:meth:`_judge`: a removed member's share is taken only if its id is in
        the removal's cut); it is applied again by :meth:`on_control` on delivery,
        which changes nothing (a share never lowers a session's read mark).
        Membership events still take effect only on delivery.
        """
        if message_id in self._seen:
            return []
        msg = decode_control(content)
        if not isinstance(msg, pb.Control) or msg.WhichOneof("body") != "key_share":
            return []
        position = (lamport, message_id)
        if not self.roster.created or self._judge(author_id, position, bytes(msg.span)):
            return []  # not known as a member yet: on delivery, as any control
        result = self.group_keys.receive_share(author_id, msg.key_share, now_ms,
                                               author_is_member=True)  # fmt: skip
        if not result.accepted:
            return []
        self.keys_moved = True
        return self._release(author_id, result.session_id)

    def advance(self, now_ms: int, repair_horizon_ms: int | None = None) -> bool:
        """Forward secrecy for the keys (:meth:`GroupKeys.advance`, old share keys
        waiting on the other current members; ``repair_horizon_ms`` from the node's
        SDS configuration); True when a control message is due (a share-key
        rotation, the genesis of an upgraded channel: the node then runs
        :meth:`due_controls`)."""
        others = [mid for mid in self.roster.members if mid != self.own_id]
        self.group_keys.advance(now_ms, others, repair_horizon_ms)
        return self.roster.is_member(self.own_id) and (
            self.group_keys.share_rotation_due(now_ms) or self.genesis_due())  # fmt: skip

    def saved_controls(self) -> list[tuple[str, tuple[str, int, bytes, bytes | None]]]:
        """The control messages a restart replays (:meth:`replay_control`): chained
        events and their parts, epoch-key parts, and (before the upgrade) the
        unchained membership events; without their SDS envelopes (the chained ones
        carry their own signature), so the members file stays small."""
        keep_legacy = not self.roster.chained
        return [(mid, entry) for mid, entry in self.records.items()
                if keep_legacy or entry[3] is None]  # fmt: skip

    def membership_records(self) -> list[bytes]:
        """What a newcomer folds the member list from (``Record`` bytes): the chain's
        parts and events, parents first, without envelopes; before the upgrade, the
        unchained events' envelopes as their authors signed them. Key shares,
        epoch-key parts and direct invites are sealed to others and left out."""
        if self.roster.chained:
            return [pb.Record(content=content, lamport=pos[0], message_id=pos[1])
                    .SerializeToString() for content, pos in self.roster.records()]  # fmt: skip
        ordered = sorted(self.records.items(), key=lambda kv: (kv[1][1], kv[0]))
        return [pb.Record(envelope=env).SerializeToString()
                for _, (_, _, _, env) in ordered if env is not None]  # fmt: skip

    def import_history(self, records: list[bytes], now_ms: int,
                       open_envelope: object = None) -> int:  # fmt: skip
        """Take the records of a join answer or a direct invite (:meth:`membership_records`);
        returns how many were taken. An unchained record's envelope is opened with our
        outer keys and must be signed by its author."""
        from net.envelope import EnvelopeError, open_for_topic  # envelopes only here

        taken = 0
        for raw in records:
            rec = pb.Record()
            try:
                rec.ParseFromString(raw)
            except Exception:
                continue
            if rec.envelope:
                try:
                    opened = open_for_topic(bytes(rec.envelope), lambda _t: self.opening_keys())
                except EnvelopeError:
                    continue
                sds = opened.sds_message
                if sds is None or not is_control(sds.content) or sds.sender_id != opened.sender_id:
                    continue
                self.on_control(opened.sender_id, sds.lamport_timestamp, sds.message_id,
                                bytes(sds.content), bytes(rec.envelope), now_ms)  # fmt: skip
                taken += 1
                continue
            content = bytes(rec.content)
            mid = rec.message_id or "h:" + hashlib.sha256(content).hexdigest()
            if mid in self._seen or not is_control(content):
                continue
            self._seen.add(mid)
            self._take("", int(rec.lamport), mid, content, None, trusted=True)
            taken += 1
        return taken

    def replay_control(self, author_id: str, lamport: int, message_id: str, content: bytes,
                       envelope: bytes | None) -> None:  # fmt: skip
        """Apply a control message saved earlier (at a restart): the member list and
        the epochs, not its key share (the saved Megolm state already has it)."""
        if message_id in self._seen:
            return
        self._seen.add(message_id)
        msg = decode_control(content)
        if not isinstance(msg, pb.Control) or msg.WhichOneof("body") not in _REPLAYED:
            return  # a file of an earlier version kept key shares too
        self._take(author_id, lamport, message_id, content, envelope, trusted=True)
        if message_id in self.unsaved:
            self.unsaved.remove(message_id)

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

    def epoch_key_state(self) -> list[list[object]]:
        """The epochs opened and their keys (saved in the members file)."""
        out: list[list[object]] = []
        for epoch, key in self._epoch_key_of.items():
            ref: object = epoch.hex() if isinstance(epoch, bytes) else [epoch[0], epoch[1]]
            out.append([ref, key.hex()])
        return out

    def restore_epoch_keys(self, rows: list[list[object]]) -> None:
        for ref, key in rows:
            epoch: EpochId = (bytes.fromhex(ref) if isinstance(ref, str)
                              else (int(ref[0]), str(ref[1])))  # type: ignore[index]  # fmt: skip
            self._epoch_key_of[epoch] = bytes.fromhex(str(key))
            self._epochs_opened.add(epoch)

    def set_current(self, key: bytes) -> None:
        """Make ``key`` (one of :attr:`epoch_keys`) the sending key."""
        if key not in self._epoch_keys:
            raise ValueError("not a known outer key")
        self._current = key

    def _open_epochs(self) -> None:
        """Open our box of every epoch the roster lists, and send with the key of the
        last one in the chain's order that we hold (an epoch a late event cut is no
        longer listed: the key before it is current again)."""
        listed = self.roster.epoch_positions()
        for epoch in listed:
            if epoch in self._epochs_opened:
                continue
            box = self.roster.epoch_boxes(epoch).get(self.own_id)
            if box is None and self._before_us(epoch):
                self._epochs_opened.add(epoch)  # its key came with our invite
                continue
            if box is None and not self.roster.epoch_complete(epoch):
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
            self._epochs_opened.add(epoch)
            self._epoch_key_of[epoch] = key
            self.keys_moved = True
            if key not in self._epoch_keys:
                self._epoch_keys.append(key)
        for epoch in reversed(listed):
            key = self._epoch_key_of.get(epoch)
            if key is not None:
                self._current = key
                return

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
            return [self._finalize(content)]
        return [*self.due_controls(now_ms), self.outgoing_content(content, now_ms)]

    def outgoing_content(self, content: bytes, now_ms: int) -> bytes:
        """The content to give the core for ``content`` typed here: control content as
        it is, anything else Megolm-encrypted with our current session (share it
        first: :meth:`outgoing`)."""
        if is_control(content):
            return content
        index = self.group_keys.next_index(now_ms)
        session_id, megolm = self.group_keys.encrypt(content, now_ms)
        framed = encode_encrypted(session_id, megolm, self.roster.span_of(self.own_id))
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
        if self.genesis_due():
            return self.genesis()
        if self._rekey_due and self.roster.is_admin(self.own_id):
            out.extend(self.rekey())
            self._rekey_due = False
        if self.group_keys.share_rotation_due(now_ms):  # a new share key, every 7 days
            out.append(self.group_keys.rotate_share_key(now_ms))
            self.keys_moved = True
        if not shares:
            return [self._finalize(c) for c in out]
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
        return [self._finalize(c) for c in out]

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
                    out.append(self._finalize(share))
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

    def remove(self, member_id: str, held: Iterable[str] = ()) -> list[bytes]:
        """The control contents removing ``member_id`` (or, when it is us, our leave)
        with the next epoch's key, to post in order: one ``remove`` in a channel of up
        to :data:`EPOCH_CHUNK` remaining members, else the keys of the others first in
        ``epoch_keys`` parts (sealed, like the remove, with the current outer key),
        then the ``remove`` naming them.

        ``held``: the ids of ``member_id``'s messages in our log: the removal's cut
        (:mod:`app.members.cut`), inline or in signed parts posted before it; of the
        removed member, only these stay accepted."""
        remaining = {mid: m.info.share_key for mid, m in self.roster.members.items()
                     if mid != member_id and m.person != member_id}  # its devices go with it
        _, boxes = self._seal_epoch(remaining)
        parts, rest, nonce = _split_epoch(boxes)
        if not self.roster.chained:  # before the upgrade: as the first version did
            return [*parts, encode_remove(member_id, rest, epoch_nonce=nonce,
                                          epoch_parts=len(parts))]  # fmt: skip
        cut, cut_parts = make_cut(held)
        signed_parts = [self.sign(pb.Chained(part=p), parents=()) for p in cut_parts]
        sealed = [pb.SealedKey(recipient_id=rid, sealed=box) for rid, box in sorted(rest.items())]
        if member_id == self.own_id:
            leave = pb.Leave(epoch_keys=sealed, epoch_nonce=nonce, epoch_parts=len(parts),
                             cut=cut)  # fmt: skip
            return [*parts, *signed_parts, self.sign(pb.Chained(leave=leave))]
        remove = pb.Remove(member_id=member_id, epoch_keys=sealed, epoch_nonce=nonce,
                           epoch_parts=len(parts), cut=cut)  # fmt: skip
        # signed as it goes out (:meth:`outgoing`), naming the heads of that moment
        return [*parts, *signed_parts, CONTROL_MAGIC + pb.Control(
            version=1, remove=remove).SerializeToString()]  # fmt: skip

    def add_device(self, device: MemberInfo, root: bytes, pop: bytes) -> bytes:
        """The control content of our ``add_device`` event: ``device`` (its identity key,
        its share key in this channel, its device name) becomes a member speaking as our
        person, whose root key is ``root``; ``pop`` is the device's own signature of
        ``POP_LABEL || root || device key`` (the one of the person's device log).

        Raises:
            ValueError: the channel has no chain yet, or we are no member.
        """
        if not self.roster.chained:
            raise ValueError(f"#{self.channel} has no membership chain yet")
        if not self.roster.is_member(self.own_id):
            raise ValueError(f"we are not a member of #{self.channel}")
        body = pb.AddDevice(device=pb.Member(identity_key=device.identity_key,
                                             share_key=device.share_key, name=device.name),
                            root=root, pop=pop)  # fmt: skip
        return self.sign(pb.Chained(add_device=body))

    def rename(self, name: str) -> bytes:
        """The control content of our ``rename`` event: the roster lists us as ``name``
        (a chained event: the channel must have its chain's root)."""
        if not self.roster.chained:
            raise ValueError(f"#{self.channel} has no membership chain yet")
        return self.sign(pb.Chained(rename=pb.Rename(name=name)))

    def genesis_due(self) -> bool:
        """Whether we are the creator of a channel made before chaining, and its
        genesis is to be signed (once: it makes the chain's root)."""
        legacy = self.roster.legacy
        return (self.signer is not None and not self.roster.chained and legacy.created
                and legacy.creator == self.own_id and legacy.is_admin(self.own_id))  # fmt: skip

    def genesis(self) -> list[bytes]:
        """The control contents of this channel's genesis (see :mod:`app.members.upgrade`)."""
        members = {mid: m.info.share_key for mid, m in self.roster.members.items()}
        _, boxes = self._seal_epoch(members)
        parts, rest, nonce = _split_epoch(boxes)
        contents = genesis_contents(self.roster.legacy, lambda body: self.sign(body, parents=()),
                                    rest, nonce, len(parts))  # fmt: skip
        return [*parts, *contents]

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
"""Control bodies kept in the members file and replayed at a restart."""


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
