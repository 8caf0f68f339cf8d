"""``/link`` in the TUI: a dialog with the code and its QR code, updated as the link goes,
over a real relay process; the new device's side runs in the test (the protocol's
``LinkJoin`` over :func:`~app.members.link_relay.run_side`), as ``sdschat join --link``
runs it."""

from __future__ import annotations

import asyncio
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
from tests.procs import Cluster, running

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
