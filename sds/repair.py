"""SDS-R: scheduling of repair requests and repair responses.

Facts (PROTOCOL.md, "SDS-R"), identical to js-waku so that peers agree on who
answers first:

* ``H(x)`` = the first 8 bytes of ``sha256(utf8(x))`` read big-endian;
* a missing message ``m`` is requested at
  ``T_req = now + H(own_id + m) % (T_max - T_min) + T_min``;
* a holder of ``m`` answers at
  ``T_resp = now + ((H(own_id) XOR H(original_sender)) * H(m)) % T_max``
  (the original sender's distance is 0: it answers at once), if it is in the
  response group: ``H(own_id + m) % g == H(original_sender + m) % g``.

Both buffers are dicts plus a heap of deadlines with lazy deletion, so adding,
cancelling and finding what is due cost ``O(log n)`` whatever their size.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
from collections.abc import Callable
from dataclasses import dataclass

from sds.message import HistoryEntry

__all__ = [
    "IncomingRepairBuffer",
    "OutgoingRepairBuffer",
    "in_response_group",
    "repair_hash",
    "t_req",
    "t_resp",
]


def repair_hash(text: str) -> int:
    """``H(x)``: first 8 bytes of sha256 of the UTF-8 text, big-endian unsigned."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def t_req(own_id: str, message_id: str, now_ms: int, t_min_ms: int, t_max_ms: int) -> int:
    """When a participant missing ``message_id`` sends its repair request."""
    return now_ms + repair_hash(own_id + message_id) % (t_max_ms - t_min_ms) + t_min_ms


#: ``H`` of what every holder of a message hashes alike (its id, its author, the
#: author + id of the response group): one SHA-256 for all the members that answer
#: the same request (a simulated channel runs thousands in one process). Bounded.
_shared_hash: Callable[[str], int] = functools.lru_cache(maxsize=4_096)(repair_hash)


def t_resp(own_id: str, original_sender: str, message_id: str, now_ms: int, t_max_ms: int) -> int:
    """When a holder of ``message_id`` rebroadcasts it in answer to a request."""
    distance = repair_hash(own_id) ^ _shared_hash(original_sender)
    return now_ms + (distance * _shared_hash(message_id)) % t_max_ms


def in_response_group(own_id: str, original_sender: str, message_id: str, groups: int) -> bool:
    """Whether ``own_id`` is in the group that answers requests for ``message_id``."""
    if groups <= 1:
        return True
    return repair_hash(own_id + message_id) % groups == _shared_hash(
        original_sender + message_id
    ) % groups


@dataclass(slots=True)
class _Pending:
    entry: HistoryEntry
    due_ms: int
    requested: bool = False


class _DeadlineBuffer:
    """Entries keyed by message id, each with a deadline; bounded."""

    __slots__ = ("_heap", "_items", "max_size")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._items: dict[str, _Pending] = {}
        self._heap: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._items

    def add(self, entry: HistoryEntry, due_ms: int) -> bool:
        """Add unless present (the first deadline is kept). Evicts the latest-due when full."""
        if entry.message_id in self._items:
            return False
        if len(self._items) >= self.max_size:
            latest = max(self._items.values(), key=lambda p: p.due_ms)
            if latest.due_ms <= due_ms:
                return False
            del self._items[latest.entry.message_id]
        self._items[entry.message_id] = _Pending(entry, due_ms)
        heapq.heappush(self._heap, (due_ms, entry.message_id))
        self._compact_if_needed()
        return True

    def remove(self, message_id: str) -> bool:
        """Cancel; returns whether it was present."""
        return self._items.pop(message_id, None) is not None

    def postpone(self, message_id: str, due_ms: int) -> bool:
        """Move a pending entry's deadline to ``due_ms`` if that is later."""
        item = self._items.get(message_id)
        if item is None or item.requested or item.due_ms >= due_ms:
            return False
        item.due_ms = due_ms
        heapq.heappush(self._heap, (due_ms, message_id))
        return True

    def reschedule(self, message_id: str, due_ms: int) -> bool:
        """Set a present entry's deadline to ``due_ms`` (earlier or later), live again."""
        item = self._items.get(message_id)
        if item is None:
            return False
        item.due_ms = due_ms
        item.requested = False
        heapq.heappush(self._heap, (due_ms, message_id))
        self._compact_if_needed()
        return True

    def next_deadline(self) -> int | None:
        """Earliest deadline of a live, not yet handled entry."""
        heap = self._heap
        while heap:
            due, mid = heap[0]
            item = self._items.get(mid)
            if item is None or item.due_ms != due or item.requested:
                heapq.heappop(heap)
                continue
            return due
        return None

    def _compact_if_needed(self) -> None:
        if len(self._heap) > 4 * len(self._items) + 64:
            self._heap = [
                (p.due_ms, mid) for mid, p in self._items.items() if not p.requested
            ]
            heapq.heapify(self._heap)

    def entries(self) -> list[tuple[HistoryEntry, int, bool]]:
        """All entries (for persistence): (entry, due_ms, requested)."""
        return [(p.entry, p.due_ms, p.requested) for p in self._items.values()]

    def restore(self, entry: HistoryEntry, due_ms: int, requested: bool) -> None:
        self._items[entry.message_id] = _Pending(entry, due_ms, requested)
        if not requested:
            heapq.heappush(self._heap, (due_ms, entry.message_id))


