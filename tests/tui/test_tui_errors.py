"""Errors are shown, not thrown: each startup failure has a screen and an exit status."""

from __future__ import annotations

import asyncio
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tui_helpers import SIZE, T, screen_text, start_peer, tui, wait_until

from app.cli import main
from app.launch.exits import EXIT_DATABASE, EXIT_DEVICE_COPY, EXIT_LOCKED, EXIT_PASSPHRASE
from app.node.transport import MemoryHub, RelayTransport
from app.tui.screens.dialogs import FatalScreen, PassphraseScreen
from storage import DB_FILENAME, Store

pytestmark = pytest.mark.timeout(120)


async def fatal_shown(app, pilot) -> str:  # type: ignore[no-untyped-def]
    await wait_until(lambda: isinstance(app.screen, FatalScreen), what="error screen")
    await pilot.pause()
    return screen_text(app)


async def leave_with_enter(app, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("enter")
    await wait_until(lambda: app._exit, what="exit")


async def test_data_dir_locked(tmp_path: Path) -> None:
    holder = await Store.open(tmp_path / "alice")  # another instance
    try:
        app = tui(tmp_path / "alice", MemoryHub().transport())
        async with app.run_test(size=SIZE) as pilot:
            text = await fatal_shown(app, pilot)
            assert "Data directory in use" in text
            assert "Another sdschat is running" in text
            assert f"status {EXIT_LOCKED}" in text
            await leave_with_enter(app, pilot)
        assert app.return_code == EXIT_LOCKED
        assert app.fatal is not None and app.fatal[1] == EXIT_LOCKED
    finally:
        await holder.close()


async def test_database_from_a_newer_sdschat(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "alice")
    await store.close()
    db = sqlite3.connect(tmp_path / "alice" / DB_FILENAME)
    db.execute("PRAGMA user_version = 999")
    db.close()
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        text = await fatal_shown(app, pilot)
        assert "Database from a newer sdschat" in text
        assert "Nothing in the file was changed" in text
        await leave_with_enter(app, pilot)
    assert app.return_code == EXIT_DATABASE


async def test_corrupt_database(tmp_path: Path) -> None:
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / DB_FILENAME).write_bytes(b"this is not a database" * 100)
    app = tui(tmp_path / "alice", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        text = await fatal_shown(app, pilot)
        assert "Data directory unusable" in text
        await leave_with_enter(app, pilot)
    assert app.return_code == EXIT_DATABASE


async def test_a_copied_data_dir_is_refused_with_what_to_do(tmp_path: Path) -> None:
    first = await start_peer(tmp_path / "alice", MemoryHub(), "alice", seed=1)
    await first.close()
    subprocess.run(["cp", "-a", str(tmp_path / "alice"), str(tmp_path / "laptop")], check=True)
    app = tui(tmp_path / "laptop", MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        text = await fatal_shown(app, pilot)
        assert "Data directory is a copy" in text
        assert "--moved" in text
        await leave_with_enter(app, pilot)
    assert app.return_code == EXIT_DEVICE_COPY


async def test_a_second_process_with_our_key_stops_the_chat_saying_why(tmp_path: Path) -> None:
    """A line signed with alice's key that this data dir never sent (a copy of it runs
    elsewhere): the fatal screen, then exit status 7."""
    hub = MemoryHub()
    app = tui(tmp_path / "alice", hub.transport())
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(20))
        twin = await start_peer(tmp_path / "twin", hub, "alice", seed=1)  # alice's key
        try:
            await twin.say("from the twin")
            text = await fatal_shown(app, pilot)
            assert "Data directory is a copy" in text
            assert "another process is using this device's key" in text
            await leave_with_enter(app, pilot)
        finally:
            await twin.close()
    assert app.return_code == EXIT_DEVICE_COPY


async def test_wrong_passphrase(tmp_path: Path) -> None:
    hub = MemoryHub()
    first = await start_peer(tmp_path / "alice", hub, "alice", seed=1, passphrase="right one")
    await first.close()
    app = tui(tmp_path / "alice", hub.transport(), passphrase="wrong one")
    async with app.run_test(size=SIZE) as pilot:
        text = await fatal_shown(app, pilot)
        assert "Wrong passphrase" in text and "different passphrase" in text
        await leave_with_enter(app, pilot)
    assert app.return_code == EXIT_PASSPHRASE


async def test_passphrase_prompt_at_start(tmp_path: Path) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, passphrase="s3cret")
    app = tui(tmp_path / "alice", hub.transport(), ask_passphrase=True)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(lambda: isinstance(app.screen, PassphraseScreen))
            await pilot.pause()
            assert "PUBLIC" in screen_text(app)
            app.screen.query_one("#passphrase-input").value = "s3cret"
            await pilot.press("enter")
            await asyncio.wait_for(app.ready.wait(), T(20))
            await bob.say("same key")
            await wait_until(
                lambda: any(r.text == "same key" for r in app.model.channels["general"].rows)
            )
    finally:
        await bob.close()
    # Esc at the prompt clears it and stays (the choices again); Ctrl+C quits: status 130
    app = tui(tmp_path / "carol", hub.transport(), seed=3, ask_passphrase=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: isinstance(app.screen, PassphraseScreen))
        app.screen.query_one("#passphrase-input").value = "half typed"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PassphraseScreen) and not app._exit
        assert app.screen.query_one("#passphrase-input").value == ""
        assert "Ctrl+C quits" in screen_text(app)
        await pilot.press("ctrl+c")
        await wait_until(lambda: app._exit)
    assert app.return_code == 130


