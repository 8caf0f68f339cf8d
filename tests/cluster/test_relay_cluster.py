"""Relays in one process sharing envelopes through a real nats-server (loopback only)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import nats as nats_py
import pytest
from nats_servers import NatsServers, free_port
from net_helpers import Peer, T, channel, envelope, run, start_relay

from net.envelope import MalformedEnvelope
from net.relay import RelayServer
from net.relay_cluster import (
    PUBLISH_HEADER,
    SUBJECT_PREFIX,
    PublisherBudgets,
    RecentDigests,
    dedup_key,
    subject_for,
)
from net.relay_frames import encode_publish, encode_subscribe, encode_unsubscribe
from tests.procs import ROOT, sdschat

KEY_A = channel("a")
KEY_B = channel("b")
TOPIC_A = KEY_A.topic
TOPIC_B = KEY_B.topic


async def relays(nats: NatsServers, n: int, **changes: Any) -> list[RelayServer]:
    out = []
    for _ in range(n):
        server, _log = await start_relay(cluster=tuple(nats.urls), **changes)
        out.append(server)
    return out


async def close_all(*servers: RelayServer) -> None:
    for s in servers:
        await s.close()


def delivered(frames: list[Any]) -> list[bytes]:
    return [f.deliver.envelope for f in frames if f.WhichOneof("body") == "deliver"]


async def wait_until(cond: Any, base_timeout: float = 5.0) -> None:
    async with asyncio.timeout(T(base_timeout)):
        while not cond():  # bounded by the timeout
            await asyncio.sleep(0.01)


async def settle(*peers: Peer) -> list[list[bytes]]:
    """Let NATS carry what is in flight, then every peer's deliveries since the last call."""
    await asyncio.sleep(T(0.5))
    return [delivered(await p.barrier()) for p in peers]


def test_relay_import_does_not_import_nats() -> None:
    code = (
        "import sys, asyncio\n"
        "import app.cli, net.relay, net.relay_client, app.node.transport\n"
        "from net.relay import RelayServer\n"
        "from net.relay_config import RelayConfig\n"
        "async def main():\n"
        "    s = RelayServer(RelayConfig(port=0, stats_interval=0))\n"
        "    await s.start(); await s.close()\n"
        "asyncio.run(main())\n"
        "bad = sorted(m for m in sys.modules if m == 'nats' or m.startswith('nats.'))\n"
        "assert not bad, bad\n"
        "assert 'net.relay_cluster' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=T(60),
                   capture_output=True)


def test_client_on_relay_a_and_client_on_relay_b_chat_once_each(nats: NatsServers) -> None:
    async def main() -> None:
        r1, r2 = await relays(nats, 2)
        try:
            a, c = await Peer.open(r1.url), await Peer.open(r1.url)
            b = await Peer.open(r2.url)
            for p in (a, b, c):
                assert await p.subscribe([TOPIC_A]) == []
            env = envelope(key=KEY_A)
            await a.publish(env)
            got_a, got_b, got_c = await settle(a, b, c)
            assert got_b == [env]  # through NATS, byte for byte
            assert got_c == [env]  # locally, and not again through NATS (no_echo, dedup)
            assert got_a == []  # never back to its publisher
            env2 = envelope(key=KEY_A)
            await b.publish(env2)
            got_a, got_b, got_c = await settle(a, b, c)
            assert (got_a, got_b, got_c) == ([env2], [], [env2])
            assert r1.cluster is not None and r2.cluster is not None
            assert r1.cluster.stats()["published"] == 1
            assert r2.cluster.stats()["received"] == 1
            assert r1.cluster.stats().get("duplicate", 0) == 0
        finally:
            await close_all(r1, r2)

    run(main())


def test_nats_subscription_only_for_topics_local_clients_want(nats: NatsServers) -> None:
    async def main() -> None:
        r1, r2 = await relays(nats, 2)
        try:
            assert r1.cluster is not None and r2.cluster is not None
            assert r2.cluster.subscribed_topics == frozenset()
            a = await Peer.open(r1.url)
            await a.subscribe([TOPIC_A])
            b1, b2 = await Peer.open(r2.url), await Peer.open(r2.url)
            await b1.subscribe([TOPIC_B])
            await b2.subscribe([TOPIC_B])
            # the Pong came after the NATS subscription was in place
            assert r2.cluster.subscribed_topics == frozenset({TOPIC_B})
            assert r1.cluster.subscribed_topics == frozenset({TOPIC_A})
            await a.publish(envelope(key=KEY_A))  # nobody on r2 wants topic A
            await settle(a)
            assert r2.cluster.stats().get("received", 0) == 0  # NATS did not send it there
            await b1.close()  # one of two subscribers of B leaves: still wanted
            await wait_until(lambda: r2.connection_count == 1)
            await asyncio.sleep(0.1)
            assert r2.cluster.subscribed_topics == frozenset({TOPIC_B})
            await b2.send(encode_unsubscribe([TOPIC_B]))  # the last one leaves
            await b2.barrier()
            await wait_until(lambda: r2.cluster is not None and not r2.cluster.subscribed_topics)
            a2 = await Peer.open(r2.url)
            await a2.subscribe([TOPIC_A])
            assert r2.cluster.subscribed_topics == frozenset({TOPIC_A})
            await a2.close()  # a disconnect is an unsubscribe too
            await wait_until(lambda: r2.cluster is not None and not r2.cluster.subscribed_topics)
        finally:
            await close_all(r1, r2)

    run(main())


