"""SQLite bytes per stored message at steady state, schema 1 (previous) vs schema 2 (lean).

Usage::

    .venv/bin/python bench/storage_bytes.py --compare /work/main [--messages 6000]

Builds real envelopes (two SDS cores conversing, sealed; ``bench/store_data.py``)
for two profiles, ``waku`` (js-waku's sizes: 200-id history, 10,000-entry
filter, ~45 KB envelopes) and ``small`` (history 10, filter 1,000), then writes
them into a fresh data directory the way a node does for received messages:
through :class:`storage.Store`, one batch per 16 messages, each message with its
content, causal history, retrieval hint and envelope, and one
``MessageDelivered`` event row (``storage.events.event_row`` of a real core
event, as the node logs it).

Each version runs in a subprocess of its own (``--code=DIR``: the sdschat tree
it imports), with the default recent window for schema 2 (2,000 per channel)
unless ``--window`` is given. The database is closed (WAL checkpointed and
removed) at two points, after ``N/2`` and after ``N`` messages, and measured:

* ``B/msg total``: the file over the messages it holds at N;
* ``B/msg marginal``: (size at N - size at N/2) / (N/2): what each further
  message costs once the window is full (schema 2) - the steady state;
* ``window``: bytes of the ``recent`` table and its indexes (schema 2);
* ``content``: the content bytes per message (the text itself, ~45 B here).

Choose ``--messages`` above twice the window for the marginal figure to be the
steady state (the default, 6,000 with a window of 2,000, is).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
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
from net.channel_key import TEST_KDF, derive_channel_key
from net.envelope import open_envelope
from storage import Batch, Store, StoredMessage
from storage.events import event_row

PROFILES = {"waku": (200, 10_000), "small": (10, 1_000)}
BATCH = 16


def _sizes(data_dir: Path) -> tuple[int, int]:
    path = data_dir / "sdschat.db"
    window = 0
    with contextlib.closing(sqlite3.connect(path)) as db:
        for name, size in db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            if name == "recent" or str(name).startswith("recent_"):
                window += int(size)
    return path.stat().st_size, window


async def _write(data_dir: Path, rows: list[tuple[StoredMessage, object]], window: int | None,
                 start: int, end: int) -> None:  # fmt: skip
    kwargs = {} if window is None else {"recent_window": window}
    store = await Store.open(data_dir, **kwargs)  # type: ignore[arg-type]
    try:
        if start == 0:
            await store.join_channel("bench", b"topic", is_public=False)
        for i in range(start, end, BATCH):
            batch = Batch()
            for message, event in rows[i : min(end, i + BATCH)]:
                batch.insert_message(message)
                batch.add_event_rows([event_row(event, 1_700_000_000_000 + i)])
            await store.commit_batch(batch)
    finally:
        await store.close()


def child(args: argparse.Namespace) -> int:
    history, bloom = PROFILES[args.profile]
    cfg = sds.Config(causal_history_size=history, bloom_capacity=bloom)
    key = derive_channel_key("bench", None, params=TEST_KDF)
    hist = make_history(key, args.messages, config=cfg)
    # what a receiving node stores: the core's MessageDelivered event for each envelope
    receiver = sds.Participant("f" * 64, cfg)
    chan = receiver.join("bench", 1_700_000_000_000)
    rows: list[tuple[StoredMessage, object]] = []
    for env, digest in zip(hist.envelopes, hist.hashes, strict=True):
        opened = open_envelope(env, key)
        chan.receive(opened.sds_bytes, 1_700_000_000_000, digest)
        for ev in receiver.events():
            if isinstance(ev, sds.MessageDelivered):
                message = StoredMessage(
                    channel="bench", message_id=ev.message_id, sender_id=ev.sender_id,
                    lamport=ev.lamport, content=ev.content, causal_history=ev.causal_history,
                    retrieval_hint=ev.retrieval_hint, envelope=env, delivered_at=1, received_at=1,
                )  # fmt: skip
                rows.append((message, ev))
        receiver.datagrams_to_send()
    n = len(rows)
    half = n // 2
    content = sum(len(m.content) for m, _ in rows) / n
    with tempfile.TemporaryDirectory(prefix="sdschat-bytes-") as tmp:
        d = Path(tmp) / "node"
        asyncio.run(_write(d, rows, args.window, 0, half))
        size_half, _ = _sizes(d)
        asyncio.run(_write(d, rows, args.window, half, n))
        size, window = _sizes(d)
    envelope = sum(map(len, hist.envelopes)) / n
    print(json.dumps({
        "messages": n, "envelope": envelope, "content": content, "total": size / n,
        "marginal": (size - size_half) / (n - half), "window": window,
    }))  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=6000)
    ap.add_argument("--compare", metavar="DIR", help="another checkout (schema 1), side by side")
    ap.add_argument("--window", type=int, help="recent window of schema 2 (default: its own)")
    ap.add_argument("--code", help="=DIR: the sdschat tree to import (set before parsing)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", choices=tuple(PROFILES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    here = str(Path(__file__).resolve().parents[1])
    versions = [("this", here)]
    if args.compare:
        versions.insert(0, ("previous", str(Path(args.compare).resolve())))
    print(describe())
    print(f"{args.messages:,} messages per run, one batch per {BATCH}, one event row each")
    print("| version | profile | envelope | content | B/msg total | B/msg marginal | window |")
    print("|---|---|---|---|---|---|---|")
    for prof in PROFILES:
        for name, code in versions:
            argv = [sys.executable, __file__, f"--code={code}", "--child", "--profile", prof,
                    "--messages", str(args.messages)]  # fmt: skip
            if args.window is not None and name == "this":
                argv += ["--window", str(args.window)]
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=3600,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, cwd=tempfile.gettempdir(),
            )  # fmt: skip
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            r = json.loads(done.stdout.strip().splitlines()[-1])
            window_mb = r["window"] / 1e6
            print(f"| {name} | {prof} | {r['envelope']:,.0f} B | {r['content']:,.0f} B | "
                  f"{r['total']:,.0f} | {r['marginal']:,.0f} | {window_mb:,.1f} MB |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
