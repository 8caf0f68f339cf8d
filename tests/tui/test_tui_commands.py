"""Pilot tests of every slash command, tab completion, input history, search and paging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tui_helpers import (
    SIZE,
    alice_and_bob,
    screen_text,
    start_peer,
    started,
    texts,
    tui,
    type_line,
    wait_until,
)

from app.chat.lines import encode_content
from app.node.transport import MemoryHub
from app.tui.app import INPUT_HISTORY_FILE, TUI_STATE_FILE
from app.tui.model import MAX_WINDOW, PAGE
from app.tui.screens.dialogs import HelpScreen, PassphraseScreen, TextScreen
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_log import MessageLog
from storage import Store, StoredMessage

pytestmark = pytest.mark.timeout(120)


async def test_join_switch_leave_nick_me(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=("general", "ops"))
    app = tui(tmp_path / "alice", hub.transport())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await type_line(pilot, "/join #ops", passphrase="")  # PUBLIC, as bob's
            await wait_until(lambda: app.model.current == "ops", what="joined ops")
            assert app.model.order == ["general", "ops"]
            assert "#ops" in screen_text(app)
            await type_line(pilot, "hello ops")
            await wait_until(lambda: "hello ops" in bob.texts("ops"))
            await type_line(pilot, "/switch general")
            assert app.model.current == "general"
            await type_line(pilot, "/nick alicia")
            await wait_until(lambda: app.node.name == "alicia")
            await type_line(pilot, "/me waves")
            await wait_until(lambda: "waves" in bob.texts("general"))
            me = next(e for e in bob.events if getattr(e, "text", None) == "waves")
            assert me.kind == "me" and me.name == "alicia"
            assert "alicia (" in screen_text(app).splitlines()[-1]
            await type_line(pilot, "/leave ops")
            await wait_until(lambda: app.model.order == ["general"], what="left ops")
            assert "ops" not in app.node.channels
            await type_line(pilot, "/leave nowhere")
            await type_line(pilot, "/bogus")
            await type_line(pilot, "/join")  # needs an argument
            await pilot.pause()
            notes = [n.message for n in app._notifications]
            assert any("not in #nowhere" in n for n in notes)
            assert any("unknown command /bogus" in n for n in notes)
            assert any("usage: /join NAME" in n for n in notes)
            await type_line(pilot, "//not a command")
            await wait_until(lambda: "/not a command" in bob.texts("general"))
    finally:
        await bob.close()


async def test_forget_a_channel_left_here_too(tmp_path: Path) -> None:
    """/forget NAME (issue 41 item 6: the TUI listed it, and had no handler): a channel
    you left is forgotten as in headless mode (its history and keys), and the TUI keeps
    nothing of it either (where you left off, what you typed there, its name for Tab);
    a joined channel, or one never joined, is refused and the line comes back."""
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=("general", "ops"))
    data = tmp_path / "alice"
    app = tui(data, hub.transport())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            box = app.chat.query_one(ChatInput)
            await type_line(pilot, "/join ops", passphrase="")
            await wait_until(lambda: app.model.current == "ops", what="joined ops")
            await type_line(pilot, "secret plans for ops")
            await wait_until(lambda: "secret plans for ops" in bob.texts("ops"))
            await type_line(pilot, "/switch general")  # where you left off in #ops: kept
            await type_line(pilot, "/forget ops")
            assert box.value == "/forget ops" and "#ops is joined: /leave it first" in str(
                box.border_subtitle)  # fmt: skip
            box.value = ""
            await type_line(pilot, "/leave ops")
            await wait_until(lambda: app.model.order == ["general"], what="left ops")
            assert "ops" in json.loads((data / TUI_STATE_FILE).read_text())["last_read"]
            assert await app.node.store.get_channel("ops") is not None  # left: history stays
            assert "ops" in app.saved.histories
            box.value, box.cursor_position = "/join o", 7
            await pilot.press("tab")
            assert box.value == "/join ops "
            box.value = ""
            await type_line(pilot, "/forget #ops")
            await wait_until(lambda: any("forgot #ops" in n.message for n in app._notifications),
                             what="the node's notice")  # fmt: skip
            assert await app.node.store.get_channel("ops") is None
            assert await app.node.store.page("ops", limit=10) == []
            assert "ops" not in json.loads((data / TUI_STATE_FILE).read_text())["last_read"]
            assert "ops" not in app.saved.histories
            assert "secret plans" not in (data / INPUT_HISTORY_FILE).read_text()
            box.value, box.cursor_position = "/join o", 7
            await pilot.press("tab")
            assert box.value == "/join o"  # nothing left to complete
            box.value = ""
            await type_line(pilot, "/forget nowhere")
            assert box.value == "/forget nowhere"
            assert str(box.border_subtitle).endswith("holds no channel 'nowhere'")
            assert app.model.order == ["general"] and "general" in app.node.channels
    finally:
        await bob.close()


async def test_who_info_stats_help_theme(tmp_path: Path) -> None:
    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        await bob.say("first words")
        await wait_until(lambda: "first words" in texts(app))
        await type_line(pilot, "/who")
        assert isinstance(app.screen, TextScreen)
        text = screen_text(app)
        assert "bob" in text and bob.node.sender_id in text and "(you)" in text
        await pilot.press("escape")
        # issue 27 item 9: /who is a dialog; the peer list (F2) stays as it was
        assert not app.chat.query_one("#peers").display
        await pilot.press("f2")
        assert app.chat.query_one("#peers").display
        assert "Peers (2 online)" in screen_text(app)
        await pilot.press("f2")
        assert not app.chat.query_one("#peers").display
        await pilot.press("ctrl+up")  # select the newest message
        await type_line(pilot, "/info")
        await wait_until(lambda: app.screen.id == "info")
        text = screen_text(app)
        assert bob.node.sender_id in text
        row = app.chat.query_one(MessageLog).selected_row()
        assert row is not None and row.message_id and row.message_id[:40] in text
        assert "lamport" in text and "retrieval hint" in text and "depends on" in text
        await pilot.press("escape")
        await type_line(pilot, "/stats")
        assert app.screen.id == "stats" and "counters:" in screen_text(app)
        assert '"' not in screen_text(app) and "{" not in screen_text(app)  # not raw JSON
        await pilot.press("escape")
        await type_line(pilot, "/help")
        assert isinstance(app.screen, HelpScreen)
        assert "Ctrl+N / Ctrl+P" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.current_theme.dark
        await type_line(pilot, "/theme")
        assert not app.current_theme.dark
        await pilot.press("f3")
        assert app.current_theme.dark


async def test_passphrase_then_join_and_retry_command(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(
        tmp_path / "bob", hub, "bob", seed=2, channels=("secret",), passphrase="open sesame"
    )
    app = tui(tmp_path / "alice", hub.transport())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await type_line(pilot, "/passphrase")
            assert isinstance(app.screen, PassphraseScreen)
            await pilot.press(*"open sesame")
            assert "open sesame" not in screen_text(app)  # not echoed
            await pilot.press("enter")
            assert app.passphrase == "open sesame"
            await type_line(pilot, "/join secret")
            await wait_until(lambda: app.model.current == "secret")
            assert "· passphrase" in screen_text(app)
            await type_line(pilot, "psst")
            await wait_until(lambda: "psst" in bob.texts("secret"), what="same key")
            await type_line(pilot, "/retry")
            await pilot.pause()
            assert any("no failed messages" in n.message for n in app._notifications)
    finally:
        await bob.close()


async def test_quit_command_saves_and_exits(tmp_path: Path) -> None:
    hub = MemoryHub()
    app = tui(tmp_path / "alice", hub.transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        await type_line(pilot, "see you")
        await pilot.press(*"/quit")
        await pilot.press("enter")
        await wait_until(lambda: app.node.closed, what="node closed")
        # the state file is written and exit() called after the node closed
        await wait_until(lambda: app.return_code is not None, what="exit")
    assert app.return_code == 0
    state = json.loads((tmp_path / "alice" / TUI_STATE_FILE).read_text())
    assert state["theme"] == "dark" and "general" in state["last_read"]
    async with await Store.open(tmp_path / "alice") as store:  # the lock was released
        assert [e.content for e in await store.page("general")]


async def test_ctrl_q_quits(tmp_path: Path) -> None:
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        await pilot.press("ctrl+q")
        await wait_until(lambda: app.node.closed)
    assert app.return_code == 0


async def test_tab_completion_and_input_history(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bobby", seed=2)
    app = tui(tmp_path / "alice", hub.transport())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await bob.say("hi")
            await wait_until(lambda: "hi" in texts(app))
            box = app.chat.query_one(ChatInput)
            await pilot.press("/", "j", "o", "tab")
            assert box.value == "/join "
            await pilot.press("ctrl+u")
            await pilot.press("/", "tab")
            assert box.value == "/" and len(box.last_candidates) > 10
            await pilot.press("ctrl+u", "b", "o", "tab")
            assert box.value == "bobby: "
            box.value = "thanks @bo"
            box.cursor_position = len(box.value)
            await pilot.press("tab")
            assert box.value == "thanks @bobby "
            box.value = "/leave gen"
            box.cursor_position = len(box.value)
            await pilot.press("tab")
            assert box.value == "/leave general "
            await pilot.press("ctrl+u")
            await type_line(pilot, "first line")
            await type_line(pilot, "second line")
            await pilot.press("up")
            assert box.value == "second line"
            await pilot.press("up")
            assert box.value == "first line"
            await pilot.press("down")
            assert box.value == "second line"
            await pilot.press("down")
            assert box.value == ""
    finally:
        await bob.close()


async def seed_history(data_dir: Path, n: int, sender: str = "b" * 32) -> list[str]:
    """Store ``n`` messages of someone else in #general (joined public, like the app)."""
    from net.channel_key import TEST_KDF, derive_channel_key

    key = derive_channel_key("general", None, params=TEST_KDF)
    async with await Store.open(data_dir) as store:
        await store.join_channel("general", key.topic, is_public=True)
        texts = [f"stored message {i}" for i in range(n)]
        batch = [
            StoredMessage(
                channel="general",
                message_id=f"{i:064x}",
                sender_id=sender,
                lamport=1_700_000_000_000 + i,
                content=encode_content(t, "dave"),
                delivered_at=1_700_000_000_000 + i,
            )
            for i, t in enumerate(texts)
        ]
        for start in range(0, n, 5000):
            await store.insert_messages(batch[start : start + 5000])
    return texts


