"""One hostile member must not scramble, flood or lose the conversation (issue 14
sections 1, 3, 4 and the empty-id item of 8; issue 15 defect 4).

Each test drives the sans-I/O core in virtual time with crafted messages, the way a
member with a modified client would send them.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from collections.abc import Iterator

from sds_helpers import (
    Net,
    delivered_ids,
    drops,
    entry,
    make_channel,
    msg,
    of,
    own_filter,
    run_timers,
)

import sds
from sds import DropReason

NOW = 1_700_000_000_000
SKEW = sds.Config().max_clock_skew_ms
FAST = sds.Config.fast(1_000)


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:060d}" for i in range(n)]


# --------------------------------------------------------------- section 1: the clock


def test_a_timestamp_beyond_the_skew_is_refused_and_never_adopted() -> None:
    """A timestamp more than max_clock_skew_ms ahead of our wall clock is refused
    (CLOCK_AHEAD, with the distance) and does not move the clock; one at the bound
    is accepted; the author's resend is accepted once our clock has caught up."""
    ch = make_channel(now=NOW)
    ch.receive(msg("b", "far", NOW + SKEW + 1), NOW)
    ch.receive(msg("b", "pinned", sds.MAX_LAMPORT), NOW)
    evs = ch.events()
    refused = drops(evs, DropReason.CLOCK_AHEAD)
    assert [d.message_id for d in refused] == ["far", "pinned"]
    assert "ahead of our clock" in refused[0].detail
    assert delivered_ids(evs) == [] and ch.lamport == NOW
    ch.receive(msg("b", "edge", NOW + SKEW), NOW)
    assert delivered_ids(ch.events()) == ["edge"] and ch.lamport == NOW + SKEW
    ch.receive(msg("b", "far", NOW + SKEW + 1), NOW + 1)  # a resend, a moment later
    assert delivered_ids(ch.events()) == ["far"]


def test_order_stays_meaningful_whatever_one_member_sends() -> None:
    """The audit's repro: one message at MAX_LAMPORT pinned every clock, and lines
    typed 0..5 were shown 3,0,5,2,1,4 (sorted by hash). Now the hostile timestamps
    (the wire bound, and one exactly at the skew bound) are refused or bounded, and
    every honest participant shows the lines in the order they were typed."""
    a, b, c = (make_channel(s, now=NOW) for s in "abc")
    net = Net(a, b, c, now=NOW)
    for ch in (a, b, c):
        ch.receive(msg("h", "evil-top", sds.MAX_LAMPORT), NOW)
        ch.receive(msg("h", "evil-edge", NOW + SKEW), NOW)
    net.flush()
    typed = []
    for i in range(6):
        net.now += 10
        typed.append(net.send("a", f"line {i}".encode()))
    for ch in (a, b, c):
        log = [m for m in ch.log_ids() if m in typed]
        assert log == typed, f"{ch.sender_id} shows them out of order"
        assert ch.lamport < sds.MAX_LAMPORT
        # the clock ran ahead by the skew at most, and honest sends still count up
        assert ch.lamport <= NOW + SKEW + 10


def test_the_clock_never_saturates_for_honest_participants() -> None:
    """Repeated boundary timestamps (each at the skew bound of its moment) move the
    clock only as fast as the wall clock: thousands of honest sends later it is still
    within the skew of now, far from MAX_LAMPORT."""
    a = make_channel("a", now=NOW)
    now = NOW
    prev = 0
    for i in range(2_000):
        now += 5
        a.receive(msg("h", f"edge{i}", now + SKEW), now)
        lam = sds.decode(a.send(b"x", now)).lamport_timestamp
        assert lam is not None and lam > prev
        prev = lam
    assert a.lamport <= now + SKEW + 2_000
    assert not drops(a.events(), DropReason.CLOCK_AHEAD)


