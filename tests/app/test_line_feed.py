"""Headless lines at EOF (issue 26 §9): the feed drains until every line read left, and
names the ones that could not (the headless mode then exits 6)."""

from __future__ import annotations

from pathlib import Path

from app_helpers import run, start_node

from app.headless.line_feed import LineFeed
from app.node.events import NodeEvent
from app.node.transport import MemoryHub


def test_drain_names_the_lines_that_did_not_leave_and_waits_for_those_that_do(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        hub = MemoryHub()
        h = await start_node(tmp_path / "a", hub, name="alice")
        told: list[NodeEvent] = []
        try:
            feed = LineFeed(h.node, told.append, idle_s=0.5)
            hub.set_online(False)
            for n in (1, 2):
                await feed.admit("general")
                feed.post(n, "general", f"offline {n}", "msg")
            unsent = await feed.drain()  # nothing can leave: named after 0.5 s idle
            assert [(u.number, u.state) for u in unsent] == [(1, "logged"), (2, "logged")]
            assert all(u.local_id is not None for u in unsent)  # durable, in the outbox
            hub.set_online(True)  # reconnection republishes them: they leave
            feed.idle_s = 30.0
            assert await feed.drain() == []
        finally:
            await h.node.close()

    run(body())