def test_subjects_are_hashes_of_topics_never_names(nats: NatsServers) -> None:
    subject = subject_for(TOPIC_A)
    assert subject.startswith(SUBJECT_PREFIX)
    assert TOPIC_A.hex() not in subject and len(subject.rsplit(".", 1)[1]) == 32
    assert subject != subject_for(TOPIC_B)
    assert subject == subject_for(bytes(TOPIC_A))  # stable: every relay derives the same

    async def main() -> None:
        sniffer = await nats_py.connect(nats.urls[0])
        seen: list[tuple[str, bytes]] = []

        async def cb(msg: Any) -> None:
            seen.append((msg.subject, msg.data))

        await sniffer.subscribe(">", cb=cb)
        await sniffer.flush()
        (r1,) = await relays(nats, 1)
        try:
            a = await Peer.open(r1.url)
            env = envelope(key=KEY_A)
            await a.publish(env)
            await wait_until(lambda: bool(seen))
            assert seen == [(subject, env)]
            assert b"general" not in subject.encode()
        finally:
            await close_all(r1)
            await sniffer.close()

    run(main())


def test_a_resend_of_the_same_envelope_crosses_the_cluster_like_a_lone_relay(
    nats: NatsServers,
) -> None:
    """SDS resends and SDS-R answers re-send the identical stored envelope: each one is
    a new publish, carried to every subscriber on every relay (issue 26, item 1)."""

    async def main() -> None:
        r1, r2 = await relays(nats, 2)
        try:
            a, c = await Peer.open(r1.url), await Peer.open(r1.url)
            b = await Peer.open(r2.url)
            for p in (a, b, c):
                await p.subscribe([TOPIC_A])
            env = envelope(key=KEY_A)
            for _ in range(3):  # the original and two resends, within the old window
                await a.publish(env)
            got_a, got_b, got_c = await settle(a, b, c)
            assert got_c == [env] * 3  # the same relay: as a lone relay does
            assert got_b == [env] * 3  # the other relay: likewise
            assert got_a == []
            # a client that failed over to r2 and publishes the same bytes there
            await b.publish(env)
            got_a, got_b, got_c = await settle(a, b, c)
            assert (got_a, got_b, got_c) == ([env], [], [env])
            assert r1.cluster is not None and r2.cluster is not None
            for r in (r1, r2):
                assert r.cluster is not None
                assert r.cluster.stats().get("duplicate", 0) == 0
        finally:
            await close_all(r1, r2)

    run(main())


def test_one_publish_arriving_twice_through_nats_is_delivered_once(nats: NatsServers) -> None:
    """The duplicate check is per publish (origin relay, sequence, nonce and tag), so a
    copy of one publish that comes back by another path never loops, and an envelope
    stamped with this relay's own origin (an echo) is dropped."""

    async def main() -> None:
        r1, r2 = await relays(nats, 2)
        sniffer = await nats_py.connect(nats.urls[0])
        injector = await nats_py.connect(nats.urls[0])
        seen: list[Any] = []

        async def cb(msg: Any) -> None:
            seen.append(msg)

        try:
            await sniffer.subscribe(subject_for(TOPIC_A), cb=cb)
            await sniffer.flush()
            a = await Peer.open(r1.url)
            b = await Peer.open(r2.url)
            await b.subscribe([TOPIC_A])
            env = envelope(key=KEY_A)
            await a.publish(env)
            assert (await settle(b)) == [[env]]
            await wait_until(lambda: len(seen) == 1)
            copy = seen[0]
            assert copy.data == env  # the payload is the envelope, byte for byte
            assert copy.headers and PUBLISH_HEADER in copy.headers
            # the very same publish again (same header): a copy, dropped
            await injector.publish(copy.subject, copy.data, headers=copy.headers)
            await injector.flush()
            assert (await settle(b)) == [[]]
            assert r2.cluster is not None and r2.cluster.stats()["duplicate"] == 1
            # r2's own stamp coming back to it: an echo, dropped
            assert r1.cluster is not None
            echo = {PUBLISH_HEADER: f"{r2.cluster.relay_id} 1 7"}
            await injector.publish(copy.subject, envelope(key=KEY_A), headers=echo)
            await injector.flush()
            assert (await settle(b)) == [[]]
            await wait_until(lambda: r2.cluster is not None
                             and r2.cluster.stats().get("echo", 0) == 1)
        finally:
            await injector.close()
            await sniffer.close()
            await close_all(r1, r2)

    run(main())


