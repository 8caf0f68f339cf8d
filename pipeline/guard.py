"""Bounding what Spark itself does during ``sdschat report``.

Spark's own ways of failing are slow and loud: a driver JVM that cannot start
ends in a Python traceback (Java's reason on stdout); a port that is a Spark
Connect server given as ``spark://`` is retried for a minute; a standalone
master whose workers are gone leaves the job waiting for executors forever
(the master's log says why, the report's terminal nothing); a Spark Connect
server that goes away is retried for 10 minutes per call, and again at exit.

:class:`SparkRun` runs the session start and the computation in a worker
thread while the calling (main) thread watches them, every quarter second:

* the session must be up within ``timeout`` seconds (JVM start, registration
  with the master, Connect handshake);
* while a job runs, some task must be running on some executor: a job whose
  stages have no running task for ``timeout`` seconds has no executor to run on;
* a Spark Connect server must keep accepting connections: one that refuses
  them for ``timeout`` seconds is gone;
* Ctrl+C (SIGINT) is handled at once: the main thread only waits.

Any of these ends the run with :class:`SparkStopped` (one line naming what
failed and what to check) after the driver JVM this process started has been
killed, or the Connect session interrupted and its client closed without the
calls PySpark makes at exit. :func:`check_endpoint` tells, before any JVM
starts, whether a ``spark://`` port is in fact a Spark Connect (gRPC) server,
or an ``sc://`` port is not one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.errors import PipelineError

__all__ = ["DEFAULT_TIMEOUT", "SparkRun", "SparkStopped", "check_endpoint", "endpoint_kind",
           "endpoints", "java_problem", "jvm_bytes", "machine_memory", "memory_problem",
           "spark_failure", "speaks_http2"]

#: Seconds Spark may take to start, to run no task while a job waits, or a Spark
#: Connect server to refuse connections (``sdschat report --spark-timeout``).
DEFAULT_TIMEOUT = 60.0

#: How often the main thread looks at the run (seconds).
TICK = 0.25

#: The HTTP/2 client preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


class SparkStopped(PipelineError):
    """Spark itself failed or was stopped (one line: what failed, what to check)."""


def spark_failure(exc: BaseException) -> str:
    """One line for a failure inside Spark (Py4J / Spark Connect errors carry pages):
    the root cause Java gives ("Caused by: ..."), else the first line of the text."""
    import re

    text = str(exc).strip()
    causes = re.findall(r"Caused by: (?:[\w.$]+(?:Exception|Error): )?([^\n]+)", text)
    if causes:
        return f"{type(exc).__name__}: {causes[-1].strip()[:300]}"
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "at ", "py4j", "JVM stacktrace")):
            return f"{type(exc).__name__}: {line[:300]}"
    return type(exc).__name__


def endpoints(target: str) -> list[tuple[str, int]]:
    """(host, port) of each address of a ``spark://`` master (HA lists several) or
    ``sc://`` server URL."""
    default = 15002 if target.startswith("sc://") else 7077
    out = []
    for hostport in target.split("://", 1)[1].split("/")[0].split(";")[0].split(","):
        parsed = urlparse(f"x://{hostport}")
        out.append((parsed.hostname or "localhost", parsed.port or default))
    return out


def endpoint_kind(host: str, port: int, timeout: float = 5.0) -> str | None:
    """What ``host:port`` is, from its answer to an HTTP/2 client preface: ``"grpc"``
    (a SETTINGS frame: an HTTP/2 server, as Spark Connect's gRPC), ``"http"`` (an
    HTTP/1 status line: a web server, e.g. a Spark master's or worker's web UI),
    ``"closed"`` (it closed or reset the connection, as a Spark master's RPC port does)
    or ``"other"``; None if it says nothing within ``timeout`` or cannot be reached."""
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None
    with conn:
        head = b""
        try:
            conn.sendall(_H2_PREFACE)
            deadline = time.monotonic() + timeout
            while len(head) < 9 and time.monotonic() < deadline:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except TimeoutError:
            if not head:
                return None
        except OSError:  # reset: the peer refused the bytes
            return "http" if _is_http(head) else "closed"
    if _is_http(head):
        return "http"
    if not head:
        return "closed"
    return "grpc" if len(head) == 9 and head[3] == 4 else "other"  # frame type 4: SETTINGS


def _is_http(head: bytes) -> bool:
    """An HTTP/1 answer: a status line, or (HTTP/0.9 style, as some servers answer a
    request line they cannot parse) an HTML page."""
    return head.startswith(b"HTTP/") or head.lstrip().startswith(b"<")


