"""Issue 15: what a person who keeps the chat open all day expects (restarts, times,
input history, refusals, narrow panes, presence, nick changes)."""

from __future__ import annotations

import asyncio
import json
import stat
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

from app.launch.joined import JOINED_FILE
from app.node.transport import MemoryHub
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_log import MessageLog

pytestmark = pytest.mark.timeout(120)


async def test_joined_channels_and_their_keys_survive_a_restart(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(
        tmp_path / "bob", hub, "bob", seed=2, channels=("general", "ops"), passphrase="s3cret"
    )
    try:
        app = tui(tmp_path / "alice", hub.transport(), passphrase="s3cret")
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await type_line(pilot, "/passphrase")  # another passphrase for the next /join
            pilot.app.screen.query_one("Input").value = "other"
            await pilot.press("enter")
            await type_line(pilot, "/join #side")
            await wait_until(lambda: app.model.order == ["general", "side"], what="side")
            app.passphrase = "s3cret"
            await type_line(pilot, "/join ops")
            await wait_until(lambda: "ops" in app.model.order, what="ops")
        path = tmp_path / "alice" / JOINED_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        raw = path.read_text()
        assert "s3cret" not in raw and "other" not in raw  # keys, never passphrases
        assert [c["name"] for c in json.loads(raw)["channels"]] == ["general", "side", "ops"]

        # started again with the command line's channel only: the others come back,
        # each with its own key (no passphrase asked), and messages flow in them
        app = tui(tmp_path / "alice", hub.transport(), passphrase="s3cret")
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            assert app.model.order == ["general", "side", "ops"]
            assert app.model.current == "general"
            await bob.say("back in ops", "ops")
            await wait_until(lambda: app.model.channels["ops"].unread == 1, what="ops line")
            await type_line(pilot, "/leave #side")
            await wait_until(lambda: "side" not in app.model.order, what="left side")
        app = tui(tmp_path / "alice", hub.transport(), passphrase="s3cret")
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            assert app.model.order == ["general", "ops"]  # /leave forgot it
    finally:
        await bob.close()


async def test_times_are_the_authors_send_times_with_day_separators(tmp_path: Path) -> None:
    import random
    from datetime import UTC, datetime

    from tui_helpers import FAST, write_identity

    from app.node.runtime import Node, NodeOptions
    from net.channel_key import TEST_KDF

    # bob's clock: Tuesday 30 December 2025, 13:31 UTC; alice's (the app's): 2026-01-01 00:00
    bob_ms = int(datetime(2025, 12, 30, 13, 31, 5, tzinfo=UTC).timestamp() * 1000)
    hub = MemoryHub()
    write_identity(tmp_path / "bob", 2)
    opts = NodeOptions(config=FAST, kdf=TEST_KDF, rng=random.Random(2), clock=lambda: bob_ms)
    bob = await Node.open(tmp_path / "bob", hub.transport(), name="bob", options=opts)
    await bob.start()
    await bob.join("general", None)
    try:
        app = tui(tmp_path / "alice", hub.transport(), fixed=True)
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await bob.send("general", "sent on tuesday")
            await wait_until(lambda: "sent on tuesday" in texts(app), what="bob's line")
            await type_line(pilot, "and my reply today")
            await wait_until(lambda: "and my reply today" in texts(app), what="own line")
            await pilot.pause()
            screen = screen_text(app)
            lines = screen.splitlines()
            tuesday = next(i for i, ln in enumerate(lines) if "Tuesday 30 December 2025" in ln)
            thursday = next(i for i, ln in enumerate(lines) if "Thursday 1 January" in ln)
            assert "──" in lines[tuesday] and "2026" not in lines[thursday]
            bob_line = next(i for i, ln in enumerate(lines) if "sent on tuesday" in ln)
            own = next(i for i, ln in enumerate(lines) if "and my reply today" in ln)
            assert tuesday < bob_line < thursday < own
            assert "13:31" in lines[bob_line]  # the author's time, not the arrival (00:00)
            assert "00:00" in lines[own]
            # /info: the author's time and the arrival here
            log = app.chat.query_one(MessageLog)
            log.select(next(r.key for r in log.view.rows if r.text == "sent on tuesday"))
            await type_line(pilot, "/info")
            await pilot.pause()
            info = screen_text(app)
            assert "2025-12-30 13:31:05" in info and "2026-01-01 00:00:00" in info
    finally:
        await bob.close()


async def test_input_history_is_per_channel_and_survives_a_restart(tmp_path: Path) -> None:
    from app.tui.app import HISTORY_KEPT, INPUT_HISTORY_FILE

    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=("general", "ops"))
    try:
        app = tui(tmp_path / "alice", hub.transport(), channels=("general", "ops"))
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            await type_line(pilot, "first in general")
            await type_line(pilot, "second in general")
            await type_line(pilot, "/switch ops")
            await type_line(pilot, "only in ops")
            box = app.chat.query_one(ChatInput)
            for i in range(HISTORY_KEPT + 5):  # more than is kept on disk
                box.remember(f"old {i}")
            box.remember("only in ops, again")
            app.saved.history_changed("ops")
        path = tmp_path / "alice" / INPUT_HISTORY_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        saved = json.loads(path.read_text())
        assert len(saved["ops"]) == HISTORY_KEPT and saved["ops"][-1] == "only in ops, again"

        app = tui(tmp_path / "alice", hub.transport(), channels=("general", "ops"))
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            box = app.chat.query_one(ChatInput)
            await pilot.press("up")
            assert box.value == "/switch ops"  # typed in general: general's history
            await pilot.press("up", "up")
            assert box.value == "first in general"
            await pilot.press("down", "down", "down")
            assert box.value == ""
            await type_line(pilot, "/switch ops")
            await pilot.press("up")
            assert box.value == "only in ops, again"
    finally:
        await bob.close()


