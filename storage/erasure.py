"""Overwriting what is deleted: a deleted text leaves the database file and its WAL.

Two things keep deleted bytes on disk in SQLite, and each has its remedy here:

* **Freed space is not overwritten.** Connections run ``PRAGMA secure_delete = FAST``
  (:func:`storage.database.prepare`): deleted cells inside b-tree pages are zeroed,
  but whole freed pages are not, so that the hot paths (the recent window's envelope
  pruning, the event log's export) do not write each freed page a second time.
  :func:`erasing` runs one write transaction with ``secure_delete = ON`` (every
  deleted cell and freed page zeroed), then puts ``FAST`` back: only the transactions
  that delete content pay for it (a deletion's redaction, ``/forget``).
* **The WAL keeps old page images.** In WAL mode a change appends a new image of each
  page it touches to ``sdschat.db-wal``; the earlier images, the deleted text in
  them, stay in the WAL's older frames until the WAL is rewound and written over,
  which on a quiet node takes minutes to hours (the text of a ``/delete`` was found
  in every member's WAL minutes later; issue 41 item 7). :func:`wipe_wal` runs
  ``PRAGMA wal_checkpoint(TRUNCATE)`` right after such a transaction: every frame is
  copied into the database file (whose pages then hold the zeroed images) and the
  WAL is truncated to zero bytes.

A truncating checkpoint needs every reader to be on the newest snapshot (a
``sdschat history`` reading beside the node, the background checkpointer in a
pass), and while it waits for them it holds off every writer: it waits at most
:data:`WIPE_WAIT_MS` (not the connection's busy timeout of seconds, which would stall
the node's commits as long) and reports failure otherwise (:func:`wipe_wal` returns
``False``). The store then hands the wipe to its
background checkpointer, which retries (:meth:`storage.checkpoint.Checkpointer.wipe_soon`);
without one the next erasure, or closing the store (the last connection deletes the
WAL), wipes it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from .database import BUSY_TIMEOUT_MS, transaction

__all__ = ["WIPE_WAIT_MS", "erasing", "wipe_wal"]

WIPE_WAIT_MS = 100
"""How long a wipe waits for readers on an older snapshot (meanwhile no one writes)."""


@contextmanager
def erasing(db: sqlite3.Connection) -> Iterator[None]:
    """One durable write transaction whose deleted cells and freed pages are zeroed
    (``secure_delete = ON``), the connection's ``FAST`` put back afterwards."""
    db.execute("PRAGMA secure_delete = ON")
    try:
        with transaction(db, durable=True):
            yield
    finally:
        db.execute("PRAGMA secure_delete = FAST")


def wipe_wal(db: sqlite3.Connection, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> bool:
    """Copy the whole WAL into the database file and truncate it to zero bytes
    (``wal_checkpoint(TRUNCATE)``, outside any transaction); whether it was done
    (``False``: a reader on an older snapshot held it up for :data:`WIPE_WAIT_MS`).
    ``busy_timeout_ms``: the connection's own busy timeout, put back afterwards."""
    db.execute(f"PRAGMA busy_timeout = {WIPE_WAIT_MS}")
    try:
        busy, _log, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    return int(busy) == 0
