"""Channel receive path: Receive / Deliver Message, Resolve Conflicts, dependencies."""

from __future__ import annotations

from sds_helpers import (
    CID,
    bloom_with,
    delivered_ids,
    drops,
    entry,
    make_channel,
    msg,
    of,
    own_filter,
)

import sds
from sds import DropReason, sds_pb2


def test_deliver_lamport_is_max_of_clock_and_message() -> None:
    """PROTOCOL.md "Lamport clock" / spec "Deliver Message": on delivery ts =
    max(ts, msg.lamport); a lower timestamp never moves the clock back."""
    ch = make_channel(now=1_000)
    ch.receive(msg("b", "m1", 5_000), 1_000)
    assert ch.lamport == 5_000
    ch.receive(msg("b", "m2", 10), 1_000)
    assert ch.lamport == 5_000
    assert sds.decode(ch.send(b"x", 1_000)).lamport_timestamp == 5_001


def test_lamport_above_the_bound_is_dropped_and_never_adopted() -> None:
    """One message stamped near 2**64 would otherwise move every participant's clock
    there for good (beyond what SQLite stores): it is dropped with its own reason, the
    clock does not move, and our clock never passes MAX_LAMPORT."""
    ch = make_channel(now=1_000)
    ch.receive(msg("b", "ok", 5_000), 1_000)
    ch.receive(msg("b", "poison", (1 << 64) - 1), 1_000)
    ch.receive(msg("b", "edge", sds.MAX_LAMPORT + 1), 1_000)
    ch.receive(msg("b", "later", 5_001), 1_000)
    evs = ch.events()
    assert [d.message_id for d in drops(evs, DropReason.LAMPORT_OUT_OF_RANGE)] == [
        "poison",
        "edge",
    ]
    assert delivered_ids(evs) == ["ok", "later"]
    assert ch.lamport == 5_001
    # the wire bound itself is far beyond any wall clock: refused as too far ahead
    ch.receive(msg("b", "top", sds.MAX_LAMPORT), 1_000)
    assert [d.message_id for d in drops(ch.events(), DropReason.CLOCK_AHEAD)] == ["top"]
    assert ch.lamport == 5_001
    # a wall clock at the bound (never honestly reached) saturates there
    late = make_channel(now=sds.MAX_LAMPORT)
    assert sds.decode(late.send(b"x", sds.MAX_LAMPORT)).lamport_timestamp == sds.MAX_LAMPORT
    assert sds.decode(late.send(b"y", sds.MAX_LAMPORT)).lamport_timestamp == sds.MAX_LAMPORT


def test_ids_over_the_bound_are_dropped_with_their_reason() -> None:
    """Ids are opaque strings bounded only by the envelope; a message whose id or
    sender is longer than MAX_ID_LENGTH is dropped without delivery, ack effects or
    buffering. One naming such an id in its causal history is delivered: no message
    with that id can ever arrive, so it is neither waited nor asked for. The bound
    itself is valid, and real ids (64 hex) are far below it."""
    long_id = "m" * (sds.MAX_ID_LENGTH + 1)
    ch = make_channel(now=1_000)
    ch.receive(msg("b", long_id, 5_000), 1_000)
    ch.receive(msg("b" * (sds.MAX_ID_LENGTH + 1), "m-sender", 5_000), 1_000)
    ch.receive(msg("b", "m-hist", 5_000, [long_id]), 1_000)
    edge = "e" * sds.MAX_ID_LENGTH
    ch.receive(msg("b", edge, 5_001), 1_000)
    evs = ch.events()
    dropped = drops(evs, DropReason.ID_TOO_LONG)
    assert [(d.message_id, d.sender_id) for d in dropped] == [(None, "b"), ("m-sender", None)]
    assert dropped[0].detail == "message_id 257, sender_id 1 characters"
    assert delivered_ids(evs) == ["m-hist", edge]
    assert of(evs, sds.MessagesMissing) == []
    assert ch.incoming_ids() == [] and ch.missing_ids() == []  # nothing waits for it


def test_buffered_message_moves_clock_only_when_delivered() -> None:
    """Spec "Deliver Message": the Lamport clock follows delivered messages; a message
    still waiting for dependencies has not been delivered."""
    ch = make_channel(now=1_000)
    ch.receive(msg("b", "m2", 9_000, ["m1"]), 1_000)
    assert ch.lamport == 1_000
    ch.receive(msg("b", "m1", 8_000), 1_000)
    assert ch.lamport == 9_000


