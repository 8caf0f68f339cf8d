"""Verifiable message ids (``sds.ids``) and id conflicts (issue 14 §2)."""

from __future__ import annotations

import hashlib

from sds_helpers import CID, delivered_ids, drops, make_channel, msg, of

import sds
from sds import DropReason


def alice_bytes(ch: sds.Channel, mid: str) -> bytes:
    """The wire bytes of one of ``ch``'s own messages (from its repair cache)."""
    return ch._repair_cache[mid]


def _verifying(sender: str = "a", **changes: object) -> sds.Channel:
    return make_channel(sender, verify_message_ids=True, **changes)


def test_own_ids_are_64_hex_and_verify_against_their_fields() -> None:
    ch = make_channel("alice")
    for _ in range(20):
        m = sds.decode(ch.send(b"same text", 1_000))
        assert len(m.message_id) == 64 and m.message_id == m.message_id.lower()
        assert sds.id_form(m.message_id, CID, "alice", m.lamport_timestamp or 0, b"same text") == (
            "sdschat"
        )
        # any other author, timestamp, content or channel gives another id
        assert not sds.verify_message_id(m.message_id, CID, "mallory", m.lamport_timestamp or 0,
                                         b"same text")  # fmt: skip
        assert not sds.verify_message_id(
            m.message_id, CID, "alice", (m.lamport_timestamp or 0) + 1, b"same text"
        )
        assert not sds.verify_message_id(
            m.message_id, CID, "alice", m.lamport_timestamp or 0, b"other text"
        )
        assert not sds.verify_message_id(
            m.message_id, "other", "alice", m.lamport_timestamp or 0, b"same text"
        )
    # identical content at one timestamp (the nonce travels in the id): distinct ids
    nonces = {bytes([i]) * sds.ID_NONCE_BYTES for i in range(3)}
    ids = {sds.message_id_for(CID, "alice", 5, b"ok", n) for n in nonces}
    assert len(ids) == 3


def test_id_checks_never_raise_on_odd_strings() -> None:
    for bad in ("", "zz" * 32, "A" * 64, "0" * 63, "é" * 64, "0" * 65):
        assert sds.id_form(bad, CID, "a", 1, b"x") is None


def test_a_copied_id_over_other_text_is_dropped_and_the_genuine_message_delivered() -> None:
    """The attack of issue 14 §2 at the core: mallory copies alice's id, timestamp and
    history, puts her own text (signed as herself), and it arrives first. Without
    verification the receiver kept the forgery and dropped alice's message."""
    alice = make_channel("alice")
    genuine = alice.send(b"pay bob 10", 2_000)
    g = sds.decode(genuine)
    forged = msg("mallory", g.message_id, g.lamport_timestamp, content=b"pay mallory 1000")
    bob = _verifying("bob")
    bob.receive(forged, 2_000)
    bob.receive(genuine, 2_001)
    events = bob.events()
    assert [d.reason for d in drops(events)] == [DropReason.UNVERIFIABLE_ID]
    delivered = of(events, sds.MessageDelivered)
    assert [(d.message_id, d.sender_id, d.content) for d in delivered] == [
        (g.message_id, "alice", b"pay bob 10")
    ]


def test_forged_id_does_not_cancel_the_repair_of_the_genuine_message() -> None:
    """A forgery under a missing id must not count as its arrival (SDS-R cancels
    a pending request when the id arrives)."""
    alice = make_channel("alice")
    first = sds.decode(alice.send(b"first", 2_000))
    bob = _verifying("bob")
    bob.receive(alice.send(b"second", 2_100), 2_100)  # names `first`: missing
    assert first.message_id in bob.missing_ids()
    assert bob.stats()["repair_requests"] == 1
    forged = msg("mallory", first.message_id, first.lamport_timestamp, content=b"fake")
    bob.receive(forged, 2_200)
    assert first.message_id in bob.missing_ids()
    assert bob.stats()["repair_requests"] == 1
    bob.receive(alice.send(b"third", 2_300), 2_300)
    bob.events()
    bob.receive(alice_bytes(alice, first.message_id), 2_400)  # the genuine one, repaired
    assert delivered_ids(bob.events())[0] == first.message_id


def test_js_waku_ids_are_accepted_when_they_are_sha256_of_the_content() -> None:
    bob = _verifying("bob")
    wid = hashlib.sha256(b"hello").hexdigest()
    bob.receive(msg("js", wid, 3_000, content=b"hello"), 3_000)
    bob.receive(msg("js", hashlib.sha256(b"hello").hexdigest()[::-1], 3_001, content=b"x"), 3_001)
    events = bob.events()
    assert delivered_ids(events) == [wid]
    assert [d.reason for d in drops(events)] == [DropReason.UNVERIFIABLE_ID]


def test_same_js_waku_id_from_another_author_is_a_reported_conflict() -> None:
    """js-waku ids bind the content only: two authors of "ok" share one id. The first
    stays, the second is reported (author conflict), in the log and while waiting."""
    wid = hashlib.sha256(b"ok").hexdigest()
    bob = _verifying("bob")
    bob.receive(msg("js1", wid, 3_000, content=b"ok"), 3_000)
    bob.receive(msg("js2", wid, 3_005, content=b"ok"), 3_005)
    bob.receive(msg("js1", wid, 3_000, content=b"ok"), 3_006)  # the same author: a plain copy
    events = bob.events()
    assert delivered_ids(events) == [wid]
    conflicts = of(events, sds.MessageConflict)
    assert [(c.message_id, c.kept_sender_id, c.other_sender_id, c.reason) for c in conflicts] == [
        (wid, "js1", "js2", "author")
    ]
    assert [d.reason for d in drops(events)] == [DropReason.DUPLICATE, DropReason.DUPLICATE]

    # the same while the first copy waits for a dependency
    carol = _verifying("carol")
    carol.receive(msg("js1", wid, 3_000, history=["f" * 64], content=b"ok"), 3_000)
    carol.receive(msg("js2", wid, 3_000, history=["f" * 64], content=b"ok"), 3_001)
    conflicts = of(carol.events(), sds.MessageConflict)
    assert [(c.kept_sender_id, c.other_sender_id) for c in conflicts] == [("js1", "js2")]


def test_unverified_cores_still_report_a_content_conflict() -> None:
    """Without verification (hand-made ids), a copy with other content is still a conflict."""
    ch = make_channel("bob")
    ch.receive(msg("x", "m1", 5, history=["gone"], content=b"one"), 5)
    ch.receive(msg("x", "m1", 5, history=["gone"], content=b"two"), 6)
    conflicts = of(ch.events(), sds.MessageConflict)
    assert [(c.reason, c.kept_sender_id) for c in conflicts] == [("content", "x")]


def test_same_js_waku_id_at_another_timestamp_is_a_reported_conflict() -> None:
    """One author, one text, one js-waku id, two Lamport timestamps: participants that
    get them in different orders would place the message differently; reported."""
    wid = hashlib.sha256(b"ok").hexdigest()
    bob = _verifying("bob")
    bob.receive(msg("js1", wid, 3_000, content=b"ok"), 3_000)
    bob.receive(msg("js1", wid, 9_000, content=b"ok"), 3_005)
    conflicts = of(bob.events(), sds.MessageConflict)
    assert [(c.reason, c.kept_sender_id, c.other_sender_id) for c in conflicts] == [
        ("timestamp", "js1", "js1")
    ]