def test_a_restored_pinned_clock_is_brought_back() -> None:
    """A channel pinned by earlier code (its stored clock at MAX_LAMPORT, beyond the
    bound at start) is recovered at restore: the clock returns to now_ms and new
    messages get ordinary timestamps; a buffered message from the future is dropped."""
    ch = make_channel("a", now=NOW)
    ch.receive(msg("b", "ok", NOW + 1), NOW)
    ch.receive(msg("b", "waits", NOW + 2, ["gone"]), NOW)
    d = ch.export_state().data
    d["lamport"] = sds.MAX_LAMPORT  # as the old core left it
    raw = d["incoming"][0][0]
    pb = sds.decode(bytes.fromhex(raw))
    future = sds.Message(pb.sender_id, pb.message_id, pb.channel_id, sds.MAX_LAMPORT,
                         pb.causal_history, None, pb.content)
    d["incoming"][0][0] = sds.encode(future).hex()
    later = NOW + 3_600_000
    back = sds.Channel.restore(
        sds.ChannelState.from_bytes(sds.ChannelState(d).to_bytes()), ch.config,
        random.Random(1), later,
    )
    assert back.lamport == later
    assert [x.message_id for x in drops(back.events(), DropReason.CLOCK_AHEAD)] == ["waits"]
    assert sds.decode(back.send(b"new", later)).lamport_timestamp == later + 1
    # without now_ms (the old call) the clock is kept as saved
    assert sds.Channel.restore(sds.ChannelState(d), ch.config).lamport == sds.MAX_LAMPORT


# ---------------------------------------------------- section 3: one message, a storm


def _storm(n_ids: int, config: sds.Config) -> dict[str, int]:
    """One crafted message naming ``n_ids`` unknown ids, then 60 s of timers."""
    ch = sds.Channel("chan", "a", config, NOW, random.Random(1))
    hist = [entry(m, None, "ghost") for m in _ids("g", n_ids)]
    ch.receive(msg("h", "bomb", NOW, hist), NOW)
    evs = list(ch.events())
    more, grams = run_timers(ch, NOW + 60_000)
    evs.extend(more)
    syncs = [g for g in grams if g.kind == "sync"]
    return {
        "syncs": len(syncs),
        "requests": sum(len(sds.decode(g.data).repair_request) for g in syncs),
        "events": len(evs),
        "lost": len(of(evs, sds.MessageLost)),
        "refused": len(drops(evs, DropReason.HISTORY_TOO_LONG)),
    }


def test_a_huge_causal_history_is_refused() -> None:
    """The audit's crafted 3,300-id and 30,000-id histories: refused with their reason,
    so no sync, no repair request and no lost report follows."""
    for n in (3_300, 30_000):
        got = _storm(n, FAST)
        assert got == {"syncs": 0, "requests": 0, "events": 1, "lost": 0, "refused": 1}, n
    ok = _storm(1_000, FAST)  # the bound itself is accepted
    assert ok["refused"] == 0 and ok["requests"] > 0


def test_due_repair_requests_go_out_batched_and_paced() -> None:
    """1,000 unknown ids named by one (accepted) message: the requests go out 50 per
    sync, at most one such sync per repair_sync_interval_ms, not one sync per three
    requests (the storm: ~334 syncs at once)."""
    cfg = FAST.with_changes(lost_timeout_ms=0)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("h", "big", NOW, [entry(m, None, "x") for m in _ids("g", 1_000)]), NOW)
    ch.events()
    times = []
    requests = 0
    for _ in range(10_000):
        t = ch.get_timer()
        if t is None or t > NOW + cfg.repair_t_max_ms + 30_000:
            break
        ch.handle_timer(t)
        for g in ch.datagrams_to_send():
            n = len(sds.decode(g.data).repair_request)
            if n:
                times.append(t)
                requests += n
                assert n <= cfg.repair_requests_per_sync
    assert requests >= 1_000  # every id asked for
    first_round = [t for t in times if t < NOW + cfg.repair_t_max_ms + 1]
    assert len(first_round) <= 1_000 // cfg.repair_requests_per_sync + 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= cfg.repair_sync_interval_ms


def test_too_many_repair_requests_in_one_message_are_refused() -> None:
    ch = make_channel("a", now=NOW)
    ch.send(b"mine", NOW)
    ch.events()
    many = [entry(m, None, "a") for m in _ids("r", 101)]
    ch.receive(msg("h", "ask", NOW, repair=many), NOW)
    evs = ch.events()
    assert [d.message_id for d in drops(evs, DropReason.TOO_MANY_REPAIR_REQUESTS)] == ["ask"]
    assert not of(evs, sds.RepairRequestReceived)


