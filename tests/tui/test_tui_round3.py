"""Issue 41 (daily use, round three): what a daily user hit in one afternoon, each
driven through the real app (Textual's pilot) beside real nodes on an in-memory hub."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_helpers import T, invite_code, start_peer, texts, tui, type_line, wait_until

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
            await carol.node.join_by_invite(await invite_code(pilot), timeout_s=T(20))
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


async def test_an_expired_invite_says_ask_for_a_new_code_not_pick_another_name(
    tmp_path: Path,
) -> None:
    """Item 13: a used or expired invite said "... or pick another name": the name is the
    code's, there is nothing to pick; what helps is a new code."""
    from tui_helpers import screen_text

    from app.members.invite import encode_invite, make_invite
    from app.tui.screens.dialogs import FatalScreen

    expired = encode_invite(make_invite("team", bytes(32), ("ws://127.0.0.1:9",),
                                        now_ms=1_000_000, ttl_ms=60_000))  # fmt: skip
    app = tui(tmp_path / "bob", MemoryHub().transport(), channels=("team",), invite=expired)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: isinstance(app.screen, FatalScreen), what="error screen")
        await pilot.pause()
        shown = screen_text(app)
        assert "Invite not accepted" in shown and "expired" in shown
        assert "Ask an admin for a new code" in shown and "pick another name" not in shown
        await pilot.press("enter")
        await wait_until(lambda: app._exit, what="exit")
    assert app.return_code == 2


async def test_join_asks_for_the_passphrase_and_refuses_a_new_name_with_a_slash(
    tmp_path: Path,
) -> None:
    """Item 9: ``/join NAME`` with no passphrase set made a PUBLIC channel without a word
    (the README says a passphrase is asked); ``/join #random/forget random`` made a
    channel of that name. Now the passphrase dialog asks (Esc: nothing joined), and a new
    name with '/' or a space is refused, the line kept in the input with the reason."""
    from tui_helpers import screen_text

    from app.tui.screens.dialogs import PassphraseScreen
    from app.tui.widgets.chat_input import ChatInput

    hub = MemoryHub()
    app = tui(tmp_path / "alice", hub.transport())
    async with app.run_test(size=(100, 30)) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(20))
        node = app.node
        assert node is not None
        box = app.chat.query_one(ChatInput)
        box.value = "/join random"
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, PassphraseScreen), what="the dialog")
        await pilot.pause()
        assert "Passphrase for #random" in screen_text(app)
        await pilot.press(*"s3cret", "enter")
        await wait_until(lambda: "random" in node.channels, what="#random joined")
        assert not node.channels["random"].public  # a passphrase channel, not PUBLIC
        await wait_until(lambda: app.model.current == "random", what="shown")

        box.value = "/join other"
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, PassphraseScreen), what="asked again")
        await pilot.press("escape")
        await wait_until(lambda: app.commands.pending == 0, what="done")
        assert "other" not in node.channels

        line = "/join #random/forget random"
        box.value = line
        await pilot.press("enter")
        await wait_until(lambda: app.commands.pending == 0, what="refused")
        await pilot.pause()
        assert not isinstance(app.screen, PassphraseScreen)
        assert "random/forget random" not in node.channels
        assert box.value == line  # back in the input, to fix
        assert "without spaces or '/'" in str(box.border_subtitle)  # the reason, under it
        await type_line(pilot, "/join two words")
        assert "two words" not in node.channels


async def test_a_channel_joined_before_under_an_odd_name_keeps_working(tmp_path: Path) -> None:
    """Item 9: the stricter rule is for new names only: a channel this data directory
    joined before under a name with a space is joined again, at the start and by /join."""
    from app.commands.channels import check_new_channel

    hub = MemoryHub()
    old = await start_peer(tmp_path / "alice", hub, "alice", seed=1, channels=("our team",))
    with pytest.raises(ValueError, match="without spaces or '/'"):
        await check_new_channel(old.node, "new team")
    await check_new_channel(old.node, "our team")  # known here: fine
    await old.node.leave("our team")
    await old.close()
    app = tui(tmp_path / "alice", hub.transport(), channels=("general", "our team"))
    async with app.run_test(size=(100, 30)) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(20))
        assert app.node is not None and "our team" in app.node.channels
        await type_line(pilot, "/leave our team")
        assert "our team" not in app.node.channels
        from app.tui.screens.dialogs import PassphraseScreen
        from app.tui.widgets.chat_input import ChatInput

        app.chat.query_one(ChatInput).value = "/join our team"  # left: its key is not kept
        await pilot.press("enter")

        await wait_until(lambda: isinstance(app.screen, PassphraseScreen), what="asked")
        await pilot.press("enter")  # it was PUBLIC
        await wait_until(lambda: "our team" in app.node.channels, what="rejoined")  # type: ignore[union-attr]


