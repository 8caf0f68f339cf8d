"""A store peer under abuse (issue 26, item 6): idle sockets, one host taking every slot,
and a catch-up refused while the store is full. Real sockets on 127.0.0.x."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from store_helpers import T, channel, run, sealed
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer
from net.store_sync import CatchUpProgress, StoreSync

KEY = channel("abuse")
QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)


async def _idle_socket(port: int, source: str) -> ClientConnection:
    """A websocket from ``source`` that never sends a request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), T(5))
    return await asyncio.wait_for(
        connect(f"ws://127.0.0.1:{port}", sock=sock, proxy=None, compression=None), T(5)
    )


async def _close_code(ws: ClientConnection, base_timeout: float = 5.0) -> int:
    try:
        await asyncio.wait_for(ws.recv(), T(base_timeout))
    except ConnectionClosed as exc:
        assert exc.rcvd is not None
        return exc.rcvd.code
    raise AssertionError("still open")


def test_idle_sockets_time_out_one_host_is_limited_and_a_refused_catch_up_retries(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        ident = Identity.generate()
        items = [sealed(ident, KEY, f"m{i}", i) for i in range(30)]
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,), listen=("127.0.0.1", 0),
                              stats_interval_s=0, max_clients=8, max_clients_per_ip=4,
                              idle_timeout_s=1.0)
        async with StorePeer(cfg, logger=QUIET) as peer:
            for env, _ in items:
                await peer.ingest(env)
            # one host may take 4 slots, not all 8; every address of 127.0.0.0/8 is
            # this machine, one host (before, each address had 4 slots of its own)
            squat = [await _idle_socket(peer.port, f"127.0.{n}.2") for n in range(4)]
            for source in ("127.0.0.2", "127.0.9.9", "127.1.2.3"):
                assert await _close_code(await _idle_socket(peer.port, source)) == 1013
            assert peer.stats.rejected_per_ip == 3
            # the host's slots are full of idle sockets: a node's catch-up is refused...
            got: list[bytes] = []
            progress: list[CatchUpProgress] = []

            async def deliver(env: bytes) -> None:
                got.append(env)

            sync = StoreSync(peer.url, deliver=deliver, progress=progress.append,
                             catchup_attempts=1, catchup_retry_s=0.3)
            sync.catch_up_soon("abuse", KEY.topic)
            for _ in range(500):  # bounded
                if progress and progress[-1].state == "failed":
                    break
                await asyncio.sleep(0.01)
            assert progress[-1].state == "failed", progress
            # ...the idle sockets are closed after the idle timeout (1008)...
            codes = await asyncio.gather(*(_close_code(ws) for ws in squat))
            assert set(codes) == {1008} and peer.stats.idle_closed == 4
            # ...and the catch-up, retried, completes once slots are free
            for _ in range(1000):  # bounded
                if len(got) == len(items):
                    break
                await asyncio.sleep(0.01)
            assert sorted(got) == sorted(e for e, _ in items)
            assert progress[-1].state == "done" and sync.counters["catchup_retries"] >= 1
            await sync.close()

    run(main(), 30)


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))  # db + WAL


def test_a_flood_past_max_bytes_is_trimmed_as_it_comes_and_the_file_shrinks(
    tmp_path: Path,
) -> None:
    """117 MiB into a 20 MiB store left a 184 MiB file that never shrank. Scaled down:
    12 MB into a 2 MiB store. Retention runs as the bytes arrive (not once a minute),
    and the file gives its free pages back (incremental vacuum)."""

    async def main() -> None:
        junk_key = channel("abuse")
        flooder = Identity.generate()
        max_bytes = 2 * 1024 * 1024
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,), listen=None,
                              stats_interval_s=0, max_bytes=max_bytes, max_age_ms=0,
                              retention_interval_s=3600, flush_max=16)
        async with StorePeer(cfg, logger=QUIET) as peer:
            db = peer.store.path
            peak = 0
            for i in range(240):  # 240 x 50 KB = 12 MB
                env, _ = sealed(flooder, junk_key, "z" * 50_000, i)
                await peer.ingest(env)
                if i % 16 == 15:
                    await peer.flush()
                    await asyncio.sleep(0)  # the retention task runs when woken
                    peak = max(peak, _file_bytes(db))
            await peer.flush()
            await peer.run_retention()
            count, size = await peer.store.archive.stats()
            assert size <= max_bytes and count > 0
            final = _file_bytes(db)
            print(f"peak {peak / 2**20:.1f} MiB, final {final / 2**20:.1f} MiB",
                  [(p.name, p.stat().st_size) for p in db.parent.glob(db.name + "*")])
            assert peer.stats.vacuumed_bytes > 0
            assert final < 2 * max_bytes, final  # not 12 MB: the file gave pages back
            assert peer.stats.retention_deleted >= 150

    run(main(), 60)


def test_twenty_loopback_addresses_are_one_host_at_a_store_process(tmp_path: Path) -> None:
    """Issue 39 §8 at the store: 20 addresses of 127.0.0.0/8 x 4 query connections to
    ``sdschat store --max-clients-per-ip 4`` get 4 slots in all (before: 4 each, 80)."""
    from store_helpers import cluster

    async def flood(port: int) -> list[ClientConnection]:
        opened = []
        for a in range(20):
            for _ in range(4):
                ws = await _idle_socket(port, f"127.0.{a}.{a + 2}")
                try:
                    await asyncio.wait_for(ws.ping(), T(5))
                    opened.append(ws)
                except ConnectionClosed:
                    pass
        return opened

    with cluster(tmp_path) as c:
        store, url = c.store(None, tmp_path / "store", topics=(KEY.topic,),
                             extra=["--max-clients-per-ip", "4", "--idle-timeout", "30"])
        port = int(url.rsplit(":", 1)[1])

        async def main() -> int:
            opened = await flood(port)
            alive = sum(1 for ws in opened if ws.state.name == "OPEN")
            for ws in opened:
                ws.transport.abort()
            return alive

        assert run(main(), 60) == 4
        rejected = [r for r in store.log_records() if r.get("event") == "query_connection_rejected"]
        assert rejected and {r["host"] for r in rejected} == {"127.0.0.0/8"}
