"""Helpers for the LAN tests: the store helpers (timeouts, processes) plus LAN specifics.

Zeroconf is ALWAYS bound to 127.0.0.1 here (or to addresses inside network
namespaces a test creates): nothing multicasts on a real interface.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

_STORE_TESTS = str(Path(__file__).resolve().parents[1] / "store")
if _STORE_TESTS not in sys.path:
    sys.path.insert(0, _STORE_TESTS)

from store_helpers import (  # noqa: E402
    ROOT,
    Cluster,
    Proc,
    T,
    channel,
    cluster,
    free_port,
    run,
    sdschat,
    sealed,
    wait_until,
)

from net.lan.transport import LanOptions  # noqa: E402

__all__ = [
    "LOOPBACK",
    "ROOT",
    "Cluster",
    "Proc",
    "T",
    "channel",
    "cluster",
    "eventually",
    "free_port",
    "run",
    "sdschat",
    "sealed",
    "wait_until",
]

LOOPBACK = LanOptions(interfaces=("127.0.0.1",), dial_grace_s=0.3, redial_base=0.2, redial_max=2.0)
"""LAN options for tests: loopback only, quick redials."""


def topics_known(nodes: Iterable[Any]) -> bool:
    """Every connected peer of every node has told its topics. ``connected`` is the
    handshake; the peer's subscribe frame comes just after, and until it does a
    publish reaches nobody (returns False / 0)."""
    return all(p.topics for n in nodes for p in n.peers())


async def eventually(cond: Callable[[], bool], base_timeout: float, what: str) -> None:
    """Await until ``cond()`` holds (polled), bounded by ``T(base_timeout)``."""
    deadline = time.monotonic() + T(base_timeout)
    while time.monotonic() < deadline:  # bounded
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
