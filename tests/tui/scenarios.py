"""Deterministic screens of the TUI, for snapshot tests and the README's screenshots.

Everything that could vary is fixed: identities (from seeds), clocks (frozen,
so no protocol timer ever fires and times read 00:0x UTC), message ids (seeded
node randomness), terminal size, and the order of events (each step waits for
the previous one to show). Peers are real nodes started inside the app's loop.

``python tests/tui/scenarios.py docs/screenshots`` writes the README's SVGs.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
for _path in (_HERE, _HERE.parents[1]):  # tui_helpers, and tests.procs when run as a script
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tui_helpers import (  # noqa: E402
    GatedTransport,
    Peer,
    start_peer,
    tui,
    wait_until,
)

from app.chat.lines import encode_content  # noqa: E402
from app.node.transport import MemoryHub  # noqa: E402
from app.tui import SdsChatApp  # noqa: E402
from app.tui.typing import encode_typing  # noqa: E402
from storage import Store, StoredMessage  # noqa: E402

SNAP_SIZE = (110, 32)

RunBefore = Callable[[Any], Awaitable[None]]


def _rows(app: SdsChatApp, channel: str = "general") -> list[str]:
    return [r.text for r in app.model.channels[channel].rows]


async def steady(app: SdsChatApp, pilot: Any) -> None:
    """Cursors that do not blink (a blinking cursor makes screenshots differ), and no
    toast: one shown at the start ("no saved core state: rebuilt...") would still be on
    screen or gone depending on how fast the machine ran the scenario."""
    from textual.widgets import Input
    from textual.widgets._toast import Toast

    for screen in (app.chat, app.screen):
        for box in screen.query(Input):
            box.cursor_blink = False
    await pilot.pause()
    app.clear_notifications()
    await wait_until(
        lambda: not any(list(s.query(Toast)) for s in app.screen_stack), what="toasts gone"
    )
    await pilot.pause()


def _attach(app: SdsChatApp, peers: list[Peer]) -> None:
    """Close the scripted peers when the app closes its own node."""
    close_node = app._close_node

    async def close_all() -> None:
        await close_node()
        for p in peers:
            await p.close()
        peers.clear()

    app._close_node = close_all  # type: ignore[method-assign]


def conversation(base: Path, *, theme: str = "dark") -> tuple[SdsChatApp, RunBefore]:
    """#general with own states, a mention, an action, a reply, reactions, an edit, a
    waiting message and typing."""
    from app.chat.lines import typed_text

    hub = MemoryHub()
    gate = GatedTransport(hub.transport())
    app = tui(
        base / "alice", gate, fixed=True, channels=("general", "random"), theme=theme,
        remember_state=False,
    )  # fmt: skip
    peers: list[Peer] = []
    _attach(app, peers)

    def row(text: str) -> Any:
        return next(r for r in app.model.channels["general"].rows if r.original == text)

    def has(text: str) -> bool:
        return any(r.original == text for r in app.model.channels["general"].rows)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        bob = await start_peer(base / "bob", hub, "bob", seed=2, fixed=True,
                               channels=("general", "random"))  # fmt: skip
        carol = await start_peer(base / "carol", hub, "carol", seed=3, fixed=True)
        peers.extend([bob, carol])
        await bob.say("anyone seen the coffee machine manual?", channel="random")
        await wait_until(lambda: len(_rows(app, "random")) == 1)
        await pilot.press("alt+2")  # read #random, then back: "new" goes after this one
        await pilot.press("alt+1")
        await bob.say("morning all! the relay patch is up for review")
        await wait_until(lambda: len(_rows(app)) == 1)
        await carol.say("waves from the train", kind="me")
        await wait_until(lambda: len(_rows(app)) == 2)
        await bob.say("@alice could you have a look before lunch? it touches the reconnect backoff")
        await wait_until(lambda: len(_rows(app)) == 3)
        log = app.chat.query_one("#log")
        log.select(app.model.channels["general"].rows[-1].key)
        box = app.chat.query_one("#input")
        box.value = "/reply on it, reading now"  # a reply: bob's question quoted above it
        await pilot.press("enter")
        await wait_until(lambda: any(t.endswith("on it, reading now") for t in bob.texts()))
        await wait_until(lambda: any(t.endswith("on it, reading now") for t in carol.texts()))
        await bob.say("thanks!")
        await wait_until(lambda: has("thanks!"))
        box.value = "looks good: one question about the jitter"
        await pilot.press("enter")
        await wait_until(lambda: "looks good: one question about the jitter" in bob.texts())
        await wait_until(lambda: has("looks good: one question about the jitter")
                         and row("looks good: one question about the jitter").own_state == "sent",
                         what="sent")  # fmt: skip
        mine = row("looks good: one question about the jitter").message_id
        await bob.node.send("general", typed_text(mine, "👍"), "react")
        await carol.node.send("general", typed_text(mine, "👀"), "react")
        box.value = "/edit looks good: one question about the backoff jitter"  # her last line
        await pilot.press("enter")
        await wait_until(
            lambda: row("looks good: one question about the jitter").edited
            and len(row("looks good: one question about the jitter").reactions) == 2,
            what="the edit and the reactions",
        )
        gate.hold = True  # carol's next message never reaches alice...
        await carol.say("I pushed a fix for the flaky test")
        await wait_until(lambda: "I pushed a fix for the flaky test" in gate.held_texts())
        gate.swallow_held()
        await carol.say("so the build should be green again")  # ...this one waits for it
        await wait_until(lambda: has("so the build should be green again"))
        box.value = "great, merging after lunch"  # nobody answers: stays "sent"
        await pilot.press("enter")
        await wait_until(lambda: "great, merging after lunch" in bob.texts())
        await wait_until(
            lambda: any(
                r.text == "great, merging after lunch" and r.own_state == "sent"
                for r in app.model.channels["general"].rows
            ),
            what="sent",
        )
        await carol.node.send_ephemeral("general", encode_typing("carol"))
        await wait_until(lambda: bool(app.model.channels["general"].typing))
        await bob.say("lunch at noon?", channel="random")
        await bob.say("@alice you coming?", channel="random")
        await wait_until(lambda: app.model.channels["random"].unread == 2)
        await steady(app, pilot)

    return app, run_before


def typed(base: Path, *, theme: str = "dark") -> tuple[SdsChatApp, RunBefore]:
    """Replies, reactions, an edit, a deletion, a join and a nick line (issue 15)."""
    from app.chat.lines import typed_text

    hub = MemoryHub()
    app = tui(base / "alice", hub.transport(), fixed=True, theme=theme, remember_state=False)
    peers: list[Peer] = []
    _attach(app, peers)

    def row(text: str) -> Any:
        return next(r for r in app.model.channels["general"].rows if r.original == text)

    def has(text: str) -> bool:
        return any(r.original == text for r in app.model.channels["general"].rows)

    def sent(text: str) -> bool:
        return has(text) and row(text).message_id is not None

    async def line(pilot: Any, text: str) -> None:
        box = app.chat.query_one("#input")
        box.value = text
        await pilot.press("enter")
        await wait_until(lambda: app.commands.pending == 0)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        bob = await start_peer(base / "bob", hub, "bob", seed=2, fixed=True)
        carol = await start_peer(base / "carol", hub, "carol", seed=3, fixed=True)
        peers.extend([bob, carol])
        await carol.say("carol joined #general", kind="join")
        await bob.say("the nightly build is green again")
        await wait_until(lambda: has("the nightly build is green again"))
        target = row("the nightly build is green again").message_id
        app.chat.query_one("#log").select(row("the nightly build is green again").key)
        await line(pilot, "/reply great, was it the flaky relay test?")
        await wait_until(lambda: sent("great, was it the flaky relay test?"))
        await bob.say("yes: a timeout that ignored the scale factor")
        await wait_until(lambda: has("yes: a timeout that ignored the scale factor"))
        await carol.node.send("general", typed_text(target, "🎉"), "react")
        await bob.node.send("general", typed_text(target, "the nightly build is green"), "edit")
        app.chat.query_one("#log").select(row("the nightly build is green again").key)
        await line(pilot, "/react 👍")
        await carol.say("shiping the fix now")
        await wait_until(lambda: has("shiping the fix now"))
        typo = row("shiping the fix now").message_id
        await carol.node.send("general", typed_text(typo, "shipping the fix now"), "edit")
        await bob.say("wrong channel, sorry")
        await wait_until(lambda: has("wrong channel, sorry"))
        oops = row("wrong channel, sorry").message_id
        await bob.node.send("general", typed_text(oops), "delete")
        await bob.say("bob is now known as robert", kind="nick")
        await wait_until(lambda: has("bob is now known as robert"))
        await wait_until(
            lambda: row("the nightly build is green again").reactions.keys() == {"🎉", "👍"}
            and row("wrong channel, sorry").deleted
            and row("shiping the fix now").edited
            and row("the nightly build is green again").edited,
            what="effects shown",
        )
        await steady(app, pilot)

    return app, run_before


async def seed_yesterday(data_dir: Path) -> None:
    """Two lines of the day before the frozen clock's (a day separator with the year)."""
    from net.channel_key import TEST_KDF, derive_channel_key

    key = derive_channel_key("general", None, params=TEST_KDF)
    day_before = 1_767_225_600_000 - 86_400_000 + 22 * 3_600_000  # 2025-12-31 22:00 UTC
    lines = (("dave", "happy new year's eve, see you next year"),
             ("erin", "the release notes are in the wiki"))  # fmt: skip
    async with await Store.open(data_dir) as store:
        await store.join_channel("general", key.topic, is_public=True)
        await store.insert_messages(
            StoredMessage(
                channel="general",
                message_id=f"{0xda7 + i:064x}",
                sender_id=f"{0xd0 + i:032x}",
                lamport=day_before + i * 600_000,
                content=encode_content(text, name),
                delivered_at=day_before + i * 600_000,
            )
            for i, (name, text) in enumerate(lines)
        )


