"""What one round's SQLite transaction costs a node, by page size of a new database file.

A node at 100 msg/s in a 10-node channel commits one transaction per received
message (a round of one) and one fsynced transaction per typed line. This bench
does exactly that through :class:`storage.Store` (``commit_batch_now``, the
node's path for small rounds; the real schema, WAL, ``synchronous`` NORMAL and
FULL) on a fresh data directory per page size, alternated over ``--rounds``:

* received: a ~1.5 KB envelope (the default profile's size), a 10-id causal
  history, ~100 bytes of content and one event-log row per transaction: CPU
  (``time.thread_time``, the calling thread: SQLite runs there) and WAL bytes
  written per transaction (the median growth of the ``-wal`` file; the background
  checkpointer runs, as in a node, and now and then rewinds the WAL);
* typed: the same message recorded with its outbox row (``Batch.record_typed``),
  fsynced: wall time per transaction (median, p90), what a sender waits before
  its line is durable and can be published.

Usage::

    .venv/bin/python bench/commit_cost.py                 # 4096 8192 16384, 3 rounds
    .venv/bin/python bench/commit_cost.py --pages 4096 16384 --messages 2000 --rounds 5

The data directories are temporary and removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import calibrate, describe

from storage import Batch, EventRow, Store, StoredMessage

CHANNEL = "bench"


def message(i: int, rng: bytes) -> StoredMessage:
    mid = f"{i:064x}"
    return StoredMessage(
        channel=CHANNEL,
        message_id=mid,
        sender_id=f"{i % 10:064x}",
        lamport=1_000 + i,
        content=b'{"v":1,"name":"n3","kind":"msg","text":"' + rng[:60].hex().encode() + b'"}',
        causal_history=tuple(f"{j:064x}" for j in range(max(0, i - 10), i)),
        retrieval_hint=rng[:32],
        envelope=rng[: 1_500],
        delivered_at=1_000 + i,
    )


async def run_one(page: int, messages: int, tmp: Path) -> dict[str, float]:
    data = tmp / f"p{page}-{time.monotonic_ns()}"
    store = await Store.open(data, page_size=page)
    try:
        await store.join_channel(CHANNEL, b"t" * 16, is_public=True)
        wal = store.path.with_name(store.path.name + "-wal")
        rng = os.urandom(4_096)
        cpu: list[float] = []
        wal_bytes: list[int] = []
        typed_ms: list[float] = []
        for i in range(messages):  # bounded
            b = Batch()
            b.insert_message(message(i, rng))
            b.add_event_rows([EventRow(1_000 + i, "delivered", CHANNEL, f"{i:064x}",
                                       f"{i % 10:064x}", 1_000 + i, 1_500)])  # fmt: skip
            size0 = wal.stat().st_size if wal.exists() else 0
            t0 = time.thread_time()
            assert store.commit_batch_now(b, now_ms=1_000 + i) is not None
            cpu.append(time.thread_time() - t0)
            wal_bytes.append(wal.stat().st_size - size0)
            if i % 10 == 0:  # one typed line per ten received, as at 100 msg/s
                t = Batch()
                t.record_typed(await store.next_local_id(), message(messages + i, rng))
                w0 = time.perf_counter()
                assert store.commit_batch_now(t, now_ms=1_000 + i) is not None
                typed_ms.append((time.perf_counter() - w0) * 1e3)
        typed_ms.sort()
        return {
            "cpu_us": statistics.median(cpu) * 1e6,
            "wal_kb": statistics.median(wal_bytes) / 1024,
            "typed_p50_ms": typed_ms[len(typed_ms) // 2],
            "typed_p90_ms": typed_ms[int(len(typed_ms) * 0.9)],
        }
    finally:
        await store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[4096, 8192, 16384])
    ap.add_argument("--messages", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}; "
          f"{describe(calibrate())}")  # fmt: skip
    results: dict[int, list[dict[str, float]]] = {p: [] for p in args.pages}
    with tempfile.TemporaryDirectory(prefix="sdschat-commit-") as tmp:
        for r in range(args.rounds):
            order = args.pages if r % 2 == 0 else list(reversed(args.pages))
            for page in order:
                results[page].append(asyncio.run(run_one(page, args.messages, Path(tmp))))
    print(f"medians over {args.rounds} alternated rounds of {args.messages} one-message "
          f"transactions (+1 fsynced typed line per 10)")  # fmt: skip
    print("| page size | CPU per received message | WAL per transaction | typed line fsynced "
          "p50 / p90 |")
    print("|---|---|---|---|")
    for page, runs in results.items():
        med = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
        print(f"| {page} | {med['cpu_us']:.0f} us | {med['wal_kb']:.0f} KB | "
              f"{med['typed_p50_ms']:.2f} / {med['typed_p90_ms']:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
