"""Helpers of the JetStream store tests: store peers on a real JetStream cluster, logs
that a test reads back, envelopes, bounded waits (everything on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key
from net.nats_connect import NatsSettings
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_jetstream import JetStreamArchive, JetStreamSettings
from net.store_peer import StorePeer
from tests.procs import T

__all__ = ["CapturedLog", "channel", "js_archive", "js_peer", "wait_for"]


def channel(name: str = "room", passphrase: str | None = "secret") -> ChannelKey:
    return derive_channel_key(name, passphrase, params=TEST_KDF)


class CapturedLog(RelayLogger):
    """A JSON logger whose lines the test reads back (:meth:`events`)."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        super().__init__("json", self.buffer, level="debug")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        for line in self.buffer.getvalue().splitlines():
            rec = json.loads(line)
            if name is None or rec.get("event") == name:
                out.append(rec)
        return out


def js_archive(
    urls: Sequence[str],
    topics: Sequence[bytes],
    log: RelayLogger,
    *,
    stream: str,
    data_dir: Path | None = None,
    wake: Callable[[], None] | None = None,
    retention: bool = True,
    **settings: Any,
) -> JetStreamArchive:
    """A :class:`JetStreamArchive` on ``urls`` (loopback: no credentials needed)."""
    s = JetStreamSettings(NatsSettings(tuple(urls), connect_timeout=T(10), flag="--jetstream"),
                          stream=stream, **settings)
    return JetStreamArchive(s, topics, log, data_dir=data_dir, wake_retention=wake,
                            retention=retention)


def js_peer(
    data_dir: Path,
    urls: Sequence[str],
    topics: Sequence[bytes],
    log: RelayLogger,
    *,
    stream: str,
    audit_delay_s: float = 10.0,
    lease_s: float = 15.0,
    clock: Callable[[], int] | None = None,
    **changes: Any,
) -> StorePeer:
    """A store peer (in-process) archiving into JetStream ``stream``."""
    cfg = StorePeerConfig(data_dir, topics=tuple(topics), listen=("127.0.0.1", 0),
                          stats_interval_s=0, jetstream=tuple(urls), jetstream_stream=stream,
                          jetstream_lease_s=lease_s, **{"max_age_ms": 0, "max_bytes": 0,
                                                        **changes})
    peer_box: list[StorePeer] = []

    def wake() -> None:
        if peer_box:
            peer_box[0]._retention_wake.set()

    archive = js_archive(urls, topics, log, stream=stream, data_dir=data_dir, wake=wake,
                         lease_s=lease_s, max_bytes=cfg.max_bytes, max_age_ms=cfg.max_age_ms,
                         audit_delay_s=audit_delay_s)
    kwargs: dict[str, Any] = {"logger": log, "archive": archive}
    if clock is not None:
        kwargs["clock"] = clock
    peer = StorePeer(cfg, **kwargs)
    peer_box.append(peer)
    return peer


async def wait_for(cond: Callable[[], Awaitable[bool]], base_timeout: float, what: str) -> None:
    """Until ``await cond()`` holds (re-checked every 50 ms), at most ``T(base_timeout)``."""
    deadline = time.monotonic() + T(base_timeout)
    while not await cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
