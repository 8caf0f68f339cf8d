"""A relay client that stays connected: subscribe, publish, reconnect.

The node owns one :class:`RelayClient` per relay URL::

    client = RelayClient(url, [channel_key.topic], on_envelope, on_state=on_state)
    client.start()                       # inside a running event loop
    ...
    if not await client.publish(envelope_bytes):
        ...                              # not connected: keep it queued durably
    ...
    await client.close()

What to expect:

* :meth:`start` spawns one task that connects, subscribes to every topic,
  confirms the subscription with a Ping/Pong round trip, and only then reports
  ``connected``. When the connection ends for any reason it reports
  ``disconnected`` with a human-readable reason and the delay before the next
  attempt, then reconnects with exponential backoff and jitter and subscribes
  again. An unreachable relay is just a ``disconnected`` state with a reason
  (for example ``"unreachable: [Errno 111] Connection refused"``); nothing
  raises out of the client.
* ``on_envelope(envelope_bytes)`` is called for every delivered envelope, in
  the relay's order. It may be a plain function or a coroutine function (it
  is then awaited before the next frame is read, which gives backpressure).
  Exceptions it raises are logged and do not stop the client.
* :meth:`publish` returns False when not connected (or when the connection
  breaks while sending). The client never buffers outgoing envelopes: the
  caller keeps them (durably) and sends again after ``connected``.
* Several relays (``RelayClient([url1, url2, ...], ...)``, the relays of one
  cluster, ``net/relay_cluster.py``): the client is connected to one at a
  time, starting with the first; when a connection ends or an attempt fails
  it moves on to the next one (round robin). The backoff ceiling doubles
  only after a whole round of failed attempts, so losing one relay costs
  about ``backoff_base`` seconds before the next relay is tried.
  ``connected`` then carries ``reason="connected to HOST:PORT"``.
* State changes go to ``on_state(StateChange)``: ``connecting``,
  ``connected``, ``disconnected`` (with ``reason`` and ``retry_in``), and
  finally ``closed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.frames import Close

from net.envelope import MAX_ENVELOPE_BYTES
from net.relay_config import DEFAULT_MAX_FRAME, MAX_TOPIC_BYTES
from net.relay_frames import (
    FrameDecodeError,
    decode_frame,
    encode_ping,
    encode_pong,
    encode_publish,
    encode_subscribe,
    encode_unsubscribe,
)
from net.tls import client_context, explain_failure
from net.urls import check_ws_url, display_address

__all__ = [
    "ConnectionState",
    "EnvelopeHandler",
    "RelayClient",
    "RelayErrorHandler",
    "StateChange",
    "StateHandler",
    "backoff_delay",
]

logger = logging.getLogger("sdschat.relay_client")


class ConnectionState(enum.Enum):
    """Where a :class:`RelayClient` is in its life."""

    CONNECTING = "connecting"
    """Opening the websocket and subscribing."""
    CONNECTED = "connected"
    """Subscribed (confirmed by the relay); :meth:`RelayClient.publish` works."""
    DISCONNECTED = "disconnected"
    """Not connected; waiting ``retry_in`` seconds before the next attempt."""
    CLOSED = "closed"
    """Stopped for good (:meth:`RelayClient.close`, or ``max_attempts`` reached)."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """One state transition, as passed to ``on_state``.

    Attributes:
        state: the new state.
        reason: why (set for ``disconnected`` and ``closed``), for people and logs.
        attempt: consecutive failed connection attempts so far (0 once connected).
        retry_in: seconds until the next attempt (``disconnected`` only).
    """

    state: ConnectionState
    reason: str | None = None
    attempt: int = 0
    retry_in: float | None = None


EnvelopeHandler = Callable[[bytes], Awaitable[None] | None]
"""``on_envelope(envelope_bytes)``; may be sync or async."""

StateHandler = Callable[[StateChange], None]
"""``on_state(change)``; must not block."""

RelayErrorHandler = Callable[[str, str], None]
"""``on_relay_error(code, reason)`` for Error frames the relay sends."""


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Delay before reconnect attempt number ``attempt + 1`` ("equal jitter").

    The ceiling doubles with every failed attempt, ``min(cap, base * 2**attempt)``,
    and the delay is uniform in ``[ceiling / 2, ceiling]``: never a hot loop,
    and many clients that lost the same relay do not return in lockstep.
    """
    ceiling = min(cap, base * (2.0 ** min(attempt, 32)))
    return rng.uniform(ceiling / 2.0, ceiling)


