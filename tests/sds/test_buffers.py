"""Outgoing and incoming buffer sweeps, lost timeout, caps, bounded memory."""

from __future__ import annotations

import pytest
from sds_helpers import delivered_ids, drops, entry, make_channel, msg, of, run_timers

import sds
from sds import DropReason

RESEND = 30_000
POSSIBLY = 60_000


def resends(grams: list[sds.Datagram]) -> list[sds.Datagram]:
    return [g for g in grams if g.kind == "resend"]


# ------------------------------------------------------------------ outgoing sweep


def test_unacknowledged_message_resent_every_period() -> None:
    """Spec "Periodic Outgoing Buffer Sweep": unacknowledged messages are rebroadcast
    after a set period (Config.resend_unacknowledged_ms), the same bytes each time."""
    a = make_channel("a", now=0, lost_timeout_ms=0)
    data = a.send(b"x", 1_000)
    mid = sds.decode(data).message_id
    a.events()
    assert a.get_timer() is not None and a.get_timer() <= 1_000 + RESEND
    evs, grams = run_timers(a, 1_000 + RESEND - 1)
    assert resends(grams) == []
    evs, grams = run_timers(a, 1_000 + 3 * RESEND)
    assert [g.data for g in resends(grams)] == [data] * 3
    assert all(g.message_id == mid for g in resends(grams))
    rs = of(evs, sds.MessageResent)
    assert [(r.message_id, r.attempt, r.possibly_acknowledged) for r in rs] == [
        (mid, 1, False),
        (mid, 2, False),
        (mid, 3, False),
    ]


def test_possibly_acknowledged_resent_on_longer_period() -> None:
    """Spec "Periodic Outgoing Buffer Sweep": distinct resend periods for unacknowledged
    and possibly acknowledged messages, prioritising unacknowledged ones: once possibly
    acknowledged, the next resend comes resend_possibly_acknowledged_ms after the last
    send, not on the unacknowledged schedule."""
    a = make_channel("a", now=0, lost_timeout_ms=0)
    unacked = a.send(b"u", 1_000)
    possibly = a.send(b"p", 1_000)
    pid = sds.decode(possibly).message_id
    a.events()
    a.receive(msg("b", "m-b", 1_500, bloom=_bloom(pid)), 1_500)
    a.events()
    assert a.outgoing_state(pid) == sds.OwnState.POSSIBLY_ACKNOWLEDGED
    _, grams = run_timers(a, 1_000 + RESEND)
    assert [g.data for g in resends(grams)] == [unacked]
    evs, grams = run_timers(a, 1_000 + POSSIBLY)
    assert [g.data for g in resends(grams)] == [unacked, possibly]
    pr = [r for r in of(evs, sds.MessageResent) if r.message_id == pid]
    assert [(r.attempt, r.possibly_acknowledged) for r in pr] == [(1, True)]
    # And on the longer period from then on.
    _, grams = run_timers(a, 1_000 + 2 * POSSIBLY - 1)
    assert [g.data for g in resends(grams)].count(possibly) == 0
    _, grams = run_timers(a, 1_000 + 2 * POSSIBLY)
    assert [g.data for g in resends(grams)].count(possibly) == 1


def _bloom(*ids: str) -> bytes:
    from sds_helpers import bloom_with

    return bloom_with(*ids)


def test_resends_stop_after_max_attempts() -> None:
    """Spec "Periodic Outgoing Buffer Sweep" / PROTOCOL.md defaults (up to 10 attempts):
    after max_resend_attempts resends the message fails with reason resends_exhausted."""
    a = make_channel("a", now=0, lost_timeout_ms=0, max_resend_attempts=4)
    data = a.send(b"x", 1_000)
    mid = sds.decode(data).message_id
    a.events()
    evs, grams = run_timers(a, 1_000 + 50 * RESEND)
    assert len(resends(grams)) == 4
    failed = of(evs, sds.MessageSendFailed)
    assert [(f.message_id, f.reason, f.attempts) for f in failed] == [
        (mid, "resends_exhausted", 4)
    ]
    assert a.outgoing_ids() == []
    assert resends(run_timers(a, 1_000 + 200 * RESEND)[1]) == []


def test_default_ten_resends() -> None:
    """PROTOCOL.md "js-waku defaults": resend every 30 s, up to 10 attempts."""
    a = make_channel("a", now=0, lost_timeout_ms=0)
    a.send(b"x", 0)
    a.events()
    evs, grams = run_timers(a, 11 * RESEND)
    assert len(resends(grams)) == 10
    assert [f.reason for f in of(evs, sds.MessageSendFailed)] == ["resends_exhausted"]


