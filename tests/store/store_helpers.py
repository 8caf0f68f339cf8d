"""Helpers for the store-peer tests: one timeout scale, sealed envelopes, real processes.

Every wait is bounded by :func:`T` (base seconds times ``SDSCHAT_TEST_TIMEOUT_SCALE``).
Everything binds or connects to 127.0.0.1 only. Processes are started by
:class:`Cluster` and always killed by PID in its ``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key
from net.envelope import envelope_hash, seal
from net.identity import Identity
from sds import sds_pb2
from sds.ids import message_id_for
from tests import procs
from tests.procs import ROOT, Proc, T, comparable, free_port, history, sdschat

__all__ = [
    "ROOT",
    "Cluster",
    "Proc",
    "T",
    "channel",
    "cluster",
    "comparable",
    "free_port",
    "history",
    "run",
    "sdschat",
    "sealed",
    "texts_delivered",
    "wait_connected",
    "wait_until",
]

R = TypeVar("R")


def run(coro: Coroutine[Any, Any, R], base_timeout: float = 30.0) -> R:
    """Run ``coro`` in a fresh event loop, bounded by ``T(base_timeout)``."""

    async def bounded() -> R:
        return await asyncio.wait_for(coro, T(base_timeout))

    return asyncio.run(bounded())


def channel(name: str = "room", passphrase: str | None = "secret") -> ChannelKey:
    """A channel key derived with the cheap test KDF."""
    return derive_channel_key(name, passphrase, params=TEST_KDF)


def sealed(
    identity: Identity, key: ChannelKey, text: str, n: int, *, pad: int = 0
) -> tuple[bytes, bytes]:
    """``(envelope, hash)`` of a content message ``text`` (plus ``pad`` filler bytes)."""
    sds = sds_pb2.SdsMessage(
        sender_id=identity.sender_id,
        message_id=sds_id(
            key.channel, identity.sender_id, 1_000 + n, text.encode() + b"\x00" * pad, n
        ),
        channel_id=key.channel,
        lamport_timestamp=1_000 + n,
        content=text.encode() + b"\x00" * pad,
    ).SerializeToString()
    env = seal(sds, identity, key)
    return env, envelope_hash(env)


class Cluster(procs.Cluster):
    """The store tests' cluster: ``node(name, data_dir, relay=...)`` (LAN without a relay)."""

    node = procs.Cluster.headless


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[Cluster]:
    with procs.running(Cluster(tmp)) as c:
        yield c


def wait_until(
    cond: Callable[[], bool], base_timeout: float, what: str, step: float = 0.05
) -> None:
    """Poll ``cond`` until true, bounded by ``T(base_timeout)``."""
    deadline = time.monotonic() + T(base_timeout)
    while time.monotonic() < deadline:  # bounded
        if cond():
            return
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")


def texts_delivered(p: Proc) -> set[str]:
    """Texts of others' messages delivered to ``p`` so far."""
    return {str(e.get("text")) for e in p.select("delivered")}


def wait_connected(*procs: Proc, base_timeout: float = 30) -> None:
    """Wait until every node reports its transport connected and its channel joined."""
    for p in procs:
        p.wait_for(
            lambda p=p: bool(p.select("connection", state="connected")) and bool(
                p.select("channel")
            ),
            base_timeout,
            "connected and joined",
        )


def sds_id(channel: str, sender_id: str, lamport: int, content: bytes, n: int) -> str:
    """The verifiable sdschat id of a hand-made message (nonce ``n``): nodes check ids."""
    return message_id_for(channel, sender_id, lamport, content, n.to_bytes(8, "big"))