def _describe_close(rcvd: Close | None, sent: Close | None) -> str:
    frame = rcvd if rcvd is not None else sent
    if frame is None:
        return "connection lost"
    who = "relay" if rcvd is not None else "client"
    text = f"closed by {who}: {frame.code}"
    return f"{text} {frame.reason}" if frame.reason else text


def _describe_failure(exc: BaseException) -> str:
    if isinstance(exc, ConnectionClosed):
        return _describe_close(exc.rcvd, exc.sent)
    if isinstance(exc, TimeoutError):
        return "unreachable: timed out"
    if isinstance(exc, OSError):
        # str() of a bare ConnectionResetError() is empty: say at least what happened
        return f"unreachable: {str(exc) or type(exc).__name__}"
    if isinstance(exc, InvalidHandshake):
        return f"handshake failed: {exc}"
    return f"{type(exc).__name__}: {exc}"


class RelayClient:
    """A self-reconnecting subscriber/publisher for one relay (see the module docstring).

    Args:
        url: ``ws://`` or ``wss://`` address of the relay, or a sequence of
            them (relays of one cluster, tried in turn: see the module docstring).
        topics: topics to subscribe to on every connection.
        on_envelope: called with each delivered envelope's bytes.
        on_state: called with every :class:`StateChange`.
        on_relay_error: called with ``(code, reason)`` of each Error frame.
        rng: source of jitter (inject a seeded ``random.Random`` in tests).
        backoff_base: first reconnect ceiling in seconds.
        backoff_max: largest reconnect delay in seconds.
        max_attempts: give up (state ``closed``) after this many consecutive
            failed attempts; ``None`` retries forever.
        connect_timeout: seconds allowed for TCP + websocket handshake.
        subscribe_timeout: seconds allowed for the subscription round trip.
        publish_timeout: seconds a publish may wait for the socket to drain;
            beyond that the connection is considered dead and is reset.
        max_frame: largest incoming frame accepted.
        ping_interval, ping_timeout: websocket keepalive (None disables).
        proxy: an explicit proxy URL; by default no proxy is used, whatever
            the environment says.
        cafile: PEM CA certificates that ``wss://`` relays are verified
            against instead of the system trust store (default:
            :func:`net.tls.default_cafile`, set by ``--cafile``).

    Raises:
        ValueError: a URL that is not ``ws://``/``wss://``, or a bad topic.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        topics: Iterable[bytes],
        on_envelope: EnvelopeHandler,
        *,
        on_state: StateHandler | None = None,
        on_relay_error: RelayErrorHandler | None = None,
        rng: random.Random | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_attempts: int | None = None,
        connect_timeout: float = 10.0,
        subscribe_timeout: float = 10.0,
        publish_timeout: float = 10.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        proxy: str | None = None,
        cafile: str | None = None,
    ) -> None:
        self.urls: tuple[str, ...] = (url,) if isinstance(url, str) else tuple(url)
        if not self.urls:
            raise ValueError("need at least one relay URL")
        for u in self.urls:
            check_ws_url(u, "relay URL")
        if backoff_base <= 0 or backoff_max < backoff_base:
            raise ValueError("need 0 < backoff_base <= backoff_max")
        self.url = self.urls[0]
        """The relay connected to, or tried next."""
        self._url_index = 0
        self._topics: set[bytes] = set()
        self._add_topics(topics)
        self._on_envelope = on_envelope
        self._on_state = on_state
        self._on_relay_error = on_relay_error
        self._rng = rng if rng is not None else random.Random()
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_attempts = max_attempts
        self._connect_timeout = connect_timeout
        self._subscribe_timeout = subscribe_timeout
        self._publish_timeout = publish_timeout
        self._max_frame = max_frame
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._proxy = proxy
        self._cafile = cafile
        self._state = ConnectionState.DISCONNECTED
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._connected: asyncio.Event | None = None
        self._pong_waiters: dict[int, asyncio.Future[None]] = {}
        self.last_reason: str | None = None
        """The reason of the latest ``disconnected``/``closed`` change."""

    # ------------------------------------------------------------------ API

    @property
    def state(self) -> ConnectionState:
        """The current :class:`ConnectionState`."""
        return self._state

    @property
    def connected(self) -> bool:
        """True while subscribed and able to publish."""
        return self._state is ConnectionState.CONNECTED

    @property
    def topics(self) -> frozenset[bytes]:
        """The topics subscribed on every (re)connection."""
        return frozenset(self._topics)

    def start(self) -> None:
        """Start connecting in the background (call from inside a running loop).

        Raises:
            RuntimeError: already started.
        """
        if self._task is not None:
            raise RuntimeError("RelayClient already started")
        self._stop = asyncio.Event()
        self._connected = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"relay-client {self.url}")

    async def close(self) -> None:
        """Disconnect and stop reconnecting; ends in state ``closed``. Idempotent."""
        if self._task is None or self._stop is None:
            self._set_state(ConnectionState.CLOSED, "closed by the application")
            return
        self._stop.set()
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(max(1.0, self._connect_timeout)):
                    await ws.close()
            if ws.transport is not None and not ws.transport.is_closing():
                ws.transport.abort()
        task = self._task
        if not task.done():
            try:
                async with asyncio.timeout(max(2.0, self._connect_timeout)):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            except asyncio.CancelledError:
                # our caller is being cancelled: still stop the task, then propagate
                task.cancel()
                raise

    async def __aenter__(self) -> RelayClient:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def wait_connected(self, timeout: float | None = None) -> bool:
        """Wait until ``connected``; return False on timeout (or if never started)."""
        if self._connected is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._connected.wait()
        except TimeoutError:
            return False
        return True

    async def publish(self, envelope: bytes) -> bool:
        """Send one envelope to the relay.

        Returns:
            True if the frame was handed to the connection, False if not
            connected or if the connection broke (or stalled beyond
            ``publish_timeout``) while sending. True means "sent", not
            "delivered": the relay may still refuse it (``on_relay_error``
            reports ``rate_limited``, ``oversized``...), and SDS
            acknowledgements and resends tell the rest.

        Raises:
            ValueError: ``envelope`` exceeds ``MAX_ENVELOPE_BYTES``.
        """
        if len(envelope) > MAX_ENVELOPE_BYTES:
            raise ValueError(f"envelope of {len(envelope)} bytes > {MAX_ENVELOPE_BYTES}")
        ws = self._ws
        if ws is None or self._state is not ConnectionState.CONNECTED:
            return False
        try:
            async with asyncio.timeout(self._publish_timeout):
                await ws.send(encode_publish(envelope))
        except TimeoutError:
            logger.warning(
                "publish stalled for %.1fs; resetting the connection", self._publish_timeout
            )
            ws.transport.abort()
            return False
        except (ConnectionClosed, OSError):
            return False
        return True

    async def subscribe(self, topics: Iterable[bytes]) -> bool:
        """Add topics: subscribed on every (re)connection, and now if connected.

        Returns:
            True once the relay has confirmed the new subscription (a Ping/Pong
            round trip after it), or when there was nothing new to send; False
            if not connected or unconfirmed within ``subscribe_timeout`` (the
            topics are still subscribed on the next connection). Do not await
            this from inside ``on_envelope``: the confirmation is read by the
            same task that runs that callback.

        Raises:
            ValueError: a topic that is not 1 to 64 bytes.
        """
        new = [t for t in topics if t not in self._topics]
        self._add_topics(new)
        if not new:
            return True
        ws, reader = self._ws, self._reader
        if ws is None or reader is None or not self.connected:
            return False
        return await self._send_confirmed(ws, reader, [encode_subscribe(new)])

    async def unsubscribe(self, topics: Iterable[bytes]) -> bool:
        """Remove topics; if connected, tell the relay and wait for its confirmation.

        Returns:
            True once the relay has processed the Unsubscribe (or when none of
            the topics was subscribed); False if not connected or unconfirmed
            within ``subscribe_timeout``. Either way the topics are not
            subscribed again on later connections.
        """
        gone = [t for t in topics if t in self._topics]
        self._topics.difference_update(gone)
        if not gone:
            return True
        ws, reader = self._ws, self._reader
        if ws is None or reader is None or not self.connected:
            return False
        return await self._send_confirmed(ws, reader, [encode_unsubscribe(gone)])

    # ------------------------------------------------------------ internals

    def _add_topics(self, topics: Iterable[bytes]) -> None:
        for topic in topics:
            if not isinstance(topic, bytes) or not 0 < len(topic) <= MAX_TOPIC_BYTES:
                raise ValueError(f"a topic is 1..{MAX_TOPIC_BYTES} bytes")
            self._topics.add(topic)

    def _set_state(
        self,
        state: ConnectionState,
        reason: str | None = None,
        attempt: int = 0,
        retry_in: float | None = None,
    ) -> None:
        self._state = state
        if reason is not None and state is not ConnectionState.CONNECTED:
            self.last_reason = reason
        if self._connected is not None:
            if state is ConnectionState.CONNECTED:
                self._connected.set()
            else:
                self._connected.clear()
        if self._on_state is not None:
            try:
                self._on_state(StateChange(state, reason, attempt, retry_in))
            except Exception:
                logger.exception("on_state callback failed")

    async def _run(self) -> None:
        assert self._stop is not None
        stop = self._stop
        attempt = 0
        final_reason = "closed by the application"
        while not stop.is_set():  # one iteration per connection attempt
            self._set_state(ConnectionState.CONNECTING, attempt=attempt)
            reason, subscribed = await self._connect_once()
            if subscribed:
                attempt = 0
            if stop.is_set():
                break
            attempt += 1
            if self._max_attempts is not None and attempt >= self._max_attempts:
                final_reason = f"gave up after {attempt} attempts: {reason}"
                break
            rounds = (attempt - 1) // len(self.urls)  # failover: next relay, same ceiling
            self._url_index = (self._url_index + 1) % len(self.urls)
            self.url = self.urls[self._url_index]
            delay = backoff_delay(rounds, self._backoff_base, self._backoff_max, self._rng)
            self._set_state(ConnectionState.DISCONNECTED, reason, attempt, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stop.wait()
        self._set_state(ConnectionState.CLOSED, final_reason)

    async def _connect_once(self) -> tuple[str, bool]:
        """One connection: returns (why it ended, whether it got subscribed)."""
        try:
            async with asyncio.timeout(self._connect_timeout):
                ws = await connect(
                    self.url,
                    compression=None,
                    open_timeout=None,
                    max_size=self._max_frame,
                    ping_interval=self._ping_interval,
                    ping_timeout=self._ping_timeout,
                    close_timeout=min(5.0, self._connect_timeout),
                    proxy=self._proxy,
                    ssl=client_context(self.url, self._cafile),
                )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as exc:
            return explain_failure(self.url, exc) or _describe_failure(exc), False
        except Exception as exc:  # never let a connection problem crash the node
            logger.exception("unexpected error while connecting to %s", self.url)
            return _describe_failure(exc), False
        subscribed = False
        reader = asyncio.create_task(self._read_loop(ws))
        try:
            sent = set(self._topics)
            frames = [encode_subscribe(sorted(sent))] if sent else []
            if await self._send_confirmed(ws, reader, frames):
                subscribed = True
                self._ws, self._reader = ws, reader
                # topics added while that confirmation was awaited found no connection
                # to send them on (subscribe() returned False): send them now
                late = self._topics - sent
                if late and not await self._send_confirmed(
                        ws, reader, [encode_subscribe(sorted(late))]):  # fmt: skip
                    reason = reader.result() if reader.done() else "subscription unconfirmed"
                    return reason, subscribed
                via = f"connected to {display_address(self.url)}" if len(self.urls) > 1 else None
                self._set_state(ConnectionState.CONNECTED, via)
                reason = await reader
            elif reader.done():
                reason = reader.result()
            else:
                reason = "relay did not confirm the subscription in time"
            return reason, subscribed
        finally:
            self._ws, self._reader = None, None
            if not reader.done():
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            if ws.transport is not None and not ws.transport.is_closing():
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1.0):
                        await ws.close()
                ws.transport.abort()

    async def _send_confirmed(
        self, ws: ClientConnection, reader: asyncio.Task[str], frames: list[bytes]
    ) -> bool:
        """Send ``frames`` then a Ping; True once the matching Pong arrives.

        The relay handles a connection's frames in order, so the Pong proves
        the earlier frames were processed. False if the connection ends (the
        reader task finishes) or ``subscribe_timeout`` passes first.
        """
        nonce = self._rng.getrandbits(64)
        pong: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pong_waiters[nonce] = pong
        try:
            for frame in frames:
                await ws.send(frame)
            await ws.send(encode_ping(nonce))
            waitables: set[asyncio.Future[Any]] = {pong, reader}
            done, _ = await asyncio.wait(
                waitables, timeout=self._subscribe_timeout, return_when=asyncio.FIRST_COMPLETED
            )
            return pong in done
        except (ConnectionClosed, OSError):
            return False
        finally:
            self._pong_waiters.pop(nonce, None)
            if not pong.done():
                pong.cancel()

    async def _read_loop(self, ws: ClientConnection) -> str:
        """Read frames until the connection ends; returns the reason it ended."""
        try:
            async for message in ws:
                if isinstance(message, str):
                    logger.warning("ignoring a text frame from the relay")
                    continue
                try:
                    frame = decode_frame(message)
                except FrameDecodeError as exc:
                    logger.warning("ignoring a bad frame from the relay: %s", exc)
                    continue
                kind = frame.WhichOneof("body")
                if kind == "deliver":
                    await self._deliver(frame.deliver.envelope)
                elif kind == "pong":
                    waiter = self._pong_waiters.get(frame.pong.nonce)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(None)
                elif kind == "error":
                    self._relay_error(frame.error.code, frame.error.reason)
                elif kind == "ping":
                    await ws.send(encode_pong(frame.ping.nonce))
                else:
                    logger.warning("ignoring an unexpected %s frame from the relay", kind)
        except ConnectionClosed as exc:
            return _describe_failure(exc)
        except OSError as exc:
            return f"connection lost: {exc}"
        return _describe_close(ws.protocol.close_rcvd, ws.protocol.close_sent)

    async def _deliver(self, envelope: bytes) -> None:
        try:
            result = self._on_envelope(envelope)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("on_envelope callback failed")

    def _relay_error(self, code: str, reason: str) -> None:
        if self._on_relay_error is None:
            logger.warning("relay error %s: %s", code, reason)
            return
        try:
            self._on_relay_error(code, reason)
        except Exception:
            logger.exception("on_relay_error callback failed")
