"""Relay memory bounded in bytes, lagging readers, a memory budget, per-address limits and
idle connections (issue 14 §5 and §6): real sockets on 127.0.0.1, the relay in-process or
as a real ``sdschat relay`` process."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from net_helpers import CapturingLogger, Peer, T, channel, envelope, run, start_relay
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from net.relay import RelayServer
from net.relay_frames import encode_subscribe
from tests.procs import Cluster, free_port, running, sdschat

TOPIC = channel("limits").topic
KEY = channel("limits")


async def _non_reader(port: int, *, source: str = "127.0.0.1",
                      subscribe: bool = True) -> ClientConnection:  # fmt: skip
    """A client from ``source`` with a tiny receive buffer that subscribes (unless not
    ``subscribe``) and then never reads."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), T(5))
    ws = await asyncio.wait_for(
        connect(f"ws://127.0.0.1:{port}", sock=sock, proxy=None, compression=None, max_queue=1,
                max_size=None),
        T(5),
    )
    if subscribe:
        await ws.send(encode_subscribe([TOPIC]))
    return ws


async def _subscribed(log: CapturingLogger, n: int) -> None:
    await log.wait_for("subscribed", lambda r: r["conn"] == n)


async def _publish_lockstep(server: RelayServer, log: CapturingLogger, env: bytes, reason: str,
                            budget_check: Any, limit: int = 3000) -> dict[str, Any]:
    """Publish ``env`` (a reading subscriber kept in lock-step) until a connection is
    dropped for ``reason``; ``budget_check()`` runs after every publish."""
    fast = await Peer.open(server.url)
    await fast.subscribe([TOPIC])
    pub = await Peer.open(server.url)
    dropped = asyncio.create_task(
        log.wait_for("connection_dropped", lambda r: r["reason"] == reason, 30)
    )
    for _ in range(limit):  # bounded
        await pub.publish(env)
        assert (await fast.recv_frame()).deliver.envelope == env
        budget_check()
        if dropped.done():
            break
    record = await dropped
    await fast.close()
    await pub.close()
    return record


def test_queue_is_bounded_in_bytes_not_frames() -> None:
    """256 frames of 200 KB used to be allowed per reader; now queue_bytes caps it."""
    queue_bytes = 1_000_000

    async def main() -> None:
        server, log = await start_relay(queue=100_000, queue_bytes=queue_bytes)
        try:
            slow = await _non_reader(server.port)
            await _subscribed(log, 1)
            env = envelope(key=KEY, content=b"x" * 200_000)

            def check() -> None:
                assert server.queued_bytes <= queue_bytes

            record = await _publish_lockstep(server, log, env, "slow_consumer", check)
            assert record["close_code"] == 1008
            assert 0 < record["discarded_bytes"] <= queue_bytes
            assert server.stats.queued_bytes_peak <= queue_bytes
            await log.wait_for("connection_closed", lambda r: r["conn"] == record["conn"], 10)
            assert server.queued_bytes == 0  # everything queued for it was freed
            slow.transport.abort()
        finally:
            await server.close()

    run(main(), base_timeout=60)


def test_a_reader_behind_for_longer_than_max_lag_is_disconnected() -> None:
    async def main() -> None:
        # byte and frame limits far away: only the lag can end this reader
        server, log = await start_relay(queue=100_000, queue_bytes=64 * 2**20,
                                        memory_budget=64 * 2**20, max_lag=1.0)
        try:
            slow = await _non_reader(server.port)
            await _subscribed(log, 1)
            pub = await Peer.open(server.url)
            env = envelope(key=KEY, content=b"y" * 2_000)
            for _ in range(5_000):  # bounded: until frames wait in the slow reader's queue
                await pub.publish(env)
                await pub.barrier()
                if max(server.queue_sizes()) > 0:
                    break
            assert max(server.queue_sizes()) > 0
            loop = asyncio.get_running_loop()
            started = loop.time()
            record = await log.wait_for("connection_dropped",
                                        lambda r: r["reason"] == "lagging", 10)
            waited = loop.time() - started
            assert record["conn"] == 1 and record["close_code"] == 1008
            assert waited >= 0.5  # not before the lag passed (1 s from the first queued frame)
            assert server.stats.dropped["lagging"] == 1
            await pub.close()
            slow.transport.abort()
        finally:
            await server.close()

    run(main(), base_timeout=30)


