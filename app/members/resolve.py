"""The membership chain of a members channel: a DAG of signed events, resolved to one state.

Every chained event (:mod:`app.members.chain`) names the heads its author knew. The
events a member holds form a DAG rooted at the channel's ``create`` (or, for a
channel made before chaining, its ``genesis``). :class:`Chain` resolves the DAG to
one state by a rule that depends on the events only, never on Lamport times, clocks
or arrival order (docs/members.md, "The resolution rule"):

1. **Order.** The events are placed in one topological order: of the events whose
   parents are all placed, the next is the one of lowest ``(rank, hash)``, where
   ``rank`` is its author's standing in the event's own auth state (0 the creator,
   1 an admin, 2 a member, 3 anyone else).
2. **Auth state.** An event is valid only if its author held the role it needs in
   the state its parents define (the same resolution applied to its ancestors):
   what it knew when it signed.
3. **Fold.** The events are applied in that order, each checked against the state
   built so far (the table in :func:`check`).
4. **Revocations cut.** An applied removal (or leave) of member B beats every event
   of B that is concurrent with it (neither its ancestor nor its descendant): those
   events are refused (``outside_cut``). A demotion of B does the same to B's
   concurrent events that need an admin. Revocations are taken one at a time in the
   order of step 1, and the fold is run again after each, so that a revocation that
   loses its author's power to an earlier one cuts nothing (two admins removing each
   other: the first in the order wins, the other is cut).

An event whose parents are not all known yet is held (:attr:`Chain.pending`) until
they come. Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from app.members import members_pb2 as pb
from app.members.chain import ROOT_BODIES, ChainEvent
from app.members.devices import POP_LABEL
from app.members.events import (
    ROLE_ADMIN,
    ROLE_MEMBER,
    MemberInfo,
    channel_id_for,
    member_info,
    role_name,
)
from net.identity import sender_id_for, verify_signature

__all__ = [
    "ADMIN_BODIES",
    "DEVICES_PER_PERSON",
    "HELD_EVENTS",
    "HELD_PER_AUTHOR",
    "Chain",
    "Member",
    "Position",
    "Span",
    "State",
    "devices_of",
]

Position = tuple[int, str]
"""Where an SDS message sits in the channel's order: ``(lamport, message id)``; kept
for key-share bookkeeping only (it orders nothing in membership)."""

ADMIN_BODIES: Final = frozenset({"add", "remove", "set_role", "rekey"})
"""Events that need their author to be an admin."""

DEVICES_PER_PERSON: Final = 8
"""Devices a person may have in one channel at a time (beside its root)."""

HELD_PER_AUTHOR: Final = 64
"""Events held per author while their parents have not come."""
HELD_EVENTS: Final = 1024
"""Events held in all."""


@dataclass(frozen=True, slots=True)
class Member:
    """A current member: who, which role, since which event."""

    member_id: str
    info: MemberInfo
    role: str
    since: Position
    """The SDS position of the event that admitted it (``(0, "")`` when unknown)."""
    admitted_by: bytes = b""
    """The hash of that event (its span)."""
    person: str = ""
    """For a device (``add_device``): the member id of its person (the member whose
    root key certified it); empty for a person."""

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def person_id(self) -> str:
        """The person this member speaks as: itself, or a device's person."""
        return self.person or self.member_id

    @property
    def is_admin(self) -> bool:
        return self.role == ROLE_ADMIN


@dataclass(slots=True)
class Span:
    """One membership of a member: the event that admitted it and the one that ended it."""

    start: bytes
    end: bytes | None = None


@dataclass(slots=True)
class State:
    """The resolved membership state (or the state partway through a fold)."""

    root: bytes | None = None
    channel: str = ""
    creator: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    invites_used: set[bytes] = field(default_factory=set)
    spans: dict[str, list[Span]] = field(default_factory=dict)
    epochs: list[bytes] = field(default_factory=list)
    """Applied events that start an epoch (genesis, remove, leave, rekey), in order."""
    revocations: list[tuple[bytes, str, bool]] = field(default_factory=list)
    """Applied removals, leaves and demotions: (event, target, admin powers only)."""
    former: dict[str, str] = field(default_factory=dict)
    """Members no longer in: id -> the name they had when they left (their lines keep it)."""
    former_devices: dict[str, str] = field(default_factory=dict)
    """Devices no longer in: id -> their person's id (their lines keep its name)."""


@dataclass(slots=True)
class _Node:
    ev: ChainEvent
    auth: str
    rank: int
    roots: frozenset[bytes]
    position: Position
    children: list[bytes] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, bytes]:
        return (self.rank, self.ev.hash)


