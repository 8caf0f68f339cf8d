"""Helpers for the TUI tests: one timeout scale, scripted peers on an in-memory hub, gates.

Every wait is bounded by :func:`T` (base seconds times ``SDSCHAT_TEST_TIMEOUT_SCALE``).
Peers are real :class:`~app.node.Node` objects on the same
:class:`~app.node.transport.MemoryHub` as the app under test; :class:`GatedTransport`
lets a test hold back or black-hole envelopes to make a message arrive before
its dependencies, or never.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC
from pathlib import Path
from typing import Any

import sds
from app.chat.content import decode_content
from app.node.events import NodeEvent
from app.node.runtime import IDENTITY_FILE, Node, NodeOptions
from app.node.transport import EnvelopeCallback, MemoryHub, StatusCallback, Transport
from app.tui import SdsChatApp, make_app
from net.channel_key import TEST_KDF, derive_channel_key
from net.envelope import EnvelopeError, envelope_hash, open_envelope
from net.identity import Identity
from tests.procs import T

#: Protocol timings for in-process tests (every period a few hundred ms).
FAST = sds.Config.fast(100)

#: A clock that never moves (deterministic times, Lamport stamps and timers).
FIXED_MS = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC

SIZE = (100, 30)


def fixed_clock_ms() -> int:
    return FIXED_MS


def fixed_clock_s() -> float:
    return FIXED_MS / 1000.0


def write_identity(data_dir: Path, seed: int) -> str:
    """Give ``data_dir`` a fixed identity (same sender id in every run); returns it."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    ident = Identity.from_private_bytes(bytes([seed]) * 32)
    path = data_dir / IDENTITY_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(ident.to_pem())
    return ident.sender_id


def node_options(config: sds.Config = FAST, *, fixed: bool = False, seed: int = 7) -> NodeOptions:
    extra: dict[str, Any] = {"clock": fixed_clock_ms} if fixed else {}
    return NodeOptions(config=config, kdf=TEST_KDF, rng=random.Random(seed), **extra)