async def test_history_pages_in_from_sqlite_both_ways(tmp_path: Path) -> None:
    n = 3000
    await seed_history(tmp_path / "alice", n)
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        log = app.chat.query_one(MessageLog)
        view = log.view
        assert len(view.rows) == PAGE and view.more_before and view.at_tail
        await pilot.pause()
        assert "stored message 2999" in screen_text(app)
        top = log.scroll_y
        await pilot.press("pageup", "pageup")
        assert log.scroll_y < top  # PgUp scrolls back
        for _ in range(100):  # bounded: to the top until the oldest message is loaded
            if not view.more_before:
                break
            log.to_top()
            await pilot.pause()
            await wait_until(lambda: not log._older_requested, what="older page")
        assert view.rows[0].text == "stored message 0"
        assert len(view.rows) <= MAX_WINDOW
        assert not view.at_tail  # the newest rows were dropped from the window
        await pilot.pause()
        assert "stored message 0" in screen_text(app)
        await pilot.press("pagedown")
        for _ in range(100):  # and back down to the newest
            if view.at_tail:
                break
            log.to_bottom()
            await pilot.pause()
            await wait_until(lambda: not log._newer_requested, what="newer page")
        assert view.rows[-1].text == "stored message 2999"
        keys = [r.key for r in view.rows]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)


