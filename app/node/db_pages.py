"""The SQLite page size of a node's new database file, from its protocol sizes.

A node commits one transaction per round; at 100 msg/s in a 10-node channel
that is a transaction per received message, and each changes about nine b-tree
pages, all written whole to the WAL (and, for a typed line, fsynced before it is
published). Small envelopes (sdschat's default sizes: a 250-entry bloom filter,
a causal history of at most 30 ids, ~1.5 KB) want small pages
(:data:`storage.database.SMALL_PAGE_SIZE`); large ones (js-waku's sizes: a
10,000-entry filter and 200 ids, ~46 KB) want 16 KB pages, or each envelope is a
long chain of overflow pages (:data:`storage.database.PAGE_SIZE`). Measured in
``bench/commit_cost.py`` and ``bench/node_receive.py`` (docs/benchmarks.md). An
existing file keeps the page size it was made with.
"""

from __future__ import annotations

import math

import sds
from storage.database import PAGE_SIZE, SMALL_PAGE_SIZE

LARGE_ENVELOPE_BYTES = 8 * 1024
"""Estimated envelope size above which a new file gets :data:`PAGE_SIZE` pages."""

_ID_BYTES = 100
"""A causal-history entry in an envelope: a 64-character id and its retrieval hint."""


def envelope_estimate(config: sds.Config) -> int:
    """Bytes of a content message's envelope with ``config``'s sizes, roughly: the
    bloom filter's bits (capacity and error rate) plus the full causal history."""
    bits = -config.bloom_capacity * math.log(config.bloom_error_rate) / math.log(2) ** 2
    return int(bits / 8) + config.causal_history_size * _ID_BYTES


def page_size_for(config: sds.Config) -> int:
    """The page size for a new database of a node running ``config``."""
    return PAGE_SIZE if envelope_estimate(config) > LARGE_ENVELOPE_BYTES else SMALL_PAGE_SIZE
