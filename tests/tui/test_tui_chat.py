"""Pilot tests of the chat screen: sending, receiving, states, markers, typing, channels.

Every test runs the real app (``make_app``) over an in-memory hub with real
peer nodes, and reads what the terminal shows.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from tui_helpers import (
    FAST,
    SIZE,
    GatedTransport,
    T,
    alice_and_bob,
    screen_text,
    start_peer,
    tui,
    wait_until,
)

from app.node.events import Ephemeral
from app.node.transport import MemoryHub
from app.tui.model import STATE_GLYPHS
from app.tui.widgets.message_log import MessageLog

pytestmark = pytest.mark.timeout(120)


def log_rows(app):  # type: ignore[no-untyped-def]
    return app.chat.query_one(MessageLog).view.rows


def row_with(app, text: str):  # type: ignore[no-untyped-def]
    for row in log_rows(app):
        if row.text == text:
            return row
    return None


def line_with(app, text: str) -> str:  # type: ignore[no-untyped-def]
    for line in screen_text(app).splitlines():
        if text in line:
            return line
    raise AssertionError(f"{text!r} not on screen:\n{screen_text(app)}")


async def send_line(pilot, line: str) -> None:  # type: ignore[no-untyped-def]
    """Put ``line`` in the input and press Enter (typing itself is tested once)."""
    box = pilot.app.chat.query_one("#input")
    box.value = line
    await pilot.press("enter")


async def started(app) -> None:  # type: ignore[no-untyped-def]
    await asyncio.wait_for(app.ready.wait(), T(20))


async def test_send_and_receive(tmp_path: Path) -> None:
    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        await pilot.press(*"hello bob", "enter")
        await wait_until(lambda: "hello bob" in bob.texts(), what="bob receives")
        await bob.say("hi alice")
        await wait_until(lambda: row_with(app, "hi alice") is not None, what="alice shows")
        await pilot.pause()
        assert "bob │ hi alice" in line_with(app, "hi alice")
        assert "alice │ hello bob" in line_with(app, "hello bob")
        await bob.say("waves", kind="me")
        await wait_until(lambda: row_with(app, "waves") is not None)
        await pilot.pause()
        assert "* │ bob waves" in line_with(app, "bob waves")
        # the input line was cleared and the line went to history
        assert app.chat.query_one("#input").value == ""


async def test_own_states_queued_sent_possibly_acknowledged(tmp_path: Path) -> None:
    """◌ queued while offline, ○ sent, ◐ possibly seen (a bloom filter), ● acknowledged."""
    hub = MemoryHub()
    # bob's causal history holds 1 entry: his own later message hides ours from it,
    # while his bloom filter still says he has it (a possible acknowledgement).
    bob = await start_peer(
        tmp_path / "bob",
        hub,
        "bob",
        seed=2,
        gated=True,
        config=FAST.with_changes(causal_history_size=1),
    )
    app = tui(
        tmp_path / "alice",
        hub.transport(),
        config=FAST.with_changes(ack_threshold_override=2),
    )
    seen: list[str] = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            hub.set_online(False)
            await send_line(pilot, "are you there")
            await wait_until(lambda: row_with(app, "are you there") is not None)
            await pilot.pause()
            row = row_with(app, "are you there")
            assert row.own_state == "queued"
            assert STATE_GLYPHS["queued"] in line_with(app, "are you there")
            assert app.model.connection == "disconnected"
            assert "unreachable" in screen_text(app).splitlines()[-1]
            bob_transport = bob.transport
            assert isinstance(bob_transport, GatedTransport)
            bob_transport.hold = True  # bob hears ours only after he spoke
            hub.set_online(True)
            await wait_until(lambda: row.own_state != "queued", what="sent")
            seen.append(row.own_state)
            await pilot.pause()
            assert STATE_GLYPHS["sent"] in line_with(app, "are you there")
            await bob.say("first")  # newer than ours in the SDS order
            await wait_until(lambda: row_with(app, "first") is not None)
            await bob_transport.release()
            await wait_until(lambda: "are you there" in bob.texts(), what="bob has it")
            await bob.say("second")  # history [first], bloom filter has ours
            await wait_until(lambda: row.own_state == "possibly_acknowledged", what="possibly")
            await pilot.pause()
            assert STATE_GLYPHS["possibly_acknowledged"] in line_with(app, "are you there")
            carol = await start_peer(tmp_path / "carol", hub, "carol", seed=3)
            try:
                await wait_until(lambda: "are you there" in carol.texts(), what="carol has it")
                await carol.say("me too")
                await wait_until(lambda: row.own_state == "acknowledged", what="acknowledged")
                await pilot.pause()
                assert STATE_GLYPHS["acknowledged"] in line_with(app, "are you there")
            finally:
                await carol.close()
    finally:
        await bob.close()


async def test_failed_then_retry_key(tmp_path: Path) -> None:
    """bob is heard but never receives (his incoming held): alice's line fails; Ctrl+R
    publishes the same message again (one row, marked retried)."""
    hub = MemoryHub()
    config = FAST.with_changes(max_resend_attempts=1)
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, gated=True, config=config)
    app = tui(tmp_path / "alice", hub.transport(), config=config)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await bob.say("here")
            await wait_until(lambda: row_with(app, "here") is not None, what="bob heard")
            bob.transport.hold = True  # type: ignore[attr-defined]
            await send_line(pilot, "nobody hears this")
            await wait_until(
                lambda: (
                    (r := row_with(app, "nobody hears this")) is not None
                    and r.own_state == "failed"
                ),
                base=60,  # a resend round and the give-up, on a loaded machine
                what="failed",
            )
            await pilot.pause()
            line = line_with(app, "nobody hears this")
            assert STATE_GLYPHS["failed"] in line
            assert "Ctrl+R retries" in line
            await pilot.press("ctrl+r")
            await wait_until(lambda: "retried" in line_with(app, "nobody hears this"))
            assert sum(r.text == "nobody hears this" for r in log_rows(app)) == 1
    finally:
        await bob.close()


async def test_missing_marker_appears_then_resolves_in_causal_order(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    gate = GatedTransport(hub.transport())
    app = tui(tmp_path / "alice", gate)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await bob.say("zero")
            await wait_until(lambda: row_with(app, "zero") is not None)
            gate.hold = True
            await bob.say("one")
            # hold until "one" itself is held (a sync or typing message may come first)
            await wait_until(lambda: "one" in gate.held_texts(), what='"one" held')
            gate.swallow_held()  # its resends too
            await bob.say("two")
            await wait_until(lambda: row_with(app, "two") is not None, what="shown at once")
            # redraws are coalesced and the status bar ticks: wait for the frame
            await wait_until(
                lambda: "1 earlier message missing · fetching" in screen_text(app)
                and re.search(r"syncing · \d+ missing", screen_text(app).splitlines()[-1])
                is not None,
                what="marker and sync state drawn",
            )
            text = screen_text(app)
            assert row_with(app, "one") is None
            lines = text.splitlines()
            marker = next(i for i, line in enumerate(lines) if "missing · fetching" in line)
            assert "two" in lines[marker + 1]  # the marker sits above the waiting message
            gate.blackhole.clear()  # the next resend gets through
            await wait_until(lambda: row_with(app, "one") is not None, base=15, what="repaired")
            await pilot.pause()
            text = screen_text(app)
            assert "missing" not in text
            order = [r.text for r in log_rows(app)]
            assert order == ["zero", "one", "two"]
            assert "recovered" in line_with(app, "│ one")
            await wait_until(lambda: "synced" in screen_text(app).splitlines()[-1])
    finally:
        await bob.close()


async def test_lost_marker_after_the_lost_timeout(tmp_path: Path) -> None:
    hub = MemoryHub()
    fast_loss = FAST.with_changes(lost_timeout_ms=1500)
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    gate = GatedTransport(hub.transport())
    app = tui(tmp_path / "alice", gate, config=fast_loss)
    try:
        async with app.run_test(size=SIZE):
            await started(app)
            gate.hold = True
            await bob.say("never arrives")
            await wait_until(lambda: "never arrives" in gate.held_texts(), what="held")
            gate.swallow_held()  # its resends too
            await bob.say("after the gap")
            await wait_until(lambda: row_with(app, "after the gap") is not None)
            await wait_until(lambda: "1 earlier message missing · fetching" in screen_text(app))
            await wait_until(lambda: "1 message lost" in screen_text(app), base=15, what="lost")
            text = screen_text(app)
            assert "missing · fetching" not in text
            lines = text.splitlines()
            i = next(i for i, line in enumerate(lines) if "1 message lost" in line)
            assert "after the gap" in lines[i + 1]
            assert row_with(app, "never arrives") is None
    finally:
        await bob.close()


async def test_typing_indicator_both_ways(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    app = tui(tmp_path / "alice", hub.transport(), tick_interval=0.1)
    app.opts.typing_ttl = 1.0
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await pilot.press(*"typing a long line")  # throttled: one notice
            from app.tui.typing import decode_typing

            def notices() -> int:  # typing notices (not the presence heartbeat)
                return sum(isinstance(e, Ephemeral) and decode_typing(e.content) is not None
                           for e in bob.events)  # fmt: skip

            await wait_until(lambda: notices() > 0, what="bob sees typing")
            await asyncio.sleep(0.2)
            assert notices() == 1
            from app.tui.typing import encode_typing

            await bob.node.send_ephemeral("general", encode_typing("bob"))
            await wait_until(lambda: "bob is typing…" in screen_text(app), what="indicator")
            await wait_until(
                lambda: "typing…" not in screen_text(app), base=5, what="indicator expires"
            )
            await bob.node.send_ephemeral("general", encode_typing("bob"))
            await wait_until(lambda: "bob is typing…" in screen_text(app))
            await bob.say("done typing")
            await wait_until(lambda: row_with(app, "done typing") is not None)
            await pilot.pause()
            assert "typing…" not in screen_text(app)  # a message ends it at once
    finally:
        await bob.close()


async def test_channels_unread_mentions_bell_and_new_line(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=("general", "random"))
    app = tui(tmp_path / "alice", hub.transport(), channels=("general", "random"))
    bells = []
    app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            assert app.model.current == "general"
            await bob.say("old news", channel="random")
            await wait_until(lambda: app.model.channels["random"].unread == 1)
            await pilot.press("ctrl+n")
            assert app.model.current == "random"
            await pilot.press("ctrl+p")
            await bob.say("one", channel="random")
            await bob.say("hey @alice look", channel="random")
            await wait_until(lambda: app.model.channels["random"].unread == 2)
            await pilot.pause()
            assert bells == [1]
            entry = line_with(app, "#random")
            assert "2" in entry and "@" in entry.split("#random", 1)[1]
            await pilot.press("alt+2")
            assert app.model.current == "random"
            await pilot.pause()
            text = screen_text(app)
            lines = text.splitlines()
            new = next(i for i, line in enumerate(lines) if "─ new ─" in line)
            assert "│ one" in lines[new + 1]
            assert "old news" in "\n".join(lines[:new])
            assert app.model.channels["random"].unread == 0
            assert "2" not in line_with(app, "#random").split("#random", 1)[1]
            await bob.say("in general now", channel="general")
            await wait_until(lambda: app.model.channels["general"].unread == 1)
            await pilot.press("alt+1")
            assert app.model.current == "general"
            await pilot.press("ctrl+n", "ctrl+n")
            assert app.model.current == "general"  # wraps around
    finally:
        await bob.close()


async def test_a_narrow_terminal_shows_news_elsewhere_in_the_channel_bar(tmp_path: Path) -> None:
    """Below 70 columns (a tmux pane) the channel list is hidden; the channel bar then
    says how many messages are new in the other channels, and whether one mentions you."""
    async with alice_and_bob(tmp_path, size=(60, 20), channels=("general", "random")) as (
        app,
        pilot,
        bob,
    ):
        await pilot.pause()
        assert not app.chat.query_one("#channels").display
        bar = screen_text(app).splitlines()[0]
        assert bar.strip().startswith("#general · public") and " new in " not in bar
        await bob.say("psst", channel="random")
        await bob.say("hey @alice", channel="random")
        await wait_until(lambda: app.model.channels["random"].unread == 2)
        await wait_until(lambda: "#general · 2 new in #random @ (Ctrl+N)" in screen_text(app))
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert " new in " not in screen_text(app).splitlines()[0]
        await bob.say("more", channel="general")
        await wait_until(lambda: "#random · 1 new in #general (Ctrl+N)" in screen_text(app))
        await pilot.resize_terminal(*SIZE)  # wide: the channel list says it instead
        await wait_until(lambda: app.chat.query_one("#channels").display)
        await wait_until(lambda: " new in " not in screen_text(app), what="bar without it")


async def test_typing_repaints_the_input_only_and_long_lines_scroll(tmp_path: Path) -> None:
    """A keystroke does not lay the screen out again (that cost ms per key under load);
    a line longer than the box still scrolls sideways to keep the cursor in view."""
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        await pilot.pause()
        box = app.chat.query_one("#input")
        layouts = 0
        refresh_layout = app.screen._refresh_layout

        def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal layouts
            layouts += 1
            return refresh_layout(*args, **kwargs)

        app.screen._refresh_layout = spy  # type: ignore[method-assign]
        await pilot.press(*"hello there")
        await pilot.pause()
        assert layouts == 0
        assert "hello there" in line_with(app, "hello there")
        long = "".join(f"{i:03d}." for i in range(60))  # 240 characters, wider than the box
        await pilot.press(*long)
        await pilot.pause()
        assert box.value == "hello there" + long
        assert box.scroll_x > 0
        assert "058.059." in screen_text(app)  # the end, where the cursor is, is shown
        await pilot.press("home")
        await pilot.pause()
        assert box.scroll_x == 0 and "hello there" in screen_text(app)


async def test_the_node_works_in_short_rounds_under_the_app(tmp_path: Path) -> None:
    """A node round runs without yielding: in the app it takes a few inputs at a time,
    so a burst of envelopes does not hold the keys typed meanwhile."""
    from app.tui.app import MAX_ROUND

    app = tui(tmp_path / "alice", MemoryHub().transport())
    assert app.opts.node_options is not None and app.opts.node_options.max_round > MAX_ROUND
    async with app.run_test(size=SIZE):
        await started(app)
        assert app.node is not None and app.node.options.max_round == MAX_ROUND


async def test_sigterm_quits_like_ctrl_q(tmp_path: Path) -> None:
    """``kill`` (SIGTERM) or a closed terminal (SIGHUP) used to kill the TUI where it
    stood: exit 143, the terminal left in TUI mode, where you left off not saved. Now
    it quits as Ctrl+Q does: the node closes and tui.json is written."""
    import os
    import signal

    app = tui(tmp_path / "alice", MemoryHub().transport(), remember_state=True)
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        await pilot.press(*"before the signal", "enter")
        await wait_until(lambda: row_with(app, "before the signal") is not None)
        os.kill(os.getpid(), signal.SIGTERM)  # to this process: the app's handler takes it
        await wait_until(lambda: app.return_code is not None, what="the app exits")
    assert app.return_code == 0
    assert app.node is not None and app.node.closed
    assert (tmp_path / "alice" / "tui.json").exists()
    # the handler went with the app: a later SIGTERM is not swallowed by a dead app
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM)


async def test_a_peers_control_characters_are_shown_escaped(tmp_path: Path) -> None:
    """Escape sequences and bidi overrides in a peer's text reach the screen as visible
    escapes (Rich and Textual pass ESC and C1 through to the terminal: a peer could clear
    or retitle it); a line break in a message is a second line of the same row."""
    evil = "clear\x1b[2J\x1b]0;owned\x07 \x9b31m \u202eevil\u202c done"
    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        await bob.say(evil)
        await bob.say("first line\nsecond line")
        await wait_until(lambda: row_with(app, "first line\nsecond line") is not None)
        await pilot.pause()
        shown = screen_text(app)
        for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\u202c"):
            assert raw not in shown
        assert "clear\\x1b[2J\\x1b]0;owned\\x07 \\x9b31m \\u202eevil\\u202c done" in shown
        assert "bob │ first line" in line_with(app, "first line")
        assert line_with(app, "second line").rstrip().endswith("│ second line")
        # the search dialog shows it escaped as well
        await send_line(pilot, "/search -a owned")
        await wait_until(lambda: "bob: clear\\x1b[2J" in screen_text(app), what="found")
        assert "\x1b" not in screen_text(app)


async def test_a_paste_of_several_lines_is_one_message_after_a_dialog(tmp_path: Path) -> None:
    """Input keeps only a paste's first line; sdschat shows all of it in a dialog (the
    input's text around the cursor included), Ctrl+S sends it as one message, Esc
    leaves the input as it was, and a text over the size limit stays in the dialog."""
    from textual import events

    from app.tui.screens.dialogs import MultiLineScreen
    from app.tui.widgets.chat_input import ChatInput

    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        box = app.chat.query_one(ChatInput)

        async def paste(text: str) -> None:
            box.post_message(events.Paste(text))
            await pilot.pause()

        await paste("one line\n")  # a single line stays in the input, as typed
        assert box.value == "one line" and not isinstance(app.screen, MultiLineScreen)
        box.value, box.cursor_position = "see: ", 5
        await paste("def f():\r\n    return 1\r\n")
        assert isinstance(app.screen, MultiLineScreen)
        assert "Send 2 lines as one message to #general?" in screen_text(app)
        app.screen.query_one("#multiline-text").text = "only one\n"  # type: ignore[attr-defined]
        await wait_until(lambda: "Send this line as one message to" in screen_text(app))
        await pilot.press("escape")
        assert not isinstance(app.screen, MultiLineScreen) and box.value == "see: "
        assert "def f" not in bob.texts()
        await paste("def f():\n    return 1")
        await pilot.press("ctrl+s")
        await wait_until(lambda: "see: def f():\n    return 1" in bob.texts(), what="sent")
        assert box.value == "" and row_with(app, "see: def f():\n    return 1") is not None
        await pilot.pause()
        assert line_with(app, "    return 1").rstrip().endswith("│     return 1")
        # /me, then a paste: an action of two lines
        box.value, box.cursor_position = "/me ", 4
        await paste("waves\nand smiles")
        await pilot.press("ctrl+s")
        await wait_until(lambda: "waves\nand smiles" in bob.texts(), what="the action")
        kinds = [e.kind for e in bob.events if getattr(e, "text", None) == "waves\nand smiles"]
        assert kinds == ["me"]
        # too long: the dialog says so and keeps the text
        box.value = ""
        await paste("x" * 70_000 + "\ny")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, MultiLineScreen)
        assert "too long to send" in screen_text(app)
        assert app.screen.query_one("#multiline-text").text.endswith("\ny")  # type: ignore[attr-defined]
        await pilot.press("escape")


async def test_a_long_paste_is_offered_as_a_file_and_arrives_whole(tmp_path: Path) -> None:
    """A paste of 40 lines or more (a log, a stack trace) is offered as a text file first;
    Ctrl+F sends it so (a manifest and segments, as /send does), and the other member
    holds the file with the pasted bytes, checked, and no message of its text. A text too
    long for one message says Ctrl+F sends it as a file."""
    from textual import events

    from app.chat.files import stored_file
    from app.node.events import Delivered
    from app.tui.screens.dialogs import MultiLineScreen
    from app.tui.widgets.chat_input import ChatInput

    log = "\n".join(f"2026-12-07 02:14:{i:02d} worker {i}: retrying" for i in range(60))
    async with alice_and_bob(tmp_path) as (app, pilot, bob):
        box = app.chat.query_one(ChatInput)
        box.post_message(events.Paste("x" * 70_000 + "\ny"))
        await wait_until(lambda: isinstance(app.screen, MultiLineScreen), what="the dialog")
        await pilot.press("ctrl+s")
        flat = lambda: " ".join(screen_text(app).split())  # noqa: E731 (a wrapped line)
        await wait_until(lambda: "too long to send" in flat() and "Ctrl+F sends it as a file"
                         in flat(), what="too long: Ctrl+F sends it as a file")  # fmt: skip
        await pilot.press("escape")
        box.post_message(events.Paste(log))
        await wait_until(lambda: isinstance(app.screen, MultiLineScreen), what="the dialog")
        await wait_until(lambda: "60 lines" in flat() and "Ctrl+F sends it as a file" in flat(),
                         what="60 lines: offered as a file first")  # fmt: skip
        await pilot.press("ctrl+f")

        def manifests() -> list[Delivered]:
            return [e for e in bob.events if isinstance(e, Delivered) and e.kind == "file"]

        await wait_until(lambda: bool(manifests()), what="bob holds the file's manifest")
        [manifest] = manifests()

        async def whole() -> bool:
            f = await stored_file(bob.node.store, "general", manifest.message_id)
            return f is not None and f.complete and f.intact() is True

        for _ in range(200):  # the segments follow the manifest
            if await whole():
                break
            await asyncio.sleep(0.05)
        f = await stored_file(bob.node.store, "general", manifest.message_id)
        assert f is not None and f.complete and f.data() == log.encode()
        assert re.fullmatch(r"paste-\d{8}-\d{6}\.txt", f.info.name), f.info.name
        assert not any("worker 59" in t for t in bob.texts())  # no message of its text
        assert box.value == "" and not isinstance(app.screen, MultiLineScreen)