async def test_ctrl_end_goes_to_the_newest_message_at_once(tmp_path: Path) -> None:
    """Far back in the history (the window no longer holds the newest rows), one Ctrl+End
    shows the newest message; it used to load one page per press."""
    await seed_history(tmp_path / "alice", 3000)
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        log = app.chat.query_one(MessageLog)
        view = log.view
        for _ in range(100):  # bounded: back to the oldest message
            if not view.more_before:
                break
            log.to_top()
            await pilot.pause()
            await wait_until(lambda: not log._older_requested, what="older page")
        assert not view.at_tail and view.rows[0].text == "stored message 0"
        await pilot.press("ctrl+end")
        await wait_until(lambda: "stored message 2999" in screen_text(app), what="the newest")
        assert view.at_tail and log.follow and view.rows[-1].text == "stored message 2999"


async def test_messages_arriving_below_a_reader_scrolled_up_are_counted(tmp_path: Path) -> None:
    """Scrolled up in a window that holds the newest rows, a new message is added below
    the screen: '↓ 1 new below' says so; at the bottom again (Ctrl+End), it goes."""
    await seed_history(tmp_path / "alice", 150)
    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        log = app.chat.query_one(MessageLog)
        await pilot.pause()
        await pilot.press("pageup", "pageup")
        await wait_until(lambda: not log.follow, what="scrolled up")
        await bob.say("while you read")
        await wait_until(lambda: "while you read" in texts(app), what="arrives")
        await wait_until(lambda: "↓ 1 new below · Ctrl+End" in screen_text(app))
        assert "while you read" not in screen_text(app).replace("↓ 1 new below", "")
        await pilot.press("ctrl+end")
        await wait_until(lambda: "new below" not in screen_text(app), what="cleared")
        assert "while you read" in screen_text(app)


async def test_older_page_is_ready_before_the_reader_reaches_the_top(tmp_path: Path) -> None:
    """PgUp never waits on SQLite: the older page is asked for while screens remain above."""
    await seed_history(tmp_path / "alice", 1000)
    app = tui(tmp_path / "alice", MemoryHub().transport())
    asked_at: list[float] = []
    page_older = app.pager.older

    def spy(channel: str) -> None:
        asked_at.append(app.chat.query_one(MessageLog).scroll_y)
        page_older(channel)

    app.pager.older = spy  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        log = app.chat.query_one(MessageLog)
        view = log.view
        await pilot.pause()
        height = log.scrollable_content_region.height
        assert len(view.rows) == PAGE and view.more_before
        for _ in range(200):  # bounded: PgUp until the window grew
            if len(view.rows) > PAGE:
                break
            await pilot.press("pageup")
            await pilot.pause()
        assert len(view.rows) == 2 * PAGE
        assert view.rows[0].text == "stored message 600"
        assert asked_at and asked_at[0] >= height  # a whole screen was still left above


async def test_only_rows_on_screen_are_wrapped(tmp_path: Path) -> None:
    """A page of one-line messages is laid out without wrapping rows nobody sees."""
    await seed_history(tmp_path / "alice", 1000)
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        log = app.chat.query_one(MessageLog)
        await pilot.pause()
        view = log.view
        assert len(view.rows) == PAGE
        assert 0 < len(log._cache) < PAGE // 2  # the screenful at the bottom, not the page
        assert log.virtual_size.height >= PAGE  # yet every row has its place
        await pilot.press("pageup")
        await pilot.pause()
        assert len(log._cache) < PAGE // 2

