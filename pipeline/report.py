"""``sdschat report INPUT... --out DIR``: the reliability report, computed on Spark.

INPUT is event-log Parquet (:data:`pipeline.schema.EVENT_SCHEMA`): directories
written by ``sdschat sim`` or ``sdschat export``, or single files, as paths or
URIs Spark reads (``file://``, ``hdfs://``, ``s3a://``). Runs are told apart by
their run id (written by sim/export); a label shared by two runs is reported
as ``label#<id>`` for each. Per ``(run, channel)`` the job computes:

* **convergence** - every participant (anyone with a row in the channel) should
  hold every message anyone sent or delivered; which messages are missing
  where, since when (first noticed missing by that participant, or else sent),
  and whether they were declared lost; exactly-once delivery; identical logs in
  identical order, replayed from every participant's logged positions;
* **causal order** - at every participant every held message came after the
  causal history it named (:mod:`pipeline.compute`: one history per message,
  joined to each receiver's positions);
* **delivery latency** (send -> deliver, per receiver: percentiles overall and
  per receiver), **time to acknowledgement**, resends, repairs, store
  retrievals, lost messages, drops by reason;
* **protocol overhead**: metadata bytes (history, bloom filter, ids) against
  content bytes of content messages, plus the bytes of syncs, resends and
  repairs;
* **input checks**: malformed rows and duplicate events refused; gaps in a
  participant's ``seq``, rows disagreeing on a channel's source or a message's
  sender or history reported.

Writes ``DIR/summary.json``, ``DIR/report.html`` (inline SVG charts, no
network), ``DIR/runs.csv`` and ``DIR/runs.parquet`` (the runs compared, one row
each), ``DIR/missing.csv`` and ``DIR/causal_violations.csv`` (the first
:data:`CSV_LIMIT` rows; ``DIR/missing/`` and ``DIR/causal_violations/`` hold all
of them as Parquet), ``DIR/latency_by_receiver.csv``, and prints a short table.
Everything is computed before anything is moved into ``DIR``: a failed run
leaves no report behind.

DataFrame operations only (no Python on executors, no ``sparkContext``): the
same command runs on ``local[N]``, ``--master spark://HOST:7077`` (nothing to
ship), over Spark Connect (``--remote sc://HOST:PORT``) and under spark-submit::

    zip -qr pipeline.zip pipeline storage && .venv/bin/spark-submit \\
        --master spark://HOST:7077 --py-files pipeline.zip pipeline/report.py INPUT... --out DIR

Times from real nodes are their wall clocks: latencies across machines include
their clock offsets.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import pyarrow.parquet as pq

from pipeline.compute import compute_channels
from pipeline.errors import PipelineError
from pipeline.explain import participant_names, run_conditions
from pipeline.frames import (
    CSV_LIMIT,
    LIST_LIMIT,
    NODES_PER_MESSAGE,
    TIME_BUCKETS,
    InputError,
    spark_schema,
    sql_conf,
)
from pipeline.options import add_report_arguments
from pipeline.schema import (
    VERSION_KEY,
    SchemaMismatchError,
    check_schema,
    iter_parquet_files,
)
from pipeline.stories import csv_row, tell_stories

__all__ = ["ReportError", "add_report_arguments", "check_server_options", "compute_report",
           "main", "run_report", "run_report_server"]

__all__ += ["CSV_LIMIT", "LIST_LIMIT", "NODES_PER_MESSAGE", "TIME_BUCKETS", "spark_schema"]

#: ``--master`` values Spark accepts (a typo used to end in a Py4J traceback).
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[.+\]|yarn|(spark|k8s|mesos)://\S+"
)
#: ``--driver-memory``: a JVM size, e.g. 512m, 2g.
_MEMORY = re.compile(r"[1-9]\d*[kmgt]?b?", re.IGNORECASE)


#: ``--spark-timeout``'s default (:data:`pipeline.guard.DEFAULT_TIMEOUT`, kept here so
#: that this module imports without the guard's threads).
DEFAULT_SPARK_TIMEOUT = 60.0


class ReportError(PipelineError):
    """The input cannot be reported on (empty, not an event log, malformed rows)."""


#: A URI with a scheme (``hdfs://``, ``s3a://``, ``file://``...).
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def local_path(item: str | Path) -> Path | None:
    """The local path of ``item`` (a path or a ``file://`` URI); None for other URIs."""
    text = str(item)
    if text.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(text).path))
    if _URI.match(text):
        return None
    return Path(text)


