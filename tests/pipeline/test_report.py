"""The Spark reliability report on simulations whose outcome is known by construction."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pipeline_helpers import channel, events, report, simulate

from app.sim.simulation import PartitionSpec
from pipeline.schema import EVENT_SCHEMA

LATENCY = (20, 80)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 participants, 30 messages, no loss: everyone must converge with zero resends."""
    tmp = tmp_path_factory.mktemp("clean")
    return simulate(tmp, "run", participants=6, messages=30, seed=11, latency_ms=LATENCY)


def test_no_loss_everyone_converges_with_zero_resends(
    spark: Any, clean_run: Path, tmp_path: Path
) -> None:
    summary = report(spark, [clean_run], tmp_path / "report")
    c = channel(summary)
    assert summary["complete"] is True
    assert c["participants"] == 6 and c["messages"] == 30
    conv = c["convergence"]
    assert conv["converged"] and conv["identical_logs_in_identical_order"]
    assert conv["missing_pairs"] == 0 and conv["missing"] == []
    assert conv["held_pairs"] == conv["expected_pairs"] == 6 * 30
    assert conv["duplicate_deliveries"] == 0
    assert c["counts"]["resends"] == 0
    assert c["counts"]["deliveries"] == 30 * 5
    assert c["counts"]["repairs_sent"] == 0 and c["counts"]["lost"]["messages"] == 0
    assert c["causal_order"]["ok"] and c["causal_order"]["violations"] == 0
    assert c["causal_order"]["checked_dependencies"] > 0
    lat = c["latency_ms"]
    assert lat["count"] == 150
    assert LATENCY[0] <= lat["p50"] <= LATENCY[1] and lat["max"] <= LATENCY[1]
    ack = c["acknowledgement"]
    assert ack["acknowledged"] + ack["unacknowledged_at_end"] == 30
    assert ack["failed"] == {}
    ov = c["overhead"]
    assert ov["content_bytes"] == 30 * 64
    assert ov["metadata_bytes"] > 0 and 0 < ov["overhead_ratio"] < 1
    assert conv["over_time"]["held_share"][-1] == 1.0
    # The files are there and agree.
    out = tmp_path / "report"
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["channels"][0]["convergence"]["converged"] is True
    page = (out / "report.html").read_text()
    assert "<svg" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    with (out / "latency_by_receiver.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 6


def test_partition_that_never_heals_names_exactly_the_missing_messages(
    spark: Any, tmp_path: Path
) -> None:
    groups = ((0, 1, 2), (3, 4, 5))
    run = simulate(
        tmp_path, "split", participants=6, messages=24, seed=5, latency_ms=LATENCY,
        partitions=[PartitionSpec(0, None, groups)],
    )
    rows = events(run)
    side = {f"p{i:03d}": g for g, members in enumerate(groups) for i in members}
    sent = [(r["message_id"], r["node_id"]) for r in rows if r["kind"] == "MessageSent"]
    assert len(sent) == 24
    expected = {
        (mid, node) for mid, sender in sent for node in side if side[node] != side[sender]
    }
    assert expected  # both sides sent something (seeded)

    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    conv = c["convergence"]
    assert not conv["converged"]
    assert conv["missing_pairs"] == len(expected)
    with (tmp_path / "report" / "missing.csv").open() as fh:
        listed = {(r["message_id"], r["node_id"]) for r in csv.DictReader(fh)}
    assert listed == expected
    by_msg = {m["message_id"]: m for m in conv["missing"]}
    for mid, sender in sent:
        other = sorted(n for n in side if side[n] != side[sender])
        assert sorted(by_msg[mid]["missing_at"]) == other
        assert by_msg[mid]["sender"] == sender
        assert by_msg[mid]["missing_since_ms"] is not None
    # Within each side everything arrived, in causal order.
    assert c["causal_order"]["violations"] == 0
    assert c["counts"]["lost"]["messages"] == 0


def test_reordered_log_is_caught_by_the_causal_order_check(
    spark: Any, clean_run: Path, tmp_path: Path
) -> None:
    table = pq.read_table(clean_run / "events")
    rows = table.to_pylist()
    node = "p002"
    mine = sorted(
        (r for r in rows if r["node_id"] == node and r["kind"] == "MessageDelivered"),
        key=lambda r: r["seq"],
    )
    # A delivered message whose causal history names the message delivered just before it.
    pair = next(
        (a, b) for a, b in itertools.pairwise(mine)
        if a["message_id"] in (b["causal_history"] or [])
    )
    a, b = pair
    a_id, b_id = a["message_id"], b["message_id"]
    a["seq"], b["seq"] = b["seq"], a["seq"]  # swap them in the participant's event order
    bad = tmp_path / "reordered"
    bad.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), bad / "events.parquet")

    summary = report(spark, [bad], tmp_path / "report")
    causal = channel(summary)["causal_order"]
    assert not causal["ok"]
    assert causal["participants_violating"] == 1
    assert causal["delivered_after"] >= 1 and causal["never_held"] == 0
    listed = {(v["node_id"], v["message_id"], v["dependency"]) for v in causal["violations_listed"]}
    assert (node, b_id, a_id) in listed
    # The log still holds every message: convergence is not what is wrong.
    assert channel(summary)["convergence"]["converged"]


