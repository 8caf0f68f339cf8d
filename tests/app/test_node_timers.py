"""The node's protocol timer runs from the moment a channel is joined.

A node restarted into a silent channel (every member restarted at once, after a
relay upgrade or a power cut) must still send its periodic syncs, its due SDS-R
requests and its resends: nobody else will speak first.
"""

from __future__ import annotations

from pathlib import Path

from app.node.transport import MemoryHub
from tests.app.app_helpers import run, start_node, wait_until


def test_a_node_restarted_into_a_silent_channel_syncs_on_its_own(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        for i in range(3):
            await a.node.send("general", f"m{i}")
        await wait_until(lambda: len(b.delivered()) == 3)
        await a.node.close()
        await b.node.close()

        quiet = MemoryHub()  # alice alone again: nothing arrives that could wake her
        a2 = await start_node(tmp_path / "a", quiet, name="alice")
        try:
            start = quiet.published
            # FAST timings: a sync goes out within 200 ms of each other; five of them
            # show the timer is armed and re-armed, not one publish at join.
            await wait_until(
                lambda: quiet.published >= start + 5, 10.0, "periodic syncs after a restart"
            )
        finally:
            await a2.node.close()

    run(main())

