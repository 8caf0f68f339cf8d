"""The member list of a members channel: the rules, and the same list at every replica."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.public import PrivateKey

from app.members import members_pb2 as pb
from app.members.events import (
    CONTROL_MAGIC,
    MemberInfo,
    decode_control,
    encode_add,
    encode_create,
    encode_key_share,
    encode_remove,
    encode_set_role,
    encode_share_key,
)
from app.members.roster import Roster
from net.identity import Identity

NONCE = bytes(range(32))


def person(name: str) -> MemberInfo:
    ident = Identity.generate()
    share = bytes(PrivateKey.generate().public_key)
    return MemberInfo(identity_key=ident.public_key, share_key=share, name=name)


ALICE, BOB, CAROL, DAVE = (person(n) for n in ("alice", "bob", "carol", "dave"))
A, B, C, D = (m.member_id for m in (ALICE, BOB, CAROL, DAVE))
CHANNEL_ID, CREATE = encode_create("team", ALICE, NONCE)


class Log:
    """Control messages with positions, as a channel's members would send them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str, bytes]] = []
        self._n = itertools.count()

    def add(self, author: str, lamport: int, content: bytes) -> str:
        mid = f"{lamport:08d}-{next(self._n):04d}-{author[:6]}"
        self.events.append((author, lamport, mid, content))
        return mid

    def roster(self, order: list[int] | None = None) -> Roster:
        r = Roster(CHANNEL_ID)
        for i in order if order is not None else range(len(self.events)):
            r.add_event(*self.events[i])
        return r


def founded() -> Log:
    log = Log()
    log.add(A, 10, CREATE)
    log.add(A, 20, encode_add(BOB))
    return log


def test_the_creator_is_the_first_admin_and_adds_members() -> None:
    r = founded().roster()
    assert r.created and r.channel == "team"
    assert r.is_admin(A) and r.is_member(B) and not r.is_admin(B)
    assert [(mid, name, role) for mid, name, role in r.listing()] == [
        (A, "alice", "admin"), (B, "bob", "member")]  # fmt: skip
    assert not r.rejections


def test_events_from_non_admins_and_non_members_are_rejected_with_a_reason() -> None:
    log = founded()
    by_bob = log.add(B, 30, encode_add(CAROL))
    by_carol = log.add(C, 31, encode_remove(A))
    about_nobody = log.add(A, 32, encode_remove(D))
    r = log.roster()
    assert r.outcome(by_bob).reason == "not_admin"  # type: ignore[union-attr]
    assert r.outcome(by_carol).reason == "not_a_member"  # type: ignore[union-attr]
    assert r.outcome(about_nobody).reason == "no_such_member"  # type: ignore[union-attr]
    assert set(r.members) == {A, B}
    assert r.rejections == {"not_admin": 1, "not_a_member": 1, "no_such_member": 1}


def test_events_before_the_create_and_a_second_create_are_rejected() -> None:
    log = Log()
    early = log.add(A, 5, encode_add(BOB))
    log.add(A, 10, CREATE)
    second = log.add(B, 11, encode_create("team", BOB, NONCE)[1])
    r = log.roster()
    assert r.outcome(early).reason == "no_channel"  # type: ignore[union-attr]
    assert r.outcome(second).reason == "duplicate_create"  # type: ignore[union-attr]
    assert set(r.members) == {A}


def test_a_create_must_be_made_by_its_creator_and_for_this_channel() -> None:
    log = Log()
    forged = log.add(B, 10, CREATE)  # bob replays alice's create as his own
    other = log.add(A, 11, encode_create("team", ALICE, bytes(32))[1])  # another channel
    # bob makes a create naming alice's channel id with himself as creator
    msg = decode_control(encode_create("team", BOB, NONCE)[1])
    assert isinstance(msg, pb.Control)
    msg.create.channel_id = CHANNEL_ID
    stolen_id = log.add(B, 12, CONTROL_MAGIC + msg.SerializeToString())
    r = log.roster()
    assert r.outcome(forged).reason == "not_self"  # type: ignore[union-attr]
    assert r.outcome(other).reason == "wrong_channel"  # type: ignore[union-attr]
    assert r.outcome(stolen_id).reason == "wrong_channel"  # type: ignore[union-attr]
    assert not r.created


