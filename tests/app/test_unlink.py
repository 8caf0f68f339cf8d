"""``/unlink DEVICE`` (app/commands/unlink.py): which device a name picks, and that the
revocation this device signs takes the device out of the person's log for good."""

from __future__ import annotations

import pytest

from app.commands.unlink import choose_device, revoke_device
from app.members.device_labels import DeviceBook
from app.members.devices import encode_device_log
from net.identity import Identity
from tests.members.test_devices import Person


def _bob() -> tuple[Person, Identity, Identity]:
    bob = Person()
    laptop, phone = Identity.generate(), Identity.generate()
    assert bob.feed(bob.add(bob.root, laptop, "laptop")) == ""
    assert bob.feed(bob.add(bob.root, phone, "phone")) == ""
    return bob, laptop, phone


def test_a_device_is_named_by_its_name_or_the_start_of_its_id() -> None:
    bob, laptop, phone = _bob()
    me = bob.root.sender_id
    assert choose_device(bob.log, me, "laptop").key == laptop.public_key
    assert choose_device(bob.log, me, phone.sender_id[:6]).key == phone.public_key
    assert choose_device(bob.log, me, phone.sender_id[:6].upper()).key == phone.public_key


@pytest.mark.parametrize(("which", "says"), [
    ("", "usage: /unlink DEVICE"),
    ("tablet", "no device of yours is called 'tablet'; your other devices: laptop ("),
    ("abc", "no device of yours is called 'abc'"),  # too short for an id prefix
    ("desktop", "this is the device you are typing on"),
])  # fmt: skip
def test_a_name_that_picks_no_other_device_is_refused_and_changes_nothing(
        which: str, says: str) -> None:  # fmt: skip
    bob, _laptop, _phone = _bob()
    before = bob.log.raw_entries()
    with pytest.raises(ValueError) as err:
        choose_device(bob.log, bob.root.sender_id, which)
    assert says in str(err.value)
    assert bob.log.raw_entries() == before


def test_two_devices_of_one_name_ask_for_the_id() -> None:
    bob = Person()
    a, b = Identity.generate(), Identity.generate()
    assert bob.feed(bob.add(bob.root, a, "laptop")) == ""
    assert bob.feed(bob.add(bob.root, b, "laptop")) == ""
    with pytest.raises(ValueError, match="names 2 devices") as err:
        choose_device(bob.log, bob.root.sender_id, "laptop")
    assert a.sender_id[:8] in str(err.value) and b.sender_id[:8] in str(err.value)


def test_the_revocation_takes_the_device_out_and_an_older_log_does_not_bring_it_back() -> None:
    bob, laptop, phone = _bob()
    old = encode_device_log(bob.log.raw_entries())  # what the laptop holds and may send
    book = DeviceBook()
    assert book.take(bob.root.sender_id, old) == ""
    assert book.speaker(laptop.sender_id) is not None

    revoke_device(bob.log, bob.root, choose_device(bob.log, bob.root.sender_id, "laptop"))
    assert not bob.log.is_device(laptop.public_key) and bob.log.is_device(phone.public_key)
    assert book.take(bob.root.sender_id, encode_device_log(bob.log.raw_entries())) == ""
    assert book.speaker(laptop.sender_id) is None
    assert book.speaker(phone.sender_id) is not None
    # the laptop sends the log as it held it before: the revocation stays
    book.take(laptop.sender_id, old)
    assert book.speaker(laptop.sender_id) is None


def test_a_revoked_device_cannot_unlink_the_others() -> None:
    bob, laptop, phone = _bob()
    revoke_device(bob.log, bob.root, choose_device(bob.log, bob.root.sender_id, "laptop"))
    with pytest.raises(ValueError, match="does not count"):
        revoke_device(bob.log, laptop, choose_device(bob.log, laptop.sender_id, "phone"))
    assert bob.log.is_device(phone.public_key)
