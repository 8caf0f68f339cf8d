"""The report's computation: Spark DataFrame operations only, a handful of jobs.

Nothing here runs Python on executors (no UDF, no ``applyInArrow``, no RDD), and
nothing uses ``sparkContext``: the same code runs on ``local[N]``, on a
standalone/YARN/Kubernetes cluster without shipping anything, and over Spark
Connect. What reaches the driver is bounded by the number of channels and
participants and by :data:`LIST_LIMIT`, never by the number of failures: the
per-pair and per-violation detail is written as Parquet (``missing/``,
``causal_violations/``) and only its top entries are read back.

Jobs (actions) of a report:

1. input check and counts (:func:`check_rows`): one aggregate of all rows,
   combined on the map side, gives per run malformed rows, duplicate
   ``(run_id, node_id, seq)`` and ``seq`` gaps (distinct seqs as bitmaps), run ids
   per label, and per channel the counts and bytes per (kind, reason), the time
   span and the participants;
2. every other per-channel figure, in one collect of unioned aggregates: one pass
   over the message events per (participant, message) (kept) feeds the held,
   lost, acknowledged, resent and repaired figures, the per-message table,
   per-receiver latency, the convergence-over-time buckets and the log orders
   replayed from the logged positions;
3. the causal check's counts: loops over integer arrays inside one row per
   receiver (:func:`_causal_totals`), no row per (receiver, message, dependency);
4. only when something is missing / violated: the detail written as Parquet and
   its top entries read back.

Ids are interned as 64-bit integers (``xxhash64`` of run, channel and id) for the
joins; a hash collision between two ids of one channel is detected and refused.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.causes import lost_messages, missing_pairs
from pipeline.explain import explain_channels
from pipeline.frames import (
    CSV_LIMIT,
    LIST_LIMIT,
    NODES_PER_MESSAGE,
    TIME_BUCKETS,
    InputError,
    fresh,
    hash_id,
    kept,
    spark_schema,
    sql_conf,
)
from pipeline.schema import COLUMNS

__all__ = ["LIST_LIMIT", "NODES_PER_MESSAGE", "TIME_BUCKETS", "compute_channels"]

_HELD = ["MessageSent", "MessageDelivered"]
_NEED_ID = [*_HELD, "MessageLost"]
#: Kinds whose JSON detail the report reads.
_DETAIL_KINDS = ["MessagesMissing", "RepairRequested", "MessageAcknowledged"]
_KEYS = ["run", "channel"]
_BIG = 2**62


def _pct(values: Sequence[Any] | None) -> dict[str, Any]:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    return {"p50": values[0], "p90": values[1], "p99": values[2]}


def _percentiles(counts: Any, total: Any) -> Any:
    """p50, p90, p99 of (value ``v``, count ``n``) structs: per percentile the
    smallest value whose cumulative count reaches it (one pass over the sorted
    counts, evaluated in the JVM)."""
    from pyspark.sql import functions as F

    def step(acc: Any, x: Any) -> Any:
        c = acc["c"] + x["n"]
        return F.struct(c.alias("c"), *[
            F.coalesce(acc[f"p{q}"], F.when(c >= total * (q / 100), x["v"])).alias(f"p{q}")
            for q in (50, 90, 99)])

    start = F.struct(F.lit(0).cast("long").alias("c"), *[
        F.lit(None).cast("long").alias(f"p{q}") for q in (50, 90, 99)])
    return F.aggregate(F.array_sort(counts), start, step,
                       lambda acc: F.array(acc["p50"], acc["p90"], acc["p99"]))


def check_rows(raw: Any, total_rows: int | None) -> dict[str, Any]:
    """Job 1: malformed rows, duplicate keys, seq gaps and run ids, per run; every
    per-(kind, reason) count and the participants per channel; in one collect.

    Hash aggregates combined on the map side (no sort, no shuffle of the rows):
    per (run, run id, participant, ``seq`` div 64) the distinct seqs as a 64-bit
    word; per (run, run id, channel, kind, reason) the counts and bytes; per
    channel the participants. Returns ``{"rows", "runs": [{run, run_id, rows,
    participants, seq_missing, participants_with_gaps, gaps}], "kinds": [per (run,
    run_id, channel, kind, reason)], "participants":
    {(run, run_id, channel): n}}``; raises :class:`InputError`.
    """
    from pyspark.sql import functions as F

    lacking = (
        F.col("run").isNull() | F.col("node_id").isNull() | F.col("seq").isNull()
        | F.col("time_ms").isNull() | F.col("kind").isNull()
    )
    no_id = F.col("kind").isin(_NEED_ID) & F.col("message_id").isNull()
    reason = F.when(F.col("kind").isin("MessageDropped", "MessageSendFailed"),
                    F.coalesce("reason", F.lit("unknown")))
    # distinct seqs as 64-bit words: per (participant, seq div 64) the OR of
    # 1 << (seq mod 64), a hash aggregate (fixed-width buffers) combined on the map
    # side, no sort and no shuffle of the rows; duplicate keys are rows - distinct
    # seqs, gaps max seq - distinct seqs
    per_node = raw.groupBy(
        "run", "run_id", "node_id", F.shiftright("seq", 6).alias("w"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.bit_or(F.expr("shiftleft(1L, cast(seq & 63 AS int))")).alias("bits"),
        F.max("seq").alias("max_seq"),
        F.sum(F.when(lacking, 1).otherwise(0)).alias("bad"),
        F.sum(F.when(no_id, 1).otherwise(0)).alias("no_id"),
    ).groupBy("run", "run_id", "node_id").agg(
        F.sum("n").alias("rows"), F.sum(F.bit_count("bits")).alias("seqs"),
        F.max("max_seq").alias("max_seq"), F.sum("bad").alias("bad"),
        F.sum("no_id").alias("no_id"),
    ).withColumn("dup_rows", F.col("rows") - F.col("seqs")).withColumn(
        "gap", F.greatest(F.col("max_seq") - F.col("seqs"), F.lit(0)))
    run_agg = per_node.groupBy("run", "run_id").agg(
        F.sum("rows").alias("rows"), F.count(F.lit(1)).alias("participants"),
        F.sum("bad").alias("bad"), F.sum("no_id").alias("no_id"),
        F.sum("dup_rows").alias("dup_rows"),
        F.sum("gap").alias("seq_missing"),
        F.sum(F.when(F.col("gap") > 0, 1).otherwise(0)).alias("participants_with_gaps"),
        F.slice(
            F.sort_array(F.collect_list(F.when(
                F.col("gap") > 0, F.struct((-F.col("gap")).alias("g"), F.col("node_id"))
            ))), 1, 20,
        ).alias("gaps"),
    )
    # per (kind, reason) and participants: few groups, hash aggregates over the
    # columns each needs (three scans in one action, side by side)
    chan = raw.filter(F.col("channel").isNotNull())
    # (the source is a key, not a collected set: fixed-width buffers keep it a hash
    # aggregate; the driver merges the few rows per kind)
    per_kind = chan.groupBy("run", "run_id", "channel", "kind", reason.alias("r"),
                            "source").agg(
        F.count(F.lit(1)).alias("n"), F.min("time_ms").alias("t0"),
        F.max("time_ms").alias("t1"),
        F.count("size_bytes").alias("sized"), F.sum("size_bytes").alias("size_b"),
        F.sum("content_bytes").alias("content_b"), F.sum("metadata_bytes").alias("metadata_b"),
        F.sum(F.when(F.col("kind") == "RepairRequested", F.greatest(F.size(F.from_json(
            "detail", "struct<message_ids:array<string>>").message_ids), F.lit(0))))
        .alias("repair_ids"),
    )
    participants = chan.groupBy("run", "run_id", "channel").agg(
        F.countDistinct("node_id").alias("n"))
    # ONE collect: the three as (what, run, run_id, channel, JSON) rows
    out = run_agg.select(
        F.lit("run").alias("what"), "run", "run_id", F.lit(None).cast("string").alias("channel"),
        F.to_json(F.struct(*[c for c in run_agg.columns if c not in ("run", "run_id")]))
        .alias("value"),
    ).unionByName(per_kind.select(
        F.lit("kind").alias("what"), "run", "run_id", "channel", F.to_json(F.struct(
            "kind", "r", "n", "t0", "t1", "source", "sized", "size_b", "content_b",
            "metadata_b", "repair_ids")).alias("value"),
    )).unionByName(participants.select(
        F.lit("participants").alias("what"), "run", "run_id", "channel",
        F.col("n").cast("string").alias("value"),
    ))
    per_run: list[dict[str, Any]] = []
    kinds: list[dict[str, Any]] = []
    parts: dict[tuple[str, str | None, str], int] = {}
    for row in out.collect():
        if row["what"] == "run":
            per_run.append({"run": row["run"], "run_id": row["run_id"],
                            **json.loads(row["value"])})
        elif row["what"] == "kind":
            kinds.append({"run": row["run"], "run_id": row["run_id"],
                          "channel": row["channel"], **json.loads(row["value"])})
        else:
            parts[(row["run"], row["run_id"], row["channel"])] = int(row["value"])
    rows = sum(int(r["rows"]) for r in per_run)
    bad = sum(int(r.get("bad") or 0) for r in per_run)
    if bad:
        raise InputError(
            f"{bad} of {rows} rows lack run, node_id, seq, time_ms or kind: malformed input"
        )
    no_ids = sum(int(r.get("no_id") or 0) for r in per_run)
    if no_ids:
        # a null id would join as a message nobody holds: "missing" everywhere
        raise InputError(
            f"{no_ids} {', '.join(_NEED_ID)} rows have no message_id: malformed input"
        )
    dup_rows = sum(int(r.get("dup_rows") or 0) for r in per_run)
    if dup_rows:
        raise InputError(
            f"{dup_rows} rows repeat the (run, node_id, seq) key of another row: the same "
            "event log was given twice, or the input is malformed"
        )
    runs = [
        {
            "run": r["run"], "run_id": r["run_id"], "rows": int(r["rows"]),
            "participants": int(r["participants"]),
            "seq_missing": int(r.get("seq_missing") or 0),
            "participants_with_gaps": int(r.get("participants_with_gaps") or 0),
            "gaps": [{"node_id": g["node_id"], "missing_events": -g["g"]}
                     for g in r.get("gaps") or []],
        }
        for r in sorted(per_run, key=lambda r: (r["run"], r["run_id"] or ""))
    ]
    return {"rows": rows if total_rows is None else total_rows, "runs": runs,
            "kinds": kinds, "participants": parts}


def resolve_labels(runs: list[dict[str, Any]]) -> tuple[dict[str, list[str | None]], list[str]]:
    """Labels naming more than one run id; each such run gets ``label#<id prefix>``."""
    ids: dict[str, list[str | None]] = {}
    for r in runs:
        ids.setdefault(r["run"], []).append(r["run_id"])
    collided = {k: v for k, v in ids.items() if len(v) > 1}
    notes = []
    for label, run_ids in sorted(collided.items()):
        for r in runs:
            if r["run"] == label:
                r["label"] = label
                r["run"] = f"{label}#{_short(r['run_id'])}"
        named = ", ".join(sorted(f"{label}#{_short(i)}" for i in run_ids))
        notes.append(
            f"the label {label!r} names {len(run_ids)} different runs (run ids differ): "
            f"reported apart as {named}"
        )
    return collided, notes