class OutgoingRepairBuffer(_DeadlineBuffer):
    """Ids we miss and will ask for at their ``T_req``.

    js-waku asks once per id; a request or its answer lost on the way then
    leaves the gap open until the lost timeout. We ask again: a taken request is
    re-armed ``retry_ms(message_id)`` later (the caller passes the spacing, the
    same hash-spread ``[T_min, T_max)`` delay as the first request), until the
    message arrives, someone else asks for it, or it is declared lost.
    """

    __slots__ = ()

    def take_due(
        self, now_ms: int, limit: int, retry_ms: Callable[[str], int] | None = None
    ) -> list[HistoryEntry]:
        """Up to ``limit`` due entries, each re-armed (marked requested without ``retry_ms``)."""
        out: list[HistoryEntry] = []
        heap = self._heap
        while heap and len(out) < limit:
            due, mid = heap[0]
            if due > now_ms:
                break
            heapq.heappop(heap)
            item = self._items.get(mid)
            if item is None or item.due_ms != due or item.requested:
                continue
            out.append(item.entry)
            if retry_ms is None:
                item.requested = True
            else:
                item.due_ms = now_ms + max(1, retry_ms(mid))
                heapq.heappush(heap, (item.due_ms, mid))
        return out

    def has_due(self, now_ms: int) -> bool:
        nxt = self.next_deadline()
        return nxt is not None and nxt <= now_ms

    def due_at(self, message_id: str) -> int | None:
        """When ``message_id`` is next due (``None``: not here, or requested once)."""
        item = self._items.get(message_id)
        return None if item is None or item.requested else item.due_ms

    def take_ids(
        self, message_ids: list[str], now_ms: int, retry_ms: Callable[[str], int]
    ) -> list[HistoryEntry]:
        """The entries of ``message_ids`` that are due, each re-armed ``retry_ms`` later
        (as :meth:`take_due` does; their old place in the heap is skipped)."""
        out: list[HistoryEntry] = []
        for mid in message_ids:
            item = self._items.get(mid)
            if item is None or item.requested or item.due_ms > now_ms:
                continue
            out.append(item.entry)
            item.due_ms = now_ms + max(1, retry_ms(mid))
            heapq.heappush(self._heap, (item.due_ms, mid))
        self._compact_if_needed()
        return out


class IncomingRepairBuffer(_DeadlineBuffer):
    """Ids someone asked for that we hold and will rebroadcast at their ``T_resp``."""

    __slots__ = ()

    def take_due(self, now_ms: int) -> list[HistoryEntry]:
        """Every entry due by ``now_ms``, removed from the buffer."""
        out: list[HistoryEntry] = []
        heap = self._heap
        while heap:
            due, mid = heap[0]
            if due > now_ms:
                break
            heapq.heappop(heap)
            item = self._items.get(mid)
            if item is None or item.due_ms != due:
                continue
            del self._items[mid]
            out.append(item.entry)
        return out
