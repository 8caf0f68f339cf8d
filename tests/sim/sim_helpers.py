"""Shared by the simulator's tests: a lossy channel of the real core over MemNetwork."""

from __future__ import annotations

import collections

import sds
from net.memnet import MemNetwork


def lossy_run(n: int, cfg: sds.Config, messages: int, loss: float) -> tuple[
        collections.Counter[str], dict[str, int], set[int]]:
    """Broadcasts by kind, the network counters, and the members' log sizes after
    ``messages`` lines at 2/s (seed 5, 20-120 ms) and a drain of 40 s."""
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
    return kinds, dict(net.counters), sizes
