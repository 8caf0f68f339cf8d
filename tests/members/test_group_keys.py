"""Megolm group keys of a members channel, with real vodozemac sessions and real sealed boxes."""

from __future__ import annotations

import os

import pytest
import vodozemac

from app.members import members_pb2 as pb
from app.members.events import decode_control
from app.members.group_keys import GroupKeys, RotationPolicy, repair_horizon_ms
from sds import Config
from tests.members.megolm_thief import stolen_opens

CHANNEL = os.urandom(32)
PICKLE_KEY = bytes(32)
HOUR = 3600 * 1000


def share_of(content: bytes | None) -> pb.KeyShare:
    assert content is not None
    msg = decode_control(content)
    assert isinstance(msg, pb.Control)
    return msg.key_share


def team(*names: str, policy: RotationPolicy | None = None) -> dict[str, GroupKeys]:
    return {n: GroupKeys(CHANNEL, n, policy) for n in names}


def members(keys: dict[str, GroupKeys], *names: str) -> dict[str, bytes]:
    return {n: keys[n].share_key for n in names}


def deal(keys: dict[str, GroupKeys], sender: str, now: int = 0) -> pb.KeyShare:
    """``sender`` shares its current session with every member of ``keys`` that lacks it."""
    g = keys[sender]
    share = share_of(g.key_share(g.unshared(members(keys, *keys), now), now))
    for name, other in keys.items():
        if name != sender:
            other.receive_share(sender, share, now, author_is_member=True)
    return share


def test_members_read_a_senders_messages_in_any_order_and_any_number_of_times() -> None:
    keys = team("alice", "bob", "carol")
    deal(keys, "alice")
    sent = [keys["alice"].encrypt(f"line {i}".encode(), 0) for i in range(5)]
    bob = keys["bob"]
    for sid, data in [sent[3], sent[0], sent[3], sent[4], sent[1], sent[2], sent[0]]:
        out = bob.decrypt("alice", sid, data)
        assert not isinstance(out, str) or out == "already_read"
    got = keys["carol"].decrypt("alice", *sent[2])
    assert not isinstance(got, str) and got.plaintext == b"line 2" and got.index == 2


def test_a_removed_member_with_its_whole_state_reads_nothing_sent_after_the_removal() -> None:
    keys = team("alice", "bob", "mallory")
    deal(keys, "alice")
    before = keys["alice"].encrypt(b"before", 0)
    assert not isinstance(keys["mallory"].decrypt("alice", *before), str)
    stolen = keys["mallory"].export(PICKLE_KEY)  # everything mallory's data dir holds

    keys["alice"].on_members_removed()
    del keys["mallory"]
    share = deal(keys, "alice", 10)
    after = [keys["alice"].encrypt(f"after {i}".encode(), 10) for i in range(3)]
    assert after[0][0] != before[0]  # a new session
    assert {k.recipient_id for k in share.keys} == {"bob"}

    mallory = GroupKeys.restore(stolen, PICKLE_KEY)
    assert mallory.receive_share("alice", share, 10, author_is_member=True).reason == "not_for_us"
    for sid, data in after:
        assert mallory.decrypt("alice", sid, data) == "unknown_session"
        # not even with the old session's key under the new id
        assert mallory.decrypt("alice", before[0], data) in ("bad_megolm", "already_read")
    for sid, data in after:
        assert not isinstance(keys["bob"].decrypt("alice", sid, data), str)


def test_a_member_added_later_reads_from_when_it_was_added_not_before() -> None:
    keys = team("alice", "bob")
    deal(keys, "alice")
    early = [keys["alice"].encrypt(b"early", 0) for _ in range(3)]
    keys["dave"] = GroupKeys(CHANNEL, "dave")
    deal(keys, "alice", 5)
    late = keys["alice"].encrypt(b"late", 5)
    dave = keys["dave"]
    assert [dave.decrypt("alice", *m) for m in early] == ["before_share"] * 3
    got = dave.decrypt("alice", *late)
    assert not isinstance(got, str) and got.plaintext == b"late"


def test_a_sender_rotates_after_max_messages_and_max_age() -> None:
    keys = team("alice", "bob", policy=RotationPolicy(max_messages=3, max_age_ms=HOUR))
    alice = keys["alice"]
    first = alice.outbound_session_id(0)
    for _ in range(3):
        assert alice.encrypt(b"x", 0)[0] == first
    second = alice.encrypt(b"x", 1)[0]
    assert second != first
    assert alice.encrypt(b"x", HOUR + 1)[0] not in (first, second)
    assert alice.unshared(members(keys, "alice", "bob"), HOUR + 1) == {"bob": keys["bob"].share_key}