def speaks_http2(host: str, port: int, timeout: float = 5.0) -> bool | None:
    """Whether ``host:port`` answers an HTTP/2 preface with a SETTINGS frame, as a
    gRPC (Spark Connect) server does (:func:`endpoint_kind`); None if it says nothing
    within ``timeout`` or cannot be reached."""
    kind = endpoint_kind(host, port, timeout)
    return None if kind is None else kind == "grpc"


def check_endpoint(master: str | None, remote: str | None, timeout: float = 5.0) -> str | None:
    """A one-line complaint when the endpoint is the wrong kind: a ``spark://`` master
    that is a Spark Connect server or a web server, an ``sc://`` server that is not a
    Spark Connect server; None when it looks right or cannot be told (the run's own
    bounds then apply)."""
    if remote is not None:
        host, port = endpoints(remote)[0]
        kind = endpoint_kind(host, port, timeout)
        if kind == "http":
            return (f"{host}:{port} is a web server (it answers HTTP/1 with a page), not a "
                    "Spark Connect server: a Spark web UI? Give the Connect server's gRPC "
                    "port (15002 unless set; 'sdschat report-server' prints its sc:// URL)")
        if kind in ("closed", "other"):
            return (f"{host}:{port} answers but is not a Spark Connect server (no gRPC): a "
                    f"Spark master? Use --master spark://{host}:{port} for a master")
        return None
    if master is not None and master.startswith("spark://"):
        for host, port in endpoints(master):
            kind = endpoint_kind(host, port, timeout)
            if kind == "grpc":
                return (f"{host}:{port} is a Spark Connect server, not a Spark master: "
                        f"use --remote sc://{host}:{port}")
            if kind == "http":
                return (f"{host}:{port} is a web server (it answers HTTP/1 with a page), not "
                        "a Spark master's port: the master's web UI? Give the port of "
                        "the master's URL, as its log says: 'Starting Spark master at "
                        "spark://HOST:PORT' (7077 unless set)")
    return None


def java_problem(env: dict[str, str] | None = None) -> str | None:
    """Why no JVM can start here, before Spark's launcher tries (it fails with its own
    shell errors, e.g. "CMD: bad array subscript", for a wrong JAVA_HOME): the java
    that ``spark-class`` would run (``$JAVA_HOME/bin/java``, else ``java`` on PATH) is
    missing or not executable; None when it is there."""
    import shutil

    env = dict(os.environ) if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not java.exists():
            return (f"JAVA_HOME={home}: {java}: No such file or directory (set JAVA_HOME to "
                    "a Java 17+ installation, or unset it to use the java on PATH)")
        if not os.access(java, os.X_OK):
            return f"JAVA_HOME={home}: {java}: Permission denied (not executable)"
        return None
    if shutil.which("java", path=env.get("PATH")) is None:
        return "java: command not found (install Java 17+ or set JAVA_HOME)"
    return None


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None if unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def jvm_bytes(size: str) -> int | None:
    """A JVM memory size (``512m``, ``2g``, ``1024k``, bytes) in bytes; None if not one."""
    import re

    m = re.fullmatch(r"([1-9]\d*)([kmgtp]?)b?", size.strip(), re.IGNORECASE)
    if m is None:
        return None
    return int(m.group(1)) << (10 * " kmgtp".index(m.group(2).lower() or " "))


def memory_problem(flag: str, size: str | None) -> str | None:
    """A complaint when a driver memory is larger than this machine's memory (the JVM
    would start, with a heap the machine cannot back, and fail or swap later)."""
    if size is None:
        return None
    want, have = jvm_bytes(size), machine_memory()
    if want is None or have is None or want <= have:
        return None
    return (f"{flag} {size} is more than this machine's memory ({have / 2**30:,.1f} GiB): "
            "the driver runs here")


class JvmOutput:
    """File descriptors 1 and 2 pointed at ``log`` while the driver JVM starts: the
    JVM inherits them (Java prints why it could not start on stdout, Spark's start
    warnings go to stderr), so the terminal gets one line, not Java's. Restored by
    whichever thread gets there first (the worker once started, the main thread
    when it gives up)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._saved: list[int] = []
        self._lock = threading.Lock()

    def redirect(self) -> None:
        import sys

        with self._lock:
            sys.stdout.flush()
            sys.stderr.flush()
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                for n in (1, 2):
                    self._saved.append(os.dup(n))
                    os.dup2(fd, n)
            finally:
                os.close(fd)

    def restore(self) -> None:
        with self._lock:
            for n, saved in zip((1, 2), self._saved, strict=False):
                os.dup2(saved, n)
                os.close(saved)
            self._saved = []


def _java_reason(log: Path) -> str:
    """The JVM's own last words in ``log`` (e.g. "Could not reserve enough space for
    ... object heap"), or ''."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if "bad array subscript" in line:  # spark-class's own failure: not the reason
            continue
        if line.startswith(("Error: A fatal exception", "Error: Could not create the Java")):
            continue  # Java's closing words: the reason is the line before
        if not line.startswith(("at ", "WARNING", "Setting default log level", "To adjust",
                                "Using Spark's default")) and " WARN " not in line:
            return line[:200]
    return ""


