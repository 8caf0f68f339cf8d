"""A received file's state as the TUI and headless tell it (issue 26 item 12): a file line
whose id appears in many later lines is checked (it showed "checking" for ever), and a
file whose segments are missing says "incomplete · waiting for alice" (it said nothing
in headless)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app_helpers import run, start_node, wait_until

from app.chat.files import split_file, stored_file
from app.headless.file_watch import FileWatch
from app.node.transport import MemoryHub
from app.tui.files import read_file_state


def test_a_file_named_in_many_later_lines_is_checked(tmp_path: Path) -> None:
    """carol posts 80 lines carrying alice's file id after the file: the segments must
    still all be found (the search stopped at segment count + 64 lines)."""

    async def body() -> None:
        hub = MemoryHub()
        bob = await start_node(tmp_path / "b", hub, name="bob")
        alice = await start_node(tmp_path / "a", hub, name="alice")
        carol = await start_node(tmp_path / "c", hub, name="carol")
        try:
            parts = split_file("notes.bin", os.urandom(100_000), "alice")  # 3 segments
            await alice.node.post_contents("general", parts)
            await wait_until(lambda: len([d for d in bob.delivered() if d.kind == "segment"])
                             == 3, 30, "the file at bob")
            manifest = next(d for d in bob.delivered() if d.kind == "file")
            f = await stored_file(bob.node.store, "general", manifest.message_id)
            assert f is not None
            for i in range(80):
                await carol.node.send("general", f"about {f.info.file_id} ({i})")
            await wait_until(lambda: len([d for d in bob.delivered() if d.text.startswith(
                "about ")]) == 80, 30, "carol's 80 lines at bob")
            state = await read_file_state(bob.node.store, "general", manifest.message_id)
            assert state is not None and state.complete, state and sorted(state.present)
            assert state.intact is True
        finally:
            for h in (alice, bob, carol):
                await h.node.close()

    run(body(), 90)


def test_headless_says_a_file_is_incomplete_and_whom_it_waits_for(tmp_path: Path) -> None:
    async def body() -> None:
        hub = MemoryHub()
        bob = await start_node(tmp_path / "b", hub, name="bob")
        alice = await start_node(tmp_path / "a", hub, name="alice")
        said: list[dict[str, Any]] = []
        watch = FileWatch(bob.node.store, said.append)
        bob.node.subscribe(watch.on_event)
        try:
            parts = split_file("notes.bin", os.urandom(150_000), "alice")  # 4 segments
            await alice.node.post_contents("general", parts[:2])  # killed mid-send
            await wait_until(lambda: bool(said), 30, "a file event")
            first = said[0]
            assert first["state"] == "incomplete" and first["from"] == "alice"
            assert first["total"] == 4 and first["present"] <= 1
            assert "incomplete · waiting for alice" in first["text"]
            await alice.node.post_contents("general", parts[2:])  # the rest comes
            await wait_until(lambda: said[-1]["state"] == "complete", 30, "complete")
            assert said[-1]["present"] == 4 and said[-1]["id"] == first["id"]
            assert len(said) == 2
        finally:
            await watch.close()
            for h in (alice, bob):
                await h.node.close()

    run(body(), 90)


def test_a_headless_process_reports_a_received_file(tmp_path: Path) -> None:
    """Real processes over a real relay on 127.0.0.1: bob's JSON lines carry a ``file``
    event for alice's file, complete, with whom it came from."""
    from tests import procs

    data = os.urandom(120_000)  # 3 segments
    (tmp_path / "notes.bin").write_bytes(data)
    with procs.running(procs.Cluster(tmp_path)) as c:
        _relay, url = c.relay()
        alice = c.headless("alice", tmp_path / "alice", relay=url)
        bob = c.headless("bob", tmp_path / "bob", relay=url)
        for p in (alice, bob):
            p.wait_for(lambda p=p: any(e.get("state") == "connected"
                                       for e in p.select("connection")), 30, "connected")
        alice.send(f"/send {tmp_path / 'notes.bin'}")
        bob.wait_for(lambda: bool(bob.select("file", state="complete")), 30, "the file event")
        done = bob.select("file", state="complete")[-1]
        assert done["name"] == "notes.bin" and done["from"] == "alice"
        assert done["present"] == done["total"] == 3 and done["size"] == 120_000
