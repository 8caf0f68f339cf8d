"""Write proofs (issue 26, item 6): a store given a topic's write key archives that topic
only from nodes that hold its channel key; garbage published on the topic by anyone
else cannot push honest envelopes out. Real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from store_helpers import channel, run, sealed

from net import envelope_pb2
from net.envelope import ENVELOPE_VERSION
from net.identity import Identity
from net.relay_log import RelayLogger
from net.store_client import StoreClient
from net.store_config import StorePeerConfig
from net.store_peer import StorePeer
from net.store_proof import make_proof, parse_write_key, proof_checks, write_key
from net.store_sync import StoreSync

KEY = channel("proofs")
OTHER = channel("proofs", "another passphrase")
QUIET = RelayLogger("json", open(os.devnull, "w"))  # noqa: SIM115 (process lifetime)


def garbage(topic: bytes, size: int = 5000) -> bytes:
    """What an outsider can publish on a topic: a well-formed envelope of random bytes."""
    return envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=topic, nonce=os.urandom(12),
        ciphertext=os.urandom(size),
    ).SerializeToString()


def test_write_keys_and_proofs() -> None:
    wk = write_key(KEY.key, KEY.topic)
    assert len(wk) == 32 and wk == write_key(KEY.key, KEY.topic)
    assert wk != write_key(OTHER.key, KEY.topic)  # another channel key
    assert wk != write_key(KEY.key, OTHER.topic)  # bound to the topic
    assert wk != KEY.key
    env, _ = sealed(Identity.generate(), KEY, "hello", 1)
    proof = make_proof(wk, KEY.topic, env)
    assert len(proof) == 16 and proof_checks(wk, KEY.topic, env, proof)
    assert not proof_checks(wk, KEY.topic, env + b"x", proof)  # other bytes
    assert not proof_checks(wk, OTHER.topic, env, proof)  # another topic
    assert not proof_checks(write_key(OTHER.key, KEY.topic), KEY.topic, env, proof)
    assert not proof_checks(wk, KEY.topic, env, proof[:15])
    assert parse_write_key(f"{KEY.topic.hex()}:{wk.hex()}") == (KEY.topic, wk)
    for bad in ("", "zz:00", f"{KEY.topic.hex()}", f"{KEY.topic.hex()}:{wk.hex()[:-2]}"):
        with pytest.raises(ValueError, match="TOPIC_HEX:KEY_HEX"):
            parse_write_key(bad)


def test_only_proven_envelopes_are_archived_and_garbage_evicts_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        wk = write_key(KEY.key, KEY.topic)
        cfg = StorePeerConfig(tmp_path / "store", topics=(KEY.topic,), listen=("127.0.0.1", 0),
                              stats_interval_s=0, write_keys=((KEY.topic, wk),),
                              max_bytes=200_000, max_age_ms=0)
        ident = Identity.generate()
        honest = [sealed(ident, KEY, f"m{i}", i)[0] for i in range(30)]
        async with StorePeer(cfg, logger=QUIET) as peer, StoreClient(peer.url) as client:
            assert (await client.info()).proven_topics == frozenset({KEY.topic})
            # the node sends its envelopes with proofs
            sync = StoreSync(peer.url, deliver=_ignore, data_dir=None)
            sync.start()
            for env in honest:
                sync.offer(KEY.key, KEY.topic, env)
            for _ in range(500):  # bounded
                if sync.counters["put_accepted"] == len(honest):
                    break
                await asyncio.sleep(0.01)
            assert sync.counters["put_accepted"] == len(honest)
            # 2 MB of garbage from the relay feed, then with made-up proofs
            for _ in range(400):
                await peer.ingest(garbage(KEY.topic))
            accepted, refused = await client.put(
                [(garbage(KEY.topic), os.urandom(16)) for _ in range(10)]
            )
            assert accepted == 0 and refused == ["bad_proof"] * 10
            # an envelope of someone with another passphrase (same name, other key)
            stranger = sealed(ident, OTHER, "hi", 99)[0]
            wrong = make_proof(write_key(OTHER.key, KEY.topic), KEY.topic, stranger)
            assert (await client.put([(stranger, wrong)])) == (0, ["unknown_topic"])
            await peer.flush()
            await peer.run_retention()
            assert peer.stats.rejected["unproven"] == 400
            assert peer.stats.rejected["bad_proof"] == 10
            got = await client.by_time(KEY.topic, page_size=1000)
            assert sorted(i.envelope for i in got.items) == sorted(honest)  # all 30 kept
            await sync.close()

    run(main(), 60)


async def _ignore(_env: bytes) -> None:
    return None


def test_garbage_through_the_relay_cannot_empty_a_store_with_a_write_key(
    tmp_path: Path,
) -> None:
    """The audit, scaled down, with real processes: someone without the channel key
    publishes 1.5 MB of garbage on the topic of a store kept at 300 kB. Alice's lines,
    sent with write proofs, are all still there for carol, who joins later when nobody
    else is online."""
    import signal
    import subprocess

    from store_helpers import ROOT, T, cluster, sdschat, texts_delivered, wait_connected
    from websockets.asyncio.client import connect

    from net.relay_frames import encode_publish

    secret = tmp_path / "passphrase"
    secret.write_text("sesame\n")
    printed = subprocess.run(
        sdschat("store", "--print-write-key", "room", "--passphrase-file", str(secret)),
        cwd=ROOT, capture_output=True, text=True, timeout=T(60), check=True,
    ).stdout.strip()
    topic = parse_write_key(printed)[0]
    joined = ["--passphrase-file", str(secret)]
    with cluster(tmp_path) as c:
        _relay, relay_url = c.relay()
        store, store_url = c.store(relay_url, tmp_path / "store", extra=[
            "--write-key", printed, "--max-bytes", "300k", "--max-age", "0"])
        alice = c.node("alice", tmp_path / "alice", relay=relay_url,
                       extra=["--store", store_url, *joined])
        bob = c.node("bob", tmp_path / "bob", relay=relay_url, extra=joined)
        wait_connected(alice, bob)
        assert alice.select("channel")[0]["topic"] == topic.hex()
        lines = [f"alice {i}" for i in range(20)]
        alice.send(*lines)
        bob.wait_for(lambda: set(lines) <= texts_delivered(bob), 60, "alice's lines")

        async def flood() -> None:
            async with connect(relay_url, proxy=None, compression=None) as ws:
                for _ in range(300):  # 1.5 MB
                    await ws.send(encode_publish(garbage(topic)))

        run(flood(), 60)
        for p in (alice, bob):
            p.close_stdin()
            assert p.wait(30) == 0
        carol = c.node("carol", tmp_path / "carol", relay=relay_url,
                       extra=["--store", store_url, *joined])
        carol.wait_for(lambda: set(lines) <= texts_delivered(carol), 60,
                       "alice's lines, from the store")
        carol.close_stdin()
        assert carol.wait(30) == 0
        store.signal(signal.SIGTERM)
        assert store.wait(30) == 0
        final = [r for r in store.log_records() if r.get("event") == "store_stats"][-1]
        assert final["rejected"].get("unproven", 0) >= 290, final


async def _wait_counter(sync: StoreSync, name: str, n: int) -> None:
    for _ in range(1000):  # bounded
        if sync.counters[name] >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name}: {sync.counters[name]} of {n}: {dict(sync.counters)}")


def test_a_members_channel_proves_with_the_epoch_the_store_holds_and_a_removal_cuts(
    tmp_path: Path,
) -> None:
    """A members channel has a key per epoch, and a removed member keeps the keys of the
    epochs it was in. The store's operator gives it the write key of an epoch after the
    removal (``--print-write-key --member-dir``); the members' nodes prove with that
    epoch's key (the store lists its id), and the removed member, holding only earlier
    epochs, can prove nothing. Before, every node proved with the channel's first epoch
    key, which the removed member keeps forever (and a store given any later epoch's key
    refused the honest members)."""
    from net.store_proof import key_id

    topic = KEY.topic  # one topic for the channel's whole life
    epochs = [os.urandom(32) for _ in range(3)]  # epoch 2 began when carol was removed
    w1, w2 = (write_key(k, topic) for k in epochs[1:])

    async def main() -> None:
        ident = Identity.generate()
        cfg = StorePeerConfig(tmp_path / "store", topics=(topic,), listen=("127.0.0.1", 0),
                              stats_interval_s=0, write_keys=((topic, w1), (topic, w2)),
                              max_age_ms=0)  # fmt: skip
        async with StorePeer(cfg, logger=QUIET) as peer, StoreClient(peer.url) as client:
            assert (await client.info()).proven_key_ids == {key_id(w1), key_id(w2)}
            # a member of epoch 2 (it holds all three keys, oldest first)
            member = StoreSync(peer.url, deliver=_ignore, data_dir=None)
            member.start()
            mine = [sealed(ident, KEY, f"m{i}", i)[0] for i in range(10)]
            for env in mine:
                member.offer(epochs, topic, env)
            await _wait_counter(member, "put_accepted", len(mine))
            # carol, removed at epoch 2, with her whole data dir: epochs 0 and 1
            carol = StoreSync(peer.url, deliver=_ignore, data_dir=None)
            carol.start()
            hers = [sealed(ident, KEY, f"c{i}", 100 + i)[0] for i in range(3)]
            for env in hers:
                carol.offer(epochs[:2], topic, env)
            await _wait_counter(carol, "put_accepted", len(hers))  # epoch 1 is still listed
            # the operator drops epoch 1's key: a store given only w2
            await member.close()
            await carol.close()
        cfg = cfg.replace(write_keys=((topic, w2),))
        async with StorePeer(cfg, logger=QUIET) as peer, StoreClient(peer.url) as client:
            carol = StoreSync(peer.url, deliver=_ignore, data_dir=None)
            carol.start()
            later = [sealed(ident, KEY, f"late{i}", 200 + i)[0] for i in range(3)]
            for env in later:
                carol.offer(epochs[:2], topic, env)
            await _wait_counter(carol, "put_no_key", len(later))  # not even sent
            assert carol.counters["put_accepted"] == 0
            # crafting proofs by hand with every key carol holds: refused
            crafted = [(env, make_proof(write_key(k, topic), topic, env))
                       for env in later for k in epochs[:2]]  # fmt: skip
            accepted, refused = await client.put(crafted)
            assert accepted == 0 and refused == ["bad_proof"] * len(crafted)
            member = StoreSync(peer.url, deliver=_ignore, data_dir=None)
            member.start()
            member.offer(epochs, topic, later[0])  # the same bytes, from a member: kept
            await _wait_counter(member, "put_accepted", 1)
            got = {i.envelope for i in (await client.by_time(topic, page_size=100)).items}
            assert got == set(mine) | set(hers) | {later[0]}
            await carol.close()
            await member.close()

    run(main(), 60)
