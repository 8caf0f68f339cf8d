"""Creating the Spark session the report runs on.

The report uses DataFrame operations only: executors run no Python, so any
master works as it is, with nothing shipped: ``local[N]`` (PySpark ships Spark;
Java 17+ must be installed), ``spark://HOST:7077``, ``yarn``, ``k8s://...``, or
under ``spark-submit`` (``master=None``). ``remote="sc://HOST:PORT"`` connects
to a Spark Connect server instead (the client needs ``grpcio``,
``grpcio-status``, ``googleapis-common-protos`` and ``zstandard``).

A local session, or a cluster master on the loopback address, binds the driver
to 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
from typing import Any
from urllib.parse import urlparse

__all__ = ["CONNECT_MODULES", "connect_missing", "make_session"]

#: Python modules the Spark Connect client imports (distribution names differ).
CONNECT_MODULES = {
    "grpc": "grpcio", "grpc_status": "grpcio-status",
    "google.rpc": "googleapis-common-protos", "zstandard": "zstandard",
    "pandas": "pandas", "pyarrow": "pyarrow",
}


def connect_missing() -> list[str]:
    """Distributions the Spark Connect client needs that are not installed."""
    import importlib.util

    missing = []
    for module, dist in CONNECT_MODULES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(dist)
    return missing


def _loopback(master: str) -> bool:
    host = urlparse(master.split(",")[0]).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def make_session(
    master: str | None = "local[*]",
    *,
    remote: str | None = None,
    app_name: str = "sdschat-report",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    executor_memory: str | None = None,
    ui: bool = False,
    extra: dict[str, str] | None = None,
    quiet: bool = False,
) -> Any:
    """Return a (new or existing) SparkSession.

    ``master=None`` leaves the master (and addresses) to ``spark-submit``;
    ``remote`` makes a Spark Connect session (master, memory and JVM settings are
    then the server's). ``driver_memory`` applies whenever this process starts the
    driver JVM (default 2g for local masters); ``executor_memory`` to cluster masters.
    """
    from pyspark.sql import SparkSession

    if remote is not None:
        missing = connect_missing()
        if missing:
            raise RuntimeError(
                "Spark Connect needs the Python packages " + ", ".join(missing)
                + " (pip install 'pyspark[connect]')")
        builder = SparkSession.builder.remote(remote).appName(app_name)
        session = builder.getOrCreate()
        runtime = {"spark.sql.session.timeZone": "UTC", "spark.sql.adaptive.enabled": "true"}
        if shuffle_partitions is not None:
            runtime["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
        runtime.update(extra or {})
        for k, v in runtime.items():
            session.conf.set(k, v)
        return session

    local = master is not None and master.startswith("local")
    loopback = local or (master is not None and _loopback(master))
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    conf: dict[str, str] = {
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
    }
    if loopback:
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if master is not None:
        memory = driver_memory or ("2g" if local else None)
        if memory:
            conf["spark.driver.memory"] = memory
    if executor_memory:
        conf["spark.executor.memory"] = executor_memory
    conf.update(extra or {})
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF" if quiet else "ERROR")
    return spark
