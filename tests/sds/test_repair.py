"""SDS-R: request/response timing formulas and the repair behaviour of channels."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from sds_helpers import delivered_ids, entry, make_channel, msg, of, run_timers

import sds
from sds.repair import in_response_group, repair_hash, t_req, t_resp

#: The default channel's SDS-R window (a channel of at most
#: ``repair_window_participants`` participants: not stretched).
T_MIN = sds.Config().repair_t_min_ms
T_MAX = sds.Config().repair_t_max_ms


def H(text: str) -> int:
    """PROTOCOL.md "SDS-R": first 8 bytes of sha256(utf8(x)), big-endian unsigned
    (computed here via the hex digest, independently of sds.repair)."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], 16)


# ------------------------------------------------------------------ formulas


def test_repair_hash_known_values() -> None:
    """PROTOCOL.md "SDS-R": H(x) = first 8 bytes of sha256(utf8(x)) big-endian; sha256("")
    starts e3b0c44298fc1c14, sha256("abc") starts ba7816bf8f01cfea."""
    assert repair_hash("") == 0xE3B0C44298FC1C14
    assert repair_hash("abc") == 0xBA7816BF8F01CFEA
    assert repair_hash("αβγ") == H("αβγ")


@pytest.mark.parametrize(
    ("own", "mid", "now"),
    [("alice", "m1", 0), ("bob", "ab" * 32, 1_700_000_000_000), ("", "x", 5), ("ç", "ü", 7)],
)
def test_t_req_formula(own: str, mid: str, now: int) -> None:
    """PROTOCOL.md "SDS-R": T_req = now + H(own_id + m) % (T_max - T_min) + T_min, so it
    always lies in [now + T_min, now + T_max)."""
    expected = now + H(own + mid) % (T_MAX - T_MIN) + T_MIN
    assert t_req(own, mid, now, T_MIN, T_MAX) == expected
    assert now + T_MIN <= expected < now + T_MAX


def test_t_req_hand_computed() -> None:
    """PROTOCOL.md "SDS-R": a hand-checked value: H("alicem1") % 90,000 + 30,000."""
    h = int.from_bytes(hashlib.sha256(b"alicem1").digest()[:8], "big")
    assert t_req("alice", "m1", 1_000, 30_000, 120_000) == 1_000 + h % 90_000 + 30_000


@pytest.mark.parametrize(
    ("own", "orig", "mid", "now"),
    [("bob", "alice", "m1", 0), ("carol", "alice", "cd" * 32, 10**12), ("x", "y", "z", 3)],
)
def test_t_resp_formula(own: str, orig: str, mid: str, now: int) -> None:
    """PROTOCOL.md "SDS-R": T_resp = now + ((H(own) XOR H(original_sender)) * H(m)) % T_max
    (Python ints: no 64-bit overflow in the product)."""
    expected = now + ((H(own) ^ H(orig)) * H(mid)) % T_MAX
    assert t_resp(own, orig, mid, now, T_MAX) == expected
    assert now <= expected < now + T_MAX


def test_t_resp_original_sender_answers_first() -> None:
    """PROTOCOL.md "SDS-R": the original sender's distance is 0: it answers at once."""
    assert t_resp("alice", "alice", "m1", 5_000, T_MAX) == 5_000
    assert t_resp("bob", "alice", "m1", 5_000, T_MAX) >= 5_000


def test_in_response_group_formula() -> None:
    """PROTOCOL.md "SDS-R": with g groups a holder answers iff H(own + m) % g ==
    H(original + m) % g; g <= 1 means everyone; the original sender always belongs."""
    members = 0
    for i in range(200):
        own, mid = f"peer{i}", f"msg{i % 7}"
        for g in (2, 3, 5):
            expected = H(own + mid) % g == H("alice" + mid) % g
            assert in_response_group(own, "alice", mid, g) is expected
            members += expected
        assert in_response_group(own, "alice", mid, 1) is True
        assert in_response_group(own, "alice", mid, 0) is True
        assert in_response_group("alice", "alice", mid, 7) is True
    assert 0 < members < 600


# ------------------------------------------------------------------ behaviour


