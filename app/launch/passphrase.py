"""``--passphrase-file``: a passphrase channel's passphrase read from a file."""

from __future__ import annotations

from pathlib import Path

from app import AppError

__all__ = ["MAX_PASSPHRASE_FILE", "PassphraseFileError", "read_passphrase_file"]

MAX_PASSPHRASE_FILE = 64 * 1024


class PassphraseFileError(AppError, ValueError):
    """The passphrase file cannot be used."""


def read_passphrase_file(path: str | Path) -> bytes:
    """The passphrase: the file's first line, without its line ending.

    Raises:
        PassphraseFileError: unreadable, too large, or an empty first line.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_PASSPHRASE_FILE + 1)
    except OSError as exc:
        raise PassphraseFileError(
            f"cannot read passphrase file {p}: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_PASSPHRASE_FILE:
        raise PassphraseFileError(f"passphrase file {p} is larger than 64 KiB")
    first = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not first:
        raise PassphraseFileError(
            f"passphrase file {p} is empty (omit --passphrase-file for a PUBLIC channel)"
        )
    return first
