"""A message that arrived after it was reported lost is marked "↺ recovered after it was
reported lost" live, and the same after the person quits and starts again (the log
is then read from SQLite: ``messages.was_lost``), and in ``sdschat history``.

The app runs on a real data directory; the two messages come as sealed envelopes from
another author: one that names an unknown dependency (given up as lost after the fast
``lost_timeout_ms``), then that dependency itself."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from tui_helpers import SIZE, screen_text, started, tui, wait_until

from app.chat.history import print_history
from app.chat.lines import encode_content
from app.node.runtime import wall_ms
from app.node.transport import MemoryHub
from app.tui import SdsChatApp
from net.channel_key import TEST_KDF, derive_channel_key
from net.envelope import seal
from net.identity import Identity
from sds import sds_pb2

MARK = "↺ recovered after it was reported lost"


def envelope(
    author: Identity, text: str, history: tuple[str, ...], lamport: int
) -> tuple[bytes, str]:
    key = derive_channel_key("general", None, params=TEST_KDF)
    content = encode_content(text, "mallory")
    mid = hashlib.sha256(content).hexdigest()
    pb = sds_pb2.SdsMessage(
        sender_id=author.sender_id, message_id=mid, channel_id="general",
        lamport_timestamp=lamport, content=content,
    )  # fmt: skip
    for h in history:
        pb.causal_history.add(message_id=h)
    return seal(pb.SerializeToString(), author, key), mid


def line_of(app: SdsChatApp, text: str) -> str:
    found = [ln for ln in screen_text(app).splitlines() if text in ln]
    assert len(found) == 1, screen_text(app)
    return found[0]


async def test_the_recovered_mark_reads_the_same_after_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "alice"
    mallory = Identity.generate()
    now = wall_ms()
    late_env, late_id = envelope(mallory, "the late one", (), now)
    waiting_env, _ = envelope(mallory, "it waited", (late_id,), now + 1)

    app = tui(data_dir, MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        node = app.node
        assert node is not None
        await node._on_envelope(waiting_env)
        await wait_until(lambda: node.counters["lost"] == 1, 15, "the dependency given up")
        await node._on_envelope(late_env)
        rows = app.model.channels["general"].rows
        await wait_until(lambda: any(r.text == "the late one" for r in rows), 10, "late one")
        await pilot.pause()
        await wait_until(lambda: MARK in screen_text(app), 10, "the mark drawn")
        live = line_of(app, "the late one")
        assert MARK in live and MARK not in line_of(app, "it waited")

    again = tui(data_dir, MemoryHub().transport())  # sdschat join again: history from SQLite
    async with again.run_test(size=SIZE) as pilot:
        await started(again)
        rows = again.model.channels["general"].rows
        await wait_until(lambda: any(r.text == "the late one" for r in rows), 10, "reloaded")
        await pilot.pause()
        await wait_until(lambda: "the late one" in screen_text(again), 10, "drawn")
        assert line_of(again, "the late one") == live
        assert MARK not in line_of(again, "it waited")

    out = io.StringIO()
    assert print_history(data_dir, "general", as_json=False, out=out) == 0
    lines = out.getvalue().splitlines()
    # SDS order: late one first; "it waited" was delivered without it: the line above
    assert [ln.endswith(MARK) for ln in lines] == [True, False, False]
    assert lines[1].strip() == "✗ 1 message lost" and "it waited" in lines[2]
    out = io.StringIO()
    assert print_history(data_dir, "general", as_json=True, out=out) == 0
    flags = [
        (o["content"], o["was_lost"], o["recovered"], o["missing_before"])
        for o in map(json.loads, out.getvalue().splitlines())
    ]
    assert flags == [("the late one", True, True, 0), ("it waited", False, False, 1)]