class Trio:
    """A (original sender), B (holder), C (missed A's first message m1)."""

    def __init__(self, **changes: object) -> None:
        self.a = make_channel("a", now=0, **changes)
        self.b = make_channel("b", now=0, **changes)
        self.c = make_channel("c", now=0, **changes)
        self.m1 = self.a.send(b"one", 1_000)
        self.id1 = sds.decode(self.m1).message_id
        self.b.receive(self.m1, 1_000)
        self.m2 = self.a.send(b"two", 2_000)
        self.b.receive(self.m2, 2_000)
        self.c.receive(self.m2, 2_000)
        for ch in (self.a, self.b, self.c):
            ch.events()
        self.t_req_c = 2_000 + H("c" + self.id1) % (T_MAX - T_MIN) + T_MIN


def repairs(grams: list[sds.Datagram]) -> list[sds.Datagram]:
    return [g for g in grams if g.kind == "repair"]


def test_missing_message_requested_in_next_message_after_t_req() -> None:
    """PROTOCOL.md "SDS-R": a participant missing m schedules a request at T_req and,
    when due, attaches it (with the original sender's id in sender_id) as repair_request
    on its next outgoing content message."""
    t = Trio()
    assert t.c.missing_ids() == [t.id1]
    early = sds.decode(t.c.send(b"early", t.t_req_c - 1))
    assert early.repair_request == ()
    due = sds.decode(t.c.send(b"due", t.t_req_c))
    assert due.repair_request == (entry(t.id1, None, "a"),)
    req = of(t.c.events(), sds.RepairRequested)
    assert [(r.message_ids, r.carrier_id) for r in req] == [((t.id1,), due.message_id)]
    again = sds.decode(t.c.send(b"again", t.t_req_c + 1))
    assert again.repair_request == ()


def test_due_request_forces_a_sync() -> None:
    """PROTOCOL.md "SDS-R": a due request forces a sync message (even with an empty log,
    when no periodic sync would be sent)."""
    t = Trio()
    assert t.c.log_ids() == []
    evs, grams = run_timers(t.c, t.t_req_c - 1)
    assert [g for g in grams if g.kind == "sync"] == []
    evs, grams = run_timers(t.c, t.t_req_c)
    syncs = [g for g in grams if g.kind == "sync"]
    assert len(syncs) == 1
    m = sds.decode(syncs[0].data)
    assert m.kind is sds.MessageKind.SYNC
    assert m.repair_request == (entry(t.id1, None, "a"),)
    assert [s.repair_requests for s in of(evs, sds.SyncSent)] == [(t.id1,)]
    assert [r.carrier_id for r in of(evs, sds.RepairRequested)] == [m.message_id]


def test_at_most_three_requests_per_message() -> None:
    """PROTOCOL.md "SDS-R": up to 3 due entries per message, earliest T_req first; the
    rest go in the next message."""
    c = make_channel("c", now=0)
    deps = [f"d{i}" for i in range(5)]
    c.receive(msg("b", "w", 10, [entry(d, None, "b") for d in deps]), 1_000)
    due = {d: 1_000 + H("c" + d) % (T_MAX - T_MIN) + T_MIN for d in deps}
    now = max(due.values())
    first = sds.decode(c.send(b"x", now)).repair_request
    second = sds.decode(c.send(b"y", now)).repair_request
    by_due = sorted(deps, key=lambda d: (due[d], d))
    assert [e.message_id for e in first] == by_due[:3]
    assert sorted(e.message_id for e in second) == sorted(by_due[3:])
    assert all(e.sender_id == "b" for e in first + second)


def test_holder_answers_at_t_resp() -> None:
    """PROTOCOL.md "SDS-R": a participant holding m that receives a request schedules a
    rebroadcast at T_resp; when due it emits a "repair" Datagram with m's bytes and
    RepairSent."""
    t = Trio()
    request = t.c.send(b"req", t.t_req_c)
    now = t.t_req_c + 10
    t.b.receive(request, now)
    got = of(t.b.events(), sds.RepairRequestReceived)
    assert [(r.sender_id, r.message_ids, r.scheduled) for r in got] == [
        ("c", (t.id1,), (t.id1,))
    ]
    t_resp_b = now + ((H("b") ^ H("a")) * H(t.id1)) % T_MAX
    _, grams = run_timers(t.b, t_resp_b - 1)
    assert repairs(grams) == []
    evs, grams = run_timers(t.b, t_resp_b)
    assert [(g.data, g.message_id) for g in repairs(grams)] == [(t.m1, t.id1)]
    assert [(r.message_id, r.original_sender) for r in of(evs, sds.RepairSent)] == [
        (t.id1, "a")
    ]
    # The repair lets C deliver m1 and then m2.
    for g in repairs(grams):
        t.c.receive(g.data, t_resp_b)
    assert delivered_ids(t.c.events()) == [t.id1, sds.decode(t.m2).message_id]


