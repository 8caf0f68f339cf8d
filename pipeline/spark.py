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
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

__all__ = ["CONNECT_MODULES", "CONNECT_PORT", "QUICK_JVM_OPTIONS", "QUICK_JVM_ROWS",
           "SERVER_CODEGEN_CACHE", "SMALL_CLUSTER_SHUFFLE_PARTITIONS",
           "connect_missing", "connect_server_command", "connect_shuffle_partitions",
           "local_conf", "local_shuffle_partitions", "make_session", "report_shuffle_partitions",
           "spark_defaults", "spark_home", "submit_conf"]

#: Python modules the Spark Connect client imports (distribution names differ).
CONNECT_MODULES = {
    "grpc": "grpcio", "grpc_status": "grpcio-status",
    "google.rpc": "googleapis-common-protos", "zstandard": "zstandard",
    "pandas": "pandas", "pyarrow": "pyarrow",
}

#: A local driver JVM started for an input of at most ``QUICK_JVM_ROWS`` events
#: gets ``QUICK_JVM_OPTIONS``: the quick just-in-time compiler only (C1) and the
#: serial collector. Such a report is over before the optimising compiler (C2)
#: pays back its compile time on two cores: 100k events take 12 s instead of
#: 17.5 s, 1M 21 s instead of 25 s; 10M take 112 s instead of 63 s with C1, so
#: larger inputs keep the JVM's defaults (docs/report.md, "Figures").
QUICK_JVM_ROWS = 1_000_000
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: A report on a cluster master (``--master spark://...``) of at most
#: ``QUICK_JVM_ROWS`` events uses this many shuffle partitions, not Spark's 200
#: (each of the report's ~15 shuffles would run 200 tasks of a few rows), and its
#: executors get ``QUICK_JVM_OPTIONS`` as its driver does: a 100-event report on a
#: one-core executor took 119 s with Spark's defaults, 101 s with 2 partitions,
#: 69 s with both (2026-12-07, this 2-core machine, quiet; docs/report.md).
SMALL_CLUSTER_SHUFFLE_PARTITIONS = 8


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


def local_shuffle_partitions(master: str | None) -> int | None:
    """The report's shuffle partitions on ``local[N]``: 4 x N (``*``: the cores).

    ``None`` for any other master (the cluster's own setting applies). Spark's
    default of 200 makes a 100k-event report run thousands of tasks of a few rows.
    """
    if not master or not master.startswith("local"):
        return None
    n = master[6:-1] if master.startswith("local[") else "1"
    try:
        cores = (os.cpu_count() or 2) if n in ("*", "") else int(n.split(",")[0])
    except ValueError:
        cores = 2
    return max(2, 4 * cores)


def _small(rows: int | None) -> bool:
    return rows is not None and rows <= QUICK_JVM_ROWS


def spark_defaults() -> dict[str, str]:
    """The operator's ``spark-defaults.conf`` (in ``SPARK_CONF_DIR``, else
    ``SPARK_HOME/conf``, else the pip package's ``conf/``), key -> value; ``{}`` when
    there is none or it cannot be read. The defaults sdschat chooses for a session
    (quick JVMs, shuffle partitions, a local driver's memory) never replace a key set
    there; ``--conf`` does."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or str(
        Path(os.environ.get("SPARK_HOME") or spark_home()) / "conf")
    try:
        text = (Path(conf_dir) / "spark-defaults.conf").read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        # a Java properties line: the key ends at whitespace, '=' or ':'
        end = next((i for i, ch in enumerate(line) if ch in " \t=:"), len(line))
        out[line[:end]] = line[end:].lstrip(" \t").removeprefix("=").removeprefix(":").strip()
    return out


def _chosen_partitions(master: str, rows: int | None) -> int | None:
    """The rule: the local default on ``local[N]``; on any other master
    :data:`SMALL_CLUSTER_SHUFFLE_PARTITIONS` for a small input, else ``None``."""
    local = local_shuffle_partitions(master)
    if local is not None:
        return local
    return SMALL_CLUSTER_SHUFFLE_PARTITIONS if _small(rows) else None


def report_shuffle_partitions(master: str | None, rows: int | None) -> int | None:
    """The shuffle partitions of a report whose driver runs here, when the user set
    none (:func:`_chosen_partitions`); ``None`` (the cluster's setting) when
    spark-defaults.conf sets them, and under spark-submit (``master`` ``None``: see
    :func:`submit_conf`)."""
    if master is None or "spark.sql.shuffle.partitions" in spark_defaults():
        return None
    return _chosen_partitions(master, rows)


def submit_conf(given: dict[str, str], rows: int | None) -> dict[str, str]:
    """What a report under spark-submit adds to the submitter's settings (``given``,
    read from its running JVM, spark-defaults.conf included), for what the submitter
    left unset: the shuffle partitions of :func:`_chosen_partitions` and, off a local
    master, the executors' quick JVM (its driver JVM runs already)."""
    master = given.get("spark.master", "")
    chosen: dict[str, str] = {}
    partitions = _chosen_partitions(master, rows)
    if partitions is not None:
        chosen["spark.sql.shuffle.partitions"] = str(partitions)
    if not master.startswith("local") and _small(rows):
        chosen["spark.executor.extraJavaOptions"] = QUICK_JVM_OPTIONS
    return {k: v for k, v in chosen.items() if k not in given}


#: Spark's own default of ``spark.sql.shuffle.partitions``.
SPARK_DEFAULT_SHUFFLE_PARTITIONS = "200"


def connect_shuffle_partitions(server_master: str | None, current: str | None) -> int | None:
    """The shuffle partitions a report sets for its session on a Connect server:
    the local default when the server runs ``local[N]`` (or ``local``) and was left
    at Spark's default of 200; ``None`` (the server's setting stands) otherwise:
    a cluster, ``local[*]`` (its cores are the server's, unknown here), or a server
    given its own value (``sdschat report-server`` sets 4 x its cores)."""
    if current != SPARK_DEFAULT_SHUFFLE_PARTITIONS or not server_master:
        return None
    if "*" in server_master:
        return None
    return local_shuffle_partitions(server_master)


def local_conf(
    master: str | None,
    *,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    executor_memory: str | None = None,
    ui: bool = False,
    rows: int | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The Spark settings of a session whose driver runs in this process (not
    Spark Connect); ``extra`` (the user's ``--conf``) wins over every default."""
    local = master is not None and master.startswith("local")
    conf: dict[str, str] = {
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
    }
    if _loopback(master):
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    chosen: dict[str, str] = {}  # our defaults: the operator's spark-defaults.conf wins
    if master is not None:
        if driver_memory:
            conf["spark.driver.memory"] = driver_memory
        elif local:
            chosen["spark.driver.memory"] = "2g"
    if master is not None and _small(rows):
        # the driver JVM starts in this process on any master (client mode); a
        # cluster's executors do this report's work too (under spark-submit, master
        # None, the submitter's settings stand)
        chosen["spark.driver.extraJavaOptions"] = QUICK_JVM_OPTIONS
        if not local:
            chosen["spark.executor.extraJavaOptions"] = QUICK_JVM_OPTIONS
    if chosen:
        operator = spark_defaults()
        conf.update({k: v for k, v in chosen.items() if k not in operator})
    if executor_memory:
        conf["spark.executor.memory"] = executor_memory
    conf.update(extra or {})
    return conf


#: Generated classes a report server keeps compiled (Spark's default: 100; a
#: 1M-event report compiles about 320 plans' classes, a few more per new input).
SERVER_CODEGEN_CACHE = 1000

#: Spark Connect's usual port.
CONNECT_PORT = 15002


def spark_home() -> Path:
    """The Spark that the pyspark package ships (``bin/spark-class``, the jars)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def connect_server_command(
    master: str = "local[2]",
    *,
    host: str = "127.0.0.1",
    port: int = CONNECT_PORT,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of a Spark Connect server in the foreground: the pip
    package's ``spark-class`` running ``SparkConnectServer`` on ``master``,
    listening on ``host:port``, no UI, warnings and errors only in its log (at
    INFO it logs every plan it receives), the status of its last 100 jobs kept,
    the code generated for up to :data:`SERVER_CODEGEN_CACHE` plans kept compiled
    (reports reuse it), on ``local[N]`` 4 x N shuffle partitions for every session. ``conf``
    (``spark.*``) wins over these settings."""
    home = spark_home()
    env = dict(os.environ)
    env["SPARK_HOME"] = str(home)
    env.pop("SPARK_REMOTE", None)
    settings = {
        "spark.ui.enabled": "false",
        "spark.log.level": "WARN",
        # a server that stays up keeps the status of its recent work only (Spark's
        # 1,000 jobs, stages and SQL executions are about 20 reports': the live heap
        # grew from 288 to 411-450 MB over 100 reports; 248-322 MB with these)
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.sql.ui.retainedExecutions": "50",
        "spark.ui.retainedTasks": "10000",
        # the classes generated for a report's plans stay compiled for the next
        # report: one report compiles about 320 (Spark keeps 100, so a warm server
        # compiled every one again, 4-9 s per 1M-event report; with room for
        # SERVER_CODEGEN_CACHE, 19 of them)
        "spark.sql.codegen.cache.maxEntries": str(SERVER_CODEGEN_CACHE),
        "spark.sql.session.timeZone": "UTC",
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
    }
    partitions = local_shuffle_partitions(master)  # this machine's cores: the server's
    if partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(partitions)
    if _loopback(master):
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings.update(conf or {})
    argv = [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.SparkSubmit",
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name", "sdschat-report-server", "--master", master]
    if driver_memory:
        argv += ["--driver-memory", driver_memory]
    for k, v in settings.items():
        argv += ["--conf", f"{k}={v}"]
    return [*argv, "spark-internal"], env


def _loopback(master: str | None) -> bool:
    """Whether a driver for ``master`` binds to 127.0.0.1: a local master, or a
    cluster master on the loopback address."""
    if master is None:
        return False
    if master.startswith("local"):
        return True
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
    rows: int | None = None,
) -> Any:
    """Return a (new or existing) SparkSession.

    ``master=None`` leaves the master (and addresses) to ``spark-submit``;
    ``remote`` makes a Spark Connect session (master, memory and JVM settings are
    then the server's; without ``shuffle_partitions``, see
    :func:`connect_shuffle_partitions`). ``driver_memory`` applies whenever
    this process starts the driver JVM (default 2g for local masters);
    ``executor_memory`` to cluster masters.
    ``rows``: the input's events, when known (a small input starts quick driver and
    executor JVMs, see ``QUICK_JVM_ROWS``).
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
        if shuffle_partitions is None:
            shuffle_partitions = connect_shuffle_partitions(
                session.conf.get("spark.master", None),
                session.conf.get("spark.sql.shuffle.partitions", None))
        if shuffle_partitions is not None:
            runtime["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
        runtime.update(extra or {})
        for k, v in runtime.items():
            session.conf.set(k, v)
        return session

    if _loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    conf = local_conf(master, shuffle_partitions=shuffle_partitions,
                      driver_memory=driver_memory, executor_memory=executor_memory,
                      ui=ui, rows=rows, extra=extra)
    if master is None:  # under spark-submit: only what the submitter left unset
        from pyspark import SparkConf

        for k, v in submit_conf(dict(SparkConf().getAll()), rows).items():
            conf.setdefault(k, v)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF" if quiet else "ERROR")
    return spark