class SparkRun:
    """Start a session and run ``work(session)`` under the bounds described above.

    ``start()`` returns the session; ``what`` names the target in messages (e.g.
    ``local[2]``, ``spark://h:7077``, ``sc://h:15002``); ``remote`` is the Connect URL
    when there is one. :meth:`run` returns ``work``'s result or raises what it raised,
    :class:`SparkStopped`, or KeyboardInterrupt (after stopping Spark, within a second).
    """

    def __init__(self, start: Callable[[], Any], work: Callable[[Any], Any], *, what: str,
                 remote: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._start = start
        self._work = work
        self.what = what
        self.remote = remote
        self.timeout = timeout
        self.session: Any = None
        self._result: Any = None
        self._error: BaseException | None = None
        self.aborted = False
        self._worker: threading.Thread | None = None
        self._started = threading.Event()
        self._done = threading.Event()
        fd, name = tempfile.mkstemp(prefix="sdschat-report-jvm-", suffix=".log")
        os.close(fd)
        self._log = Path(name)
        self._output = JvmOutput(self._log)

    # ------------------------------------------------------------------ worker

    def _thread(self) -> None:
        import warnings

        # PySpark warns on stderr when its retries run out; the error itself follows
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        try:
            if self.remote is None:
                self._output.redirect()
                try:
                    self.session = self._start()
                finally:
                    self._output.restore()
            else:
                self.session = self._start()
                self._bound_connect_retries()
            self._started.set()
            self._result = self._work(self.session)
        except BaseException as exc:  # handed to the main thread
            self._error = exc
        finally:
            self._done.set()

    def _bound_connect_retries(self) -> None:
        """PySpark retries a Connect call for 10 minutes: a failed server is seen by
        the main thread first; retries stop after about ``timeout`` seconds anyway."""
        with contextlib.suppress(Exception):
            from pyspark.sql.connect.client.retries import DefaultPolicy

            # 50 ms x 4^n capped at 5 s: 0.05+0.2+0.8+3.2 = 4.25 s, then 5 s each, for
            # 10 s more than the main thread's watch (whose message is the clearer)
            tries = 4 + max(1, int((self.timeout + 10 - 4.25) / 5))
            self.session.client.set_retry_policies(
                [DefaultPolicy(max_retries=tries, max_backoff=5000)])

    # ------------------------------------------------------------ main thread

    def run(self) -> Any:
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGINT) if in_main else None
        if in_main:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        worker = self._worker = threading.Thread(
            target=self._thread, name="sdschat-report-spark", daemon=True)
        began = time.monotonic()
        try:
            worker.start()
            watch = _Watch(self)
            while not self._done.wait(TICK):
                if not self._started.is_set():
                    if time.monotonic() - began > self.timeout:
                        raise SparkStopped(self._start_timeout())
                    continue
                watch.check()
        except SparkStopped as exc:
            self.abort()
            raise SparkStopped(f"{exc}{self._see_log()}") from None
        except BaseException:
            self.abort()
            self._log.unlink(missing_ok=True)
            raise
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous)
        if self._error is not None and self.remote is not None and not _Watch(self).server_up():
            self.abort()  # no more calls to it, not even at exit
            raise SparkStopped(_Watch(self).message()) from None
        if self._error is not None and not self._started.is_set():
            raise SparkStopped(self._start_failed(self._error)) from None
        self._log.unlink(missing_ok=True)
        if self._error is not None:
            raise self._error
        return self._result

    def _see_log(self) -> str:
        """"; Spark's log: PATH" when the driver JVM logged something there."""
        try:
            if self.remote is None and self._log.stat().st_size > 0:
                return f"; Spark's log: {self._log}"
        except OSError:
            pass
        self._log.unlink(missing_ok=True)
        return ""

    def _start_timeout(self) -> str:
        if self.remote is not None and not _Watch(self).server_up():
            return _Watch(self).message()
        hint = (": is it a Spark master, with a live worker?"
                if self.what.startswith("spark://") else
                ": is the server overloaded?" if self.remote else "")
        return (f"Spark on {self.what} did not start within {self.timeout:g} s{hint} "
                f"(--spark-timeout sets the limit)")

    def _start_failed(self, exc: BaseException) -> str:
        reason = _java_reason(self._log)
        self._log.unlink(missing_ok=True)
        if "JAVA_GATEWAY_EXITED" not in str(exc):  # the JVM runs; Spark refused something
            return f"Spark on {self.what} could not start: {spark_failure(exc)}"
        if reason:
            return f"the Spark driver JVM could not start: {reason}"
        return ("the Spark driver JVM exited at start (is Java 17+ installed? "
                "JAVA_HOME? the --driver-memory/--conf values?)")

    def abort(self) -> None:
        """Stop what this run started, within about a second: kill the driver JVM it
        launched; over Connect, interrupt the session's work and close the client
        (without PySpark's calls at exit, which a gone server makes wait 10 minutes)."""
        if self.remote is not None:
            session = self.session or _connect_default_session()
            if session is None:
                return
            with contextlib.suppress(Exception):
                t = threading.Thread(target=_quiet_interrupt, args=(session,), daemon=True)
                t.start()
                t.join(0.5)
            close_connect(session)
            return
        proc = _gateway_process()
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(0.5)
            except Exception:
                proc.kill()
                with contextlib.suppress(Exception):
                    proc.wait(2)

    def stop(self, seconds: float = 5.0) -> None:
        """The session stopped after a successful run, waiting at most ``seconds``."""
        session = self.session
        if session is None or self.aborted:
            return
        t = threading.Thread(target=_quiet_stop, args=(session,), daemon=True)
        t.start()
        t.join(seconds)
        if t.is_alive():
            self.abort()


    def exit_if_stuck(self, code: int) -> None:
        """End the process with ``code`` now if Spark's thread is still blocked after an
        abort (a call to a gone Connect server, a JVM that does not answer): the
        interpreter's exit would wait for what PySpark registered to run at exit."""
        if self.aborted and self._worker is not None:
            self._worker.join(0.5)
            if self._worker.is_alive():
                import sys

                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)


