"""/forget: a data directory drops a channel it left (history, keys) and keeps its identity."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import MemoryHub, key, run, start_node, wait_until

from app.node import PassphraseMismatchError


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