def test_original_sender_answers_immediately() -> None:
    """PROTOCOL.md "SDS-R": the original sender answers first (distance 0: T_resp = now)."""
    t = Trio()
    request = t.c.send(b"req", t.t_req_c)
    now = t.t_req_c + 5
    run_timers(t.a, now)  # everything else A had to do by now is done
    t.a.receive(request, now)
    t.a.events()
    assert t.a.get_timer() == now
    t.a.handle_timer(now)
    assert [(g.data, g.message_id) for g in repairs(t.a.datagrams_to_send())] == [
        (t.m1, t.id1)
    ]
    assert [r.message_id for r in of(t.a.events(), sds.RepairSent)] == [t.id1]


def test_seeing_the_message_cancels_pending_response() -> None:
    """PROTOCOL.md "SDS-R": seeing m arrive cancels a pending response: B, scheduled to
    answer, stays silent once A's rebroadcast reached it."""
    t = Trio()
    request = t.c.send(b"req", t.t_req_c)
    now = t.t_req_c + 5
    t.a.receive(request, now)
    t.b.receive(request, now)
    t.a.handle_timer(now)
    answer = repairs(t.a.datagrams_to_send())[0]
    t.b.receive(answer.data, now + 1)  # a duplicate for B, but it cancels B's answer
    evs, grams = run_timers(t.b, now + T_MAX)
    assert repairs(grams) == []
    assert of(evs, sds.RepairSent) == []


def test_seeing_the_message_cancels_pending_request() -> None:
    """PROTOCOL.md "SDS-R": seeing m arrive cancels our request for it."""
    t = Trio()
    t.c.receive(t.m1, t.t_req_c - 100)
    assert delivered_ids(t.c.events()) == [t.id1, sds.decode(t.m2).message_id]
    assert sds.decode(t.c.send(b"x", t.t_req_c)).repair_request == ()
    evs, grams = run_timers(t.c, t.t_req_c + 10 * T_MAX)
    assert all(sds.decode(g.data).repair_request == () for g in grams)
    assert of(evs, sds.RepairRequested) == []


def test_someone_elses_request_cancels_ours() -> None:
    """PROTOCOL.md "SDS-R": seeing someone else's request for m cancels our own pending
    request: C does not ask at its T_req (it only re-arms, in case that other request
    or its answer is lost)."""
    t = Trio()
    other = msg("x", "sync-x", 5_000, content=None, repair=[entry(t.id1, None, "a")])
    t.c.receive(other, t.t_req_c - 1_000)
    t.c.events()
    assert sds.decode(t.c.send(b"x", t.t_req_c)).repair_request == ()
    _, grams = run_timers(t.c, t.t_req_c + 500)
    assert all(sds.decode(g.data).repair_request == () for g in grams)


def test_requests_repeat_until_the_message_arrives() -> None:
    """PROTOCOL.md "SDS-R" (sds.repair.OutgoingRepairBuffer): a taken request is re-armed
    one hash-spread delay later, so a lost request or answer does not leave the gap open."""
    t = Trio(lost_timeout_ms=0)
    offset = H("c" + t.id1) % (T_MAX - T_MIN) + T_MIN
    assert sds.decode(t.c.send(b"1", t.t_req_c)).repair_request != ()
    assert sds.decode(t.c.send(b"2", t.t_req_c + offset - 1)).repair_request == ()
    assert sds.decode(t.c.send(b"3", t.t_req_c + offset)).repair_request == (
        entry(t.id1, None, "a"),
    )


