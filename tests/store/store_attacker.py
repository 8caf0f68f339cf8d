"""Attackers of a store peer, as separate processes (``python -m tests.store.store_attacker``).

* ``outsider``: knows only a channel's topic. Publishes ``--count`` well-formed
  envelopes of random bytes on it through the relay (what the audit did: 3,000 at a
  store kept at 400K), then ``Put``s ``--puts`` more to the store with made-up proofs.
* ``removed``: a removed member with its whole data directory. ``Put``s envelopes to
  the store, each with a write proof under every epoch key the directory holds.

Prints one JSON line, ``{"event": "attacked", ...}``, with what it sent and what the
store answered, then exits 0. Loopback only (the URLs it is given).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import Counter
from pathlib import Path

from websockets.asyncio.client import connect

from net import envelope_pb2
from net.envelope import ENVELOPE_VERSION, NONCE_BYTES
from net.relay_frames import encode_publish, encode_subscribe
from net.store_client import StoreClient
from net.store_proof import PROOF_BYTES, make_proof, write_key


def garbage(topic: bytes, size: int) -> bytes:
    """A canonical envelope on ``topic`` that nobody sealed: random ciphertext."""
    return envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=topic, nonce=os.urandom(NONCE_BYTES),
        ciphertext=os.urandom(size),
    ).SerializeToString()


async def _put_all(store: str, items: list[tuple[bytes, bytes]]) -> Counter[str]:
    answers: Counter[str] = Counter()
    async with StoreClient(store) as client:
        for n in range(0, len(items), 64):
            accepted, refused = await client.put(items[n : n + 64])
            answers["accepted"] += accepted
            answers.update(refused)
    return answers


async def outsider(relay: str, store: str, topic: bytes, count: int, puts: int,
                   size: int) -> dict[str, object]:  # fmt: skip
    async with connect(relay, proxy=None, compression=None, max_size=None) as ws:
        await ws.send(encode_subscribe([b"attacker-reads-nothing"]))
        for _ in range(count):  # bounded by --count
            await ws.send(encode_publish(garbage(topic, size)))
        await asyncio.wait_for(ws.ping(), 30)  # the relay read them all
    answers = await _put_all(store, [(garbage(topic, size), os.urandom(PROOF_BYTES))
                                     for _ in range(puts)])  # fmt: skip
    return {"published": count, "put": dict(answers)}


async def removed(store: str, data_dir: Path, channel: str, count: int,
                  size: int) -> dict[str, object]:  # fmt: skip
    from app.members.secrets_file import load

    mc = load(data_dir, channel)
    assert mc is not None, f"#{channel} is not a members channel in {data_dir}"
    topic = mc.topic
    items = []
    for _ in range(count):  # bounded by --count
        env = garbage(topic, size)
        for key in mc.epoch_keys:
            items.append((env, make_proof(write_key(key, topic), topic, env)))
    answers = await _put_all(store, items)
    return {"epochs": len(mc.epoch_keys), "put": dict(answers)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="store_attacker")
    parser.add_argument("mode", choices=("outsider", "removed"))
    parser.add_argument("--relay")
    parser.add_argument("--store", required=True)
    parser.add_argument("--topic")
    parser.add_argument("--data-dir")
    parser.add_argument("--channel")
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--puts", type=int, default=100)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    if args.mode == "outsider":
        out = asyncio.run(outsider(args.relay, args.store, bytes.fromhex(args.topic),
                                   args.count, args.puts, args.size))  # fmt: skip
    else:
        out = asyncio.run(removed(args.store, Path(args.data_dir), args.channel, args.count,
                                  args.size))  # fmt: skip
    print(json.dumps({"event": "attacked", "mode": args.mode, **out}), flush=True)


if __name__ == "__main__":
    main()
