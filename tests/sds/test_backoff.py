"""Resends back off while nobody listens (sds/backoff.py; issue 41 item 8), in virtual time.

Alone in a channel, a participant resends a few of its due messages per sweep, the
sweeps further apart each time (doubling, capped); the first sign of a peer ends it
and what waited is resent over one resend period; a channel whose peers answer is
not changed at all; the state saved while backing off keeps backing off after a
restart, and one saved before the key existed loads as it always did.
"""

from __future__ import annotations

import itertools
import random

from sds_helpers import Net, make_channel, of, run_timers

import sds
from sds.tuning import QUIET_RESENDS

BASE = 30_000
CAP = 30 * 60_000
ON = sds.Config(resend_backoff_max_ms=CAP)


def _bot(n: int, config: sds.Config = ON, now: int = 1_000) -> sds.Channel:
    """A participant alone in its channel that has sent ``n`` lines at once."""
    ch = make_channel("bot", config=config, now=now)
    for i in range(n):
        ch.send(b"line %d" % i, now)
    ch.events()
    ch.datagrams_to_send()
    return ch


def test_alone_the_resends_back_off_doubling_up_to_the_cap() -> None:
    ch = _bot(5_000)
    sweeps: list[tuple[int, int]] = []
    for _ in range(100_000):  # bounded: every deadline (syncs too) for six hours
        t = ch.get_timer()
        assert t is not None
        if t > 1_000 + 6 * 3_600_000:
            break
        ch.handle_timer(t)
        n = len([d for d in ch.datagrams_to_send() if d.kind == "resend"])
        ch.events()
        if n:
            sweeps.append((t, n))
    assert all(n <= QUIET_RESENDS for _, n in sweeps)
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(sweeps)]
    assert gaps[:6] == [2 * BASE, 4 * BASE, 8 * BASE, 16 * BASE, 32 * BASE, CAP]
    assert set(gaps[6:]) == {CAP}
    assert sweeps[0][0] == 1_000 + BASE  # the first resend is on time
    # six hours alone: a few dozen resends, where every 30 s meant 45,000 in 5 minutes
    assert sum(n for _, n in sweeps) < 150
    assert ch.resend_backoff == len(sweeps)
    assert len(ch.outgoing_ids()) == 5_000  # none given up for lack of listeners


def test_without_the_backoff_every_due_message_goes_every_period() -> None:
    ch = _bot(50, sds.Config())
    _, grams = run_timers(ch, 1_000 + 11 * BASE)
    assert len([d for d in grams if d.kind == "resend"]) == 50 * 10
    assert ch.resend_backoff == 0


def test_the_first_sign_of_a_peer_ends_it_and_what_waited_goes_within_a_period() -> None:
    bot = _bot(200)
    run_timers(bot, 1_000 + 20 * 60_000)  # twenty quiet minutes
    assert bot.resend_backoff >= 4
    peer = make_channel("peer", config=ON, now=bot.lamport)
    net = Net(bot, peer, now=1_000 + 20 * 60_000)
    net.send("peer", b"hello, anyone?")  # a sign of a peer
    assert bot.resend_backoff == 0
    net.take("bot")
    start = net.now
    net.advance(start + BASE)
    resent = [e.message_id for e in of(net.take("bot"), sds.MessageResent)]
    # spread over one period, in the order they were sent: each once, each delivered
    assert len(resent) == len(set(resent))
    assert peer.log_size == 201 and peer.incoming_ids() == []
    net.advance(start + 4 * BASE)
    assert bot.outgoing_ids() == []  # and acknowledged by the newcomer's syncs


def test_a_channel_whose_peers_answer_is_unchanged() -> None:
    """Two chatty members on a lossy link: the same events and bytes with the backoff on
    and off (every acknowledgement is a sign of a peer, so it never backs off)."""

    def run(config: sds.Config) -> list[bytes]:
        a = make_channel("a", config=config, seed=1)
        b = make_channel("b", config=config, seed=2)
        rng = random.Random(5)
        net = Net(a, b)
        wire: list[bytes] = []
        for i in range(120):
            for who, other in (("a", "b"), ("b", "a")):
                if rng.random() < 0.3:
                    net.blocked.add((who, other))
                net.send(who, b"%s %d" % (who.encode(), i))
                net.blocked.clear()
            net.advance(net.now + 5_000)
        wire = [data for _, data in net.wire]
        assert a.resend_backoff == b.resend_backoff == 0
        return wire

    assert run(ON) == run(sds.Config())


def test_the_saved_state_keeps_backing_off_and_older_states_load() -> None:
    bot = _bot(20)
    run_timers(bot, 1_000 + 10 * 60_000)
    level = bot.resend_backoff
    assert level >= 3
    state = bot.export_state()
    assert state.data["resend_backoff"][0] == level
    restarted = sds.Channel.restore(sds.ChannelState.from_bytes(state.to_bytes()), ON,
                                    now_ms=1_000 + 11 * 60_000)  # fmt: skip
    assert restarted.resend_backoff == level
    held = state.data["resend_backoff"][1]
    _, grams = run_timers(restarted, held - 1)
    assert [d for d in grams if d.kind == "resend"] == []  # held until the next sweep
    _, grams = run_timers(restarted, held)
    assert 0 < len([d for d in grams if d.kind == "resend"]) <= QUIET_RESENDS
    # a state without the key (saved before it existed, or by a channel never quiet)
    del state.data["resend_backoff"]
    older = sds.Channel.restore(state, ON, now_ms=1_000 + 11 * 60_000)
    assert older.resend_backoff == 0
    assert sorted(older.outgoing_ids()) == sorted(bot.outgoing_ids())
    # with the backoff off (the core's default) no such key is written
    assert "resend_backoff" not in make_channel().export_state().data


def test_an_ephemeral_message_is_a_sign_of_a_peer_too() -> None:
    bot = _bot(10)
    run_timers(bot, 1_000 + 5 * 60_000)
    assert bot.resend_backoff > 0
    peer = make_channel("peer", config=ON)
    bot.receive(peer.send_ephemeral(b"typing", 0), 1_000 + 5 * 60_000)
    assert of(bot.events(), sds.EphemeralReceived)
    assert bot.resend_backoff == 0
    assert bot.get_timer() == 1_000 + 5 * 60_000  # what waited is due again now
