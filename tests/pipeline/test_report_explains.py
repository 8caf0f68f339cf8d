"""The report explains why: participants with their offline and silent periods, a
timeline, the run's conditions, duplicate deliveries located, missing against lost
said plainly, unknown sizes said unknown, round axis numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pipeline_helpers import channel, report, simulate

from app.sim.simulation import PartitionSpec
from pipeline.html_report import nice_ticks, stacked_bar_svg


@pytest.fixture(scope="module")
def churned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six participants, churn, loss and a partition that never heals."""
    return simulate(tmp_path_factory.mktemp("churn"), "run", participants=6, messages=40,
                    seed=4, loss=0.1, churn=0.2,
                    partitions=[PartitionSpec(5_000, None, ((0, 1, 2), (3, 4, 5)))])


def test_participants_offline_periods_timeline_and_conditions(
    spark: Any, churned: Path, tmp_path: Path
) -> None:
    events = pq.read_table(churned / "events").to_pylist()
    offline = sorted((r["node_id"], r["time_ms"]) for r in events if r["kind"] == "NodeOffline")
    assert offline, "the run has churn"
    t0 = min(r["time_ms"] for r in events if r["channel"] is not None)
    summary = report(spark, [churned], tmp_path / "report")
    c = channel(summary)
    people = c["explain"]["participants"]
    assert sorted(people) == [f"p{i:03d}" for i in range(6)]
    # each logged NodeOffline is an offline period starting then
    for node, at in offline:
        assert at - t0 in [a for a, _ in people[node]["offline"]], people[node]
    # what each holds: the missing pairs are the channel's messages less what is held
    assert sum(c["messages"] - p["held"] for p in people.values()) == \
        c["convergence"]["missing_pairs"]
    tl = c["explain"]["timeline"]
    assert sum(tl["counts"]["MessageSent"]) == c["counts"]["messages_sent"]
    (part,) = c["explain"]["conditions"]["partitions"]
    assert part["start_ms"] == 5_000 and part["heal_ms"] is None
    assert part["groups"] == [["p000", "p001", "p002"], ["p003", "p004", "p005"]]

    html = (tmp_path / "report" / "report.html").read_text()
    for heading in ("<h3>Participants</h3>", "<h3>Timeline</h3>",
                    "<h3>Conditions of the run</h3>", "<h3>Duplicate deliveries</h3>"):
        assert heading in html
    assert "partition from 5.0 s, never healed: {p000, p001, p002} | {p003, p004, p005}" in html
    assert 'aria-label="timeline"' in html
    # missing and lost side by side, in words
    assert (f"{c['convergence']['missing_pairs']:,} (participant, message) pairs are never "
            "received") in html
    assert "A pair never received and never declared lost is one the participant did not " \
        "know about" in html
    assert "<dt>missing since</dt><dd>when the participant first noticed" in html


def test_a_duplicate_delivery_is_located(spark: Any, tmp_path: Path) -> None:
    run = simulate(tmp_path, "run", participants=3, messages=6, seed=2)
    table = pq.read_table(run / "events")
    rows = table.to_pylist()
    i = next(i for i, r in enumerate(rows) if r["kind"] == "MessageDelivered")
    dup = dict(rows[i])
    dup["seq"] = max(r["seq"] for r in rows if r["node_id"] == dup["node_id"]) + 1
    dup["time_ms"] = rows[i]["time_ms"] + 1_000
    extra = run / "events" / "zz-dup.parquet"
    pq.write_table(pa.Table.from_pylist([dup], schema=table.schema), extra)
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    assert c["convergence"]["duplicate_deliveries"] == 1
    (d,) = c["explain"]["duplicates"]
    assert (d["node_id"], d["message_id"], d["times_held"]) == (
        dup["node_id"], dup["message_id"], 2)
    t0 = pc.min(table.filter(pc.is_valid(table["channel"]))["time_ms"]).as_py()
    assert d["first_held_ms"] == rows[i]["time_ms"] - t0
    html = (tmp_path / "report" / "report.html").read_text()
    assert f'<td><span title="{dup["message_id"]}">{dup["message_id"][:8]}…</span></td>' in html