GenesisMembers = Callable[[ChainEvent], list[pb.RosterEntry] | None]
"""The members a genesis lists (inline and in its parts), ``None`` while parts are missing."""


class Chain:
    """The DAG of one channel's chained membership events and its resolved state.

    Args:
        channel_id: the channel's 32-byte id (roots for another id are refused).
        genesis_members: how to read a genesis's member list (its parts live outside).
    """

    def __init__(self, channel_id: bytes | None, genesis_members: GenesisMembers) -> None:
        self.channel_id = channel_id
        self._genesis_members = genesis_members
        self.nodes: dict[bytes, _Node] = {}
        self.order: list[bytes] = []
        self.heads: set[bytes] = set()
        self.state = State()
        self.outcomes: dict[bytes, str] = {}
        self.by_author: dict[str, list[bytes]] = {}
        self.pending: dict[bytes, tuple[ChainEvent, Position]] = {}
        self._waiting: dict[bytes, set[bytes]] = {}
        self._anc_cache: dict[bytes, frozenset[bytes]] = {}
        self.resolutions = 0
        """Full re-resolutions run (an event that did not build on every head)."""
        self.changed: list[bytes] = []
        """Events whose outcome the last :meth:`add` (or :meth:`release`) changed."""

    # -- feeding ---------------------------------------------------------------

    def knows(self, h: bytes) -> bool:
        return h in self.nodes or h in self.pending

    def add(self, ev: ChainEvent, position: Position) -> list[bytes] | str:
        """Take one event; returns the hashes inserted into the DAG now (it and held
        events it released), or a reason it was not taken (``held_full``)."""
        self.changed = []
        if ev.hash in self.nodes or ev.hash in self.pending:
            return []
        if not self._ready(ev):
            return self._hold(ev, position)
        inserted = [ev.hash]
        self._insert(ev, position)
        inserted.extend(self.release())
        return inserted

    def release(self) -> list[bytes]:
        """Insert held events that became ready (their parents or parts came)."""
        out: list[bytes] = []
        progressed = True
        while progressed:  # bounded: every pass inserts one or stops
            progressed = False
            for h, (ev, pos) in list(self.pending.items()):
                if self._ready(ev):
                    del self.pending[h]
                    self._insert(ev, pos)
                    out.append(h)
                    progressed = True
        for h in out:
            for p in self.nodes[h].ev.parents:
                self._waiting.pop(p, None)
        return out

    def _ready(self, ev: ChainEvent) -> bool:
        if any(p not in self.nodes for p in ev.parents):
            return False
        return ev.body != "genesis" or self._genesis_members(ev) is not None

    def _hold(self, ev: ChainEvent, position: Position) -> list[bytes] | str:
        mine = sum(1 for e, _ in self.pending.values() if e.author_id == ev.author_id)
        if mine >= HELD_PER_AUTHOR or len(self.pending) >= HELD_EVENTS:
            return "held_full"
        self.pending[ev.hash] = (ev, position)
        for p in ev.parents:
            if p not in self.nodes:
                self._waiting.setdefault(p, set()).add(ev.hash)
        return []

    def _insert(self, ev: ChainEvent, position: Position) -> None:
        parents = ev.parents
        fast = (self.heads <= set(parents) and bool(parents)) or (not self.nodes)
        if ev.body in ROOT_BODIES:
            roots = frozenset({ev.hash})
            auth_state = State()
        elif fast:
            roots = frozenset().union(*(self.nodes[p].roots for p in parents))
            auth_state = self.state
        else:
            roots = frozenset().union(*(self.nodes[p].roots for p in parents))
            closure = self._closure(parents)
            auth_state, _ = self._resolve(self._topo(closure), closure)
        auth = check(auth_state, ev, self.channel_id, self._genesis_members)
        rank = _rank(auth_state, ev)
        node = _Node(ev, auth, rank, roots, position)
        self.nodes[ev.hash] = node
        for p in parents:
            self.nodes[p].children.append(ev.hash)
        self.by_author.setdefault(ev.author_id, []).append(ev.hash)
        self.heads -= set(parents)
        self.heads.add(ev.hash)
        if fast and (ev.body not in ROOT_BODIES or not self.order):
            self.order.append(ev.hash)
            reason = auth or self._check_fold(self.state, node)
            self.outcomes[ev.hash] = reason
            self.changed.append(ev.hash)
            if not reason:
                self._apply(self.state, node)
            return
        self._place(node)
        self.resolutions += 1
        everything = set(self.nodes)
        before = self.outcomes
        self.state, self.outcomes = self._resolve(self.order, everything)
        self.changed.extend(h for h, r in self.outcomes.items() if before.get(h) != r)

    def _place(self, node: _Node) -> None:
        """Put a new event where the topological order puts it (the order of the
        others does not change: a new event has no children)."""
        index = {h: i for i, h in enumerate(self.order)}
        after = max((index[p] for p in node.ev.parents), default=-1)
        key = node.key
        at = len(self.order)
        for j in range(after + 1, len(self.order)):
            if key < self.nodes[self.order[j]].key:
                at = j
                break
        self.order.insert(at, node.ev.hash)

    # -- resolution ------------------------------------------------------------

    def closure(self, heads: Iterable[bytes]) -> set[bytes]:
        """``heads`` and all their ancestors (all known)."""
        return self._closure(h for h in heads if h in self.nodes)

    def resolve_subset(self, within: set[bytes]) -> State:
        """The state the events of ``within`` (closed under ancestors) resolve to."""
        return self._resolve(self._topo(within), within)[0]

    def _closure(self, heads: Iterable[bytes]) -> set[bytes]:
        seen: set[bytes] = set()
        stack = list(heads)
        while stack:
            h = stack.pop()
            if h in seen:
                continue
            seen.add(h)
            stack.extend(self.nodes[h].ev.parents)
        return seen

    def _ancestors(self, h: bytes) -> frozenset[bytes]:
        cached = self._anc_cache.get(h)
        if cached is None:
            cached = frozenset(self._closure(self.nodes[h].ev.parents))
            self._anc_cache[h] = cached
        return cached

    def _descendants(self, h: bytes, within: set[bytes]) -> set[bytes]:
        seen: set[bytes] = set()
        stack = list(self.nodes[h].children)
        while stack:
            c = stack.pop()
            if c in seen or c not in within:
                continue
            seen.add(c)
            stack.extend(self.nodes[c].children)
        return seen

    def _topo(self, within: set[bytes]) -> list[bytes]:
        """The topological order (lowest ``(rank, hash)`` first among the ready) of a
        set closed under ancestors."""
        missing = {h: sum(1 for p in self.nodes[h].ev.parents if p in within) for h in within}
        ready = [(self.nodes[h].key, h) for h, n in missing.items() if n == 0]
        heapq.heapify(ready)
        out: list[bytes] = []
        while ready:
            _, h = heapq.heappop(ready)
            out.append(h)
            for c in self.nodes[h].children:
                if c in missing:
                    missing[c] -= 1
                    if missing[c] == 0:
                        heapq.heappush(ready, (self.nodes[c].key, c))
        return out

    def _resolve(self, order: list[bytes], within: set[bytes]) -> tuple[State, dict[bytes, str]]:
        cut: set[bytes] = set()
        while True:  # bounded: every pass cuts at least one more event, or returns
            st, outcomes = self._fold(order, cut)
            for revocation, target, admin_only in st.revocations:
                concurrent = self._concurrent(target, revocation, within) - cut
                if admin_only:
                    concurrent = {h for h in concurrent
                                  if self.nodes[h].ev.body in ADMIN_BODIES}  # fmt: skip
                if concurrent:
                    cut |= concurrent
                    break
            else:
                return st, outcomes

    def _concurrent(self, target: str, revocation: bytes, within: set[bytes]) -> set[bytes]:
        """The events of ``target`` neither before nor after ``revocation``."""
        own = [h for h in self.by_author.get(target, ()) if h in within and h != revocation]
        if not own:
            return set()
        before = self._ancestors(revocation)
        candidates = [h for h in own if h not in before]
        if not candidates:
            return set()
        after = self._descendants(revocation, within)
        return {h for h in candidates if h not in after}

    def _fold(self, order: list[bytes], cut: set[bytes]) -> tuple[State, dict[bytes, str]]:
        st = State()
        outcomes: dict[bytes, str] = {}
        for h in order:
            node = self.nodes[h]
            if h in cut:
                outcomes[h] = "outside_cut"
                continue
            reason = node.auth or self._check_fold(st, node)
            outcomes[h] = reason
            if not reason:
                self._apply(st, node)
        return st, outcomes

    def _check_fold(self, st: State, node: _Node) -> str:
        if node.ev.body not in ROOT_BODIES and st.root is not None and st.root not in node.roots:
            return "other_root"
        return check(st, node.ev, self.channel_id, self._genesis_members)

    def _apply(self, st: State, node: _Node) -> None:
        apply(st, node.ev, node.position, self._genesis_members)

    # -- questions -------------------------------------------------------------

    def outcome_reason(self, h: bytes) -> str | None:
        return self.outcomes.get(h)

    def events_in_order(self) -> list[ChainEvent]:
        """Every event in the DAG, parents before children."""
        return [self.nodes[h].ev for h in self.order]


