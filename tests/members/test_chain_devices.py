"""A person's devices in the membership chain (issue 40 §1 in members channels): a current
member certifies another key as its device (``add_device``); the device is a member that
speaks as the person, leaves with it and can be unlinked by the person.

Events are made as an attacker would make them: every author signs whatever parents it
likes (an old head set is a back-dated event), proofs of possession are forged, replayed
or made for another root, and a removed person's devices keep their keys.
"""

from __future__ import annotations

import itertools

from app.members import members_pb2 as pb
from app.members.cut import make_cut
from app.members.devices import proof_of_possession
from app.members.resolve import DEVICES_PER_PERSON
from app.members.roster import Roster
from tests.members.test_chain import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    EVE,
    Who,
    founded,
    leave,
    reason,
    remove,
    rename,
    set_role,
    sign,
    take,
)

LAPTOP, PHONE, TABLET = Who("laptop"), Who("phone"), Who("tablet")


def add_device(by: Who, parents: list[bytes], device: Who, root: Who,
               pop: bytes | None = None) -> bytes:  # fmt: skip
    body = pb.AddDevice(device=device.member(), root=root.identity.public_key,
                        pop=proof_of_possession(device.identity, root.identity.public_key)
                        if pop is None else pop)  # fmt: skip
    return sign(by, parents, pb.Chained(add_device=body))


def remove_with_cut(by: Who, parents: list[bytes], who: Who, held: list[str]) -> bytes:
    cut, parts = make_cut(held)
    assert not parts
    return sign(by, parents, pb.Chained(remove=pb.Remove(member_id=who.id, cut=cut)))


def with_laptop() -> tuple[Roster, str]:
    """alice's channel (bob admin, carol and dave members) where carol linked her laptop."""
    r, _ = founded()
    mid = take(r, CAROL, add_device(CAROL, r.heads, LAPTOP, CAROL))
    return r, mid


def test_a_device_speaks_as_its_person_and_is_counted_once() -> None:
    r, mid = with_laptop()
    assert reason(r, mid) == ""
    assert r.is_member(LAPTOP.id) and not r.is_admin(LAPTOP.id)
    assert r.name_of(LAPTOP.id) == "carol" and r.label_of(LAPTOP.id) == "carol"
    assert r.person_of(LAPTOP.id) == CAROL.id and r.same_person(LAPTOP.id, CAROL.id)
    assert not r.same_person(LAPTOP.id, DAVE.id)
    assert [m.member_id for m in r.devices_of(CAROL.id)] == [LAPTOP.id]
    assert len(r) == 4 and [m for m, _, _ in r.listing()].count(CAROL.id) == 1
    assert LAPTOP.id not in {m for m, _, _ in r.listing()}
    # the device's name ("laptop") is no member's name: nobody looks like "laptop" now
    assert r.confusable_with("laptop") == []
    # its lines are judged as a member's
    assert r.judge(LAPTOP.id, "ab" * 32, r.span_of(LAPTOP.id)) == ("", False)


def test_a_key_cannot_be_claimed_as_someones_device() -> None:
    """The device's own signature binds it to the person's root: dave cannot certify a
    key he does not hold (nor one whose holder agreed to be another person's device),
    nor a device for another person's root; a stranger certifies nothing."""
    r, _ = founded()
    forged = add_device(DAVE, r.heads, LAPTOP, DAVE,
                        pop=DAVE.identity.sign(b"sdschat-device-pop-v1\0"
                                               + DAVE.identity.public_key
                                               + LAPTOP.identity.public_key))  # fmt: skip
    assert reason(r, take(r, DAVE, forged)) == "bad_device_signature"
    # laptop agreed to be carol's device; dave replays that proof for his own root
    carols = proof_of_possession(LAPTOP.identity, CAROL.identity.public_key)
    replayed = add_device(DAVE, r.heads, LAPTOP, DAVE, pop=carols)
    assert reason(r, take(r, DAVE, replayed)) == "bad_device_signature"
    # dave certifies a device for carol's root (carol's proof and all)
    assert reason(r, take(r, DAVE, add_device(DAVE, r.heads, LAPTOP, CAROL))) == "not_own_root"
    # a stranger, and an existing member as a device
    assert reason(r, take(r, EVE, add_device(EVE, r.heads, LAPTOP, EVE))) == "not_a_member"
    assert reason(r, take(r, DAVE, add_device(DAVE, r.heads, CAROL, DAVE))) == "already_member"
    assert not r.is_member(LAPTOP.id) and not r.is_member(EVE.id)
    assert r.rejections["bad_device_signature"] == 2


