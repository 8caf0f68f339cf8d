"""A quiet member stays online on the others' screens: SDS sync suppression keeps its
syncs unsent while another member's syncs serve the channel, so the TUI sends a
``here`` presence notice every third of the online window (app/tui/presence.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui_helpers import T, start_peer, tui, wait_until

from app.node.events import Ephemeral
from app.node.transport import MemoryHub
from app.tui.presence import decode_presence, encode_presence


async def test_a_quiet_tui_is_heard_and_a_heartbeat_keeps_an_away_away(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    app = tui(tmp_path / "alice", hub.transport(), tick_interval=0.1)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            assert app.node is not None
            alice = app.node.sender_id

            def heartbeats() -> int:
                return sum(
                    isinstance(e, Ephemeral) and e.sender_id == alice
                    and decode_presence(e.content) == ("here", "")
                    for e in bob.events
                )  # fmt: skip

            await wait_until(lambda: heartbeats() > 0, what="alice's heartbeat at bob")
            assert any(p.sender_id == alice for p in bob.node.peers("general"))
            # bob says he is away, then his heartbeat comes: still away at alice's
            await bob.node.send_ephemeral("general", encode_presence("away", "bob", "lunch"))
            await wait_until(lambda: bob.node.sender_id in app.online.said, what="bob away")
            await bob.node.send_ephemeral("general", encode_presence("here", "bob"))
            await bob.say("still typing from the café")
            await wait_until(lambda: bob.node.sender_id in app.model.names, what="bob's line")
            await pilot.pause()
            assert app.online.said[bob.node.sender_id][0] == "away"
            assert app.online.away_text(bob.node.sender_id) == "away: lunch"
    finally:
        await bob.close()
