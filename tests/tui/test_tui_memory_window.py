"""The TUI's SDS core keeps a smaller log window than a node's default (issue 27 item
12: it was the largest part of a TUI's memory after 20,000 messages): what it no longer
holds is found in SQLite, and a copy of an older message is not shown twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui_helpers import FAST, T, start_peer, texts, tui, wait_until

import sds
from app.node.transport import MemoryHub
from app.tui.run import TUI_LOG_WINDOW, tui_protocol


def test_the_tui_core_window_is_small_unless_the_config_file_sets_it() -> None:
    assert tui_protocol(sds.Config(), {}).log_window == TUI_LOG_WINDOW == 2_000
    assert tui_protocol(sds.Config.waku(), {}).log_window == TUI_LOG_WINDOW
    # the rest of the protocol is the node's
    assert tui_protocol(sds.Config(), {}).with_changes(log_window=10_000) == sds.Config()
    # [protocol] log_window in the config file wins, larger or smaller
    file_set = sds.Config().with_changes(log_window=50_000)
    assert tui_protocol(file_set, {"log_window": 50_000}).log_window == 50_000
    small = sds.Config().with_changes(log_window=500)
    assert tui_protocol(small, {}).log_window == 500


async def test_a_copy_of_a_message_beyond_the_window_is_not_shown_twice(tmp_path: Path) -> None:
    """alice's core keeps 30 ids; bob's 40 lines arrive; after a restart (no replay
    memory) bob's first envelope comes again: counted as a duplicate, one row."""
    config = FAST.with_changes(log_window=30)
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    try:
        app = tui(tmp_path / "alice", hub.transport(), config=config)
        async with app.run_test(size=(100, 30)):
            await asyncio.wait_for(app.ready.wait(), T(20))
            for i in range(40):
                await bob.say(f"line {i}")
            await wait_until(lambda: "line 39" in texts(app) and "line 0" in texts(app),
                             what="bob's 40 lines at alice")  # fmt: skip
            assert app.node is not None
            core = app.node.core("general")
            assert core.log_size >= 40 and len(core.log_ids()) <= 30
        first = next(
            e for e in bob.events
            if getattr(e, "text", None) == "line 0" and getattr(e, "message_id", None)
        )  # fmt: skip
        envelope = (await bob.node.store.get_envelopes("general", [first.message_id]))[
            first.message_id
        ]
        app = tui(tmp_path / "alice", hub.transport(), config=config)
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            assert app.node is not None
            node = app.node
            assert not node.core("general").has_message(first.message_id)
            await bob.transport.publish(envelope)
            await wait_until(lambda: node.counters["duplicate_messages"] >= 1,
                             what="the copy settled against SQLite")  # fmt: skip
            await pilot.pause()
            assert texts(app).count("line 0") == 1
    finally:
        await bob.close()
