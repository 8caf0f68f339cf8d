"""A received file's line: a progress bar while segments are missing (they come back by
the protocol's repair), then the saveable line once complete and its sha256 checked."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tui_helpers import (
    SIZE,
    GatedTransport,
    T,
    screen_text,
    start_peer,
    tui,
    type_line,
    wait_until,
)

import sds
from app.chat.content import decode
from app.commands.content import run_content_command
from app.node.transport import MemoryHub
from app.tui.model import FileState
from app.tui.render import progress_bar
from app.tui.widgets.message_log import MessageLog
from net.channel_key import TEST_KDF, derive_channel_key
from net.envelope import EnvelopeError, envelope_hash, open_envelope

pytestmark = pytest.mark.timeout(120)


def segment_index(envelope: bytes) -> int | None:
    """The file segment an envelope of public #general carries, if any."""
    key = derive_channel_key("general", None, params=TEST_KDF)
    try:
        content = sds.decode(open_envelope(envelope, key).sds_bytes).content
    except (EnvelopeError, sds.DecodeError):
        return None
    if not content:
        return None
    d = decode(content)
    return d.segment_index if d.kind == "segment" else None


def file_line(app) -> str:  # type: ignore[no-untyped-def]
    return next((ln for ln in screen_text(app).splitlines() if "📎" in ln), "")


async def test_file_line_shows_progress_until_repaired_then_checked(tmp_path: Path) -> None:
    data = os.urandom(150_000)  # four segments of 48 KiB (the last 2,544 bytes)
    (tmp_path / "notes.bin").write_bytes(data)
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    gate = GatedTransport(hub.transport())
    app = tui(tmp_path / "alice", gate)
    try:
        async with app.run_test(size=(140, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            gate.hold = True
            await run_content_command(
                bob.node, "send", str(tmp_path / "notes.bin"), "general", lambda ev: None
            )
            await wait_until(
                lambda: sorted(i for e in gate.held if (i := segment_index(e)) is not None)
                == [0, 1, 2, 3],
                what="the four segments held",
            )
            # segment 1 is lost on the way, and its resends too for now
            lost = next(e for e in gate.held if segment_index(e) == 1)
            gate.blackhole.add(envelope_hash(lost))
            await gate.release()
            await wait_until(lambda: "3/4 segments" in file_line(app), what="progress 3/4")
            line = file_line(app)
            # segments received / total and bytes; the bar is three quarters full
            assert "notes.bin" in line and progress_bar(3, 4) in line
            # 2 x 48 KiB + the last 2,544 bytes of 146 KiB
            assert "3/4 segments · 98/146 KiB · incomplete · waiting for bob" in line
            assert "/save keeps it" not in screen_text(app)
            await type_line(pilot, "/save")  # not complete: refused, nothing written
            assert not (tmp_path / "alice" / "files" / "notes.bin").exists()
            # the way is open again: the missing segment comes back by itself (a resend
            # or an SDS-R repair: nobody sends it by hand)
            gate.blackhole.discard(envelope_hash(lost))
            await wait_until(
                lambda: "/save keeps it" in file_line(app), base=40, what="repaired and checked"
            )
            assert "segments" not in file_line(app)
            assert "notes.bin (150000 bytes)" in file_line(app)
            counters = bob.node.stats()["counters"]
            assert counters.get("resent", 0) + counters.get("repair_sent", 0) > 0
            await type_line(pilot, "/save")
            saved = tmp_path / "alice" / "files" / "notes.bin"
            await wait_until(saved.exists, what="saved")
            assert saved.read_bytes() == data
    finally:
        await bob.close()


async def test_a_file_whose_bytes_do_not_match_is_shown_damaged(tmp_path: Path) -> None:
    """A complete file whose joined segments fail the manifest's sha256 is never the
    saveable line (a forged manifest: the sha256 of other bytes)."""
    from app.chat import content_pb2 as pb
    from app.chat.files import split_file

    parts = split_file("evil.bin", os.urandom(60_000), "bob")
    manifest = pb.Content()
    manifest.ParseFromString(parts[0][1:])  # after the 0xFF magic byte
    manifest.file_manifest.sha256 = bytes(32)
    forged = [parts[0][:1] + manifest.SerializeToString(), *parts[1:]]
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    app = tui(tmp_path / "alice", hub.transport())
    try:
        async with app.run_test(size=SIZE):
            await asyncio.wait_for(app.ready.wait(), T(20))
            for part in forged:
                await bob.node.post_content("general", part)
            await wait_until(lambda: "damaged" in file_line(app), what="damaged line")
            assert "/save keeps it" not in screen_text(app)
            view = app.chat.query_one(MessageLog).view
            assert view is not None
            state = next(r.file for r in view.rows if r.kind == "file")
            assert isinstance(state, FileState) and state.intact is False
    finally:
        await bob.close()


async def test_a_file_not_kept_here_says_so_instead_of_waiting(tmp_path: Path) -> None:
    """A file whose segments were stored empty (over the sender's quota here; the channel
    cap empties files the same way) can never complete: its line says so, where it said
    "incomplete · waiting for bob" for ever."""
    from dataclasses import replace

    from tui_helpers import node_options

    from app.chat.files import SEGMENT_BYTES

    (tmp_path / "big.bin").write_bytes(os.urandom(3 * SEGMENT_BYTES))
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2)
    options = replace(node_options(seed=1), file_quota_bytes=2 * SEGMENT_BYTES)
    app = tui(tmp_path / "alice", hub.transport(), options=options)
    try:
        async with app.run_test(size=(160, 30)):
            await asyncio.wait_for(app.ready.wait(), T(20))
            await run_content_command(
                bob.node, "send", str(tmp_path / "big.bin"), "general", lambda ev: None
            )
            await wait_until(lambda: "not kept here" in file_line(app), what="not kept line")
            line = file_line(app)
            assert "2/3 segments" in line and "waiting for" not in line
            view = app.chat.query_one(MessageLog).view
            assert view is not None
            state = next(r.file for r in view.rows if r.kind == "file")
            assert isinstance(state, FileState) and state.not_kept and not state.complete
    finally:
        await bob.close()