def test_outgoing_cap_fails_oldest_with_buffer_full() -> None:
    """Config.outgoing_buffer_cap: when the outgoing buffer is full the oldest entry is
    reported MessageSendFailed("buffer_full") and dropped; the buffer never exceeds the cap."""
    a = make_channel("a", outgoing_buffer_cap=3)
    ids = [sds.decode(a.send(f"{i}".encode(), 2_000 + i)).message_id for i in range(5)]
    failed = of(a.events(), sds.MessageSendFailed)
    assert [(f.message_id, f.reason) for f in failed] == [
        (ids[0], "buffer_full"),
        (ids[1], "buffer_full"),
    ]
    assert a.outgoing_ids() == ids[2:]
    # Failed messages are not resent.
    _, grams = run_timers(a, 2_000 + RESEND + 10)
    assert {g.message_id for g in resends(grams)} == set(ids[2:])


# ------------------------------------------------------------------ incoming sweep


def test_sweep_repeats_missing_for_the_application() -> None:
    """Spec "Periodic Incoming Buffer Sweep": the participant periodically checks the
    buffer and MAY retrieve missing dependencies: MessagesMissing (first=False) repeats
    the really missing ids every sweep_interval_ms, not ones that arrived and wait."""
    ch = make_channel("a", now=0, repair_enabled=False, lost_timeout_ms=0)
    ch.receive(msg("b", "m3", 30, [entry("m2", b"h2")]), 1_000)
    ch.receive(msg("b", "m2", 20, [entry("m1", b"h1")]), 1_000)
    ch.events()
    evs, _ = run_timers(ch, 1_000 + 10_000)
    reminders = [e for e in of(evs, sds.MessagesMissing) if not e.first]
    assert len(reminders) == 1
    assert reminders[0].missing == (entry("m1", b"h1"),)
    ch.receive(msg("b", "m1", 10), 12_000)
    assert delivered_ids(ch.events()) == ["m1", "m2", "m3"]
    evs, _ = run_timers(ch, 200_000)
    assert of(evs, sds.MessagesMissing) == []


def test_mark_dependencies_met_releases_waiters() -> None:
    """Spec "Periodic Incoming Buffer Sweep": when all dependencies of a buffered message
    are met (here: storage vouches for them via mark_dependencies_met) it is delivered."""
    ch = make_channel("a", now=0)
    ch.receive(msg("b", "m3", 30, ["m1", "m2"]), 1_000)
    ch.receive(msg("b", "m4", 40, ["m3"]), 1_000)
    ch.events()
    ch.mark_dependencies_met(["m1"], 1_001)
    assert delivered_ids(ch.events()) == []
    ch.mark_dependencies_met(["m2"], 1_002)
    evs = ch.events()
    assert delivered_ids(evs) == ["m3", "m4"]
    assert all(e.missing_before == 0 for e in of(evs, sds.MessageDelivered))
    assert ch.incoming_ids() == [] and ch.missing_ids() == []
    # Vouched-for ids count as present for later messages too.
    ch.receive(msg("c", "m5", 50, ["m1"]), 1_003)
    assert delivered_ids(ch.events()) == ["m5"]


def test_lost_timeout_reports_once_and_delivers_waiters() -> None:
    """Spec "Periodic Incoming Buffer Sweep": dependencies not met after a predetermined
    time MAY be marked irretrievably lost; spec "Timeout for Lost Messages": MessageLost
    once per id, the waiting messages are delivered (missing_before > 0), and a lost id
    named again later is not reported again."""
    lost_ms = 50_000
    ch = make_channel("a", now=0, lost_timeout_ms=lost_ms, repair_enabled=False)
    ch.receive(msg("b", "m2", 20, ["m1", "m0"]), 1_000)
    ch.receive(msg("c", "m3", 30, ["m1", "m2"]), 2_000)
    ch.events()
    evs, _ = run_timers(ch, 1_000 + lost_ms - 1)
    assert of(evs, sds.MessageLost) == []
    evs, _ = run_timers(ch, 1_000 + lost_ms)
    lost = of(evs, sds.MessageLost)
    assert sorted((x.message_id, x.waiting) for x in lost) == [
        ("m0", ("m2",)),
        ("m1", ("m2", "m3")),
    ]
    delivered = of(evs, sds.MessageDelivered)
    assert [(d.message_id, d.missing_before) for d in delivered] == [("m2", 2), ("m3", 1)]
    # Referenced again: delivered at once, neither missing nor lost again.
    ch.receive(msg("d", "m4", 40, ["m1", "m0", "m3"]), 100_000)
    evs = ch.events()
    assert delivered_ids(evs) == ["m4"]
    assert of(evs, sds.MessagesMissing) == []
    evs, _ = run_timers(ch, 10**7)
    assert of(evs, sds.MessageLost) == []
    assert ch.missing_ids() == []