async def test_a_wrong_passphrase_at_the_prompt_can_be_typed_again(tmp_path: Path) -> None:
    hub = MemoryHub()
    first = tui(tmp_path / "alice", hub.transport(), passphrase="s3cret")
    async with first.run_test(size=SIZE):
        await asyncio.wait_for(first.ready.wait(), T(20))
    app = tui(tmp_path / "alice", hub.transport(), ask_passphrase=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: isinstance(app.screen, PassphraseScreen))
        app.screen.query_one("#passphrase-input").value = "wrong"
        await pilot.press("enter")
        await wait_until(
            lambda: isinstance(app.screen, PassphraseScreen) and "Wrong passphrase" in
            screen_text(app), what="asked again",
        )  # fmt: skip
        assert not isinstance(app.screen, FatalScreen) and not app._exit
        app.screen.query_one("#passphrase-input").value = "s3cret"
        await pilot.press("enter")
        await asyncio.wait_for(app.ready.wait(), T(20))
        assert app.model.order == ["general"]
        await pilot.press("ctrl+c")  # once running, Ctrl+C quits like Ctrl+Q
        await wait_until(lambda: app._exit)
    assert app.return_code == 0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_relay_unreachable_is_not_fatal(tmp_path: Path) -> None:
    url = f"ws://127.0.0.1:{closed_port()}"
    transport = RelayTransport(url, backoff_base=0.2, backoff_max=0.5)
    app = tui(tmp_path / "alice", transport, transport_label="relay test")
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(20))
        await wait_until(lambda: "unreachable" in screen_text(app), what="status says so")
        status = screen_text(app).splitlines()[-1]
        assert "relay test unreachable" in status and "retry in" in status
        assert any("cannot reach relay test" in n.message for n in app._notifications)
        box = app.chat.query_one("#input")
        box.value = "kept for later"
        await pilot.press("enter")
        await wait_until(
            lambda: any(
                r.text == "kept for later" and r.own_state == "queued"
                for r in app.model.channels["general"].rows
            )
        )
        assert not isinstance(app.screen, FatalScreen)
        await pilot.press("ctrl+q")
        await wait_until(lambda: app._exit)
    assert app.return_code == 0


async def test_the_time_to_the_next_relay_attempt_counts_down(tmp_path: Path) -> None:
    """'retry in Ns' is the time left, not the delay as it was announced: it goes down
    with the clock and says 'retrying…' when the time has come."""
    url = f"ws://127.0.0.1:{closed_port()}"
    transport = RelayTransport(url, backoff_base=60.0, backoff_max=60.0)  # 30-60 s
    now = [1_000_000.0]
    app = tui(tmp_path / "alice", transport, transport_label="relay test", clock=lambda: now[0])

    def waiting() -> int | None:
        m = re.search(r"retry in (\d+)s", screen_text(app).splitlines()[-1])
        return int(m.group(1)) if m else None

    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(20))
        await wait_until(lambda: waiting() is not None, what="the first wait shown")
        first = waiting()
        assert first is not None and 30 <= first <= 60
        now[0] += 20.0
        await wait_until(lambda: waiting() == first - 20, what="20 s less")
        now[0] += 60.0
        await wait_until(lambda: "relay test unreachable · retrying…" in screen_text(app))
        await pilot.press("ctrl+q")
        await wait_until(lambda: app._exit)
    assert app.return_code == 0


def test_cli_join_without_headless_uses_the_tui_and_reports_bad_passphrase_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    code = main(["join", "general", "--data-dir", str(tmp_path / "d"), "--passphrase-file",
                 str(empty)])  # fmt: skip
    assert code == EXIT_PASSPHRASE
    assert "is empty" in capsys.readouterr().err
    assert main(["join", "general", "--drop-rate", "2"]) == 2


def test_cli_join_locked_data_dir_exits_3_after_the_screen(tmp_path: Path) -> None:
    """A real ``sdschat join`` (TUI) on a data dir in use: screen, Enter, status 3."""

    async def hold_and_run() -> subprocess.CompletedProcess[bytes]:
        holder = await Store.open(tmp_path / "d")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "app.cli", "join", "general", "--data-dir",
                str(tmp_path / "d"), "--relay", f"ws://127.0.0.1:{closed_port()}",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            # Not a terminal: Textual still runs; Enter on its stdin leaves the error screen.
            out, err = await asyncio.wait_for(proc.communicate(b"\r\n" * 50), T(60))
            return subprocess.CompletedProcess([], proc.returncode or 0, out, err)
        finally:
            await holder.close()

    result = asyncio.run(hold_and_run())
    assert result.returncode == EXIT_LOCKED, result.stderr[-2000:]