def test_a_silent_participant_shows_a_silent_period(spark: Any, tmp_path: Path) -> None:
    """A participant that logged nothing for a while (a real node killed and restarted
    logs nothing in between) gets a silent period from its last event to its next."""
    # a line every 4 s: the quiet channel's syncs are few, the run lasts over 30 s
    run = simulate(tmp_path, "run", participants=3, messages=10, seed=2, rate=0.25)
    table = pq.read_table(run / "events")
    times = table["time_ms"].to_pylist()
    t0, t1 = min(times), max(times)
    assert t1 - t0 > 30_000, "the run is long enough to cut a hole in"
    hole = (t0 + 10_000, t0 + 25_000)
    keep = pc.invert(pc.and_(pc.equal(table["node_id"], "p001"), pc.and_(
        pc.greater_equal(table["time_ms"], hole[0]), pc.less(table["time_ms"], hole[1]))))
    for f in (run / "events").iterdir():
        f.unlink()
    pq.write_table(table.filter(keep), run / "events" / "part.parquet")
    summary = report(spark, [run], tmp_path / "report")
    silent = channel(summary)["explain"]["participants"]["p001"]["silent"]
    assert len(silent) == 1
    (a, b, heard), = silent
    assert heard >= 5  # the others' broadcasts it logged nothing of
    assert hole[0] - t0 - 1_000 <= a <= hole[0] - t0 + 1_000
    assert hole[1] - t0 - 1_000 <= b <= hole[1] - t0 + 1_000


def test_axis_numbers_are_round() -> None:
    assert nice_ticks(37) == [0, 10, 20, 30, 40]
    assert nice_ticks(3_900) == [0, 1_000, 2_000, 3_000, 4_000]
    assert nice_ticks(0.9, 4) == pytest.approx([0, 0.5, 1.0])
    assert nice_ticks(129.6, 5) == [0, 50, 100, 150]


def test_sizes_not_logged_are_unknown_not_zero() -> None:
    svg = stacked_bar_svg([("content", 100), ("sync messages (7)", None)], "bytes sent")
    assert "sync messages (7): unknown (sizes not logged)" in svg
    assert "sync messages (7): 0 bytes" not in svg


def test_no_explain_leaves_the_explanation_out(
    spark: Any, churned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--no-explain``: the figures without the participants, timeline and duplicates
    (their Spark jobs are not run)."""
    import argparse

    from pipeline.report import run_report

    args = argparse.Namespace(
        inputs=[str(churned)], out=str(tmp_path / "report"), master="local[2]",
        shuffle_partitions=2, driver_memory="1g", no_explain=True)
    assert run_report(args, spark=spark) == 0
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<h3>Never received</h3>" in html
    assert "<h3>Participants</h3>" not in html and "<h3>Timeline</h3>" not in html
    assert "report.html" in capsys.readouterr().out


def test_the_timeline_draws_each_kind_on_its_own_scale(
    spark: Any, churned: Path, tmp_path: Path
) -> None:
    """Duplicates dropped (tens of thousands in a lossy run) no longer flatten the
    few sends, notices and repairs: each kind has its own chart whose tallest bar is
    its own largest bucket, and the duplicates come last, apart."""
    import re

    from pipeline.html_report import _PANEL_H, timeline_svg

    c = channel(report(spark, [churned], tmp_path / "report"))
    tl = c["explain"]["timeline"]
    # more duplicates dropped in a bucket than messages sent: one scale would dwarf them
    assert max(tl["drops"]["duplicate"]) > max(tl["counts"]["MessageSent"])
    svg = timeline_svg(c, sorted(c["explain"]["participants"].values(),
                                 key=lambda p: p["node_id"]))
    bars: dict[str, list[float]] = {}
    for height, label in re.findall(r'height="([\d.]+)" fill="#[0-9a-f]+"><title>([^<:]+): ',
                                    svg):
        bars.setdefault(label, []).append(float(height))
    assert {"sent", "noticed missing", "repaired",
            "duplicates dropped (copies of held messages)"} <= set(bars), bars.keys()
    for label, heights in bars.items():
        assert max(heights) == pytest.approx(_PANEL_H), label
    labels = list(bars)
    assert labels[-1] == "duplicates dropped (copies of held messages)"
    assert labels[0] == "sent"