def test_memory_budget_disconnects_the_biggest_queues() -> None:
    budget = 600_000

    async def main() -> None:
        server, log = await start_relay(queue=100_000, max_frame=70_000, queue_bytes=400_000,
                                        memory_budget=budget)
        try:
            slow = [await _non_reader(server.port) for _ in range(3)]
            for n in (1, 2, 3):
                await _subscribed(log, n)
            env = envelope(key=KEY, content=b"z" * 50_000)

            def check() -> None:
                assert server.queued_bytes <= budget

            record = await _publish_lockstep(server, log, env, "memory_budget", check)
            assert record["conn"] in (1, 2, 3)
            assert server.stats.queued_bytes_peak <= budget
            for ws in slow:
                ws.transport.abort()
        finally:
            await server.close()

    run(main(), base_timeout=60)


def test_max_clients_per_ip_counts_hosts_and_leaves_room_for_other_hosts() -> None:
    """127.0.0.2 is this machine too: it shares 127.0.0.1's slots (before, every loopback
    address had slots of its own); ::1 is another host and gets in."""

    async def main() -> None:
        port = free_port()
        server, log = await start_relay(host="127.0.0.1,::1", port=port, max_clients=10,
                                        max_clients_per_ip=3)  # fmt: skip
        try:
            mine = [await Peer.open(server.url) for _ in range(2)]
            mine.append(Peer(await _non_reader(port, source="127.0.0.2")))
            for p in mine[:2]:
                await p.subscribe([TOPIC])
            await _subscribed(log, 3)
            for source in ("127.0.0.1", "127.9.8.7"):
                extra = Peer(await _non_reader(port, source=source, subscribe=False))
                try:
                    for _ in range(3):  # bounded
                        await extra.recv_frame()
                    raise AssertionError(f"a 4th connection of 127.0.0.0/8 ({source}) served")
                except ConnectionClosed as exc:
                    assert exc.rcvd is not None and exc.rcvd.code == 1013
                    assert "address" in exc.rcvd.reason
            assert server.stats.rejected_per_ip == 2
            # another host (::1) still gets in
            other = await Peer.open(f"ws://[::1]:{port}")
            await other.subscribe([TOPIC])
            assert server.connection_count == 4
            # a slot freed on the first host is usable again
            await mine[0].close()
            await log.wait_for("connection_closed", lambda r: r["conn"] == 1)
            again = await Peer.open(server.url)
            await again.subscribe([TOPIC])
            assert server.connection_count == 4
            mine[2].ws.transport.abort()
        finally:
            await server.close()

    run(main())


def test_connections_that_never_subscribe_are_closed() -> None:
    async def main() -> None:
        server, log = await start_relay(idle_timeout=1.0)
        try:
            idle = await Peer.open(server.url)
            await idle.barrier()  # talking (pings) is not subscribing
            busy = await Peer.open(server.url)
            await busy.subscribe([TOPIC])
            record = await log.wait_for("connection_dropped", lambda r: r["reason"] == "idle", 10)
            assert record["conn"] == 1 and record["close_code"] == 1008
            try:
                for _ in range(10):  # bounded
                    await idle.recv_frame()
                raise AssertionError("the idle connection stayed open")
            except ConnectionClosed as exc:
                assert exc.rcvd is not None and exc.rcvd.reason == "no subscription"
            await asyncio.sleep(1.5)
            assert server.connection_count == 1  # the subscribed one stays
            await busy.barrier()
        finally:
            await server.close()

    run(main())


def test_relay_process_flags_per_ip_idle_and_stats(tmp_path: Path) -> None:
    with running(Cluster(tmp_path)) as c:
        relay = c.start(sdschat("relay", "--port", "0", "--stats-interval", "0.5",
                                "--max-clients-per-ip", "2", "--idle-timeout", "1",
                                "--queue-bytes", "2M", "--max-lag", "5",
                                "--memory-budget", "64M"), "relay", stdin=False)
        listening = relay.wait_log("relay_listening")
        assert listening["max_clients_per_ip"] == 2 and listening["queue_bytes"] == 2 * 2**20
        url = f"ws://127.0.0.1:{int(listening['port'])}"

        async def main() -> tuple[int | None, str | None]:
            a = await Peer.open(url)
            b = await Peer.open(url)
            await a.subscribe([TOPIC])
            third = await Peer.open(url)
            code = None
            try:
                await third.recv_frame()
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
            reason = None
            try:
                for _ in range(10):  # bounded
                    await b.recv_frame()
            except ConnectionClosed as exc:  # b never subscribed: closed after ~1 s
                reason = exc.rcvd.reason if exc.rcvd else None
            await a.barrier()  # a subscribed: still served
            await a.close()
            return code, reason

        code, reason = run(main())
        assert code == 1013
        assert reason == "no subscription"
        relay.wait_for(lambda: any(r.get("event") == "relay_stats" and "queued_bytes" in r
                                   and r.get("rss_kib") for r in relay.log_records()),
                       10, "relay_stats with queued_bytes and rss_kib")


