"""A members channel's two key layers with real envelopes, sealed boxes and Megolm sessions.

Each member here is a MembersChannel plus an identity; messages are real SDS
protobufs sealed into real envelopes (net/envelope.py). No SDS core and no
network: what reaches whom is chosen by the test.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import stat
from pathlib import Path

import pytest

from app.members import secrets_file
from app.members.channel import BEFORE_JOINED, MembersChannel, members_topic
from app.members.events import MemberInfo, decode_encrypted, encode_add, is_control
from app.members.group_keys import GroupKeys
from app.node.carrying import Carrier
from net.envelope import EnvelopeError, WrongKeyOrTampered, open_for_topic, seal
from net.identity import Identity
from sds import sds_pb2
from tests.members.megolm_thief import stolen_opens

_ids = itertools.count(1)


class Person:
    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = Identity.generate()
        self.id = self.identity.sender_id
        self.mc: MembersChannel | None = None
        self.lamport = 0
        self.shown: list[bytes] = []  # plaintexts of ordinary messages received
        self.outbox: list[bytes] = []  # key shares sent before a message

    def info(self) -> MemberInfo:
        assert self.mc is not None
        return MemberInfo(self.identity.public_key, self.mc.group_keys.share_key, self.name)

    def send(self, content: bytes, now: int = 0) -> bytes:
        """Seal ``content`` (with any key share due before it); returns its envelope.

        The key shares' envelopes go to ``self.outbox`` (what the node publishes)."""
        assert self.mc is not None
        *due, last = self.mc.outgoing(content, now)
        self.outbox.extend(self._send(c, now) for c in due)
        return self._send(last, now)

    def _send(self, content: bytes, now: int) -> bytes:
        mc = self.mc
        assert mc is not None
        self.lamport += 1
        seed = f"{self.lamport:06d}-{next(_ids):06d}-{self.name}"
        mid = hashlib.sha256(seed.encode()).hexdigest()
        body = content
        msg = sds_pb2.SdsMessage(sender_id=self.id, message_id=mid, channel_id="team",
                                 lamport_timestamp=self.lamport, content=body)  # fmt: skip
        env = seal(msg.SerializeToString(), self.identity, mc.sending_key())
        if is_control(body):
            mc.on_control(self.id, self.lamport, mid, body, env, now)
        else:
            mc.own_plaintext(body, (self.lamport, mid))  # as the node does once it is sent
        return env

    def post_due(self, now: int = 0) -> list[bytes]:
        assert self.mc is not None
        return [self._send(c, now) for c in self.mc.due_controls(now)]

    def receive(self, env: bytes, now: int = 0) -> str:
        """Open and take ``env``; returns what happened ('' when delivered)."""
        mc = self.mc
        assert mc is not None
        try:
            opened = open_for_topic(env, lambda t: mc.opening_keys() if t == mc.topic else None)
        except EnvelopeError as exc:
            return exc.reason
        if opened.sender_id == self.id:
            return "own"  # a node never takes its own envelopes back
        reason = mc.admit(opened.sender_id)
        if reason:
            return reason
        msg = opened.sds_message
        assert msg is not None
        self.lamport = max(self.lamport, msg.lamport_timestamp)
        got = mc.incoming_content(msg.sender_id, msg.lamport_timestamp, msg.message_id,
                                  msg.content)  # fmt: skip
        if got.hold:
            mc.hold(msg.sender_id, mc.session_of(msg.content), env)
            return "held"
        if got.content is None:
            return got.reason
        if is_control(got.content):
            _, released = mc.on_control(msg.sender_id, msg.lamport_timestamp, msg.message_id,
                                        got.content, env, now)  # fmt: skip
            for again in released:
                self.receive(again, now)
            return ""
        if got.content == BEFORE_JOINED:
            return "before_joined"
        self.shown.append(got.content)
        return ""


def broadcast(envs: list[bytes], *people: Person) -> None:
    for env in envs:
        for p in people:
            p.receive(env)


def newcomer(admin: Person, name: str) -> Person:
    """A member-to-be with what an invite gives it: the channel id, the outer keys
    and the control history (folded)."""
    mc = admin.mc
    assert mc is not None
    p = Person(name)
    p.mc = MembersChannel("team", mc.channel_id, p.id, mc.epoch_keys,
                          GroupKeys(mc.channel_id, p.id), signer=p.identity)  # fmt: skip
    p.mc.import_history(mc.membership_records(), 0)
    return p


