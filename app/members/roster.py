"""The member list of a members channel: its chain resolved (or, before the upgrade, the
Lamport fold), as the rest of the code asks it.

Every member feeds the channel's control messages to a :class:`Roster` as they come
(SDS delivery, the members file, a join answer), in any order, with duplicates. A
chained event (:mod:`app.members.chain`) goes to the :class:`~app.members.resolve.Chain`,
which resolves the DAG of events to one state, the same at every member that holds
the same events whatever the order they came in. ``Part`` records (a removal's cut
ids, a genesis's members) and ``epoch_keys`` parts are kept beside it.

A channel made before chaining is folded by the earlier rules
(:mod:`app.members.legacy`) until its creator's genesis arrives; from then on an
unchained event is refused (``unchained``).

The roster also holds each removal's cut (:mod:`app.members.cut`) and answers
:meth:`Roster.judge`: whether a message of a given sender, id and span is accepted.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Final

from app.members import members_pb2 as pb
from app.members.chain import ChainEvent, decode_chained
from app.members.cut import SPAN_BYTES, HeldCut
from app.members.events import ROLE_ADMIN, ROLE_MEMBER, BadControl, decode_control
from app.members.legacy import LegacyRoster
from app.members.resolve import Chain, Member, Position, State, devices_of
from app.names import NameBook, confusable

__all__ = [
    "EPOCH_NONCE_BYTES",
    "LEGACY_BODIES",
    "MEMBERSHIP_BODIES",
    "REJECTION_REASONS",
    "Change",
    "EpochId",
    "Member",
    "Outcome",
    "Position",
    "Roster",
]

EPOCH_NONCE_BYTES: Final = 16
"""Length of the nonce naming an epoch's EpochKeys parts."""

LEGACY_BODIES: Final = frozenset({"create", "add", "remove", "set_role", "share_key", "rekey"})
"""The unchained membership bodies of the first version."""

MEMBERSHIP_BODIES: Final = LEGACY_BODIES | {"signed"}
"""Control bodies that are membership events or their parts (kept, handed to newcomers)."""

PARTS_PER_AUTHOR: Final = 64
"""Nonces of parts kept per author (a part no event names yet waits within this)."""

REJECTION_REASONS: Final = (
    "malformed", "unsupported_version", "unknown_body", "no_channel", "duplicate_create",
    "wrong_channel", "not_self", "not_a_member", "not_admin", "already_member",
    "no_such_member", "invite_used", "last_admin", "bad_signature", "wrong_author",
    "second_root", "other_root", "outside_cut", "unchained", "held_full", "name_taken",
    "not_own_root", "bad_device_signature", "too_many_devices", "is_device",
)  # fmt: skip
"""Every reason a membership event can be refused with."""

EpochId = bytes | Position
"""Names an epoch: the hash of the chained event that started it (a position before
the upgrade)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one membership event: applied, or refused with a reason."""

    position: Position
    author_id: str
    body: str
    target_id: str
    reason: str = ""
    event: bytes = b""
    """The chained event's hash (empty for an unchained one)."""

    @property
    def applied(self) -> bool:
        return not self.reason


