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
part of the end-to-end latency that each of the receivers adds. With
``--busy-ms X`` the loop meanwhile runs Python work in chunks of X ms (as a
node's loop does at 100 msg/s: other rounds, websocket frames), so that a
hand-over to another thread has to wait for the GIL; that work's CPU is not
counted.

Profiles: ``--profile default`` (exactly ``sds.Config()``: adaptive causal
history, floor 5, cap 30; filter 250 / 0.001), ``--profile waku``
(``sds.Config.waku()``: js-waku's 200-id history and 10,000-entry filter,
~46 KB envelopes), ``--profile small`` (a fixed history of 10, filter 1,000:
the size class measured before the defaults changed), or ``--profile both``
(default and waku, side by side; without ``--compare`` this checkout alone).

It also reports what the node's SQLite file holds per message after the run
(``db_per_msg``: the whole file over the messages received) and, split with
SQLite's ``dbstat``, the part that stays per message forever (``log_per_msg``:
the message rows, their indexes and the event log; schema 1 keeps every
envelope in its message rows) and the bounded part (``window_bytes``: the
recent window's envelopes and histories, schema 2). The rest of the file is
the core state (bounded by the log window) and free pages (reused by the next
envelopes). ``bench/storage_bytes.py`` measures the steady state directly.

``--compare DIR`` measures another checkout (e.g. ``/work/main``) side by side:
each repeat runs one fresh subprocess per (version, profile), alternated, on
the same envelopes (built once here; the envelope format is the same), so a
run prints both versions' medians with the machine's calibration. On 2 shared
cores, single runs of the full catch-up benchmark vary by +-15%, this one by a
few percent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(  # --code=DIR: the sdschat tree to import (another version to compare)
    0,
    next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--code=")), None)
    or str(Path(__file__).resolve().parents[1]),
)

from machine import describe
from store_data import make_history

import sds
from app.node import Node, NodeOptions
from app.node_events import Delivered
from app.transport import MemoryHub
from net import runner
from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key

PROFILES = ("default", "waku", "small")


def profile_config(name: str) -> sds.Config:
    """The ``sds.Config`` of a profile (see the module docstring)."""
    if name == "small":  # the size class measured before the defaults changed
        return sds.Config(causal_history_size=10, causal_history_floor=None, bloom_capacity=1000)
    return sds.Config.profile(name)  # "default" is exactly sds.Config()


def db_bytes(data_dir: Path) -> dict[str, int]:
    """Bytes of the closed database: ``file``, and ``window`` (the ``recent`` table and
    its indexes, schema 2) from SQLite's ``dbstat``."""
    path = data_dir / "sdschat.db"
    out = {"file": path.stat().st_size, "window": 0, "log": 0}
    log = ("messages", "messages_log_order", "sqlite_autoindex_messages_1", "events")
    with contextlib.closing(sqlite3.connect(path)) as db:
        for name, size in db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            if name == "recent" or str(name).startswith("recent_"):
                out["window"] += int(size)
            elif name in log:
                out["log"] += int(size)
    return out


_CONFIG = sds.Config()


@contextlib.asynccontextmanager
async def bench_node(
    data_dir: Path, key: ChannelKey, on_delivered: Callable[[], None]
) -> AsyncIterator[Node]:
    """A fresh node in ``data_dir``, started and joined to ``key``'s channel, closed after."""
    options = NodeOptions(kdf=TEST_KDF, config=_CONFIG)
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


async def _busy(stop: asyncio.Event, chunk_s: float) -> float:
    """Python work on the loop in chunks of ``chunk_s``, yielding between them (other
    rounds, websocket frames: a node at 100 msg/s); returns its thread CPU seconds."""
    spent = 0.0
    while not stop.is_set():  # bounded: stopped when the measurement ends
        t0 = time.thread_time()
        end = time.perf_counter() + chunk_s
        n = 0
        while time.perf_counter() < end:
            n += 1
        spent += time.thread_time() - t0
        await asyncio.sleep(0)
    return spent


async def receive_each(
    data_dir: Path, key: ChannelKey, envelopes: list[bytes], busy_ms: float = 0.0
) -> tuple[list[float], float]:
    """Per-envelope latency (handed in -> delivered) and total CPU seconds, one at a time
    (with ``busy_ms``: while the loop also runs Python work in chunks of that length;
    its CPU is not counted)."""
    delivered = asyncio.Event()
    latencies: list[float] = []
    async with bench_node(data_dir, key, delivered.set) as node:
        stop = asyncio.Event()
        busy = asyncio.create_task(_busy(stop, busy_ms / 1e3)) if busy_ms > 0 else None
        cpu0 = time.process_time()
        for envelope in envelopes:
            delivered.clear()
            t = time.perf_counter()
            await node._on_envelope(envelope)
            await asyncio.wait_for(delivered.wait(), 60)
            latencies.append(time.perf_counter() - t)
        cpu = time.process_time() - cpu0
        stop.set()
        if busy is not None:
            cpu -= await busy
        return latencies, cpu


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


def _write_envelopes(path: Path, envelopes: list[bytes]) -> None:
    with path.open("wb") as f:
        for e in envelopes:
            f.write(len(e).to_bytes(4, "big") + e)


def _read_envelopes(path: Path) -> list[bytes]:
    data = path.read_bytes()
    out, i = [], 0
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "big")
        out.append(data[i + 4 : i + 4 + n])
        i += 4 + n
    return out


