"""A JetStream-backed store when JetStream is full or unreachable (issue 42 §2): it says
so in one log line, keeps serving what it can (reads while only writes fail; what it
buffered; Info), keeps what it receives, and recovers without a restart. Real
nats-servers: full is JetStream's own storage limit (``max_file_store``) filled by
another stream; unreachable is the server stopped, then started again."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import nats
import pytest
from nats_servers import restart, start_nats
from store_js_helpers import CapturedLog, channel, js_peer, wait_for

from net.identity import Identity
from net.store_client import StoreClient, StoreUnavailable
from tests.procs import T
from tests.store.store_helpers import sealed

KEY = channel("js-outage")


def run(coro: object, base: float = 120.0) -> object:
    async def bounded() -> object:
        return await asyncio.wait_for(coro, T(base))  # type: ignore[arg-type]

    return asyncio.run(bounded())


async def _fill(url: str, name: str) -> int:
    """Fill JetStream's storage with another stream until it refuses; its bytes."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=5)
    await js.add_stream(name=name, subjects=[f"{name}.>"], storage=nats.js.api.StorageType.FILE)
    written = 0
    try:
        for _ in range(10_000):  # bounded: the limit is a few MB
            await js.publish(f"{name}.x", secrets.token_bytes(32_000))
            written += 32_000
    except nats.js.errors.ServiceUnavailableError as exc:
        assert exc.err_code == 10023  # insufficient resources: full
    finally:
        await nc.close()
    return written


async def _drop(url: str, name: str) -> None:
    nc = await nats.connect(url)
    await nc.jetstream().delete_stream(name)
    await nc.close()


def test_jetstream_full_one_line_serves_reads_keeps_what_comes_and_recovers(
    tmp_path: Path,
) -> None:
    ident = Identity.generate()
    before = [sealed(ident, KEY, f"before {i}", i) for i in range(20)]
    during = [sealed(ident, KEY, f"during {i}", 100 + i) for i in range(30)]
    with start_nats(tmp_path / "nats", 1, jetstream=True, max_file_store=8 * 2**20,
                    timeout=T(30)) as servers:  # fmt: skip
        url = servers.urls[0]

        async def main() -> None:
            log = CapturedLog()
            peer = js_peer(tmp_path / "p", [url], (KEY.topic,), log, stream="FULLTEST")
            async with peer:
                for env, _ in before:
                    await peer.ingest(env)
                await peer.flush()
                assert await _fill(url, "FILLER") > 0
                for env, _ in during:
                    await peer.ingest(env)

                async def refused_a_few_times() -> bool:
                    return peer.stats.archive_failures >= 3

                await wait_for(refused_a_few_times, 30, "the archive refused the writes")
                lines = log.events("store_archive_unavailable")
                assert len(lines) == 1 and lines[0]["full"] is True  # one line, however often
                assert "insufficient resources" in lines[0]["error"].lower()
                async with StoreClient(peer.url, request_timeout=T(20)) as client:
                    page = await client.by_time(KEY.topic)  # reads still work
                    assert [i.hash for i in page.items] == [h for _, h in before]
                    buffered = await client.by_hash([during[0][1], before[0][1]])
                    assert set(buffered) == {during[0][1], before[0][1]}  # its buffer too
                    assert (await client.info(refresh=True)).engine == "jetstream"
                await _drop(url, "FILLER")  # the operator makes room: no restart

                async def recovered() -> bool:
                    return bool(log.events("store_archive_recovered")) and peer.pending == 0

                await wait_for(recovered, 30, "the store archived what it kept")
                async with StoreClient(peer.url) as client:
                    page = await client.by_time(KEY.topic, page_size=100)
                assert [i.hash for i in page.items] == [h for _, h in before + during]
                assert len(log.events("store_archive_unavailable")) == 1

        run(main())


def test_jetstream_unreachable_one_line_serves_what_it_can_and_recovers(tmp_path: Path) -> None:
    ident = Identity.generate()
    before = [sealed(ident, KEY, f"before {i}", i) for i in range(10)]
    during = [sealed(ident, KEY, f"during {i}", 100 + i) for i in range(10)]
    with start_nats(tmp_path / "nats", 1, jetstream=True, timeout=T(30)) as servers:
        server = servers.servers[0]

        async def main() -> None:
            log = CapturedLog()
            peer = js_peer(tmp_path / "p", servers.urls, (KEY.topic,), log, stream="GONE")
            async with peer:
                for env, _ in before:
                    await peer.ingest(env)
                await peer.flush()
                await asyncio.to_thread(server.stop)  # SIGTERM by PID: JetStream is gone
                for env, _ in during:
                    await peer.ingest(env)

                async def failing() -> bool:
                    return peer.stats.archive_failures >= 2

                await wait_for(failing, 60, "the archive is unreachable")
                lines = log.events("store_archive_unavailable")
                assert len(lines) == 1 and lines[0]["full"] is False
                async with StoreClient(peer.url, request_timeout=T(30)) as client:
                    info = await client.info()  # Info is always answered
                    assert info.engine == "jetstream" and info.archive_id
                    found = await client.by_hash([during[3][1]])  # from its buffer
                    assert set(found) == {during[3][1]}
                    with pytest.raises(StoreUnavailable, match="the archive"):
                        await client.by_time(KEY.topic)  # another peer may answer that
                await asyncio.to_thread(restart, server, servers)  # same port and directory

                async def recovered() -> bool:
                    return bool(log.events("store_archive_recovered")) and peer.pending == 0

                await wait_for(recovered, 60, "the store reconnected and archived its buffer")
                async with StoreClient(peer.url) as client:
                    page = await client.by_time(KEY.topic, page_size=100)
                assert [i.hash for i in page.items] == [h for _, h in before + during]
                assert len(log.events("store_archive_unavailable")) == 1

        run(main(), 180)
