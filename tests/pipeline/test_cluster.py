"""The report on a real standalone cluster and over Spark Connect, against local[2].

One master, one worker (and, when the Connect client's packages are installed, one
Spark Connect server on that cluster) are started for the module from the pip
package's ``spark-class`` on 127.0.0.1, and stopped by PID; ``sdschat
report-server`` is started the same way. The same run is
reported on ``local[1]``, with ``sdschat report --master
spark://...``, with the README's spark-submit line, and with ``--remote sc://...``:
the summaries must be identical. Inputs and outputs are ``file://`` URIs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_helpers import bench_module, simulate

from app.sim.simulation import PartitionSpec
from pipeline.spark import connect_missing, connect_server_command, spark_home
from tests.procs import T, free_port

ROOT = Path(__file__).resolve().parents[2]
#: README.md's cluster line (docs/report.md): run verbatim but for HOST:7077.
SUBMIT_LINE = (
    ". .venv/bin/activate && zip -qr pipeline.zip pipeline storage && spark-submit "
    "--master spark://HOST:7077 --py-files pipeline.zip pipeline/report.py runs/a --out report/"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_NO_DAEMONIZE": "1", "PYTHONPATH": str(ROOT)})
    env.pop("SPARK_REMOTE", None)
    return env


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], seconds: float) -> None:
    seconds = T(seconds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise RuntimeError(f"{text!r} not in {log} after {seconds}s:\n{log.read_text()[-2000:]}")


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        self.remote: str | None = None

    def _start(self, name: str, args: list[str],
               command: list[str] | None = None) -> tuple[subprocess.Popen[bytes], Path]:
        """``spark-class ARGS`` (or ``command``) in its own session, logging to NAME.log."""
        log = self.tmp / f"{name}.log"
        fh = log.open("wb")
        proc = subprocess.Popen(
            command or [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=fh, stderr=subprocess.STDOUT, env=_env(), start_new_session=True,
        )
        self.procs.append(proc)
        return proc, log

    def start(self) -> None:
        proc, log = self._start("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", str(free_port()),
        ])
        _wait_for(log, "I have been elected leader", proc, 90)
        proc, log = self._start("worker", [
            "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1",
            "--cores", "2", "--memory", "2g", "--webui-port", str(free_port()),
            "--work-dir", str(self.tmp / "work"),
        ])
        _wait_for(log, "Successfully registered with master", proc, 90)

    def start_connect(self, local: str | None = None, *flags: str) -> None:
        """A Spark Connect server on the cluster; with ``local`` (e.g. local[1]),
        ``sdschat report-server --master LOCAL FLAGS...`` instead."""
        port = free_port()
        if local is None:
            argv, _ = connect_server_command(self.master, port=port, conf={
                "spark.cores.max": "1", "spark.executor.memory": "512m"})
            proc, log = self._start("connect", [], argv)
        else:
            proc, log = self._start("connect", [], [
                sys.executable, "-m", "app.cli", "report-server", "--master", local,
                "--port", str(port), "--driver-memory", "512m", *flags])
        deadline = time.monotonic() + T(120)
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                self.remote = f"sc://127.0.0.1:{port}"
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"Spark Connect server did not start:\n{log.read_text()[-2000:]}")

    def tails(self, lines: int = 15) -> str:
        """The last lines of every log of the cluster (master, worker, Connect server,
        each executor's stderr): what a failure needs to tell a slow cluster from a
        stuck one."""
        parts = []
        for log in sorted([*self.tmp.glob("*.log"), *self.tmp.glob("work/app-*/*/stderr")]):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.relative_to(self.tmp)} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start()
        if not connect_missing():
            c.start_connect()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Loss and a partition that never heals: missing pairs and repairs to report."""
    return simulate(tmp_path_factory.mktemp("run"), "run", participants=5, messages=20, seed=4,
                    loss=0.2, partitions=[PartitionSpec(2_000, None, ((0, 1), (2, 3, 4)))])


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: summary[k] for k in ("rows", "runs", "channels", "caveats")}


