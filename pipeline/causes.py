"""Why each missing (participant, message) pair is missing, from the events.

A pair is *never received* when the participant does not hold the message at the
end of its log. Its cause is read from what the events say happened to every copy
of the message that was broadcast (its ``MessageSent``, the sender's
``MessageResent`` and anyone's ``RepairSent``), at the time it went out, seen from
the participant:

* ``offline``: it was logged offline (``NodeOffline`` .. ``NodeOnline``, or to the
  end), or its log had not started yet. A copy broadcast up to the channel's
  largest delivery latency before it went offline counts too (it was in flight);
* ``partitioned``: it and the copy's broadcaster were on different sides of a
  partition of the run (``run.json``; the network checks sides when it sends);
* otherwise the participant was online and reachable: the copy was dropped by the
  network (loss), which is all a log can tell of a copy that never arrived.

The pair's cause is then, in this order:

1. ``waiting``: the message reached it (it logged ``MessagesMissing`` for the
   message itself: it waits for dependencies it never got);
2. ``sender_left``: nobody but its sender ever held it, and the sender went offline
   for good (no ``NodeOnline`` after its last ``NodeOffline``);
3. ``offline``: every copy went out while it was offline;
4. ``partitioned``: every copy went out while it was offline or partitioned away
   from the broadcaster, at least one partitioned;
5. ``dropped``: at least one copy went out while it was online and reachable, and
   none arrived (``dropped`` copies);
6. ``unknown``: no copy is logged (the sender's log is not in the input).

Beside it, why it was never repaired: declared lost (``MessageLost``), never
noticed missing (no ``MessagesMissing`` named it: no message it received listed it
in its history), noticed and asked for a repair N times (``RepairRequested``)
without an answer reaching it, or noticed and never asked.

Everything here is DataFrame operations over the missing pairs (only when some
exist); what reaches the driver is bounded (:data:`CSV_LIMIT` rows, per message
and per participant counts).
"""

from __future__ import annotations

from typing import Any

from pipeline.frames import CSV_LIMIT, LIST_LIMIT, NODES_PER_MESSAGE

__all__ = ["CAUSES", "lost_messages", "missing_pairs"]

#: The causes of a missing pair, in the order they are decided (module docstring).
CAUSES = ("waiting", "sender_left", "offline", "partitioned", "dropped", "unknown")

_PAIR = ["run", "channel", "node_id", "message_id"]
_KEYS = ["run", "channel"]
_COPY_KINDS = ["MessageSent", "MessageResent", "RepairSent"]
_INF = 2**62


def _literal_groups(spark: Any, partitions: dict[str, list[dict[str, Any]]]) -> Any:
    """(run, node_id, g: array<int>): each participant's side in each of the run's
    partitions (0: in no group, it hears everyone), from run.json; None without any."""
    from pyspark.sql import functions as F

    rows = []
    for run, parts in partitions.items():
        members: dict[str, list[int]] = {}
        for i, p in enumerate(parts):
            for g, group in enumerate(p.get("groups") or [], start=1):
                for node in group:
                    members.setdefault(str(node), [0] * len(parts))[i] = g
        rows += [F.struct(F.lit(run).alias("run"), F.lit(node).alias("node_id"),
                          F.array(*[F.lit(x) for x in gs]).alias("g"))
                 for node, gs in members.items()]
    if not rows:
        return None
    return spark.range(1).select(F.explode(F.array(*rows)).alias("x")).select("x.*")


def _literal_partitions(spark: Any, partitions: dict[str, list[dict[str, Any]]]) -> Any:
    """(run, p: array<struct<s, h>>): each run's partition times (ms since its start)."""
    from pyspark.sql import functions as F

    rows = [F.struct(F.lit(run).alias("run"), F.array(*[F.struct(
        F.lit(int(p.get("start_ms") or 0)).cast("long").alias("s"),
        F.lit(_INF if p.get("heal_ms") is None else int(p["heal_ms"])).cast("long").alias("h"))
        for p in parts]).alias("p")) for run, parts in partitions.items() if parts]
    return spark.range(1).select(F.explode(F.array(*rows)).alias("x")).select("x.*")


