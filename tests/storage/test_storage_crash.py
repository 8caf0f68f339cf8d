"""Durability across a real ``kill -9``: typed messages survive, batches stay atomic."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from storage_testkit import python_child, run

from storage import DB_FILENAME, Batch, OwnState, Store, StoredMessage

CHILD_TIMEOUT_S = 30
MAX_CHILD_ITERATIONS = 100_000  # the child is killed long before; bounds it if not

ENQUEUE_FOREVER = """
import asyncio, sys
from storage import Store

async def main():
    store = await Store.open({data_dir!r})
    await store.join_channel("general", b"topic", is_public=True)
    print("ready", flush=True)
    for i in range({iterations}):
        local_id = await store.enqueue_outgoing("general", f"line {{i}}".encode())
        print(local_id, flush=True)

asyncio.run(main())
"""

SEND_FOREVER = """
import asyncio, hashlib
from storage import Batch, EventRow, OwnState, Store, StoredMessage

async def main():
    store = await Store.open({data_dir!r})
    await store.join_channel("general", b"topic", is_public=True)
    print("ready", flush=True)
    for i in range({iterations}):
        local_id = await store.enqueue_outgoing("general", f"line {{i}}".encode())
        print("enqueued", local_id, flush=True)
        message_id = hashlib.sha256(b"msg-%d" % local_id).hexdigest()
        batch = Batch()
        batch.record_sent(local_id, StoredMessage(
            "general", message_id, "me", 1000 + local_id, f"line {{i}}".encode(),
            envelope=b"E" * 2000, state=OwnState.QUEUED))
        batch.set_core_state("general", str(local_id).encode())  # "the core's clock"
        batch.add_event_rows([EventRow(wall_ms=local_id, kind="MessageSent",
                                       channel="general", message_id=message_id)])
        await store.commit_batch(batch)
        print("sent", local_id, flush=True)

asyncio.run(main())
"""


def kill_after(child: subprocess.Popen[str], wanted: int, prefix: str) -> list[str]:
    """Read the child's lines until ``wanted`` start with ``prefix``, then SIGKILL it."""
    assert child.stdout is not None
    seen: list[str] = []
    try:
        assert child.stdout.readline().strip() == "ready"
        for _ in range(MAX_CHILD_ITERATIONS):
            line = child.stdout.readline()
            if not line:
                break
            seen.append(line.strip())
            if sum(s.startswith(prefix) for s in seen) >= wanted:
                break
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(CHILD_TIMEOUT_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(CHILD_TIMEOUT_S)
    return seen


def quick_check(data_dir: Path) -> None:
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]


@pytest.mark.parametrize("wanted", [3, 60])
def test_enqueued_messages_survive_kill_9(tmp_path: Path, wanted: int) -> None:
    data_dir = tmp_path / "d"
    child = python_child(
        ENQUEUE_FOREVER.format(data_dir=str(data_dir), iterations=MAX_CHILD_ITERATIONS)
    )
    reported = [int(s) for s in kill_after(child, wanted, "")]
    assert len(reported) >= wanted

    async def after_restart() -> None:
        async with await Store.open(data_dir) as store:  # the lock died with the child
            pending = await store.pending_outgoing()
            local_ids = [p.local_id for p in pending]
            assert set(reported) <= set(local_ids)  # every acknowledged enqueue is there
            assert local_ids == list(range(1, len(local_ids) + 1))
            assert [p.content for p in pending] == [
                f"line {i}".encode() for i in range(len(pending))
            ]

    run(after_restart)
    quick_check(data_dir)