# -- the rules ------------------------------------------------------------------


def _rank(st: State, ev: ChainEvent) -> int:
    if ev.body in ROOT_BODIES:
        return 0
    if st.creator and ev.author_id == st.creator:
        return 0
    m = st.members.get(ev.author_id)
    if m is None:
        return 3
    return 1 if m.is_admin else 2


def _last_admin(st: State, member_id: str) -> bool:
    m = st.members.get(member_id)
    if m is None or not m.is_admin:
        return False
    return sum(1 for x in st.members.values() if x.is_admin) == 1


def _root_check(create: pb.Create, author: str, channel_id: bytes | None) -> str:
    if channel_id is not None and bytes(create.channel_id) != channel_id:
        return "wrong_channel"
    creator = create.creator
    if bytes(create.channel_id) != channel_id_for(bytes(creator.identity_key),
                                                  bytes(create.nonce)):  # fmt: skip
        return "wrong_channel"
    return "" if member_info(creator).member_id == author else "not_self"


def check(st: State, ev: ChainEvent, channel_id: bytes | None,
          genesis_members: GenesisMembers) -> str:  # fmt: skip
    """Why ``ev`` cannot apply to ``st`` ("" when it can).

    ==============  ===============================================================
    ``create``      the first root; its channel id is the hash of its creator's key
                    and nonce; made by that creator (``not_self``)
    ``genesis``     as a create (it embeds the channel's create); lists its author
                    as an admin
    ``add``         author an admin; the member not one already; invite unused
    ``remove``      author an admin; target another current member; not the last admin
    ``leave``       author a member; not the last admin
    ``set_role``    author an admin; target a member; the last admin stays one
    ``rekey``       author an admin
    ``share_key``   author a member
    ``rename``      author a member; no other current person has exactly that name
                    (``name_taken``; names that only look alike are told apart on
                    screen, docs/members.md "Names"); a device renames its person
    ``add_device``  author a member; ``root`` the key of the author's person
                    (``not_own_root``); the device's own signature of
                    ``POP_LABEL || root || device`` (``bad_device_signature``); the
                    device not a member (``already_member``); at most
                    :data:`DEVICES_PER_PERSON` (``too_many_devices``)
    ==============  ===============================================================

    A device (a member with a ``person``) is a member in every other respect: it
    shares keys, leaves, and may be removed by an admin; besides, any current member
    of the same person may remove it (unlink) without being an admin. A device is
    never an admin (``set_role`` of a device: ``is_device``) and is removed with its
    person (:func:`apply`).
    """
    body = ev.body
    m = ev.msg
    if body in ROOT_BODIES:
        if st.root is not None:
            return "second_root"
        create = m.create if body == "create" else m.genesis.create
        why = _root_check(create, ev.author_id, channel_id)
        if why or body == "create":
            return why
        listed = genesis_members(ev) or []
        if not any(member_info(e.member).member_id == ev.author_id
                   and role_name(e.role) == ROLE_ADMIN for e in listed):  # fmt: skip
            return "not_admin"
        return ""
    if st.root is None:
        return "no_channel"
    author = st.members.get(ev.author_id)
    if author is None:
        return "not_a_member"
    if body == "rename":
        name = m.rename.name
        person = author.person_id
        taken = any(x.name == name for mid, x in st.members.items()
                    if mid != person and not x.person)  # fmt: skip
        return "name_taken" if taken else ""
    if body == "share_key":
        return ""
    if body == "leave":
        return "last_admin" if _last_admin(st, ev.author_id) else ""
    if body == "add_device":
        return _device_check(st, ev, author)
    if body == "remove":
        target_m = st.members.get(ev.target)
        if (target_m is not None and target_m.person and ev.target != ev.author_id
                and target_m.person == author.person_id):  # fmt: skip
            return ""  # a device unlinked by its own person
    if not author.is_admin:
        return "not_admin"
    if body == "rekey":
        return ""
    target = ev.target
    if body == "add":
        if target in st.members:
            return "already_member"
        invite = bytes(m.add.invite_id)
        return "invite_used" if invite and invite in st.invites_used else ""
    if body == "remove" and target == ev.author_id:
        return "not_self"  # a member removes itself with a leave
    if target not in st.members:
        return "no_such_member"
    if body == "remove":
        return "last_admin" if _last_admin(st, target) else ""
    if body == "set_role" and st.members[target].person:
        return "is_device"
    if body == "set_role" and role_name(m.set_role.role) != ROLE_ADMIN:
        return "last_admin" if _last_admin(st, target) else ""
    return ""