def test_log_order_by_lamport_then_id() -> None:
    """Spec "Deliver Message" + "Resolve Conflicts": the log is ordered by Lamport
    timestamp, ties in ascending order of message id, whatever the arrival order."""
    ch = make_channel(now=0)
    arrivals = [("zz", 7), ("bb", 5), ("aa", 7), ("cc", 5), ("00", 9), ("ab", 7)]
    for mid, ts in arrivals:
        ch.receive(msg("b", mid, ts), 1)
    assert ch.log_ids() == ["bb", "cc", "aa", "ab", "zz", "00"]
    assert ch.log_ids() == [m for m, _ in sorted(arrivals, key=lambda x: (x[1], x[0]))]


def test_message_delivered_event_fields_and_position() -> None:
    """Issue 2 "MessageDelivered (id, sender, lamport, content, channel, and its position
    in the log)": position counts the messages preceding it in log order."""
    ch = make_channel(now=0)
    ch.receive(msg("b", "m5", 5, content=b"five"), 1, retrieval_hint=b"h5")
    ch.receive(msg("c", "m9", 9), 1)
    ch.receive(msg("d", "m7", 7, ["m5"], content=b"seven"), 1)
    evs = of(ch.events(), sds.MessageDelivered)
    assert [(e.message_id, e.position) for e in evs] == [("m5", 0), ("m9", 1), ("m7", 1)]
    e5, _, e7 = evs
    assert (e5.channel_id, e5.sender_id, e5.lamport, e5.content) == (CID, "b", 5, b"five")
    assert e5.retrieval_hint == b"h5"
    assert e5.missing_before == 0
    assert e7.causal_history == ("m5",)
    assert sds.decode(e7.data).message_id == "m7"


def test_exactly_once_delivery() -> None:
    """Issue 2 "Delivery is exactly once" / spec "Receive Message" (MAY deduplicate): the
    same bytes received three times give one MessageDelivered and two DUPLICATE drops."""
    a = make_channel("a")
    b = make_channel("b")
    data = a.send(b"hi", 2_000)
    for t in (2_001, 2_002, 2_003):
        b.receive(data, t)
    evs = b.events()
    assert len(delivered_ids(evs)) == 1
    assert len(drops(evs, DropReason.DUPLICATE)) == 2
    assert b.log_ids() == [sds.decode(data).message_id]


def test_duplicate_of_buffered_message_dropped() -> None:
    """Spec "Receive Message": deduplication covers messages still waiting for
    dependencies: they are delivered once when the dependency arrives."""
    ch = make_channel()
    m2 = msg("b", "m2", 20, ["m1"])
    ch.receive(m2, 1)
    ch.receive(m2, 2)
    assert len(drops(ch.events(), DropReason.DUPLICATE)) == 1
    ch.receive(msg("b", "m1", 10), 3)
    assert delivered_ids(ch.events()) == ["m1", "m2"]


def test_own_echo_dropped() -> None:
    """Spec "Receive Message": the participant SHOULD ignore a message whose sender_id
    matches its own."""
    a = make_channel("a")
    data = a.send(b"x", 2_000)
    a.events()
    a.receive(data, 2_001)
    a.receive(msg("a", "forged", 5), 2_001)
    evs = a.events()
    assert len(drops(evs, DropReason.OWN_ECHO)) == 2
    assert delivered_ids(evs) == []
    assert a.log_ids() == [sds.decode(data).message_id]


def test_wrong_channel_dropped() -> None:
    """Spec "Message": channel_id identifies the channel being synchronised; a message of
    another channel is not ours."""
    ch = make_channel(channel="room-1")
    ch.receive(msg("b", "m1", 5, channel="room-2"), 1)
    evs = ch.events()
    assert [d.reason for d in drops(evs)] == [DropReason.WRONG_CHANNEL]
    assert delivered_ids(evs) == []
    assert ch.log_ids() == []


def test_missing_ids_dropped() -> None:
    """Spec "Message": sender_id and message_id MUST be set."""
    ch = make_channel()
    ch.receive(msg("", "m1", 5), 1)
    ch.receive(msg("b", "", 5), 1)
    evs = ch.events()
    assert [d.reason for d in drops(evs)] == [DropReason.MISSING_ID] * 2
    assert ch.log_ids() == []


def test_malformed_and_invalid_kind_dropped() -> None:
    """PROTOCOL.md "How a receiver classifies" (table): undecodable bytes and messages with neither
    lamport nor content are dropped with a reason, never raised."""
    ch = make_channel()
    ch.receive(b"\xff\xff\xff", 1)
    ch.receive(msg("b", "m1", None, content=None), 1)
    ch.receive(msg("b", "m2", None, content=b""), 1)
    reasons = [d.reason for d in drops(ch.events())]
    assert reasons == [DropReason.MALFORMED, DropReason.INVALID_KIND, DropReason.INVALID_KIND]


