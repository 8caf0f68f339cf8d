"""What a person types at the edges (channel names, nicks) and the headless commands."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from app_helpers import run, start_node

from app.chat_content import MAX_NAME_CHARS, channel_arg, check_nick
from app.headless import JsonLines, _command
from app.transport import MemoryHub

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