def test_one_sender_has_a_budget_of_missing_ids() -> None:
    """Ids first named by one sender count against its max_missing_per_sender; beyond
    it its messages are refused (SENDER_BUDGET) while another sender's are not; when
    the ids resolve (here: declared lost) the budget is free again."""
    cfg = FAST.with_changes(max_missing_per_sender=150, lost_timeout_ms=20_000)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("h", "h1", NOW, _ids("x", 100)), NOW)
    ch.receive(msg("h", "h2", NOW, _ids("y", 100)), NOW)  # 200 > 150
    ch.receive(msg("h", "h3", NOW, _ids("x", 100)), NOW)  # nothing new: fine
    ch.receive(msg("b", "b1", NOW, _ids("z", 100)), NOW)  # another sender
    evs = ch.events()
    assert [d.message_id for d in drops(evs, DropReason.SENDER_BUDGET)] == ["h2"]
    assert ch.stats()["missing_max_per_sender"] == 100
    assert sorted(ch.incoming_ids()) == ["b1", "h1", "h3"]
    run_timers(ch, NOW + 21_000)
    assert ch.stats()["missing"] == 0
    ch.receive(msg("h", "h2", NOW + 21_000, _ids("y", 100)), NOW + 21_000)
    assert not drops(ch.events(), DropReason.SENDER_BUDGET)


def test_rebroadcasts_one_requester_causes_are_budgeted() -> None:
    """Repair requests for messages we hold make us rebroadcast them; one requester
    gets at most repair_responses_per_sender per repair_response_window_ms. Requests for
    unknown ids cost nothing and schedule nothing."""
    cfg = FAST.with_changes(repair_responses_per_sender=20, repair_cache_size=200)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    held = []
    for i in range(60):
        ch.receive(msg("b", f"m{i:03d}", NOW + i), NOW)
        held.append(f"m{i:03d}")
    ch.events()
    asks = [entry(m, None, "b") for m in held[:30]] + [entry(m, None, "b") for m in _ids("u", 30)]
    ch.receive(msg("h", "ask1", NOW, repair=asks), NOW)
    ch.receive(msg("h", "ask2", NOW, repair=[entry(m, None, "b") for m in held[30:]]), NOW)
    got = of(ch.events(), sds.RepairRequestReceived)
    assert [len(r.scheduled) for r in got] == [20, 0]
    ch.receive(msg("k", "other", NOW, repair=[entry(m, None, "b") for m in held[30:40]]), NOW)
    assert [len(r.scheduled) for r in of(ch.events(), sds.RepairRequestReceived)] == [10]
    later = NOW + cfg.repair_response_window_ms
    ch.receive(msg("h", "ask3", later - 1, repair=[entry(m, None, "b") for m in held[40:41]]),
               later - 1)
    assert [len(r.scheduled) for r in of(ch.events(), sds.RepairRequestReceived)] == [0]
    ch.receive(msg("h", "ask4", later, repair=[entry(m, None, "b") for m in held[40:]]), later)
    assert [len(r.scheduled) for r in of(ch.events(), sds.RepairRequestReceived)] == [20]


# ------------------------------------------------------------- section 8: empty ids


def test_an_empty_id_in_a_causal_history_is_ignored() -> None:
    """Not waited for, not reported missing, not asked for, not kept as a dependency."""
    ch = make_channel("a", now=NOW, config=FAST)
    ch.receive(msg("b", "known", NOW), NOW)
    ch.receive(msg("b", "m", NOW + 1, ["", "known", ""]), NOW)
    evs = ch.events()
    assert delivered_ids(evs) == ["known", "m"]
    assert of(evs, sds.MessageDelivered)[1].causal_history == ("known",)
    assert not of(evs, sds.MessagesMissing) and ch.missing_ids() == []
    ch.receive(msg("b", "s", NOW + 2, ["", "other"], content=None), NOW)  # a sync
    evs, grams = run_timers(ch, NOW + 30_000)
    asked = {e.message_id for g in grams for e in sds.decode(g.data).repair_request}
    assert "" not in asked and "other" in asked
    assert all("" not in {e.message_id for e in m.missing} for m in of(evs, sds.MessagesMissing))
    back = sds.Channel.restore(ch.export_state(), ch.config, random.Random(2), NOW + 30_000)
    assert "" not in back.missing_ids()


# --------------------------------------- section 4: nothing a peer holds is lost for good