def test_lost_message_that_arrives_later_is_delivered() -> None:
    """Spec "Deliver Message": a message declared lost that turns up later is still
    delivered (once) into its place in the log."""
    ch = make_channel("a", now=0, lost_timeout_ms=10_000, repair_enabled=False)
    ch.receive(msg("b", "m2", 20, ["m1"]), 1_000)
    run_timers(ch, 11_000)
    ch.receive(msg("b", "m1", 10), 12_000)
    ch.receive(msg("b", "m1", 10), 12_001)
    evs = ch.events()
    assert delivered_ids(evs) == ["m1"]
    assert len(drops(evs, DropReason.DUPLICATE)) == 1
    assert ch.log_ids() == ["m1", "m2"]


def test_lost_timeout_zero_waits_forever() -> None:
    """Config.lost_timeout_ms = 0 (js-waku's default): nothing is ever declared lost."""
    ch = make_channel("a", now=0, lost_timeout_ms=0, repair_enabled=False)
    ch.receive(msg("b", "m2", 20, ["m1"]), 1_000)
    evs, _ = run_timers(ch, 10**8)
    assert of(evs, sds.MessageLost) == []
    assert ch.incoming_ids() == ["m2"]


def test_incoming_cap_drops_oldest() -> None:
    """Config.incoming_buffer_cap: when the incoming buffer is full the oldest waiting
    message is dropped (INCOMING_BUFFER_FULL); the buffer never exceeds the cap."""
    ch = make_channel("a", incoming_buffer_cap=2)
    for i in range(4):
        ch.receive(msg("b", f"w{i}", 10 + i, [f"dep{i}"]), 1_000)
        assert len(ch.incoming_ids()) <= 2
    evs = ch.events()
    assert [d.message_id for d in drops(evs, DropReason.INCOMING_BUFFER_FULL)] == ["w0", "w1"]
    assert ch.incoming_ids() == ["w2", "w3"]
    # The survivors are still delivered when their dependencies arrive.
    ch.receive(msg("c", "dep3", 1), 1_001)
    assert delivered_ids(ch.events()) == ["dep3", "w3"]


def test_missing_cap_declares_oldest_lost() -> None:
    """Config.max_missing (spec "Periodic Incoming Buffer Sweep": MAY mark dependencies
    irretrievably lost): beyond the cap the longest-missing id is declared lost at once,
    reported once, and its waiter delivered; ids that arrived and wait are not counted
    as lost."""
    ch = make_channel("a", now=0, max_missing=2, lost_timeout_ms=0, repair_enabled=False)
    ch.receive(msg("b", "w1", 10, ["d1"]), 1_000)
    ch.receive(msg("b", "w2", 20, ["d2"]), 1_001)
    assert of(ch.events(), sds.MessageLost) == []
    ch.receive(msg("b", "w3", 30, ["d3"]), 1_002)
    evs = ch.events()
    assert [(x.message_id, x.waiting) for x in of(evs, sds.MessageLost)] == [("d1", ("w1",))]
    assert [(d.message_id, d.missing_before) for d in of(evs, sds.MessageDelivered)] == [
        ("w1", 1)
    ]
    assert sorted(ch.missing_ids()) == ["d2", "d3"]
    # A sync naming two more unknown ids: b and c named two each, so each gives up its
    # longest-missing one (per-sender fairness, issue 26: the sender that named the
    # most gives way first).
    ch.receive(msg("c", "s", 40, ["x1", "x2"], content=None), 1_003)
    evs = ch.events()
    assert sorted(x.message_id for x in of(evs, sds.MessageLost)) == ["d2", "x1"]
    assert delivered_ids(evs) == ["w2"]
    assert sorted(ch.missing_ids()) == ["d3", "x2"]
    # c names three more: c has the most, and gives them up first
    ch.receive(msg("c", "s2", 50, ["x3", "x4", "x5"], content=None), 1_004)
    evs = ch.events()
    assert sorted(x.message_id for x in of(evs, sds.MessageLost)) == ["x2", "x3", "x4"]
    assert sorted(ch.missing_ids()) == ["d3", "x5"]


