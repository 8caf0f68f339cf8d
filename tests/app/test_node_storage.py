"""The node over lean storage: a missing database beside an identity is refused unless
``--new-history``; a node's messages outside the recent window keep a compact row."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sds
from app.chat.history import read_history
from app.node.runtime import Node, NodeOptions
from app.node.transport import MemoryHub, Transport
from storage import Batch, MissingHistoryError, Store
from tests.app.app_helpers import crash, run, start_node, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_database_beside_the_identity_is_refused_unless_new_history(
    tmp_path: Path,
) -> None:
    d = tmp_path / "a"

    async def main() -> None:
        a = await start_node(d, MemoryHub(), name="alice")
        await a.node.send("general", "before")
        sender = a.node.sender_id
        await a.node.close()
        for name in ("sdschat.db", "sdschat.db-wal", "sdschat.db-shm"):
            (d / name).unlink(missing_ok=True)
        with pytest.raises(MissingHistoryError, match="--new-history"):
            await Node.open(d, MemoryHub().transport())
        assert not (d / "sdschat.db").exists()  # nothing created
        node = await Node.open(d, MemoryHub().transport(), options=NodeOptions(new_history=True))
        assert node.sender_id == sender  # the same participant, a new (empty) history
        assert await node.store.count_messages("general") == 0
        await node.close()
        # and from then on it is an ordinary data directory
        node = await Node.open(d, MemoryHub().transport())
        await node.close()
        # a key put into a new directory before its first start is not a lost history
        fresh = tmp_path / "fresh"
        fresh.mkdir()
        (fresh / "identity.pem").write_bytes((d / "identity.pem").read_bytes())
        (fresh / "identity.pem").chmod(0o600)
        node = await Node.open(fresh, MemoryHub().transport())
        assert node.sender_id == sender
        await node.close()

    run(main())


def test_sdschat_join_refuses_a_missing_database_with_a_clear_message(tmp_path: Path) -> None:
    d = tmp_path / "a"

    async def main() -> None:
        a = await start_node(d, MemoryHub(), name="alice")
        await a.node.close()

    run(main())
    (d / "sdschat.db").unlink()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "join", "general", "--headless", "--data-dir", str(d),
         "--relay", "ws://127.0.0.1:9"],
        input="", capture_output=True, text=True, env=env, timeout=60,
    )
    assert done.returncode != 0
    assert "--new-history" in done.stdout + done.stderr
    assert not (d / "sdschat.db").exists()


def test_old_messages_keep_a_compact_row_and_the_recent_ones_their_envelope(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", recent_window=5)
        b = await start_node(tmp_path / "b", hub, name="bob", recent_window=5)
        try:
            for i in range(30):
                await a.node.send("general", f"line {i}")
            await wait_until(lambda: len(b.texts()) == 30, what="30 deliveries")
            await wait_until(lambda: not a.node.core("general").outgoing_ids(), 20, "acks")
            await a.node.send("general", "one more")  # prunes now that all are acknowledged
            await wait_until(lambda: len(b.texts()) == 31, what="31st")
            for h in (a, b):
                store: Store = h.node.store
                log = await store.page("general", limit=100)
                assert [e.content for e in log][-1].endswith(b'"text":"one more"}')
                assert len(log) == 31 and not any(e.damaged for e in log)
                envs = await store.get_envelopes("general", [e.message_id for e in log])
                assert 5 <= len(envs) <= 6  # the window (its pruning runs every size//16)
                assert set(envs) <= {e.message_id for e in log[-7:]}
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def test_a_typed_line_costs_one_fsync(tmp_path: Path) -> None:
    """The line, its message, its envelope and the outbox entry: one fsynced commit
    (it was two: the outbox first, then the produced message)."""

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        fsynced: list[int] = []
        commit = a.node.store.commit_batch

        async def counting(batch: Batch, **kw: Any) -> Any:
            if batch.needs_fsync:
                lines = len(getattr(batch, "typed", ())) + len(batch.enqueues)
                fsynced.append(lines + len(batch.sent))
            return await commit(batch, **kw)

        commit_now = a.node.store.commit_batch_now

        def counting_now(batch: Batch, **kw: Any) -> Any:  # small rounds commit inline
            result = commit_now(batch, **kw)
            if result is not None and batch.needs_fsync:  # None: not done, goes to the thread
                lines = len(getattr(batch, "typed", ())) + len(batch.enqueues)
                fsynced.append(lines + len(batch.sent))
            return result

        a.node.store.commit_batch = counting  # type: ignore[method-assign]
        a.node.store.commit_batch_now = counting_now  # type: ignore[method-assign]
        try:
            for i in range(3):
                await a.node.send("general", f"line {i}")
            await wait_until(lambda: len(b.texts()) == 3, what="3 deliveries")
            assert fsynced == [1, 1, 1]
            async with asyncio.timeout(5):
                pending = await a.node.store.pending_outgoing()
            assert pending == []
        finally:
            await a.node.close()
            await b.node.close()
        log = read_history(tmp_path / "a", "general")
        assert [x.text for x in log] == ["line 0", "line 1", "line 2"]

    run(main())


def test_small_rounds_commit_on_the_loop_thread_large_ones_on_sqlites(tmp_path: Path) -> None:
    """A round of a few messages (a quiet or busy chat) is committed on the loop's
    thread, without the two thread switches to aiosqlite's thread and back; a round
    of more than ``inline_commit_messages`` (a catch-up) still goes to that thread,
    overlapping the next round. Both are delivered and logged the same way."""

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob", inline_commit_messages=2)
        inline: list[int] = []
        threaded: list[int] = []
        commit, commit_now = b.node.store.commit_batch, b.node.store.commit_batch_now

        async def counting(batch: Batch, **kw: Any) -> Any:
            threaded.append(len(batch.messages))
            return await commit(batch, **kw)

        def counting_now(batch: Batch, **kw: Any) -> Any:
            result = commit_now(batch, **kw)
            if result is not None:
                inline.append(len(batch.messages))
            return result

        b.node.store.commit_batch = counting  # type: ignore[method-assign]
        b.node.store.commit_batch_now = counting_now  # type: ignore[method-assign]
        try:
            await a.node.send("general", "one")
            await wait_until(lambda: len(b.texts()) == 1, what="1 delivery")
            assert 1 in inline and not any(threaded)
            for i in range(5):  # 5 lines at once: one round of more than 2 messages
                a.node.post("general", f"burst {i}")
            await wait_until(lambda: len(b.texts()) == 6, what="6 deliveries")
            assert max(threaded) > 2 and max(inline) <= 2
        finally:
            await a.node.close()
            await b.node.close()
        assert [x.text for x in read_history(tmp_path / "b", "general")] == [
            "one",
            *(f"burst {i}" for i in range(5)),
        ]

    run(main())


class _HeldTransport:
    """Wraps a transport; the first publish waits forever (a process about to die)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.publishing = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def publish(self, envelope: bytes) -> bool:
        self.publishing.set()
        await asyncio.Event().wait()  # never returns: the node is killed meanwhile
        return False


