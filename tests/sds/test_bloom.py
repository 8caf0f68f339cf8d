"""Bloom filter: nim/js-waku hashing, sizing, wire layout, rollover."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sds
from sds.bloom import (
    BloomFilter,
    BloomParams,
    RollingBloomFilter,
    bloom_params,
    contains_positions,
    positions_in,
    positions_mask,
)

VECTORS = json.loads((Path(__file__).parent / "data" / "nim_hashn_vectors.json").read_text())[
    "vectors"
]


def raw_hashes(s: str, m: int) -> tuple[int, int]:
    """hA, hB computed straight from PROTOCOL.md with mmh3 (independent of sds.bloom)."""
    h_a = abs(mmh3.hash(s, 0, signed=True)) % m
    h_b = abs(mmh3.hash(s + " b", 0, signed=True)) % m
    return h_a, h_b


def raw_positions(s: str, m: int, k: int) -> list[int]:
    h_a, h_b = raw_hashes(s, m)
    return [abs(h_a + i * h_b) % m for i in range(k)]


def bit_of(byte_index: int, mask: int) -> int:
    """Invert the documented layout: byte 8*(h//64) + 7 - (h%64)//8, bit h%8."""
    assert mask and mask & (mask - 1) == 0, "mask must be a single bit"
    word, in_word = divmod(byte_index, 8)
    return word * 64 + (7 - in_word) * 8 + (mask.bit_length() - 1)


def params_with(m: int, k: int) -> BloomParams:
    p = BloomParams(1, 0.5)
    p.m = m
    p.k = k
    return p


@pytest.mark.parametrize(
    "vec", VECTORS, ids=[f"{v['input']!r}-n{v['n']}-m{v['maxValue']}" for v in VECTORS]
)
def test_nim_hashn_vectors(vec: dict) -> None:
    """PROTOCOL.md "Bloom filter": hashN(s, n, m) = |hA + n*hB| % m with hA=|H(s)|%m,
    hB=|H(s+" b")|%m matches nim-sds's published vectors, both from the raw formula
    and as sds.bloom.positions_in places the n-th bit."""
    s, n, m = vec["input"], vec["n"], vec["maxValue"]
    exp = vec["expected"]
    assert raw_hashes(s, m) == (exp["hashA"], exp["hashB"])
    assert raw_positions(s, m, n + 1)[n] == exp["hashC"]
    pos = positions_in(s, params_with(m, n + 1))
    assert len(pos) == n + 1
    assert bit_of(*pos[n]) == exp["hashC"]


def test_positions_in_matches_raw_formula_for_default_params() -> None:
    """PROTOCOL.md "Bloom filter": the k positions of an id in the default filter are
    |hA + i*hB| % m, i < k, placed at byte 8*(h//64)+7-(h%64)//8, bit h%8."""
    params = bloom_params(10_000, 0.001)
    rng = random.Random(5)
    for _ in range(200):
        s = f"{rng.getrandbits(256):064x}"
        got = [bit_of(b, mask) for b, mask in positions_in(s, params)]
        assert got == raw_positions(s, 150_000, 10)
        for (b, mask), h in zip(positions_in(s, params), got, strict=True):
            assert b == 8 * (h // 64) + 7 - (h % 64) // 8
            assert mask == 1 << (h % 8)


def test_default_sizing() -> None:
    """PROTOCOL.md "Bloom filter": n=10,000, p=0.001 give k=10, m=150,000 bits in
    2,344 words = 18,752 bytes; the issue's BloomFilter() defaults are these."""
    f = BloomFilter()
    assert (f.params.k, f.params.m, f.params.nbytes) == (10, 150_000, 18_752)
    assert len(f.to_bytes()) == 18_752
    assert f.to_bytes() == bytes(18_752)
    assert len(RollingBloomFilter().to_bytes()) == 18_752


@pytest.mark.parametrize(
    ("n", "p", "k", "m"),
    [(10_000, 0.001, 10, 150_000), (1_000, 0.01, 7, 10_000), (100, 0.1, 3, 500), (1, 0.5, 1, 2)],
)
def test_sizing_formula(n: int, p: float, k: int, m: int) -> None:
    """PROTOCOL.md "Bloom filter": bits_per_elem = ceil(-ln p / ln2^2), k = round(ln2 *
    bits_per_elem), m = n * bits_per_elem, 1 + m//64 words of 8 bytes."""
    params = BloomFilter(n, p).params
    assert (params.k, params.m) == (k, m)
    assert params.nbytes == 8 * (1 + m // 64)


def test_byte_layout_matches_big_endian_words() -> None:
    """PROTOCOL.md "Bloom filter" serialisation: bit h is bit h%64 (LSB first) of word
    h//64, each word written big-endian, no header; built here with struct."""
    rng = random.Random(1)
    ids = [f"id-{rng.random()}" for _ in range(40)]
    f = BloomFilter(100, 0.01)
    m, k = f.params.m, f.params.k
    words = [0] * (1 + m // 64)
    for s in ids:
        f.add(s)
        for h in raw_positions(s, m, k):
            words[h // 64] |= 1 << (h % 64)
    expected = b"".join(struct.pack(">Q", w) for w in words)
    assert f.to_bytes() == expected


def test_single_bit_positions() -> None:
    """PROTOCOL.md "Bloom filter": bits 0, 7, 8, 63 and 64 land at bytes 7, 7, 6, 0, 15."""
    f = BloomFilter(100, 0.01)
    for h, (byte, bit) in {0: (7, 0), 7: (7, 7), 8: (6, 0), 63: (0, 7), 64: (15, 0)}.items():
        f.clear()
        f.add_positions(positions_in_bit(h))
        data = f.to_bytes()
        assert data[byte] == 1 << bit
        assert sum(bin(b).count("1") for b in data) == 1


def positions_in_bit(h: int) -> list[tuple[int, int]]:
    return [(8 * (h // 64) + 7 - (h % 64) // 8, 1 << (h % 8))]


def test_membership_and_no_false_negatives() -> None:
    """Spec "Participant state": the filter represents received ids: every added id
    is a member; non-str items are never members."""
    f = BloomFilter(1_000, 0.01)
    ids = [f"m{i}" for i in range(1_000)]
    for s in ids:
        f.add(s)
    assert all(s in f for s in ids)
    assert 123 not in f
    assert f.count == 1_000


def test_from_bytes_round_trip() -> None:
    """PROTOCOL.md "Bloom filter": a filter rebuilt from its wire bytes has the same
    bytes and the same members."""
    f = BloomFilter()
    ids = [f"{i:064x}" for i in range(300)]
    for s in ids:
        f.add(s)
    g = BloomFilter.from_bytes(f.to_bytes())
    assert g.to_bytes() == f.to_bytes()
    assert all(s in g for s in ids)
    small = BloomFilter(50, 0.1)
    small.add("x")
    assert BloomFilter.from_bytes(small.to_bytes(), 50, 0.1).to_bytes() == small.to_bytes()


@pytest.mark.parametrize("delta", [-8, -1, 1, 8])
def test_from_bytes_wrong_length_raises_value_error(delta: int) -> None:
    """PROTOCOL.md "Bloom filter": a filter of another length is refused (ValueError),
    not read as zeros."""
    data = bytes(18_752 + delta)
    with pytest.raises(ValueError, match="18752"):
        BloomFilter.from_bytes(data)


def test_invalid_sizing_rejected() -> None:
    """Spec "Participant state": filter sizing must be meaningful (capacity >= 1, 0<p<1)."""
    with pytest.raises(ValueError, match="capacity"):
        BloomFilter(0, 0.01)
    with pytest.raises(ValueError, match="error rate"):
        BloomFilter(10, 1.0)


def measured_fp_rate(f: BloomFilter, probes: int, seed: int) -> float:
    rng = random.Random(seed)
    hits = sum(f"probe-{rng.getrandbits(128):032x}" in f for _ in range(probes))
    return hits / probes


def test_rolling_filter_bounds_false_positives_plain_filter_saturates() -> None:
    """Spec "Participant state": the filter SHOULD be rolled over at capacity; PROTOCOL.md:
    sdschat's rolls over. After 5x capacity insertions the rolling filter's measured
    false-positive rate is <= the design rate while a plain filter says "yes" to
    (almost) everything."""
    cap, rate = 2_000, 0.01
    rolling = RollingBloomFilter(cap, rate)
    plain = BloomFilter(cap, rate)
    for i in range(5 * cap):
        s = f"ins-{i}"
        rolling.add(s)
        plain.add(s)
    probes = 20_000
    fp_rolling = measured_fp_rate(rolling, probes, 11)
    fp_plain = measured_fp_rate(plain, probes, 11)
    assert fp_rolling <= rate
    assert fp_plain > 0.5
    assert rolling.false_positive_rate() <= rate
    assert len(rolling.items()) <= cap


def test_rolling_filter_keeps_most_recent_ids() -> None:
    """PROTOCOL.md "Bloom filter": rollover rebuilds from the most recent ids: after
    many insertions all of the last capacity//2 ids are members."""
    cap = 1_000
    f = RollingBloomFilter(cap, 0.001)
    ids = [f"r{i}" for i in range(7 * cap + 123)]
    for s in ids:
        f.add(s)
    recent = ids[-(cap // 2) :]
    assert all(s in f for s in recent)
    assert f.items()[-len(recent) :] == recent
    # Old ids are gone (a few may be false positives at <= 0.1%).
    old_hits = sum(s in f for s in ids[:cap])
    assert old_hits <= 10


def test_rolling_filter_is_byte_compatible() -> None:
    """PROTOCOL.md "Bloom filter": a rolled filter is byte-identical to a plain filter
    holding the same ids, so any receiver reads it."""
    cap = 500
    f = RollingBloomFilter(cap, 0.01)
    for i in range(3 * cap + 7):
        f.add(f"x{i}")
    plain = BloomFilter(cap, 0.01)
    for s in f.items():
        plain.add(s)
    assert f.to_bytes() == plain.to_bytes()
    assert RollingBloomFilter.from_items(f.items(), cap, 0.01).to_bytes() == f.to_bytes()


def test_public_names() -> None:
    """Issue 2 "Keep these public names": sds.BloomFilter with add / in / to_bytes /
    from_bytes, and a rolling variant."""
    f = sds.BloomFilter(capacity=10_000, error_rate=0.001)
    f.add("abc")
    assert "abc" in f
    assert "abc" in sds.BloomFilter.from_bytes(f.to_bytes(), capacity=10_000, error_rate=0.001)
    assert issubclass(sds.RollingBloomFilter, sds.BloomFilter)


@settings(max_examples=100, deadline=None)
@given(
    held=st.lists(st.text(min_size=1, max_size=20), max_size=300),
    probes=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=50),
)
def test_positions_mask_tests_what_the_positions_test(held: list[str], probes: list[str]) -> None:
    """``positions_mask`` (one integer AND per id, the acknowledgement check) says an id
    is in a filter exactly when every one of its (byte, bit) positions is set."""
    f = BloomFilter(capacity=250, error_rate=0.001)
    for item in held:
        f.add(item)
    data = f.to_bytes()
    bits = int.from_bytes(data, "little")
    for item in [*held[:20], *probes]:
        pos = positions_in(item, f.params)
        mask = positions_mask(pos)
        assert (bits & mask == mask) == contains_positions(data, pos) == (item in f)
        assert mask.bit_count() == len({(i, m) for i, m in pos})