def test_missing_cap_skips_ids_that_arrived_and_wait() -> None:
    """Config.max_missing: a dependency that arrived but waits itself is not lost; only
    the really missing root is declared lost, and the chain is delivered in order."""
    ch = make_channel("a", now=0, max_missing=1, lost_timeout_ms=0, repair_enabled=False)
    ch.receive(msg("b", "m3", 30, ["m2"]), 1_000)
    ch.receive(msg("b", "m2", 20, ["m1"]), 1_001)
    evs = ch.events()
    assert [x.message_id for x in of(evs, sds.MessageLost)] == ["m1"]
    assert [(d.message_id, d.missing_before) for d in of(evs, sds.MessageDelivered)] == [
        ("m2", 1),
        ("m3", 0),
    ]


def test_evicted_message_can_come_back() -> None:
    """Config.incoming_buffer_cap: "repair or storage can bring it back": an evicted
    message received again is buffered again, not dropped as a duplicate."""
    ch = make_channel("a", incoming_buffer_cap=1)
    first = msg("b", "w0", 10, ["dep"])
    ch.receive(first, 1_000)
    ch.receive(msg("b", "w1", 11, ["other"]), 1_000)
    ch.receive(first, 1_001)
    evs = ch.events()
    assert drops(evs, DropReason.DUPLICATE) == []
    assert ch.incoming_ids() == ["w0"]
    ch.receive(msg("c", "dep", 1), 1_002)
    assert delivered_ids(ch.events()) == ["dep", "w0"]


# ------------------------------------------------------------------ bounded memory


def test_log_window_evicts_and_positions_continue() -> None:
    """Issue 2 "Memory stays bounded": the in-core log keeps a window of the most recent
    ids; positions keep counting the evicted ones."""
    ch = make_channel("a", now=0, log_window=5, causal_history_size=2)
    for i in range(12):
        ch.receive(msg("b", f"m{i:02d}", 10 + i), 1_000)
    evs = of(ch.events(), sds.MessageDelivered)
    assert [e.position for e in evs] == list(range(12))
    assert ch.log_ids() == [f"m{i:02d}" for i in range(7, 12)]
    assert ch.log_size == 12
    assert not ch.has_message("m00")
    hist = sds.decode(ch.send(b"x", 2_000)).causal_history
    assert [h.message_id for h in hist] == ["m10", "m11"]


@pytest.mark.parametrize("lost_timeout_ms", [0, 5_000])
def test_memory_bounded_after_30000_messages(lost_timeout_ms: int) -> None:
    """Issue 2 "Memory stays bounded ... nothing grows per received message without
    bound": 30,000 messages (15,000 each way) plus messages naming ids nobody has, with
    a small window: every buffer in stats() stays within its Config bound, for sender
    and receiver, whether or not the lost timeout is enabled."""
    cfg = sds.Config(
        bloom_capacity=1_000,
        bloom_error_rate=0.01,
        causal_history_size=4,
        log_window=100,
        repair_cache_size=16,
        repair_buffer_size=30,
        outgoing_buffer_cap=50,
        incoming_buffer_cap=20,
        max_missing=40,
        lost_timeout_ms=lost_timeout_ms,
        sync_interval_ms=1_000_000,
    )
    a = make_channel("a", now=0, config=cfg)
    b = make_channel("b", now=0, config=cfg)
    for i in range(15_000):
        now = i + 1
        b.receive(a.send(b"a%d" % i, now), now)
        a.receive(b.send(b"b%d" % i, now), now)
        if i % 1_000 == 0:
            for ch in (a, b):
                ch.handle_timer(now)
        if i % 5 == 0:
            # Gaps: messages and syncs naming ids nobody has.
            b.receive(msg("z", f"gap{i}", now, [f"never{i}"]), now)
            a.receive(msg("z", f"sync{i}", now, [f"nix{i}", f"nada{i}"], content=None), now)
        for ch in (a, b):
            ch.events()
            ch.datagrams_to_send()
    for ch in (a, b):
        s = ch.stats()
        assert s["log_total"] >= 15_000
        assert s["log_window"] <= 100
        assert s["outgoing"] <= 50
        assert s["incoming"] <= 20
        assert s["missing"] <= 40 + 20
        assert s["bloom_items"] <= 1_000
        assert s["repair_cache"] <= 16
        assert s["lost_known"] <= 100
        assert s["met_elsewhere"] <= 100
        assert s["repair_requests"] <= 30
        assert s["repair_responses"] <= 30
        # Lazy-deletion heaps hold stale entries, but a bounded number of them.
        assert s["resend_heap"] <= 4 * 50 + 64 + 1
        assert s["lost_heap"] <= 4 * (40 + 20) + 64 + 1


