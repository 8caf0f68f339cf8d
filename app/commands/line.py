"""Headless mode's names for the parser of a typed line (:mod:`app.commands.table`):
:func:`parse_line` parses for headless mode, :data:`HELP` is its ``/help``.

A line is a message (``text``; ``//text`` sends ``/text``) or a slash command of the
table that headless mode offers; the commands, their usage and help are in
:data:`app.commands.table.COMMANDS` (``sdschat join --headless`` and ``/help`` list them).
"""

from __future__ import annotations

from app.commands.front import HEADLESS
from app.commands.table import HEADLESS_HELP, Command, parse

__all__ = ["HELP", "Command", "parse_line"]

HELP = HEADLESS_HELP


def parse_line(line: str) -> Command | None:
    """Parse one typed line for headless mode; ``None`` for a blank line."""
    return parse(line, HEADLESS)
