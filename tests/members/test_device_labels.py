"""The device logs public and passphrase channels carry, folded into one state
(app/members/device_labels.py): who a line is shown as, what a hostile log gets, what a
restart keeps."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from app.chat.authors import Authors
from app.members import device_labels
from app.members import devices_pb2 as pb
from app.members.device_labels import MAX_REFUSALS, DeviceBook
from app.members.devices import (
    ENTRY_LABEL,
    MAX_ENTRIES,
    decode_entry,
    encode_device_log,
    make_add,
    make_genesis,
)
from net.identity import Identity
from tests.members.test_devices import Person, h


def _linked() -> tuple[Person, Identity, bytes]:
    """bob, his laptop, and his log of two devices as content."""
    bob = Person()
    laptop = Identity.generate()
    assert bob.feed(bob.add(bob.root, laptop)) == ""
    return bob, laptop, encode_device_log(bob.log.raw_entries())


def test_a_device_the_log_certifies_speaks_for_its_root_and_the_label_is_the_roots() -> None:
    bob, laptop, content = _linked()
    book = DeviceBook()
    assert book.take(laptop.sender_id, content) == ""
    root = bob.root.sender_id
    for dev in (bob.root, laptop):
        sp = book.speaker(dev.sender_id)
        assert sp is not None and sp.person == root and not sp.own
    assert book.speaker(laptop.sender_id).device == "laptop"  # type: ignore[union-attr]
    authors = Authors(book)
    authors.note("room", bob.root.sender_id, "bob")
    authors.note("room", laptop.sender_id, "bob")
    # one person: no look-alike between bob's two keys, one name for both
    assert authors.label("room", laptop.sender_id, "bob") == "bob"
    mallory = Identity.generate()
    authors.note("room", mallory.sender_id, "bob")
    labels = {authors.label("room", k.sender_id, "bob") for k in (bob.root, laptop)}
    assert labels == {f"bob ({root[:8]})"}  # the ROOT's fingerprint on both devices
    assert authors.label("room", mallory.sender_id, "bob") == f"bob ({mallory.sender_id[:8]})"


def test_a_log_claiming_bobs_root_for_the_senders_own_key_is_refused() -> None:
    bob, _laptop, content = _linked()
    mallory = Identity.generate()
    book = DeviceBook()
    # bob's log replayed by mallory: mallory is no device of bob's
    assert book.take(mallory.sender_id, content) == "not_a_device"
    # bob's log with mallory's key added by mallory (her own proof, her signature)
    forged = make_add(bob.root.public_key, mallory, bob.log.heads, mallory, "laptop2")
    evil = encode_device_log([*bob.log.raw_entries(), forged])
    assert book.take(mallory.sender_id, evil) == "not_a_device"
    assert book.speaker(mallory.sender_id) is None
    assert bob.root.public_key not in {log.root for log in book.people.logs.values()}
    # bob's own device then sends it: taken, and the forged add is not in force
    assert book.take(bob.root.sender_id, evil) == ""
    assert book.speaker(mallory.sender_id) is None
    bobs = book.people.log_of(bob.root.sender_id)
    assert bobs is not None and bobs.outcomes[h(forged)] == "not_a_device"
    # mallory's own genesis makes her a person of her own, never bob
    mine = make_genesis(mallory, Identity.generate().public_key, "desktop")
    assert book.take(mallory.sender_id, encode_device_log([mine])) == ""
    sp = book.speaker(mallory.sender_id)
    assert sp is not None and sp.person == mallory.sender_id != bob.root.sender_id


def test_a_key_of_one_person_cannot_speak_for_another_and_mixed_logs_are_refused() -> None:
    bob, laptop, content = _linked()
    book = DeviceBook()
    assert book.take(laptop.sender_id, content) == ""
    # the laptop (say stolen) makes a person of its own and adds itself: refused
    other = Identity.generate()
    g = make_genesis(other, Identity.generate().public_key, "x")
    ge = decode_entry(g)
    assert not isinstance(ge, str)
    add = make_add(other.public_key, other, [ge.hash], laptop, "laptop")
    assert book.take(laptop.sender_id, encode_device_log([g, add])) == "other_person"
    carol = Person()
    mixed = encode_device_log([*bob.log.raw_entries(), carol.genesis])
    assert DeviceBook().take(bob.root.sender_id, mixed) == "mixed_roots"
    assert book.take(bob.root.sender_id, mixed) == "other_person"  # only carol's is new


def test_a_revoked_device_is_no_longer_the_person() -> None:
    bob, laptop, content = _linked()
    book = DeviceBook()
    assert book.take(bob.root.sender_id, content) == ""
    assert bob.feed(bob.revoke(bob.root, laptop)) == ""
    assert book.take(bob.root.sender_id, encode_device_log(bob.log.raw_entries())) == ""
    assert book.speaker(laptop.sender_id) is None
    assert book.author_of(laptop.sender_id) == laptop.sender_id
    # and its own copy of the log (with the revocation) is no longer its to send
    assert book.take(laptop.sender_id, encode_device_log(bob.log.raw_entries())) == ""


def test_hostile_contents_cost_bounded_work_and_are_ignored_after_refusals() -> None:
    book = DeviceBook()
    mallory = Identity.generate()
    assert book.take(mallory.sender_id, b"\xffSD\x01garbage") == "malformed"
    assert book.take(mallory.sender_id, b"\xffSD\x01" + os.urandom(70_000)) == "malformed"
    _bob, _laptop, content = _linked()
    for _ in range(MAX_REFUSALS):
        book.take(mallory.sender_id, content)
    assert book.take(mallory.sender_id, content) == "ignored"
    # a log of more than the cap: the entries past it are not kept
    alice = Person()
    raws = [alice.genesis]
    for i in range(MAX_ENTRIES + 10):
        dev = Identity.generate()
        raw = alice.add(alice.root, dev, f"d{i}")
        alice.feed(raw)
        raws.append(raw)
    assert book.take(alice.root.sender_id, encode_device_log(raws)) == ""
    assert len(book.people.log_of(alice.root.sender_id).entries) <= MAX_ENTRIES  # type: ignore[union-attr]


def test_the_book_survives_a_restart_in_a_private_file(tmp_path: Path) -> None:
    bob, laptop, content = _linked()
    book = DeviceBook()
    assert book.take(laptop.sender_id, content) == ""
    book.mark_sent("room", b"x")
    device_labels.save(tmp_path, book)
    path = tmp_path / device_labels.PEOPLE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = device_labels.load(tmp_path, "", None)
    sp = again.speaker(laptop.sender_id)
    assert sp is not None and sp.person == bob.root.sender_id
    assert again.sent == book.sent
    # a file edited by hand can only lose entries: a forged add does not count
    mallory = Identity.generate()
    forged = make_add(bob.root.public_key, mallory, bob.log.heads, mallory, "evil")
    held = again.people.log_of(bob.root.sender_id)
    entry = decode_entry(forged)
    assert held is not None and not isinstance(entry, str)
    held.take(entry)
    device_labels.save(tmp_path, again)
    third = device_labels.load(tmp_path, "", None)
    assert third.speaker(mallory.sender_id) is None
    # an unreadable file is an empty book (the channels send the logs again)
    path.write_bytes(b"{not json")
    assert device_labels.load(tmp_path, "", None).people.logs == {}


def test_own_devices_are_marked_own_and_our_log_is_due_once_per_channel_and_state() -> None:
    bob, laptop, content = _linked()
    book = DeviceBook(laptop.sender_id)
    book.set_own(bob.log)
    sp = book.speaker(bob.root.sender_id)
    assert sp is not None and sp.own and sp.device == "desktop"
    due = book.due("room")
    assert due == content
    book.mark_sent("room", due)
    assert book.due("room") is None and book.due("other") == content
    phone = Identity.generate()
    bob.feed(bob.add(laptop, phone, "phone"))
    book.set_own(bob.log)
    assert book.due("room") is not None  # the log changed: sent again
    assert DeviceBook().own_content() is None  # a person of one device sends nothing


def test_a_genesis_of_bobs_root_not_signed_by_bob_is_refused() -> None:
    bob = Person()
    mallory = Identity.generate()
    book = DeviceBook()
    genesis = pb.Genesis(recovery=Identity.generate().public_key, device_name="desktop")
    for signer in (mallory.public_key, bob.root.public_key):  # her key named, or bob's
        body = pb.Entry(root=bob.root.public_key, signer=signer, genesis=genesis)
        raw = pb.SignedEntry(body=body.SerializeToString(), signature=mallory.sign(
            ENTRY_LABEL + body.SerializeToString())).SerializeToString()  # fmt: skip
        why = book.take(mallory.sender_id, encode_device_log([raw]))
        assert why in ("malformed", "bad_signature")
    assert book.speaker(mallory.sender_id) is None and not book.people.logs
