"""A thief's view of a members channel's Megolm state: what its exported sessions open,
tried with vodozemac itself (none of GroupKeys' own checks)."""

from __future__ import annotations

import json

import vodozemac

from app.members.group_keys import GroupKeys

PICKLE_KEY = bytes(32)


def stolen_opens(g: GroupKeys, sent: list[tuple[str, bytes]]) -> list[int]:
    """Which of ``sent`` ((session id, Megolm bytes), in order) open with the sessions
    ``g`` writes to its data directory: their positions in ``sent``."""
    doc = json.loads(g.export(PICKLE_KEY))
    sessions = [vodozemac.InboundGroupSession.from_pickle(e["pickle"], PICKLE_KEY)
                for e in doc["in"]]  # fmt: skip
    opened = []
    for i, (_sid, data) in enumerate(sent):
        for session in sessions:
            try:
                session.decrypt(vodozemac.MegolmMessage.from_bytes(data))
            except Exception:
                continue
            opened.append(i)
            break
    return opened
