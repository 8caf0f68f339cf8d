"""Eviction is fair per writer (issue 26, item 6): a store over ``max_bytes`` takes space
back from the writers holding the most, so garbage from someone without the channel key,
or one member flooding, cannot push out the lines of members who wrote little. And
unattributed envelopes never push out attributed ones (issue 39 §5, storage/retention.py).

A writer is what the store can attribute an envelope to: its verified signer on a topic
whose key the store knows (a public channel given by name), the sending host for a
``Put`` whose write proof checked, and nobody (``b""``, unattributed) otherwise."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from store_helpers import T, channel, run, sealed
from websockets.asyncio.client import connect

from net import envelope_pb2
from net.envelope import ENVELOPE_VERSION, NONCE_BYTES
from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_frames import decode_store_frame, encode_put
from net.store_peer import StorePeer
from net.store_proof import make_proof, write_key
from storage.archive import fair_cap

QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)
PUBLIC = channel("lobby", None)  # a public channel: the store derives its key from the name


def _garbage(topic: bytes, size: int) -> bytes:
    """An envelope in canonical form on ``topic`` that nobody sealed (random ciphertext)."""
    return envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=topic, nonce=os.urandom(NONCE_BYTES),
        ciphertext=os.urandom(size),
    ).SerializeToString()


def test_the_fair_cap_fills_small_writers_first() -> None:
    assert fair_cap([10, 10, 10], 100) is None  # fits: no eviction
    assert fair_cap([10, 500, 500], 100) == 45  # 10 kept whole, the rest split
    assert fair_cap([0, 0], 0) is None
    assert fair_cap([1, 1000], 0) == 0


def test_garbage_and_a_flooding_member_cannot_evict_the_quiet_members(tmp_path: Path) -> None:
    """Before: the oldest envelopes went first, so 4 MB of garbage and of one member's
    flood (120 KB over the limit is enough) emptied the store of every honest line."""

    async def main() -> None:
        quiet = [Identity.generate() for _ in range(3)]
        flooder = Identity.generate()
        max_bytes = 1024 * 1024
        cfg = StorePeerConfig(tmp_path / "store", topics=(PUBLIC.topic,), listen=None,
                              stats_interval_s=0, max_bytes=max_bytes, max_age_ms=0,
                              retention_interval_s=3600, flush_max=16,
                              public_channel_keys=((PUBLIC.topic, PUBLIC.key),))
        async with StorePeer(cfg, logger=QUIET) as peer:
            honest = []
            for n, member in enumerate(quiet):
                for i in range(10):
                    env, digest = sealed(member, PUBLIC, f"{n}-{i}", 100 * n + i, pad=2_000)
                    honest.append(digest)
                    await peer.ingest(env)
            await peer.flush()
            # a forger claims a quiet member's key but cannot sign: unattributed
            forged = bytearray(sealed(quiet[0], PUBLIC, "forged", 999)[0])
            forged[-1] ^= 1
            for i in range(40):  # 2 MB of garbage from someone without a signing key
                await peer.ingest(_garbage(PUBLIC.topic, 50_000))
                if i == 20:
                    await peer.ingest(bytes(forged))
            for i in range(40):  # 2 MB from one member flooding
                await peer.ingest(sealed(flooder, PUBLIC, "z", 5_000 + i, pad=50_000)[0])
            await peer.flush()
            await asyncio.sleep(0)
            await peer.run_retention()
            _count, size = await peer.store.archive.stats()
            assert size <= max_bytes, size
            kept = await peer.store.archive.get_by_hashes(honest)
            assert len(kept) == len(honest), f"{len(kept)} of {len(honest)} honest lines kept"
            sizes = await peer.store.archive.writer_bytes()
            # the signed envelopes alone are over the limit: garbage (unattributed) keeps
            # nothing, and the flooder what the quiet members leave, within one envelope
            assert (PUBLIC.topic, b"") not in sizes, sizes
            flood_share = sizes[(PUBLIC.topic, b"k" + flooder.public_key)]
            honest_bytes = sum(n for (_t, w), n in sizes.items() if w != b"k" + flooder.public_key)
            assert max_bytes - honest_bytes - 60_000 < flood_share <= max_bytes - honest_bytes
            assert peer.stats.retention_deleted > 0

    run(main(), 60)


async def _put_from(port: int, source: str, items: list[tuple[bytes, bytes]]) -> None:
    """Send ``(envelope, proof)`` items in Put frames over a websocket from ``source``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), T(5))
    async with connect(f"ws://127.0.0.1:{port}", sock=sock, proxy=None, compression=None,
                       max_size=None) as ws:
        for n in range(0, len(items), 8):
            await ws.send(encode_put(n + 1, items[n : n + 8]))
            answer = decode_store_frame(await asyncio.wait_for(ws.recv(), T(10)))
            assert answer.put_result.accepted == len(items[n : n + 8]), answer


def test_a_write_proof_topic_is_attributed_to_the_sending_host(tmp_path: Path) -> None:
    """On a write-proof topic members share the key, so the store tells writers apart by
    the host that sent the Put (net/hosts.py: here every sender is of 127.0.0.0/8, one
    host, where each loopback address used to be a writer of its own); a Put on a topic
    without a write key proves nothing and is unattributed, as if from a relay."""

    async def main() -> None:
        key, open_key = channel("private-room"), channel("other-room")
        wkey = write_key(key.key, key.topic)
        cfg = StorePeerConfig(tmp_path / "store", topics=(key.topic, open_key.topic),
                              listen=("127.0.0.1", 0), stats_interval_s=0,
                              max_bytes=512 * 1024, max_age_ms=0, retention_interval_s=3600,
                              write_keys=((key.topic, wkey),))  # fmt: skip
        member, flooder = Identity.generate(), Identity.generate()

        def proven(env: bytes) -> tuple[bytes, bytes]:
            return env, make_proof(wkey, key.topic, env)

        async with StorePeer(cfg, logger=QUIET) as peer:
            mine = [sealed(member, key, f"m{i}", i, pad=1_000) for i in range(20)]
            await _put_from(peer.port, "127.0.0.2", [proven(env) for env, _ in mine])
            flood = [sealed(flooder, key, "z", 100 + i, pad=1_000)[0] for i in range(10)]
            await _put_from(peer.port, "127.9.9.9", [proven(env) for env in flood])
            unproven = [sealed(flooder, open_key, "u", i, pad=1_000)[0] for i in range(5)]
            await _put_from(peer.port, "127.0.0.3", [(env, b"") for env in unproven])
            await peer.flush()
            sizes = await peer.store.archive.writer_bytes()
            assert set(sizes) == {(key.topic, b"h127.0.0.0/8"), (open_key.topic, b"")}, sizes
            assert peer.stats.unattributed == 5

    run(main(), 60)