def founded_team() -> tuple[Person, Person, Person]:
    alice, bob, carol = Person("alice"), Person("bob"), Person("carol")
    mc, create = MembersChannel.create("team", "alice", alice.identity)
    alice.mc = mc
    first = alice.send(create)
    for p in (bob, carol):  # what an invite hands a newcomer: channel id and outer keys
        p.mc = MembersChannel("team", mc.channel_id, p.id, mc.epoch_keys,
                              GroupKeys(mc.channel_id, p.id), signer=p.identity)  # fmt: skip
        p.receive(first)
    adds = [alice.send(encode_add(bob.info())), alice.send(encode_add(carol.info()))]
    broadcast(adds, bob, carol)
    broadcast(alice.post_due() + bob.post_due() + carol.post_due(), alice, bob, carol)
    return alice, bob, carol


def test_members_read_each_other_and_outsiders_are_dropped_at_the_gate() -> None:
    alice, bob, carol = founded_team()
    assert {m for m, _, _ in alice.mc.roster.listing()} == {alice.id, bob.id, carol.id}  # type: ignore[union-attr]
    hello, hi = alice.send(b"hello"), bob.send(b"hi")
    broadcast([hello], bob, carol)
    broadcast([hi], alice, carol)
    assert carol.shown == [b"hello", b"hi"] and bob.shown == [b"hello"] and alice.shown == [b"hi"]
    # someone with the outer key but no membership (a fresh identity of a member)
    sybil = Person("sybil")
    sybil.mc = MembersChannel("team", alice.mc.channel_id, sybil.id, alice.mc.epoch_keys,  # type: ignore[union-attr]
                              GroupKeys(alice.mc.channel_id, sybil.id))  # type: ignore[union-attr]
    assert bob.receive(sybil.send(b"spam")) == "not_a_member"
    assert bob.mc.counters["not_a_member"] == 1  # type: ignore[union-attr]


def carol_removed(tmp_path: Path, author: str) -> tuple[Person, Person, Person, bytes]:
    """A founded team where ``author`` (alice or bob) said "before" to the others, carol's
    data directory was saved to ``tmp_path`` as it was then, and alice removed carol
    (bob and carol took the removal). Returns alice, bob, carol and that line."""
    alice, bob, carol = founded_team()
    sender = alice if author == "alice" else bob
    before = sender.send(b"before")
    broadcast([before], *(p for p in (alice, bob, carol) if p is not sender))
    secrets_file.save(tmp_path, carol.mc)  # type: ignore[arg-type]
    [removal] = [alice.send(c) for c in alice.mc.remove(carol.id)]  # type: ignore[union-attr]
    broadcast([removal], bob, carol)
    return alice, bob, carol, before


def test_a_removed_member_with_its_whole_state_opens_no_envelope_sent_after_removal(
    tmp_path: Path,
) -> None:
    alice, bob, carol, _ = carol_removed(tmp_path, "alice")
    assert not bob.mc.roster.is_member(carol.id)  # type: ignore[union-attr]
    assert bob.mc.sending_key().key == alice.mc.sending_key().key  # type: ignore[union-attr]
    assert bob.mc.sending_key().key not in carol.mc.epoch_keys  # type: ignore[union-attr]
    sent = [alice.send(b"secret 1"), bob.send(b"secret 2"), alice.send(b"secret 3")]
    tap = alice.outbox + bob.outbox + sent  # new Megolm sessions, shared with the rest first
    broadcast(alice.outbox + bob.outbox + sent, alice, bob)
    assert bob.shown[-2:] == [b"secret 1", b"secret 3"] and alice.shown[-1] == b"secret 2"
    # carol's data directory as it was at the removal, and every envelope since
    stolen = secrets_file.load(tmp_path, "team")
    assert stolen is not None
    opened = 0
    for env in tap:
        try:
            open_for_topic(env, lambda t: stolen.opening_keys())
            opened += 1
        except WrongKeyOrTampered:
            pass
    assert opened == 0
    # and what carol sends now is dropped by the members
    carol_env = carol.send(b"let me in")
    assert bob.receive(carol_env) in ("outside_cut", "wrong_key_or_tampered")