def test_limit_flags_are_checked() -> None:
    from net.relay_config import RelayConfig

    with pytest.raises(ValueError, match="--queue-bytes"):
        RelayConfig(queue_bytes=1000)
    with pytest.raises(ValueError, match="--memory-budget"):
        RelayConfig(memory_budget=2**20)
    with pytest.raises(ValueError, match="max_lag"):
        RelayConfig(max_lag=0)
    with pytest.raises(ValueError, match="max_clients_per_ip"):
        RelayConfig(max_clients_per_ip=-1)
    assert RelayConfig(max_clients_per_ip=0, idle_timeout=0).max_clients_per_ip == 0


def test_max_clients_per_ip_zero_is_no_limit() -> None:
    async def main() -> None:
        server, _ = await start_relay(max_clients=10, max_clients_per_ip=0)
        try:
            peers = [await Peer.open(server.url) for _ in range(8)]
            for p in peers:
                await p.subscribe([TOPIC])
            assert server.connection_count == 8
            assert server.stats.rejected_per_ip == 0
        finally:
            await server.close()

    run(main())


def test_one_host_cannot_take_every_slot_of_a_relay_process(tmp_path: Path) -> None:
    """The audit's attack, scaled down: one host opens connections that never subscribe,
    from many of its loopback addresses, until the relay refuses it; another host (::1)
    still gets in, and the idle ones are closed after --idle-timeout, freeing the slots."""
    port = free_port()
    with running(Cluster(tmp_path)) as c:
        relay = c.start(sdschat("relay", "--host", "127.0.0.1,::1", "--port", str(port),
                                "--stats-interval", "0", "--max-clients", "40",
                                "--max-clients-per-ip", "16", "--idle-timeout", "2"),
                        "relay", stdin=False)  # fmt: skip
        listening = relay.wait_log("relay_listening")
        assert listening["addresses"] == [f"127.0.0.1:{port}", f"[::1]:{port}"]

        async def main() -> tuple[int, int, int]:
            flood: list[Peer] = []
            refused = 0
            for n in range(30):  # bounded: 30 attempts from 10 addresses of 127.0.0.0/8
                p = Peer(await _non_reader(port, source=f"127.0.{n % 10}.{n // 10 + 2}",
                                           subscribe=False))  # fmt: skip
                try:
                    await p.barrier()
                    flood.append(p)
                except ConnectionClosed as exc:
                    assert exc.rcvd is not None and exc.rcvd.code == 1013
                    refused += 1
            # someone else, from another host, is served
            other = await Peer.open(f"ws://[::1]:{port}")
            await other.subscribe([TOPIC])
            # the flood never subscribed: closed after the idle timeout
            closed = 0
            for p in flood:
                try:
                    for _ in range(10):  # bounded
                        await p.recv_frame(base_timeout=10)
                except ConnectionClosed:
                    closed += 1
            again = await Peer.open(f"ws://127.0.0.1:{port}")
            await again.subscribe([TOPIC])
            await again.close()
            await other.close()
            return len(flood), refused, closed

        served, refused, closed = run(main(), base_timeout=60)
        assert served == 16 and refused == 14 and closed == 16
        dropped = [r for r in relay.log_records() if r.get("event") == "connection_dropped"]
        assert sum(r["reason"] == "idle" for r in dropped) >= 16


def test_a_host_is_an_ipv4_slash_24_all_of_loopback_or_an_ipv6_slash_64() -> None:
    from net.hosts import HostGrouping
    from net.relay import host_group

    assert host_group("203.0.113.5") == host_group("203.0.113.250") == "203.0.113.0/24"
    assert host_group("203.0.114.5") != host_group("203.0.113.5")  # the next /24
    assert host_group("127.0.0.1") == host_group("127.200.3.4") == "127.0.0.0/8"
    a, b = host_group("2001:db8:1:2::1"), host_group("2001:db8:1:2:ffff:1:2:3")
    assert a == b == "2001:db8:1:2::/64"  # one /64 is one host
    assert host_group("2001:db8:1:3::1") != a
    assert host_group("::ffff:203.0.113.5") == "203.0.113.0/24"
    assert host_group("::ffff:127.0.0.2") == "127.0.0.0/8"
    assert host_group("::1") == "::/64"  # IPv6 loopback: another address family
    assert host_group("fe80::1%lo") == "fe80::/64"
    assert host_group("?") == "?"
    exact = HostGrouping(ipv4_prefix=32, ipv6_prefix=128)
    assert exact.group("203.0.113.5") == "203.0.113.5/32"
    assert exact.group("127.0.0.2") == "127.0.0.0/8"  # still this machine
    assert exact.group("2001:db8::1") == "2001:db8::1/128"
    assert HostGrouping(16, 48).group("198.51.7.9") == "198.51.0.0/16"
    for bad in ((0, 64), (33, 64), (24, 0), (24, 129)):
        with pytest.raises(ValueError, match="prefix length"):
            HostGrouping(*bad)