def test_undecodable_control_bytes_are_counted_and_change_nothing() -> None:
    log = founded()
    junk = log.add(A, 30, CONTROL_MAGIC + b"\xff\xff\xff")
    wrong_version = log.add(A, 31, CONTROL_MAGIC + bytes([0x08, 0x07]))
    r = log.roster()
    assert r.outcome(junk).reason == "malformed"  # type: ignore[union-attr]
    assert r.outcome(wrong_version).reason == "unsupported_version"  # type: ignore[union-attr]
    assert set(r.members) == {A, B}


def test_two_admins_removing_each_other_concurrently_the_earlier_wins_everywhere() -> None:
    log = founded()
    log.add(A, 30, encode_set_role(B, "admin"))
    a_removes_b = log.add(A, 40, encode_remove(B))
    b_removes_a = log.add(B, 40, encode_remove(A))  # concurrent: same Lamport time
    results = set()
    for order in itertools.permutations(range(len(log.events))):
        r = log.roster(list(order))
        results.add(tuple(r.listing()))
    assert len(results) == 1
    r = log.roster()
    first, second = sorted([a_removes_b, b_removes_a])
    assert r.outcome(first).applied  # type: ignore[union-attr]
    assert r.outcome(second).reason == "not_a_member"  # type: ignore[union-attr]
    assert len(r) == 1


def test_an_add_racing_a_remove_resolves_by_position() -> None:
    log = founded()
    log.add(A, 30, encode_set_role(B, "admin"))
    log.add(B, 50, encode_add(CAROL))
    log.add(A, 49, encode_remove(B))  # the removal sorts first: bob's add comes too late
    r = log.roster([0, 1, 2, 3, 4])
    assert set(r.members) == {A}
    assert r.rejections == {"not_a_member": 1}


def test_an_invite_is_redeemed_once() -> None:
    log = founded()
    log.add(A, 30, encode_add(CAROL, invite_id=b"i" * 16))
    again = log.add(A, 31, encode_add(DAVE, invite_id=b"i" * 16))
    r = log.roster()
    assert r.is_member(C) and not r.is_member(D)
    assert r.outcome(again).reason == "invite_used"  # type: ignore[union-attr]
    assert r.invite_used(b"i" * 16)


def test_the_last_admin_cannot_leave_or_be_demoted_but_a_member_can_leave() -> None:
    log = founded()
    leave = log.add(A, 30, encode_remove(A))
    demote = log.add(A, 31, encode_set_role(A, "member"))
    bob_leaves = log.add(B, 32, encode_remove(B))
    r = log.roster()
    assert r.outcome(leave).reason == "last_admin"  # type: ignore[union-attr]
    assert r.outcome(demote).reason == "last_admin"  # type: ignore[union-attr]
    assert r.outcome(bob_leaves).applied  # type: ignore[union-attr]
    assert set(r.members) == {A}


def test_membership_intervals_answer_whether_a_sender_was_a_member_when_it_sent() -> None:
    log = founded()
    removal = log.add(A, 40, encode_remove(B))
    log.add(A, 60, encode_add(BOB))
    r = log.roster()
    assert not r.was_member_at(B, (15, "x"))  # before the add
    assert r.was_member_at(B, (30, "x"))
    assert not r.was_member_at(B, (40, removal))  # the removal itself
    assert not r.was_member_at(B, (50, "x"))  # between removal and re-add
    assert r.was_member_at(B, (61, "x"))
    assert not r.ever_member(C) and r.ever_member(B)


