"""``/link``: link a new device of yours from a running sdschat (TUI and headless).

The link runs beside the node (app/members/link_offer.py: its own relay connection on
the code's rendezvous topic, the data directory's files read as they are), so typing
goes on meanwhile. What it does is reported as :class:`~app.node.events.LinkEvent`:
``offered`` with the code at once (headless: ``{"event": "link", "state": "offered",
"code": "4821-tiger-river", ...}``; the TUI opens a dialog with the code and its QR
code), ``sas`` when the new device answered, then ``linked`` or ``failed``. One link
at a time per node; the link is given up with the node.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.members.link_handover import HandoverError
from app.members.link_offer import link_hint, offer_link, recovery_text
from app.members.link_relay import LinkFailed
from app.members.person_file import PersonFileError
from app.node.events import LinkEvent

if TYPE_CHECKING:
    from app.commands.front import FrontEnd
    from app.members.link import LinkCode

__all__ = ["link"]

_UNDER_WAY: dict[int, asyncio.Task[None]] = {}
"""id(node) -> its link under way."""


async def link(fe: FrontEnd, name: str, arg: str) -> None:
    """``/link``: a code for a new device (see the module docstring)."""
    node = fe.node
    running = _UNDER_WAY.get(id(node))
    if running is not None and not running.done():
        raise ValueError("a link is under way already: type its code into the new device "
                         "(or wait until it expires)")  # fmt: skip
    relays = list(fe.relays)
    if not relays:
        raise ValueError("linking a device needs a relay both devices reach (this sdschat "
                         "uses the LAN only): start it with --relay URL")  # fmt: skip
    report = fe.report
    shown: list[str] = []

    def offered(code: LinkCode) -> None:
        shown.append(str(code))
        report(LinkEvent("offered", str(code), f"link code {code}. {link_hint(code)}"))

    def sas(digits: str) -> None:
        report(LinkEvent("sas", shown[0] if shown else "", f"linking: both screens show "
                         f"{digits}", sas=digits))  # fmt: skip

    async def run() -> None:
        code = ""
        try:
            done = await offer_link(node.store.data_dir, node.identity, relays,
                                    on_code=offered, on_sas=sas)  # fmt: skip
            code = shown[0]
            await node.devices.reload()  # the new log goes to every channel (device_glue)
            text = f"linked {done.device_name} ({done.device_id[:12]}) as a device of yours"
            if done.recovery_words:
                text += ". " + recovery_text(done.recovery_words)
            report(LinkEvent("linked", code, text, sas=done.sas, device=done.device_id,
                             device_name=done.device_name,
                             recovery_words=done.recovery_words))  # fmt: skip
        except LinkFailed as exc:
            report(LinkEvent("failed", shown[0] if shown else code, str(exc),
                             reason=exc.reason))  # fmt: skip
        except (ValueError, HandoverError, PersonFileError, OSError) as exc:
            report(LinkEvent("failed", shown[0] if shown else code, f"cannot link: {exc}",
                             reason="error"))  # fmt: skip

    task = asyncio.get_running_loop().create_task(run(), name="link")
    _UNDER_WAY[id(node)] = task
    task.add_done_callback(lambda t: _UNDER_WAY.pop(id(node), None)
                           if _UNDER_WAY.get(id(node)) is t else None)  # fmt: skip
    await asyncio.sleep(0)  # let it start: the code shows before the next line is read
