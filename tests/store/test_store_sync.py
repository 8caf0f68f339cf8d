"""The node side of a store: catching up page by page, fetching missing dependencies."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path

from store_helpers import channel, run, sealed

from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer
from net.store_sync import STATE_FILE, CatchUpProgress, StoreSync

KEY = channel("room")
QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)


@dataclass
class Entry:
    message_id: str
    retrieval_hint: bytes | None


class FakeNode:
    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.progress: list[CatchUpProgress] = []
        self.barriers = 0

    async def deliver(self, env: bytes) -> None:
        self.received.append(env)

    async def barrier(self) -> None:
        self.barriers += 1


def sync_for(peer: StorePeer, node: FakeNode, data_dir: Path, **kw: object) -> StoreSync:
    return StoreSync(
        peer.url, deliver=node.deliver, progress=node.progress.append, barrier=node.barrier,
        data_dir=data_dir, **kw,  # type: ignore[arg-type]
    )


def test_catch_up_pages_resumes_from_its_cursor_and_reports_progress(tmp_path: Path) -> None:
    async def main() -> None:
        ident = Identity.generate()
        items = [sealed(ident, KEY, f"m{i}", i) for i in range(1200)]
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,), listen=("127.0.0.1", 0),
                              stats_interval_s=0)
        async with StorePeer(cfg, logger=QUIET) as peer:
            for env, _ in items:
                await peer.ingest(env)
            node = FakeNode()
            sync = sync_for(peer, node, tmp_path, page_size=100, progress_interval_s=0)
            assert await sync.catch_up("room", KEY.topic) == 1200
            assert sorted(node.received) == sorted(e for e, _ in items)
            states = [p.state for p in node.progress]
            assert states[0] == "started" and states[-1] == "done"
            running = [p for p in node.progress if p.state == "running"]
            assert [p.done for p in running] == list(range(100, 1201, 100))
            assert all(p.total == 1200 for p in running)
            assert running[3].text == "catching up · 400 / 1,200"
            assert node.progress[-1].text == "caught up · 1,200 from the store"
            assert node.barriers >= 12
            await sync.close()
            saved = json.loads((tmp_path / STATE_FILE).read_text())
            pos = saved["stores"][f"archive:{peer.archive.archive_id.hex()}"][KEY.topic.hex()]
            assert pos["cursor"][0] > 0 and pos["online_until"] > 0

            # later: 50 more arrive; a new sync (restarted node) gets only those
            for env, _ in [sealed(ident, KEY, f"late{i}", 5000 + i) for i in range(50)]:
                await peer.ingest(env)
            node2 = FakeNode()
            sync2 = sync_for(peer, node2, tmp_path, page_size=100, margin_ms=0)
            assert await sync2.catch_up("room", KEY.topic) == 50
            assert node2.progress[-1].total == 50
            await sync2.close()

    run(main(), 60)


def test_missing_dependencies_are_fetched_by_hint_with_backoff(tmp_path: Path) -> None:
    async def main() -> None:
        ident = Identity.generate()
        items = [sealed(ident, KEY, f"m{i}", i) for i in range(300)]
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,), listen=("127.0.0.1", 0),
                              stats_interval_s=0, max_hashes=64)
        async with StorePeer(cfg, logger=QUIET) as peer:
            for env, _ in items[:250]:
                await peer.ingest(env)
            node = FakeNode()
            sync = sync_for(peer, node, tmp_path, fetch_attempts=4, backoff_base=0.05,
                            backoff_max=0.1)
            sync.start()
            entries = [Entry(f"{i:064x}", h) for i, (_, h) in enumerate(items)]
            entries.append(Entry("no-hint", None))
            sync.note_missing("room", entries)
            # the node found the first 10 locally; it asks the store for the rest
            assert sync.request("room", [e.message_id for e in entries[10:]]) == 290
            for _ in range(200):  # bounded
                if len(node.received) == 240:
                    break
                await asyncio.sleep(0.02)
            assert sorted(node.received) == sorted(e for e, _ in items[10:250])
            # the last 50 are not in the store yet; one arrives there while we retry
            await peer.ingest(items[260][0])
            for _ in range(200):  # bounded
                if sync.wanted == 0:
                    break
                await asyncio.sleep(0.02)
            assert sync.wanted == 0
            assert items[260][0] in node.received
            assert sync.counters["fetched"] == 241
            assert sync.counters["fetch_given_up"] == 49
            assert sync.counters["fetch_queries"] >= 4  # one per backoff round
            await sync.close()

    run(main(), 60)


def test_unreachable_store_fails_the_catch_up_with_a_reason(tmp_path: Path) -> None:
    async def main() -> None:
        node = FakeNode()
        sync = StoreSync("ws://127.0.0.1:9", deliver=node.deliver, progress=node.progress.append,
                         catchup_attempts=2, backoff_base=0.01, backoff_max=0.02)
        assert await sync.catch_up("room", KEY.topic) == 0
        assert node.progress[-1].state == "failed"
        assert "reach" in (node.progress[-1].detail or "")
        assert sync.counters["store_unavailable"] == 2
        await sync.close()

    run(main(), 30)


def test_fetching_waits_while_a_catch_up_runs(tmp_path: Path) -> None:
    async def main() -> None:
        ident = Identity.generate()
        items = [sealed(ident, KEY, f"m{i}", i) for i in range(40)]
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,), listen=("127.0.0.1", 0),
                              stats_interval_s=0)
        async with StorePeer(cfg, logger=QUIET) as peer:
            for env, _ in items:
                await peer.ingest(env)
            received: list[bytes] = []

            async def slow_deliver(env: bytes) -> None:
                await asyncio.sleep(0.01)
                received.append(env)

            sync = StoreSync(peer.url, deliver=slow_deliver, page_size=10, fetch_delay_s=0.01)
            sync.start()
            sync.note_missing("room", [Entry("late", items[-1][1])])
            sync.catch_up_soon("room", KEY.topic)
            sync.request("room", ["late"])  # the catch-up will bring it: no fetch meanwhile
            await asyncio.sleep(0.2)
            assert sync.counters["fetch_queries"] == 0 and len(received) < 40
            for _ in range(200):  # bounded
                if sync.wanted == 0:
                    break
                await asyncio.sleep(0.02)
            assert len(received) >= 40
            await sync.close()

    run(main(), 30)
