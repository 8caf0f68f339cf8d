"""Continuous logging to files (WeeChat's logger): one plain-text log per channel.

Opt-in, in the config file::

    [log]
    enabled = true
    dir = "~/chatlogs"        # default: DATA_DIR/logs
    max_bytes = 1048576       # a file beyond this is rotated (default 1 MiB)
    keep = 5                  # rotated files kept: NAME.log.1 ... NAME.log.5

Each line a message as ``sdschat history`` writes it (the author's send time, the
sender id's start, ``<name> text``, sentences for reactions and edits; a membership
event as ``-- alice added bob``; key housekeeping is no chat and is left out), control
characters escaped, a multi-line message's lines indented under its text. The
directory is made 0700 and every file 0600; a file grown beyond ``max_bytes`` is
renamed ``.1`` (and older ones shifted) before the next line. A failure to write
is reported once and logging stops; the chat goes on.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path

from app.chat.lines import visible
from app.chat.log_line import human_text  # the same sentences as sdschat history

__all__ = ["NOT_LOGGED", "ChatLogger", "LogSettings", "log_settings", "logger_for"]

DEFAULT_MAX_BYTES = 1_048_576
DEFAULT_KEEP = 5

NOT_LOGGED = frozenset({"keys", "sealed", "segment"})
"""Kinds that are no chat: a members channel's key shares and rekeys, messages it
cannot read, a file's segments (the file's line stands for them)."""


@dataclass(frozen=True)
class LogSettings:
    enabled: bool = False
    dir: str | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP


def log_settings(table: object, where: str) -> LogSettings:
    """The checked ``[log]`` table; ValueError naming the entry and what is allowed."""
    if not isinstance(table, dict):
        raise ValueError(f"{where}: [log] must be a table")
    known = {"enabled", "dir", "max_bytes", "keep"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"{where}: [log] {unknown[0]}: unknown (enabled, dir, max_bytes, keep)")
    enabled = table.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ValueError(f"{where}: [log] enabled must be true or false")
    d = table.get("dir")
    if d is not None and (not isinstance(d, str) or not d.strip()):
        raise ValueError(f"{where}: [log] dir must be a directory path")
    size = table.get("max_bytes", DEFAULT_MAX_BYTES)
    if isinstance(size, bool) or not isinstance(size, int) or size < 4096:
        raise ValueError(f"{where}: [log] max_bytes must be an integer of at least 4096")
    keep = table.get("keep", DEFAULT_KEEP)
    if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= 100:
        raise ValueError(f"{where}: [log] keep must be an integer from 1 to 100")
    return LogSettings(enabled, d, size, keep)


def _file_name(channel: str) -> str:
    """A file name for ``channel`` (any printable name): safe characters kept, a short
    hash added when something had to be replaced (so two names never share a file)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", channel)[:80].lstrip(".") or "_"
    if safe != channel:
        safe += "-" + hashlib.sha256(channel.encode("utf-8")).hexdigest()[:8]
    return f"{safe}.log"


class ChatLogger:
    """Appends lines to one log file per channel (see the module docstring)."""

    def __init__(self, directory: Path, settings: LogSettings, tz: tzinfo | None = None) -> None:
        self.dir = directory
        self.settings = settings
        self.tz = tz
        self.failed: str | None = None

    def path(self, channel: str) -> Path:
        return self.dir / _file_name(channel)

    def write(self, channel: str, lamport: int, sender_id: str, kind: str, name: str | None,
              text: str) -> bool:  # fmt: skip
        """Log one message; False (and ``failed`` says why) once writing failed."""
        if self.failed is not None:
            return False
        if kind in NOT_LOGGED:
            return True
        try:
            when = datetime.fromtimestamp(lamport / 1000.0, self.tz).strftime("%Y-%m-%d %H:%M:%S")
        except (OverflowError, OSError, ValueError):
            when = str(lamport)
        head = f"{when}  {sender_id[:8]}  "
        who, shown = visible(name or "?"), visible(text, newlines=True)
        # a membership event is what someone did, not what they said: "-- alice added bob"
        body = f"-- {who} {shown}" if kind == "member" else human_text(kind, who, shown)
        line = head + body.replace("\n", "\n" + " " * len(head)) + "\n"
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = self.path(channel)
            self._rotate(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as exc:
            self.failed = str(exc)
            return False
        return True

    def _rotate(self, path: Path) -> None:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        if size < self.settings.max_bytes:
            return
        keep = self.settings.keep
        oldest = path.with_name(f"{path.name}.{keep}")
        if oldest.exists():
            oldest.unlink()
        for i in range(keep - 1, 0, -1):
            src = path.with_name(f"{path.name}.{i}")
            if src.exists():
                src.rename(path.with_name(f"{path.name}.{i + 1}"))
        path.rename(path.with_name(f"{path.name}.1"))


def logger_for(settings: LogSettings, data_dir: Path, tz: tzinfo | None) -> ChatLogger | None:
    """The logger of a config's ``[log]`` (None when not enabled)."""
    if not settings.enabled:
        return None
    directory = Path(settings.dir).expanduser() if settings.dir else data_dir / "logs"
    return ChatLogger(directory, settings, tz)
