"""The member list of a members channel made before chaining: events folded by Lamport time.

This is the fold of the first version of members channels, kept for channels that
have not been upgraded yet (app/members/upgrade.py): until its creator signs the
genesis of the chain, such a channel is folded as it always was. A genesis replaces
it; from then on an unchained event is refused (``unchained``).


Every member feeds the channel's control messages (app/members/events.py) to a
:class:`Roster` as SDS delivers them, in whatever order they arrive, with
duplicates and late repairs. The roster sorts the events by their position in
the channel's total order, ``(lamport_timestamp, message_id)`` (the order every
SDS participant's log converges to), and replays them from the start; each event
is checked against the list as it stands just before it:

==================  ===========================================================
``create``          must be the first event, made by the creator it names; any
                    later create is ``duplicate_create``; a create for another
                    channel id, or whose id is not ``sha256(label || creator's
                    key || nonce)``, is ``wrong_channel`` (only the creator can
                    make the create of a channel id an invite names)
``add``             author is an admin (``not_admin``), the member is not one
                    already (``already_member``), its invite was not redeemed
                    before (``invite_used``)
``remove``          author is an admin, or removes itself (a leave); the target
                    is a member (``no_such_member``); the last admin cannot go
                    (``last_admin``)
``set_role``        author is an admin; target is a member; the last admin
                    cannot be demoted (``last_admin``)
``share_key``       author is a member (replaces its own share key)
``rekey``           author is an admin (starts a new epoch: see below)
==================  ===========================================================

Every applied ``remove`` and ``rekey`` starts a new *epoch*: it carries the
channel's next outer key sealed to each remaining member; :meth:`Roster.epochs`
lists them in order, so every member agrees which key is current. In a large
channel the sealed keys come partly in ``epoch_keys`` parts sent before the
``remove``/``rekey`` (same author, same nonce; not membership events, so they
are kept outside the fold and merged in by :meth:`Roster.epochs`).

An event whose author is not a member at its position is ``not_a_member``; an
event before any create is ``no_channel``. A rejected event changes nothing and
is kept with its reason (counted in :attr:`Roster.rejections`). Because the check
depends only on the events and their positions, two replicas that hold the same
events hold the same list, whatever order the events came in: two admins that
remove each other concurrently end with the earlier removal applied and the later
one rejected (its author is gone), at every member.

The roster also answers "was this sender a member when it sent this message"
(:meth:`Roster.was_member_at`): the node drops envelopes from identities that were
never members before they reach the SDS core (``not_a_member``).

Pure: no I/O, no clock; positions come from the caller.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from app.members import members_pb2 as pb
from app.members.events import (
    ROLE_ADMIN,
    ROLE_MEMBER,
    BadControl,
    MemberInfo,
    channel_id_for,
    decode_control,
    member_info,
    role_name,
)
from app.members.resolve import Member

__all__ = [
    "EPOCH_NONCE_BYTES",
    "MEMBERSHIP_BODIES",
    "REJECTION_REASONS",
    "Change",
    "LegacyRoster",
    "Outcome",
    "Position",
]

Position = tuple[int, str]
"""Where a message sits in the channel's total order: ``(lamport_timestamp, message_id)``."""

EPOCH_NONCE_BYTES = 16
"""Length of the nonce naming an epoch's EpochKeys parts."""

MEMBERSHIP_BODIES = frozenset({"create", "add", "remove", "set_role", "share_key", "rekey"})
"""Control bodies that change the member list (a ``key_share`` does not)."""

REJECTION_REASONS = (
    "malformed", "unsupported_version", "unknown_body", "no_channel", "duplicate_create",
    "wrong_channel", "not_self", "not_a_member", "not_admin", "already_member",
    "no_such_member", "invite_used", "last_admin",
)  # fmt: skip
"""Every reason a membership event can be rejected with."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one membership event: applied, or rejected with a reason."""

    position: Position
    author_id: str
    body: str
    target_id: str
    reason: str = ""

    @property
    def applied(self) -> bool:
        return not self.reason


