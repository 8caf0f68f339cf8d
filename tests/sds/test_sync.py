"""Periodic Sync Message: when it is sent, what it carries, how it is received."""

from __future__ import annotations

import random
import re

from sds_helpers import delivered_ids, drops, make_channel, msg, of, own_filter, run_timers

import sds

HEX64 = re.compile(r"[0-9a-f]{64}")


def syncs(grams: list[sds.Datagram]) -> list[sds.Datagram]:
    return [g for g in grams if g.kind == "sync"]


def test_no_sync_without_history() -> None:
    """PROTOCOL.md "js-waku defaults": no sync when history and repair requests are
    empty: a fresh channel has no timer and sends nothing, however late."""
    ch = make_channel(now=0)
    assert ch.get_timer() is None
    ch.handle_timer(10**9)
    assert ch.datagrams_to_send() == []
    assert ch.events() == []


def test_sync_sent_on_timer_once_there_is_history() -> None:
    """Spec "Periodic Sync Message": participants SHOULD periodically send sync messages;
    PROTOCOL.md: after a random delay in [0, sync_interval)."""
    ch = make_channel(now=0, lost_timeout_ms=0)
    ch.send(b"x", 1_000)
    ch.events()
    t = ch.get_timer()
    assert t is not None and 1_000 <= t < 1_000 + ch.config.sync_interval_ms
    evs, grams = run_timers(ch, t - 1)
    assert syncs(grams) == []
    evs, grams = run_timers(ch, t)
    assert len(syncs(grams)) == 1
    assert len(of(evs, sds.SyncSent)) == 1
    # And again, periodically.
    _, grams = run_timers(ch, 1_000 + 29 * ch.config.sync_interval_ms)
    assert len(syncs(grams)) >= 10


def test_sync_delays_are_random_within_interval() -> None:
    """PROTOCOL.md "js-waku defaults": sync after a random delay in [0, 30 s), from the
    injected rng (different seeds, different delays)."""
    delays = set()
    for seed in range(20):
        ch = make_channel(now=0, seed=seed, lost_timeout_ms=0, resend_unacknowledged_ms=10**9)
        ch.send(b"x", 0)
        t = ch.get_timer()
        assert t is not None and 0 <= t < 30_000
        delays.add(t)
    assert len(delays) > 10


def test_sync_message_contents() -> None:
    """Spec "Periodic Sync Message": empty content, an incremented Lamport timestamp,
    causal history and bloom filter by the regular rules; a random 64-hex id."""
    ch = make_channel(now=0, lost_timeout_ms=0, causal_history_size=2)
    ids = [sds.decode(ch.send(f"{i}".encode(), 1_000 + i)).message_id for i in range(3)]
    ch.events()
    before = ch.lamport
    t = ch.get_timer()
    assert t is not None
    ch.handle_timer(t)
    grams = syncs(ch.datagrams_to_send())
    assert len(grams) == 1
    m = sds.decode(grams[0].data)
    assert m.kind is sds.MessageKind.SYNC
    assert not m.content
    assert m.lamport_timestamp == max(t, before + 1)
    assert m.lamport_timestamp > before
    assert ch.lamport == m.lamport_timestamp
    assert [e.message_id for e in m.causal_history] == ids[-2:]
    assert m.bloom_filter == ch.bloom_filter_bytes()
    assert HEX64.fullmatch(m.message_id)
    assert grams[0].message_id == m.message_id
    sent = of(ch.events(), sds.SyncSent)
    assert [(s.message_id, s.lamport) for s in sent] == [(m.message_id, m.lamport_timestamp)]


def test_sync_not_logged_buffered_or_filtered_by_sender() -> None:
    """Spec "Periodic Sync Message": MUST NOT be added to the outgoing buffer, the local
    log, bloom filters, nor causal histories of subsequent messages; ids are random."""
    ch = make_channel(now=0, lost_timeout_ms=0)
    mid = sds.decode(ch.send(b"x", 1_000)).message_id
    ch.events()
    _, grams = run_timers(ch, 200_000)
    sync_ids = [sds.decode(g.data).message_id for g in syncs(grams)]
    assert len(sync_ids) >= 3
    assert len(set(sync_ids)) == len(sync_ids)
    assert ch.log_ids() == [mid]
    assert set(ch.outgoing_ids()) <= {mid}
    f = own_filter(ch)
    assert not any(s in f for s in sync_ids)
    nxt = sds.decode(ch.send(b"y", 300_000))
    assert [e.message_id for e in nxt.causal_history] == [mid]


def test_received_sync_not_persisted() -> None:
    """Spec "Periodic Sync Message": receivers MUST NOT persist sync messages: not
    delivered, not logged, not in their filter, not in their later causal histories."""
    a = make_channel("a", now=0, lost_timeout_ms=0)
    b = make_channel("b", now=0)
    b.receive(a.send(b"x", 1_000), 1_000)
    b.events()
    _, grams = run_timers(a, 60_000)
    sync = syncs(grams)[0]
    b.receive(sync.data, 60_000)
    evs = b.events()
    sync_id = sds.decode(sync.data).message_id
    assert [s.message_id for s in of(evs, sds.SyncReceived)] == [sync_id]
    assert delivered_ids(evs) == []
    assert sync_id not in b.log_ids()
    assert sync_id not in own_filter(b)
    hist = sds.decode(b.send(b"y", 60_001)).causal_history
    assert sync_id not in [e.message_id for e in hist]


