"""sdschat application room: the node runtime, the command line, the TUI and headless mode
(docs/contributing.md has the map of its packages)."""

__all__ = ["AppError"]


class AppError(Exception):
    """The root of every error :mod:`app` raises: ``except app.AppError`` catches them all
    (errors of the rooms below keep theirs: ``sds.SdsError``, ``net.NetError``,
    ``storage.StorageError``)."""
