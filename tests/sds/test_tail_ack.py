"""The acknowledgement of a burst's last line at scale (issue 28, sds.Config.
sync_tail_quiet_ms): nothing later names it, so its author waits for a sync; the
members' syncs name it soon after the channel quiets, one of them for all."""

from __future__ import annotations

from sds_helpers import Net, make_channel, msg, of

import sds

CFG = sds.Config()
#: response groups that stand for 2,048 participants before any is heard
GROUPS_2048 = 2_048 // 128 + 1


def _burst(n: int, lines: int, **changes: object) -> tuple[Net, str, str, int]:
    """``n`` members (a lossless network, no latency), ``lines`` lines one second apart
    from members in turn; returns the network, the last line's author and id, and
    when it was sent."""
    chans = [make_channel(f"m{i:02d}", now=0, **changes) for i in range(n)]
    net = Net(*chans, now=1_000)
    author, last, sent = "", "", 0
    for i in range(lines):
        net.advance(net.now + 1_000)
        author = f"m{(7 * i) % n:02d}"
        sent = net.now
        last = net.send(author, f"line {i}".encode())
    return net, author, last, sent


def _acked_at(net: Net, author: str, mid: str) -> int | None:
    """Advance one second at a time up to 60 s; when ``author`` has ``mid`` acknowledged."""
    end = net.now + 60_000
    while net.now < end:
        net.advance(net.now + 1_000)
        if any(e.message_id == mid for e in of(net.events[author], sds.MessageAcknowledged)):
            return net.now
    return None


def _syncs(net: Net, since: int) -> list[str]:
    """Senders of the syncs on the wire from index ``since`` on."""
    out = []
    for sender, data in net.wire[since:]:
        if not sds.decode(data).content:
            out.append(sender)
    return out


def test_the_last_line_of_a_burst_is_acknowledged_soon_by_one_members_sync() -> None:
    """40 members (beyond sync_interval_participants: naming syncs wait while content
    flows), 12 lines a second apart: every line but the last is named by the next one.
    The last is named by the first sync once the channel has been quiet for
    sync_tail_quiet_ms (3 s): well before half the base interval (15 s, which it
    waited for before), and by one member's sync, which suppresses the others'."""
    assert CFG.sync_tail_quiet_ms == 3_000
    net, author, last, sent = _burst(40, 12)
    wire = len(net.wire)
    at = _acked_at(net, author, last)
    assert at is not None and at - sent < CFG.sync_interval_ms // 2, (at, sent)
    assert at - sent >= CFG.sync_tail_quiet_ms
    assert len(_syncs(net, wire)) == 1
    # before: the sync waited for half the base interval of quiet
    net, author, last, sent = _burst(40, 12, sync_tail_quiet_ms=None)
    at = _acked_at(net, author, last)
    assert at is not None and at - sent >= CFG.sync_interval_ms // 2, (at, sent)


def test_in_a_small_channel_nothing_changes() -> None:
    """Up to sync_interval_participants (10) naming never waits: the same wire with the
    rule on or off."""
    a = _burst(8, 12)[0]
    b = _burst(8, 12, sync_tail_quiet_ms=None)[0]
    for net in (a, b):
        net.advance(net.now + 40_000)
    assert a.wire == b.wire


def _lossy_member(carried_every: int = 10) -> tuple[sds.Channel, int]:
    """A member of a 2,048-member channel that got 20 lines, every ``carried_every``-th
    only as a carried copy (its loss estimate; 0: no loss), then the last line ``t``."""
    ch = make_channel("me", now=0, repair_response_groups=GROUPS_2048)
    t = 10_000
    for i in range(20):
        ch.receive(msg(f"peer{i % 7}", f"l{i}", t, [f"l{i - 1}"] if i else []), t,
                   carried=bool(carried_every) and i % carried_every == 0)
        t += 1_000
    ch.receive(msg("peer3", "t", t, ["l19"]), t)
    ch.events()
    return ch, t


