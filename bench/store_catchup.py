"""Catch-up time: a node that missed N messages gets them from a store peer on loopback.

Usage::

    .venv/bin/python bench/store_catchup.py [--messages 10000] [--repeat 3]
        [--profile default|waku] [--history N] [--bloom N] [--engines sqlite,jetstream]

Builds ``--messages`` realistic envelopes (two real SDS cores conversing; with
the default protocol settings ~46 KB each, see ``bench/store_data.py``),
writes them into a store's archive, starts ``sdschat store`` on it as a
separate process on 127.0.0.1, then opens a fresh node (the real
:class:`app.node.Node`: SQLite, envelope checks, the SDS core) with that store
configured and measures, from the start of its catch-up until the last message
is delivered and committed to its database:

* wall time (target for 10,000 default-size messages: under 5 s),
* messages/s, and how the node's time splits into envelope opening + core
  (``receive``) and database commits (``commit``).

Medians of ``--repeat`` runs (each on a fresh node data directory).
``--profile default`` (the default) is exactly ``sds.Config()`` (adaptive
causal history floor 5 cap 30, filter 250 / 0.001: ~1.5 KB envelopes);
``--profile waku`` is ``sds.Config.waku()`` (~46 KB envelopes).
``--history``/``--bloom`` override the profile's ``causal_history_size`` /
``bloom_capacity`` (to show how catch-up time follows message size).

``--engines sqlite,jetstream`` (the default) runs the catch-up from both engines side
by side, alternately: the SQLite store, and a store peer (its own process, an empty
data directory) answering from a JetStream archive on a 3-server cluster started
here (nats-server -js on 127.0.0.1, 3 replicas; ``net/store_jetstream.py``). Before,
it reports the archiving throughput of one store peer into JetStream with 1 and
with 3 replicas (quorum writes of three servers on one 2-core machine say little of
real hosts).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe
from store_data import make_history
from store_query import fill, start_store

import sds
import storage.store as storage_store
from app.node.events import CatchUp, Delivered
from app.node.receiving import Receiver
from app.node.runtime import Node, NodeOptions
from app.node.transport import MemoryHub
from net import runner
from net.channel_key import TEST_KDF, derive_channel_key

SPLIT: defaultdict[str, float] = defaultdict(float)  # seconds


def _instrument() -> None:
    """Time the node's database commits and its receive path (for the split)."""
    commit = storage_store.Store.commit_batch

    async def timed_commit(self, *a, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return await commit(self, *a, **k)
        finally:
            SPLIT["commit"] += time.perf_counter() - t

    storage_store.Store.commit_batch = timed_commit  # type: ignore[method-assign]
    receive = Receiver.receive

    def timed_receive(self, *a, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return receive(self, *a, **k)
        finally:
            SPLIT["receive"] += time.perf_counter() - t

    Receiver.receive = timed_receive  # type: ignore[method-assign]


async def catch_up_once(data_dir: Path, url: str, key, n: int, cfg: sds.Config) -> float:  # type: ignore[no-untyped-def]
    options = NodeOptions(config=cfg, kdf=TEST_KDF, store_url=url)
    node = await Node.open(data_dir, MemoryHub().transport(), name="bench", options=options)
    delivered = 0
    done = asyncio.Event()
    started: list[float] = []

    def on_event(ev: object) -> None:
        nonlocal delivered
        if isinstance(ev, CatchUp) and ev.state == "started" and not started:
            started.append(time.perf_counter())
        elif isinstance(ev, Delivered):
            delivered += 1
            if delivered == n:
                done.set()

    node.subscribe(on_event)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await node.start()
    await node.join("bench", key=key)
    await asyncio.wait_for(done.wait(), 600)
    await node._call_in_worker(node._noop)  # the last round committed
    elapsed = time.perf_counter() - (started[0] if started else t0)
    SPLIT["cpu"] += time.process_time() - cpu0
    await node.close()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", choices=sds.config.PROFILES, default="default")
    ap.add_argument("--history", type=int, help="causal_history_size (default: the profile's)")
    ap.add_argument("--bloom", type=int, help="bloom_capacity (default: the profile's)")
    ap.add_argument("--engines", default="sqlite,jetstream",
                    help="sqlite, jetstream or both, side by side (default both)")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    changes = {}
    if args.history is not None:
        changes["causal_history_size"] = args.history
    if args.bloom is not None:
        changes["bloom_capacity"] = args.bloom
    cfg = sds.Config.profile(args.profile, **changes)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    hist = make_history(key, args.messages, config=cfg)
    mb = sum(map(len, hist.envelopes)) / 1e6
    print(f"{args.messages:,} envelopes, {mb:.0f} MB ({mb * 1e3 / args.messages:.1f} KB avg; "
          f"profile {args.profile}: history {cfg.causal_history_size} "
          f"(floor {cfg.causal_history_floor}), bloom capacity {cfg.bloom_capacity:,})")
    print(describe())
    _instrument()
    times: dict[str, list[float]] = {e: [] for e in engines}
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp, \
            contextlib.ExitStack() as stack:  # fmt: skip
        root = Path(tmp)
        stores: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        if "sqlite" in engines:
            asyncio.run(fill(root / "store", key.topic, hist.envelopes, hist.hashes))
            stores["sqlite"] = start_store(root / "store", key.topic)
        if "jetstream" in engines:
            from store_engines import archive, start_jetstream

            js = stack.enter_context(start_jetstream(root / "nats"))
            n = args.messages
            for replicas in (1, 3):  # archiving throughput, reported
                dt = archive(js.urls, f"BENCH_R{replicas}", key.topic, hist.envelopes,
                             hist.hashes, replicas)  # fmt: skip
                print(f"  archiving into JetStream, {replicas} replica{'s' * (replicas > 1)}: "
                      f"{dt:.2f} s ({n / dt:,.0f} envelopes/s, {mb / dt:.1f} MB/s; one store "
                      f"peer, batches of 512)")
            stores["jetstream"] = start_store(root / "js-store", key.topic, js.urls, "BENCH_R3")
        try:
            for r in range(args.repeat):  # interleaved: the machine's speed drifts
                for engine, (_proc, url) in stores.items():
                    SPLIT.clear()
                    times[engine].append(runner.run(  # the product's loop (uvloop if there)
                        catch_up_once(root / f"node-{engine}-{r}", url, key, args.messages, cfg)
                    ))
                    print(f"  {engine:9s} run {r + 1}: {times[engine][-1]:.2f} s "
                          f"(receive {SPLIT['receive']:.2f} s, commits {SPLIT['commit']:.2f} s, "
                          f"node CPU {SPLIT['cpu']:.2f} s)")
        finally:
            for proc, _url in stores.values():
                proc.terminate()
                proc.wait(30)
    store_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"  the store processes (and nats-servers), start to stop: "
          f"CPU {store_cpu.ru_utime:.2f} s user + {store_cpu.ru_stime:.2f} s system")
    medians = {e: statistics.median(t) for e, t in times.items()}
    for engine, t in medians.items():
        print(f"catch-up of {args.messages:,} messages from {engine}: median {t:.2f} s "
              f"({args.messages / t:,.0f} messages/s, {mb / t:.0f} MB/s)")
    if len(medians) == 2:
        ratio = medians["jetstream"] / medians["sqlite"]
        print(f"JetStream / SQLite: {ratio:.2f}x (goal: within 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
