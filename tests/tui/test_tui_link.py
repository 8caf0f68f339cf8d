"""``/link`` in the TUI: a dialog with the code and its QR code, updated as the link goes,
over a real relay process; the new device's side runs in the test (the protocol's
``LinkJoin`` over :func:`~app.members.link_relay.run_side`), as ``sdschat join --link``
runs it."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from tui_helpers import T, screen_text, tui, type_line, wait_until

from app.members import person_file
from app.members.link import LinkJoin, parse_link_code
from app.members.link_handover import parse
from app.members.link_relay import run_side
from app.node.transport import MemoryHub
from app.tui.screens.link import LinkScreen
from net.identity import Identity
from tests.procs import ROOT, Cluster, running

pytestmark = pytest.mark.timeout(120)


async def test_link_shows_the_code_and_its_qr_code_and_the_result(tmp_path: Path) -> None:
    with running(Cluster(tmp_path)) as c:
        _relay, url = c.relay()
        app = tui(tmp_path / "alice", MemoryHub().transport(), channels=("general",),
                  relays=(url,))  # fmt: skip
        async with app.run_test(size=(110, 50)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            await type_line(pilot, "/link")
            await wait_until(lambda: isinstance(app.screen, LinkScreen), what="the dialog")
            screen = app.screen
            assert isinstance(screen, LinkScreen)
            code = screen.code
            shown = screen_text(app)
            assert code in shown and "▀" in shown  # the code, and its QR code beside it
            assert f"sdschat join --link {code}" in shown
            laptop = Identity.generate()
            join = LinkJoin(parse_link_code(code), laptop, "laptop", _now_ms())
            await asyncio.wait_for(run_side(join, [url]), T(60))
            await wait_until(lambda: "Linked: your recovery words" in screen_text(app), T(30),
                             what="the recovery words, once")  # fmt: skip
            assert join.log is not None and join.log.is_device(laptop.public_key)
            assert parse(join.payload).channels == ["general"]
            held = person_file.load(tmp_path / "alice")
            assert held is not None and held.is_device(laptop.public_key)
            assert screen.status.startswith("linked laptop")


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_join_link_in_a_terminal_opens_the_tui_on_the_channels_handed_over(
        tmp_path: Path) -> None:  # fmt: skip
    """``sdschat join --link CODE`` without --headless, in a real terminal (tmux): the link
    is said on the terminal, then the TUI opens on bob's channel with its history."""
    from tests.procs import sdschat

    session = f"sdschat-link-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with running(Cluster(tmp_path)) as c:
        _relay, url = c.relay()
        bob = c.headless("bob", tmp_path / "bob", channel="town", relay=url)
        bob.wait_for(lambda: bool(bob.select("connection", state="connected")), 30, "bob up")
        bob.send("a line before the laptop")
        bob.send("/link")
        bob.wait_for(lambda: bool(bob.select("link", state="offered")), 30, "a code")
        code = bob.select("link", state="offered")[0]["code"]
        argv = [*sdschat("join", "--link", code, "--data-dir", str(tmp_path / "laptop"),
                         "--relay", url, "--fast", "--no-config")]  # fmt: skip
        env = f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
        command = f"cd {shlex.quote(str(ROOT))} && {env} {shlex.join(argv)}; sleep 30"
        try:
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                            command], check=True, timeout=T(30))  # fmt: skip

            def screen() -> str:
                return subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                      capture_output=True, text=True, timeout=30).stdout

            deadline = time.monotonic() + T(60)
            while "a line before the laptop" not in screen():  # bounded by the deadline
                assert time.monotonic() < deadline, screen()
                time.sleep(0.1)
            assert "Type a message" in screen()
            bob.wait_for(lambda: bool(bob.select("link", state="linked")), 30, "bob: linked")
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], timeout=30, check=False)