def test_oversized_content_dropped_on_receive() -> None:
    """Config.max_content_bytes: a received message with larger content is dropped
    (OVERSIZED) and not delivered, nor put in our filter."""
    ch = make_channel(max_content_bytes=10)
    ch.receive(msg("b", "big", 5, content=b"x" * 11), 1)
    ch.receive(msg("b", "ok", 6, content=b"x" * 10), 1)
    evs = ch.events()
    assert [d.message_id for d in drops(evs, DropReason.OVERSIZED)] == ["big"]
    assert delivered_ids(evs) == ["ok"]
    assert "big" not in own_filter(ch)


def test_received_content_id_enters_bloom_filter() -> None:
    """Spec "Receive Message": a message with content has its id included in the local
    bloom filter (even while it waits for dependencies)."""
    ch = make_channel()
    ch.receive(msg("b", "m1", 5), 1)
    ch.receive(msg("b", "m3", 7, ["m2"]), 1)
    f = own_filter(ch)
    assert "m1" in f
    assert "m3" in f
    assert "m2" not in f


def test_bad_filter_reported_and_message_still_delivered() -> None:
    """PROTOCOL.md "Bloom filter": a received filter whose length differs must not crash
    or block delivery: it is ignored for acks and counted (BAD_FILTER)."""
    a = make_channel("a")
    mine = sds.decode(a.send(b"x", 2_000)).message_id
    a.events()
    other_size = bloom_with(mine, capacity=5_000)
    a.receive(msg("b", "m-b", 2_001, content=b"hello", bloom=other_size), 2_001)
    evs = a.events()
    assert [d.message_id for d in drops(evs, DropReason.BAD_FILTER)] == ["m-b"]
    assert delivered_ids(evs) == ["m-b"]
    assert of(evs, sds.MessagePossiblyAcknowledged) == []
    assert a.outgoing_ids() == [mine]
    # Control: the same evidence in a filter of our size does count.
    a.receive(msg("c", "m-c", 2_002, bloom=bloom_with(mine)), 2_002)
    assert len(of(a.events(), sds.MessagePossiblyAcknowledged)) == 1


def test_bad_filter_without_outgoing_still_reported() -> None:
    """PROTOCOL.md "Bloom filter": a filter of another size is counted even when we have
    nothing to acknowledge (an empty or truncated filter too)."""
    ch = make_channel()
    ch.receive(msg("b", "m1", 5, bloom=b""), 1)
    ch.receive(msg("b", "m2", 6, bloom=b"\x00" * 17), 1)
    evs = ch.events()
    assert len(drops(evs, DropReason.BAD_FILTER)) == 2
    assert delivered_ids(evs) == ["m1", "m2"]


def test_a_dependency_that_arrived_and_waits_is_not_missing() -> None:
    """m2 names m1, which arrived but waits for m0: only m0 was never received. The
    TUI's "N missing" counted m1 too (it was only waiting)."""
    ch = make_channel()
    ch.receive(msg("b", "m1", 10, ["m0"]), 1)
    ch.receive(msg("b", "m2", 11, ["m1"]), 2)
    assert delivered_ids(ch.events()) == []
    assert sorted(ch.incoming_ids()) == ["m1", "m2"]
    assert ch.missing_ids() == ["m0"]
    ch.receive(msg("b", "m0", 9), 3)
    assert delivered_ids(ch.events()) == ["m0", "m1", "m2"]
    assert ch.missing_ids() == [] and ch.incoming_ids() == []


def test_unmet_dependency_buffers_and_reports_missing_with_hints() -> None:
    """Spec "Receive Message": dependencies are met if the causal_history ids appear in
    the local log; otherwise the message goes to the incoming buffer. Spec "Handling
    Missing Dependencies": MessagesMissing lists them with their retrieval hints."""
    ch = make_channel()
    hist = [entry("m0"), entry("m1", b"hint-1", "a"), entry("m2", b"hint-2", "c")]
    ch.receive(msg("x", "m0", 1), 1)
    ch.events()
    ch.receive(msg("b", "m3", 10, hist), 2)
    evs = ch.events()
    assert delivered_ids(evs) == []
    assert ch.incoming_ids() == ["m3"]
    assert sorted(ch.missing_ids()) == ["m1", "m2"]
    missing = of(evs, sds.MessagesMissing)
    assert len(missing) == 1
    assert missing[0].message_id == "m3"
    assert missing[0].sender_id == "b"
    assert missing[0].first is True
    assert missing[0].missing == (entry("m1", b"hint-1", "a"), entry("m2", b"hint-2", "c"))