@dataclass(frozen=True, slots=True)
class Change:
    """What taking one control message changed."""

    added: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    share_keys_changed: frozenset[str] = frozenset()
    renamed: frozenset[str] = frozenset()
    """Members whose roster name changed (a ``rename``)."""
    refused: tuple[Outcome, ...] = ()
    """Events refused now: the one taken, or earlier ones a late event cuts."""
    cuts: tuple[tuple[bytes, HeldCut], ...] = ()
    """Removals whose cut became complete now: (removal hash, cut)."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.share_keys_changed or self.renamed)


class Roster:
    """The member list of one members channel (see the module docstring).

    Args:
        channel_id: the channel's 32-byte id when known (events for another are
            refused); ``None`` takes it from the first root.
    """

    def __init__(self, channel_id: bytes | None = None) -> None:
        self._expected = channel_id
        self.chain = Chain(channel_id, self._genesis_members)
        self.legacy = LegacyRoster(channel_id)
        self._ids: set[str] = set()
        self._bad: dict[str, Outcome] = {}
        self._unchained: dict[str, Outcome] = {}
        self._mid_of: dict[bytes, str] = {}
        self._hash_of: dict[str, bytes] = {}
        # signed Part records: (author, nonce) -> part hash -> part
        self._parts: dict[tuple[str, bytes], dict[bytes, pb.Part]] = {}
        self.part_events: dict[bytes, ChainEvent] = {}
        # epoch_keys parts (v1 controls): (author, nonce) -> message id -> sealed keys
        self._epoch_parts: dict[tuple[str, bytes], dict[str, dict[str, bytes]]] = {}
        self._cuts: dict[bytes, HeldCut] = {}
        self._known: dict[str, tuple[bytes, str]] = {}  # members, share keys, names (chain)
        self._hash_cache: bytes | None = None
        self._book: NameBook | None = None  # every member's name, current and former

    # -- feeding ------------------------------------------------------------

    @property
    def chained(self) -> bool:
        """Whether the channel's chain has its root here (then unchained events are refused)."""
        return self.chain.state.root is not None

    def add_event(self, author_id: str, lamport: int, message_id: str, content: bytes,
                  *, trusted: bool = False) -> Change:  # fmt: skip
        """Take one control message signed (in its envelope) by ``author_id``;
        ``trusted``: a record of our own members file or a join answer (a chained
        event's author is then its signature's, whoever passed it on).

        Duplicates change nothing; key shares and direct invites change nothing here.
        """
        if message_id in self._ids:
            return Change()
        self._book = None
        decoded = decode_control(content)
        position: Position = (lamport, message_id)
        if isinstance(decoded, BadControl):
            self._ids.add(message_id)
            out = Outcome(position, author_id, "?", "", decoded.reason)
            self._bad[message_id] = out
            return Change(refused=(out,))
        body = decoded.WhichOneof("body")
        if body == "epoch_keys":
            self._take_epoch_part(author_id, message_id, decoded.epoch_keys)
            return Change()
        if body == "signed":
            ev = decode_chained(decoded, content, self._expected,
                                None if trusted else author_id)  # fmt: skip
            if isinstance(ev, BadControl):
                self._ids.add(message_id)
                out = Outcome(position, author_id, "signed", "", ev.reason)
                self._bad[message_id] = out
                return Change(refused=(out,))
            return self.take(ev, position)
        if body not in LEGACY_BODIES:
            return Change()
        self._ids.add(message_id)
        if self.chained:
            out = Outcome(position, author_id, body, "", "unchained")
            self._unchained[message_id] = out
            return Change(refused=(out,))
        before = self._snapshot()
        self.legacy.add_event(author_id, lamport, message_id, content)
        change = self._diff(before)
        legacy_out = self.legacy.outcome(message_id)
        if legacy_out is not None and legacy_out.reason:
            refused = (Outcome(position, author_id, body, legacy_out.target_id,
                               legacy_out.reason),)  # fmt: skip
            return Change(change.added, change.removed, change.share_keys_changed,
                          change.renamed, refused)
        return change

    def take(self, ev: ChainEvent, position: Position) -> Change:
        """Take one decoded chained event or part."""
        self._hash_cache = None
        mid = position[1]
        if mid:
            self._ids.add(mid)
        if ev.body == "part":
            return self._take_part(ev)
        if self.chain.knows(ev.hash):
            return Change()
        if mid:
            self._mid_of.setdefault(ev.hash, mid)
            self._hash_of[mid] = ev.hash
        resolutions = self.chain.resolutions
        result = self.chain.add(ev, position)
        if isinstance(result, str):
            if mid:
                self._ids.discard(mid)  # it may come again when there is room
            return Change(refused=(Outcome(position, ev.author_id, ev.body, ev.target, result,
                                           ev.hash),))  # fmt: skip
        if self.chain.resolutions != resolutions:
            change = self._diff_known(None)
        else:  # applied at the end of the order: only what these events name moved
            touched: set[str] | None = set()
            for h in result:
                node = self.chain.nodes[h]
                if node.ev.body == "genesis":
                    touched = None
                    break
                assert touched is not None
                touched.update((node.ev.author_id, node.ev.target))
            change = self._diff_known(touched)
        refused = [self._outcome_of(h) for h in dict.fromkeys(self.chain.changed)
                   if self.chain.outcomes.get(h)]  # fmt: skip
        cuts = self._refresh_cuts()
        self._names_moved(change, self.chain.resolutions != resolutions)
        return Change(change.added, change.removed, change.share_keys_changed, change.renamed,
                      tuple(refused), cuts)  # fmt: skip

    def _names_moved(self, change: Change, resolved: bool) -> None:
        """Keep :attr:`names` current: the names added or changed noted (a removal keeps
        its name: former members count), all made again after a re-resolution."""
        if self._book is None:
            return
        if resolved:
            self._book = None
            return
        for mid in change.added | change.renamed:
            name = self.name_of(mid)
            if name is not None:
                self._book.use(mid, name)

    def _take_part(self, ev: ChainEvent) -> Change:
        part = ev.msg.part
        key = (ev.author_id, bytes(part.nonce))
        held = self._parts.get(key)
        if held is None:
            nonces = sum(1 for a, _ in self._parts if a == ev.author_id)
            if nonces >= PARTS_PER_AUTHOR:
                return Change()
            held = self._parts[key] = {}
        if ev.hash in held:
            return Change()
        held[ev.hash] = part
        self.part_events[ev.hash] = ev
        self.chain.changed = []
        released = self.chain.release()
        change = self._diff_known(None) if released else Change()
        if released:
            self._book = None
        cuts = self._refresh_cuts()
        return Change(change.added, change.removed, change.share_keys_changed, change.renamed,
                      (), cuts)

    def _take_epoch_part(self, author_id: str, message_id: str, part: pb.EpochKeys) -> None:
        if len(part.epoch_nonce) != EPOCH_NONCE_BYTES:
            return
        key = (author_id, bytes(part.epoch_nonce))
        if key not in self._epoch_parts and sum(
                1 for a, _ in self._epoch_parts if a == author_id) >= PARTS_PER_AUTHOR:  # fmt: skip
            return
        self._epoch_parts.setdefault(key, {})[message_id] = {
            k.recipient_id: bytes(k.sealed) for k in part.epoch_keys}  # fmt: skip

    def _genesis_members(self, ev: ChainEvent) -> list[pb.RosterEntry] | None:
        g = ev.msg.genesis
        entries = list(g.members)
        if g.members_parts:
            parts = self._parts.get((ev.author_id, bytes(g.members_nonce)), {})
            if len(parts) < g.members_parts:
                return None
            for part in sorted(parts.values(), key=lambda p: p.SerializeToString()):
                entries.extend(part.members)
        return entries

    def _refresh_cuts(self) -> tuple[tuple[bytes, HeldCut], ...]:
        """Keep a :class:`HeldCut` for every applied removal and leave; returns those
        that became complete now."""
        st = self.chain.state
        now: dict[bytes, HeldCut] = {}
        done = []
        for h, target, admin_only in st.revocations:
            if admin_only:
                continue
            held = self._cuts.get(h)
            if held is None:
                ev = self.chain.nodes[h].ev
                cut = ev.msg.remove.cut if ev.body == "remove" else ev.msg.leave.cut
                held = HeldCut(target, ev.author_id, cut)
            parts = self._parts.get((held.author_id, bytes(held.cut.parts_nonce)), {})
            if held.settle(parts.values() if held.cut.parts else ()):
                done.append((h, held))
            now[h] = held
        self._cuts = now
        return tuple(done)

    def _diff_known(self, touched: set[str] | None) -> Change:
        """How the members (and their share keys) moved since last reported, looking
        only at ``touched`` (``None``: everyone)."""
        members = self.chain.state.members if self.chained else self.legacy.members
        ids = set(members) | set(self._known) if touched is None else touched
        added, removed, rekeyed, renamed = set(), set(), set(), set()
        for mid in ids:
            now = members.get(mid)
            was = self._known.get(mid)
            if now is None and was is not None:
                removed.add(mid)
                del self._known[mid]
            elif now is not None:
                if was is None:
                    added.add(mid)
                else:
                    if was[0] != now.info.share_key:
                        rekeyed.add(mid)
                    if was[1] != now.name:
                        renamed.add(mid)
                self._known[mid] = (now.info.share_key, now.name)
        return Change(frozenset(added), frozenset(removed), frozenset(rekeyed),
                      frozenset(renamed))  # fmt: skip

    def _snapshot(self) -> dict[str, tuple[bytes, str]]:
        return {mid: (m.info.share_key, m.name) for mid, m in self.members.items()}

    def _diff(self, before: dict[str, tuple[bytes, str]]) -> Change:
        after = self.members
        added = frozenset(mid for mid in after if mid not in before)
        removed = frozenset(mid for mid in before if mid not in after)
        rekeyed = frozenset(mid for mid, m in after.items()
                            if mid in before and before[mid][0] != m.info.share_key)  # fmt: skip
        renamed = frozenset(mid for mid, m in after.items()
                            if mid in before and before[mid][1] != m.name)  # fmt: skip
        return Change(added, removed, rekeyed, renamed)

    def _outcome_of(self, h: bytes) -> Outcome:
        node = self.chain.nodes[h]
        ev = node.ev
        return Outcome(node.position, ev.author_id, ev.body, ev.target,
                       self.chain.outcomes.get(h, ""), h)  # fmt: skip

    # -- the cut --------------------------------------------------------------

    def judge(self, sender_id: str, message_id: str, span: bytes = b"") -> tuple[str, bool]:
        """Whether a message (not a chained event) of ``sender_id`` with this id and span
        tag is accepted: ``("", False)``, or ``(reason, retry)``: ``retry`` when it may be
        accepted later (its span or its removal's cut parts have not come yet)."""
        if not self.chained:
            return "", False  # before the upgrade: the legacy gate (was_member_at)
        spans = self.chain.state.spans.get(sender_id)
        if not spans:
            return "not_a_member", False
        found = next((s for s in spans if s.start[:SPAN_BYTES] == span), None) if span else spans[0]
        if found is None:
            return ("unknown_span", True) if sender_id in self.chain.state.members else (
                "not_a_member", False)  # fmt: skip
        if found.end is None:
            return "", False
        held = self._cuts.get(found.end)
        if held is None:
            return "outside_cut", False
        if not held.complete:
            return "cut_pending", True
        return ("", False) if held.accepts(message_id) else ("outside_cut", False)

    def cut_of(self, removal: bytes) -> HeldCut | None:
        return self._cuts.get(removal)

    def span_of(self, member_id: str) -> bytes:
        """The span tag ``member_id``'s messages carry now (empty before the upgrade)."""
        m = self.member(member_id)
        return m.admitted_by[:SPAN_BYTES] if m is not None and self.chained else b""

    # -- questions ------------------------------------------------------------

    def _state(self) -> State | None:
        return self.chain.state if self.chained else None

    @property
    def rejections(self) -> Counter[str]:
        """How many events are refused, by reason (undecodable ones included)."""
        out: Counter[str] = Counter(o.reason for o in self._bad.values())
        out.update(o.reason for o in self._unchained.values())
        out.update(r for r in self.chain.outcomes.values() if r)
        if not self.chained:
            out.update(self.legacy.rejections)
        return out

    @property
    def created(self) -> bool:
        """Whether the channel's root (or, before the upgrade, its create) is known."""
        return self.chained or self.legacy.created

    @property
    def channel_id(self) -> bytes | None:
        return self._expected if self._expected is not None else (
            self.legacy.channel_id)  # fmt: skip

    @property
    def channel(self) -> str:
        st = self._state()
        return st.channel if st is not None else self.legacy.channel

    @property
    def members(self) -> dict[str, Member]:
        """Current members by id (a copy)."""
        st = self._state()
        return dict(st.members) if st is not None else self.legacy.members

    def member(self, member_id: str) -> Member | None:
        st = self._state()
        return st.members.get(member_id) if st is not None else self.legacy.member(member_id)

    def is_member(self, member_id: str) -> bool:
        return self.member(member_id) is not None

    def is_admin(self, member_id: str) -> bool:
        m = self.member(member_id)
        return m is not None and m.is_admin

    def ever_member(self, member_id: str) -> bool:
        """Whether ``member_id`` has been a member (now or before)."""
        st = self._state()
        return member_id in st.spans if st is not None else self.legacy.ever_member(member_id)

    def was_member_at(self, member_id: str, position: Position) -> bool:
        """Before the upgrade: whether ``member_id`` was a member at ``position``; after
        it, whether it is a member now (messages are judged by :meth:`judge`)."""
        if self.chained:
            return self.is_member(member_id)
        return self.legacy.was_member_at(member_id, position)

    def epoch_positions(self) -> list[EpochId]:
        """The events that started each epoch, in order."""
        st = self._state()
        if st is not None:
            return list(st.epochs)
        return list(self.legacy.epoch_positions())

    def epochs(self) -> list[tuple[EpochId, dict[str, bytes]]]:
        return [(e, self.epoch_boxes(e)) for e in self.epoch_positions()]

    def _epoch_body(self, epoch: bytes) -> pb.Rekey | pb.Remove | pb.Leave | pb.Genesis | None:
        node = self.chain.nodes.get(epoch)
        if node is None:
            return None
        ev = node.ev
        if ev.body == "rekey":
            return ev.msg.rekey
        if ev.body == "remove":
            return ev.msg.remove
        if ev.body == "leave":
            return ev.msg.leave
        return ev.msg.genesis if ev.body == "genesis" else None

    def epoch_boxes(self, epoch: EpochId) -> dict[str, bytes]:
        """The sealed next outer keys of an epoch (with its parts come so far)."""
        if not isinstance(epoch, bytes):
            return self.legacy.epoch_boxes(epoch)
        body = self._epoch_body(epoch)
        if body is None:
            return {}
        boxes = {k.recipient_id: bytes(k.sealed) for k in body.epoch_keys}
        if not body.epoch_parts:
            return boxes
        author = self.chain.nodes[epoch].ev.author_id
        merged: dict[str, bytes] = {}
        for part in self._epoch_parts.get((author, bytes(body.epoch_nonce)), {}).values():
            merged.update(part)
        return {**merged, **boxes}

    def epoch_complete(self, epoch: EpochId) -> bool:
        if not isinstance(epoch, bytes):
            return self.legacy.epoch_complete(epoch)
        body = self._epoch_body(epoch)
        if body is None or not body.epoch_parts:
            return True
        author = self.chain.nodes[epoch].ev.author_id
        return len(self._epoch_parts.get((author, bytes(body.epoch_nonce)), {})) >= (
            body.epoch_parts)  # fmt: skip

    def outcome(self, message_id: str) -> Outcome | None:
        """What became of the membership event carried by this message, if seen."""
        h = self._hash_of.get(message_id)
        if h is not None and h in self.chain.nodes:
            return self._outcome_of(h)
        for book in (self._bad, self._unchained):
            if message_id in book:
                return book[message_id]
        legacy = self.legacy.outcome(message_id)
        if legacy is None:
            return None
        return Outcome(legacy.position, legacy.author_id, legacy.body, legacy.target_id,
                       legacy.reason)  # fmt: skip

    def outcome_of_event(self, h: bytes) -> Outcome | None:
        return self._outcome_of(h) if h in self.chain.nodes else None

    def invite_used(self, invite_id: bytes) -> bool:
        st = self._state()
        return invite_id in st.invites_used if st is not None else (
            self.legacy.invite_used(invite_id))  # fmt: skip

    # -- names ------------------------------------------------------------------

    def name_of(self, member_id: str) -> str | None:
        """The name the roster gives ``member_id``: the one an admin admitted it with, or
        its own later ``rename``; for a former member the name it had when it left;
        ``None`` for someone never admitted. Never a name claimed inside a line. A
        device (``add_device``) has its person's name."""
        m = self.member(member_id)
        if m is not None:  # (a current device's person is current: it leaves with it)
            return self.name_of(m.person) if m.person else m.name
        st = self._state()
        if st is None:
            return None
        owner = st.former_devices.get(member_id)
        return self.name_of(owner) if owner is not None else st.former.get(member_id)

    @property
    def names(self) -> NameBook:
        """Every member's roster name, current and former, by skeleton (kept current as
        events come: O(1) for an event at the end of the order, made again after a
        re-resolution)."""
        if self._book is None:
            st = self._state()
            former = st.former.items() if st is not None else ()
            self._book = NameBook([*former, *((mid, m.name) for mid, m in self.members.items()
                                              if not m.person)])  # fmt: skip
        return self._book

    def label_of(self, member_id: str) -> str:
        """How ``member_id`` is written on every line: its roster name, with its
        fingerprint when another member's name (current or former) looks like it
        (:func:`app.names.confusable`); its id's start when it was never admitted."""
        name = self.name_of(member_id)
        return self.names.label(name, self.person_of(member_id))

    def confusable_with(self, name: str, member_id: str = "") -> list[Member]:
        """The current members other than ``member_id`` whose names look like ``name``
        (what refuses an admission or a rename, docs/members.md "Names")."""
        return [m for mid, m in sorted(self.members.items())
                if mid != member_id and not m.person and confusable(m.name, name)]  # fmt: skip

    def listing(self) -> list[tuple[str, str, str]]:
        """``(member_id, name, role)`` of every person (devices are listed by
        :meth:`devices_of`), admins first, then by name and id."""
        return sorted(((m.member_id, m.name, m.role) for m in self.members.values()
                       if not m.person),
                      key=lambda t: (t[2] != ROLE_ADMIN, t[1].casefold(), t[0]))  # fmt: skip

    def person_of(self, member_id: str) -> str:
        """The person ``member_id`` speaks as: a current device's person, else itself."""
        m = self.member(member_id)
        if m is not None:
            return m.person_id
        st = self._state()
        return st.former_devices.get(member_id, member_id) if st is not None else member_id

    def devices_of(self, person_id: str) -> list[Member]:
        """The current devices of ``person_id`` (not the person itself), by id."""
        st = self._state()  # (before the upgrade there are no devices)
        return [st.members[mid] for mid in devices_of(st, person_id)] if st is not None else []

    def same_person(self, a: str, b: str) -> bool:
        """Whether two current members speak as one person (a device and its person,
        or two devices of one person)."""
        return a == b or (self.is_member(a) and self.is_member(b)
                          and self.person_of(a) == self.person_of(b))  # fmt: skip

    def __len__(self) -> int:
        """The people in the channel (a person's devices count once, with it)."""
        return sum(1 for m in self.members.values() if not m.person)

    # -- the chain's heads and digest -----------------------------------------

    @property
    def heads(self) -> list[bytes]:
        """The chain's heads, sorted (what a new event names as its parents)."""
        return sorted(self.chain.heads)

    def state_hash(self) -> bytes:
        """A digest of the resolved state: the roster, the epochs, the invites used,
        the cuts (what every honest member must agree on)."""
        if self._hash_cache is None:  # made again after every event taken
            self._hash_cache = state_hash(self.chain)
        return self._hash_cache

    def state_hash_at(self, heads: list[bytes]) -> bytes:
        """The state hash of the events ``heads`` name (all held) and their ancestors."""
        return state_hash(self.chain, self.chain.resolve_subset(self.chain.closure(heads)))

    def records(self) -> list[tuple[bytes, Position]]:
        """Every chained event and part as stored and handed on, parts first, then the
        events parents before children, then those still held: ``(content, position)``."""
        out: list[tuple[bytes, Position]] = []
        for h, ev in self.part_events.items():
            out.append((ev.content, (0, self._mid_of.get(h, ""))))
        for ev in self.chain.events_in_order():
            out.append((ev.content, self.chain.nodes[ev.hash].position))
        for ev, pos in self.chain.pending.values():
            out.append((ev.content, pos))
        return out


