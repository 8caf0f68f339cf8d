"""What a finished storage call leaves in memory (issue 41 item 8: a TUI on 5,000 own
unacknowledged lines): nothing of what it wrote.

aiosqlite's connection thread keeps the last function it ran referenced while it waits
for the next call; that function held the commit's batch, and with it every channel's
exported core state (15 MB with 5,000 lines pending), until the next call came.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from storage_testkit import open_with_channel, run

from storage import Batch


def test_a_committed_batch_is_not_kept_alive_by_the_storage_thread(tmp_path: Path) -> None:
    async def body() -> None:
        store = await open_with_channel(tmp_path, "general")
        try:
            batch = Batch()
            batch.set_core_state("general", b"x" * 1_000_000 + b"state")
            state = batch.core_states["general"]
            alone = sys.getrefcount(state) - 1  # held by the batch and this frame
            await store.commit_batch(batch)
            assert batch.committed
            del batch
            gc.collect()
            # the storage thread now waits for the next call: what it ran last is gone
            assert sys.getrefcount(state) - 1 == alone - 1  # this frame only
        finally:
            await store.close()

    run(body)