def test_loss_is_repaired_and_counted(spark: Any, tmp_path: Path) -> None:
    run = simulate(
        tmp_path, "lossy", participants=5, messages=30, seed=3, loss=0.3, latency_ms=LATENCY,
    )
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    assert c["convergence"]["converged"]
    assert c["causal_order"]["ok"]
    counts = c["counts"]
    assert counts["repairs_sent"] + counts["resends"] > 0
    assert counts["dropped"].get("duplicate", 0) > 0
    assert c["latency_ms"]["p99"] > c["latency_ms"]["p50"]


def test_store_peer_serves_a_participant_that_was_away(spark: Any, tmp_path: Path) -> None:
    run = simulate(
        tmp_path, "churn", participants=5, messages=30, seed=8, latency_ms=LATENCY,
        churn=0.4, churn_offline_ms=(4_000, 6_000), store=True, repair_cache=4,
    )
    rows = events(run)
    kinds = {r["kind"] for r in rows}
    assert {"NodeOffline", "NodeOnline"} <= kinds
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    assert c["convergence"]["converged"]
    assert c["causal_order"]["ok"]
    assert c["counts"]["store_retrievals"] == sum(r["kind"] == "StoreRetrieval" for r in rows)


def test_two_runs_and_two_channels_are_reported_separately(spark: Any, tmp_path: Path) -> None:
    a = simulate(tmp_path, "a", participants=4, messages=8, seed=1, channels=2)
    b = simulate(tmp_path, "b", participants=4, messages=6, seed=2)
    summary = report(spark, [a, b], tmp_path / "report")
    names = sorted((c["run"].split("-")[1], c["channel"]) for c in summary["channels"])
    assert names == [("1", "sim-0"), ("1", "sim-1"), ("2", "sim")]
    assert sum(c["messages"] for c in summary["channels"]) == 14
    assert all(c["convergence"]["converged"] for c in summary["channels"])


def test_same_event_log_twice_is_refused(spark: Any, clean_run: Path, tmp_path: Path) -> None:
    from pipeline.report import ReportError

    with pytest.raises(ReportError, match="same event log was given twice"):
        report(spark, [clean_run, clean_run / "events"], tmp_path / "report")
    assert not (tmp_path / "report").exists()


def test_rows_missing_required_columns_are_refused(
    spark: Any, clean_run: Path, tmp_path: Path
) -> None:
    from pipeline.report import ReportError

    table = pq.read_table(clean_run / "events")
    kind = table.column("kind")
    nulled = pc.if_else(pc.equal(kind, "NodeJoined"), pa.scalar(None, pa.string()), kind)
    table = table.set_column(table.schema.get_field_index("kind"), "kind", nulled)
    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(table.cast(EVENT_SCHEMA.remove_metadata()
                              .set(6, pa.field("kind", pa.string()))), bad / "x.parquet")
    with pytest.raises(ReportError, match="malformed"):
        report(spark, [bad], tmp_path / "report")
    assert not (tmp_path / "report" / "summary.json").exists()


def test_delivery_rows_without_a_message_id_are_refused(
    spark: Any, clean_run: Path, tmp_path: Path
) -> None:
    """One MessageDelivered row with a null message_id used to pass and be counted as
    one more message, missing at every participant (exit 0, a wrong report)."""
    from pipeline.report import ReportError

    table = pq.read_table(clean_run / "events")
    kind = table.column("kind").to_pylist()
    first = kind.index("MessageDelivered")
    ids = table.column("message_id").to_pylist()
    ids[first] = None
    table = table.set_column(
        table.schema.get_field_index("message_id"), "message_id", pa.array(ids, pa.string())
    )
    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(table, bad / "x.parquet")
    with pytest.raises(ReportError, match="1 MessageSent, MessageDelivered, MessageLost rows "
                       "have no message_id"):
        report(spark, [bad], tmp_path / "report")
    assert not (tmp_path / "report").exists()


