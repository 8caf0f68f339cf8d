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