def _short(run_id: str | None) -> str:
    return "v1" if run_id is None else run_id[:8]


def _merge_kind(b: dict[str, Any], v: dict[str, Any]) -> None:
    """One (kind, reason) row of the per-kind aggregate into a channel's figures."""
    kind = v["kind"]
    n = int(v["n"])
    b["kinds"][kind] = b["kinds"].get(kind, 0) + n
    b["rows"] = (b["rows"] or 0) + n
    b["t0"] = v["t0"] if b["t0"] is None else min(b["t0"], v["t0"])
    b["t1"] = v["t1"] if b["t1"] is None else max(b["t1"], v["t1"])
    if v.get("source") is not None:
        b["sources"] = sorted(set(b["sources"] or []) | {v["source"]})

    def add(name: str, value: Any) -> None:
        # a kind comes in one row per source: sums (None while nothing was summed)
        if value is not None:
            b[name] = (b[name] or 0) + value

    if kind == "MessageDropped":
        b["drops"][v["r"]] = b["drops"].get(v["r"], 0) + n
    elif kind == "MessageSendFailed":
        b["failed"][v["r"]] = b["failed"].get(v["r"], 0) + n
    elif kind == "RepairRequested":
        add("repair_ids", v.get("repair_ids") or 0)
    elif kind == "MessageSent":
        add("content_messages", n)
        add("content_b", v.get("content_b"))
        add("metadata_b", v.get("metadata_b"))
        add("size_b", v.get("size_b"))
    elif kind == "SyncSent":
        add("sync_n", n)
        add("sync_known", v.get("sized") or 0)
        add("sync_b", v.get("size_b"))