def test_addresses_of_one_ipv6_slash_64_share_the_per_host_limit() -> None:
    """Behind a trusted proxy the client addresses are IPv6: two of one /64 count as one
    host (issue 26, item 11), another /64 is another host."""
    from test_net_relay_proxy import _served

    async def main() -> None:
        server, _log = await start_relay(max_clients_per_ip=2, trusted_proxies=("127.0.0.1",))
        try:
            url = server.url
            assert await _served(url, "2001:db8:0:1::1")
            assert await _served(url, "2001:db8:0:1::2")
            assert not await _served(url, "2001:db8:0:1:abcd::3")  # its /64's 3rd
            assert await _served(url, "2001:db8:0:2::1")  # the next /64
            assert server.stats.rejected_per_ip == 1
        finally:
            await server.close()

    run(main())


async def _lone_subscriber(port: int, source: str, n: int) -> ClientConnection:
    """A connection from ``source`` subscribed to a topic nobody else uses (it reads)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), T(5))
    ws = await asyncio.wait_for(
        connect(f"ws://127.0.0.1:{port}", sock=sock, proxy=None, compression=None), T(5)
    )
    await ws.send(encode_subscribe([f"lonely-{source}-{n}".encode()[:64]]))
    return ws


def test_a_full_relay_sheds_idle_lone_subscribers_for_newcomers() -> None:
    """The audit's attack, scaled down (issue 26, item 11): connections from several
    loopback addresses, each subscribed to a topic nobody else uses, fill the relay and
    stay past the idle timeout. Honest newcomers get in (the lone idle ones are shed)
    and chat; connections carrying traffic are never shed."""

    async def main() -> None:
        server, log = await start_relay(max_clients=12, max_clients_per_ip=16, idle_timeout=1.0)
        try:
            # two honest members talking, from 127.0.0.1 (one host with the squatters)
            a, b = await Peer.open(server.url), await Peer.open(server.url)
            await a.subscribe([TOPIC])
            await b.subscribe([TOPIC])
            hosts = [(h, i) for h in range(2, 5) for i in range(4)][:10]  # 4 + 4 + 2
            squatters = [await _lone_subscriber(server.port, f"127.0.0.{h}", i)
                         for h, i in hosts]
            await _subscribed(log, 12)
            assert server.connection_count == 12
            await asyncio.sleep(1.2)  # past the idle timeout: the squatters qualify
            for _ in range(3):  # a and b keep talking, so they carry traffic
                env = envelope(key=KEY)
                await a.publish(env)
                assert (await b.recv_frame()).deliver.envelope == env
            c, d = await Peer.open(server.url), await Peer.open(server.url)
            assert await c.subscribe([TOPIC]) == []  # served, not refused with 1013
            assert await d.subscribe([TOPIC]) == []
            env = envelope(key=KEY)
            await c.publish(env)
            for p in (a, b, d):
                assert (await p.recv_frame()).deliver.envelope == env
            shed = log.events("connection_shed")
            assert len(shed) == 2 and all(not r["shared"] for r in shed)
            assert all(r["rule"] == "idle" for r in shed)
            assert server.stats.dropped["shed"] == 2
            assert server.stats.connections_rejected == 0
            for ws in squatters:
                ws.transport.abort()
        finally:
            await server.close()

    run(main())


def test_a_full_relay_of_fresh_or_busy_connections_still_refuses_newcomers() -> None:
    async def main() -> None:
        server, _log = await start_relay(max_clients=2, idle_timeout=30.0)
        try:
            a, b = await Peer.open(server.url), await Peer.open(server.url)
            await a.subscribe([TOPIC])
            await b.subscribe([TOPIC])
            extra = await Peer.open(server.url)
            with pytest.raises(ConnectionClosed) as info:
                await extra.recv_frame()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1013
            assert server.stats.dropped["shed"] == 0 and server.connection_count == 2
        finally:
            await server.close()

    run(main())
