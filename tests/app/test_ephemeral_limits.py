"""Ephemeral floods (issue 26 §8): received ephemeral messages are capped in size and
rate per sender; an honest member's typing notice still passes during a flood."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import run, start_node, wait_until

from app.node.ephemeral_guard import EPHEMERAL_BURST, MAX_EPHEMERAL_BYTES
from app.node.events import Ephemeral
from app.node.transport import MemoryHub
from net.envelope import seal


def test_an_ephemeral_flood_is_capped_per_sender_and_honest_notices_pass(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        hub = MemoryHub()
        victim = await start_node(tmp_path / "v", hub, name="victim")
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        bob = await start_node(tmp_path / "b", hub, name="bob")
        try:
            m = mallory.node
            info = m.channels["general"]
            # mallory's own node refuses to send them; she builds them with the core
            with pytest.raises(ValueError, match="the limit is 1024"):
                await m.send_ephemeral("general", b"x" * 60_000)
            core = m.core("general")
            for i in range(40):
                content = (b"%d:" % i) + (b"y" * (60_000 if i % 2 else 40))
                data = core.send_ephemeral(content, m._now())
                await m.transport.publish(seal(data, m.identity, info.key))
            await bob.node.send_ephemeral("general", b'{"v":1,"kind":"typing","name":"bob"}')

            def from_(h: object) -> list[Ephemeral]:
                sid = h.node.sender_id  # type: ignore[attr-defined]
                return [e for e in victim.events if isinstance(e, Ephemeral)
                        and e.sender_id == sid]  # fmt: skip

            await wait_until(lambda: len(from_(bob)) == 1, 10, "bob's typing notice")
            await wait_until(
                lambda: victim.node.counters["ephemeral_dropped_size"]
                + victim.node.counters["ephemeral_dropped_rate"]
                + len(from_(mallory)) == 40,
                10,
                "mallory's 40 ephemeral messages handled",
            )
            passed = from_(mallory)
            assert 1 <= len(passed) <= EPHEMERAL_BURST
            assert all(len(e.content) <= MAX_EPHEMERAL_BYTES for e in passed)
            assert victim.node.counters["ephemeral_dropped_size"] == 20
            assert victim.node.counters["ephemeral_dropped_rate"] >= 15
        finally:
            for h in (victim, mallory, bob):
                await h.node.close()

    run(body())