def validate_inputs(inputs: Sequence[str | Path]) -> tuple[list[str], int | None]:
    """Every Parquet file of ``inputs``, checked; returns (files, total rows).

    Local paths and ``file://`` URIs are checked here, file by file (footer,
    columns, schema version); other URIs (``hdfs://``, ``s3a://``...) are passed
    to Spark as they are and their rows counted by Spark (total ``None``).
    """
    if not inputs:
        raise ReportError("no input given")
    local: list[Path] = []
    remote: list[str] = []
    for item in inputs:
        path = local_path(item)
        if path is None:
            remote.append(str(item))
        else:
            local.append(path)
    try:
        files = iter_parquet_files(local)
    except FileNotFoundError as exc:
        raise ReportError(str(exc)) from None
    if not files and not remote:
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
        raw = (schema.metadata or {}).get(VERSION_KEY)
        if raw is not None and not raw.strip().isdigit():
            raise ReportError(
                f"{f}: event schema version {raw.decode(errors='replace')[:40]!r} "
                f"(Parquet metadata {VERSION_KEY.decode()!r}) is not a version number: the file "
                "was not written by sdschat, or was damaged")
        try:
            check_schema(schema, str(f))
        except SchemaMismatchError as exc:
            raise ReportError(str(exc)) from None
        total += meta.num_rows
    if total == 0 and not remote:
        raise ReportError("the input holds no events (0 rows in " + f"{len(files)} file(s))")
    return [str(f) for f in files] + remote, (None if remote else total)


#: Scan splits for a small local input: at most this many bytes, at least this few.
SCAN_SPLIT_MAX = 128 << 20
SCAN_SPLIT_MIN = 1 << 20
#: Splits wanted per scan (the cores of a small machine, twice).
SCAN_SPLITS = 8


