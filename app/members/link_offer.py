"""The old device's side of a link, run: what ``/link`` and ``sdschat link`` carry out.

:func:`offer_link` makes a code (``4821-tiger-river``), shows it (``on_code``), waits
over the relays for the new device (app/members/link_relay.py), hands over what the new
device needs (app/members/link_handover.py) and, once the new device said done, keeps
the signed add in the person's device log (``members/devices.json``,
app/members/person_file.py). A device that never linked another holds no log yet: its
identity key becomes the person's root and first device, with a genesis naming a fresh
recovery key whose 24 words come back with the result, to be shown once. Until the
link is done nothing is written: a wrong, expired or interrupted link leaves the data
directory as it was.

It reads the data directory's files and takes no lock, so it runs inside a running
node (``/link``) or beside one (``sdschat link``).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.members import person_file
from app.members.devices import decode_entry
from app.members.link import LinkCode, LinkOffer, new_link_code
from app.members.link_handover import gather
from app.members.link_relay import run_side
from net.identity import Identity, sender_id_for

__all__ = ["Linked", "default_device_name", "link_hint", "offer_link", "recovery_text"]


@dataclass(frozen=True, slots=True)
class Linked:
    """A link done: the new device's id and name, the six digits both screens showed,
    and the recovery words when this link made the person's device log (else "")."""

    device_id: str
    device_name: str
    recovery_words: str
    sas: str


def default_device_name() -> str:
    """This machine's host name as a device name (one word), else ``device``."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "", socket.gethostname().split(".")[0])[:32]
    return name or "device"


def link_hint(code: LinkCode | str) -> str:
    """What to type on the new device."""
    return (f"On the new device type: sdschat join --link {code} [--data-dir NEW] "
            "[--relay URL] (good for 10 minutes, one try)")  # fmt: skip


def recovery_text(words: str) -> str:
    """The recovery words, said once."""
    return ("Your recovery words (shown this once: write them down and keep them "
            "offline; they revoke a lost device when no other is left):\n  " + words)


async def offer_link(data_dir: Path, identity: Identity, relays: Sequence[str], *,
                     on_code: Callable[[LinkCode], None],
                     on_sas: Callable[[str], None] | None = None,
                     device_name: str | None = None) -> Linked:  # fmt: skip
    """Link a new device to the person ``identity`` is a device of (see the module
    docstring).

    Raises:
        LinkFailed: the link did not happen (nothing was written).
        ValueError: no relay to link through, an unusable device log
            (``PersonFileError``), or too much to hand over (``HandoverError``): the
            message says what to do.
    """
    if not relays:
        raise ValueError("linking a device needs a relay both devices reach (this node "
                         "uses the LAN only): start with --relay URL")  # fmt: skip
    log, words = person_file.own_log(data_dir, identity, device_name or default_device_name())
    payload = await asyncio.to_thread(gather, data_dir)
    code = new_link_code()
    offer = LinkOffer(code, identity, log, payload, time.time_ns() // 1_000_000)
    on_code(code)
    await run_side(offer, relays, on_sas=on_sas)
    assert offer.add is not None and offer.new_device is not None
    entry = decode_entry(offer.add)
    assert not isinstance(entry, str)
    log.take(entry)
    await asyncio.to_thread(person_file.save, data_dir, log)
    return Linked(sender_id_for(offer.new_device), offer.new_name, words, offer.sas or "")
