"""Bloom filters, byte-compatible with js-waku's ``@waku/sds`` and nim-sds.

Layout and hashing (see PROTOCOL.md, "Bloom filter"):

* sizing from capacity ``n`` and error rate ``p``:
  ``bits_per_elem = ceil(-ln p / ln(2)^2)``, ``k = round(ln 2 * bits_per_elem)``,
  ``m = n * bits_per_elem`` bits stored in ``1 + m // 64`` 64-bit words;
* bit positions of an id ``s``: ``hA = |H(s)| % m``, ``hB = |H(s + " b")| % m``,
  ``pos_i = |hA + i * hB| % m`` for ``0 <= i < k``, where ``H`` is MurmurHash3
  x86_32 (seed 0) of the UTF-8 bytes read as a signed 32-bit int;
* serialisation without header: word ``w`` is written big-endian at byte
  ``8 * w``; bit ``b`` of a word is its ``b``-th least significant bit.

We keep the filter directly in its wire layout (a ``bytearray``), so
:meth:`BloomFilter.to_bytes` is a copy and membership tests against a received
filter need no parsing at all.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from functools import lru_cache

import mmh3

__all__ = [
    "BloomFilter",
    "BloomParams",
    "RollingBloomFilter",
    "bloom_params",
    "positions_in",
    "positions_mask",
]

#: Ids whose bit positions :func:`positions_in` keeps (about 0.8 KB each with the
#: default filter's 10 hashes).
POSITIONS_CACHED = 4_096


class BloomParams:
    """Derived sizing of a filter: ``k`` hashes over ``m`` bits in ``nbytes`` bytes."""

    __slots__ = ("capacity", "error_rate", "k", "m", "nbytes")

    def __init__(self, capacity: int, error_rate: float) -> None:
        if capacity < 1:
            raise ValueError("bloom filter capacity must be >= 1")
        if not 0.0 < error_rate < 1.0:
            raise ValueError("bloom filter error rate must be in (0, 1)")
        bits_per_elem = math.ceil(-math.log(error_rate) / (math.log(2) ** 2))
        self.capacity = capacity
        self.error_rate = error_rate
        self.k: int = round(math.log(2) * bits_per_elem)
        self.m: int = capacity * bits_per_elem
        self.nbytes: int = 8 * (1 + self.m // 64)

    def __repr__(self) -> str:
        return (
            f"BloomParams(capacity={self.capacity}, error_rate={self.error_rate}, "
            f"k={self.k}, m={self.m}, nbytes={self.nbytes})"
        )


_PARAMS_CACHE: dict[tuple[int, float], BloomParams] = {}


def bloom_params(capacity: int, error_rate: float) -> BloomParams:
    """Return the (cached) sizing for ``capacity`` and ``error_rate``."""
    key = (capacity, error_rate)
    params = _PARAMS_CACHE.get(key)
    if params is None:
        params = BloomParams(capacity, error_rate)
        _PARAMS_CACHE[key] = params
    return params


def hash_pair(item: str, m: int) -> tuple[int, int]:
    """The two base hashes ``(hA, hB)`` of ``item`` for an ``m``-bit filter."""
    return (
        abs(mmh3.hash(item, 0, signed=True)) % m,
        abs(mmh3.hash(item + " b", 0, signed=True)) % m,
    )


def _positions_from_pair(h_a: int, h_b: int, params: BloomParams) -> tuple[tuple[int, int], ...]:
    m = params.m
    out = []
    for i in range(params.k):
        h = abs(h_a + i * h_b) % m
        out.append(((h >> 6 << 3) + 7 - ((h & 63) >> 3), 1 << (h & 7)))
    return tuple(out)


@lru_cache(maxsize=POSITIONS_CACHED)
def positions_in(item: str, params: BloomParams) -> tuple[tuple[int, int], ...]:
    """Return the ``k`` (byte index, bit mask) pairs of ``item`` in the wire layout.

    The result is shared (a small cache of the newest ids): every participant of a
    simulated channel, and every filter of a node, that tests or adds the same id
    gets the same tuple, computed once (``sdschat sim`` at 10,000 members kept 530
    bytes of positions per message per member before). Callers that test the same
    id against many filters may still keep it.
    """
    h_a, h_b = hash_pair(item, params.m)
    return _positions_from_pair(h_a, h_b, params)


def contains_positions(data: bytes | bytearray, positions: Iterable[tuple[int, int]]) -> bool:
    """True if every (byte, mask) of ``positions`` is set in ``data``."""
    return all(data[idx] & mask for idx, mask in positions)


def positions_mask(positions: Iterable[tuple[int, int]]) -> int:
    """The ``(byte, mask)`` pairs of :func:`positions_in` as one integer over a filter's
    bytes read little-endian (``int.from_bytes(data, "little")``): an item is in a
    filter ``f`` read so when ``f & mask == mask``. One integer AND tests all ``k``
    bits at once, for callers that test many items against one filter."""
    out = 0
    for idx, mask in positions:
        out |= mask << (idx << 3)
    return out


class BloomFilter:
    """A fixed-size bloom filter of message ids (strings).

    ``BloomFilter(capacity=10_000, error_rate=0.001)`` gives js-waku's default
    filter: 10 hashes over 150,000 bits, 18,752 bytes on the wire.
    """

    __slots__ = ("_bits", "count", "params")

    def __init__(self, capacity: int = 10_000, error_rate: float = 0.001) -> None:
        self.params = bloom_params(capacity, error_rate)
        self._bits = bytearray(self.params.nbytes)
        #: Number of ``add`` calls since the filter was created or cleared.
        self.count = 0

    @property
    def capacity(self) -> int:
        return self.params.capacity

    @property
    def error_rate(self) -> float:
        return self.params.error_rate

    def add(self, item: str) -> None:
        """Insert ``item``."""
        self.add_positions(positions_in(item, self.params))

    def add_positions(self, positions: Iterable[tuple[int, int]]) -> None:
        """Insert an item whose positions were computed with :func:`positions_in`."""
        bits = self._bits
        for idx, mask in positions:
            bits[idx] |= mask
        self.count += 1

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):
            return False
        return contains_positions(self._bits, positions_in(item, self.params))

    def contains_positions(self, positions: Iterable[tuple[int, int]]) -> bool:
        """Membership test with precomputed positions."""
        return contains_positions(self._bits, positions)

    def clear(self) -> None:
        """Forget every item."""
        self._bits = bytearray(self.params.nbytes)
        self.count = 0

    def to_bytes(self) -> bytes:
        """The wire form: ``1 + m // 64`` big-endian 64-bit words, no header."""
        return bytes(self._bits)

    def fill_ratio(self) -> float:
        """Fraction of the ``m`` bits that are set (drives the real false-positive rate)."""
        return int.from_bytes(self._bits, "big").bit_count() / self.params.m

    def false_positive_rate(self) -> float:
        """Estimated false-positive probability at the current fill: ``fill ** k``."""
        return self.fill_ratio() ** self.params.k

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray, capacity: int = 10_000, error_rate: float = 0.001
    ) -> BloomFilter:
        """Rebuild a filter from its wire form.

        Raises :class:`ValueError` if ``data`` is not exactly the size that
        ``capacity`` and ``error_rate`` imply (js-waku reads a short filter as
        zeros or throws; we refuse, and the protocol core ignores such a filter
        for acknowledgements).
        """
        f = cls(capacity, error_rate)
        if len(data) != f.params.nbytes:
            raise ValueError(
                f"bloom filter is {len(data)} bytes, expected {f.params.nbytes} "
                f"for capacity={capacity}, error_rate={error_rate}"
            )
        f._bits[:] = data
        # Unknown after parsing; estimate from the fill so the rolling logic stays sane.
        f.count = 0
        return f

    def __repr__(self) -> str:
        return (
            f"BloomFilter(capacity={self.capacity}, error_rate={self.error_rate}, "
            f"count={self.count})"
        )


