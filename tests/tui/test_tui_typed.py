"""Replies, reactions, edits and deletions: typed SDS content (app/chat/chat_content.proto)
shown like gomuks and iamb show them, the same after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_helpers import SIZE, T, screen_text, start_peer, tui, type_line, wait_until

from app.chat.content import decode_content
from app.chat.lines import encode_content, split_typed, typed_text
from app.node.events import Delivered
from app.node.transport import MemoryHub
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_log import MessageLog

pytestmark = pytest.mark.timeout(120)


def row(app, text: str):  # type: ignore[no-untyped-def]
    return next(r for r in app.chat.query_one(MessageLog).view.rows if r.original == text)


def line_after(app, text: str, offset: int = 0) -> str:  # type: ignore[no-untyped-def]
    lines = screen_text(app).splitlines()
    i = next(i for i, ln in enumerate(lines) if f"│ {text}" in ln)
    return lines[i + offset]


def test_typed_content_round_trip_and_foreign_bytes() -> None:
    raw = encode_content(typed_text("m1", "👍"), "bob", "react")
    assert raw.startswith(b"\xffSC\x02")
    c = decode_content(raw)
    assert (c.kind, c.target, c.name, split_typed(c.text)) == ("react", "m1", "bob", ("m1", "👍"))
    assert decode_content(encode_content(typed_text("m1"), "a", "delete")).kind == "delete"
    assert decode_content(b"\xffSC\x02\xff\xff").kind == "raw"  # damaged: never raises
    with pytest.raises(ValueError):
        encode_content(typed_text("m1", "x" * 17), "a", "react")
    # a JSON line that claims a typed kind is an ordinary line
    assert decode_content(b'{"v":1,"text":"t","kind":"edit"}').kind == "msg"


async def test_reply_react_edit_delete_survive_a_restart(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)

    def bob_got(kind: str) -> list[Delivered]:
        return [e for e in bob.events if isinstance(e, Delivered) and e.kind == kind]

    try:
        app = tui(tmp_path / "alice", hub.transport())
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await bob.say("the build is green")
            await wait_until(lambda: "the build is green" in screen_text(app), what="bob")
            target = row(app, "the build is green").message_id
            log = app.chat.query_one(MessageLog)
            log.select(row(app, "the build is green").key)
            await type_line(pilot, "/reply great news")
            await wait_until(lambda: bool(bob_got("reply")), what="bob got the reply")
            assert split_typed(bob_got("reply")[0].text) == (target, "great news")
            log.select(row(app, "the build is green").key)
            await type_line(pilot, "/react 👍")
            await wait_until(lambda: bool(bob_got("react")), what="bob got the reaction")
            # bob reacts too, and edits his line
            await bob.node.send("general", typed_text(target, "👍"), "react")
            await bob.node.send("general", typed_text(target, "the build is green again"),
                                "edit")  # fmt: skip
            await type_line(pilot, "teh typo")
            await wait_until(lambda: row(app, "teh typo").message_id is not None, what="logged")
            await type_line(pilot, "/edit the typo")
            await wait_until(lambda: bool(bob_got("edit")), what="bob got the edit")
            await type_line(pilot, "to be withdrawn")
            await wait_until(lambda: row(app, "to be withdrawn").message_id is not None)
            log.select(row(app, "to be withdrawn").key)
            await type_line(pilot, "/delete")
            await wait_until(lambda: bool(bob_got("delete")), what="bob got the deletion")
            # bob cannot edit alice's line: an edit counts only from the author
            mine = row(app, "teh typo").message_id
            await bob.node.send("general", typed_text(mine, "forged"), "edit")
            await bob.say("after all that")
            await wait_until(lambda: "after all that" in screen_text(app), what="settled")
            await pilot.pause()

            def check() -> None:
                # the quote follows the target's edit
                assert "┌ bob: the build is green again" in line_after(app, "great news", -1)
                assert "the build is green again  (edited)" in screen_text(app)
                assert "👍 2" in line_after(app, "the build is green again", 1)
                assert "the typo  (edited)" in screen_text(app)
                assert "forged" not in screen_text(app)
                assert "message deleted" in screen_text(app)
                assert "to be withdrawn" not in screen_text(app)
                assert "/react" not in screen_text(app)  # effects are no lines of their own

            check()
            await type_line(pilot, "/edit")  # refused with its usage, kept in the input
            assert app.chat.query_one(ChatInput).value == "/edit"
            app.chat.query_one(ChatInput).value = ""
            log.select(row(app, "after all that").key)
            await type_line(pilot, "/delete")  # not ours
            assert "only delete your own" in str(app.chat.query_one(ChatInput).border_subtitle)
            app.chat.query_one(ChatInput).value = ""
        # the same after a restart: everything comes back from SQLite
        app = tui(tmp_path / "alice", hub.transport())
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await pilot.pause()
            check()
    finally:
        await bob.close()


async def test_aliases_names_join_leave_lines_hotlist_highlights_mentions(
    tmp_path: Path,
) -> None:
    from app.tui.app import TUI_STATE_FILE

    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=("general", "ops"))
    try:
        app = tui(tmp_path / "alice", hub.transport())
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await type_line(pilot, "/j #ops", passphrase="")  # IRC's alias
            await wait_until(lambda: app.model.current == "ops", what="/j joined")
            await wait_until(
                lambda: any(
                    isinstance(e, Delivered) and e.kind == "join" and e.channel == "ops"
                    for e in bob.events
                ),
                what="bob saw alice join",
            )
            await wait_until(lambda: "alice joined #ops" in screen_text(app), what="join line")
            assert "--> │ alice joined #ops" in screen_text(app)  # a dimmed event line
            await pilot.press("f4")  # hide join, leave and nick lines
            await pilot.pause()
            assert "alice joined #ops" not in screen_text(app)
            await pilot.press("f4")
            await pilot.pause()
            assert "alice joined #ops" in screen_text(app)
            # /names: online first
            await bob.say("hi alice", "ops")
            await wait_until(lambda: "hi alice" in screen_text(app), what="bob in ops")
            await type_line(pilot, "/names")
            assert "● bob" in screen_text(app) and "● alice (you)" in screen_text(app)
            await pilot.press("escape")
            # hotlist: news elsewhere, a mention first
            await type_line(pilot, "/highlight deploy")
            await bob.say("deploy at noon")  # in #general: a highlight word
            await wait_until(lambda: app.model.channels["general"].mentioned, what="highlight")
            await pilot.press("alt+a")
            await pilot.pause()
            assert app.model.current == "general"
            await bob.say("@alice in ops", "ops")
            await wait_until(lambda: app.model.channels["ops"].unread == 1, what="ops news")
            await type_line(pilot, "/read")
            assert app.model.channels["ops"].unread == 0
            await type_line(pilot, "/mentions")
            text = screen_text(app)
            assert "#ops" in text and "@alice in ops" in text
            assert "#general" in text and "deploy at noon" in text
            await pilot.press("escape")
            await type_line(pilot, "/part ops")  # IRC's alias
            await wait_until(lambda: "ops" not in app.model.order, what="/part left")
            await wait_until(
                lambda: any(
                    isinstance(e, Delivered) and e.kind == "leave" and e.channel == "ops"
                    for e in bob.events
                ),
                what="bob saw alice leave",
            )
        assert '"highlights": ["deploy"]' in (tmp_path / "alice" / TUI_STATE_FILE).read_text()
    finally:
        await bob.close()


async def test_desktop_notification_for_a_mention_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TMUX", raising=False)
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=("general", "ops"))
    try:
        app = tui(tmp_path / "alice", hub.transport(), channels=("general", "ops"))
        written: list[str] = []
        app.write_terminal = written.append  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await bob.say("@alice look\x1b]0;pwned\x07 here", "ops")  # ops is not in view
            await wait_until(lambda: bool(written), what="a notification")
            assert written[0].startswith("\x1b]777;notify;bob in #ops;@alice look\\x1b]0,pwned")
            assert written[0].count("\x07") == 2 and written[0].count("\x1b") == 2
            await bob.say("@alice in view")  # general is in view: the log shows it
            await bob.say("no mention", "ops")
            await wait_until(lambda: app.model.channels["ops"].unread == 2, what="ops news")
            assert len(written) == 1
            monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")  # wrapped for tmux
            app.desktop_notify("t", "b")
            assert written[-1] == (
                "\x1bPtmux;\x1b\x1b]777;notify;t;b\x07\x1b\x1b]9;t: b\x07\x1b\\"
            )
            written.pop()
            await type_line(pilot, "/notify off")
            await bob.say("@alice again", "ops")
            await wait_until(lambda: app.model.channels["ops"].unread == 3, what="more news")
            assert len(written) == 1
    finally:
        await bob.close()


async def test_topic_is_shown_set_and_found_again_after_a_restart(tmp_path: Path) -> None:
    from app.tui.model import PAGE
    from app.tui.widgets.panels import ChannelBar

    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    try:
        app = tui(tmp_path / "alice", hub.transport())
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await bob.say("release on Friday, freeze Thursday", kind="topic")
            await wait_until(
                lambda: "release on Friday" in app.chat.query_one(ChannelBar).text.plain,
                what="the topic in the channel bar",
            )
            assert "bob set the topic: release on Friday" in screen_text(app)
            await type_line(pilot, "/topic release moved to Monday")
            await wait_until(
                lambda: any(
                    isinstance(e, Delivered) and e.kind == "topic" and "Monday" in e.text
                    for e in bob.events
                ),
                what="bob got the new topic",
            )
            await wait_until(lambda: "Monday" in app.chat.query_one(ChannelBar).text.plain)
            for i in range(PAGE + 5):  # the topic line falls out of the newest page
                await bob.say(f"chatter {i}")
            await wait_until(lambda: f"chatter {PAGE + 4}" in screen_text(app), base=30)
        app = tui(tmp_path / "alice", hub.transport())
        async with app.run_test(size=SIZE):
            await asyncio.wait_for(app.ready.wait(), T(20))
            view = app.model.channels["general"]
            assert not any(r.kind == "topic" for r in view.rows)  # not in the window...
            bar = app.chat.query_one(ChannelBar).text.plain
            assert "release moved to Monday" in bar  # ...but found in the log
    finally:
        await bob.close()


async def test_a_file_is_one_line_sent_with_send_and_kept_with_save(tmp_path: Path) -> None:
    """A file is a manifest and segments (app/chat/files.py); the log shows ONE line for it
    (its segments are hidden), /send sends one, /save keeps the selected or newest one
    in DATA_DIR/files byte for byte."""
    import os

    from tui_helpers import alice_and_bob

    from app.commands.content import run_content_command

    data = os.urandom(150_000)  # four segments
    (tmp_path / "notes.bin").write_bytes(data)
    (tmp_path / "mine.txt").write_bytes(b"from alice\n" * 100)
    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        await run_content_command(bob.node, "send", str(tmp_path / "notes.bin"), "general",
                                  lambda ev: None)  # fmt: skip
        await wait_until(lambda: "/save keeps it" in screen_text(app), what="the file's line")
        shown = screen_text(app)
        assert "📎 notes.bin" in shown
        assert "file segment" not in shown  # no line per segment
        view = app.chat.query_one(MessageLog).view
        assert view is not None
        assert sum(1 for r in view.rows if r.kind == "segment") == 4
        assert [r.kind for r in view.rows if not r.hidden] == ["file"]
        await type_line(pilot, "/save")
        saved = tmp_path / "alice" / "files" / "notes.bin"
        await wait_until(saved.exists, what="saved")
        assert saved.read_bytes() == data
        await type_line(pilot, f"/send {tmp_path / 'mine.txt'}")

        def bob_has_it() -> bool:
            return any(e.kind == "file" for e in bob.events if isinstance(e, Delivered))

        await wait_until(bob_has_it, what="bob got alice's file")
        # her own file's line: every segment logged, checked, saveable like any other
        await wait_until(
            lambda: sum("/save keeps it" in ln for ln in screen_text(app).splitlines()) == 2,
            what="her own file line complete",
        )
        await type_line(pilot, "/send /no/such/file")
        assert app.chat.query_one(ChatInput).value == "/send /no/such/file"  # kept, refused