def test_at_scale_with_loss_the_last_line_stays_to_name_until_a_second_sync_names_it() -> None:
    """The author misses one naming sync ``loss`` of the time: a member whose loss
    estimate is above 1% keeps the line to name (its own sync is not suppressed) until
    a second sync names it or sync_tail_quiet_ms passes; without loss one sync does."""
    ch, t = _lossy_member()
    assert ch._loss_mean > 0.01
    sync = msg("peer5", "s1", t + 4_000, ["t"], content=None)
    ch.receive(sync, t + 4_000)
    assert ch._to_name(t + 4_000)
    assert ch._to_name(t + 4_000 + CFG.sync_tail_quiet_ms - 1)
    ch.receive(msg("peer6", "s2", t + 5_000, ["t"], content=None), t + 5_000)
    assert not ch._to_name(t + 5_000)
    # no second sync: forgotten once sync_tail_quiet_ms has passed
    ch, t = _lossy_member()
    ch.receive(sync, t + 4_000)
    assert not ch._to_name(t + 4_000 + CFG.sync_tail_quiet_ms)
    # a content message naming it strikes it at once (the next lines name it again)
    ch, t = _lossy_member()
    ch.receive(msg("peer5", "u", t + 1_000, ["t"]), t + 1_000)
    assert "t" not in ch._unnamed
    # no loss seen: one sync strikes it
    ch, t = _lossy_member(carried_every=0)
    ch.receive(sync, t + 4_000)
    assert not ch._to_name(t + 4_000)


def _heard_members(n: int) -> list[tuple[sds.Channel, int, bytes]]:
    """``n`` members (seeds differ) that heard 15 others (16 participants: beyond
    sync_interval_participants, a few name a resent line again) and the line ``t``
    at the end; with ``t``'s bytes."""
    out = []
    for k in range(n):
        ch = make_channel(f"me{k}", now=0, seed=k)
        t = 10_000
        for i in range(15):
            ch.receive(msg(f"peer{i}", f"l{i}", t, [f"l{i - 1}"] if i else []), t)
            t += 1_000
        data = msg("author", "t", t, ["l14"])
        ch.receive(data, t)
        # the last line of a burst: a sync names it for the channel
        ch.receive(msg("peer2", "s", t + 4_000, ["t"], content=None), t + 4_000)
        ch.events()
        out.append((ch, t, data))
    return out


def test_at_scale_the_authors_resend_of_a_line_gets_it_named_again() -> None:
    """A copy of the last line of a burst that comes a resend period after it, with no
    request for it heard lately, is its author's resend: the namings missed the
    author, and a few members (sync_interval_participants / participants of them) name
    it again soon. A copy that is a repair answer (a request heard just before), of a
    line a later line named, or within the resend period names nothing again (at scale
    copies are mostly answers)."""
    members = _heard_members(20)
    later = CFG.resend_unacknowledged_ms
    renamed = 0
    for ch, t, data in members:
        ch.receive(data, t + later)
        renamed += "t" in ch._rename
    assert 0 < renamed < 20, renamed
    # an answer: a request for it heard just before
    for ch, t, data in _heard_members(20):
        ch.receive(msg("peer9", "r", t + later - 500, [], content=None,
                       repair=[sds.HistoryEntry("t", None, "author")]), t + later - 500)
        ch.receive(data, t + later)
        assert "t" not in ch._rename
    # a later line came: it names the line (its author's newest ids)
    for ch, t, data in _heard_members(20):
        ch.receive(msg("peer4", "v", t + 5_000, ["t"]), t + 5_000)
        ch.receive(data, t + later)
        assert "t" not in ch._rename
    # too soon after the line for a resend
    for ch, t, data in _heard_members(20):
        ch.receive(data, t + later // 2)
        assert "t" not in ch._rename
    # the rule off: nothing named again
    for ch, t, data in _heard_members(20):
        ch.config = ch.config.with_changes(sync_tail_quiet_ms=None)
        ch.receive(data, t + later)
        assert "t" not in ch._rename