def session_lengths(g: GroupKeys, sessions: int) -> list[int]:
    """How many messages each of ``g``'s next ``sessions`` outbound sessions carried."""
    lengths: list[int] = []
    current, count = g.outbound_session_id(0), 0
    while len(lengths) < sessions:
        sid, _ = g.encrypt(b"x", 0)
        if sid != current:
            lengths.append(count)
            current, count = sid, 0
        count += 1
    return lengths


def test_senders_who_start_together_do_not_all_rotate_on_the_same_message() -> None:
    policy = RotationPolicy(max_messages=20, max_age_ms=HOUR)  # spread 0.25: 15-20
    keys = team(*(f"m{i}" for i in range(8)), policy=policy)
    lengths = [n for g in keys.values() for n in session_lengths(g, 3)]
    assert all(15 <= n <= 20 for n in lengths), lengths
    assert len(set(lengths)) > 1, lengths  # 24 sessions on one count: odds 6^-23
    assert [n for n in session_lengths(GroupKeys(CHANNEL, "x", RotationPolicy(
        max_messages=20, spread=0.0)), 4)] == [20] * 4  # fmt: skip


def test_a_session_keeps_its_message_count_across_a_restart() -> None:
    policy = RotationPolicy(max_messages=40, spread=0.5)
    alice = GroupKeys(CHANNEL, "alice", policy)
    first = alice.outbound_session_id(0)
    alice._out.draw = 0.0  # type: ignore[union-attr]  # the shortest count: 20 of 40
    limit = policy.session_limit(0.0)
    assert limit == 20
    for _ in range(limit - 1):
        alice.encrypt(b"x", 0)
    again = GroupKeys.restore(alice.export(PICKLE_KEY), PICKLE_KEY, policy)
    assert again.encrypt(b"x", 0)[0] == first  # the last message of its count
    assert again.encrypt(b"x", 0)[0] != first


def test_once_stored_a_stolen_state_cannot_decrypt_what_was_already_read() -> None:
    keys = team("alice", "bob")
    deal(keys, "alice")
    sent = [keys["alice"].encrypt(f"m{i}".encode(), 0) for i in range(6)]
    bob = keys["bob"]
    for m in sent[:4]:
        assert not isinstance(bob.decrypt("alice", *m), str)
    marks = bob.read_marks()  # what the node's commit covers
    assert not isinstance(bob.decrypt("alice", *sent[4]), str)  # read after: kept
    assert bob.forget_read(marks) == 1
    stolen = GroupKeys.restore(bob.export(PICKLE_KEY), PICKLE_KEY)
    assert [stolen.decrypt("alice", *m) for m in sent[:4]] == ["already_read"] * 4
    # the session material itself starts at index 4: the older keys are gone
    assert stolen_opens(bob, sent) == [4, 5]
    entry = stolen._in[("alice", sent[0][0])]
    assert entry.session.first_known_index == 4
    with pytest.raises(vodozemac.MegolmDecryptionException):
        entry.session.decrypt(vodozemac.MegolmMessage.from_bytes(sent[1][1]))
    assert not isinstance(stolen.decrypt("alice", *sent[5]), str)  # unread ones still open


def test_a_key_share_taken_again_or_replayed_never_lowers_the_read_mark() -> None:
    """The node takes a share on arrival and again on delivery; a relay replays it
    later; an export of the session from an earlier index comes late: none brings
    back the keys of what was read (issue 39, break 3: each re-import restarted the
    session at the share's index, 0)."""
    keys = team("alice", "bob")
    alice, bob = keys["alice"], keys["bob"]
    before = [alice.encrypt(f"b{i}".encode(), 0) for i in range(2)]  # bob not there yet
    share = deal(keys, "alice")
    assert share.first_index == 2
    sent = before + [alice.encrypt(f"m{i}".encode(), 0) for i in range(6)]
    for m in sent[2:6]:
        assert not isinstance(bob.decrypt("alice", *m), str)
    bob.forget_read(bob.read_marks())
    assert stolen_opens(bob, sent) == [6, 7]
    sid = sent[0][0]
    earlier = share_of(alice.share_session(sid, members(keys, "bob"), 0))
    assert earlier.first_index == 0
    for _ in range(2):  # on arrival, on delivery, replayed: the same start changes nothing
        assert bob.receive_share("alice", share, 5, author_is_member=True).accepted
    assert bob.receive_share("alice", earlier, 5, author_is_member=True).reason == (
        "would_reopen")
    restarted = GroupKeys.restore(bob.export(PICKLE_KEY), PICKLE_KEY)
    assert restarted.receive_share("alice", share, 9, author_is_member=True).accepted
    assert restarted.receive_share("alice", earlier, 9, author_is_member=True).reason == (
        "would_reopen")
    assert stolen_opens(bob, sent) == stolen_opens(restarted, sent) == [6, 7]
    assert [bob.decrypt("alice", *m) for m in sent[2:6]] == ["already_read"] * 4
    # an earlier start of a session nothing was read from yet is taken (nothing reopens)
    carol = GroupKeys(CHANNEL, "carol")
    late = share_of(alice.share_session(sid, {"carol": carol.share_key}, 4))
    assert carol.receive_share("alice", late, 0, author_is_member=True).accepted
    early = share_of(alice.share_session(sid, {"carol": carol.share_key}, 0))
    assert carol.receive_share("alice", early, 0, author_is_member=True).accepted
    assert stolen_opens(carol, sent) == list(range(8))


