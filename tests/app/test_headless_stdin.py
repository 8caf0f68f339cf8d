"""Headless mode's stdin: a pipe is read by the event loop (no thread), lines intact."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import threading

import pytest

from app.headless.run import _stdin_lines


def test_a_piped_stdin_is_read_by_the_loop_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines split across writes, UTF-8 split mid-character, a last line without a
    newline, then EOF (``None``); no ``stdin`` thread (a thread waits for the GIL
    while the loop is busy: up to 5 ms per typed line at 100 msg/s)."""
    r, w = os.pipe()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(open(r, "rb")))  # noqa: SIM115

    async def main() -> list[str | None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        transport = await _stdin_lines(loop, queue)
        assert transport is not None
        assert not any(t.name == "stdin" for t in threading.enumerate())
        chunks = [b"hel", b"lo\nsecond line\n\xc3", b"\xa9t\xc3\xa9\nno newline"]
        for chunk in chunks:
            os.write(w, chunk)
            await asyncio.sleep(0.02)
        os.close(w)
        out: list[str | None] = []
        async with asyncio.timeout(5):
            while not out or out[-1] is not None:
                out.append(await queue.get())
        transport.close()
        return out

    assert asyncio.run(main()) == ["hello\n", "second line\n", "été\n", "no newline", None]
    sys.stdin.close()


def test_a_stdin_that_is_not_a_pipe_is_read_by_a_thread(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = os.path.join(tmp_path, "lines.txt")
    with open(path, "wb") as f:
        f.write(b"one\ntwo\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(open(path, "rb")))  # noqa: SIM115

    async def main() -> list[str | None]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        assert await _stdin_lines(asyncio.get_running_loop(), queue) is None
        out: list[str | None] = []
        async with asyncio.timeout(5):
            while not out or out[-1] is not None:
                out.append(await queue.get())
        return out

    assert asyncio.run(main()) == ["one\n", "two\n", None]
    sys.stdin.close()