def test_a_removed_member_opens_no_carried_copy_of_a_line_sent_after_removal(
    tmp_path: Path,
) -> None:
    """Carried copies (app/node/carrying.py; docs/security.md "Carried envelopes") in a
    members channel: a line's envelope riding on a later one is the author's, under
    the key it was sealed with, inside a carrier under the current key. A member
    removed, with its whole saved state and every envelope captured, opens neither
    the carrier nor the copy of a line sent after its removal; the copy of a line from
    before (which it read as a member then) is all it can open."""
    alice, bob, _carol, before = carol_removed(tmp_path, "bob")
    after = bob.send(b"after")
    broadcast([*bob.outbox, after], alice)
    assert alice.shown[-1] == b"after"
    # alice's next line carries both (what the node's _seal_carrying attaches)
    mc = alice.mc
    assert mc is not None
    stored = {("team", "before"): before, ("team", "after"): after}
    carried = Carrier(64).attach("team", [("before", b""), ("after", b"")], stored,
                                 mc.opening_keys())  # fmt: skip
    assert len(carried) == 2
    alice.lamport += 1
    line = sds_pb2.SdsMessage(sender_id=alice.id, message_id="carrier", channel_id="team",
                              lamport_timestamp=alice.lamport, content=b"x")  # fmt: skip
    carrier = seal(line.SerializeToString(), alice.identity, mc.sending_key(), carried)
    # bob opens the carrier and each copy as its author's
    bob_mc = bob.mc
    assert bob_mc is not None
    opened = open_for_topic(carrier, lambda t: bob_mc.opening_keys())
    copies = [open_for_topic(e, lambda t: bob_mc.opening_keys()) for e in opened.carried]
    assert [c.sender_id for c in copies] == [bob.id, bob.id]
    # carol's data directory as it was at the removal
    stolen = secrets_file.load(tmp_path, "team")
    assert stolen is not None
    with pytest.raises(WrongKeyOrTampered):
        open_for_topic(carrier, lambda t: stolen.opening_keys())
    readable = []
    for env in opened.carried:  # as a relay operator in league with carol would hand them
        try:
            readable.append(open_for_topic(env, lambda t: stolen.opening_keys()).sender_id)
        except WrongKeyOrTampered:
            readable.append(None)
    assert readable == [bob.id, None]


def test_a_message_that_outruns_its_key_share_is_held_then_read() -> None:
    alice, bob, _carol = founded_team()
    alice.mc.group_keys.on_members_removed()  # type: ignore[union-attr]  # a new session
    msg = alice.send(b"early")
    shares = alice.outbox[-1:]  # its key share went first, but arrives after it
    assert bob.receive(msg) == "held" and bob.mc.held == 1  # type: ignore[union-attr]
    broadcast(shares, bob)
    assert bob.shown[-1] == b"early" and bob.mc.held == 0  # type: ignore[union-attr]


def test_a_newcomer_gets_a_marker_not_a_loss_for_messages_from_before_it_was_added() -> None:
    alice, bob, carol = founded_team()
    old = [alice.send(b"old 1"), bob.send(b"old 2")]
    dave = newcomer(alice, "dave")
    add = alice.send(encode_add(dave.info()))
    broadcast([add], bob, carol, dave)
    broadcast(alice.post_due() + bob.post_due(), dave, carol)
    assert [dave.receive(e) for e in old] == ["before_joined", "before_joined"]
    new = alice.send(b"welcome")
    assert dave.receive(new) == "" and dave.shown == [b"welcome"]


