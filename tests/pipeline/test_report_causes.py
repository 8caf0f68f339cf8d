"""Every never-received pair gets its cause, and the causes are right.

Each cause is planted with the simulator (a participant that goes offline for good,
a sender that leaves, a partition that never heals, loss with no time to repair,
a sender's log left out), and every pair's cause is recomputed, independently of
Spark, by DuckDB SQL written from the event schema and run.json
(:func:`duckdb_causes`): the report must equal it pair for pair.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pipeline_helpers import channel, report, simulate

from app.sim import OfflineSpec, PartitionSpec

duckdb = pytest.importorskip("duckdb", reason="duckdb (the dev extra) is the reference")

#: The classification of pipeline/causes.py, restated in DuckDB SQL from the event
#: schema: the missing pairs, every logged copy of their message seen from the
#: participant (offline, partitioned, or reachable), then the cause.
CAUSES_SQL = """
CREATE OR REPLACE TABLE ev AS SELECT * FROM read_parquet('{glob}') WHERE channel IS NOT NULL;
CREATE OR REPLACE TABLE t0 AS SELECT run, min(time_ms) AS t0 FROM ev GROUP BY run;
CREATE OR REPLACE TABLE held AS SELECT DISTINCT run, channel, node_id, message_id FROM ev
  WHERE kind IN ('MessageSent', 'MessageDelivered');
CREATE OR REPLACE TABLE parts AS SELECT run, channel, node_id, min(time_ms) AS first_ms
  FROM ev GROUP BY ALL;
CREATE OR REPLACE TABLE msgs AS SELECT run, channel, message_id,
  count(DISTINCT node_id) AS holders,
  coalesce(min(node_id) FILTER (WHERE kind = 'MessageSent'), min(sender_id)) AS sender
  FROM ev WHERE kind IN ('MessageSent', 'MessageDelivered') GROUP BY ALL;
CREATE OR REPLACE TABLE missing AS SELECT p.run, p.channel, p.node_id, p.first_ms,
  m.message_id, m.holders, m.sender
  FROM parts p JOIN msgs m USING (run, channel)
  ANTI JOIN held h USING (run, channel, node_id, message_id);
CREATE OR REPLACE TABLE periods AS SELECT f.run, f.channel, f.node_id, f.time_ms AS a,
  (SELECT min(o.time_ms) FROM ev o WHERE o.kind = 'NodeOnline' AND o.run = f.run
     AND o.channel = f.channel AND o.node_id = f.node_id AND o.time_ms >= f.time_ms) AS b
  FROM ev f WHERE f.kind = 'NodeOffline';
CREATE OR REPLACE TABLE margin AS SELECT coalesce(max(d.time_ms - s.time_ms), 0) AS ms
  FROM ev d JOIN ev s ON s.run = d.run AND s.channel = d.channel
  AND s.message_id = d.message_id AND s.kind = 'MessageSent' WHERE d.kind = 'MessageDelivered';
CREATE OR REPLACE TABLE copies AS SELECT run, channel, message_id, time_ms AS t, node_id AS by
  FROM ev WHERE kind IN ('MessageSent', 'MessageResent', 'RepairSent');
CREATE OR REPLACE TABLE seen AS SELECT x.run, x.channel, x.node_id, x.message_id, c.t,
  (c.t < x.first_ms OR EXISTS (SELECT 1 FROM periods p WHERE p.run = x.run
     AND p.channel = x.channel AND p.node_id = x.node_id
     AND p.a - (SELECT ms FROM margin) <= c.t AND (p.b IS NULL OR c.t < p.b))) AS off,
  EXISTS (SELECT 1 FROM pspans s JOIN grp gn ON gn.run = s.run AND gn.pi = s.pi
     JOIN grp gb ON gb.run = s.run AND gb.pi = s.pi JOIN t0 ON t0.run = s.run
     WHERE s.run = x.run AND gn.node_id = x.node_id AND gb.node_id = c.by
     AND gn.g <> gb.g AND s.s + t0.t0 <= c.t AND c.t < coalesce(s.h + t0.t0, 9e18)) AS split
  FROM missing x JOIN copies c USING (run, channel, message_id);
CREATE OR REPLACE TABLE waiting AS SELECT DISTINCT run, channel, node_id, message_id FROM ev
  WHERE kind = 'MessagesMissing';
CREATE OR REPLACE TABLE gone AS SELECT run, channel, node_id AS sender FROM periods
  GROUP BY ALL HAVING count(*) FILTER (WHERE b IS NULL) > 0;