def test_a_lost_message_is_recovered_after_healing_even_when_nobody_names_it() -> None:
    """The audit's permanent loss, three participants: C misses X and is cut off
    until it declares X lost; B acknowledged X, so its author stopped resending, and
    X left every causal history (history size 1). C restarts from its saved state.
    After healing, C still wants X, asks again with backoff, a holder answers: every
    message is delivered everywhere, X flagged ``was_lost`` at C."""
    cfg = FAST.with_changes(causal_history_size=1, lost_timeout_ms=20_000)
    a, b, c = (make_channel(s, now=NOW, config=cfg) for s in "abc")
    net = Net(a, b, c, now=NOW)
    net.blocked |= {("a", "c"), ("b", "c")}
    x = net.send("a", b"X")
    net.blocked -= {("a", "c"), ("b", "c")}
    net.send("b", b"Y")  # names X: C learns of it
    assert x in c.missing_ids()
    net.blocked |= {(s, d) for s in "abc" for d in "abc" if "c" in (s, d) and s != d}
    net.advance(net.now + 25_000)
    assert [e.message_id for e in of(net.take("c"), sds.MessageLost)] == [x]
    assert a.outgoing_ids() == []  # acknowledged by B: its author resends no more
    for i in range(3):
        net.send("a" if i % 2 else "b", f"later {i}".encode())
    # C restarts from its saved state, later, still cut off
    c2 = sds.Channel.restore(
        sds.ChannelState.from_bytes(c.export_state().to_bytes()), cfg, random.Random(7),
        net.now + 60_000,
    )
    net.channels[2] = c2
    net.events["c"] = []
    net.now += 60_000
    net.blocked.clear()
    net.advance(net.now + 30 * 60_000)
    logs = [ch.log_ids() for ch in net.channels]
    assert logs[0] == logs[1] == logs[2] and len(logs[0]) == 5
    recovered = [e for e in of(net.take("c"), sds.MessageDelivered) if e.message_id == x]
    assert [e.was_lost for e in recovered] == [True]


# --------------------------- issue 15 defect 4: lost counts only recovery time


def test_the_lost_timeout_counts_only_connected_time() -> None:
    """A dependency missing while we are disconnected is not declared lost however
    long that lasts; the count resumes at reconnection."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("b", "m", NOW, ["dep"]), NOW)
    run_timers(ch, NOW + 5_000)  # 5 s connected
    ch.set_connected(False, NOW + 5_000)
    assert not ch.connected
    evs, _ = run_timers(ch, NOW + 6 * 60_000)  # 6 minutes away
    assert not of(evs, sds.MessageLost)
    ch.set_connected(True, NOW + 6 * 60_000)
    evs, _ = run_timers(ch, NOW + 6 * 60_000 + 14_000)
    assert not of(evs, sds.MessageLost)  # 19 s of connected time so far
    evs, _ = run_timers(ch, NOW + 6 * 60_000 + 16_000)
    assert [e.message_id for e in of(evs, sds.MessageLost)] == ["dep"]


def test_time_not_running_does_not_count_across_a_restart() -> None:
    """Issue 15 defect 4: a node away for 6 minutes restarts; the ids it missed are
    not reported lost at once (their authors are online and the store has them):
    the restored lost timeouts resume where they stopped. A message that arrives
    after being reported lost is flagged ``was_lost``."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("b", "m", NOW, ["dep"]), NOW)
    run_timers(ch, NOW + 10_000)
    saved = ch.export_state().to_bytes()
    restart = NOW + 10_000 + 6 * 60_000
    back = sds.Channel.restore(sds.ChannelState.from_bytes(saved), cfg, random.Random(2), restart)
    evs, _ = run_timers(back, restart + 9_000)
    assert not of(evs, sds.MessageLost)
    evs, _ = run_timers(back, restart + 11_000)
    assert [e.message_id for e in of(evs, sds.MessageLost)] == ["dep"]
    back.receive(msg("b", "dep", NOW - 1), restart + 12_000)
    got = of(back.events(), sds.MessageDelivered)
    assert [(e.message_id, e.was_lost) for e in got] == [("dep", True)]
    # paused at export: still paused after a restore
    back.set_connected(False, restart + 12_000)
    again = sds.Channel.restore(back.export_state(), cfg, random.Random(3), restart + 99_000)
    assert not again.connected


