"""Issue 41 items 1-2, "a start restores the whole setup": every channel and direct
conversation with its history on screen, the unread counts and the channel that was
open, whether the start names a channel (``sdschat join team``) or none (``sdschat
join``: the last setup). The app runs on a real data directory beside real nodes on an
in-memory hub; the relays and store peers of the last run are tested without a screen
(tests/app/test_daily_start.py)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
from tui_helpers import (
    T,
    invite_code,
    screen_text,
    start_peer,
    texts,
    tui,
    type_line,
    wait_until,
)

from app.launch.last_setup import apply_last_setup
from app.node.transport import MemoryHub
from app.tui import SdsChatApp
from app.tui.widgets.message_log import MessageLog

pytestmark = pytest.mark.timeout(180)


def shown(app: SdsChatApp) -> list[str]:
    """The texts of the rows of the channel shown."""
    view = app.chat.query_one(MessageLog).view
    return [r.text for r in view.rows if not r.hidden] if view is not None else []


def last_setup_channel(data_dir: Path) -> str:
    """What ``sdschat join --data-dir DIR`` (no channel) opens: the one rule's answer."""
    args = argparse.Namespace(channel=None, data_dir=str(data_dir), relay=None, lan=False,
                              interface=[], store=None, invite=None, create=False)  # fmt: skip
    plan = apply_last_setup(args, {})
    assert plan.restore
    return str(args.channel)


async def test_a_restart_shows_every_channel_and_dm_with_history_unread_and_the_open_one(
    tmp_path: Path,
) -> None:
    """Item 2: after a restart the list showed only #team (channels.json listed only
    team) and ``/query bob`` said "No messages yet" although ``sdschat history dm-...``
    had both lines. Now the DM, #random and #team all come back in their order, each
    with its history, #team with the 2 lines bob wrote while alice read the DM, and
    ``sdschat join`` alone opens the DM, which was open."""
    hub = MemoryHub()
    alice_dir = tmp_path / "alice"
    app = tui(alice_dir, hub.transport(), channels=("team",), create=True)
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=())
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            node = app.node
            assert node is not None
            await bob.node.join_by_invite(await invite_code(pilot), timeout_s=T(20))
            await bob.node.send("team", "hello team")
            await wait_until(lambda: "hello team" in texts(app), what="bob in #team")
            await type_line(pilot, "/join random", passphrase="")
            await type_line(pilot, "a public line")
            await type_line(pilot, "/switch team")
            await type_line(pilot, "/msg bob just us")
            dm = next(c for c in node.channels if c.startswith("dm-"))
            await wait_until(lambda: dm in bob.node.channels, what="bob in the DM")
            await bob.node.send(dm, "just us two")
            await type_line(pilot, "/query bob")
            await wait_until(lambda: app.model.current == dm, what="the DM shown")
            await wait_until(lambda: "just us two" in shown(app), what="bob's DM line")
            for text in ("while you read the DM", "a second one"):
                await bob.node.send("team", text)
            await wait_until(lambda: app.model.channels["team"].unread == 2, what="unread")
            order = list(app.model.order)
            assert order[0] == "team" and set(order) == {"team", "random", dm}
        await asyncio.sleep(0)

        # `sdschat join team`, as the README says to start again
        app = tui(alice_dir, hub.transport(), channels=("team",))
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            assert app.model.order == order  # every channel and the DM, in their order
            assert app.model.current == "team"
            assert app.model.channels["team"].unread == 0  # shown: read now
            for text in ("hello team", "while you read the DM", "a second one"):
                assert text in shown(app)
            await pilot.pause()
            assert "@bob" in screen_text(app)  # the DM in the channel list, by name
            await type_line(pilot, "/query bob")
            await wait_until(lambda: app.model.current == dm, what="the DM")
            await wait_until(lambda: "just us two" in shown(app), what="the DM's history")
            assert "just us" in shown(app)
            await type_line(pilot, "/switch random")  # the channel open when alice quits
            await bob.node.send("team", "while you read #random")
            await wait_until(lambda: app.model.channels["team"].unread == 1, what="unread")

        # `sdschat join` with no channel: the last setup, the channel that was open
        assert last_setup_channel(alice_dir) == "random"
        await bob.node.send(dm, "while you were away")
        app = tui(alice_dir, hub.transport(), channels=(last_setup_channel(alice_dir),))
        async with app.run_test(size=(100, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            assert app.model.current == "random" and app.model.order == order
            assert "a public line" in shown(app)
            assert app.model.channels["team"].unread == 1  # the unread count, restored
            await wait_until(lambda: app.model.channels[dm].unread >= 1, what="DM unread")
            view = app.model.channels[dm]
            assert {"just us", "just us two"} <= {r.text for r in view.rows}
    finally:
        await bob.close()


def test_sdschat_join_alone_without_a_last_setup_says_what_to_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """"sdschat join" with no channel and nothing joined before: exit 2, naming the
    commands that start one (nothing is created)."""
    from app.cli import main

    for extra in ([], ["--headless"]):
        assert main(["join", "--data-dir", str(tmp_path / "new"), "--no-config", *extra]) == 2
        err = capsys.readouterr().err
        assert "no last setup" in err and "sdschat join CHANNEL" in err
        assert "--invite CODE" in err and "--create" in err
    assert not (tmp_path / "new" / "sdschat.db").exists()