def child_run(args: argparse.Namespace) -> int:
    """One measurement in this process; prints one JSON line."""
    global _CONFIG
    _CONFIG = profile_config(args.profile)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    envelopes = _read_envelopes(Path(args.envelopes))
    n = len(envelopes)
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        d = Path(tmp) / "node"
        if args.one_at_a_time:
            lat, cpu = runner.run(receive_each(d, key, envelopes, args.busy_ms))
            lat.sort()
            res = {"p50_ms": lat[n // 2] * 1e3, "p99_ms": lat[min(n - 1, n * 99 // 100)] * 1e3,
                   "cpu_us": cpu / n * 1e6}
        else:
            wall, cpu = runner.run(receive_all(d, key, envelopes))
            res = {"wall_us": wall / n * 1e6, "cpu_us": cpu / n * 1e6}
        size = db_bytes(d)
    res.update(db_per_msg=size["file"] / n, log_per_msg=size["log"] / n,
               window_bytes=size["window"])
    print(json.dumps(res))
    return 0


def compare(args: argparse.Namespace) -> int:
    """Alternate fresh subprocesses: (other, this) x profiles, ``--repeat`` times."""
    key = derive_channel_key("bench", None, params=TEST_KDF)
    here = str(Path(__file__).resolve().parents[1])
    versions = {"this": here}
    if args.compare:
        versions = {"previous": str(Path(args.compare).resolve()), "this": here}
    profiles = ["default", "waku"] if args.profile == "both" else [args.profile]
    print(describe())
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-env-") as tmp:
        files = {}
        for prof in profiles:
            hist = make_history(key, args.messages, config=profile_config(prof))
            files[prof] = Path(tmp) / f"{prof}.bin"
            _write_envelopes(files[prof], hist.envelopes)
            size = sum(map(len, hist.envelopes)) / len(hist.envelopes)
            print(f"profile {prof}: {len(hist.envelopes):,} envelopes of ~{size / 1e3:.1f} KB")
        for r in range(args.repeat):
            for prof in profiles:
                order = list(versions.items()) if r % 2 == 0 else list(versions.items())[::-1]
                for name, code in order:
                    argv = [sys.executable, __file__, f"--code={code}", "--child",
                            "--profile", prof, "--envelopes", str(files[prof])]
                    if args.one_at_a_time:
                        argv += ["--one-at-a-time", "--busy-ms", str(args.busy_ms)]
                    done = subprocess.run(
                        argv, capture_output=True, text=True, timeout=1800, cwd=tmp,
                        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                    )
                    if done.returncode != 0:
                        print(done.stderr[-3000:], file=sys.stderr)
                        return 1
                    results.setdefault((name, prof), []).append(
                        json.loads(done.stdout.strip().splitlines()[-1])
                    )
    keys = ["p50_ms", "p99_ms", "cpu_us"] if args.one_at_a_time else ["wall_us", "cpu_us"]
    keys += ["db_per_msg", "log_per_msg", "window_bytes"]
    print(f"medians of {args.repeat} alternated runs, {args.messages:,} messages each")
    print("| version | profile | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for prof in profiles:
        for name in versions:
            rows = results[(name, prof)]
            cells = [
                f"{statistics.median(r[k] for r in rows):,.{2 if k.endswith('_ms') else 1}f}"
                for k in keys
            ]
            print(f"| {name} | {prof} | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--one-at-a-time", action="store_true", help="wait for each delivery")
    ap.add_argument(
        "--busy-ms",
        type=float,
        default=0.0,
        help="with --one-at-a-time: keep the loop busy with Python work in chunks of this many ms",
    )
    ap.add_argument("--profile", choices=(*PROFILES, "both"), default="default")
    ap.add_argument("--compare", metavar="DIR", help="another checkout to measure alternately")
    ap.add_argument("--code", help="=DIR: the sdschat tree to import (set before parsing)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--envelopes", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_run(args)
    if args.compare or args.profile == "both":
        return compare(args)
    global _CONFIG
    _CONFIG = profile_config(args.profile)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    hist = make_history(key, args.messages, config=_CONFIG)
    n = len(hist.envelopes)
    print(describe())
    if args.one_at_a_time:
        with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
            lat, cpu = runner.run(
                receive_each(Path(tmp) / "node", key, hist.envelopes, args.busy_ms)
            )
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