CREATE OR REPLACE TABLE causes AS SELECT x.node_id, x.message_id,
  count(s.t) AS copies,
  count(s.t) FILTER (WHERE NOT s.off AND NOT s.split) AS dropped,
  CASE WHEN w.node_id IS NOT NULL THEN 'waiting'
       WHEN x.holders <= 1 AND g.sender IS NOT NULL THEN 'sender_left'
       WHEN count(s.t) = 0 THEN 'unknown'
       WHEN count(s.t) FILTER (WHERE NOT s.off) = 0 THEN 'offline'
       WHEN count(s.t) FILTER (WHERE NOT s.off AND NOT s.split) = 0 THEN 'partitioned'
       ELSE 'dropped' END AS cause
  FROM missing x
  LEFT JOIN seen s USING (run, channel, node_id, message_id)
  LEFT JOIN waiting w USING (run, channel, node_id, message_id)
  LEFT JOIN gone g ON g.run = x.run AND g.channel = x.channel AND g.sender = x.sender
  GROUP BY x.node_id, x.message_id, w.node_id, x.holders, g.sender;
"""


def duckdb_causes(run_dir: Path) -> dict[tuple[str, str], tuple[str, int, int]]:
    """(participant, message) -> (cause, copies, dropped), by DuckDB over the Parquet
    and run.json, for every pair never received."""
    meta = json.loads((run_dir / "run.json").read_text())
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE grp (run VARCHAR, pi INT, node_id VARCHAR, g INT)")
        con.execute("CREATE TABLE pspans (run VARCHAR, pi INT, s BIGINT, h BIGINT)")
        for i, p in enumerate(meta.get("partitions") or []):
            con.execute("INSERT INTO pspans VALUES (?, ?, ?, ?)",
                        [meta["run"], i, p["start_ms"], p["heal_ms"]])
            for g, members in enumerate(p["groups"], start=1):
                con.executemany("INSERT INTO grp VALUES (?, ?, ?, ?)",
                                [[meta["run"], i, m, g] for m in members])
        con.execute(CAUSES_SQL.format(glob=f"{run_dir}/events/*.parquet"))
        rows = con.execute("SELECT node_id, message_id, cause, copies, dropped "
                           "FROM causes").fetchall()
    finally:
        con.close()
    return {(n, m): (c, int(k), int(d)) for n, m, c, k, d in rows}


def spark_causes(out: Path) -> dict[tuple[str, str], tuple[str, int, int]]:
    """The same from the report's Parquet detail (every pair)."""
    if not (out / "missing").is_dir():
        return {}
    return {(r["node_id"], r["message_id"]): (r["cause"], r["copies"], r["dropped"])
            for r in pq.read_table(out / "missing").to_pylist()}


