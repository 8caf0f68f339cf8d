"""``sdschat store --migrate-to-jetstream``: move a SQLite archive into a JetStream archive.

Run with the store stopped (it takes the data directory's lock): every envelope of
the SQLite archive of ``--data-dir`` is archived into the ``--jetstream`` archive
(:class:`net.store_jetstream.JetStreamArchive.put`, so what is there already is
skipped and running it twice copies nothing twice) with its arrival time and its
writer as the SQLite store recorded them, oldest first, so the JetStream archive's
order is the SQLite one's (its retention by age and fairness see the same). Into
an archive that other store peers already fill, the migrated envelopes come after
what is there in stream order: a catch-up by position still gets them, and nodes
drop what they already have. The SQLite file is left as it was.

Progress is logged as JSON lines (``migrate_progress`` every 5,000 envelopes,
``migrate_done`` at the end); the exit status is 0 when everything was copied, 1
when JetStream could not be reached or refused (run it again: it goes on where
it stopped), 3 if the data directory is in use, 4 if the database is unusable.
"""

from __future__ import annotations

import sqlite3

from net import runner
from net.relay_log import RelayLogger
from net.store_config import StorePeerConfig
from net.store_engine import ArchiveUnavailable
from storage import ArchivedEnvelope, Store

__all__ = ["migrate", "run_migration"]

_PAGE = 500


async def migrate(config: StorePeerConfig, log: RelayLogger) -> tuple[int, int]:
    """Copy the SQLite archive of ``config.data_dir`` into ``config.jetstream``; returns
    ``(envelopes read, envelopes new in JetStream)``.

    Raises:
        storage.DataDirLockedError, storage.StorageError: the SQLite side.
        OSError: JetStream unreachable; ArchiveUnavailable: it refused.
    """
    from net.store_jetstream import JetStreamArchive

    store = await Store.open(config.data_dir)
    target = JetStreamArchive.from_config(config, log)
    target._data_dir = None  # the SQLite store holds the directory's lock
    target._with_lease = False
    read = new = 0
    try:
        await target.open()
        log.info("migrate_started", data_dir=str(config.data_dir),
                 stream=config.jetstream_stream, archive_id=target.archive_id.hex())  # fmt: skip
        position: tuple[int, bytes] = (-1, b"")
        for _ in range(1 << 40):  # bounded: each pass reads the next page or ends
            def page(db: sqlite3.Connection, after: tuple[int, bytes] = position) -> list[
                    ArchivedEnvelope]:  # fmt: skip
                rows = db.execute(
                    "SELECT hash, topic, arrival_ms, envelope, writer FROM archive"
                    " WHERE (arrival_ms, hash) > (?, ?) ORDER BY arrival_ms, hash LIMIT ?",
                    (after[0], after[1], _PAGE),
                ).fetchall()
                return [ArchivedEnvelope(bytes(h), bytes(t), int(a), bytes(e), bytes(w or b""))
                        for h, t, a, e, w in rows]  # fmt: skip

            items = await store._call(page)
            if not items:
                break
            new += await target.put(items)
            read += len(items)
            position = items[-1].cursor
            if read // 5000 != (read - len(items)) // 5000:
                log.info("migrate_progress", envelopes=read, new=new)
    finally:
        await target.close()
        await store.close()
    log.info("migrate_done", envelopes=read, new=new, already_there=read - new)
    return read, new


def run_migration(config: StorePeerConfig) -> int:
    """The blocking command (see the module docstring for the exit status)."""
    from storage import DataDirLockedError, StorageError

    log = RelayLogger(config.log_format)

    async def main() -> int:
        try:
            await migrate(config, log)
        except DataDirLockedError as exc:
            log.error("migrate_failed", error=str(exc))
            return 3
        except StorageError as exc:
            log.error("migrate_failed", error=str(exc))
            return 4
        except (OSError, ArchiveUnavailable) as exc:
            log.error("migrate_failed", error=str(exc),
                      note="nothing copied is lost; run it again to go on")  # fmt: skip
            return 1
        return 0

    return runner.run(main())