@dataclass(frozen=True, slots=True)
class Change:
    """How the member list changed when an event was added (possibly re-sorting others)."""

    added: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    share_keys_changed: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.share_keys_changed)


@dataclass(slots=True)
class _Event:
    position: Position
    author_id: str
    msg: pb.Control


@dataclass(slots=True)
class _State:
    """The list as the fold has built it so far."""

    channel_id: bytes | None = None
    channel: str = ""
    created: bool = False
    members: dict[str, Member] = field(default_factory=dict)
    invites_used: set[bytes] = field(default_factory=set)
    # member id -> [[start, end or None], ...] membership intervals, in order
    spans: dict[str, list[list[Position | None]]] = field(default_factory=dict)
    # applied removes and rekeys: (position, member id -> sealed next outer key)
    epochs: list[tuple[Position, dict[str, bytes]]] = field(default_factory=list)
    # those whose keys came partly in EpochKeys parts: position -> (author, nonce, parts)
    epoch_parts: dict[Position, tuple[str, bytes, int]] = field(default_factory=dict)


class LegacyRoster:
    """The member list of one members channel (see the module docstring).

    Args:
        channel_id: the 32-byte id of the channel this roster belongs to, when
            known (from an invite or from creating it); a create with another id
            is rejected. ``None`` takes the id from the first create.
    """

    def __init__(self, channel_id: bytes | None = None) -> None:
        self._expected = channel_id
        self._events: list[_Event] = []
        self._ids: set[str] = set()
        self._state = _State(channel_id=channel_id)
        self._outcomes: dict[str, Outcome] = {}
        # EpochKeys parts (not membership events): (author, nonce) -> part id -> keys
        self._parts: dict[tuple[str, bytes], dict[str, dict[str, bytes]]] = {}

    # -- feeding ------------------------------------------------------------

    def add_event(self, author_id: str, lamport: int, message_id: str, content: bytes) -> Change:
        """Take one delivered control message; returns how the list changed.

        Duplicates (same ``message_id``) change nothing. Key shares are not
        membership events and change nothing here.
        """
        if message_id in self._ids:
            return Change()
        decoded = decode_control(content)
        position: Position = (lamport, message_id)
        if isinstance(decoded, BadControl):
            self._ids.add(message_id)
            self._outcomes[message_id] = Outcome(position, author_id, "?", "", decoded.reason)
            return Change()
        if decoded.WhichOneof("body") == "epoch_keys":  # a part of a coming epoch's keys
            part = decoded.epoch_keys
            if len(part.epoch_nonce) == EPOCH_NONCE_BYTES:
                self._parts.setdefault((author_id, bytes(part.epoch_nonce)), {})[message_id] = {
                    k.recipient_id: bytes(k.sealed) for k in part.epoch_keys}  # fmt: skip
            return Change()
        if decoded.WhichOneof("body") not in MEMBERSHIP_BODIES:
            return Change()
        self._ids.add(message_id)
        event = _Event(position, author_id, decoded)
        before = self._snapshot()
        if not self._events or self._events[-1].position < position:
            self._events.append(event)
            self._apply(self._state, event)
        else:
            bisect.insort(self._events, event, key=lambda e: e.position)
            self._refold()
        return self._diff(before)

    def _snapshot(self) -> dict[str, bytes]:
        return {mid: m.info.share_key for mid, m in self._state.members.items()}

    def _diff(self, before: dict[str, bytes]) -> Change:
        after = self._state.members
        added = frozenset(mid for mid in after if mid not in before)
        removed = frozenset(mid for mid in before if mid not in after)
        rekeyed = frozenset(mid for mid, m in after.items()
                            if mid in before and before[mid] != m.info.share_key)  # fmt: skip
        return Change(added, removed, rekeyed)

    def _refold(self) -> None:
        self._outcomes = {k: v for k, v in self._outcomes.items() if v.body == "?"}
        self._state = _State(channel_id=self._expected)
        for event in self._events:
            self._apply(self._state, event)

    # -- the rules ------------------------------------------------------------

    def _apply(self, st: _State, ev: _Event) -> None:
        msg = ev.msg
        body = msg.WhichOneof("body")
        assert body is not None
        target = ""
        if body == "create":
            target = member_info(msg.create.creator).member_id
        elif body == "add":
            target = member_info(msg.add.member).member_id
        elif body == "remove":
            target = msg.remove.member_id
        elif body == "set_role":
            target = msg.set_role.member_id
        elif body in ("share_key", "rekey"):
            target = ev.author_id
        reason = self._check(st, ev, body, target)
        outcome = Outcome(ev.position, ev.author_id, body, target, reason)
        self._outcomes[ev.position[1]] = outcome
        if reason:
            return
        self._change(st, ev, body, target)

    def _check(self, st: _State, ev: _Event, body: str, target: str) -> str:
        msg = ev.msg
        if body == "create":
            if st.created:
                return "duplicate_create"
            if st.channel_id is not None and bytes(msg.create.channel_id) != st.channel_id:
                return "wrong_channel"
            creator = msg.create.creator
            if bytes(msg.create.channel_id) != channel_id_for(bytes(creator.identity_key),
                                                              bytes(msg.create.nonce)):  # fmt: skip
                return "wrong_channel"
            return "" if target == ev.author_id else "not_self"
        if not st.created:
            return "no_channel"
        author = st.members.get(ev.author_id)
        if author is None:
            return "not_a_member"
        if body == "share_key":
            return "" if len(msg.share_key.share_key) == 32 else "malformed"
        if body == "rekey":
            return "" if author.is_admin else "not_admin"
        if body == "remove" and target == ev.author_id:
            return "last_admin" if self._last_admin(st, target) else ""
        if not author.is_admin:
            return "not_admin"
        if body == "add":
            if target in st.members:
                return "already_member"
            invite = bytes(msg.add.invite_id)
            if invite and invite in st.invites_used:
                return "invite_used"
            return ""
        if target not in st.members:
            return "no_such_member"
        if body == "remove":
            return "last_admin" if self._last_admin(st, target) else ""
        if body == "set_role" and role_name(msg.set_role.role) != ROLE_ADMIN:
            return "last_admin" if self._last_admin(st, target) else ""
        return ""

    @staticmethod
    def _last_admin(st: _State, member_id: str) -> bool:
        m = st.members.get(member_id)
        if m is None or not m.is_admin:
            return False
        return sum(1 for x in st.members.values() if x.is_admin) == 1

    def _change(self, st: _State, ev: _Event, body: str, target: str) -> None:
        msg = ev.msg
        if body == "create":
            st.created = True
            st.channel_id = bytes(msg.create.channel_id)
            st.channel = msg.create.channel
            self._enter(st, Member(target, member_info(msg.create.creator), ROLE_ADMIN,
                                   ev.position))  # fmt: skip
        elif body == "add":
            if msg.add.invite_id:
                st.invites_used.add(bytes(msg.add.invite_id))
            self._enter(st, Member(target, member_info(msg.add.member),
                                   role_name(msg.add.role), ev.position))  # fmt: skip
        elif body in ("remove", "rekey"):
            if body == "remove":
                del st.members[target]
                st.spans[target][-1][1] = ev.position
            epoch = msg.remove if body == "remove" else msg.rekey
            st.epochs.append((ev.position, {k.recipient_id: bytes(k.sealed)
                                            for k in epoch.epoch_keys}))  # fmt: skip
            if epoch.epoch_parts and len(epoch.epoch_nonce) == EPOCH_NONCE_BYTES:
                st.epoch_parts[ev.position] = (ev.author_id, bytes(epoch.epoch_nonce),
                                               int(epoch.epoch_parts))  # fmt: skip
        elif body == "set_role":
            old = st.members[target]
            st.members[target] = Member(target, old.info, role_name(msg.set_role.role), old.since)
        elif body == "share_key":
            old = st.members[target]
            info = MemberInfo(old.info.identity_key, bytes(msg.share_key.share_key),
                              old.info.name)  # fmt: skip
            st.members[target] = Member(target, info, old.role, old.since)

    @staticmethod
    def _enter(st: _State, member: Member) -> None:
        st.members[member.member_id] = member
        st.spans.setdefault(member.member_id, []).append([member.since, None])

    # -- questions ------------------------------------------------------------

    @property
    def rejections(self) -> Counter[str]:
        """How many events are rejected, by reason (undecodable ones included)."""
        return Counter(o.reason for o in self._outcomes.values() if o.reason)

    @property
    def created(self) -> bool:
        """Whether a valid create has been seen."""
        return self._state.created

    @property
    def creator(self) -> str:
        """The member id of the applied create's author ("" before one)."""
        create = self.create_body()
        return "" if create is None else member_info(create.creator).member_id

    def create_body(self) -> pb.Create | None:
        """The applied create event's body."""
        for ev in self._events:
            if ev.msg.WhichOneof("body") == "create":
                out = self._outcomes.get(ev.position[1])
                if out is not None and out.applied:
                    return ev.msg.create
        return None

    @property
    def channel_id(self) -> bytes | None:
        return self._state.channel_id

    @property
    def channel(self) -> str:
        """The channel name its create gave ("" before one is seen)."""
        return self._state.channel

    @property
    def members(self) -> dict[str, Member]:
        """Current members by id (a copy)."""
        return dict(self._state.members)

    def member(self, member_id: str) -> Member | None:
        return self._state.members.get(member_id)

    def is_member(self, member_id: str) -> bool:
        return member_id in self._state.members

    def is_admin(self, member_id: str) -> bool:
        m = self._state.members.get(member_id)
        return m is not None and m.is_admin

    def ever_member(self, member_id: str) -> bool:
        """Whether ``member_id`` has been a member at any position (now or before)."""
        return member_id in self._state.spans

    def was_member_at(self, member_id: str, position: Position) -> bool:
        """Whether ``member_id`` was a member at ``position`` (after its add, before
        its removal): the test a message from it must pass."""
        for start, end in self._state.spans.get(member_id, ()):
            assert start is not None
            if start < position and (end is None or position < end):
                return True
        return False

    def epochs(self) -> list[tuple[Position, dict[str, bytes]]]:
        """Applied removes and rekeys in order: where each started an epoch, and the
        next outer key sealed to each member it was meant for (with those of its
        EpochKeys parts come so far: :meth:`epoch_complete`)."""
        return [(position, self.epoch_boxes(position)) for position, _ in self._state.epochs]

    def epoch_positions(self) -> list[Position]:
        """Where each applied remove and rekey started an epoch, in order."""
        return [position for position, _ in self._state.epochs]

    def epoch_boxes(self, position: Position) -> dict[str, bytes]:
        """The sealed next outer keys of the epoch started at ``position`` (with those
        of its EpochKeys parts come so far); empty for no such epoch."""
        boxes = next((b for p, b in self._state.epochs if p == position), {})
        meta = self._state.epoch_parts.get(position)
        if meta is None:
            return boxes
        merged: dict[str, bytes] = {}
        for part in self._parts.get((meta[0], meta[1]), {}).values():
            merged.update(part)
        return {**merged, **boxes}

    def epoch_complete(self, position: Position) -> bool:
        """Whether every EpochKeys part of the epoch started at ``position`` has come
        (an epoch sent whole is complete)."""
        meta = self._state.epoch_parts.get(position)
        return meta is None or len(self._parts.get((meta[0], meta[1]), {})) >= meta[2]

    def outcome(self, message_id: str) -> Outcome | None:
        """What became of the membership event with this message id, if seen."""
        return self._outcomes.get(message_id)

    def invite_used(self, invite_id: bytes) -> bool:
        return invite_id in self._state.invites_used

    def invites_used(self) -> set[bytes]:
        return set(self._state.invites_used)

    def listing(self) -> list[tuple[str, str, str]]:
        """``(member_id, name, role)`` of every member, admins first, then by name and id."""
        return sorted(((m.member_id, m.name, m.role) for m in self._state.members.values()),
                      key=lambda t: (t[2] != ROLE_ADMIN, t[1].casefold(), t[0]))  # fmt: skip

    def __len__(self) -> int:
        return len(self._state.members)


__all__ += ["ROLE_ADMIN", "ROLE_MEMBER"]
