"""``sdschat report INPUT... --out DIR``: the reliability report, computed on Spark.

INPUT is event-log Parquet (:data:`pipeline.schema.EVENT_SCHEMA`): directories
written by ``sdschat sim`` or ``sdschat export``, or single files. Per
``(run, channel)`` the job computes:

* **convergence** - every participant (anyone with a row in the channel) should
  hold every message anyone sent or delivered; the report lists which messages
  are missing where, since when (first noticed missing by that participant, or
  else sent), and whether they were declared lost. Logs are ordered by
  ``(lamport, message_id)``, so identical sets with one Lamport timestamp per
  message ARE identical logs in identical order; both are checked, and
  exactly-once delivery too;
* **causal order** - at every participant every held message came after the
  causal history it named (:mod:`pipeline.causal`, per participant, in Python
  workers through ``applyInArrow``);
* **delivery latency** (send -> deliver, per receiver: percentiles overall and
  per receiver), **time to acknowledgement**, resends, repairs, store
  retrievals, lost messages, drops by reason;
* **protocol overhead**: metadata bytes (history, bloom filter, ids) against
  content bytes of content messages, plus the bytes of syncs, resends and
  repairs.

Writes ``DIR/summary.json``, ``DIR/report.html`` (inline SVG charts, no
network), ``DIR/missing.csv``, ``DIR/causal_violations.csv``,
``DIR/latency_by_receiver.csv``, and prints a short table. The files are
written to a staging directory and moved into ``DIR`` only when everything
was computed: a failed run leaves no report behind.

On a cluster, the same job::

    zip -r pipeline.zip pipeline storage && \\
    spark-submit --master spark://HOST:7077 --py-files pipeline.zip \\
        pipeline/report.py INPUT... --out DIR

(executors need Python with pyarrow and pandas; ``--master`` is then left to
spark-submit). Times from real nodes are their wall clocks: latencies across
machines include their clock offsets.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import pyarrow.parquet as pq

from pipeline.causal import CHECK_SCHEMA, check_participant
from pipeline.schema import (
    COLUMNS,
    EVENT_SCHEMA,
    SchemaMismatchError,
    check_schema,
    iter_parquet_files,
)

__all__ = ["ReportError", "add_report_arguments", "compute_report", "main", "run_report"]

#: Messages listed in summary.json / the HTML per channel (all go to missing.csv).
LIST_LIMIT = 200
#: Participants named per missing message in summary.json.
NODES_PER_MESSAGE = 50
#: Buckets of the convergence-over-time chart.
TIME_BUCKETS = 60

_HELD = ["MessageSent", "MessageDelivered"]
#: Kinds whose rows name a message: without a message_id they are malformed.
_NEED_ID = [*_HELD, "MessageLost"]
#: ``--master`` values Spark accepts (a typo used to end in a Py4J traceback).
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[.+\]|yarn|(spark|k8s|mesos)://\S+"
)
#: ``--driver-memory``: a JVM size, e.g. 512m, 2g.
_MEMORY = re.compile(r"[1-9]\d*[kmgt]?b?", re.IGNORECASE)


class ReportError(Exception):
    """The input cannot be reported on (empty, not an event log, malformed rows)."""


def _spark_schema() -> Any:
    from pyspark.sql import types as T

    mapping = {"string": T.StringType(), "int64": T.LongType()}
    fields = []
    for f in EVENT_SCHEMA:
        if str(f.type).startswith("list"):
            dt: Any = T.ArrayType(T.StringType())
        else:
            dt = mapping[str(f.type)]
        fields.append(T.StructField(f.name, dt, True))
    return T.StructType(fields)


def _check_schema_type() -> Any:
    from pyspark.sql import types as T

    fields = []
    for f in CHECK_SCHEMA:
        dt = T.StringType() if str(f.type) == "string" else T.LongType()
        fields.append(T.StructField(f.name, dt, True))
    return T.StructType(fields)


def validate_inputs(inputs: Sequence[str | Path]) -> tuple[list[Path], int]:
    """Every Parquet file of ``inputs``, checked; returns (files, total rows)."""
    if not inputs:
        raise ReportError("no input given")
    try:
        files = iter_parquet_files(inputs)
    except FileNotFoundError as exc:
        raise ReportError(str(exc)) from None
    if not files:
        raise ReportError(
            "no .parquet files in " + ", ".join(str(i) for i in inputs)
            + " (expected the output of 'sdschat sim' or 'sdschat export')"
        )
    total = 0
    for f in files:
        try:
            meta = pq.read_metadata(f)
            schema = pq.read_schema(f)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise ReportError(f"{f}: not a readable Parquet file ({exc})") from None
        try:
            check_schema(schema, str(f))
        except SchemaMismatchError as exc:
            raise ReportError(str(exc)) from None
        total += meta.num_rows
    if total == 0:
        raise ReportError("the input holds no events (0 rows in " + f"{len(files)} file(s))")
    return files, total


def _pct(values: Sequence[Any] | None) -> dict[str, Any]:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    return {"p50": values[0], "p90": values[1], "p99": values[2]}


def compute_report(spark: Any, inputs: Sequence[str | Path]) -> dict[str, Any]:
    """Run the Spark job; returns the summary (JSON-able) with row lists for the CSVs.

    Raises :class:`ReportError` for empty or malformed input.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    files, total_rows = validate_inputs(inputs)
    raw = spark.read.schema(_spark_schema()).parquet(*[str(f) for f in files]).select(*COLUMNS)

    # ---- row-level validation: required columns and unique (run, node, seq)
    lacking = (
        F.col("run").isNull() | F.col("node_id").isNull() | F.col("seq").isNull()
        | F.col("time_ms").isNull() | F.col("kind").isNull()
    )
    no_id = F.col("kind").isin(_NEED_ID) & F.col("message_id").isNull()
    counts = raw.agg(
        F.sum(F.when(lacking, 1).otherwise(0)).alias("bad"),
        F.sum(F.when(no_id, 1).otherwise(0)).alias("no_id"),
    ).collect()[0]
    if counts["bad"]:
        raise ReportError(
            f"{counts['bad']} of {total_rows} rows lack run, node_id, seq, time_ms or kind: "
            "malformed input"
        )
    if counts["no_id"]:
        # a null id would join as a message nobody holds: "missing" everywhere
        raise ReportError(
            f"{counts['no_id']} {', '.join(_NEED_ID)} rows have no message_id: malformed input"
        )
    dup = (
        raw.groupBy("run", "node_id", "seq").count().filter(F.col("count") > 1)
        .agg(F.count("*").alias("n"), F.sum("count").alias("rows")).collect()[0]
    )
    if dup["n"]:
        raise ReportError(
            f"{dup['rows']} rows share {dup['n']} (run, node_id, seq) keys: the same event log "
            "was given twice, or the input is malformed"
        )

    # Causal histories (the bulk of the data) stay out of the cache: only the
    # causal-order stage reads them, straight from the files.
    ev = (
        raw.filter(F.col("channel").isNotNull()).drop("causal_history")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    keys = ["run", "channel"]
    if ev.limit(1).count() == 0:
        raise ReportError("no event in the input belongs to a channel")

    # ---- participants, messages, holdings
    parts = ev.select("run", "channel", "node_id").distinct()
    held = ev.filter(F.col("kind").isin(_HELD)).select(
        "run", "channel", "node_id", "message_id", "lamport", "time_ms", "kind", "sender_id",
        "size_bytes",
    )
    held_first = held.groupBy("run", "channel", "node_id", "message_id").agg(
        F.min("time_ms").alias("held_ms"), F.count("*").alias("times")
    )
    sent = ev.filter(F.col("kind") == "MessageSent").select(
        "run", "channel", "message_id", F.col("node_id").alias("sender"),
        F.col("time_ms").alias("sent_ms"), "size_bytes", "content_bytes", "metadata_bytes",
    )
    sent_first = sent.groupBy("run", "channel", "message_id").agg(
        F.first("sender").alias("sender"), F.min("sent_ms").alias("sent_ms"),
        F.first("size_bytes").alias("sent_size"),
    )
    msgs = held.groupBy("run", "channel", "message_id").agg(
        F.countDistinct("lamport").alias("n_lamports"),
        F.min("lamport").alias("lamport"),
        F.first("sender_id", ignorenulls=True).alias("sender_id"),
        F.min("time_ms").alias("first_held_ms"),
        F.max("size_bytes").alias("msg_size"),
    ).join(sent_first, ["run", "channel", "message_id"], "left").select(
        "run", "channel", "message_id", "lamport", "n_lamports", "msg_size",
        F.coalesce("sender", "sender_id").alias("sender"),
        F.coalesce("sent_ms", "first_held_ms").alias("sent_ms"),
        F.col("sent_ms").isNotNull().alias("send_logged"),
    ).persist(StorageLevel.MEMORY_AND_DISK)

    missing = (
        parts.join(msgs, keys)
        .join(held_first.select("run", "channel", "node_id", "message_id"),
              ["run", "channel", "node_id", "message_id"], "left_anti")
    )
    noticed = (
        ev.filter(F.col("kind") == "MessagesMissing")
        .select(
            "run", "channel", "node_id", "time_ms",
            F.from_json("detail", "struct<missing:array<struct<message_id:string>>>")
            .alias("d"),
        )
        .select("run", "channel", "node_id", "time_ms",
                F.explode_outer("d.missing.message_id").alias("message_id"))
        .filter(F.col("message_id").isNotNull())
        .groupBy("run", "channel", "node_id", "message_id")
        .agg(F.min("time_ms").alias("noticed_ms"))
    )
    lost = (
        ev.filter(F.col("kind") == "MessageLost")
        .groupBy("run", "channel", "node_id", "message_id")
        .agg(F.min("time_ms").alias("lost_ms"))
    )
    missing_rows = (
        missing.join(noticed, ["run", "channel", "node_id", "message_id"], "left")
        .join(lost, ["run", "channel", "node_id", "message_id"], "left")
        .select("run", "channel", "message_id", "sender", "lamport", "sent_ms", "node_id",
                "noticed_ms", "lost_ms")
        .orderBy("run", "channel", "sent_ms", "message_id", "node_id")
    )
    missing_list = [r.asDict() for r in missing_rows.toLocalIterator()]

    # ---- per-channel basic counts
    base: dict[tuple[str, str], dict[str, Any]] = {}
    for r in ev.groupBy(*keys).agg(
        F.min("time_ms").alias("t0"), F.max("time_ms").alias("t1"),
        F.countDistinct("node_id").alias("participants"), F.count("*").alias("rows"),
        F.first("source").alias("source"),
    ).collect():
        base[(r["run"], r["channel"])] = r.asDict()
    for r in msgs.groupBy(*keys).agg(
        F.count("*").alias("messages"),
        F.sum(F.when(F.col("n_lamports") > 1, 1).otherwise(0)).alias("lamport_inconsistent"),
        F.sum(F.when(F.col("send_logged"), 0).otherwise(1)).alias("send_not_logged"),
    ).collect():
        base[(r["run"], r["channel"])].update(r.asDict())
    for r in held_first.groupBy(*keys).agg(
        F.sum(F.when(F.col("times") > 1, F.col("times") - 1).otherwise(0)).alias("duplicates"),
        F.count("*").alias("held_pairs"),
    ).collect():
        base[(r["run"], r["channel"])].update(r.asDict())
    kinds: dict[tuple[str, str], dict[str, int]] = {}
    for r in ev.groupBy("run", "channel", "kind").count().collect():
        kinds.setdefault((r["run"], r["channel"]), {})[r["kind"]] = r["count"]
    drops: dict[tuple[str, str], dict[str, int]] = {}
    for r in ev.filter(F.col("kind") == "MessageDropped").groupBy(
        "run", "channel", "reason"
    ).count().collect():
        drops.setdefault((r["run"], r["channel"]), {})[r["reason"] or "unknown"] = r["count"]
    repair_ids: dict[tuple[str, str], int] = {}
    for r in ev.filter(F.col("kind") == "RepairRequested").select(
        "run", "channel",
        F.size(F.from_json("detail", "struct<message_ids:array<string>>").message_ids).alias("n"),
    ).groupBy(*keys).agg(F.sum(F.greatest("n", F.lit(0))).alias("n")).collect():
        repair_ids[(r["run"], r["channel"])] = int(r["n"] or 0)
    # Declared lost is the protocol giving up waiting; the message may still come later
    # (a late repair, the store, a resend): such pairs are counted as recovered, and the
    # messages still unheld by someone who declared them lost are the real loss.
    lost_counts: dict[tuple[str, str], dict[str, int]] = {}
    lost_fate = lost.join(
        held_first.select("run", "channel", "node_id", "message_id", "held_ms"),
        ["run", "channel", "node_id", "message_id"], "left",
    )
    for r in lost_fate.groupBy(*keys).agg(
        F.count("*").alias("pairs"), F.countDistinct("message_id").alias("messages"),
        F.count("held_ms").alias("pairs_recovered"),
        F.countDistinct(F.when(F.col("held_ms").isNull(), F.col("message_id")))
        .alias("messages_never_received"),
    ).collect():
        lost_counts[(r["run"], r["channel"])] = {
            k: int(r[k]) for k in ("pairs", "messages", "pairs_recovered",
                                   "messages_never_received")
        }

    # ---- latency: send -> deliver, per receiver
    dl = (
        ev.filter(F.col("kind") == "MessageDelivered")
        .select("run", "channel", "node_id", "message_id", "time_ms")
        .join(sent_first.select("run", "channel", "message_id", "sent_ms"),
              ["run", "channel", "message_id"])
        .select("run", "channel", "node_id", (F.col("time_ms") - F.col("sent_ms")).alias("lat"))
    ).persist(StorageLevel.MEMORY_AND_DISK)
    latency: dict[tuple[str, str], dict[str, Any]] = {}
    for r in dl.groupBy(*keys).agg(
        F.percentile_approx("lat", [0.5, 0.9, 0.99], 10_000).alias("p"),
        F.min("lat").alias("min"), F.max("lat").alias("max"), F.avg("lat").alias("mean"),
        F.count("*").alias("count"),
    ).collect():
        latency[(r["run"], r["channel"])] = {
            "count": r["count"], **_pct(r["p"]), "min": r["min"], "max": r["max"],
            "mean": None if r["mean"] is None else round(r["mean"], 1),
        }
    hist_rows = dl.select(
        *keys,
        F.floor(F.log2(F.greatest(F.col("lat"), F.lit(0)) + 1) * 2).cast("int").alias("b"),
    ).groupBy(*keys, "b").count().collect()
    lat_hist: dict[tuple[str, str], dict[int, int]] = {}
    for r in hist_rows:
        lat_hist.setdefault((r["run"], r["channel"]), {})[int(r["b"])] = r["count"]
    per_receiver = [
        r.asDict()
        for r in dl.groupBy(*keys, "node_id").agg(
            F.count("*").alias("deliveries"),
            F.percentile_approx("lat", [0.5, 0.9, 0.99], 1_000).alias("p"),
            F.max("lat").alias("max"),
        ).orderBy(*keys, "node_id").toLocalIterator()
    ]

    # ---- acknowledgement
    acks = ev.filter(F.col("kind") == "MessageAcknowledged").select(
        "run", "channel", "message_id", F.col("node_id").alias("sender"),
        F.col("time_ms").alias("ack_ms"),
        F.get_json_object("detail", "$.by_causal_history").alias("by_causal"),
    )
    acked = sent.join(acks, ["run", "channel", "message_id", "sender"]).select(
        *keys, (F.col("ack_ms") - F.col("sent_ms")).alias("t"), "by_causal"
    )
    ack_stats: dict[tuple[str, str], dict[str, Any]] = {}
    for r in acked.groupBy(*keys).agg(
        F.percentile_approx("t", [0.5, 0.9, 0.99], 10_000).alias("p"),
        F.max("t").alias("max"), F.count("*").alias("count"),
        F.sum(F.when(F.col("by_causal") == "true", 1).otherwise(0)).alias("by_causal"),
    ).collect():
        ack_stats[(r["run"], r["channel"])] = {
            "acknowledged": r["count"], "by_causal_history": r["by_causal"],
            "by_bloom_filter": r["count"] - r["by_causal"], **_pct(r["p"]), "max": r["max"],
        }
    failed = ev.filter(F.col("kind") == "MessageSendFailed").select(
        "run", "channel", "message_id", F.col("node_id").alias("sender"), "reason"
    )
    fail_counts: dict[tuple[str, str], dict[str, int]] = {}
    for r in failed.groupBy(*keys, "reason").count().collect():
        fail_counts.setdefault((r["run"], r["channel"]), {})[r["reason"] or "unknown"] = r[
            "count"
        ]
    unacked: dict[tuple[str, str], int] = {}
    for r in (
        sent.join(acks.select("run", "channel", "message_id", "sender"),
                  ["run", "channel", "message_id", "sender"], "left_anti")
        .join(failed.select("run", "channel", "message_id", "sender"),
              ["run", "channel", "message_id", "sender"], "left_anti")
        .groupBy(*keys).count().collect()
    ):
        unacked[(r["run"], r["channel"])] = r["count"]

    # ---- overhead
    overhead: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sent.groupBy(*keys).agg(
        F.count("*").alias("n"), F.sum("content_bytes").alias("content"),
        F.sum("metadata_bytes").alias("metadata"), F.sum("size_bytes").alias("size"),
    ).collect():
        overhead[(r["run"], r["channel"])] = {
            "content_messages": r["n"], "content_bytes": r["content"] or 0,
            "metadata_bytes": r["metadata"] or 0, "content_message_bytes": r["size"] or 0,
        }
    for r in ev.filter(F.col("kind") == "SyncSent").groupBy(*keys).agg(
        F.count("*").alias("n"), F.count("size_bytes").alias("known"),
        F.sum("size_bytes").alias("bytes"),
    ).collect():
        overhead.setdefault((r["run"], r["channel"]), {}).update(
            {"sync_messages": r["n"], "sync_bytes": r["bytes"] or 0,
             "sync_sizes_unknown": r["n"] - r["known"]}
        )
    sizes = msgs.select("run", "channel", "message_id", "msg_size")
    for kind, name in (("MessageResent", "resend"), ("RepairSent", "repair")):
        for r in (
            ev.filter(F.col("kind") == kind).select("run", "channel", "message_id", "size_bytes")
            .join(sizes, ["run", "channel", "message_id"], "left")
            .groupBy(*keys).agg(
                F.count("*").alias("n"),
                F.sum(F.coalesce("size_bytes", "msg_size")).alias("bytes"),
            ).collect()
        ):
            overhead.setdefault((r["run"], r["channel"]), {}).update(
                {f"{name}_messages": r["n"], f"{name}_bytes": r["bytes"] or 0}
            )

    # ---- convergence over time (share of participant x message pairs held)
    span = {k: (v["t0"], max(v["t1"], v["t0"] + 1)) for k, v in base.items()}
    t0_expr = F.create_map(*[x for k, v in span.items() for x in (F.lit(f"{k[0]}\x00{k[1]}"),
                                                                  F.lit(v[0]))])
    t1_expr = F.create_map(*[x for k, v in span.items() for x in (F.lit(f"{k[0]}\x00{k[1]}"),
                                                                  F.lit(v[1]))])
    key_expr = F.concat_ws("\x00", "run", "channel")

    def bucketed(df: Any, col: str) -> dict[tuple[str, str], list[int]]:
        b = F.least(
            F.lit(TIME_BUCKETS - 1),
            F.floor((F.col(col) - t0_expr[key_expr]) * TIME_BUCKETS
                    / (t1_expr[key_expr] - t0_expr[key_expr] + 1)).cast("int"),
        )
        out: dict[tuple[str, str], list[int]] = {}
        for r in df.select(*keys, b.alias("b")).groupBy(*keys, "b").count().collect():
            arr = out.setdefault((r["run"], r["channel"]), [0] * TIME_BUCKETS)
            arr[int(r["b"])] += r["count"]
        return out

    held_time = bucketed(held_first, "held_ms")
    sent_time = bucketed(msgs, "sent_ms")

    # ---- causal order, per participant (Python workers, vectorised Arrow)
    checks = (
        raw.filter(F.col("channel").isNotNull() & F.col("kind").isin([*_HELD, "MessageLost"]))
        .select("run", "channel", "node_id", "seq", "kind", "message_id", "causal_history")
        .groupBy("run", "channel", "node_id")
        .applyInArrow(check_participant, _check_schema_type())
    ).persist(StorageLevel.MEMORY_AND_DISK)
    causal: dict[tuple[str, str], dict[str, Any]] = {}
    for r in checks.filter(F.col("row_type") == "summary").groupBy(*keys).agg(
        *[F.sum(c).alias(c) for c in ("checked_messages", "checked_dependencies", "violations",
                                      "delivered_after", "never_held", "duplicates",
                                      "unverifiable")],
        F.sum(F.when(F.col("violations") > 0, 1).otherwise(0)).alias("participants_violating"),
    ).collect():
        causal[(r["run"], r["channel"])] = {
            k: int(r[k] or 0) for k in (
                "checked_messages", "checked_dependencies", "violations", "delivered_after",
                "never_held", "duplicates", "unverifiable", "participants_violating",
            )
        }
    violations = [
        r.asDict()
        for r in checks.filter(F.col("row_type") == "violation")
        .select("run", "channel", "node_id", "message_id", "dependency", "violation", "seq",
                "dependency_seq")
        .orderBy("run", "channel", "node_id", "seq").toLocalIterator()
    ]
    checks.unpersist()
    dl.unpersist()
    msgs.unpersist()
    ev.unpersist()

    # ---- assemble
    channels: list[dict[str, Any]] = []
    miss_by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for m in missing_list:
        miss_by_key.setdefault((m["run"], m["channel"]), []).append(m)
    viol_by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for v in violations:
        viol_by_key.setdefault((v["run"], v["channel"]), []).append(v)
    for key in sorted(base):
        b = base[key]
        t0 = b["t0"]
        miss = miss_by_key.get(key, [])
        per_msg: dict[str, dict[str, Any]] = {}
        for m in miss:
            e = per_msg.setdefault(m["message_id"], {
                "message_id": m["message_id"], "sender": m["sender"],
                "sent_at_ms": None if m["sent_ms"] is None else m["sent_ms"] - t0,
                "missing_count": 0, "missing_at": [], "noticed_by": 0, "declared_lost_by": 0,
                "missing_since_ms": None,
            })
            e["missing_count"] += 1
            if len(e["missing_at"]) < NODES_PER_MESSAGE:
                e["missing_at"].append(m["node_id"])
            since = m["noticed_ms"] if m["noticed_ms"] is not None else m["sent_ms"]
            if m["noticed_ms"] is not None:
                e["noticed_by"] += 1
            if m["lost_ms"] is not None:
                e["declared_lost_by"] += 1
            if since is not None and (
                e["missing_since_ms"] is None or since - t0 < e["missing_since_ms"]
            ):
                e["missing_since_ms"] = since - t0
        miss_msgs = list(per_msg.values())
        kc = kinds.get(key, {})
        cz = causal.get(key, {"violations": 0, "duplicates": 0, "unverifiable": 0})
        p = b["participants"]
        n_msgs = b.get("messages", 0) or 0
        # no message: nothing to converge on (None: shown as "-", neither yes nor NO)
        converged = None if n_msgs == 0 else (
            not miss and not (b.get("lamport_inconsistent") or 0)
            and not (b.get("duplicates") or 0)
        )
        ov = overhead.get(key, {})
        total_bytes = sum(ov.get(k, 0) for k in (
            "content_message_bytes", "sync_bytes", "resend_bytes", "repair_bytes"))
        ov["total_sent_bytes"] = total_bytes
        ov["overhead_ratio"] = (
            round((total_bytes - ov.get("content_bytes", 0)) / total_bytes, 4)
            if total_bytes else None
        )
        ov["metadata_per_content_byte"] = (
            round(ov["metadata_bytes"] / ov["content_bytes"], 2)
            if ov.get("content_bytes") else None
        )
        sent_curve = sent_time.get(key, [0] * TIME_BUCKETS)
        held_curve = held_time.get(key, [0] * TIME_BUCKETS)
        curve = []
        cs = ch = 0
        for i in range(TIME_BUCKETS):
            cs += sent_curve[i]
            ch += held_curve[i]
            curve.append(None if cs == 0 else round(min(1.0, ch / (cs * p)), 4))
        t1 = span[key][1]
        lh = lat_hist.get(key, {})
        channels.append({
            "run": key[0], "channel": key[1], "source": b["source"],
            "participants": p, "messages": n_msgs, "events": b["rows"],
            "duration_ms": b["t1"] - t0,
            "convergence": {
                "converged": converged,
                "identical_logs_in_identical_order": converged,
                "missing_pairs": len(miss),
                "messages_missing_somewhere": len(miss_msgs),
                "participants_missing_something": len({m["node_id"] for m in miss}),
                "held_pairs": b.get("held_pairs", 0),
                "expected_pairs": p * n_msgs,
                "lamport_inconsistent_messages": b.get("lamport_inconsistent") or 0,
                "duplicate_deliveries": b.get("duplicates") or 0,
                "sends_not_in_input": b.get("send_not_logged") or 0,
                "missing": miss_msgs[:LIST_LIMIT],
                "missing_truncated": len(miss_msgs) > LIST_LIMIT,
                "over_time": {
                    "bucket_ms": (t1 - t0 + 1) / TIME_BUCKETS,
                    "held_share": curve,
                },
            },
            "causal_order": {
                **cz,
                "ok": cz.get("violations", 0) == 0,
                "violations_listed": viol_by_key.get(key, [])[:LIST_LIMIT],
            },
            "latency_ms": latency.get(key, {"count": 0, "p50": None, "p90": None, "p99": None}),
            "latency_histogram": {
                "edges_ms": [round(2 ** (i / 2) - 1, 1) for i in range(max(lh, default=0) + 2)],
                "counts": [lh.get(i, 0) for i in range(max(lh, default=-1) + 1)],
            },
            "slowest_receivers": sorted(
                (
                    {"node_id": r["node_id"], "deliveries": r["deliveries"],
                     **_pct(r["p"]), "max": r["max"]}
                    for r in per_receiver if (r["run"], r["channel"]) == key
                ),
                key=lambda x: (-(x["p99"] or 0), x["node_id"]),
            )[:5],
            "acknowledgement": {
                **ack_stats.get(key, {"acknowledged": 0}),
                "unacknowledged_at_end": unacked.get(key, 0),
                "failed": fail_counts.get(key, {}),
            },
            "counts": {
                "messages_sent": kc.get("MessageSent", 0),
                "deliveries": kc.get("MessageDelivered", 0),
                "resends": kc.get("MessageResent", 0),
                "syncs_sent": kc.get("SyncSent", 0),
                "repair_requests": kc.get("RepairRequested", 0),
                "repair_ids_requested": repair_ids.get(key, 0),
                "repairs_sent": kc.get("RepairSent", 0),
                "repair_data_needed": kc.get("RepairDataNeeded", 0),
                "store_retrievals": kc.get("StoreRetrieval", 0),
                "lost": lost_counts.get(key, {"pairs": 0, "messages": 0, "pairs_recovered": 0,
                                              "messages_never_received": 0}),
                "dropped": drops.get(key, {}),
                "by_kind": dict(sorted(kc.items())),
            },
            "overhead": ov,
        })
    return {
        "complete": True,
        "generated_at_ms": int(time.time() * 1000),
        "inputs": [str(i) for i in inputs],
        "files": len(files),
        "rows": total_rows,
        "channels": channels,
        "caveats": _caveats(channels),
        "_missing_rows": missing_list,
        "_violation_rows": violations,
        "_receiver_rows": per_receiver,
    }


def _caveats(channels: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in channels:
        name = f"{c['run']}/{c['channel']}"
        if c["source"] == "node":
            out.append(
                f"{name}: times are the nodes' wall clocks; latencies across machines include "
                "clock offsets"
            )
        if c["overhead"].get("sync_sizes_unknown"):
            out.append(
                f"{name}: {c['overhead']['sync_sizes_unknown']} sync message(s) of unknown size "
                "(node event logs do not record them) are not in the byte totals"
            )
        if c["causal_order"].get("unverifiable"):
            out.append(
                f"{name}: {c['causal_order']['unverifiable']} held message(s) without a known "
                "causal history were not checked"
            )
        if c["convergence"]["sends_not_in_input"]:
            out.append(
                f"{name}: {c['convergence']['sends_not_in_input']} message(s) whose sender's log "
                "is not in the input (latency unknown for them)"
            )
    return out


# ---------------------------------------------------------------- output


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for r in rows:
            w.writerow([r.get(c) for c in columns])


def write_report(summary: dict[str, Any], out: str | Path) -> Path:
    """Write summary.json, report.html and the CSVs into ``out`` (all or nothing)."""
    from pipeline.html_report import render_html

    out = Path(out)
    staging = out.parent / f".{out.name}.report-partial-{time.time_ns()}"
    staging.mkdir(parents=True)
    try:
        missing_rows = summary.pop("_missing_rows")
        violation_rows = summary.pop("_violation_rows")
        receiver_rows = summary.pop("_receiver_rows")
        for r in receiver_rows:
            p = r.pop("p", None) or [None, None, None]
            r.update({"p50": p[0], "p90": p[1], "p99": p[2]})
        _write_csv(staging / "missing.csv", missing_rows,
                   ("run", "channel", "message_id", "sender", "lamport", "sent_ms", "node_id",
                    "noticed_ms", "lost_ms"))
        _write_csv(staging / "causal_violations.csv", violation_rows,
                   ("run", "channel", "node_id", "message_id", "dependency", "violation", "seq",
                    "dependency_seq"))
        _write_csv(staging / "latency_by_receiver.csv", receiver_rows,
                   ("run", "channel", "node_id", "deliveries", "p50", "p90", "p99", "max"))
        (staging / "report.html").write_text(render_html(summary))
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        # summary.json last: its presence marks a complete report.
        (out / "summary.json").unlink(missing_ok=True)
        for name in ("missing.csv", "causal_violations.csv", "latency_by_receiver.csv",
                     "report.html", "summary.json"):
            (staging / name).replace(out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _yes_no(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else "NO"


def _fmt_ms(v: Any) -> str:
    if v is None:
        return "-"
    v = float(v)
    return f"{v / 1000:.1f}s" if abs(v) >= 10_000 else f"{v:.0f}ms"


def print_table(summary: dict[str, Any], out: TextIO) -> None:
    """The short terminal table: one line per channel."""
    head = (f"{'run/channel':<24} {'parts':>6} {'msgs':>6} {'conv':>4} {'missing':>8} "
            f"{'causal':>6} {'lat p50':>8} {'lat p99':>8} {'ack p50':>8} {'resend':>7} "
            f"{'repair':>7} {'lost':>5} {'ovh':>6}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for c in summary["channels"]:
        name = f"{c['run']}/{c['channel']}"
        conv = c["convergence"]
        ov = c["overhead"].get("overhead_ratio")
        print(
            f"{name[:24]:<24} {c['participants']:>6} {c['messages']:>6} "
            f"{_yes_no(conv['converged']):>4} {conv['missing_pairs']:>8} "
            f"{c['causal_order']['violations']:>6} {_fmt_ms(c['latency_ms'].get('p50')):>8} "
            f"{_fmt_ms(c['latency_ms'].get('p99')):>8} "
            f"{_fmt_ms(c['acknowledgement'].get('p50')):>8} {c['counts']['resends']:>7} "
            f"{c['counts']['repairs_sent']:>7} {c['counts']['lost']['messages_never_received']:>5} "
            f"{'-' if ov is None else f'{ov:.1%}':>6}",
            file=out,
        )
    for note in summary.get("caveats", []):
        print(f"note: {note}", file=out)


# ---------------------------------------------------------------- command line


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    """The ``sdschat report`` options."""
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="event-log Parquet: directories from 'sdschat sim'/'sdschat export', "
                   "or files")
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument("--master", default="local[*]",
                   help="Spark master: local[*] (default), local[N], spark://HOST:PORT")
    p.add_argument("--shuffle-partitions", type=int, default=None,
                   help="spark.sql.shuffle.partitions (default: 4 x cores for local masters)")
    p.add_argument("--driver-memory", default="2g", help="local driver memory (default 2g)")


def check_options(args: argparse.Namespace) -> None:
    """Refuse bad ``--out``/``--master``/``--driver-memory``/``--shuffle-partitions``
    before any work (Spark would fail later with a Java traceback, ``--out`` only
    after the whole job)."""
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file, not a directory")
    master = getattr(args, "master", None)
    if master not in (None, "", "submit") and not _MASTER.fullmatch(master):
        raise ReportError(
            f"--master {master!r} is not a Spark master (local, local[N], local[*], "
            "spark://HOST:PORT, yarn, k8s://...)"
        )
    memory = getattr(args, "driver_memory", None)
    if memory is not None and not _MEMORY.fullmatch(memory):
        raise ReportError(f"--driver-memory {memory!r} is not a size like 512m or 2g")
    partitions = getattr(args, "shuffle_partitions", None)
    if partitions is not None and partitions < 1:
        raise ReportError("--shuffle-partitions must be >= 1")


def _unreadable_input(exc: Exception) -> ReportError | None:
    """A Spark failure to read an input file (damaged Parquet data past a valid footer)
    as a :class:`ReportError` naming the file; ``None`` for any other failure."""
    text = str(exc)
    found = re.search(r"\[FAILED_READ_FILE[^\]]*\][^\n]*?reading file (\S+?)\.?\s", text)
    if found is None:
        return None
    cause = re.findall(r"Caused by: ([^\n]+)", text)
    why = f" ({cause[-1].strip()})" if cause else ""
    path = found.group(1).removeprefix("file://")
    return ReportError(f"{path}: damaged Parquet data, Spark could not read it{why}")


def run_report(args: argparse.Namespace, out: TextIO | None = None,
               spark: Any = None) -> int:
    """``sdschat report``: returns 0, or 2 for bad input (nothing written)."""
    out = out or sys.stdout
    master = None if args.master in ("", "submit") else args.master
    shuffle = args.shuffle_partitions
    if shuffle is None and master and master.startswith("local"):
        import os

        n = master[6:-1] if master.startswith("local[") else "1"
        try:
            cores = (os.cpu_count() or 2) if n in ("*", "") else int(n.split(",")[0])
        except ValueError:
            cores = 2
        shuffle = max(2, 4 * cores)
    own = spark is None
    try:
        check_options(args)
        validate_inputs(args.inputs)  # fail fast, before starting Spark
        if own:
            from pipeline.spark import make_session

            spark = make_session(master, shuffle_partitions=shuffle,
                                 driver_memory=args.driver_memory)
            # a failed task is reported once, by the exception below, not also as
            # pages of executor stack traces on stderr
            spark.sparkContext.setLogLevel("OFF")
        started = time.monotonic()
        try:
            summary = compute_report(spark, args.inputs)
        except Exception as exc:
            unreadable = _unreadable_input(exc)
            if unreadable is None:
                raise
            raise unreadable from None
        summary["spark_seconds"] = round(time.monotonic() - started, 2)
        summary["master"] = spark.sparkContext.master
        write_report(summary, args.out)
    except ReportError as exc:
        print(f"sdschat report: {exc}", file=sys.stderr)
        return 2
    finally:
        if own and spark is not None:
            spark.stop()
    print_table(summary, out)
    print(f"report: {Path(args.out) / 'report.html'}  summary: "
          f"{Path(args.out) / 'summary.json'}", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit pipeline/report.py`` (master from spark-submit)."""
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n")[0])
    add_report_arguments(parser)
    parser.set_defaults(master="submit")
    args = parser.parse_args(argv)
    return run_report(args)


if __name__ == "__main__":
    sys.exit(main())