def test_a_replayed_share_of_a_dropped_session_is_refused_while_a_share_key_could_open_it(
) -> None:
    policy = RotationPolicy(max_messages=1, keep_superseded_ms=HOUR)
    keys = team("alice", "bob", policy=policy)
    old_share = deal(keys, "alice")
    old = keys["alice"].encrypt(b"old", 0)
    bob = keys["bob"]
    assert not isinstance(bob.decrypt("alice", *old), str)
    deal(keys, "alice", 1)  # a new session supersedes the old one
    assert bob.advance(HOUR + 2) == 1
    again = GroupKeys.restore(bob.export(PICKLE_KEY), PICKLE_KEY, policy)
    for g in (bob, again):
        assert g.receive_share("alice", old_share, HOUR + 3, author_is_member=True).reason == (
            "forgotten")
        assert g.decrypt("alice", *old) == "key_forgotten"
    assert stolen_opens(again, [old]) == []
    # once no share key that could open the replayed share is held, nothing to remember
    bob.rotate_share_key(HOUR + 3)
    bob.advance(3 * HOUR)
    assert bob.stats()["share_keys_held"] == 1 and bob.stats()["forgotten_sessions"] == 0
    assert bob.receive_share("alice", old_share, 3 * HOUR, author_is_member=True).reason == (
        "undecryptable")


def test_an_unread_index_holds_the_read_mark_for_the_repair_horizon_then_is_given_up() -> None:
    horizon = 60_000
    keys = team("alice", "bob", policy=RotationPolicy(repair_horizon_ms=horizon))
    deal(keys, "alice")
    sent = [keys["alice"].encrypt(f"m{i}".encode(), 0) for i in range(6)]
    bob = keys["bob"]
    for i in (0, 1, 3, 4):  # 2 is late (lost, repaired later or never)
        assert not isinstance(bob.decrypt("alice", *sent[i]), str)
    t = 1_000
    bob.advance(t)
    bob.forget_read(bob.read_marks())
    assert stolen_opens(bob, sent) == [2, 3, 4, 5]  # 2 may still come: 3 and 4 stay too
    bob.advance(t + horizon - 1)
    bob.forget_read(bob.read_marks())
    assert stolen_opens(bob, sent) == [2, 3, 4, 5]
    bob.advance(t + horizon)  # SDS no longer brings 2: given up
    bob.forget_read(bob.read_marks())
    assert stolen_opens(bob, sent) == [5]
    assert bob.decrypt("alice", *sent[2]) == "key_forgotten"
    assert bob.decrypt("alice", *sent[3]) == "already_read"
    assert not isinstance(bob.decrypt("alice", *sent[5]), str)
    # a late index within the horizon is read, and the mark moves on at once
    more = [keys["alice"].encrypt(f"n{i}".encode(), 0) for i in range(3)]
    assert not isinstance(bob.decrypt("alice", *more[1]), str)
    bob.advance(2 * t + horizon)
    assert not isinstance(bob.decrypt("alice", *more[0]), str)  # index 6, in time
    bob.forget_read(bob.read_marks())
    assert stolen_opens(bob, more) == [2]


def test_the_repair_horizon_is_what_sds_may_still_bring() -> None:
    # the sender's last resend (10 x 60 s) beats the lost timeout (300 s); then the
    # widest SDS-R window (1 s + 120 s)
    assert repair_horizon_ms(Config()) == 10 * 60_000 + 1_000 + 120_000
    assert RotationPolicy().repair_horizon_ms == 721_000
    patient = Config(lost_timeout_ms=3_600_000)
    assert repair_horizon_ms(patient) == 3_600_000 + 1_000 + 120_000


def test_a_restart_reads_again_what_was_read_but_not_stored() -> None:
    """Reads after the last stored mark are not trusted at a restart (a crash before
    the commit): a repaired copy of such a line still opens; the core drops it if it
    has it."""
    keys = team("alice", "bob")
    deal(keys, "alice")
    sent = [keys["alice"].encrypt(f"m{i}".encode(), 0) for i in range(4)]
    bob = keys["bob"]
    for m in sent:
        assert not isinstance(bob.decrypt("alice", *m), str)
    crashed = GroupKeys.restore(bob.export(PICKLE_KEY), PICKLE_KEY)  # saved before the commit
    assert not isinstance(crashed.decrypt("alice", *sent[0]), str)