def test_invented_ids_cannot_push_real_lost_ids_out_of_the_wanted_list() -> None:
    """The wanted lost ids are bounded (repair_buffer_size); when full, the member who
    named the most gives up its oldest: a flood of invented ids from one member
    does not make an honest member's real lost id unwanted. Kept across a restore."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000, repair_buffer_size=20)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("b", "honest", NOW, ["real"]), NOW)
    now = NOW + 5 * 60_000
    run_timers(ch, now)  # "real" lost and asked for again a few times: its backoff grew
    assert "real" in ch._lost_wanted
    for i in range(5):
        now += 1_000
        ch.receive(msg("h", f"flood{i}", now, _ids(f"f{i}", 15)), now)
    run_timers(ch, now + 21_000)
    assert ch.stats()["lost_asked_again"] == 20
    assert "real" in ch._lost_wanted
    back = sds.Channel.restore(ch.export_state(), cfg, random.Random(2), now + 30_000)
    assert "real" in back._lost_wanted and back.stats()["lost_asked_again"] == 20
    assert back.stats()["lost_asked_again_max_per_sender"] == 19
    back.receive(msg("c", "real", NOW - 5), now + 31_000)
    got = of(back.events(), sds.MessageDelivered)
    assert [(e.message_id, e.was_lost) for e in got] == [("real", True)]


def test_a_message_refused_for_its_senders_budget_is_not_asked_for_while_it_stays_spent() -> None:
    """The hostile soak (issue 26): a flooding identity's messages are real, each naming
    invented ids up to its budget; the honest members that took one name it, and a
    member whose budget for that identity is spent asks for it, gets it, refuses it
    (SENDER_BUDGET) and, once it was declared lost, kept asking for it: the wanted
    lost ids (repair_buffer_size) filled with such messages, named by honest members,
    and pushed out their own lost lines, which no later message named: 35-39
    line-holdings missing for good. A wanted message refused for its sender's budget
    is declared lost at once (nothing waits for it) and not asked for again while its
    sender still has ids missing; the honest line stays wanted and asked for."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000, repair_buffer_size=20,
                            max_missing_per_sender=30)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("bob", "b0", NOW, [entry("line", None, "carol")]), NOW)
    now = NOW + 21_000
    run_timers(ch, now)
    assert "line" in ch._lost_wanted
    for k in range(8):  # bob names 5 messages of flooding identity k
        now += 1_000
        named = [entry(f"f{k}-{j}", None, f"flood{k}") for j in range(5)]
        ch.receive(msg("bob", f"b{k + 1}", now, named), now)
        for i in range(8):  # every identity keeps its budget spent on invented ids
            ch.receive(msg(f"flood{i}", f"spend{i}-{k}", now, _ids(f"x{i}-{k}-", 30)), now)
        now += 5_000
        run_timers(ch, now)  # asked for
        for j in range(5):  # and answered: each names 30 more invented ids
            ch.receive(msg(f"flood{k}", f"f{k}-{j}", now, _ids(f"y{k}-{j}-", 30)), now)
        refused = drops(ch.events(), DropReason.SENDER_BUDGET)
        assert [d.message_id for d in refused] == [f"f{k}-{j}" for j in range(5)]
        now += 16_000
        run_timers(ch, now)  # the invented ids are declared lost (and wanted)
    assert "line" in ch._lost_wanted
    assert not any(e.message_id.startswith("f") for e, _, _ in ch._lost_wanted.entries())
    # named again while flood0 has ids missing: not asked for
    ch.receive(msg("flood0", "spend-last", now, _ids("w-", 30)), now)
    ch.receive(msg("bob", "b9", now, [entry("f0-0", None, "flood0")]), now)
    assert "f0-0" not in ch._lost_wanted and "f0-0" not in ch._repair_out
    _, grams = run_timers(ch, now + 10 * 60_000)
    asked = {e.message_id for g in grams for e in sds.decode(g.data).repair_request}
    assert "line" in asked and not any(m.startswith("f") for m in asked)


