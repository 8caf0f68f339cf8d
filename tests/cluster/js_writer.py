"""A JetStream archive writer run as a process of its own (inside a test's network
namespace, for the partition test). It opens the archive through the server it is
given, prints ``{"ready": true}``, then for each line ``FILE [ATTEMPTS]`` on stdin
archives the envelopes of that file, a batch at a time (each tried ATTEMPTS times,
default once), printing one JSON line per batch:
``{"batch": N, "acked": [hash hex, ...]}`` or ``{"batch": N, "error": "..."}``, and
``{"done": FILE}``; it exits at the end of stdin.

    python -m tests.cluster.js_writer --url nats://10.213.1.2:4222 --stream S \\
        --topic HEX [--batch 10] [--timeout 3]

FILE holds the envelopes, each preceded by its length (4 bytes, big-endian).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from pathlib import Path

from net.relay_log import RelayLogger
from net.store_engine import ArchiveUnavailable
from net.store_jetstream import JetStreamArchive
from storage import ArchivedEnvelope
from tests.cluster.store_js_helpers import js_archive


def read_envelopes(path: Path) -> list[bytes]:
    data, out, i = path.read_bytes(), [], 0
    while i < len(data):  # bounded by the file
        n = int.from_bytes(data[i:i + 4], "big")
        out.append(data[i + 4:i + 4 + n])
        i += 4 + n
    return out


def write_envelopes(path: Path, envelopes: list[bytes]) -> None:
    path.write_bytes(b"".join(len(e).to_bytes(4, "big") + e for e in envelopes))


async def main(args: argparse.Namespace) -> int:
    topic = bytes.fromhex(args.topic)
    for attempt in range(20):  # bounded: JetStream may be electing a leader a moment
        archive = js_archive([args.url], (topic,), RelayLogger("json", sys.stderr),
                             stream=args.stream, retention=False,
                             request_timeout=args.timeout)  # fmt: skip
        try:
            await archive.open()
            break
        except ConnectionError:
            if attempt == 19:
                raise
            await asyncio.sleep(0.5)
    print(json.dumps({"ready": True}), flush=True)
    try:
        for _ in range(1000):  # bounded: one pass per line of stdin
            line = (await asyncio.to_thread(sys.stdin.readline)).split()
            if not line:
                break
            name, attempts = line[0], int(line[1]) if len(line) > 1 else 1
            await put_file(archive, topic, Path(name), args, attempts)
            print(json.dumps({"done": name}), flush=True)
    finally:
        await archive.close()
    return 0


async def put_file(archive: JetStreamArchive, topic: bytes, path: Path,
                   args: argparse.Namespace, attempts: int) -> None:  # fmt: skip
    envelopes = read_envelopes(path)
    for n, start in enumerate(range(0, len(envelopes), args.batch)):
        now = int(time.time() * 1000)
        batch = [ArchivedEnvelope(hashlib.sha256(e).digest(), topic, now, e)
                 for e in envelopes[start:start + args.batch]]  # fmt: skip
        line: dict[str, object] = {}
        for attempt in range(attempts):  # bounded
            try:
                async with asyncio.timeout(args.timeout * 3):
                    await archive.put(batch)
                line = {"batch": n, "acked": [b.hash.hex() for b in batch]}
                break
            except (ArchiveUnavailable, TimeoutError) as exc:
                line = {"batch": n, "error": f"{type(exc).__name__}: {exc}"}
                if attempt + 1 < attempts:
                    await asyncio.sleep(0.5)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--stream", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=3.0)
    sys.exit(asyncio.run(main(ap.parse_args())))
