"""SDS-R at scale without a store (issue 28): answers after a silence dropped, more
than one copy of an answer while someone likely lacks the line. The real core over
the in-memory network, the rules on and off in one test, the same seed."""

from __future__ import annotations

import collections

import sds
from net.memnet import MemNetwork

#: This round's repair rules off (bench/sim_sync_repair.py's ``prev``).
PREV = {"repair_answer_expiry": False, "repair_answer_copies": 1,
        "repair_first_request_capped": False}


def _lossy_run(n: int, cfg: sds.Config, messages: int, loss: float) -> tuple[
        collections.Counter[str], set[int]]:
    """Broadcasts by kind, and the log sizes of the members, after ``messages`` lines
    at 2/s and a drain of 40 s."""
    kinds: collections.Counter[str] = collections.Counter()

    def seen(node: str, cid: str, kind: str, mid: str, size: int, now: int) -> None:
        kinds[kind] += 1

    net = MemNetwork(seed=5, loss=loss, latency_ms=(20, 120), datagram_observer=seen,
                     track_delivered=False)
    for i in range(n):
        net.add_node(f"p{i:03d}", ["c"], cfg)
    for i in range(messages):
        net.send(f"p{(37 * i) % n:03d}", "c", f"line {i}".encode())
        net.run_for(500)
    net.run_for(40_000)
    sizes = {nd.participant.channel("c").log_size for nd in net.nodes.values()}
    return kinds, sizes


def test_a_large_lossy_channel_repairs_with_fewer_broadcasts() -> None:
    """300 members, 10% loss (~30 lacking each line, ~3 of them after one answer): with
    the rules, fewer repair answers and request syncs for the same lines, and every
    member holds every line at the end."""
    n, messages = 300, 30
    # the repair rules on their own: carrying (tests/sim/test_carry_sim.py) leaves
    # few lines to repair either way
    base = sds.Config.fast(repair_response_groups=n // 128 + 1, carry_copies=0)
    now, now_sizes = _lossy_run(n, base, messages, 0.1)
    old, _ = _lossy_run(n, base.with_changes(**PREV), messages, 0.1)
    assert now_sizes == {messages}, now_sizes
    assert now["repair"] + now["sync"] < 0.85 * (old["repair"] + old["sync"]), (now, old)
    assert now["sync"] < old["sync"], (now, old)
