"""Members channels in the TUI: --create, /invite, a newcomer by --invite, /members, /remove."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_helpers import T, screen_text, start_peer, texts, tui, type_line, wait_until

from app.node.events import InviteMade, MembersEvent
from app.node.transport import MemoryHub

pytestmark = pytest.mark.timeout(120)


async def test_create_invite_a_newcomer_chat_list_members_and_remove(tmp_path: Path) -> None:
    hub = MemoryHub()
    app = tui(tmp_path / "alice", hub.transport(), channels=("team",), create=True)
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=())
    events: list[object] = []
    bob.node.subscribe(events.append)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            node = app.node
            assert node is not None and node.members_channel("team") is not None
            made: list[InviteMade] = []
            node.subscribe(lambda e: made.append(e) if isinstance(e, InviteMade) else None)
            await type_line(pilot, "/invite")
            await wait_until(lambda: bool(made), what="an invite code")
            await wait_until(lambda: "Invite to #team" in screen_text(app), what="code shown")
            assert made[0].code[:40] in screen_text(app)
            await pilot.press("escape")
            await bob.node.join_by_invite(made[0].code, timeout_s=T(20))
            await bob.node.send("team", "hello from bob")
            await wait_until(lambda: "hello from bob" in texts(app), what="bob's line")
            await wait_until(lambda: "members (2, you: admin)" in screen_text(app),
                             what="the channel bar says what kind of channel it is")  # fmt: skip

            await pilot.press("f2")  # the peers panel names roles in a members channel
            await wait_until(lambda: "· member ·" in screen_text(app), what="F2 roles")
            await pilot.press("f2")
            await type_line(pilot, "/members")
            await wait_until(lambda: "Members of #team" in screen_text(app), what="panel")
            shown = screen_text(app)
            assert "alice" in shown and "admin" in shown and "bob" in shown
            await pilot.press("escape")

            await type_line(pilot, "/msg bob just us")  # a direct conversation, listed as @bob
            await wait_until(lambda: "@bob" in screen_text(app), what="the DM in the list")
            dm = next(c for c in node.channels if c.startswith("dm-"))
            await wait_until(lambda: dm in bob.node.channels, what="bob joined the DM")
            await wait_until(lambda: "just us" in bob.texts(dm), what="bob got it")

            await type_line(pilot, "/remove bob")
            await wait_until(lambda: any(isinstance(e, MembersEvent) and e.what == "removed_me"
                                         for e in events), what="bob told")  # fmt: skip
            assert not node.members_channel("team").roster.is_member(bob.node.sender_id)  # type: ignore[union-attr]
    finally:
        await bob.close()


async def test_a_refused_invite_is_said_on_screen_and_joins_nothing(tmp_path: Path) -> None:
    from app.tui.screens.dialogs import FatalScreen

    hub = MemoryHub()
    app = tui(tmp_path / "eve", hub.transport(), channels=("team",),
              invite="sdschat-invite:baaaaaaaaaaaaaaaa")  # fmt: skip
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: isinstance(app.screen, FatalScreen), what="error screen")
        await pilot.pause()
        assert "Invite not accepted" in screen_text(app)
        assert app.node is not None and "team" not in app.node.channels
        await pilot.press("enter")
        await wait_until(lambda: app._exit, what="exit")
    assert app.return_code == 2