def _device_check(st: State, ev: ChainEvent, author: Member) -> str:
    d = ev.msg.add_device
    person = st.members.get(author.person_id)
    if person is None or bytes(d.root) != person.info.identity_key:
        return "not_own_root"
    device = bytes(d.device.identity_key)
    if not verify_signature(device, bytes(d.pop), POP_LABEL + bytes(d.root) + device):
        return "bad_device_signature"
    if sender_id_for(device) in st.members:
        return "already_member"
    if len(devices_of(st, person.member_id)) >= DEVICES_PER_PERSON:
        return "too_many_devices"
    return ""


def devices_of(st: State, person_id: str) -> list[str]:
    """The current devices of ``person_id`` (member ids, sorted)."""
    return sorted(mid for mid, x in st.members.items() if x.person == person_id)


def _enter(st: State, member: Member) -> None:
    st.members[member.member_id] = member
    st.former.pop(member.member_id, None)
    st.former_devices.pop(member.member_id, None)
    st.spans.setdefault(member.member_id, []).append(Span(member.admitted_by))


def _leave(st: State, member_id: str, ev: ChainEvent) -> None:
    """``member_id`` leaves (or is removed) with ``ev``, and with it its devices: each
    span ends at ``ev`` and each one's concurrent events are cut by it."""
    gone = st.members.pop(member_id)
    if gone.person:
        st.former_devices[member_id] = gone.person
    else:
        st.former[member_id] = gone.name
    st.spans[member_id][-1].end = ev.hash
    st.epochs.append(ev.hash)
    st.revocations.append((ev.hash, member_id, False))
    for device in devices_of(st, member_id):
        st.former_devices[device] = member_id
        del st.members[device]
        st.spans[device][-1].end = ev.hash
        st.revocations.append((ev.hash, device, False))


