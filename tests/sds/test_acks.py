"""Review ACK Status: causal-history acks, bloom-filter possible acks, distinct senders."""

from __future__ import annotations

from sds_helpers import bloom_with, make_channel, msg, of, run_timers

import sds


def own_message(**changes: object) -> tuple[sds.Channel, str, bytes]:
    a = make_channel("a", **changes)
    data = a.send(b"mine", 2_000)
    a.events()
    return a, sds.decode(data).message_id, data


def test_ack_by_causal_history_of_a_content_message() -> None:
    """Spec "Review ACK Status": all messages in a received causal_history are marked
    acknowledged and leave the outgoing buffer."""
    a = make_channel("a")
    b = make_channel("b")
    m1 = a.send(b"one", 2_000)
    mid = sds.decode(m1).message_id
    a.events()
    b.receive(m1, 2_001)
    reply = b.send(b"two", 2_002)
    a.receive(reply, 2_003)
    acks = of(a.events(), sds.MessageAcknowledged)
    assert [(x.message_id, x.by_causal_history, x.by_sender) for x in acks] == [(mid, True, "b")]
    assert a.outgoing_ids() == []
    assert a.outgoing_state(mid) is None


def test_ack_by_causal_history_of_a_sync_message() -> None:
    """Spec "Periodic Sync Message": the causal history of a sync message is processed
    like a regular message's, so it acknowledges."""
    a, mid, _ = own_message()
    a.receive(msg("b", "sync-x", 3_000, [mid], content=None), 3_000)
    acks = of(a.events(), sds.MessageAcknowledged)
    assert [(x.message_id, x.by_causal_history) for x in acks] == [(mid, True)]
    assert a.outgoing_ids() == []


def test_bloom_hit_marks_possibly_acknowledged() -> None:
    """Spec "Review ACK Status": messages included in the received bloom_filter are
    marked possibly acknowledged (one hit is below the threshold of 2)."""
    a, mid, _ = own_message()
    a.receive(msg("b", "m-b", 3_000, bloom=bloom_with(mid)), 3_000)
    evs = a.events()
    pa = of(evs, sds.MessagePossiblyAcknowledged)
    assert [(x.message_id, x.hits, x.threshold, x.by_sender) for x in pa] == [(mid, 1, 2, "b")]
    assert of(evs, sds.MessageAcknowledged) == []
    assert a.outgoing_state(mid) == sds.OwnState.POSSIBLY_ACKNOWLEDGED


def test_filter_without_our_id_does_nothing() -> None:
    """Spec "Review ACK Status": only messages included in the filter gain a hit."""
    a, mid, _ = own_message()
    a.receive(msg("b", "m-b", 3_000, bloom=bloom_with("someone-else")), 3_000)
    evs = a.events()
    assert of(evs, sds.MessagePossiblyAcknowledged) == []
    assert a.outgoing_state(mid) == sds.OwnState.UNACKNOWLEDGED


def test_same_sender_twice_does_not_acknowledge() -> None:
    """PROTOCOL.md "Acknowledgements": possible-ack hits count DISTINCT senders: the same
    sender's filter received twice (two messages) is one hit, not an ack."""
    a, mid, _ = own_message()
    f = bloom_with(mid)
    a.receive(msg("b", "m-b1", 3_000, bloom=f), 3_000)
    a.receive(msg("b", "m-b2", 3_001, bloom=f), 3_001)
    a.receive(msg("b", "sync-b", 3_002, bloom=f, content=None), 3_002)
    evs = a.events()
    assert of(evs, sds.MessageAcknowledged) == []
    assert [x.hits for x in of(evs, sds.MessagePossiblyAcknowledged)] == [1]
    assert a.outgoing_ids() == [mid]