def test_lost_message_reaches_peer_through_resend() -> None:
    """Spec "Periodic Outgoing Buffer Sweep": a message lost on the way is rebroadcast
    while unacknowledged and reaches the peer, which delivers it once; the peer's next
    message acknowledges it and the resends stop."""
    from sds_helpers import Net

    a = make_channel("a", now=0, repair_enabled=False)
    b = make_channel("b", now=0, repair_enabled=False)
    net = Net(a, b, now=1_000)
    net.blocked.add(("a", "b"))
    mid = net.send("a", b"lost once")
    net.blocked.clear()
    assert not b.has_message(mid)
    net.advance(1_000 + RESEND)
    assert delivered_ids(net.take("b")) == [mid]
    net.send("b", b"reply")
    assert [x.message_id for x in of(net.take("a"), sds.MessageAcknowledged)] == [mid]
    before = len(net.wire)
    net.advance(1_000 + 10 * RESEND)
    assert all(sds.decode(d).message_id != mid for _, d in net.wire[before:])


def test_messages_that_name_each_other_are_released_at_the_lost_timeout() -> None:
    """A names B and B names A (only a faulty or hostile peer writes that): no arrival
    can release them. At the lost timeout the cycle is broken: B is reported lost for
    A's ordering, A is delivered, then B (recovered). The sweep does not remind of ids
    that only wait. A chain to a truly missing id is left to that id's own timer."""
    a = make_channel("a", lost_timeout_ms=20_000)
    a.receive(msg("b", "A", 2_000, ["B"]), 2_000)
    a.receive(msg("b", "B", 2_001, ["A"]), 2_001)
    evs = a.events()
    assert delivered_ids(evs) == [] and sorted(a.incoming_ids()) == ["A", "B"]
    later, _ = run_timers(a, 2_000 + 19_000)
    assert delivered_ids(later) == []
    assert all(m.missing for m in of(later, sds.MessagesMissing))  # no empty reminders
    later, _ = run_timers(a, 2_000 + 20_000)  # B's timer (missing since A arrived)
    assert [e.message_id for e in of(later, sds.MessageLost)] == ["B"]
    assert delivered_ids(later) == ["A", "B"]
    assert a.incoming_ids() == [] and a.missing_ids() == []

    # a chain: C names D (arrived, waits), D names E (never arrived). D's own timer
    # does not release C early: E's timer does, and then D and C follow in order.
    c = make_channel("c", lost_timeout_ms=20_000)
    c.receive(msg("b", "C", 2_000, ["D"]), 2_000)
    c.receive(msg("b", "D", 1_999, ["E"]), 10_000)
    c.events()
    mid_way, _ = run_timers(c, 2_000 + 20_000)
    assert delivered_ids(mid_way) == []
    later, _ = run_timers(c, 10_000 + 20_000)
    assert [e.message_id for e in of(later, sds.MessageLost)] == ["E"]
    assert delivered_ids(later) == ["D", "C"]


def test_a_cycle_that_forms_behind_a_missing_id_is_still_released() -> None:
    """D names E; E names D and X (X never arrives). While X is missing the pair waits
    for X's timer; the pair's own timers (E's at 22 s, D's at 25 s) come before X is
    declared lost (25 s, after D's) and find X still missing. Once X is lost, D and E
    only name each other: they are looked at again a lost timeout later, released."""
    a = make_channel("a", lost_timeout_ms=20_000)
    a.receive(msg("b", "D", 2_000, ["E"]), 2_000)
    a.receive(msg("b", "E", 2_001, ["D", "X"]), 5_000)
    a.events()
    evs, _ = run_timers(a, 5_000 + 20_000)
    assert [e.message_id for e in of(evs, sds.MessageLost)] == ["X"]
    assert delivered_ids(evs) == [] and sorted(a.incoming_ids()) == ["D", "E"]
    evs, _ = run_timers(a, 5_000 + 3 * 20_000)
    assert sorted(delivered_ids(evs)) == ["D", "E"]
    assert a.incoming_ids() == [] and a.missing_ids() == []
