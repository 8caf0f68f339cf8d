"""What the report explains beyond its figures: who was there, when, and what
happened over time (:func:`explain_channels`), plus participants' names read from
an export's ``export.json`` (:func:`participant_names`).

Per (run, channel), computed with DataFrame operations only (small results):

* **participants**: first and last event, joins (``NodeJoined``), the periods the
  simulator logged them offline (``NodeOffline`` .. ``NodeOnline``) and the periods
  in which a participant logged nothing for more than :data:`SILENT_MS` (a node
  not running: stopped, killed and restarted, or cut off; a real node logs a sync
  every few seconds);
* **timeline**: per time bucket (:data:`TIMELINE_BUCKETS` over the channel's span),
  messages sent, delivered, noticed missing, repaired, declared lost, retrieved
  from a store, and drops by reason (loss, partition, offline...);
* **duplicates**: the (receiver, message) pairs held more than once, located.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.frames import fresh, kept

__all__ = ["SILENT_MS", "TIMELINE_BUCKETS", "explain_channels", "participant_names",
           "run_conditions"]

#: A participant that logged nothing for longer than this (ms) is shown as silent.
SILENT_MS = 10_000
#: Buckets of the per-channel timeline.
TIMELINE_BUCKETS = 60
#: Listed per channel at most: offline/silent periods, duplicate pairs.
LISTED = 50

#: The kinds the timeline counts per bucket.
_COUNTED = ("MessageSent", "MessageDelivered", "MessagesMissing", "RepairSent", "MessageLost",
            "StoreRetrieval")
_TIMELINE_KINDS = (*_COUNTED, "MessageDropped", "NodeOffline", "NodeOnline", "NodeJoined")
#: What a participant logs when it broadcasts: every other participant that runs and
#: is connected then logs something (a delivery, a sync, a duplicate dropped...).
_BROADCASTS = ("MessageSent", "SyncSent", "MessageResent", "RepairSent")
#: Broadcasts by others during a gap that a participant did not log any trace of,
#: for the gap to be a silent period (a lossy network may hide a few: 30% loss hides
#: five in a row once in 400 times).
SILENT_EVIDENCE = 5


def participant_names(inputs: Sequence[str | Path]) -> dict[str, str]:
    """node_id -> display name from ``export.json`` beside (or above) each local input
    (``sdschat export`` writes it); {} when there is none."""
    names: dict[str, str] = {}
    for meta in _beside(inputs, "export.json"):
        try:
            nodes = json.loads(meta.read_text()).get("nodes", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(nodes, dict):  # node_id -> {"name": ..., ...}
            for node_id, n in nodes.items():
                if isinstance(n, dict) and n.get("name"):
                    names[str(node_id)] = str(n["name"])
    return names


def _beside(inputs: Sequence[str | Path], name: str) -> list[Path]:
    """``name`` files in, or up to two levels above, each local input."""
    found: list[Path] = []
    for item in inputs:
        text = str(item)
        if "://" in text and not text.startswith("file://"):
            continue
        path = Path(text.removeprefix("file://"))
        for where in (path, path.parent, path.parent.parent):
            if (where / name).is_file():
                if where / name not in found:
                    found.append(where / name)
                break
    return found


def run_conditions(inputs: Sequence[str | Path]) -> dict[str, dict[str, Any]]:
    """run label -> the conditions a simulation ran under, from its ``run.json``:
    loss, churn, partitions (times in ms since the run's start, the participants'
    ids per group) and the network's counts of what it did not deliver, and why."""
    out: dict[str, dict[str, Any]] = {}
    for meta in _beside(inputs, "run.json"):
        try:
            d = json.loads(meta.read_text())
            spec = d.get("spec") or {}
            if isinstance(d.get("partitions"), list):  # written with the members' ids
                parts = [{"start_ms": p.get("start_ms"), "heal_ms": p.get("heal_ms"),
                          "groups": [[str(x) for x in g] for g in p.get("groups") or []]}
                         for p in d["partitions"]]
            else:  # an older run.json: indexes; the short ids are p000.. (app.sim.simulation)
                n = int(spec.get("participants") or 0)
                short = not spec.get("sender_id_chars")
                width = max(3, len(str(n - 1)))
                parts = [{"start_ms": p.get("start_ms"), "heal_ms": p.get("heal_ms"),
                          "groups": [[f"p{i:0{width}d}" if short else f"#{i}" for i in g]
                                     for g in p.get("groups") or []]}
                         for p in spec.get("partitions") or []]
            net = d.get("network") or {}
            out[str(d["run"])] = {
                "loss": spec.get("loss"), "churn": spec.get("churn"), "partitions": parts,
                "not_delivered": {k: net[k] for k in ("lost", "partitioned", "offline")
                                  if k in net}}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def explain_channels(ev: Any, pairs: Any, starts: dict[str, int] | None = None
                     ) -> dict[tuple[str, str], dict[str, Any]]:
    """(run, channel) -> {"participants", "timeline", "duplicates"} (times in ms
    since the run's first event, ``starts[run]``; else the channel's). ``ev``: the
    channel rows (run, channel, node_id, time_ms, kind, reason); ``pairs``: (run,
    channel, node_id, message_id, held_ms, times).

    Two passes over the event rows: one aggregate per (participant, second) with
    the counts the timeline draws, kept; one for the drops by reason. The rest
    reads the kept table (participants x seconds active) and ``pairs``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = ["run", "channel"]
    is_k = {k: F.col("kind") == k for k in _TIMELINE_KINDS}
    per_sec = kept(ev.groupBy(
        *key, "node_id", F.floor(F.col("time_ms") / 1000).alias("s")).agg(
        F.min("time_ms").alias("first"), F.max("time_ms").alias("last"),
        *[F.count(F.when(is_k[k], 1)).alias(k) for k in _COUNTED],
        F.count(F.when(F.col("kind").isin(*_BROADCASTS), 1)).alias("broadcasts"),
        F.count(F.when(is_k["NodeJoined"], 1)).alias("joins")))
    # (fixed-width buffers only: a hash aggregate; the few offline marks are read apart)
    people = per_sec.groupBy(*key, "node_id").agg(
        F.min("first").alias("first"), F.max("last").alias("last"),
        F.sum("joins").alias("joins")).collect()
    marks: dict[tuple[str, str, str], list[Any]] = {}
    for r in ev.filter(is_k["NodeOffline"] | is_k["NodeOnline"]).select(
            *key, "node_id", F.col("time_ms").alias("t"),
            is_k["NodeOffline"].alias("off")).collect():
        marks.setdefault((r["run"], r["channel"], r["node_id"]), []).append(r)
    spans: dict[tuple[str, str], tuple[int, int]] = {}
    for r in people:
        k = (r["run"], r["channel"])
        t0, t1 = spans.get(k, (r["first"], r["last"]))
        spans[k] = (min(t0, r["first"]), max(t1, r["last"]))
    # times count from the run's start (the channel's span still sets the buckets)
    origin = {k: (starts or {}).get(k[0], t0) for k, (t0, _) in spans.items()}
    out: dict[tuple[str, str], dict[str, Any]] = {
        k: {"participants": {},
            "timeline": {"bucket_ms": max(1, t1 - t0 + 1) / TIMELINE_BUCKETS,
                         "start_ms": t0 - (starts or {}).get(k[0], t0),
                         "counts": {}, "drops": {}},
            "duplicates": []}
        for k, (t0, t1) in spans.items()}

    # participants: first/last event, joins, logged offline periods
    for r in people:
        k = (r["run"], r["channel"])
        t0 = origin[k]
        p = {"node_id": r["node_id"], "first_ms": r["first"] - t0, "last_ms": r["last"] - t0,
             "joins": int(r["joins"] or 0), "offline": [], "silent": [], "held": 0,
             "last_held_ms": None}
        for m in sorted(marks.get((r["run"], r["channel"], r["node_id"]), []),
                        key=lambda m: (m["t"], not m["off"])):
            if m["off"]:
                p["offline"].append([m["t"] - t0, None])
            elif p["offline"] and p["offline"][-1][1] is None:
                p["offline"][-1][1] = m["t"] - t0
        p["offline"] = p["offline"][:LISTED]
        out[k]["participants"][r["node_id"]] = p

    # what each participant holds (its missing count is the channel's messages less it)
    for r in pairs.filter(F.col("times") > 0).groupBy(*key, "node_id").agg(
            F.count(F.lit(1)).alias("held"), F.max("held_ms").alias("last_held")).collect():
        k = (r["run"], r["channel"])
        p = out[k]["participants"].get(r["node_id"])
        if p is not None:
            p["held"] = r["held"]
            p["last_held_ms"] = r["last_held"] - origin[k]

    # silent periods: a gap between the seconds in which a participant logged anything,
    # longer than SILENT_MS, during which the others broadcast at least SILENT_EVIDENCE
    # times (each broadcast leaves a trace in the log of every participant that runs
    # and is connected). The idle tail of a run, in which nobody broadcasts, is not
    # silence: nothing was there to log.
    w = Window.partitionBy(*key, "node_id").orderBy("s")
    steps = per_sec.select(*key, "node_id", "s", F.lag("s").over(w).alias("prev")).filter(
        F.col("prev").isNotNull() & ((F.col("s") - F.col("prev")) * 1000 > SILENT_MS))
    cum = per_sec.groupBy(*key, "s").agg(F.sum("broadcasts").alias("b")).select(
        *key, "s", F.sum("b").over(Window.partitionBy(*key).orderBy("s").rowsBetween(
            Window.unboundedPreceding, 0)).alias("cum"))
    # broadcasts in the seconds strictly between prev and s: cum(last second < s)
    # - cum(prev); the participant logged nothing then, so none of them is its own
    before = fresh(cum).select(*key, F.col("s").alias("s2"), F.col("cum").alias("c2"))
    gaps = steps.join(cum.select(*key, F.col("s").alias("prev"), F.col("cum").alias("c1")),
                      [*key, "prev"]).join(before, key).filter(
        (F.col("s2") < F.col("s")) & (F.col("s2") >= F.col("prev"))).groupBy(
        *key, "node_id", "prev", "s").agg(
        (F.max("c2") - F.min("c1")).alias("heard"))
    for r in gaps.filter(F.col("heard") >= SILENT_EVIDENCE).orderBy(
            *key, "node_id", "s").limit(100_000).collect():
        k = (r["run"], r["channel"])
        t0 = origin[k]
        p = out[k]["participants"][r["node_id"]]
        a, b = max(0, (r["prev"] + 1) * 1000 - t0), r["s"] * 1000 - t0
        covered = any(x <= a + 2_000 and (y is None or y >= b - 2_000) for x, y in p["offline"])
        if len(p["silent"]) < LISTED and not covered:  # a logged offline period says it
            p["silent"].append([a, b, int(r["heard"])])

    # the timeline: counts per bucket (by second) and kind; drops per bucket and reason
    def bucket_of(k: tuple[str, str], ms: int) -> int:
        t0, t1 = spans[k]
        return min(TIMELINE_BUCKETS - 1, max(0, (ms - t0) * TIMELINE_BUCKETS // (t1 - t0 + 1)))

    for r in per_sec.groupBy(*key, "s").agg(*[F.sum(k).alias(k) for k in _COUNTED]).collect():
        k = (r["run"], r["channel"])
        b = bucket_of(k, max(spans[k][0], r["s"] * 1000))
        for kind in _COUNTED:
            if r[kind]:
                out[k]["timeline"]["counts"].setdefault(
                    kind, [0] * TIMELINE_BUCKETS)[b] += r[kind]
    for r in ev.filter(is_k["MessageDropped"]).groupBy(
            *key, F.floor(F.col("time_ms") / 1000).alias("s"),
            F.coalesce("reason", F.lit("unknown")).alias("reason")).count().collect():
        k = (r["run"], r["channel"])
        if k in spans:
            b = bucket_of(k, max(spans[k][0], r["s"] * 1000))
            out[k]["timeline"]["drops"].setdefault(
                r["reason"], [0] * TIMELINE_BUCKETS)[b] += r["count"]

    # duplicate deliveries located
    dup = pairs.filter(F.col("times") > 1).withColumn("i", F.row_number().over(
        Window.partitionBy(*key).orderBy("held_ms", "node_id", "message_id"))).filter(
        F.col("i") <= LISTED).select(*key, "node_id", "message_id", "held_ms", "times").collect()
    for r in dup:
        k = (r["run"], r["channel"])
        out[k]["duplicates"].append({
            "node_id": r["node_id"], "message_id": r["message_id"],
            "first_held_ms": None if r["held_ms"] is None else r["held_ms"] - origin[k],
            "times_held": r["times"]})
    return out