def scan_settings(files: Sequence[str]) -> dict[str, str]:
    """Split sizes for the input's scans: Spark's 128 MB makes one task of a file of
    up to 128 MB, so a 1M-event input (a few MB) was read by one core in every pass;
    splits of a eighth of the input (at least 1 MB, whole row groups) let every core
    read. {} when the input's size is not known here (not local)."""
    import os

    total = 0
    for f in files:
        path = local_path(f)
        if path is None:
            return {}
        try:
            total += os.path.getsize(path)
        except OSError:
            return {}
    split = min(SCAN_SPLIT_MAX, max(SCAN_SPLIT_MIN, total // SCAN_SPLITS))
    return {"spark.sql.files.maxPartitionBytes": str(split)}


def compute_report(spark: Any, inputs: Sequence[str | Path],
                   detail_dir: str | Path | None = None,
                   explain: bool = True) -> dict[str, Any]:
    """Run the Spark job; returns the summary (JSON-able) with row lists for the CSVs
    and the directory holding the Parquet detail (``_detail_dir``).

    Raises :class:`ReportError` for empty or malformed input.
    """
    files, total_rows = validate_inputs(inputs)
    conditions = run_conditions(inputs)
    try:
        with sql_conf(spark, scan_settings(files)):
            result = compute_channels(
                spark, files, total_rows, detail_dir, explain=explain,
                partitions={run: c["partitions"] for run, c in conditions.items()})
    except InputError as exc:
        raise ReportError(str(exc)) from None
    if result["rows"] == 0:
        raise ReportError("the input holds no events")
    if not result["channels"]:
        raise ReportError("no event in the input belongs to a channel")
    names = participant_names(inputs)
    for c in result["channels"]:
        label = str(c["run"]).split("#", 1)[0]
        if label in conditions:
            c.setdefault("explain", {})["conditions"] = conditions[label]
        for p in c.get("explain", {}).get("participants", {}).values():
            p["name"] = names.get(p["node_id"])
        tell_stories(c, conditions.get(label))
    by_key = {(c["run"], c["channel"]): c for c in result["channels"]}
    result["_missing_rows"] = [
        csv_row(r, by_key[(r["run"], r["channel"])],
                conditions.get(str(r["run"]).split("#", 1)[0]))
        for r in result["_missing_rows"]]
    notes = result.pop("label_notes")
    summary = {
        "complete": True,
        "generated_at_ms": int(time.time() * 1000),
        "inputs": [str(i) for i in inputs],
        "files": len(files),
        **result,
    }
    summary["caveats"] = notes + _run_caveats(summary["runs"]) + _caveats(summary["channels"])
    summary["comparison"] = compare_runs(summary)
    return summary


#: Columns of the comparison across runs (runs.csv, runs.parquet, the HTML table).
COMPARISON_COLUMNS = (
    "run", "run_id", "channels", "participants", "messages", "converged", "missing_pairs",
    "lost_messages", "duplicate_deliveries", "causal_violations", "latency_p50_ms",
    "latency_p99_ms", "ack_p50_ms", "ack_p99_ms", "resends", "repairs_sent",
    "bytes_sent", "deliveries", "bytes_per_delivered_message",
)


def compare_runs(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run, for a study of several runs reported together: convergence,
    loss, duplicates, latency and acknowledgement percentiles, bytes per delivered
    message. A run with several channels sums its counts and gives the worst
    channel's percentiles (percentiles of different channels do not add up)."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for c in summary["channels"]:
        by_run.setdefault(c["run"], []).append(c)
    ids = {r["run"]: r.get("run_id") for r in summary.get("runs", [])}
    out = []
    for run, chans in sorted(by_run.items()):
        def worst(section: str, key: str, chans: list[dict[str, Any]] = chans) -> Any:
            values = [c[section].get(key) for c in chans if c[section].get(key) is not None]
            return max(values) if values else None

        conv = [c["convergence"]["converged"] for c in chans]
        bytes_sent = sum(c["overhead"].get("total_sent_bytes", 0) for c in chans)
        deliveries = sum(c["counts"]["deliveries"] for c in chans)
        out.append({
            "run": run, "run_id": ids.get(run), "channels": len(chans),
            "participants": max(c["participants"] for c in chans),
            "messages": sum(c["messages"] for c in chans),
            "converged": None if all(v is None for v in conv) else all(v is not False
                                                                       for v in conv),
            "missing_pairs": sum(c["convergence"]["missing_pairs"] for c in chans),
            "lost_messages": sum(c["counts"]["lost"]["messages"] for c in chans),
            "duplicate_deliveries": sum(c["convergence"]["duplicate_deliveries"] for c in chans),
            "causal_violations": sum(c["causal_order"]["violations"] for c in chans),
            "latency_p50_ms": worst("latency_ms", "p50"),
            "latency_p99_ms": worst("latency_ms", "p99"),
            "ack_p50_ms": worst("acknowledgement", "p50"),
            "ack_p99_ms": worst("acknowledgement", "p99"),
            "resends": sum(c["counts"]["resends"] for c in chans),
            "repairs_sent": sum(c["counts"]["repairs_sent"] for c in chans),
            "bytes_sent": bytes_sent, "deliveries": deliveries,
            "bytes_per_delivered_message": round(bytes_sent / deliveries, 1) if deliveries
            else None,
        })
    return out


def _run_caveats(runs: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in runs:
        if r["seq_missing"]:
            worst = ", ".join(f"{g['node_id']} ({g['missing_events']})" for g in r["gaps"][:5])
            out.append(
                f"{r['run']}: {r['seq_missing']} event(s) missing from the logs of "
                f"{r['participants_with_gaps']} participant(s) (gaps in seq: a partial "
                f"export?): {worst}"
            )
        if r["run_id"] is None:
            out.append(
                f"{r['run']}: written without a run id (event schema 1): runs sharing this "
                "label cannot be told apart"
            )
    return out


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
        if c["source"] == "mixed":
            out.append(f"{name}: rows come from different sources ({', '.join(c['sources'])})")
        if c["convergence"]["sender_disagreements"]:
            out.append(
                f"{name}: {c['convergence']['sender_disagreements']} message(s) whose rows "
                "disagree on the sender"
            )
        if c["causal_order"].get("history_disagreements"):
            out.append(
                f"{name}: {c['causal_order']['history_disagreements']} message(s) whose rows "
                "carry different causal histories (the sender's was checked)"
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


#: Columns of missing.csv: times in seconds since the run's start (the send time also
#: absolute, UTC), names beside ids, the cause (pipeline.causes) and why in words.
MISSING_COLUMNS = ("run", "channel", "message_id", "sender", "sender_name", "lamport",
                   "sent_s", "sent_at_utc", "node_id", "node_name", "noticed_s",
                   "declared_lost_s", "cause", "why")

#: Parquet detail directories written next to summary.json.
DETAIL_DIRS = ("missing", "causal_violations")


class InterruptedAfterWriting(KeyboardInterrupt):
    """Ctrl+C came while the finished report was being moved into place: the move
    was completed first (a report directory is never left half-replaced)."""


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[list[int]]:
    """SIGINT held for the block (main thread only); the list says whether one came."""
    import signal
    import threading

    pending: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield pending
    finally:
        signal.signal(signal.SIGINT, previous)


def write_report(summary: dict[str, Any], out: str | Path) -> Path:
    """Write summary.json, report.html, the CSVs (top rows) and move the Parquet
    detail into ``out`` (all or nothing)."""
    from pipeline.html_report import render_html

    out = Path(out)
    staging = out.parent / f".{out.name}.report-partial-{time.time_ns()}"
    staging.mkdir(parents=True)
    detail = summary.pop("_detail_dir", None)
    try:
        missing_rows = summary.pop("_missing_rows")
        violation_rows = summary.pop("_violation_rows")
        receiver_rows = summary.pop("_receiver_rows")
        _write_csv(staging / "missing.csv", missing_rows, MISSING_COLUMNS)
        _write_csv(staging / "causal_violations.csv", violation_rows,
                   ("run", "channel", "node_id", "message_id", "dependency", "violation", "seq",
                    "dependency_seq"))
        _write_csv(staging / "latency_by_receiver.csv", receiver_rows,
                   ("run", "channel", "node_id", "deliveries", "p50", "p90", "p99", "max"))
        comparison = summary.get("comparison") or compare_runs(summary)
        _write_csv(staging / "runs.csv", comparison, COMPARISON_COLUMNS)
        _write_comparison_parquet(staging / "runs.parquet", comparison)
        summary["detail"] = {
            "missing.csv": {"rows": len(missing_rows),
                            "of": sum(c["convergence"]["missing_pairs"]
                                      for c in summary["channels"])},
            "causal_violations.csv": {"rows": len(violation_rows),
                                      "of": sum(c["causal_order"]["violations"]
                                                for c in summary["channels"])},
            # written only when something is missing / violated
            "parquet": [f"{name}/" for name in DETAIL_DIRS if detail is not None and (
                (src := local_path(f"{str(detail).rstrip('/')}/{name}")) is not None
                and src.is_dir())],
        }
        (staging / "report.html").write_text(render_html(summary))
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        # the move into place is not interrupted half-way: a Ctrl+C waits for its end
        with _sigint_deferred() as pending:
            out.mkdir(parents=True, exist_ok=True)
            # summary.json last: its presence marks a complete report.
            (out / "summary.json").unlink(missing_ok=True)
            for name in DETAIL_DIRS:
                shutil.rmtree(out / name, ignore_errors=True)
                src = None if detail is None else local_path(
                    f"{str(detail).rstrip('/')}/{name}")
                if src is not None and src.is_dir():
                    shutil.move(str(src), str(out / name))
            for name in ("missing.csv", "causal_violations.csv", "latency_by_receiver.csv",
                         "runs.csv", "runs.parquet", "report.html", "summary.json"):
                (staging / name).replace(out / name)
        if pending:
            raise InterruptedAfterWriting
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if detail is not None:
            path = local_path(detail)
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
    return out


def _write_comparison_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    types = {"run": pa.string(), "run_id": pa.string(), "converged": pa.bool_(),
             "bytes_per_delivered_message": pa.float64()}
    schema = pa.schema([(c, types.get(c, pa.int64() if not c.endswith("_ms")
                                      else pa.float64())) for c in COMPARISON_COLUMNS])
    pq.write_table(pa.Table.from_pylist(
        [{c: r.get(c) for c in COMPARISON_COLUMNS} for r in rows], schema=schema), path)


def _yes_no(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else "NO"


def _fmt_ms(v: Any) -> str:
    if v is None:
        return "-"
    v = float(v)
    return f"{v / 1000:.1f}s" if abs(v) >= 10_000 else f"{v:.0f}ms"


def print_table(summary: dict[str, Any], out: TextIO) -> None:
    """The short terminal table: one line per channel (names in full)."""
    names = [f"{c['run']}/{c['channel']}" for c in summary["channels"]]
    w = max([24, *map(len, names)])
    head = (f"{'run/channel':<{w}} {'parts':>6} {'msgs':>6} {'conv':>4} {'not recv':>8} "
            f"{'causal':>6} {'lat p50':>8} {'lat p99':>8} {'ack p50':>8} {'resend':>7} "
            f"{'repair':>7} {'lost':>5} {'ovh':>6}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, c in zip(names, summary["channels"], strict=True):
        conv = c["convergence"]
        ov = c["overhead"].get("overhead_ratio")
        print(
            f"{name:<{w}} {c['participants']:>6} {c['messages']:>6} "
            f"{_yes_no(conv['converged']):>4} {conv['missing_pairs']:>8} "
            f"{c['causal_order']['violations']:>6} {_fmt_ms(c['latency_ms'].get('p50')):>8} "
            f"{_fmt_ms(c['latency_ms'].get('p99')):>8} "
            f"{_fmt_ms(c['acknowledgement'].get('p50')):>8} {c['counts']['resends']:>7} "
            f"{c['counts']['repairs_sent']:>7} {c['counts']['lost']['messages']:>5} "
            f"{'-' if ov is None else f'{ov:.1%}':>6}",
            file=out,
        )
    for note in summary.get("caveats", []):
        print(f"note: {note}", file=out)


# ---------------------------------------------------------------- command line


_REMOTE = re.compile(r"sc://[^/\s:]+(:\d+)?(/.*)?")


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` items as a dict (ReportError for a malformed one)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not key.startswith("spark."):
            raise ReportError(f"--conf {item!r} is not KEY=VALUE with a spark.* key")
        out[key.strip()] = value
    return out


def resolve_target(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(master, remote) after ``--master``/``--remote``/``$SPARK_REMOTE``; ReportError
    for a bad or contradictory value."""
    import os

    master = getattr(args, "master", None)
    remote = getattr(args, "remote", None)
    if master and master.startswith("sc://"):
        if remote and remote != master:
            raise ReportError("--master sc://... and --remote disagree: give one")
        master, remote = None, master
    if remote is None and master is None:
        remote = os.environ.get("SPARK_REMOTE") or None
    if remote is not None and master not in (None, "submit"):
        raise ReportError(f"--master {master} and Spark Connect ({remote}) exclude each other")
    if remote is not None:
        if not _REMOTE.fullmatch(remote):
            raise ReportError(f"--remote {remote!r} is not a Spark Connect URL sc://HOST:PORT")
        return None, remote
    if master is None:
        master = "local[*]"
    return master, None


def _check_master(master: str, also: str = "") -> None:
    """ReportError unless ``master`` is a Spark master; ``also`` lists more accepted forms."""
    if not _MASTER.fullmatch(master):
        raise ReportError(f"--master {master!r} is not a Spark master (local, local[N], "
                          f"local[*], spark://HOST:PORT, yarn, k8s://...{also})")


def _check_memory(flag: str, memory: str | None) -> None:
    """ReportError unless ``memory`` (the value of ``--FLAG``, if given) is a JVM size."""
    if memory is not None and not _MEMORY.fullmatch(memory):
        raise ReportError(f"--{flag.replace('_', '-')} {memory!r} is not a size like 512m or 2g")


def check_options(args: argparse.Namespace) -> None:
    """Refuse bad ``--out``/``--master``/``--remote``/``--driver-memory``/``--conf``/
    ``--shuffle-partitions`` before any work (Spark would fail later with a Java
    traceback, ``--out`` only after the whole job)."""
    out_path = local_path(args.out)
    if out_path is None:
        raise ReportError(
            f"--out {args.out}: the report is written by this program: give a local "
            "directory or a file:// URI (inputs may be hdfs://, s3a://...)"
        )
    if out_path.exists() and not out_path.is_dir():
        raise ReportError(f"--out {out_path} is a file, not a directory")
    master, remote = resolve_target(args)
    if master not in (None, "", "submit"):
        _check_master(master, ", sc://HOST:PORT")
    for flag in ("driver_memory", "executor_memory"):
        _check_memory(flag, getattr(args, flag, None))
    if remote is not None and getattr(args, "driver_memory", None):
        raise ReportError("--driver-memory does not apply over Spark Connect (the server's "
                          "driver is already running)")
    if getattr(args, "executor_memory", None) and master and master.startswith("local"):
        raise ReportError("--executor-memory does not apply to a local master (its executor "
                          "is the driver): use --driver-memory")
    partitions = getattr(args, "shuffle_partitions", None)
    if partitions is not None and partitions < 1:
        raise ReportError("--shuffle-partitions must be >= 1")
    limit = getattr(args, "spark_timeout", None)
    if limit is not None and not 1 <= limit <= 86_400:
        raise ReportError(f"--spark-timeout {limit:g} is not between 1 and 86400 seconds")
    parse_conf(getattr(args, "conf", None) or [])


def check_reachable(master: str | None, remote: str | None, timeout: float = 5.0) -> None:
    """A one-line ReportError if a spark:// master or sc:// server does not answer (Spark
    itself would retry for a minute and end in a traceback)."""
    import socket
    from urllib.parse import urlparse

    target = remote or master
    if not target or not target.startswith(("spark://", "sc://")):
        return
    for hostport in target.split("://", 1)[1].split("/")[0].split(","):
        parsed = urlparse(f"x://{hostport}")
        host = parsed.hostname or "localhost"
        port = parsed.port or (15002 if target.startswith("sc://") else 7077)
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as exc:
            last = f"{host}:{port}: {exc.strerror or exc}"
    kind = "Spark Connect server" if remote else "Spark master"
    raise ReportError(f"cannot reach the {kind} {target} ({last})")


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


def _spark_failure(exc: BaseException) -> str:
    """One line for a failure inside Spark (:func:`pipeline.guard.spark_failure`)."""
    from pipeline.guard import spark_failure

    return spark_failure(exc)


def absolute_inputs(inputs: Sequence[str | Path]) -> list[str]:
    """Each input as an absolute path (URIs as they are): a Spark Connect server
    resolves a relative path against its own working directory."""
    return [str(x) if _URI.match(str(x)) else str(Path(x).absolute()) for x in inputs]


def _compute(spark: Any, inputs: Sequence[str], detail: Path,
             explain: bool = True) -> dict[str, Any]:
    """compute_report with Spark's failures as one-line ReportErrors (the detail
    directory removed)."""
    try:
        return compute_report(spark, inputs, detail_dir=detail.resolve().as_uri(),
                              explain=explain)
    except ReportError:
        shutil.rmtree(detail, ignore_errors=True)
        raise
    except Exception as exc:
        shutil.rmtree(detail, ignore_errors=True)
        unreadable = _unreadable_input(exc)
        if unreadable is None:
            raise ReportError(f"Spark failed: {_spark_failure(exc)}") from None
        raise unreadable from None


def run_report(args: argparse.Namespace, out: TextIO | None = None,
               spark: Any = None) -> int:
    """``sdschat report``: returns 0; 2 for bad input or a Spark failure (one line on
    stderr, nothing written); 130 when interrupted. With a session of its own, Spark
    runs under :class:`pipeline.guard.SparkRun`'s bounds (``--spark-timeout``)."""
    import logging

    out = out or sys.stdout
    own = spark is None
    summary: dict[str, Any] = {}
    root_level = logging.getLogger().level
    run: Any = None
    detail: Path | None = None
    try:
        try:
            check_options(args)
            master, remote = resolve_target(args)
            if master in ("", "submit"):
                master = None
            conf = parse_conf(getattr(args, "conf", None) or [])
            inputs = absolute_inputs(args.inputs)
            _, rows = validate_inputs(inputs)  # fail fast, before starting Spark
            timeout = float(getattr(args, "spark_timeout", None) or DEFAULT_SPARK_TIMEOUT)
            explain = not getattr(args, "no_explain", False)
            check_reachable(master, remote)
            out_path = local_path(args.out) or Path(args.out)
            detail = out_path.parent / f".{out_path.name}.detail-{time.time_ns()}"
            started = time.monotonic()
            if own:
                from pipeline.guard import (
                    SparkRun,
                    SparkStopped,
                    check_endpoint,
                    java_problem,
                    memory_problem,
                )
                from pipeline.spark import make_session, report_shuffle_partitions

                wrong = check_endpoint(master, remote)
                if wrong is None and remote is None:
                    # the driver JVM starts here: java must be there, its heap must fit
                    wrong = java_problem()
                    if wrong is None:
                        wrong = memory_problem(
                            "--driver-memory", getattr(args, "driver_memory", None)
                        ) or memory_problem("spark.driver.memory",
                                            conf.get("spark.driver.memory"))
                    if wrong is not None and not wrong.startswith(("--driver", "spark.")):
                        wrong = f"the Spark driver JVM cannot start: {wrong}"
                if wrong is not None:
                    raise ReportError(wrong)
                shuffle = args.shuffle_partitions
                if shuffle is None and remote is None:
                    shuffle = report_shuffle_partitions(master, rows)
                # a failed task is reported once, below, not also as pages of stack traces
                # (Py4J logs through the root logger)
                logging.getLogger().setLevel(logging.CRITICAL)

                def start() -> Any:
                    return make_session(
                        master, remote=remote, shuffle_partitions=shuffle,
                        driver_memory=getattr(args, "driver_memory", None),
                        executor_memory=getattr(args, "executor_memory", None),
                        extra=conf, quiet=True, rows=rows)

                def work(session: Any, detail: Path = detail) -> dict[str, Any]:
                    return _compute(session, inputs, detail, explain)

                run = SparkRun(start, work,
                               what=remote or master or "spark-submit's master",
                               remote=remote, timeout=timeout)
                try:
                    summary = run.run()
                except SparkStopped as exc:
                    raise ReportError(str(exc)) from None
                spark = run.session
            else:
                summary = _compute(spark, inputs, detail, explain)
            summary["spark_seconds"] = round(time.monotonic() - started, 2)
            summary["master"] = remote or _master_of(spark) or master or "?"
            write_report(summary, out_path)
        except ReportError as exc:
            print(f"sdschat report: {exc}", file=sys.stderr, flush=True)
            if run is not None:
                if detail is not None:
                    shutil.rmtree(detail, ignore_errors=True)
                run.exit_if_stuck(2)
            return 2
        finally:
            if detail is not None and not summary.get("master"):
                shutil.rmtree(detail, ignore_errors=True)  # what an aborted run left
            if run is not None and run.session is not None:
                run.stop()
    except InterruptedAfterWriting:
        print(f"sdschat report: interrupted as the report was written; it is complete: "
              f"{Path(args.out) / 'summary.json'}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        if detail is not None:
            shutil.rmtree(detail, ignore_errors=True)
        print("sdschat report: interrupted, nothing written", file=sys.stderr, flush=True)
        if run is not None:
            run.exit_if_stuck(130)
        return 130
    finally:
        logging.getLogger().setLevel(root_level)
    print_table(summary, out)
    print(f"report: {Path(args.out) / 'report.html'}  summary: "
          f"{Path(args.out) / 'summary.json'}", file=out)
    return 0


def check_server_options(args: argparse.Namespace) -> dict[str, str]:
    """``sdschat report-server``'s flags checked (ReportError); returns its ``--conf``."""
    _check_master(args.master)
    _check_memory("driver_memory", args.driver_memory)
    if not 1 <= args.port <= 65535:
        raise ReportError(f"--port {args.port} is not a port (1-65535)")
    return parse_conf(args.conf)


def run_report_server(args: argparse.Namespace) -> int:
    """``sdschat report-server``: checks the options (2 and one line if bad), then
    becomes a Spark Connect server in the foreground (this process is replaced by
    the server's JVM: Ctrl+C or SIGTERM to its PID stops it)."""
    import os
    import socket

    from pipeline.guard import java_problem, memory_problem
    from pipeline.spark import connect_server_command

    try:
        conf = check_server_options(args)
        master = args.master
        problem = java_problem() or memory_problem("--driver-memory", args.driver_memory)
        if problem is not None:
            raise ReportError(problem)
        try:
            family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((args.host, args.port))
        except OSError as exc:
            raise ReportError(
                f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None
    except ReportError as exc:
        print(f"sdschat report-server: {exc}", file=sys.stderr)
        return 2
    argv, env = connect_server_command(master, host=args.host, port=args.port,
                                       driver_memory=args.driver_memory, conf=conf)
    where = f"[{args.host}]" if ":" in args.host else args.host
    print(f"sdschat report-server: Spark Connect on sc://{where}:{args.port} ({master}, "
          f"driver {args.driver_memory}); report with: sdschat report INPUT --out DIR "
          f"--remote sc://{where}:{args.port}; Ctrl+C stops it", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execve(argv[0], argv, env)
    return 0  # not reached: execve replaces this process


def _master_of(spark: Any) -> str | None:
    try:
        return str(spark.conf.get("spark.master"))
    except Exception:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit pipeline/report.py`` (master from spark-submit)."""
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n")[0])
    add_report_arguments(parser)
    parser.set_defaults(master="submit")
    args = parser.parse_args(argv)
    return run_report(args)


if __name__ == "__main__":
    sys.exit(main())
