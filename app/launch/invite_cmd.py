"""``sdschat invite CHANNEL --data-dir DIR``: an invite code from the command line.

The code is written to the data directory's invite book
(``members/invites.json``); the node of that data directory answers the newcomer
while it runs (a running node picks the new invite up within a few seconds; one
started later answers too). Prints the code on stdout, one line; errors are one
line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.commands.members import parse_ttl
from app.members import secrets_file
from app.members.invite import DEFAULT_TTL_MS, encode_invite, make_invite
from app.members.invites import InviteBook
from net.identity import Identity, IdentityFileError

__all__ = ["add_invite_arguments", "run_invite"]


def add_invite_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="a members channel of this data directory")
    p.add_argument("--data-dir", default=None,
                   help="the admin's data directory (default ~/.local/share/sdschat)")  # fmt: skip
    p.add_argument("--relay", action="append", default=[], metavar="URL",
                   help="relay URL(s) the newcomer should use (repeatable; none: LAN)")  # fmt: skip
    p.add_argument("--ttl", default=None, metavar="TIME",
                   help="how long the code is valid (30m, 2h, 7d; default 24h)")  # fmt: skip


def run_invite(args: argparse.Namespace) -> int:
    from app.launch.data_dir import default_data_dir
    from app.names import channel_arg

    def fail(text: str) -> int:
        print(f"sdschat invite: {text}", file=sys.stderr)
        return 2

    try:
        channel = channel_arg(args.channel)
        ttl = parse_ttl(args.ttl) if args.ttl else DEFAULT_TTL_MS
        data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
        mc = secrets_file.load(data_dir, channel)
        if mc is None:
            return fail(f"#{channel} is not a members channel in {data_dir}")
        key_file = data_dir / "identity.pem"
        if not key_file.exists():
            return fail(f"no identity in {data_dir}")
        identity = Identity.load_or_create(key_file)
        if not mc.roster.is_admin(identity.sender_id):
            return fail(f"you are not an admin of #{channel}; ask one for an invite")
        invite = make_invite(channel, mc.channel_id, tuple(args.relay),
                             now_ms=int(time.time() * 1000), ttl_ms=ttl)  # fmt: skip
        InviteBook(data_dir).add(invite)
    except (ValueError, IdentityFileError, secrets_file.MembersFileError, OSError) as exc:
        return fail(str(exc))
    print(encode_invite(invite))
    print(f"the node of {data_dir} answers this code while it runs; valid until "
          f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(invite.expires_ms / 1000))}",
          file=sys.stderr)  # fmt: skip
    return 0
