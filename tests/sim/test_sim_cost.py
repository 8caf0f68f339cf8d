"""The simulator's cost per delivery and per member (issue 28 item 2): the speed and
memory changes must not change a run. Same seed, same events, whichever way a
broadcast is read and however the core keeps its bookkeeping (bench/sim_cost.py
checks the same against a baseline revision at 2,000 members)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import net.memnet
import sds
from app.sim.simulation import NO_FULL_COLLECTIONS, SimSpec, run_sim
from sds import sds_pb2
from sds.bloom import BloomFilter, RollingBloomFilter, positions_in
from sds.message import SharedMessage, parse_pb

# a channel large and lossy enough for repair requests, answers, copies, syncs,
# missing dependencies and buffered messages, and for carrying (200 x 10% >= 15)
SPEC = dict(participants=200, messages=40, loss=0.1, seed=3)


def _table(out: Path) -> pa.Table:
    # run_id names the execution (unique per sim), not an event: left out
    return pq.read_table(out / "events").drop_columns(["run_id"])


def _run(tmp: Path, name: str) -> tuple[pa.Table, dict[str, Any]]:
    r = run_sim(SimSpec(**SPEC), tmp / name)  # type: ignore[arg-type]
    return _table(tmp / name), r.meta


def test_a_broadcast_read_once_for_every_receiver_gives_the_events_of_one_parse_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared, meta = _run(tmp_path, "shared")
    # the per-receiver way: each channel reads the protobuf message itself
    monkeypatch.setattr(net.memnet, "SharedMessage", lambda pb: pb)
    own, meta_own = _run(tmp_path, "own")
    kinds = set(shared.column("kind").to_pylist())
    assert {"RepairSent", "SyncSent", "MessagesMissing", "MessageDelivered"} <= kinds
    assert shared.num_rows == own.num_rows > 0
    assert shared.equals(own)
    assert meta["network"]["carried_sent"] > 0  # carried messages are read shared too
    assert meta["network"] == meta_own["network"]
    assert meta["traffic"] == meta_own["traffic"]


def test_a_shared_message_reads_as_the_protobuf_message() -> None:
    author = sds.Channel("c", "author", sds.Config(), 1_000)
    author.send(b"one", 1_000)
    data = author.send(b"two", 1_100)
    pb = parse_pb(data)
    m = SharedMessage(pb)
    for name in ("message_id", "sender_id", "channel_id", "lamport_timestamp", "content",
                 "bloom_filter"):
        assert getattr(m, name) == getattr(pb, name), name
    assert m.HasField("lamport_timestamp") and m.HasField("bloom_filter")
    assert m.HasField("content") == pb.HasField("content")
    assert m.history_ids == [h.message_id for h in pb.causal_history] != []
    assert list(m.causal_history) == list(pb.causal_history)
    ephemeral = sds_pb2.SdsMessage(sender_id="a", message_id="e", channel_id="c", content=b"x")
    sync = sds_pb2.SdsMessage(sender_id="a", message_id="s", channel_id="c",
                              lamport_timestamp=7)
    for other in (ephemeral, sync):
        for name in ("lamport_timestamp", "bloom_filter", "content"):
            assert SharedMessage(other).HasField(name) == other.HasField(name), name


def test_every_receiver_of_a_shared_message_holds_the_same_id_strings() -> None:
    author = sds.Channel("c", "author", sds.Config(), 1_000)
    first = author.send(b"one", 1_000)
    data = author.send(b"two", 1_100)
    receivers = [sds.Channel("c", f"r{i}", sds.Config(), 1_000) for i in range(3)]
    for ch in receivers:
        ch.receive(first, 1_050)
    m = SharedMessage(parse_pb(data))
    for ch in receivers:
        ch.receive_parsed(m, data, 1_200)
    held = [ch._entries for ch in receivers]
    keys = [list(e) for e in held]
    assert keys[0] == keys[1] == keys[2] and len(keys[0]) == 2
    assert all(k is keys[0][1] for k in (keys[1][1], keys[2][1]))


def test_filters_share_the_positions_of_an_id_and_a_rolled_filter_keeps_its_bits() -> None:
    params = BloomFilter(250, 0.001).params
    assert positions_in("some-id", params) is positions_in("some-id", params)
    rolling = RollingBloomFilter(8, 0.01)
    for i in range(8 + 3):  # rolls once at the ninth: keeps the newest 4, then 3 more
        rolling.add(f"id-{i}")
    assert rolling.items() == [f"id-{i}" for i in range(4, 11)]
    plain = BloomFilter(8, 0.01)
    for item in rolling.items():
        plain.add(item)
    assert rolling.to_bytes() == plain.to_bytes()


def test_no_full_collection_runs_while_the_simulation_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full collection walks every live object (millions at 1,000s of members) and
    finds next to nothing: the run puts them off and gives the thresholds back."""
    running = [False]
    full_in_run: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2 and running[0]:
            full_in_run.append(1)

    original = net.memnet.MemNetwork.run_until

    thresholds: set[tuple[int, int, int]] = set()

    def run_until(self: net.memnet.MemNetwork, t_ms: int, max_steps: int = 50_000_000) -> None:
        thresholds.add(gc.get_threshold())
        running[0] = True
        try:
            original(self, t_ms, max_steps)
        finally:
            running[0] = False

    monkeypatch.setattr(net.memnet.MemNetwork, "run_until", run_until)
    before = gc.get_threshold()
    gc.set_threshold(50, 1, 1)  # a full collection every few hundred allocations
    gc.callbacks.append(watch)
    try:
        # with full collections allowed this size had 2 of them while it ran
        run_sim(SimSpec(participants=60, messages=30, loss=0.1, seed=1), tmp_path / "r")
        assert gc.get_threshold() == (50, 1, 1)
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*before)
    assert full_in_run == []
    assert thresholds == {(50, 1, NO_FULL_COLLECTIONS)}


def test_the_shared_repair_hashes_give_the_spec_formulas_whatever_the_cache_holds() -> None:
    """``T_resp`` and the response group hash what every holder shares once (an LRU):
    the answers stay the spec's ``H`` formulas, also once the cache has turned over."""
    import hashlib

    from sds.repair import in_response_group, t_resp

    def h(text: str) -> int:
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")

    for i in range(6_000):  # more ids than the cache keeps: old ones are computed again
        mid, author, own = f"m{i % 4_500}", f"a{i % 7}", f"p{i % 13}"
        assert t_resp(own, author, mid, 5, 1_000) == 5 + ((h(own) ^ h(author)) * h(mid)) % 1_000
        assert in_response_group(own, author, mid, 4) == (h(own + mid) % 4 == h(author + mid) % 4)
