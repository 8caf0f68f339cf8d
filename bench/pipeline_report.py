"""Pipeline benchmark: ``sdschat report`` on synthetic event logs of 1M and 10M rows.

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

    .venv/bin/python bench/pipeline_report.py --rows 1000000 10000000 --master 'local[2]'

Prints, per size: generation time, Parquet size, report wall time (Spark
session start excluded, reported separately).

Measured on the 2-core machine (local[2], driver 4 GB, 16 shuffle partitions,
1,000 participants, other jobs sharing the machine):

* history 10: 1M rows 83 s (12k rows/s, 4.9M dependencies checked);
  10M rows 321 s (31k rows/s, 50M dependencies checked): 10x the rows in 3.9x
  the time (fixed per-job overhead dominates at 1M);
* history 50: 1M rows 123 s (24M dependencies checked). 10M rows with 50-id
  histories (500M ids) ran out of the 4 GB heap while the histories were
  still cached with the other columns; they no longer are, but that size was
  not re-measured.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
        # seq: per node, events in time order. Message m's rows at a node come in
        # message order, 2 per message for receivers, 1 for the sender: use
        # (message index * 3 + kind) as a monotonic per-node sequence.
        seq_col = msg_col * 3 + kind_idx + 1
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--participants", type=int, default=1000)
    ap.add_argument("--history", type=int, default=50)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=16)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--keep", type=Path, default=None, help="keep generated data here")
    args = ap.parse_args()

    from pipeline.report import compute_report, write_report
    from pipeline.spark import make_session

    base = args.keep or Path(tempfile.mkdtemp(prefix="sdschat-bench-"))
    try:
        t = time.monotonic()
        spark = make_session(args.master, shuffle_partitions=args.shuffle_partitions,
                             driver_memory=args.driver_memory)
        print(f"spark session ({args.master}) started in {time.monotonic() - t:.1f}s",
              flush=True)
        for rows in args.rows:
            data = base / f"events-{rows}"
            t = time.monotonic()
            n = generate(data, rows, args.participants, args.history)
            gen = time.monotonic() - t
            mb = sum(f.stat().st_size for f in data.glob("*.parquet")) / 1e6
            t = time.monotonic()
            summary = compute_report(spark, [data])
            took = time.monotonic() - t
            write_report(summary, base / f"report-{rows}")
            c = summary["channels"][0]
            ok = c["convergence"]["converged"] and c["causal_order"]["violations"] == 0
            print(
                f"rows {n:>11,}  participants {args.participants}  parquet {mb:7.1f} MB  "
                f"generate {gen:6.1f}s  report {took:7.1f}s  ({n / took:,.0f} rows/s)  "
                f"deps checked {c['causal_order']['checked_dependencies']:,}  "
                f"{'ok' if ok else 'UNEXPECTED RESULT'}",
                flush=True,
            )
        spark.stop()
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
