"""Catch-up time: a node that missed N messages gets them from a store peer on loopback.

Usage::

    .venv/bin/python bench/store_catchup.py [--messages 10000] [--repeat 3]
        [--history 200] [--bloom 10000]

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
``--history``/``--bloom`` shrink the protocol's per-message overhead to show
how catch-up time follows message size.

``--compare DIR`` measures another checkout's node (e.g. ``/work/main``) side
by side: the envelopes are built once per profile (``waku``: history 200,
filter 10,000; ``small``: history 10, filter 1,000), and for each of
``--repeat`` rounds a fresh subprocess per (profile, version), alternated,
runs one catch-up with ``--code=DIR`` (the sdschat tree it imports; the store
process is this checkout's in both).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(  # --code=DIR: the sdschat tree to import (another version to compare)
    0,
    next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--code=")), None)
    or str(Path(__file__).resolve().parents[1]),
)

from machine import describe
from store_data import make_history
from store_query import fill, start_store

import sds
import storage.store as storage_store
from app.node import Node, NodeOptions
from app.node_events import CatchUp, Delivered
from app.transport import MemoryHub
from net import runner
from net.channel_key import TEST_KDF, derive_channel_key
from net.envelope import envelope_hash

PROFILES = {"waku": (200, 10_000), "small": (10, 1_000)}

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
    receive = Node._receive

    def timed_receive(self, *a, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return receive(self, *a, **k)
        finally:
            SPLIT["receive"] += time.perf_counter() - t

    Node._receive = timed_receive  # type: ignore[method-assign]


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


def compare(args: argparse.Namespace) -> int:
    """Alternate fresh subprocesses (previous, this) per profile, ``--repeat`` rounds."""
    key = derive_channel_key("bench", None, params=TEST_KDF)
    versions = {"previous": str(Path(args.compare).resolve()),
                "this": str(Path(__file__).resolve().parents[1])}  # fmt: skip
    print(describe())
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-env-") as tmp:
        files = {}
        for prof, (history, bloom) in PROFILES.items():
            cfg = sds.Config(causal_history_size=history, bloom_capacity=bloom)
            hist = make_history(key, args.messages, config=cfg)
            files[prof] = Path(tmp) / f"{prof}.bin"
            with files[prof].open("wb") as f:
                for e in hist.envelopes:
                    f.write(len(e).to_bytes(4, "big") + e)
            kb = sum(map(len, hist.envelopes)) / len(hist.envelopes) / 1e3
            print(f"profile {prof}: {args.messages:,} envelopes of ~{kb:.1f} KB")
        for r in range(args.repeat):
            for prof, (history, bloom) in PROFILES.items():
                order = list(versions.items())
                for name, code in order if r % 2 == 0 else order[::-1]:
                    argv = [sys.executable, __file__, f"--code={code}", "--repeat", "1",
                            "--messages", str(args.messages), "--history", str(history),
                            "--bloom", str(bloom), "--envelopes", str(files[prof])]  # fmt: skip
                    done = subprocess.run(
                        argv, capture_output=True, text=True, timeout=1800, cwd=tmp,
                        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                    )  # fmt: skip
                    found = re.search(r"median ([0-9.]+) s", done.stdout)
                    if done.returncode != 0 or found is None:
                        print(done.stdout[-2000:], done.stderr[-3000:], file=sys.stderr)
                        return 1
                    results.setdefault((name, prof), []).append(float(found.group(1)))
                    run_line = [ln for ln in done.stdout.splitlines() if "run 1:" in ln]
                    print(f"  round {r + 1}, {prof}, {name}: {run_line[0].strip()}")
    print(f"catch-up of {args.messages:,} messages, medians of {args.repeat} alternated rounds:")
    for prof in PROFILES:
        cells = ", ".join(
            f"{name} {statistics.median(results[(name, prof)]):.2f} s "
            f"({', '.join(f'{t:.2f}' for t in results[(name, prof)])})"
            for name in versions
        )
        print(f"  {prof}: {cells}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--history", type=int, default=200, help="causal_history_size")
    ap.add_argument("--bloom", type=int, default=10_000, help="bloom_capacity")
    ap.add_argument("--compare", metavar="DIR", help="another checkout to measure alternately")
    ap.add_argument("--code", help="=DIR: the sdschat tree to import (set before parsing)")
    ap.add_argument("--envelopes", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compare:
        return compare(args)
    cfg = sds.Config(causal_history_size=args.history, bloom_capacity=args.bloom)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    if args.envelopes:
        data = Path(args.envelopes).read_bytes()
        envelopes, i = [], 0
        while i < len(data):
            size = int.from_bytes(data[i : i + 4], "big")
            envelopes.append(data[i + 4 : i + 4 + size])
            i += 4 + size
        hashes = [envelope_hash(e) for e in envelopes]
    else:
        hist = make_history(key, args.messages, config=cfg)
        envelopes, hashes = hist.envelopes, hist.hashes
    mb = sum(map(len, envelopes)) / 1e6
    print(f"{args.messages:,} envelopes, {mb:.0f} MB ({mb * 1e3 / args.messages:.1f} KB avg; "
          f"history {args.history}, bloom capacity {args.bloom:,})")
    print(describe())
    _instrument()
    with tempfile.TemporaryDirectory(prefix="sdschat-bench-") as tmp:
        root = Path(tmp)
        asyncio.run(fill(root / "store", key.topic, envelopes, hashes))
        proc, url = start_store(root / "store", key.topic)
        times = []
        splits = []
        try:
            for r in range(args.repeat):
                SPLIT.clear()
                times.append(runner.run(  # the product's loop (uvloop where installed)
                    catch_up_once(root / f"node{r}", url, key, args.messages, cfg)
                ))
                splits.append(dict(SPLIT))
                print(f"  run {r + 1}: {times[-1]:.2f} s "
                      f"(receive {SPLIT['receive']:.2f} s, commits {SPLIT['commit']:.2f} s, "
                      f"node CPU {SPLIT['cpu']:.2f} s)")
        finally:
            proc.terminate()
            proc.wait(30)
    store_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"  the store's process, start to stop ({args.repeat} catch-ups): "
          f"CPU {store_cpu.ru_utime:.2f} s user + {store_cpu.ru_stime:.2f} s system "
          "(its start-up included)")
    t = statistics.median(times)
    print(f"catch-up of {args.messages:,} messages: median {t:.2f} s "
          f"({args.messages / t:,.0f} messages/s, {mb / t:.0f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