class RollingBloomFilter(BloomFilter):
    """A bloom filter that never saturates, with the same wire form as :class:`BloomFilter`.

    js-waku's filter only grows: after ``capacity`` insertions its false-positive
    rate exceeds the design rate, and past a few times that it answers "yes" to
    everything, so bloom-filter acknowledgements become meaningless.

    Policy: the filter remembers the ids it holds, newest last. When it holds
    ``capacity`` ids it is rebuilt from the most recent ``capacity // 2`` of them.
    It therefore always holds between ``capacity // 2`` and ``capacity`` of the
    most recent ids, never more than it was sized for, so its false-positive rate
    stays at or under ``error_rate``. The cost of a rebuild is amortised over the
    ``capacity // 2`` insertions between two rebuilds (a constant per insertion).
    Memory: ``capacity`` ids (references) plus the bit array.

    Receivers need nothing special: the bytes are those of a plain filter with
    the same capacity and error rate.
    """

    __slots__ = ("_recent",)

    def __init__(self, capacity: int = 10_000, error_rate: float = 0.001) -> None:
        super().__init__(capacity, error_rate)
        # The ids only: their positions are found again on a roll (cached for the
        # newest, hashed again for the rest: two hashes per insertion, amortised).
        self._recent: deque[str] = deque()

    def add(self, item: str) -> None:
        self._append(item, positions_in(item, self.params))

    def add_with_positions(self, item: str, positions: tuple[tuple[int, int], ...]) -> None:
        """Insert ``item`` whose positions the caller already computed."""
        self._append(item, positions)

    def _append(self, item: str, positions: tuple[tuple[int, int], ...]) -> None:
        if len(self._recent) >= self.params.capacity:
            self._roll()
        self._recent.append(item)
        super().add_positions(positions)

    def _roll(self) -> None:
        keep = self.params.capacity // 2
        while len(self._recent) > keep:
            self._recent.popleft()
        params = self.params
        bits = bytearray(params.nbytes)
        for item in self._recent:
            for idx, mask in positions_in(item, params):
                bits[idx] |= mask
        self._bits = bits
        self.count = len(self._recent)

    def items(self) -> list[str]:
        """The ids the filter currently holds, oldest first (for persistence)."""
        return list(self._recent)

    def clear(self) -> None:
        super().clear()
        self._recent.clear()

    @classmethod
    def from_items(
        cls, items: Iterable[str], capacity: int = 10_000, error_rate: float = 0.001
    ) -> RollingBloomFilter:
        """Rebuild from :meth:`items` (the state that persistence keeps)."""
        f = cls(capacity, error_rate)
        for item in items:
            f.add(item)
        return f