def _connect_default_session() -> Any:
    """The Spark Connect session being created (its start may be what hangs)."""
    with contextlib.suppress(Exception):
        from pyspark.sql.connect.session import SparkSession

        return SparkSession._get_default_session()
    return None


def _quiet_interrupt(session: Any) -> None:
    with contextlib.suppress(Exception):
        session.interruptAll()


def _quiet_stop(session: Any) -> None:
    with contextlib.suppress(Exception):
        session.stop()


def close_connect(session: Any) -> None:
    """Mark a Spark Connect client closed (so PySpark's exit hook makes no call) and
    close its channel in the background."""
    with contextlib.suppress(Exception):
        client = session.client
        client._closed = True  # PySpark's _on_exit calls the server unless closed
        threading.Thread(target=client._channel.close, daemon=True).start()


def _gateway_process() -> Any:
    """The driver JVM process PySpark launched in this process (a Popen), if any."""
    with contextlib.suppress(Exception):
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        return getattr(gateway, "proc", None)
    return None


class _Watch:
    """The running checks: tasks on executors (JVM sessions), a live server (Connect)."""

    def __init__(self, run: SparkRun) -> None:
        self.run = run
        self.since = time.monotonic()  # last moment the run was seen healthy
        self.next = 0.0

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + 1.0
        healthy = self.server_up() if self.run.remote else self._tasks_running()
        if healthy:
            self.since = now
            return
        if now - self.since > self.run.timeout:
            raise SparkStopped(self.message())

    def server_up(self) -> bool:
        host, port = endpoints(self.run.remote or "")[0]
        try:
            socket.create_connection((host, port), timeout=2).close()
            return True
        except OSError:
            return False

    def _tasks_running(self) -> bool:
        """False when a job has stages to run and no task runs anywhere."""
        try:
            tracker = self.run.session.sparkContext.statusTracker()
            stages = tracker.getActiveStageIds()
            if not stages:
                return True  # the driver is planning, or between jobs
            return any((info := tracker.getStageInfo(s)) is not None
                       and info.numActiveTasks > 0 for s in stages)
        except Exception:
            return True  # the worker thread sees a dead JVM itself

    def message(self) -> str:
        t = f"{self.run.timeout:g} s"
        if self.run.remote:
            return (f"the Spark Connect server {self.run.remote} is not answering (connections "
                    f"refused; gave up after {t}): is it still running? Its log says why it "
                    "stopped")
        return (f"no Spark task ran for {t} on {self.run.what}: the job has no executor "
                "(workers gone, or none with the cores/memory asked: check the master's "
                "workers, --executor-memory, spark.cores.max; --spark-timeout sets the limit)")