def _cli(args: list[str], cwd: Path = ROOT, timeout: float = 420,
         env: dict[str, str] | None = None,
         cluster: Cluster | None = None) -> subprocess.CompletedProcess[str]:
    if "--spark-timeout" not in args:  # a loaded machine starts a JVM slowly: not a failure
        args = [*args, "--spark-timeout", str(int(T(300)))]
    return _run([sys.executable, "-m", "app.cli", "report", *args], cwd=cwd,
                env={**_env(), **(env or {})}, timeout=timeout, cluster=cluster)


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float,
         cluster: Cluster | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` in its own session. Past ``timeout`` (scaled) its whole process group is
    killed (a spark-submit's JVM would outlive its bash and keep the cluster's cores for
    the next test) and the failure shows what the command and the cluster printed."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=T(timeout))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"{argv!r} did not end in {T(timeout):g} s; its stderr ends:\n{err[-3000:]}\n"
            + (cluster.tails() if cluster is not None else "")) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.fixture(scope="module")
def local_summary(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference: the same run reported on ``local[1]``, from the command too (this
    module runs beside the test session's ``local[2]``, tests/conftest.py, which it does
    not open a second time)."""
    out = tmp_path_factory.mktemp("local")
    done = _cli([run_dir.as_uri(), "--out", out.as_uri(), "--master", "local[1]",
                 "--driver-memory", "512m"])
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert summary["channels"][0]["convergence"]["missing_pairs"] > 0
    return summary


# each test is one report on the cluster: 2 minutes on a quiet machine, 3-7 at load 8
@pytest.mark.timeout(T(1200))
@pytest.mark.slow
def test_a_report_on_the_cluster_gives_the_local_summary(
    cluster: Cluster, run_dir: Path, local_summary: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "cluster"
    # the executors run no Python: a Python worker would be started from this
    # interpreter path, which does not exist
    done = _cli([run_dir.as_uri(), "--out", out.as_uri(), "--master", cluster.master,
                 "--conf", "spark.cores.max=1", "--executor-memory", "512m"], timeout=900,
                env={"PYSPARK_PYTHON": "/nonexistent/python3"}, cluster=cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    on_cluster = json.loads((out / "summary.json").read_text())
    assert on_cluster["master"] == cluster.master
    assert _comparable(on_cluster) == _comparable(local_summary)
    # the executors wrote the detail: every missing pair is there
    import pyarrow.parquet as pq

    assert pq.read_table(out / "missing").num_rows == on_cluster["channels"][0][
        "convergence"]["missing_pairs"]


@pytest.mark.timeout(T(1200))
@pytest.mark.slow
def test_the_readme_spark_submit_line_gives_the_local_summary(
    cluster: Cluster, run_dir: Path, local_summary: dict[str, Any], tmp_path: Path
) -> None:
    """The README's spark-submit line, verbatim but for the master's address, run from a
    directory laid out as the repository, the venv not active (the line activates it)."""
    work = tmp_path / "submit"
    (work / "runs").mkdir(parents=True)
    for name in ("pipeline", "storage", ".venv"):
        (work / name).symlink_to(ROOT / name)
    (work / "runs" / "a").symlink_to(run_dir)
    env = _env()
    env.pop("PYTHONPATH")
    env["PATH"] = "/usr/bin:/bin"
    line = SUBMIT_LINE.replace("HOST:7077", cluster.master.removeprefix("spark://"))
    done = _run(["bash", "-c", line], cwd=work, env=env, timeout=900, cluster=cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    submitted = json.loads((work / "report" / "summary.json").read_text())
    assert _comparable(submitted) == _comparable(local_summary)


@pytest.mark.timeout(T(1200))
@pytest.mark.slow
def test_a_report_over_spark_connect_on_the_cluster_gives_the_local_summary(
    cluster: Cluster, run_dir: Path, local_summary: dict[str, Any], tmp_path: Path
) -> None:
    """SPARK_REMOTE names the cluster's Spark Connect server (no flag)."""
    if cluster.remote is None:
        pytest.skip("Spark Connect client packages missing: " + ", ".join(connect_missing()))
    out = tmp_path / "connect"
    done = _run([sys.executable, "-m", "app.cli", "report", run_dir.as_uri(), "--out", str(out)],
                cwd=ROOT, env={**_env(), "SPARK_REMOTE": cluster.remote}, timeout=900,
                cluster=cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    over_connect = json.loads((out / "summary.json").read_text())
    assert over_connect["master"] == cluster.remote
    assert _comparable(over_connect) == _comparable(local_summary)


@pytest.mark.slow
def test_report_server_sessions_get_the_local_shuffle_partitions(
    cluster: Cluster, tmp_path: Path
) -> None:
    """``sdschat report-server --master local[1]`` serves Spark Connect; a session on it
    has the local default of shuffle partitions (4), not Spark's 200 (thousands of
    tasks of a few rows each); on the cluster's server it keeps the cluster's setting;
    the report's --shuffle-partitions and --conf win."""
    if cluster.remote is None:
        pytest.skip("Spark Connect client packages missing: " + ", ".join(connect_missing()))
    on_local = Cluster(tmp_path)
    try:
        on_local.start_connect(local="local[1]")
        code = (
            "import sys\n"
            "from pipeline.spark import make_session\n"
            "remote, *rest = sys.argv[1:]\n"
            "kw = {'shuffle_partitions': int(rest[0])} if rest[:1] not in ([], ['-']) else {}\n"
            "extra = {'spark.sql.shuffle.partitions': rest[1]} if len(rest) > 1 else None\n"
            "s = make_session(remote=remote, extra=extra, **kw)\n"
            "print(s.conf.get('spark.sql.shuffle.partitions'))\n"
        )

        def partitions(remote: str, *args: str) -> str:
            done = subprocess.run([sys.executable, "-c", code, remote, *args], cwd=ROOT,
                                  env=_env(), capture_output=True, text=True, timeout=T(120))
            assert done.returncode == 0, done.stderr[-2000:]
            return done.stdout.strip().splitlines()[-1]

        assert on_local.remote is not None
        assert partitions(on_local.remote) == "4"
        assert partitions(on_local.remote, "3") == "3"
        assert partitions(on_local.remote, "-", "5") == "5"
        assert partitions(cluster.remote) == "200"
        banner = (tmp_path / "connect.log").read_text().splitlines()[0]
        assert banner.startswith(f"sdschat report-server: Spark Connect on {on_local.remote} ")
    finally:
        on_local.stop()
    # SIGTERM to the command's PID stopped the server (the command became its JVM)
    assert all(proc.returncode is not None for proc in on_local.procs)


def test_unreachable_master_is_one_line_exit_2(run_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    for flags in (["--master", f"spark://127.0.0.1:{port}"], ["--remote", f"sc://127.0.0.1:{port}"]):
        done = _cli([str(run_dir), "--out", str(tmp_path / "r"), *flags], timeout=60)
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert "cannot reach the Spark" in line and f"127.0.0.1:{port}" in line
    assert not (tmp_path / "r").exists()


def test_ctrl_c_during_a_report_is_one_line_exit_130(tmp_path: Path) -> None:
    # 1M synthetic events: about 27 s of report on local[1] (JVM up after 3-4 s), so
    # the Ctrl+C at 12 s lands in the middle of the computation
    # the Ctrl+C goes once Spark's own status API (its UI, on 127.0.0.1) shows a job of
    # the report running: a state, whatever the machine's speed or load
    data = tmp_path / "events"
    bench_module().generate(data, 1_000_000, 200, 10)
    ui = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "report", str(data), "--out", str(tmp_path / "r"),
         "--master", "local[1]", "--driver-memory", "512m",
         "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={ui}"],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        _wait_state(lambda: proc.poll() is not None or _a_job_running(ui),
                    "a job of the report running", 180)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C does: the whole process group
    _, err = proc.communicate(timeout=T(60))
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "sdschat report: interrupted, nothing written"
    assert [x for x in err.splitlines() if x.startswith("sdschat")] == [
        "sdschat report: interrupted, nothing written"]
    assert not (tmp_path / "r").exists()


def _a_job_running(ui_port: int) -> bool:
    """Whether the Spark driver whose UI listens on ``ui_port`` (127.0.0.1) runs a job
    (its REST status API; no proxy)."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        with opener.open(base, timeout=2) as r:
            apps = json.load(r)
        for app in apps:
            with opener.open(f"{base}/{app['id']}/jobs?status=running", timeout=2) as r:
                if json.load(r):
                    return True
    except (OSError, ValueError, KeyError):
        return False
    return False


# ------------------------------------------------- when Spark itself fails: one line, exit 2


def _one_line(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    """The run failed with exit 2 and exactly one line on stderr, containing ``expected``."""
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    (line,) = lines
    assert line.startswith("sdschat report: ")
    for text in expected:
        assert text in line, line
    assert done.stdout == ""
    return line


def test_a_jvm_that_cannot_start_is_one_line_exit_2(run_dir: Path, tmp_path: Path) -> None:
    """Java's own reason, not a Python traceback (nor Java's words on stdout)."""
    done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--master", "local[1]",
                 "--driver-memory", "512m",
                 "--conf", "spark.driver.extraJavaOptions=-Xms4g"], timeout=120)
    _one_line(done, "the Spark driver JVM could not start",
              "Initial heap size set to a larger value than the maximum heap size")
    assert list(tmp_path.iterdir()) == []


def test_a_driver_heap_larger_than_the_machine_is_refused_up_front(
    run_dir: Path, tmp_path: Path
) -> None:
    """999g on this machine: refused before a JVM starts (Java would start it)."""
    for flags in (["--driver-memory", "999g"], ["--conf", "spark.driver.memory=999g"]):
        done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--master", "local[1]",
                     *flags], timeout=60)
        _one_line(done, "999g is more than this machine's memory", "GiB")
    done = subprocess.run([sys.executable, "-m", "app.cli", "report-server", "--port",
                           str(free_port()), "--driver-memory", "999g"], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=T(60))
    assert done.returncode == 2
    assert "--driver-memory 999g is more than this machine's memory" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_bad_java_home_gives_the_real_reason(run_dir: Path, tmp_path: Path) -> None:
    """Not spark-class's "CMD: bad array subscript": the java that is not there."""
    done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--master", "local[1]"],
                timeout=60, env={"JAVA_HOME": str(tmp_path / "no-java")})
    _one_line(done, f"JAVA_HOME={tmp_path / 'no-java'}: {tmp_path / 'no-java'}/bin/java: "
              "No such file or directory")
    assert "bad array subscript" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture()
def web_server() -> Iterator[int]:
    """A real HTTP/1 server on 127.0.0.1 (answers every request with an HTML page, as
    a Spark web UI does); yields its port."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Spark Master at spark://127.0.0.1:7077</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_that_speaks_http_is_told_before_spark_starts(
    run_dir: Path, tmp_path: Path, web_server: int
) -> None:
    """--master and --remote at a web server's port: one line saying so, with the right
    advice, before any JVM (the limit is set far beyond the test's own timeout: the old
    wait for the master could not pass)."""
    where = f"127.0.0.1:{web_server}"
    done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--master", f"spark://{where}",
                 "--spark-timeout", "3600"], timeout=60)
    _one_line(done, f"{where} is a web server", "not a Spark master's port",
              "Starting Spark master at")
    done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--remote", f"sc://{where}",
                 "--spark-timeout", "3600"], timeout=60)
    line = _one_line(done, f"{where} is a web server", "not a Spark Connect server",
                     "sdschat report-server")
    assert "--master" not in line  # that advice led into the master's wait
    assert list(tmp_path.iterdir()) == []


def test_the_wrong_kind_of_endpoint_is_one_line_exit_2(
    cluster: Cluster, run_dir: Path, tmp_path: Path
) -> None:
    """A Spark Connect port given as a master, a master's port given as Spark Connect:
    told before any JVM starts."""
    if cluster.remote is None:
        pytest.skip("Spark Connect client packages missing: " + ", ".join(connect_missing()))
    connect = cluster.remote.removeprefix("sc://")
    master = cluster.master.removeprefix("spark://")
    done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--master", f"spark://{connect}"],
                timeout=60)
    _one_line(done, f"{connect} is a Spark Connect server, not a Spark master",
              f"--remote sc://{connect}")
    done = _cli([str(run_dir), "--out", str(tmp_path / "r"), "--remote", f"sc://{master}"],
                timeout=60)
    _one_line(done, f"{master} answers but is not a Spark Connect server",
              f"--master spark://{master}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(T(1800))
@pytest.mark.slow
def test_relative_paths_reach_a_connect_server_in_another_directory(
    cluster: Cluster, run_dir: Path, tmp_path: Path
) -> None:
    """The server runs in the repository; the report in another directory, with relative
    input and output paths: the server reads what the user meant."""
    if cluster.remote is None:
        pytest.skip("Spark Connect client packages missing: " + ", ".join(connect_missing()))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a").symlink_to(run_dir)
    done = _cli(["runs/a", "--out", "out/x", "--remote", cluster.remote], cwd=tmp_path,
                timeout=900, cluster=cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "x" / "summary.json").read_text())
    assert summary["channels"][0]["convergence"]["missing_pairs"] > 0
    # the detail the server wrote arrived in the report directory
    assert (tmp_path / "out" / "x" / "missing").is_dir()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x"]


def _wait_state(check: Any, what: str, seconds: float) -> None:
    seconds = T(seconds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"not reached in {seconds:g} s: {what}")


def _report_proc(data: Path, out: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "report", str(data), "--out", str(out), *flags],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def _failed_in_one_line(proc: subprocess.Popen[str], *expected: str) -> None:
    try:
        out, err = proc.communicate(timeout=T(180))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _one_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), *expected)


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1M synthetic events: a report of about half a minute on one core."""
    data = tmp_path_factory.mktemp("million") / "events"
    bench_module().generate(data, 1_000_000, 200, 10)
    return data


@pytest.mark.slow
def test_a_cluster_whose_worker_is_killed_mid_report_fails_in_one_line(
    million: Path, tmp_path: Path
) -> None:
    """The worker and its executor are killed once the report's executor runs: no task can
    run any more, the report ends within --spark-timeout, one line, exit 2, nothing written."""
    own = Cluster(tmp_path)
    try:
        own.start()
        worker = own.procs[-1]
        out = tmp_path / "r"
        # the driver's start counts too: on a loaded machine it can take a minute
        limit = int(T(120))
        proc = _report_proc(million, out, "--master", own.master, "--executor-memory", "512m",
                            "--spark-timeout", str(limit))
        work = tmp_path / "work"
        _wait_state(lambda: any(work.glob("app-*/*/stderr")), "an executor launched", 120)
        os.killpg(worker.pid, signal.SIGKILL)  # the worker and the executor it started
        _failed_in_one_line(proc, f"no Spark task ran for {limit} s", own.master, "no executor")
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.")]
    finally:
        own.stop()


@pytest.mark.slow
def test_a_connect_server_killed_mid_report_fails_in_one_line(
    million: Path, tmp_path: Path
) -> None:
    """``sdschat report-server`` is killed once the report's first Spark job runs on it:
    the report ends within --spark-timeout, one line, exit 2, nothing written (PySpark
    alone retries each call for 10 minutes, and again at exit)."""
    if connect_missing():
        pytest.skip("Spark Connect client packages missing: " + ", ".join(connect_missing()))
    server = Cluster(tmp_path)
    try:
        # at INFO the server logs each job it starts
        server.start_connect("local[1]", "--conf", "spark.log.level=INFO")
        assert server.remote is not None
        out = tmp_path / "r"
        proc = _report_proc(million, out, "--remote", server.remote, "--spark-timeout", "10")
        log = tmp_path / "connect.log"
        _wait_state(lambda: "DAGScheduler: Got job" in log.read_text(errors="replace"),
                    "a job of the report running on the server", 120)
        os.killpg(server.procs[-1].pid, signal.SIGKILL)
        _failed_in_one_line(proc, f"the Spark Connect server {server.remote} is not answering")
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.")]
    finally:
        server.stop()
