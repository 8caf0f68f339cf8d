"""What every part of the report's computation shares: the limits of what is listed,
the input error, the event schema as Spark sees it, and the DataFrame helpers that
keep a table for later queries.

The lowest module of the pipeline's computation: :mod:`pipeline.compute`,
:mod:`pipeline.explain` and :mod:`pipeline.causes` import it, it imports none of
them (nor :mod:`pipeline.report`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pipeline.errors import PipelineError
from pipeline.schema import EVENT_SCHEMA

__all__ = ["CSV_LIMIT", "LIST_LIMIT", "NODES_PER_MESSAGE", "TIME_BUCKETS", "InputError",
           "fresh", "hash_id", "kept", "spark_schema", "sql_conf"]

#: Entries listed per channel in summary.json / the HTML and rows in the CSVs
#: (the Parquet detail has all).
LIST_LIMIT = 200
#: Rows of missing.csv / causal_violations.csv (the Parquet detail has all).
CSV_LIMIT = 10_000
#: Participants named per missing message in summary.json.
NODES_PER_MESSAGE = 50
#: Buckets of the convergence-over-time chart.
TIME_BUCKETS = 60


class InputError(PipelineError):
    """Malformed rows (the caller turns it into its ReportError)."""


def spark_schema() -> Any:
    """:data:`EVENT_SCHEMA` as a Spark schema (every column nullable)."""
    from pyspark.sql import types as T

    mapping = {"string": T.StringType(), "int64": T.LongType()}
    fields = []
    for f in EVENT_SCHEMA:
        if str(f.type).startswith("list"):
            dt: Any = T.ArrayType(T.StringType())
        else:
            dt = mapping[str(f.type)]
        fields.append(T.StructField(f.name, dt, True))
    return T.StructType(fields)


@contextlib.contextmanager
def sql_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """SQL settings for the plans made inside the block (restored after it)."""
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def kept(df: Any) -> Any:
    """``df`` computed now and kept for the later queries that read it.

    An eager local checkpoint rather than ``persist()``: the plan of every later
    query refers to the kept rows instead of repeating the plan that made them
    (over Spark Connect the client sends each query's whole plan tree, and the
    server analyses it again to find the cache: 4-6x slower at 100k events). The kept
    rows keep the column identities of the plan that made them, so they get new ones
    here (the kept table can then meet its own inputs in a join); a kept table that
    meets itself in a join needs :func:`fresh` on one side.
    """
    from pyspark import StorageLevel

    return fresh(df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK))


def fresh(df: Any) -> Any:
    """The same rows under new column identities, for the second side of a join
    whose sides both read one kept table (Spark cannot tell them apart)."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(c).alias(c) for c in df.columns])


def hash_id(col: str) -> Any:
    """A non-null id as a 64-bit integer (``xxhash64``; null stays null)."""
    from pyspark.sql import functions as F

    return F.when(F.col(col).isNotNull(), F.xxhash64(col))