def test_two_distinct_senders_acknowledge_at_threshold_two() -> None:
    """Spec "Review ACK Status" (MAY mark acknowledged on probabilistic grounds) and
    PROTOCOL.md "Acknowledgements": two different senders' filters reach threshold 2."""
    a, mid, _ = own_message()
    assert a.ack_threshold == 2
    a.receive(msg("b", "m-b", 3_000, bloom=bloom_with(mid)), 3_000)
    a.receive(msg("c", "m-c", 3_001, bloom=bloom_with(mid)), 3_001)
    acks = of(a.events(), sds.MessageAcknowledged)
    assert [(x.message_id, x.by_causal_history, x.by_sender) for x in acks] == [(mid, False, "c")]
    assert a.outgoing_ids() == []


def test_a_saturated_filter_is_no_evidence() -> None:
    """js-waku never rolls its filter: past its capacity it says "yes" to a growing
    share of all ids. Two such filters used to acknowledge our own messages that
    nobody received (gone from the resend buffer for good). A filter whose fill puts
    a wrong hit above the design rate is ignored for acks, with its own drop reason;
    one at its design capacity still counts."""
    a = make_channel("a", outgoing_buffer_cap=1_000)
    mine = [sds.decode(a.send(f"m{i}".encode(), 2_000 + i)).message_id for i in range(300)]
    a.events()
    cap = a.config.bloom_capacity
    full = [f"seen-{i}" for i in range(3 * cap)]  # 3x the capacity, none of ours
    a.receive(msg("b", "m-b", 3_000, bloom=bloom_with(*full)), 3_000)
    a.receive(msg("c", "m-c", 3_001, bloom=bloom_with(*full[::-1])), 3_001)
    evs = a.events()
    assert of(evs, sds.MessageAcknowledged) == []
    assert of(evs, sds.MessagePossiblyAcknowledged) == []
    drops = [d for d in of(evs, sds.MessageDropped) if d.reason == "saturated_filter"]
    assert [d.sender_id for d in drops] == ["b", "c"]
    assert sorted(a.outgoing_ids()) == sorted(mine)
    # a filter at its design capacity holding ours is still evidence
    at_capacity = [*full[: cap - 1], mine[0]]
    a.receive(msg("b", "m-b2", 3_002, bloom=bloom_with(*at_capacity)), 3_002)
    a.receive(msg("c", "m-c2", 3_003, bloom=bloom_with(*at_capacity)), 3_003)
    acks = of(a.events(), sds.MessageAcknowledged)
    assert mine[0] in [x.message_id for x in acks]


def test_an_ack_after_the_sender_gave_up_still_counts() -> None:
    """Resends exhausted (MessageSendFailed), then a peer's causal history names the
    message: it did arrive. The ack used to be ignored, the app kept "not delivered"
    and a retry sent it twice."""
    a = make_channel("a", max_resend_attempts=1, resend_unacknowledged_ms=1_000)
    mid = sds.decode(a.send(b"hi", 1_000)).message_id
    evs, _ = run_timers(a, 5_000)
    assert [(f.message_id, f.reason) for f in of(evs, sds.MessageSendFailed)] == [
        (mid, "resends_exhausted")
    ]
    assert a.outgoing_ids() == []
    a.receive(msg("b", "m-b", 6_000, [mid]), 6_000)
    acks = of(a.events(), sds.MessageAcknowledged)
    assert [(x.message_id, x.by_causal_history, x.by_sender) for x in acks] == [(mid, True, "b")]
    a.receive(msg("c", "m-c", 6_001, [mid]), 6_001)  # once only
    assert of(a.events(), sds.MessageAcknowledged) == []