def test_dedup_key_is_the_same_for_copies_and_differs_between_seals() -> None:
    from net_helpers import sds_message

    from net.envelope import seal
    from net.identity import Identity

    ident = Identity.generate()
    sds = sds_message(ident, b"same content")
    one, two = seal(sds, ident, KEY_A), seal(sds, ident, KEY_A)  # a resend is sealed again
    assert dedup_key(one) == dedup_key(bytes(one))
    assert dedup_key(one) != dedup_key(two)
    assert len({dedup_key(envelope(key=KEY_A)) for _ in range(200)}) == 200
    with pytest.raises(MalformedEnvelope):
        dedup_key(b"\xff\x00 not an envelope")


def test_recent_digests_window_and_capacity() -> None:
    d = RecentDigests(window=10.0, capacity=3)
    assert not d.seen_before(b"x", 0.0)
    assert d.seen_before(b"x", 5.0)
    assert not d.seen_before(b"x", 10.5)  # expired, remembered again
    for k in (b"1", b"2", b"3"):
        assert not d.seen_before(k, 11.0)
    assert len(d) == 3 and not d.seen_before(b"x", 11.0)  # evicted by capacity


def test_bad_input_from_nats_is_dropped_and_counted(nats: NatsServers) -> None:
    async def main() -> None:
        (r1,) = await relays(nats, 1)
        injector = await nats_py.connect(nats.urls[0])
        try:
            b = await Peer.open(r1.url)
            await b.subscribe([TOPIC_A])
            subj = subject_for(TOPIC_A)
            await injector.publish(subj, b"\xff\x00 not an envelope")
            await injector.publish(subj, b"\x00" * (256 * 1024 + 1))
            await injector.publish(subject_for(TOPIC_B), envelope(key=KEY_A))  # wrong subject
            await injector.publish(subj, envelope(key=KEY_B))  # an unwanted topic
            await injector.flush()
            assert (await settle(b)) == [[]]
            assert r1.cluster is not None
            try:
                await wait_until(lambda: r1.cluster is not None
                                 and r1.cluster.stats().get("received", 0) >= 3)
            except TimeoutError:
                raise AssertionError(str(r1.cluster.stats())) from None
            stats = r1.cluster.stats()
            assert stats["dropped_malformed"] == 1
            assert stats["dropped_oversized"] == 1
            assert stats["dropped_unwanted"] == 1
            assert stats.get("dropped_wrong_subject", 0) == 0  # r1 is not subscribed to B
            good = envelope(key=KEY_A)
            await injector.publish(subj, good)
            assert (await settle(b)) == [[good]]  # the relay kept going
        finally:
            await injector.close()
            await close_all(r1)

    run(main())


def test_rate_and_queue_limits_hold_per_relay(nats: NatsServers) -> None:
    async def main() -> None:
        (r1,) = await relays(nats, 1, rate=5.0, burst=5, abuse_strikes=1000)
        (r2,) = await relays(nats, 1, queue=4)
        (r3,) = await relays(nats, 1)
        try:
            flooder = await Peer.open(r1.url)
            b = await Peer.open(r2.url)
            await b.subscribe([TOPIC_A])
            envs = [envelope(key=KEY_A, content=b"x" * 2000) for _ in range(40)]
            for env in envs:
                await flooder.send(encode_publish(env))
            await asyncio.sleep(T(0.5))
            got = delivered(await b.barrier())
            # r1's rate limit held: only its burst (and a little refill) crossed to r2
            assert 1 <= len(got) <= 10, len(got)
            assert r1.stats.dropped["rate_limited"] >= 30
            # r2's queue limit holds for what comes from NATS: a subscriber that
            # does not read is disconnected, and r2 keeps serving the others
            slow = await Peer.open(r2.url, max_size=2**20)
            await slow.send(encode_subscribe([TOPIC_A]))
            await slow.barrier()
            slow.ws.transport.pause_reading()
            sender = await Peer.open(r3.url)
            for _ in range(200):  # bounded
                await sender.send(encode_publish(envelope(key=KEY_A, content=b"y" * 60_000)))
                if r2.stats.dropped["slow_consumer"]:
                    break
                await asyncio.sleep(0.005)
            await wait_until(lambda: r2.stats.dropped["slow_consumer"] == 1)
            last = envelope(key=KEY_A)
            await sender.publish(last)
            await wait_until(lambda: r2.stats.deliveries > 0)
            frames: list[bytes] = []
            async with asyncio.timeout(T(10)):
                while last not in frames:  # b (which reads) still gets everything
                    frames.extend(delivered([await b.recv_frame()]))
        finally:
            await close_all(r1, r2, r3)

    run(main(), base_timeout=60)


