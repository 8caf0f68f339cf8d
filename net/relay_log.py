"""Structured log lines for the relay: one event per line on a text stream.

JSON format (the default), one object per line::

    {"ts": "2025-01-01T12:00:00.123Z", "level": "info", "event": "relay_listening",
     "host": "127.0.0.1", "port": 8765}

Text format, for people watching a terminal::

    2025-01-01T12:00:00.123Z info relay_listening host=127.0.0.1 port=8765

Every line has ``ts`` (UTC, ISO 8601, milliseconds), ``level`` (``debug``,
``info``, ``warning``, ``error``), ``event`` (a stable snake_case name) and
then the event's own fields. Bytes values are written as hex.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Literal, TextIO

__all__ = ["LEVELS", "LogFormat", "RelayLogger"]

LogFormat = Literal["json", "text"]

LEVELS: dict[str, int] = {"debug": 10, "info": 20, "warning": 30, "error": 40}
"""Level names in increasing severity."""


def _timestamp(now: float) -> str:
    whole = int(now)
    ms = int((now - whole) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{ms:03d}Z"


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        return value if value and " " not in value and '"' not in value else json.dumps(value)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class RelayLogger:
    """Writes structured events to ``stream`` (default: ``sys.stderr``).

    Args:
        fmt: ``"json"`` for JSON lines, ``"text"`` for ``key=value`` lines.
        stream: where to write; flushed after every line so that a parent
            process reading a pipe sees each event at once.
        level: the least severe level written.
    """

    def __init__(
        self, fmt: LogFormat = "json", stream: TextIO | None = None, level: str = "info"
    ) -> None:
        if fmt not in ("json", "text"):
            raise ValueError(f"unknown log format {fmt!r}")
        if level not in LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        self.fmt: LogFormat = fmt
        self.stream = stream
        self.min_level = LEVELS[level]

    def log(self, level: str, event: str, **fields: Any) -> None:
        """Write one event. Never raises (a broken stream only loses the line)."""
        if LEVELS.get(level, 40) < self.min_level:
            return
        record: dict[str, Any] = {"ts": _timestamp(time.time()), "level": level, "event": event}
        for key, value in fields.items():
            record[key] = _plain(value)
        if self.fmt == "json":
            line = json.dumps(record, separators=(",", ":"), sort_keys=False)
        else:
            extras = " ".join(
                f"{k}={_text_value(v)}"
                for k, v in record.items()
                if k not in ("ts", "level", "event")
            )
            line = f"{record['ts']} {level} {event}" + (f" {extras}" if extras else "")
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            stream.write(line + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass

    def debug(self, event: str, **fields: Any) -> None:
        """Log at level ``debug``."""
        self.log("debug", event, **fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log at level ``info``."""
        self.log("info", event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log at level ``warning``."""
        self.log("warning", event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log at level ``error``."""
        self.log("error", event, **fields)
