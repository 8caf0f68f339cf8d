"""Storage benchmark: paging a 100,000-message channel, and batched insert throughput.

Usage::

    .venv/bin/python bench/storage_paging.py [--messages 100000] [--data-dir DIR]

Builds (in a temporary directory unless ``--data-dir``) a channel with
``--messages`` stored messages (each with a ``--history``-id causal history
and an ``--envelope-bytes`` envelope), then reports:

* insert throughput for batches of 1, 100 and 1,000 messages per call
  (interleaved rounds, since this machine's speed drifts);
* newest page, a page in the middle (``before`` cursor), a page forwards
  (``after`` cursor), ``has_ids`` for 200 ids, ``count_messages``, and a
  ``search`` (a full scan of the channel's rows): medians and p99 in ms;
* ``enqueue_outgoing`` (fsynced commit) against a plain insert;
* a ``commit_batch`` shaped like one received message (message, two events,
  a ``--state-bytes`` core state);
* reopen time, with and without ``integrity_check``.

Runtime is bounded by the sizes given (about a minute at the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from storage import Batch, EventRow, Store, StoredMessage


def message_id(n: int) -> str:
    return hashlib.sha256(b"bench-%d" % n).hexdigest()


def make_message(n: int, history: int, envelope_bytes: int) -> StoredMessage:
    return StoredMessage(
        channel="bench",
        message_id=message_id(n),
        sender_id=f"sender-{n % 7}",
        lamport=1_700_000_000_000 + n // 3,  # ties on Lamport, broken by id
        content=f"message number {n} with some ordinary chat text".encode(),
        causal_history=tuple(message_id(n - k) for k in range(1, min(history, n) + 1)),
        retrieval_hint=hashlib.sha256(b"env-%d" % n).digest(),
        envelope=bytes(envelope_bytes),
        delivered_at=1_700_000_000_000 + n,
        received_at=1_700_000_000_000 + n,
    )


async def timed(fn: Callable[[], Awaitable[object]], repeat: int) -> list[float]:
    """Durations of ``repeat`` calls, in milliseconds."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):8.3f} ms   p99 {p99:8.3f} ms   (n={len(ordered)})"


async def bench(
    data_dir: Path, messages: int, history: int, envelope_bytes: int, state_bytes: int
) -> None:
    print(
        f"data dir {data_dir}; {messages:,} messages, {history}-id histories, "
        f"{envelope_bytes}-byte envelopes"
    )
    next_n = 0

    def batch(size: int) -> list[StoredMessage]:
        nonlocal next_n
        rows = [make_message(next_n + i, history, envelope_bytes) for i in range(size)]
        next_n += size
        return rows

    async with await Store.open(data_dir) as store:
        await store.join_channel("bench", b"topic", is_public=True)

        # Insert throughput, interleaved: per round, 200 single-message calls,
        # 2 calls of 100 and 1 call of 1,000.
        rates: dict[int, list[float]] = {1: [], 100: [], 1000: []}
        for _ in range(3):
            for size, calls in ((1, 200), (100, 2), (1000, 1)):
                chunks = [batch(size) for _ in range(calls)]
                start = time.perf_counter()
                for chunk in chunks:
                    await store.insert_messages(chunk)
                rates[size].append(size * calls / (time.perf_counter() - start))
        for size, r in rates.items():
            print(
                f"insert, {size:>5} per call: {statistics.median(r):>9,.0f} msg/s "
                f"(rounds: {', '.join(f'{x:,.0f}' for x in r)})"
            )

        # Fill the rest in batches of 1,000.
        elapsed = 0.0
        filled = 0
        while next_n < messages:
            rows = batch(min(1000, messages - next_n))
            start = time.perf_counter()
            await store.insert_messages(rows)
            elapsed += time.perf_counter() - start
            filled += len(rows)
        if filled:
            print(f"fill: {filled:,} messages in {elapsed:.1f} s ({filled / elapsed:,.0f} msg/s)")
        total = await store.count_messages("bench")
        print(f"stored: {total:,} messages, file {store.path.stat().st_size / 2**20:,.0f} MiB")

        newest = await store.page("bench", limit=50)
        middle_cursor = (1_700_000_000_000 + (total // 2) // 3, message_id(total // 2))
        probe = [message_id(n) for n in range(0, 2 * total, max(1, total // 100))][:200]
        queries: list[tuple[str, Callable[[], Awaitable[object]], int]] = [
            ("newest page", lambda: store.page("bench"), 300),
            ("middle page (before)", lambda: store.page("bench", before=middle_cursor), 300),
            ("middle page (after)", lambda: store.page("bench", after=middle_cursor), 300),
            ("older page (before)", lambda: store.page("bench", before=newest[0].cursor), 300),
            ("has_ids x200", lambda: store.has_ids("bench", probe), 300),
            ("get_envelopes x50", lambda: store.get_envelopes("bench", probe[:50]), 100),
            ("count_messages", lambda: store.count_messages("bench"), 50),
            ("search (full scan)", lambda: store.search("bench", "number 4242 "), 10),
        ]
        for label, fn, repeat in queries:
            print(f"{label:<20} {summary(await timed(fn, repeat))}")

        # Durable (fsynced) outbox commit vs an ordinary insert, interleaved.
        durable: list[float] = []
        plain: list[float] = []
        for _ in range(50):
            durable += await timed(lambda: store.enqueue_outgoing("bench", b"typed"), 1)
            plain += await timed(lambda: store.insert_messages(batch(1)), 1)
        print(f"enqueue_outgoing     {summary(durable)}   (synchronous=FULL)")
        print(f"insert 1 message     {summary(plain)}   (synchronous=NORMAL)")

        # What the node commits per received message: the message, two events and
        # the core's exported state (bloom filter + buffers: tens of KB).
        state = bytes(range(256)) * (state_bytes // 256)

        async def receive_commit() -> None:
            b = Batch()
            b.insert_messages(batch(1))
            b.set_core_state("bench", state)
            b.add_event_rows([EventRow(wall_ms=1, kind="MessageDelivered")] * 2)
            await store.commit_batch(b)

        print(
            f"commit_batch(1 msg + {len(state) // 1024} KiB state + 2 events) "
            + summary(await timed(receive_commit, 200))
        )

    start = time.perf_counter()
    async with await Store.open(data_dir):
        opened = time.perf_counter() - start
    start = time.perf_counter()
    async with await Store.open(data_dir, integrity_check=True):
        checked = time.perf_counter() - start
    print(f"reopen {opened * 1000:.1f} ms; reopen with integrity_check {checked * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--history", type=int, default=20)
    parser.add_argument("--envelope-bytes", type=int, default=1024)
    parser.add_argument("--state-bytes", type=int, default=32 * 1024)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    if args.data_dir is not None:
        asyncio.run(
            bench(args.data_dir, args.messages, args.history, args.envelope_bytes, args.state_bytes)
        )
        return
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        asyncio.run(
            bench(Path(tmp), args.messages, args.history, args.envelope_bytes, args.state_bytes)
        )


if __name__ == "__main__":
    main()
