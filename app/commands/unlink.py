"""``/unlink DEVICE``: revoke another device of yours (issue 40 §3), TUI and headless.

``DEVICE`` is a device's name as ``/link`` gave it (``laptop``) or the start of its id
(at least 4 hex characters). This device signs a revocation naming the log's current
heads (:func:`app.members.devices.make_revoke`), takes it into the person's log, keeps the
log (``members/devices.json``, :mod:`app.members.person_file`) and sends it to every
public and passphrase channel (:meth:`app.node.device_glue.DeviceGlue.reload`). Every
member who folds it stops showing the revoked device's lines as yours (they show under
the name they claim, with their own fingerprint); a revoked key never comes back; what
the revoked device signs later, building on the revocation or concurrently with it, does
not count (docs/members.md, "The device log").

In members channels and DMs the revoked device is then removed by this device (a
person unlinks its own device without being an admin) with new epoch keys for the others
(app/node/device_members.py): it opens nothing sent afterwards. What it cannot do (said
in the answer and in docs/members.md): a passphrase or public channel's key is the
passphrase's, so the revoked device still reads and writes those channels until they move
to a new passphrase.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.members import person_file
from app.members.devices import Device, PersonLog, decode_entry, make_revoke
from app.node.events import Info
from net.identity import Identity

if TYPE_CHECKING:
    from app.commands.front import FrontEnd

__all__ = ["choose_device", "revoke_device", "unlink"]

MIN_ID_PREFIX = 4


def choose_device(log: PersonLog, own_id: str, which: str) -> Device:
    """The current device ``which`` names (its name, or the start of its id).

    Raises:
        ValueError: nothing or several match, or it names this device.
    """
    which = which.strip()
    if not which:
        raise ValueError("usage: /unlink DEVICE (a device's name or the start of its id)")
    devices = log.devices()
    named = [d for d in devices if d.name == which]
    if not named and len(which) >= MIN_ID_PREFIX:
        named = [d for d in devices if d.device_id.startswith(which.lower())]
    others = ", ".join(f"{d.name} ({d.device_id[:8]})" for d in devices
                       if d.device_id != own_id) or "none"  # fmt: skip
    if not named:
        raise ValueError(f"no device of yours is called {which!r}; your other devices: "
                         f"{others}")  # fmt: skip
    if len(named) > 1:
        raise ValueError(f"{which!r} names {len(named)} devices: "
                         + ", ".join(f"{d.name} ({d.device_id[:8]})" for d in named)
                         + "; give the start of its id")  # fmt: skip
    if named[0].device_id == own_id:
        raise ValueError("this is the device you are typing on: unlink it from another of "
                         f"your devices (your other devices: {others})")  # fmt: skip
    return named[0]


def revoke_device(log: PersonLog, identity: Identity, device: Device) -> None:
    """Sign the revocation of ``device`` with this device's key and take it into ``log``.

    Raises:
        ValueError: the log did not take it (this device may no longer sign for the person).
    """
    raw = make_revoke(log.root, identity, log.heads, device.key)
    entry = decode_entry(raw)
    if isinstance(entry, str):
        raise ValueError(f"the revocation could not be made ({entry})")
    why = log.take(entry)
    if why or log.is_device(device.key):
        raise ValueError(f"the revocation does not count ({why or 'still a device'}): is this "
                         "device itself still one of yours?")  # fmt: skip


async def unlink(fe: FrontEnd, name: str, arg: str) -> None:
    """``/unlink DEVICE`` (see the module docstring)."""
    node = fe.node
    data_dir = node.store.data_dir
    try:
        log = await asyncio.to_thread(person_file.load, data_dir)
    except person_file.PersonFileError as exc:
        raise ValueError(str(exc)) from None
    if log is None or len(log.devices()) < 2:
        raise ValueError("this device has no other devices to unlink (/link adds one)")
    device = choose_device(log, node.sender_id, arg)
    revoke_device(log, node.identity, device)
    await asyncio.to_thread(person_file.save, data_dir, log)
    await node.devices.reload()  # the log with the revocation goes to every channel
    fe.report(Info(
        f"unlinked {device.name} ({device.device_id[:12]}): the others stop showing its lines "
        "as yours once they have the new device log; your members channels and DMs get new "
        "keys without it. It still holds the passphrase of your passphrase channels: move "
        "them to a new passphrase to shut it out of them.",
        data={"unlinked": device.device_id, "device_name": device.name}))  # fmt: skip