def missing_pairs(spark: Any, ev: Any, msgs: Any, pairs: Any, detail: str, *,
                  starts: dict[str, int], partitions: dict[str, list[dict[str, Any]]],
                  margin_ms: int) -> tuple[list[dict[str, Any]],
                                           dict[tuple[str, str], dict[str, Any]]]:
    """The missing pairs with their causes: written as Parquet to ``detail/missing``;
    returns (the first :data:`CSV_LIMIT` rows, per channel: counts, the first
    messages with their causes, per participant the causes of what it lacks).

    ``starts``: run -> its first event (ms; partition times count from it);
    ``partitions``: run -> run.json's partitions (member ids); ``margin_ms``: the
    largest delivery latency (a copy in flight when its receiver went offline)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    parts = ev.select(*_KEYS, "node_id").distinct()
    # when each participant's log starts (a copy before it could not reach it)
    first = ev.groupBy(*_KEYS, "node_id").agg(F.min("time_ms").alias("first_ms"))
    # logged offline periods: each NodeOffline up to the next NodeOnline (or none)
    marks = ev.filter(F.col("kind").isin("NodeOffline", "NodeOnline")).select(
        *_KEYS, "node_id", "time_ms", (F.col("kind") == "NodeOffline").alias("off"))
    after = Window.partitionBy(*_KEYS, "node_id").orderBy("time_ms", F.col("off").desc()) \
        .rowsBetween(1, Window.unboundedFollowing)
    periods = marks.withColumn("back", F.min(F.when(~F.col("off"), F.col("time_ms")))
                               .over(after)).filter("off").groupBy(*_KEYS, "node_id").agg(
        F.array_sort(F.collect_list(F.struct(F.col("time_ms").alias("a"),
                                             F.col("back").alias("b")))).alias("periods"))
    nodes = first.join(periods, [*_KEYS, "node_id"], "left")
    noticed = (
        ev.filter(F.col("kind") == "MessagesMissing")
        .select(*_KEYS, "node_id", "time_ms", "message_id",
                F.from_json("detail", "struct<missing:array<struct<message_id:string>>>")
                .alias("d"))
    )
    waiting = noticed.groupBy(*_KEYS, "node_id", "message_id").agg(
        F.min("time_ms").alias("waiting_ms"))
    noticed = noticed.select(*_KEYS, "node_id", "time_ms",
                             F.explode_outer("d.missing.message_id").alias("message_id")
                             ).filter(F.col("message_id").isNotNull()).groupBy(*_PAIR).agg(
        F.min("time_ms").alias("noticed_ms"))
    requested = ev.filter(F.col("kind") == "RepairRequested").select(
        *_KEYS, "node_id", F.explode(F.from_json(
            "detail", "struct<message_ids:array<string>>").message_ids).alias("message_id")
    ).groupBy(*_PAIR).agg(F.count(F.lit(1)).alias("requests"))
    base = (
        parts.join(msgs.select(*_KEYS, "message_id", "sender", "lamport", "sent_ms",
                               "holders"), _KEYS)
        # never held (a declared loss is kept)
        .join(pairs.select(*_PAIR, (F.col("times") > 0).alias("held"), "lost_ms"), _PAIR,
              "left")
        .filter(~F.coalesce(F.col("held"), F.lit(False)))
        .join(noticed, _PAIR, "left").join(waiting, _PAIR, "left")
        .join(requested, _PAIR, "left")
    )
    # every logged copy of the missing messages, seen from each participant lacking it
    want = base.select(*_KEYS, "message_id").distinct()
    copies = ev.filter(F.col("kind").isin(_COPY_KINDS)).select(
        *_KEYS, "message_id", F.col("time_ms").alias("t"), F.col("node_id").alias("by")
    ).join(F.broadcast(want), [*_KEYS, "message_id"], "left_semi")
    per_copy = base.select(*_PAIR).join(copies, [*_KEYS, "message_id"]).join(
        F.broadcast(nodes), [*_KEYS, "node_id"], "left")
    def in_period(p: Any) -> Any:
        return (p["a"] - margin_ms <= F.col("t")) & (p["b"].isNull() | (F.col("t") < p["b"]))

    covering = F.filter(F.coalesce("periods", F.array().cast(
        "array<struct<a:bigint,b:bigint>>")), in_period)
    offline = (F.size(covering) > 0) | (F.col("t") < F.col("first_ms"))
    groups = _literal_groups(spark, partitions)
    if groups is not None:
        times = _literal_partitions(spark, partitions)
        start = F.col("run_start")
        per_copy = (
            per_copy.join(F.broadcast(groups.withColumnRenamed("g", "ng")),
                          ["run", "node_id"], "left")
            .join(F.broadcast(groups.select("run", F.col("node_id").alias("by"),
                                            F.col("g").alias("bg"))), ["run", "by"], "left")
            .join(F.broadcast(times), "run", "left")
            .join(F.broadcast(_starts(spark, starts)), "run", "left"))
        split = F.filter(F.sequence(F.lit(0), F.size("p") - 1), lambda i: (
            (F.col("p")[i]["s"] + start <= F.col("t")) & (F.col("t") < F.col("p")[i]["h"] + start)
            & (F.col("ng")[i] > 0) & (F.col("bg")[i] > 0) & (F.col("ng")[i] != F.col("bg")[i])))
        split = F.when(F.col("p").isNotNull() & F.col("ng").isNotNull()
                       & F.col("bg").isNotNull(), split)
        part_i = F.when(F.size(split) > 0, F.get(split, 0))
    else:
        part_i = F.lit(None).cast("int")
    state = per_copy.select(
        *_PAIR, "t", "by", offline.alias("off"), F.get(covering, 0).alias("period"),
        part_i.alias("part_i"), *([F.col("bg")] if groups is not None else []))
    part_g = (F.col("bg")[F.col("part_i")] if groups is not None else F.lit(None).cast("int"))
    per_pair = state.groupBy(*_PAIR).agg(
        F.count(F.lit(1)).alias("copies"),
        F.count(F.when(F.col("off"), 1)).alias("copies_offline"),
        F.count(F.when(~F.col("off") & F.col("part_i").isNotNull(), 1))
        .alias("copies_partitioned"),
        F.count(F.when(~F.col("off") & F.col("part_i").isNull(), 1)).alias("dropped"),
        F.min_by(F.col("period"), F.when(F.col("off") & F.col("period").isNotNull(),
                                         F.col("t"))).alias("period"),
        F.min_by(F.struct(F.col("part_i").alias("i"), part_g.alias("g"), F.col("by")),
                 F.when(~F.col("off") & F.col("part_i").isNotNull(), F.col("t")))
        .alias("split"),
    )
    # the sender left: went offline for good (its last period has no end)
    left = nodes.select(*_KEYS, F.col("node_id").alias("sender"), F.get(F.filter(
        F.coalesce("periods", F.array().cast("array<struct<a:bigint,b:bigint>>")),
        lambda p: p["b"].isNull()), 0)["a"].alias("sender_left_ms"))
    c = F.col
    cause = (
        F.when(c("waiting_ms").isNotNull(), "waiting")
        .when((c("holders") <= 1) & c("sender_left_ms").isNotNull(), "sender_left")
        .when(c("copies") == 0, "unknown")
        .when((c("dropped") == 0) & (c("copies_partitioned") == 0), "offline")
        .when(c("dropped") == 0, "partitioned")
        .otherwise("dropped"))
    out = (
        base.join(per_pair, _PAIR, "left")
        .join(F.broadcast(left), [*_KEYS, "sender"], "left")
        .na.fill(0, ["copies", "copies_offline", "copies_partitioned", "dropped", "requests"])
        .select("run", "channel", "message_id", "sender", "lamport", "sent_ms", "node_id",
                "noticed_ms", "lost_ms", cause.alias("cause"), "copies", "copies_offline",
                "copies_partitioned", "dropped", "requests", "waiting_ms",
                c("period.a").alias("offline_from_ms"), c("period.b").alias("offline_to_ms"),
                c("split.i").alias("partition"), c("split.g").alias("partition_side"),
                c("split.by").alias("partitioned_from"), "sender_left_ms")
    )
    path = f"{detail.rstrip('/')}/missing"
    out.write.mode("overwrite").parquet(path)
    missing = spark.read.parquet(path)
    rows = [r.asDict() for r in missing.orderBy(
        "run", "channel", "sent_ms", "message_id", "node_id").limit(CSV_LIMIT).collect()]
    causes_of = F.array_sort(F.collect_list(F.struct("cause", "n")))
    per_msg_cause = missing.groupBy(*_KEYS, "message_id", "cause").agg(
        F.count(F.lit(1)).alias("n")).groupBy(*_KEYS, "message_id").agg(
        causes_of.alias("causes"))
    per_msg = missing.groupBy(*_KEYS, "message_id").agg(
        F.min("sender").alias("sender"), F.min("sent_ms").alias("sent_ms"),
        F.count(F.lit(1)).alias("missing_count"),
        F.slice(F.sort_array(F.collect_list("node_id")), 1, NODES_PER_MESSAGE)
        .alias("missing_at"),
        F.count("noticed_ms").alias("noticed_by"),
        F.count("lost_ms").alias("declared_lost_by"),
        F.min(F.coalesce("noticed_ms", "sent_ms")).alias("since"),
    ).join(per_msg_cause, [*_KEYS, "message_id"])
    w = Window.partitionBy(*_KEYS).orderBy("sent_ms", "message_id")
    ranked = per_msg.withColumn("i", F.row_number().over(w))
    per_channel = ranked.groupBy(*_KEYS).agg(
        F.count(F.lit(1)).alias("messages"), F.sum("missing_count").alias("pairs"),
        F.sort_array(F.collect_list(F.when(F.col("i") <= LIST_LIMIT, F.struct(
            "i", "message_id", "sender", "sent_ms", "missing_count", "missing_at",
            "noticed_by", "declared_lost_by", "since", "causes")))).alias("top"),
    )
    # per participant: how many it lacks per cause (and per offline period /
    # partition side: the story of each participant names them)
    per_node = missing.withColumn(
        "left_sender", F.when(F.col("cause") == "sender_left", F.col("sender"))).groupBy(
        *_KEYS, "node_id", "cause", "offline_from_ms", "offline_to_ms", "partition",
        "partition_side", "sender_left_ms", "left_sender",
    ).agg(F.count(F.lit(1)).alias("n"), F.sum("dropped").alias("dropped"),
          F.count(F.when(F.col("noticed_ms").isNull(), 1)).alias("never_noticed"),
          F.count("lost_ms").alias("declared_lost"),
          F.count(F.when(F.col("requests") > 0, 1)).alias("requested"),
          F.count(F.when(F.col("cause") == "waiting", 1)).alias("waiting"))
    out_ch: dict[tuple[str, str], dict[str, Any]] = {}
    for r in per_channel.collect():
        out_ch[(r["run"], r["channel"])] = {
            "messages": int(r["messages"]), "pairs": int(r["pairs"]), "participants": 0,
            "top": [{**t.asDict(), "causes": {x["cause"]: int(x["n"]) for x in t["causes"]}}
                    for t in r["top"]], "causes": {}, "per_node": {}}
    for r in per_node.collect():
        ch = out_ch[(r["run"], r["channel"])]
        d = r.asDict()
        node = d.pop("node_id")
        for k in ("run", "channel"):
            d.pop(k)
        ch["per_node"].setdefault(node, []).append(d)
        ch["causes"][d["cause"]] = ch["causes"].get(d["cause"], 0) + int(d["n"])
    for ch in out_ch.values():
        ch["participants"] = len(ch["per_node"])
    return rows, out_ch


def _starts(spark: Any, starts: dict[str, int]) -> Any:
    """(run, run_start): each run's first event, as a small table of literals."""
    from pyspark.sql import functions as F

    return spark.range(1).select(F.explode(F.array(*[
        F.struct(F.lit(run).alias("run"), F.lit(int(t)).cast("long").alias("run_start"))
        for run, t in starts.items()])).alias("x")).select("x.*")


