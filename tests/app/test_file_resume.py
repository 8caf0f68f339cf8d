"""A file whose sender is killed mid-send is finished by the sender's restart (issue 26
§12): every part is durable in the outbox before the first one is sent."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from app_helpers import crash, run, start_node, wait_until

from app.commands.content import channel_view, run_content_command
from app.node.events import NodeEvent, OwnMessage
from app.node.transport import MemoryHub


def test_a_file_sender_killed_mid_send_finishes_at_restart(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    data = os.urandom(300 * 48 * 1024 + 123)  # 301 segments + the manifest: 2 rounds
    path.write_bytes(data)

    async def body() -> None:
        hub = MemoryHub()
        bob = await start_node(tmp_path / "b", hub, name="bob")
        alice = await start_node(tmp_path / "a", hub, name="alice")
        killed = asyncio.Event()

        def kill_at_first_line(ev: NodeEvent) -> None:  # kill -9 right after a commit
            if isinstance(ev, OwnMessage) and ev.state == "logged" and not killed.is_set():
                killed.set()

        alice.node.subscribe(kill_at_first_line)
        send = asyncio.ensure_future(
            run_content_command(alice.node, "send", str(path), "general", lambda _e: None)
        )
        await killed.wait()
        await crash(alice.node)
        send.cancel()
        try:
            again = await start_node(tmp_path / "a", hub, name="alice")  # the restart
            try:
                def parts_at_bob() -> int:
                    return len([d for d in bob.delivered() if d.kind in ("file", "segment")])

                await wait_until(lambda: parts_at_bob() == 302, 60, "every part at bob")
                view = await channel_view(bob.node, "general")
                files = [i for i in view.items() if i.file is not None]
                assert len(files) == 1 and files[0].file is not None
                assert files[0].file.complete and files[0].file.intact
            finally:
                await again.node.close()
        finally:
            await bob.node.close()

    run(body(), 120)