def test_requests_at_their_cap_keep_each_namers_share() -> None:
    """The SDS-R requests are bounded (repair_buffer_size). At the cap the namer that
    costs the most, its requests plus the ids it named that are still missing, gives
    up its oldest request; one costing no more than the newcomer's namer keeps its
    own and the new id waits (missing; the sweep and the lost timeout cover it).
    Before, the namer with the most ids missing gave one up, and when it held no
    request the new one pushed out the latest-due request, an honest line's as often
    as not."""
    cfg = FAST.with_changes(repair_buffer_size=10, max_missing_per_sender=100)
    for seed in range(20):
        ch = sds.Channel("chan", "a", cfg, NOW, random.Random(seed))
        ch.receive(msg("alice", "a1", NOW, [entry(f"line{seed}", None, "alice")]), NOW)
        ch.receive(msg("flood1", "s1", NOW, _ids("x", 9)), NOW)  # the cap is full
        assert f"line{seed}" in ch._repair_out and len(ch._repair_out) == 10
        ch.receive(msg("flood2", "s2", NOW, _ids("y", 60)), NOW)  # the most missing
        ch.receive(msg("flood3", "s3", NOW, _ids("z", 5)), NOW)
        assert f"line{seed}" in ch._repair_out, seed
        held = [ch._out_by[e.message_id] for e, _, _ in ch._repair_out.entries()]
        assert len(held) == 10 and held.count("alice") == 1
        assert held.count("flood2") == 1 and held.count("flood3") == 5, held


def test_a_line_naming_a_message_held_for_invented_ids_waits_three_repair_rounds() -> None:
    """An identity's message S names invented ids (half its budget or more); alice
    took S (its ids were declared lost at her end) and names it in her line L. Here S
    waits for ids nobody has, and L waited behind it for the whole lost timeout
    (5 minutes): with 30 identities at 30% loss, 3 of 8 seeds delivered none of
    alice's 40 lines to bob within 70 s. Another sender naming S vouches that it
    delivered S: what S waits for is declared lost after three SDS-R rounds
    (3 x repair_t_max_ms), then S and L are delivered; an id that comes later is
    delivered late (was_lost). S's own sender naming it vouches for nothing, and ids
    that an honest member named (few missing) keep the full lost timeout: under plain
    loss three rounds are not enough."""
    cfg = sds.Config().with_changes(max_missing_per_sender=4)
    hold = 3 * cfg.repair_t_max_ms
    assert hold < cfg.lost_timeout_ms
    ch = sds.Channel("chan", "bob", cfg, NOW, random.Random(1))
    ch.receive(msg("sybil", "S", NOW, ["x1", "x2"]), NOW)
    ch.receive(msg("sybil", "S2", NOW + 1_000, ["S"]), NOW + 1_000)  # its own: no vouch
    ch.events()
    ch.receive(msg("alice", "L", NOW + 2_000, ["S"]), NOW + 2_000)
    evs, _ = run_timers(ch, NOW + 2_000 + hold - 1)
    assert delivered_ids(evs) == []
    evs, _ = run_timers(ch, NOW + 2_000 + hold)
    assert sorted(e.message_id for e in of(evs, sds.MessageLost)) == ["x1", "x2"]
    assert sorted(delivered_ids(evs)) == ["L", "S", "S2"]
    ch.receive(msg("carol", "x1", NOW - 5, []), NOW + 30_000)
    got = of(ch.events(), sds.MessageDelivered)
    assert [(e.message_id, e.was_lost) for e in got] == [("x1", True)]
    # only its own sender naming it, or an honest member's gap: the full lost timeout
    for sender, gap in (("sybil", ["x1", "x2"]), ("carol", ["x1"])):
        ch = sds.Channel("chan", "bob", cfg, NOW, random.Random(1))
        ch.receive(msg(sender, "S", NOW, gap), NOW)
        if sender == "sybil":
            ch.receive(msg("sybil", "S2", NOW + 1_000, ["S"]), NOW + 1_000)
        else:
            ch.receive(msg("alice", "L", NOW + 1_000, ["S"]), NOW + 1_000)
        evs, _ = run_timers(ch, NOW + cfg.lost_timeout_ms - 1)
        assert delivered_ids(evs) == [], sender
        evs, _ = run_timers(ch, NOW + cfg.lost_timeout_ms)
        assert len(delivered_ids(evs)) == 2, sender


