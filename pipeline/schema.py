"""The event-log Parquet schema, as the pipeline sees it.

It lives in :mod:`storage.events_schema` (``sdschat export`` writes it, and
storage must not import the pipeline); this module re-exports it for
:mod:`pipeline.report` and for readers that know it under this name.
"""

from __future__ import annotations

from storage.events_schema import (
    COLUMNS,
    EVENT_SCHEMA,
    SCHEMA_VERSION,
    VERSION_KEY,
    EventRecords,
    EventWriter,
    SchemaMismatchError,
    check_schema,
    file_schema_version,
    iter_parquet_files,
)

__all__ = [
    "COLUMNS",
    "EVENT_SCHEMA",
    "SCHEMA_VERSION",
    "VERSION_KEY",
    "EventRecords",
    "EventWriter",
    "SchemaMismatchError",
    "check_schema",
    "file_schema_version",
    "iter_parquet_files",
]