def test_the_members_file_restores_keys_list_and_sessions(tmp_path: Path) -> None:
    alice, bob, _ = founded_team()
    secrets_file.save(tmp_path, bob.mc)  # type: ignore[arg-type]
    path = secrets_file.members_file(tmp_path, "team")
    log = secrets_file.records_file(tmp_path, "team")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    # the membership events are kept (create, two adds), not the key shares, and
    # without the envelopes that carried them (a chained event is signed in itself)
    rows = [json.loads(line) for line in log.read_bytes().splitlines()]
    assert len(rows) == 3 and all(r[4] is None for r in rows)
    # appended, never rewritten: a new event adds one line, the state stays as it was
    state_before = path.read_bytes()
    dave = Person("dave")
    dave.mc = MembersChannel("team", alice.mc.channel_id, dave.id, alice.mc.epoch_keys,  # type: ignore[union-attr]
                             GroupKeys(alice.mc.channel_id, dave.id), signer=dave.identity)  # type: ignore[union-attr]
    bob.receive(alice.send(encode_add(dave.info())))
    secrets_file.save(tmp_path, bob.mc, state=False)  # type: ignore[arg-type]
    assert len(log.read_bytes().splitlines()) == 4 and path.read_bytes() == state_before
    # a line torn by a crash is dropped at the next start, and the file cut there
    with log.open("ab") as f:
        f.write(b'["torn", "x"')
    restored = secrets_file.load(tmp_path, "team")
    assert restored is not None
    assert not log.read_bytes().endswith(b'"x"') and len(log.read_bytes().splitlines()) == 4
    assert restored.roster.listing() == bob.mc.roster.listing()  # type: ignore[union-attr]
    assert restored.roster.state_hash() == bob.mc.roster.state_hash()  # type: ignore[union-attr]
    assert restored.sending_key() == bob.mc.sending_key()  # type: ignore[union-attr]
    bob.mc = restored
    env = alice.send(b"after restart")
    assert bob.receive(env) == "" and bob.shown[-1] == b"after restart"
    assert secrets_file.load(tmp_path, "other") is None
    os.chmod(path, 0o644)
    with pytest.raises(secrets_file.MembersFileError, match="chmod 600"):
        secrets_file.load(tmp_path, "team")
    os.chmod(path, 0o600)
    path.write_bytes(b"{not json")
    with pytest.raises(secrets_file.MembersFileError, match="damaged"):
        secrets_file.load(tmp_path, "team")


def test_the_topic_is_fixed_for_the_channel_whatever_the_epoch() -> None:
    alice, bob, carol = founded_team()
    topic = alice.mc.topic  # type: ignore[union-attr]
    assert topic == members_topic(alice.mc.channel_id)  # type: ignore[union-attr]
    broadcast([alice.send(c) for c in alice.mc.remove(carol.id)], bob)  # type: ignore[union-attr]
    assert alice.mc.sending_key().topic == topic  # type: ignore[union-attr]
    assert len(alice.mc.epoch_keys) == 2  # type: ignore[union-attr]


def test_a_member_added_while_a_line_was_in_flight_is_owed_its_key_at_once(
    tmp_path: Path,
) -> None:
    alice, bob, _carol = founded_team()
    dave = newcomer(alice, "dave")
    add = alice.send(encode_add(dave.info()))
    dave.receive(add)
    broadcast(alice.outbox, dave)
    # bob has not heard of dave's add yet, and his clock is past it: his line comes
    # after the add in channel order, so dave may read it, but bob shared nothing with dave
    bob.lamport = max(bob.lamport, alice.lamport) + 5
    line = bob.send(b"said while dave was being added")
    assert dave.receive(line) == "held"
    assert bob.mc.owed_shares() == []  # type: ignore[union-attr]  # bob knows no dave yet
    bob.receive(add)
    owed = [bob._send(c, 0) for c in bob.mc.owed_shares()]  # type: ignore[union-attr]
    assert len(owed) == 1
    broadcast(owed, dave)
    assert dave.shown == [b"said while dave was being added"]
    assert bob.mc.owed_shares() == []  # type: ignore[union-attr]  # owed once
    # and the debt survives a restart of bob (the members file keeps it)
    secrets_file.save(tmp_path, bob.mc)  # type: ignore[arg-type]
    restored = secrets_file.load(tmp_path, "team")
    assert restored is not None and restored.owed_shares() == []


