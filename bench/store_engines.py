"""The store's two engines for the store benchmarks: a SQLite archive, and a JetStream
archive on a real 3-server cluster (nats-server -js on 127.0.0.1, as the tests start it).

* :func:`start_jetstream`: the cluster (stopped by PID when its context ends);
* :func:`archive_into_jetstream`: envelopes archived as a store peer archives them
  (``JetStreamArchive.put`` in batches of 512, the store's ``flush_max``); returns the
  seconds it took (the archiving throughput);
* :func:`start_store` (``bench/store_query.py``) with ``jetstream=URLS``: a store peer
  process answering from that archive, on an empty data directory.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from net.nats_connect import NatsSettings
from net.relay_log import RelayLogger
from net.store_jetstream import JetStreamArchive, JetStreamSettings
from storage import ArchivedEnvelope
from tests.cluster.nats_servers import NatsServers, start_nats

__all__ = ["archive_into_jetstream", "start_jetstream"]

T0 = 1_700_000_000_000  # the arrival time of the first envelope (as bench/store_query.fill)


def start_jetstream(log_dir: Path, n: int = 3) -> NatsServers:
    """``n`` nats-servers with JetStream (file storage under ``log_dir``)."""
    return start_nats(log_dir, n, jetstream=True, timeout=120)


async def archive_into_jetstream(
    urls: list[str], stream: str, topic: bytes, envelopes: list[bytes], hashes: list[bytes],
    replicas: int,
) -> float:
    """Archive ``envelopes`` into ``stream`` (``replicas`` copies); the seconds it took."""
    import io

    settings = JetStreamSettings(NatsSettings(tuple(urls), flag="--jetstream"), stream=stream,
                                 replicas=replicas, request_timeout=30.0)
    archive = JetStreamArchive(settings, (topic,), RelayLogger("json", io.StringIO()),
                               retention=False)
    await archive.open()
    try:
        t = time.perf_counter()
        for start in range(0, len(envelopes), 512):
            batch = [ArchivedEnvelope(hashes[i], topic, T0 + i, envelopes[i])
                     for i in range(start, min(start + 512, len(envelopes)))]
            await archive.put(batch)
        return time.perf_counter() - t
    finally:
        await archive.close()


def archive(urls: list[str], stream: str, topic: bytes, envelopes: list[bytes],
            hashes: list[bytes], replicas: int) -> float:
    """:func:`archive_into_jetstream` in its own event loop."""
    return asyncio.run(archive_into_jetstream(urls, stream, topic, envelopes, hashes, replicas))
