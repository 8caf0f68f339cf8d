"""Suite-wide guard: a test must not leave an SQLite connection open.

aiosqlite runs each connection in a non-daemon worker thread that ends only
when the connection is closed. One unclosed connection keeps the interpreter
alive after the last test, so the whole run hangs instead of ending. This
guard fails the test that leaked one (naming it) and ends the thread, so the
run still finishes.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from aiosqlite import core as aiosqlite_core

# A developer's own ~/.config/sdschat/config.toml must not change what the suite's
# nodes do: every process the tests start reads the default config from an empty dir.
os.environ["XDG_CONFIG_HOME"] = os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"sdschat-tests-no-config-{os.getpid()}"
)


def _sqlite_workers() -> set[threading.Thread]:
    return {
        t
        for t in threading.enumerate()
        if getattr(t, "_target", None) is aiosqlite_core._connection_worker_thread
    }


def _stop(thread: threading.Thread) -> None:
    # The worker's only argument is its job queue; the sentinel ends its loop.
    queue = thread._args[0]  # type: ignore[attr-defined]
    queue.put_nowait((None, lambda: aiosqlite_core._STOP_RUNNING_SENTINEL))


@pytest.fixture(autouse=True)
def _no_leaked_sqlite_connection() -> Iterator[None]:
    before = _sqlite_workers()
    yield
    deadline = time.monotonic() + 2.0
    leaked = _sqlite_workers() - before
    while leaked and time.monotonic() < deadline:  # a close may still be finishing
        time.sleep(0.02)
        leaked = {t for t in leaked if t.is_alive()}
    if leaked:
        for t in leaked:
            _stop(t)
        pytest.fail(
            f"{len(leaked)} SQLite connection(s) left open by this test "
            "(close every Store/Node, also when the test fails half-way)",
            pytrace=False,
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    """If something still keeps Python alive 60 s after the run, say what and exit 3.

    A hung interpreter would otherwise eat CI's whole time budget in silence.
    The watchdog is a daemon thread: a normal exit ends it unseen. A pytest-xdist worker
    has none: it has run its last test but lives on, by design, until the controller
    (which has its own watchdog) ends the run and shuts the workers down.
    """
    if hasattr(config, "workerinput"):
        return

    def watchdog() -> None:
        time.sleep(float(os.environ.get("SDSCHAT_TEST_EXIT_WATCHDOG_S", "60")))

        sys.stderr.write("\nthe test run ended but threads keep Python alive:\n")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(3)

    threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs ``--dist loadgroup``), tests that share
    something run on one worker, one after the other:

    * every test that uses Spark's session: one ``local[2]`` session per run
      (tests/pipeline/conftest.py);
    * the standalone cluster's tests (tests/pipeline/test_cluster.py: one master, one
      worker and a Spark Connect server for the module, and ``sdschat report``
      processes): they open no session in the test process, so they run beside the
      first group, on another worker;
    * the LAN tests: zeroconf on 127.0.0.1 is one shared segment, so two LAN tests at
      once would discover each other's nodes and receive each other's envelopes.

    The Spark groups are the longest: they go first, so that neither is the run's tail.
    """
    groups: dict[int, str] = {}
    for item in items:
        if item.nodeid.startswith("tests/pipeline/test_cluster.py"):
            assert "spark" not in getattr(item, "fixturenames", ()), item.nodeid
            groups[id(item)] = "spark-cluster"
        elif item.nodeid.startswith("tests/pipeline/") or "spark" in getattr(
            item, "fixturenames", ()
        ):
            groups[id(item)] = "spark"
        elif item.nodeid.startswith("tests/lan/"):
            groups[id(item)] = "lan"
    for item in items:
        if id(item) in groups:
            item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    order = {"spark-cluster": 0, "spark": 1, "lan": 2}
    items.sort(key=lambda item: order.get(groups.get(id(item), ""), 2))
