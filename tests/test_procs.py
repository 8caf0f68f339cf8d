"""tests/procs.py's waits: a process still starting gets its start as the bound, one that
has spoken gets the test's own."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.procs import Proc


def _proc(tmp_path: Path, code: str) -> Proc:
    return Proc([sys.executable, "-c", code], "p", tmp_path)


def test_a_silent_start_is_waited_for_beyond_the_tests_bound(tmp_path: Path) -> None:
    p = _proc(tmp_path, "import time; time.sleep(2); print('{\"event\": \"up\"}', flush=True); "
                        "time.sleep(30)")  # fmt: skip
    try:
        p.wait_for(lambda: bool(p.select("up")), 0.2, "up")  # 0.2 s: less than the sleep
    finally:
        p.stop()


def test_once_it_has_printed_the_tests_bound_holds(tmp_path: Path) -> None:
    p = _proc(tmp_path, "print('{\"event\": \"up\"}', flush=True); import time; time.sleep(30)")
    try:
        p.wait_for(lambda: bool(p.select("up")), 60, "up")
        started = time.monotonic()
        with pytest.raises(AssertionError, match="timed out waiting for never"):
            p.wait_for(lambda: False, 0.5, "never")
        assert time.monotonic() - started < 30  # the test's 0.5 s, not the start's 90 s
    finally:
        p.stop()


def test_a_process_that_exits_silently_is_not_waited_for(tmp_path: Path) -> None:
    p = _proc(tmp_path, "pass")
    try:
        p.popen.wait(60)
        started = time.monotonic()
        with pytest.raises(AssertionError):
            p.wait_for(lambda: False, 0.5, "anything")
        assert time.monotonic() - started < 30
    finally:
        p.stop()


def test_free_port_never_hands_out_a_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may give the same released port to two binds in a row (CI: a NATS
    server and a relay of docs/cluster.md were both given 54351); free_port skips it."""
    import socket

    import tests.procs as procs

    kernel = iter([41001, 41001, 41002, 41001, 41003])

    class Sock(socket.socket):
        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", next(kernel))

    monkeypatch.setattr(procs.socket, "socket", Sock)
    monkeypatch.setattr(procs, "_GIVEN", set())
    assert [procs.free_port(), procs.free_port(), procs.free_port()] == [41001, 41002, 41003]


def test_free_port_binds_on_the_host_asked(tmp_path: Path) -> None:
    import socket

    from tests.procs import free_port

    port = free_port("::1") if socket.has_ipv6 else free_port()
    with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as s:
        s.bind(("::1" if socket.has_ipv6 else "127.0.0.1", port))  # free there, bindable
