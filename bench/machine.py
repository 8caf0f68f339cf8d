"""How fast this machine is today, printed beside a benchmark's figures.

The benchmarks run on shared 2-core virtual machines whose speed changes from
one session to the next (the same commit's catch-up measured 6.2 s on one day
and 9.2 s on the next), so a figure means little without the speed of the
machine it was measured on. :func:`calibrate` times three small, fixed pieces
of work that stand for what a node spends its time on:

* ``python``: 2,000,000 additions in a Python loop (the interpreter),
* ``sha256``: SHA-256 of 46 KB, the size of a default envelope (native code),
* ``sqlite``: inserting 200 rows of 52 KB into a WAL-mode SQLite file in a
  temporary directory, synchronous=NORMAL, 16 KB pages, 100 per transaction
  (native code, memory and the file system).

Each is the best of 3, so that the figure tracks the machine rather than
the moment. It takes about a second. Compare two benchmark runs only when
their calibrations are close, or scale by them.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["calibrate", "describe"]


def _best(fn: Callable[[], None], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _python_loop() -> None:
    total = 0
    for i in range(2_000_000):
        total += i


def calibrate() -> dict[str, float]:
    """``python`` ms for the loop, ``sha256`` us per 46 KB, ``sqlite`` us per 52 KB row."""
    data = os.urandom(46_000)
    rows = [(os.urandom(52_000),) for _ in range(200)]

    def sha() -> None:
        for _ in range(200):
            hashlib.sha256(data).digest()

    def inserts() -> None:
        with tempfile.TemporaryDirectory(prefix="sdschat-calibrate-") as tmp:
            db = sqlite3.connect(Path(tmp) / "c.db", isolation_level=None)
            try:
                db.execute("PRAGMA page_size = 16384")
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
                db.execute("CREATE TABLE t (b BLOB)")
                for i in range(0, len(rows), 100):
                    db.execute("BEGIN")
                    db.executemany("INSERT INTO t VALUES (?)", rows[i : i + 100])
                    db.execute("COMMIT")
            finally:
                db.close()

    return {
        "python_ms": _best(_python_loop) * 1e3,
        "sha256_us": _best(sha) / 200 * 1e6,
        "sqlite_us": _best(inserts) / len(rows) * 1e6,
    }


def describe(c: dict[str, float] | None = None) -> str:
    """One line for a benchmark's output."""
    c = calibrate() if c is None else c
    return (
        f"machine: Python loop {c['python_ms']:.0f} ms, SHA-256 of 46 KB {c['sha256_us']:.0f} us, "
        f"SQLite 52 KB row {c['sqlite_us']:.0f} us (bench/machine.py; lower is faster)"
    )


if __name__ == "__main__":
    print(describe())