async def test_a_refused_line_stays_in_the_input_with_the_reason(tmp_path: Path) -> None:
    from textual import events

    from app.tui.screens.dialogs import MultiLineScreen

    async with alice_and_bob(tmp_path) as (app, pilot, _bob):
        box = app.chat.query_one(ChatInput)
        long_line = "y" * 70_000
        await type_line(pilot, long_line)
        assert box.value == long_line  # not lost
        assert "limit is 65,536" in str(box.border_subtitle) or "65536" in str(
            box.border_subtitle
        )
        box.value = "fixed"  # editing clears the reason
        assert not box.border_subtitle
        box.value = ""
        await type_line(pilot, "/nick two words")
        assert box.value == "/nick two words" and "without spaces" in str(box.border_subtitle)
        box.value = ""
        await type_line(pilot, "/join    ")
        assert box.value.startswith("/join")
        # the paste dialog says "too long" as the text is edited, before Ctrl+S
        box.value = ""
        box.post_message(events.Paste("a\n" + "x" * 70_000))
        await pilot.pause()
        assert isinstance(app.screen, MultiLineScreen)
        await wait_until(lambda: "too long to send" in screen_text(app), what="said at once")
        app.screen.query_one("#multiline-text").text = "a\nshort"  # type: ignore[attr-defined]
        await wait_until(lambda: "too long to send" not in screen_text(app), what="cleared")
        await pilot.press("escape")


async def test_nick_is_announced_refused_with_a_reason_and_long_names_fit(
    tmp_path: Path,
) -> None:
    from app.names import MAX_NAME_CHARS

    async with alice_and_bob(tmp_path, size=(80, 24)) as (app, pilot, bob):
        await type_line(pilot, "/nick " + "n" * (MAX_NAME_CHARS + 1))
        assert app.node.name == "alice"
        assert any(f"at most {MAX_NAME_CHARS}" in n.message for n in app._notifications)
        await type_line(pilot, "/nick alicia")
        await wait_until(
            lambda: ("nick", "alice is now known as alicia")
            in [(e.kind, e.text) for e in bob.events if hasattr(e, "kind")],
            what="bob got the announcement",
        )
        await wait_until(lambda: "alice is now known as alicia" in texts(app), what="own line")
        await bob.node.set_name("bartholomew-the-great")
        await bob.say("hello from a long name")
        await wait_until(lambda: "hello from a long name" in texts(app), what="long name")
        await pilot.pause()
        screen = screen_text(app)
        line = next(ln for ln in screen.splitlines() if "hello from a long name" in ln)
        assert "bartho…eat │" in line  # start and end of the name, not a silent cut
        nick_line = next(ln for ln in screen.splitlines() if "is now known as alicia" in ln)
        assert "-- │" in nick_line