def test_a_flood_through_nats_is_shed_per_publisher_not_by_dropping_clients(
    nats: NatsServers,
) -> None:
    """Someone publishing straight into NATS floods a topic (issue 26, item 7): the relay
    sheds that publisher's envelopes before fan-out, so a client that reads slowly is
    not disconnected, and an honest client's envelope still arrives."""

    async def main() -> None:
        limits = {"queue_bytes": 2**20, "cluster_publisher_bytes": 300_000}
        r1, r2 = await relays(nats, 2, **limits)
        injector = await nats_py.connect(nats.urls[0])
        try:
            a = await Peer.open(r1.url)
            b = await Peer.open(r2.url, max_size=2**20)
            await b.subscribe([TOPIC_A])
            b.ws.transport.pause_reading()  # a client on a slow link
            from net.identity import Identity

            flooder = Identity.generate()
            junk = [envelope(flooder, KEY_A, b"z" * 100_000) for _ in range(200)]
            for env in junk:  # 20 MB, as fast as NATS takes it
                await injector.publish(subject_for(TOPIC_A), env)
            await injector.flush()
            honest = envelope(key=KEY_A)
            await a.publish(honest)
            assert r2.cluster is not None
            await wait_until(lambda: r2.cluster is not None
                             and r2.cluster.stats().get("received", 0) >= 201, 20)
            stats = r2.cluster.stats()
            assert stats["shed_publisher"] >= 150, stats
            assert r2.stats.dropped["slow_consumer"] == 0, r2.stats.as_dict()
            assert r2.stats.dropped["lagging"] == 0, r2.stats.as_dict()
            b.ws.transport.resume_reading()
            frames: list[bytes] = []
            async with asyncio.timeout(T(10)):
                while honest not in frames:  # b is still connected and gets it
                    frames.extend(delivered([await b.recv_frame()]))
        finally:
            await injector.close()
            await close_all(r1, r2)

    run(main(), base_timeout=60)


def test_publisher_budgets() -> None:
    budgets = PublisherBudgets(rate=2.0, burst=2.0, byte_rate=100.0, byte_burst=200.0,
                               capacity=2)
    assert budgets.take("a", 150, 0.0)
    assert not budgets.take("a", 100, 0.0)  # 50 bytes left
    assert budgets.take("b", 100, 0.0)  # another publisher: its own budget
    assert budgets.take("a", 100, 1.0)  # refilled 100 bytes in a second
    assert budgets.take("a", 1, 1.0) and not budgets.take("a", 1, 1.0)  # 2 frames at most
    budgets.take("c", 1, 1.0)
    assert len(budgets) == 2  # the least recently seen publisher was forgotten
    with pytest.raises(ValueError):
        PublisherBudgets(rate=0, burst=1, byte_rate=1, byte_burst=1)


def test_relay_without_reachable_nats_exits_1_with_a_clear_log() -> None:
    port = free_port()
    out = subprocess.run(
        sdschat("relay", "--port", "0", "--cluster", f"nats://127.0.0.1:{port}",
                "--cluster-timeout", "1.5"),
        cwd=ROOT, capture_output=True, timeout=T(30),
    )
    assert out.returncode == 1, out.stderr
    assert b"relay_start_failed" in out.stderr and b"no NATS server" in out.stderr
    bad = subprocess.run(sdschat("relay", "--cluster", "http://127.0.0.1:4222"), cwd=ROOT,
                         capture_output=True, timeout=T(30))
    assert bad.returncode == 2
    assert b"--cluster must be a nats://HOST:PORT URL" in bad.stderr


def test_cluster_without_nats_py_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['nats'] = None  # as if nats-py were not installed\n"
        "from app.cli import main\n"
        "sys.exit(main(['relay', '--port', '0', '--cluster', 'nats://127.0.0.1:4222']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         timeout=T(30))
    assert out.returncode == 1, out.stderr
    assert b"relay_start_failed" in out.stderr
    assert b"pip install 'sdschat[cluster]'" in out.stderr