def test_delivered_right_after_dependencies_arrive() -> None:
    """Spec "Periodic Incoming Buffer Sweep": once all dependencies of a buffered message
    are met it is delivered, right after them."""
    ch = make_channel()
    ch.receive(msg("b", "m3", 30, ["m1", "m2"]), 1)
    ch.receive(msg("b", "m2", 20), 2)
    assert delivered_ids(ch.events()) == ["m2"]
    assert ch.incoming_ids() == ["m3"]
    ch.receive(msg("b", "m1", 10), 3)
    assert delivered_ids(ch.events()) == ["m1", "m3"]
    assert ch.incoming_ids() == []
    assert ch.missing_ids() == []


def test_chained_dependencies_delivered_in_causal_order() -> None:
    """Spec "Receive Message"/"Deliver Message": a dependency that itself waits for
    another keeps its dependents waiting; all are delivered in causal order when the
    root arrives."""
    ch = make_channel()
    ch.receive(msg("b", "m4", 40, ["m3"]), 1)
    ch.receive(msg("b", "m3", 30, ["m2"]), 2)
    ch.receive(msg("b", "m2", 20, ["m1"]), 3)
    evs = ch.events()
    assert delivered_ids(evs) == []
    assert sorted(ch.incoming_ids()) == ["m2", "m3", "m4"]
    # Each was missing when first named; m2 and m3 then arrived and wait themselves.
    reported = [e.message_id for ev in of(evs, sds.MessagesMissing) for e in ev.missing]
    assert reported == ["m3", "m2", "m1"]
    ch.receive(msg("b", "m1", 10), 4)
    assert delivered_ids(ch.events()) == ["m1", "m2", "m3", "m4"]
    assert ch.log_ids() == ["m1", "m2", "m3", "m4"]
    assert ch.incoming_ids() == []


def test_sync_message_is_processed_not_delivered() -> None:
    """Spec "Periodic Sync Message": participants process the causal history and filter
    of a sync message but MUST NOT persist it: not delivered, not logged, not in filter."""
    ch = make_channel()
    ch.receive(msg("b", "sync-1", 50, ["m1"], content=None), 1)
    evs = ch.events()
    assert [s.message_id for s in of(evs, sds.SyncReceived)] == ["sync-1"]
    assert delivered_ids(evs) == []
    assert ch.log_ids() == []
    assert "sync-1" not in own_filter(ch)
    assert [m.missing for m in of(evs, sds.MessagesMissing)] == [(entry("m1"),)]


def test_bad_filter_counted_even_when_history_acks_everything() -> None:
    """PROTOCOL.md "Bloom filter": a filter of another size is ignored for acks and
    counted, also when the message's causal history acknowledges all our messages (the
    count must not depend on what we had outstanding)."""
    a = make_channel("a")
    mine = sds.decode(a.send(b"x", 2_000)).message_id
    a.events()
    a.receive(msg("b", "m-b", 2_001, [mine], bloom=bloom_with(mine, capacity=5_000)), 2_001)
    evs = a.events()
    assert [x.message_id for x in of(evs, sds.MessageAcknowledged)] == [mine]
    assert [d.message_id for d in drops(evs, DropReason.BAD_FILTER)] == ["m-b"]
    assert delivered_ids(evs) == ["m-b"]


def test_channels_receiving_one_parsed_message_share_its_id_strings() -> None:
    """A simulated broadcast is parsed once and handed to every receiver; protobuf makes
    a new str at each field access, so each channel kept its own copy of the message id
    and sender id (~170 bytes per message held per participant: ~340 MB for 200
    messages at 10,000 participants). The ids are interned: one string for all."""
    data = make_channel("author-0001").send(b"hello", 2_000)
    pb = sds_pb2.SdsMessage.FromString(data)
    receivers = [make_channel(f"r{i}") for i in range(3)]
    for ch in receivers:
        ch.receive_parsed(pb, data, 2_100)
    keys = [next(iter(ch._entries)) for ch in receivers]
    senders = [ch._entries[k].sender_id for ch, k in zip(receivers, keys, strict=True)]
    assert keys[0] == pb.message_id and senders[0] == "author-0001"
    assert all(k is keys[0] for k in keys) and all(s is senders[0] for s in senders)
    heard = [next(iter(ch._heard)) for ch in receivers]
    assert all(h is senders[0] for h in heard)