def compute_channels(
    spark: Any, files: Sequence[str], total_rows: int | None,
    detail_dir: str | Path | None = None, explain: bool = True,
    partitions: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Everything of the summary but the inputs; detail Parquet goes to ``detail_dir``.

    ``partitions``: run label -> the partitions of a simulation (run.json, member
    ids; times in ms since the run's start), for the causes of missing pairs.

    Returns the summary (JSON-able) with ``_missing_rows``, ``_violation_rows``
    (both at most :data:`CSV_LIMIT`), ``_receiver_rows`` and ``_detail_dir``.
    """
    from pyspark.sql import functions as F

    detail = str(detail_dir) if detail_dir is not None else tempfile.mkdtemp(
        prefix="sdschat-report-detail-")
    raw = spark.read.schema(spark_schema()).parquet(*files).select(*COLUMNS)
    checked = check_rows(raw, total_rows)
    collided, label_notes = resolve_labels(checked["runs"])
    run_col = F.col("run")
    if collided:
        run_col = F.when(
            F.col("run").isin(list(collided)),
            F.concat(F.col("run"), F.lit("#"),
                     F.coalesce(F.substring("run_id", 1, 8), F.lit("v1"))),
        ).otherwise(F.col("run"))
    base_cols = [
        run_col.alias("run"), "channel", "node_id", "seq", "time_ms", "kind", "message_id",
        "sender_id", "lamport", "size_bytes", "content_bytes", "metadata_bytes", "reason",
        "source", "position",
        F.when(F.col("kind").isin(_DETAIL_KINDS), F.col("detail")).alias("detail"),
    ]
    # The event rows are not cached: each pass reads the Parquet columns it needs
    # (deliveries for latency; declared losses and "missing" notices only when the
    # input has any). Causal histories (the bulk of the data) are read once, by the
    # pass per (participant, message): a hash per row, the sender's history kept.
    ev = raw.filter(F.col("channel").isNotNull()).select(*base_cols)
    pair = ["run", "channel", "node_id", "message_id"]
    mkey = ["run", "channel", "message_id"]

    held_k = F.col("kind").isin(_HELD)
    is_k = {kind: F.col("kind") == kind for kind in (
        "MessageSent", "MessageLost", "MessageAcknowledged", "MessageSendFailed",
        "MessageResent", "RepairSent")}

    def when(kind: str | None, col: Any) -> Any:
        return F.when(held_k if kind is None else is_k[kind], col)

    # ONE pass over the message events, per (participant, message): what it held
    # (first time and seq, how often), declared lost, sent, had acknowledged, failed
    # to send, resent, repaired; held_first, the acks, the per-message table and
    # the missing pairs are all read from it (a single shuffle of the event rows)
    pairs = ev.filter(F.col("kind").isin(
        *_HELD, "MessageLost", "MessageAcknowledged", "MessageSendFailed", "MessageResent",
        "RepairSent")).groupBy(*pair).agg(
        F.min(when(None, F.col("time_ms"))).alias("held_ms"),
        F.min(when(None, F.col("seq"))).alias("held_seq"),
        # the logged position of the first holding row
        F.min_by(F.col("position"), when(None, F.col("seq"))).alias("held_pos"),
        F.count(when(None, F.lit(1))).alias("times"),
        F.min(when(None, F.col("lamport"))).alias("lamport_min"),
        F.max(when(None, F.col("lamport"))).alias("lamport_max"),
        # senders as 64-bit hashes (named below): fixed-width buffers keep this a
        # hash aggregate (a string min/max makes Spark sort every row)
        F.min(when(None, hash_id("sender_id"))).alias("sender_min"),
        F.max(when(None, hash_id("sender_id"))).alias("sender_max"),
        F.max(when(None, F.col("size_bytes"))).alias("msg_size"),
        F.min(when("MessageSent", F.col("time_ms"))).alias("sent_ms"),
        F.min(when("MessageLost", F.col("time_ms"))).alias("lost_ms"),
        F.min(when("MessageLost", F.col("seq"))).alias("lost_seq"),
        F.min(when("MessageAcknowledged", F.col("time_ms"))).alias("ack_ms"),
        F.max(when("MessageAcknowledged", F.get_json_object(
            "detail", "$.by_causal_history") == "true")).alias("ack_by_causal"),
        F.count(when("MessageSendFailed", F.lit(1))).alias("failed_n"),
        F.count(when("MessageResent", F.lit(1))).alias("resend_n"),
        F.sum(when("MessageResent", F.col("size_bytes"))).alias("resend_sz"),
        F.count(when("MessageResent", F.when(F.col("size_bytes").isNull(), 1)))
        .alias("resend_nulls"),
        F.count(when("RepairSent", F.lit(1))).alias("repair_n"),
        F.sum(when("RepairSent", F.col("size_bytes"))).alias("repair_sz"),
        F.count(when("RepairSent", F.when(F.col("size_bytes").isNull(), 1)))
        .alias("repair_nulls"),
    )
    # every (participant, message) is one group: a partial aggregate before the
    # shuffle would reduce nothing (the setting applies to the job run here)
    with sql_conf(spark, {"spark.sql.execution.bypassPartialAggregation": "true"}):
        pairs = kept(pairs)
    # the histories a message's rows carry, as hashes: how many different
    # ones (an aggregate per message, combined on the map side; only here and in
    # the causal check are the histories, the bulk of the data, read)
    hist_stats = raw.filter(
        F.col("channel").isNotNull() & F.col("kind").isin(_HELD)
        & F.col("causal_history").isNotNull()
    ).select(run_col.alias("run"), "channel", "message_id", "kind",
             # Murmur3 (32 bits): a differing history goes unnoticed with
             # probability 2^-32. xxhash64 of a string array took 13-45 s of CPU
             # at 10M rows (the JIT's luck, run to run) against a steady 7 s
             F.hash("causal_history").alias("h")).groupBy(*mkey).agg(
        F.min("h").alias("h_min"), F.max("h").alias("h_max"),
        F.max(F.col("kind") == "MessageSent").alias("sent_h"))
    held_first = pairs.filter(F.col("times") > 0).select(
        *pair, "held_ms", "held_seq", "held_pos", "times")
    # per message (from the pairs: one row per participant and message)
    per_msg = pairs.groupBy(*mkey).agg(
        F.count(F.when(F.col("times") > 0, 1)).alias("holders"),
        F.min("lamport_min").alias("lamport"),
        (F.min("lamport_min") != F.max("lamport_max")).alias("lamport_differs"),
        F.min("sender_min").alias("sender_h"),
        (F.min("sender_min") != F.max("sender_max")).alias("sender_ids_differ"),
        F.min("held_ms").alias("first_held_ms"), F.max("msg_size").alias("msg_size"),
        F.min(F.when(F.col("sent_ms").isNotNull(), hash_id("node_id"))).alias("sent_by_h"),
        F.count("sent_ms").alias("n_sent_by"), F.min("sent_ms").alias("sent_ms_logged"),
        F.count("lost_ms").alias("lost_pairs"),
        F.count(F.when(F.col("lost_ms").isNotNull() & (F.col("times") > 0), 1))
        .alias("lost_recovered"),
        F.sum("resend_n").alias("resend_n"), F.sum("resend_sz").alias("resend_sz"),
        F.sum("resend_nulls").alias("resend_nulls"),
        F.sum("repair_n").alias("repair_n"), F.sum("repair_sz").alias("repair_sz"),
        F.sum("repair_nulls").alias("repair_nulls"),
    )
    # the names behind the hashes: every participant and sender of a channel (a hash
    # aggregate combined on the map side; a collision is refused in job 2)
    names = ev.select("run", "channel", F.explode(F.array(
        "node_id", F.when(held_k, F.col("sender_id")))).alias("id")
    ).filter(F.col("id").isNotNull()).distinct().select(
        "run", "channel", "id", hash_id("id").alias("h"))
    names = kept(names)
    named = per_msg.filter(F.col("holders") > 0).join(
        F.broadcast(names.select("run", "channel", F.col("h").alias("sender_h"),
                                 F.col("id").alias("sender_id"))),
        ["run", "channel", "sender_h"], "left").join(
        F.broadcast(fresh(names).select("run", "channel", F.col("h").alias("sent_by_h"),
                                 F.col("id").alias("sent_by"))),
        ["run", "channel", "sent_by_h"], "left")
    msgs = named.join(hist_stats, mkey, "left").select(
        *mkey, "lamport", "msg_size", "holders",
        F.col("h_min").isNotNull().alias("has_h"),
        F.coalesce("sent_h", F.lit(False)).alias("sent_h"),
        (F.col("h_min") != F.col("h_max")).alias("h_differs"),
        F.coalesce("sent_by", "sender_id").alias("sender"),
        F.coalesce("sent_ms_logged", "first_held_ms").alias("sent_ms"),
        F.col("sent_ms_logged").isNotNull().alias("send_logged"),
        "lamport_differs",
        # the rows do not agree on who sent it: reported, not picked
        (F.col("sender_ids_differ") | (F.col("n_sent_by") > 1)
         | (F.col("sent_by_h").isNotNull() & F.col("sender_h").isNotNull()
            & (F.col("sent_by_h") != F.col("sender_h")))).alias("sender_disagrees"),
        F.col("sent_ms_logged").alias("logged_sent_ms"),
    )
    msgs = kept(msgs)
    sent_first = msgs.filter(F.col("send_logged")).select(
        *mkey, F.col("logged_sent_ms").alias("sent_ms"))

    # ---------------------------------------------------------------- job 2
    agg: list[Any] = []
    maps: list[str] = []

    def as_map(df: Any, key: Any, value: Any, name: str) -> Any:
        # one row per entry, merged into a dict on the driver (bounded by kinds,
        # reasons and buckets): no second shuffle per map
        maps.append(name)
        return df.select(*_KEYS, F.lit(name).alias("metric"), F.to_json(F.struct(
            F.col(key).alias("k"), F.col(value).alias("v"))).alias("value"))

    agg.append(per_msg.groupBy(*_KEYS).agg(
        F.count(F.when(F.col("holders") > 0, 1)).alias("messages"),
        F.countDistinct(F.when(F.col("holders") > 0, F.xxhash64("message_id")))
        .alias("message_keys"),
        F.count(F.when(F.col("lost_pairs") > 0, 1)).alias("lost_messages"),
        F.count(F.when(F.col("lost_pairs") > F.col("lost_recovered"), 1))
        .alias("lost_messages_never_received"),
        F.sum("resend_n").alias("resend_n"),
        F.sum(F.coalesce(F.col("resend_sz"), F.lit(0))
              + F.coalesce(F.col("resend_nulls") * F.col("msg_size"), F.lit(0)))
        .alias("resend_b"),
        F.sum("repair_n").alias("repair_n"),
        F.sum(F.coalesce(F.col("repair_sz"), F.lit(0))
              + F.coalesce(F.col("repair_nulls") * F.col("msg_size"), F.lit(0)))
        .alias("repair_b"),
    ))
    agg.append(names.groupBy(*_KEYS).agg(
        F.count(F.lit(1)).alias("id_names"), F.countDistinct("h").alias("id_keys")))
    agg.append(msgs.groupBy(*_KEYS).agg(
        # held pairs whose message names a history (checked), names none
        # (unverifiable), or whose rows name different histories
        F.sum(F.when(F.col("has_h"), F.col("holders")).otherwise(0)).alias("checked_messages"),
        F.sum(F.when(~F.col("has_h"), F.col("holders")).otherwise(0)).alias("unverifiable"),
        F.sum(F.when(F.col("h_differs"), F.col("holders")).otherwise(0))
        .alias("history_disagreements"),
        # histories known only from deliveries (the sender's log is not in the input)
        F.count(F.when(F.col("has_h") & ~F.col("sent_h"), 1)).alias("hist_from_delivery"),
        F.count(F.when(F.col("lamport_differs"), 1)).alias("lamport_inconsistent"),
        F.count(F.when(~F.col("send_logged"), 1)).alias("send_not_logged"),
        F.count(F.when(F.col("sender_disagrees"), 1)).alias("sender_disagreements"),
    ))
    ack_t = F.when(F.col("sent_ms").isNotNull(), F.col("ack_ms") - F.col("sent_ms"))
    agg.append(pairs.groupBy(*_KEYS).agg(
        F.sum(F.when(F.col("times") > 0, F.col("times") - 1)).alias("duplicates"),
        F.count(F.when(F.col("times") > 0, 1)).alias("held_pairs"),
        F.count("lost_ms").alias("lost_pairs"),
        F.count(F.when(F.col("lost_ms").isNotNull() & (F.col("times") > 0), 1))
        .alias("lost_pairs_recovered"),
        F.percentile_approx(ack_t, [0.5, 0.9, 0.99], 10_000).alias("ack_p"),
        F.max(ack_t).alias("ack_max"), F.count(ack_t).alias("acknowledged"),
        F.count(F.when(ack_t.isNotNull() & F.col("ack_by_causal"), 1)).alias("ack_by_causal"),
        F.count(F.when(F.col("sent_ms").isNotNull() & F.col("ack_ms").isNull()
                       & (F.col("failed_n") == 0), 1)).alias("unacked"),
    ))
    # the send times (one row per message) are broadcast by name: Spark sizes a
    # Parquet scan by its compressed bytes and a kept table by the estimate of the
    # plan that made it, and would otherwise broadcast the deliveries
    dl = ev.filter(F.col("kind") == "MessageDelivered").select(
        "run", "channel", "node_id", "message_id", "time_ms"
    ).join(F.broadcast(sent_first), mkey).select(
        "run", "channel", "node_id", (F.col("time_ms") - F.col("sent_ms")).alias("lat"))
    # ONE pass over the deliveries: per (receiver, latency) how many, a hash aggregate
    # combined on the map side (latencies repeat: exact below 1 s, 3 significant
    # digits above); the channel's and each receiver's percentiles, the histogram,
    # min, max and mean are all read from these counts (kept, small)
    lat = F.col("lat")
    step = F.pow(F.lit(10), F.floor(F.log10(F.greatest(lat, F.lit(1)))) - 2).cast("long")
    lat_n = dl.select(
        *_KEYS, "node_id", lat,
        F.when(lat < 1000, lat).otherwise(F.round(lat / step) * step).cast("long").alias("v"),
        F.floor(F.log2(F.greatest(lat, F.lit(0)) + 1) * 2).cast("int").alias("b"),
    ).groupBy(*_KEYS, "node_id", "v", "b").agg(
        F.count(F.lit(1)).alias("n"), F.min("lat").alias("lo"), F.max("lat").alias("hi"),
        F.sum("lat").alias("sum"))
    lat_n = kept(lat_n)
    lat_per_channel = lat_n.groupBy(*_KEYS, "v").agg(
        F.sum("n").alias("n"), F.min("lo").alias("lo"), F.max("hi").alias("hi"),
        F.sum("sum").alias("sum"))
    agg.append(lat_per_channel.groupBy(*_KEYS).agg(
        _percentiles(F.collect_list(F.struct("v", "n")), F.sum("n")).alias("lat_p"),
        F.min("lo").alias("lat_min"), F.max("hi").alias("lat_max"),
        (F.sum("sum") / F.sum("n")).alias("lat_mean"), F.sum("n").alias("lat_count"),
    ))
    agg.append(as_map(lat_n.groupBy(*_KEYS, "b").agg(F.sum("n").alias("count")),
                      "b", "count", "lat_hist"))
    # the per-kind figures and participants of job 1, under the runs' resolved labels
    fields: list[str] = ["t0", "t1", "rows", "sources", "repair_ids", "content_messages",
                         "content_b", "metadata_b", "size_b", "sync_n", "sync_known", "sync_b"]
    label = {(r.get("label", r["run"]), r["run_id"]): r["run"] for r in checked["runs"]}
    per_channel: dict[tuple[str, str], dict[str, Any]] = {}

    def figures(key: tuple[str, str]) -> dict[str, Any]:
        return per_channel.setdefault(key, {
            **dict.fromkeys(fields), "kinds": {}, "drops": {}, "failed": {},
            "participants": 0, "held_time": {}, "sent_time": {}, "order": {}})

    for v in checked["kinds"]:
        _merge_kind(figures((label[(v["run"], v["run_id"])], v["channel"])), v)
    for (run, run_id, channel), n in checked["participants"].items():
        figures((label[(run, run_id)], channel))["participants"] += n

    # per receiver latency and the convergence-over-time buckets (the channels' time
    # spans are known from job 1: sent as a small table of literals; createDataFrame
    # from Python rows would start Python workers on the executors)
    span = spark.range(1).select(F.explode(F.array(*[
        F.struct(F.lit(key[0]).cast("string").alias("run"),
                 F.lit(key[1]).cast("string").alias("channel"),
                 F.lit(b["t0"]).cast("long").alias("t0"),
                 F.lit(max(b["t1"], b["t0"] + 1)).cast("long").alias("t1"))
        for key, b in per_channel.items() if b["t0"] is not None
    ] or [F.struct(*[F.lit(None).cast(t).alias(c) for c, t in (
        ("run", "string"), ("channel", "string"), ("t0", "long"), ("t1", "long"))])]
    )).alias("s")).select("s.*").filter(F.col("run").isNotNull())

    def bucketed(df: Any, col: str, name: str) -> Any:
        b = F.least(
            F.lit(TIME_BUCKETS - 1),
            F.floor((F.col(col) - F.col("t0")) * TIME_BUCKETS
                    / (F.col("t1") - F.col("t0") + 1)).cast("int"),
        )
        return df.select(*_KEYS, col).join(F.broadcast(span), _KEYS).select(
            *_KEYS, b.alias("b")).groupBy(*_KEYS, "b").count().select(
            *_KEYS, F.lit(name).alias("metric"), F.lit(None).cast("string").alias("node_id"),
            F.to_json(F.struct(F.col("b").alias("k"), F.col("count").alias("v"))).alias("value"))

    per_receiver = lat_n.groupBy(*_KEYS, "node_id").agg(
        F.sum("n").alias("deliveries"),
        _percentiles(F.collect_list(F.struct("v", "n")), F.sum("n")).alias("p"),
        F.max("hi").alias("max"),
    ).select(*_KEYS, F.lit("receiver").alias("metric"), "node_id",
             F.to_json(F.struct("deliveries", "p", "max")).alias("value"))

    # ONE collect: every per-channel aggregate as (run, channel, metric, JSON) rows,
    # unioned (a union does not shuffle; joining them did, once per aggregate)
    parts = [per_receiver, bucketed(held_first, "held_ms", "held_time"),
             bucketed(msgs, "sent_ms", "sent_time"), _log_orders(held_first)]
    for i, a in enumerate(agg):
        if "metric" in a.columns:
            parts.append(a.select(*_KEYS, "metric", F.lit(None).cast("string").alias("node_id"),
                                  "value"))
            continue
        cols = [c for c in a.columns if c not in _KEYS]
        fields.extend(cols)
        parts.append(a.select(*_KEYS, F.lit(f"agg{i}").alias("metric"),
                              F.lit(None).cast("string").alias("node_id"),
                              F.to_json(F.struct(*cols)).alias("value")))
    for b in per_channel.values():
        for name in fields:
            b.setdefault(name, None)
        for name in maps:
            b.setdefault(name, {})
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    receivers: list[dict[str, Any]] = []
    for r in union.collect():
        b = figures((r["run"], r["channel"]))
        value = json.loads(r["value"])
        if r["metric"] == "order":
            b["order"] = value
        elif r["metric"] == "receiver":
            p = value.get("p") or [None, None, None]
            receivers.append({"run": r["run"], "channel": r["channel"], "node_id": r["node_id"],
                              "deliveries": value["deliveries"], "p50": p[0], "p90": p[1],
                              "p99": p[2], "max": value.get("max")})
        elif r["metric"] in (*maps, "held_time", "sent_time"):
            b[r["metric"]][value["k"]] = value["v"]
        else:
            b.update(value)
    receivers.sort(key=lambda r: (r["run"], r["channel"], r["node_id"]))
    for key, b in per_channel.items():
        if not b["kinds"].get("MessageResent"):
            b["resend_n"] = None
        if not b["kinds"].get("RepairSent"):
            b["repair_n"] = None
        if (b["id_keys"] or 0) != (b["id_names"] or 0):
            raise InputError(
                f"{key[0]}/{key[1]}: two participant ids share a 64-bit hash; cannot intern ids")
        if (b["message_keys"] or 0) != (b["messages"] or 0):
            raise InputError(
                f"{key[0]}/{key[1]}: two message ids share a 64-bit hash; cannot intern ids")

    # ---------------------------------------------------------------- job 3: causal
    causal = _causal(
        spark, raw, run_col, ev, msgs, held_first, detail, per_channel,
        from_delivery=any(b["hist_from_delivery"] for b in per_channel.values()),
        any_lost=any(b["lost_pairs"] for b in per_channel.values()))
    for key, d in causal["per_channel"].items():
        d["duplicates"] = per_channel[key]["duplicates"] or 0

    # ---------------------------------------------------------------- job 5: missing
    missing_total = sum(
        (b["participants"] or 0) * (b["messages"] or 0) - (b["held_pairs"] or 0)
        for b in per_channel.values())
    # every time is relative to its run's first event
    starts: dict[str, int] = {}
    for (run, _), b in per_channel.items():
        if b["t0"] is not None:
            starts[run] = min(starts.get(run, b["t0"]), b["t0"])
    missing_rows: list[dict[str, Any]] = []
    miss_msgs: dict[tuple[str, str], dict[str, Any]] = {}
    if missing_total:
        by_run = {run: (partitions or {}).get(run.split("#", 1)[0], []) for run in starts}
        missing_rows, miss_msgs = missing_pairs(
            spark, ev, msgs, pairs, detail, starts=starts,
            partitions={r: p for r, p in by_run.items() if p},
            margin_ms=max((int(b["lat_max"] or 0) for b in per_channel.values()), default=0))
    lost_listed = {} if not any(b["lost_pairs"] for b in per_channel.values()) else \
        lost_messages(spark, pairs, msgs,
                      f"{detail.rstrip('/')}/missing" if missing_total else None)

    channels = [
        _channel(key, b, causal["per_channel"].get(key), receivers, miss_msgs.get(key),
                 starts.get(key[0]), lost_listed.get(key, []))
        for key, b in sorted(per_channel.items())
    ]
    # ---------------------------------------------------------------- job 6: explain
    why = {} if not explain else explain_channels(
        ev.select("run", "channel", "node_id", "time_ms", "kind", "reason"),
        pairs.select("run", "channel", "node_id", "message_id", "held_ms", "times"), starts)
    for c in channels:
        c["explain"] = why.get((c["run"], c["channel"]), {})
    return {
        "rows": checked["rows"],
        "runs": checked["runs"],
        "channels": channels,
        "label_notes": label_notes,
        "_missing_rows": missing_rows,
        "_violation_rows": causal["rows"],
        "_receiver_rows": receivers,
        "_detail_dir": detail,
    }


def _causal(spark: Any, raw: Any, run_col: Any, ev: Any, msgs: Any, held_first: Any,
            detail: str, figures: dict[tuple[str, str], dict[str, Any]],
            from_delivery: bool, any_lost: bool) -> dict[str, Any]:
    """Causal order at every participant, on ONE history per message.

    A message's history is the one of its ``MessageSent`` row (from a delivery
    when the sender's log is not in the input); rows whose history differs from
    it were counted in job 2 by a per-message aggregate of history hashes
    (``history_disagreements``, with ``checked_messages`` and ``unverifiable``,
    read from ``figures``). Every history is exploded once into integer edges
    ``(message, dependency)``; the counts are loops over per-receiver arrays
    (:func:`_causal_totals`).
    """
    from pyspark.sql import functions as F

    mkey = ["run", "channel", "message_id"]
    k = F.xxhash64
    hist_rows = raw.filter(
        F.col("channel").isNotNull() & F.col("kind").isin(_HELD)
        & F.col("causal_history").isNotNull()
    ).select(run_col.alias("run"), "channel", "kind", "message_id", "causal_history")
    hist = hist_rows.filter(F.col("kind") == "MessageSent").select(
        *mkey, "causal_history").dropDuplicates(mkey)
    if from_delivery:
        # messages whose rows name a history but whose sender's log is not in the
        # input (rare): one delivery's history, looked up for those ids only
        need = msgs.filter(F.col("has_h")).select(
            k("run", "channel", "message_id").alias("m")).join(
            hist.select(k("run", "channel", "message_id").alias("m")), "m", "left_anti")
        hist = hist.unionByName(
            hist_rows.filter(F.col("kind") == "MessageDelivered")
            .withColumn("m", k("run", "channel", "message_id"))
            .join(need, "m", "left_semi").select(*mkey, "causal_history")
            .dropDuplicates(mkey))
    edges = hist.select(
        "run", "channel", k("run", "channel", "message_id").alias("m"),
        F.explode("causal_history").alias("dep"), "message_id",
    ).filter(F.col("dep") != F.col("message_id")).select(
        "run", "channel", "m", "dep", k("run", "channel", "dep").alias("d"))
    pos = held_first.select(
        "run", "channel", "node_id", k("run", "channel", "node_id").alias("n"),
        k("run", "channel", "message_id").alias("m"), "message_id",
        F.col("held_seq").alias("m_seq"),
    )
    lost_pos = ev.filter(F.col("kind") == "MessageLost").select(
        "run", "channel", "node_id", k("run", "channel", "message_id").alias("m"),
        F.col("seq").alias("l_seq"))
    totals, per_receiver = _causal_totals(pos, edges, lost_pos if any_lost else None)
    # the receiver rows are few but each loops over all its checks: adaptive
    # execution would pack them into fewer tasks than there are cores
    with sql_conf(spark, {"spark.sql.adaptive.coalescePartitions.enabled": "false"}):
        counts = {(r["run"], r["channel"]): r for r in totals.collect()}
    per_channel: dict[tuple[str, str], dict[str, Any]] = {}
    for key, b in figures.items():
        if not b["held_pairs"]:
            continue
        r = counts.get(key)
        d = {name: int((r[name] if r is not None else 0) or 0) for name in (
            "checked_dependencies", "violations", "delivered_after", "participants_violating")}
        d = {"checked_messages": int(b["checked_messages"] or 0), **d,
             "unverifiable": int(b["unverifiable"] or 0),
             "history_disagreements": int(b["history_disagreements"] or 0)}
        d["never_held"] = d["violations"] - d["delivered_after"]
        per_channel[key] = d
    rows: list[dict[str, Any]] = []
    if any(d["violations"] for d in per_channel.values()):
        path = f"{detail.rstrip('/')}/causal_violations"
        checks, names = _causal_pairs(spark, pos, edges, held_first, lost_pos, per_receiver)
        dep_names = edges.select("m", "d", "dep").dropDuplicates(["m", "d"])
        checks.filter(F.col("bad")).join(names, "n").join(
            pos.select("n", "m", "message_id"), ["n", "m"]).join(dep_names, ["m", "d"]).select(
            "run", "channel", "node_id", "message_id", F.col("dep").alias("dependency"),
            F.when(F.col("d_seq").isNotNull(), "delivered_after").otherwise("never_held")
            .alias("violation"), F.col("m_seq").alias("seq"),
            F.col("d_seq").alias("dependency_seq"),
        ).write.mode("overwrite").parquet(path)
        from pyspark.sql import Window

        found = spark.read.parquet(path)
        order = ["node_id", "seq", "dependency"]
        rows = [r.asDict() for r in found.orderBy("run", "channel", *order)
                .limit(CSV_LIMIT).collect()]
        w = Window.partitionBy("run", "channel").orderBy(*order)
        for r in found.withColumn("i", F.row_number().over(w)).filter(
            F.col("i") <= LIST_LIMIT
        ).drop("i").orderBy("run", "channel", *order).collect():
            v = r.asDict()
            per_channel[(v["run"], v["channel"])].setdefault("violations_listed", []).append(v)
    return {"per_channel": per_channel, "rows": rows}


def _log_orders(held_first: Any) -> Any:
    """Each participant's log order replayed from its logged positions, compared.

    A participant's held messages in ``seq`` order, each inserted at its logged
    ``position`` (the number of messages before it in the log at that moment),
    give its final log. When every position equals the number of messages held
    before (appends only, the normal case) that is the ``seq`` order, without a
    replay; otherwise the inserts are replayed (quadratic in that participant's
    messages). Per channel: how many participants, how many distinct final logs,
    how many needed a replay, how many logged no position for some message.
    """
    from pyspark.sql import functions as F

    keys = ["run", "channel"]
    per_node = held_first.groupBy(*keys, "node_id").agg(F.array_sort(F.collect_list(F.struct(
        F.col("held_seq").alias("s"), F.col("held_pos").alias("p"),
        F.xxhash64("message_id").alias("m")))).alias("l"))
    unknown = F.exists("l", lambda x: x["p"].isNull())
    appends = F.size(F.filter("l", lambda x, k: x["p"] != k)) == 0
    replay = F.expr(
        "aggregate(l, cast(array() as array<bigint>), (acc, x) -> concat("
        "slice(acc, 1, least(cast(x.p as int), size(acc))), array(x.m), "
        "slice(acc, least(cast(x.p as int), size(acc)) + 1, size(acc))))")
    order = F.when(appends, F.transform("l", lambda x: x["m"])).otherwise(replay)
    nodes = per_node.select(
        *keys, unknown.alias("unknown"), (~unknown & ~appends).alias("replayed"),
        F.when(~unknown, F.xxhash64(order)).alias("h"))
    return nodes.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("participants"), F.countDistinct("h").alias("orders"),
        F.count(F.when(F.col("replayed"), 1)).alias("replayed"),
        F.count(F.when(F.col("unknown"), 1)).alias("unknown"),
    ).select(*keys, F.lit("order").alias("metric"), F.lit(None).cast("string").alias("node_id"),
             F.to_json(F.struct("participants", "orders", "replayed", "unknown")).alias("value"))


def _causal_totals(pos: Any, edges: Any, lost_pos: Any | None) -> tuple[Any, Any]:
    """The causal check's counts, one row per receiver, no per-edge rows.

    The ids of a channel (held, named as a dependency, declared lost) get dense
    indexes 0..U-1; every channel becomes one row holding each message's
    dependencies as an array of indexes (``deps[i]``), every receiver one row
    holding its first holding position of each id (``hpos[i]``, ``_BIG`` if never
    held) and its first ``MessageLost`` position (``lpos``). The check is then a
    loop over arrays inside one row (SQL higher-order functions): the
    ``receivers x messages x history`` checks never become rows, are never
    shuffled or joined. Returns (per-channel totals, per-receiver counts).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = ["run", "channel"]
    ids = pos.select(*keys, "m").unionByName(edges.select(*keys, F.col("d").alias("m")))
    if lost_pos is not None:
        ids = ids.unionByName(lost_pos.select(*keys, "m"))
    ids = ids.distinct()
    chan_w = Window.partitionBy(*keys)
    # each id's index i and its channel's number of ids u (one sort per channel)
    ids = kept(ids.select(
        *keys, "m", (F.row_number().over(chan_w.orderBy("m")) - 1).cast("int").alias("i"),
        F.count(F.lit(1)).over(chan_w).cast("int").alias("u")))
    # (the ids, one row per message or dependency, are the broadcast side by name:
    # see the send times in compute_channels)
    dep_lists = (
        edges.join(F.broadcast(ids.select(*keys, "m", F.col("i").alias("mi"))), [*keys, "m"])
        .join(F.broadcast(fresh(ids).select(
            *keys, F.col("m").alias("d"), F.col("i").alias("di"))), [*keys, "d"])
        .groupBy(*keys, "mi").agg(F.collect_list("di").alias("deps"))
    )
    chan = (
        fresh(ids).select(*keys, F.col("i").alias("mi"), "u")
        .join(dep_lists, [*keys, "mi"], "left")
        .groupBy(*keys).agg(F.array_sort(F.collect_list(F.struct("mi", "deps"))).alias("l"),
                            F.max("u").alias("u"))
        .select(*keys, F.transform("l", lambda x: x["deps"]).alias("deps"), "u")
    )

    def dense(df: Any, seq: str, name: str) -> Any:
        # one row per receiver: its positions as a dense array over the channel's ids
        # (the sorted (i, seq) pairs plus (i, _BIG) for every i, first per i kept)
        filled = df.join(F.broadcast(fresh(ids)), [*keys, "m"]).groupBy(*keys, "node_id").agg(
            F.collect_list(F.struct(F.col("i"), F.col(seq).cast("long").alias("s"))).alias("p"),
            F.max("u").alias("u")).select(
            *keys, "node_id", F.array_sort(F.concat("p", F.transform(
                F.sequence(F.lit(0), F.col("u") - 1),
                lambda j: F.struct(j.alias("i"), F.lit(_BIG).cast("long").alias("s"))),
            )).alias("q"))
        return filled.select(*keys, "node_id", F.transform(F.filter(
            "q", lambda x, j: (j == 0) | (x["i"] != F.col("q")[j - 1]["i"])),
            lambda x: x["s"]).alias(name))

    hpos = dense(pos, "m_seq", "hpos")
    if lost_pos is None:  # nothing declared lost in the input
        rec = hpos.withColumn("lpos", F.lit(None).cast("array<long>"))
    else:
        lpos = dense(lost_pos.groupBy("run", "channel", "node_id", "m").agg(
            F.min("l_seq").alias("l_seq")), "l_seq", "lpos")
        rec = hpos.join(lpos, [*keys, "node_id"], "left")
    rec = rec.join(F.broadcast(chan), keys)
    # one long per receiver: violations in the low 32 bits, those whose dependency
    # was held later (delivered_after) in the high bits
    count = F.expr(
        f"""aggregate(sequence(0, u - 1), 0L, (acc, j) ->
            IF(hpos[j] >= {_BIG}L OR deps[j] IS NULL, acc,
               aggregate(deps[j], acc, (a, d) ->
                   IF(hpos[j] < hpos[d] AND (lpos IS NULL OR hpos[j] < lpos[d]),
                      a + IF(hpos[d] < {_BIG}L, 4294967297L, 1L), a))))""")
    deps_n = F.expr(
        f"""aggregate(sequence(0, u - 1), 0L, (acc, j) ->
            IF(hpos[j] >= {_BIG}L OR deps[j] IS NULL, acc, acc + size(deps[j])))""")
    per_receiver = rec.select(*keys, "node_id", count.alias("c"), deps_n.alias("deps")).select(
        *keys, "node_id", "deps",
        F.col("c").bitwiseAND(F.lit(4294967295)).alias("violations"),
        F.shiftright("c", 32).alias("delivered_after"),
    )
    totals = per_receiver.groupBy(*keys).agg(
        F.sum("deps").alias("checked_dependencies"), F.sum("violations").alias("violations"),
        F.sum("delivered_after").alias("delivered_after"),
        F.sum(F.when(F.col("violations") > 0, 1).otherwise(0)).alias("participants_violating"),
    )
    return totals, per_receiver


def _causal_pairs(spark: Any, pos: Any, edges: Any, held_first: Any, lost_pos: Any,
                  per_receiver: Any) -> tuple[Any, Any]:
    """The (receiver, message, dependency) checks of the receivers with a violation
    (for the detail): each receiver's positions joined to the broadcast edges."""
    from pyspark.sql import functions as F

    k = F.xxhash64
    bad_n = per_receiver.filter(F.col("violations") > 0).select(
        k("run", "channel", "node_id").alias("n"))
    mine = pos.join(bad_n, "n", "left_semi")
    dep_pos = mine.select("n", F.col("m").alias("d"), F.col("m_seq").alias("d_seq"),
                          F.lit(None).cast("long").alias("l_seq")).unionByName(
        lost_pos.select(k("run", "channel", "node_id").alias("n"), F.col("m").alias("d"),
                        F.lit(None).cast("long").alias("d_seq"), "l_seq")
        .join(bad_n, "n", "left_semi")
    ).groupBy("n", "d").agg(F.min("d_seq").alias("d_seq"), F.min("l_seq").alias("l_seq"))
    checks = (
        mine.select("n", "m", "m_seq").join(F.broadcast(edges.select("m", "d")), "m")
        .join(dep_pos, ["n", "d"], "left")
    )
    bad = (F.col("m_seq") < F.coalesce("d_seq", F.lit(_BIG))) & (
        F.col("m_seq") < F.coalesce("l_seq", F.lit(_BIG)))
    names = mine.select("n", "run", "channel", "node_id").dropDuplicates(["n"])
    return checks.withColumn("bad", bad), names


def _channel(key: tuple[str, str], b: dict[str, Any], cz: dict[str, Any] | None,
             receivers: list[dict[str, Any]], miss: dict[str, Any] | None,
             run_start: int | None, lost_listed: list[dict[str, Any]]) -> dict[str, Any]:
    t0 = b["t0"]
    # times in the summary count from the run's first event (absolute: run_start_ms)
    r0 = t0 if run_start is None else run_start
    p = b["participants"]
    n_msgs = b["messages"] or 0
    miss = miss or {"messages": 0, "pairs": 0, "participants": 0, "top": [], "causes": {},
                    "per_node": {}}
    cz = cz or {"checked_messages": 0, "checked_dependencies": 0, "violations": 0,
                "delivered_after": 0, "never_held": 0, "participants_violating": 0,
                "duplicates": 0, "unverifiable": 0, "history_disagreements": 0}
    cz = {"violations_listed": [], **cz}
    # no message: nothing to converge on (None: shown as "-", neither yes nor NO)
    converged = None if n_msgs == 0 else (
        not miss["pairs"] and not (b["lamport_inconsistent"] or 0)
        and not (b["duplicates"] or 0)
    )
    ov: dict[str, Any] = {}
    if b["content_messages"] is not None:
        ov.update({"content_messages": b["content_messages"],
                   "content_bytes": b["content_b"] or 0, "metadata_bytes": b["metadata_b"] or 0,
                   "content_message_bytes": b["size_b"] or 0})
    if b["sync_n"] is not None:
        ov.update({"sync_messages": b["sync_n"], "sync_bytes": b["sync_b"] or 0,
                   "sync_sizes_unknown": b["sync_n"] - b["sync_known"]})
    for name in ("resend", "repair"):
        if b[f"{name}_n"] is not None:
            ov.update({f"{name}_messages": b[f"{name}_n"], f"{name}_bytes": b[f"{name}_b"] or 0})
    total_bytes = sum(ov.get(k, 0) for k in (
        "content_message_bytes", "sync_bytes", "resend_bytes", "repair_bytes"))
    ov["total_sent_bytes"] = total_bytes
    ov["overhead_ratio"] = (
        round((total_bytes - ov.get("content_bytes", 0)) / total_bytes, 4)
        if total_bytes else None
    )
    ov["metadata_per_content_byte"] = (
        round(ov["metadata_bytes"] / ov["content_bytes"], 2) if ov.get("content_bytes") else None
    )
    sent_t = b["sent_time"] or {}
    held_t = b["held_time"] or {}
    curve = []
    cs = ch = 0
    for i in range(TIME_BUCKETS):
        cs += sent_t.get(i, 0)
        ch += held_t.get(i, 0)
        curve.append(None if cs == 0 else round(min(1.0, ch / (cs * p)), 4))
    t1 = max(b["t1"], t0 + 1)
    lh = b["lat_hist"] or {}
    lat = {"count": 0, "p50": None, "p90": None, "p99": None}
    if b["lat_count"]:
        lat = {"count": b["lat_count"], **_pct(b["lat_p"]), "min": b["lat_min"],
               "max": b["lat_max"],
               "mean": None if b["lat_mean"] is None else round(b["lat_mean"], 1)}
    ack: dict[str, Any] = {"acknowledged": 0}
    if b["acknowledged"]:
        ack = {"acknowledged": b["acknowledged"], "by_causal_history": b["ack_by_causal"],
               "by_bloom_filter": b["acknowledged"] - b["ack_by_causal"], **_pct(b["ack_p"]),
               "max": b["ack_max"]}
    kc = dict(b["kinds"] or {})
    missing = [
        {"message_id": m["message_id"], "sender": m["sender"],
         "sent_at_ms": None if m["sent_ms"] is None else m["sent_ms"] - r0,
         "missing_count": m["missing_count"], "missing_at": list(m["missing_at"]),
         "noticed_by": m["noticed_by"], "declared_lost_by": m["declared_lost_by"],
         "missing_since_ms": None if m["since"] is None else m["since"] - r0,
         "causes": {k: int(v) for k, v in sorted((m["causes"] or {}).items())}}
        for m in miss["top"]
    ]
    lost_rows = [
        {"message_id": m["message_id"], "sender": m["sender"],
         "sent_at_ms": None if m["sent_ms"] is None else m["sent_ms"] - r0,
         "declared_lost_by": m["declared_lost_by"], "first_declared_lost_ms":
         m["first_lost_ms"] - r0, "received_later_by": m["received_later_by"],
         "never_received_by": m["declared_lost_by"] - m["received_later_by"],
         "declared_by": list(m["by"]),
         "causes": {k: int(v) for k, v in sorted(m["causes"].items())}}
        for m in lost_listed
    ]
    sources = list(b["sources"] or [])
    order = b.get("order") or {}
    if order.get("unknown") or not order:
        order_from = "lamport order (positions not logged)"
        identical = converged
    else:
        order_from = "logged positions"
        identical = None if converged is None else bool(converged and order["orders"] == 1)
    return {
        "run": key[0], "channel": key[1],
        "source": sources[0] if len(sources) == 1 else "mixed",
        "sources": sources,
        "participants": p, "messages": n_msgs, "events": b["rows"],
        "run_start_ms": r0, "start_ms": t0 - r0,
        "duration_ms": b["t1"] - t0,
        "convergence": {
            "converged": converged,
            # identical sets, and one final log order: replayed from every
            # participant's logged positions (inferred from the (lamport, message_id)
            # order only where positions were not logged)
            "identical_logs_in_identical_order": identical,
            "order_from": order_from,
            "distinct_log_orders": order.get("orders"),
            "participants_replayed": order.get("replayed", 0),
            "missing_pairs": miss["pairs"],
            "messages_missing_somewhere": miss["messages"],
            "participants_missing_something": miss["participants"],
            "held_pairs": b["held_pairs"] or 0,
            "expected_pairs": p * n_msgs,
            "lamport_inconsistent_messages": b["lamport_inconsistent"] or 0,
            "sender_disagreements": b["sender_disagreements"] or 0,
            "duplicate_deliveries": b["duplicates"] or 0,
            "sends_not_in_input": b["send_not_logged"] or 0,
            "missing": missing,
            "missing_truncated": miss["messages"] > len(missing),
            # why the pairs are missing (pipeline.causes): pairs per cause, and per
            # participant the groups its story is told from
            "causes": dict(sorted(miss["causes"].items())),
            "causes_by_participant": miss["per_node"],
            "over_time": {"bucket_ms": (t1 - t0 + 1) / TIME_BUCKETS, "held_share": curve},
        },
        "causal_order": {**cz, "ok": cz["violations"] == 0},
        "latency_ms": lat,
        "latency_histogram": {
            "edges_ms": [round(2 ** (i / 2) - 1, 1) for i in range(max(lh, default=0) + 2)],
            "counts": [lh.get(i, 0) for i in range(max(lh, default=-1) + 1)],
        },
        "slowest_receivers": sorted(
            ({k: r[k] for k in ("node_id", "deliveries", "p50", "p90", "p99", "max")}
             for r in receivers if (r["run"], r["channel"]) == key),
            key=lambda x: (-(x["p99"] or 0), x["node_id"]),
        )[:5],
        "acknowledgement": {
            **ack, "unacknowledged_at_end": b["unacked"] or 0, "failed": dict(b["failed"] or {}),
        },
        "counts": {
            "messages_sent": kc.get("MessageSent", 0),
            "deliveries": kc.get("MessageDelivered", 0),
            "resends": kc.get("MessageResent", 0),
            "syncs_sent": kc.get("SyncSent", 0),
            "repair_requests": kc.get("RepairRequested", 0),
            "repair_ids_requested": int(b["repair_ids"] or 0),
            "repairs_sent": kc.get("RepairSent", 0),
            "repair_data_needed": kc.get("RepairDataNeeded", 0),
            "store_retrievals": kc.get("StoreRetrieval", 0),
            # lost = declared lost by a participant (it gave up on it); never received =
            # missing at a participant at the end
            "lost": {"messages": b["lost_messages"] or 0, "pairs": b["lost_pairs"] or 0,
                     "pairs_received_later": b["lost_pairs_recovered"] or 0,
                     "pairs_never_received": (b["lost_pairs"] or 0)
                     - (b["lost_pairs_recovered"] or 0),
                     "messages_never_received_by_some": b["lost_messages_never_received"] or 0,
                     "listed": lost_rows,
                     "listed_truncated": (b["lost_messages"] or 0) > len(lost_rows)},
            "dropped": dict(b["drops"] or {}),
            "by_kind": dict(sorted(kc.items())),
        },
        "overhead": ov,
    }
