"""Ephemeral Messages: no Lamport, history or filter; delivered at once; never logged."""

from __future__ import annotations

import re

from sds_helpers import delivered_ids, drops, make_channel, msg, of, own_filter, run_timers

import sds


def test_ephemeral_wire_form() -> None:
    """Spec "Ephemeral Messages": sent with lamport_timestamp, causal_history and
    bloom_filter unset (PROTOCOL.md: lamport unset + content = ephemeral)."""
    ch = make_channel("a", channel="room", now=1_000)
    ch.receive(msg("b", "m1", 5, channel="room"), 1_000)
    m = sds.decode(ch.send_ephemeral(b"typing...", 2_000))
    assert m.lamport_timestamp is None
    assert m.causal_history == ()
    assert m.bloom_filter is None
    assert m.repair_request == ()
    assert (m.sender_id, m.channel_id, m.content) == ("a", "room", b"typing...")
    assert m.kind is sds.MessageKind.EPHEMERAL
    assert re.fullmatch(r"[0-9a-f]{64}", m.message_id)


def test_ephemeral_send_leaves_no_state() -> None:
    """Spec "Ephemeral Messages": SHOULD NOT be added to the outgoing buffer (never
    resent), not logged, not in our filter, and the Lamport clock does not move."""
    ch = make_channel("a", now=1_000, lost_timeout_ms=0)
    clock = ch.lamport
    data = ch.send_ephemeral(b"x", 2_000)
    mid = sds.decode(data).message_id
    assert ch.lamport == clock
    assert ch.outgoing_ids() == []
    assert ch.log_ids() == []
    assert mid not in own_filter(ch)
    assert ch.events() == []
    assert ch.get_timer() is None
    _, grams = run_timers(ch, 10**7)
    assert grams == []


def test_ephemeral_ids_unique() -> None:
    """Spec "Message": each message has a unique id, ephemeral ones too."""
    ch = make_channel("a")
    ids = {sds.decode(ch.send_ephemeral(b"same", 2_000)).message_id for _ in range(20)}
    assert len(ids) == 20


def test_ephemeral_received_immediately_not_logged() -> None:
    """Spec "Ephemeral Messages": upon reception delivered immediately (EphemeralReceived)
    without buffering or inclusion in the local log, filter or causal histories."""
    a = make_channel("a")
    b = make_channel("b", now=0)
    data = a.send_ephemeral(b"hi", 2_000)
    mid = sds.decode(data).message_id
    clock = b.lamport
    b.receive(data, 2_000)
    evs = b.events()
    eph = of(evs, sds.EphemeralReceived)
    assert [(e.message_id, e.sender_id, e.content, e.channel_id) for e in eph] == [
        (mid, "a", b"hi", a.channel_id)
    ]
    assert delivered_ids(evs) == []
    assert b.log_ids() == []
    assert b.incoming_ids() == []
    assert b.lamport == clock
    assert mid not in own_filter(b)
    assert b.get_timer() is None  # nothing to sync about
    b.receive(msg("c", "m1", 5), 2_001)
    hist = sds.decode(b.send(b"z", 2_002)).causal_history
    assert [e.message_id for e in hist] == ["m1"]


def test_ephemeral_does_not_acknowledge() -> None:
    """Spec "Ephemeral Messages": no reliability: an ephemeral message carries no
    history or filter, so it acknowledges nothing."""
    a = make_channel("a")
    mine = sds.decode(a.send(b"x", 2_000)).message_id
    a.events()
    a.receive(msg("b", "e1", None, content=b"typing"), 2_001)
    evs = a.events()
    assert of(evs, sds.MessageAcknowledged) == []
    assert of(evs, sds.MessagePossiblyAcknowledged) == []
    assert a.outgoing_ids() == [mine]


def test_own_ephemeral_echo_dropped() -> None:
    """Spec "Receive Message": our own ephemeral message coming back is ignored."""
    a = make_channel("a")
    a.receive(a.send_ephemeral(b"x", 2_000), 2_000)
    evs = a.events()
    assert [d.reason for d in drops(evs)] == [sds.DropReason.OWN_ECHO]
    assert of(evs, sds.EphemeralReceived) == []


def test_oversized_ephemeral_dropped_on_receive() -> None:
    """Config.max_content_bytes applies to ephemeral content too."""
    b = make_channel("b", max_content_bytes=4)
    b.receive(msg("a", "e1", None, content=b"12345"), 1)
    evs = b.events()
    assert [d.reason for d in drops(evs)] == [sds.DropReason.OVERSIZED]
    assert of(evs, sds.EphemeralReceived) == []