def test_a_device_adds_a_sibling_for_the_same_root_only() -> None:
    r, _ = with_laptop()
    assert reason(r, take(r, LAPTOP, add_device(LAPTOP, r.heads, PHONE, LAPTOP))) == (
        "not_own_root")  # a device is not a root
    assert reason(r, take(r, LAPTOP, add_device(LAPTOP, r.heads, PHONE, CAROL))) == ""
    assert r.person_of(PHONE.id) == CAROL.id and r.name_of(PHONE.id) == "carol"


def test_a_device_is_never_an_admin_and_renames_its_person() -> None:
    r, _ = with_laptop()
    promote = take(r, ALICE, set_role(ALICE, r.heads, LAPTOP, pb.ROLE_ADMIN))
    assert reason(r, promote) == "is_device" and not r.is_admin(LAPTOP.id)
    # an admin's device cannot administer: it is a member
    take(r, BOB, add_device(BOB, r.heads, TABLET, BOB))
    kick = take(r, TABLET, remove(TABLET, r.heads, DAVE))
    assert reason(r, kick) == "not_admin" and r.is_member(DAVE.id)
    # /nick on the laptop renames carol, checked against the other people's names
    assert reason(r, take(r, LAPTOP, rename(LAPTOP, r.heads, "dave"))) == "name_taken"
    assert reason(r, take(r, LAPTOP, rename(LAPTOP, r.heads, "caz"))) == ""
    assert r.name_of(CAROL.id) == "caz" and r.name_of(LAPTOP.id) == "caz"
    # a person may take its device's name: the device's name is nobody's
    assert reason(r, take(r, DAVE, rename(DAVE, r.heads, "laptop"))) == ""


def test_at_most_devices_per_person() -> None:
    r, _ = founded()
    extra = [Who(f"d{i}") for i in range(DEVICES_PER_PERSON + 1)]
    outcomes = [reason(r, take(r, DAVE, add_device(DAVE, r.heads, d, DAVE))) for d in extra]
    assert outcomes == [""] * DEVICES_PER_PERSON + ["too_many_devices"]
    assert len(r.devices_of(DAVE.id)) == DEVICES_PER_PERSON and len(r) == 4


def test_a_removed_persons_devices_go_with_it_and_back_dating_passes_nothing() -> None:
    """alice removes carol; carol's laptop keeps its key and signs on: a line or event
    dated before the removal (old parents) is cut, one after it is a stranger's; the
    laptop's lines the removal's cut names stay accepted."""
    r, _ = with_laptop()
    before = r.heads
    kept, late = "aa" * 32, "bb" * 32
    span = r.span_of(LAPTOP.id)
    take(r, ALICE, remove_with_cut(ALICE, r.heads, CAROL, held=[kept]))
    assert not r.is_member(CAROL.id) and not r.is_member(LAPTOP.id)
    assert r.name_of(LAPTOP.id) == "carol" and r.person_of(LAPTOP.id) == CAROL.id
    assert len(r) == 3
    assert r.judge(LAPTOP.id, kept, span) == ("", False)
    assert r.judge(LAPTOP.id, late, span) == ("outside_cut", False)
    # back-dated events of the laptop: a new device and a rename, on the old heads
    sneak = take(r, LAPTOP, add_device(LAPTOP, before, PHONE, CAROL))
    assert reason(r, sneak) == "outside_cut" and not r.is_member(PHONE.id)
    assert reason(r, take(r, LAPTOP, rename(LAPTOP, before, "alice2"))) == "outside_cut"
    # and on the current heads it is nobody
    assert reason(r, take(r, LAPTOP, add_device(LAPTOP, r.heads, PHONE, CAROL))) == (
        "not_a_member")  # fmt: skip


