"""The report is honest about its inputs: runs by id, schema version, seq gaps,
disagreeing rows, and detail that does not grow the driver's memory."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pipeline_helpers import channel, report, simulate

from app.sim.simulation import PartitionSpec
from pipeline.report import ReportError, validate_inputs
from pipeline.schema import EVENT_SCHEMA, SCHEMA_VERSION, VERSION_KEY


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate(tmp_path_factory.mktemp("small"), "run", participants=4, messages=10,
                    seed=7, latency_ms=(20, 80))


def test_two_runs_with_one_label_are_told_apart_not_merged(spark: Any, tmp_path: Path) -> None:
    """One label (same spec), two runs: reported apart by run id. Before, two runs
    sharing a label were one channel (here: refused as a duplicated log)."""
    a = simulate(tmp_path, "a", participants=3, messages=5, seed=1)
    b = simulate(tmp_path, "b", participants=3, messages=5, seed=1)
    (label,) = set(pq.read_table(a / "events").column("run").unique().to_pylist()
                   + pq.read_table(b / "events").column("run").unique().to_pylist())
    ids = {pq.read_table(d / "events").column("run_id").unique().to_pylist()[0] for d in (a, b)}
    assert len(ids) == 2
    summary = report(spark, [a, b], tmp_path / "report")
    runs = sorted(c["run"] for c in summary["channels"])
    assert runs == sorted(f"{label}#{i[:8]}" for i in ids)
    by_msgs = sorted((c["messages"], c["participants"]) for c in summary["channels"])
    assert by_msgs == [(5, 3), (5, 3)]
    assert all(c["convergence"]["converged"] for c in summary["channels"])
    assert any(f"the label {label!r} names 2 different runs" in n for n in summary["caveats"])


def test_a_newer_event_schema_is_refused_with_its_number(small_run: Path,
                                                          tmp_path: Path) -> None:
    table = pq.read_table(small_run / "events")
    newer = table.replace_schema_metadata({VERSION_KEY: str(SCHEMA_VERSION + 1).encode()})
    pq.write_table(newer, tmp_path / "x.parquet")
    with pytest.raises(ReportError, match=f"event schema version {SCHEMA_VERSION + 1} is newer"):
        validate_inputs([tmp_path])


def test_a_version_1_file_without_run_id_is_still_read(small_run: Path, tmp_path: Path) -> None:
    table = pq.read_table(small_run / "events").drop_columns(["run_id"])
    pq.write_table(table.replace_schema_metadata({VERSION_KEY: b"1"}), tmp_path / "x.parquet")
    files, rows = validate_inputs([f"file://{tmp_path}"])
    assert rows == table.num_rows and files == [str(tmp_path / "x.parquet")]


def test_seq_gaps_and_disagreeing_senders_are_reported(
    spark: Any, small_run: Path, tmp_path: Path
) -> None:
    rows = pq.read_table(small_run / "events").to_pylist()
    # a partial log: three events of p001 that are not deliveries are gone
    gone = [r for r in rows if r["node_id"] == "p001" and r["kind"] not in
            ("MessageSent", "MessageDelivered", "NodeJoined")][:3]
    assert len(gone) == 3
    rows = [r for r in rows if r not in gone]
    # one delivery names another sender than the message's other rows
    d = next(r for r in rows if r["kind"] == "MessageDelivered" and r["node_id"] == "p002")
    d["sender_id"] = "p999"
    bad = tmp_path / "in"
    bad.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), bad / "e.parquet")
    summary = report(spark, [bad], tmp_path / "report")
    (run,) = summary["runs"]
    assert run["seq_missing"] == 3 and run["participants_with_gaps"] == 1
    assert run["gaps"] == [{"node_id": "p001", "missing_events": 3}]
    assert any("3 event(s) missing from the logs of 1 participant" in n
               for n in summary["caveats"])
    c = channel(summary)
    assert c["convergence"]["sender_disagreements"] == 1
    assert any("disagree on the sender" in n for n in summary["caveats"])


def test_missing_detail_is_parquet_and_the_csv_is_the_top(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.causes

    monkeypatch.setattr(pipeline.causes, "CSV_LIMIT", 5)
    monkeypatch.setattr(pipeline.causes, "LIST_LIMIT", 2)
    run = simulate(tmp_path, "split", participants=4, messages=12, seed=5,
                   partitions=[PartitionSpec(0, None, ((0, 1), (2, 3)))])
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    pairs = c["convergence"]["missing_pairs"]
    assert pairs > 5
    detail = pq.read_table(tmp_path / "report" / "missing")
    assert detail.num_rows == pairs
    assert len(set(zip(detail.column("message_id").to_pylist(),
                       detail.column("node_id").to_pylist(), strict=True))) == pairs
    with (tmp_path / "report" / "missing.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 5
    assert summary["detail"]["missing.csv"] == {"rows": 5, "of": pairs}
    assert summary["detail"]["parquet"] == ["missing/"]  # no violation: no such detail
    assert len(c["convergence"]["missing"]) == 2 and c["convergence"]["missing_truncated"]
    assert c["convergence"]["messages_missing_somewhere"] == len(
        set(detail.column("message_id").to_pylist()))
    assert pc.sum(pc.is_null(detail.column("sent_ms"))).as_py() == 0
    page = (tmp_path / "report" / "report.html").read_text()
    ratio = c["overhead"]["overhead_ratio"]
    assert f"<th>overhead share of bytes sent</th><td>{ratio:.1%}</td>" in page
    assert "<th>send failures</th><td>none</td>" in page and "{}" not in page
    assert f"The first 2 of {c['convergence']['messages_missing_somewhere']}" in page


def test_runs_reported_together_are_compared_one_row_per_run(
    small_run: Path, spark: Any, tmp_path: Path
) -> None:
    """A study of several runs in one report: runs.csv / runs.parquet and an HTML table
    with one row per run (convergence, loss, duplicates, ack p50/p99, bytes per
    delivered message)."""
    cut = simulate(tmp_path, "cut", participants=4, messages=10, seed=7, latency_ms=(20, 80),
                   partitions=[PartitionSpec(0, None, ((0, 1), (2, 3)))])
    summary = report(spark, [small_run, cut], tmp_path / "report")
    rows = {r["run"]: r for r in summary["comparison"]}
    assert len(rows) == 2 == len(summary["channels"])
    for c in summary["channels"]:
        r = rows[c["run"]]
        assert r["converged"] == c["convergence"]["converged"]
        assert r["missing_pairs"] == c["convergence"]["missing_pairs"]
        assert r["ack_p99_ms"] == c["acknowledgement"].get("p99")
        assert r["bytes_per_delivered_message"] == round(
            c["overhead"]["total_sent_bytes"] / c["counts"]["deliveries"], 1)
    assert sorted(r["converged"] for r in rows.values()) == [False, True]
    with (tmp_path / "report" / "runs.csv").open() as fh:
        assert [r["run"] for r in csv.DictReader(fh)] == sorted(rows)
    table = pq.read_table(tmp_path / "report" / "runs.parquet").to_pylist()
    assert [(r["run"], r["missing_pairs"]) for r in table] == [
        (r["run"], r["missing_pairs"]) for r in summary["comparison"]]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Runs compared</h2>" in page and "<th>bytes per delivered message</th>" in page


def test_log_order_is_replayed_from_the_logged_positions(
    small_run: Path, spark: Any, tmp_path: Path
) -> None:
    """'Identical logs in identical order' comes from each participant's logged
    positions, not from the Lamport order: one participant that logged its last
    message at position 0 (the front of its log) holds the same set, the same
    Lamport timestamps, but another order. Before, it was reported identical."""
    table = pq.read_table(small_run / "events")
    rows = table.to_pylist()
    node = rows[0]["node_id"]
    held = [r for r in rows if r["node_id"] == node
            and r["kind"] in ("MessageSent", "MessageDelivered")]
    last = max(held, key=lambda r: r["seq"])
    assert last["position"] > 0
    last["position"] = 0
    out = tmp_path / "in"
    out.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), out / "x.parquet")
    c = channel(report(spark, [out], tmp_path / "report"))
    conv = c["convergence"]
    assert conv["converged"]  # same sets, same Lamport timestamps
    assert conv["order_from"] == "logged positions"
    assert conv["distinct_log_orders"] == 2 and conv["participants_replayed"] >= 1
    assert conv["identical_logs_in_identical_order"] is False


def test_a_replayed_log_equal_to_the_others_is_one_order(
    small_run: Path, spark: Any, tmp_path: Path
) -> None:
    """A participant that held its last two messages the other way round but
    logged the later-held one in front (an insert, replayed) ends with the same log
    as everyone who appended: one order, not two (the appended logs and the
    replayed one are fingerprinted alike)."""
    table = pq.read_table(small_run / "events")
    rows = table.to_pylist()
    node = rows[0]["node_id"]
    held = sorted((r for r in rows if r["node_id"] == node
                   and r["kind"] in ("MessageSent", "MessageDelivered")),
                  key=lambda r: r["seq"])
    x, y = held[-2], held[-1]
    assert (x["position"], y["position"]) == (len(held) - 2, len(held) - 1)
    # y now held first, appended at x's place; x held after it, inserted before it
    x["seq"], y["seq"] = y["seq"], x["seq"]
    y["position"] = len(held) - 2
    out = tmp_path / "in"
    out.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), out / "x.parquet")
    conv = channel(report(spark, [out], tmp_path / "report"))["convergence"]
    assert conv["participants_replayed"] == 1
    assert conv["distinct_log_orders"] == 1
    assert conv["identical_logs_in_identical_order"] is True