def test_response_groups_exclude_non_members() -> None:
    """PROTOCOL.md "SDS-R": with g response groups only holders with H(own + m) % g ==
    H(original + m) % g schedule an answer; the others stay silent."""
    g = 3
    outcomes = {}
    for i in range(12):
        me = f"holder{i}"
        # (one request, never repeated: without the expiry of answers after a silence,
        # tested in test_repair_windows.py, which a stretched window would apply)
        ch = make_channel(me, now=0, repair_response_groups=g, repair_answer_expiry=False)
        ch.receive(msg("a", "m1", 10), 100)
        ch.receive(msg("c", "req", 20, content=None, repair=[entry("m1", None, "a")]), 200)
        scheduled = of(ch.events(), sds.RepairRequestReceived)[0].scheduled
        expected = H(me + "m1") % g == H("a" + "m1") % g
        assert (scheduled == ("m1",)) is expected
        # (3 groups stand for 256+ participants: the window is stretched accordingly)
        _, grams = run_timers(ch, 200 + ch._repair_window(200)[1])
        assert bool(repairs(grams)) is expected
        outcomes[me] = expected
    assert True in outcomes.values() and False in outcomes.values()


def test_non_holder_does_not_answer() -> None:
    """PROTOCOL.md "SDS-R": only a participant that holds m answers a request for it."""
    ch = make_channel("b", now=0)
    ch.receive(msg("c", "req", 20, content=None, repair=[entry("m1", None, "a")]), 200)
    assert of(ch.events(), sds.RepairRequestReceived)[0].scheduled == ()
    _, grams = run_timers(ch, 200 + 10 * T_MAX)
    assert repairs(grams) == []


def test_repair_data_needed_when_bytes_left_cache() -> None:
    """Config.repair_cache_size / RepairDataNeeded: when the bytes of a requested message
    left the repair cache the core asks the application, and supply_repair_data then
    emits the "repair" datagram and RepairSent."""
    b = make_channel("b", now=0, repair_cache_size=1)
    m1 = msg("a", "m1", 10, content=b"old")
    b.receive(m1, 100)
    b.receive(msg("a", "m2", 11, ["m1"]), 101)  # pushes m1's bytes out of the cache
    b.receive(msg("c", "req", 20, content=None, repair=[entry("m1", None, "a")]), 200)
    b.events()
    due = 200 + ((H("b") ^ H("a")) * H("m1")) % T_MAX
    evs, grams = run_timers(b, due)
    assert repairs(grams) == []
    assert [(e.message_id, e.channel_id) for e in of(evs, sds.RepairDataNeeded)] == [
        ("m1", b.channel_id)
    ]
    b.supply_repair_data("m1", m1, due + 1)
    assert [(g.kind, g.data, g.message_id) for g in b.datagrams_to_send()] == [
        ("repair", m1, "m1")
    ]
    assert [(r.message_id, r.original_sender) for r in of(b.events(), sds.RepairSent)] == [
        ("m1", "a")
    ]


def test_repair_disabled() -> None:
    """Config.repair_enabled = False: no SDS-R requests are sent and requests are not
    answered."""
    t = Trio(repair_enabled=False)
    assert sds.decode(t.c.send(b"x", t.t_req_c + T_MAX)).repair_request == ()
    t.b.receive(msg("c", "req", 10**6, content=None, repair=[entry(t.id1, None, "a")]), 3_000)
    assert of(t.b.events(), sds.RepairRequestReceived) == []
    _, grams = run_timers(t.b, 3_000 + T_MAX)
    assert repairs(grams) == []


def test_end_to_end_repair_through_network() -> None:
    """PROTOCOL.md "SDS-R": on a lossless network after one loss, C asks, A (original
    sender) answers at once, B's pending answer is cancelled, C delivers m1 then m2."""
    from sds_helpers import Net

    t = Trio()
    net = Net(t.a, t.b, t.c, now=2_000)
    net.advance(t.t_req_c + T_MAX)
    c_events = net.take("c")
    assert delivered_ids(c_events) == [t.id1, sds.decode(t.m2).message_id]
    sent_repairs = {s: of(net.take(s), sds.RepairSent) for s in ("a", "b")}
    assert [r.message_id for r in sent_repairs["a"]] == [t.id1]
    assert sent_repairs["b"] == []


