"""SDS-R at scale without a store (issue 28): answers after a silence dropped, more
than one copy of an answer while someone likely lacks the line. The real core over
the in-memory network, the rules on and off in one test, the same seed."""

from __future__ import annotations

from sim_helpers import lossy_run

import sds

#: This round's repair rules off (bench/sim_sync_repair.py's ``prev``).
PREV = {"repair_answer_expiry": False, "repair_answer_copies": 1,
        "repair_first_request_capped": False}


def test_a_large_lossy_channel_repairs_with_fewer_broadcasts() -> None:
    """300 members, 10% loss (~30 lacking each line, ~3 of them after one answer): with
    the rules, fewer repair answers and request syncs for the same lines, and every
    member holds every line at the end."""
    n, messages = 300, 30
    # the repair rules on their own: carrying (tests/sim/test_carry_sim.py) leaves
    # few lines to repair either way
    base = sds.Config.fast(repair_response_groups=n // 128 + 1, carry_copies=0)
    now, _, now_sizes = lossy_run(n, base, messages, 0.1)
    old, _, _ = lossy_run(n, base.with_changes(**PREV), messages, 0.1)
    assert now_sizes == {messages}, now_sizes
    assert now["repair"] + now["sync"] < 0.85 * (old["repair"] + old["sync"]), (now, old)
    assert now["sync"] < old["sync"], (now, old)