def apply(st: State, ev: ChainEvent, position: Position,
          genesis_members: GenesisMembers) -> None:  # fmt: skip
    """Apply a checked event to ``st``."""
    body = ev.body
    m = ev.msg
    if body == "create":
        st.root = ev.hash
        st.channel = m.create.channel
        st.creator = ev.author_id
        _enter(st, Member(ev.author_id, member_info(m.create.creator), ROLE_ADMIN, position,
                          ev.hash))  # fmt: skip
    elif body == "genesis":
        st.root = ev.hash
        st.channel = m.genesis.create.channel
        st.creator = ev.author_id
        st.invites_used.update(bytes(i) for i in m.genesis.invites_used)
        for entry in genesis_members(ev) or []:
            info = member_info(entry.member)
            _enter(st, Member(info.member_id, info, role_name(entry.role), position, ev.hash))
        st.epochs.append(ev.hash)
    elif body == "add":
        if m.add.invite_id:
            st.invites_used.add(bytes(m.add.invite_id))
        info = member_info(m.add.member)
        _enter(st, Member(info.member_id, info, role_name(m.add.role), position, ev.hash))
    elif body == "remove":
        _leave(st, ev.target, ev)
    elif body == "leave":
        _leave(st, ev.author_id, ev)
    elif body == "rekey":
        st.epochs.append(ev.hash)
    elif body == "set_role":
        old = st.members[ev.target]
        new_role = role_name(m.set_role.role)
        st.members[ev.target] = Member(old.member_id, old.info, new_role, old.since,
                                       old.admitted_by, old.person)  # fmt: skip
        if old.is_admin and new_role == ROLE_MEMBER:
            st.revocations.append((ev.hash, ev.target, True))
    elif body == "share_key":
        old = st.members[ev.author_id]
        info = MemberInfo(old.info.identity_key, bytes(m.share_key.share_key), old.info.name)
        st.members[ev.author_id] = Member(old.member_id, info, old.role, old.since,
                                          old.admitted_by, old.person)  # fmt: skip
    elif body == "rename":
        person = st.members[ev.author_id].person_id
        old = st.members[person]
        info = MemberInfo(old.info.identity_key, old.info.share_key, m.rename.name)
        st.members[person] = Member(old.member_id, info, old.role, old.since, old.admitted_by)
    elif body == "add_device":
        info = member_info(m.add_device.device)
        person = st.members[ev.author_id].person_id
        _enter(st, Member(info.member_id, info, ROLE_MEMBER, position, ev.hash, person))
