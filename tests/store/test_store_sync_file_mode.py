"""``store_sync.json`` is private (0600) whatever the umask, like the rest of a data dir."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from store_helpers import channel, run, sealed

from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer
from net.store_sync import STATE_FILE, StoreSync

KEY = channel("room")


def test_store_sync_json_is_0600_under_umask_000(tmp_path: Path) -> None:
    """Issue 14 §8: it was created with the umask (0666 under umask 000)."""

    async def main() -> None:
        ident = Identity.generate()
        items = [sealed(ident, KEY, f"m{i}", i) for i in range(5)]
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,),
                              listen=("127.0.0.1", 0), stats_interval_s=0)  # fmt: skip
        with open(os.devnull, "w") as sink:
            async with StorePeer(cfg, logger=RelayLogger("json", sink)) as peer:
                for env, _ in items:
                    await peer.ingest(env)
                got: list[bytes] = []

                async def deliver(env: bytes) -> None:
                    got.append(env)

                data_dir = tmp_path / "node"
                data_dir.mkdir(mode=0o700)
                (data_dir / "store_sync.tmp").write_text("{}")  # a leftover, world-readable
                os.chmod(data_dir / "store_sync.tmp", 0o666)
                sync = StoreSync(peer.url, deliver=deliver, data_dir=data_dir)
                await sync.catch_up("room", KEY.topic)
                await sync.close()
                assert len(got) == 5
                mode = stat.S_IMODE((data_dir / STATE_FILE).stat().st_mode)
                assert mode == 0o600, oct(mode)

    old = os.umask(0)
    try:
        run(main())
    finally:
        os.umask(old)