def test_a_device_added_concurrently_with_its_persons_removal_is_cut() -> None:
    r, _ = founded()
    before = r.heads
    take(r, ALICE, remove(ALICE, r.heads, CAROL))
    late = take(r, CAROL, add_device(CAROL, before, LAPTOP, CAROL))
    assert reason(r, late) == "outside_cut" and not r.is_member(LAPTOP.id)


def test_a_person_unlinks_its_device_without_being_an_admin() -> None:
    r, _ = with_laptop()
    take(r, CAROL, add_device(CAROL, r.heads, PHONE, CAROL))
    # another member (not an admin) cannot unlink carol's devices; nor can they remove carol
    assert reason(r, take(r, DAVE, remove(DAVE, r.heads, PHONE))) == "not_admin"
    assert reason(r, take(r, LAPTOP, remove(LAPTOP, r.heads, CAROL))) == "not_admin"
    # a sibling device and the person can
    assert reason(r, take(r, LAPTOP, remove(LAPTOP, r.heads, PHONE))) == ""
    assert not r.is_member(PHONE.id) and r.is_member(CAROL.id) and r.is_member(LAPTOP.id)
    before = r.heads
    assert reason(r, take(r, CAROL, remove(CAROL, r.heads, LAPTOP))) == ""
    assert r.devices_of(CAROL.id) == [] and r.is_member(CAROL.id)
    assert r.name_of(LAPTOP.id) == "carol"  # its earlier lines keep carol's name
    # the unlinked laptop back-dates a rename of carol: cut
    assert reason(r, take(r, LAPTOP, rename(LAPTOP, before, "mallory"))) == "outside_cut"
    assert r.name_of(CAROL.id) == "carol"


def test_a_device_leaves_alone_its_person_takes_its_devices_along() -> None:
    r, _ = with_laptop()
    take(r, CAROL, add_device(CAROL, r.heads, PHONE, CAROL))
    take(r, PHONE, leave(PHONE, r.heads))
    assert r.is_member(CAROL.id) and r.is_member(LAPTOP.id) and not r.is_member(PHONE.id)
    take(r, CAROL, leave(CAROL, r.heads))
    assert not r.is_member(CAROL.id) and not r.is_member(LAPTOP.id)


def test_one_state_in_every_arrival_order() -> None:
    """carol links a laptop, the laptop links a phone and unlinks nothing, alice removes
    carol concurrently with the phone's link, bob renames: every order of arrival gives
    the same members, devices and state hash."""
    r, base = founded()
    events = [(CAROL, add_device(CAROL, base, LAPTOP, CAROL))]
    after_laptop = Roster(r.channel_id)
    for content, who in zip(r_records(r), itertools.repeat(ALICE)):
        take(after_laptop, who, content)
    take(after_laptop, CAROL, events[0][1])
    events.append((LAPTOP, add_device(LAPTOP, after_laptop.heads, PHONE, CAROL)))
    events.append((ALICE, remove(ALICE, after_laptop.heads, CAROL)))
    events.append((BOB, rename(BOB, base, "robert")))
    events.append((DAVE, add_device(DAVE, base, TABLET, DAVE)))
    seen: set[tuple[bytes, tuple[str, ...]]] = set()
    for order in itertools.permutations(events):
        x = Roster(r.channel_id)
        for content in r_records(r):
            take(x, ALICE, content)
        for who, content in order:
            take(x, who, content)
        seen.add((x.state_hash(), tuple(sorted(x.members))))
    assert len(seen) == 1
    (_, members), = seen
    assert TABLET.id in members and LAPTOP.id not in members and PHONE.id not in members


def r_records(r: Roster) -> list[bytes]:
    """The contents of ``r``'s events, parents first (founded(): all alice's)."""
    return [ev.content for ev in r.chain.events_in_order()]