def main_screen(base: Path, *, theme: str = "dark") -> tuple[SdsChatApp, RunBefore]:
    """Everything the log shows at once (issue 15): a day separator with the year for
    yesterday's lines and one for today's, a reply (quoted), reactions, an edit, a
    deletion, a file line and a message marked "↺ recovered" (held back until the
    message after it had arrived)."""
    from app.chat.files import split_file
    from app.chat.lines import typed_text

    asyncio.run(seed_yesterday(base / "alice"))
    hub = MemoryHub()
    gate = GatedTransport(hub.transport())
    app = tui(base / "alice", gate, fixed=True, theme=theme, remember_state=False)
    peers: list[Peer] = []
    _attach(app, peers)

    def row(text: str) -> Any:
        return next(r for r in app.model.channels["general"].rows if r.original == text)

    def has(text: str) -> bool:
        return any(r.original == text for r in app.model.channels["general"].rows)

    async def line(pilot: Any, text: str) -> None:
        box = app.chat.query_one("#input")
        box.value = text
        await pilot.press("enter")
        await wait_until(lambda: app.commands.pending == 0)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        bob = await start_peer(base / "bob", hub, "bob", seed=2, fixed=True)
        carol = await start_peer(base / "carol", hub, "carol", seed=3, fixed=True)
        peers.extend([bob, carol])
        await bob.say("the nightly build is green again")
        await wait_until(lambda: has("the nightly build is green again"))
        target = row("the nightly build is green again").message_id
        app.chat.query_one("#log").select(row("the nightly build is green again").key)
        await line(pilot, "/reply great, was it the flaky relay test?")
        reply = "great, was it the flaky relay test?"
        await wait_until(lambda: has(reply) and row(reply).message_id is not None)
        await carol.node.send("general", typed_text(target, "🎉"), "react")
        await bob.node.send("general", typed_text(target, "the nightly build is green"), "edit")
        app.chat.query_one("#log").select(row("the nightly build is green again").key)
        await line(pilot, "/react 👍")
        await bob.say("wrong channel, sorry")
        await wait_until(lambda: has("wrong channel, sorry"))
        await bob.node.send("general", typed_text(row("wrong channel, sorry").message_id), "delete")
        for part in split_file("build-log.txt", b"ok\n" * 40_000, "carol"):
            await carol.node.post_content("general", part)
        await wait_until(lambda: any(r.kind == "file" for r in app.model.channels["general"].rows))
        # carol's next line reaches alice only after the line that follows it
        gate.hold = True
        await carol.say("I pushed a fix for the flaky test")
        await wait_until(lambda: "I pushed a fix for the flaky test" in gate.held_texts())
        stash, gate.held, gate.hold = gate.held, [], False
        await carol.say("so the build should be green again")
        await wait_until(lambda: has("so the build should be green again"))
        gate.held = stash
        await gate.release()
        await wait_until(
            lambda: has("I pushed a fix for the flaky test")
            and row("I pushed a fix for the flaky test").recovered
            and not row("so the build should be green again").waiting
            and row("the nightly build is green again").reactions.keys() == {"🎉", "👍"}
            and row("wrong channel, sorry").deleted
            and row("the nightly build is green again").edited,
            what="everything shown",
        )
        await steady(app, pilot)

    return app, run_before


