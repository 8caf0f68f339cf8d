"""The rule behind the "↺ recovered" mark (``app/node/late_arrivals.py``), which the node
applies as messages arrive and stores with them."""

from __future__ import annotations

from app.node.late_arrivals import MAX_REPORTED, LateArrivals

ME, BOB, CAROL = "a" * 64, "b" * 64, "c" * 64


def test_a_message_named_missing_before_it_came_is_late() -> None:
    late = LateArrivals(ME)
    late.named_missing("general", ["m2"])  # a later message, a sync message, a reminder
    assert late.delivered("general", "m2", BOB, 2, was_lost=False)
    assert not late.delivered("general", "m3", BOB, 3, was_lost=False)
    # delivered once: named again later (beyond the core's window), it is not late twice
    assert not late.delivered("other", "m2", BOB, 2, was_lost=False)


def test_an_older_message_of_its_author_after_a_newer_one_is_late() -> None:
    late = LateArrivals(ME)
    assert not late.delivered("general", "m5", BOB, 5, was_lost=False)
    assert late.delivered("general", "m4", BOB, 4, was_lost=False)  # end of a burst
    assert not late.delivered("general", "c1", CAROL, 1, was_lost=False)  # another author
    assert not late.delivered("general", "m6", BOB, 6, was_lost=False)


def test_a_lost_message_that_comes_is_late_and_own_messages_never_are() -> None:
    late = LateArrivals(ME)
    assert late.delivered("general", "m1", BOB, 1, was_lost=True)
    late.named_missing("general", ["o1"])
    assert not late.delivered("general", "o1", ME, 0, was_lost=False)
    assert not late.delivered("general", "o0", ME, -1, was_lost=False)


def test_a_waiting_message_is_judged_as_it_arrives_and_named_while_it_waits() -> None:
    late = LateArrivals(ME)
    assert not late.arrived_waiting("general", "m4", BOB, 4)
    late.named_missing("general", ["m3"])
    assert late.arrived_waiting("general", "m3", BOB, 3)  # named by m4, and older
    assert late.arrived_waiting("general", "m3", BOB, 3)  # a copy: the same answer
    assert late.delivered("general", "m3", BOB, 3, was_lost=False)
    # m4 waited; its own arrival was not late, and it was never named: not late now,
    # although m3 (older) was delivered before it
    assert not late.delivered("general", "m4", BOB, 4, was_lost=False)
    assert not late.arrived_waiting("general", "m9", BOB, 9)
    late.named_missing("general", ["m9"])  # named while it waits
    assert late.delivered("general", "m9", BOB, 9, was_lost=False)


def test_the_newest_stored_lines_seed_the_order_and_leaving_forgets() -> None:
    late = LateArrivals(ME)
    late.seed("general", [(BOB, 10), (ME, 99)])
    assert late.delivered("general", "m9", BOB, 9, was_lost=False)
    assert not late.delivered("general", "o5", ME, 5, was_lost=False)
    late.forget("general")
    assert not late.delivered("general", "m8", BOB, 8, was_lost=False)


def test_what_it_remembers_is_bounded() -> None:
    late = LateArrivals(ME)
    late.named_missing("general", [f"x{i}" for i in range(MAX_REPORTED + 5)])
    assert not late.delivered("general", "x0", BOB, 0, was_lost=False)  # forgotten
    assert late.delivered("general", f"x{MAX_REPORTED + 4}", BOB, 0, was_lost=False)
