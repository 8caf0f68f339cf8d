"""Issue 41 (daily use, round three): what a daily user hit in one afternoon, each
driven through the real app (Textual's pilot) beside real nodes on an in-memory hub."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_helpers import T, start_peer, texts, tui, type_line, wait_until

from app.node.events import InviteMade
from app.node.transport import MemoryHub

pytestmark = pytest.mark.timeout(120)


async def test_the_log_file_keeps_chat_not_key_housekeeping(tmp_path: Path) -> None:
    """Item 10: team.log had "<carol> shared keys": a members channel's key shares and
    rekeys are no chat; the lines are."""
    from app.tui.chatlog import LogSettings
    from app.tui.config import TuiConfig

    logs = tmp_path / "logs"
    hub = MemoryHub()
    app = tui(tmp_path / "alice", hub.transport(), channels=("team",), create=True,
              tui_config=TuiConfig(log=LogSettings(True, str(logs))))  # fmt: skip
    carol = await start_peer(tmp_path / "carol", hub, "carol", seed=3, channels=())
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            node = app.node
            assert node is not None
            made: list[InviteMade] = []
            node.subscribe(lambda e: made.append(e) if isinstance(e, InviteMade) else None)
            await type_line(pilot, "/invite")
            await wait_until(lambda: bool(made), what="an invite code")
            await pilot.press("escape")
            await carol.node.join_by_invite(made[0].code, timeout_s=T(20))
            await carol.node.send("team", "hello from carol")
            await wait_until(lambda: "hello from carol" in texts(app), what="carol's line")
            await type_line(pilot, "and alice answers")
            path = logs / "team.log"
            await wait_until(lambda: path.exists() and "alice answers" in path.read_text(),
                             what="the log file")  # fmt: skip
            text = path.read_text()
            assert "<carol> hello from carol" in text
            assert "shared keys" not in text and "new key" not in text, text
    finally:
        await carol.close()
