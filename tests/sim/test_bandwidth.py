"""The simulator's link model: bandwidth per participant, queued per link."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import sds
from app.cli import main
from app.sim.simulation import SimError, SimSpec, link_bandwidth_bps
from net.memnet import MemNetwork


def _net(bps_b: int | None) -> tuple[MemNetwork, dict[tuple[str, bytes], int]]:
    arrived: dict[tuple[str, bytes], int] = {}

    def observe(node: str, ev: sds.Event, now: int) -> None:
        if isinstance(ev, sds.MessageDelivered):
            arrived[(node, ev.content)] = now

    net = MemNetwork(seed=1, latency_ms=(10, 10), observer=observe, start_ms=0)
    cfg = sds.Config.fast(1000)
    net.add_node("a", ["room"], cfg)  # unlimited sender: only b's link counts
    net.add_node("b", ["room"], cfg, bandwidth_bps=bps_b)
    return net, arrived


def test_a_big_message_arrives_later_than_a_small_one_on_a_slow_link() -> None:
    """Transmission time follows the bytes: at 1 Mbit/s a 40,000-byte message takes
    320 ms more than its propagation latency; a 100-byte one about 1 ms."""
    net, arrived = _net(1_000_000)
    net.send("a", "room", b"s" * 100)
    small_size = net.counters["bytes_sent"]  # content + filter + ids
    net.run_for(5_000)
    small_at = arrived[("b", b"s" * 100)]
    t0 = net.now_ms
    net.send("a", "room", b"B" * 40_000)
    net.run_for(5_000)
    big_at = arrived[("b", b"B" * 40_000)] - t0
    assert small_at == 10 + math.ceil(small_size * 8 / 1000)  # latency + 8 bits / 1 Mbit/s
    assert big_at >= 10 + 320
    assert big_at > small_at + 300
    # the same messages over an unlimited link: latency only
    fast, fast_arrived = _net(None)
    fast.send("a", "room", b"B" * 40_000)
    fast.run_for(1_000)
    assert fast_arrived[("b", b"B" * 40_000)] == 10


def test_the_link_queue_serialises_messages() -> None:
    """Two 20,000-byte messages sent at once to a 1 Mbit/s receiver: the second waits
    for the first (arrives ~160 ms after it), and the wait is counted."""
    net, arrived = _net(1_000_000)
    net.send("a", "room", b"1" * 20_000)
    net.send("a", "room", b"2" * 20_000)
    net.run_for(5_000)
    first, second = arrived[("b", b"1" * 20_000)], arrived[("b", b"2" * 20_000)]
    assert first >= 10 + 160
    assert second - first >= 160
    assert net.counters["queue_wait_ms"] >= 150
    assert net.counters["bytes_sent"] >= 40_000


def test_the_senders_uplink_is_shared_by_its_broadcasts() -> None:
    """A slow sender uploads each broadcast once (the relay fans it out): a receiver on
    an unlimited link still waits for the upload."""
    arrived: dict[bytes, int] = {}

    def observe(node: str, ev: sds.Event, now: int) -> None:
        if isinstance(ev, sds.MessageDelivered) and node == "b":
            arrived[ev.content] = now

    net = MemNetwork(seed=1, latency_ms=(10, 10), observer=observe, start_ms=0)
    net.add_node("a", ["room"], sds.Config.fast(1000), bandwidth_bps=1_000_000)
    net.add_node("b", ["room"], sds.Config.fast(1000))
    net.send("a", "room", b"1" * 20_000)
    net.send("a", "room", b"2" * 20_000)
    net.run_for(5_000)
    assert arrived[b"1" * 20_000] >= 160 + 10
    assert arrived[b"2" * 20_000] >= 320 + 10


def test_bandwidth_spec_and_cli(tmp_path: Path) -> None:
    """``--bandwidth 1,20``: participant i gets the i-th value (mod the list), in Mbit/s;
    bad values are refused with a clear error."""
    spec = SimSpec(participants=4, messages=1, bandwidth_mbps=(1.0, 20.0))
    assert [link_bandwidth_bps(spec, i) for i in range(4)] == [
        1_000_000, 20_000_000, 1_000_000, 20_000_000,
    ]
    assert link_bandwidth_bps(SimSpec(participants=2, messages=1), 0) is None
    with pytest.raises(SimError, match="--bandwidth"):
        SimSpec(participants=2, messages=1, bandwidth_mbps=(0.0,)).validate()
    with pytest.raises(ValueError, match="bandwidth_bps"):
        MemNetwork().add_node("x", ["r"], bandwidth_bps=0)
    out = tmp_path / "run"
    assert main(["sim", "-n", "4", "-m", "20", "--rate", "10", "--bandwidth", "1,20",
                 "--profile", "waku", "--drain", "5", "--out", str(out)]) == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["spec"]["bandwidth_mbps"] == [1.0, 20.0]
    assert meta["config"]["causal_history_size"] == 200
    assert meta["network"]["queue_wait_ms"] > 0
    assert main(["sim", "-n", "4", "-m", "2", "--bandwidth", "1,x",
                 "--out", str(tmp_path / "bad")]) == 2
    fixed = tmp_path / "fixed"
    assert main(["sim", "-n", "3", "-m", "4", "--history", "7", "--history-floor", "off",
                 "--drain", "2", "--out", str(fixed)]) == 0
    cfg = json.loads((fixed / "run.json").read_text())["config"]
    assert (cfg["causal_history_size"], cfg["causal_history_floor"]) == (7, None)
    assert main(["sim", "-n", "3", "-m", "2", "--history-floor", "two",
                 "--out", str(tmp_path / "bad2")]) == 2