def state_hash(chain: Chain, st: State | None = None) -> bytes:
    """``sha256`` over a canonical form of a resolved state (``chain``'s own by default;
    see :meth:`Roster.state_hash`)."""
    st = chain.state if st is None else st
    h = hashlib.sha256(b"sdschat-members-state-v1\0")
    h.update(st.root or b"")
    for mid in sorted(st.members):
        m = st.members[mid]
        role = b"a" if m.role == ROLE_ADMIN else b"m" if m.role == ROLE_MEMBER else b"?"
        name = m.name.encode()
        h.update(mid.encode() + role + m.info.share_key + len(name).to_bytes(2, "big") + name)
        if m.person:  # (nothing added for a person: states without devices hash as before)
            h.update(b"device-of" + m.person.encode())
    h.update(b"epochs")
    for e in st.epochs:
        h.update(e)
    h.update(b"invites")
    for i in sorted(st.invites_used):
        h.update(len(i).to_bytes(2, "big") + i)
    h.update(b"cuts")
    for removal, _target, admin_only in st.revocations:
        if admin_only:
            continue
        ev = chain.nodes[removal].ev
        cut = ev.msg.remove.cut if ev.body == "remove" else ev.msg.leave.cut
        h.update(removal + bytes(cut.digest) + cut.count.to_bytes(4, "big"))
    return h.digest()
