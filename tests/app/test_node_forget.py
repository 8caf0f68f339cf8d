"""/forget: a data directory drops a channel it left (history, keys) and keeps its identity."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import MemoryHub, key, run, start_node, wait_until

from app.node.runtime import PassphraseMismatchError


def test_forget_frees_a_name_pinned_to_a_mistyped_passphrase(tmp_path: Path) -> None:
    async def main() -> None:
        h = await start_node(tmp_path / "a", MemoryHub(), passphrase="typo")
        try:
            node = h.node
            sender = node.sender_id
            await node.send("general", "said under the typo")
            await wait_until(lambda: bool(h.own("logged")))
            with pytest.raises(ValueError, match="leave it first"):
                await node.forget("general")
            assert await node.leave("general")
            with pytest.raises(PassphraseMismatchError, match="/forget general"):
                await node.join("general", "right", key=key("general", "right"))
            assert await node.forget("general") == 1
            with pytest.raises(ValueError, match="no channel 'general'"):
                await node.forget("general")
            await node.join("general", "right", key=key("general", "right"))
            assert await node.page("general") == []
            assert node.sender_id == sender
        finally:
            await h.node.close()

    run(main())


def test_a_first_join_that_hears_nobody_says_so_and_one_that_hears_someone_does_not(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, passphrase="right", nobody_heard_ms=300)
        b = await start_node(tmp_path / "b", hub, passphrase="typo", nobody_heard_ms=300)
        try:
            await a.node.send("general", "anyone?")

            def warned(h: object) -> bool:
                return any(getattr(e, "data", {}).get("nobody_heard") for e in h.events)  # type: ignore[attr-defined]

            await wait_until(lambda: warned(b))
            text = next(e.text for e in b.events if getattr(e, "data", {}).get("nobody_heard"))
            assert "nobody has been heard in #general with this passphrase yet" in text
            c = await start_node(tmp_path / "c", hub, passphrase="right", nobody_heard_ms=2000)
            try:
                await a.node.send("general", "still here")
                await wait_until(lambda: "still here" in c.texts())
                await wait_until(lambda: c.node.counters["nobody_heard_checks"] == 1)
                assert not warned(c)
            finally:
                await c.node.close()
        finally:
            await a.node.close()
            await b.node.close()

    run(main())
