"""The input line while earlier lines are still being carried out (found by the tmux
end-to-end test, ``test_tui_e2e_tmux_content.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tui_helpers import alice_and_bob, wait_until

from app.tui.widgets.chat_input import ChatInput


async def test_a_late_refusal_does_not_put_back_a_line_submitted_before_a_newer_one(
    tmp_path: Path,
) -> None:
    """A refused line goes back into the input only when nothing was submitted after
    it. Before: ``/save`` (no file yet) refused late, after Enter on the next line,
    found the input empty and put the OLD line back; what was typed next was appended
    to it, and the newer line's own refusal was dropped (the box was not empty). In
    the tmux test a retried ``/save PATH`` turned into a chat message."""
    async with alice_and_bob(tmp_path) as (app, pilot, _bob):
        gate = asyncio.Event()
        run = app.commands.run

        async def slow(*args: Any) -> None:  # the real command, once the gate opens
            await gate.wait()
            await run(*args)

        app.commands.run = slow  # type: ignore[method-assign]
        box = app.chat.query_one(ChatInput)
        await pilot.press(*"/save", "enter")
        await pilot.press(*"/save notes.txt", "enter")
        await wait_until(lambda: app.commands.pending == 2, what="both lines queued")
        assert box.value == ""
        gate.set()
        await wait_until(lambda: app.commands.pending == 0, what="both refused")
        await pilot.pause()
        assert box.value == "/save notes.txt"  # the newest refused line, with its reason
        assert "no file here to save" in str(box.border_subtitle)