async def wait_until(cond: Callable[[], bool], base: float = 10.0, what: str = "") -> None:
    """Poll ``cond`` every 20 ms; AssertionError after ``T(base)`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + T(base)
    while not cond():  # bounded by the deadline
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.02)


class GatedTransport:
    """Wraps a transport; a test can hold incoming envelopes, or black-hole some for good.

    ``hold = True`` queues what arrives until :meth:`release`; ``blackhole``
    holds envelope hashes that are dropped in both directions (resends and
    repairs reuse the identical envelope, so they are dropped too).
    """

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.hold = False
        self.held: list[bytes] = []
        self.blackhole: set[bytes] = set()
        self.drop_next_out = 0
        self.dropped_out: list[bytes] = []
        self._deliver: EnvelopeCallback | None = None

    @property
    def connected(self) -> bool:
        return self.inner.connected

    def start(self, on_envelope: EnvelopeCallback, on_status: StatusCallback) -> None:
        async def gate(envelope: bytes) -> None:
            if envelope_hash(envelope) in self.blackhole:
                return
            if self.hold:
                self.held.append(envelope)
                return
            await on_envelope(envelope)

        self._deliver = on_envelope
        self.inner.start(gate, on_status)

    async def release(self) -> None:
        self.hold = False
        held, self.held = self.held, []
        assert self._deliver is not None
        for env in held:
            if envelope_hash(env) not in self.blackhole:
                await self._deliver(env)

    async def deliver(self, envelope: bytes) -> None:
        """Hand ``envelope`` to the node now (past the hold), unless black-holed."""
        assert self._deliver is not None
        if envelope_hash(envelope) not in self.blackhole:
            await self._deliver(envelope)

    def held_texts(self, channel: str = "general") -> set[str]:
        """Texts of the content messages held now (``channel`` public: its key is known)."""
        key = derive_channel_key(channel, None, params=TEST_KDF)
        out = set()
        for env in self.held:
            try:
                content = sds.decode(open_envelope(env, key).sds_bytes).content
            except (EnvelopeError, sds.DecodeError):
                continue
            if content:
                out.add(decode_content(content).text)
        return out

    def swallow_held(self) -> int:
        """Stop holding; what was held is black-holed for good (resends included)."""
        n = len(self.held)
        self.blackhole |= {envelope_hash(e) for e in self.held}
        self.held = []
        self.hold = False
        return n

    async def publish(self, envelope: bytes) -> bool:
        if envelope_hash(envelope) in self.blackhole:
            return True
        if self.drop_next_out > 0:
            self.drop_next_out -= 1
            self.dropped_out.append(envelope)
            return True
        return await self.inner.publish(envelope)

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        await self.inner.subscribe(topics)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        await self.inner.unsubscribe(topics)

    async def close(self) -> None:
        await self.inner.close()


class Peer:
    """A scripted participant (a real node) with the events it saw."""

    def __init__(self, node: Node, transport: Transport) -> None:
        self.node = node
        self.transport = transport
        self.events: list[NodeEvent] = []
        node.subscribe(self.events.append)

    async def say(self, text: str, channel: str = "general", kind: str = "msg") -> int:
        return await self.node.send(channel, text, kind)

    def texts(self, channel: str = "general") -> list[str]:
        from app.node.events import Delivered

        return [e.text for e in self.events if isinstance(e, Delivered) and e.channel == channel]

    async def close(self) -> None:
        await self.node.close()


async def start_peer(
    data_dir: Path,
    hub: MemoryHub,
    name: str,
    *,
    seed: int,
    channels: tuple[str, ...] = ("general",),
    passphrase: str | None = None,
    config: sds.Config = FAST,
    fixed: bool = False,
    gated: bool = False,
) -> Peer:
    """Open, start and join a scripted peer on ``hub`` (fixed identity from ``seed``)."""
    write_identity(data_dir, seed)
    transport: Transport = hub.transport()
    if gated:
        transport = GatedTransport(transport)
    node = await Node.open(
        data_dir, transport, name=name, options=node_options(config, fixed=fixed, seed=seed)
    )
    peer = Peer(node, transport)
    await node.start()
    for ch in channels:
        await node.join(ch, passphrase)
    return peer


def tui(
    data_dir: Path,
    transport: Transport,
    *,
    name: str = "alice",
    seed: int = 1,
    channels: tuple[str, ...] = ("general",),
    passphrase: str | None = None,
    config: sds.Config = FAST,
    fixed: bool = False,
    **kwargs: Any,
) -> SdsChatApp:
    """The app under test (fixed identity; ``fixed=True``: frozen clocks, UTC times)."""
    write_identity(data_dir, seed)
    extra: dict[str, Any] = {"tz": UTC}
    if fixed:
        extra["clock"] = fixed_clock_s
    options = kwargs.pop("options", None) or node_options(config, fixed=fixed, seed=seed)
    extra.update(kwargs)
    return make_app(
        data_dir,
        transport,
        channels=channels,
        name=name,
        passphrase=passphrase,
        options=options,
        flush_interval=0.01,
        **extra,
    )


@asynccontextmanager
async def alice_and_bob(
    tmp_path: Path,
    *,
    size: tuple[int, int] = SIZE,
    channels: tuple[str, ...] = ("general",),
    **app_kwargs: Any,
) -> AsyncIterator[tuple[SdsChatApp, Any, Peer]]:
    """The app (alice) running and ready beside a scripted peer (bob) in ``channels``,
    on one in-memory hub: yields ``(app, pilot, bob)``; bob is closed afterwards."""
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "bob", seed=2, channels=channels)
    app = tui(tmp_path / "alice", hub.transport(), channels=channels, **app_kwargs)
    try:
        async with app.run_test(size=size) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            yield app, pilot, bob
    finally:
        await bob.close()


def screen_text(app: SdsChatApp) -> str:
    """What the terminal shows now, as plain text (one line per terminal row)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def started(app: SdsChatApp) -> None:
    """Wait until the app has joined its channels."""
    await asyncio.wait_for(app.ready.wait(), T(20))


async def type_line(pilot: Any, line: str, *, passphrase: str | None = None) -> None:
    """Put ``line`` in the input (keystrokes are tested elsewhere), press Enter and wait
    until the app has carried it out. ``passphrase``: the ``/join`` asks for one (the
    passphrase dialog), type it (``""``: a PUBLIC channel) and Enter."""
    from app.tui.screens.dialogs import PassphraseScreen
    from app.tui.widgets.chat_input import ChatInput

    box = pilot.app.chat.query_one(ChatInput)
    box.value = line
    box.cursor_position = len(line)
    await pilot.press("enter")
    if passphrase is not None:
        await wait_until(lambda: isinstance(pilot.app.screen, PassphraseScreen),
                         what=f"{line!r} asks for a passphrase")  # fmt: skip
        await pilot.press(*passphrase, "enter")
    await wait_until(lambda: pilot.app.commands.pending == 0, what=f"{line!r} done")
    await pilot.pause()


def texts(app: SdsChatApp) -> list[str]:
    """The texts of the rows of the current channel's window."""
    from app.tui.widgets.message_log import MessageLog

    view = app.chat.query_one(MessageLog).view
    return [r.text for r in view.rows] if view is not None else []


async def invite_code(pilot: Any) -> str:
    """``/invite`` typed in ``pilot``'s app: the code its node made (its dialog closed)."""
    from app.node.events import InviteMade
    from app.tui.screens.invite import InviteScreen

    app = pilot.app
    assert app.node is not None
    made: list[str] = []
    unsubscribe = app.node.subscribe(
        lambda e: made.append(e.code) if isinstance(e, InviteMade) else None)
    try:
        await type_line(pilot, "/invite")
        await wait_until(lambda: bool(made) and isinstance(app.screen, InviteScreen),
                         what="an invite code in its dialog")  # fmt: skip
        await pilot.press("escape")
    finally:
        unsubscribe()
    return made[0]
