"""The ``sdschat report`` command-line options (argparse only: importing this
module costs nothing, so ``sdschat`` builds its parser without Spark or pyarrow)."""

from __future__ import annotations

import argparse

__all__ = ["add_report_arguments", "add_server_arguments"]


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    """The ``sdschat report`` options."""
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="event-log Parquet: directories from 'sdschat sim'/'sdschat export', "
                   "or files; paths or URIs Spark reads (file://, hdfs://, s3a://)")
    p.add_argument("--out", required=True,
                   help="report directory (a local path or file:// URI the driver writes)")
    p.add_argument("--master", default=None,
                   help="Spark master: local[*] (default), local[N], spark://HOST:PORT, yarn, "
                   "k8s://...; or sc://HOST:PORT (Spark Connect, same as --remote)")
    p.add_argument("--remote", default=None,
                   help="Spark Connect server sc://HOST:PORT (default: $SPARK_REMOTE if set)")
    p.add_argument("--shuffle-partitions", type=int, default=None,
                   help="spark.sql.shuffle.partitions (default 4 x local cores, also on a "
                   "Spark Connect server running local[N])")
    p.add_argument("--driver-memory", default=None,
                   help="driver memory, e.g. 2g (default 2g; not with --remote: the server's)")
    p.add_argument("--executor-memory", default=None,
                   help="executor memory on a cluster master, e.g. 4g (local masters run "
                   "in the driver: use --driver-memory)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="any Spark setting, repeatable (e.g. --conf spark.executor.cores=2)")
    p.add_argument("--spark-timeout", type=float, default=None, metavar="SECONDS",
                   help="give up, with one line and exit 2, when Spark has not started "
                   "after SECONDS, a job has had no task running for SECONDS (no executor), "
                   "or the Spark Connect server has refused connections for SECONDS "
                   "(default 60)")
    p.add_argument("--no-explain", action="store_true",
                   help="leave out the HTML's participants, timeline and duplicates "
                   "(about a third of the Spark time at 1M events, 1000 participants)")


def add_server_arguments(p: argparse.ArgumentParser) -> None:
    """The ``sdschat report-server`` options."""
    p.add_argument("--master", default="local[*]",
                   help="where the server runs the reports: local[*] (default), local[N], "
                   "spark://HOST:PORT, yarn, k8s://...")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1). Spark Connect has no "
                   "authentication: listen elsewhere only on a network you trust")
    p.add_argument("--port", type=int, default=15002, help="port to listen on (default 15002)")
    p.add_argument("--driver-memory", default="2g",
                   help="the server's driver memory, e.g. 6g for 10M events (default 2g)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="any Spark setting, repeatable")
