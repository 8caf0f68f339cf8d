"""Our person's devices as members of our members channels and DMs (issue 40 §1, §3):
:class:`DeviceMembers`.

In a members channel a device of a person is a member that speaks as the person (the
chain's ``add_device``, app/members/resolve.py): its lines are shown as the person's,
keys are sealed and shared to it like to any member, and its person's removal removes
it. This part makes the chain follow our person's device log
(``members/devices.json``), in every members channel and DM where this device is a
member speaking for that person:

* a current device of the log that the channel never had as a member, whose add named
  its share key, is added (``add_device``, signed by this device, with the device's
  proof of possession from the log). Two devices of the person may both post it: the
  second is refused (``already_member``), harmlessly. A device that was a member once
  (unlinked, removed by an admin, or removed with its person) is not added again: an
  admin's removal of a device stands; link the device anew to bring it back;
* a device of our person in the channel that the log revokes (``/unlink`` here, or a
  revocation folded from another device) is removed with new epoch keys for the
  others (a sibling may remove it without being an admin), so the unlinked device opens
  nothing sent afterwards.

It runs when our log is read or changes (:meth:`reconcile`, from
:class:`~app.node.device_glue.DeviceGlue`) and when a members channel is joined or
resumed (:meth:`on_event`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from app.members.devices import PersonLog
from app.members.events import MemberInfo
from app.node.events import ChannelJoined, NodeError, NodeEvent

if TYPE_CHECKING:
    from app.members.channel import MembersChannel
    from app.node.context import NodeContext

__all__ = ["DeviceMembers"]


class DeviceMembers:
    """Adds our person's devices to our members channels and removes the revoked ones.

    Args:
        channels: the members channels by name (the members part's live dict).
        own_log: our person's device log (``None``: a person of one device).
        post: posts a control content into a members channel.
        remove: removes a member (``MembersGlue.remove_member``).
    """

    def __init__(self, ctx: NodeContext, channels: dict[str, MembersChannel], *,
                 own_log: Callable[[], PersonLog | None],
                 post: Callable[[str, bytes], Awaitable[int]],
                 remove: Callable[[str, str], Awaitable[None]]) -> None:  # fmt: skip
        self._ctx = ctx
        self._channels = channels
        self._own_log = own_log
        self._post = post
        self._remove = remove
        self._asked: set[tuple[str, str, str]] = set()
        """(channel, device id, add or remove) asked this run (not asked twice)."""
        self._tasks: set[asyncio.Task[None]] = set()

    def on_event(self, ev: NodeEvent) -> None:
        if isinstance(ev, ChannelJoined) and ev.channel in self._channels:
            self.reconcile(ev.channel)

    def reconcile(self, only: str | None = None) -> None:
        """Bring every members channel (or ``only``) in line with our log (see the module)."""
        log = self._own_log()
        if log is None:
            return
        for name, mc in list(self._channels.items()):
            if only is None or name == only:
                self._one(name, mc, log)

    def _one(self, channel: str, mc: MembersChannel, log: PersonLog) -> None:
        roster, own = mc.roster, self._ctx.sender_id
        root_id = log.root_id
        if not roster.chained or not roster.is_member(own) or roster.person_of(own) != root_id:
            return
        revoked = log.revoked_ids()
        for member in roster.devices_of(root_id):
            mid = member.member_id
            if mid in revoked and mid != own:
                self._ask(channel, mid, "removed", partial(self._remove, channel, mid))
        for device in log.devices():
            did = device.device_id
            if did in (own, root_id) or roster.ever_member(did) or not device.share_key or (
                    not device.pop):  # fmt: skip
                continue
            info = MemberInfo(device.key, device.share_key, device.name)
            self._ask(channel, did, "added", partial(self._add, channel, mc, info, log.root,
                                                     device.pop))  # fmt: skip

    async def _add(self, channel: str, mc: MembersChannel, info: MemberInfo, root: bytes,
                   pop: bytes) -> None:  # fmt: skip
        await self._post(channel, mc.add_device(info, root, pop))

    def _ask(self, channel: str, device_id: str, what: str,
             job: Callable[[], Awaitable[Any]]) -> None:  # fmt: skip
        key = (channel, device_id, what)
        if key in self._asked:
            return
        self._asked.add(key)

        async def run() -> None:
            try:
                await job()
                self._ctx.counters[f"devices_{what}"] += 1
            except Exception as exc:  # the channel went away, or the chain refused it
                self._asked.discard(key)
                self._ctx.emit(NodeError(f"device {device_id[:12]} not {what} in #{channel}: "
                                         f"{exc}"))  # fmt: skip

        self._spawn(run())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