def test_received_sync_does_not_move_lamport_of_receiver_log() -> None:
    """Spec "Periodic Sync Message": a received sync is not delivered, so it does not
    enter the log (Deliver Message is what moves the log)."""
    b = make_channel("b", now=0)
    b.receive(msg("a", "s1", 10**6, content=None), 5)
    assert b.log_ids() == []
    assert b.log_size == 0


def test_received_sync_acks_our_messages_and_reports_missing() -> None:
    """Spec "Periodic Sync Message": participants MUST process the causal history and
    bloom filter of sync messages like regular messages: acks for our messages and
    missing dependencies."""
    a = make_channel("a", now=0)
    b = make_channel("b", now=0, lost_timeout_ms=0)
    data = a.send(b"x", 1_000)
    mid = sds.decode(data).message_id
    a.events()
    b.receive(msg("c", "m-c", 900), 1_000)  # b has something a lacks
    b.receive(data, 1_001)
    assert delivered_ids(b.events()) == ["m-c", mid]
    _, grams = run_timers(b, 60_000)
    sync = syncs(grams)[0]
    a.receive(sync.data, 60_000)
    evs = a.events()
    acked = [x.message_id for x in of(evs, sds.MessageAcknowledged)]
    assert mid in acked
    missing = [e.message_id for ev in of(evs, sds.MessagesMissing) for e in ev.missing]
    assert missing == ["m-c"]
    assert "m-c" in a.missing_ids()
    assert of(evs, sds.SyncReceived)


def test_own_sync_echo_dropped() -> None:
    """Spec "Receive Message": our own sync coming back is ignored."""
    ch = make_channel(now=0, lost_timeout_ms=0)
    ch.send(b"x", 0)
    ch.events()
    _, grams = run_timers(ch, 60_000)
    ch.receive(syncs(grams)[0].data, 60_000)
    evs = ch.events()
    assert [d.reason for d in drops(evs)] == [sds.DropReason.OWN_ECHO]
    assert of(evs, sds.SyncReceived) == []


def test_sync_sooner_after_receiving_content() -> None:
    """PROTOCOL.md "js-waku defaults": the sync delay is shortened after receiving
    content (0.5x), so the content is acknowledged soon."""
    later = []
    for seed in range(10):
        b = make_channel("b", now=0, seed=seed, lost_timeout_ms=0)
        b.receive(msg("a", "m1", 5), 1_000)
        t = b.get_timer()
        assert t is not None and 1_000 <= t < 1_000 + b.config.sync_interval_ms // 2
        later.append(t)
    assert len(set(later)) > 1


def test_sync_postponed_by_own_content_message() -> None:
    """Spec "Periodic Sync Message": a participant MAY only send periodic syncs if no
    other messages have been broadcast after a random backoff: our own content message
    (which carries the same acks) restarts the backoff."""
    postponed = 0
    for seed in range(10):
        ch = make_channel(now=0, seed=seed, lost_timeout_ms=0, resend_unacknowledged_ms=10**9)
        ch.send(b"x", 0)
        first = ch.get_timer()
        assert first is not None and first > 0
        ch.send(b"y", first - 1)
        t = ch.get_timer()
        assert t is not None and t >= first - 1
        if t > first:
            postponed += 1
            ch.handle_timer(first)
            assert syncs(ch.datagrams_to_send()) == []
    assert postponed >= 8



def test_a_sync_asked_for_goes_out_with_an_empty_log() -> None:
    """A member that has accepted nothing yet (its clock a day behind: every message is
    ahead of it) has nothing to name, yet its time is what the others need to vote on
    (app/node/clock_guard.py): an asked-for sync goes out anyway, once."""
    ch = make_channel("a", now=0)
    period = ch.config.sync_interval_ms
    _evs, grams = run_timers(ch, 2 * period)
    assert grams == []  # nothing to say
    ch.ask_sync()
    _evs, grams = run_timers(ch, 4 * period)
    syncs = [sds.decode(g.data) for g in grams if g.kind == "sync"]
    assert len(syncs) == 1 and syncs[0].causal_history == ()
    _evs, grams = run_timers(ch, 6 * period)
    assert grams == []


def test_a_member_that_joined_long_before_the_first_line_does_not_sync_at_once() -> None:
    """The sync deadline drawn when a channel starts passes unused while the log is
    empty; the first line then draws it again (within half an interval after content,
    as for a new channel) instead of firing the stale one at once. Kept, every member
    that joined more than an interval before the first line synced on hearing it
    (bench/real_vs_sim.py, 40 real nodes: 21 syncs in the second after the first line,
    3 in the sim)."""
    cfg = sds.Config()
    for joined_before in (0, 10 * cfg.sync_interval_ms):
        now = 1_000 + joined_before
        ch = sds.Channel("chan", "bob", cfg, 1_000, random.Random(5))
        assert ch.get_timer() is None  # nothing to sync
        ch.receive(sds.Channel("chan", "alice", cfg, now).send(b"first line", now), now)
        due = ch.get_timer()
        assert due is not None and now < due <= now + cfg.sync_interval_ms // 2, (
            joined_before, due - now)