def test_superseded_sessions_and_old_share_keys_are_dropped_after_their_window() -> None:
    policy = RotationPolicy(max_messages=1, keep_superseded_ms=HOUR)
    keys = team("alice", "bob", policy=policy)
    deal(keys, "alice")
    old = keys["alice"].encrypt(b"old", 0)
    deal(keys, "alice", 1)  # a new session (max_messages=1)
    assert keys["bob"].advance(HOUR // 2) == 0
    assert not isinstance(keys["bob"].decrypt("alice", *old), str)  # still kept
    assert keys["bob"].advance(HOUR + 2) == 1
    assert keys["bob"].decrypt("alice", *old) == "key_forgotten"  # dropped, and remembered

    bob = keys["bob"]
    keys["alice"].on_members_removed()
    bob.rotate_share_key(10)
    share_to_old_key = share_of(keys["alice"].key_share({"bob": bytes(
        bob._share_secrets[1][0].public_key)}, 10))  # fmt: skip
    bob.advance(10 + HOUR)
    assert bob.receive_share("alice", share_to_old_key, 10 + HOUR,
                             author_is_member=True).reason == "undecryptable"  # fmt: skip


def test_a_share_is_refused_from_a_non_member_or_for_another_senders_session() -> None:
    keys = team("alice", "bob", "mallory")
    share = share_of(keys["alice"].key_share(members(keys, "bob", "mallory"), 0))
    assert keys["bob"].receive_share("alice", share, 0, author_is_member=False).reason == (
        "not_a_member")
    # mallory re-publishes alice's share as her own: the sealed plaintext names alice
    assert keys["bob"].receive_share("mallory", share, 0, author_is_member=True).reason == (
        "wrong_sender")
    other_channel = GroupKeys(os.urandom(32), "carol")
    keys["carol"] = other_channel
    share = share_of(other_channel.key_share(members(keys, "bob"), 0))
    assert keys["bob"].receive_share("carol", share, 0, author_is_member=True).reason == (
        "wrong_channel")


def test_export_and_restore_keep_sessions_indexes_and_share_keys() -> None:
    keys = team("alice", "bob")
    deal(keys, "alice")
    deal(keys, "bob")
    a1 = keys["alice"].encrypt(b"one", 0)
    alice = GroupKeys.restore(keys["alice"].export(PICKLE_KEY), PICKLE_KEY)
    bob = GroupKeys.restore(keys["bob"].export(PICKLE_KEY), PICKLE_KEY)
    a2 = alice.encrypt(b"two", 0)
    assert a2[0] == a1[0]
    assert [bob.decrypt("alice", *m).plaintext for m in (a1, a2)] == [b"one", b"two"]  # type: ignore[union-attr]
    assert bob.share_key == keys["bob"].share_key
    with pytest.raises(ValueError, match="not a group keys export"):
        GroupKeys.restore(b"{}", PICKLE_KEY)
    with pytest.raises(ValueError):
        GroupKeys.restore(keys["alice"].export(PICKLE_KEY), bytes([1]) * 32)


def test_undecodable_and_tampered_megolm_bytes_give_reasons() -> None:
    keys = team("alice", "bob")
    deal(keys, "alice")
    sid, data = keys["alice"].encrypt(b"x", 0)
    assert keys["bob"].decrypt("alice", sid, b"junk") == "not_megolm"
    tampered = bytearray(data)
    tampered[10] ^= 1
    assert keys["bob"].decrypt("alice", sid, bytes(tampered)) in ("bad_megolm", "not_megolm")
    assert keys["bob"].decrypt("carol", sid, data) == "unknown_session"


def test_a_sender_jumping_its_index_far_ahead_costs_one_range_not_a_loop() -> None:
    """A hostile member's message at index 2**31 leaves a gap of two billion indexes:
    given up as one range (the sender chooses its indexes). No Megolm session is
    advanced that far here (2**31 encryptions): the read is recorded as
    :meth:`GroupKeys.decrypt` records it."""
    keys = team("alice", "bob", policy=RotationPolicy(repair_horizon_ms=1))
    deal(keys, "alice")
    sid, data = keys["alice"].encrypt(b"m0", 0)
    bob = keys["bob"]
    assert not isinstance(bob.decrypt("alice", sid, data), str)
    entry = bob._in[("alice", sid)]
    jump = 1 << 31
    entry.read_above.add(jump)
    entry.high = jump
    bob.advance(10)
    bob.advance(20)
    assert entry.low_water == jump + 1 and entry.skipped == [(1, jump)]
