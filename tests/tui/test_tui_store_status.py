"""The status bar names the store peer in use, shows catch-up progress and counts LAN peers.

A real store peer (``net.store_peer.StorePeer``, a websocket server on
127.0.0.1) holds sealed messages of the public channel ``general``. The app
is handed its URL as ``sdschat join`` hands it a store announced on the LAN
(``SdsChatApp.use_lan_store``, when no ``--store`` was given) and catches up.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace

from tui_helpers import SIZE, T, screen_text, tui, wait_until

from app.chat.lines import encode_content
from app.node.events import CatchUp
from app.node.transport import MemoryHub
from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer
from sds import sds_pb2
from sds.ids import message_id_for

COUNT = 30


def sealed(identity: Identity, key: ChannelKey, n: int) -> bytes:
    content = encode_content(f"archived {n}", "bob")
    # nodes check ids (sds.ids): the verifiable sdschat form, nonce n
    mid = message_id_for(key.channel, identity.sender_id, 1_000 + n, content, n.to_bytes(8, "big"))
    sds = sds_pb2.SdsMessage(
        sender_id=identity.sender_id,
        message_id=mid,
        channel_id=key.channel,
        lamport_timestamp=1_000 + n,
        content=content,
    ).SerializeToString()
    return seal(sds, identity, key)


def status(app) -> str:  # type: ignore[no-untyped-def]
    return screen_text(app).splitlines()[-1]


async def test_status_bar_shows_the_store_peer_and_catch_up(tmp_path: Path) -> None:
    key = derive_channel_key("general", None, params=TEST_KDF)
    bob = Identity.generate()
    cfg = StorePeerConfig(
        tmp_path / "store", topics=(key.topic,), listen=("127.0.0.1", 0), stats_interval_s=0
    )
    with open(os.devnull, "w") as quiet:
        async with StorePeer(cfg, logger=RelayLogger("json", quiet)) as peer:
            for n in range(COUNT):
                await peer.ingest(sealed(bob, key, n))
            app = tui(tmp_path / "alice", MemoryHub().transport())
            async with app.run_test(size=SIZE):
                await asyncio.wait_for(app.ready.wait(), T(20))
                assert "store none" in status(app)
                app.use_lan_store(peer.url)
                rows = app.model.channels["general"].rows
                await wait_until(
                    lambda: sum(r.text.startswith("archived") for r in rows) == COUNT,
                    20,
                    "the store's messages delivered",
                )
                where = f"store 127.0.0.1:{peer.port}"
                await wait_until(lambda: where in status(app), what="the store named")
                assert "LAN off" in status(app)

                # progress while a catch-up runs, gone once it is done
                app._on_node_event(
                    CatchUp("general", "running", 12, 30, peer.url, "catching up · 12 / 30")
                )
                await wait_until(lambda: "catching up · 12 / 30" in status(app))
                app._on_node_event(CatchUp("general", "done", 30, 30, peer.url, "caught up"))
                await wait_until(lambda: "catching up" not in status(app))
                assert where in status(app)

                # a failed catch-up is said once, as a notice
                app._on_node_event(
                    CatchUp("general", "failed", 3, 0, peer.url, "", detail="store closed")
                )
                await wait_until(
                    lambda: any("store closed" in n.message for n in app._notifications)
                )

                # with LAN gossip, the LAN part counts its connected peers
                app.opts.lan_transport = SimpleNamespace(peers=lambda: ["p1", "p2"])
                await wait_until(lambda: "LAN 2 peers" in status(app), what="LAN peers")