def new_line(base: Path) -> tuple[SdsChatApp, RunBefore]:
    """Back in a channel after a while: "── new ──" marks where you left off."""
    app, before = conversation(base)

    async def run_before(pilot: Any) -> None:
        await before(pilot)
        await pilot.press("alt+2")
        await steady(app, pilot)

    return app, run_before


def help_screen(base: Path) -> tuple[SdsChatApp, RunBefore]:
    app = tui(base / "alice", MemoryHub().transport(), fixed=True, remember_state=False)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.press("f1")
        await steady(app, pilot)

    return app, run_before


async def seed_history(data_dir: Path, n: int) -> None:
    from net.channel_key import TEST_KDF, derive_channel_key

    key = derive_channel_key("general", None, params=TEST_KDF)
    names = ("dave", "erin", "frank")
    words = ("relay", "backoff", "bloom filter", "lamport clock", "repair", "sync")
    async with await Store.open(data_dir) as store:
        await store.join_channel("general", key.topic, is_public=True)
        await store.insert_messages(
            StoredMessage(
                channel="general",
                message_id=f"{i:064x}",
                sender_id=f"{i % 3:032x}",
                lamport=1_767_225_600_000 + i * 60_000,
                content=encode_content(
                    f"note {i}: thoughts on the {words[i % len(words)]}", names[i % 3]
                ),
                delivered_at=1_767_225_600_000 + i * 60_000,
            )
            for i in range(n)
        )