def test_damaged_parquet_data_is_a_clear_error(
    spark: Any, clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Damage past an intact footer passes the footer check; Spark's failure to read it
    is reported in one line naming the file (exit 2, nothing written)."""
    import argparse

    from pipeline.report import run_report

    (src,) = sorted((clean_run / "events").glob("*.parquet"))
    data = bytearray(src.read_bytes())
    middle = len(data) // 3
    data[middle:middle + 2000] = bytes(range(256)) * 7 + bytes(208)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.parquet").write_bytes(bytes(data))
    args = argparse.Namespace(
        inputs=[str(bad)], out=str(tmp_path / "report"), master="local[2]",
        shuffle_partitions=2, driver_memory="1g",
    )
    assert run_report(args, spark=spark) == 2
    err = capsys.readouterr().err
    assert f"{bad / 'x.parquet'}: damaged Parquet data" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "report").exists()


def test_declared_lost_then_received_is_told_apart(spark: Any, tmp_path: Path) -> None:
    """A participant declares a message lost when it stops waiting; a repair or resend
    may still bring it. The report counts such pairs as received later, and "lost" in
    the table is the messages never received by someone who declared them lost:
    recounted here from the raw events, without Spark."""
    from app.sim.simulation import parse_partition

    run = simulate(
        tmp_path, "lossy", participants=6, messages=300, loss=0.7, seed=11,
        # loss makes gaps that repair fills after they were declared lost; a partition
        # that never heals leaves others unfilled for good
        partitions=[parse_partition("100:never:2", 6)], drain_ms=8_000,
    )
    rows = events(run)
    lost = {(e["node_id"], e["message_id"]) for e in rows if e["kind"] == "MessageLost"}
    held = {(e["node_id"], e["message_id"]) for e in rows
            if e["kind"] in ("MessageSent", "MessageDelivered")}
    assert lost & held and lost - held  # this run has both kinds
    summary = report(spark, [run], tmp_path / "report")
    lost_counts = channel(summary)["counts"]["lost"]
    assert {k: v for k, v in lost_counts.items() if not k.startswith("listed")} == {
        "pairs": len(lost),
        "messages": len({m for _, m in lost}),
        "pairs_received_later": len(lost & held),
        "pairs_never_received": len(lost - held),
        "messages_never_received_by_some": len({m for _, m in lost - held}),
    }
    page = (tmp_path / "report" / "report.html").read_text()
    assert f"received later: {len(lost & held)} pairs" in page


def test_a_run_without_messages_is_neither_converged_nor_not(
    spark: Any, tmp_path: Path
) -> None:
    """Participants joined, nobody wrote: the table said "NO" (not converged)."""
    import io

    from pipeline.report import print_table

    run = simulate(tmp_path, "quiet", participants=3, messages=0, seed=1)
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    assert c["messages"] == 0 and c["convergence"]["converged"] is None
    table = io.StringIO()
    print_table(summary, table)
    (line,) = [x for x in table.getvalue().splitlines() if x.startswith("run-") or "/sim" in x]
    assert line.split()[3] == "-", line
    assert "no messages" in (tmp_path / "report" / "report.html").read_text()


def test_ctrl_c_while_the_report_moves_into_place_waits_for_the_move(
    spark: Any, clean_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGINT that lands while the finished report is moved into its directory does
    not leave it half-replaced: the move completes, then InterruptedAfterWriting."""
    import os
    import signal

    from pipeline.report import InterruptedAfterWriting, compute_report, write_report

    out = tmp_path / "report"
    write_report(compute_report(spark, [clean_run]), out)  # an older report to replace
    old = (out / "summary.json").read_text()
    summary = compute_report(spark, [clean_run])
    real_replace = Path.replace
    sent: list[str] = []

    def replace_and_interrupt(self: Path, target: Any) -> Path:
        if not sent:  # the first file moved: the SIGINT arrives mid-move
            sent.append(self.name)
            os.kill(os.getpid(), signal.SIGINT)
        return real_replace(self, target)

    handler = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(Path, "replace", replace_and_interrupt)
    with pytest.raises(InterruptedAfterWriting):
        write_report(summary, out)
    monkeypatch.undo()
    assert sent == ["missing.csv"]
    assert signal.getsignal(signal.SIGINT) is handler  # restored
    new = json.loads((out / "summary.json").read_text())
    assert new["channels"] == json.loads(old)["channels"]
    assert (out / "summary.json").read_text() != old  # written again, not left
    for name in ("missing.csv", "causal_violations.csv", "latency_by_receiver.csv",
                 "runs.csv", "runs.parquet", "report.html"):
        assert (out / name).exists(), name
    assert not list(tmp_path.glob(".report.report-partial-*"))