async def test_online_now_is_told_apart_from_heard_from(tmp_path: Path) -> None:
    import time

    from app.tui.widgets.panels import PeerList

    ahead = [0.0]
    async with alice_and_bob(tmp_path, clock=lambda: time.time() + ahead[0]) as (
        app,
        pilot,
        bob,
    ):
        await bob.say("hi")
        await wait_until(lambda: "hi" in texts(app), what="bob heard")
        await pilot.press("f2")
        await wait_until(lambda: "· 1 online" in screen_text(app), what="bob online")
        assert "heard from" not in screen_text(app).splitlines()[0]
        assert "Peers (2 online)" in screen_text(app)
        # bob goes quiet (his node closed: no sync messages any more) for longer than
        # the online window: still in the list, as heard from, no longer online
        await bob.close()
        ahead[0] = app.online.window_ms() / 1000 + 5
        await wait_until(lambda: "· 0 online · 1 heard from" in screen_text(app), what="away")
        entries = app.chat.query_one(PeerList).entries
        assert [e.online for e in entries] == [True, False]
        assert entries[1].seen.startswith("heard from ")


async def test_an_80_column_pane(tmp_path: Path) -> None:
    from app.tui.screens.dialogs import KEYS

    async with alice_and_bob(tmp_path, size=(80, 24)) as (app, pilot, bob):
        await bob.say("one")
        await bob.say("two")
        await wait_until(lambda: "two" in texts(app), what="bob's lines")
        await pilot.pause()
        status = screen_text(app).splitlines()[-1]
        assert "alice" in status and "store none" in status, status  # own name and store
        # F1: a description that wraps goes on under itself, not at the left edge
        await pilot.press("f1")
        await pilot.pause()
        lines = screen_text(app).splitlines()
        wrapped = 0
        for key, what in KEYS:
            i = next(
                (j for j, ln in enumerate(lines) if ln.strip("▕▏│ ┃").startswith(key)), None
            )
            if i is None:
                continue  # scrolled out of the dialog
            first_word = what.split()[0]
            col = lines[i].index(first_word, lines[i].index(key) + len(key))
            nxt = lines[i + 1]
            rest = nxt[col:].strip("▕▏│ ┃▔▁▎▊")
            if what not in lines[i] and rest:  # wrapped (and the next row is in view)
                wrapped += 1
                start = col + len(nxt[col:]) - len(nxt[col:].lstrip())
                assert nxt[:col].strip("▕▏│ ┃") == "" and start == col, (lines[i], nxt)
        assert wrapped, "no description was long enough to wrap at 80 columns"
        await pilot.press("escape")
        # /info: one row per dependency
        log = app.chat.query_one(MessageLog)
        log.select(next(r.key for r in log.view.rows if r.text == "two"))
        await type_line(pilot, "/info")
        await pilot.pause()
        info = screen_text(app).splitlines()
        deps = [ln for ln in info if "✓ " in ln]  # bob's own lines: held here
        assert deps and all("…" in ln for ln in deps)  # shortened to one row each
        depends = next(ln for ln in info if "depends on" in ln)
        n = int(depends.split("depends on")[1].split()[0])
        assert len(deps) == min(n, 12)
        await pilot.press("escape")


async def test_notifications_do_not_cover_the_input(tmp_path: Path) -> None:
    from textual.widgets._toast import Toast

    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await started(app)
        app.notify("something happened " * 4, timeout=10)
        await wait_until(lambda: bool(app.screen.query(Toast)), what="the toast")
        await pilot.pause()
        box = app.chat.query_one(ChatInput).region
        toasts = list(app.screen.query(Toast))
        assert all(t.region.area and not t.region.overlaps(box) for t in toasts)
        status = app.screen.query_one("#status").region
        assert all(not t.region.overlaps(status) for t in toasts)


async def test_wss_to_a_plain_relay_says_what_to_do(tmp_path: Path) -> None:
    from app.node.transport import RelayTransport
    from tests.procs import Cluster

    cluster = Cluster(tmp_path)
    try:
        _relay, url = await asyncio.to_thread(cluster.relay)
        wss = url.replace("ws://", "wss://")
        transport = RelayTransport(wss, backoff_base=0.2, backoff_max=0.5)
        app = tui(tmp_path / "alice", transport, transport_label="relay", relay_url=wss)
        async with app.run_test(size=SIZE):
            await started(app)
            await wait_until(
                lambda: any("cannot reach" in n.message for n in app._notifications),
                what="the offline notice",
            )
            note = next(n.message for n in app._notifications if "cannot reach" in n.message)
            assert "ConnectionResetError" not in note and "Errno" not in note
            assert f"Use {url} instead of wss://" in note
    finally:
        cluster.close()