def search_screen(base: Path) -> tuple[SdsChatApp, RunBefore]:
    asyncio.run(seed_history(base / "alice", 60))
    app = tui(base / "alice", MemoryHub().transport(), fixed=True, remember_state=False)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.press("ctrl+f")
        await pilot.press(*"bloom")  # found as you type, highlighted in the log
        await wait_until(
            lambda: app.finder.state is not None and app.finder.state.text == "bloom"
            and app.finder.state.index == 0
        )
        await pilot.press("up")  # the match before the newest
        await wait_until(lambda: app.finder.state is not None and app.finder.state.index == 1)
        await steady(app, pilot)

    return app, run_before


def search_all_screen(base: Path) -> tuple[SdsChatApp, RunBefore]:
    """Alt+F: every joined channel searched, results listed with channel, author, time."""
    asyncio.run(seed_history(base / "alice", 60))
    app = tui(base / "alice", MemoryHub().transport(), fixed=True, remember_state=False,
              channels=("general", "random"))  # fmt: skip

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.press("alt+f")
        await pilot.press(*"repair")
        await wait_until(lambda: getattr(app.screen, "searched", None) == "repair")
        await steady(app, pilot)

    return app, run_before


def files(base: Path, *, theme: str = "dark") -> tuple[SdsChatApp, RunBefore]:
    """A file received whole (saveable) and one still missing two of its four segments
    (a progress bar: segments received, KiB)."""
    from test_tui_files import segment_index

    from app.chat.files import split_file
    from net.envelope import envelope_hash

    hub = MemoryHub()
    gate = GatedTransport(hub.transport())
    app = tui(base / "alice", gate, fixed=True, theme=theme, remember_state=False)
    peers: list[Peer] = []
    _attach(app, peers)

    def shown(text: str) -> bool:
        return any(text in r.text for r in app.model.channels["general"].rows)

    def file_state(name: str) -> Any:
        rows = app.model.channels["general"].rows
        return next((r.file for r in rows if r.kind == "file" and name in r.text), None)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        bob = await start_peer(base / "bob", hub, "bob", seed=2, fixed=True)
        carol = await start_peer(base / "carol", hub, "carol", seed=3, fixed=True)
        peers.extend([bob, carol])
        await bob.say("the logs of last night's soak, for whoever looks first")
        for part in split_file("soak-logs.tar.gz", bytes(range(256)) * 470, "bob"):
            await bob.node.post_content("general", part)
        await wait_until(lambda: (f := file_state("soak-logs")) is not None and f.intact)
        await carol.say("and the flame graph")
        await wait_until(lambda: shown("and the flame graph"))
        gate.hold = True
        for part in split_file("flame-graph.svg", b"<svg/>" * 30_000, "carol"):
            await carol.node.post_content("general", part)
        await wait_until(
            lambda: sorted(i for e in gate.held if (i := segment_index(e)) is not None)
            == [0, 1, 2, 3]
        )
        for env in gate.held:  # two of its four segments are lost on the way
            if segment_index(env) in (1, 3):
                gate.blackhole.add(envelope_hash(env))
        await gate.release()
        await wait_until(lambda: (f := file_state("flame-graph")) is not None
                         and len(f.present) == 2)  # fmt: skip
        await steady(app, pilot)

    return app, run_before