def test_a_lost_message_named_again_is_asked_for_once_more() -> None:
    """X is declared lost at the lost timeout (a partition, say). After it, a peer's
    message names X again: the gap may have healed, so X is requested by SDS-R once
    more (the backoff starts over), while nothing waits for it; when it comes it is
    delivered late, flagged ``was_lost``. If it never comes it stays wanted, asked for
    with a doubling backoff (issue 14 section 4: never given up while a peer may hold it)."""
    cfg = {"lost_timeout_ms": 20_000, "repair_t_min_ms": 500, "repair_t_max_ms": 2_000}
    for arrives in (True, False):
        a = make_channel("a", **cfg)
        a.receive(msg("b", "C", 1_000, ["X"]), 1_000)
        evs, _ = run_timers(a, 1_000 + 20_000)
        assert [e.message_id for e in of(evs, sds.MessageLost)] == ["X"]
        assert delivered_ids(evs) == ["C"]
        a.receive(msg("c", "D", 22_000, ["X", "C"]), 22_000)  # c holds X
        evs = a.events()
        assert delivered_ids(evs) == ["D"]  # D does not wait for the lost X
        assert a.stats()["lost_asked_again"] == 1
        evs, grams = run_timers(a, 22_000 + 2_000)
        asked = [sds.decode(g.data).repair_request for g in grams]
        assert any(e.message_id == "X" for r in asked for e in r)
        if arrives:
            a.receive(msg("c", "X", 900, []), 24_500)
            evs = a.events()
            assert delivered_ids(evs) == ["X"]
            assert [e.was_lost for e in of(evs, sds.MessageDelivered)] == [True]
            assert a.stats()["lost_asked_again"] == 0 and a.stats()["repair_requests"] == 0
        else:
            asked_at = []
            for t in range(24_000, 24_000 + 600_000, 500):
                _, grams = run_timers(a, t)
                if any(e.message_id == "X" for g in grams
                       for e in sds.decode(g.data).repair_request):
                    asked_at.append(t)
            assert a.stats()["lost_asked_again"] == 1
            gaps = [b - a_ for a_, b in itertools.pairwise(asked_at)]
            assert len(gaps) >= 4 and gaps[-1] >= 4 * gaps[0], gaps
            assert all(g2 >= g1 for g1, g2 in itertools.pairwise(gaps)), gaps