def test_a_message_delivered_past_lost_ids_is_named_by_syncs_not_by_lines() -> None:
    """Alice delivers S, an identity's message naming ids nobody has, once they are
    declared lost. Her lines do not name S, so a member that lacks S does not hold
    her lines back for it: with 100 identities at 30% loss, alice's lines named
    their messages, and 54 of 640 honest line-deliveries were still missing after
    70 s (16 loss patterns). Her syncs do name S (a sync makes nobody wait; a member
    that lacks S asks for it, so the channel still converges), a message delivered
    whole is named by her lines as before, and S is in her bloom filter (its
    sender's acknowledgement). The mark survives a saved state."""
    cfg = sds.Config()
    alice = sds.Channel("chan", "alice", cfg, NOW, random.Random(1))
    alice.receive(msg("sybil", "S", NOW, ["x1", "x2"]), NOW)
    alice.receive(msg("carol", "C", NOW + 1, []), NOW + 1)
    evs, _ = run_timers(alice, NOW + cfg.lost_timeout_ms + 1)
    got = {e.message_id: e.missing_before for e in of(evs, sds.MessageDelivered)}
    assert got == {"C": 0, "S": 2}
    now = NOW + cfg.lost_timeout_ms + 2
    restored = sds.Channel.restore(alice.export_state(), cfg, random.Random(2), now)
    for ch in (alice, restored):
        line = sds.decode(ch.send(b"hello", now))
        named = [h.message_id for h in line.causal_history]
        assert "C" in named and "S" not in named, named
        _, grams = run_timers(ch, now + 2 * cfg.sync_interval_ms)
        syncs = [sds.decode(g.data) for g in grams if g.kind == "sync"]
        assert any("S" in [h.message_id for h in m.causal_history] for m in syncs)
        assert "S" in own_filter(ch)


def test_the_cap_on_missing_ids_levels_the_biggest_namers_first() -> None:
    """Past ``max_missing`` the namers of the most missing ids give up their oldest,
    one id at a time from whoever names the most then: four identities naming 8
    each give up 7 between them, and alice's 5 stay. A single levelling pass took one
    from each identity, fell short and took alice's (with 100 identities at 30% loss,
    one of her lines was declared lost 7 s after bob noticed it missing)."""
    cfg = sds.Config().with_changes(max_missing=30, max_missing_per_sender=10)
    ch = sds.Channel("chan", "bob", cfg, NOW, random.Random(1))
    ch.receive(msg("alice", "L", NOW, _ids("a", 5)), NOW)
    for k, who in enumerate("ABCD"):
        ch.receive(msg(f"sybil-{who}", f"S{who}", NOW + k, _ids(who, 8)), NOW + k)
    lost = [e.message_id for e in of(ch.events(), sds.MessageLost)]
    assert len(lost) == 7 and not any(m.startswith("a") for m in lost), lost
    assert len(ch.missing_ids()) == 30


def test_an_id_a_live_member_keeps_naming_is_asked_for_without_backing_off() -> None:
    """Requests for a missing id back off with its age (an id nobody holds is asked
    for ever more rarely). One that a member heard from keeps naming in its lines is
    held by that member: it is asked for again within the base window, every time.
    At 30% loss one of alice's lines was lost to bob six times in a row while his
    requests spread out (5, 5, 7, 11 s), and 19 later lines waited ~50 s behind it
    (3 honest members, 48 loss patterns: 23 line-deliveries missing after 70 s, 3
    now)."""
    cfg = sds.Config()
    gaps = {}
    for named in (True, False):
        ch = sds.Channel("chan", "bob", cfg, NOW, random.Random(1))
        ch.receive(msg("alice", "hello", NOW, []), NOW)  # alice is heard from
        ch.receive(msg("alice", "L0", NOW + 1, ["gone"]), NOW + 1)
        asked = []
        for second in range(1, 41):
            now = NOW + second * 1_000
            if named:
                ch.receive(msg("alice", f"L{second}", now, ["gone"]), now)
            _, grams = run_timers(ch, now)
            for g in grams:
                if "gone" in [r.message_id for r in sds.decode(g.data).repair_request]:
                    asked.append(now)
        gaps[named] = [b - a for a, b in itertools.pairwise(asked)]
    assert max(gaps[True]) <= cfg.repair_t_max_ms + cfg.repair_sync_interval_ms, gaps
    assert len(gaps[True]) > len(gaps[False]) and max(gaps[False]) >= 2 * cfg.repair_t_max_ms


