"""Members this person has verified (compared a safety number with, out of band).

``DATA_DIR/members/verified.json`` (mode 0600): member id -> the display name it
had when verified. A verified member is marked in ``/members``; a member who
shows up with the same name under another key (another id) while the verified one
is known (or with a name that looks like it, or renames itself so) is a loud warning:
it may be an impostor, or the same person's new device.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from app.members.private_file import write_private
from app.names import confusable

__all__ = ["Verified"]


class Verified:
    """The verified members of one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "members" / "verified.json"
        self._ids: dict[str, str] = {}
        with contextlib.suppress(FileNotFoundError, ValueError):
            doc = json.loads(self.path.read_bytes())
            self._ids = {str(k): str(v) for k, v in doc.get("verified", {}).items()}

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._ids

    def mark(self, member_id: str, name: str) -> None:
        """Remember ``member_id`` (shown as ``name``) as verified."""
        self._ids[member_id] = name
        write_private(self.path, json.dumps({"version": 1, "verified": self._ids}).encode())

    def impersonated(self, member_id: str, name: str) -> str | None:
        """The verified id whose name ``name`` is or looks like (:func:`app.names.confusable`),
    when ``member_id`` is not it."""
        if member_id in self._ids:
            return None
        for vid, vname in self._ids.items():
            if confusable(vname, name):  # the same name, or one that looks like it
                return vid
        return None
