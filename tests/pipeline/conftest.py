"""One local[2] Spark session for the whole test run, and helpers for sim + report.

The session binds to 127.0.0.1, has no UI and few shuffle partitions; it is
stopped at the end of the run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pipeline.spark import make_session

    session = make_session(
        "local[2]",
        app_name="sdschat-tests",
        shuffle_partitions=2,
        driver_memory="1g",
        extra={"spark.default.parallelism": "2", "spark.sql.adaptive.enabled": "false"},
    )
    yield session
    session.stop()