def test_a_duplicate_still_acknowledges_what_it_names() -> None:
    """Spec "Review ACK Status" is for every received message. js-waku ids are
    sha256(content): b's "ok" has the id of c's earlier "ok" and is dropped as a
    duplicate, but its causal history names our message: that ack counts."""
    import hashlib

    a, mid, _ = own_message()
    ok = hashlib.sha256(b"ok").hexdigest()
    a.receive(msg("c", ok, 2_100, [], content=b"ok"), 2_100)
    a.events()
    a.receive(msg("b", ok, 2_200, [mid], content=b"ok"), 2_200)
    evs = a.events()
    assert [d.reason for d in of(evs, sds.MessageDropped)] == ["duplicate"]
    acks = of(evs, sds.MessageAcknowledged)
    assert [(x.message_id, x.by_causal_history, x.by_sender) for x in acks] == [(mid, True, "b")]


def test_an_id_the_application_holds_is_a_duplicate() -> None:
    """After mark_dependencies_met(["X"]) (X is in the application's storage), X
    arriving again is a duplicate, not a second delivery."""
    from sds_helpers import delivered_ids

    a = make_channel("a")
    a.receive(msg("b", "W", 2_000, ["X"]), 2_000)
    a.events()
    a.mark_dependencies_met(["X"], 2_100)
    assert delivered_ids(a.events()) == ["W"]
    a.receive(msg("c", "X", 1_500, []), 2_200)
    evs = a.events()
    assert delivered_ids(evs) == []
    assert [d.reason for d in of(evs, sds.MessageDropped)] == ["duplicate"]


def test_threshold_three_at_one_percent_filter() -> None:
    """PROTOCOL.md "Acknowledgements": the threshold is derived from the filter's
    false-positive rate: 3 distinct senders at p = 0.01."""
    a, mid, _ = own_message(bloom_error_rate=0.01, bloom_capacity=1_000)
    assert a.ack_threshold == 3
    f = bloom_with(mid, capacity=1_000, error_rate=0.01)
    a.receive(msg("b", "m-b", 3_000, bloom=f), 3_000)
    a.receive(msg("c", "m-c", 3_001, bloom=f), 3_001)
    evs = a.events()
    assert of(evs, sds.MessageAcknowledged) == []
    assert [x.hits for x in of(evs, sds.MessagePossiblyAcknowledged)] == [1, 2]
    a.receive(msg("d", "m-d", 3_002, bloom=f), 3_002)
    assert [x.message_id for x in of(a.events(), sds.MessageAcknowledged)] == [mid]


def test_acknowledged_message_is_not_resent() -> None:
    """Spec "Participant state": an acknowledged message leaves the outgoing buffer, so
    the outgoing sweep never resends it."""
    a, mid, _ = own_message(lost_timeout_ms=0)
    a.receive(msg("b", "m-b", 3_000, [mid]), 3_000)
    a.events()
    _, grams = run_timers(a, 2_000 + 20 * a.config.resend_unacknowledged_ms)
    assert [g for g in grams if g.kind == "resend"] == []


def test_ack_only_the_listed_messages() -> None:
    """Spec "Review ACK Status": a causal history acks exactly the ids it lists."""
    a = make_channel("a")
    ids = [sds.decode(a.send(f"m{i}".encode(), 2_000 + i)).message_id for i in range(3)]
    a.events()
    a.receive(msg("b", "m-b", 3_000, [ids[0], ids[2], "unrelated"]), 3_000)
    acked = [x.message_id for x in of(a.events(), sds.MessageAcknowledged)]
    assert acked == [ids[0], ids[2]]
    assert a.outgoing_ids() == [ids[1]]


def test_acks_through_real_exchange() -> None:
    """Spec "Review ACK Status": between real channels, B's reply's causal history acks
    A's message and A's reply acks B's."""
    a = make_channel("a")
    b = make_channel("b")
    d1 = a.send(b"1", 2_000)
    b.receive(d1, 2_000)
    d2 = b.send(b"2", 2_001)
    a.receive(d2, 2_001)
    d3 = a.send(b"3", 2_002)
    b.receive(d3, 2_002)
    assert sds.decode(d1).message_id not in a.outgoing_ids()
    assert b.outgoing_ids() == []
    assert a.outgoing_ids() == [sds.decode(d3).message_id]
