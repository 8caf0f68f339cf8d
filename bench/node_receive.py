"""The node's receive path in one process: envelopes in, delivered and committed out.

Usage::

    .venv/bin/python bench/node_receive.py [--messages 3000] [--repeat 5]
    .venv/bin/python bench/node_receive.py --one-at-a-time [--messages 1000]

Builds ``--messages`` realistic envelopes (two real SDS cores conversing,
default protocol settings: ~46 KB each, see ``bench/store_data.py``), then for
each repeat opens a fresh :class:`app.node.Node` (real SQLite file, envelope
checks, the SDS core; an in-memory transport) and hands it every envelope as
its transport would, as fast as its bounded inbox accepts them, until the last
one is delivered and committed. No websockets, no store process: what is left
is the node's own work per received message, which is what a catch-up and a
busy channel pay for. Prints the median and best wall time per message and the
median process CPU per message (the event loop, SQLite's thread and the
checkpointer together).

``--one-at-a-time`` hands over the next envelope only once the previous one
was delivered (its round committed and its event emitted), as in a quiet
channel: each message is then a round and a transaction of its own, and the
figures are one receiver's latency (median, p99) and CPU per message, the
part of the end-to-end latency that each of the receivers adds.

Use it to compare two versions side by side (``PYTHONPATH`` pointing at each
checkout, runs alternated): on 2 shared cores, single runs of the full
catch-up benchmark vary by +-15%, this one by a few percent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe
from store_data import make_history

from app.node import Node, NodeOptions
from app.node_events import Delivered
from app.transport import MemoryHub
from net import runner
from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key


@contextlib.asynccontextmanager
async def bench_node(
    data_dir: Path, key: ChannelKey, on_delivered: Callable[[], None]
) -> AsyncIterator[Node]:
    """A fresh node in ``data_dir``, started and joined to ``key``'s channel, closed after."""
    options = NodeOptions(kdf=TEST_KDF)
    node = await Node.open(data_dir, MemoryHub().transport(), name="bench", options=options)

    def on_event(ev: object) -> None:
        if isinstance(ev, Delivered):
            on_delivered()

    node.subscribe(on_event)
    try:
        await node.start()
        await node.join(key.channel, key=key)
        yield node
    finally:
        await node.close()


async def receive_each(
    data_dir: Path, key: ChannelKey, envelopes: list[bytes]
) -> tuple[list[float], float]:
    """Per-envelope latency (handed in -> delivered) and total CPU seconds, one at a time."""
    delivered = asyncio.Event()
    latencies: list[float] = []
    async with bench_node(data_dir, key, delivered.set) as node:
        cpu0 = time.process_time()
        for envelope in envelopes:
            delivered.clear()
            t = time.perf_counter()
            await node._on_envelope(envelope)
            await asyncio.wait_for(delivered.wait(), 60)
            latencies.append(time.perf_counter() - t)
        return latencies, time.process_time() - cpu0


async def receive_all(
    data_dir: Path, key: ChannelKey, envelopes: list[bytes]
) -> tuple[float, float]:
    """Wall and CPU seconds for one fresh node to deliver and commit ``envelopes``."""
    delivered = 0
    done = asyncio.Event()

    def count() -> None:
        nonlocal delivered
        delivered += 1
        if delivered == len(envelopes):
            done.set()

    async with bench_node(data_dir, key, count) as node:
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        for envelope in envelopes:
            await node._on_envelope(envelope)  # the transport's callback
        await asyncio.wait_for(done.wait(), 600)
        await node._call_in_worker(node._noop)  # the last round committed
        return time.perf_counter() - t0, time.process_time() - cpu0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--one-at-a-time", action="store_true", help="wait for each delivery")
    args = ap.parse_args()
    key = derive_channel_key("bench", None, params=TEST_KDF)
    hist = make_history(key, args.messages)
    n = len(hist.envelopes)
    print(describe())
    if args.one_at_a_time:
        with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
            lat, cpu = runner.run(receive_each(Path(tmp) / "node", key, hist.envelopes))
        lat.sort()
        print(
            f"{n:,} envelopes one at a time: latency p50 {lat[n // 2] * 1e3:.2f} ms, "
            f"p99 {lat[min(n - 1, n * 99 // 100)] * 1e3:.2f} ms; "
            f"CPU {cpu / n * 1e3:.2f} ms per message"
        )
        return 0
    walls: list[float] = []
    cpus: list[float] = []
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        for r in range(args.repeat):
            wall, cpu = runner.run(receive_all(Path(tmp) / f"node{r}", key, hist.envelopes))
            walls.append(wall)
            cpus.append(cpu)
    us = 1e6 / n
    print(
        f"{n:,} envelopes of ~{sum(map(len, hist.envelopes)) / n / 1e3:.0f} KB: "
        f"wall {statistics.median(walls) * us:.0f} us/message (best {min(walls) * us:.0f}), "
        f"CPU {statistics.median(cpus) * us:.0f} us/message, median of {args.repeat}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
