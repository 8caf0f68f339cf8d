"""The one command table (app/commands/table.py): what each front end offers and how it
parses, both /help texts from it, and headless mode's channel commands through it."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from app_helpers import run, start_node

from app.chat.content import decode_content
from app.commands import handlers
from app.commands.front import HEADLESS, TUI
from app.commands.line import HELP, parse_line
from app.commands.table import ALIASES, COMMANDS, Command, help_rows, parse, spec_of
from app.headless.run import JsonLines, _command
from app.launch.joined import load_joined
from app.node.transport import MemoryHub

TUI_ONLY = {"copy", "names", "mentions", "highlight", "read", "away", "mute", "unmute",
            "notify", "info", "search", "goto", "passphrase", "theme"}  # fmt: skip


def test_every_command_is_offered_somewhere_with_a_handler_once() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    for c in COMMANDS:
        assert c.tui is not None or c.headless is not None, c.name
        assert callable(c.handler) and c.handler.__module__ == handlers.__name__
        for usage in (c.tui, c.headless):
            assert usage is None or usage.usage.split()[0] == f"/{c.name}", c.name
    assert {c.name for c in COMMANDS if c.headless is None} == TUI_ONLY
    assert all(c.tui is not None for c in COMMANDS)  # the TUI offers every command
    assert ALIASES == {"j": "join", "part": "leave"}
    assert spec_of("say") is not None and spec_of("say") not in COMMANDS
    assert spec_of("error") is None


def test_each_front_end_parses_its_own_commands() -> None:
    for line in ("/copy", "/info", "/theme", "/search x"):  # the TUI's own
        assert parse(line, TUI) is not None and parse(line, TUI).name != "error"  # type: ignore[union-attr]
        word = line.split()[0]
        assert parse_line(line) == Command("error", f"unknown command {word} (try /help)")
    assert parse("/j #ops", HEADLESS) == parse("/J #ops", TUI) == Command("join", "#ops")
    assert parse_line("/part") == Command("leave", "")
    assert parse_line("/say hi") == Command("error", "unknown command /say (try /help)")
    # the argument rules go with the front end: headless /delete and /save name an id
    assert parse("/delete", TUI) == Command("delete", "")
    assert parse_line("/delete") == Command("error", "/delete needs an argument (try /help)")
    assert parse("/save", TUI) == Command("save", "")
    assert parse_line("/save") == Command("error", "/save needs an argument (try /help)")
    assert parse("/reply", TUI) == Command("error", "usage: /reply TEXT")
    assert parse_line("/reply") == Command("error", "/reply needs an argument (try /help)")
    assert parse("//help", TUI) == parse_line("//help") == Command("say", "/help")
    assert parse("  \r\n", TUI) is None and parse_line("") is None


def test_both_help_texts_come_from_the_table() -> None:
    lines = HELP.splitlines()
    assert lines[0].startswith("text           send text to the current channel")
    listed = [line.split()[0] for line in lines[1:] if line.startswith("/")]
    headless = [c.name for c in COMMANDS if c.headless is not None and c.headless.help]
    assert listed == [f"/{n}" for n in headless]  # in the table's order
    assert not set(listed) & {f"/{n}" for n in TUI_ONLY}
    assert "/deny" not in listed and "(/deny NAME refuses)" in HELP  # said under /approve
    for line in lines[1:]:  # the help at column 16 (a long usage: two spaces after it)
        if line.startswith("/"):
            usage = next(u for u, h in help_rows(HEADLESS) if line.startswith(u + " "))
            assert line[len(usage):].startswith(" " * (15 - len(usage)) if len(usage) <= 14
                                                else "  ")  # fmt: skip
        else:
            assert line.startswith(" " * 15) and line[15] != " "  # a continued help text
    assert "/invite [TTL] [approve]  a one-line invite" in HELP
    for role in ("/admin NAME", "/unadmin NAME"):  # members channels' roles, in both texts
        assert any(line.startswith(role + " ") for line in lines), role
        assert role in dict(help_rows(TUI)), role
    assert "/reply ID TEXT answer message ID" in HELP
    tui = dict(help_rows(TUI))
    assert tui["/reply TEXT"].startswith("answer the selected message")
    assert list(tui) == [c.tui.usage for c in COMMANDS if c.tui is not None]


def test_headless_sends_a_shortcode_as_typed(tmp_path: Path) -> None:
    """The TUI sends ``:tada:`` as the emoji (the table marks /me, /reply... for
    shortcodes); headless mode, whose lines come from scripts, sends what it read."""

    async def go() -> list[str]:
        h = await start_node(tmp_path / "a", MemoryHub(), passphrase=None)
        try:
            await _command(h.node, "me", ":tada: ships", "general", None,
                           JsonLines(io.StringIO()))  # fmt: skip
            for _ in range(200):  # bounded: until the line is in the log
                lines = [decode_content(m.content).text
                         for m in await h.node.page("general", limit=10)]  # fmt: skip
                if lines:
                    return lines
                await asyncio.sleep(0.02)
            return []
        finally:
            await h.node.close()

    assert run(go()) == [":tada: ships"]
    assert spec_of("me").shortcodes and spec_of("say").shortcodes  # type: ignore[union-attr]


def test_headless_channel_commands_through_the_table(tmp_path: Path) -> None:
    """/join, /switch, /leave and /forget in headless mode: one JSON line each answer or
    refusal, channels.json follows /join and /leave, /forget drops a channel left."""

    async def go() -> tuple[list[str | None], list[dict[str, object]], list[str], bool]:
        h = await start_node(tmp_path / "a", MemoryHub(), passphrase=None)
        buf = io.StringIO()
        out = JsonLines(buf)
        h.node.subscribe(out.event)  # as headless mode does: the node's own events too
        data = tmp_path / "a"
        seen: list[str | None] = []
        try:
            cur: str | None = "general"
            for name, arg in [("join", "#ops"), ("switch", "general"), ("switch", "nowhere"),
                              ("forget", "ops"), ("leave", "ops"), ("leave", "ops"),
                              ("forget", "ops"), ("forget", "ops")]:  # fmt: skip
                cur = await _command(h.node, name, arg, cur, None, out, data)
                seen.append(cur)
            stored = await h.node.store.get_channel("ops") is not None
            return seen, [json.loads(x) for x in buf.getvalue().splitlines()], sorted(
                k.channel for k in load_joined(data)), stored  # fmt: skip
        finally:
            await h.node.close()

    seen, events, remembered, stored = run(go())
    assert seen == ["ops", "general", "general", "general", "general", "general", "general",
                    "general"]  # fmt: skip
    said = [(e["event"], e.get("text") or e.get("message")) for e in events
            if e["event"] in ("info", "error")]  # fmt: skip
    assert ("info", "current channel: general") in said
    assert ("error", "not in channel 'nowhere' (/join it first)") in said
    assert ("error", "#ops is joined: /leave it first") in said
    assert ("error", "not in channel 'ops'") in said  # the second /leave
    forgot = [t for k, t in said if k == "info" and str(t).startswith("forgot #ops")]
    assert len(forgot) == 1
    assert ("error", "this data directory holds no channel 'ops'") in said
    assert remembered == [] and not stored