async def test_every_late_message_of_a_burst_is_marked_recovered(tmp_path: Path) -> None:
    """Bob's transport drops the first copy of known envelopes: in one burst a later
    line names the gap (its causal history), at the end of another only bob's sync
    messages and resends can. Every dropped line is marked '↺ recovered' when it
    arrives, and no other line is."""
    import dataclasses

    from tui_helpers import FAST, GatedTransport

    import sds
    from app.chat.content import decode_content
    from net.channel_key import TEST_KDF, derive_channel_key
    from net.envelope import EnvelopeError, open_envelope

    # resends come late (3 s): bob's sync messages (every < 200 ms) name the gap first
    config = dataclasses.replace(
        FAST, resend_unacknowledged_ms=3000, resend_possibly_acknowledged_ms=6000
    )
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, gated=True, config=config)
    gate = bob.transport
    assert isinstance(gate, GatedTransport)
    app = tui(tmp_path / "alice", hub.transport())
    key = derive_channel_key("general", None, params=TEST_KDF)

    def dropped_texts() -> set[str]:
        """Texts of the content messages dropped so far (first copies only: this is read
        right after each burst, before any resend, which comes 3 s later)."""
        out = set()
        for env in gate.dropped_out:
            try:
                content = sds.decode(open_envelope(env, key).sds_bytes).content
            except (EnvelopeError, sds.DecodeError):
                continue
            if content:
                out.add(decode_content(content).text)
        return out

    try:
        async with app.run_test(size=SIZE) as pilot:
            await started(app)
            burst_a = ["a1", "a2", "a3", "a4"]
            burst_b = ["b1", "b2", "b3"]
            await bob.say("a0")
            await wait_until(lambda: "a0" in texts(app), what="a0")
            gate.drop_next_out = 3  # a1..a3: the gap a4 names
            for t in burst_a:
                await bob.say(t)
            dropped = dropped_texts()
            gate.drop_next_out = 0
            await wait_until(lambda: set(burst_a) <= set(texts(app)), base=30, what="burst a")
            await bob.say(burst_b[0])
            await wait_until(lambda: "b1" in texts(app), what="b1")
            gate.drop_next_out = 2  # b2, b3: the end of a burst, named by nothing but sync
            for t in burst_b[1:]:
                await bob.say(t)
            dropped |= dropped_texts()
            gate.drop_next_out = 0
            await wait_until(lambda: set(burst_b) <= set(texts(app)), base=30, what="burst b")
            await pilot.pause()
            assert dropped & set(burst_a) and dropped & {"b2", "b3"}, dropped
            rows = {r.text: r for r in app.chat.query_one(MessageLog).view.rows}
            marks = {t: rows[t].recovered for t in ["a0", *burst_a, *burst_b]}
            assert marks == {t: t in dropped for t in marks}, (marks, dropped)
            screen = screen_text(app)
            for t in marks:
                line = next(ln for ln in screen.splitlines() if f"│ {t}" in ln)
                assert ("↺ recovered" in line) == (t in dropped), line
    finally:
        await bob.close()


def test_urls_are_hyperlinks_and_wrapping_keeps_them_whole() -> None:
    from rich.console import Console

    from app.tui.model import Row
    from app.tui.render import palette, row_lines

    url = "https://example.org/docs/a_b?x=1&y=2"
    text = f"read {url}. it explains the backoff and the jitter we talked about"
    row = Row((1, "m1"), "s1", "bob", "msg", text, 1)
    for width in (60, 70, 100):
        lines = row_lines(row, width, Console(width=width), palette(True))
        holding = [t for t in lines if url in t.plain]
        assert len(holding) == 1, [t.plain for t in lines]  # never split inside the URL
        links = {str(s.style.link) for s in holding[0].spans if getattr(s.style, "link", None)}
        assert links == {url}  # the '.' after it is not part of the link
    hostile = Row((1, "m2"), "s1", "bob", "msg", "http://x.org/\x1b]8;;evil\x07", 1)
    lines = row_lines(hostile, 80, Console(width=80), palette(True))
    links = [str(s.style.link) for t in lines for s in t.spans if getattr(s.style, "link", None)]
    assert links and all("\x1b" not in link and "\x07" not in link for link in links)
