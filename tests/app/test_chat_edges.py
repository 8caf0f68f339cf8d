"""What a person types at the edges (channel names, nicks) and the headless commands."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from app_helpers import run, start_node

from app.headless.run import JsonLines, _command
from app.names import MAX_NAME_CHARS, channel_arg, check_nick
from app.node.transport import MemoryHub

ROOT = Path(__file__).resolve().parents[2]


def test_one_rule_for_hash_and_spaces_in_channel_names() -> None:
    assert channel_arg("#ops") == channel_arg("ops") == channel_arg("  ops ") == "ops"
    assert channel_arg("##x") == "#x"  # one prefix is dropped, not every '#'
    for bad in ("", "   ", "#", "# ", "\t"):
        with pytest.raises(ValueError, match="empty"):
            channel_arg(bad)


def test_nick_rules_say_why() -> None:
    assert check_nick(" bob ") == "bob"
    with pytest.raises(ValueError, match="without spaces"):
        check_nick("bob smith")
    with pytest.raises(ValueError, match=f"at most {MAX_NAME_CHARS}"):
        check_nick("b" * (MAX_NAME_CHARS + 1))
    with pytest.raises(ValueError, match="empty"):
        check_nick("  ")


def test_headless_join_strips_the_hash_and_refuses_blank_names(tmp_path: Path) -> None:
    async def go() -> tuple[str | None, str | None, list[dict[str, object]], list[str]]:
        h = await start_node(tmp_path / "a", MemoryHub(), passphrase=None)
        buf = io.StringIO()
        out = JsonLines(buf)
        try:
            cur = await _command(h.node, "join", "#abc", "general", None, out)
            blank = await _command(h.node, "join", "   ", cur, None, out)
            await _command(h.node, "nick", "two words", cur, None, out)
            return cur, blank, [json.loads(x) for x in buf.getvalue().splitlines()], sorted(
                h.node.channels
            )
        finally:
            await h.node.close()

    cur, blank, events, channels = run(go())
    assert cur == "abc" and blank == "abc"
    assert channels == ["abc", "general"]
    errors = [e["message"] for e in events if e.get("event") == "error"]
    assert any("empty or only spaces" in str(m) for m in errors)
    assert any("without spaces" in str(m) for m in errors)


def test_cli_join_refuses_a_blank_channel_name(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "join", "  ", "--headless", "--data-dir",
         str(tmp_path / "d")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 2
    assert "empty or only spaces" in out.stderr
    assert not (tmp_path / "d").exists()


def test_cli_join_hash_name_is_the_channel_without_the_prefix(tmp_path: Path) -> None:
    from tests.procs import free_port

    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "join", "#hash", "--headless", "--data-dir",
         str(tmp_path / "d"), "--relay", f"ws://127.0.0.1:{free_port()}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    joined = [json.loads(x) for x in out.stdout.splitlines() if '"channel"' in x]
    assert joined[0]["event"] == "channel" and joined[0]["channel"] == "hash"


def test_history_uses_joins_default_data_dir_and_prints_times(tmp_path: Path) -> None:
    import os
    from datetime import UTC, datetime

    # a node with a fixed clock writes two lines into HOME's default data dir
    home = tmp_path / "home"
    data_dir = home / ".local" / "share" / "sdschat"
    sent_ms = int(datetime(2026, 11, 24, 13, 31, 5, tzinfo=UTC).timestamp() * 1000)

    async def go() -> None:
        h = await start_node(data_dir, MemoryHub(), name="alice", clock=lambda: sent_ms)
        try:
            await h.node.send("general", "hello there")
            await h.node.send("general", "is now known as", "nick")
        finally:
            await h.node.close()

    run(go())
    env = {**os.environ, "HOME": str(home), "TZ": "UTC"}
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "history", "#general"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.startswith("2026-11-24 13:31:05  ") and "<alice> hello there" in first
    assert str(sent_ms) not in out.stdout  # a time, not the raw Lamport milliseconds
    assert "-- is now known as" in second
    as_json = subprocess.run(
        [sys.executable, "-m", "app.cli", "history", "general", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert 0 <= json.loads(as_json.stdout.splitlines()[0])["lamport"] - sent_ms < 5


def test_headless_nick_is_announced_as_a_line(tmp_path: Path) -> None:
    async def go() -> list[tuple[str, str, str | None]]:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        try:
            await _command(a.node, "nick", "alicia", "general", None, JsonLines(io.StringIO()))
            from app_helpers import wait_until

            await wait_until(lambda: any(e.kind == "nick" for e in b.delivered()), what="nick")
            return [(e.kind, e.text, e.name) for e in b.delivered()]
        finally:
            await a.node.close()
            await b.node.close()

    assert run(go()) == [("nick", "alice is now known as alicia", "alicia")]


def test_history_reads_typed_content_as_sentences() -> None:
    from app.chat.lines import visible
    from app.chat.log_line import human_text

    body = visible("0123456789abcdef\n👍")
    assert human_text("react", "bob", body) == "* bob reacted 👍 to [01234567]"
    assert human_text("reply", "bob", visible("0123456789abcdef\nyes")) == "<bob> ↪ [01234567] yes"
    assert human_text("delete", "bob", visible("0123456789abcdef\n")) == "* bob deleted [01234567]"


def test_leave_right_after_a_line_saves_state_without_failing(tmp_path: Path) -> None:
    """/leave announces 'alice left #ops' and leaves at once: the round that saves the
    core states ran while the channel was already gone from the core (KeyError, 'node
    round failed', the leave never finished)."""
    import logging

    from app.node.events import NodeError

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("sdschat.node").addHandler(handler)

    async def go() -> tuple[bool, list[str]]:
        h = await start_node(tmp_path / "a", MemoryHub(), channels=("general", "ops"))
        try:
            for i in range(5):
                await h.node.send("ops", f"line {i}")
                await h.node.send("ops", "alice left #ops", "leave")
                participant_leave = h.node._participant.leave

                def leave_then_due(channel: str, node: Any = h.node, inner: Any =
                                   participant_leave) -> None:  # fmt: skip
                    inner(channel)
                    # what a line received meanwhile does: a state save is due in the
                    # round leave runs next
                    node._state_dirty = True
                    node._last_state_save = -(10**12)

                h.node._participant.leave = leave_then_due  # type: ignore[method-assign]
                left = await h.node.leave("ops")
                h.node._participant.leave = participant_leave  # type: ignore[method-assign]
                assert left
                await h.node.join("ops", "secret")
            errors = [e.message for e in h.events if isinstance(e, NodeError)]
            return "ops" in h.node.channels, errors
        finally:
            await h.node.close()

    try:
        joined, errors = run(go())
    finally:
        logging.getLogger("sdschat.node").removeHandler(handler)
    assert joined and not errors
    assert not [r for r in records if "round failed" in r.getMessage()]


def test_cli_join_refuses_a_name_with_spaces(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "join", "general", "--headless", "--name",
         "two words", "--data-dir", str(tmp_path / "d")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 2 and "without spaces" in out.stderr
    assert not (tmp_path / "d").exists()