def test_lost_ids_an_honest_member_asks_for_count_against_the_shared_budget() -> None:
    """An honest member that lost invented ids asks for them; we declared them lost
    too and gave them up (the wanted list was full). Hearing its request names them
    again: they are wanted again in the budget shared by every requester (ASKED), not
    in the honest requester's own, where they pushed out the lines that member named
    (the hostile soak: each honest member's share of the wanted ids full of invented
    ids relayed by requests, its lost lines given up for good)."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000, repair_buffer_size=4)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("carol", "c0", NOW, [entry("line", None, "bob")]), NOW)
    ch.receive(msg("flood", "s0", NOW, _ids("x", 10)), NOW)
    run_timers(ch, NOW + 21_000)
    assert "line" in ch._lost_wanted and len(ch._lost_wanted) == 4
    given_up = [m for m in _ids("x", 10) if m not in ch._lost_wanted]
    assert len(given_up) == 7
    now = NOW + 22_000
    for i, m in enumerate(given_up):  # carol asks for them, one per sync
        ch.receive(msg("carol", f"req{i}", now + i, [], content=None,
                       repair=[entry(m, None, "flood")]), now + i)
    assert "line" in ch._lost_wanted
    _, grams = run_timers(ch, now + 10 * 60_000)
    assert "line" in {e.message_id for g in grams for e in sds.decode(g.data).repair_request}


def test_a_wanted_lost_id_that_storage_holds_at_restart_is_not_asked_for() -> None:
    """At start the node rebuilds the window from storage (app.node.state_reconcile): a
    lost id that reached the log meanwhile is no longer wanted."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    ch.receive(msg("b", "m", NOW, ["x"]), NOW)
    run_timers(ch, NOW + 21_000)
    d = ch.export_state().data
    assert [row[0][0] for row in d["lost_wanted"]] == ["x"]
    d["log"].insert(0, [NOW - 1, "x", "b", None])  # what reconcile_state does
    d["lost"] = []
    back = sds.Channel.restore(sds.ChannelState(d), cfg, random.Random(2), NOW + 22_000)
    assert back.stats()["lost_asked_again"] == 0


class _WalkCountingLost(OrderedDict[str, None]):
    """The tracker's lost ids, counting every walk over all of them."""

    walks = 0

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return super().__iter__()


def test_a_message_naming_lost_ids_costs_its_own_ids_not_every_id_declared_lost() -> None:
    """The hostile soak (issue 39 §6): every node holds thousands of invented ids declared
    lost (up to log_window); a message naming a few of them again must be checked over
    the ids it names, never by a walk over every lost id (set.intersection with the
    OrderedDict walked it: 11 ms per message under the soak's flood). The named lost id
    is still lost for ordering: the message is delivered at once."""
    cfg = FAST.with_changes(lost_timeout_ms=20_000)
    ch = sds.Channel("chan", "a", cfg, NOW, random.Random(1))
    invented = _ids("f", 500)
    ch.receive(msg("h", "flood", NOW, invented), NOW)
    now = NOW + 60_000
    run_timers(ch, now)
    trk = ch._tracker
    assert len(trk.lost) == 500
    counting = _WalkCountingLost(trk.lost)
    trk.lost = counting
    ch.events()
    ch.receive(msg("b", "again", now, [invented[7]]), now)
    assert counting.walks == 0
    assert delivered_ids(ch.events()) == ["again"]


def test_an_honest_members_missing_line_is_asked_for_before_a_flooders_invented_ids() -> None:
    """The hostile soak's flood (issue 39 §6): an identity names 500 ids nobody has; an
    honest member's line names one real id we miss, noticed later. Once every request is
    due, the next message's repair requests (3 slots) ask for the honest member's id
    first: due requests go by what their namer costs us, not earliest-due first (where
    the invented ids held every slot, and an honest line waited ~2 s longer under the
    flood: bench/sim_flood.py). The invented ids are still asked for, after it."""
    ch = sds.Channel("chan", "a", FAST, NOW, random.Random(1))
    invented = _ids("f", 500)
    ch.receive(msg("h", "flood", NOW, invented), NOW)
    ch.receive(msg("b", "honest", NOW + 10_000, ["real"]), NOW + 10_000)
    ch.events()
    now = NOW + 20_000  # every request due (FAST: T_req within 1-5 s of noticing)
    first = sds.decode(ch.send(b"hello", now))
    asked = [r.message_id for r in first.repair_request]
    assert len(asked) == FAST.repair_requests_per_message
    assert asked[0] == "real"
    assert set(asked[1:]) <= set(invented)
