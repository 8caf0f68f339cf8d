"""Copying the WAL into the database file on a thread of its own.

In WAL mode every commit appends pages to ``sdschat.db-wal``; a *checkpoint*
copies them into ``sdschat.db`` (and fsyncs both). Left to SQLite, the
connection that commits runs it: whenever the WAL passes
``wal_autocheckpoint`` pages, that commit also copies the whole WAL (64 MB:
~0.2 s plus fsyncs). That stalls the node's one storage connection, and with it
the delivery of everything queued behind the commit; during a store catch-up
that happens every ~500 messages.

:class:`Checkpointer` does that copying instead on a daemon thread with its
own connection, soon after the store has been used (``PRAGMA
wal_checkpoint(PASSIVE)``: it never waits for, nor blocks, the writer; Python's
``sqlite3`` releases the GIL while SQLite works). It cannot *reset* the WAL
(rewind it to its start), which SQLite does only once every frame is copied and
at the start of a write; the writer's own automatic checkpoint still does that
when the WAL passes its threshold, and then finds almost everything already
copied: it copies only the few frames written since the last background pass.

It also finishes a *wipe* the writer could not do at once (:mod:`storage.erasure`:
after a deletion the WAL's older frames hold the deleted text): :meth:`Checkpointer.wipe_soon`
makes its next passes truncating ones (``wal_checkpoint(TRUNCATE)``), retried every
:data:`WIPE_RETRY_S` until one succeeds.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

from .erasure import wipe_wal

logger = logging.getLogger(__name__)

CHECKPOINT_DELAY_S = 0.25
"""After the store is used, the checkpointer waits this long before copying, so
that a burst of commits is copied in one pass (each pass fsyncs twice)."""


WIPE_RETRY_S = 1.0
"""A wipe held up by a reader on an older snapshot is tried again after this long."""


class Checkpointer:
    """A daemon thread running passive checkpoints of one database file.

    :meth:`poke` after writing (cheap: sets an event); :meth:`stop` before
    closing the writer's connection. Failures are logged and counted, never
    raised: checkpointing is an optimisation, the writer's automatic
    checkpoint remains the safety net.
    """

    def __init__(self, path: Path, *, delay_s: float = CHECKPOINT_DELAY_S) -> None:
        self.path = path
        self.delay_s = delay_s
        self.passes = 0
        """Checkpoints run."""
        self.frames_copied = 0
        """WAL frames copied into the database file, summed over passes."""
        self.failures = 0
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"sdschat-checkpoint:{path.name}", daemon=True
        )
        self._backfilled = 0  # frames already copied of the current WAL
        # a truncating pass is owed while a wipe_soon() call is not answered by one that
        # succeeded (calls made during a pass are answered by the next)
        self._wipe_asks = 0  # wipe_soon() calls
        self._wipe_done = 0  # of them, answered by a truncating pass that succeeded
        self._wipe_lock = threading.Lock()
        self.wipes = 0
        """Truncating passes that succeeded (the WAL emptied after a deletion)."""
        self.wipe_tries = 0
        """Truncating passes tried, held up by a reader or not."""

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """The database was (possibly) written: checkpoint within ``delay_s``."""
        self._wake.set()

    def wipe_soon(self) -> None:
        """The WAL must be truncated (it holds deleted text, :mod:`storage.erasure`):
        the next passes truncate it, retried until one succeeds."""
        with self._wipe_lock:
            self._wipe_asks += 1
        self._wake.set()

    @property
    def wipe_pending(self) -> bool:
        """Whether a wipe asked for has not succeeded yet."""
        with self._wipe_lock:
            return self._wipe_done < self._wipe_asks

    def stop(self, timeout: float = 30.0) -> None:
        """End the thread (after a pass in progress) and close its connection."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def checkpoint_once(self, db: sqlite3.Connection) -> tuple[int, int]:
        """One passive checkpoint: ``(frames in the WAL, frames copied so far)``."""
        _busy, log, done = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        log, done = int(log), int(done)
        self.passes += 1
        if done < self._backfilled:  # the WAL was reset (rewound) since the last pass
            self._backfilled = 0
        self.frames_copied += max(0, done - self._backfilled)
        self._backfilled = done
        return log, done

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=True)
        except sqlite3.Error as e:
            self._failed(e)
            return
        try:
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA wal_autocheckpoint = 0")  # it never writes; no surprises
            while not self._stopping.is_set():
                self._wake.wait(WIPE_RETRY_S if self.wipe_pending else None)
                if self._stopping.wait(self.delay_s):
                    break
                self._wake.clear()
                try:
                    if self.wipe_pending:
                        self._wipe_once(db)
                    else:
                        self.checkpoint_once(db)
                except sqlite3.Error as e:
                    self._failed(e)
        except sqlite3.Error as e:
            self._failed(e)
        finally:
            db.close()

    def _wipe_once(self, db: sqlite3.Connection) -> None:
        """One truncating pass. The wipe stays pending until a pass succeeds (only its
        success answers the calls made before it: a caller seeing it done finds the WAL
        empty), and a wipe_soon() during the pass leaves it pending for the next."""
        with self._wipe_lock:
            asked = self._wipe_asks
        done = wipe_wal(db)
        self.wipe_tries += 1
        if done:
            self.wipes += 1
            self.passes += 1
            self._backfilled = 0
            with self._wipe_lock:
                self._wipe_done = max(self._wipe_done, asked)

    def _failed(self, error: sqlite3.Error) -> None:
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {error}"
        logger.warning("background checkpoint of %s failed: %s", self.path, self.last_error)
