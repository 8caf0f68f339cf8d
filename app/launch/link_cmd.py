"""``sdschat link --data-dir DIR``: link a new device from the command line.

Runs :func:`app.members.link_offer.offer_link` for the data directory's device (beside
a running node of it, too: it reads the files and takes no lock). Prints the code on
the first line of stdout, then a QR code of it and what to type on the new device, the
six digits both screens show once the other device answered, and the result. Exit
status 0 linked, 2 usage, 8 the link did not happen
(:data:`~app.launch.exits.EXIT_LINK`; nothing was changed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.launch.exits import EXIT_LINK, EXIT_USAGE

if TYPE_CHECKING:
    from app.members.link import LinkCode

__all__ = ["add_link_arguments", "link_relays", "run_link"]


def add_link_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None,
                   help="this device's data directory (default ~/.local/share/sdschat)")
    p.add_argument("--relay", action="append", default=None, metavar="URL",
                   help="relay to link through (repeatable; default: the last run's, else "
                   "the config file's)")
    p.add_argument("--device-name", default=None, metavar="NAME",
                   help="this device's name in your device list, the first time you link "
                   "(default: the host name)")  # fmt: skip


def link_relays(args: argparse.Namespace, data_dir: Path) -> list[str]:
    """The relays to link through: ``--relay``, else the last run's, else the config
    file's."""
    if args.relay:
        return list(args.relay)
    from app.launch.last_setup import load_setup

    last = load_setup(data_dir)
    if last.relays:
        return list(last.relays)
    from app.launch.settings import default_config_path, load_config_file

    path = default_config_path()
    relay = load_config_file(path).get("relay") if path.is_file() else None
    return [relay] if isinstance(relay, str) else list(relay or [])


def run_link(args: argparse.Namespace) -> int:
    """``sdschat link``."""
    import asyncio

    from app.launch.data_dir import default_data_dir
    from app.members import person_file
    from app.members.link_handover import HandoverError
    from app.members.link_offer import link_hint, offer_link, recovery_text
    from app.members.link_relay import LinkFailed
    from app.members.qr import qr_lines
    from app.names import check_nick
    from net.identity import Identity, IdentityFileError

    def fail(text: str, status: int = EXIT_USAGE) -> int:
        print(f"sdschat link: {text}", file=sys.stderr)
        return status

    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    key_file = data_dir / "identity.pem"
    try:
        if args.device_name is not None:
            args.device_name = check_nick(args.device_name)
        if not key_file.exists():
            return fail(f"no identity in {data_dir}: set this device up first (sdschat join)")
        identity = Identity.load(key_file)
        relays = link_relays(args, data_dir)
    except (ValueError, IdentityFileError, OSError) as exc:
        return fail(str(exc))

    def shown(code: LinkCode) -> None:
        print(code, flush=True)
        for line in qr_lines(str(code)):
            print("  " + line)
        print(link_hint(code), flush=True)

    def sas(digits: str) -> None:
        print(f"both screens show: {digits}", flush=True)

    try:
        linked = asyncio.run(offer_link(data_dir, identity, relays, on_code=shown, on_sas=sas,
                                        device_name=args.device_name))  # fmt: skip
    except LinkFailed as exc:
        return fail(str(exc), EXIT_LINK)
    except (ValueError, HandoverError, person_file.PersonFileError, OSError) as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted: nothing was linked or changed", EXIT_LINK)
    print(f"linked {linked.device_name} ({linked.device_id[:12]}) as a device of yours",
          flush=True)  # fmt: skip
    if linked.recovery_words:
        print(recovery_text(linked.recovery_words), flush=True)
    return 0
