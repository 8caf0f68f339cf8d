"""A client of the store-peer query protocol (``net/store.proto``).

::

    client = StoreClient("ws://127.0.0.1:8766")
    info = await client.info()                       # limits, the store's clock
    found = await client.by_hash(hashes)             # {hash: envelope}, any number of hashes
    async for page in client.pages(topic, since_ms=t):   # pipelined paging
        for item in page.items: ...
    await client.close()

What to expect:

* The connection is opened on the first request and reused; requests are
  pipelined on it (answers come back in order). If it breaks, every request
  waiting on it fails with :class:`StoreUnavailable` and the next request
  opens a new one. The client itself never retries; :func:`with_backoff` does
  that for callers that want it (the node's store fetcher uses it).
* :meth:`StoreClient.by_hash` splits any number of hashes into batches of the
  store's ``max_hashes`` and checks that every envelope returned really hashes
  to a requested hash (others are dropped and counted in ``rejected``): a
  store cannot substitute envelopes. Envelopes it cannot forge anyway (they
  are signed and encrypted by their authors); this only keeps garbage out.
* :meth:`StoreClient.pages` requests the next page as soon as the previous
  answer is complete, before the caller has processed it, so the network and
  the caller work at the same time.
* A refusal by the store raises :class:`StoreRequestError` with its ``code``;
  ``unavailable`` (the store cannot reach its archive) raises
  :class:`StoreUnavailable`, as an unreachable store does (another store of the
  same archive may answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from net import store_pb2
from net.errors import NetError
from net.relay_client import backoff_delay
from net.store_frames import (
    HASH_BYTES,
    StoreFrameError,
    decode_store_frame,
    encode_info_request,
    encode_put,
    encode_query_by_hash,
    encode_query_by_time,
)
from net.tls import client_context, explain_failure
from net.urls import check_ws_url

__all__ = [
    "Page",
    "StoreClient",
    "StoreError",
    "StoreInfo",
    "StoreRequestError",
    "StoreUnavailable",
    "StoredItem",
    "with_backoff",
]

logger = logging.getLogger("sdschat.store_client")

T = TypeVar("T")

DEFAULT_MAX_FRAME = 64 * 1024 * 1024
"""Largest answer frame accepted (a store splits answers into ~1 MiB frames)."""


class StoreError(NetError):
    """Something went wrong talking to a store. ``code`` is stable, for counters."""

    code = "store_error"


class StoreUnavailable(StoreError):
    """No connection to the store (unreachable, closed, timed out)."""

    code = "unavailable"


class StoreRequestError(StoreError):
    """The store refused a request with an ``Error`` frame."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What a store said about itself (``Info`` in store.proto)."""

    protocol_version: int
    store_time_ms: int
    max_hashes: int
    max_page_size: int
    default_page_size: int
    max_request_bytes: int
    oldest_arrival_ms: int
    proven_topics: frozenset[bytes] = frozenset()
    """Topics the store archives only from :meth:`StoreClient.put` with write proofs."""
    proven_key_ids: frozenset[bytes] = frozenset()
    """Ids of the write keys it checks those proofs with (``net.store_proof.key_id``)."""
    archive_id: bytes = b""
    """The archive it answers from: stores with the same id share positions (cursors)."""
    engine: str = ""
    """What keeps its envelopes (``sqlite``, ``jetstream``; empty from older stores)."""