def test_share_keys_change_only_for_their_owner_and_changes_are_reported() -> None:
    log = founded()
    new_key = bytes(PrivateKey.generate().public_key)
    r = log.roster()
    change = r.add_event(B, 30, "k1", encode_share_key(new_key))
    assert change.share_keys_changed == {B}
    assert r.member(B).info.share_key == new_key  # type: ignore[union-attr]
    change = r.add_event(A, 31, "r1", encode_remove(B))
    assert change.removed == {B} and not change.added
    assert r.add_event(A, 31, "r1", encode_remove(B)) == type(change)()  # duplicate


def test_key_shares_do_not_touch_the_member_list() -> None:
    r = founded().roster()
    before = r.listing()
    assert not r.add_event(A, 30, "ks", encode_key_share("s", 0, {B: b"box"}))
    assert r.listing() == before and r.outcome("ks") is None


def test_a_late_event_that_sorts_before_others_reorders_the_fold() -> None:
    log = founded()
    r = log.roster()
    r.add_event(A, 50, "m50", encode_add(CAROL))
    assert r.is_member(C)
    # a late event sorts before carol's add: the list is replayed from it
    change = r.add_event(A, 45, "m45", encode_set_role(B, "admin"))
    assert not change.removed and r.is_admin(B)
    change = r.add_event(B, 55, "m55", encode_remove(C))
    assert change.removed == {C}


# -- every replica ends with the same list ----------------------------------

PEOPLE = [ALICE, BOB, CAROL, DAVE]


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int, str, bytes]]:
    """A create by alice, then events by anyone about anyone, some concurrent."""
    n = draw(st.integers(min_value=1, max_value=14))
    events = [(A, 1, "0000-create", CREATE)]
    for i in range(n):
        author = draw(st.sampled_from(PEOPLE)).member_id
        target = draw(st.sampled_from(PEOPLE))
        lamport = draw(st.integers(min_value=0, max_value=12))
        kind = draw(st.sampled_from(["add", "add_admin", "remove", "admin", "demote", "key"]))
        if kind == "add":
            content = encode_add(target, invite_id=draw(st.sampled_from([b"", b"inv1", b"inv2"])))
        elif kind == "add_admin":
            content = encode_add(target, role="admin")
        elif kind == "remove":
            content = encode_remove(target.member_id)
        elif kind == "admin":
            content = encode_set_role(target.member_id, "admin")
        elif kind == "demote":
            content = encode_set_role(target.member_id, "member")
        else:
            content = encode_share_key(bytes([i]) * 32)
        events.append((author, lamport, f"{i:04d}-{kind}", content))
    return events


@settings(max_examples=150, deadline=None)
@given(histories(), st.randoms(use_true_random=False), st.integers(min_value=0, max_value=6))
def test_any_delivery_order_with_duplicates_and_late_repairs_gives_the_same_list(
    events: list[tuple[str, int, str, bytes]], rnd: random.Random, duplicates: int
) -> None:
    reference = Roster(CHANNEL_ID)
    for ev in sorted(events, key=lambda e: (e[1], e[2])):
        reference.add_event(*ev)
    for _ in range(3):
        delivery = list(events) + [rnd.choice(events) for _ in range(duplicates)]
        rnd.shuffle(delivery)
        replica = Roster(CHANNEL_ID)
        for ev in delivery:
            replica.add_event(*ev)
        assert replica.listing() == reference.listing()
        assert {m: r.info for m, r in replica.members.items()} == {
            m: r.info for m, r in reference.members.items()}  # fmt: skip
        assert replica.rejections == reference.rejections
        for _, lamport, mid, _ in events:
            assert replica.outcome(mid) == reference.outcome(mid)
            for who in (A, B, C, D):
                assert replica.was_member_at(who, (lamport, mid)) == reference.was_member_at(
                    who, (lamport, mid))  # fmt: skip


def test_an_invalid_member_in_an_event_is_malformed() -> None:
    with pytest.raises(ValueError, match="share key"):
        encode_add(MemberInfo(ALICE.identity_key, b"short", "x"))
