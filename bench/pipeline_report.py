"""Pipeline benchmark: ``sdschat report`` on synthetic event logs, DuckDB beside it.

The generator writes event-log Parquet (:data:`pipeline.schema.EVENT_SCHEMA`)
directly with vectorised Arrow (no simulation: a simulation of 10M events
takes minutes itself). Shape, like ``sdschat sim``: P participants, M
messages round-robin over senders; every message is one ``MessageSent`` row
at its sender and one ``MessageDelivered`` row at each other participant
(latency 20-120 ms), with a causal history of the sender's last H message
ids; plus one ``SyncReceived`` row per delivery (as syncs roughly match
content under ``--sync-interval auto``). Every participant delivers in send
order, so the report must find full convergence and no causal violation
(checked).

In the same run, when ``duckdb`` is importable, the core computations (per
channel counts, held pairs, missing pairs, latency percentiles, the causal check
on one history per message) are run in DuckDB SQL on the same Parquet with 2
threads, as the one-machine reference; its counts must equal the report's
(DuckDB's memory is capped at ``$BENCH_DUCKDB_MEMORY``, default 6GB, beside the
Spark driver that is still up).

Spark's event log is on: per report, the jobs, stages and the slowest stages
(from ``SparkListenerStageCompleted``) are printed.

    .venv/bin/python bench/pipeline_report.py --rows 100000 1000000 --history 50

A/B against another version of the code in one run: ``--code DIR`` imports
``pipeline`` from DIR (e.g. ``git archive <commit> | tar -x -C DIR``); alternate
the two in a loop over the same ``--keep`` directory (the data is generated once
and reused). ``--peak-memory`` prints the driver JVM's peak RSS. ``--profile``
prints, per report, each action of the computation (a ``collect``, a kept table,
a Parquet write) by the line of ``pipeline/`` that ran it: its wall time, Spark
jobs and stages (``statusTracker``, a job group per action), the time spent
outside actions (plans built on the driver) and the plans compiled
(``CodegenMetrics``).

Figures: docs/report.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if "--code" in sys.argv:  # before anything imports pipeline
    ROOT = Path(sys.argv[sys.argv.index("--code") + 1]).resolve()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline.schema import EVENT_SCHEMA  # noqa: E402


def generate(out: Path, rows: int, participants: int, history: int, seed: int = 1) -> int:
    """Write about ``rows`` rows; returns the exact number written."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per_message = 1 + 2 * (participants - 1)  # sent + (delivered + sync received) per receiver
    messages = max(1, rows // per_message)
    ids = [hashlib.sha256(f"m{i}".encode()).hexdigest() for i in range(messages)]
    nodes = [f"p{i:05d}" for i in range(participants)]
    out.mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(out / "part-00000.parquet", EVENT_SCHEMA, compression="zstd")
    start = 1_700_000_000_000
    written = 0
    chunk = max(1, 400_000 // per_message)
    for c0 in range(0, messages, chunk):
        ms = np.arange(c0, min(messages, c0 + chunk))
        n = len(ms)
        sender = ms % participants
        sent_t = start + ms * 500
        # Receivers: every participant except the sender, as a (n, P-1) grid.
        recv = (sender[:, None] + 1 + np.arange(participants - 1)[None, :]) % participants
        lat = rng.integers(20, 121, size=(n, participants - 1))
        node_col = np.concatenate([sender, recv.ravel(), recv.ravel()])
        kind_idx = np.concatenate([np.zeros(n, int), np.ones(recv.size, int),
                                   np.full(recv.size, 2)])
        msg_col = np.concatenate([ms, np.repeat(ms, participants - 1),
                                  np.repeat(ms, participants - 1)])
        t_col = np.concatenate([sent_t, (sent_t[:, None] + lat).ravel(),
                                (sent_t[:, None] + lat + 5).ravel()])
        # seq: per node 1, 2, 3... in time order, no gaps (messages are 500 ms apart,
        # latencies at most 125 ms). Before message m a node has logged 2 rows per
        # earlier message (delivered, sync received) but 1 for each it sent itself:
        # 2m - (its sends before m); then MessageSent or MessageDelivered is +1 and
        # SyncReceived +2.
        sends_before = np.maximum(0, (msg_col - node_col + participants - 1) // participants)
        seq_col = 2 * msg_col - sends_before + np.where(kind_idx == 2, 2, 1)
        total = len(node_col)
        kinds = pa.DictionaryArray.from_arrays(
            pa.array(kind_idx, pa.int32()),
            pa.array(["MessageSent", "MessageDelivered", "SyncReceived"]),
        ).cast(pa.string())
        mid = pa.array(ids).take(pa.array(msg_col))
        hist_lists = [ids[max(0, m - history):m] for m in range(c0, c0 + n)]
        hist_unique = pa.array(hist_lists, pa.list_(pa.string()))
        hist_idx = pa.array(np.where(kind_idx == 2, -1, msg_col - c0))
        hist_idx = pa.compute.if_else(pa.compute.equal(hist_idx, -1),
                                      pa.scalar(None, pa.int64()), hist_idx)
        is_sync = kind_idx == 2
        size = np.where(is_sync, 0, 3500)
        table = pa.table(
            {
                "run": pa.array(["bench"] * total),
                "run_id": pa.array(["b" * 32] * total),
                "source": pa.array(["sim"] * total),
                "node_id": pa.array(nodes).take(pa.array(node_col)),
                "seq": pa.array(seq_col, pa.int64()),
                "time_ms": pa.array(t_col, pa.int64()),
                "channel": pa.array(["sim"] * total),
                "kind": kinds,
                "message_id": pa.compute.if_else(pa.array(is_sync), pa.scalar(None, pa.string()),
                                                 mid),
                "sender_id": pa.array(nodes).take(pa.array(np.concatenate(
                    [sender, np.repeat(sender, participants - 1),
                     np.repeat(sender, participants - 1)]))),
                "lamport": pa.array(start + msg_col * 500, pa.int64()),
                "size_bytes": pa.array(size, pa.int64(), mask=is_sync),
                "content_bytes": pa.array(np.full(total, 64), pa.int64(), mask=is_sync),
                "metadata_bytes": pa.array(np.full(total, 3436), pa.int64(), mask=is_sync),
                "causal_history": hist_unique.take(hist_idx),
                "position": pa.array(msg_col, pa.int64(), mask=is_sync),
                "missing_before": pa.array(
                    np.zeros(total, np.int64), pa.int64(), mask=kind_idx != 1
                ),
                "reason": pa.nulls(total, pa.string()),
                "detail": pa.array(["{}"] * total),
            },
            schema=EVENT_SCHEMA,
        )
        writer.write_table(table)
        written += total
    writer.close()
    return written


DUCKDB_SQL = """
CREATE OR REPLACE TEMP VIEW ev AS SELECT * FROM read_parquet('{glob}');
CREATE OR REPLACE TEMP TABLE held AS
  SELECT run, channel, node_id, message_id, min(seq) AS seq, min(time_ms) AS t,
         count(*) AS times
  FROM ev WHERE kind IN ('MessageSent', 'MessageDelivered') GROUP BY ALL;
CREATE OR REPLACE TEMP TABLE chan AS
  SELECT run, channel, count(DISTINCT node_id) AS participants FROM ev
  WHERE channel IS NOT NULL GROUP BY ALL;
CREATE OR REPLACE TEMP TABLE msgs AS
  SELECT run, channel, message_id, count(DISTINCT lamport) AS lamports FROM ev
  WHERE kind IN ('MessageSent', 'MessageDelivered') GROUP BY ALL;
CREATE OR REPLACE TEMP TABLE edges AS
  SELECT run, channel, message_id AS m, unnest(causal_history) AS dep FROM ev
  WHERE kind = 'MessageSent';
"""

DUCKDB_QUERIES = {
    "messages": "SELECT count(*) FROM msgs",
    "held_pairs": "SELECT count(*) FROM held",
    "missing_pairs": "SELECT sum(c.participants * n) - (SELECT count(*) FROM held) FROM chan c "
                     "JOIN (SELECT run, channel, count(*) AS n FROM msgs GROUP BY ALL) USING "
                     "(run, channel)",
    "latency": "SELECT quantile_cont(d.time_ms - s.time_ms, [0.5, 0.9, 0.99]) FROM ev d "
               "JOIN ev s ON s.run = d.run AND s.channel = d.channel "
               "AND s.message_id = d.message_id AND s.kind = 'MessageSent' "
               "WHERE d.kind = 'MessageDelivered'",
    "causal": "SELECT count(*), count(*) FILTER (WHERE d.seq IS NULL OR d.seq > h.seq) "
              "FROM held h JOIN edges e ON e.run = h.run AND e.channel = h.channel "
              "AND e.m = h.message_id "
              "LEFT JOIN held d ON d.run = h.run AND d.channel = h.channel "
              "AND d.node_id = h.node_id AND d.message_id = e.dep WHERE e.dep <> e.m",
}


def duckdb_reference(data: Path) -> dict[str, Any] | None:
    """The core computations in DuckDB (2 threads); None when duckdb is not installed,
    ``{"error": reason}`` when it fails (out of memory or spill space)."""
    try:
        import duckdb  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    t = time.monotonic()
    con = duckdb.connect()
    spill = tempfile.mkdtemp(prefix="bench-duckdb-spill-")
    try:
        con.execute("SET threads = 2")
        # the Spark driver JVM is still up beside it: spill rather than take the
        # machine, into a directory removed afterwards (not the working directory)
        con.execute(f"SET memory_limit = '{os.environ.get('BENCH_DUCKDB_MEMORY', '6GB')}'")
        con.execute(f"SET temp_directory = '{spill}'")
        con.execute(DUCKDB_SQL.format(glob=f"{data}/*.parquet"))
        out: dict[str, Any] = {}
        for name, q in DUCKDB_QUERIES.items():
            row = con.execute(q).fetchone()
            out[name] = list(row) if row is not None and len(row) > 1 else (row or [None])[0]
    except duckdb.Error as e:
        return {"error": f"{type(e).__name__} after {time.monotonic() - t:.0f}s: "
                         f"{str(e).splitlines()[0]}"}
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    out["seconds"] = round(time.monotonic() - t, 1)
    return out


def stage_times(log_dir: Path, windows: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Jobs, stages and the slowest stages of each report, from Spark's event log."""
    import json

    events: list[dict[str, Any]] = []
    for f in sorted(p for p in log_dir.rglob("events_*") if p.is_file()):
        with f.open() as fh:
            events.extend(json.loads(line) for line in fh if line.startswith("{"))
    out: dict[str, Any] = {}
    for rows, (t0, t1) in windows.items():
        lo, hi = t0 * 1000, t1 * 1000
        jobs = [e for e in events if e["Event"] == "SparkListenerJobStart"
                and lo <= e["Submission Time"] <= hi]
        stages = []
        for e in events:
            if e["Event"] != "SparkListenerStageCompleted":
                continue
            info = e["Stage Info"]
            sub, done = info.get("Submission Time"), info.get("Completion Time")
            if sub is None or done is None or not lo <= sub <= hi:
                continue
            stages.append((done - sub, info["Stage Name"].split(" at ")[0], info["Stage ID"]))
        stages.sort(reverse=True)
        out[rows] = {"jobs": len(jobs), "stages": len(stages),
                     "stage_seconds": round(sum(s[0] for s in stages) / 1000, 1),
                     "slowest": [(round(ms / 1000, 1), f"{name} (stage {i})")
                                 for ms, name, i in stages[:8]]}
    return out


def _jvm_peak_mb() -> float:
    """Peak resident memory (VmHWM) of the driver JVM, a child of this process."""
    peak = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == str(os.getpid()) and "VmHWM" in fields:
            peak = max(peak, int(fields["VmHWM"].split()[0]) / 1024)
    return peak


def _figures(summary: dict[str, Any]) -> tuple[Any, ...]:
    """The counts two versions must agree on."""
    c = summary["channels"][0]
    return (c["messages"], c["convergence"]["held_pairs"], c["convergence"]["missing_pairs"],
            c["causal_order"]["checked_dependencies"], c["causal_order"]["violations"],
            c["latency_ms"].get("p50"), c["latency_ms"].get("p99"))


class ActionProfile:
    """Wall time, jobs and stages of every action of the report's computation, by
    the ``pipeline/`` line that ran it (a job group per action; classic session)."""

    def __init__(self, spark: Any) -> None:
        import traceback

        from pyspark.sql.classic.dataframe import DataFrame
        from pyspark.sql.readwriter import DataFrameWriter

        self.sc = spark.sparkContext
        self.jvm = spark._jvm
        self.log: list[tuple[str, str, float, int, int]] = []
        self.n = 0
        self.compiled = self._compilations()

        def wrap(cls: Any, name: str) -> None:
            orig = getattr(cls, name)

            def action(inner: Any, *a: Any, **k: Any) -> Any:
                here = [f for f in traceback.extract_stack()[:-1] if "/pipeline/" in f.filename]
                where = f"{Path(here[-1].filename).name}:{here[-1].lineno}" if here else "?"
                self.n += 1
                group = f"bench-action-{self.n}"
                self.sc.setJobGroup(group, where)
                t = time.monotonic()
                try:
                    return orig(inner, *a, **k)
                finally:
                    took = time.monotonic() - t
                    tracker = self.sc.statusTracker()
                    jobs = tracker.getJobIdsForGroup(group)
                    stages = sum(len(info.stageIds) for j in jobs
                                 if (info := tracker.getJobInfo(j)) is not None)
                    self.log.append((where, name, took, len(jobs), stages))

            setattr(cls, name, action)

        for name in ("collect", "localCheckpoint"):
            wrap(DataFrame, name)
        wrap(DataFrameWriter, "parquet")

    def _compilations(self) -> int:
        return int(self.jvm.org.apache.spark.metrics.source.CodegenMetrics
                   .METRIC_COMPILATION_TIME().getCount())

    def report(self, total: float) -> str:
        """The actions since the last report, one line each, and the totals."""
        lines = [f"      {took:6.2f}s  {jobs:3d} jobs {stages:3d} stages  {name:<15} {where}"
                 for where, name, took, jobs, stages in self.log]
        inside = sum(x[2] for x in self.log)
        compiled = self._compilations()
        lines.append(f"      {len(self.log)} actions, {sum(x[3] for x in self.log)} jobs, "
                     f"{sum(x[4] for x in self.log)} stages; {inside:.1f}s in actions, "
                     f"{total - inside:.1f}s outside them; {compiled - self.compiled} "
                     "plans compiled")
        self.log.clear()
        self.compiled = compiled
        return "\n".join(lines)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command_ab(data: Path, codes: list[Path], rounds: int, master: str, server: bool,
               reports: int) -> None:
    """The whole ``sdschat report`` command (process start to exit) of each version
    over the same data, alternating, ``rounds`` times; with ``server``, also
    ``reports`` reports on a ``sdschat report-server --master MASTER`` of each version
    (started on 127.0.0.1, stopped by PID). Each line: time, load, calibration."""
    import json
    import signal
    import socket
    import subprocess

    from machine import describe

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    seen: dict[str, tuple[Any, ...]] = {}

    def one(code: Path, extra: list[str], label: str) -> None:
        out = Path(tempfile.mkdtemp(prefix="bench-report-")) / "r"
        t = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "app.cli", "report", str(data), "--out",
                               str(out), *extra], cwd=code, env=env, capture_output=True,
                              text=True)
        wall = time.monotonic() - t
        if done.returncode != 0:
            print(f"  {label}: FAILED {done.stderr.strip()[-300:]}", flush=True)
            return
        summary = json.loads((out / "summary.json").read_text())
        shutil.rmtree(out.parent, ignore_errors=True)
        figures = _figures(summary)
        ref = seen.setdefault(label.split()[0], figures)
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} load {os.getloadavg()[0]:.1f} "
              f"{label:<40} command {wall:6.1f}s  (spark {summary['spark_seconds']:.1f}s)  "
              f"{'same figures' if figures == ref else f'FIGURES DIFFER {figures} {ref}'}",
              flush=True)

    print(describe(), flush=True)
    for r in range(rounds):
        for code in codes:
            one(code, ["--master", master], f"{data.name} {code} local #{r + 1}")
    if not server:
        return
    for code in codes:
        port = _free_port()
        log = Path(tempfile.mkdtemp(prefix="bench-server-")) / "server.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "app.cli", "report-server",
                                     "--master", master, "--port", str(port),
                                     "--driver-memory", "4g"], cwd=code, env=env,
                                    stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.5)
            for i in range(reports):
                one(code, ["--remote", f"sc://127.0.0.1:{port}"],
                    f"{data.name} {code} server #{i + 1}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            shutil.rmtree(log.parent, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--participants", type=int, default=1000)
    ap.add_argument("--history", type=int, default=50)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--keep", type=Path, default=None, help="keep generated data here")
    ap.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                    help="also run each size with these runtime SQL settings (A/B)")
    ap.add_argument("--code", type=Path, default=None,
                    help="import pipeline from this directory (A/B against another version)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="Spark setting for the session (e.g. JVM options)")
    ap.add_argument("--peak-memory", action="store_true",
                    help="print the driver JVM's peak resident memory (VmHWM) per report")
    ap.add_argument("--profile", action="store_true",
                    help="print each action of every report: its time, jobs and stages")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each report this many times in the session (the first pays the "
                         "JVM's warm-up: code generation, class loading, JIT)")
    ap.add_argument("--against", type=Path, default=None, metavar="DIR",
                    help="time the whole 'sdschat report' command of this checkout and of "
                    "DIR (another version: git worktree add DIR COMMIT), alternating, on "
                    "the same data (--rounds times; with --server also on a report server "
                    "of each)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server", type=int, default=0, metavar="N",
                    help="with --against: N reports on a warm report server of each version")
    args = ap.parse_args()

    if args.against is not None:
        base = args.keep or Path(tempfile.mkdtemp(prefix="sdschat-bench-"))
        try:
            for rows in args.rows:
                data = base / f"events-{rows}-{args.participants}-{args.history}"
                if not (data / "part-00000.parquet").exists():
                    generate(data, rows, args.participants, args.history)
                command_ab(data, [ROOT, args.against.resolve()], args.rounds, args.master,
                           args.server > 0, args.server)
        finally:
            if args.keep is None:
                shutil.rmtree(base, ignore_errors=True)
        return 0

    from machine import describe

    from pipeline.report import compute_report, write_report
    from pipeline.spark import make_session

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {describe()}  "
          f"load average {os.getloadavg()[0]:.1f}  code {ROOT}", flush=True)
    base = args.keep or Path(tempfile.mkdtemp(prefix="sdschat-bench-"))
    log_dir = base / "eventlog"
    log_dir.mkdir(parents=True, exist_ok=True)
    windows: dict[str, tuple[float, float]] = {}
    results: dict[str, str] = {}
    try:
        t = time.monotonic()
        spark = make_session(args.master, shuffle_partitions=args.shuffle_partitions,
                             driver_memory=args.driver_memory, extra={
                                 "spark.eventLog.enabled": "true",
                                 "spark.eventLog.dir": log_dir.as_uri(),
                                 "spark.eventLog.compress": "false",
                                 **dict(kv.split("=", 1) for kv in args.conf)})
        print(f"spark session ({args.master}) started in {time.monotonic() - t:.1f}s",
              flush=True)
        profile = ActionProfile(spark) if args.profile else None
        for rows in args.rows:
            data = base / f"events-{rows}-{args.participants}-{args.history}"
            t = time.monotonic()
            if (data / "part-00000.parquet").exists():  # --keep: generated by an earlier run
                n = pq.ParquetFile(data / "part-00000.parquet").metadata.num_rows
            else:
                n = generate(data, rows, args.participants, args.history)
            gen = time.monotonic() - t
            mb = sum(f.stat().st_size for f in data.glob("*.parquet")) / 1e6
            for variant in [v for v in ["", *args.variant] for _ in range(args.repeat)]:
                settings = dict(kv.split("=", 1) for kv in variant.split(",") if kv)
                saved = {k: spark.conf.get(k, None) for k in settings}
                for k, v in settings.items():
                    spark.conf.set(k, v)
                key = f"{rows} {variant or 'default'}"
                key += f" #{sum(k.startswith(key) for k in windows) + 1}"
                w0 = time.time()
                t = time.monotonic()
                summary = compute_report(spark, [data])
                took = time.monotonic() - t
                windows[key] = (w0, time.time())
                write_report(summary, base / f"report-{rows}")
                c = summary["channels"][0]
                ok = c["convergence"]["converged"] and c["causal_order"]["violations"] == 0
                line = (
                    f"[{variant or 'default'}] {time.strftime('%H:%M:%S', time.gmtime())} "
                    f"load {os.getloadavg()[0]:.1f} rows {n:>11,}  participants "
                    f"{args.participants}  history {args.history}  "
                    f"parquet {mb:7.1f} MB  generate {gen:6.1f}s  report {took:7.1f}s  "
                    f"({n / took:,.0f} rows/s)  deps checked "
                    f"{c['causal_order']['checked_dependencies']:,}  "
                    f"{'ok' if ok else 'UNEXPECTED RESULT'}"
                )
                ref = duckdb_reference(data) if key.endswith(" #1") else None
                if ref is None and key.endswith(" #1"):
                    line += "\n    duckdb: not installed (no reference)"
                elif ref is None:
                    line = f"{line}  (repeat {key.rsplit('#', 1)[1]}: warm JVM)"
                elif "error" in ref:
                    line += f"\n    duckdb (2 threads): failed: {ref['error']}"
                else:
                    same = (ref["messages"] == c["messages"]
                            and ref["held_pairs"] == c["convergence"]["held_pairs"]
                            and ref["missing_pairs"] == c["convergence"]["missing_pairs"]
                            and ref["causal"] == [c["causal_order"]["checked_dependencies"],
                                                  c["causal_order"]["violations"]])
                    line += (f"\n    duckdb (2 threads): {ref['seconds']:.1f}s  "
                             f"spark/duckdb {took / max(ref['seconds'], 0.01):.2f}x  "
                             f"counts {'identical' if same else f'DIFFER: {ref}'}")
                if args.peak_memory:
                    line += f"\n    driver JVM peak RSS {_jvm_peak_mb():,.0f} MB"
                if profile is not None:
                    line += "\n" + profile.report(took)
                results[key] = line
                print(line, flush=True)
                for k, v in saved.items():
                    if v is None:
                        spark.conf.unset(k)
                    else:
                        spark.conf.set(k, v)
        spark.stop()
        for rows, st in stage_times(log_dir, windows).items():
            print(f"rows {rows}: {st['jobs']} jobs, {st['stages']} stages, "
                  f"{st['stage_seconds']}s of stage time; slowest: "
                  + "; ".join(f"{s}s {name}" for s, name in st["slowest"]), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