def test_an_owed_key_share_opens_the_held_line_on_arrival_not_on_causal_delivery() -> None:
    """The owed share comes after the line in its author's log (its causal history
    names the line), while the line is held for the share: the node takes the share
    as it arrives (``early_share``), or both would wait until the core gave up."""
    alice, bob, _carol = founded_team()
    dave = newcomer(alice, "dave")
    add = alice.send(encode_add(dave.info()))
    dave.receive(add)
    bob.lamport = max(bob.lamport, alice.lamport) + 5
    line = bob.send(b"said while dave was being added")
    assert dave.receive(line) == "held"
    bob.receive(add)
    [owed] = [bob._send(c, 0) for c in bob.mc.owed_shares()]  # type: ignore[union-attr]
    opened = open_for_topic(owed, lambda t: dave.mc.opening_keys())  # type: ignore[union-attr]
    msg = opened.sds_message
    assert msg is not None
    mc = dave.mc
    assert mc is not None
    got = mc.incoming_content(msg.sender_id, msg.lamport_timestamp, msg.message_id, msg.content)
    assert got.content is not None and is_control(got.content)
    released = mc.early_share(msg.sender_id, msg.lamport_timestamp, msg.message_id,
                              got.content, 0)  # fmt: skip
    assert released == [line] and mc.held == 0
    assert dave.receive(line) == "" and dave.shown == [b"said while dave was being added"]
    # delivered later by the core: applied again, harmlessly
    assert dave.receive(owed) == "" and mc.counters.get("share_undecryptable") is None
    # a share from someone not (yet) known as a member waits for delivery
    stranger = Person("stranger")
    stranger.mc = MembersChannel("team", alice.mc.channel_id, stranger.id, alice.mc.epoch_keys,  # type: ignore[union-attr]
                                 GroupKeys(alice.mc.channel_id, stranger.id))  # type: ignore[union-attr]
    share = stranger.mc.group_keys.key_share({dave.id: dave.mc.group_keys.share_key}, 0)  # type: ignore[union-attr]
    assert share is not None
    assert mc.early_share(stranger.id, 99, "x", share, 0) == []


