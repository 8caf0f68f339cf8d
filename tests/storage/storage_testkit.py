"""Small helpers shared by the storage tests (imported as a plain module)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from storage import OwnState, Store, StoredMessage

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async test body to completion on a fresh event loop."""

    async def wrapper() -> T:
        return await coro_fn()

    return asyncio.run(wrapper())


def mid(n: int | str) -> str:
    """A 64-hex message id derived from ``n``."""
    return hashlib.sha256(str(n).encode()).hexdigest()


def msg(
    n: int | str,
    lamport: int,
    *,
    channel: str = "general",
    sender: str = "alice",
    content: bytes | None = None,
    state: OwnState | None = None,
    envelope: bytes | None = None,
    history: tuple[str, ...] = (),
) -> StoredMessage:
    """A stored message with id ``mid(n)``."""
    return StoredMessage(
        channel=channel,
        message_id=mid(n),
        sender_id=sender,
        lamport=lamport,
        content=content if content is not None else f"message {n}".encode(),
        causal_history=history,
        retrieval_hint=b"hint-" + str(n).encode(),
        envelope=envelope,
        state=state,
        delivered_at=lamport,
        received_at=lamport + 1,
    )


async def open_with_channel(data_dir: Path, *channels: str) -> Store:
    """Open a store and join ``channels`` (default: "general")."""
    store = await Store.open(data_dir)
    for name in channels or ("general",):
        await store.join_channel(name, b"topic-" + name.encode(), is_public=True, now_ms=1)
    return store


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def python_child(code: str) -> subprocess.Popen[str]:
    """Start ``python -c code`` with the repository importable; text pipes on all three."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