@pytest.mark.parametrize("wanted", [2, 40])
def test_send_protocol_is_atomic_across_kill_9(tmp_path: Path, wanted: int) -> None:
    data_dir = tmp_path / "d"
    child = python_child(
        SEND_FOREVER.format(data_dir=str(data_dir), iterations=MAX_CHILD_ITERATIONS)
    )
    lines = kill_after(child, wanted, "sent")
    sent = [int(s.split()[1]) for s in lines if s.startswith("sent")]
    enqueued = [int(s.split()[1]) for s in lines if s.startswith("enqueued")]

    async def after_restart() -> None:
        async with await Store.open(data_dir) as store:
            state = await store.load_core_state("general")
            assert state is not None
            last_sent = int(state)
            assert last_sent >= max(sent)
            log = [e async for e in store.iter_log("general")]
            # Core state, messages and events were committed together: they agree.
            assert len(log) == last_sent == await store.count_events()
            assert all(e.state is OwnState.QUEUED for e in log)
            pending = await store.pending_outgoing()
            # At most the one message typed after the last recorded send is pending.
            assert [p.local_id for p in pending] in ([], [last_sent + 1])
            assert set(enqueued) <= set(range(1, last_sent + 2))

            # The node's restart: produce what is pending (fresh ids), exactly once.
            for p in pending:
                message = StoredMessage(
                    "general", f"{p.local_id:064x}", "me", 10**6, p.content, state=OwnState.QUEUED
                )
                batch = Batch()
                batch.record_sent(p.local_id, message)
                batch.set_core_state("general", str(p.local_id).encode())
                await store.commit_batch(batch)
            assert await store.pending_outgoing() == []
            log = [e async for e in store.iter_log("general")]
            assert len(log) == len({e.message_id for e in log}) == last_sent + len(pending)
            contents = sorted(e.content for e in log)
            assert len(set(contents)) == len(contents)  # no typed line produced twice

    run(after_restart)
    quick_check(data_dir)


SEND_IN_ONE_COMMIT = """
import asyncio, hashlib
from storage import Batch, OwnState, Store, StoredMessage

async def main():
    store = await Store.open({data_dir!r})
    await store.join_channel("general", b"topic", is_public=True)
    local_id = await store.next_local_id()
    print("ready", flush=True)
    for i in range({iterations}):
        message_id = hashlib.sha256(b"msg-%d" % local_id).hexdigest()
        batch = Batch()
        batch.record_typed(local_id, StoredMessage(
            "general", message_id, "me", 1000 + local_id, f"line {{i}}".encode(),
            envelope=b"E" * 2000, state=OwnState.QUEUED))
        batch.set_core_state("general", str(local_id).encode())
        await store.commit_batch(batch)
        print("durable", local_id, flush=True)  # only now may it be broadcast
        local_id += 1

asyncio.run(main())
"""


@pytest.mark.parametrize("wanted", [2, 40])
def test_one_commit_send_is_atomic_and_durable_across_kill_9(tmp_path: Path, wanted: int) -> None:
    """record_typed: the line, its message id, the message and the state in one fsynced
    commit; after kill -9 every line reported durable is there with its message, and
    nothing is half-recorded (no pending line, no message without its outbox entry)."""
    data_dir = tmp_path / "d"
    child = python_child(
        SEND_IN_ONE_COMMIT.format(data_dir=str(data_dir), iterations=MAX_CHILD_ITERATIONS)
    )
    durable = [int(s.split()[1]) for s in kill_after(child, wanted, "durable")]
    assert len(durable) >= wanted

    async def after_restart() -> None:
        async with await Store.open(data_dir) as store:
            state = await store.load_core_state("general")
            assert state is not None and int(state) >= max(durable)
            log = [e async for e in store.iter_log("general")]
            assert len(log) == int(state)  # messages and state committed together
            assert {e.content for e in log} >= {f"line {i - 1}".encode() for i in durable}
            assert await store.pending_outgoing() == []
            envelopes = await store.get_envelopes("general", [e.message_id for e in log])
            assert len(envelopes) == len(log)  # queued own messages keep their envelope
            assert await store.next_local_id() == int(state) + 1

    run(after_restart)
    quick_check(data_dir)