async def test_an_invite_code_is_one_line_in_a_dialog_that_copies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 11: the code was wrapped over two lines inside a box drawn over the log, with
    no copy action. Now it is one line (it scrolls sideways where the terminal is
    narrower), and c copies it: OSC 52 to the terminal, and tmux's paste buffer inside
    tmux (a tmux server of the test's own, reached through $TMUX as in a real pane).
    A second /invite while the first dialog is open opens another (it crashed: two
    widgets with one id)."""
    import base64
    import shutil
    import subprocess
    import uuid

    from tui_helpers import screen_text

    from app.tui.screens.invite import InviteScreen

    tmux = shutil.which("tmux")
    socket_name = f"sdschat-invite-{uuid.uuid4().hex[:8]}"
    if tmux is not None:
        subprocess.run([tmux, "-L", socket_name, "-f", "/dev/null", "new-session", "-d"],
                       check=True, timeout=T(10))  # fmt: skip
        where = subprocess.run([tmux, "-L", socket_name, "display-message", "-p",
                                "#{socket_path},#{pid},0"], check=True, capture_output=True,
                               text=True, timeout=T(10)).stdout.strip()  # fmt: skip
        monkeypatch.setenv("TMUX", where)
    else:
        monkeypatch.delenv("TMUX", raising=False)
    hub = MemoryHub()
    app = tui(tmp_path / "alice", hub.transport(), channels=("team",), create=True,
              relays=("ws://127.0.0.1:8765",))  # fmt: skip
    written: list[str] = []
    monkeypatch.setattr(app, "write_terminal", written.append)
    try:
        async with app.run_test(size=(250, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            made: list[InviteMade] = []
            assert app.node is not None
            app.node.subscribe(lambda e: made.append(e) if isinstance(e, InviteMade) else None)
            await type_line(pilot, "/invite")
            await wait_until(lambda: isinstance(app.screen, InviteScreen), what="the dialog")
            await pilot.pause()
            code = made[0].code
            assert len(code) > 150
            rows = [ln for ln in screen_text(app).splitlines() if code[:40] in ln]
            assert len(rows) == 1 and code in rows[0]  # whole, on one line
            await pilot.press("c")
            await pilot.pause()
            osc = f"\x1b]52;c;{base64.b64encode(code.encode()).decode()}\x07"
            assert osc in written
            dialog = app.screen
            assert isinstance(dialog, InviteScreen)
            if tmux is not None:
                got = subprocess.run(
                    [tmux, "-L", socket_name, "show-buffer"], check=True,
                    capture_output=True, text=True, timeout=T(10)).stdout  # fmt: skip
                assert got == code
                assert any("tmux" in w for w in dialog.copied)
            await pilot.press("escape")
            await type_line(pilot, "/invite 2h")
            await wait_until(lambda: len(made) == 2, what="a second code")
            await app.node.make_invite("team", ())  # the dialog still open: another one
            await wait_until(lambda: len(made) == 3, what="a third code")
            await pilot.pause()
            assert sum(isinstance(s, InviteScreen) for s in app.screen_stack) == 2
    finally:
        if tmux is not None:
            subprocess.run([tmux, "-L", socket_name, "kill-server"], timeout=T(10),
                           check=False)  # fmt: skip
    # an 80-column pane: still one line, which scrolls sideways (← →)
    app = tui(tmp_path / "alice", hub.transport(), channels=("team",))
    async with app.run_test(size=(80, 30)) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(20))
        await type_line(pilot, "/invite")
        await wait_until(lambda: isinstance(app.screen, InviteScreen), what="the dialog")
        await pilot.pause()
        line = app.screen.query_one("#invite-code")
        assert line.size.height == 1 and line.size.width >= 150


async def test_an_invite_nobody_answers_says_so_after_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 11: a guessed or dead code waited in silence (five minutes). Now the screen
    says nobody has answered yet, then stops: "nobody answered", what to do, exit 2."""
    from tui_helpers import screen_text

    import app.launch.invite_wait as invite_wait
    from app.members.invite import encode_invite, make_invite
    from app.node.runtime import wall_ms
    from app.tui.screens.dialogs import FatalScreen

    monkeypatch.setattr(invite_wait, "NOTICE_S", 0.5)
    monkeypatch.setattr(invite_wait, "ANSWER_S", 3.0)
    dead = encode_invite(make_invite("team", bytes(32), (), now_ms=wall_ms()))
    app = tui(tmp_path / "bob", MemoryHub().transport(), channels=("team",), invite=dead)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(lambda: any("nobody has answered" in n.message
                                     for n in app._notifications), what="the notice")  # fmt: skip
        await wait_until(lambda: isinstance(app.screen, FatalScreen), 30, "the error screen")
        await pilot.pause()
        shown = screen_text(app)
        assert "nobody answered" in shown and "new code" in shown
        await pilot.press("enter")
        await wait_until(lambda: app._exit, what="exit")
    assert app.return_code == 2
