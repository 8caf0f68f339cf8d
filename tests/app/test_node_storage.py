"""The node over lean storage: a missing database beside an identity is refused unless
``--new-history``; a node's messages outside the recent window keep a compact row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.node import Node, NodeOptions
from app.transport import MemoryHub
from storage import MissingHistoryError, Store
from tests.app.app_helpers import run, start_node, wait_until

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
