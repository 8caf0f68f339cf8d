"""Which channel names a command may make: a channel new to this data directory gets the
stricter rule of :func:`app.names.check_new_channel_name`; one joined or known before
keeps working under its name, whatever it is."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from app.members import secrets_file as members_file
from app.names import check_new_channel_name

if TYPE_CHECKING:
    from app.node.runtime import Node

__all__ = ["check_new_channel", "known_here"]


async def known_here(node: Node, channel: str, joined: Collection[str] = ()) -> bool:
    """Whether ``channel`` is joined, or was joined before, in ``node``'s data directory
    (its log, or a members channel's keys)."""
    if channel in joined or channel in node.channels:
        return True
    if await node.store.get_channel(channel) is not None:
        return True
    return members_file.members_file(node.store.data_dir, channel).exists()


async def check_new_channel(node: Node, channel: str, joined: Collection[str] = ()) -> None:
    """Refuse a name a new channel may not have (ValueError saying why); nothing for a
    channel known here."""
    if not await known_here(node, channel, joined):
        check_new_channel_name(channel)
