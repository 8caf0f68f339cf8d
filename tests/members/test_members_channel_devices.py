"""A person's device in a members channel, with real envelopes, sealed boxes and Megolm
sessions (the harness of test_members_channel.py): certified by its person it reads and
speaks as that person; it opens nothing sent after its person's removal or its unlink,
whatever it keeps."""

from __future__ import annotations

from app.members.channel import MembersChannel
from app.members.devices import proof_of_possession
from app.members.group_keys import GroupKeys
from net.envelope import WrongKeyOrTampered, open_for_topic
from tests.members.test_members_channel import Person, broadcast, founded_team


def linked(carol: Person, *others: Person) -> Person:
    """carol's new laptop, with what a link hands it (the channel's id, outer keys and
    membership records), certified by carol in the chain; every key share due is
    posted to everyone."""
    mc = carol.mc
    assert mc is not None
    laptop = Person("laptop")
    keys = GroupKeys(mc.channel_id, laptop.id)
    laptop.mc = MembersChannel("team", mc.channel_id, laptop.id, mc.epoch_keys, keys,
                               signer=laptop.identity)  # fmt: skip
    laptop.mc.import_history(mc.membership_records(), 0)
    root = carol.identity.public_key
    content = mc.add_device(laptop.info(), root, proof_of_possession(laptop.identity, root))
    everyone = (carol, laptop, *others)
    broadcast([carol.send(content)], *(p for p in everyone if p is not carol))
    for p in everyone:
        broadcast(p.post_due(), *(q for q in everyone if q is not p))
    return laptop


def opens(p: Person, env: bytes) -> bool:
    assert p.mc is not None
    mc = p.mc
    try:
        open_for_topic(env, lambda t: mc.opening_keys())
    except WrongKeyOrTampered:
        return False
    return True


def test_a_linked_device_reads_and_speaks_as_its_person() -> None:
    alice, bob, carol = founded_team()
    laptop = linked(carol, alice, bob)
    assert alice.mc is not None and laptop.mc is not None
    assert alice.mc.roster.person_of(laptop.id) == carol.id
    assert laptop.mc.roster.is_member(laptop.id)
    hello = alice.send(b"hello")
    broadcast([*alice.outbox, hello], bob, carol, laptop)
    assert laptop.shown == [b"hello"]
    line = laptop.send(b"from carol's laptop")
    broadcast([*laptop.outbox, line], alice, bob, carol)
    # every member shows it, carol's desktop too (a sibling's line, not its own echo)
    assert alice.shown[-1] == bob.shown[-1] == carol.shown[-1] == b"from carol's laptop"
    assert alice.mc.roster.label_of(laptop.id) == "carol"


def test_a_removed_persons_device_opens_nothing_sent_after_the_removal() -> None:
    alice, bob, carol = founded_team()
    laptop = linked(carol, alice, bob)
    assert alice.mc is not None and bob.mc is not None
    removal = [alice.send(c) for c in alice.mc.remove(carol.id)]
    broadcast(removal, bob, carol, laptop)
    assert not bob.mc.roster.is_member(laptop.id)
    after = [alice.send(b"secret"), bob.send(b"secret too")]
    sent = [*alice.outbox, *bob.outbox, *after]
    assert not any(opens(laptop, env) for env in after)
    assert not any(opens(carol, env) for env in sent[-2:])
    assert opens(bob, after[0]) and opens(alice, after[1])
    # what the laptop sends now is refused
    assert bob.receive(laptop.send(b"still here")) in ("outside_cut", "wrong_key_or_tampered",
                                                        "not_a_member")  # fmt: skip


def test_an_unlinked_device_opens_nothing_sent_after_the_unlink() -> None:
    """carol is no admin; she unlinks her laptop herself: a new epoch for everyone else."""
    alice, bob, carol = founded_team()
    laptop = linked(carol, alice, bob)
    assert carol.mc is not None and alice.mc is not None
    assert not carol.mc.roster.is_admin(carol.id)
    unlink = [carol.send(c) for c in carol.mc.remove(laptop.id)]
    broadcast(unlink, alice, bob, laptop)
    assert not alice.mc.roster.is_member(laptop.id) and alice.mc.roster.is_member(carol.id)
    after = alice.send(b"after the unlink")
    assert not opens(laptop, after)
    assert opens(carol, after) and opens(bob, after)
