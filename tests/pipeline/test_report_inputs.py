"""Input checks that need no Spark: empty, not Parquet, wrong schema; the CLI's exit status."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from pipeline.report import ReportError, validate_inputs
from pipeline.schema import EVENT_SCHEMA


def test_no_input_files(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no \.parquet files"):
        validate_inputs([tmp_path])


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such file"):
        validate_inputs([tmp_path / "nope"])


def test_zero_rows(tmp_path: Path) -> None:
    pq.write_table(EVENT_SCHEMA.empty_table(), tmp_path / "e.parquet")
    with pytest.raises(ReportError, match="no events"):
        validate_inputs([tmp_path])


def test_not_parquet(tmp_path: Path) -> None:
    (tmp_path / "e.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(ReportError, match="not a readable Parquet file"):
        validate_inputs([tmp_path])


def test_wrong_schema_names_the_problems(tmp_path: Path) -> None:
    pq.write_table(pa.table({"node_id": ["a"], "seq": ["1"]}), tmp_path / "e.parquet")
    with pytest.raises(ReportError, match="not an sdschat event log") as info:
        validate_inputs([tmp_path])
    assert "missing column 'kind'" in str(info.value)
    assert "column 'seq' is string, expected int64" in str(info.value)


def test_cli_exits_2_and_writes_nothing_on_empty_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(tmp_path), "--out", str(out)]) == 2
    assert "no .parquet files" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--master", "bogus"], "--master 'bogus' is not a Spark master"),
        (["--master", "local[x]"], "--master 'local[x]' is not a Spark master"),
        (["--driver-memory", "lots"], "--driver-memory 'lots' is not a size"),
        (["--shuffle-partitions", "0"], "--shuffle-partitions must be >= 1"),
        (["--spark-timeout", "0"], "--spark-timeout 0 is not between 1 and 86400 seconds"),
    ],
)
def test_cli_refuses_bad_spark_options_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """Each of these used to start Spark and end in a Py4J traceback (exit 1)."""
    pq.write_table(EVENT_SCHEMA.empty_table(), tmp_path / "e.parquet")
    out = tmp_path / "report"
    assert main(["report", str(tmp_path), "--out", str(out), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_cli_refuses_a_file_as_out_before_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` naming a file used to fail with FileExistsError after the whole job."""
    pq.write_table(EVENT_SCHEMA.empty_table(), tmp_path / "e.parquet")
    out = tmp_path / "taken"
    out.write_text("mine")
    assert main(["report", str(tmp_path), "--out", str(out)]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert out.read_text() == "mine"


def test_good_spark_options_pass_the_check() -> None:
    import argparse

    from pipeline.report import check_options

    for master in ("local", "local[2]", "local[*]", "local[4,2]", "spark://h:7077", "submit"):
        for memory in ("512m", "2g", "1G", "4096"):
            check_options(argparse.Namespace(
                out="x", master=master, driver_memory=memory, shuffle_partitions=2
            ))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--conf", "nokey"], "--conf 'nokey' is not KEY=VALUE with a spark.* key"),
        (["--remote", "http://h:1"], "--remote 'http://h:1' is not a Spark Connect URL"),
        (["--master", "local[2]", "--executor-memory", "1g"],
         "--executor-memory does not apply to a local master"),
        (["--remote", "sc://h:1", "--driver-memory", "1g"],
         "--driver-memory does not apply over Spark Connect"),
        (["--master", "spark://h:7077", "--remote", "sc://h:1"], "exclude each other"),
        (["--master", "spark://127.0.0.1:1"], "cannot reach the Spark master spark://127.0.0.1:1"),
    ],
)
def test_cli_refuses_bad_cluster_options_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    row = {"run": "r", "source": "sim", "node_id": "a", "seq": 1, "time_ms": 0,
           "kind": "NodeJoined"}
    pq.write_table(pa.Table.from_pylist([row], schema=EVENT_SCHEMA), tmp_path / "e.parquet")
    out = tmp_path / "report"
    assert main(["report", str(tmp_path), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_out_must_be_written_by_the_driver(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    pq.write_table(EVENT_SCHEMA.empty_table(), tmp_path / "e.parquet")
    assert main(["report", str(tmp_path), "--out", "hdfs://nn/x"]) == 2
    assert "give a local directory or a file:// URI" in capsys.readouterr().err


def test_connect_target_from_flags_and_spark_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from pipeline.report import resolve_target

    def ns(**kw: str | None) -> argparse.Namespace:
        return argparse.Namespace(**{"master": None, "remote": None, **kw})

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert resolve_target(ns()) == ("local[*]", None)
    assert resolve_target(ns(master="sc://h:15002")) == (None, "sc://h:15002")
    assert resolve_target(ns(remote="sc://h")) == (None, "sc://h")
    monkeypatch.setenv("SPARK_REMOTE", "sc://e:15002")
    assert resolve_target(ns()) == (None, "sc://e:15002")
    # an explicit master wins over the environment
    assert resolve_target(ns(master="local[2]")) == ("local[2]", None)


def test_conf_pairs() -> None:
    from pipeline.report import parse_conf

    assert parse_conf(["spark.a=1", "spark.b.c=x=y"]) == {"spark.a": "1", "spark.b.c": "x=y"}


def test_shuffle_partitions_follow_the_local_cores() -> None:
    """4 per local core, at least 2; a cluster master keeps its own setting."""
    import os

    from pipeline.spark import local_shuffle_partitions

    assert local_shuffle_partitions("local[2]") == 8
    assert local_shuffle_partitions("local[3,2]") == 12
    assert local_shuffle_partitions("local") == 4
    assert local_shuffle_partitions("local[*]") == 4 * (os.cpu_count() or 2)
    for other in ("spark://h:7077", "yarn", None, ""):
        assert local_shuffle_partitions(other) is None


def test_a_report_on_a_cluster_sets_few_shuffle_partitions_for_a_small_input() -> None:
    """Not Spark's 200 tasks per shuffle for a few thousand rows; a large or uncounted
    input keeps the cluster's setting, spark-submit the submitter's."""
    from pipeline.spark import (
        QUICK_JVM_ROWS,
        SMALL_CLUSTER_SHUFFLE_PARTITIONS,
        report_shuffle_partitions,
    )

    assert report_shuffle_partitions("local[2]", None) == 8
    assert report_shuffle_partitions("spark://h:7077", 100) == SMALL_CLUSTER_SHUFFLE_PARTITIONS
    assert report_shuffle_partitions("spark://h:7077", QUICK_JVM_ROWS + 1) is None
    assert report_shuffle_partitions("spark://h:7077", None) is None
    assert report_shuffle_partitions(None, 100) is None


def test_under_spark_submit_only_what_the_submitter_left_unset_is_added() -> None:
    from pipeline.spark import QUICK_JVM_OPTIONS, QUICK_JVM_ROWS, submit_conf

    executor = "spark.executor.extraJavaOptions"
    partitions = "spark.sql.shuffle.partitions"
    assert submit_conf({"spark.master": "spark://h:7077"}, 100) == {
        executor: QUICK_JVM_OPTIONS, partitions: "8"}
    assert submit_conf({"spark.master": "spark://h:7077", executor: "-Xss2m",
                        partitions: "64"}, 100) == {}
    assert submit_conf({"spark.master": "spark://h:7077"}, QUICK_JVM_ROWS + 1) == {}
    assert submit_conf({"spark.master": "local[2]"}, 100) == {partitions: "8"}
    assert submit_conf({"spark.master": "local[2]", partitions: "3"}, 100) == {}


def test_a_connect_session_takes_the_local_default_only_from_an_untuned_local_server() -> None:
    from pipeline.spark import connect_server_command, connect_shuffle_partitions

    assert connect_shuffle_partitions("local[2]", "200") == 8
    assert connect_shuffle_partitions("local", "200") == 4
    assert connect_shuffle_partitions("local[2]", "16") is None  # the operator's value
    assert connect_shuffle_partitions("local[*]", "200") is None  # the server's cores
    assert connect_shuffle_partitions("spark://h:7077", "200") is None
    assert connect_shuffle_partitions(None, "200") is None
    # sdschat report-server sets the local default itself, for every session
    argv, env = connect_server_command("local[3]", port=15010)
    assert "spark.sql.shuffle.partitions=12" in argv
    assert "spark.connect.grpc.binding.port=15010" in argv
    assert "spark.ui.retainedJobs=100" in argv  # a server that stays up forgets old jobs
    # ... and keeps the classes generated for its reports' plans compiled
    assert "spark.sql.codegen.cache.maxEntries=1000" in argv
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    argv, _ = connect_server_command("local[3]", conf={"spark.sql.shuffle.partitions": "5"})
    assert "spark.sql.shuffle.partitions=5" in argv
    assert "spark.sql.shuffle.partitions=12" not in argv
    argv, _ = connect_server_command("spark://10.0.0.1:7077", host="0.0.0.0")
    assert not any(a.startswith("spark.sql.shuffle.partitions=") for a in argv)
    assert not any(a.startswith("spark.driver.host=") for a in argv)


def test_a_small_input_starts_quick_jvms() -> None:
    """Up to QUICK_JVM_ROWS events the driver JVM this process starts gets the quick
    compiler and the serial collector, on a local master and on a cluster (whose
    executors get them too); a larger or unknown input, spark-submit's running JVM, or
    the user's own Java options keep theirs."""
    from pipeline.spark import QUICK_JVM_OPTIONS, QUICK_JVM_ROWS, local_conf

    key = "spark.driver.extraJavaOptions"
    executor = "spark.executor.extraJavaOptions"
    assert local_conf("local[2]", rows=100_000)[key] == QUICK_JVM_OPTIONS
    assert local_conf("local[2]", rows=QUICK_JVM_ROWS)[key] == QUICK_JVM_OPTIONS
    assert executor not in local_conf("local[2]", rows=10)  # no executor JVM
    assert key not in local_conf("local[2]", rows=QUICK_JVM_ROWS + 1)
    assert key not in local_conf("local[2]", rows=None)  # hdfs:// input: not counted
    cluster = local_conf("spark://127.0.0.1:7077", rows=10)
    assert cluster[key] == cluster[executor] == QUICK_JVM_OPTIONS
    big = local_conf("spark://127.0.0.1:7077", rows=QUICK_JVM_ROWS + 1)
    assert key not in big and executor not in big
    under_submit = local_conf(None, rows=10)  # its JVM runs already, its settings stand
    assert key not in under_submit and executor not in under_submit
    mine = local_conf("spark://h:7077", rows=10, extra={key: "-Xss4m", executor: "-Xss2m"})
    assert mine[key] == "-Xss4m" and mine[executor] == "-Xss2m"
    conf = local_conf("local[2]", shuffle_partitions=8, rows=10)
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.driver.memory"] == "2g"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "0"], "--port 0 is not a port (1-65535)"),
        (["--master", "sc://h:1"], "--master 'sc://h:1' is not a Spark master"),
        (["--driver-memory", "lots"], "--driver-memory 'lots' is not a size like 512m or 2g"),
        (["--conf", "x=1"], "--conf 'x=1' is not KEY=VALUE with a spark.* key"),
    ],
)
def test_report_server_refuses_bad_options_in_one_line(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["report-server", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_report_server_refuses_a_port_in_use(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["report-server", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize("raw", [b"two", b"", b"-1", b"2.0"])
def test_a_schema_version_that_is_not_a_number_is_named(tmp_path: Path, raw: bytes) -> None:
    """It used to read as "version -1 ... use a newer sdschat"."""
    from pipeline.schema import VERSION_KEY

    table = EVENT_SCHEMA.empty_table().replace_schema_metadata({VERSION_KEY: raw})
    pq.write_table(table, tmp_path / "e.parquet")
    with pytest.raises(ReportError, match="is not a version number") as info:
        validate_inputs([tmp_path])
    assert repr(raw.decode()) in str(info.value)
    assert "newer sdschat" not in str(info.value)


def test_spark_failure_names_the_root_cause() -> None:
    """A setting Spark refuses is named (the first line of Java's text did not)."""
    from pipeline.guard import spark_failure

    text = ("Error while instantiating 'org.apache.spark.sql.internal.SessionStateBuilder':\n"
            "JVM stacktrace:\n\tat org.apache.spark.X.y(X.scala:1)\n"
            "Caused by: org.apache.spark.SparkIllegalArgumentException: "
            "[INVALID_CONF_VALUE.TYPE_MISMATCH] The value '99999999999' in the config "
            '"spark.sql.shuffle.partitions" is invalid.\n\t... 19 more')
    line = spark_failure(ValueError(text))
    assert line.startswith("ValueError: [INVALID_CONF_VALUE.TYPE_MISMATCH]")
    assert '"spark.sql.shuffle.partitions"' in line and "\n" not in line


def test_the_terminal_table_prints_long_run_names_in_full() -> None:
    """``label#id/channel`` was cut at 24 characters."""
    import io

    from pipeline.report import print_table

    name = "partition-long-label#0123abcd"
    row = {"run": name, "channel": "general", "participants": 3, "messages": 5,
           "convergence": {"converged": True, "missing_pairs": 0},
           "causal_order": {"violations": 0}, "latency_ms": {}, "acknowledgement": {},
           "counts": {"resends": 0, "repairs_sent": 0,
                      "lost": {"messages": 0}},
           "overhead": {}}
    table = io.StringIO()
    print_table({"channels": [row, {**row, "run": "short"}]}, table)
    lines = table.getvalue().splitlines()
    assert lines[2].split()[0] == f"{name}/general"
    assert lines[3].split()[0] == "short/general"
    assert lines[2].index(" 3 ") == lines[3].index(" 3 ")  # the columns stay aligned


def test_the_operators_spark_defaults_win_over_the_reports_own_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key of spark-defaults.conf (Java properties: whitespace, '=' or ':') is the
    operator's: the quick JVMs, shuffle partitions and a local driver's 2g are only
    chosen where it says nothing; the report's --conf and --driver-memory still win."""
    from pipeline.spark import (
        QUICK_JVM_OPTIONS,
        local_conf,
        report_shuffle_partitions,
        spark_defaults,
    )

    (tmp_path / "spark-defaults.conf").write_text(
        "# the cluster's tuning\n"
        "spark.executor.extraJavaOptions   -XX:+UseG1GC\n"
        "spark.sql.shuffle.partitions=64\n"
        "spark.driver.memory: 6g\n"
        "\n! a comment too\n")  # fmt: skip
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_defaults() == {"spark.executor.extraJavaOptions": "-XX:+UseG1GC",
                                "spark.sql.shuffle.partitions": "64",
                                "spark.driver.memory": "6g"}  # fmt: skip
    conf = local_conf("spark://h:7077", rows=10)
    assert "spark.executor.extraJavaOptions" not in conf  # Spark applies the operator's
    assert conf["spark.driver.extraJavaOptions"] == QUICK_JVM_OPTIONS  # not set there
    assert report_shuffle_partitions("spark://h:7077", 10) is None
    assert report_shuffle_partitions("local[2]", 10) is None
    assert "spark.driver.memory" not in local_conf("local[2]", rows=10)
    assert local_conf("local[2]", driver_memory="1g")["spark.driver.memory"] == "1g"
    mine = local_conf("spark://h:7077", rows=10,
                      extra={"spark.executor.extraJavaOptions": "-Xss2m"})  # fmt: skip
    assert mine["spark.executor.extraJavaOptions"] == "-Xss2m"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    assert spark_defaults() == {}
    assert local_conf("local[2]", rows=10)["spark.driver.memory"] == "2g"