def error_screen(base: Path) -> tuple[SdsChatApp, RunBefore]:
    app = tui(base / "alice", MemoryHub().transport(), fixed=True, remember_state=False)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        app._fatal_screen(
            "Data directory in use",
            "data directory /home/alice/.local/share/sdschat is in use by another sdschat "
            "instance (held by pid 4242); stop it or choose another --data-dir",
            "Another sdschat is running with this --data-dir. Quit it first, or start this "
            "one with another --data-dir.",
            3,
        )
        await steady(app, pilot)

    return app, run_before


def formatting(base: Path, *, theme: str = "dark") -> tuple[SdsChatApp, RunBefore]:
    """Issue 27: formatted lines (bold, italic, code, a code block), the channel list's
    notification marks (#random mentions only ⊙, #ops muted ⊘), a quiet channel's lines
    at the bottom of the log, and two members both called bob, told apart."""
    hub = MemoryHub()
    app = tui(
        base / "alice", hub.transport(), fixed=True, channels=("general", "random", "ops"),
        theme=theme, remember_state=False,
    )  # fmt: skip
    peers: list[Peer] = []
    _attach(app, peers)

    async def run_before(pilot: Any) -> None:
        await asyncio.wait_for(app.ready.wait(), 30)
        app.model.levels.update({"random": "mentions", "ops": "none"})  # as /mute does
        bob = await start_peer(base / "bob", hub, "bob", seed=2, fixed=True,
                               channels=("general", "random", "ops"))  # fmt: skip
        other = await start_peer(base / "bob2", hub, "bob", seed=4, fixed=True)
        peers.extend([bob, other])
        await bob.say("chatter nobody needs to see", channel="ops")
        await bob.say("lunch?", channel="random")
        await bob.say("@alice the **release** is _tomorrow_, run `make test` first")
        await other.say("I am *also* bob")
        await bob.say("the fix:\n```\ndelay = min(cap, base * 2 ** attempt)\n```\nok?")
        await wait_until(lambda: len(_rows(app)) == 3
                         and len(_rows(app, "ops")) == 1, what="lines")  # fmt: skip
        await steady(app, pilot)

    return app, run_before


SCENARIOS: dict[str, Callable[[Path], tuple[SdsChatApp, RunBefore]]] = {
    "tui-formatting": formatting,
    "tui-dark": conversation,
    "tui-light": lambda base: conversation(base, theme="light"),
    "tui-new-line": new_line,
    "tui-help": help_screen,
    "tui-search": search_screen,
    "tui-search-all": search_all_screen,
    "tui-error": error_screen,
    "tui-replies": typed,
    "tui-files": files,
}


def write_screenshots(out: Path) -> list[Path]:
    """Render every scenario to ``out/<name>.svg`` with ``App.save_screenshot``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in SCENARIOS.items():
        base = Path(tempfile.mkdtemp(prefix="sdschat-shot-"))
        try:
            app, before = build(base)

            async def shoot(pilot: Any, app: SdsChatApp = app, before: RunBefore = before,
                            name: str = name) -> None:  # fmt: skip
                await before(pilot)
                await pilot.pause()
                app.save_screenshot(filename=f"{name}.svg", path=str(out))
                await app._close_node()
                app.exit()

            async def run(app: SdsChatApp = app, shoot: Any = shoot) -> None:
                async with app.run_test(size=SNAP_SIZE) as pilot:
                    await shoot(pilot)

            asyncio.run(run())
            written.append(out / f"{name}.svg")
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return written


if __name__ == "__main__":
    for path in write_screenshots(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")):
        print(path)
