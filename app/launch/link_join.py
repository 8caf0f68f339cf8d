"""``sdschat join --link CODE [--data-dir NEW]``: the new device's side of a link, before
the front end starts.

The code is checked first (a mistyped one: exit 2, nothing done). ``NEW`` must be a
data directory that does not exist yet or is empty (a device links once, into a
directory of its own). The device makes its own key in memory, runs the link over the
relays (``--relay``, else the config file's: the old device's relay, which the code
does not name) and, once the old device's hand-over checked out
(app/members/link.py), writes the new data directory whole, beside and then renamed
into place (app/members/link_handover.py): the key, the person's device log with this
device in it, and what the old device handed over. A failed link writes nothing
(exit 8, :data:`~app.launch.exits.EXIT_LINK`).

Then the start goes on as ``sdschat join`` without a channel: the last setup handed
over (its channels, DMs, relays and store peers; ``--relay`` and ``--store`` still
choose), under the person's display name unless ``--name`` gives another. The history
comes from peers and the store peer like any catch-up.

Headless mode reports on stdout: ``{"event": "link", "state": "sas", ...}`` (the six
digits both screens show), then ``"linked"`` or ``"failed"`` (with ``reason`` and
``text``); the TUI says the same on stderr before it opens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nacl.public import PrivateKey

from app.launch.exits import EXIT_LINK, EXIT_USAGE
from app.members import person_file
from app.members.link import LinkError, LinkJoin, parse_link_code
from app.members.link_handover import HandoverError, install, parse
from app.members.link_offer import default_device_name
from app.members.link_relay import LinkFailed, run_side
from net.identity import Identity

__all__ = ["link_new_device"]


def _say(args: argparse.Namespace) -> Callable[[dict[str, Any]], None]:
    def say(event: dict[str, Any]) -> None:
        if args.headless:
            print(json.dumps({"event": "link", **event}), flush=True)
        else:
            print(f"sdschat: {event['text']}", file=sys.stderr, flush=True)

    return say


def _relays(args: argparse.Namespace) -> list[str]:
    if args.relay:
        return list(args.relay)
    from app.launch.settings import default_config_path, load_config_file

    path = Path(args.config) if args.config else default_config_path()
    if args.no_config or not path.is_file():
        return []
    relay = load_config_file(path).get("relay")
    return [relay] if isinstance(relay, str) else list(relay or [])


def link_new_device(args: argparse.Namespace) -> int | None:
    """Link this new device (``args.link``); ``None`` when it is linked and ``args``
    say to start from the setup handed over, else the exit status (said why)."""
    from app.launch.data_dir import default_data_dir
    from app.names import check_nick

    say = _say(args)

    def fail(reason: str, text: str, status: int) -> int:
        if args.headless:
            say({"state": "failed", "reason": reason, "text": text})
        print(f"sdschat join: {text}", file=sys.stderr, flush=True)
        return status

    if args.channel is not None or args.invite or args.create or args.extra_channels:
        return fail("usage", "--link takes no channel, --invite, --create or --channel: the "
                    "channels come from the other device", EXIT_USAGE)  # fmt: skip
    try:
        code = parse_link_code(args.link)
        name = check_nick(args.device_name) if args.device_name else default_device_name()
        relays = _relays(args)
    except (LinkError, ValueError) as exc:
        return fail("usage", str(exc), EXIT_USAGE)
    target = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        return fail("usage", f"{target} is already a data directory: a device links into a "
                    "new one (--data-dir NEW)", EXIT_USAGE)  # fmt: skip
    if not relays:
        return fail("usage", "--link needs the relay the other device uses: --relay URL "
                    "(or 'relay' in the config file)", EXIT_USAGE)  # fmt: skip
    device = Identity.generate()
    share = PrivateKey.generate()  # this device's own share key in every members channel
    join = LinkJoin(code, device, name, _now_ms(), bytes(share.public_key))

    def sas(digits: str) -> None:
        say({"state": "sas", "sas": digits,
             "text": f"linking: both screens show {digits}"})  # fmt: skip

    try:
        asyncio.run(run_side(join, relays, on_sas=sas))
        assert join.log is not None
        handover = parse(join.payload)
        install(handover, target, device.sender_id,
                {"identity.pem": device.to_pem(),
                 person_file.PERSON_FILE: person_file.encode(join.log)},
                share_secret=bytes(share))  # fmt: skip
    except LinkFailed as exc:
        return fail(exc.reason, str(exc), EXIT_LINK)
    except HandoverError as exc:
        return fail("handover", f"{exc}; nothing was written", EXIT_LINK)
    except KeyboardInterrupt:
        return fail("interrupted", "interrupted: nothing was linked or written", EXIT_LINK)
    channels = handover.channels
    say({"state": "linked", "device": device.sender_id, "device_name": name,
         "root": join.log.root_id, "channels": channels,
         "text": f"linked as {name}, a device of {handover.name or 'yours'}: "
                 f"{len(channels)} channels handed over into {target}"})  # fmt: skip
    args.data_dir = str(target)
    args.link = None  # from here a start of the setup handed over
    if args.name is None and handover.name:
        args.name = handover.name
    if not channels:
        print("sdschat join: linked; the other device had no channel to hand over. Join "
              f"one with: sdschat join CHANNEL --data-dir {target}", file=sys.stderr)
        return 0
    return None


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
