"""Issue 41 item 4, "removed or left means read-only": two real TUIs (alice, the admin,
and dave) and a scripted member (bob) on one in-memory hub, each with its own data
directory. Alice removes dave: dave's screen says so in a lasting banner, with who and
when, and refuses what he types with that reason; what was said before the cut stays
readable, and the envelopes sealed to keys he was not given raise no "could not be
opened" warning; the same after a restart. Alice's roster, /who, /info and counts drop
dave at once, and she is told with names, not ids."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_helpers import T, screen_text, start_peer, texts, tui, type_line, wait_until

from app.node.events import InviteMade
from app.node.transport import MemoryHub
from app.tui import SdsChatApp
from app.tui.screens.dialogs import TextScreen
from app.tui.screens.invite import InviteScreen
from app.tui.widgets.banner import Banner
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_log import MessageLog
from app.tui.widgets.panels import PeerList

pytestmark = pytest.mark.timeout(180)

SIZE = (110, 32)


def dialog_text(app: SdsChatApp) -> str:
    """The text of the dialog on top (not the log behind it)."""
    from textual.widgets import Static

    return str(app.screen.query_one("#dialog-text", Static).content)


def notes(app: SdsChatApp) -> list[str]:
    return [n.message for n in app._notifications]


async def invite(app: SdsChatApp, pilot: object) -> str:
    """A code from alice's node (its dialog closed again)."""
    assert app.node is not None
    made: list[InviteMade] = []
    unsubscribe = app.node.subscribe(
        lambda e: made.append(e) if isinstance(e, InviteMade) else None)
    await app.node.make_invite("team", ())
    await wait_until(lambda: bool(made) and isinstance(app.screen, InviteScreen), what="code")
    await pilot.press("escape")  # type: ignore[attr-defined]
    unsubscribe()
    return made[0].code


async def test_a_removed_member_reads_the_history_and_writes_nothing(tmp_path: Path) -> None:
    hub = MemoryHub()
    alice = tui(tmp_path / "alice", hub.transport(), channels=("team",), create=True)
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=())
    dave_dir = tmp_path / "dave"
    try:
        async with alice.run_test(size=SIZE) as pa:
            await asyncio.wait_for(alice.ready.wait(), T(20))
            await bob.node.join_by_invite(await invite(alice, pa), timeout_s=T(20))
            dave = tui(dave_dir, hub.transport(), name="dave", seed=4, channels=("team",),
                       invite=await invite(alice, pa))  # fmt: skip
            async with dave.run_test(size=SIZE) as pd:
                await asyncio.wait_for(dave.ready.wait(), T(30))
                await type_line(pd, "hi from dave")
                await bob.say("hi from bob", "team")
                await wait_until(lambda: {"hi from dave", "hi from bob"} <= set(texts(alice)),
                                 what="alice has both")  # fmt: skip
                await wait_until(lambda: "hi from bob" in texts(dave), what="dave has bob's")
                await pa.press("f2")
                peers = alice.chat.query_one(PeerList)
                await wait_until(lambda: any(e.name == "dave" for e in peers.entries),
                                 what="dave in alice's F2")  # fmt: skip

                await type_line(pa, "/remove dave")
                # alice: told with names, and dave is out of every list at once
                await wait_until(lambda: any(n.startswith("dave was removed from #team by "
                                                          "alice on ") for n in notes(alice)),
                                 what="alice's notice, by name")  # fmt: skip
                # the membership line names him too (it read "removed 0b29d54b")
                await wait_until(lambda: "removed dave (new channel keys)" in texts(alice),
                                 what="the removal line, by name")  # fmt: skip
                await pa.pause()
                assert not any(e.name == "dave" for e in peers.entries)
                assert "members (2, you: admin)" in screen_text(alice)
                await type_line(pa, "/who")
                await wait_until(lambda: isinstance(alice.screen, TextScreen), what="/who")
                await pa.pause()
                who = dialog_text(alice)
                assert "bob" in who and "dave" not in who
                await pa.press("escape")
                log = alice.chat.query_one(MessageLog)
                bob_row = next(r for r in log.view.rows if r.text == "hi from bob")  # type: ignore[union-attr]
                log.select(bob_row.key)
                await type_line(pa, "/info")
                await wait_until(lambda: isinstance(alice.screen, TextScreen), what="/info")
                await pa.pause()
                info = dialog_text(alice)
                assert "who has it" in info.lower() or "bob" in info, info
                assert "dave" not in info and dave.node is not None
                assert dave.node.sender_id[:8] not in info
                await pa.press("escape")

                # dave: a lasting banner with who and when; the input refuses with it
                banner = dave.chat.query_one(Banner)
                await wait_until(lambda: banner.display, what="dave's banner")
                await pd.pause()
                assert banner.text.startswith("you were removed from #team by alice on 20")
                assert "you were removed from #team by alice on 20" in screen_text(dave)
                assert "you: read-only" in screen_text(dave)
                assert not any("could not be opened" in n for n in notes(dave))
                box = dave.chat.query_one(ChatInput)
                await type_line(pd, "still here?")
                assert box.value == "still here?"  # kept, to copy elsewhere
                assert "you were removed from #team by alice" in str(box.border_subtitle)
                assert "still here?" not in texts(dave)

                await bob.say("after the cut", "team")  # sealed to keys dave has not
                await wait_until(lambda: "after the cut" in texts(alice), what="alice has it")
                node = dave.node
                assert node is not None
                await wait_until(lambda: node.counters["rejected_wrong_key_or_tampered"] > 0,
                                 what="dave's node refused what it cannot open")  # fmt: skip
                await pd.pause()
                assert "after the cut" not in texts(dave)
                assert {"hi from dave", "hi from bob"} <= set(texts(dave))  # history stays
                assert not any("could not be opened" in n for n in notes(dave))
                assert banner.display  # lasting: still there
                await type_line(pd, "/me waves")  # every way of writing is refused
                assert "still here?" not in texts(alice) and "waves" not in str(texts(alice))

        # dave starts again: the same read-only channel, its history, the banner
        dave = tui(dave_dir, hub.transport(), name="dave", seed=4, channels=("team",))
        async with dave.run_test(size=SIZE) as pd:
            await asyncio.wait_for(dave.ready.wait(), T(30))
            await pd.pause()
            banner = dave.chat.query_one(Banner)
            assert banner.display
            assert banner.text.startswith("you were removed from #team by alice on 20")
            assert {"hi from dave", "hi from bob"} <= set(texts(dave))
            await type_line(pd, "after a restart")
            assert "you were removed" in str(dave.chat.query_one(ChatInput).border_subtitle)
            assert not any("could not be opened" in n for n in notes(dave))
    finally:
        await bob.close()
