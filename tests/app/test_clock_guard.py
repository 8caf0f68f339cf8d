"""The clock estimate, the hold for messages from a clock ahead and implausible send
times (issue 26 §3; the processes under libfaketime: tests/e2e/test_e2e_clock_skew.py)."""

from __future__ import annotations

from app.node.clock_guard import (
    PLAUSIBLE_MIN_MS,
    ClockEstimate,
    ClockHold,
    VoteRequests,
    describe_offset,
    implausible_time,
)

SKEW = 600_000
NOW = 1_795_000_000_000
DAY = 86_400_000


def test_the_majority_of_members_heard_sets_the_offset_and_a_fixed_clock_resets_it() -> None:
    est = ClockEstimate(SKEW)
    assert est.observe("a", NOW + 2_000, NOW) is None  # within honest skew: nothing
    fix = est.observe("b", NOW + DAY, NOW)
    assert fix is None  # 1 of 2 says a day: no majority
    fix = est.observe("c", NOW + DAY + 500, NOW)
    assert fix is not None and fix.offset_ms > DAY - SKEW and fix.voters == 2 and fix.heard == 3
    assert est.observe("b", NOW + DAY + 900, NOW + 400) is None  # the same, measured again
    # our system clock fixed a day later: their times agree with ours again
    fixes = [est.observe(who, NOW + DAY + 1_000, NOW + DAY) for who in "abc"]
    back = [f for f in fixes if f is not None]
    assert len(back) == 1 and back[0].offset_ms == 0 and est.offset_ms == 0


def test_held_envelopes_come_back_in_time_order_once_within_bound_and_are_bounded() -> None:
    hold = ClockHold()
    hold.hold("x", NOW + 3_600_000, b"late")
    hold.hold("x", NOW + 1_800_000, b"sooner")
    hold.hold("x", NOW + 1_800_000, b"sooner")  # its resend: held once
    assert len(hold) == 2
    assert hold.due(NOW, SKEW) == []
    assert hold.next_due(SKEW) == NOW + 1_800_000 - SKEW
    assert hold.due(NOW + 1_800_000 - SKEW, SKEW) == [b"sooner"]
    assert hold.due(NOW + DAY, SKEW) == [b"late"]
    for i in range(300):
        hold.hold("flood", NOW + DAY, b"%d" % i)
    assert len(hold) == 256 and hold.given_up == 44


def test_implausible_send_times_and_wording() -> None:
    assert implausible_time(5, None) == "before 2020"
    assert implausible_time(NOW - 7 * DAY, NOW) == "not after a message it names (backdated)"
    assert implausible_time(NOW - 7 * DAY, None) is None  # written offline a week ago
    assert implausible_time(PLAUSIBLE_MIN_MS + 1, PLAUSIBLE_MIN_MS) is None
    assert describe_offset(DAY) == "1 d 0 h 0 min behind"
    assert describe_offset(-3_600_000) == "1 h 0 min ahead of"


def test_with_one_other_member_heard_both_are_told_and_nothing_is_corrected() -> None:
    est = ClockEstimate(SKEW)
    warn = est.observe("only", NOW + 3_600_000, NOW)
    assert warn is not None and not warn.applied and est.offset_ms == 0
    assert est.observe("only", NOW + 3_600_500, NOW + 500) is None  # told once



def test_a_clock_far_off_asks_for_our_sync_until_two_agreeing_members_voted() -> None:
    """Sync suppression leaves a quiet channel with one member syncing: a sync far off
    ours asks for our next sync (a vote), two members agreeing with us withdraw the
    request, and it is renewed at most every VOTE_RENEW_MS."""
    from app.node.clock_guard import VOTE_RENEW_MS

    votes = VoteRequests(SKEW)
    assert votes.on_sync("c", "alice", 3_600_000, NOW) is True  # an hour off: vote
    assert votes.on_sync("c", "alice", 3_600_000, NOW + 1) is None  # asked already
    assert votes.on_sync("other", "x", 0, NOW) is None  # nothing asked there
    assert votes.on_sync("c", "bob", 2_000, NOW + 2) is None  # one agreeing vote
    assert votes.on_sync("c", "bob", 2_000, NOW + 3) is None  # the same member again
    assert votes.on_sync("c", "carol", -1_000, NOW + 4) is False  # two: withdrawn
    assert votes.on_sync("c", "carol", 0, NOW + 5) is None
    assert votes.on_sync("c", "alice", -DAY, NOW + 6) is True  # asked again
    assert votes.on_sync("c", "alice", -DAY, NOW + 6 + VOTE_RENEW_MS - 1) is None
    assert votes.on_sync("c", "alice", -DAY, NOW + 6 + VOTE_RENEW_MS) is True  # renewed
