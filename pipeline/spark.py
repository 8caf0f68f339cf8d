"""Creating the Spark session the report runs on.

``local[*]`` needs nothing beyond the project's dependencies (PySpark ships
Spark; Java 17+ must be installed). A local session binds to 127.0.0.1 only.
With ``spark://host:7077`` (or under ``spark-submit``) the same job runs on a
cluster; executors then need Python with ``pyarrow`` and ``pandas`` and this
package (``--py-files`` a zip of ``pipeline/``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["make_session"]


def make_session(
    master: str | None = "local[*]",
    *,
    app_name: str = "sdschat-report",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = "2g",
    ui: bool = False,
    extra: dict[str, str] | None = None,
) -> Any:
    """Return a (new or existing) SparkSession.

    ``master=None`` leaves the master (and addresses) to ``spark-submit``. Local
    masters bind the driver to 127.0.0.1 and use this interpreter for Python
    workers.
    """
    local = master is not None and master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    conf: dict[str, str] = {
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
    }
    if local:
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if driver_memory and master is not None and local:
        conf["spark.driver.memory"] = driver_memory
    conf.update(extra or {})
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