def test_a_crash_between_durable_and_broadcast_loses_nothing(tmp_path: Path) -> None:
    """The line is durable (its future resolved, its message and envelope committed)
    before its envelope goes to the transport; killed right there, the restarted
    node sends the same message: delivered once, never twice, never lost."""

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        held = _HeldTransport(hub.transport())
        a = await start_node(tmp_path / "a", transport=held, name="alice")  # type: ignore[arg-type]
        future = a.node.post("general", "durable before broadcast")
        async with asyncio.timeout(10):
            await held.publishing.wait()
        assert future.done() and future.result() >= 1  # durable first
        assert b.texts() == []
        await crash(a.node)  # kill -9 between the commit and the broadcast
        a2 = await start_node(tmp_path / "a", hub, name="alice")
        try:
            await wait_until(lambda: b.texts() == ["durable before broadcast"], 10, "delivery")
            await asyncio.sleep(0.3)
            assert b.texts() == ["durable before broadcast"]  # once
            assert await a2.node.store.pending_outgoing() == []  # not produced again
        finally:
            await a2.node.close()
            await b.node.close()
        log = read_history(tmp_path / "a", "general")
        assert [x.text for x in log] == ["durable before broadcast"]

    run(main())


def test_a_node_makes_small_pages_for_small_envelopes_and_large_for_waku_sizes(
    tmp_path: Path,
) -> None:
    """The default sizes (~1.5 KB envelopes) get 4 KB pages: each one-message round
    writes about nine pages to the WAL, and a typed line fsyncs them before it is sent.
    js-waku's sizes (~46 KB envelopes) keep 16 KB pages (fewer overflow pages)."""
    async def main() -> None:
        for name, config in (("default", sds.Config()), ("waku", sds.Config.waku())):
            h = await start_node(tmp_path / name, MemoryHub(), config=config)
            await h.node.send("general", "hello")
            await h.node.close()

    run(main())
    sizes = {}
    for name in ("default", "waku"):
        header = (tmp_path / name / "sdschat.db").read_bytes()[16:18]
        sizes[name] = int.from_bytes(header, "big")
    assert sizes == {"default": 4096, "waku": 16384}