class StoredItem:
    """One archived envelope: its bytes, hash and arrival time on the store's clock.

    ``hash`` (sha256 of ``envelope``) is computed when first read, unless given:
    a node catching up reads it only for the last envelope of a page (its
    cursor), and hashes every envelope anyway when opening it (~30 us for a
    default 46 KB envelope, on the event loop here).
    """

    __slots__ = ("_hash", "arrival_ms", "envelope")

    def __init__(self, envelope: bytes, hash: bytes | None, arrival_ms: int) -> None:
        self.envelope = envelope
        self._hash = hash
        self.arrival_ms = arrival_ms

    @property
    def hash(self) -> bytes:
        """sha256 of ``envelope``."""
        if self._hash is None:
            self._hash = hashlib.sha256(self.envelope).digest()
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredItem):
            return NotImplemented
        return self.envelope == other.envelope and self.arrival_ms == other.arrival_ms

    def __hash__(self) -> int:
        return hash((self.hash, self.arrival_ms))

    def __repr__(self) -> str:
        return (
            f"StoredItem(hash={self.hash.hex()[:16]}..., arrival_ms={self.arrival_ms}, "
            f"{len(self.envelope)} bytes)"
        )


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a by-time query.

    Attributes:
        items: envelopes, oldest arrival first.
        next: the cursor of the next page, ``None`` when the range is exhausted.
        store_time_ms: the store's clock when it ran the query.
        total: on the first page (no cursor), how many envelopes the whole
            range held; 0 on later pages.
    """

    items: tuple[StoredItem, ...]
    next: tuple[int, bytes] | None
    store_time_ms: int
    total: int = 0


async def with_backoff(
    attempt_fn: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base: float = 0.2,
    cap: float = 5.0,
    rng: random.Random | None = None,
) -> T:
    """Call ``attempt_fn`` until it does not raise :class:`StoreUnavailable` (``attempts`` tries).

    Between tries: :func:`net.relay_client.backoff_delay` (exponential with
    jitter). Refusals (:class:`StoreRequestError`) are not retried.
    """
    r = rng if rng is not None else random.Random()
    last: StoreUnavailable | None = None
    for attempt in range(max(1, attempts)):
        try:
            return await attempt_fn()
        except StoreUnavailable as exc:
            last = exc
            if attempt + 1 < attempts:
                await asyncio.sleep(backoff_delay(attempt, base, cap, r))
    assert last is not None
    raise last


class _Request:
    __slots__ = ("frames", "rid")

    def __init__(self, rid: int) -> None:
        self.rid = rid
        self.frames: asyncio.Queue[store_pb2.StoreFrame | BaseException] = asyncio.Queue()


class StoreClient:
    """One store's query client (see the module docstring).

    Args:
        url: ``ws://host:port`` of the store's query listener.
        connect_timeout: seconds for TCP + websocket handshake.
        request_timeout: seconds a request may wait between two frames of its answer.
        max_frame: largest answer frame accepted.
        cafile: PEM CA certificates that a ``wss://`` store is verified against
            instead of the system trust store (default: :func:`net.tls.default_cafile`).
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        request_timeout: float = 30.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        cafile: str | None = None,
    ) -> None:
        self.url = check_ws_url(url, "store URL")
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._max_frame = max_frame
        self._cafile = cafile
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._waiting: dict[int, _Request] = {}
        self._ids = itertools.count(1)
        self._info: StoreInfo | None = None
        self._closed = False
        self.rejected = 0
        """Envelopes the store returned that did not match a requested hash."""

    # ------------------------------------------------------------------ API

    @property
    def connected(self) -> bool:
        """Whether a connection is open right now."""
        return self._ws is not None

    async def info(self, *, refresh: bool = False) -> StoreInfo:
        """The store's limits and clock (cached for the connection unless ``refresh``)."""
        if self._info is not None and not refresh:
            return self._info
        req = await self._send(lambda rid: encode_info_request(rid))
        frame = await self._next(req)
        self._done(req)
        if frame.WhichOneof("body") != "info":
            raise StoreError(f"expected info, got {frame.WhichOneof('body')}")
        i = frame.info
        self._info = StoreInfo(
            i.protocol_version,
            i.store_time_ms,
            i.max_hashes,
            i.max_page_size,
            i.default_page_size,
            i.max_request_bytes,
            i.oldest_arrival_ms,
            frozenset(i.proven_topics),
            frozenset(i.proven_key_ids),
            bytes(i.archive_id),
            i.engine,
        )
        return self._info

    async def put(self, items: list[tuple[bytes, bytes]]) -> tuple[int, list[str]]:
        """Send envelopes with their write proofs (``net/store_proof.py``) to be archived;
        returns ``(accepted, reasons of the refused ones)``. At most the store's
        ``max_hashes`` items per call.

        Raises:
            ValueError: no items, or more than the store's ``max_hashes``.
            StoreUnavailable, StoreRequestError: see the module docstring.
        """
        info = await self.info()
        if not 1 <= len(items) <= max(1, info.max_hashes):
            raise ValueError(f"1 to {info.max_hashes} envelopes per put, got {len(items)}")
        req = await self._send(lambda rid: encode_put(rid, items))
        frame = await self._next(req)
        self._done(req)
        if frame.WhichOneof("body") != "put_result":
            raise StoreError(f"expected put_result, got {frame.WhichOneof('body')}")
        return frame.put_result.accepted, list(frame.put_result.refused)

    async def by_hash(self, hashes: Iterable[bytes]) -> dict[bytes, StoredItem]:
        """The envelopes among ``hashes`` that the store has, by hash.

        Any number of hashes; batches of the store's ``max_hashes`` are
        pipelined on the connection.

        Raises:
            ValueError: a hash that is not 32 bytes.
            StoreUnavailable, StoreRequestError: see the module docstring.
        """
        wanted = list(dict.fromkeys(bytes(h) for h in hashes))
        for h in wanted:
            if len(h) != HASH_BYTES:
                raise ValueError(f"a hash is {HASH_BYTES} bytes, got {len(h)}")
        if not wanted:
            return {}
        info = await self.info()
        size = max(1, info.max_hashes)
        requests = []
        for start in range(0, len(wanted), size):
            chunk = wanted[start : start + size]
            requests.append(await self._send(_hash_query(chunk)))
        wanted_set = set(wanted)
        found: dict[bytes, StoredItem] = {}
        try:
            for req in requests:
                for item in await self._collect(req):
                    if item.hash in wanted_set:
                        found[item.hash] = item
                    else:
                        self.rejected += 1
        finally:
            for req in requests:
                self._done(req)
        return found

    async def by_time(
        self,
        topic: bytes,
        *,
        since_ms: int = 0,
        until_ms: int = 0,
        cursor: tuple[int, bytes] | None = None,
        page_size: int = 0,
        want_total: bool = False,
    ) -> Page:
        """One page of ``topic``'s envelopes that arrived in ``[since_ms, until_ms)``."""
        req = await self._send_time_query(
            topic, since_ms, until_ms, cursor, page_size, want_total
        )
        try:
            return await self._page(req)
        finally:
            self._done(req)

    async def pages(
        self,
        topic: bytes,
        *,
        since_ms: int = 0,
        until_ms: int = 0,
        cursor: tuple[int, bytes] | None = None,
        page_size: int = 0,
        max_pages: int = 1_000_000,
    ) -> AsyncIterator[Page]:
        """Every page of the range, in order; the next page is requested before one is yielded.

        The first page carries ``total`` (what the range holds from the start position).
        """
        req = await self._send_time_query(topic, since_ms, until_ms, cursor, page_size, True)
        try:
            for _ in range(max_pages):  # bounded
                page = await self._page(req)
                self._done(req)
                if page.next is not None:
                    req = await self._send_time_query(
                        topic, since_ms, until_ms, page.next, page_size
                    )
                yield page
                if page.next is None:
                    return
        finally:
            self._done(req)

    async def close(self) -> None:
        """Close the connection (idempotent); waiting requests fail with StoreUnavailable."""
        self._closed = True
        await self._drop("client closed")

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------ internals

    async def _send_time_query(
        self,
        topic: bytes,
        since_ms: int,
        until_ms: int,
        cursor: tuple[int, bytes] | None,
        page_size: int,
        want_total: bool = False,
    ) -> _Request:
        return await self._send(
            lambda rid: encode_query_by_time(
                rid,
                topic,
                since_ms=since_ms,
                until_ms=until_ms,
                cursor=cursor,
                page_size=page_size,
                want_total=want_total,
            )
        )

    async def _page(self, req: _Request) -> Page:
        items: list[StoredItem] = []
        for _ in range(1_000_000):  # bounded: one pass per answer frame
            frame = await self._next(req)
            body = frame.envelopes
            for e in body.envelopes:
                env = e.envelope
                items.append(StoredItem(env, None, e.arrival_ms))
            if body.final:
                nxt = (body.next.arrival_ms, body.next.hash) if body.HasField("next") else None
                return Page(tuple(items), nxt, body.store_time_ms, body.total)
        raise StoreError("answer without a final frame")

    async def _collect(self, req: _Request) -> list[StoredItem]:
        page = await self._page(req)
        return list(page.items)

    async def _connect(self) -> ClientConnection:
        if self._closed:
            raise StoreUnavailable("client closed")
        ws = self._ws
        if ws is not None:
            return ws
        async with self._lock:
            if self._ws is not None:
                return self._ws
            try:
                async with asyncio.timeout(self._connect_timeout):
                    ws = await connect(
                        self.url,
                        compression=None,
                        open_timeout=None,
                        max_size=self._max_frame,
                        ping_interval=20.0,
                        ping_timeout=20.0,
                        close_timeout=2.0,
                        proxy=None,
                        ssl=client_context(self.url, self._cafile),
                    )
            except (
                OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed, ValueError
            ) as exc:  # ValueError: a URL websockets cannot use (say, a port out of range)
                why = explain_failure(self.url, exc) or str(exc)
                raise StoreUnavailable(f"cannot reach store {self.url}: {why}") from None
            self._ws = ws
            self._reader = asyncio.create_task(self._read_loop(ws), name=f"store-client {self.url}")
            return ws

    async def _send(self, encode: Callable[[int], bytes]) -> _Request:
        ws = await self._connect()
        rid = next(self._ids)
        req = _Request(rid)
        self._waiting[rid] = req
        try:
            await ws.send(encode(rid))
        except (ConnectionClosed, OSError) as exc:
            self._waiting.pop(rid, None)
            await self._drop(f"connection lost: {exc}")
            raise StoreUnavailable(f"connection to {self.url} lost") from None
        return req

    async def _next(self, req: _Request) -> store_pb2.StoreFrame:
        try:
            async with asyncio.timeout(self._request_timeout):
                item = await req.frames.get()
        except TimeoutError:
            self._done(req)
            await self._drop("request timed out")
            raise StoreUnavailable(f"store {self.url} did not answer in time") from None
        if isinstance(item, BaseException):
            raise item
        if item.WhichOneof("body") == "error":
            self._done(req)
            if item.error.code == "unavailable":  # its archive is out of reach: try elsewhere
                raise StoreUnavailable(f"store {self.url}: {item.error.reason}")
            raise StoreRequestError(item.error.code, item.error.reason)
        return item

    def _done(self, req: _Request) -> None:
        self._waiting.pop(req.rid, None)

    async def _read_loop(self, ws: ClientConnection) -> None:
        reason = "connection closed"
        try:
            async for message in ws:
                if isinstance(message, str):
                    continue
                try:
                    frame = decode_store_frame(message)
                except StoreFrameError as exc:
                    logger.warning("ignoring a bad frame from the store: %s", exc)
                    continue
                req = self._waiting.get(frame.request_id)
                if req is not None:
                    req.frames.put_nowait(frame)
                elif frame.WhichOneof("body") == "error":
                    logger.warning(
                        "store error %s: %s", frame.error.code, frame.error.reason
                    )
        except ConnectionClosed as exc:
            reason = f"connection closed ({exc})"
        except OSError as exc:
            reason = f"connection lost: {exc}"
        finally:
            if self._ws is ws:
                self._ws = None
                self._info = None  # a store that comes back may say otherwise (a new key)
            self._fail_waiting(reason)

    def _fail_waiting(self, reason: str) -> None:
        waiting, self._waiting = self._waiting, {}
        for req in waiting.values():
            req.frames.put_nowait(StoreUnavailable(f"store {self.url}: {reason}"))

    async def _drop(self, reason: str) -> None:
        ws, reader = self._ws, self._reader
        self._ws, self._reader = None, None
        self._info = None
        self._fail_waiting(reason)
        if ws is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await ws.close()
            if ws.transport is not None and not ws.transport.is_closing():
                ws.transport.abort()
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


def _hash_query(hashes: list[bytes]) -> Callable[[int], bytes]:
    """The encoder of a QueryByHash for ``hashes``, given its request id."""

    def encode(request_id: int) -> bytes:
        return encode_query_by_hash(request_id, hashes)

    return encode
