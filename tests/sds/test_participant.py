"""Participant: several channels of one sender, routing by channel_id, merged drivers."""

from __future__ import annotations

import random

import pytest
from sds_helpers import delivered_ids, drops, msg, of

import sds


def participant(sender: str = "me", **changes: object) -> sds.Participant:
    cfg = sds.Config().with_changes(**changes) if changes else sds.Config()
    return sds.Participant(sender, cfg, random.Random(4))


def test_routes_by_channel_id() -> None:
    """Spec "Participant state" (state per channel) / Issue 2: a received message goes to
    the channel named by its channel_id, and only there."""
    p = participant()
    red = p.join("red", 0)
    blue = p.join("blue", 0)
    assert p.receive(msg("x", "r1", 5, channel="red"), 10) == "red"
    assert p.receive(msg("x", "b1", 6, channel="blue"), 10) == "blue"
    assert red.log_ids() == ["r1"]
    assert blue.log_ids() == ["b1"]
    evs = p.events()
    assert sorted((e.channel_id, e.message_id) for e in of(evs, sds.MessageDelivered)) == [
        ("blue", "b1"),
        ("red", "r1"),
    ]


def test_unknown_channel_dropped() -> None:
    """Spec "Message" (channel_id identifies the channel) / Issue 2: a message for a
    channel we have not joined is dropped as UNKNOWN_CHANNEL; malformed bytes as
    MALFORMED; neither raises."""
    p = participant()
    p.join("red", 0)
    assert p.receive(msg("x", "g1", 5, channel="green"), 10) is None
    assert p.receive(b"\xff\x00", 10) is None
    evs = p.events()
    d = drops(evs)
    assert [(x.reason, x.channel_id, x.message_id, x.sender_id) for x in d] == [
        (sds.DropReason.UNKNOWN_CHANNEL, "green", "g1", "x"),
        (sds.DropReason.MALFORMED, "", None, None),
    ]
    assert delivered_ids(evs) == []
    assert p.channel("red").log_ids() == []


def test_own_channels_are_independent() -> None:
    """Spec "Participant state": a Lamport clock, filter, buffers and log per channel."""
    p = participant()
    red = p.join("red", 1_000)
    blue = p.join("blue", 1_000)
    red.receive(msg("x", "r1", 10**5, channel="red"), 1_000)
    assert red.lamport == 10**5
    assert blue.lamport == 1_000
    assert sds.decode(blue.send(b"x", 1_000)).causal_history == ()
    assert blue.bloom_filter_bytes() != red.bloom_filter_bytes()


def test_merges_timers_events_and_datagrams() -> None:
    """Spec "External Task Scheduling" / Issue 2: the participant's timer is the earliest
    of its channels'; handle_timer runs the due channels only; datagrams come tagged with
    their channel and events carry theirs."""
    p = participant(lost_timeout_ms=0)
    assert p.get_timer() is None
    red = p.join("red", 0)
    blue = p.join("blue", 0)
    red.send(b"r", 1_000)
    blue.send(b"b", 50_000)
    p.events()
    t_red, t_blue = red.get_timer(), blue.get_timer()
    assert t_red is not None and t_blue is not None and t_red < t_blue
    assert p.get_timer() == t_red
    p.handle_timer(t_red)
    grams = p.datagrams_to_send()
    assert grams and {cid for cid, _ in grams} == {"red"}
    assert all(sds.decode(d.data).channel_id == cid for cid, d in grams)
    assert blue.get_timer() == t_blue  # not run early
    assert {e.channel_id for e in p.events()} == {"red"}
    assert p.get_timer() == min(red.get_timer() or 10**18, t_blue)


def test_join_twice_returns_same_channel_and_leave() -> None:
    """Issue 2 (the object that owns the channels): joining twice gives the same channel;
    after leave, its messages are unknown-channel drops and its events are not lost."""
    p = participant()
    ch = p.join("red", 0)
    assert p.join("red", 5) is ch
    ch.send(b"x", 1_000)
    left = p.leave("red")
    assert left is ch
    assert [type(e) for e in p.events()] == [sds.MessageSent]
    p.receive(msg("x", "r1", 5, channel="red"), 10)
    assert [d.reason for d in drops(p.events())] == [sds.DropReason.UNKNOWN_CHANNEL]
    with pytest.raises(KeyError):
        p.channel("red")


def test_join_from_state() -> None:
    """Issue 2 (export/restore): a participant resumes a channel from its state, and
    refuses a state of another channel or participant."""
    p = participant()
    ch = p.join("red", 0)
    ch.receive(msg("x", "r1", 5, channel="red"), 10)
    state = ch.export_state()
    q = participant()
    resumed = q.join("red", 100, state)
    assert resumed.log_ids() == ["r1"]
    with pytest.raises(ValueError):
        participant().join("blue", 100, state)
    with pytest.raises(ValueError):
        participant("other").join("red", 100, state)


def test_empty_sender_rejected() -> None:
    """Spec "Message": the sender_id MUST be set."""
    with pytest.raises(ValueError):
        sds.Participant("")