def test_requests_crossing_a_rebroadcast_are_not_answered_again() -> None:
    """Response suppression: once a holder rebroadcast m (or saw a copy of m it holds go
    by), requests for m arriving within repair_t_min_ms / 2 crossed that copy and are not
    answered again; a request after the quiet period is (a requester that lost the copy
    asks again no sooner than repair_t_min_ms later). Without it every request of a
    burst made the original sender rebroadcast m once more to the whole channel."""
    t = Trio()
    now = t.t_req_c + 5
    run_timers(t.a, now)
    t.a.receive(t.c.send(b"req", t.t_req_c), now)
    t.a.handle_timer(now)
    assert [g.message_id for g in repairs(t.a.datagrams_to_send())] == [t.id1]
    t.a.events()

    def ask(ch: sds.Channel, who: str, at: int) -> tuple[str, ...]:
        req = msg(who, f"rq-{who}-{at}", 5, content=None, repair=[entry(t.id1, None, "a")])
        ch.receive(req, at)
        return of(ch.events(), sds.RepairRequestReceived)[0].scheduled

    assert ask(t.a, "d", now + 100) == ()  # crossed A's answer: not answered twice
    assert ask(t.a, "e", now + T_MIN // 2 - 1) == ()
    _, grams = run_timers(t.a, now + T_MIN // 2 - 1)
    assert repairs(grams) == []
    assert ask(t.a, "f", now + T_MIN // 2) == (t.id1,)  # quiet period over: answered
    _, grams = run_timers(t.a, now + T_MIN // 2)
    assert [g.message_id for g in repairs(grams)] == [t.id1]
    # B holds m1; A's rebroadcast reaching it is a copy on the wire: B stays quiet too,
    # and answers again once the quiet period is over.
    t.b.receive(t.m1, now + 50)
    t.b.events()
    assert ask(t.b, "d", now + 60) == ()
    assert ask(t.b, "g", now + 50 + T_MIN // 2) == (t.id1,)


def test_the_quiet_period_survives_export_and_restore() -> None:
    """The quiet period after a copy is part of the exported state (while it runs): a
    restored channel answers exactly as the original would."""
    t = Trio()
    now = 10_000
    t.b.receive(t.m1, now)  # a copy of m1 (B holds it)
    t.b.events()
    back = sds.Channel.restore(
        sds.ChannelState.from_bytes(t.b.export_state().to_bytes()), t.b.config
    )
    req = msg("d", "rq", 5, content=None, repair=[entry(t.id1, None, "a")])
    for ch in (t.b, back):
        ch.receive(req, now + 10)
        assert of(ch.events(), sds.RepairRequestReceived)[0].scheduled == ()
    later = now + T_MIN // 2
    assert "copy_seen" in t.b.export_state().data
    t.b.handle_timer(later)
    assert t.b.export_state().data["copy_seen"] == []


def test_a_copy_dropped_before_the_core_cancels_the_pending_response() -> None:
    """A node's replay guard drops a byte-identical copy (another holder's repair answer
    is the author's envelope again) before the core and calls note_copy instead: that
    copy must cancel B's pending answer and start the quiet period, as a copy given to
    receive does. Before, every holder scheduled to answer answered (real processes:
    19 rebroadcasts for 3 ids asked where the sim of the same run had 5)."""
    t = Trio()
    request = t.c.send(b"req", t.t_req_c)
    now = t.t_req_c + 5
    t.b.receive(request, now)
    assert of(t.b.events(), sds.RepairRequestReceived)[0].scheduled == (t.id1,)
    t.b.note_copy(t.id1, "a", now + 1)  # A's answer, dropped by B's replay guard
    evs, grams = run_timers(t.b, now + T_MAX)
    assert repairs(grams) == []
    assert of(evs, sds.RepairSent) == []
    again = msg("d", "rq-d", 5, content=None, repair=[entry(t.id1, None, "a")])
    t.b.receive(again, now + 10)  # crossed that copy: not answered either
    assert of(t.b.events(), sds.RepairRequestReceived)[0].scheduled == ()


# ------------------------------------------------- ids asked for by others (issue 28)


def test_an_id_asked_for_by_someone_else_is_missing_for_us_too() -> None:
    """We lost m and every message naming it; a sync that asks for m tells us it exists:
    m is missing for us (MessagesMissing names it, our own request is scheduled, after
    the one we heard), not something we learn of only when an answer happens to reach
    us (bench/sim_p99.py: late deliveries never noticed as missing)."""
    c = make_channel("c")
    m = "ab" * 32
    c.receive(msg("b", "s1", 2_000, (), content=None, repair=[entry(m, b"h", "a")]), 2_000)
    assert c.missing_ids() == [m]
    missing = of(c.events(), sds.MessagesMissing)
    assert [e.message_id for ev in missing for e in ev.missing] == [m]
    assert missing[0].missing[0].retrieval_hint == b"h"
    assert missing[0].missing[0].sender_id == "a"
    # it arrives (the author's answer): delivered, nothing missing any more
    c.receive(msg("a", m, 1_500, (), content=b"hello"), 2_500)
    assert m in delivered_ids(c.events())
    assert c.missing_ids() == []


def test_an_id_asked_for_that_we_hold_or_with_the_rule_off_is_not_missing() -> None:
    held = make_channel("c")
    held.receive(msg("a", "m1", 1_500), 1_600)
    held.receive(msg("b", "s1", 2_000, ("m1",), content=None, repair=[entry("m1", None, "a")]),
                 2_000)
    assert held.missing_ids() == []
    off = make_channel("c", repair_note_asked=False)
    off.receive(msg("b", "s1", 2_000, (), content=None, repair=[entry("m9", None, "a")]), 2_000)
    assert off.missing_ids() == []


def test_ids_asked_for_share_one_missing_budget_whoever_asks() -> None:
    """Honest members relay in their requests the ids that a hostile history invents:
    the ids we learn only from requests share one max_missing_per_sender budget, so
    they can neither grow without bound nor fill an honest requester's own budget
    (whose real ids would then be crowded out)."""
    c = make_channel("c", max_missing_per_sender=3)
    asks = [entry(f"{i:064x}", None, "a") for i in range(5)]
    c.receive(msg("b", "s1", 2_000, (), content=None, repair=asks[:2]), 2_000)
    assert len(c.missing_ids()) == 2
    c.receive(msg("b", "s2", 2_001, (), content=None, repair=asks[2:4]), 2_001)
    c.receive(msg("e", "s3", 2_002, (), content=None, repair=asks[2:4]), 2_002)
    assert len(c.missing_ids()) == 2  # 2 more would pass the shared budget of 3
    c.receive(msg("e", "s4", 2_003, (), content=None, repair=asks[4:]), 2_003)
    assert len(c.missing_ids()) == 3
    # b's own budget is untouched: its history may still name 3 unknown ids
    c.receive(msg("b", "m1", 2_004, [f"{i:064x}" for i in range(10, 13)]), 2_004)
    assert len(c.missing_ids()) == 6
