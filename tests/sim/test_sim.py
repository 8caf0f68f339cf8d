"""``sdschat sim``: determinism, the Parquet schema, fast-path rows, options, the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import sds
from app.cli import main
from app.sim.simulation import (
    PartitionSpec,
    SimError,
    SimSpec,
    parse_partition,
    run_sim,
    sim_config,
)
from net.memnet import MemNetwork
from pipeline.schema import EVENT_SCHEMA, EventRecords
from storage.events import event_row


def _table(out: Path):  # type: ignore[no-untyped-def]
    # run_id names the execution (unique per sim), not an event: left out
    return pq.read_table(out / "events").drop_columns(["run_id"]).sort_by(
        [("node_id", "ascending"), ("seq", "ascending")])


def test_same_seed_same_events_other_seed_other_events(tmp_path: Path) -> None:
    spec = dict(participants=5, messages=15, loss=0.2, seed=4)
    a = run_sim(SimSpec(**spec), tmp_path / "a")  # type: ignore[arg-type]
    b = run_sim(SimSpec(**spec), tmp_path / "b")  # type: ignore[arg-type]
    run_sim(SimSpec(**{**spec, "seed": 5}), tmp_path / "c")  # type: ignore[arg-type]
    assert a.rows == b.rows > 0
    assert _table(tmp_path / "a").equals(_table(tmp_path / "b"))
    assert not _table(tmp_path / "a").equals(_table(tmp_path / "c"))
    assert a.meta["network"] == b.meta["network"]


def test_parquet_has_exactly_the_event_schema(tmp_path: Path) -> None:
    run_sim(SimSpec(participants=3, messages=5, seed=1), tmp_path / "r")
    files = sorted((tmp_path / "r" / "events").glob("*.parquet"))
    assert files and not list((tmp_path / "r" / "events").glob("*.tmp"))
    for f in files:
        assert pq.read_schema(f).equals(EVENT_SCHEMA, check_metadata=False)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["messages_sent"] == 5 and meta["participants_holding_every_message"] == 3
    t = pq.read_table(tmp_path / "r" / "events")
    # seq is 1..n per participant, in order.
    for node in {r for r in t.column("node_id").to_pylist()}:
        seqs = [r["seq"] for r in t.to_pylist() if r["node_id"] == node]
        assert seqs == list(range(1, len(seqs) + 1))


def test_fast_path_rows_equal_the_generic_event_row_conversion() -> None:
    hist = ("a" * 64, "b" * 64)
    cases = [
        sds.MessageDelivered("c", "m" * 64, "s", 7, b"hey", 3, hist, b"\x01\x02", b"x" * 90, 1),
        sds.MessageDelivered("c", "m" * 64, "s", 7, b"hey", 3, hist, None, b"x" * 90, 0),
        sds.SyncReceived("c", "y" * 64, "s", 9),
        sds.MessageDropped("c", "m", "s", sds.DropReason.DUPLICATE, ""),
        sds.MessageDropped("c", None, None, sds.DropReason.MALFORMED, 'bad "x"'),
        sds.RepairRequestReceived("c", "s", ("a", "b"), ("a",)),
        sds.RepairRequestReceived("c", "t", ("a", "b"), ("a",)),  # cached JSON
        sds.RepairRequestReceived("c", "t", ("a", "b"), ()),
        sds.MessagesMissing("c", "m" * 64, "s", (sds.HistoryEntry("a" * 64, b"\x01", "x"),
                                                  sds.HistoryEntry("b\u00e9", None, None)), True),
        sds.MessagesMissing("c", "", "", (sds.HistoryEntry("a" * 64, None, "x"),), False),
    ]
    from app.sim.simulation import _Recorder

    class _Sink:
        def write(self, records: EventRecords) -> None: ...

    fast = _Recorder("r", _Sink())  # type: ignore[arg-type]
    generic = EventRecords("r", "sim", run_id=fast.records.run_id)
    for i, ev in enumerate(cases, start=1):
        fast.event("n", ev, 1000 + i)
        history = ev.causal_history if isinstance(ev, sds.MessageDelivered) else None
        generic.add_row("n", i, event_row(ev, 1000 + i), history)
    assert fast.records.to_table().equals(generic.to_table())


def test_sim_config_sizes_and_auto_sync_interval() -> None:
    small = sim_config(SimSpec(participants=8, messages=10))
    big = sim_config(SimSpec(participants=800, messages=20_000))
    # sizes come from the profile (sds.Config), as sdschat join's; no sim-only defaults
    default = sds.Config()
    assert small.causal_history_size == default.causal_history_size
    assert small.bloom_capacity == default.bloom_capacity
    assert small.repair_cache_size == default.repair_cache_size
    waku = sim_config(SimSpec(participants=8, messages=10, profile="waku"))
    assert (waku.causal_history_size, waku.bloom_capacity) == (200, 10_000)
    assert waku.resend_unacknowledged_ms == sds.Config.fast(1000).resend_unacknowledged_ms
    tuned = sim_config(SimSpec(participants=8, messages=10, profile="waku", history=7,
                               history_floor=2, bloom_capacity=500, bloom_error=0.01))
    assert (tuned.causal_history_size, tuned.causal_history_floor) == (7, 2)
    assert (tuned.bloom_capacity, tuned.bloom_error_rate) == (500, 0.01)
    # --history-floor off
    fixed = sim_config(SimSpec(participants=8, messages=10, history_floor=-1))
    assert fixed.causal_history_floor is None
    assert small.sync_interval_ms == sds.Config.fast(1000).sync_interval_ms
    # the core stretches the interval with the participants it hears (issue 28): the
    # sim's N²/64 rule only for a profile with a fixed interval (waku)
    assert big.sync_interval_ms == sds.Config.fast(1000).sync_interval_ms
    big_waku = sim_config(SimSpec(participants=800, messages=20, profile="waku"))
    assert big_waku.sync_interval_ms == 2000 * 800 * 800 // 64
    assert big.log_window == 20_001 and big.repair_response_groups == 800 // 128 + 1
    fixed = sim_config(SimSpec(participants=800, messages=1, sync_interval_ms=5000))
    assert fixed.sync_interval_ms == 5000
    slow = sim_config(SimSpec(participants=4, messages=1, timings="default"))
    assert slow.resend_unacknowledged_ms == 30_000


def test_partition_parsing() -> None:
    assert parse_partition("5:20:2", 6) == PartitionSpec(5000, 20000, ((0, 1, 2), (3, 4, 5)))
    assert parse_partition("0:never:0-1/2,4", 5) == PartitionSpec(0, None, ((0, 1), (2, 4)))
    for bad in ("1:2", "5:3:2", "0:1:1", "0:1:0-1/1-2", "x:1:2"):
        with pytest.raises(SimError):
            parse_partition(bad, 6)


def test_invalid_spec_is_refused() -> None:
    with pytest.raises(SimError, match="--loss"):
        SimSpec(participants=3, messages=1, loss=1.5).validate()
    with pytest.raises(SimError, match="--participants"):
        SimSpec(participants=1, messages=1).validate()


def test_existing_output_is_not_overwritten_without_force(tmp_path: Path) -> None:
    run_sim(SimSpec(participants=3, messages=2), tmp_path / "r")
    with pytest.raises(SimError, match="--force"):
        run_sim(SimSpec(participants=3, messages=2), tmp_path / "r")
    run_sim(SimSpec(participants=3, messages=3), tmp_path / "r", force=True)
    assert json.loads((tmp_path / "r" / "run.json").read_text())["messages_sent"] == 3


def test_command_line_run_with_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main([
        "sim", "--participants", "6", "--messages", "12", "--loss", "0.1", "--seed", "3",
        "--out", str(out), "--latency", "10:30", "--partition", "1:4:2", "--churn", "0.3",
        "--churn-offline", "1:2", "--store", "--channels", "2", "--progress", "--drain", "20",
    ])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "simulated 6 participants, 12 messages" in captured.out
    assert "100.0%" in captured.err  # the progress bar, forced on
    assert "eta       0s" in captured.err  # with the time left at its pace
    meta = json.loads((out / "run.json").read_text())
    assert meta["spec"]["store"] is True and len(meta["spec"]["partitions"]) == 1
    assert set(meta["channels"]) == {"sim-0", "sim-1"}


def test_command_line_rejects_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sim", "-n", "4", "-m", "3", "--out", str(tmp_path / "x"),
                 "--latency", "9:1"]) == 2
    assert "--latency" in capsys.readouterr().err
    assert main(["sim", "-n", "4", "-m", "3", "--out", str(tmp_path / "x"),
                 "--sync-interval", "soon"]) == 2
    assert not (tmp_path / "x").exists()
    capsys.readouterr()
    # values that passed the checks and then crashed the run (NaN compares false,
    # int(inf) raises, a negative cache emptied a dict, content over the core's limit)
    for flags, message in [
        (["--rate", "nan"], "--rate must be a number > 0"),
        (["--rate", "inf"], "--rate must be a number > 0"),
        (["--drain", "nan"], "--drain must be a finite number"),
        (["--latency", "10:inf"], "--latency must be LO:HI (finite numbers)"),
        (["--churn-offline", "nan:nan"], "--churn-offline must be LO:HI (finite numbers)"),
        (["--partition", "inf:5:2"], "--partition times must be seconds"),
        (["--repair-cache", "-5"], "--repair-cache must be >= 0"),
        (["--content-bytes", "70000"], "--content-bytes must be in 1..65536"),
        (["--history", "0"], "--history must be >= 1"),
        (["--bloom-capacity", "0"], "--bloom-capacity must be >= 1"),
        (["-n", "2000000"], "--participants must be <= 50,000"),
        (["--send-loss", "1"], "--send-loss must be in [0, 1)"),
    ]:
        argv = ["sim", "-n", "4", "-m", "3", "--out", str(tmp_path / "x"), *flags]
        if flags[0] == "-n":
            argv = ["sim", "-m", "3", "--out", str(tmp_path / "x"), *flags]
        assert main(argv) == 2, flags
        assert message in capsys.readouterr().err, flags
        assert not (tmp_path / "x").exists()
    # an existing file as --out: refused before anything is simulated
    (tmp_path / "file").write_text("mine")
    assert main(["sim", "-n", "3", "-m", "2", "--out", str(tmp_path / "file")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "mine"


def test_memnet_batches_deliveries_and_keeps_its_api() -> None:
    seen: list[tuple[str, str]] = []

    def observe(node: str, ev: sds.Event, now: int) -> None:
        if isinstance(ev, sds.MessageDelivered):
            seen.append((node, ev.message_id))

    net = MemNetwork(seed=1, latency_ms=(5, 7), observer=observe)
    for name in ("a", "b", "c", "d"):
        net.add_node(name, ["room"], sds.Config.fast(1000))
    mid = net.send("a", "room", b"hello")
    assert net.pending() <= 4  # 3 receivers in at most 3 arrival-time batches + a's timer
    net.run_for(100)
    assert sorted(seen) == [("b", mid), ("c", mid), ("d", mid)]
    assert net.nodes["b"].delivered["room"] == [mid]
    assert net.counters["deliveries"] == 3


def test_memnet_topics_reach_members_only() -> None:
    net = MemNetwork(seed=2, latency_ms=(1, 1))
    net.add_node("a", ["x", "y"])
    net.add_node("b", ["x"])
    net.add_node("c", ["y"])
    net.send("a", "x", b"for x")
    net.run_for(10)
    assert len(net.nodes["b"].delivered["x"]) == 1
    assert net.nodes["c"].delivered["y"] == []
    assert net.counters["deliveries"] == 1


def test_sim_config_widens_repair_windows_for_large_channels() -> None:
    """Past 1,000 participants the fast preset's SDS-R spread (T_max - T_min = 1.5 s)
    lets ~loss x N x latency / spread requests cross in flight per lost message, each a
    broadcast to all: the sim keeps >= 1.5 ms per participant of spread, with T_min and
    the lost timeout scaled alike. Up to 1,000, and with js-waku's timings, nothing
    changes; an explicit protocol override wins."""
    fast = sds.Config.fast(1000)
    c = sim_config(SimSpec(participants=10, messages=1))
    assert (c.repair_t_min_ms, c.repair_t_max_ms, c.lost_timeout_ms) == (
        fast.repair_t_min_ms, fast.repair_t_max_ms, fast.lost_timeout_ms)
    # the core stretches T_max itself (to its 120 s limit from 600 participants on with
    # the fast preset): the sim only keeps the lost timeout behind 2.5 stretched windows
    mid = sim_config(SimSpec(participants=100, messages=1))
    assert mid.lost_timeout_ms == 5 * (fast.repair_t_max_ms * 10) // 2
    big = sim_config(SimSpec(participants=10_000, messages=1))
    assert (big.repair_t_min_ms, big.repair_t_max_ms) == (
        fast.repair_t_min_ms, fast.repair_t_max_ms)
    assert big.lost_timeout_ms == 5 * fast.repair_t_max_limit_ms // 2
    # fixed windows (no stretch by the core): the sim widens them itself
    fixed = sim_config(SimSpec(participants=10_000, messages=1,
                               protocol={"repair_window_participants": None}))
    assert fixed.repair_t_max_ms - fixed.repair_t_min_ms >= 15_000
    assert (fixed.repair_t_min_ms, fixed.repair_t_max_ms, fixed.lost_timeout_ms) == (
        10 * fast.repair_t_min_ms, 10 * fast.repair_t_max_ms, 10 * fast.lost_timeout_ms)
    slow = sim_config(SimSpec(participants=10_000, messages=1, profile="waku",
                              timings="default"))
    assert (slow.repair_t_min_ms, slow.repair_t_max_ms) == (30_000, 120_000)
    pinned = sim_config(SimSpec(participants=10_000, messages=1,
                                protocol={"repair_t_min_ms": 100, "repair_t_max_ms": 900}))
    assert (pinned.repair_t_min_ms, pinned.repair_t_max_ms) == (100, 900)


def test_command_line_headless_output_has_no_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a terminal and no --progress: stderr stays empty and stdout is the summary
    only (parseable: its first line starts with 'simulated')."""
    code = main(["sim", "-n", "4", "-m", "3", "--out", str(tmp_path / "r"), "--drain", "5"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.err == ""
    assert captured.out.startswith("simulated 4 participants, 3 messages")
    assert "deliveries" in captured.out and "eta" not in captured.out


def test_send_loss_drops_a_broadcast_for_every_receiver() -> None:
    """``send_loss`` (``sdschat sim --send-loss``, the outgoing half of ``sdschat join
    --drop-rate``): a broadcast lost at the sender reaches nobody, where ``loss`` drops
    each delivery on its own."""
    net = MemNetwork(seed=3, latency_ms=(1, 1), send_loss=0.5)
    for name in ("a", "b", "c", "d"):
        net.add_node(name, ["room"])
    for _ in range(40):
        net._broadcast(net.nodes["a"], "room", b"x" * 10)
    lost = net.counters["send_lost"]
    assert 5 < lost < 35
    assert net.counters["send_lost_bytes"] == 10 * lost
    assert net.counters["deliveries"] == 3 * (40 - lost)  # all or none of the 3 receivers
    with pytest.raises(ValueError, match="send_loss"):
        MemNetwork(send_loss=1.0)


def test_memnet_histories_carry_retrieval_hints_of_a_real_nodes_size() -> None:
    """A real node names each message with its envelope's sha256 (32 bytes) in every
    causal history; the sim did not, and weighed content messages 13% and syncs 8%
    lighter than real nodes do (bench/real_vs_sim.py, 100 nodes)."""
    from net.memnet import retrieval_hint

    net = MemNetwork(seed=1, latency_ms=(1, 1))
    for name in ("a", "b"):
        net.add_node(name, ["room"])
    first = net.send("a", "room", b"one")
    net.run_for(10)
    net.send("b", "room", b"two")
    data = net._wire[("room", net.nodes["b"].participant.channel("room").log_ids()[-1])]
    named = {e.message_id: e.retrieval_hint for e in sds.decode(data).causal_history}
    assert named[first] == retrieval_hint(net._wire[("room", first)])
    assert len(named[first]) == 32


def test_sender_ids_of_a_real_nodes_length(tmp_path: Path) -> None:
    """Real nodes' sender ids are 32 hex characters, in every message and in every
    history entry that names a sender (SDS-R): ``sender_id_chars`` gives the sim's
    participants ids of that length, the short name first, and their messages weigh
    more by as much. Bad lengths are refused."""
    import pyarrow.parquet as pq

    spec = {"participants": 5, "messages": 6, "seed": 3}
    short = run_sim(SimSpec(**spec), tmp_path / "short")  # type: ignore[arg-type]
    real = run_sim(SimSpec(**spec, sender_id_chars=32), tmp_path / "real")  # type: ignore[arg-type]
    nodes = set(pq.read_table(tmp_path / "real" / "events", columns=["node_id"])
                .column("node_id").to_pylist())
    assert len(nodes) == 5 and {len(n) for n in nodes} == {32}
    assert all(n.startswith("p00") for n in nodes)
    assert real.meta["participants_holding_every_message"] == 5
    per = [r.meta["network"]["bytes_sent"] / r.meta["network"]["broadcasts"]
           for r in (short, real)]
    assert per[1] > per[0] + 28  # the sender id alone is 28 characters longer
    with pytest.raises(SimError, match="sender-id-chars"):
        SimSpec(participants=5, messages=1, sender_id_chars=2).validate()
    with pytest.raises(SimError, match="sender-id-chars"):
        SimSpec(participants=5, messages=1, sender_id_chars=65).validate()
