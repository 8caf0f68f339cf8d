"""Store peer query throughput: by hash (retrieval hints) and by time range, on loopback.

Usage::

    .venv/bin/python bench/store_query.py [--messages 10000] [--repeat 3]
        [--engines sqlite,jetstream]

Builds ``--messages`` realistic envelopes (two real SDS cores conversing with
default settings: ~46 KB each once the causal history is full; see
``bench/store_data.py``), writes them into a store's archive, starts
``sdschat store`` on that archive as a separate process on 127.0.0.1 and
measures, from this process, through :class:`net.store_client.StoreClient`:

* by hash: every hint once, in random order, in ``QueryByHash`` batches of the
  store's ``max_hashes`` (256), pipelined;
* by time: the whole topic in pages of ``--page-size``, pipelined;
* by hash, one hint per query (latency of a single missing-dependency fetch).

``--engines sqlite,jetstream`` (the default) does it for both engines side by side,
interleaved: the SQLite archive, and a JetStream archive (``net/store_jetstream.py``)
on a 3-server cluster started here (nats-server -js on 127.0.0.1, 3 replicas) with
the store process on an empty data directory answering from it.

Prints envelopes/s and MB/s (medians of ``--repeat`` interleaved runs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe
from store_data import make_history

from net.channel_key import TEST_KDF, derive_channel_key
from net.store_client import StoreClient
from storage import ArchivedEnvelope, Store

ROOT = Path(__file__).resolve().parents[1]
STORE_CMD = [sys.executable, *os.environ.get("SDSCHAT_BENCH_STORE_PREFIX", "").split(),
             "-m", "app.cli"]


async def fill(data_dir: Path, topic: bytes, envelopes: list[bytes], hashes: list[bytes]) -> None:
    async with await Store.open(data_dir) as store:
        t0 = 1_700_000_000_000
        for start in range(0, len(envelopes), 500):
            await store.archive.put_many(
                ArchivedEnvelope(hashes[i], topic, t0 + i, envelopes[i])
                for i in range(start, min(start + 500, len(envelopes)))
            )


def start_store(data_dir: Path, topic: bytes, jetstream: list[str] | None = None,
                stream: str = "SDSCHAT_STORE") -> tuple[subprocess.Popen[bytes], str]:
    """``sdschat store`` serving ``data_dir`` on 127.0.0.1 (no feeds), or with ``jetstream``
    (NATS URLs) the JetStream archive ``stream``; returns it and its URL."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "store.log"
    engine: list[str] = []
    for url in jetstream or ():
        engine += ["--jetstream", url]
    if jetstream:
        engine += ["--jetstream-stream", stream]
    proc = subprocess.Popen(
        [*STORE_CMD, "store", "--data-dir", str(data_dir), "--topic",
         topic.hex(), "--listen", "127.0.0.1:0", "--stats-interval", "0", "--max-age", "0",
         "--max-bytes", "0", *engine],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # bounded
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("event") == "store_listening":
                return proc, f"ws://127.0.0.1:{rec['port']}"
        if proc.poll() is not None:
            raise SystemExit(f"store exited: {log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("store did not start")


async def by_hash(url: str, hashes: list[bytes]) -> tuple[float, int]:
    order = hashes[:]
    random.Random(1).shuffle(order)
    async with StoreClient(url) as client:
        await client.info()
        t = time.perf_counter()
        found = await client.by_hash(order)
        dt = time.perf_counter() - t
    assert len(found) == len(hashes)
    return dt, sum(len(i.envelope) for i in found.values())


async def by_time(url: str, topic: bytes, page_size: int, n: int) -> tuple[float, int]:
    async with StoreClient(url) as client:
        await client.info()
        t = time.perf_counter()
        count = size = 0
        async for page in client.pages(topic, page_size=page_size):
            count += len(page.items)
            size += sum(len(i.envelope) for i in page.items)
        dt = time.perf_counter() - t
    assert count == n
    return dt, size


async def single(url: str, hashes: list[bytes], k: int) -> list[float]:
    sample = random.Random(2).sample(hashes, k)
    out = []
    async with StoreClient(url) as client:
        await client.info()
        for h in sample:
            t = time.perf_counter()
            got = await client.by_hash([h])
            out.append((time.perf_counter() - t) * 1000)
            assert h in got
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--engines", default="sqlite,jetstream",
                    help="sqlite, jetstream or both (a 3-server JetStream cluster, 3 replicas)")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    key = derive_channel_key("bench", None, params=TEST_KDF)
    t = time.perf_counter()
    hist = make_history(key, args.messages)
    mb = sum(map(len, hist.envelopes)) / 1e6
    print(f"built {args.messages:,} envelopes ({mb:.0f} MB, "
          f"{mb * 1e3 / args.messages:.1f} KB avg) in {time.perf_counter() - t:.1f} s")
    print(describe())
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp, \
            contextlib.ExitStack() as stack:  # fmt: skip
        urls: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        if "sqlite" in engines:
            data = Path(tmp) / "store"
            asyncio.run(fill(data, key.topic, hist.envelopes, hist.hashes))
            urls["sqlite"] = start_store(data, key.topic)
        if "jetstream" in engines:
            from store_engines import archive, start_jetstream

            js = stack.enter_context(start_jetstream(Path(tmp) / "nats"))
            archive(js.urls, "BENCH", key.topic, hist.envelopes, hist.hashes, 3)
            urls["jetstream"] = start_store(Path(tmp) / "js-store", key.topic, js.urls, "BENCH")
        rows: dict[tuple[str, str], list[tuple[float, int]]] = {}
        lat: dict[str, list[float]] = {}
        try:
            for _ in range(args.repeat):  # interleaved: the machine's speed drifts
                for engine, (_proc, url) in urls.items():
                    rows.setdefault((engine, "hash"), []).append(
                        asyncio.run(by_hash(url, hist.hashes)))
                    rows.setdefault((engine, "time"), []).append(
                        asyncio.run(by_time(url, key.topic, args.page_size, args.messages)))
            for engine, (_proc, url) in urls.items():
                lat[engine] = sorted(asyncio.run(single(url, hist.hashes, 200)))
        finally:
            for proc, _url in urls.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    n = args.messages
    for engine in urls:
        for name, label in (("hash", "by hash (batches of 256)"),
                            ("time", f"by time (pages of {args.page_size})")):  # fmt: skip
            dts = sorted(dt for dt, _ in rows[(engine, name)])
            dt = statistics.median(dts)
            size = rows[(engine, name)][0][1]
            print(f"{engine:9s} {label:28s} {n / dt:9,.0f} envelopes/s  "
                  f"{size / dt / 1e6:7.0f} MB/s  ({dt:.2f} s for {n:,}; runs "
                  f"{', '.join(f'{d:.2f}' for d in dts)})")
        ms = lat[engine]
        print(f"{engine:9s} single-hint fetch latency   median {statistics.median(ms):.2f} ms, "
              f"p99 {ms[int(len(ms) * 0.99) - 1]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
