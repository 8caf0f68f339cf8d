"""``/info``: who has a message (the members whose causal histories or bloom filters
show it) and who reacted with what (issue 27, item 9: "who has read")."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui_helpers import T, screen_text, start_peer, texts, tui, type_line, wait_until

from app.chat.lines import typed_text
from app.node.transport import MemoryHub
from app.tui.readers import who_has
from app.tui.widgets.message_log import MessageLog
from storage import Store, StoredMessage


def _info_lines(app: object) -> list[str]:
    """The dialog's lines, without its frame."""
    return [line.strip().strip("│").strip() for line in screen_text(app).splitlines()]  # type: ignore[arg-type]


async def test_info_lists_who_has_the_message_and_who_reacted(tmp_path: Path) -> None:
    """alice's line reached bob (his reply names it) but not carol (she hears nothing
    after her first line): /info says bob has it by his causal history, carol shows
    no sign yet, and that bob reacted with 👍. On carol's line, bob has it."""
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    carol = await start_peer(tmp_path / "carol", hub, "carol", seed=3, gated=True)
    app = tui(tmp_path / "alice", hub.transport())
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await carol.say("carol here")
            await wait_until(lambda: "carol here" in texts(app) and "carol here" in bob.texts(),
                             what="carol's line at alice and bob")  # fmt: skip
            carol.transport.hold = True  # type: ignore[attr-defined]  # she hears no more
            await type_line(pilot, "did you get this?")
            view = app.model.channels["general"]
            await wait_until(lambda: "did you get this?" in bob.texts()
                             and any(r.text == "did you get this?" for r in view.rows),
                             what="bob got it, and alice's view shows it")  # fmt: skip
            mine = next(r for r in view.rows if r.text == "did you get this?")
            await bob.say("yes")
            await bob.node.send("general", typed_text(mine.message_id or "", "👍"), "react")
            await wait_until(lambda: "yes" in texts(app) and bool(mine.reactions),
                             what="bob's reply and reaction at alice")  # fmt: skip
            log = app.chat.query_one(MessageLog)
            log.select(mine.key)
            await type_line(pilot, "/info")
            await wait_until(lambda: app.screen.id == "info", what="info")
            lines = _info_lines(app)
            assert any(ln.startswith("who has it") and "1 of 2 other members" in ln
                       for ln in lines), lines  # fmt: skip
            assert any(ln.startswith("✓ bob") and "causal history" in ln for ln in lines), lines
            assert any(ln.startswith("· carol") and "no sign yet" in ln for ln in lines), lines
            assert any(ln.startswith("👍 1") and "bob" in ln for ln in lines), lines
            await pilot.press("escape")
            await wait_until(lambda: app.screen.id != "info", what="info closed")
            theirs = next(r for r in view.rows if r.text == "carol here")
            log.select(theirs.key)
            await type_line(pilot, "/info")
            await wait_until(lambda: app.screen.id == "info", what="info of carol's line")
            lines = _info_lines(app)
            assert any(ln.startswith("who has it") and "1 of 1 other member " in ln
                       for ln in lines), lines  # fmt: skip
            assert any(ln.startswith("✓ bob") and "causal history" in ln for ln in lines), lines
    finally:
        await bob.close()
        await carol.close()


async def test_who_has_follows_histories_at_any_depth_and_is_bounded(tmp_path: Path) -> None:
    """A member whose message names only a later message that names M has M too; a
    Lamport time out of causal order does not hide it; the scan stops at its limit."""
    store = await Store.open(tmp_path / "db")
    try:
        await store.join_channel("c", b"t" * 32, is_public=True)
        msgs = [
            StoredMessage("c", "m", "alice", 10, b"x"),
            StoredMessage("c", "b1", "bob", 20, b"x", causal_history=("m",)),
            StoredMessage("c", "c1", "carol", 30, b"x", causal_history=("b1",)),
            # dave's line names carol's but carries an earlier Lamport time than it
            StoredMessage("c", "d1", "dave", 25, b"x", causal_history=("c1",)),
            StoredMessage("c", "e1", "erin", 40, b"x", causal_history=("other",)),
        ]
        await store.insert_messages(msgs)
        have = await who_has(store, "c", "m", 10, members=["bob", "carol", "dave", "erin"])
        assert have.by_history == {"bob": "b1", "carol": "c1", "dave": "d1"}
        assert have.complete and have.scanned == 4
        short = await who_has(store, "c", "m", 10, members=["bob", "carol", "erin"], limit=1)
        assert short.by_history == {"bob": "b1"} and not short.complete
        filt = await who_has(store, "c", "m", 10, members=["erin"], filters=["erin", "bob"])
        assert filt.by_filter == ["erin"]  # bob shows it by history already
    finally:
        await store.close()