def lost_messages(spark: Any, pairs: Any, msgs: Any, missing_dir: str | None) -> dict[
        tuple[str, str], list[dict[str, Any]]]:
    """Per channel the messages somebody declared lost (the first :data:`LIST_LIMIT`
    by send time): by how many, first when, how many received it later, how many
    never did, and the causes of those that never did (from the missing pairs)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    lost = pairs.filter(F.col("lost_ms").isNotNull()).groupBy(*_KEYS, "message_id").agg(
        F.count(F.lit(1)).alias("declared_lost_by"), F.min("lost_ms").alias("first_lost_ms"),
        F.count(F.when(F.col("times") > 0, 1)).alias("received_later_by"),
        F.slice(F.sort_array(F.collect_list("node_id")), 1, NODES_PER_MESSAGE).alias("by"))
    lost = lost.join(msgs.select(*_KEYS, "message_id", "sender", "sent_ms"),
                     [*_KEYS, "message_id"], "left")
    if missing_dir is not None:
        gone = spark.read.parquet(missing_dir).filter(F.col("lost_ms").isNotNull()).groupBy(
            *_KEYS, "message_id", "cause").agg(F.count(F.lit(1)).alias("n")).groupBy(
            *_KEYS, "message_id").agg(
            F.collect_list(F.struct("cause", "n")).alias("causes"))
        lost = lost.join(gone, [*_KEYS, "message_id"], "left")
    else:
        lost = lost.withColumn("causes", F.lit(None).cast("array<struct<cause:string,n:bigint>>"))
    w = Window.partitionBy(*_KEYS).orderBy("sent_ms", "message_id")
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in lost.withColumn("i", F.row_number().over(w)).filter(
            F.col("i") <= LIST_LIMIT).orderBy(*_KEYS, "i").collect():
        d = r.asDict()
        d["causes"] = {x["cause"]: int(x["n"]) for x in d["causes"] or []}
        out.setdefault((d.pop("run"), d.pop("channel")), []).append(d)
    return out
