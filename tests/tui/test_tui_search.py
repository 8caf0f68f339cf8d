"""Search: Ctrl+F finds in this channel's stored history as you type, matches
highlighted in the log, Up/Down step through them, Enter stays, Esc leaves; Alt+F
(Tab in the find bar, ``/search -a``) lists results of every joined channel."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_commands import seed_history
from tui_helpers import SIZE, alice_and_bob, screen_text, started, tui, type_line, wait_until

from app.node.transport import MemoryHub
from app.tui.render import palette
from app.tui.screens.search import SearchScreen
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.find_bar import FindBar, FindInput
from app.tui.widgets.message_log import MessageLog

pytestmark = pytest.mark.timeout(120)


def highlighted(log: MessageLog) -> list[str]:
    """The texts drawn in the search-match style in the log's wrapped rows."""
    match = palette(log.dark).match
    out = []
    for _ident, strips in log._cache.values():
        for strip in strips:
            out += [seg.text for seg in strip if seg.style is not None and seg.style.bgcolor
                    == match.bgcolor]  # fmt: skip
    return out


async def test_find_as_you_type_highlights_and_steps_through_the_stored_history(
    tmp_path: Path,
) -> None:
    await seed_history(tmp_path / "alice", 2000)
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        log = app.chat.query_one(MessageLog)
        bar = app.chat.query_one(FindBar)
        assert not bar.display
        await pilot.press("ctrl+f")
        assert bar.display and app.chat.query_one(FindInput).has_focus
        await pilot.press(*"MESSAGE 123")  # no Enter: it searches as you type, any case
        state = app.finder.state
        assert state is not None
        await wait_until(  # (a pause while typing may search "MESSAGE 1" first)
            lambda: state.text == "MESSAGE 123" and state.index == 0, what="found"
        )
        # 123 and 1230..1239: found in SQLite (the window holds only 1800..1999)
        assert len(state.results) == 11
        await pilot.pause()
        row = log.selected_row()
        assert row is not None and row.text == "stored message 1239"  # the newest first
        assert not log.view.at_tail
        assert "1 of 11" in screen_text(app)
        await wait_until(lambda: bool(highlighted(log)), what="highlight drawn")
        assert set(highlighted(log)) == {"message 123"}  # every match, the case as written
        for _ in range(10):  # Up: older matches
            await pilot.press("up")
        await wait_until(lambda: state.index == 10, what="the oldest match")
        await pilot.pause()
        row = log.selected_row()
        assert row is not None and row.text == "stored message 123"
        assert "11 of 11" in screen_text(app)
        await pilot.press("up")  # none older: it stays
        await pilot.pause()
        assert state.index == 10
        await pilot.press("down")  # Down: a newer one
        await wait_until(lambda: state.index == 9, what="a newer match")
        await pilot.pause()
        row = log.selected_row()
        assert row is not None and row.text == "stored message 1230"
        # Enter: the bar closes, the match stays selected (for /reply, /info)
        await pilot.press("enter")
        await pilot.pause()
        assert not bar.display and app.finder.state is None and log.find is None
        assert app.chat.query_one(ChatInput).has_focus
        assert log.selected_row() is row and not highlighted(log)
        # Esc leaves: back to the newest messages
        await type_line(pilot, "/search message 7")
        assert bar.display and app.chat.query_one(FindInput).value == "message 7"
        await wait_until(lambda: app.finder.state is not None and app.finder.state.index == 0
                         and app.finder.state.text == "message 7")  # fmt: skip
        await pilot.press("escape")
        await wait_until(lambda: log.view.at_tail, what="back at the newest")
        await pilot.pause()
        assert not bar.display and log.selected is None
        assert "stored message 1999" in screen_text(app)
        # nothing found: said, nothing moves
        await pilot.press("ctrl+f")
        await pilot.press(*"no such words")
        await wait_until(lambda: app.finder.state is not None and app.finder.state.searched
                         and app.finder.state.text == "no such words")  # fmt: skip
        await pilot.pause()
        assert "no match" in screen_text(app) and log.view.at_tail


async def test_search_all_channels_lists_channel_author_time_and_jumps(tmp_path: Path) -> None:
    async with alice_and_bob(tmp_path, channels=("general", "random")) as (app, pilot, bob):
        await bob.say("deploy on friday", channel="random")
        # newest first across channels is by each channel's Lamport time: two lines said
        # within the same millisecond in two channels can carry the same one (the order
        # is then the ids'), so the next line is said once this one has arrived
        await wait_until(lambda: app.model.channels["random"].unread == 1, what="the first")
        await bob.say("the deploy is green", channel="general")
        await bob.say("unrelated", channel="random")
        await wait_until(lambda: "the deploy is green" in screen_text(app), what="lines")
        await wait_until(
            lambda: app.model.channels["random"].unread == 2, what="random's lines arrived"
        )
        await pilot.press("alt+f")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"deploy")  # results as you type
        screen = app.screen
        await wait_until(lambda: screen.searched == "deploy" and len(screen.results) == 2,
                         what="two results")  # fmt: skip
        await pilot.pause()
        shown = screen_text(app)
        assert "#general bob: the deploy is green" in shown  # channel, author (and time)
        assert "#random bob: deploy on friday" in shown
        assert [c for c, _ in screen.results] == ["general", "random"]  # newest first
        await pilot.press("down", "down", "enter")  # the second: in #random
        await wait_until(lambda: app.model.current == "random", what="jumped to #random")
        log = app.chat.query_one(MessageLog)
        await wait_until(lambda: log.selected is not None, what="selected")
        row = log.selected_row()
        assert row is not None and row.text == "deploy on friday"
        # the find bar is open on the same text there: Up/Down go on in #random
        bar = app.chat.query_one(FindBar)
        await wait_until(lambda: app.finder.state is not None and app.finder.state.searched
                         and app.finder.state.text == "deploy")  # fmt: skip
        assert bar.display and app.chat.query_one(FindInput).value == "deploy"
        await pilot.press("escape")
        await pilot.pause()
        # Tab in the find bar: the same text in every channel
        await pilot.press("ctrl+f")
        await pilot.press(*"friday", "tab")
        await wait_until(lambda: isinstance(app.screen, SearchScreen)
                         and app.screen.searched == "friday")  # fmt: skip
        assert [c for c, _ in app.screen.results] == ["random"]  # type: ignore[attr-defined]


async def test_search_matches_the_shown_text_not_the_json_around_it(tmp_path: Path) -> None:
    """The store matches raw content bytes ("kind", "name" are in every JSON line);
    search keeps only messages whose shown text has the words, any case."""
    from app.tui.find import search_all, search_channel
    from storage import Store

    await seed_history(tmp_path / "alice", 300)
    async with await Store.open(tmp_path / "alice") as store:
        assert await search_channel(store, "general", '"kind"') == []
        assert await search_channel(store, "general", "dave") == []  # the author's name
        found = await search_channel(store, "general", "STORED MESSAGE 29")
        texts = [e.content.decode() for e in found]
        assert len(found) == 11 and all("stored message 29" in t for t in texts)
        assert [e.lamport for e in found] == sorted((e.lamport for e in found), reverse=True)
        assert len(await search_channel(store, "general", "stored", limit=7)) == 7
        both = await search_all(store, ["general"], "message 1")
        assert both and {c for c, _ in both} == {"general"}
