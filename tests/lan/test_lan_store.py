"""``sdschat store --lan`` as a real process on 127.0.0.1: archives gossip, is found on the LAN."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from lan_helpers import LOOPBACK, T, channel, cluster, eventually, run, sealed, topics_known

from net.identity import Identity
from net.lan.transport import LanTransport
from net.store_client import StoreClient


def test_store_on_the_lan_archives_gossip_and_is_discovered(tmp_path: Path) -> None:
    key = channel("room")
    with cluster(tmp_path) as c:
        store, store_url = c.store(
            None, tmp_path / "store", topics=(key.topic,),
            extra=["--lan", "--interface", "127.0.0.1"],
        )
        stores: list[tuple[str, bool]] = []

        async def main() -> int:
            node = LanTransport(LOOPBACK, on_store=lambda url, up: stores.append((url, up)))
            received: list[bytes] = []

            async def on_env(env: bytes) -> None:
                received.append(env)

            node.start(on_env, lambda _s: None)
            await node.subscribe([key.topic])
            try:
                await eventually(lambda: node.connected, 20, "the store as a LAN peer")
                assert node.stores() == [store_url]
                assert stores == [(store_url, True)]
                assert [p.role for p in node.peers()] == ["store"]
                await eventually(lambda: topics_known([node]), 10, "the store's topics")
                ident = Identity.generate()
                items = [sealed(ident, key, f"lan {i}", i) for i in range(30)]
                for env, _ in items:
                    assert await node.publish(env)
                async with StoreClient(store_url) as client:
                    found: dict[bytes, object] = {}

                    async def all_found() -> bool:
                        found.update(await client.by_hash([h for _, h in items]))
                        return len(found) == 30

                    for _ in range(int(T(10) / 0.1)):  # bounded
                        if await all_found():
                            break
                        await asyncio.sleep(0.1)
                    assert len(found) == 30
                return len(received)
            finally:
                await node.close()

        assert run(main(), 40) == 0  # a store never floods anything back
        records = store.log_records()
        assert any(r.get("event") == "lan_peer" and r.get("state") == "connected"
                   for r in records)
        store.signal(signal.SIGTERM)
        assert store.wait(15) == 0


def test_a_loopback_query_port_is_not_announced_to_a_real_lan(tmp_path: Path) -> None:
    """``--listen 127.0.0.1`` with discovery on all interfaces: nodes elsewhere could not
    reach the query port, so it is not announced (a warning says so); with loopback-only
    discovery (one machine) it is. Nothing is started on the network here."""
    import io

    from net.lan.store_feed import LanStoreFeed, reachable_from_lan
    from net.lan.transport import LanOptions
    from net.relay_log import RelayLogger
    from net.store_config import StorePeerConfig
    from net.store_peer import StorePeer

    assert not reachable_from_lan("127.0.0.1", None)
    assert not reachable_from_lan("localhost", ("192.168.1.20",))
    assert not reachable_from_lan("::1", ("127.0.0.1", "10.0.0.2"))
    assert reachable_from_lan("127.0.0.1", ("127.0.0.1",))
    assert reachable_from_lan("0.0.0.0", None)
    assert reachable_from_lan("192.168.1.20", ("192.168.1.20",))

    async def main() -> None:
        log = io.StringIO()
        cfg = StorePeerConfig(tmp_path / "store", topics=(channel("room").topic,),
                              listen=("127.0.0.1", 0), stats_interval_s=0)
        async with StorePeer(cfg, logger=RelayLogger("json", log)) as peer:
            everywhere = await LanStoreFeed.create(peer, LanOptions(interfaces=None))
            here = await LanStoreFeed.create(peer, LOOPBACK)
            try:
                assert everywhere.transport.store_port is None
                assert here.transport.store_port == peer.port
            finally:
                await everywhere.close()
                await here.close()
        assert log.getvalue().count("store_query_port_not_announced") == 1

    run(main(), 30)