def check_against_duckdb(run_dir: Path, out: Path) -> dict[tuple[str, str], tuple[str, int, int]]:
    mine = spark_causes(out)
    assert mine == duckdb_causes(run_dir)
    return mine


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Loss, churn, a participant that leaves, a partition that never heals, a short
    drain: several causes in one run."""
    return simulate(tmp_path_factory.mktemp("mixed"), "run", participants=8, messages=60,
                    seed=21, loss=0.3, churn=0.25, churn_offline_ms=(3_000, 8_000),
                    offline=[OfflineSpec(7, 20_000, None)],
                    partitions=[PartitionSpec(24_000, None, ((0, 1, 2), (3, 4, 5)))],
                    drain_ms=3_000)


def test_every_cause_equals_the_independent_computation(
    spark: Any, mixed: Path, tmp_path: Path
) -> None:
    summary = report(spark, [mixed], tmp_path / "report")
    c = channel(summary)
    causes = check_against_duckdb(mixed, tmp_path / "report")
    assert len(causes) == c["convergence"]["missing_pairs"] > 0
    counts: dict[str, int] = {}
    for cause, _, _ in causes.values():
        counts[cause] = counts.get(cause, 0) + 1
    assert c["convergence"]["causes"] == counts
    assert {"offline", "partitioned", "dropped"} <= set(counts), counts
    # missing.csv: a cause and a why on every row, seconds since the run's start
    with (tmp_path / "report" / "missing.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(causes)
    for r in rows:
        assert r["cause"] == causes[(r["node_id"], r["message_id"])][0]
        assert r["why"] and r["sent_at_utc"].endswith("+00:00")
        assert 0 <= float(r["sent_s"]) < 200
    # the participant that left has its story
    stories = c["convergence"]["stories"]
    assert "p007" in stories and "offline from 20.0 s to the end" in stories["p007"]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h3>What happened to each participant</h3>" in page
    assert "offline from 20.0 s to the end" in page


def test_a_participant_offline_to_the_end_lacks_what_was_sent_meanwhile(
    spark: Any, tmp_path: Path
) -> None:
    run = simulate(tmp_path, "off", participants=4, messages=30, seed=3,
                   offline=[OfflineSpec(2, 5_000, None)])
    summary = report(spark, [run], tmp_path / "report")
    causes = check_against_duckdb(run, tmp_path / "report")
    events = pq.read_table(run / "events").to_pylist()
    t0 = min(e["time_ms"] for e in events if e["channel"])
    after = {e["message_id"] for e in events
             if e["kind"] == "MessageSent" and e["time_ms"] >= t0 + 5_000}
    assert after and {m for n, m in causes if n == "p002"} == after
    assert {causes[("p002", m)][0] for m in after} == {"offline"}
    assert all(n == "p002" for n, _ in causes)
    story = channel(summary)["convergence"]["stories"]["p002"]
    assert story.startswith(f"p002 never received {len(after)} of the channel's 30 messages: "
                            f"{len(after)} sent while it was offline from 5.0 s to the end")


def test_a_partition_that_never_heals_names_the_other_side(spark: Any, tmp_path: Path) -> None:
    """With 32-character ids, as real nodes have: the groups are named by those ids."""
    run = simulate(tmp_path, "split", participants=4, messages=16, seed=5, sender_id_chars=32,
                   partitions=[PartitionSpec(0, None, ((0, 1), (2, 3)))])
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    causes = check_against_duckdb(run, tmp_path / "report")
    assert causes and {v[0] for v in causes.values()} == {"partitioned"}
    ids = sorted(c["explain"]["participants"])
    assert all(len(i) == 32 for i in ids)
    (part,) = c["explain"]["conditions"]["partitions"]
    assert part["groups"] == [ids[:2], ids[2:]]  # ids of the page, not p000..p003
    with (tmp_path / "report" / "missing.csv").open() as fh:
        row = next(iter(csv.DictReader(fh)))
    side = ids[:2] if row["node_id"] in ids[2:] else ids[2:]
    assert row["why"].startswith(
        f"partitioned from {side[0][:8]}…, {side[1][:8]}… (from 0.0 s, never healed)")
    page = (tmp_path / "report" / "report.html").read_text()
    assert f"{{{ids[0][:8]}…, {ids[1][:8]}…}}" in page or f"{{{ids[0]}, {ids[1]}}}" in page


def test_loss_without_time_to_repair_is_dropped_and_waiting(spark: Any, tmp_path: Path) -> None:
    run = simulate(tmp_path, "lossy", participants=6, messages=80, seed=9, loss=0.5,
                   drain_ms=0)
    summary = report(spark, [run], tmp_path / "report")
    causes = check_against_duckdb(run, tmp_path / "report")
    kinds = {v[0] for v in causes.values()}
    assert {"dropped", "waiting"} <= kinds, kinds
    assert all(d >= 1 for c, _, d in causes.values() if c == "dropped")
    with (tmp_path / "report" / "missing.csv").open() as fh:
        whys = {r["cause"]: r["why"] for r in csv.DictReader(fh)}
    assert whys["dropped"].startswith("dropped by the network ")
    assert whys["waiting"].startswith("reached it at ")
    assert channel(summary)["convergence"]["causes"]["dropped"] >= 1


def test_a_sender_that_leaves_before_anyone_has_its_message(spark: Any, tmp_path: Path) -> None:
    """Its broadcast lost for everyone, the sender goes away for good: nobody can
    repair it."""
    # one sender (the sim's first draw, the same whatever else is planted), whose
    # broadcasts are lost at the sender half of the time; it leaves at 6 s, before the
    # resends that would have carried its last lines
    spec: dict[str, Any] = {"participants": 3, "messages": 12, "seed": 4, "senders": 1,
                            "send_loss": 0.6, "drain_ms": 5_000}
    probe = pq.read_table(simulate(tmp_path, "probe", **spec) / "events").to_pylist()
    sender = next(e["node_id"] for e in probe if e["kind"] == "MessageSent")
    run = simulate(tmp_path, "left", **spec, offline=[OfflineSpec(int(sender[1:]), 6_000, None)])
    summary = report(spark, [run], tmp_path / "report")
    causes = check_against_duckdb(run, tmp_path / "report")
    left = [k for k, v in causes.items() if v[0] == "sender_left"]
    assert left, causes
    story = next(iter(channel(summary)["convergence"]["stories"].values()))
    assert "left at 6.0 s before anyone else had them" in story


def test_a_message_whose_senders_log_is_absent_has_an_unknown_cause(
    spark: Any, mixed: Path, tmp_path: Path
) -> None:
    table = pq.read_table(mixed / "events")
    import pyarrow.compute as pc

    part = tmp_path / "part"
    (part / "events").mkdir(parents=True)
    pq.write_table(table.filter(pc.not_equal(table["node_id"], "p001")),
                   part / "events" / "x.parquet")
    (part / "run.json").write_text((mixed / "run.json").read_text())
    report(spark, [part], tmp_path / "report")
    causes = check_against_duckdb(part, tmp_path / "report")
    assert "unknown" in {v[0] for v in causes.values()}


def test_a_clean_run_flags_nobody(spark: Any, tmp_path: Path) -> None:
    """No cause, no story, and nobody silent: the idle tail of a run is not silence."""
    run = simulate(tmp_path, "clean", participants=30, messages=60, seed=1, rate=1.0,
                   drain_ms=120_000)
    summary = report(spark, [run], tmp_path / "report")
    c = channel(summary)
    assert c["convergence"]["missing_pairs"] == 0 and c["convergence"]["causes"] == {}
    assert c["convergence"]["stories"] == {}
    people = c["explain"]["participants"]
    assert len(people) == 30
    assert [n for n, p in people.items() if p["silent"]] == []
