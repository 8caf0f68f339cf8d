"""A node's use of a store peer: catching up after being away, fetching missing dependencies.

The node owns one :class:`StoreSync` for its store URLs (``--store``, repeatable,
or a store announced on the LAN). It needs three things from the node, all
callbacks:

* ``deliver(envelope)``: the node's normal receive path (awaiting it is the
  backpressure: the node's bounded inbox);
* ``progress(CatchUpProgress)``: for the UI ("catching up · 1,200 / 5,000");
* ``barrier()``: an awaitable (made at the call) that completes once everything
  delivered before the call has been processed and committed by the node (so a
  saved cursor never runs ahead of the log). Delivery does not wait for it: a
  page's cursor is saved in the background once its barrier completes, while
  the next page is already being fed.

**Catching up** (:meth:`StoreSync.catch_up`, on every (re)connection and
join): the node asks for its channel's topic page by page, from where it
stopped last time, and feeds every envelope through ``deliver``. Where it
stopped is kept per store and topic in ``<data dir>/store_sync.json``: the
store's cursor after the last page fully processed, and ``online_until``, the
store-clock time up to which the node was last known to be online (refreshed
while connected). The next catch-up starts at the later of the two (minus
``margin_ms`` for ``online_until``: clocks and in-flight envelopes); with
neither, the whole archive (what the store's retention kept). Duplicates are
harmless: the node's replay guard and the core drop what it already has.

**Several stores, failover.** Given several URLs, the sync uses one store at a
time, the first one first, and moves to the next when one is unreachable, full,
or cannot reach its archive (``unavailable``); it goes round the list before it
waits (backoff). Store peers in front of one shared archive (JetStream,
``net/store_jetstream.py``) say so by the same ``Info.archive_id``: positions are
kept per archive, not per URL, and a catch-up that loses its store in the middle
goes on at the next one exactly after the last page it delivered, so nothing is
lost and nothing is delivered twice. A store of another archive (or one that
names none) has positions of its own: the catch-up there starts from its own
saved position (what it repeats, the node drops).

**Missing dependencies** (:meth:`note_missing` with the entries of every
``MessagesMissing``, then :meth:`request` with the ids not found in local
storage): those with a retrieval hint (the envelope hash) are fetched from the
store in batches (one ``QueryByHash`` pipeline per ``fetch_delay_s``), with
exponential backoff per id while the store does not have it or is
unreachable, up to ``fetch_attempts`` tries; what is found goes through
``deliver``. While a catch-up runs, fetching waits: messages delivered out of
causal order name dependencies that the catch-up itself brings a moment
later. An id the node stops asking for (it arrived some other way, for
instance by SDS-R repair, or was declared lost) is forgotten after
``stale_s``. SDS-R repair from peers stays the fallback; the core declares a
message lost only after ``lost_timeout_ms``, when all of this has failed.

**Write proofs** (:meth:`offer`, ``net/store_proof.py``): a store may archive a
topic only from ``Put`` frames with a write proof (its ``Info`` lists those
topics, and the ids of the write keys it checks them with). The node offers
every own envelope it sends, with the channel keys it could prove with (a
members channel: every epoch key); for such a topic the sync sends it to the
store with its proof under the write key whose id the store lists (in batches,
in the background, kept and retried while the store is unreachable: at most
:data:`MAX_OFFERED` envelopes or :data:`MAX_OFFERED_BYTES` wait, the oldest
dropped first). When none of the node's keys is one the store lists (the
store's operator gave it a write key of another epoch or channel), the
envelope is not sent (``put_no_key``, logged once per topic). For other
topics nothing is sent: the store hears them on the relay or the LAN.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from net.relay_client import backoff_delay
from net.store_client import (
    StoreClient,
    StoredItem,
    StoreError,
    StoreInfo,
    StoreUnavailable,
)
from net.store_proof import key_id, make_proof, write_key

__all__ = [
    "MAX_OFFERED",
    "MAX_OFFERED_BYTES",
    "STATE_FILE",
    "CatchUpProgress",
    "ProvingKeys",
    "StoreSync",
]

MAX_OFFERED = 4096
"""Own envelopes waiting to be sent to a store with write proofs (oldest dropped first)."""

MAX_OFFERED_BYTES = 32 * 1024 * 1024
"""Bytes of own envelopes waiting to be sent to a store with write proofs."""

ProvingKeys = bytes | Sequence[bytes] | Callable[[], Sequence[bytes]]
"""What :meth:`StoreSync.offer` may prove an envelope with: a channel key, channel keys
(oldest first), or a function returning them when the envelope is sent."""

_PUT_BYTES = 768 * 1024  # envelope bytes per Put frame (a store reads frames up to 1 MiB)

logger = logging.getLogger("sdschat.store_sync")

STATE_FILE = "store_sync.json"
"""Where a node keeps its catch-up positions (inside its data directory)."""


def _keys_now(keys: ProvingKeys) -> tuple[bytes, ...]:
    """The channel keys ``keys`` stands for now, oldest first."""
    if isinstance(keys, bytes):
        return (keys,)
    if callable(keys):
        return tuple(keys())
    return tuple(keys)


class _Entry(Protocol):
    """What :meth:`StoreSync.note_missing` reads of a missing dependency
    (``sds.HistoryEntry`` is one; read-only attributes are enough)."""

    @property
    def message_id(self) -> str: ...

    @property
    def retrieval_hint(self) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class CatchUpProgress:
    """How a catch-up is going.

    Attributes:
        channel: the channel being caught up.
        state: ``"started"``, ``"running"``, ``"done"`` or ``"failed"``.
        done: envelopes handed to the node so far.
        total: envelopes the store had for the range when it started (0 if unknown).
        store: the store's URL.
        detail: why it failed, or a note.
    """

    channel: str
    state: str
    done: int
    total: int
    store: str
    detail: str | None = None

    @property
    def text(self) -> str:
        """``"catching up · 1,200 / 5,000"`` (what the UI shows)."""
        if self.state == "done":
            return f"caught up · {self.done:,} from the store"
        if self.state == "failed":
            return f"catch-up failed after {self.done:,}: {self.detail}"
        return f"catching up · {self.done:,} / {self.total:,}"


@dataclass(slots=True)
class _Want:
    channel: str
    message_id: str
    attempts: int = 0
    next_at: float = 0.0
    last_requested: float = 0.0


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Run:
    """One catch-up of a topic, across the stores it fails over between."""

    done: int = 0
    total: int = 0
    archive: bytes = b""  # the archive of the store the last page came from
    cursor: tuple[int, bytes] | None = None  # after the last page delivered in full
    started: bool = False
    saver: asyncio.Task[None] | None = field(default=None)


class StoreSync:
    """Catch-up and dependency fetching against one store (see the module docstring).

    Args:
        url: the store's query URL, or several (one at a time, failing over in order).
        deliver: the node's receive path.
        progress: catch-up progress for the UI.
        barrier: waits until everything delivered so far is processed.
        data_dir: where ``store_sync.json`` lives (``None``: positions not kept).
        page_size: envelopes per catch-up page.
        margin_ms: how far before ``online_until`` a catch-up starts.
        fetch_delay_s: how long ids are collected before one by-hash query.
        fetch_attempts: tries per id before leaving it to SDS-R.
        backoff_base, backoff_max: seconds between tries of one id.
        stale_s: an id not asked for again within this long is forgotten.
        catchup_attempts: tries of a catch-up while the store is unreachable (or
            full); after that it reports ``failed``.
        catchup_retry_s: a background catch-up (:meth:`catch_up_soon`) that
            failed so is tried again after this long (doubling up to 8 times
            that) until it succeeds or the sync is closed; 0: never.
        clock: wall-clock milliseconds.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        deliver: Callable[[bytes], Awaitable[None]],
        progress: Callable[[CatchUpProgress], None] | None = None,
        barrier: Callable[[], Awaitable[None]] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        page_size: int = 500,
        margin_ms: int = 60_000,
        fetch_delay_s: float = 0.05,
        fetch_attempts: int = 6,
        backoff_base: float = 0.25,
        backoff_max: float = 8.0,
        stale_s: float = 60.0,
        catchup_attempts: int = 5,
        catchup_retry_s: float = 15.0,
        progress_interval_s: float = 0.25,
        clock: Callable[[], int] = _wall_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.urls: tuple[str, ...] = (url,) if isinstance(url, str) else tuple(dict.fromkeys(url))
        if not self.urls:
            raise ValueError("a store sync needs at least one store URL")
        self._clients = {u: StoreClient(u) for u in self.urls}
        self._current = 0
        self._archives: dict[str, bytes] = {}  # URL -> the archive id it named last
        self._deliver = deliver
        self._progress = progress
        self._barrier = barrier
        self._path = Path(data_dir) / STATE_FILE if data_dir is not None else None
        self.page_size = page_size
        self.margin_ms = margin_ms
        self.fetch_delay_s = fetch_delay_s
        self.fetch_attempts = fetch_attempts
        self._backoff = (backoff_base, backoff_max)
        self.stale_s = stale_s
        self.catchup_attempts = catchup_attempts
        self.catchup_retry_s = catchup_retry_s
        self.progress_interval_s = progress_interval_s
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.counters: Counter[str] = Counter()
        """``catchup_envelopes``, ``catchups``, ``catchup_failures``, ``catchup_retries``,
        ``fetched``, ``fetch_misses``, ``fetch_given_up``, ``fetch_queries``,
        ``store_unavailable``, ``failovers``, ``catchup_resumed`` (a catch-up that went on
        at another store of its archive)."""
        self._state: dict[str, dict[str, Any]] = self._load()
        self._skew_ms = 0
        self._hints: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._wants: dict[bytes, _Want] = {}
        self._wake = asyncio.Event()
        self._fetcher: asyncio.Task[None] | None = None
        self._online: asyncio.Task[None] | None = None
        self._catchups: dict[bytes, asyncio.Task[int]] = {}
        self._retrying: set[bytes] = set()  # topics whose catch-up waits to retry
        self._unavailable: set[bytes] = set()  # topics whose last catch-up found no store
        self._savers: set[asyncio.Task[None]] = set()
        self._topics: dict[bytes, str] = {}
        self._closed = False
        # (topic, envelope, the channel keys to prove with)
        self._offered: deque[tuple[bytes, bytes, ProvingKeys]] = deque()
        self._offered_bytes = 0
        self._write_keys: dict[tuple[bytes, bytes], tuple[bytes, bytes]] = {}  # -> (key, id)
        self._no_key_logged: set[bytes] = set()
        self._put_wake = asyncio.Event()
        self._putter: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ stores

    @property
    def url(self) -> str:
        """The store in use now."""
        return self.urls[self._current]

    @property
    def client(self) -> StoreClient:
        """The client of the store in use now."""
        return self._clients[self.url]

    def _fail_over(self, why: str) -> None:
        """The store in use failed: use the next one of the list (if there is one)."""
        if len(self.urls) < 2:
            return
        old = self.url
        self._current = (self._current + 1) % len(self.urls)
        self.counters["failovers"] += 1
        logger.info("store %s failed (%s): using %s", old, why, self.url)

    def _learn(self, info: StoreInfo) -> None:
        """Remember the archive the store in use names; positions kept under its URL move
        to the archive (stores before ``archive_id`` kept them per URL)."""
        if not info.archive_id:
            return
        self._archives[self.url] = info.archive_id
        key = self._key()
        if key not in self._state and self.url in self._state:
            self._state[key] = self._state.pop(self.url)

    def _key(self) -> str:
        """Where positions of the store in use are kept: its archive, else its URL."""
        archive = self._archives.get(self.url)
        return f"archive:{archive.hex()}" if archive else self.url

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the fetcher task (inside the running loop)."""
        if self._fetcher is None:
            self._fetcher = asyncio.create_task(self._fetch_loop(), name="store-fetch")
        if self._putter is None:
            self._putter = asyncio.create_task(self._put_loop(), name="store-put")

    async def close(self) -> None:
        """Stop everything, remember positions, close the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.set_connected(False)
        tasks: list[asyncio.Task[Any]] = [
            t for t in (self._fetcher, self._online, self._putter) if t is not None
        ]
        tasks += list(self._catchups.values())
        tasks += list(self._savers)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._save()
        for client in self._clients.values():
            await client.close()

    # ------------------------------------------------------------------ write proofs

    def offer(self, channel_keys: ProvingKeys, topic: bytes, envelope: bytes) -> None:
        """An own envelope of ``topic`` was sent: if the store archives that topic only
        with write proofs, send it there with its proof (in the background).

        ``channel_keys``: the key, or the keys, whose write key may be the one the store
        checks proofs with; or a function that returns them when the envelope is sent
        (a members channel's epoch keys, oldest first: a removal while the envelope
        waits, and a store given the new epoch's key, still take it: a member of the
        new epoch vouches for its own envelope)."""
        if self._closed:
            return
        if isinstance(channel_keys, bytes):
            channel_keys = (channel_keys,)
        self._offered.append((topic, envelope, channel_keys))
        self._offered_bytes += len(envelope)
        while len(self._offered) > MAX_OFFERED or self._offered_bytes > MAX_OFFERED_BYTES:
            _t, dropped, _k = self._offered.popleft()
            self._offered_bytes -= len(dropped)
            self.counters["put_dropped"] += 1
        self._put_wake.set()

    def _write_key(self, channel_key: bytes, topic: bytes) -> tuple[bytes, bytes]:
        """``(write key, its id)`` of ``channel_key`` for ``topic`` (cached: HKDF)."""
        found = self._write_keys.get((channel_key, topic))
        if found is None:
            if len(self._write_keys) > 1024:
                self._write_keys.clear()
            wkey = write_key(channel_key, topic)
            found = self._write_keys[(channel_key, topic)] = (wkey, key_id(wkey))
        return found

    def _proof(self, topic: bytes, envelope: bytes, keys: ProvingKeys,
               ids: frozenset[bytes]) -> bytes | None:  # fmt: skip
        """The proof of ``envelope`` under the newest of ``keys`` whose write key the store
        lists; ``None`` (counted, logged once per topic) when it lists none of them."""
        held = _keys_now(keys)
        for channel_key in reversed(held):
            wkey, kid = self._write_key(channel_key, topic)
            if kid in ids:
                return make_proof(wkey, topic, envelope)
        self.counters["put_no_key"] += 1
        if topic not in self._no_key_logged:
            self._no_key_logged.add(topic)
            logger.warning("store %s checks write proofs of topic %s with a key this node does "
                           "not hold (another epoch or channel): its envelopes are not sent "
                           "there (store: %s; ours: %s)", self.url, topic.hex(),
                           sorted(i.hex() for i in ids),
                           [self._write_key(k, topic)[1].hex() for k in held])  # fmt: skip
        return None

    async def _put_loop(self) -> None:
        """The one task that sends offered envelopes to the store (see :meth:`offer`)."""
        offered = self._offered
        failures = 0
        while not self._closed:  # ends when close() cancels it
            await self._put_wake.wait()
            self._put_wake.clear()
            while offered:
                try:
                    info = await self.client.info()
                    batch: list[tuple[bytes, bytes, ProvingKeys, bytes]] = []
                    size = 0
                    while offered and len(batch) < 64:
                        topic, env, keys = offered[0]
                        if batch and size + len(env) > _PUT_BYTES:
                            break
                        offered.popleft()
                        self._offered_bytes -= len(env)
                        if topic not in info.proven_topics:
                            continue
                        proof = self._proof(topic, env, keys, info.proven_key_ids)
                        if proof is not None:
                            batch.append((topic, env, keys, proof))
                            size += len(env)
                    if not batch:
                        continue
                    try:
                        items = [(env, proof) for _t, env, _k, proof in batch]
                        accepted, refused = await self.client.put(items)
                    except StoreUnavailable:
                        for topic, env, keys, _p in reversed(batch):  # keep them, in order
                            offered.appendleft((topic, env, keys))
                            self._offered_bytes += len(env)
                        raise
                except StoreUnavailable as exc:
                    failures += 1
                    self.counters["put_unavailable"] += 1
                    self._fail_over(str(exc))
                    if failures % len(self.urls) == 0:  # the whole list failed: wait
                        await asyncio.sleep(backoff_delay(failures // len(self.urls) - 1,
                                                          *self._backoff, self._rng))  # fmt: skip
                    continue
                except StoreError as exc:
                    self.counters["put_failed"] += 1
                    logger.warning("store put failed: %s", exc)
                    continue
                failures = 0
                self.counters["put_accepted"] += accepted
                self.counters["put_refused"] += len(refused)

    # ------------------------------------------------------------------ online tracking

    def set_connected(self, connected: bool) -> None:
        """Tell the sync whether the node's transport is connected (tracks ``online_until``)."""
        if connected and self._online is None and not self._closed:
            self._online = asyncio.create_task(self._online_loop(), name="store-online")
        elif not connected and self._online is not None:
            self._online.cancel()
            self._online = None
            self._mark_online()
            self._save()

    def _mark_online(self) -> None:
        until = self._clock() + self._skew_ms
        for topic in self._topics:
            pos = self._position(topic)
            pos["online_until"] = max(int(pos.get("online_until", 0)), until)

    async def _online_loop(self) -> None:
        while not self._closed:  # ends when cancelled
            await asyncio.sleep(15.0)
            self._mark_online()
            self._save()

    # ------------------------------------------------------------------ catch-up

    def catch_up_soon(self, channel: str, topic: bytes) -> None:
        """Start :meth:`catch_up` in the background unless one runs for ``topic``."""
        running = self._catchups.get(topic)
        if running is not None and not running.done() and topic in self._retrying:
            running.cancel()  # it only waits to retry: start afresh now
            self._retrying.discard(topic)
        elif self._closed or (running is not None and not running.done()):
            return
        task = asyncio.create_task(
            self._catch_up_until_done(channel, topic), name=f"catch-up {channel}"
        )
        self._catchups[topic] = task

    async def catch_up(self, channel: str, topic: bytes) -> int:
        """Feed everything the store has for ``topic`` since last time; returns how many.

        A store unreachable, full or without its archive: the next store of the list
        (going on after the last page delivered when it names the same archive);
        once every store failed, again after a backoff, ``catchup_attempts`` rounds in
        all, then it reports ``failed``. (Started by :meth:`catch_up_soon`, a
        catch-up that failed so is tried again later.)
        """
        self._topics[topic] = channel
        self._unavailable.discard(topic)
        run = _Run()
        last = "store unavailable"
        rounds = max(1, self.catchup_attempts)
        tries = rounds * len(self.urls)
        for attempt in range(tries):
            try:
                await self._catch_up_once(channel, topic, run)
                return run.done
            except StoreUnavailable as exc:
                self.counters["store_unavailable"] += 1
                last = str(exc)
                self._fail_over(last)
                if attempt + 1 >= tries:
                    self._unavailable.add(topic)
                elif (attempt + 1) % len(self.urls) == 0:  # every store failed: wait
                    await asyncio.sleep(backoff_delay(attempt // len(self.urls), *self._backoff,
                                                      self._rng))  # fmt: skip
            except StoreError as exc:
                last = f"{exc.code}: {exc}"
                break
        self.counters["catchup_failures"] += 1
        self._report(CatchUpProgress(channel, "failed", run.done, run.total, self.url, last))
        return run.done

    async def _catch_up_until_done(self, channel: str, topic: bytes) -> int:
        """:meth:`catch_up`, tried again every ``catchup_retry_s`` (doubling, at most 8
        times that) while it fails because the store is unreachable or full, until it
        succeeds or :meth:`close`: a catch-up refused while every slot of the store
        was taken completes once one frees."""
        for round_ in range(1_000_000):  # bounded: ends on success, refusal or close()
            done = await self.catch_up(channel, topic)
            if topic not in self._unavailable or self._closed or self.catchup_retry_s <= 0:
                return done
            self.counters["catchup_retries"] += 1
            delay = self.catchup_retry_s * 2 ** min(round_, 3)
            self._retrying.add(topic)
            try:
                await asyncio.sleep(delay * (0.75 + 0.5 * self._rng.random()))
            finally:
                self._retrying.discard(topic)
        return 0

    async def _catch_up_once(self, channel: str, topic: bytes, run: _Run) -> None:
        info = await self.client.info(refresh=True)
        self._learn(info)
        self._skew_ms = info.store_time_ms - self._clock()
        pos = self._position(topic)
        if run.cursor is not None and run.archive and info.archive_id == run.archive:
            # the store before this one failed in the middle: its archive is this one's,
            # so go on exactly after the last page delivered
            start_cursor, since_ms = run.cursor, 0
            self.counters["catchup_resumed"] += 1
        else:
            cursor = _cursor(pos.get("cursor"))
            since = max(0, int(pos.get("online_until", 0)) - self.margin_ms)
            if cursor is not None and cursor[0] >= since:
                start_cursor, since_ms = cursor, 0
            else:
                start_cursor, since_ms = None, since
            run.cursor = None
        run.archive = info.archive_id
        if not run.started:
            run.started = True
            self.counters["catchups"] += 1
            self._report(CatchUpProgress(channel, "started", 0, 0, self.url))
        last_report = 0.0
        saved: tuple[int, bytes] | None = None
        pending: tuple[int, bytes] | None = None  # cursor of the page being processed
        async for page in self.client.pages(
            topic, since_ms=since_ms, cursor=start_cursor, page_size=self.page_size
        ):
            if page.total:
                run.total = max(run.total, run.done + page.total)
            if pending is not None and pending != saved:
                # the page before this one is delivered: its cursor is safe once the
                # node has committed it (saved in the background, in page order)
                run.saver = self._save_cursor_later(topic, pending, run.saver)
                saved = pending
            for item in page.items:
                await self._deliver(item.envelope)
                run.done += 1
            self.counters["catchup_envelopes"] += len(page.items)
            if page.items:
                last = page.items[-1]
                pending = (last.arrival_ms, last.hash)
                run.cursor = pending
            now = time.monotonic()
            if page.items and (
                now - last_report >= self.progress_interval_s or page.next is None
            ):
                last_report = now
                self._report(CatchUpProgress(channel, "running", run.done,
                                             max(run.total, run.done), self.url))  # fmt: skip
            if page.next is None:
                if self._barrier is not None:
                    await self._barrier()
                if run.saver is not None:
                    await run.saver
                if pending is not None:
                    self._set_cursor(topic, pending)
                pos["online_until"] = max(int(pos.get("online_until", 0)), page.store_time_ms)
                self._save()
        self._report(CatchUpProgress(channel, "done", run.done, max(run.total, run.done),
                                     self.url))  # fmt: skip

    def _save_cursor_later(
        self, topic: bytes, cursor: tuple[int, bytes], previous: asyncio.Task[None] | None
    ) -> asyncio.Task[None]:
        """Save ``cursor`` once the node has committed what was delivered so far
        (and after the previous page's cursor)."""
        done = self._barrier() if self._barrier is not None else None  # marks this point now
        key = self._key()  # the store's archive now, even if it fails over meanwhile

        async def save() -> None:
            if previous is not None:
                await previous
            if done is not None:
                await done
            self._set_cursor(topic, cursor, key)

        task = asyncio.create_task(save(), name="store-cursor")
        self._savers.add(task)
        task.add_done_callback(self._savers.discard)
        return task

    # ------------------------------------------------------------------ missing deps

    def note_missing(self, channel: str, entries: Iterable[_Entry]) -> None:
        """Remember the retrieval hints of missing dependencies (from ``MessagesMissing``)."""
        for e in entries:
            hint = e.retrieval_hint
            if hint is not None and len(hint) == 32:
                key = (channel, e.message_id)
                self._hints[key] = bytes(hint)
                self._hints.move_to_end(key)
        while len(self._hints) > 100_000:
            self._hints.popitem(last=False)

    def request(self, channel: str, message_ids: Iterable[str]) -> int:
        """Fetch these ids (not in local storage) from the store; returns how many have hints."""
        now = time.monotonic()
        n = 0
        for mid in message_ids:
            hint = self._hints.get((channel, mid))
            if hint is None:
                continue
            n += 1
            want = self._wants.get(hint)
            if want is None:
                self._wants[hint] = _Want(channel, mid, next_at=now, last_requested=now)
            else:
                want.last_requested = now
        if n:
            self._wake.set()
        return n

    @property
    def wanted(self) -> int:
        """Ids currently being fetched."""
        return len(self._wants)

    def _catching_up(self) -> bool:
        return any(not t.done() for t in self._catchups.values())

    async def _fetch_loop(self) -> None:
        while not self._closed:  # ends when cancelled
            if self._catching_up():
                # what a running catch-up is about to deliver need not be fetched twice
                await asyncio.sleep(self.fetch_delay_s * 4)
                continue
            now = time.monotonic()
            due_at = min((w.next_at for w in self._wants.values()), default=None)
            if due_at is None or due_at > now:
                timeout = None if due_at is None else due_at - now
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                continue
            await asyncio.sleep(self.fetch_delay_s)  # gather the ids of one round
            await self._fetch_due()

    async def _fetch_due(self) -> None:
        now = time.monotonic()
        for hint, entry in list(self._wants.items()):
            if now - entry.last_requested > self.stale_s:
                del self._wants[hint]  # the node stopped asking: it arrived or was given up
        due = [h for h, w in self._wants.items() if w.next_at <= now]
        if not due:
            return
        self.counters["fetch_queries"] += 1
        found: dict[bytes, StoredItem] | None
        try:
            found = await self.client.by_hash(due)
        except StoreUnavailable as exc:
            self.counters["store_unavailable"] += 1
            self._fail_over(str(exc))
            found = None
        except StoreError as exc:
            logger.warning("store refused a fetch: %s", exc)
            found = None
        for hint in due:
            want = self._wants.get(hint)
            if want is None:
                continue
            item = None if found is None else found.get(hint)
            if item is not None:
                del self._wants[hint]
                self.counters["fetched"] += 1
                await self._deliver(item.envelope)
                continue
            want.attempts += 1
            self.counters["fetch_misses"] += 1
            if want.attempts >= self.fetch_attempts:
                del self._wants[hint]
                self.counters["fetch_given_up"] += 1
            else:
                want.next_at = time.monotonic() + backoff_delay(
                    want.attempts - 1, *self._backoff, self._rng
                )

    # ------------------------------------------------------------------ positions

    def _position(self, topic: bytes, key: str | None = None) -> dict[str, Any]:
        store = self._state.setdefault(key or self._key(), {})
        pos: dict[str, Any] = store.setdefault(topic.hex(), {})
        return pos

    def _set_cursor(self, topic: bytes, cursor: tuple[int, bytes], key: str | None = None) -> None:
        self._position(topic, key)["cursor"] = [cursor[0], cursor[1].hex()]
        self._save()

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._path is None:
            return {}
        try:
            data = json.loads(self._path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable %s: %s", self._path, exc)
            return {}
        stores = data.get("stores") if isinstance(data, dict) else None
        return stores if isinstance(stores, dict) else {}

    def _save(self) -> None:
        if self._path is None:
            return
        tmp = self._path.with_suffix(".tmp")
        data = json.dumps({"version": 1, "stores": self._state}, sort_keys=True).encode()
        try:
            # 0600 whatever the umask, like every file of a data directory (it names the
            # stores and topics this participant reads); fchmod for a leftover tmp file.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o600)
                f.write(data)
            os.replace(tmp, self._path)
        except OSError as exc:
            logger.warning("could not save %s: %s", self._path, exc)

    def _report(self, progress: CatchUpProgress) -> None:
        if self._progress is None:
            return
        try:
            self._progress(progress)
        except Exception:
            logger.exception("progress callback failed")


def _cursor(value: object) -> tuple[int, bytes] | None:
    if not isinstance(value, list) or len(value) != 2:
        return None
    try:
        return int(value[0]), bytes.fromhex(str(value[1]))
    except (TypeError, ValueError):
        return None
