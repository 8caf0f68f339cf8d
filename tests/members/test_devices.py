"""A person's device log (app/members/devices.py), tested as an attacker would: every
entry a device signs (its parents, the device it names) is the attacker's choice, a
revoked device keeps its keys, and a relay delivers in any order, again and again."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.members import devices_pb2 as pb
from app.members.devices import (
    ENTRY_LABEL,
    People,
    PersonLog,
    RecoveryError,
    decode_device_log,
    decode_entry,
    encode_device_log,
    make_add,
    make_genesis,
    make_revoke,
    new_recovery,
    recovery_from_words,
)
from net.identity import Identity


class Person:
    """bob: a root (his first device), a recovery key, devices, and his log."""

    def __init__(self) -> None:
        self.root = Identity.generate()
        self.recovery, self.words = new_recovery()
        self.genesis = make_genesis(self.root, self.recovery.public_key, "desktop")
        self.log = PersonLog(self.root.public_key)
        assert self.feed(self.genesis) == ""

    def feed(self, raw: bytes) -> str:
        e = decode_entry(raw)
        assert not isinstance(e, str), e
        why = self.log.take(e)
        return why or self.log.outcomes.get(e.hash, "")

    def add(self, signer: Identity, device: Identity, name: str = "laptop",
            parents: list[bytes] | None = None) -> bytes:  # fmt: skip
        return make_add(self.root.public_key, signer, self.log.heads if parents is None
                        else parents, device, name)  # fmt: skip

    def revoke(self, signer: Identity, device: Identity,
               parents: list[bytes] | None = None) -> bytes:  # fmt: skip
        return make_revoke(self.root.public_key, signer, self.log.heads if parents is None
                           else parents, device.public_key)  # fmt: skip

    def ids(self) -> set[str]:
        return {d.device_id for d in self.log.devices()}


def h(raw: bytes) -> bytes:
    e = decode_entry(raw)
    assert not isinstance(e, str)
    return e.hash


def test_the_root_is_the_first_device_and_certifies_a_device_that_certifies_another() -> None:
    bob = Person()
    laptop, phone = Identity.generate(), Identity.generate()
    assert bob.ids() == {bob.root.sender_id}
    assert bob.feed(bob.add(bob.root, laptop)) == ""
    assert bob.feed(bob.add(laptop, phone, "phone")) == ""  # a link from the laptop
    assert bob.ids() == {bob.root.sender_id, laptop.sender_id, phone.sender_id}
    assert [d.name for d in bob.log.devices()] == ["desktop", "laptop", "phone"]
    assert bob.log.recovery == bob.recovery.public_key


def test_a_device_the_root_did_not_certify_is_never_the_persons() -> None:
    bob = Person()
    mallory, puppet = Identity.generate(), Identity.generate()
    assert bob.feed(bob.add(mallory, puppet)) == "not_a_device"
    # a device that never signed its own add (someone else's key named as bob's)
    victim = Identity.generate()
    raw = bob.add(bob.root, victim)
    signed = pb.SignedEntry.FromString(raw)
    signed.device_signature = Identity.generate().sign(b"x")
    assert decode_entry(signed.SerializeToString()) == "bad_device_signature"
    # a signature over other bytes, a body changed after signing
    msg = pb.Entry.FromString(signed.body)
    msg.add.name = "evil"
    forged = pb.SignedEntry(body=msg.SerializeToString(), signature=signed.signature,
                            device_signature=signed.device_signature)  # fmt: skip
    assert decode_entry(forged.SerializeToString()) == "bad_signature"
    assert decode_entry(b"\x00garbage") == "malformed"
    assert bob.ids() == {bob.root.sender_id}
    # a genesis for bob's root signed by someone else: not bob's root
    fake = pb.Entry(root=bob.root.public_key, signer=mallory.public_key,
                    genesis=pb.Genesis(recovery=mallory.public_key, device_name="x"))
    body = fake.SerializeToString()
    raw = pb.SignedEntry(body=body, signature=mallory.sign(ENTRY_LABEL + body)).SerializeToString()
    assert decode_entry(raw) == "malformed"


def test_a_revoked_device_signs_nothing_that_counts_whatever_it_names_as_parents() -> None:
    bob = Person()
    laptop, puppet = Identity.generate(), Identity.generate()
    bob.feed(bob.add(bob.root, laptop))
    before = bob.log.heads  # what the thief holds in the stolen laptop's data dir
    assert bob.feed(bob.revoke(bob.root, laptop)) == ""
    # it builds on the revocation: its signer is no device in that state
    assert bob.feed(bob.add(laptop, puppet)) == "revoked_signer"
    # it back-dates: names the heads from before the revocation (concurrent): cut
    assert bob.feed(bob.add(laptop, puppet, parents=before)) == "outside_cut"
    assert bob.feed(bob.revoke(laptop, bob.root, parents=before)) == "outside_cut"
    assert bob.ids() == {bob.root.sender_id}
    # and never comes back, whoever adds it again
    assert bob.feed(bob.add(bob.root, laptop)) == "revoked_device"
    assert laptop.sender_id in bob.log.revoked_ids()


def test_two_devices_revoking_each_other_the_first_in_the_order_wins_and_recovery_first() -> None:
    bob = Person()
    laptop, phone = Identity.generate(), Identity.generate()
    bob.feed(bob.add(bob.root, laptop))
    bob.feed(bob.add(bob.root, phone, "phone"))
    heads = bob.log.heads
    a = bob.revoke(laptop, phone, heads)
    b = bob.revoke(phone, laptop, heads)
    bob.feed(a)
    bob.feed(b)
    winner, loser = (a, b) if h(a) < h(b) else (b, a)
    assert bob.log.outcomes[h(winner)] == ""
    assert bob.log.outcomes[h(loser)] == "outside_cut"
    assert len(bob.ids()) == 2  # the root and the winner
    # the recovery key revokes the winner too, concurrently with anything: it ranks first
    rec = bob.revoke(bob.recovery, laptop if h(winner) == h(b) else phone, heads)
    bob.feed(rec)
    assert bob.log.outcomes[h(rec)] == ""


def test_the_recovery_key_links_a_new_device_when_no_device_is_left() -> None:
    bob = Person()
    assert bob.feed(bob.revoke(bob.root, bob.root)) == ""  # the desktop is lost
    assert bob.ids() == set()
    # the root key no longer signs for bob (its device is revoked)
    new = Identity.generate()
    assert bob.feed(bob.add(bob.root, new)) == "revoked_signer"
    words_key = recovery_from_words(bob.words.upper().replace(" ", "  "))
    assert words_key.public_key == bob.recovery.public_key
    assert bob.feed(bob.add(words_key, new, "newphone")) == ""
    assert bob.ids() == {new.sender_id}


def test_recovery_words_that_are_wrong_say_how() -> None:
    _key, words = new_recovery()
    ws = words.split()
    with pytest.raises(RecoveryError, match="24 words"):
        recovery_from_words(" ".join(ws[:23]))
    with pytest.raises(RecoveryError, match="not a recovery word: 'zzzz'"):
        recovery_from_words(" ".join([*ws[:23], "zzzz"]))
    swapped = [ws[1], ws[0], *ws[2:]] if ws[0] != ws[1] else ws[::-1]
    with pytest.raises(RecoveryError, match="do not check out"):
        recovery_from_words(" ".join(swapped))


def test_every_arrival_order_resolves_to_the_same_devices() -> None:
    bob = Person()
    laptop, phone, tablet = (Identity.generate() for _ in range(3))
    entries = [bob.genesis]
    for raw in (bob.add(bob.root, laptop), bob.add(laptop, phone, "phone")):
        bob.feed(raw)
        entries.append(raw)
    heads = bob.log.heads
    concurrent = [bob.revoke(laptop, phone, heads), bob.revoke(phone, laptop, heads),
                  bob.add(phone, tablet, "tablet", heads)]  # fmt: skip
    entries.extend(concurrent)
    outcomes = set()
    for order in itertools.permutations(entries[1:]):
        log = PersonLog(bob.root.public_key)
        for raw in [*order[:2], entries[0], *order[2:]]:  # the genesis late, too
            e = decode_entry(raw)
            assert not isinstance(e, str)
            log.take(e)
        outcomes.add((frozenset(d.device_id for d in log.devices()),
                       tuple(sorted(log.outcomes.items()))))  # fmt: skip
    assert len(outcomes) == 1


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=3, max_value=9))
def test_replicas_holding_the_same_entries_hold_the_same_devices(rnd: random.Random,
                                                                 steps: int) -> None:  # fmt: skip
    """Random signers (devices current, revoked, strangers, the recovery key) sign adds
    and revocations on random old head sets; every order gives one state."""
    bob = Person()
    keys = [bob.root, *(Identity.generate() for _ in range(4))]
    stranger = Identity.generate()
    entries = [bob.genesis]
    seen_heads = [bob.log.heads]
    for _ in range(steps):
        signer = rnd.choice([*keys, stranger, bob.recovery])
        target = rnd.choice([*keys[1:], bob.root])
        parents = rnd.choice(seen_heads)
        raw = (make_add(bob.root.public_key, signer, parents, target, "d") if rnd.random() < 0.6
               else make_revoke(bob.root.public_key, signer, parents, target.public_key))
        bob.feed(raw)
        entries.append(raw)
        seen_heads.append(bob.log.heads)
    want = {d.device_id for d in bob.log.devices()}
    for _ in range(4):
        shuffled = entries[:]
        rnd.shuffle(shuffled)
        people = People()
        for raw in shuffled + shuffled[:3]:  # duplicates change nothing
            people.take(raw)
        log = people.log_of(bob.root.sender_id)
        assert log is not None
        assert {d.device_id for d in log.devices()} == want
        assert log.outcomes == bob.log.outcomes
    assert stranger.sender_id not in want


def test_people_says_who_speaks_for_whom_and_the_log_travels_as_content() -> None:
    bob, carol = Person(), Person()
    laptop = Identity.generate()
    add = bob.add(bob.root, laptop)
    people = People()
    content = encode_device_log([bob.genesis, add])
    raws = decode_device_log(content)
    assert raws is not None
    assert people.take_all(raws) == ["", ""]
    assert people.person_of(laptop.sender_id) == bob.root.sender_id
    assert people.person_of(bob.root.sender_id) == bob.root.sender_id
    assert people.siblings(laptop.sender_id) == {bob.root.sender_id}
    assert people.person_of(carol.root.sender_id) is None
    # carol's root signs an add into bob's log: no device of bob's
    intruder = Identity.generate()
    raw = make_add(bob.root.public_key, carol.root, [h(add)], intruder, "x")
    assert people.take(raw)[0] == "not_a_device"
    assert people.person_of(intruder.sender_id) is None
    assert decode_device_log(b"hello") is None
    revoke = make_revoke(bob.root.public_key, bob.root, [h(add)], laptop.public_key)
    people.take(revoke)
    assert people.person_of(laptop.sender_id) is None


def test_entries_carry_no_clock_lamport_or_epoch_for_an_attacker_to_choose() -> None:
    """The order of a device log is parents and hashes: no field of an entry is a time
    (a back-dated entry can only name old parents, which is the cut)."""
    fields = {f.name for m in (pb.SignedEntry, pb.Entry, pb.Genesis, pb.AddDevice,
                               pb.RevokeDevice) for f in m.DESCRIPTOR.fields}  # fmt: skip
    assert fields == {"body", "signature", "device_signature", "root", "signer", "parents",
                      "genesis", "add", "revoke", "recovery", "device_name", "device",
                      "name", "share_key"}  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=0, max_value=4))
def test_a_revoked_device_signs_nothing_that_counts_whatever_parents_it_picks(
        rnd: random.Random, later: int) -> None:  # fmt: skip
    """bob's laptop is revoked; its thief signs adds and revocations naming any set of
    entries it may know (before, around and after the revocation): none counts, in
    any order of arrival, and the laptop stays revoked."""
    bob = Person()
    laptop, phone, puppet = Identity.generate(), Identity.generate(), Identity.generate()
    entries = [bob.genesis, bob.add(bob.root, laptop)]
    bob.feed(entries[1])
    entries.append(bob.add(laptop, phone, "phone"))
    bob.feed(entries[2])
    revoke = bob.revoke(bob.root, laptop)
    entries.append(revoke)
    bob.feed(revoke)
    for i in range(later):  # honest entries after the revocation
        raw = bob.add(phone, Identity.generate(), f"d{i}")
        bob.feed(raw)
        entries.append(raw)
    hashes = [h(e) for e in entries]
    forged = []
    for _ in range(4):
        parents = rnd.sample(hashes, rnd.randint(1, len(hashes)))
        if rnd.random() < 0.5:
            forged.append(make_add(bob.root.public_key, laptop, parents, puppet, "evil"))
        else:
            victim = rnd.choice([phone, bob.root])
            forged.append(make_revoke(bob.root.public_key, laptop, parents, victim.public_key))
    everything = entries + forged
    rnd.shuffle(everything)
    people = People()
    people.take_all(everything)
    log = people.log_of(bob.root.sender_id)
    assert log is not None
    assert all(log.outcomes[h(f)] != "" for f in forged)
    assert log.outcomes[h(revoke)] == ""
    assert not log.is_device(laptop.public_key) and not log.is_device(puppet.public_key)
    assert log.is_device(phone.public_key) and log.is_device(bob.root.public_key)


def test_a_revoked_device_that_back_dates_a_revocation_of_the_root_never_wins() -> None:
    """The thief of bob's laptop, after the root revoked it, signs a revocation of the
    root naming parents from before the laptop added bob's phone: in the DAG it can
    come before the root's revocation. It is cut whatever the hashes."""
    hit = 0
    for _ in range(40):  # bounded; until both hash orders were seen a few times
        bob = Person()
        laptop, phone = Identity.generate(), Identity.generate()
        a1 = bob.add(bob.root, laptop)
        bob.feed(a1)
        a2 = bob.add(laptop, phone, "phone")
        bob.feed(a2)
        revoke = bob.revoke(bob.root, laptop)
        bob.feed(revoke)
        forged = bob.revoke(laptop, bob.root, parents=[h(a1)])
        hit += h(forged) < h(a2)  # placed before the phone's add, so before the revocation
        assert bob.feed(forged) == "outside_cut"
        assert bob.log.outcomes[h(revoke)] == ""
        assert bob.log.is_device(bob.root.public_key) and not bob.log.is_device(laptop.public_key)
        if hit >= 3:
            break
    assert hit >= 3