def test_a_removal_in_a_channel_of_thousands_goes_in_parts_that_each_fit_and_all_open() -> None:
    """Sealed epoch keys for 2,000 members do not fit in one SDS content (64 KiB):
    they go in EpochKeys parts before the remove; a member whose key is in a part
    that comes after the remove waits for it (no rekey asked), then opens the epoch."""
    from nacl.public import PrivateKey

    import sds
    from app.members.channel import EPOCH_CHUNK, SHARE_CHUNK
    from app.members.events import decode_control

    limit = sds.Config().max_content_bytes
    alice, bob, carol = founded_team()
    paper = [MemberInfo(Identity.generate().public_key,
                        bytes(PrivateKey.generate().public_key), f"m{i}")
             for i in range(1997)]  # fmt: skip
    adds = [alice.send(encode_add(info)) for info in paper]
    broadcast(adds, bob, carol)
    assert len(bob.mc.roster) == len(carol.mc.roster) == 2000  # type: ignore[union-attr]
    gone = next(mid for mid in alice.mc.roster.members if mid not in (alice.id, bob.id, carol.id))  # type: ignore[union-attr]
    old_key = bob.mc.sending_key().key  # type: ignore[union-attr]
    contents = alice.mc.remove(gone)  # type: ignore[union-attr]
    assert len(contents) == -(-1999 // EPOCH_CHUNK)  # 7: 6 parts, then the remove
    assert all(len(c) <= limit for c in contents)
    bodies = [decode_control(c).WhichOneof("body") for c in contents]  # type: ignore[union-attr]
    assert bodies == ["epoch_keys"] * (len(contents) - 1) + ["remove"]
    envs = [alice.send(c) for c in contents]
    new_key = alice.mc.sending_key().key  # type: ignore[union-attr]
    assert new_key != old_key
    # bob: parts first, as sent; carol: the remove first, the parts after it
    broadcast(envs, bob)
    broadcast(envs[-1:], carol)
    assert not carol.mc.roster.is_member(gone)  # type: ignore[union-attr]
    boxes_in_remove = {k.recipient_id for k in decode_control(contents[-1]).remove.epoch_keys}  # type: ignore[union-attr]
    if carol.id not in boxes_in_remove:  # her key is in a part still to come: she waits
        assert carol.mc.sending_key().key == old_key  # type: ignore[union-attr]
    broadcast(envs[:-1], carol)
    for p in (bob, carol):
        assert p.mc.sending_key().key == new_key  # type: ignore[union-attr]
        assert "epoch_without_our_key" not in p.mc.counters  # type: ignore[union-attr]
        assert p.mc.due_controls(0, shares=False) == []  # type: ignore[union-attr]  # no rekey
    # the next line: alice's new session shared with 1,998 members in messages that fit
    line = alice.send(b"after the removal")
    assert len(alice.outbox) >= 1998 // SHARE_CHUNK
    assert all(len(e) <= limit + 4096 for e in alice.outbox)
    broadcast(alice.outbox, bob, carol)
    broadcast([line], bob, carol)
    assert bob.shown[-1] == carol.shown[-1] == b"after the removal"


def test_the_share_key_is_replaced_every_interval_and_the_old_one_kept_while_needed() -> None:
    """Every ``share_key_max_age_ms`` a member posts a new share key; the old private
    key opens what was sealed to it until every other member has sealed to the new
    one (and at least ``keep_superseded_ms``), then it is gone; 7 days at most."""
    from app.members.group_keys import RotationPolicy

    hour, day = 3600_000, 24 * 3600_000
    alice, bob, carol = founded_team()
    gk = bob.mc.group_keys  # type: ignore[union-attr]
    gk.policy = RotationPolicy()
    t0 = 0  # founded_team's time: every share key's age counts from it

    def rotate(now: int) -> list[bytes]:  # the node's members round: controls due, no shares
        return [bob._send(c, now) for c in bob.mc.due_controls(now, shares=False)]  # type: ignore[union-attr]

    assert rotate(t0 + 7 * day - 1) == []
    old_share = gk.share_key
    rotation = rotate(t0 + 7 * day)
    assert len(rotation) == 1 and gk.share_key != old_share and gk.stats()["share_keys_held"] == 2
    # alice seals her next session to bob's old key before she hears of the new one
    alice.mc.group_keys.on_members_removed()  # type: ignore[union-attr]
    early = alice.send(b"sealed to the old key", t0 + 7 * day)
    broadcast(rotation, alice, carol)
    assert alice.mc.roster.member(bob.id).info.share_key == gk.share_key  # type: ignore[union-attr]
    # two hours on: alice and carol have sealed nothing to the new key yet: the old stays
    assert not bob.mc.advance(t0 + 7 * day + 2 * hour)  # type: ignore[union-attr]
    assert gk.stats()["share_keys_held"] == 2
    broadcast(alice.outbox, bob)
    assert bob.receive(early) == "" and bob.shown[-1] == b"sealed to the old key"
    # both start new sessions (shared to the new key): the old private key goes
    alice.outbox.clear()
    alice.mc.group_keys.on_members_removed()  # type: ignore[union-attr]
    carol.mc.group_keys.on_members_removed()  # type: ignore[union-attr]
    later = [alice.send(b"a", t0 + 8 * day), carol.send(b"c", t0 + 8 * day)]
    broadcast(alice.outbox + carol.outbox, bob)
    broadcast(later, bob)
    assert bob.shown[-2:] == [b"a", b"c"]
    bob.mc.advance(t0 + 8 * day)  # type: ignore[union-attr]
    assert gk.stats()["share_keys_held"] == 1
    # a box sealed to the old key no longer opens
    from nacl.public import PublicKey, SealedBox

    assert gk.open_sealed(SealedBox(PublicKey(old_share)).encrypt(b"x")) is None
    # a silent member does not keep an old key for ever: 7 days at most
    second_old = gk.share_key
    rotation = rotate(t0 + 15 * day)
    assert len(rotation) == 1 and gk.share_key != second_old
    bob.mc.advance(t0 + 16 * day)  # type: ignore[union-attr]
    assert gk.stats()["share_keys_held"] == 2  # nobody sealed to the new one yet
    bob.mc.advance(t0 + 22 * day)  # type: ignore[union-attr]
    assert gk.stats()["share_keys_held"] == 1


def test_a_newcomer_after_a_removal_asks_no_rekey_for_the_epoch_before_its_add() -> None:
    """An epoch started before a member was added has no box for it (its key came
    with the invite): not counted as ``epoch_without_our_key``, no rekey due."""
    alice, bob, carol = founded_team()
    broadcast([alice.send(c) for c in alice.mc.remove(carol.id)], bob)  # type: ignore[union-attr]
    dave = newcomer(alice, "dave")
    dave.receive(alice.send(encode_add(dave.info())))
    line = alice.send(b"hello")
    broadcast(alice.outbox, dave)
    assert dave.receive(line) == "" and dave.shown == [b"hello"]
    assert "epoch_without_our_key" not in dave.mc.counters  # type: ignore[union-attr]
    assert dave.mc.sending_key().key == alice.mc.sending_key().key  # type: ignore[union-attr]


def test_a_line_shown_before_the_removal_came_is_refused_by_its_cut_and_a_later_one_at_once(
) -> None:
    """carol's line reaches bob but not alice; alice removes carol with the ids she holds
    (the cut): bob marks the line he showed as refused, and refuses at the gate any other
    line of carol's, whatever its Lamport time, while a late copy of one in the cut is
    taken."""
    from app.members.cut import id_bytes

    alice, bob, carol = founded_team()
    seen = alice.send(b"carol, hi")
    broadcast([seen], bob, carol)
    before = carol.send(b"seen by both")
    broadcast([*carol.outbox, before], alice, bob)
    only_bob = carol.send(b"seen by bob only")
    assert bob.receive(only_bob) == "" and bob.shown[-1] == b"seen by bob only"
    held = [m for m in (_mid(e, alice) for e in [*carol.outbox, before]) if m]
    assert all(id_bytes(m) is not None for m in held)
    [removal] = [alice.send(c) for c in alice.mc.remove(carol.id, held)]  # type: ignore[union-attr]
    bob.receive(removal)
    mc = bob.mc
    assert mc is not None and mc.cuts_done and mc.cuts_done[-1][1] == carol.id
    assert mc.outside_cuts(carol.id, [*held, _mid(only_bob, bob)]) == [_mid(only_bob, bob)]
    carol.lamport = 1  # back-dated as far as it goes
    late = carol.send(b"after, back-dated")
    assert bob.receive(late) == "outside_cut"
    assert bob.receive(before) in ("", "already_read")  # a copy of one in the cut passes the gate


def _mid(env: bytes, reader: Person) -> str:
    assert reader.mc is not None
    opened = open_for_topic(env, lambda t: reader.mc.opening_keys())  # type: ignore[union-attr]
    assert opened.sds_message is not None
    return opened.sds_message.message_id


def test_a_large_cut_comes_in_signed_parts_and_judges_only_once_complete() -> None:
    from app.members.cut import CUT_INLINE

    alice, bob, carol = founded_team()
    held = [os.urandom(32).hex() for _ in range(CUT_INLINE * 3)]
    contents = alice.mc.remove(carol.id, held)  # type: ignore[union-attr]
    envs = [alice.send(c) for c in contents]
    assert len(envs) == 3  # two parts, then the removal
    bob.receive(envs[-1])  # the removal first: its cut waits for its parts
    mc = bob.mc
    assert mc is not None and not mc.roster.is_member(carol.id)
    assert mc.roster.judge(carol.id, held[0]) == ("cut_pending", True)
    broadcast(envs[:-1], bob)
    assert mc.roster.judge(carol.id, held[0]) == ("", False)
    assert mc.roster.judge(carol.id, os.urandom(32).hex()) == ("outside_cut", False)
    assert mc.roster.state_hash() == alice.mc.roster.state_hash()  # type: ignore[union-attr]


def test_a_channel_made_before_chaining_is_upgraded_by_its_creators_genesis(
    tmp_path: Path,
) -> None:
    """The first version's events (folded by Lamport time) become a genesis that the
    creator's node signs once; afterwards an unchained event is refused, everywhere."""
    from app.members.events import encode_create, encode_remove

    alice, bob, dave = Person("alice"), Person("bob"), Person("dave")
    keys = GroupKeys(b"", alice.id)
    own = MemberInfo(alice.identity.public_key, keys.share_key, "alice")
    channel_id, create = encode_create("team", own, bytes(range(32)))
    outer = os.urandom(32)
    for p in (alice, bob):
        p.mc = MembersChannel("team", channel_id, p.id, [outer],
                              GroupKeys(channel_id, p.id, share_secret=(
                                  keys.share_secret if p is alice else None)),
                              signer=p.identity)  # fmt: skip
    legacy = [alice._send(create, 0), alice._send(encode_add(bob.info()), 0)]
    broadcast(legacy, bob)
    assert not bob.mc.roster.chained and bob.mc.roster.is_member(bob.id)  # type: ignore[union-attr]
    assert not bob.mc.genesis_due() and alice.mc.genesis_due()  # type: ignore[union-attr]
    # the first version's members file: read, and written back in this form
    secrets_file.save(tmp_path, bob.mc)  # type: ignore[arg-type]
    upgraded = alice.post_due()  # the genesis, with a fresh epoch key for everyone
    assert alice.mc.roster.chained and not alice.mc.genesis_due()  # type: ignore[union-attr]
    broadcast(upgraded, bob)
    assert bob.mc.roster.chained  # type: ignore[union-attr]
    assert bob.mc.roster.listing() == alice.mc.roster.listing()  # type: ignore[union-attr]
    assert bob.mc.sending_key().key == alice.mc.sending_key().key != outer  # type: ignore[union-attr]
    # an unchained event now: refused at the gate, with its reason
    stale = alice._send(encode_remove(bob.id), 0)
    assert bob.receive(stale) == "unchained"
    assert bob.mc.roster.is_member(bob.id)  # type: ignore[union-attr]
    # events go on chained: alice adds dave, bob reads it
    dave.mc = MembersChannel("team", channel_id, dave.id, [outer], GroupKeys(channel_id, dave.id),
                             signer=dave.identity)  # fmt: skip
    bob.receive(alice.send(encode_add(dave.info())))
    assert bob.mc.roster.is_member(dave.id)  # type: ignore[union-attr]
    restored = secrets_file.load(tmp_path, "team")  # bob's file from before the genesis
    assert restored is not None and not restored.roster.chained


def test_a_member_renames_itself_with_a_chained_event_and_nobody_else_can() -> None:
    alice, bob, carol = founded_team()
    env = bob.send(bob.mc.rename("robert"))  # type: ignore[union-attr]
    broadcast([env], alice, carol)
    for p in (alice, bob, carol):
        assert p.mc.roster.member(bob.id).name == "robert"  # type: ignore[union-attr]
    assert alice.mc.roster.state_hash() == carol.mc.roster.state_hash()  # type: ignore[union-attr]


def test_a_share_taken_on_arrival_then_on_delivery_keeps_what_was_read_forgotten(
    tmp_path: Path,
) -> None:
    """The node's order (issue 39, break 3): bob's key share is taken as it arrives
    (``early_share``), his lines are read, then the core delivers the share
    (``on_control``), and a relay replays it after a restart. The members file never
    again holds the keys of the lines read: a thief with it and the lines opens only
    the unread one."""
    alice, bob, _carol = founded_team()
    mc = alice.mc
    assert mc is not None
    bob.mc.group_keys.on_members_removed()  # type: ignore[union-attr]  # a new session
    lines = [bob.send(f"line {i}".encode()) for i in range(5)]
    [share_env] = bob.outbox
    opened = open_for_topic(share_env, lambda t: mc.opening_keys())
    msg = opened.sds_message
    assert msg is not None
    got = mc.incoming_content(msg.sender_id, msg.lamport_timestamp, msg.message_id, msg.content)
    assert got.content is not None
    mc.early_share(msg.sender_id, msg.lamport_timestamp, msg.message_id, got.content, 0)
    for env in lines[:4]:
        assert alice.receive(env) == ""
    assert alice.receive(share_env) == ""  # delivered by the core: taken again
    mc.group_keys.forget_read(mc.group_keys.read_marks())  # the node, after its commit
    secrets_file.save(tmp_path, mc)

    def thief_opens() -> list[int]:  # the file's sessions, tried with vodozemac itself
        stolen = secrets_file.load(tmp_path, "team")
        assert stolen is not None
        sent = []
        for env in lines:
            m = open_for_topic(env, lambda t: stolen.opening_keys()).sds_message
            assert m is not None
            framed = decode_encrypted(m.content)
            assert framed is not None
            sent.append(framed)
        return stolen_opens(stolen.group_keys, sent)

    assert thief_opens() == [4]
    restarted = secrets_file.load(tmp_path, "team")  # a restart: key shares not kept
    assert restarted is not None
    assert restarted.early_share(msg.sender_id, msg.lamport_timestamp, msg.message_id,
                                 got.content, 10) == []  # fmt: skip
    restarted.on_control(msg.sender_id, msg.lamport_timestamp, msg.message_id, got.content,
                         share_env, 10)  # fmt: skip
    secrets_file.save(tmp_path, restarted)
    assert thief_opens() == [4]
